/* Round-to-nearest and GPTQ quantization of one weight matrix, in sections: schemes, group parameters, RTN,
 * GPTQ, dequant and Hessians. */
#include "gptq.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- schemes ---- */
int rc_gq_scheme_parse(const char *name, int sym, rc_gq_scheme *s, rc_err *e)
{
    memset(s, 0, sizeof *s);
    if (!strcmp(name, "int8")) {
        *s = (rc_gq_scheme){.bits = 8, .group = 0, .sym = 1}; /* W8A16: symmetric by definition */
        return RC_OK;
    }
    static const int groups[] = {128, 64, 32};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        char want[32];
        snprintf(want, sizeof want, "int4-g%d", groups[i]);
        if (!strcmp(name, want)) {
            *s = (rc_gq_scheme){.bits = 4, .group = groups[i], .sym = sym ? 1 : 0};
            return RC_OK;
        }
    }
    return rc_fail(e, RC_E_USAGE, "unknown quantization scheme '%s' (int8, int4-g128, int4-g64, int4-g32)", name);
}

const char *rc_gq_scheme_str(const rc_gq_scheme *s, char *buf, int cap)
{
    if (s->group)
        snprintf(buf, (size_t)cap, "int%d-g%d-%s", s->bits, s->group, s->sym ? "sym" : "asym");
    else
        snprintf(buf, (size_t)cap, "int%d-row-%s", s->bits, s->sym ? "sym" : "asym");
    return buf;
}

/* ---- group parameters ---- */

/* The smallest fp16 value >= s (s > 0); 0 when s is above the fp16 range. */
static double f16_ceil(double s)
{
    if (s > 65504.0)
        return 0;
    int ex;
    frexp(s, &ex); /* s = m * 2^ex, m in [0.5, 1) */
    const double ulp = ldexp(1.0, ex - 1 < -14 ? -24 : ex - 11);
    return ceil(s / ulp) * ulp;
}

typedef struct gq_param {
    double scale;
    int zero, maxq;
} gq_param;

/* Scale and zero of the n values x[0], x[stride], ...; name labels an fp16 overflow. */
static int group_param(const double *x, int64_t n, const rc_gq_scheme *s, gq_param *p, const char *name,
                       rc_err *e)
{
    p->maxq = (1 << s->bits) - 1;
    double lo = 0, hi = 0; /* the range always holds 0 */
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return rc_fail(e, RC_E_RANGE, "%s: weight holds NaN/Inf", name);
        if (x[i] < lo)
            lo = x[i];
        if (x[i] > hi)
            hi = x[i];
    }
    double raw;
    if (s->sym) {
        double amax = fmax(-lo, hi);
        if (amax == 0)
            amax = 1;
        raw = s->bits == 8 ? amax / 127.0 : 2.0 * amax / (double)p->maxq;
    } else {
        if (lo == hi) {
            lo = -1;
            hi = 1;
        }
        raw = (hi - lo) / (double)p->maxq;
    }
    p->scale = f16_ceil(raw);
    if (p->scale == 0)
        return rc_fail(e, RC_E_RANGE, "%s: a group scale %.6g is beyond the fp16 range of the GPTQ layout", name,
                       raw);
    if (s->sym)
        p->zero = 1 << (s->bits - 1);
    else {
        const double z = nearbyint(-lo / p->scale);
        p->zero = z < 0 ? 0 : z > p->maxq ? p->maxq : (int)z;
    }
    return RC_OK;
}

static int quant_code(double x, const gq_param *p)
{
    const double q = nearbyint(x / p->scale) + p->zero;
    return q < 0 ? 0 : q > p->maxq ? p->maxq : (int)q;
}

static double dequant_code(int q, const gq_param *p)
{
    return p->scale * (double)(q - p->zero);
}

static int tensor_alloc(rc_gq_tensor *t, int64_t rows, int64_t cols, const rc_gq_scheme *s, const char *name,
                        rc_err *e)
{
    memset(t, 0, sizeof *t);
    if (s->bits != 8 && s->bits != 4)
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: %d-bit quantization is not supported (4 or 8)", name, s->bits);
    const int64_t g = s->group ? s->group : cols;
    if (rows < 1 || cols < 1 || g < 1 || cols % g)
        return rc_fail(e, RC_E_SHAPE, "%s: %lld input columns are not a whole number of groups of %lld", name,
                       (long long)cols, (long long)g);
    *t = (rc_gq_tensor){.rows = rows, .cols = cols, .bits = s->bits, .group = (int)g, .sym = s->sym,
                        .n_groups = cols / g};
    t->q = rc_calloc(rows * cols, 1, e, "quantized codes");
    t->scale = t->q ? rc_calloc(rows * t->n_groups, sizeof *t->scale, e, "quantization scales") : NULL;
    t->zero = t->scale ? rc_calloc(rows * t->n_groups, 1, e, "quantization zeros") : NULL;
    if (!t->zero) {
        rc_gq_free(t);
        return e->code;
    }
    return RC_OK;
}

