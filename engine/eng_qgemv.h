/* Quantized decode GEMV and the prefill dequant, on the packed matrices of eng_qfmt.h: int8 / int4 codes with a scale
 * per group (RC_QF_SCALE, w = s*q) or a scale and an offset (RC_QF_AFFINE, w = (s*q) + m), one device function per
 * family, each operation rounded on its own (docs/quantization.md). Two GEMV orders:
 * - k_qgemv / k_qgemv_s (the r* and s* variants; sm < 80, and formats k_qgemv_mma does not run): per row, lane l
 *   walks the row's 16-byte blocks l, l+32, ... in order, dequantizes each weight and accumulates fmaf(w, x, acc) from
 *   0 in k order, then the xor butterfly (whatever the kernel or launch shape); then + b, then res +. eng_qdot_model
 *   (eng_qpack.h) is its host model, bit for bit.
 * - k_qgemv_mma (the m* variants, sm_80+, int8 per row or in groups of 64 k and up, int4 in groups of 128 k and up,
 *   group / step a power of two): tensor cores (mma m16n8k16, f16 inputs, f32 accumulation) in a fixed order that
 *   eng_qdot_model does not model: x scaled by 2^-e (max |x| 2^-e in [2^14, 2^15)) and split into fp16 hi + lo
 *   (|x - (hi + lo) 2^e| <= 2^-22 |x| + 2^-39 max|x|); codes exact in fp16; per step (int4: 128 k, int8: 64 k) the
 *   MMAs from zero, v = (hi column + lo column) 2^e, acc = fma(s, v, acc) (affine: then fma(m, sum of the step's x,
 *   acc)) over the warp's steps; the split-k warps' accs summed in warp order (per row: times s); + b, then res +.
 *   Error about 2^-22 per x and a few f32 roundings of the partial sums, the MMA's own (truncating) accumulation
 *   included: expected near 2^-20 sqrt(sum (s q x)^2) (the checker's tripwire: 2^-16), the proven bound in
 *   test_engk_qgemv's mma_ref. The same bits
 *   every run, whatever the grid or N; the variant (its split-k) is fixed per shape by engk_qgemv_pick.
 *   Its integer form (the i* variants, INT): x scaled by 2^F (max |x| 2^F in [2^29, 2^30)) and rounded to an int32 X
 *   (|x - X 2^-F| <= 2^-30 max|x|), X split into four balanced int8 digits (B columns 0..3); the codes as int8 (int4:
 *   16 times the nibble, u8 for the affine family); per step mma.sync.m16n8k32 gives each digit's sum exactly in
 *   int32; lane t = 0 takes digits 0, 1 (c0 + 256 c1), t = 1 digits 2, 3, each rounded once to f32, acc = fma(s, v,
 *   acc) (affine: fma(m, the step's x sum 2^(F - 12), acc) in t = 1's units) over the warp's steps; then acc(t = 0) +
 *   2^16 acc(t = 1), times 2^-F (int4: 2^-F / 16); the split-k warps' accs in warp order. Error about 2^-24 of the
 *   step sums and 2^-30 max|x| sum|w| (mma_ref's ibound). A NaN or infinity in x gives NaN outputs (checked, the
 *   fixed point has no such value).
 * engk_qgemv_pick chooses k_qgemv_mma where it runs and measured best (int8 q|k|v-like shapes, int4 down-like ones,
 * int4 q|k|v, gate|up and o-like ones, and vocabulary-sized ones, a packed lm_head; eng_qgemv.cu's USE_MMA switches
 * that off). The fused-norm forms follow it for
 * int8 and int4 q|k|v-like shapes and int4 gate|up; elsewhere they are k_qgemv_s's order. */
#ifndef ENG_QGEMV_H
#define ENG_QGEMV_H

#include <cuda_runtime_api.h>

#include "eng_qfmt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every launcher refuses a format eng_qfmt_ok rejects (cudaErrorInvalidValue).
 * y[N] = W[N, K] x[K] (+ b[N]) (+ res[N], which may alias y); W the packed matrix (eng_qfmt.h). */
cudaError_t engk_qgemv(float *y, const float *x, const void *W, const eng_qfmt *q, const float *b, const float *res,
                       int N, int K, cudaStream_t s);
/* out[I] = act(W[0:I] x + b[0:I]) * (W[I:2I] x + b[I:2I]), each row as engk_qgemv, then engk_glu's arithmetic. */
cudaError_t engk_qgemv_glu(float *out, const float *x, const void *W, const eng_qfmt *q, const float *bgu, int I, int K,
                           int act, cudaStream_t s);
