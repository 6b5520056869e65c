/* HF config.json -> rc_config. Every model_type special case of the project lives here. */
#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_fields.h"
#include "io.h"
#include "json_strict.h"

typedef struct parse_ctx {
    const cJSON *root;
    const char *model_type;
    const char *scope; /* "" or the enclosing key, e.g. "text_config." */
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
    return rc_fail(p->e, RC_E_UNSUPPORTED, "config field '%s%s' = %s: %s (model_type '%s')", p->scope, key, v, why,
                   p->model_type);
}

/* A required field is absent or null. */
static int missing(parse_ctx *p, const char *key)
{
    return rc_fail(p->e, RC_E_FORMAT, "config field '%s%s' is required (model_type '%s')", p->scope, key,
                   p->model_type);
}

/* "config: A a is not a multiple of B b" unless b divides a. */
static int require_multiple(parse_ctx *p, const char *a_key, int64_t a, const char *b_key, int64_t b)
{
    if (a % b)
        return rc_fail(p->e, RC_E_UNSUPPORTED, "config: %s %lld is not a multiple of %s %lld", a_key, (long long)a,
                       b_key, (long long)b);
    return RC_OK;
}

/* Integer field: missing/null -> def (def < 0 means required). */
static int get_int(parse_ctx *p, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *it = field(p, key);
    if (!it) {
        if (def < 0)
            return missing(p, key);
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

/* The sizes every model_type requires, in the ranges the project supports. */
static int get_sizes(parse_ctx *p, int64_t *vocab, int64_t *hidden, int64_t *inter, int64_t *nl, int64_t *nh)
{
    int rc;
    if ((rc = get_int(p, "vocab_size", -1, 1, INT32_MAX, vocab)) ||
        (rc = get_int(p, "hidden_size", -1, 1, 1 << 20, hidden)) ||
        (rc = get_int(p, "intermediate_size", -1, 1, 1 << 22, inter)) ||
        (rc = get_int(p, "num_hidden_layers", -1, 1, 4096, nl)) ||
        (rc = get_int(p, "num_attention_heads", -1, 1, 4096, nh)))
        return rc;
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

/* The one table of a single-table model: default RoPE over the first rot_dim dims of each head. */
static void set_default_rope(rc_rope_desc *r, double theta, int head_dim, int rot_dim)
{
    memset(r, 0, sizeof *r);
    snprintf(r->kind, sizeof r->kind, "all");
    r->type = RC_ROPE_DEFAULT;
    r->theta = theta;
    r->factor = 1.0;
    r->head_dim = head_dim;
    r->rot_dim = rot_dim;
    r->n_freq = rot_dim / 2;
    r->exp_den = rot_dim;
}

/* The rope types of a single-table model: the keys each may carry besides rope_type / type and rope_theta (HF's
 * required and optional keys), and the one named and refused. */
typedef struct rope_type_entry {
    const char *name;
    rc_rope_type type;
    const char *keys; /* space-separated, each surrounded by spaces */
} rope_type_entry;

static const rope_type_entry rope_types[] = {
    {"default", RC_ROPE_DEFAULT, " "},
    {"linear", RC_ROPE_LINEAR, " factor "},
    {"llama3", RC_ROPE_LLAMA3, " factor low_freq_factor high_freq_factor original_max_position_embeddings "},
    {"yarn", RC_ROPE_YARN,
     " factor original_max_position_embeddings attention_factor beta_fast beta_slow mscale mscale_all_dim truncate "},
};

static int rope_key_allowed(const rope_type_entry *t, const char *k)
{
    size_t n = strchr(k, ' ') ? 0 : strlen(k); /* keys start with a space, so at > t->keys below */
    for (const char *at = t->keys; n && (at = strstr(at, k)) != NULL; at++)
        if (at[-1] == ' ' && at[n] == ' ')
            return 1;
    return 0;
}

/* A number in a rope dictionary: absent/null -> def; must be finite and > lo (>= lo when incl). */
static int rope_num(parse_ctx *p, const cJSON *params, const char *src, const char *k, double def, double lo,
                    int incl, double *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(params, k);
    char key[96];
    snprintf(key, sizeof key, "%s.%s", src, k);
    if (!it || cJSON_IsNull(it)) {
        if (def < 0)
            return missing(p, key);
        *out = def;
        return RC_OK;
    }
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < lo || (!incl && it->valuedouble == lo))
        return bad(p, key, it, incl ? "expected a number >= the supported minimum" : "expected a positive number");
    *out = it->valuedouble;
    return RC_OK;
}

/* The scaling parameters of rope type t (linear, llama3, yarn) into r. HF's rules: llama3/yarn take
 * original_max_position_embeddings from a top-level field of that name when there is one (it wins), else from
 * the dictionary, else max_position_embeddings; yarn's attention factor defaults to 0.1 ln(factor) + 1 (or the
 * mscale / mscale_all_dim ratio when both are non-zero); beta_fast / beta_slow of 0 or null mean 32 / 1. */
static int rope_scaling_params(parse_ctx *p, const cJSON *params, const char *src, rc_rope_desc *r)
{
    char key[96];
    int rc;
    if ((rc = rope_num(p, params, src, "factor", -1, 1.0, 1, &r->factor)))
        return rc;
    if (r->type == RC_ROPE_LINEAR)
        return RC_OK;
    const cJSON *top = field(p, "original_max_position_embeddings");
    int64_t omp = 0;
    if (top) {
        if ((rc = get_int(p, "original_max_position_embeddings", -1, 1, INT32_MAX, &omp)))
            return rc;
        r->original_max_pos = (double)omp;
    } else {
        double d;
        if ((rc = rope_num(p, params, src, "original_max_position_embeddings", 0, 1.0, 1, &d)))
            return rc;
        if (d == 0) {
            if ((rc = get_int(p, "max_position_embeddings", -1, 1, INT32_MAX, &omp)))
                return rc;
            d = (double)omp;
        }
        r->original_max_pos = d;
    }
    if (r->type == RC_ROPE_LLAMA3) {
        if ((rc = rope_num(p, params, src, "low_freq_factor", -1, 0.0, 0, &r->low_freq_factor)) ||
            (rc = rope_num(p, params, src, "high_freq_factor", -1, 0.0, 0, &r->high_freq_factor)))
            return rc;
        snprintf(key, sizeof key, "%s.high_freq_factor", src);
        if (!(r->high_freq_factor > r->low_freq_factor))
            return bad(p, key, cJSON_GetObjectItemCaseSensitive(params, "high_freq_factor"),
                       "must be greater than low_freq_factor");
        return RC_OK;
    }
    double af, ms, msa;
    if ((rc = rope_num(p, params, src, "attention_factor", 0, 0.0, 0, &af)) ||
        (rc = rope_num(p, params, src, "beta_fast", 0, 0.0, 1, &r->beta_fast)) ||
        (rc = rope_num(p, params, src, "beta_slow", 0, 0.0, 1, &r->beta_slow)) ||
        (rc = rope_num(p, params, src, "mscale", 0, 0.0, 1, &ms)) ||
        (rc = rope_num(p, params, src, "mscale_all_dim", 0, 0.0, 1, &msa)))
        return rc;
    if (r->beta_fast == 0)
        r->beta_fast = 32;
    if (r->beta_slow == 0)
        r->beta_slow = 1;
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(params, "truncate");
    snprintf(key, sizeof key, "%s.truncate", src);
    if (tr && !cJSON_IsNull(tr) && !cJSON_IsBool(tr))
        return bad(p, key, tr, "expected true or false");
    r->truncate = !tr || cJSON_IsNull(tr) || cJSON_IsTrue(tr);
#define YARN_MSCALE(s, m) ((s) <= 1 ? 1.0 : 0.1 * (m) * log(s) + 1.0)
    if (af > 0)
        r->attn_factor = af;
    else if (ms != 0 && msa != 0)
        r->attn_factor = YARN_MSCALE(r->factor, ms) / YARN_MSCALE(r->factor, msa);
    else
        r->attn_factor = YARN_MSCALE(r->factor, 1.0);
#undef YARN_MSCALE
    return RC_OK;
}

/* rope_parameters (or legacy rope_scaling / rope_theta) for a single-table model: default, linear, llama3 or
 * yarn over the whole head; dynamic and longrope are refused by name (their frequencies depend on the sequence
 * length). */
static int parse_rope_default(parse_ctx *p, rc_rope_desc *r, int head_dim, double default_theta)
{
    const cJSON *params = field(p, "rope_parameters");
    const cJSON *legacy = field(p, "rope_scaling");
    double theta;
    int rc = get_num(p, "rope_theta", default_theta, &theta);
    if (rc)
        return rc;
    const char *src = "rope_parameters"; /* the field the user wrote, for messages */
    if (legacy) {
        if (params && !cJSON_Compare(params, legacy, 1))
            return bad(p, "rope_scaling", legacy, "conflicts with rope_parameters");
        if (!params)
            src = "rope_scaling";
        params = legacy;
    }
    const cJSON *type = NULL;
    char key[96];
    if (params) {
        if (!cJSON_IsObject(params))
            return bad(p, src, params, "expected an object");
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(params, "rope_type");
        type = rt ? rt : cJSON_GetObjectItemCaseSensitive(params, "type");
        if (type) {
            snprintf(key, sizeof key, "%s.%s", src, type->string);
            if (!cJSON_IsString(type))
                return bad(p, key, type, "expected a string");
        }
    }
    const rope_type_entry *t = &rope_types[0];
    if (type) {
        t = NULL;
        for (size_t i = 0; i < sizeof rope_types / sizeof rope_types[0] && !t; i++)
            if (strcmp(type->valuestring, rope_types[i].name) == 0)
                t = &rope_types[i];
        if (!t)
            return bad(p, key, type, strcmp(type->valuestring, "dynamic") == 0
                       ? "rope type not implemented: dynamic NTK scaling (frequencies depend on the sequence length)"
                       : "rope type not implemented (default, linear, llama3, yarn)");
    }
    const cJSON *it;
    if (params)
        cJSON_ArrayForEach(it, params) {
            const char *k = it->string;
            snprintf(key, sizeof key, "%s.%s", src, k);
            if (!strcmp(k, "rope_type") || !strcmp(k, "type")) {
                if (!cJSON_IsString(it) || strcmp(it->valuestring, t->name))
                    return bad(p, key, it, "conflicts with the rope type");
            } else if (strcmp(k, "rope_theta") == 0) {
                if (!cJSON_IsNumber(it) || !(it->valuedouble > 0) || !isfinite(it->valuedouble))
                    return bad(p, key, it, "expected a positive number");
                theta = it->valuedouble;
            } else if (!rope_key_allowed(t, k))
                return bad(p, key, it, "not implemented for this rope type");
        }
    if (!(theta > 0))
        return rc_fail(p->e, RC_E_UNSUPPORTED, "config field 'rope_theta' = %g: must be positive", theta);
    set_default_rope(r, theta, head_dim, head_dim);
    r->type = t->type;
    if (t->type != RC_ROPE_DEFAULT && (rc = rope_scaling_params(p, params, src, r)))
        return rc;
    return RC_OK;
}

typedef struct name_val {
    const char *name;
    int val;
} name_val;

/* layer_types, when given, must list n entries each named in map; their values go to out[n] (unless out is
 * NULL). Returns 1 in *given when the field is present. */
static int read_layer_types(parse_ctx *p, int64_t n, const name_val *map, int *out, int *given)
{
    const cJSON *lt = field(p, "layer_types");
    *given = lt != NULL;
    if (!lt)
        return RC_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != n)
        return bad(p, "layer_types", lt, "expected one entry per layer");
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, lt) {
        const name_val *m = map;
        while (m->name && !(cJSON_IsString(it) && strcmp(it->valuestring, m->name) == 0))
            m++;
        if (!m->name)
            return bad(p, "layer_types", it, "layer type not implemented for this model_type");
        if (out)
            out[i] = m->val;
        i++;
    }
    return RC_OK;
}

