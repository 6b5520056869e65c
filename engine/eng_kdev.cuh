/* Device helpers shared by the engine's .cu files: loads, stores and the
 * reductions whose order the README fixes. Internal linkage, so each translation unit inlines its own copy. */
#ifndef ENG_KDEV_CUH
#define ENG_KDEV_CUH

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "eng_cpasync.cuh"

#if RC_TRACE
#include "eng_trace.h"
#endif

namespace {

constexpr unsigned FULL = 0xffffffffu;
constexpr int NORM_THREADS = 256;

/* p's address in the shared window, the form cp.async (eng_cpasync.cuh), ldmatrix and the mbarrier ops take */
__device__ __forceinline__ unsigned smem_u32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ float ld1(const uint16_t *p) { return __uint_as_float((unsigned)*p << 16); }
__device__ __forceinline__ float ld1(const float *p) { return *p; }

/* f rounded to bf16 bits: to nearest even, as the host; a NaN stays a (quiet) NaN. */
__device__ __forceinline__ unsigned bf16_rne(float f)
{
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
__device__ __forceinline__ void st1(uint16_t *p, float f) { *p = (uint16_t)bf16_rne(f); }
__device__ __forceinline__ void st1(float *p, float f) { *p = f; }

/* 8 consecutive elements (16-byte aligned for bf16, 32 for f32). */
__device__ __forceinline__ void load8(const uint16_t *p, float *v)
{
    const uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
    v[0] = __uint_as_float(u.x << 16); v[1] = __uint_as_float(u.x & 0xffff0000u);
    v[2] = __uint_as_float(u.y << 16); v[3] = __uint_as_float(u.y & 0xffff0000u);
    v[4] = __uint_as_float(u.z << 16); v[5] = __uint_as_float(u.z & 0xffff0000u);
    v[6] = __uint_as_float(u.w << 16); v[7] = __uint_as_float(u.w & 0xffff0000u);
}
__device__ __forceinline__ void load8(const float *p, float *v)
{
    const float4 a = __ldg(reinterpret_cast<const float4 *>(p)), b = __ldg(reinterpret_cast<const float4 *>(p + 4));
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int off = 16; off; off >>= 1)
        v += __shfl_xor_sync(FULL, v, off);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int off = 16; off; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(FULL, v, off));
    return v;
}

/* Sum over a block of NORM_THREADS: warp butterflies, then the warp partials in index order. */
__device__ __forceinline__ float block_sum(float v, float *part)
{
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < NORM_THREADS / 32; i++)
        s += part[i];
    return s;
}

__device__ __forceinline__ float inv_rms(float ss, int n, float eps)
{
    const float ms = ss / (float)n;
    return (float)(1.0 / sqrt((double)(ms + eps)));
}

/* x * inv times the weight wi as `kind` applies it (wi unread for RC_NORM_POW) */
__device__ __forceinline__ float norm_apply_w(float x, float inv, float wi, int kind)
{
    const float h = x * inv;
    switch (kind) {
    case 1: return h * (1.0f + wi); /* RC_NORM_1PW */
    case 3: return h;               /* RC_NORM_POW */
    default: return h * wi;         /* RC_NORM_W, RC_NORM_POW_W */
    }
}

/* norm_apply_w's value with w[i] read inside the cases. Written through norm_apply_w (w[i] loaded ahead of the
 * switch, c70c755), norm_row's second loop compiled to about half the weight loads per kernel (the fused-norm
 * gate|up on shape 14: 38 scalar LDGs against 74) and llama3-8b / qwen3.5-9b decode measured 4.29 / 4.64
 * ms/token against 4.05 / 4.31 before it (session 24); this form gives d186344's machine code back, kernel for
 * kernel. */
__device__ __forceinline__ float norm_apply(float x, float inv, const float *w, int i, int kind)
{
    const float h = x * inv;
    switch (kind) {
    case 1: return h * (1.0f + w[i]); /* RC_NORM_1PW */
    case 3: return h;                 /* RC_NORM_POW */
    default: return h * w[i];         /* RC_NORM_W, RC_NORM_POW_W */
    }
}

/* One warp: the RMSNorm of a head's D values u (shared) in place: lane-strided fmaf sum, butterfly, inv_rms,
 * norm_apply (qkv_post's q/k norms; the decode attention's folded qkv_post runs the same code). */
