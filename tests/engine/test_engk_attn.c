/* GPU suite (gpu, engine): the engine's attention kernels (engine/eng_attn.h) against a double host reference on
 * seeded inputs (tile edges, head groups 1/4/5/8, head dims 64/128/256 and for decode 16..1024, sliding windows,
 * NaN-poisoned outputs, partials and KV past the last position), plus the bit-identities the engine relies on:
 * offload-style per-tile launches = one launch, decode bits independent of the grid, and a prefill row's bits
 * independent of the rows sharing its chunk, block or warp (16 or 32 rows per warp). Decode runs both partial
 * kernels: tensor cores (bf16, sm_80+) and the fp32 CUDA-core one, and the fused form (the merge folded into the
 * partial kernel: engk_attn_decode_fused) bit for bit against partials + merge. --bench: decode attention µs and KV
 * GB/s of both against a measured read ceiling (llama3-8b heads, 16 tokens .. 32k), the fused form next to them,
 * prefill TFLOP/s at T = 2048, 8192, 32768 (each block shape and sub-block loop of the tensor-core kernel, one chunk
 * and chunked). --sanitize: the long-chunk prefill forms once each, small enough for compute-sanitizer. On sm_90a
 * builds on a CC 9.0 device the wgmma prefill (ENGK_MMA_WGMMA) too: against the reference, and its own forms bit for
 * bit against its one launch (elsewhere a note that it was skipped); --wgmma: the prefill cases with only those
 * checks (and the engine's one launch). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eng_attn.h"
#include "eng_bw.h"
#include "eng_gemm.h"
#include "eng_kernels.h"
#include "eng_weights.h"
#include "engk_check.h"
#include "gpu_skip.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull; /* xorshift64, seeded: the same inputs every run */
/* --wgmma: test_prefill's cases (the same inputs) with only the engine's one launch and the wgmma checks */
static int wgmma_only;

/* ---- helpers: a failed CUDA call fails the test with the call, file:line and CUDA's message ---- */
#define CU(call)                                                                                                   \
    do {                                                                                                           \
        cudaError_t err_ = (call);                                                                                 \
        if (err_ != cudaSuccess)                                                                                   \
            fail_msg("%s failed at %s:%d: %s", #call, __FILE__, __LINE__, cudaGetErrorString(err_));                \
    } while (0)

static void *hmalloc(int64_t n, size_t size)
{
    void *p = calloc((size_t)(n > 0 ? n : 1), size);
    assert_non_null(p);
    return p;
}

static void *dmalloc(int64_t bytes)
{
    void *d = NULL;
    CU(cudaMalloc(&d, (size_t)(bytes > 0 ? bytes : 1)));
    return d;
}

static void upload(void *d, const void *h, int64_t bytes) { CU(cudaMemcpy(d, h, (size_t)bytes, cudaMemcpyHostToDevice)); }

static float *download(const void *d, int64_t n)
{
    float *h = hmalloc(n, sizeof *h);
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(h, d, (size_t)n * sizeof *h, cudaMemcpyDeviceToHost));
    return h;
}

static float urand(double lo, double hi)
{
    return (float)(lo + (hi - lo) * (double)(ekc_xorshift64(&rng) >> 11) * 0x1p-53);
}

static float bf16_round(float f) { return eng_bf16_to_f32(eng_f32_to_bf16(f)); }

/* Elements of got outside want ± (atol + rtol |want|), NaN/Inf counting; the line shows the worst error as a
 * fraction of its bound (< 1 passes), and the first three failures. */
static int64_t mismatches(const char *what, const float *got, const double *want, int64_t n, double atol,
                          double rtol)
{
    int64_t bad = 0;
    double worst = 0.0, frac = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - want[i]), bound = atol + rtol * fabs(want[i]);
        if (!isfinite(got[i]) || err > bound) {
            if (++bad <= 3)
                printf("    %s: [%lld] got %.9g want %.9g\n", what, (long long)i, got[i], want[i]);
            continue;
        }
        worst = err > worst ? err : worst;
        frac = err / bound > frac ? err / bound : frac;
    }
    printf("  %-64s max-abs %.3e = %.2f of bound  %s", what, worst, frac, bad ? "FAIL" : "ok");
    printf(bad ? " (%lld of %lld out of bounds)\n" : "\n", (long long)bad, (long long)n);
    return bad;
}

/* ---- a KV cache [S][Hkv][D] in storage type (host fp32 values = exactly what the kernels read) ---- */
typedef struct kvset {
    int S, Hkv, D, f32;
    float *k, *v;     /* host values */
    void *dk, *dv;    /* device, storage type; positions >= valid poisoned with NaN */
    int64_t row;      /* elements per position */
} kvset;

static size_t elt(int f32) { return f32 ? 4 : 2; }

/* s's device copy: positions [0, valid) in storage type, the others NaN. */
static void kv_upload(kvset *s, int valid)
{
    const int f32 = s->f32;
    const int64_t n = (int64_t)s->S * s->row;
    s->dk = dmalloc(n * (int64_t)elt(f32));
    s->dv = dmalloc(n * (int64_t)elt(f32));
    ekc_poison(s->dk, n * (int64_t)elt(f32), 1);
    ekc_poison(s->dv, n * (int64_t)elt(f32), 1);
    const int64_t m = (int64_t)valid * s->row;
    if (f32) {
        upload(s->dk, s->k, m * 4);
        upload(s->dv, s->v, m * 4);
    } else {
        uint16_t *b = hmalloc(2 * m, sizeof *b);
        for (int64_t i = 0; i < m; i++) {
            b[i] = eng_f32_to_bf16(s->k[i]);
            b[m + i] = eng_f32_to_bf16(s->v[i]);
        }
        upload(s->dk, b, m * 2);
        upload(s->dv, b + m, m * 2);
        free(b);
    }
}

static void kv_make(kvset *s, int S, int valid, int Hkv, int D, int f32)
{
    s->S = S, s->Hkv = Hkv, s->D = D, s->f32 = f32, s->row = (int64_t)Hkv * D;
    const int64_t n = (int64_t)S * s->row;
    s->k = hmalloc(n, sizeof(float));
    s->v = hmalloc(n, sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        s->k[i] = urand(-1, 1);
        s->v[i] = urand(-1, 1);
        if (!f32) {
            s->k[i] = bf16_round(s->k[i]);
            s->v[i] = bf16_round(s->v[i]);
        }
    }
    kv_upload(s, valid);
}


static void kv_free(kvset *s)
{
    free(s->k);
    free(s->v);
    CU(cudaFree(s->dk));
    CU(cudaFree(s->dv));
}

/* s with every position's K row (same_k) or V row (same_v) replaced by position 0's, positions [0, valid) on the
 * device: the wgmma checker's probes (a constant V row makes ctx = V row 0 whatever the weights; a constant K row
 * makes the weights uniform). */
static void kv_clone(kvset *d, const kvset *s, int same_k, int same_v, int valid)
{
    *d = *s;
    const int64_t n = (int64_t)s->S * s->row;
    d->k = hmalloc(n, sizeof(float));
    d->v = hmalloc(n, sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        d->k[i] = s->k[same_k ? i % s->row : i];
        d->v[i] = s->v[same_v ? i % s->row : i];
    }
    kv_upload(d, valid);
}

/* Positions [p0, p0 + np) of s into a tile buffer of P positions (and 64 past them) whose other rows are NaN. */
static void *tile_buffer(const kvset *s, const void *src, int64_t p0, int64_t np, int P)
{
    const int64_t rb = s->row * (int64_t)elt(s->f32);
    /* 64 poisoned rows past the tile too: a kernel reading past its tile (the wgmma TMA box is 64 keys at any P)
     * meets NaN there, as it could in the engine's KV-offload buffers */
    void *t = dmalloc((P + 64) * rb);
    ekc_poison(t, (P + 64) * rb, 1);
    CU(cudaMemcpy(t, (const char *)src + p0 * rb, (size_t)(np * rb), cudaMemcpyDeviceToDevice));
    return t;
}

/* Double reference: ctx[T][H][D] of q[T][H][D] (row t at position pos0 + t) over keys [lo(p), p]. */
static double *ref_attn(const float *q, const kvset *s, int T, int64_t pos0, int H, float scale, int window)
{
    const int D = s->D, G = H / s->Hkv;
    double *ctx = hmalloc((int64_t)T * H * D, sizeof *ctx), *sc = hmalloc(pos0 + T, sizeof *sc);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const int64_t p = pos0 + t, lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
            const float *qh = q + ((int64_t)t * H + h) * D;
            double m = -INFINITY, l = 0.0;
            for (int64_t j = lo; j <= p; j++) {
                const float *kr = s->k + j * s->row + (int64_t)(h / G) * D;
                double d = 0.0;
                for (int i = 0; i < D; i++)
                    d += (double)qh[i] * kr[i];
                sc[j] = d * scale;
                if (sc[j] > m)
                    m = sc[j];
            }
            double *o = ctx + ((int64_t)t * H + h) * D;
            for (int64_t j = lo; j <= p; j++) {
                const double w = exp(sc[j] - m);
                l += w;
                const float *vr = s->v + j * s->row + (int64_t)(h / G) * D;
                for (int i = 0; i < D; i++)
                    o[i] += w * vr[i];
            }
            for (int i = 0; i < D; i++)
                o[i] /= l;
        }
    free(sc);
    return ctx;
}

static float *rand_q(int64_t n)
{
    float *q = hmalloc(n, sizeof *q);
    for (int64_t i = 0; i < n; i++)
        q[i] = urand(-1, 1);
    return q;
}

/* ---- the checkers themselves can fail ---- */
static void test_checker_fails(void **state)
{
    (void)state;
    float a[40];
    double b[40];
    for (int i = 0; i < 40; i++)
        a[i] = (float)(b[i] = i);
    assert_int_equal(mismatches("checker: equal", a, b, 40, 0, 0), 0);
    a[17] += 1e-3f;
    assert_int_equal(mismatches("checker: one element off by 1e-3 (must FAIL)", a, b, 40, 1e-4, 0), 1);
    float c[40];
    memcpy(c, a, sizeof c);
    assert_int_equal(ekc_bits("checker: same bits", a, c, 40), 0);
    c[3] = -0.0f;
    a[3] = 0.0f;
    assert_int_equal(ekc_bits("checker: +0 vs -0 (must DIFFER)", a, c, 40), 1);
    a[5] = NAN;
    assert_int_equal(mismatches("checker: one NaN (must FAIL)", a, b, 40, 1.0, 1.0), 1);
}

/* ---- decode: split-KV partials + merge, one launch and offload-style per-tile launches ---- */