static void store_param(rc_gq_tensor *t, int64_t r, int64_t g, const gq_param *p)
{
    t->scale[r * t->n_groups + g] = (float)p->scale;
    t->zero[r * t->n_groups + g] = (uint8_t)p->zero;
}

/* ---- round to nearest ---- */
int rc_gq_rtn(const float *W, int64_t rows, int64_t cols, const rc_gq_scheme *s, const char *name,
              rc_gq_tensor *out, rc_err *e)
{
    int rc = tensor_alloc(out, rows, cols, s, name, e);
    if (rc)
        return rc;
    const int64_t g = out->group;
    double *x = rc_calloc(g, sizeof *x, e, "a quantization group");
    if (!x) {
        rc_gq_free(out);
        return e->code;
    }
    for (int64_t r = 0; r < rows && !rc; r++)
        for (int64_t j = 0; j < out->n_groups && !rc; j++) {
            for (int64_t i = 0; i < g; i++)
                x[i] = W[r * cols + j * g + i];
            gq_param p;
            if ((rc = group_param(x, g, s, &p, name, e)))
                break;
            store_param(out, r, j, &p);
            for (int64_t i = 0; i < g; i++)
                out->q[r * cols + j * g + i] = (uint8_t)quant_code(x[i], &p);
        }
    free(x);
    if (rc)
        rc_gq_free(out);
    return rc;
}

/* ---- GPTQ ---- */

/* U [K, K] row-major upper triangular: the upper Cholesky factor of (H + lambda I)^-1 after the dead columns
 * of H got a unit diagonal (dead[i] = 1). Only H's upper triangle is read. */
static int hinv_factor(const double *H, int64_t K, double damp, const char *name, double *U, uint8_t *dead,
                       rc_err *e)
{
    gsl_matrix *A = gsl_matrix_alloc((size_t)K, (size_t)K);
    if (!A)
        return rc_fail(e, RC_E_NOMEM, "%s: out of memory for a %lldx%lld Hessian", name, (long long)K,
                       (long long)K);
    double mean = 0;
    int rc = RC_OK;
    for (int64_t i = 0; i < K && !rc; i++) {
        for (int64_t j = i; j < K; j++) {
            const double h = H[i * K + j];
            if (!isfinite(h)) {
                rc = rc_fail(e, RC_E_RANGE, "%s: the Hessian holds NaN/Inf at [%lld, %lld]", name, (long long)i,
                             (long long)j);
                break;
            }
            gsl_matrix_set(A, (size_t)i, (size_t)j, h);
            gsl_matrix_set(A, (size_t)j, (size_t)i, h);
        }
        dead[i] = H[i * K + i] == 0;
        if (dead[i])
            gsl_matrix_set(A, (size_t)i, (size_t)i, 1.0);
        mean += gsl_matrix_get(A, (size_t)i, (size_t)i);
    }
    const double lambda = damp * mean / (double)K;
    for (int64_t i = 0; i < K && !rc; i++)
        gsl_matrix_set(A, (size_t)i, (size_t)i, gsl_matrix_get(A, (size_t)i, (size_t)i) + lambda);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    const char *call = "gsl_linalg_cholesky_decomp1";
    int st = rc ? GSL_SUCCESS : gsl_linalg_cholesky_decomp1(A);
    if (!rc && !st) {
        call = "gsl_linalg_cholesky_invert";
        st = gsl_linalg_cholesky_invert(A);
    }
    if (!rc && !st) {
        call = "gsl_linalg_cholesky_decomp1 (of the inverse)";
        st = gsl_linalg_cholesky_decomp1(A);
    }
    gsl_set_error_handler(old);
    if (!rc && st)
        rc = rc_fail(e, RC_E_RANGE,
                     "%s: the Hessian is not positive definite after damping %g (lambda %.6g): %s: %s", name, damp,
                     lambda, call, gsl_strerror(st));
    for (int64_t i = 0; i < K && !rc; i++)
        for (int64_t j = 0; j < K; j++)
            U[i * K + j] = j >= i ? gsl_matrix_get(A, (size_t)j, (size_t)i) : 0.0; /* U = L^T */
    gsl_matrix_free(A);
    return rc;
}

