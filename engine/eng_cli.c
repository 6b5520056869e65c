/* The engine command's shared command-line pieces (see eng_cli.h): option parsing, the clock and the
 * benchmark shapes, used by both main.c and bench.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_cli.h"

double eng_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int eng_cli_int(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "engine: error: %s needs an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

static int parse_bytes(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0))
        return 0;
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mul = 1048576.0, end++;
    else if (*end == 'G' || *end == 'g') mul = 1073741824.0, end++;
    else if (*end == 'T' || *end == 't') mul = 1099511627776.0, end++;
    if (*end == 'i' && mul > 1) end++;
    if (*end == 'B') end++;
    if (*end || v * mul > 9.0e18)
        return 0;
    *out = (int64_t)(v * mul);
    return 1;
}

int eng_cli_option(int argc, char **argv, int *i, eng_opts *o, int *f32, int *mem_flag)
{
    const char *a = argv[*i];
    const int has = *i + 1 < argc;
    long v;
    if (!strcmp(a, "--f32")) {
        *f32 = 1;
        return 1;
    }
    if (!strcmp(a, "--kv-offload")) {
        o->kv_offload = 1;
        *mem_flag = 1;
        return 1;
    }
    if (!strcmp(a, "--vocab-on-cpu")) {
        o->vocab_on_cpu = 1;
        *mem_flag = 1;
        return 1;
    }
    if (!strcmp(a, "--no-graph")) {
        o->no_graph = 1;
        return 1;
    }
    if (!has)
        return 0;
    const char *val = argv[*i + 1];
    if (!strcmp(a, "--resident-layers")) {
        if (!eng_cli_int(a, val, 0, 1 << 20, &v))
            return -1;
        o->resident_layers = (int)v;
        *mem_flag = 1;
    } else if (!strcmp(a, "--kv-tile")) {
        if (!eng_cli_int(a, val, 1, 1 << 16, &v))
            return -1;
        o->kv_tile = (int)v;
    } else if (!strcmp(a, "--vram-budget")) {
        if (!parse_bytes(val, &o->vram_budget)) {
            fprintf(stderr, "engine: error: --vram-budget needs a byte count (suffix K, M, G), got '%s'\n", val);
            return -1;
        }
        *mem_flag = 1;
    } else if (!strcmp(a, "--max-ctx")) {
        if (!eng_cli_int(a, val, 1, 1L << 30, &v))
            return -1;
        o->max_ctx = (int)v;
    } else if (!strcmp(a, "--prefill-chunk")) {
        if (!eng_cli_int(a, val, 1, 1 << 20, &v))
            return -1;
        o->prefill_chunk = (int)v;
    } else if (!strcmp(a, "--threads")) {
        if (!eng_cli_int(a, val, 0, 1024, &v))
            return -1;
        o->threads = (int)v;
    } else if (!strcmp(a, "--device")) {
        if (!eng_cli_int(a, val, 0, 1024, &v))
            return -1;
        o->device = (int)v;
    } else
        return 0;
    (*i)++;
    return 1;
}

typedef struct shape {
    const char *name;
    int hidden, layers, heads, kv_heads, head_dim, inter, vocab, tied;
    double theta;
} shape;

static const shape shapes[] = {
    {"llama3-8b", 4096, 32, 32, 8, 128, 14336, 128256, 0, 500000.0},
    {"llama3-1b", 2048, 16, 32, 8, 64, 8192, 128256, 1, 500000.0},
    {"tiny", 256, 4, 8, 2, 32, 512, 1000, 0, 10000.0},
};

/* Qwen3.5 hybrids (qwen3_5_text): full attention every 4th layer, gated delta net layers between, RoPE on a
 * quarter of each head. qwen3.5-9b: Qwen's model card for Qwen3.5-9B and the config.json of checkpoints derived
 * from it (hidden 4096, 32 layers as 8 x (3 DeltaNet + 1 attention), attention 16 / 4 heads of 256, DeltaNet 16
 * q/k heads and 32 v heads of 128, conv 4, FFN 12288, vocab 248320, rope_theta 1e7, untied lm_head). */
typedef struct hybrid_shape {
    const char *name;
    int hidden, layers, heads, kv_heads, head_dim, inter, vocab, lk_heads, lv_heads, lk_dim, lv_dim;
    double theta;
} hybrid_shape;

static const hybrid_shape hybrid_shapes[] = {
    {"qwen3.5-9b", 4096, 32, 16, 4, 256, 12288, 248320, 16, 32, 128, 128, 10000000.0},
    {"tiny-hybrid", 256, 8, 8, 2, 32, 512, 1000, 2, 4, 32, 32, 10000.0},
};

/* Gemma 4 (gemma4_text): sliding-window layers (ring KV) with full-attention layers between, two head sizes,
 * proportional RoPE on a quarter of the full layers' heads, sandwich norms, GELU-tanh, final softcap 30.
 * gemma4-12b: no Gemma 4 12B config.json is in our stored references, so the sizes are the published Gemma 3 12B
 * config's (google/gemma-3-12b-pt: hidden 3840, 48 layers, 16 / 8 heads of 256, FFN 15360, vocab 262144, window
 * 1024, every 6th layer full) with the Gemma 4 conventions of the published gemma-4 configs (full layers' heads of
 * global_head_dim 512, rope_parameters per layer type, no PLE above the E-sizes: hidden_size_per_layer_input 0).
 * tiny-gemma: the identity suite's 7-layer stack (S S F S S S F), window 12, PLE of 16, so slots wrap over mixed
 * layers and a 70-token prompt wraps every ring. */