/* Nonzero fused-merge counters left on the device (each launch must leave them zero); prints a line. */
static int64_t counters_left(const char *what, const unsigned *dcnt, int Hkv)
{
    unsigned h[64];
    assert_true(Hkv <= 64);
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(h, dcnt, (size_t)Hkv * sizeof *h, cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    for (int g = 0; g < Hkv; g++)
        bad += h[g] != 0;
    if (bad)
        printf("  %-64s %lld of %d counters left nonzero (kv head 0: %u)  FAIL\n", what, (long long)bad, Hkv, h[0]);
    return bad;
}

/* engk_attn_decode_fused (the merge folded into the partial kernel) against want, the two-kernel ctx bits: on the
 * default grid and grids of 1 and 3 blocks (the last block of a kv head is then a different one), ctx and the
 * partials NaN-poisoned before each launch, the counters carried from launch to launch and checked zero after
 * each. */
static int64_t check_fused(const float *dq, float *dctx, float *dpart, unsigned *dcnt, const kvset *s,
                           const int64_t *dpos, int max_tiles, int P, int H, int D, float scale, int window,
                           const float *want, const char *label)
{
    const int64_t n = (int64_t)H * D, pf = engk_attn_part_floats(max_tiles, H, D);
    static const int caps[] = {0, 1, 3};
    int64_t fails = 0;
    char what[200];
    for (size_t c = 0; c < 3; c++) {
        engk_attn_decode_blocks(caps[c]);
        ekc_poison(dctx, n * 4, 1);
        ekc_poison(dpart, pf * 4, 1);
        CU(engk_attn_decode_fused(dq, dctx, dpart, dcnt, s->dk, s->dv, s->f32, dpos, max_tiles, P, H, s->Hkv, D, scale,
                                  window, 0));
        engk_attn_decode_blocks(0);
        float *got = download(dctx, n);
        if (caps[c])
            snprintf(what, sizeof what, "  %smerge fused, a grid of %d block(s) = partials + merge", label, caps[c]);
        else
            snprintf(what, sizeof what, "  %smerge fused = partials + merge", label);
        fails += ekc_bits(what, got, want, n);
        fails += counters_left(what, dcnt, s->Hkv);
        free(got);
    }
    return fails;
}

/* One decode case: ctx against the double reference; the same bits from grids of 1 and 3 blocks (the partials'
 * bits never depend on the grid, so never on the GPU) and from offload-style per-tile launches, each tile from its
 * own NaN-padded buffer. S positions of cache (max_tiles from S), positions past pos NaN. kernel: ENGK_DEC_* (the
 * tensor cores run where engk_attn_decode_mma says, except with ENGK_DEC_CUDA_CORES). */
static int64_t check_decode(int f32, int kernel, int G, int D, int P, int64_t pos, int window, int S)
{
    const int Hkv = 2, H = G * Hkv, max_tiles = engk_attn_max_tiles(S, P);
    const float scale = (float)(1.0 / sqrt((double)D));
    const int64_t n = (int64_t)H * D, pf = engk_attn_part_floats(max_tiles, H, D);
    char what[160];
    kvset s;
    kv_make(&s, S, (int)pos + 1, Hkv, D, f32);
    engk_attn_decode_kernel(kernel);
    const int mma = engk_attn_decode_mma(H, Hkv, D, f32), plain = mma && kernel == ENGK_DEC_MMA_BF16;
    float *q = rand_q(n);
    float *qr = hmalloc(n, sizeof *qr); /* ENGK_DEC_MMA_BF16 rounds q to bf16 once: the reference does too */
    for (int64_t i = 0; i < n; i++)
        qr[i] = plain ? bf16_round(q[i]) : q[i];
    double vmax = 0.0, qk = 0.0; /* max |v|; max over heads and keys of sum_d |q_d k_d| */
    for (int64_t i = 0; i < (pos + 1) * s.row; i++)
        vmax = fabs(s.v[i]) > vmax ? fabs(s.v[i]) : vmax;
    for (int h = 0; h < H; h++)
        for (int64_t j = 0; j <= pos; j++) {
            double a = 0.0;
            for (int d = 0; d < D; d++)
                a += fabs((double)qr[h * D + d] * s.k[j * s.row + (h / G) * D + d]);
            qk = a > qk ? a : qk;
        }
    double *want = ref_attn(qr, &s, 1, pos, H, scale, window);
    float *dq = dmalloc(n * 4), *dctx = dmalloc(n * 4), *dctx2 = dmalloc(n * 4), *dpart = dmalloc(pf * 4);
    int64_t *dpos = dmalloc(8);
    upload(dq, q, n * 4);
    upload(dpos, &pos, 8);
    ekc_poison(dctx, n * 4, 1);
    ekc_poison(dpart, pf * 4, 1);
    CU(engk_attn_decode(dq, dctx, dpart, s.dk, s.dv, f32, dpos, max_tiles, P, H, Hkv, D, scale, window, 0));
    float *got = download(dctx, n);
    snprintf(what, sizeof what, "decode %s G=%d D=%d P=%d pos=%lld window=%d max_tiles=%d",
             plain ? "bf16 tensor cores, bf16 q p" : mma ? "bf16 tensor cores, split q p" :
             f32 ? "f32 CUDA cores" : "bf16 CUDA cores", G, D, P, (long long)pos, window, max_tiles);
    /* bounds: fp32 arithmetic ~1e-6 (CUDA cores: 2e-5 + 1e-5 relative). Tensor cores: each probability enters P V
     * with a relative error e_p (2^-9 rounded to bf16; 2^-17 split in two bf16 terms) and the normalizer l sums
     * them unrounded, so ctx moves by <= e_p max|v|; each score by <= d = (e_q + 2^-22 D) scale max sum|q k| (q's
     * split: e_q = 2^-17; 0 for bf16 q, which the reference rounds alike; the fp32 accumulation of D terms,
     * truncating), which moves ctx by <= 2 d max|v| */
    const double dsc = ((plain ? 0.0 : 0x1p-17) + 0x1p-22 * D) * scale * qk, ep = plain ? 0x1p-9 : 0x1p-17;
    int64_t fails = mismatches(what, got, want, n, mma ? vmax * (ep + 2.0 * dsc) + 2e-5 : 2e-5, 1e-5);
    static const int caps[] = {1, 3};
    for (size_t c = 0; c < 2; c++) {
        engk_attn_decode_blocks(caps[c]);
        ekc_poison(dctx2, n * 4, 1);
        ekc_poison(dpart, pf * 4, 1);
        CU(engk_attn_decode(dq, dctx2, dpart, s.dk, s.dv, f32, dpos, max_tiles, P, H, Hkv, D, scale, window, 0));
        engk_attn_decode_blocks(0);
        float *got2 = download(dctx2, n);
        snprintf(what, sizeof what, "  a grid of %d block(s) = the default grid", caps[c]);
        fails += ekc_bits(what, got2, got, n);
        free(got2);
    }
    ekc_poison(dctx2, n * 4, 1);
    ekc_poison(dpart, pf * 4, 1);
    const int64_t lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    for (int64_t t = lo / P; t <= pos / P; t++) {
        const int64_t np = pos + 1 - t * P < P ? pos + 1 - t * P : P;
        void *tk = tile_buffer(&s, s.dk, t * P, np, P), *tv = tile_buffer(&s, s.dv, t * P, np, P);
        CU(engk_attn_decode_tile(dq, dpart, tk, tv, f32, dpos, (int)t, max_tiles, P, H, Hkv, D, scale, window, 0));
        CU(cudaDeviceSynchronize());
        CU(cudaFree(tk));
        CU(cudaFree(tv));
    }
    CU(engk_attn_decode_merge(dpart, dctx2, dpos, max_tiles, P, H, D, window, 0));
    float *got2 = download(dctx2, n);
    fails += ekc_bits("  per-tile launches = one launch", got2, got, n);
    unsigned *dcnt = dmalloc((int64_t)Hkv * 4);
    CU(cudaMemset(dcnt, 0, (size_t)Hkv * 4));
    fails += check_fused(dq, dctx2, dpart, dcnt, &s, dpos, max_tiles, P, H, D, scale, window, got, "");
    CU(cudaFree(dcnt));
    engk_attn_decode_kernel(ENGK_DEC_AUTO);
    free(q); free(qr); free(want); free(got); free(got2);
    CU(cudaFree(dq)); CU(cudaFree(dctx)); CU(cudaFree(dctx2)); CU(cudaFree(dpart)); CU(cudaFree(dpos));
    kv_free(&s);
    return fails;
}

/* bf16 cases on every decode kernel (the engine's choice, the CUDA-core one forced, tensor cores with bf16 q and p),
 * f32 on its one */
static int64_t check_decode_paths(int f32, int G, int D, int P, int64_t pos, int window, int S)
{
    int64_t fails = check_decode(f32, ENGK_DEC_AUTO, G, D, P, pos, window, S);
    if (!f32) {
        fails += check_decode(f32, ENGK_DEC_CUDA_CORES, G, D, P, pos, window, S);
        if (engk_attn_decode_mma(G * 2, 2, D, f32))
            fails += check_decode(f32, ENGK_DEC_MMA_BF16, G, D, P, pos, window, S);
    }
    return fails;
}

static void test_decode(void **state)
{
    (void)state;
    /* on sm_80+ the llama3-8b shape (and the golden head dims) must take the tensor cores: a silent fallback fails */
    int dev = 0, major = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    printf("  decode on tensor cores: llama3-8b %d, D=16 %d, D=32 %d, f32 %d, G=16 %d, D=80 %d (sm_%d)\n",
           engk_attn_decode_mma(32, 8, 128, 0), engk_attn_decode_mma(4, 2, 16, 0), engk_attn_decode_mma(4, 2, 32, 0),
           engk_attn_decode_mma(32, 8, 128, 1), engk_attn_decode_mma(32, 2, 128, 0), engk_attn_decode_mma(8, 2, 80, 0),
           major * 10);
    assert_int_equal(engk_attn_decode_mma(32, 8, 128, 0), major >= 8);
    assert_int_equal(engk_attn_decode_mma(4, 2, 16, 0), major >= 8);
    assert_int_equal(engk_attn_decode_mma(32, 8, 128, 1), 0);
    static const int Gs[] = {1, 4, 5, 8}, Ds[] = {64, 128, 256}, Ps[] = {8, 64, 100};
    int64_t fails = 0;
    for (int f32 = 0; f32 < 2; f32++)
        for (size_t gi = 0; gi < 4; gi++)
            for (size_t di = 0; di < 3; di++)
                for (size_t pi = 0; pi < 3; pi++) {
                    const int P = Ps[pi];
                    const int64_t poss[] = {P - 1, P, P + 1, 3 * P + 5};
                    for (size_t k = 0; k < 4; k++)
                        for (int w = 0; w < 2; w++)
                            fails += check_decode_paths(f32, Gs[gi], Ds[di], P, poss[k], w ? P + 3 : 0, 4 * P + 16);
                }
    /* other head dims: one lane per 8 dims with idle lanes (80), the small tiny-golden dims, two and four chunks
     * per lane (512, 1024) */
    static const int Dx[] = {16, 32, 80, 512, 1024};
    for (int f32 = 0; f32 < 2; f32++)
        for (size_t di = 0; di < 5; di++) {
            fails += check_decode_paths(f32, 4, Dx[di], 64, 64 * 2 + 7, 0, 4 * 64);
            fails += check_decode_paths(f32, 5, Dx[di], 8, 8 * 3, 11, 64);
            fails += check_decode_paths(f32, 2, Dx[di], 40, 40 * 3 + 16, 0, 4 * 40);
        }
    /* many live tiles (the merge's slices hold several each; the 1- and 3-block grids loop over hundreds of
     * items), a window starting mid-cache, max_tiles far past pos; tiles of 17 and 48 keys (a last key group of 1
     * key, whole groups), groups of 2 (gemma) and 16 (past the tensor cores' 8: the CUDA-core kernel) */
    fails += check_decode_paths(0, 4, 128, 8, 700, 0, 4096);
    fails += check_decode_paths(0, 4, 128, 8, 700, 299, 4096);
    fails += check_decode_paths(0, 8, 64, 64, 4000, 0, 8192);
    fails += check_decode_paths(1, 4, 128, 32, 2500, 1000, 2600);
    fails += check_decode_paths(0, 4, 128, 64, 4095, 0, 4096);
    fails += check_decode_paths(0, 4, 128, 17, 17 * 9 + 16, 30, 17 * 12);
    fails += check_decode_paths(0, 2, 256, 48, 48 * 5 + 32, 0, 48 * 8);
    fails += check_decode_paths(0, 16, 128, 64, 64 * 3 + 9, 0, 64 * 4);
    assert_int_equal(fails, 0);
}

/* ---- decode with the merge folded in: consecutive launches on one set of counters, a captured graph ---- */

/* One cache of S positions (Hkv = 8, G query heads each), one set of counters for every launch: positions giving 1,
 * 2, several and every tile live (max_tiles = S / P), in an order that goes back and forth, each fused launch (direct
 * and, on the same counters, replayed from one captured CUDA graph, which launches programmatically on sm_90)
 * against partials + merge at that position bit for bit, the counters zero after each. Then the counters preset to
 * 1 on a one-block grid (a stale arrival): the comparison must FAIL (the merge runs one arrival early). */
static int64_t check_fused_sequence(int f32, int kernel, int G, int D, int P, int S)
{
    const int Hkv = 8, H = G * Hkv, max_tiles = engk_attn_max_tiles(S, P);
    const float scale = (float)(1.0 / sqrt((double)D));
    const int64_t n = (int64_t)H * D, pf = engk_attn_part_floats(max_tiles, H, D);
    kvset s;
    kv_make(&s, S, S, Hkv, D, f32);
    engk_attn_decode_kernel(kernel);
    const int mma = engk_attn_decode_mma(H, Hkv, D, f32);
    float *q = rand_q(n);
    float *dq = dmalloc(n * 4), *dctx = dmalloc(n * 4), *dref = dmalloc(n * 4), *dpart = dmalloc(pf * 4);
    int64_t *dpos = dmalloc(8);
    unsigned *dcnt = dmalloc((int64_t)Hkv * 4);
    CU(cudaMemset(dcnt, 0, (size_t)Hkv * 4));
    upload(dq, q, n * 4);
    cudaStream_t st;
    CU(cudaStreamCreate(&st));
    cudaGraph_t gr;
    cudaGraphExec_t ge;
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    CU(engk_attn_decode_fused(dq, dctx, dpart, dcnt, s.dk, s.dv, f32, dpos, max_tiles, P, H, Hkv, D, scale, 0, st));
    CU(cudaStreamEndCapture(st, &gr));
    CU(cudaGraphInstantiate(&ge, gr, 0));
    CU(cudaGraphDestroy(gr));
    const int64_t poss[] = {0, P - 1, P, 2 * P - 1, 3 * P + 5, S - 1, P + 1, 0, 33 * P + 2, S - 1, 2 * P, S / 2};
    int64_t fails = 0;
    char what[200];
    for (size_t i = 0; i < sizeof poss / sizeof poss[0]; i++) {
        const int64_t pos = poss[i] < S ? poss[i] : S - 1;
        upload(dpos, &pos, 8);
        ekc_poison(dref, n * 4, 1);
        ekc_poison(dpart, pf * 4, 1);
        CU(engk_attn_decode(dq, dref, dpart, s.dk, s.dv, f32, dpos, max_tiles, P, H, Hkv, D, scale, 0, 0));
        float *want = download(dref, n);
        for (int graph = 0; graph < 2; graph++) {
            ekc_poison(dctx, n * 4, 1);
            ekc_poison(dpart, pf * 4, 1);
            if (graph) {
                CU(cudaDeviceSynchronize()); /* the poisoning above is done */
                CU(cudaGraphLaunch(ge, st));
                CU(cudaStreamSynchronize(st));
            } else
                CU(engk_attn_decode_fused(dq, dctx, dpart, dcnt, s.dk, s.dv, f32, dpos, max_tiles, P, H, Hkv, D, scale,
                                          0, 0));
            float *got = download(dctx, n);
            snprintf(what, sizeof what, "fused %s %s G=%d D=%d P=%d pos=%lld (%lld live tiles of %d)",
                     mma ? "tensor cores" : f32 ? "f32 CUDA cores" : "bf16 CUDA cores", graph ? "graph " : "direct",
                     G, D, P, (long long)pos, (long long)(pos / P + 1), max_tiles);
            fails += ekc_bits(what, got, want, n);
            fails += counters_left(what, dcnt, Hkv);
            free(got);
        }
        free(want);
    }
    /* the checks can fail: a stale arrival on kv head 0, one block walking the items in order */
    const int64_t pos = 2 * P + 1; /* 3 live tiles: head 0 merges after its second arrival, tile 2 still NaN */
    upload(dpos, &pos, 8);
    ekc_poison(dref, n * 4, 1);
    ekc_poison(dpart, pf * 4, 1);
    CU(engk_attn_decode(dq, dref, dpart, s.dk, s.dv, f32, dpos, max_tiles, P, H, Hkv, D, scale, 0, 0));
    float *want = download(dref, n);
    const unsigned one = 1u;
    upload(dcnt, &one, 4);
    ekc_poison(dctx, n * 4, 1);
    ekc_poison(dpart, pf * 4, 1);
    engk_attn_decode_blocks(1);
    CU(engk_attn_decode_fused(dq, dctx, dpart, dcnt, s.dk, s.dv, f32, dpos, max_tiles, P, H, Hkv, D, scale, 0, 0));
    engk_attn_decode_blocks(0);
    float *got = download(dctx, n);
    const int64_t caught = ekc_bits("fused with a stale counter (must DIFFER)", got, want, n) +
                           counters_left("fused with a stale counter (must be left nonzero)", dcnt, Hkv);
    if (!caught)
        printf("  a stale counter went unnoticed  FAIL\n");
    fails += !caught;
    free(want);
    free(got);
    CU(cudaGraphExecDestroy(ge));
    CU(cudaStreamDestroy(st));
    engk_attn_decode_kernel(ENGK_DEC_AUTO);
    free(q);
    CU(cudaFree(dq)); CU(cudaFree(dctx)); CU(cudaFree(dref)); CU(cudaFree(dpart)); CU(cudaFree(dpos)); CU(cudaFree(dcnt));
    kv_free(&s);
    return fails;
}

static void test_decode_fused(void **state)
{
    (void)state;
    static const int Gs[] = {1, 4, 8}, Ds[] = {64, 128, 256};
    int64_t fails = 0;
    for (size_t gi = 0; gi < 3; gi++)
        for (size_t di = 0; di < 3; di++) {
            fails += check_fused_sequence(0, ENGK_DEC_AUTO, Gs[gi], Ds[di], 16, 16 * 40); /* 40 tiles: > 32 slices */
            fails += check_fused_sequence(0, ENGK_DEC_CUDA_CORES, Gs[gi], Ds[di], 64, 64 * 36);
        }
    fails += check_fused_sequence(1, ENGK_DEC_AUTO, 4, 128, 32, 32 * 70);
    fails += check_fused_sequence(0, ENGK_DEC_MMA_BF16, 4, 128, 64, 64 * 64); /* llama3-8b heads, 4096 positions */
    /* the last block's table of w_k (G x live tiles floats in the shared memory it reuses: 4 G D on tensor cores,
     * max(G D, 32 D) + G P on CUDA cores) holds 61 / 77 tiles at G = 8, D = 16: pos S - 1 (70 / 90 tiles) takes
     * the path without it (w_k recomputed per output), 33 P + 2 and S / 2 the table; the same bits either way */
    fails += check_fused_sequence(0, ENGK_DEC_AUTO, 8, 16, 16, 16 * 70);
    fails += check_fused_sequence(0, ENGK_DEC_CUDA_CORES, 8, 16, 16, 16 * 90);
    assert_int_equal(fails, 0);
}

/* ---- decode with qkv_post folded in (engk_attn_decode_fused_post) ---- */

/* Byte-identical device buffers (n bytes); prints a line. */
static int64_t same_bytes(const char *what, const void *da, const void *db, int64_t n)
{
    unsigned char *a = hmalloc(n, 1), *b = hmalloc(n, 1);
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(a, da, (size_t)n, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(b, db, (size_t)n, cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += a[i] != b[i];
    printf("  %-64s %s\n", what, bad ? "DIFFER" : "byte-identical");
    free(a);
    free(b);
    return bad != 0;
}

/* engk_qkv_post_dev + partials + merge (engk_attn_decode) against engk_attn_decode_fused_post from the same q|k|v
 * row, RoPE row, norms and caches (rows >= pos hold old values, so a kernel that read its row pos before storing it
 * would differ): ctx bit for bit and both caches byte for byte, on the default grid, grids of 1 and 3 blocks and a
 * captured graph, one set of counters for every launch (checked zero). Positions with one live tile (the folded
 * form's contract): in tile 0, and in tile 3 with a window inside it; q/k norms of kind norm (< 0: none); back 1
 * (the kv_stale_slot fault) writes the row one slot early in both. */
static int64_t check_post(int kernel, int G, int D, int rot, int norm, int back, int q_only)
{
    const int Hkv = 4, H = G * Hkv, P = 64, S = 4 * P, max_tiles = engk_attn_max_tiles(S, P);
    engk_attn_decode_kernel(kernel);
    if (!engk_attn_decode_post_ok(H, Hkv, D, 0)) {
        printf("  qkv_post folded G=%d D=%d: not on this device/shape (tensor-core partials only)\n", G, D);
        engk_attn_decode_kernel(ENGK_DEC_AUTO);
        return 0;
    }
    const float scale = (float)(1.0 / sqrt((double)D)), eps = 1e-6f;
    const int64_t n = (int64_t)H * D, pf = engk_attn_part_floats(max_tiles, H, D), nqkv = (int64_t)(H + 2 * Hkv) * D;
    kvset s;
    kv_make(&s, S, S, Hkv, D, 0);
    const int64_t cb = (int64_t)S * s.row * 2;
    float *qkv = rand_q(nqkv), *cs = rand_q(rot > 0 ? rot : 1), *nq = rand_q(D), *nk = rand_q(D);
    for (int d = 0; d < D; d++) { /* norm weights around 1 */
        nq[d] = 1.0f + 0.5f * nq[d];
        nk[d] = 1.0f + 0.5f * nk[d];
    }
    float *dqkv = dmalloc(nqkv * 4), *dcs = dmalloc((rot > 0 ? rot : 1) * 4), *dq = dmalloc(n * 4);
    float *dnq = norm >= 0 ? dmalloc(D * 4) : NULL, *dnk = norm >= 0 && !q_only ? dmalloc(D * 4) : NULL;
    float *dctx = dmalloc(n * 4), *dref = dmalloc(n * 4), *dpart = dmalloc(pf * 4);
    void *dka = dmalloc(cb), *dva = dmalloc(cb), *dkb = dmalloc(cb), *dvb = dmalloc(cb);
    int64_t *dpos = dmalloc(8);
    unsigned *dcnt = dmalloc((int64_t)Hkv * 4);
    CU(cudaMemset(dcnt, 0, (size_t)Hkv * 4));
    upload(dqkv, qkv, nqkv * 4);
    upload(dcs, cs, (rot > 0 ? rot : 1) * 4);
    if (dnq)
        upload(dnq, nq, D * 4);
    if (dnk)
        upload(dnk, nk, D * 4);
    const int kind = norm >= 0 ? norm : 0;
    /* one live tile each (a window keeps the later ones to one); the new row (the last key) in warps 0, 2 and 3's
     * groups, at a group's first and last key; {2 * 64, 1}: the new row alone (no row loaded before dep_wait) */
    static const struct { int64_t pos; int window; } ps[] = {{1, 0}, {37, 0}, {63, 0}, {2 * 64, 1}, {100, 37},
                                                             {3 * 64 + 5, 6}, {3 * 64 + 63, 64}};
    int64_t fails = 0;
    char what[200];
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        const int64_t pos = ps[i].pos;
        const int window = ps[i].window;
        assert_int_equal(engk_dec_live_tiles(pos, window, P), 1);
        cudaStream_t st;
        CU(cudaStreamCreate(&st));
        cudaGraph_t gr;
        cudaGraphExec_t ge;
        CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        CU(engk_attn_decode_fused_post(dqkv, dnq, dnk, kind, eps, dcs, dcs + rot / 2, rot, back, dctx, dpart, dcnt, dkb,
                                       dvb, dpos, max_tiles, P, H, Hkv, D, scale, window, st));
        CU(cudaStreamEndCapture(st, &gr));
        CU(cudaGraphInstantiate(&ge, gr, 0));
        CU(cudaGraphDestroy(gr));
        upload(dpos, &pos, 8);
        CU(cudaMemcpy(dka, s.dk, (size_t)cb, cudaMemcpyDeviceToDevice));
        CU(cudaMemcpy(dva, s.dv, (size_t)cb, cudaMemcpyDeviceToDevice));
        ekc_poison(dref, n * 4, 1);
        ekc_poison(dq, n * 4, 1);
        ekc_poison(dpart, pf * 4, 1);
        CU(engk_qkv_post_dev(dqkv, dq, dka, dva, dpos, back, 0, dnq, dnk, kind, eps, dcs, dcs + rot / 2, H, Hkv, D, rot,
                             0));
        CU(engk_attn_decode(dq, dref, dpart, dka, dva, 0, dpos, max_tiles, P, H, Hkv, D, scale, window, 0));
        float *want = download(dref, n);
        static const int caps[] = {0, 1, 3, -1}; /* -1: the captured graph */
        for (size_t c = 0; c < 4; c++) {
            CU(cudaMemcpy(dkb, s.dk, (size_t)cb, cudaMemcpyDeviceToDevice));
            CU(cudaMemcpy(dvb, s.dv, (size_t)cb, cudaMemcpyDeviceToDevice));
            ekc_poison(dctx, n * 4, 1);
            ekc_poison(dpart, pf * 4, 1);
            if (caps[c] < 0) {
                CU(cudaDeviceSynchronize());
                CU(cudaGraphLaunch(ge, st));
                CU(cudaStreamSynchronize(st));
            } else {
                engk_attn_decode_blocks(caps[c]);
                CU(engk_attn_decode_fused_post(dqkv, dnq, dnk, kind, eps, dcs, dcs + rot / 2, rot, back, dctx, dpart,
                                               dcnt, dkb, dvb, dpos, max_tiles, P, H, Hkv, D, scale, window, 0));
                engk_attn_decode_blocks(0);
            }
            float *got = download(dctx, n);
            snprintf(what, sizeof what, "qkv_post folded %s G=%d D=%d rot=%d norm=%d%s back=%d pos=%lld win=%d %s%d",
                     kernel == ENGK_DEC_MMA_BF16 ? "bf16 q p" : "split q p", G, D, rot, norm, q_only ? " (q only)" : "",
                     back, (long long)pos, window, caps[c] < 0 ? "graph" : "grid ", caps[c] < 0 ? 0 : caps[c]);
            fails += ekc_bits(what, got, want, n);
            fails += counters_left(what, dcnt, Hkv);
            fails += same_bytes("  K cache = qkv_post's", dka, dkb, cb);
            fails += same_bytes("  V cache = qkv_post's", dva, dvb, cb);
            free(got);
        }
        free(want);
        CU(cudaGraphExecDestroy(ge));
        CU(cudaStreamDestroy(st));
    }
    engk_attn_decode_kernel(ENGK_DEC_AUTO);
    free(qkv); free(cs); free(nq); free(nk);
    CU(cudaFree(dqkv)); CU(cudaFree(dcs)); CU(cudaFree(dq)); CU(cudaFree(dctx)); CU(cudaFree(dref)); CU(cudaFree(dpart));
    CU(cudaFree(dka)); CU(cudaFree(dva)); CU(cudaFree(dkb)); CU(cudaFree(dvb)); CU(cudaFree(dpos)); CU(cudaFree(dcnt));
    if (dnq) CU(cudaFree(dnq));
    if (dnk) CU(cudaFree(dnk));
    kv_free(&s);
    return fails;
}

static void test_decode_fused_post(void **state)
{
    (void)state;
    int64_t fails = 0;
    static const int Gs[] = {1, 4, 8}, Ds[] = {64, 128, 256};
    for (size_t gi = 0; gi < 3; gi++)
        for (size_t di = 0; di < 3; di++)
            fails += check_post(ENGK_DEC_AUTO, Gs[gi], Ds[di], Ds[di], -1, 0, 0);
    fails += check_post(ENGK_DEC_AUTO, 4, 16, 16, 0, 0, 0);           /* D 16 and 32: fewer dims than lanes */
    fails += check_post(ENGK_DEC_AUTO, 8, 32, 16, -1, 0, 0);
    fails += check_post(ENGK_DEC_AUTO, 4, 128, 64, 0, 0, 0);          /* partial RoPE, q/k norms (w) */
    fails += check_post(ENGK_DEC_AUTO, 4, 128, 64, 0, 0, 1);          /* a q norm without a k norm */
    fails += check_post(ENGK_DEC_AUTO, 8, 256, 64, 1, 0, 0);          /* (1 + w) norms, a quarter rotated */
    fails += check_post(ENGK_DEC_AUTO, 4, 128, 0, 3, 0, 0);           /* no RoPE, weightless norms */
    fails += check_post(ENGK_DEC_MMA_BF16, 4, 128, 128, -1, 0, 0);    /* q and p in bf16 alone */
    fails += check_post(ENGK_DEC_AUTO, 4, 128, 128, -1, 1, 0);        /* kv_stale_slot: the row one slot early */
    assert_int_equal(fails, 0);
}

/* ---- prefill: one launch, offload-style per-tile launches with the state in memory, and other chunkings ---- */
typedef struct pcase {
    int f32, flags, G, D, T, P, window;
    int64_t pos0;
} pcase;

/* ctx [T][H][D] of rows [r0, r0 + n) of the case in one launch over the resident cache. */
static void run_rows(const pcase *c, const kvset *s, const float *dq, float *dctx, int r0, int n, float scale)
{
    const int H = c->G * s->Hkv, D = c->D;
    const int64_t p0 = c->pos0 + r0, last = p0 + n - 1;
    const int64_t lo = c->window > 0 && p0 - c->window + 1 > 0 ? p0 - c->window + 1 : 0;
    CU(engk_attn_prefill(dq + (int64_t)r0 * H * D, dctx + (int64_t)r0 * H * D, NULL, NULL, NULL, s->dk, s->dv, c->f32,
                         0, last, (int)(lo / c->P), (int)(last / c->P) + 1, c->P, n, p0, H, s->Hkv, D, scale,
                         c->window, c->flags | ENGK_INIT | ENGK_FINAL, 0));
}

/* engk_attn_prefill_bf16 (the engine's o-GEMM input): bit for bit engk_to_bf16 of the fp32 ctx dctx holds (one
 * launch of the case), in one launch, in the engine's 8-warp form and in per-tile launches with the state in memory;
 * nothing written past the T rows (the buffer's tail stays NaN); refused without ENGK_FINAL, with ENGK_CUDA_CORES
 * and on a pointer not 4-byte aligned. */
static int64_t check_prefill_bf16(const pcase *c, const kvset *s, const float *dq, const float *dctx, float *dm,
                                  float *dl, float *dacc, float scale)
{
    const int Hkv = s->Hkv, H = c->G * Hkv, D = c->D, T = c->T, P = c->P;
    const int64_t n = (int64_t)T * H * D, last = c->pos0 + T - 1, pad = 8;
    const int64_t lo0 = c->window > 0 && c->pos0 - c->window + 1 > 0 ? c->pos0 - c->window + 1 : 0;
    const int tlo = (int)(lo0 / P), thi = (int)(last / P) + 1;
    uint16_t *dwant = dmalloc(n * 2), *dgot = dmalloc((n + pad) * 2);
    uint16_t *want = hmalloc(n, 2), *got = hmalloc(n + pad, 2);
    CU(engk_to_bf16(dwant, dctx, n, 0));
    CU(cudaMemcpy(want, dwant, (size_t)n * 2, cudaMemcpyDeviceToHost));
    int64_t fails = 0;
    for (int form = 0; form < 3; form++) {
        if (form == 1 && D > 128)
            continue;
        ekc_poison(dgot, (n + pad) * 2, 1);
        const int fl = c->flags | (form == 1 ? ENGK_MMA_WARP32X8 | ENGK_MMA_LEAN : 0);
        if (form < 2)
            CU(engk_attn_prefill_bf16(dq, dgot, NULL, NULL, NULL, s->dk, s->dv, c->f32, 0, last, tlo, thi, P, T,
                                      c->pos0, H, Hkv, D, scale, c->window, fl | ENGK_INIT | ENGK_FINAL, 0));
        else
            for (int k = tlo; k < thi; k++) {
                const int flk = fl | (k == tlo ? ENGK_INIT : 0);
                if (k == thi - 1)
                    CU(engk_attn_prefill_bf16(dq, dgot, dm, dl, dacc, s->dk, s->dv, c->f32, 0, last, k, k + 1, P, T,
                                              c->pos0, H, Hkv, D, scale, c->window, flk | ENGK_FINAL, 0));
                else
                    CU(engk_attn_prefill(dq, NULL, dm, dl, dacc, s->dk, s->dv, c->f32, 0, last, k, k + 1, P, T,
                                         c->pos0, H, Hkv, D, scale, c->window, flk, 0));
            }
        CU(cudaMemcpy(got, dgot, (size_t)(n + pad) * 2, cudaMemcpyDeviceToHost));
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n + pad; i++)
            if (i < n ? got[i] != want[i] : got[i] != 0xffffu) {
                bad++;
                if (first < 0)
                    first = i;
            }
        if (bad) {
            static const char *const forms[] = {"one launch", "8 warps, lean", "per-tile launches"};
            printf("  bf16 ctx (%s): %lld of %lld values differ from engk_to_bf16 of the fp32 ctx (or written past "
                   "the rows), first at %lld: 0x%04x\n", forms[form], (long long)bad, (long long)(n + pad),
                   (long long)first, got[first]);
        }
        fails += bad;
    }
    const int all = c->flags | ENGK_INIT | ENGK_FINAL;
    const cudaError_t refused[] = {
        engk_attn_prefill_bf16(dq, dgot, NULL, NULL, NULL, s->dk, s->dv, c->f32, 0, last, tlo, thi, P, T, c->pos0, H,
                               Hkv, D, scale, c->window, c->flags | ENGK_INIT, 0),
        engk_attn_prefill_bf16(dq, dgot, NULL, NULL, NULL, s->dk, s->dv, c->f32, 0, last, tlo, thi, P, T, c->pos0, H,
                               Hkv, D, scale, c->window, all | ENGK_CUDA_CORES, 0),
        engk_attn_prefill_bf16(dq, dgot + 1, NULL, NULL, NULL, s->dk, s->dv, c->f32, 0, last, tlo, thi, P, T,
                               c->pos0, H, Hkv, D, scale, c->window, all, 0),
        engk_attn_prefill_bf16(dq, NULL, NULL, NULL, NULL, s->dk, s->dv, c->f32, 0, last, tlo, thi, P, T, c->pos0, H,
                               Hkv, D, scale, c->window, all, 0),
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (refused[i] != cudaErrorInvalidValue) {
            printf("  bf16 ctx: bad call %zu not refused (%s)\n", i, cudaGetErrorName(refused[i]));
            fails++;
        }
    free(want);
    free(got);
    CU(cudaFree(dwant));
    CU(cudaFree(dgot));
    return fails;
}

/* Offload: tile k from its own NaN-padded buffer, the state through memory; chunking: row 0 alone, then chunks of
 * 3, 5 or 7 (each sees only the cache up to its own last row): each bit for bit against ref, the case's one-launch
 * ctx with the same flags (c->flags). */
static int64_t check_forms(const pcase *c, const kvset *s, const float *dq, const float *ref, float *dctx2,
                           float *dctx3, float *dm, float *dl, float *dacc, float scale, const char *how)
{
    const int Hkv = s->Hkv, H = c->G * Hkv, D = c->D, T = c->T, P = c->P;
    const int64_t n = (int64_t)T * H * D, last = c->pos0 + T - 1;
    const int64_t lo0 = c->window > 0 && c->pos0 - c->window + 1 > 0 ? c->pos0 - c->window + 1 : 0;
    const int tlo = (int)(lo0 / P), thi = (int)(last / P) + 1;
    char what[160];
    int64_t fails = 0;
    ekc_poison(dctx2, n * 4, 1);
    ekc_poison(dm, (int64_t)T * H * 4, 1);
    ekc_poison(dl, (int64_t)T * H * 4, 1);
    ekc_poison(dacc, n * 4, 1);
    for (int k = tlo; k < thi; k++) {
        const int64_t p0 = (int64_t)k * P, np = last + 1 - p0 < P ? last + 1 - p0 : P;
        void *tk = tile_buffer(s, s->dk, p0, np, P), *tv = tile_buffer(s, s->dv, p0, np, P);
        const int fl = c->flags | (k == tlo ? ENGK_INIT : 0) | (k == thi - 1 ? ENGK_FINAL : 0);
        CU(engk_attn_prefill(dq, dctx2, dm, dl, dacc, tk, tv, c->f32, p0, last, k, k + 1, P, T, c->pos0, H, Hkv, D,
                             scale, c->window, fl, 0));
        CU(cudaDeviceSynchronize());
        CU(cudaFree(tk));
        CU(cudaFree(tv));
    }
    float *got2 = download(dctx2, n);
    snprintf(what, sizeof what, "  per-tile launches, state in memory%s = one launch", how);
    fails += ekc_bits(what, got2, ref, n);
    free(got2);
    for (int ch = 3; ch <= 7; ch += 2) {
        ekc_poison(dctx3, n * 4, 1);
        run_rows(c, s, dq, dctx3, 0, 1, scale);
        for (int r = 1; r < T; r += ch)
            run_rows(c, s, dq, dctx3, r, T - r < ch ? T - r : ch, scale);
        float *got3 = download(dctx3, n);
        snprintf(what, sizeof what, "  chunks 1 + %d + %d ...%s = one chunk", ch, ch, how);
        fails += ekc_bits(what, got3, ref, n);
        free(got3);
    }
    return fails;
}

/* Where the wgmma output leaves its bound, in the coordinates of its layouts: the first elements as (token, head,
 * dim), their packed row R = t G + h % G, its warpgroup row R % 64 (core-matrix row group (R % 64) / 8) and dim
 * group d / 8; then the failures counted per dim group (the V descriptor's N direction, SBO) and per row group (the
 * Q descriptor's M direction, SBO). All groups failing points at S (Q or K descriptors) or the fragment layouts; a
 * pattern over dim groups at V's. */
static void wgmma_locate(const float *got, const double *want, int64_t n, int H, int G, int D, double atol)
{
    int64_t by_d[16] = {0}, by_r[8] = {0}, shown = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(got[i]) && fabs((double)got[i] - want[i]) <= atol)
            continue;
        const int64_t t = i / ((int64_t)H * D);
        const int h = (int)(i / D % H), d = (int)(i % D);
        const int64_t R = t * G + h % G;
        if (shown++ < 3)
            printf("    wgmma: token %lld head %d dim %d (kv head %d, packed row %lld, warpgroup row %lld, row group "
                   "%lld, dim group %d): got %.9g want %.9g\n", (long long)t, h, d, h / G, (long long)R,
                   (long long)(R % 64), (long long)(R % 64 / 8), d / 8, got[i], want[i]);
        by_d[d / 8 % 16]++;
        by_r[R % 64 / 8]++;
    }
    printf("    wgmma failures per dim group d/8:");
    for (int k = 0; k < 16 && k < D / 8; k++)
        printf(" %lld", (long long)by_d[k]);
    printf("\n    wgmma failures per row group (R %% 64)/8:");
    for (int k = 0; k < 8; k++)
        printf(" %lld", (long long)by_r[k]);
    printf("\n");
}

