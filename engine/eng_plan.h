/* Device-memory plan of the engine: what each memory mode holds on the GPU, and the choice of modes that
 * fits a --vram-budget. Pure arithmetic; eng_open allocates exactly what eng_plan_bytes counts. */
#ifndef ENG_PLAN_H
#define ENG_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define ENG_ALL_LAYERS (-1)

typedef struct eng_plan_sizes {
    int n_layers;
    int64_t layer_total, layer_max; /* bytes of every layer blob, of the largest */
    int64_t vocab_dev;              /* embedding (+ untied lm_head) on the device */
    int64_t logits_dev;             /* [V] f32 logits buffer, only with the vocab on the device */
    int64_t kv_resident;            /* the whole KV cache for max_ctx */
    int64_t kv_offload;             /* offload: two tile buffers, new rows, online-softmax state */
    int64_t state;                  /* recurrent (GDN) layers' states: on the device in every mode */
    int64_t workspace;              /* activations of one prefill chunk, RoPE rows, ids */
} eng_plan_sizes;

typedef struct eng_plan {
    int resident_layers; /* ENG_ALL_LAYERS, 0 (zero-copy from pinned host memory) or N weight slots */
    int kv_offload, vocab_on_cpu;
    int64_t weights, kv, workspace, total; /* device bytes */
} eng_plan;

/* Device bytes of one choice of modes. */
void eng_plan_bytes(const eng_plan_sizes *s, int resident_layers, int kv_offload, int vocab_on_cpu, eng_plan *p);
/* The fastest choice within budget bytes (rough model: bytes crossing the host link per token). fix_resident
 * (-2 = free), fix_offload, fix_vocab (-1 = free) pin choices the user made. RC_E_NOMEM when nothing fits. */
int eng_plan_choose(const eng_plan_sizes *s, int64_t budget, int fix_resident, int fix_offload, int fix_vocab,
                    eng_plan *out, rc_err *e);
/* "layers 32/32 resident, KV on device, vocab on device: weights 15.0 GiB + KV 4.0 GiB + ..." */
const char *eng_plan_describe(const eng_plan *p, int n_layers, char *buf, size_t cap);
/* "1.50 GiB" */
const char *eng_bytes_str(int64_t b, char *buf, size_t cap);

#endif