/* layer_types, when given, must list n entries each equal to "full_attention". */
static int require_all_full(parse_ctx *p, int64_t n)
{
    static const name_val full_only[] = {{"full_attention", 1}, {NULL, 0}};
    int given;
    return read_layer_types(p, n, full_only, NULL, &given);
}

/* Llama, Qwen3 and Mistral: a stack of identical full-attention SwiGLU layers. Mistral is llama without the bias
 * options; its sliding window must be off (null). */
enum { LIKE_LLAMA, LIKE_QWEN3, LIKE_MISTRAL };
static int parse_llama_like(parse_ctx *p, rc_config *c, int kind)
{
    const int is_qwen3 = kind == LIKE_QWEN3;
    int64_t vocab, hidden, inter, nl, nh, nkv, hd;
    double eps;
    int rc;
    if ((rc = get_sizes(p, &vocab, &hidden, &inter, &nl, &nh)) ||
        (rc = get_int(p, "num_key_value_heads", nh, 1, 4096, &nkv)) ||
        (rc = get_num(p, "rms_norm_eps", 1e-6, &eps)) ||
        (rc = get_act(p, "hidden_act", "silu", &c->act)) ||
        (rc = get_bool(p, "tie_word_embeddings", 0, &c->tie_embeddings)))
        return rc;
    if (kind != LIKE_MISTRAL && (rc = get_bool(p, "attention_bias", 0, &c->attn_bias)))
        return rc;
    if (kind == LIKE_MISTRAL) {
        const cJSON *sw = field(p, "sliding_window");
        if (sw)
            return bad(p, "sliding_window", sw, "not implemented for mistral (only null: full causal attention)");
        if ((rc = get_int(p, "head_dim", hidden / nh, 1, 4096, &hd)) ||
            (rc = require_multiple(p, "hidden_size", hidden, "num_attention_heads", nh)))
            return rc;
    } else if (is_qwen3) {
        if ((rc = get_int(p, "head_dim", 128, 1, 4096, &hd)) || (rc = require_off(p, "use_sliding_window")))
            return rc;
        mark(p, "sliding_window");    /* inert while use_sliding_window is off */
        mark(p, "max_window_layers");
        c->mlp_bias = 0;
    } else {
        if ((rc = get_int(p, "head_dim", hidden / nh, 1, 4096, &hd)) ||
            (rc = get_bool(p, "mlp_bias", 0, &c->mlp_bias)))
            return rc;
        if ((rc = require_multiple(p, "hidden_size", hidden, "num_attention_heads", nh)))
            return rc;
    }
    if ((rc = require_multiple(p, "num_attention_heads", nh, "num_key_value_heads", nkv)))
        return rc;
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

static int parse_llama(parse_ctx *p, rc_config *c) { return parse_llama_like(p, c, LIKE_LLAMA); }
static int parse_qwen3(parse_ctx *p, rc_config *c) { return parse_llama_like(p, c, LIKE_QWEN3); }
static int parse_mistral(parse_ctx *p, rc_config *c) { return parse_llama_like(p, c, LIKE_MISTRAL); }

/* ---- hybrid and sandwich-norm models: qwen3_5_text (and its qwen3_5 wrapper), gemma4_text ---- */

static int check_unknown_fields(parse_ctx *p);
static int parse_gemma4_text(parse_ctx *p, rc_config *c);

static int bad_num(parse_ctx *p, const char *key, double v, const char *why)
{
    cJSON *n = cJSON_CreateNumber(v);
    int rc = bad(p, key, n, why);
    cJSON_Delete(n);
    return rc;
}

static int bad_str(parse_ctx *p, const char *key, const char *v, const char *why)
{
    cJSON *s = cJSON_CreateString(v);
    int rc = bad(p, key, s, why);
    cJSON_Delete(s);
    return rc;
}

/* One rope_parameters dictionary; absent numbers are < 0. Keys listed in inert are accepted and ignored;
 * the first other key is kept in unknown, refused by the caller after the rope type (which names the problem
 * better: a yarn dictionary is refused for being yarn, not for its beta_fast). */
typedef struct rope_fields {
    const char *type;
    double theta, prf, factor;
    const cJSON *unknown;
    char unknown_key[128];
} rope_fields;

static int read_rope_dict(parse_ctx *p, const char *name, const cJSON *obj, const char *const *inert, rope_fields *f)
{
    const char *type = NULL, *legacy_type = NULL;
    f->theta = f->prf = f->factor = -1.0;
    f->unknown = NULL;
    if (!cJSON_IsObject(obj))
        return bad(p, name, obj, "expected an object");
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        const char *k = it->string;
        char key[128];
        snprintf(key, sizeof key, "%s.%s", name, k);
        int is_inert = 0;
        for (int i = 0; inert && inert[i]; i++)
            is_inert |= strcmp(inert[i], k) == 0;
        if (is_inert)
            continue;
        if (!strcmp(k, "rope_type") || !strcmp(k, "type")) {
            if (!cJSON_IsString(it))
                return bad(p, key, it, "expected a string");
            *(k[0] == 'r' ? &type : &legacy_type) = it->valuestring;
        } else if (!strcmp(k, "rope_theta") || !strcmp(k, "partial_rotary_factor") || !strcmp(k, "factor")) {
            if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || !(it->valuedouble > 0))
                return bad(p, key, it, "expected a positive number");
            if (k[0] == 'p' && it->valuedouble > 1.0)
                return bad(p, key, it, "out of the supported range (0, 1]");
            *(k[0] == 'r' ? &f->theta : k[0] == 'p' ? &f->prf : &f->factor) = it->valuedouble;
        } else if (!f->unknown) {
            f->unknown = it;
            snprintf(f->unknown_key, sizeof f->unknown_key, "%s", key);
        }
    }
    f->type = type ? type : legacy_type ? legacy_type : "default";
    return RC_OK;
}