/* The wgmma prefill (ENGK_MMA_WGMMA) where engk_attn_prefill_wgmma holds: its one launch against the reference want
 * (of qr: q rounded to bf16) within the tensor-core bound, failures located (wgmma_locate, descriptor conventions
 * exchanged, probes with constant V or K rows); then, bit for bit against that
 * one launch, 64-row blocks (one warpgroup), per-tile launches, chunkings and the bf16 ctx (check_prefill_bf16).
 * Elsewhere it must be refused (cudaErrorInvalidValue): a note, not a failure. dctx is overwritten. */
static int64_t check_prefill_wgmma(const pcase *c, const kvset *s, const float *dq, const float *qr, const double *want,
                                   const float *eng, float *dctx, float *dctx2, float *dctx3, float *dm, float *dl, float *dacc,
                                   float scale)
{
    const int Hkv = s->Hkv, H = c->G * Hkv, D = c->D, T = c->T;
    const int64_t n = (int64_t)T * H * D, last = c->pos0 + T - 1;
    pcase cw = *c;
    cw.flags |= ENGK_MMA_WGMMA;
    if (!engk_attn_prefill_wgmma(D, c->f32)) {
        static int noted[2];
        const int dev_ok = engk_attn_prefill_wgmma(128, 0);
        if (!noted[dev_ok]++)
            printf("  wgmma prefill skipped: %s\n", dev_ok ? "its head dim is 128 only" :
                   "not built for sm_90a (engine/meson.build) or not a compute capability 9.0 device");
        const cudaError_t err = engk_attn_prefill(dq, dctx, NULL, NULL, NULL, s->dk, s->dv, c->f32, 0, last, 0,
                                                  (int)(last / c->P) + 1, c->P, T, c->pos0, H, Hkv, D, scale,
                                                  c->window, cw.flags | ENGK_INIT | ENGK_FINAL, 0);
        if (err != cudaErrorInvalidValue) {
            printf("  wgmma prefill D=%d: not refused (%s)\n", D, cudaGetErrorName(err));
            return 1;
        }
        return 0;
    }
    char what[160];
    snprintf(what, sizeof what, "prefill wgmma G=%d D=%d T=%d P=%d pos0=%lld window=%d", c->G, D, T, c->P,
             (long long)c->pos0, c->window);
    ekc_poison(dctx, n * 4, 1);
    run_rows(&cw, s, dq, dctx, 0, T, scale);
    const cudaError_t done = cudaDeviceSynchronize(); /* a fault in the kernel: name the case before exiting */
    if (done != cudaSuccess) {
        printf("  %s: the kernel failed: %s (%s)\n", what, cudaGetErrorName(done), cudaGetErrorString(done));
        exit(1);
    }
    float *got = download(dctx, n);
    const double atol = 3.9e-3 + 1e-5; /* check_prefill's tensor-core bound */
    int64_t fails = mismatches(what, got, want, n, atol, 0.0);
    if (fails) {
        wgmma_locate(got, want, n, H, c->G, D, atol);
        /* which descriptor convention, if any, is the device's: the same launch with the offsets exchanged */
        static const struct { int flag; const char *what; } alt[] = {
            {ENGK_WGMMA_SWAP_QK, "Q and K descriptors' LBO and SBO exchanged"},
            {ENGK_WGMMA_SWAP_V, "V descriptor's LBO and SBO exchanged"},
            {ENGK_WGMMA_SWAP_QK | ENGK_WGMMA_SWAP_V, "both exchanged"},
        };
        for (size_t a = 0; a < sizeof alt / sizeof alt[0]; a++) {
            pcase ca = cw;
            ca.flags |= alt[a].flag;
            ekc_poison(dctx3, n * 4, 1);
            run_rows(&ca, s, dq, dctx3, 0, T, scale);
            float *gota = download(dctx3, n);
            int64_t bad = 0;
            for (int64_t i = 0; i < n; i++)
                bad += !isfinite(gota[i]) || fabs((double)gota[i] - want[i]) > atol;
            printf("    wgmma diagnostic, %s: %lld of %lld out of bounds%s\n", alt[a].what, (long long)bad,
                   (long long)n, bad ? "" : " (THIS convention matches the device: fix k_attn_wg's descriptors)");
            free(gota);
        }
        /* which product: V rows all equal (ctx = that row whatever P: fails -> V's layout along the dims or O's
         * fragment), K rows all equal (uniform weights: fails with the former passing -> P V along the keys: P's
         * register fragment or V's layout along the keys; passes with random K failing -> S: Q or K) */
        for (int probe = 0; probe < 2; probe++) {
            kvset s2;
            kv_clone(&s2, s, probe == 1, probe == 0, (int)last + 1);
            double *want2 = ref_attn(qr, &s2, T, c->pos0, H, scale, c->window);
            ekc_poison(dctx3, n * 4, 1);
            run_rows(&cw, &s2, dq, dctx3, 0, T, scale);
            float *got2 = download(dctx3, n);
            int64_t bad = 0;
            for (int64_t i = 0; i < n; i++)
                bad += !isfinite(got2[i]) || fabs((double)got2[i] - want2[i]) > atol;
            printf("    wgmma probe, every %s row equal: %lld of %lld out of bounds\n", probe ? "K" : "V",
                   (long long)bad, (long long)n);
            free(got2);
            free(want2);
            kv_free(&s2);
        }
    }
    fails += check_forms(&cw, s, dq, got, dctx2, dctx3, dm, dl, dacc, scale, " (wgmma)");
    if (eng) /* the engine runs the wgmma kernel where it can and the mma.sync one elsewhere (and with
              * REFCHAIN_PREFILL_ATTN=mma): its identities need the same bits from both (another MMA instruction, the
              * same fp32 accumulation order; 0 differing elements on every case on the H200) */
        fails += ekc_bits("  wgmma = the mma.sync tensor-core kernel", got, eng, n);
    /* the warp-specialized block in each variant: k_attn_wg's bits, in every launch form */
    static const struct { int flag; const char *what; } wv[] = {
        {0, "Q in shared memory"},
        {ENGK_WGS_QREG, "Q in registers"},
        {ENGK_WGS_OVERLAP, "Q in shared memory, S(t+1) with P(t)V(t)"},
        {ENGK_WGS_QREG | ENGK_WGS_OVERLAP, "Q in registers, S(t+1) with P(t)V(t)"},
        {ENGK_WGS_TMA, "Q in registers, K/V by TMA, swizzled"},
        {ENGK_WGS_TMA | ENGK_WGS_OVERLAP, "Q in registers, K/V by TMA, swizzled, S(t+1) with P(t)V(t)"},
        {ENGK_WGS_TMA | ENGK_WGS_PP, "Q in registers, K/V by TMA, swizzled, ping-pong"},
    };
    pcase cs = cw;
    for (size_t v = 0; v < sizeof wv / sizeof wv[0]; v++) {
        cs = cw;
        cs.flags |= ENGK_WGMMA_WS | wv[v].flag;
        ekc_poison(dctx3, n * 4, 1);
        run_rows(&cs, s, dq, dctx3, 0, T, scale);
        const cudaError_t wsd = cudaDeviceSynchronize();
        if (wsd != cudaSuccess) {
            printf("  %s, warp-specialized, %s: the kernel failed: %s (%s)\n", what, wv[v].what, cudaGetErrorName(wsd),
                   cudaGetErrorString(wsd));
            exit(1);
        }
        float *got5 = download(dctx3, n);
        char how[128];
        snprintf(how, sizeof how, "  wgmma warp-specialized, %s = k_attn_wg", wv[v].what);
        const int64_t bad = ekc_bits(how, got5, got, n);
        fails += bad;
        free(got5);
        for (int a = 0; bad && (wv[v].flag & ENGK_WGS_TMA) && a < 3; a++) { /* which swizzled descriptor is off */
            static const int sw[] = {ENGK_WGMMA_SWAP_QK, ENGK_WGMMA_SWAP_V, ENGK_WGMMA_SWAP_QK | ENGK_WGMMA_SWAP_V};
            pcase cx = cs;
            cx.flags |= sw[a];
            ekc_poison(dctx3, n * 4, 1);
            run_rows(&cx, s, dq, dctx3, 0, T, scale);
            float *gx = download(dctx3, n);
            int64_t same = 0;
            for (int64_t i = 0; i < n; i++)
                same += memcmp(&gx[i], &got[i], sizeof gx[i]) == 0;
            printf("    TMA diagnostic, %s exchanged: %lld of %lld elements give k_attn_wg's bits\n",
                   a == 0 ? "K's LBO and SBO" : a == 1 ? "V's LBO and SBO" : "both", (long long)same, (long long)n);
            free(gx);
        }
        snprintf(how, sizeof how, " (wgmma warp-specialized, %s)", wv[v].what);
        fails += check_forms(&cs, s, dq, got, dctx2, dctx3, dm, dl, dacc, scale, how);
        fails += check_prefill_bf16(&cs, s, dq, dctx, dm, dl, dacc, scale); /* each variant's bf16 ctx (the engine's) */
    }
    pcase c64 = cw;
    c64.flags |= ENGK_MMA_ROWS64;
    ekc_poison(dctx3, n * 4, 1);
    run_rows(&c64, s, dq, dctx3, 0, T, scale);
    float *got4 = download(dctx3, n);
    fails += ekc_bits("  wgmma, 1 warpgroup (64-row blocks) = 2 warpgroups (128-row blocks)", got4, got, n);
    free(got4);
    fails += check_prefill_bf16(&cw, s, dq, dctx, dm, dl, dacc, scale);
    free(got);
    return fails;
}

