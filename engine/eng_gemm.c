/* The prefill GEMM (see eng_gemm.h): cuBLASLt, one algorithm pinned per (N, K), element-wise kernels around it. */
#include "eng_gemm.h"

#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* cublasLt.h declares f() */
#include <cublasLt.h>
#pragma GCC diagnostic pop

#include "eng_kernels.h"

/* cuBLASLt is column-major: y[M, N] row-major is D = op(A) B with D [N, M] (ld N), A = W as [K, N] (ld K)
 * transposed, B = bf16(x) as [K, M] (ld K). cuBLASLt's m is our N, its n our M. */
typedef struct gemm_shape {
    int N, K, out16, pinned; /* out16: the bf16-output GEMM of (N, K) (eng_gemm_run_out16), pinned on its own */
    cublasLtMatmulAlgo_t algo;
    uint8_t *checked; /* [max_rows + 1]: cublasLtMatmulAlgoCheck passed for that many rows */
} gemm_shape;

struct eng_gemm {
    cublasLtHandle_t lt;
    cublasLtMatmulDescOpaque_t desc;
    gemm_shape *sh;
    int n, max_rows, max_k, scratch_n;
    uint16_t *d_xb; /* [max_rows, max_k] bf16 activations */
    void *d_ws;     /* ENG_GEMM_WS bytes of cuBLASLt workspace (split-K stays 1: see pin_config) */
    float *d_acc;   /* [max_rows, scratch_n] accumulators of a bias + residual GEMM */
};

static int lt_fail(rc_err *e, cublasStatus_t st, const char *call, const char *file, int line)
{
    return rc_fail(e, st == CUBLAS_STATUS_ALLOC_FAILED ? RC_E_NOMEM : RC_E_DEVICE, "engine: %s failed at %s:%d: %s",
                   call, file, line, cublasLtGetStatusString(st));
}

static int rt_fail(rc_err *e, cudaError_t err, const char *call, const char *file, int line)
{
    cudaGetLastError();
    return rc_fail(e, err == cudaErrorMemoryAllocation ? RC_E_NOMEM : RC_E_DEVICE, "engine: %s failed at %s:%d: %s",
                   call, file, line, cudaGetErrorString(err));
}

