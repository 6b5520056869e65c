/* A loaded model: description + fp32 weights bound by name. Every stage builds from this. */
#ifndef RC_MODEL_H
#define RC_MODEL_H

#include "config.h"
#include "golden.h"
#include "quant.h"
#include "tensor.h"
#include "weights.h"

typedef struct rc_model {
    rc_config cfg;
    rc_tensors store; /* owns the fp32 data */
    rc_weights w;
    rc_quant quant; /* a quantized checkpoint's matrices (codes, scales); store holds their exact fp32 dequant */
} rc_model;

/* From a golden (its config_json and /weights); takes the golden's weights. A golden that references its
 * weights file (weights_file, weights_size, weights_sha256) loads that file from the weights search path
 * (model/weights_ref.h) and refuses it when its description differs from config_json. */
int rc_model_from_golden(rc_model *m, rc_golden *g, rc_err *e);
/* From an HF folder: config.json + safetensors; a GPTQ checkpoint (config.json's quantization_config, or
 * quantize_config.json) is dequantized exactly to fp32 at load (model/gptq_layout.h), its matrices kept in quant.
 * A golden may reference a .safetensors file likewise, quantized by its config_json's quantization_config. */
int rc_model_load_dir(rc_model *m, const char *dir, rc_err *e);
/* From a GGUF file (llama architecture; model/gguf.h). */
int rc_model_load_gguf(rc_model *m, const char *path, rc_err *e);
/* A golden .h5 file, a GGUF file or an HF folder, whichever path is. */
int rc_model_load(rc_model *m, const char *path, rc_err *e);
void rc_model_free(rc_model *m);

/* Checks token ids are in [0, vocab). */
int rc_model_check_ids(const rc_model *m, const int32_t *ids, int64_t n, rc_err *e);

#endif