static int64_t check_prefill(const pcase *c)
{
    const int Hkv = 2, H = c->G * Hkv, D = c->D, T = c->T, P = c->P;
    const int64_t n = (int64_t)T * H * D, last = c->pos0 + T - 1;
    const float scale = (float)(1.0 / sqrt((double)D));
    const int mma = !(c->flags & ENGK_CUDA_CORES) && engk_attn_prefill_mma(D, c->f32);
    kvset s;
    kv_make(&s, (int)last + 1 + P, (int)last + 1, Hkv, D, c->f32);
    float *q = rand_q(n);
    float *qr = hmalloc(n, sizeof *qr); /* the tensor-core path rounds q to bf16 for the MMA */
    for (int64_t i = 0; i < n; i++)
        qr[i] = mma ? bf16_round(q[i]) : q[i];
    double *want = ref_attn(qr, &s, T, c->pos0, H, scale, c->window);
    float *dq = dmalloc(n * 4), *dctx = dmalloc(n * 4), *dctx2 = dmalloc(n * 4), *dctx3 = dmalloc(n * 4);
    float *dm = dmalloc((int64_t)T * H * 4), *dl = dmalloc((int64_t)T * H * 4), *dacc = dmalloc(n * 4);
    upload(dq, q, n * 4);
    ekc_poison(dctx, n * 4, 1);
    ekc_poison(dctx2, n * 4, 1);
    ekc_poison(dctx3, n * 4, 1);
    ekc_poison(dm, (int64_t)T * H * 4, 1);
    ekc_poison(dl, (int64_t)T * H * 4, 1);
    ekc_poison(dacc, n * 4, 1);
    run_rows(c, &s, dq, dctx, 0, T, scale);
    float *got = download(dctx, n);
    char what[160];
    snprintf(what, sizeof what, "prefill %s G=%d D=%d T=%d P=%d pos0=%lld window=%d",
             mma ? "bf16 tensor cores" : c->f32 ? "f32 CUDA cores " : "bf16 CUDA cores", c->G, D, T, P,
             (long long)c->pos0, c->window);
    /* bounds: fp32 arithmetic ~1e-6; the MMA path also rounds each probability to bf16 for P V (relative 2^-9 per
     * weight, the normalizer l sums them unrounded): |ctx error| <= 2^-9 * max|v| (+ slack) <= 3.9e-3 */
    int64_t fails = mismatches(what, got, want, n, mma ? 3.9e-3 + 1e-5 : 2e-5, mma ? 0.0 : 1e-5);
    /* with the kernel chosen by chunk length and (tensor cores, D <= 128) with 32 rows per warp forced in each
     * sub-block loop and block shape */
    static const struct { int flag; const char *how; } fv[] = {
        {0, ""},
        {ENGK_MMA_WARP32, " (32 rows per warp)"},
        {ENGK_MMA_WARP32 | ENGK_MMA_OLD, " (32 rows per warp, previous loop)"},
        {ENGK_MMA_WARP32X8 | ENGK_MMA_LEAN, " (32 rows per warp, 8 warps)"},
        {ENGK_MMA_ROWS64 | ENGK_MMA_LEAN, " (16 rows per warp, lean loop)"},
        {ENGK_MMA_PIPE, " (8 warps, pipelined loop)"},
    };
    for (size_t v = 0; !wgmma_only && v < (mma && D <= 128 ? sizeof fv / sizeof fv[0] : 1); v++) {
        pcase cv = *c;
        cv.flags |= fv[v].flag;
        fails += check_forms(&cv, &s, dq, got, dctx2, dctx3, dm, dl, dacc, scale, fv[v].how);
    }
    /* other rows share each row's block and warp: 16 rows per warp in blocks of 64 and 128 rows, 32 rows per warp
     * in blocks of 128 and 256 (D = 256 runs 16 per warp in blocks of 64 whatever the flag), each in every sub-block
     * loop (the previous one, the lean one) */
    static const struct { int flag; const char *what; } blk[] = {
        {ENGK_MMA_ROWS64 | ENGK_MMA_OLD, "  16 rows per warp, blocks of 64 rows, previous loop = one chunk"},
        {ENGK_MMA_ROWS64 | ENGK_MMA_LEAN, "  16 rows per warp, blocks of 64 rows, lean loop = one chunk"},
        {ENGK_MMA_ROWS128 | ENGK_MMA_OLD, "  16 rows per warp, blocks of 128 rows, previous loop = one chunk"},
        {ENGK_MMA_ROWS128 | ENGK_MMA_LEAN, "  16 rows per warp, blocks of 128 rows, lean loop = one chunk"},
        {ENGK_MMA_WARP32 | ENGK_MMA_OLD, "  32 rows per warp, blocks of 128 rows, previous loop = one chunk"},
        {ENGK_MMA_WARP32 | ENGK_MMA_LEAN, "  32 rows per warp, blocks of 128 rows, lean loop = one chunk"},
        {ENGK_MMA_WARP32X8 | ENGK_MMA_OLD, "  32 rows per warp, blocks of 256 rows, previous loop = one chunk"},
        {ENGK_MMA_WARP32X8 | ENGK_MMA_LEAN, "  32 rows per warp, blocks of 256 rows, lean loop = one chunk"},
        {ENGK_MMA_PIPE, "  32 rows per warp, blocks of 256 rows, pipelined loop = one chunk"},
    };
    for (size_t b = 0; mma && !wgmma_only && b < sizeof blk / sizeof blk[0]; b++) {
        pcase cb = *c;
        cb.flags |= blk[b].flag;
        ekc_poison(dctx3, n * 4, 1);
        run_rows(&cb, &s, dq, dctx3, 0, T, scale);
        float *got4 = download(dctx3, n);
        fails += ekc_bits(blk[b].what, got4, got, n);
        free(got4);
    }
    if (mma && !wgmma_only)
        fails += check_prefill_bf16(c, &s, dq, dctx, dm, dl, dacc, scale);
    if (mma) /* last: overwrites dctx */
        fails += check_prefill_wgmma(c, &s, dq, qr, want, mma ? got : NULL, dctx, dctx2, dctx3, dm, dl, dacc, scale);
    free(q); free(qr); free(want); free(got);
    CU(cudaFree(dq)); CU(cudaFree(dctx)); CU(cudaFree(dctx2)); CU(cudaFree(dctx3));
    CU(cudaFree(dm)); CU(cudaFree(dl)); CU(cudaFree(dacc));
    kv_free(&s);
    return fails;
}