typedef struct gemma_shape {
    const char *name;
    int hidden, layers, heads, kv_heads, head_dim, global_head_dim, inter, vocab, window, ple;
    const char *layer_types; /* JSON array, or NULL for HF's default (every 6th layer full, the last full) */
} gemma_shape;

static const gemma_shape gemma_shapes[] = {
    {"gemma4-12b", 3840, 48, 16, 8, 256, 512, 15360, 262144, 1024, 0, NULL},
    {"tiny-gemma", 256, 7, 8, 2, 32, 64, 512, 1000, 12, 16,
     "[\"sliding_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", "
     "\"sliding_attention\", \"sliding_attention\", \"full_attention\"]"},
};

static int gemma_shape_json(const gemma_shape *g, char *json, size_t cap)
{
    char lt[512] = "";
    if (g->layer_types)
        snprintf(lt, sizeof lt, "\"layer_types\": %s, ", g->layer_types);
    return snprintf(json, cap,
                    "{\"model_type\": \"gemma4_text\", \"vocab_size\": %d, \"hidden_size\": %d, \"intermediate_size\": %d, "
                    "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
                    "\"global_head_dim\": %d, \"sliding_window\": %d, %s\"hidden_size_per_layer_input\": %d, "
                    "\"vocab_size_per_layer_input\": %d, \"final_logit_softcapping\": 30.0, \"rms_norm_eps\": 1e-6, "
                    "\"hidden_activation\": \"gelu_pytorch_tanh\", \"tie_word_embeddings\": true, "
                    "\"rope_parameters\": {\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}, "
                    "\"full_attention\": {\"rope_type\": \"proportional\", \"partial_rotary_factor\": 0.25, "
                    "\"rope_theta\": 1000000.0}}}",
                    g->vocab, g->hidden, g->inter, g->layers, g->heads, g->kv_heads, g->head_dim, g->global_head_dim,
                    g->window, lt, g->ple, g->vocab);
}

int eng_shape_json(const char *name, char *json, size_t cap, rc_err *e)
{
    const shape *sh = NULL;
    const hybrid_shape *hy = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(shapes[i].name, name))
            sh = &shapes[i];
    for (size_t i = 0; i < sizeof hybrid_shapes / sizeof hybrid_shapes[0]; i++)
        if (!strcmp(hybrid_shapes[i].name, name))
            hy = &hybrid_shapes[i];
    int n;
    for (size_t i = 0; i < sizeof gemma_shapes / sizeof gemma_shapes[0]; i++)
        if (!strcmp(gemma_shapes[i].name, name)) {
            n = gemma_shape_json(&gemma_shapes[i], json, cap);
            return n < 0 || (size_t)n >= cap ? rc_fail(e, RC_E_USAGE, "shape '%s': config text too long", name) : RC_OK;
        }
    if (hy)
        n = snprintf(json, cap,
                     "{\"model_type\": \"qwen3_5_text\", \"vocab_size\": %d, \"hidden_size\": %d, \"intermediate_size\": %d, "
                     "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
                     "\"linear_num_key_heads\": %d, \"linear_num_value_heads\": %d, \"linear_key_head_dim\": %d, "
                     "\"linear_value_head_dim\": %d, \"linear_conv_kernel_dim\": 4, \"full_attention_interval\": 4, "
                     "\"rms_norm_eps\": 1e-6, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, "
                     "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": %.1f, \"partial_rotary_factor\": 0.25}}",
                     hy->vocab, hy->hidden, hy->inter, hy->layers, hy->heads, hy->kv_heads, hy->head_dim, hy->lk_heads,
                     hy->lv_heads, hy->lk_dim, hy->lv_dim, hy->theta);
    else if (sh)
        n = snprintf(json, cap,
                     "{\"model_type\": \"llama\", \"vocab_size\": %d, \"hidden_size\": %d, \"intermediate_size\": %d, "
                     "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
                     "\"rms_norm_eps\": 1e-5, \"hidden_act\": \"silu\", \"tie_word_embeddings\": %s, "
                     "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": %.1f}}",
                     sh->vocab, sh->hidden, sh->inter, sh->layers, sh->heads, sh->kv_heads, sh->head_dim,
                     sh->tied ? "true" : "false", sh->theta);
    else
        return rc_fail(e, RC_E_USAGE, "unknown --shape '%s' (llama3-8b, llama3-1b, tiny, qwen3.5-9b, tiny-hybrid, "
                       "gemma4-12b, tiny-gemma)",
                       name);
    return n < 0 || (size_t)n >= cap ? rc_fail(e, RC_E_USAGE, "shape '%s': config text too long", name) : RC_OK;
}

int eng_shape_config(const char *name, rc_config *cfg, rc_err *e)
{
    char json[2048];
    int rc = eng_shape_json(name, json, sizeof json, e);
    return rc ? rc : rc_config_parse(json, cfg, e);
}