static int parse_qwen3_5_text(parse_ctx *p, rc_config *c)
{
    static const char *const rope_inert[] = {"mrope_section", "mrope_interleaved", NULL}; /* text rows are equal */
    static const char *const mtp_inert[] = {"mtp_num_hidden_layers", "mtp_use_dedicated_embeddings", NULL};
    static const name_val types[] = {{"linear_attention", 0}, {"mamba", 0}, {"conv", 0},
                                     {"full_attention", 1}, {"attention", 1}, {NULL, 0}};
    int64_t vocab, hidden, inter, nl, nh, nkv, hd, hk, hv, dk, dv, K, interval;
    double eps, theta_top, prf_top;
    int rc, given;
    if ((rc = get_sizes(p, &vocab, &hidden, &inter, &nl, &nh)) ||
        (rc = get_int(p, "num_key_value_heads", 4, 1, 4096, &nkv)) ||
        (rc = get_int(p, "head_dim", 256, 2, 4096, &hd)) ||
        (rc = get_int(p, "linear_num_key_heads", 16, 1, 4096, &hk)) ||
        (rc = get_int(p, "linear_num_value_heads", 32, 1, 4096, &hv)) ||
        (rc = get_int(p, "linear_key_head_dim", 128, 1, 4096, &dk)) ||
        (rc = get_int(p, "linear_value_head_dim", 128, 1, 4096, &dv)) ||
        (rc = get_int(p, "linear_conv_kernel_dim", 4, 2, 64, &K)) ||
        (rc = get_int(p, "full_attention_interval", 4, 1, 4096, &interval)) ||
        (rc = get_num(p, "rms_norm_eps", 1e-6, &eps)) ||
        (rc = get_num(p, "rope_theta", 10000.0, &theta_top)) ||
        (rc = get_num(p, "partial_rotary_factor", 0.25, &prf_top)) ||
        (rc = get_act(p, "hidden_act", "silu", &c->act)) ||
        (rc = get_bool(p, "attention_bias", 0, &c->attn_bias)) ||
        (rc = get_bool(p, "tie_word_embeddings", 0, &c->tie_embeddings)))
        return rc;
    if ((rc = require_multiple(p, "num_attention_heads", nh, "num_key_value_heads", nkv)) ||
        (rc = require_multiple(p, "linear_num_value_heads", hv, "linear_num_key_heads", hk)))
        return rc;
    if (!(eps > 0))
        return bad_num(p, "rms_norm_eps", eps, "must be positive");
    for (int i = 0; mtp_inert[i]; i++) /* the multi-token-prediction head (mtp.*, skipped on load) */
        mark(p, mtp_inert[i]);
    const cJSON *gate = field(p, "attn_output_gate"); /* qwen3_5 always gates; false would be other math */
    if (gate && !cJSON_IsTrue(gate))
        return bad(p, "attn_output_gate", gate, "not implemented (qwen3_5's attention is gated: true)");

    /* RoPE: rope_scaling (legacy) replaces rope_parameters; top-level rope_theta / partial_rotary_factor fill
     * what the dictionary lacks; partial_rotary_factor defaults to 0.25 even with a dictionary. */
    const cJSON *params = field(p, "rope_parameters"), *legacy = field(p, "rope_scaling");
    if (legacy) {
        if (params && !cJSON_Compare(params, legacy, 1))
            return bad(p, "rope_scaling", legacy, "conflicts with rope_parameters");
        params = legacy;
    }
    const char *rname = legacy ? "rope_scaling" : "rope_parameters";
    rope_fields f = {.type = "default", .theta = -1, .prf = -1, .factor = -1};
    if (params && (rc = read_rope_dict(p, rname, params, rope_inert, &f)))
        return rc;
    char key[64];
    snprintf(key, sizeof key, "%s.rope_type", rname);
    if (strcmp(f.type, "default") != 0)
        return bad_str(p, key, f.type, "rope type not implemented (default)");
    if (f.unknown)
        return bad(p, f.unknown_key, f.unknown, "not implemented");
    snprintf(key, sizeof key, "%s.factor", rname);
    if (f.factor > 0)
        return bad_num(p, key, f.factor, "not implemented for rope_type default");
    double theta = f.theta > 0 ? f.theta : theta_top, prf = f.prf > 0 ? f.prf : prf_top;
    if (!(theta > 0))
        return bad_num(p, "rope_theta", theta, "must be positive");
    if (!(prf > 0 && prf <= 1))
        return bad_num(p, "partial_rotary_factor", prf, "out of the supported range (0, 1]");
    int64_t R = (int64_t)((double)hd * prf); /* HF: int(head_dim * partial_rotary_factor) */
    if (R < 2 || R % 2)
        return bad_num(p, "partial_rotary_factor", prf, "gives an odd or empty rotary width");

    int *full = rc_calloc(nl, sizeof *full, p->e, "layer types");
    if (!full)
        return p->e->code;
    if ((rc = read_layer_types(p, nl, types, full, &given))) {
        free(full);
        return rc;
    }
    if (!given) /* HF: layer i is full iff (i + 1) % full_attention_interval == 0 */
        for (int i = 0; i < nl; i++)
            full[i] = (i + 1) % interval == 0;

    c->vocab = vocab;
    c->hidden = hidden;
    c->n_layers = (int)nl;
    c->eps = (float)eps;
    c->norm = RC_NORM_1PW;
    c->qk_norm = RC_NORM_1PW;
    c->v_norm = RC_NORM_POW;
    snprintf(c->weight_prefix, sizeof c->weight_prefix, "model.");
    c->weight_skip[0] = "mtp.";          /* multi-token-prediction head */
    c->weight_skip[1] = "model.visual."; /* vision tower of a multimodal checkpoint */
    c->n_ropes = 1;
    set_default_rope(&c->ropes[0], theta, (int)hd, (int)R);
    c->layers = rc_calloc(nl, sizeof *c->layers, p->e, "layer descriptions");
    if (!c->layers) {
        free(full);
        return p->e->code;
    }
    for (int i = 0; i < nl; i++) {
        rc_layer_desc *l = &c->layers[i];
        l->intermediate = (int)inter;
        if (full[i]) {
            l->mixer = RC_MIXER_ATTN;
            l->state = RC_STATE_KV;
            l->n_heads = (int)nh;
            l->n_kv_heads = (int)nkv;
            l->head_dim = (int)hd;
            l->rope = 0;
            l->attn_scale = (float)pow((double)hd, -0.5); /* HF: head_dim ** -0.5 */
            l->q_norm = l->k_norm = 1;
            l->out_gate = 1;
        } else {
            l->mixer = RC_MIXER_GDN;
            l->state = RC_STATE_RECURRENT;
            l->gdn_k_heads = (int)hk;
            l->gdn_v_heads = (int)hv;
            l->gdn_k_dim = (int)dk;
            l->gdn_v_dim = (int)dv;
            l->gdn_conv_kernel = (int)K;
        }
    }
    free(full);
    return RC_OK;
}