__device__ __forceinline__ void head_norm(float *u, int D, const float *nw, int kind, float eps, int lane)
{
    float ss = 0.0f;
    for (int d = lane; d < D; d += 32)
        ss = fmaf(u[d], u[d], ss);
    const float inv = inv_rms(warp_sum(ss), D, eps);
    __syncwarp();
    for (int d = lane; d < D; d += 32)
        u[d] = norm_apply(u[d], inv, nw, d, kind);
    __syncwarp();
}

/* RoPE of one pair (x1, x2) in place, as ref_rope_apply: x1 c - x2 s, x2 c + x1 s (separate products: the
 * engine's units build with -fmad=false). */
__device__ __forceinline__ void rope_rot(float &x1, float &x2, float ci, float si)
{
    const float a = x1 * ci, b = -x2 * si;
    const float a2 = x2 * ci, b2 = x1 * si;
    x1 = a + b;
    x2 = a2 + b2;
}

/* rope_rot of the pair (i, i + half) of u in place. */
__device__ __forceinline__ void rope_pair(float *u, int i, int half, float ci, float si)
{
    float x1 = u[i], x2 = u[i + half];
    rope_rot(x1, x2, ci, si);
    u[i] = x1;
    u[i + half] = x2;
}

__device__ __forceinline__ void norm_w_landed(); /* defined with norm_w_stage below */

/* norm_apply_slots' element i, normalized to v: into its slot, into xn from block 0, and into the max (MX). */
template <int MX, typename Slot>
__device__ __forceinline__ void norm_put(const Slot &slot, float *xn, int i, float v, float &mx)
{
    slot(i) = v;
    if (xn && blockIdx.x == 0)
        xn[i] = v;
    if (MX)
        mx = fmaxf(mx, fabsf(v));
    if (MX == 2 && !(fabsf(v) <= FLT_MAX))
        mx = INFINITY;
}

/* norm_apply_slots' batched form for one norm kind KIND (norm_apply_w's cases, fixed at compile time so that no
 * element branches on it): this thread's elements i = tid + m NORM_THREADS in groups of NB consecutive m, each
 * group's NB elements of the row and NB of the weight loaded into registers first (no store between them, so no
 * load waits on one), then normalized and stored; the elements past the last whole group one at a time. Every
 * element gets norm_apply_w's value, and the max is over the same values, so the same bits in any order. A group
 * stores its slots, then its xn copy, rather than norm_put per element: through norm_put, 21 kernels of eng_qgemv_i/m
 * spilled 8-40 bytes at NB 8 (int8 and affine int4 among them) against this form's 7, all symmetric int4 (sass.sh,
 * sm_90, session 43). */
template <int MX, int NB, int KIND, typename Slot>
__device__ __forceinline__ float norm_apply_batched(const Slot &slot, float *xn, const float *nw, float inv, int K)
{
    float mx = 0.0f;
    const bool put_xn = xn && blockIdx.x == 0;
    int i0 = (int)threadIdx.x;
    for (; i0 + (NB - 1) * NORM_THREADS < K; i0 += NB * NORM_THREADS) {
        float v[NB], w[NB];
#pragma unroll
        for (int j = 0; j < NB; j++) {
            v[j] = slot(i0 + j * NORM_THREADS);
            w[j] = KIND == 3 ? 0.0f : nw[i0 + j * NORM_THREADS]; /* RC_NORM_POW reads no weight (nw may be NULL) */
        }
#pragma unroll
        for (int j = 0; j < NB; j++) {
            v[j] = norm_apply_w(v[j], inv, w[j], KIND);
            slot(i0 + j * NORM_THREADS) = v[j];
            if (MX)
                mx = fmaxf(mx, fabsf(v[j]));
            if (MX == 2 && !(fabsf(v[j]) <= FLT_MAX))
                mx = INFINITY;
        }
        if (put_xn)
#pragma unroll
            for (int j = 0; j < NB; j++)
                xn[i0 + j * NORM_THREADS] = v[j];
    }
    for (int i = i0; i < K; i += NORM_THREADS)
        norm_put<MX>(slot, xn, i, norm_apply_w(slot(i), inv, KIND == 3 ? 0.0f : nw[i], KIND), mx);
    return mx;
}