#define LT(call)                                                                                                   \
    do {                                                                                                           \
        cublasStatus_t st_ = (call);                                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                                          \
            return lt_fail(e, st_, #call, __FILE__, __LINE__);                                                     \
    } while (0)

#define ATTEMPT_GEMM(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

#define RT(call)                                                                                                   \
    do {                                                                                                           \
        cudaError_t err_ = (call);                                                                                 \
        if (err_ != cudaSuccess)                                                                                   \
            return rt_fail(e, err_, #call, __FILE__, __LINE__);                                                    \
    } while (0)

int eng_gemm_supported(int device, char *why, size_t cap)
{
    int major = 0, minor = 0;
    cudaError_t err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (err != cudaSuccess) {
        cudaGetLastError();
        if (why)
            snprintf(why, cap, "device %d: %s", device, cudaGetErrorString(err));
        return 0;
    }
    if (major < 8) {
        if (why)
            snprintf(why, cap, "sm_%d%d has no bf16 tensor-core GEMM", major, minor);
        return 0;
    }
    return 1;
}

int64_t eng_gemm_device_bytes(int max_rows, int max_k, int scratch_n)
{
    return (int64_t)max_rows * max_k * 2 + (int64_t)max_rows * scratch_n * 4 + ENG_GEMM_WS;
}

static gemm_shape *find(const eng_gemm *g, int N, int K, int out16)
{
    for (int i = 0; i < g->n; i++)
        if (g->sh[i].N == N && g->sh[i].K == K && g->sh[i].out16 == out16)
            return &g->sh[i];
    return NULL;
}

/* Layouts of one shape at M rows (see the comment on gemm_shape); D in bf16 when out16. */
static int layouts(int N, int K, int M, int out16, cublasLtMatrixLayoutOpaque_t *a, cublasLtMatrixLayoutOpaque_t *b,
                   cublasLtMatrixLayoutOpaque_t *d, rc_err *e)
{
    LT(cublasLtMatrixLayoutInit(a, CUDA_R_16BF, (uint64_t)K, (uint64_t)N, K));
    LT(cublasLtMatrixLayoutInit(b, CUDA_R_16BF, (uint64_t)K, (uint64_t)M, K));
    LT(cublasLtMatrixLayoutInit(d, out16 ? CUDA_R_16BF : CUDA_R_32F, (uint64_t)N, (uint64_t)M, N));
    return RC_OK;
}

/* 1 if algo runs shape s at M rows within the workspace; the library's refusal is no error. */
static int algo_ok(eng_gemm *g, const cublasLtMatmulAlgo_t *algo, const gemm_shape *s, int M, rc_err *e)
{
    cublasLtMatrixLayoutOpaque_t a, b, d;
    if (layouts(s->N, s->K, M, s->out16, &a, &b, &d, e))
        return -1;
    cublasLtMatmulHeuristicResult_t r;
    memset(&r, 0, sizeof r);
    const cublasStatus_t st = cublasLtMatmulAlgoCheck(g->lt, &g->desc, &a, &b, &d, &d, algo, &r);
    return st == CUBLAS_STATUS_SUCCESS && r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize <= ENG_GEMM_WS;
}

/* Split-K 1, no reduction; refuses an algorithm whose accumulator is known not to be fp32. */
static int pin_config(cublasLtMatmulAlgo_t *algo)
{
    const int32_t splitk = 1;
    const uint32_t red = CUBLASLT_REDUCTION_SCHEME_NONE;
    if (cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk) ||
        cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red))
        return 0;
    uint64_t impl = 0;
    size_t wr = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(algo, CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS, &impl, sizeof impl, &wr) ==
            CUBLAS_STATUS_SUCCESS &&
        (impl & CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_TYPE_MASK) &&
        !(impl & CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_32F))
        return 0;
    return 1;
}

static const char *describe(const gemm_shape *s, char *buf, size_t cap);

static int pin_shape(eng_gemm *g, gemm_shape *s, FILE *log, rc_err *e)
{
    enum { TRY = 16 };
    cublasLtMatrixLayoutOpaque_t a, b, d;
    if (layouts(s->N, s->K, ENG_GEMM_REF_ROWS, s->out16, &a, &b, &d, e))
        return e->code;
    cublasLtMatmulPreferenceOpaque_t pref;
    const uint64_t ws = ENG_GEMM_WS;
    LT(cublasLtMatmulPreferenceInit(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t res[TRY];
    int got = 0;
    memset(res, 0, sizeof res);
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g->lt, &g->desc, &a, &b, &d, &d, &pref, TRY, res, &got);
    const char *why = st == CUBLAS_STATUS_SUCCESS ? "no candidate passed the checks" : cublasLtGetStatusString(st);
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
        return lt_fail(e, st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    const int rows[] = {1, ENG_GEMM_REF_ROWS}; /* constants: the choice must not depend on --prefill-chunk */
    for (int i = 0; i < got && !s->pinned; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS)
            continue;
        cublasLtMatmulAlgo_t algo = res[i].algo;
        if (!pin_config(&algo))
            continue;
        int ok = 1;
        for (size_t r = 0; r < sizeof rows / sizeof rows[0] && ok == 1; r++)
            ok = algo_ok(g, &algo, s, rows[r], e);
        if (ok < 0)
            return e->code;
        if (ok) {
            s->algo = algo;
            s->pinned = 1;
        }
    }
    if (log) {
        char buf[192];
        const char *out = s->out16 ? ", bf16 output" : "";
        if (s->pinned)
            fprintf(log, "engine: prefill GEMM N=%d K=%d%s: cuBLASLt pinned (%s)\n", s->N, s->K, out,
                    describe(s, buf, sizeof buf));
        else
            fprintf(log, "engine: prefill GEMM N=%d K=%d%s: %s (cuBLASLt: %s)\n", s->N, s->K, out,
                    s->out16 ? "not pinned, the fp32-output path runs" : "CUDA-core k_matmul", why);
    }
    return RC_OK;
}

const char *eng_gemm_describe(const eng_gemm *g, int N, int K, char *buf, size_t cap)
{
    return describe(find(g, N, K, 0), buf, cap);
}

static const char *describe(const gemm_shape *s, char *buf, size_t cap)
{
    if (!s || !s->pinned) {
        snprintf(buf, cap, "%s", s ? "k_matmul" : "not a shape of this GEMM");
        return buf;
    }
    int32_t id = -1, splitk = -1;
    uint32_t tile = 0, red = 0, swz = 0, custom = 0, stages = 0;
    uint16_t inner = 0, cluster = 0;
    size_t wr;
    const cublasLtMatmulAlgo_t *a = &s->algo;
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &wr);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &wr);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &wr);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &wr);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &wr);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz, &wr);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom, &wr);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof inner, &wr);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &wr);
    snprintf(buf, cap, "algo %d tile %u stages %u splitk %d reduction %u swizzle %u custom %u inner %u cluster %u",
             (int)id, tile, stages, (int)splitk, red, swz, custom, (unsigned)inner, (unsigned)cluster);
    return buf;
}

