// A speed probe, not engine code (nvcc -O2 -arch=sm_90 bench/l2_probe.cu -o l2_probe on the GPU machine): does asking
// L2 for a 32 MiB matrix ahead of its read make that read an L2 read? It times one grid-stride read of A (16-byte
// non-coherent loads, as the decode GEMVs load weights) with events, each time after a 512 MiB read that pushes A out
// of L2 and a ~60 us spin, with in between: nothing (cold), a read of A (warm), or one of the L2 prefetch forms the
// engine has tried for the decode GEMVs (sm_90's bulk prefetch in 8 KiB and 64 KiB pieces, prefetch.global.L2 per
// 128-byte line, plain and evict_last). Best and mean of 20 each; bench/README.md, "L2 prefetch", has a run.
#include <cstdint>
#include <cstdio>

#include <cuda_runtime.h>

#define CK(x)                                                                                                      \
    do {                                                                                                           \
        cudaError_t e_ = (x);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                   \
            printf("%s failed at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_));                    \
            return 2;                                                                                              \
        }                                                                                                          \
    } while (0)

__device__ __forceinline__ uint4 ldnc(const uint4 *p)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

// Every 16 bytes of a[0, n) once; the folded bits are stored only if they equal a constant (they do not here).
__global__ void rd(const uint4 *a, size_t n, unsigned *out)
{
    unsigned s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = ldnc(a + i);
        s ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (s == 0x12345678u)
        out[0] = s;
}

__global__ void pf_bulk(const char *a, size_t bytes, unsigned piece)
{
    const size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * piece;
    if (i < bytes)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a + i), "r"(piece) : "memory");
}

template <bool EL> __global__ void pf_line(const char *a, size_t bytes)
{
    for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 128; i < bytes;
         i += (size_t)gridDim.x * blockDim.x * 128) {
        if (EL)
            asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(a + i));
        else
            asm volatile("prefetch.global.L2 [%0];" ::"l"(a + i));
    }
}

__global__ void spin(long long cycles)
{
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

int main()
{
    const size_t A = 32u << 20, F = 512u << 20;
    char *a = nullptr, *f = nullptr;
    unsigned *out = nullptr;
    CK(cudaMalloc(&a, A));
    CK(cudaMalloc(&f, F));
    CK(cudaMalloc(&out, 4));
    CK(cudaMemset(a, 1, A));
    CK(cudaMemset(f, 2, F));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const char *names[] = {"cold (flushed)", "warm (A read just before)", "bulk prefetch, 8 KiB pieces",
                           "bulk prefetch, 64 KiB pieces", "prefetch.global.L2 per 128 B",
                           "prefetch.global.L2::evict_last per 128 B"};
    for (int mode = 0; mode < 6; mode++) {
        float best = 1e9f, sum = 0.0f;
        const int reps = 20;
        for (int r = 0; r < reps; r++) {
            rd<<<sms * 8, 256>>>((const uint4 *)f, F / 16, out);
            if (mode == 1)
                rd<<<sms * 8, 256>>>((const uint4 *)a, A / 16, out);
            if (mode == 2 || mode == 3) {
                const unsigned piece = mode == 2 ? 8192u : 65536u;
                pf_bulk<<<(unsigned)((A / piece + 255) / 256), 256>>>(a, A, piece);
            }
            if (mode == 4)
                pf_line<false><<<sms * 4, 256>>>(a, A);
            if (mode == 5)
                pf_line<true><<<sms * 4, 256>>>(a, A);
            spin<<<1, 32>>>(120000LL); // ~60 us at ~2 GHz: every prefetch has had its time
            CK(cudaEventRecord(e0));
            rd<<<sms * 8, 256>>>((const uint4 *)a, A / 16, out);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms = 0.0f;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            best = ms < best ? ms : best;
            sum += ms;
        }
        printf("read of 32 MiB after %-42s best %6.2f us, mean %6.2f us (%.0f GB/s at the best)\n", names[mode],
               best * 1e3f, sum / reps * 1e3f, A / (best * 1e-3) / 1e9);
    }
    return 0;
}
