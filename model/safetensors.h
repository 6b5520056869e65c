/* HF safetensors reader (single file or sharded index), memory-mapped, converted to fp32. */
#ifndef RC_SAFETENSORS_H
#define RC_SAFETENSORS_H

#include "tensor.h"

/* Adds every tensor of one .safetensors file to store (F32, F16, BF16 -> fp32). */
int rc_safetensors_load(const char *path, rc_tensors *store, rc_err *e);

/* An HF model folder: model.safetensors, or model.safetensors.index.json and its shards. */
int rc_safetensors_load_dir(const char *dir, rc_tensors *store, rc_err *e);

float rc_bf16_to_f32(uint16_t h);
float rc_f16_to_f32(uint16_t h);

#endif