/* norm_row's second loop: slot(i) = norm_apply(slot(i)), into xn too from block 0, for the first NORM_THREADS
 * threads' elements i = tid, tid + NORM_THREADS, ...; MX: also returns the max |value| over them (NaN ignored; MX 2:
 * infinity where one is not finite), else 0. NB > 1: norm_apply_batched, one copy a norm kind (norm_apply_w's
 * arithmetic: the same values, so the same bits as NB 0, one element at a time; k_qgemv_mma's NORM_APPLY_NB says
 * why). */
template <int MX, int NB = 0, typename Slot>
__device__ __forceinline__ float norm_apply_slots(const Slot &slot, float *xn, const float *nw, float inv, int kind,
                                                  int K)
{
    float mx = 0.0f;
    if constexpr (NB > 1) {
        if (threadIdx.x < NORM_THREADS)
            switch (kind) {
            case 1: mx = norm_apply_batched<MX, NB, 1>(slot, xn, nw, inv, K); break;
            case 3: mx = norm_apply_batched<MX, NB, 3>(slot, xn, nw, inv, K); break;
            default: mx = norm_apply_batched<MX, NB, 0>(slot, xn, nw, inv, K); break;
            }
    } else {
        if (threadIdx.x < NORM_THREADS)
            for (int i = threadIdx.x; i < K; i += NORM_THREADS) {
                const float v = norm_apply(slot(i), inv, nw, i, kind);
                norm_put<MX>(slot, xn, i, v, mx);
            }
    }
    return mx;
}

/* x[0:K] normalized exactly as k_rmsnorm (its first NORM_THREADS threads sum fmaf(v, v) over i = tid, tid +
 * NORM_THREADS, ... in order, block_sum over warps 0..7, inv_rms, norm_apply), each element into slot(i) (a float &
 * in the caller's shared copy of the row) and, from block 0, into xn if not NULL. STAGED: the slots already hold x
 * (the caller copied it and synced), so the sum reads them instead of x. Every thread of the block calls it
 * (block_sum syncs; part: one float per warp of the block); the caller syncs before reading the slots. LANDW: every
 * thread waits for its staged norm weight (norm_w_landed, below) after its share of the sum, before block_sum's
 * barrier, which then shows every copy to every thread before the second loop reads nw. NB: norm_apply_slots' NB. */
template <bool STAGED, bool LANDW = false, int NB = 0, typename Slot>
__device__ __forceinline__ void norm_row(const Slot &slot, float *xn, const float *x, const float *nw, float eps,
                                         int kind, int K, float *part)
{
    float ss = 0.0f;
    if (threadIdx.x < NORM_THREADS)
        for (int i = threadIdx.x; i < K; i += NORM_THREADS) {
            const float v = STAGED ? slot(i) : x[i];
            if (!STAGED)
                slot(i) = v;
            ss = fmaf(v, v, ss);
        }
    if (LANDW) /* the staged weight's copies: waited for after the sum, before block_sum's barrier */
        norm_w_landed();
    norm_apply_slots<0, NB>(slot, xn, nw, inv_rms(block_sum(ss, part), K, eps), kind, K);
}

/* 1: a fused-norm GEMV stages its norm weight in shared memory before dep_wait() (norm_w_stage); 0: norm_row reads
 * it from global memory after the wait. The same values either way, so the same bits. Measured on the H200 (session
 * 33, llama3-8b, `engine bench --prompt-len 16 --steps 32 --rounds 2 --no-stream`, alternating in one call): a
 * timing-only build whose norm reads no weight at all ran bf16 at 3.900 ms/token against 4.000 and int4 g128 with a
 * packed lm_head at 1.822 against 1.906, so the weight's loads after the wait cost ~1.5 us a fused-norm kernel (they
 * queue in DRAM behind the kernel's own weight stream); a plain copy into shared memory between dep_launch() and
 * dep_wait() gave bf16 3.945 / 3.943 against 4.000 / 4.000 but int4 1.952 against 1.906; an L1 prefetch of the row
 * lost everywhere (bf16 4.14, int4 2.04). This form copies by cp.async (no register holds the values, nothing
 * serializes on them). Measured against 0 (session 34, the same bench, alternating in one call): bf16 3.979 / 3.983
 * against 4.029 / 4.030, int8 with a packed lm_head 2.537 / 2.536 against 2.588 / 2.587, int4 g128 2.066 / 2.065
 * against 2.074 / 2.073, int4 g128 with a packed lm_head 1.910 / 1.910 against 1.906 / 1.907 (no gain there). */
