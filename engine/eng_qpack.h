/* The engine's packed quantized matrices on the host (layout: eng_qfmt.h): rows packed from a model's rc_qtensor,
 * random ones for benchmarks, the host dequant and the host model of k_qgemv's summation order. */
#ifndef ENG_QPACK_H
#define ENG_QPACK_H

#include <stdint.h>

#include "eng_qfmt.h"
#include "quant.h"

/* The engine format of t (family, bits, group); RC_E_UNSUPPORTED naming t when the kernels cannot run it. */
int eng_qfmt_of(const rc_qtensor *t, eng_qfmt *q, rc_err *e);
/* Rows [trow0, trow0 + n) of t into rows [row0, row0 + n) of the packed matrix mat [N, K] (t's format). */
void eng_qpack_rows(void *mat, int64_t N, int64_t K, const eng_qfmt *q, int64_t row0, const rc_qtensor *t,
                    int64_t trow0, int64_t n);
/* Rows [r0, r1) of a random packed matrix: codes uniform over the family's range, scales (and offsets) such that
 * the weights have a std of about 0.02; seeded per row, so any split of the rows gives the same bits. */
void eng_qsynth_rows(void *mat, int64_t N, int64_t K, const eng_qfmt *q, uint64_t seed, int64_t r0, int64_t r1);
/* out[K] = row r dequantized by model/quant.h's rules. */
void eng_qdequant_row(const void *mat, int64_t N, int64_t K, const eng_qfmt *q, int64_t r, float *out);
/* Row r of W x in k_qgemv / k_qgemv_s's order (without bias / residual): those kernels' result bit for bit (not
 * k_qgemv_mma's: eng_qgemv.h). */
float eng_qdot_model(const void *mat, int64_t N, int64_t K, const eng_qfmt *q, int64_t r, const float *x);
/* --weights NAME: "bf16" (nothing quantized: *on = 0) or a model/quant.h scheme ("int8", "int4-g128", ...) as an
 * engine format (group 0: one group per row, resolved per matrix); *lm_head (if not NULL) = the scheme's lm_head flag
 * ("int4-g128+lm_head"). RC_E_USAGE naming the known ones otherwise. */
int eng_qfmt_parse(const char *name, eng_qfmt *q, int *on, int *lm_head, rc_err *e);
/* "int4 g128 affine", "int8 per-row scale" into buf. */
const char *eng_qfmt_str(const eng_qfmt *q, int64_t K, char *buf, int cap);

#endif
