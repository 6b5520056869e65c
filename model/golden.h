/* Reader for golden HDF5 files (format: golden/README.md). */
#ifndef RC_GOLDEN_H
#define RC_GOLDEN_H

#include <stdint.h>

#include "err.h"
#include "tensor.h"

#define RC_GOLDEN_FORMAT_VERSION 1

typedef struct rc_golden {
    char *path;
    /* provenance (root attributes) */
    int64_t format_version, seed;
    char *preset, *model_type, *generator, *regenerate, *created;
    char *transformers_version, *torch_version;
    char *config_json;
    /* prompt */
    int32_t *ids;
    int64_t n_ids;
    /* probes in data-flow order (probe_order) */
    rc_tensors probes;
    /* weights by HF name, or (a golden of an existing checkpoint) a reference to the weights file:
     * its base name, size and sha256 (hex); the file's own description must equal config_json */
    rc_tensors weights;
    char *weights_file, *weights_sha256;
    int64_t weights_size;
    /* greedy continuation: tokens [n_steps], logits [n_steps, vocab] */
    int32_t *greedy_tokens;
    float *greedy_logits;
    int64_t n_steps, vocab;
} rc_golden;

enum { RC_GOLDEN_WEIGHTS = 1, RC_GOLDEN_PROBES = 2, RC_GOLDEN_ALL = 3 };

/* Opens and validates a golden; 'what' selects the large parts to load. A regular file only; when the
 * folder's SHA256SUMS lists it, its bytes must match before HDF5 parses them; an unlisted golden gets one
 * warning line on stderr and is parsed in a child process first (isolate.h), so that a file on which libhdf5
 * crashes or loops is refused (RC_E_FORMAT) instead of taking the process down. */
int rc_golden_load(const char *path, int what, rc_golden *g, rc_err *e);
/* The same from the file's bytes in memory (no checksum: the fuzz target's entry); path names it in messages. */
int rc_golden_load_image(const void *data, int64_t size, const char *path, int what, rc_golden *g, rc_err *e);
void rc_golden_free(rc_golden *g);

#endif
