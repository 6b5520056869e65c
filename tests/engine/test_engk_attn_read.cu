/* Read-bandwidth probe for the attention micro-benchmark (see test_engk_attn_read.h). */
#include "test_engk_attn_read.h"

namespace {

/* Each thread reads 4 independent 16-byte words per step, grid-strided. */
__global__ void k_read(const uint4 *p, size_t n4, unsigned *sink)
{
    unsigned acc = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            v[u] = __ldg(p + i * 4 + u);
#pragma unroll
        for (int u = 0; u < 4; u++)
            acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x9e3779b9u) /* practically never: keeps the loads live */
        sink[threadIdx.x] = acc;
}

} // namespace

extern "C" cudaError_t engk_test_read(const void *buf, size_t bytes, unsigned *sink, cudaStream_t s)
{
    int dev = 0, sms = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (err != cudaSuccess)
        return err;
    k_read<<<sms * 8, 512, 0, s>>>(static_cast<const uint4 *>(buf), bytes / 64, sink);
    return cudaGetLastError();
}