/* A multimodal wrapper (qwen3_5, gemma4): the text model is text_config (model_type text_type), read by parse, and
 * lives under model.language_model.; the wrapper owns lm_head, so its tie_word_embeddings decides (text_config's
 * is inert). Vision / audio configs and their token ids are metadata for a text-only forward (config_fields.c). */
static int parse_wrapper(parse_ctx *p, rc_config *c, const char *text_type, int (*parse)(parse_ctx *, rc_config *),
                         int tie_default)
{
    const cJSON *tc = field(p, "text_config");
    if (!tc)
        return missing(p, "text_config");
    if (!cJSON_IsObject(tc))
        return bad(p, "text_config", tc, "expected an object");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(tc, "model_type");
    if (mt && !(cJSON_IsString(mt) && strcmp(mt->valuestring, text_type) == 0))
        return bad_str(p, "text_config.model_type", cJSON_IsString(mt) ? mt->valuestring : "?", "unexpected here");
    int tie, rc;
    if ((rc = get_bool(p, "tie_word_embeddings", tie_default, &tie)))
        return rc;
    parse_ctx sub = {.root = tc, .model_type = p->model_type, .scope = "text_config.", .e = p->e};
    if ((rc = parse(&sub, c)) || (rc = check_unknown_fields(&sub)))
        return rc;
    c->tie_embeddings = tie;
    snprintf(c->weight_prefix, sizeof c->weight_prefix, "model.language_model.");
    return RC_OK;
}

static int parse_qwen3_5(parse_ctx *p, rc_config *c)
{
    return parse_wrapper(p, c, "qwen3_5_text", parse_qwen3_5_text, 0);
}

static int parse_gemma4(parse_ctx *p, rc_config *c)
{
    int rc = parse_wrapper(p, c, "gemma4_text", parse_gemma4_text, 1);
    if (rc)
        return rc;
    c->weight_skip[0] = "model.vision_tower.";
    c->weight_skip[1] = "model.embed_vision.";
    c->weight_skip[2] = "model.audio_tower.";
    c->weight_skip[3] = "model.embed_audio.";
    return RC_OK;
}

/* gemma4 per_layer_config {"<idx>": {"head_dim": D, "num_key_value_heads": n}} -> hd[], kv[] */
static int read_per_layer_config(parse_ctx *p, const cJSON *plc, int64_t nl, int *hd, int *kv)
{
    if (!cJSON_IsObject(plc))
        return bad(p, "per_layer_config", plc, "expected an object");
    const cJSON *ent;
    cJSON_ArrayForEach(ent, plc) {
        char *end, key[96];
        long idx = strtol(ent->string, &end, 10);
        snprintf(key, sizeof key, "per_layer_config.%s", ent->string);
        if (!ent->string[0] || *end || idx < 0 || idx >= nl)
            return bad(p, key, ent, "expected a layer index in [0, num_hidden_layers)");
        if (!cJSON_IsObject(ent))
            return bad(p, key, ent, "expected an object");
        const cJSON *it;
        cJSON_ArrayForEach(it, ent) {
            snprintf(key, sizeof key, "per_layer_config.%s.%s", ent->string, it->string);
            int is_hd = strcmp(it->string, "head_dim") == 0;
            if (!is_hd && strcmp(it->string, "num_key_value_heads") != 0)
                return bad(p, key, it, "per-layer override not implemented (head_dim, num_key_value_heads)");
            if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < (is_hd ? 2 : 1) ||
                it->valuedouble > 4096)
                return bad(p, key, it, "expected an integer in the supported range");
            (is_hd ? hd : kv)[idx] = (int)it->valuedouble;
        }
    }
    return RC_OK;
}

/* The layer types of a gemma stack, and the value read_layer_types gives each (1: full attention). */
static const name_val gemma_types[] = {{"sliding_attention", 0}, {"full_attention", 1}, {NULL, 0}};

/* A gemma rope entry (the object m, named name): read, its rope_type default or alt (*is_alt says which), no
 * unknown key, no factor on a default table; the message names the family's two types. */
static int gemma_rope_entry(parse_ctx *p, const char *name, const cJSON *m, const char *alt, rope_fields *f,
                            int *is_alt)
{
    char key[96];
    int rc = read_rope_dict(p, name, m, NULL, f);
    if (rc)
        return rc;
    const int is_default = strcmp(f->type, "default") == 0;
    *is_alt = strcmp(f->type, alt) == 0;
    snprintf(key, sizeof key, "%s.rope_type", name);
    if (!is_default && !*is_alt) {
        char why[64];
        snprintf(why, sizeof why, "rope type not implemented (default, %s)", alt);
        return bad_str(p, key, f->type, why);
    }
    if (f->unknown)
        return bad(p, f->unknown_key, f->unknown, "not implemented");
    snprintf(key, sizeof key, "%s.factor", name);
    if (is_default && f->factor > 0)
        return bad_num(p, key, f->factor, "not implemented for rope_type default");
    return RC_OK;
}

/* A gemma RoPE table over the whole head of width D (rot_dim and the exponent's denominator D), n_freq frequencies. */
static void gemma_rope_fill(rc_rope_desc *r, int full, rc_rope_type type, double theta, double factor, int D,
                            int n_freq)
{
    memset(r, 0, sizeof *r);
    snprintf(r->kind, sizeof r->kind, "%s", full ? "full" : "sliding");
    r->type = type;
    r->theta = theta;
    r->factor = factor;
    r->head_dim = r->rot_dim = r->exp_den = D;
    r->n_freq = n_freq;
}

