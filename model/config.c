/* HF config.json -> rc_config. Every model_type special case of the project lives here. */
#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields of PretrainedConfig and generation that have no effect on an eval forward pass. */
static const char *const generic_ignored[] = {
    "architectures", "dtype", "torch_dtype", "transformers_version", "_name_or_path", "model_type",
    "use_cache", "output_hidden_states", "output_attentions", "return_dict", "id2label", "label2id",
    "problem_type", "tokenizer_class", "prefix", "bos_token_id", "eos_token_id", "pad_token_id",
    "sep_token_id", "decoder_start_token_id", "task_specific_params", "chunk_size_feed_forward",
    "is_encoder_decoder", "is_decoder", "add_cross_attention", "cross_attention_hidden_size",
    "tie_encoder_decoder", "finetuning_task", "initializer_range", "attention_dropout",
    "max_position_embeddings", "torchscript", "pruned_heads", "tf_legacy_loss", "use_bfloat16",
    "output_scores", "return_dict_in_generate", "_attn_implementation_autoset", "_commit_hash",
    "pretraining_tp", NULL,
};

typedef struct parse_ctx {
    const cJSON *root;
    const char *model_type;
    const char *used[96];
    int n_used;
    rc_err *e;
} parse_ctx;

static void mark(parse_ctx *p, const char *key)
{
    if (p->n_used < (int)(sizeof p->used / sizeof p->used[0]))
        p->used[p->n_used++] = key;
}

static void value_str(const cJSON *it, char *buf, size_t cap)
{
    char *s = it ? cJSON_PrintUnformatted(it) : NULL;
    snprintf(buf, cap, "%.80s%s", s ? s : "?", s && strlen(s) > 80 ? "..." : "");
    free(s);
}

static const cJSON *field(parse_ctx *p, const char *key)
{
    mark(p, key);
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(p->root, key);
    return (it && !cJSON_IsNull(it)) ? it : NULL;
}

static int bad(parse_ctx *p, const char *key, const cJSON *it, const char *why)
{
    char v[96];
    value_str(it, v, sizeof v);
    return rc_fail(p->e, RC_E_UNSUPPORTED, "config field '%s' = %s: %s (model_type '%s')", key, v, why,
                   p->model_type);
}

/* Integer field: missing/null -> def (def < 0 means required). */
static int get_int(parse_ctx *p, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *it = field(p, key);
    if (!it) {
        if (def < 0)
            return rc_fail(p->e, RC_E_FORMAT, "config field '%s' is required (model_type '%s')", key,
                           p->model_type);
        *out = def;
        return RC_OK;
    }
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble))
        return bad(p, key, it, "expected an integer");
    if (it->valuedouble < (double)lo || it->valuedouble > (double)hi)
        return bad(p, key, it, "out of the supported range");
    *out = (int64_t)it->valuedouble;
    return RC_OK;
}

static int get_num(parse_ctx *p, const char *key, double def, double *out)
{
    const cJSON *it = field(p, key);
    if (!it) {
        *out = def;
        return RC_OK;
    }
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return bad(p, key, it, "expected a finite number");
    *out = it->valuedouble;
    return RC_OK;
}

static int get_bool(parse_ctx *p, const char *key, int def, int *out)
{
    const cJSON *it = field(p, key);
    if (!it) {
        *out = def;
        return RC_OK;
    }
    if (!cJSON_IsBool(it))
        return bad(p, key, it, "expected true or false");
    *out = cJSON_IsTrue(it);
    return RC_OK;
}

/* A field whose only supported value is "off" (false / null / absent). */
static int require_off(parse_ctx *p, const char *key)
{
    const cJSON *it = field(p, key);
    if (it && !cJSON_IsFalse(it))
        return bad(p, key, it, "not implemented");
    return RC_OK;
}

static int get_act(parse_ctx *p, const char *key, const char *def, rc_act *out)
{
    const cJSON *it = field(p, key);
    const char *s = it ? cJSON_GetStringValue(it) : def;
    if (!s)
        return bad(p, key, it, "expected a string");
    if (strcmp(s, "silu") == 0 || strcmp(s, "swish") == 0)
        *out = RC_ACT_SILU;
    else if (strcmp(s, "gelu_pytorch_tanh") == 0)
        *out = RC_ACT_GELU_TANH;
    else
        return bad(p, key, it, "activation not implemented (silu, gelu_pytorch_tanh)");
    return RC_OK;
}