static void test_prefill(void **state)
{
    (void)state;
    static const int Gs[] = {1, 4, 5}, Ds[] = {64, 128, 256}, Ts[] = {1, 7, 33};
    static const struct { int P; int64_t pos0; int window; } ps[] = {
        {8, 0, 0}, {8, 7, 0}, {8, 9, 5}, {64, 63, 0}, {64, 0, 20}, {100, 101, 0}, {100, 0, 0},
    };
    static const struct { int f32, flags; } paths[] = {{0, 0}, {0, ENGK_CUDA_CORES}, {1, 0}};
    int64_t fails = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t gi = 0; gi < 3; gi++)
            for (size_t di = 0; di < 3; di++)
                for (size_t ti = 0; ti < 3; ti++)
                    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
                        if ((gi + di + ti + pi) % 2 && Ts[ti] != 33) /* half the small-T cases: time */
                            continue;
                        const pcase c = {paths[a].f32, paths[a].flags, Gs[gi], Ds[di], Ts[ti], ps[pi].P,
                                         ps[pi].window, ps[pi].pos0};
                        fails += check_prefill(&c);
                    }
    /* long chunks: several blocks of rows, sub-blocks inside every row's range (unmasked), tiles of 2 sub-blocks,
     * windows wider than a sub-block, GQA groups of 4 (llama3-8b) and 5, odd lengths */
    static const pcase longc[] = {
        {0, 0, 4, 128, 300, 64, 0, 0},   {0, 0, 4, 128, 301, 64, 100, 77}, {0, 0, 5, 128, 199, 128, 0, 63},
        {0, 0, 1, 64, 260, 128, 0, 5},   {0, 0, 2, 64, 257, 64, 130, 0},   {0, 0, 4, 256, 150, 64, 0, 129},
        {0, ENGK_CUDA_CORES, 4, 128, 150, 64, 70, 3},
        /* many 128-row blocks of 32 rows per warp: odd T, GQA 8, P = 100 (sub-blocks of 64 + 36 keys), a window
         * of 1, a window inside one sub-block, the chunk starting deep in the cache */
        {0, 0, 4, 128, 517, 64, 0, 0},   {0, 0, 8, 128, 130, 100, 0, 37}, {0, 0, 4, 128, 100, 64, 1, 5},
        {0, 0, 4, 64, 333, 64, 200, 1000}, {0, 0, 1, 128, 257, 128, 33, 0}, {0, 0, 4, 32, 300, 64, 0, 11},
        /* the llama3-8b shape at odd lengths (17, 129, 1000 rows: partial 128- and 256-row blocks, several
         * diagonal sub-blocks per block), causal and sliding, from 0 and deep in the cache; D = 64 and 256 */
        {0, 0, 4, 128, 17, 64, 0, 0},    {0, 0, 4, 128, 129, 64, 0, 0},   {0, 0, 4, 128, 1000, 64, 0, 0},
        {0, 0, 4, 128, 1000, 64, 300, 0}, {0, 0, 4, 128, 129, 100, 50, 1000}, {0, 0, 4, 128, 17, 8, 0, 301},
        {0, 0, 4, 64, 1000, 64, 0, 0},   {0, 0, 4, 256, 129, 64, 70, 3},
    };
    for (size_t i = 0; i < sizeof longc / sizeof longc[0]; i++)
        fails += check_prefill(&longc[i]);
    /* the small head dims of the tiny goldens on tensor cores */
    for (int D = 16; D <= 32; D += 16) {
        const pcase c = {0, 0, 2, D, 40, 8, 0, 0};
        fails += check_prefill(&c);
    }
    assert_int_equal(fails, 0);
}

