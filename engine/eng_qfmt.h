/* How the engine stores one quantized matrix W [N, K] in a layer blob: codes packed (int8: one byte each; int4: two
 * per byte, low nibble = the even k), then the scales f32 [N, K/g], then (affine family) the offsets f32 [N, K/g],
 * each part 256-byte aligned. Plain C, inline: the host store and the kernels share it. */
#ifndef ENG_QFMT_H
#define ENG_QFMT_H

#include <stdint.h>

/* family: 0 = not quantized (the store's bf16 / f32), else model/quant.h's RC_QF_SCALE (1) / RC_QF_AFFINE (2) */
typedef struct eng_qfmt {
    int family, bits, group;
} eng_qfmt;

#define ENG_QALIGN 256

static inline int64_t eng_qalign(int64_t x) { return (x + ENG_QALIGN - 1) / ENG_QALIGN * ENG_QALIGN; }
static inline int64_t eng_qcode_bytes(int64_t N, int64_t K, const eng_qfmt *q) { return N * K * q->bits / 8; }
static inline int64_t eng_qscale_off(int64_t N, int64_t K, const eng_qfmt *q) { return eng_qalign(eng_qcode_bytes(N, K, q)); }
static inline int64_t eng_qoffset_off(int64_t N, int64_t K, const eng_qfmt *q)
{
    return eng_qscale_off(N, K, q) + eng_qalign(N * (K / q->group) * 4);
}
static inline int64_t eng_qmat_bytes(int64_t N, int64_t K, const eng_qfmt *q)
{
    return eng_qoffset_off(N, K, q) + (q->family == 2 ? N * (K / q->group) * 4 : 0);
}
/* Weights per 16-byte load (the kernels' unit): a group must hold a whole number of them. */
static inline int eng_qper16(const eng_qfmt *q) { return 128 / q->bits; }
/* 1 if the engine runs q at width K: (scale, 8 or 4 bits) or (affine, 4 bits), the group a multiple of the weights
 * in 16 bytes and a divisor of K. */
static inline int eng_qfmt_ok(const eng_qfmt *q, int64_t K)
{
    if (!q || K < 1 || !((q->family == 1 && (q->bits == 8 || q->bits == 4)) || (q->family == 2 && q->bits == 4)))
        return 0;
    return q->group >= eng_qper16(q) && q->group % eng_qper16(q) == 0 && K % q->group == 0;
}

#endif