int eng_gemm_pinned(const eng_gemm *g, int N, int K)
{
    const gemm_shape *s = find(g, N, K, 0);
    return s ? s->pinned : -1;
}

int eng_gemm_pinned16(const eng_gemm *g, int N, int K)
{
    const gemm_shape *s = find(g, N, K, 1);
    return s ? s->pinned : -1;
}

void eng_gemm_close(eng_gemm *g)
{
    if (!g)
        return;
    cudaFree(g->d_xb);
    cudaFree(g->d_ws);
    cudaFree(g->d_acc);
    cudaGetLastError();
    if (g->lt)
        cublasLtDestroy(g->lt);
    for (int i = 0; g->sh && i < g->n; i++)
        free(g->sh[i].checked);
    free(g->sh);
    free(g);
}

static int gemm_alloc(void **p, int64_t bytes, int64_t *acct, const char *what, rc_err *e)
{
    *p = NULL;
    if (bytes <= 0)
        return RC_OK;
    const cudaError_t err = cudaMalloc(p, (size_t)bytes);
    if (err != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return rc_fail(e, err == cudaErrorMemoryAllocation ? RC_E_NOMEM : RC_E_DEVICE,
                       "engine: out of device memory for %s (%lld bytes): %s", what, (long long)bytes,
                       cudaGetErrorString(err));
    }
    *acct += bytes;
    return RC_OK;
}