/* ---- --sanitize: the 256-row tensor-core prefill blocks, one launch a form, for compute-sanitizer ----
 * The engine picks these forms only for long chunks (hundreds of rows of llama3-8b heads), which the goldens the
 * engine's sanitizer runs use never reach (scripts/gpu-engine.sh). So: two llama3-8b-shaped cases (GQA 4, D = 128,
 * causal from 0 and sliding deep in the cache), each through LEAN8 (block-wide barriers), the pipelined loop
 * (shared-memory barriers, no block-wide barrier a sub-block) and, on sm_90a, the warp-specialized wgmma forms (the
 * engine's TMA one among them: mbarriers, TMA, setmaxnreg), once each, checked against the double reference and bit
 * for bit against each other. Returns the number of failures, -1 when the device has no tensor-core
 * prefill (nothing to check: exit 77). */
static int64_t sanitize_prefill(void)
{
    static const pcase cs[] = {{0, 0, 4, 128, 300, 64, 0, 0}, {0, 0, 4, 128, 301, 64, 100, 77}};
    static const struct { int flag; const char *what; } forms[] = {
        {ENGK_MMA_WARP32X8 | ENGK_MMA_LEAN, "256-row blocks, lean loop"},
        {ENGK_MMA_PIPE, "256-row blocks, pipelined loop"},
        {ENGK_MMA_WGMMA | ENGK_WGMMA_WS, "wgmma, warp-specialized"},
        {ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_QREG | ENGK_WGS_OVERLAP,
         "wgmma, warp-specialized, Q in registers, overlapped"},
        {ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_TMA, "wgmma, warp-specialized, TMA (the engine's on sm_90a)"},
        {ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_TMA | ENGK_WGS_OVERLAP, "wgmma, warp-specialized, TMA, overlapped"},
        {ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_TMA | ENGK_WGS_PP, "wgmma, warp-specialized, TMA, ping-pong"},
    };
    int64_t fails = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const pcase *c = &cs[i];
        if (!engk_attn_prefill_mma(c->D, 0)) {
            printf("sanitize: skipped, no tensor-core prefill on this device\n");
            return -1;
        }
        const int Hkv = 2, H = c->G * Hkv, D = c->D, T = c->T, P = c->P;
        const int64_t n = (int64_t)T * H * D, last = c->pos0 + T - 1;
        const float scale = (float)(1.0 / sqrt((double)D));
        kvset s;
        kv_make(&s, (int)last + 1 + P, (int)last + 1, Hkv, D, 0);
        float *q = rand_q(n);
        for (int64_t j = 0; j < n; j++)
            q[j] = bf16_round(q[j]);
        double *want = ref_attn(q, &s, T, c->pos0, H, scale, c->window);
        float *dq = dmalloc(n * 4), *dctx = dmalloc(n * 4), *first = NULL;
        upload(dq, q, n * 4);
        for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
            const int wg = (forms[f].flag & ENGK_MMA_WGMMA) != 0;
            if (wg && !engk_attn_prefill_wgmma(c->D, 0))
                continue;
            pcase cf = *c;
            cf.flags |= forms[f].flag;
            ekc_poison(dctx, n * 4, 1);
            run_rows(&cf, &s, dq, dctx, 0, T, scale);
            float *got = download(dctx, n);
            char what[160];
            snprintf(what, sizeof what, "sanitize: prefill T=%d pos0=%lld window=%d, %s", T, (long long)c->pos0,
                     c->window, forms[f].what);
            fails += mismatches(what, got, want, n, 3.9e-3 + 1e-5, 0.0);
            if (first) { /* every form, the wgmma ones too, gives the first one's bits */
                fails += ekc_bits(what, got, first, n);
                free(got);
            } else
                first = got;
        }
        free(first); free(q); free(want);
        CU(cudaFree(dq)); CU(cudaFree(dctx));
        kv_free(&s);
    }
    printf("sanitize: %lld failure(s)\n", (long long)fails);
    return fails;
}