/* rope_parameters (or legacy rope_scaling / rope_theta) for a single-table model. */
static int parse_rope_default(parse_ctx *p, rc_rope_desc *r, int head_dim, double default_theta)
{
    const cJSON *params = field(p, "rope_parameters");
    const cJSON *legacy = field(p, "rope_scaling");
    double theta;
    int rc = get_num(p, "rope_theta", default_theta, &theta);
    if (rc)
        return rc;
    if (legacy) {
        if (params && !cJSON_Compare(params, legacy, 1))
            return bad(p, "rope_scaling", legacy, "conflicts with rope_parameters");
        params = legacy;
    }
    const char *type = "default";
    if (params) {
        if (!cJSON_IsObject(params))
            return bad(p, "rope_parameters", params, "expected an object");
        const cJSON *it;
        cJSON_ArrayForEach(it, params) {
            const char *k = it->string;
            if (strcmp(k, "rope_type") == 0 || strcmp(k, "type") == 0) {
                if (!cJSON_IsString(it))
                    return bad(p, "rope_parameters.rope_type", it, "expected a string");
                type = it->valuestring;
            } else if (strcmp(k, "rope_theta") == 0) {
                if (!cJSON_IsNumber(it) || !(it->valuedouble > 0))
                    return bad(p, "rope_parameters.rope_theta", it, "expected a positive number");
                theta = it->valuedouble;
            } else {
                char key[96];
                snprintf(key, sizeof key, "rope_parameters.%s", k);
                return bad(p, key, it, "not implemented");
            }
        }
    }
    if (strcmp(type, "default") != 0) {
        char key[] = "rope_parameters.rope_type";
        cJSON *s = cJSON_CreateString(type);
        int r2 = bad(p, key, s, "rope type not implemented (default)");
        cJSON_Delete(s);
        return r2;
    }
    if (!(theta > 0))
        return rc_fail(p->e, RC_E_UNSUPPORTED, "config field 'rope_theta' = %g: must be positive", theta);
    memset(r, 0, sizeof *r);
    snprintf(r->kind, sizeof r->kind, "all");
    r->type = RC_ROPE_DEFAULT;
    r->theta = theta;
    r->factor = 1.0;
    r->head_dim = head_dim;
    r->rot_dim = head_dim;
    r->n_freq = head_dim / 2;
    r->exp_den = head_dim;
    return RC_OK;
}

/* layer_types, when given, must list n entries each equal to "full_attention". */
static int require_all_full(parse_ctx *p, int64_t n)
{
    const cJSON *lt = field(p, "layer_types");
    if (!lt)
        return RC_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != n)
        return bad(p, "layer_types", lt, "expected one entry per layer");
    const cJSON *it;
    cJSON_ArrayForEach(it, lt) {
        if (!cJSON_IsString(it) || strcmp(it->valuestring, "full_attention") != 0)
            return bad(p, "layer_types", it, "layer type not implemented for this model_type");
    }
    return RC_OK;
}

