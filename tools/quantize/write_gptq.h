/* The quantize command's output: an HF GPTQ checkpoint folder (model.safetensors + config.json), written into
 * a temporary folder beside the target and renamed into place. Stands in for model/quant's writer
 * (rc_gptq_write) until that lands; the layout is the one docs describe there: gptq_v2 zeros (stored as is). */
#ifndef RCQ_WRITE_GPTQ_H
#define RCQ_WRITE_GPTQ_H

#include "quantize_model.h"

/* The folder provenance: config_json is the source model's HF config text; method "rtn" or "gptq". */
typedef struct rcq_meta {
    const char *config_json, *method, *source;
    double damp;
    int block;
    int64_t calib_tokens;
} rcq_meta;

/* Writes dir (which must not exist): the quantized matrices of q in the GPTQ layout, every other tensor of m's
 * store as F32. */
int rcq_write_gptq(const char *dir, const rc_model *m, const rcq_model *q, const rcq_opts *o, const rcq_meta *meta,
                   rc_err *e);

#endif