/* ---- --bench ---- */
static void flush_l2(void *junk, size_t bytes, cudaStream_t st)
{
    CU(cudaMemsetAsync(junk, (int)(bytes & 0x7f), bytes, st));
}

/* The decode attention of one layer (partials + merge, the merge alone, or with dcnt the fused form) captured as a
 * CUDA graph, as the engine replays its decode step: the timing has no host launch gaps. */
static cudaGraphExec_t decode_graph(int merge_only, unsigned *dcnt, const float *dq, float *dctx, float *dpart,
                                    const void *dk, const void *dv, const int64_t *dpos, int mt, int P, int H, int Hkv,
                                    int D, cudaStream_t st)
{
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    if (merge_only)
        CU(engk_attn_decode_merge(dpart, dctx, dpos, mt, P, H, D, 0, st));
    else if (dcnt)
        CU(engk_attn_decode_fused(dq, dctx, dpart, dcnt, dk, dv, 0, dpos, mt, P, H, Hkv, D, 0.088f, 0, st));
    else
        CU(engk_attn_decode(dq, dctx, dpart, dk, dv, 0, dpos, mt, P, H, Hkv, D, 0.088f, 0, st));
    CU(cudaStreamEndCapture(st, &g));
    CU(cudaGraphInstantiate(&ge, g, 0));
    CU(cudaGraphDestroy(g));
    return ge;
}