/* Llama and Qwen3: a stack of identical full-attention SwiGLU layers. */
static int parse_llama_like(parse_ctx *p, rc_config *c, int is_qwen3)
{
    int64_t vocab, hidden, inter, nl, nh, nkv, hd;
    double eps;
    int rc;
    if ((rc = get_int(p, "vocab_size", -1, 1, INT32_MAX, &vocab)) ||
        (rc = get_int(p, "hidden_size", -1, 1, 1 << 20, &hidden)) ||
        (rc = get_int(p, "intermediate_size", -1, 1, 1 << 22, &inter)) ||
        (rc = get_int(p, "num_hidden_layers", -1, 1, 4096, &nl)) ||
        (rc = get_int(p, "num_attention_heads", -1, 1, 4096, &nh)) ||
        (rc = get_int(p, "num_key_value_heads", nh, 1, 4096, &nkv)) ||
        (rc = get_num(p, "rms_norm_eps", 1e-6, &eps)) ||
        (rc = get_act(p, "hidden_act", "silu", &c->act)) ||
        (rc = get_bool(p, "attention_bias", 0, &c->attn_bias)) ||
        (rc = get_bool(p, "tie_word_embeddings", 0, &c->tie_embeddings)))
        return rc;
    if (is_qwen3) {
        if ((rc = get_int(p, "head_dim", 128, 1, 4096, &hd)) || (rc = require_off(p, "use_sliding_window")))
            return rc;
        mark(p, "sliding_window");    /* inert while use_sliding_window is off */
        mark(p, "max_window_layers");
        c->mlp_bias = 0;
    } else {
        if ((rc = get_int(p, "head_dim", hidden / nh, 1, 4096, &hd)) ||
            (rc = get_bool(p, "mlp_bias", 0, &c->mlp_bias)))
            return rc;
        if (hidden % nh)
            return rc_fail(p->e, RC_E_UNSUPPORTED,
                           "config: hidden_size %lld is not a multiple of num_attention_heads %lld",
                           (long long)hidden, (long long)nh);
    }
    if (nh % nkv)
        return rc_fail(p->e, RC_E_UNSUPPORTED,
                       "config: num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                       (long long)nh, (long long)nkv);
    if (hd % 2)
        return rc_fail(p->e, RC_E_UNSUPPORTED, "config field 'head_dim' = %lld: RoPE needs an even head_dim",
                       (long long)hd);
    if (!(eps > 0))
        return rc_fail(p->e, RC_E_UNSUPPORTED, "config field 'rms_norm_eps' = %g: must be positive", eps);
    if ((rc = require_all_full(p, nl)))
        return rc;
    c->vocab = vocab;
    c->hidden = hidden;
    c->n_layers = (int)nl;
    c->eps = (float)eps;
    c->norm = RC_NORM_W;
    c->qk_norm = RC_NORM_W;
    c->n_ropes = 1;
    if ((rc = parse_rope_default(p, &c->ropes[0], (int)hd, 10000.0)))
        return rc;
    c->layers = rc_calloc(nl, sizeof *c->layers, p->e, "layer descriptions");
    if (!c->layers)
        return p->e->code;
    for (int i = 0; i < nl; i++) {
        rc_layer_desc *l = &c->layers[i];
        l->mixer = RC_MIXER_ATTN;
        l->state = RC_STATE_KV;
        l->n_heads = (int)nh;
        l->n_kv_heads = (int)nkv;
        l->head_dim = (int)hd;
        l->window = 0;
        l->rope = 0;
        l->attn_scale = (float)(1.0 / sqrt((double)hd)); /* HF: head_dim ** -0.5 in Python double */
        l->q_norm = l->k_norm = is_qwen3;
        l->intermediate = (int)inter;
    }
    return RC_OK;
}

static int parse_llama(parse_ctx *p, rc_config *c) { return parse_llama_like(p, c, 0); }
static int parse_qwen3(parse_ctx *p, rc_config *c) { return parse_llama_like(p, c, 1); }

typedef struct arch_entry {
    const char *model_type;
    int (*parse)(parse_ctx *p, rc_config *c);
} arch_entry;

static const arch_entry archs[] = {
    {"llama", parse_llama},
    {"qwen3", parse_qwen3},
};

static int is_generic_ignored(const char *k)
{
    for (int i = 0; generic_ignored[i]; i++)
        if (strcmp(generic_ignored[i], k) == 0)
            return 1;
    return 0;
}

static int check_unknown_fields(parse_ctx *p)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, p->root) {
        int known = is_generic_ignored(it->string);
        for (int i = 0; !known && i < p->n_used; i++)
            known = strcmp(p->used[i], it->string) == 0;
        if (!known && !cJSON_IsNull(it))
            return bad(p, it->string, it, "unknown field, refused rather than ignored");
    }
    return RC_OK;
}

static void derive_maxima(rc_config *c)
{
    for (int i = 0; i < c->n_layers; i++) {
        const rc_layer_desc *l = &c->layers[i];
        if (l->n_heads > c->max_heads) c->max_heads = l->n_heads;
        if (l->n_kv_heads > c->max_kv_heads) c->max_kv_heads = l->n_kv_heads;
        if (l->head_dim > c->max_head_dim) c->max_head_dim = l->head_dim;
        if (l->intermediate > c->max_intermediate) c->max_intermediate = l->intermediate;
    }
}