/* One gemma4 rope entry (rope_parameters.<layer_type>) for heads of width D: default or proportional, rope_theta
 * required. */
static int gemma4_rope(parse_ctx *p, const cJSON *params, int full, int D, rc_rope_desc *r)
{
    char name[64], key[96];
    snprintf(name, sizeof name, "rope_parameters.%s", gemma_types[full].name);
    rope_fields f = {.type = "default", .theta = -1, .prf = -1, .factor = -1};
    const cJSON *ent = cJSON_GetObjectItemCaseSensitive(params, gemma_types[full].name);
    int rc, is_prop;
    if (!ent || cJSON_IsNull(ent))
        return missing(p, name);
    if ((rc = gemma_rope_entry(p, name, ent, "proportional", &f, &is_prop)))
        return rc;
    snprintf(key, sizeof key, "%s.rope_theta", name);
    if (!(f.theta > 0))
        return missing(p, key);
    if (!is_prop) /* HF's gemma4 default rope rotates the whole head and ignores partial_rotary_factor */
        gemma_rope_fill(r, full, RC_ROPE_DEFAULT, f.theta, 1.0, D, D / 2);
    else /* HF: int(partial_rotary_factor * head_dim // 2) */
        gemma_rope_fill(r, full, RC_ROPE_PROPORTIONAL, f.theta, f.factor > 0 ? f.factor : 1.0, D,
                        (int)floor((f.prf > 0 ? f.prf : 1.0) * D / 2.0));
    return RC_OK;
}

/* A gemma rope_parameters object must be keyed by layer type only. */
static int gemma_rope_keys(parse_ctx *p, const cJSON *params)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, params) {
        if (strcmp(it->string, gemma_types[0].name) && strcmp(it->string, gemma_types[1].name)) {
            char key[96];
            snprintf(key, sizeof key, "rope_parameters.%s", it->string);
            return bad(p, key, it, "expected an entry per layer type (sliding_attention, full_attention)");
        }
    }
    return RC_OK;
}

/* The layers of a gemma stack (gemma4_text, gemma3_text): attention on every layer, sliding (window win, a ring
 * KV) or full per full[i], head width hd[i] and kv heads kv[i], the RoPE table of its type, q/k norms, a V norm
 * when v_norm. */
static int gemma_layers(parse_ctx *p, rc_config *c, int64_t nl, const int *full, const int *hd, const int *kv,
                        int64_t nh, int64_t win, const int rope_of[2], float attn_scale, int v_norm, int64_t inter)
{
    c->layers = rc_calloc(nl, sizeof *c->layers, p->e, "layer descriptions");
    if (!c->layers)
        return p->e->code;
    for (int i = 0; i < nl; i++) {
        rc_layer_desc *l = &c->layers[i];
        l->mixer = RC_MIXER_ATTN;
        l->state = full[i] ? RC_STATE_KV : RC_STATE_KV_RING;
        l->n_heads = (int)nh;
        l->n_kv_heads = kv[i];
        l->head_dim = hd[i];
        l->window = full[i] ? 0 : (int)win;
        l->rope = rope_of[full[i]];
        l->attn_scale = attn_scale;
        l->q_norm = l->k_norm = 1;
        l->v_norm = v_norm;
        l->intermediate = (int)inter;
    }
    return RC_OK;
}

static int parse_gemma4_text(parse_ctx *p, rc_config *c)
{
    const name_val *types = gemma_types;
    static const char *const moe_inert[] = {"num_experts", "top_k_experts", "moe_intermediate_size", NULL};
    int64_t vocab, hidden, inter, nl, nh, nkv, hd, win, Vp, P = 0, ghd, gkv, nshared;
    double eps, softcap;
    int rc, given, k_eq_v;
    for (int i = 0; moe_inert[i]; i++) /* only read with enable_moe_block, which is refused below */
        mark(p, moe_inert[i]);
    if ((rc = get_sizes(p, &vocab, &hidden, &inter, &nl, &nh)) ||
        (rc = get_int(p, "num_key_value_heads", 4, 1, 4096, &nkv)) ||
        (rc = get_int(p, "head_dim", 256, 2, 4096, &hd)) ||
        (rc = get_int(p, "global_head_dim", 512, 2, 4096, &ghd)) ||
        (rc = get_int(p, "num_global_key_value_heads", 0, 0, 4096, &gkv)) ||
        (rc = get_int(p, "sliding_window", 512, 1, INT32_MAX, &win)) ||
        (rc = get_int(p, "vocab_size_per_layer_input", 262144, 1, INT32_MAX, &Vp)) ||
        (rc = get_int(p, "num_kv_shared_layers", 0, 0, 4096, &nshared)) ||
        (rc = get_num(p, "rms_norm_eps", 1e-6, &eps)) ||
        (rc = get_num(p, "final_logit_softcapping", 0.0, &softcap)) ||
        (rc = get_act(p, "hidden_activation", "gelu_pytorch_tanh", &c->act)) ||
        (rc = get_bool(p, "attention_bias", 0, &c->attn_bias)) ||
        (rc = get_bool(p, "tie_word_embeddings", 1, &c->tie_embeddings)) ||
        (rc = get_bool(p, "attention_k_eq_v", 0, &k_eq_v)))
        return rc;
    /* hidden_size_per_layer_input: null or 0 disables PLE, absent means 256 */
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(p->root, "hidden_size_per_layer_input");
    if (!pj || !cJSON_IsNull(pj))
        if ((rc = get_int(p, "hidden_size_per_layer_input", 256, 0, 1 << 20, &P)))
            return rc;
    mark(p, "hidden_size_per_layer_input");
    if (k_eq_v)
        return bad(p, "attention_k_eq_v", field(p, "attention_k_eq_v"), "not implemented (V = K projection)");
    if (nshared)
        return bad_num(p, "num_kv_shared_layers", (double)nshared, "not implemented (KV sharing across layers)");
    if ((rc = require_off(p, "enable_moe_block")) || (rc = require_off(p, "use_double_wide_mlp")) ||
        (rc = require_off(p, "attn_logit_softcapping")))
        return rc;
    const cJSON *bidir = field(p, "use_bidirectional_attention");
    if (bidir && !(cJSON_IsString(bidir) && strcmp(bidir->valuestring, "vision") == 0))
        return bad(p, "use_bidirectional_attention", bidir, "not implemented (only null or \"vision\", which "
                   "changes nothing for text-only input)");
    if (field(p, "final_logit_softcapping") && !(softcap > 0))
        return bad_num(p, "final_logit_softcapping", softcap, "must be positive or null");
    if (!(eps > 0))
        return bad_num(p, "rms_norm_eps", eps, "must be positive");

    int *full = rc_calloc(3 * nl, sizeof *full, p->e, "layer types");
    if (!full)
        return p->e->code;
    int *lhd = full + nl, *lkv = full + 2 * nl;
    if ((rc = read_layer_types(p, nl, types, full, &given)))
        goto out;
    if (!given) /* HF: every 6th layer is full */
        for (int i = 0; i < nl; i++)
            full[i] = (i + 1) % 6 == 0;
    full[nl - 1] = 1; /* HF forces the last layer to full_attention */
    for (int i = 0; i < nl; i++) {
        lhd[i] = (int)hd;
        lkv[i] = (int)nkv;
    }
    const cJSON *plc = field(p, "per_layer_config");
    if (plc)
        rc = read_per_layer_config(p, plc, nl, lhd, lkv);
    else /* HF builds it from the kwargs: full layers get global_head_dim (and the global kv heads only with
          * attention_k_eq_v, refused above) */
        for (int i = 0; i < nl; i++)
            if (full[i])
                lhd[i] = (int)ghd;
    if (rc)
        goto out;
    /* one rope table per layer type: HF requires the overrides to agree within a type */
    int first[2] = {-1, -1};
    for (int i = 0; i < nl; i++) {
        int t = full[i];
        if (first[t] < 0)
            first[t] = i;
        else if (lhd[i] != lhd[first[t]] || lkv[i] != lkv[first[t]]) {
            rc = rc_fail(p->e, RC_E_UNSUPPORTED,
                         "config field '%sper_layer_config': layers %d and %d are both %s but differ in head_dim or "
                         "num_key_value_heads: not implemented (model_type '%s')",
                         p->scope, first[t], i, types[t].name, p->model_type);
            goto out;
        }
        if (nh % lkv[i] || lhd[i] % 2) {
            rc = rc_fail(p->e, RC_E_UNSUPPORTED,
                         "config: layer %d has head_dim %d and %d kv heads for %lld heads: needs an even head_dim and "
                         "a kv head count dividing num_attention_heads",
                         i, lhd[i], lkv[i], (long long)nh);
            goto out;
        }
    }
    const cJSON *params = field(p, "rope_parameters");
    cJSON *defaults = NULL;
    if (!params)
        params = defaults = cJSON_Parse("{\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0},"
                                        " \"full_attention\": {\"rope_type\": \"proportional\", "
                                        "\"partial_rotary_factor\": 0.25, \"rope_theta\": 1000000.0}}");
    if (!cJSON_IsObject(params)) {
        rc = params ? bad(p, "rope_parameters", params, "expected an object keyed by layer type")
                    : rc_fail(p->e, RC_E_NOMEM, "config: out of memory");
        goto out;
    }
    if ((rc = gemma_rope_keys(p, params)))
        goto out_rope;
    int rope_of[2] = {-1, -1};
    c->n_ropes = 0;
    for (int t = 0; t < 2; t++) {
        if (first[t] < 0)
            continue;
        rope_of[t] = c->n_ropes;
        if ((rc = gemma4_rope(p, params, t, lhd[first[t]], &c->ropes[c->n_ropes++])))
            goto out_rope;
    }

    c->vocab = vocab;
    c->hidden = hidden;
    c->n_layers = (int)nl;
    c->eps = (float)eps;
    c->norm = RC_NORM_POW_W;
    c->qk_norm = RC_NORM_POW_W;
    c->v_norm = RC_NORM_POW;
    c->emb_scale = (float)sqrt((double)hidden); /* HF: fp32 tensor of hidden_size ** 0.5 */
    c->final_softcap = (float)softcap;
    c->post_norms = 1;
    c->layer_scalar = 1;
    c->ple_dim = (int)P;
    c->ple_vocab = P ? Vp : 0;
    snprintf(c->weight_prefix, sizeof c->weight_prefix, "model.");
    /* attention scale 1: q and k are RMS-normalised instead */
    rc = gemma_layers(p, c, nl, full, lhd, lkv, nh, win, rope_of, 1.0f, 1, inter);
out_rope:
    cJSON_Delete(defaults);
out:
    free(full);
    return rc;
}