/* The fused-norm forms: y = W rmsnorm(x) (+ b), or the GLU of W rmsnorm(x) (+ bgu); every block normalizes x[K] into
 * shared memory exactly as engk_rmsnorm (kind: rc_norm; nw may be NULL for RC_NORM_POW), and block 0 stores the
 * normed row into xn if not NULL: bit-identical to engk_rmsnorm followed by engk_qgemv_variant / its GLU of the
 * variant engk_qgemv_pick_norm names (a k_qgemv_s variant, or k_qgemv_mma's m8u4 for int8 q|k|v-like shapes and
 * m8t2u2o for int4 q|k|v and gate|up-like ones).
 * engk_qgemv_norm_fits (glu: I gate|up outputs, 2I rows): 1 if they run q at that shape on the current device (else
 * cudaErrorInvalidValue: take engk_rmsnorm + engk_qgemv). */
int engk_qgemv_norm_fits(int glu, const eng_qfmt *q, int N, int K);
/* 1 where the decode step should take the fused form: it fits, and eng_qgemv.cu's FUSE_NORM switch is on for it. */
int engk_qgemv_norm_use(int glu, const eng_qfmt *q, int N, int K);
cudaError_t engk_qgemv_norm(float *y, float *xn, const float *x, const float *nw, float eps, int kind, const void *W,
                            const eng_qfmt *q, const float *b, int N, int K, cudaStream_t s);
cudaError_t engk_qgemv_glu_norm(float *out, float *xn, const float *x, const float *nw, float eps, int kind,
                                const void *W, const eng_qfmt *q, const float *bgu, int I, int K, int act,
                                cudaStream_t s);
/* dst[N, K] = the dequantized matrix, exactly (f32) or rounded to nearest even to bf16 (f32 == 0). */
cudaError_t engk_qdequant(void *dst, int f32, const void *W, const eng_qfmt *q, int N, int K, cudaStream_t s);

/* Micro-benchmark variants (the kernel, rows per warp, 16-byte blocks in flight per lane, warps per block): the r*
 * and s* variants the same per-row order and bits; each m* variant its own (above). glu: the fused gate|up form
 * (y[N] from W[2N, K], b[2N], act; res unused), which engk_qgemv_variant_has_glu says a variant has.
 * engk_qgemv_pick: the variant engk_qgemv (glu 0) or engk_qgemv_glu (glu 1) launches for that format and shape. */
int engk_qgemv_variants(void);
/* $REFCHAIN_QGEMV_PICKS (benchmarking: FNxK=variant,... overrides the picks below for that form and shape; see
 * eng_qgemv.cu): 0 if unset or every entry parses and names a variant with that form, else -1 with the first bad
 * entry in bad[n]. */
int engk_qgemv_env_check(char *bad, size_t n);
const char *engk_qgemv_variant_name(int v);
int engk_qgemv_variant_has_glu(int v);
int engk_qgemv_pick(int glu, const eng_qfmt *q, int N, int K);
/* 1 if variant v runs the tensor-core kernel (k_qgemv_mma: its own order, not eng_qdot_model's) for that format and
 * shape (N outputs; glu: 2N rows) on the current device; 0 where it runs eng_qdot_model's order. */
int engk_qgemv_variant_mma(int v, int glu, const eng_qfmt *q, int N, int K);
cudaError_t engk_qgemv_variant(int v, int glu, float *y, const float *x, const void *W, const eng_qfmt *q,
                               const float *b, const float *res, int N, int K, int act, cudaStream_t s);
/* The fused-norm form of variant v (engk_qgemv_variant_has_norm: the k_qgemv_s variants and the k_qgemv_mma ones of
 * 8 warps and more; an m* form runs its plain form's fallback where that runs, and is refused where the plain form
 * runs the tensor cores but x's copy does not fit) and the variant
 * engk_qgemv_norm / engk_qgemv_glu_norm launch (-1 where engk_qgemv_norm_fits does not hold). */
int engk_qgemv_variant_has_norm(int v);
int engk_qgemv_pick_norm(int glu, const eng_qfmt *q, int N, int K);
cudaError_t engk_qgemv_variant_norm(int v, int glu, float *y, float *xn, const float *x, const float *nw, float eps,
                                    int kind, const void *W, const eng_qfmt *q, const float *b, int N, int K, int act,
                                    cudaStream_t s);

/* Test hook: k_qgemv_mma's int4 code decode over every half-word pattern, both families, against the codes' integers
 * and the form it replaced; *bad = the mismatches (0 expected). cudaErrorNotSupported below sm_80 (no k_qgemv_mma). */
cudaError_t engk_qgemv_nib8_check(long *bad);

#ifdef __cplusplus
}
#endif

#endif
