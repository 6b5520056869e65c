/* The one read-only kernel (engine bench's read ceiling, the kernel benchmarks' ceilings and their plain reads of a
 * matrix's bytes): 16-byte non-coherent loads, every SM full, the XOR of what was read kept live so the loads
 * cannot be dropped (see eng_bw.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "eng_bw.h"

__global__ void read_pass(const uint4 *__restrict__ p, size_t n, unsigned *sink)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = __ldg(p + i), b = __ldg(p + i + stride), c = __ldg(p + i + 2 * stride), d = __ldg(p + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) {
        uint4 a = __ldg(p + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) /* practically never true; the compiler cannot know */
        *sink = acc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

extern "C" cudaError_t engk_read_launch(const void *p, size_t bytes, void *sink, cudaStream_t s)
{
    int dev = 0, sms = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (err != cudaSuccess)
        return err;
    if (bytes < 16 || bytes % 16)
        return cudaErrorInvalidValue;
    const int threads = 256, blocks = (sms > 0 ? sms : 1) * 8; /* 2048 threads per SM */
    read_pass<<<blocks, threads, 0, s>>>((const uint4 *)p, bytes / 16, (unsigned *)sink);
    return cudaGetLastError();
}

#define TRY(call)                                                                                                  \
    do {                                                                                                           \
        if (err == cudaSuccess && (err = (call)) != cudaSuccess)                                                   \
            *what = #call;                                                                                         \
    } while (0)

extern "C" cudaError_t engk_read_bandwidth(int device, size_t bytes, int reps, double *best_bps,
                                           double *median_bps, const char **what)
{
    cudaError_t err = cudaSuccess;
    void *buf = NULL;
    unsigned *sink = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    bytes &= ~(size_t)63;
    if (reps < 1 || reps > 64)
        reps = 10;
    double sec[64];
    *what = "";
    TRY(cudaSetDevice(device));
    TRY(cudaMalloc(&buf, bytes));
    TRY(cudaMalloc((void **)&sink, sizeof *sink));
    TRY(cudaMemset(buf, 0x5a, bytes));
    TRY(cudaEventCreate(&e0));
    TRY(cudaEventCreate(&e1));
    for (int r = -1; r < reps && err == cudaSuccess; r++) {
        TRY(cudaEventRecord(e0, 0));
        TRY(engk_read_launch(buf, bytes, sink, 0));
        TRY(cudaEventRecord(e1, 0));
        TRY(cudaEventSynchronize(e1));
        float ms = 0.0f;
        TRY(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0)
            sec[r] = 1e-3 * ms;
    }
    if (err == cudaSuccess) {
        qsort(sec, (size_t)reps, sizeof sec[0], cmp_double);
        *best_bps = (double)bytes / sec[0];
        *median_bps = (double)bytes / sec[reps / 2];
    }
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    cudaFree(sink);
    cudaFree(buf);
    return err;
}

extern "C" void engk_device_name(int device, char *name, size_t cap)
{
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, device) == cudaSuccess)
        snprintf(name, cap, "%s", p.name);
    else if (cap)
        name[0] = 0;
}