/* ---- gemma3_text: gemma4's sandwich layout without its extensions ---- */

/* One gemma3 RoPE table, for the layers of type full (1) or sliding (0), merged as HF's Gemma3TextConfig merges
 * it: rope_parameters.<layer type> (absent: default), a legacy rope_scaling updating the full layers' entry, and a
 * missing rope_theta taken from theta (rope_theta for full layers, rope_local_base_freq for sliding ones). default
 * or linear, over the whole head (HF's gemma3 tables ignore partial_rotary_factor). */
static int gemma3_rope(parse_ctx *p, const cJSON *params, const cJSON *legacy, int full, double theta, int D,
                       rc_rope_desc *r)
{
    const char *type_name = gemma_types[full].name;
    char name[64], key[96];
    snprintf(name, sizeof name, "rope_parameters.%s", type_name);
    const cJSON *ent = params ? cJSON_GetObjectItemCaseSensitive(params, type_name) : NULL;
    if (ent && !cJSON_IsNull(ent) && !cJSON_IsObject(ent))
        return bad(p, name, ent, "expected an object");
    cJSON *m = ent && cJSON_IsObject(ent) ? cJSON_Duplicate(ent, 1) : cJSON_CreateObject();
    int rc = m ? RC_OK : rc_fail(p->e, RC_E_NOMEM, "config: out of memory");
    const cJSON *it;
    if (!rc && full && legacy)
        cJSON_ArrayForEach(it, legacy) {
            cJSON *d = cJSON_Duplicate(it, 1);
            if (!d || (cJSON_GetObjectItemCaseSensitive(m, it->string)
                           ? !cJSON_ReplaceItemInObjectCaseSensitive(m, it->string, d)
                           : !cJSON_AddItemToObject(m, it->string, d))) {
                cJSON_Delete(d);
                rc = rc_fail(p->e, RC_E_NOMEM, "config: out of memory");
                break;
            }
        }
    rope_fields f = {.type = "default", .theta = -1, .prf = -1, .factor = -1};
    int is_linear = 0;
    if (!rc)
        rc = gemma_rope_entry(p, name, m, "linear", &f, &is_linear);
    cJSON_Delete(m);
    snprintf(key, sizeof key, "%s.factor", name);
    if (!rc && is_linear && !(f.factor > 0))
        rc = missing(p, key);
    if (!rc && f.theta > 0)
        theta = f.theta;
    snprintf(key, sizeof key, "%s.rope_theta", name);
    if (!rc && !(theta > 0 && isfinite(theta)))
        rc = bad_num(p, key, theta, "must be positive");
    if (rc)
        return rc;
    gemma_rope_fill(r, full, is_linear ? RC_ROPE_LINEAR : RC_ROPE_DEFAULT, theta, is_linear ? f.factor : 1.0, D, D / 2);
    return RC_OK;
}

/* gemma3_text (docs/architectures.md, "The families"): the sandwich-norm layer of gemma4 with (1 + w) RMSNorms
 * everywhere (block, post and q/k norms), no V norm, the attention scale query_pre_attn_scalar^-0.5, one head
 * width, a default (or linear) RoPE table per layer type, and none of gemma4's per-layer embeddings or
 * layer_scalar. Defaults are HF's Gemma3TextConfig's. */