int rc_gq_gptq(const float *W, int64_t rows, int64_t cols, const double *H, const rc_gq_scheme *s,
               const rc_gq_opts *o, const char *name, rc_gq_tensor *out, rc_err *e)
{
    const int64_t K = cols, N = rows, B = o->block;
    if (!(o->damp >= 0 && o->damp <= 1))
        return rc_fail(e, RC_E_USAGE, "%s: dampening %g is outside [0, 1]", name, o->damp);
    int rc = tensor_alloc(out, rows, cols, s, name, e);
    if (rc)
        return rc;
    const int64_t g = out->group;
    if (B < 1 || (g < K && B % g && g % B)) /* a group must not start inside a block and end past it */
        rc = rc_fail(e, RC_E_USAGE, "%s: block %lld is neither a multiple nor a divisor of the group %lld", name,
                     (long long)B, (long long)g);
    double *Wd = rc ? NULL : rc_calloc(N * K, sizeof *Wd, e, "GPTQ weights");
    double *U = Wd ? rc_calloc(K * K, sizeof *U, e, "GPTQ inverse Hessian factor") : NULL;
    double *err = U ? rc_calloc(N * B, sizeof *err, e, "GPTQ block errors") : NULL;
    gq_param *par = err ? rc_calloc(N, sizeof *par, e, "GPTQ group parameters") : NULL;
    double *x = par ? rc_calloc(g, sizeof *x, e, "a quantization group") : NULL;
    uint8_t *dead = x ? rc_calloc(K, 1, e, "GPTQ dead columns") : NULL;
    if (!rc && !dead)
        rc = e->code;
    if (!rc)
        rc = hinv_factor(H, K, o->damp, name, U, dead, e);
    for (int64_t i = 0; i < N * K && !rc; i++)
        Wd[i] = dead[i % K] ? 0.0 : (double)W[i];
    for (int64_t i1 = 0; i1 < K && !rc; i1 += B) {
        const int64_t i2 = i1 + B < K ? i1 + B : K;
        for (int64_t i = i1; i < i2 && !rc; i++) {
            if (i % g == 0) /* a group starts: its parameters from the weights updated so far */
                for (int64_t r = 0; r < N && !rc; r++) {
                    for (int64_t c = 0; c < g; c++)
                        x[c] = Wd[r * K + i + c];
                    if (!(rc = group_param(x, g, s, &par[r], name, e)))
                        store_param(out, r, i / g, &par[r]);
                }
            const double d = U[i * K + i];
            for (int64_t r = 0; r < N && !rc; r++) {
                double *wr = Wd + r * K;
                const int q = quant_code(wr[i], &par[r]);
                out->q[r * K + i] = (uint8_t)q;
                const double ei = (wr[i] - dequant_code(q, &par[r])) / d;
                err[r * B + (i - i1)] = ei;
                for (int64_t j = i + 1; j < i2; j++)
                    wr[j] -= ei * U[i * K + j];
            }
        }
        for (int64_t r = 0; r < N && !rc; r++) /* the lazy batch update of the columns after the block */
            for (int64_t j = i1; j < i2; j++) {
                const double ej = err[r * B + (j - i1)];
                const double *uj = U + j * K;
                double *wr = Wd + r * K;
                for (int64_t c = i2; c < K; c++)
                    wr[c] -= ej * uj[c];
            }
    }
    free(Wd);
    free(U);
    free(err);
    free(par);
    free(x);
    free(dead);
    if (rc)
        rc_gq_free(out);
    return rc;
}

/* ---- dequant and Hessians ---- */
void rc_gq_dequant(const rc_gq_tensor *t, float *W)
{
    for (int64_t r = 0; r < t->rows; r++)
        for (int64_t c = 0; c < t->cols; c++) {
            const int64_t gi = r * t->n_groups + c / t->group;
            W[r * t->cols + c] = t->scale[gi] * (float)((int)t->q[r * t->cols + c] - (int)t->zero[gi]);
        }
}

void rc_gq_free(rc_gq_tensor *t)
{
    free(t->q);
    free(t->scale);
    free(t->zero);
    memset(t, 0, sizeof *t);
}

void rc_gq_hessian_add(double *H, const float *X, int64_t T, int64_t K)
{
    for (int64_t t = 0; t < T; t++) {
        const float *x = X + t * K;
        for (int64_t i = 0; i < K; i++) {
            const double xi = x[i];
            double *h = H + i * K;
            for (int64_t j = i; j < K; j++)
                h[j] += xi * (double)x[j];
        }
    }
}
