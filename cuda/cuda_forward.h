/* The kernel link: a plain fp32 CUDA forward over the whole prompt (no cache), every ref probe reported. */
#ifndef CUDA_FORWARD_H
#define CUDA_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "model.h"

typedef struct cuda_fwd cuda_fwd;

extern const rc_caps cuda_fwd_caps;

/* 1 if device is a usable GPU; else 0 and the reason (no device, driver error) in why. */
int cuda_fwd_available(int device, char *why, size_t cap);
/* Checks m against cuda_fwd_caps, then uploads its weights to device once. m must outlive the handle. */
int cuda_fwd_open(cuda_fwd **out, const rc_model *m, int device, rc_err *e);
/* Runs ids[T] through the model: logits [T, V] to the host if not NULL; probes through sink (may be NULL),
 * each copied to the host only when the sink wants it. */
int cuda_fwd_forward(cuda_fwd *f, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink,
                     rc_err *e);
void cuda_fwd_close(cuda_fwd *f);

#ifdef __cplusplus
}
#endif

#endif