static int parse_gemma3_text(parse_ctx *p, rc_config *c)
{
    const name_val *types = gemma_types;
    int64_t vocab, hidden, inter, nl, nh, nkv, hd, win, pattern;
    double eps, softcap, qpas, theta_full, theta_local;
    int rc, given, bidir;
    if ((rc = get_sizes(p, &vocab, &hidden, &inter, &nl, &nh)) ||
        (rc = get_int(p, "num_key_value_heads", 4, 1, 4096, &nkv)) ||
        (rc = get_int(p, "head_dim", 256, 2, 4096, &hd)) ||
        (rc = get_int(p, "sliding_window", 4096, 1, INT32_MAX, &win)) ||
        (rc = get_int(p, "sliding_window_pattern", 6, 1, 4096, &pattern)) ||
        (rc = get_num(p, "query_pre_attn_scalar", 256, &qpas)) ||
        (rc = get_num(p, "rms_norm_eps", 1e-6, &eps)) ||
        (rc = get_num(p, "final_logit_softcapping", 0.0, &softcap)) ||
        (rc = get_num(p, "rope_theta", 1e6, &theta_full)) ||
        (rc = get_num(p, "rope_local_base_freq", 1e4, &theta_local)) ||
        (rc = get_act(p, "hidden_activation", "gelu_pytorch_tanh", &c->act)) ||
        (rc = get_bool(p, "attention_bias", 0, &c->attn_bias)) ||
        (rc = get_bool(p, "tie_word_embeddings", 1, &c->tie_embeddings)) ||
        (rc = get_bool(p, "use_bidirectional_attention", 0, &bidir)) ||
        (rc = require_off(p, "attn_logit_softcapping")))
        return rc;
    if (bidir)
        return bad(p, "use_bidirectional_attention", field(p, "use_bidirectional_attention"),
                   "not implemented (bidirectional attention)");
    if (!(qpas > 0))
        return bad_num(p, "query_pre_attn_scalar", qpas, "must be positive");
    if (field(p, "final_logit_softcapping") && !(softcap > 0))
        return bad_num(p, "final_logit_softcapping", softcap, "must be positive or null");
    if (!(eps > 0))
        return bad_num(p, "rms_norm_eps", eps, "must be positive");
    if (nh % nkv || hd % 2)
        return rc_fail(p->e, RC_E_UNSUPPORTED,
                       "config: head_dim %lld and %lld kv heads for %lld heads: needs an even head_dim and a kv head "
                       "count dividing num_attention_heads",
                       (long long)hd, (long long)nkv, (long long)nh);
    const cJSON *params = field(p, "rope_parameters"), *legacy = field(p, "rope_scaling");
    if (params && !cJSON_IsObject(params))
        return bad(p, "rope_parameters", params, "expected an object keyed by layer type");
    if (legacy && !cJSON_IsObject(legacy))
        return bad(p, "rope_scaling", legacy, "expected an object");
    if (params && (rc = gemma_rope_keys(p, params)))
        return rc;

    int *full = rc_calloc(3 * nl, sizeof *full, p->e, "layer types"); /* full[], then head dims and kv heads */
    if (!full)
        return p->e->code;
    if ((rc = read_layer_types(p, nl, types, full, &given)))
        goto out;
    if (!given) /* HF: every pattern-th layer is full, the others sliding (no layer forced) */
        for (int i = 0; i < nl; i++)
            full[i] = (i + 1) % pattern == 0;
    int rope_of[2] = {-1, -1};
    c->n_ropes = 0;
    for (int t = 0; t < 2; t++) {
        int used = 0;
        for (int i = 0; i < nl; i++)
            used |= full[i] == t;
        if (!used)
            continue;
        rope_of[t] = c->n_ropes;
        if ((rc = gemma3_rope(p, params, legacy, t, t ? theta_full : theta_local, (int)hd, &c->ropes[c->n_ropes++])))
            goto out;
    }
    c->vocab = vocab;
    c->hidden = hidden;
    c->n_layers = (int)nl;
    c->eps = (float)eps;
    c->norm = RC_NORM_1PW;
    c->qk_norm = RC_NORM_1PW;
    c->v_norm = RC_NORM_1PW; /* no layer normalises V */
    c->emb_scale = (float)sqrt((double)hidden); /* HF: fp32 tensor of hidden_size ** 0.5 */
    c->final_softcap = (float)softcap;
    c->post_norms = 1;
    snprintf(c->weight_prefix, sizeof c->weight_prefix, "model.");
    for (int i = 0; i < nl; i++) {
        full[nl + i] = (int)hd;
        full[2 * nl + i] = (int)nkv;
    }
    rc = gemma_layers(p, c, nl, full, full + nl, full + 2 * nl, nh, win, rope_of,
                      (float)pow(qpas, -0.5) /* HF: query_pre_attn_scalar ** -0.5 */, 0, inter);
out:
    free(full);
    return rc;
}

/* The model_types rc_config_parse implements: X("model_type", parser). */
#define RC_MODEL_TYPES(X)                                                                                   \
    X("llama", parse_llama) X("qwen3", parse_qwen3) X("mistral", parse_mistral) X("qwen3_5_text", parse_qwen3_5_text)                  \
    X("qwen3_5", parse_qwen3_5) X("gemma3_text", parse_gemma3_text) X("gemma4_text", parse_gemma4_text)         \
    X("gemma4", parse_gemma4)

typedef struct arch_entry {
    const char *model_type;
    int (*parse)(parse_ctx *p, rc_config *c);
} arch_entry;

static const arch_entry archs[] = {
#define RC_ARCH_ROW(mt, fn) {mt, fn},
    RC_MODEL_TYPES(RC_ARCH_ROW)
#undef RC_ARCH_ROW
};

const char *rc_config_model_types(void)
{
#define RC_ARCH_NAME(mt, fn) ", " mt
    static const char list[] = RC_MODEL_TYPES(RC_ARCH_NAME);
#undef RC_ARCH_NAME
    return list + 2;
}

/* One JSON type token of a metadata row's types (see config_fields.h). */
static int meta_type_ok(const cJSON *it, const char *t, size_t n)
{
#define IS(name) (n == strlen(name) && strncmp(t, name, n) == 0)
    if (IS("null"))
        return cJSON_IsNull(it);
    if (IS("int") || IS("ids")) {
        if (cJSON_IsNumber(it) && it->valuedouble == floor(it->valuedouble))
            return 1;
        if (!IS("ids") || !cJSON_IsArray(it))
            return 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, it) if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble)) return 0;
        return 1;
    }
    if (IS("num"))
        return cJSON_IsNumber(it) && isfinite(it->valuedouble);
    if (IS("str"))
        return cJSON_IsString(it);
    if (IS("bool"))
        return cJSON_IsBool(it);
    if (IS("obj"))
        return cJSON_IsObject(it);
    if (IS("empty"))
        return (cJSON_IsObject(it) || cJSON_IsArray(it)) && !it->child;
    if (IS("strs")) {
        const cJSON *x;
        if (!cJSON_IsArray(it))
            return 0;
        cJSON_ArrayForEach(x, it) if (!cJSON_IsString(x)) return 0;
        return 1;
    }
#undef IS
    return 0;
}

/* A metadata field: its type, and the few values that would change the forward pass. */
static int check_meta(parse_ctx *p, const rc_config_field *f, const cJSON *it)
{
    int ok = 0;
    for (const char *t = f->types; *t;) {
        size_t n = strcspn(t, "|");
        ok |= meta_type_ok(it, t, n);
        t += n + (t[n] == '|');
    }
    if (!ok) {
        char why[96];
        snprintf(why, sizeof why, "expected %s (metadata: %.40s)", f->types, f->reason);
        return bad(p, f->name, it, why);
    }
    if (strcmp(f->name, "rope_interleaved") == 0 && cJSON_IsTrue(it))
        return bad(p, f->name, it, "not implemented (HF ignores it, so an interleaved checkpoint would run wrong)");
    if (strcmp(f->name, "pretraining_tp") == 0 && cJSON_IsNumber(it) && it->valuedouble != 1)
        return bad(p, f->name, it, "not implemented (only 1: the sliced pretraining matmuls differ in rounding)");
    if (strcmp(f->name, "quantization_config") == 0 && cJSON_IsObject(it)) {
        const cJSON *qm = cJSON_GetObjectItemCaseSensitive(it, "quant_method");
        if (!(cJSON_IsString(qm) && (strcmp(qm->valuestring, "gguf") == 0 || strcmp(qm->valuestring, "gptq") == 0)))
            return bad(p, "quantization_config.quant_method", qm,
                       "not implemented (only \"gguf\", whose weights the export dequantized, and \"gptq\", "
                       "model/gptq_layout.h)");
    }
    return RC_OK;
}