#ifndef NORM_W_STAGE
#define NORM_W_STAGE 1
#endif
/* 1: a fused-norm GEMV waits for its staged norm weight inside norm_row, after the sum of squares (norm_row's LANDW),
 * so that the copies land while the sum runs; 0: before the barrier ahead of norm_row. The same values read, so the
 * same bits. Measured on the H200 (session 35, llama3-8b, `engine bench --prompt-len 16 --steps 32 --rounds 2
 * --no-stream`, scripts/gpu-ab.sh, builds alternating in one call, ms/token, two passes): bf16 3.900 / 3.899 against
 * 3.945 / 3.947 (the weightless norm's 3.900 of session 33: the weight's cost is gone); int4 g128 + packed lm_head
 * 1.884 / 1.878 against 1.883 / 1.878, int8 + packed lm_head 2.493 / 2.499 against 2.496 / 2.499 (no change).
 * Copying in 16-byte cp.async.cg pieces where aligned lost in the same call: bf16 3.968 / 3.963, 3.953 / 3.951 with
 * the late wait. */
#ifndef NW_LATE_WAIT
#define NW_LATE_WAIT 1
#endif

/* Whether norm_w_stage copies: room (the caller's shared memory has K floats for it), a weight to read (none:
 * RC_NORM_POW or a NULL row), sm_80+ and NORM_W_STAGE. A pure function of the kernel's arguments, so that the
 * kernel recomputes the row's address after the wait instead of holding it in a register across it. */
__device__ __forceinline__ bool norm_w_staged(const float *nw, int kind, bool room)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && NORM_W_STAGE
    return room && nw && kind != 3; /* RC_NORM_POW reads no weight */
#else
    (void)nw, (void)kind, (void)room;
    return false;
#endif
}

/* Stage norm_row's weight row nw[0:K] into shared memory dst[0:K] by cp.async, 4 bytes a copy (nothing asked of
 * nw's alignment), before dep_wait(): a weight, never written inside a step; nothing where !norm_w_staged. After
 * the wait norm_w_landed() runs before a block barrier that precedes norm_row's reads of the row (every thread waits
 * for its own copies; the barrier shows them to the others): norm_row's own with LANDW (NW_LATE_WAIT), else the
 * caller's; the caller gives norm_row norm_w_row()'s row. */
__device__ __forceinline__ void norm_w_stage(float *dst, const float *nw, int kind, int K, bool room)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && NORM_W_STAGE
    if (!norm_w_staged(nw, kind, room))
        return;
    const unsigned base = smem_u32(dst);
    for (int i = (int)threadIdx.x; i < K; i += (int)blockDim.x)
        cpa_4(base + 4u * (unsigned)i, nw + i);
    cpa_commit();
#else
    (void)dst, (void)nw, (void)kind, (void)K, (void)room;
#endif
}
__device__ __forceinline__ void norm_w_landed()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && NORM_W_STAGE
    cpa_wait_all();
#endif
}
/* The row norm_row reads: the staged copy dst, or nw itself where nothing was staged. */
__device__ __forceinline__ const float *norm_w_row(const float *dst, const float *nw, int kind, bool room)
{
    return norm_w_staged(nw, kind, room) ? dst : nw;
}

/* norm_row's slots in a plain shared row: element i at p[i]. */
struct SlotFlat {
    float *p;
    __device__ __forceinline__ float &operator()(int i) const { return p[i]; }
};

/* act(gate) * up of one GLU element (act: rc_act), the activation in double, rounded once. */
__device__ __forceinline__ float glu_apply(float gate, float up, int act)
{
    const double d = gate;
    float a;
    if (act == 1) /* RC_ACT_GELU_TANH */
        a = (float)(0.5 * d * (1.0 + tanh(0.7978845608028654 * (d + 0.044715 * d * d * d))));
    else
        a = (float)(d / (1.0 + exp(-d)));
    return a * up;
}

