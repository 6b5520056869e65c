/* The prefill GEMM's element-wise kernels (see eng_gemm.h): activations to bf16, bias and residual epilogue. */
#include "eng_gemm.h"

#include "eng_kdev.cuh"

namespace {

constexpr int THREADS = 256;

/* LO: the bits of bf16(f - float(bf16(f))) (the subtraction is exact in fp32), else of bf16(f). */
template <bool LO> __device__ __forceinline__ unsigned bf16_part(float f)
{
    return LO ? bf16_rne(f - __uint_as_float(bf16_rne(f) << 16)) : bf16_rne(f);
}

/* 8 elements per thread: two 16-byte loads, one 16-byte store. */
template <bool LO> __global__ void k_to_bf16(uint16_t *dst, const float *src, int64_t n8)
{
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (i >= n8)
        return;
    const float4 a = reinterpret_cast<const float4 *>(src)[2 * i], b = reinterpret_cast<const float4 *>(src)[2 * i + 1];
    uint4 o;
    o.x = bf16_part<LO>(a.x) | bf16_part<LO>(a.y) << 16;
    o.y = bf16_part<LO>(a.z) | bf16_part<LO>(a.w) << 16;
    o.z = bf16_part<LO>(b.x) | bf16_part<LO>(b.y) << 16;
    o.w = bf16_part<LO>(b.z) | bf16_part<LO>(b.w) << 16;
    reinterpret_cast<uint4 *>(dst)[i] = o;
}

template <bool LO> cudaError_t to_bf16(uint16_t *dst, const float *src, int64_t n, cudaStream_t s)
{
    if (n % 8 || n < 0)
        return cudaErrorInvalidValue;
    const int64_t n8 = n / 8;
    if (n8 > 0)
        k_to_bf16<LO><<<(unsigned)((n8 + THREADS - 1) / THREADS), THREADS, 0, s>>>(dst, src, n8);
    return cudaGetLastError();
}

/* k_matmul's epilogue order: v = acc + b, then res + v. */
__global__ void k_bias_res(float *y, const float *acc, const float *b, const float *res, int64_t total, int N)
{
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (i >= total)
        return;
    float v = acc[i] + b[i % N];
    if (res)
        v = res[i] + v;
    y[i] = v;
}

} // namespace

extern "C" {

cudaError_t engk_to_bf16(uint16_t *dst, const float *src, int64_t n, cudaStream_t s)
{
    return to_bf16<false>(dst, src, n, s);
}

cudaError_t engk_to_bf16_lo(uint16_t *dst, const float *src, int64_t n, cudaStream_t s)
{
    return to_bf16<true>(dst, src, n, s);
}

cudaError_t engk_bias_res(float *y, const float *acc, const float *b, const float *res, int M, int N, cudaStream_t s)
{
    if (M < 0 || N < 1 || !b)
        return cudaErrorInvalidValue;
    const int64_t total = (int64_t)M * N;
    if (total > 0)
        k_bias_res<<<(unsigned)((total + THREADS - 1) / THREADS), THREADS, 0, s>>>(y, acc, b, res, total, N);
    return cudaGetLastError();
}

} // extern "C"