static int open_all(eng_gemm *g, const eng_gemm_shape *shapes, int n, FILE *log, int64_t *acct, rc_err *e)
{
    for (int i = 0; i < n; i++) {
        if (shapes[i].N < 1 || shapes[i].K < 8 || shapes[i].K % 8)
            return rc_fail(e, RC_E_USAGE, "engine: prefill GEMM shape N=%d K=%d: K must be a positive multiple of 8",
                           shapes[i].N, shapes[i].K);
        if (find(g, shapes[i].N, shapes[i].K, shapes[i].out16 != 0))
            continue;
        gemm_shape *s = &g->sh[g->n++];
        s->N = shapes[i].N;
        s->K = shapes[i].K;
        s->out16 = shapes[i].out16 != 0;
        if (!(s->checked = rc_calloc(g->max_rows + 1, 1, e, "GEMM row checks")))
            return e->code;
        if (s->K > g->max_k)
            g->max_k = s->K;
    }
    int dev = 0;
    RT(cudaGetDevice(&dev));
    char why[128];
    if (!eng_gemm_supported(dev, why, sizeof why))
        return rc_fail(e, RC_E_UNSUPPORTED, "engine: prefill GEMM: %s", why);
    LT(cublasLtCreate(&g->lt));
    const int32_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT(cublasLtMatmulDescInit(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(&g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(&g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    for (int i = 0; i < g->n; i++) {
        int rc = pin_shape(g, &g->sh[i], log, e);
        if (rc)
            return rc;
    }
    int rc = gemm_alloc((void **)&g->d_xb, (int64_t)g->max_rows * g->max_k * 2, acct, "bf16 GEMM activations", e);
    if (!rc)
        rc = gemm_alloc(&g->d_ws, ENG_GEMM_WS, acct, "cuBLASLt workspace", e);
    if (!rc)
        rc = gemm_alloc((void **)&g->d_acc, (int64_t)g->max_rows * g->scratch_n * 4, acct, "GEMM accumulators", e);
    return rc;
}

int eng_gemm_open(eng_gemm **out, const eng_gemm_shape *shapes, int n_shapes, int max_rows, int scratch_n, FILE *log,
                  int64_t *acct, rc_err *e)
{
    *out = NULL;
    if (n_shapes < 1 || max_rows < 1 || scratch_n < 0)
        return rc_fail(e, RC_E_USAGE, "engine: prefill GEMM: %d shapes, %d rows, scratch %d", n_shapes, max_rows,
                       scratch_n);
    eng_gemm *g = rc_calloc(1, sizeof *g, e, "prefill GEMM");
    if (!g)
        return e->code;
    g->max_rows = max_rows;
    g->scratch_n = scratch_n;
    g->sh = rc_calloc(n_shapes, sizeof *g->sh, e, "prefill GEMM shapes");
    int rc = g->sh ? open_all(g, shapes, n_shapes, log, acct, e) : e->code;
    if (rc) {
        eng_gemm_close(g);
        return rc;
    }
    *out = g;
    return RC_OK;
}

static int misaligned(const void *p) { return p && (uintptr_t)p % ENG_GEMM_ALIGN != 0; }

/* The checks the entries share; *sh the pinned shape, or NULL if (N, K) runs on engk_matmul. */
static int run_check(eng_gemm *g, gemm_shape **out, const void *y, const void *x, const uint16_t *W, const float *b,
                     const float *res, int M, int N, int K, int out16, rc_err *e)
{
    gemm_shape *sh = find(g, N, K, out16);
    *out = NULL;
    if (!sh)
        return rc_fail(e, RC_E_USAGE, "engine: prefill GEMM: N=%d K=%d%s is not one of its shapes", N, K,
                       out16 ? " with bf16 output" : "");
    if (M < 1 || M > g->max_rows)
        return rc_fail(e, RC_E_USAGE, "engine: prefill GEMM N=%d K=%d: %d rows outside [1, %d]", N, K, M,
                       g->max_rows);
    if (!sh->pinned)
        return RC_OK;
    if (misaligned(y) || misaligned(W) || misaligned(res) || (uintptr_t)x % 16)
        return rc_fail(e, RC_E_USAGE, "engine: prefill GEMM N=%d K=%d: y, W and res must be %d-byte aligned, x 16",
                       N, K, ENG_GEMM_ALIGN);
    if (b && res && N > g->scratch_n)
        return rc_fail(e, RC_E_USAGE, "engine: prefill GEMM N=%d K=%d: bias and residual need %d scratch columns, "
                       "opened with %d", N, K, N, g->scratch_n);
    if (!sh->checked[M]) { /* first chunk of M rows: the pinned algorithm must take it, or the call is refused */
        const int c = algo_ok(g, &sh->algo, sh, M, e);
        if (c < 0)
            return e->code;
        if (!c)
            return rc_fail(e, RC_E_UNSUPPORTED, "engine: prefill GEMM N=%d K=%d: the pinned cuBLASLt algorithm "
                           "refuses %d rows (cublasLtMatmulAlgoCheck)", N, K, M);
        sh->checked[M] = 1;
    }
    *out = sh;
    return RC_OK;
}

/* The pinned GEMM on bf16 activations xb [M, K]. */
static int run_pinned(eng_gemm *g, gemm_shape *sh, float *y, const uint16_t *xb, const uint16_t *W, const float *b,
                      const float *res, int M, int N, int K, cudaStream_t s, rc_err *e)
{
    cublasLtMatrixLayoutOpaque_t la, lb, ld;
    if (layouts(N, K, M, 0, &la, &lb, &ld, e))
        return e->code;
    /* no bias: D = acc (+ res, in place: beta 1 reads C = y after res is there); bias: acc into y or the
     * scratch, then k_bias_res in k_matmul's order */
    float *d = b && res ? g->d_acc : y;
    if (res && !b && res != y)
        RT(cudaMemcpyAsync(y, res, (size_t)M * N * 4, cudaMemcpyDeviceToDevice, s));
    const float one = 1.0f, zero = 0.0f;
    const float *beta = res && !b ? &one : &zero;
    LT(cublasLtMatmul(g->lt, &g->desc, &one, W, &la, xb, &lb, beta, d, &ld, d, &ld, &sh->algo, g->d_ws, ENG_GEMM_WS, s));
    if (b)
        RT(engk_bias_res(y, d, b, res, M, N, s));
    return RC_OK;
}

int eng_gemm_run(eng_gemm *g, float *y, const float *x, const uint16_t *W, const float *b, const float *res, int M,
                 int N, int K, cudaStream_t s, rc_err *e)
{
    gemm_shape *sh;
    ATTEMPT_GEMM(run_check(g, &sh, y, x, W, b, res, M, N, K, 0, e));
    if (!sh) {
        RT(engk_matmul(y, x, W, 0, b, res, M, N, K, s));
        return RC_OK;
    }
    RT(engk_to_bf16(g->d_xb, x, (int64_t)M * K, s));
    return run_pinned(g, sh, y, g->d_xb, W, b, res, M, N, K, s, e);
}

uint16_t *eng_gemm_xbuf(eng_gemm *g) { return g->d_xb; }

int eng_gemm_run_bf16(eng_gemm *g, float *y, const uint16_t *xb, const uint16_t *W, const float *b, const float *res,
                      int M, int N, int K, cudaStream_t s, rc_err *e)
{
    gemm_shape *sh;
    ATTEMPT_GEMM(run_check(g, &sh, y, xb, W, b, res, M, N, K, 0, e));
    if (!sh)
        return rc_fail(e, RC_E_USAGE, "engine: prefill GEMM N=%d K=%d runs on engk_matmul, which needs fp32 input",
                       N, K);
    return run_pinned(g, sh, y, xb, W, b, res, M, N, K, s, e);
}

int eng_gemm_run_out16(eng_gemm *g, uint16_t *y, const uint16_t *xb, const uint16_t *W, int M, int N, int K,
                       cudaStream_t s, rc_err *e)
{
    gemm_shape *sh;
    ATTEMPT_GEMM(run_check(g, &sh, y, xb, W, NULL, NULL, M, N, K, 1, e));
    if (!sh)
        return rc_fail(e, RC_E_UNSUPPORTED, "engine: prefill GEMM N=%d K=%d with bf16 output: no pinned algorithm",
                       N, K);
    cublasLtMatrixLayoutOpaque_t la, lb, ld;
    if (layouts(N, K, M, 1, &la, &lb, &ld, e))
        return e->code;
    const float one = 1.0f, zero = 0.0f;
    LT(cublasLtMatmul(g->lt, &g->desc, &one, W, &la, xb, &lb, &zero, y, &ld, y, &ld, &sh->algo, g->d_ws, ENG_GEMM_WS, s));
    return RC_OK;
}
