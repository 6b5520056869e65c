/* The quantize command's output: an HF GPTQ checkpoint folder written by model/quant's writer (rc_gptq_write)
 * into a temporary folder beside the target, loaded back and checked, then renamed into place. */
#ifndef RCQ_WRITE_GPTQ_H
#define RCQ_WRITE_GPTQ_H

#include "quantize_model.h"

/* The folder's provenance (quantize.json): method "rtn" or "gptq", the source path, the GPTQ options. */
typedef struct rcq_meta {
    const char *config_json, *method, *source; /* config_json: the source model's HF config text */
    double damp;
    int block;
    int64_t calib_tokens;
} rcq_meta;

/* Writes dir (which must not exist): q's matrices in the GPTQ layout, every other tensor of m's store as F32,
 * config.json with quantization_config, quantize.json. Before the rename the folder is loaded back (ref's
 * dequant at load) and every tensor must equal m's, bit for bit. */
int rcq_write_gptq(const char *dir, const rc_model *m, const rcq_model *q, const rcq_opts *o, const rcq_meta *meta,
                   rc_err *e);

#endif
