/* RoPE as the model defines it, shared by every stage: the fp32 inverse frequencies of each rope type
 * (default, proportional, linear, llama3, yarn) exactly as HF forms them, and the cos/sin rows. */
#ifndef RC_ROPE_H
#define RC_ROPE_H

#include <stdint.h>

#include "config.h"

/* rot_dim / 2 is at most this: rc_config_parse bounds head_dim by 4096. */
#define RC_ROPE_MAX_HALF 2048

/* inv_freq[rot_dim/2] in fp32, bit for bit HF's buffer (zeros past n_freq). */
void rc_rope_inv_freq(float *inv, const rc_rope_desc *r);

/* The fp32 multiplier HF applies to cos and sin (yarn's attention factor; 1 for every other type). */
float rc_rope_attn_factor(const rc_rope_desc *r);

/* cos/sin [T, rot_dim] for positions pos0..pos0+T-1: angle = fl32(fl32(p) * inv_freq), emb = [a, a],
 * cos = fl32(fl32(cos a) * attn_factor) (likewise sin). */
void rc_rope_table(float *cos_t, float *sin_t, const float *inv, const rc_rope_desc *r, int64_t pos0, int64_t T);

#endif