/* Programmatic dependent launch (sm_90+; no-ops before, and when the launch was not programmatic): a kernel
 * launched by launch_dep may start while the kernel before it in the stream runs; it must not read or write
 * anything those kernels touch until dep_wait() returns (they are complete, their writes visible). dep_launch()
 * lets the next programmatic kernel start (once every block of this one has called it). */
#if RC_TRACE
/* The kernel trace (eng_trace.h, meson -Dtrace=kernels|marks): this unit's pointer to the one buffer and its index. */
__device__ eng_trace_buf *trace_buf;
__device__ unsigned trace_unit_id;
int trace_attach(eng_trace_buf *buf, unsigned unit)
{
    cudaError_t err = cudaMemcpyToSymbol(trace_buf, &buf, sizeof buf);
    if (err == cudaSuccess)
        err = cudaMemcpyToSymbol(trace_unit_id, &unit, sizeof unit);
    return (int)err;
}
__attribute__((unused)) const int trace_unit = eng_trace_register(__BASE_FILE__, trace_attach);
#endif

/* The trace's note (RC_TRACE builds; nothing otherwise): thread 0 of block (0, 0, 0) notes the global timer, this
 * unit, the source line and the grid's width (which tells apart the launches of one template). */
__device__ __forceinline__ void trace_note(unsigned line)
{
#if RC_TRACE && defined(__CUDA_ARCH__)
    if ((blockIdx.x | blockIdx.y | blockIdx.z | threadIdx.x | threadIdx.y | threadIdx.z) == 0) {
        eng_trace_buf *tb = trace_buf;
        if (tb) {
            unsigned long long now;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)::"memory");
            const unsigned i = atomicAdd(&tb->n, 1u);
            if (i < ENG_TRACE_CAP) {
                tb->t[i] = now;
                tb->site[i] = trace_unit_id << 16 | line;
                tb->grid[i] = gridDim.x;
            }
        }
    }
#else
    (void)line;
#endif
}
/* a note inside a kernel (after the dep_wait's): where block 0 has got to (RC_TRACE >= 2 only: each note's atomic
 * lengthens block 0's path by a round trip to L2) */
#if RC_TRACE >= 2
#define trace_mark() trace_note(__LINE__)
#else
#define trace_mark() ((void)0)
#endif

__device__ __forceinline__ void dep_wait_at(unsigned line)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    trace_note(line);
}
#define dep_wait() dep_wait_at(__LINE__)
__device__ __forceinline__ void dep_launch()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* How many blocks of one kernel (threads a block, dynamic shared memory smem) an SM of the current device holds at
 * once, and the device's SMs, kept for the device and size they were asked for: a launcher keeps one per kernel
 * instance (a static), so its launches do not query the runtime again. A failed query keeps nothing. */
struct Held {
    int dev = -1, sms = 0, per_sm = 0;
    size_t smem = 0;
    int64_t blocks() const { return (int64_t)sms * (per_sm > 0 ? per_sm : 1); } /* at least one an SM */
};
inline cudaError_t held_blocks(const void *kern, int threads, size_t smem, Held &c)
{
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess || (dev == c.dev && smem == c.smem))
        return err;
    int sms = 0, per_sm = 0;
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (err == cudaSuccess)
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, smem);
    if (err != cudaSuccess) {
        c.dev = -1;
        return err;
    }
    c.dev = dev;
    c.sms = sms;
    c.per_sm = per_sm;
    c.smem = smem;
    return cudaSuccess;
}

/* Programmatic launches only into a graph being captured (the engine's decode step, weights resident and
 * never written inside it) on sm_90+; direct launches keep full stream order. Same kernel, same bits. */
inline bool programmatic(cudaStream_t s)
{
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    int dev = 0, major = 0;
    return cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive &&
           cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
}

/* k<<<grid, block, smem, s>>>(args...), programmatic when programmatic(s): k calls dep_wait() before it touches
 * anything the kernels before it write, so it may be scheduled while they finish (its launch latency hides). */
template <typename... KArgs, typename... Args>
cudaError_t launch_dep(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args... args)
{
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = &at;
    cfg.numAttrs = programmatic(s) ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, args...);
}

} // namespace

#endif
