/* cp.async (sm_80 and later): copies from global into shared memory that land without passing through registers.
 * The one place the engine writes this PTX: attention's K/V stages (eng_attn.cu), a fused-norm GEMV's staged norm
 * weight (norm_w_stage in eng_kdev.cuh) and the quantized GEMV's staged x (X_ASYNC in eng_qgemv_k.cuh).
 *
 * A thread's copies form groups: cpa_commit() closes the group of its copies since the last commit; cpa_wait<N>()
 * returns once at most N of its groups are still in flight (cpa_wait_all(): none). A copy is visible to the thread
 * that asked for it after that wait, and to the block's other threads only after a barrier that follows it. Every
 * asm here is a compiler memory barrier ("memory"), so no shared load is moved above a wait, nor a copy below a
 * commit. dst is an address in the shared window (smem_u32, eng_kdev.cuh). Compiled only for sm_80 and later:
 * callers guard their use by __CUDA_ARCH__. Internal linkage, as eng_kdev.cuh. */
#ifndef ENG_CPASYNC_CUH
#define ENG_CPASYNC_CUH

namespace {

/* 4 bytes through L1 (.ca: a source aligned to 4 bytes is enough) */
__device__ __forceinline__ void cpa_4(unsigned dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}

/* 16 bytes, L2 only (.cg); dst and src aligned to 16 bytes */
__device__ __forceinline__ void cpa_16(unsigned dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

/* 16 bytes, L2 only, of which the first n come from src and the rest are zero (n = 0: 16 zero bytes, src still a
 * valid address) */
__device__ __forceinline__ void cpa_16_fill(unsigned dst, const void *src, int n)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}

__device__ __forceinline__ void cpa_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N> __device__ __forceinline__ void cpa_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void cpa_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

} // namespace

#endif
