/* HF safetensors reader (single file or sharded index), memory-mapped, converted to fp32. */
#ifndef RC_SAFETENSORS_H
#define RC_SAFETENSORS_H

#include "tensor.h"

/* Adds every tensor of one .safetensors file to store (F32, F16, BF16 -> fp32; I32 kept as its int32 values,
 * the tensor marked is_i32: a quantized checkpoint's packed codes, which the weight binding refuses). */
int rc_safetensors_load(const char *path, rc_tensors *store, rc_err *e);

/* An HF model folder: model.safetensors, or model.safetensors.index.json and its shards. */
int rc_safetensors_load_dir(const char *dir, rc_tensors *store, rc_err *e);

float rc_bf16_to_f32(uint16_t h);
float rc_f16_to_f32(uint16_t h);
/* fp32 -> fp16 bits, rounded to nearest even (overflow to inf). */
uint16_t rc_f32_to_f16(float f);

/* One tensor to write: dtype "F32", "F16" or "I32", data little-endian (this host's order). */
typedef struct rc_st_entry {
    const char *name, *dtype;
    int ndim;
    int64_t shape[RC_MAX_DIMS];
    const void *data;
} rc_st_entry;

/* Writes a .safetensors file of the n tensors (in the order given) to a temporary name beside path, then
 * renames it into place: path is never half-written. */
int rc_safetensors_write(const char *path, const rc_st_entry *t, int n, rc_err *e);

#endif
