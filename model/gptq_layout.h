/* The HF GPTQ checkpoint layout (safetensors + quantization_config): reader, packer and writer, onto the
 * families of model/quant.h. Layout and refusals: docs/quantization.md. */
#ifndef RC_GPTQ_LAYOUT_H
#define RC_GPTQ_LAYOUT_H

#include <stdint.h>

#include "quant.h"
#include "tensor.h"

/* For a weight "P.weight" [N, K]: P.qweight int32 [K*bits/32, N] (32/bits codes along K per word, low bits
 * first), P.qzeros int32 [K/g, N*bits/32] (along N), P.scales fp16 [K/g, N], P.g_idx int32 [K] (= k / g),
 * optional P.bias. quantization_config: quant_method "gptq", bits, group_size, desc_act, sym,
 * checkpoint_format ("gptq": stored zero = z - 1; "gptq_v2": stored zero = z). */

/* Reads the GPTQ quantization config of json_text: config.json's "quantization_config" object, or (a
 * quantize_config.json) the root object itself. *found = 0 (RC_OK) when there is none or it is a GGUF export's
 * record. Refuses by name (RC_E_UNSUPPORTED): a quant_method other than gptq/gguf, desc_act true, bits other
 * than 4/8, asymmetric 8-bit, a checkpoint_format other than gptq/gptq_v2, a pack_dtype other than int32. */
int rc_gptq_config_parse(const char *json_text, const char *what, rc_quant_scheme *s, int *found, rc_err *e);
/* The quantization_config object the writer records for s (cJSON; the caller deletes it). */
struct cJSON *rc_gptq_config_json(const rc_quant_scheme *s);

/* Replaces every GPTQ group (P.qweight, P.qzeros, P.scales, P.g_idx) of store by the fp32 P.weight it
 * dequantizes to (the rule above), keeping the rc_qtensor in q. Refuses by name: a layout that disagrees with
 * s (shapes, bits, a group size that does not divide K), a non-trivial g_idx (act-order), a zero that the
 * symmetric scheme does not allow, a quantized tensor the policy keeps in full precision. */
int rc_gptq_dequant_store(rc_tensors *store, const rc_quant_scheme *s, rc_quant *q, const char *what, rc_err *e);

/* Packs t into the GPTQ tensors (malloc'd): qweight [K*bits/32 * N], qzeros [K/g * N*bits/32], scales (fp16
 * bits) [K/g * N], g_idx [K]. The scheme decides the zero convention (v1: z - 1, refused when z = 0). */
typedef struct rc_gptq_packed {
    int32_t *qweight, *qzeros, *g_idx;
    uint16_t *scales;
    int64_t rows_w, rows_z, cols_z, groups; /* qweight [rows_w, N], qzeros [groups, cols_z], scales [groups, N] */
} rc_gptq_packed;
int rc_gptq_pack(const rc_qtensor *t, const rc_quant_scheme *s, rc_gptq_packed *p, rc_err *e);
void rc_gptq_packed_free(rc_gptq_packed *p);

/* Writes an HF GPTQ checkpoint folder dir (created if missing): model.safetensors (the quantized matrices in the
 * GPTQ layout, every tensor of full as F32), config.json (config_json, the model's HF config text, with
 * quantization_config set to the scheme) and quantize_config.json. Each file is written to a temporary name
 * and renamed into place. Every scale must be exactly representable in fp16 (the layout stores fp16): a scale
 * that is not is refused (RC_E_RANGE) naming the tensor. full: the tensors kept in full precision (by HF name);
 * q[nq]: the quantized ones (their names end in .weight). */
int rc_gptq_write(const char *dir, const char *config_json, const rc_quant_scheme *s, const rc_tensors *full,
                  const rc_qtensor *q, int nq, rc_err *e);

#endif