int rc_config_parse(const char *json, rc_config *cfg, rc_err *e)
{
    memset(cfg, 0, sizeof *cfg);
    cJSON *root = cJSON_Parse(json);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return rc_fail(e, RC_E_FORMAT, "config: not a JSON object");
    }
    parse_ctx p = {.root = root, .e = e};
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!cJSON_IsString(mt)) {
        cJSON_Delete(root);
        return rc_fail(e, RC_E_FORMAT, "config: field 'model_type' is missing or not a string");
    }
    p.model_type = mt->valuestring;
    const arch_entry *a = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(archs[i].model_type, mt->valuestring) == 0)
            a = &archs[i];
    int rc;
    if (!a)
        rc = rc_fail(e, RC_E_UNSUPPORTED, "config field 'model_type' = \"%.40s\": not implemented (llama, qwen3)",
                     mt->valuestring);
    else {
        snprintf(cfg->model_type, sizeof cfg->model_type, "%s", a->model_type);
        rc = a->parse(&p, cfg);
        if (!rc)
            rc = check_unknown_fields(&p);
    }
    cJSON_Delete(root);
    if (rc) {
        rc_config_free(cfg);
        return rc;
    }
    derive_maxima(cfg);
    int64_t np;
    if (!rc_config_param_count(cfg, &np)) {
        rc_config_free(cfg);
        return rc_fail(e, RC_E_RANGE, "config: parameter count overflows 64 bits");
    }
    return RC_OK;
}

int rc_config_load_file(const char *path, rc_config *cfg, rc_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return rc_fail(e, RC_E_IO, "%s: cannot open config", path);
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (64L << 20) && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc((size_t)n + 1);
    int rc;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
        rc = rc_fail(e, RC_E_IO, "%s: cannot read config", path);
    else {
        buf[n] = 0;
        rc = rc_config_parse(buf, cfg, e);
        if (rc) {
            char tmp[sizeof e->msg];
            snprintf(tmp, sizeof tmp, "%s", e->msg);
            rc_fail(e, rc, "%s: %s", path, tmp);
        }
    }
    free(buf);
    fclose(f);
    return rc;
}

void rc_config_free(rc_config *cfg)
{
    free(cfg->layers);
    memset(cfg, 0, sizeof *cfg);
}

int rc_config_check(const rc_config *c, const rc_caps *caps, rc_err *e)
{
    for (int i = 0; i < c->n_layers; i++) {
        const rc_layer_desc *l = &c->layers[i];
        if (!(caps->mixers & (1u << l->mixer)))
            return rc_fail(e, RC_E_UNSUPPORTED, "stage %s: layer %d mixer kind %d not implemented", caps->stage, i,
                           (int)l->mixer);
        if (l->window > 0 && !caps->sliding_window)
            return rc_fail(e, RC_E_UNSUPPORTED, "stage %s: layer %d sliding_window = %d not implemented", caps->stage,
                           i, l->window);
        if (l->mixer == RC_MIXER_ATTN && caps->max_head_dim && l->head_dim > caps->max_head_dim)
            return rc_fail(e, RC_E_UNSUPPORTED, "stage %s: head_dim = %d exceeds the kernels' limit %d (layer %d)",
                           caps->stage, l->head_dim, caps->max_head_dim, i);
        if (l->mixer == RC_MIXER_ATTN && caps->head_dim_multiple > 1 && l->head_dim % caps->head_dim_multiple)
            return rc_fail(e, RC_E_UNSUPPORTED, "stage %s: head_dim = %d is not a multiple of %d (layer %d)",
                           caps->stage, l->head_dim, caps->head_dim_multiple, i);
    }
    return RC_OK;
}

int rc_config_param_count(const rc_config *c, int64_t *out)
{
    int64_t total = 0, t;
#define ADD(a, b) do { if (!rc_mul_i64((a), (b), &t) || t > INT64_MAX - total) return 0; total += t; } while (0)
    ADD(c->vocab, c->hidden * (c->tie_embeddings ? 1 : 2));
    ADD(c->hidden, 1);
    for (int i = 0; i < c->n_layers; i++) {
        const rc_layer_desc *l = &c->layers[i];
        int64_t qd = (int64_t)l->n_heads * l->head_dim, kd = (int64_t)l->n_kv_heads * l->head_dim;
        ADD(c->hidden, 2);
        if (l->mixer == RC_MIXER_ATTN) {
            ADD(c->hidden, qd * (l->out_gate ? 2 : 1) + 2 * kd);
            ADD(qd, c->hidden);
        }
        ADD(c->hidden, 3 * (int64_t)l->intermediate);
    }
#undef ADD
    *out = total;
    return 1;
}