static void bench(void)
{
    const int H = 32, Hkv = 8, D = 128, reps = 20;
    const int64_t maxS = 32768, row = (int64_t)Hkv * D;
    const size_t kvb = (size_t)(maxS * row * 2), junkb = (size_t)512 << 20;
    void *dk = dmalloc((int64_t)kvb), *dv = dmalloc((int64_t)kvb), *junk = dmalloc((int64_t)junkb);
    CU(cudaMemset(dk, 0x3c, kvb)); /* bf16 1.15: finite */
    CU(cudaMemset(dv, 0x3c, kvb));
    double ceil_bps = 0.0, ceil_median = 0.0;
    const char *what = "";
    int dev = 0;
    CU(cudaGetDevice(&dev));
    const cudaError_t cerr = engk_read_bandwidth(dev, junkb, 5, &ceil_bps, &ceil_median, &what);
    if (cerr != cudaSuccess)
        fail_msg("%s failed in engk_read_bandwidth: %s", what, cudaGetErrorString(cerr));
    printf("bench read ceiling (512 MiB, 16-byte loads): %.0f GB/s\n", ceil_bps / 1e9);
    float *dq = dmalloc(2048 * H * D * 4), *dctx = dmalloc(2048 * H * D * 4);
    CU(cudaMemset(dq, 0, 2048 * H * D * 4));
    int64_t *dpos = dmalloc(8);
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    /* decode, graph-launched: partials + merge after an L2 flush (the engine reads each layer's KV once per step),
     * and the merge alone right after (its partials are still in L2, as in the engine), then the fused form (the
     * merge folded into the partial kernel: engk_attn_decode_fused) after another flush; max_ctx 32768, and 131072
     * at P = 64 (the grid is fixed: a longer max_ctx must cost nothing); the CUDA-core partials (the previous
     * kernel, forced) and the engine's choice (tensor cores on sm_80+) on the same KV; the engine bench's 16-token
     * context (one live tile) first */
    static const struct { int ctx, P, max_ctx; } dc[] = {
        {16, 64, 1024}, {16, 64, 32768}, {100, 64, 1024}, {512, 64, 4096},
        {2048, 32, 32768}, {2048, 64, 32768}, {2048, 128, 32768}, {2048, 256, 32768}, {2048, 64, 131072},
        {8192, 32, 32768}, {8192, 64, 32768}, {8192, 128, 32768}, {8192, 256, 32768},
        {32768, 32, 32768}, {32768, 64, 32768}, {32768, 128, 32768}, {32768, 256, 32768},
    };
    cudaStream_t st;
    cudaEvent_t e2, e3, e4;
    CU(cudaStreamCreate(&st));
    CU(cudaEventCreate(&e2));
    CU(cudaEventCreate(&e3));
    CU(cudaEventCreate(&e4));
    unsigned *dcnt = dmalloc((int64_t)Hkv * 4);
    CU(cudaMemset(dcnt, 0, (size_t)Hkv * 4));
    for (size_t c = 0; c < sizeof dc / sizeof dc[0]; c++) {
        const int P = dc[c].P, mt = engk_attn_max_tiles(dc[c].max_ctx, P);
        const int64_t pos = dc[c].ctx - 1;
        const double bytes = 2.0 * (double)dc[c].ctx * (double)row * 2.0;
        float *dpart = dmalloc(engk_attn_part_floats(mt, H, D) * 4);
        upload(dpos, &pos, 8);
        static const int kern[3] = {ENGK_DEC_CUDA_CORES, ENGK_DEC_AUTO, ENGK_DEC_MMA_BF16};
        static const char *kname[3] = {"CUDA cores (old)", "tensor cores, split q p (new)", "tensor cores, bf16 q p"};
        double us[3] = {0.0, 0.0, 0.0}, mus[3] = {0.0, 0.0, 0.0}, fus[3] = {0.0, 0.0, 0.0};
        const int npath = engk_attn_decode_mma(H, Hkv, D, 0) ? 3 : 1;
        for (int path = 0; path < npath; path++) {
            engk_attn_decode_kernel(kern[path]);
            CU(engk_attn_decode(dq, dctx, dpart, dk, dv, 0, dpos, mt, P, H, Hkv, D, 0.088f, 0, st)); /* uncaptured */
            CU(engk_attn_decode_fused(dq, dctx, dpart, dcnt, dk, dv, 0, dpos, mt, P, H, Hkv, D, 0.088f, 0, st));
            cudaGraphExec_t gd = decode_graph(0, NULL, dq, dctx, dpart, dk, dv, dpos, mt, P, H, Hkv, D, st);
            cudaGraphExec_t gm = decode_graph(1, NULL, dq, dctx, dpart, dk, dv, dpos, mt, P, H, Hkv, D, st);
            cudaGraphExec_t gf = decode_graph(0, dcnt, dq, dctx, dpart, dk, dv, dpos, mt, P, H, Hkv, D, st);
            double total = 0.0, merge = 0.0, fused = 0.0;
            for (int r = 0; r < reps + 1; r++) {
                float ms = 0.0f, mm = 0.0f, mf = 0.0f;
                flush_l2(junk, junkb, st); /* ~0.1 ms: the launches below are queued behind it, no host gaps */
                CU(cudaEventRecord(e0, st));
                CU(cudaGraphLaunch(gd, st));
                CU(cudaEventRecord(e1, st));
                CU(cudaGraphLaunch(gm, st));
                CU(cudaEventRecord(e2, st));
                flush_l2(junk, junkb, st);
                CU(cudaEventRecord(e3, st));
                CU(cudaGraphLaunch(gf, st));
                CU(cudaEventRecord(e4, st));
                CU(cudaEventSynchronize(e4));
                CU(cudaEventElapsedTime(&ms, e0, e1));
                CU(cudaEventElapsedTime(&mm, e1, e2));
                CU(cudaEventElapsedTime(&mf, e3, e4));
                if (r > 0) {
                    total += ms;
                    merge += mm;
                    fused += mf;
                }
            }
            CU(cudaGraphExecDestroy(gd));
            CU(cudaGraphExecDestroy(gm));
            CU(cudaGraphExecDestroy(gf));
            us[path] = 1e3 * total / reps;
            mus[path] = 1e3 * merge / reps;
            fus[path] = 1e3 * fused / reps;
        }
        engk_attn_decode_kernel(ENGK_DEC_AUTO);
        for (int path = 0; path < npath; path++) {
            const double gbs = bytes / (us[path] * 1e-6);
            printf("bench decode attention ctx=%-5d P=%-3d max_ctx=%-6d H=32/8 D=128 bf16 %-29s %7.1f us/layer "
                   "(merge %5.1f; merge fused %7.1f us = %.2fx)  KV %6.0f GB/s  (%4.1f%% of the read ceiling)",
                   dc[c].ctx, P, dc[c].max_ctx, kname[path], us[path], mus[path], fus[path], us[path] / fus[path],
                   gbs / 1e9, 100.0 * gbs / ceil_bps);
            printf(path ? "  %.2fx the old\n" : "\n", us[0] / us[path]);
        }
        CU(cudaFree(dpart));
    }
    /* qkv_post + attention of one decode row (a layer's share of the decode graph between the q|k|v GEMV and the o
     * GEMV), graph-launched after an L2 flush: qkv_post, partials, merge (off); qkv_post + the merge fused (on) */
    {
        float *dqkv = dmalloc((int64_t)(H + 2 * Hkv) * D * 4), *dcs = dmalloc(D * 4);
        CU(cudaMemset(dqkv, 0, (size_t)(H + 2 * Hkv) * D * 4));
        CU(cudaMemset(dcs, 0, (size_t)D * 4));
        static const int pctx[] = {16, 64, 100, 160, 256, 512, 2048}; /* 1, 1, 2, 3, 4, 8, 32 live tiles */
        for (size_t c = 0; c < sizeof pctx / sizeof pctx[0]; c++) {
            const int P = 64, mt = engk_attn_max_tiles(4096, P);
            const int64_t pos = pctx[c] - 1;
            upload(dpos, &pos, 8);
            float *dpart = dmalloc(engk_attn_part_floats(mt, H, D) * 4);
            double us[2] = {0.0, 0.0};
            for (int f = 0; f < 2; f++) {
                cudaGraph_t g;
                cudaGraphExec_t ge;
                CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
                CU(engk_qkv_post_dev(dqkv, dq, dk, dv, dpos, 0, 0, NULL, NULL, 0, 1e-6f, dcs, dcs + D / 2, H, Hkv, D, D,
                                     st));
                if (f == 0)
                    CU(engk_attn_decode(dq, dctx, dpart, dk, dv, 0, dpos, mt, P, H, Hkv, D, 0.088f, 0, st));
                else
                    CU(engk_attn_decode_fused(dq, dctx, dpart, dcnt, dk, dv, 0, dpos, mt, P, H, Hkv, D, 0.088f, 0, st));
                CU(cudaStreamEndCapture(st, &g));
                CU(cudaGraphInstantiate(&ge, g, 0));
                CU(cudaGraphDestroy(g));
                double total = 0.0;
                for (int r = 0; r < reps + 1; r++) {
                    float ms = 0.0f;
                    flush_l2(junk, junkb, st);
                    CU(cudaEventRecord(e0, st));
                    CU(cudaGraphLaunch(ge, st));
                    CU(cudaEventRecord(e1, st));
                    CU(cudaEventSynchronize(e1));
                    CU(cudaEventElapsedTime(&ms, e0, e1));
                    if (r > 0)
                        total += ms;
                }
                CU(cudaGraphExecDestroy(ge));
                us[f] = 1e3 * total / reps;
            }
            printf("bench decode qkv_post + attention ctx=%-5d (%2d live tiles) P=64 H=32/8 D=128 bf16: off %6.1f us, "
                   "merge fused %6.1f us (%.2fx)\n",
                   pctx[c], engk_dec_live_tiles(pos, 0, P), us[0], us[1], us[0] / us[1]);
            CU(cudaFree(dpart));
        }
        CU(cudaFree(dqkv));
        CU(cudaFree(dcs));
    }
    CU(cudaStreamDestroy(st));
    CU(cudaEventDestroy(e2));
    CU(cudaEventDestroy(e3));
    CU(cudaEventDestroy(e4));
    CU(cudaFree(dcnt));
    /* prefill of T = 2048, 8192 and 32768 rows from position 0, causal, P = 64: one chunk (engine bench), and
     * chunks of 256 (T = 2048, the engine's default) or 2048; tensor cores in each block shape and sub-block loop
     * (same bits: engine/eng_attn.cu MMA_FORM / MMA_LOOP16 pick the engine's), the kernel's default ("auto": the
     * engine's where the wgmma kernel does not run), and the wgmma forms (ENGK_MMA_WGMMA, sm_90a, the mma.sync bits,
     * checked by test_prefill; the engine runs the warp-specialized TMA one at head dim 128 on sm_90a). Seeded
     * random q, K and V, so the running max moves as in real attention. Flops counted causal: per head and row at
     * position p, 2 D (p + 1) for Q K^T and as many for P V, so 4 D H T (T + 1) / 2 in all (masked halves of
     * diagonal blocks not counted). */
    const int P = 64, maxT = 32768;
    static const int Ts[] = {2048, 8192, 32768}, chunks[] = {256, 2048, 2048};
    static const struct { const char *name; int flags; } pv[] = {
        {"MMA 32 rows/warp, 128-row blocks, previous loop  ", ENGK_MMA_WARP32 | ENGK_MMA_OLD},
        {"MMA 32 rows/warp, 128-row blocks, lean loop      ", ENGK_MMA_WARP32 | ENGK_MMA_LEAN},
        {"MMA 32 rows/warp, 256-row blocks, lean loop      ", ENGK_MMA_WARP32X8 | ENGK_MMA_LEAN},
        {"MMA 32 rows/warp, 256-row blocks, pipelined loop ", ENGK_MMA_PIPE},
        {"MMA 16 rows/warp,  64-row blocks, previous loop  ", ENGK_MMA_ROWS64 | ENGK_MMA_OLD},
        {"MMA 16 rows/warp,  64-row blocks, lean loop      ", ENGK_MMA_ROWS64 | ENGK_MMA_LEAN},
        {"MMA 16 rows/warp, 128-row blocks, previous loop  ", ENGK_MMA_ROWS128 | ENGK_MMA_OLD},
        {"MMA auto (the engine's where wgmma does not run) ", 0},
        {"wgmma 2 warpgroups, 128-row blocks (not engine's)", ENGK_MMA_WGMMA},
        {"wgmma 1 warpgroup,   64-row blocks (not engine's)", ENGK_MMA_WGMMA | ENGK_MMA_ROWS64},
        {"wgmma warp-specialized, Q smem (not engine's)    ", ENGK_MMA_WGMMA | ENGK_WGMMA_WS},
        {"wgmma warp-specialized, Q regs (not engine's)    ", ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_QREG},
        {"wgmma warp-spec., Q smem, overlap (not engine's) ", ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_OVERLAP},
        {"wgmma warp-spec., Q regs, overlap (not engine's) ",
         ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_QREG | ENGK_WGS_OVERLAP},
        {"wgmma warp-spec., TMA (the engine's on sm_90a)   ", ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_TMA},
        {"wgmma warp-spec., TMA, overlap (not engine's)    ",
         ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_TMA | ENGK_WGS_OVERLAP},
        {"wgmma warp-spec., TMA, ping-pong (not engine's)  ",
         ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_TMA | ENGK_WGS_PP},
        {"CUDA cores                                       ", ENGK_CUDA_CORES},
    };
    float *hq = rand_q((int64_t)maxT * H * D);
    uint16_t *hkv = hmalloc((int64_t)maxT * row, sizeof *hkv);
    for (int t = 0; t < 2; t++) {
        for (int64_t i = 0; i < (int64_t)maxT * row; i++)
            hkv[i] = eng_f32_to_bf16(urand(-1, 1));
        upload(t ? dv : dk, hkv, (int64_t)maxT * row * 2);
    }
    float *dqp = dmalloc((int64_t)maxT * H * D * 4), *dcp = dmalloc((int64_t)maxT * H * D * 4);
    upload(dqp, hq, (int64_t)maxT * H * D * 4);
    free(hq);
    free(hkv);
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
        for (size_t x = 0; x < 2 * sizeof pv / sizeof pv[0]; x++) { /* every form in one chunk, then chunked */
            const size_t i = x % (sizeof pv / sizeof pv[0]);
            const int chunked = x >= sizeof pv / sizeof pv[0], T = Ts[ti], chunk = chunked ? chunks[ti] : T;
            const double flops = 4.0 * D * H * ((double)T * (T + 1) / 2.0);
            char how[96];
            if (chunked)
                snprintf(how, sizeof how, "%s, chunks of %-4d", pv[i].name, chunk);
            else
                snprintf(how, sizeof how, "%s, 1 chunk       ", pv[i].name);
            if ((pv[i].flags & ENGK_CUDA_CORES) && (T > 2048 || !chunked)) /* ~16 ms per 2048 rows: one row */
                continue;
            if (!(pv[i].flags & ENGK_CUDA_CORES) && !engk_attn_prefill_mma(D, 0)) {
                printf("bench prefill attention %s: no tensor-core path on this device\n", how);
                continue;
            }
            if ((pv[i].flags & ENGK_MMA_WGMMA) && !engk_attn_prefill_wgmma(D, 0)) {
                printf("bench prefill attention %s: no wgmma path (an sm_90a build on a CC 9.0 device)\n", how);
                continue;
            }
            const int r_n = pv[i].flags & ENGK_CUDA_CORES ? 1 : 5;
            double total = 0.0;
            for (int r = 0; r < r_n + 1; r++) {
                float ms = 0.0f;
                CU(cudaEventRecord(e0, 0));
                for (int c0 = 0; c0 < T; c0 += chunk) {
                    const int64_t last = c0 + chunk - 1;
                    CU(engk_attn_prefill(dqp + (int64_t)c0 * H * D, dcp + (int64_t)c0 * H * D, NULL, NULL, NULL, dk,
                                         dv, 0, 0, last, 0, (int)(last / P) + 1, P, chunk, c0, H, Hkv, D, 0.088f, 0,
                                         pv[i].flags | ENGK_INIT | ENGK_FINAL, 0));
                }
                CU(cudaEventRecord(e1, 0));
                CU(cudaEventSynchronize(e1));
                CU(cudaEventElapsedTime(&ms, e0, e1));
                if (r > 0)
                    total += ms;
            }
            const double ms = total / r_n;
            printf("bench prefill attention T=%-5d causal H=32/8 D=128 bf16 %s  %9.3f ms/layer  %7.1f TFLOP/s\n", T,
                   how, ms, flops / (ms * 1e-3) / 1e12);
        }
    CU(cudaFree(dqp));
    CU(cudaFree(dcp));
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    CU(cudaFree(dk)); CU(cudaFree(dv)); CU(cudaFree(junk));
    CU(cudaFree(dq)); CU(cudaFree(dctx)); CU(cudaFree(dpos));
}

int main(int argc, char **argv)
{
    gpu_skip_unless_present("engine.kernels.attn");
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
        bench();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--sanitize") == 0) {
        const int64_t f = sanitize_prefill();
        return f < 0 ? 77 : f > 0 ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "--wgmma") == 0) { /* the wgmma variant's checks alone (quicker) */
        wgmma_only = 1;
        const struct CMUnitTest wg[] = {cmocka_unit_test(test_prefill)};
        return cmocka_run_group_tests_name("engine.kernels.attn.wgmma", wg, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_fails),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_decode_fused),
        cmocka_unit_test(test_decode_fused_post),
        cmocka_unit_test(test_prefill),
    };
    return cmocka_run_group_tests_name("engine.kernels.attn", tests, NULL, NULL);
}
