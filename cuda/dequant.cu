/* The cuda stage's quantized matrices: host packing and upload, and the dequant kernel (one rule per family). */
#include "dequant.h"

#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "kernels.h"

#define DQ_BLOCK 256

/* Fault hooks (harness/faults.json), one bit each, chosen on the host per launch. */
enum {
    DQ_NIBBLE_SWAP = 1,  /* 4-bit codes read high nibble first */
    DQ_ZERO_PLUS1 = 2,   /* integer zero z read as z + 1 */
    DQ_GROUP_WORD = 4,   /* group index from the word index, not the column */
    DQ_NO_SIGN_EXT = 8,  /* scale-family codes zero-extended */
};

/* One thread per packed word (per codes of one row, all in one group: group % per == 0). */
static __global__ void dequant_kernel(float *w, const uint32_t *words, const float *scale, const int16_t *zero,
                                      const float *offset, int64_t n, int64_t k, int64_t group, int bits, int affine,
                                      int faults)
{
    const int per = 32 / bits;
    const int64_t wpr = k / per, G = k / group;
    const uint32_t mask = (1u << bits) - 1u, half = 1u << (bits - 1);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n * wpr;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / wpr, wd = i % wpr;
        const int64_t g = faults & DQ_GROUP_WORD ? wd / group : wd * per / group;
        const float s = scale[r * G + g];
        float m = 0.0f;
        if (affine) {
            if (zero) {
                const int z = zero[r * G + g] + (faults & DQ_ZERO_PLUS1 ? 1 : 0);
                m = -__fmul_rn(s, (float)z); /* rc_qf_offset: the product rounded, then negated exactly */
            } else
                m = offset[r * G + g];
        }
        const uint32_t word = words[i];
        float *out = w + r * k + wd * per;
        for (int j = 0; j < per; j++) {
            const int pos = faults & DQ_NIBBLE_SWAP ? j ^ 1 : j;
            const uint32_t u = (word >> (bits * pos)) & mask;
            const int q = affine || (faults & DQ_NO_SIGN_EXT) ? (int)u : (int)(u ^ half) - (int)half;
            const float sq = __fmul_rn(s, (float)q);
            out[j] = affine ? __fadd_rn(sq, m) : sq;
        }
    }
}

extern "C" {

cudaError_t cuda_k_dequant(float *w, const cuda_qmat *q)
{
    if (!q || (q->bits != 4 && q->bits != 8) || q->n < 0 || q->k < 1 || q->group < 1 || q->k % q->group ||
        q->group % (32 / q->bits) || (q->family != RC_QF_SCALE && q->family != RC_QF_AFFINE) ||
        (q->family == RC_QF_AFFINE && !q->zero && !q->offset))
        return cudaErrorInvalidValue;
    const int64_t words = q->n * (q->k / (32 / q->bits));
    if (words == 0)
        return cudaSuccess;
    int faults = 0;
    if (q->bits == 4 && rc_fault_active("cuda_q4_nibble_swap")) /* fault: high nibble first */
        faults |= DQ_NIBBLE_SWAP;
    if (rc_fault_active("cuda_qzero_off_by_one")) /* fault: AutoGPTQ v1's +1 applied to a zero that is already z */
        faults |= DQ_ZERO_PLUS1;
    if (rc_fault_active("cuda_qscale_wrong_group")) /* fault: the group of a word is word / group */
        faults |= DQ_GROUP_WORD;
    if (rc_fault_active("cuda_q_no_sign_extend")) /* fault: signed codes read as unsigned */
        faults |= DQ_NO_SIGN_EXT;
    int64_t b = (words + DQ_BLOCK - 1) / DQ_BLOCK;
    if (b > (1 << 20))
        b = 1 << 20;
    dequant_kernel<<<(unsigned)b, DQ_BLOCK>>>(w, q->words, q->scale, q->zero, q->offset, q->n, q->k, q->group,
                                              q->bits, q->family == RC_QF_AFFINE, faults);
    return cudaGetLastError();
}

int cuda_qmat_upload(cuda_qmat *d, const rc_qtensor *t, cuda_qalloc_fn alloc, void *owner, rc_err *e)
{
    memset(d, 0, sizeof *d);
    const int per = t->bits == 4 || t->bits == 8 ? 32 / t->bits : 0;
    if (!per || t->n < 1 || t->k < 1 || t->group < 1 || t->k % t->group ||
        (t->family != RC_QF_SCALE && t->family != RC_QF_AFFINE))
        return rc_fail(e, RC_E_FORMAT, "cuda: quantized '%s': %d bits, [%lld, %lld] in groups of %lld", t->name,
                       t->bits, (long long)t->n, (long long)t->k, (long long)t->group);
    if (t->group % per)
        return rc_fail(e, RC_E_UNSUPPORTED, "cuda: quantized '%s': group %lld is not a multiple of the %d codes of "
                       "a 32-bit word at %d bits", t->name, (long long)t->group, per, t->bits);
    if (t->family == RC_QF_AFFINE && !t->zero && !t->offset)
        return rc_fail(e, RC_E_FORMAT, "cuda: quantized '%s': affine without zeros or offsets", t->name);
    const int64_t nw = t->n * (t->k / per), ng = t->n * (t->k / t->group);
    uint32_t *h = (uint32_t *)calloc((size_t)nw, sizeof *h);
    if (!h)
        return rc_fail(e, RC_E_NOMEM, "cuda: out of host memory packing '%s'", t->name);
    const uint32_t mask = (1u << t->bits) - 1u;
    for (int64_t r = 0; r < t->n; r++)
        for (int64_t c = 0; c < t->k; c++)
            h[r * (t->k / per) + c / per] |= ((uint32_t)(int32_t)t->q[r * t->k + c] & mask)
                                              << (t->bits * (int)(c % per));
    d->name = t->name;
    d->family = t->family;
    d->bits = t->bits;
    d->n = t->n;
    d->k = t->k;
    d->group = t->group;
    int rc = RC_OK;
    if (!(d->words = (uint32_t *)alloc(owner, nw, sizeof *h, e, t->name)) ||
        !(d->scale = (float *)alloc(owner, ng, sizeof(float), e, t->name)))
        rc = e->code;
    if (!rc)
        rc = CUDA_CHECK(e, cudaMemcpy(d->words, h, (size_t)nw * sizeof *h, cudaMemcpyHostToDevice));
    if (!rc)
        rc = CUDA_CHECK(e, cudaMemcpy(d->scale, t->scale, (size_t)ng * sizeof(float), cudaMemcpyHostToDevice));
    int zeros = t->family == RC_QF_AFFINE && t->zero; /* the device derives m from z only where that is m's bits */
    for (int64_t i = 0; zeros && t->offset && i < ng; i++) {
        const float m = rc_qf_offset(t->scale[i], t->zero[i]);
        zeros = !memcmp(&m, &t->offset[i], sizeof m);
    }
    if (!rc && zeros) {
        if (!(d->zero = (int16_t *)alloc(owner, ng, sizeof(int16_t), e, t->name)))
            rc = e->code;
        else
            rc = CUDA_CHECK(e, cudaMemcpy(d->zero, t->zero, (size_t)ng * sizeof(int16_t), cudaMemcpyHostToDevice));
    } else if (!rc && t->family == RC_QF_AFFINE) {
        if (!(d->offset = (float *)alloc(owner, ng, sizeof(float), e, t->name)))
            rc = e->code;
        else
            rc = CUDA_CHECK(e, cudaMemcpy(d->offset, t->offset, (size_t)ng * sizeof(float), cudaMemcpyHostToDevice));
    }
    free(h);
    return rc;
}

} /* extern "C" */