/* Every field the parser did not read must be in the field table: metadata is type-checked and ignored; math of
 * another model_type (or math refused by name) is accepted only when null; anything else is refused by name. */
static int check_unknown_fields(parse_ctx *p)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, p->root) {
        int used = 0;
        for (int i = 0; !used && i < p->n_used; i++)
            used = strcmp(p->used[i], it->string) == 0;
        if (used)
            continue;
        const rc_config_field *f = rc_config_field_find(it->string);
        if (!f)
            return bad(p, it->string, it, "unknown field, refused rather than ignored");
        if (f->cls == RC_FIELD_META) {
            int rc = check_meta(p, f, it);
            if (rc)
                return rc;
            continue;
        }
        if (cJSON_IsNull(it) || cJSON_IsFalse(it)) /* off */
            continue;
        char why[128];
        snprintf(why, sizeof why, f->cls == RC_FIELD_MATH ? "not implemented for this model_type (%s)"
                                                          : "not implemented: %s", f->reason);
        return bad(p, it->string, it, why);
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
    cJSON *root = rc_json_parse_strict(json, strlen(json), "config", e);
    if (!root)
        return e->code;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return rc_fail(e, RC_E_FORMAT, "config: not a JSON object");
    }
    parse_ctx p = {.root = root, .scope = "", .e = e};
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
        rc = rc_fail(e, RC_E_UNSUPPORTED, "config field 'model_type' = \"%.40s\": not implemented (%s)",
                     mt->valuestring, rc_config_model_types());
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
    memset(cfg, 0, sizeof *cfg);
    char *text = rc_read_text(path, "config", 64 << 20, e);
    if (!text)
        return e->code;
    struct stat st; /* a NUL byte would end the text early: the file is longer than its string */
    int rc = stat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size != strlen(text)
                 ? rc_fail(e, RC_E_FORMAT, "config: a NUL byte at offset %zu: not JSON text", strlen(text))
                 : rc_config_parse(text, cfg, e);
    free(text);
    if (rc) {
        char tmp[sizeof e->msg];
        snprintf(tmp, sizeof tmp, "%s", e->msg);
        rc_fail(e, rc, "%s: %s", path, tmp);
    }
    return rc;
}

void rc_config_free(rc_config *cfg)
{
    free(cfg->layers);
    memset(cfg, 0, sizeof *cfg);
}

unsigned rc_config_features(const rc_config *c)
{
    unsigned f = 0;
    const rc_norm_kind kinds[] = {c->norm, c->qk_norm, c->v_norm};
    for (int k = 0; k < 3; k++) {
        int used = k == 0;
        for (int i = 0; i < c->n_layers && !used; i++)
            used = k == 1 ? c->layers[i].q_norm || c->layers[i].k_norm : c->layers[i].v_norm;
        if (used && kinds[k] == RC_NORM_1PW)
            f |= RC_FEAT_NORM_1PW;
        if (used && (kinds[k] == RC_NORM_POW_W || kinds[k] == RC_NORM_POW))
            f |= RC_FEAT_NORM_POW;
    }
    for (int r = 0; r < c->n_ropes; r++) {
        const rc_rope_desc *d = &c->ropes[r];
        if (d->rot_dim != d->head_dim || d->n_freq != d->rot_dim / 2 || d->exp_den != d->rot_dim ||
            (d->type == RC_ROPE_PROPORTIONAL && d->factor != 1.0))
            f |= RC_FEAT_PARTIAL_ROPE;
        if (d->type == RC_ROPE_LINEAR || d->type == RC_ROPE_LLAMA3 || d->type == RC_ROPE_YARN)
            f |= RC_FEAT_ROPE_SCALING;
    }
    for (int i = 0; i < c->n_layers; i++) {
        const rc_layer_desc *l = &c->layers[i], *l0 = &c->layers[0];
        if (l->out_gate)
            f |= RC_FEAT_OUT_GATE;
        if (l->v_norm)
            f |= RC_FEAT_V_NORM;
        if (l->mixer != l0->mixer || l->head_dim != l0->head_dim || l->n_heads != l0->n_heads ||
            l->n_kv_heads != l0->n_kv_heads || l->intermediate != l0->intermediate)
            f |= RC_FEAT_MIXED_LAYERS;
    }
    if (c->post_norms)
        f |= RC_FEAT_POST_NORMS;
    if (c->emb_scale != 0.0f)
        f |= RC_FEAT_EMB_SCALE;
    if (c->final_softcap != 0.0f)
        f |= RC_FEAT_SOFTCAP;
    if (c->ple_dim > 0)
        f |= RC_FEAT_PLE;
    if (c->layer_scalar)
        f |= RC_FEAT_LAYER_SCALAR;
    if (c->act == RC_ACT_GELU_TANH)
        f |= RC_FEAT_GELU_TANH;
    return f;
}

const char *rc_feature_name(unsigned bit)
{
#define RC_FEAT_NAME(id, name) if (bit == RC_FEAT_##id) return name;
    RC_FEATURES(RC_FEAT_NAME)
#undef RC_FEAT_NAME
    return "unknown feature";
}

int rc_config_check(const rc_config *c, const rc_caps *caps, rc_err *e)
{
    unsigned missing = rc_config_features(c) & ~caps->features;
    for (unsigned bit = 1; missing; bit <<= 1)
        if (missing & bit)
            return rc_fail(e, RC_E_UNSUPPORTED, "stage %s: %s not implemented (model_type %s)", caps->stage,
                           rc_feature_name(bit), c->model_type);
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
        ADD(c->hidden, 2 + (c->post_norms ? 2 : 0));
        if (l->mixer == RC_MIXER_ATTN) {
            ADD(c->hidden, qd * (l->out_gate ? 2 : 1) + 2 * kd);
            ADD(qd, c->hidden);
            ADD(l->head_dim, l->q_norm + l->k_norm);
            if (c->attn_bias)
                ADD(1, qd * (l->out_gate ? 2 : 1) + 2 * kd + c->hidden);
        } else {
            const int64_t kd2 = (int64_t)l->gdn_k_heads * l->gdn_k_dim, vd = (int64_t)l->gdn_v_heads * l->gdn_v_dim;
            const int64_t C = 2 * kd2 + vd;
            ADD(c->hidden, C + vd + 2 * (int64_t)l->gdn_v_heads);      /* in_proj_qkv, _z, _b, _a */
            ADD(C, l->gdn_conv_kernel);                                /* conv1d */
            ADD(1, 2 * (int64_t)l->gdn_v_heads + l->gdn_v_dim);        /* dt_bias, A_log, norm */
            ADD(vd, c->hidden);                                        /* out_proj */
        }
        ADD(c->hidden, 3 * (int64_t)l->intermediate);
        if (c->mlp_bias)
            ADD(1, 2 * (int64_t)l->intermediate + c->hidden);
        if (c->layer_scalar)
            ADD(1, 1);
        if (c->ple_dim)
            ADD(c->hidden, 2 * (int64_t)c->ple_dim + 1);
    }
    if (c->ple_dim) {
        int64_t lp;
        if (!rc_mul_i64(c->n_layers, c->ple_dim, &lp))
            return 0;
        ADD(c->ple_vocab + c->hidden, lp);
        ADD(1, c->ple_dim);
    }
#undef ADD
    *out = total;
    return 1;
}
