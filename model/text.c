/* Loads the text side of a model (tokenizer, chat template, stop ids) from an HF folder, a tokenizer.json or
 * GGUF metadata. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "io.h"
#include "text.h"

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The JSON object in dir/name, or NULL when the file is absent (RC_OK) or bad (*rc set). */
static cJSON *read_json(const char *dir, const char *name, int *rc, rc_err *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!file_exists(path))
        return NULL;
    char *text = rc_read_text(path, name, 64 << 20, e);
    if (!text) {
        *rc = e ? e->code : RC_E_IO;
        return NULL;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        *rc = rc_fail(e, RC_E_FORMAT, "%s: not a JSON object", path);
        return NULL;
    }
    return j;
}

static void add_stop(rc_text *t, int32_t id)
{
    for (int i = 0; i < t->n_stop; i++)
        if (t->stop[i] == id)
            return;
    if (id >= 0 && t->n_stop < RC_TEXT_MAX_STOP)
        t->stop[t->n_stop++] = id;
}

/* eos_token_id: a number or a list of numbers. */
static int stops_from(rc_text *t, const cJSON *cfg, const char *what, rc_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, "eos_token_id"), *it;
    if (!v || cJSON_IsNull(v))
        return RC_OK;
    if (cJSON_IsNumber(v)) {
        add_stop(t, (int32_t)v->valuedouble);
        return RC_OK;
    }
    if (!cJSON_IsArray(v))
        return rc_fail(e, RC_E_FORMAT, "%s: eos_token_id is neither a number nor a list", what);
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsNumber(it))
            return rc_fail(e, RC_E_FORMAT, "%s: eos_token_id list holds a non-number", what);
        add_stop(t, (int32_t)it->valuedouble);
    }
    return RC_OK;
}

/* bos_token / eos_token: a string or an AddedToken object {"content": ...}. */
static const char *token_string(const cJSON *cfg, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v))
        v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static char *chat_template_of(const cJSON *tc)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(tc, "chat_template"), *it;
    if (cJSON_IsString(v))
        return strdup(v->valuestring);
    if (!cJSON_IsArray(v))
        return NULL;
    cJSON_ArrayForEach(it, v) { /* [{"name": "default", "template": ...}, ...] */
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(it, "template");
        if (cJSON_IsString(name) && !strcmp(name->valuestring, "default") && cJSON_IsString(tpl))
            return strdup(tpl->valuestring);
    }
    return NULL;
}

int rc_text_load_tokenizer(rc_text *t, const char *path, rc_err *e)
{
    memset(t, 0, sizeof *t);
    return rc_tokenizer_from_json(&t->tok, path, e);
}

int rc_text_load_hf(rc_text *t, const char *dir, rc_err *e)
{
    memset(t, 0, sizeof *t);
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!file_exists(path))
        return rc_fail(e, RC_E_MISSING, "%s: no such file (the model folder has no tokenizer)", path);
    int rc = rc_tokenizer_from_json(&t->tok, path, e);
    cJSON *tc = rc ? NULL : read_json(dir, "tokenizer_config.json", &rc, e);
    cJSON *gen = rc ? NULL : read_json(dir, "generation_config.json", &rc, e);
    cJSON *cfg = rc ? NULL : read_json(dir, "config.json", &rc, e);
    if (!rc) {
        t->chat_template = chat_template_of(tc);
        snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
        if (!t->chat_template && file_exists(path) && !(t->chat_template = rc_read_text(path, "chat template",
                                                                                         16 << 20, e)))
            rc = e ? e->code : RC_E_IO;
    }
    if (!rc)
        rc = stops_from(t, gen, "generation_config.json", e);
    if (!rc && !t->n_stop)
        rc = stops_from(t, cfg, "config.json", e);
    const char *eos = token_string(tc, "eos_token"), *bos = token_string(tc, "bos_token");
    if (!rc && !t->n_stop && eos)
        add_stop(t, rc_tokenizer_find(t->tok, eos));
    if (!rc)
        rc_tokenizer_set_special(t->tok, bos ? rc_tokenizer_find(t->tok, bos) : -1, t->n_stop ? t->stop[0] : -1);
    cJSON_Delete(tc);
    cJSON_Delete(gen);
    cJSON_Delete(cfg);
    if (rc)
        rc_text_free(t);
    return rc;
}

int rc_text_from_gguf(rc_text *t, const rc_tok_arrays *a, const char *chat_template, rc_err *e)
{
    memset(t, 0, sizeof *t);
    int rc = rc_tokenizer_from_arrays(&t->tok, a, e);
    if (!rc && chat_template && !(t->chat_template = strdup(chat_template)))
        rc = rc_fail(e, RC_E_NOMEM, "out of host memory");
    if (!rc)
        add_stop(t, a->eos_id);
    if (rc)
        rc_text_free(t);
    return rc;
}

/* A GGUF string (not NUL-terminated in the mapping) as a malloc'd C string; NULL when absent or on error. */
static char *gguf_cstr(const rc_gguf *g, const char *key, int required, int *rc, rc_err *e)
{
    const rc_gguf_kv *kv = rc_gguf_find(g, key);
    rc_gguf_str s;
    if (*rc)
        return NULL;
    if (!kv) {
        if (required)
            *rc = rc_fail(e, RC_E_MISSING, "%s: GGUF key '%s' is missing (no tokenizer?)", g->path, key);
        return NULL;
    }
    if ((*rc = rc_gguf_get_str(g, kv, &s, e)))
        return NULL;
    char *c = strndup(s.s, s.len);
    if (!c)
        *rc = rc_fail(e, RC_E_NOMEM, "out of host memory");
    return c;
}

/* A string array as n malloc'd C strings (*out[n]). */
static int gguf_cstrs(const rc_gguf *g, const char *key, char ***out, int64_t *n, rc_err *e)
{
    const rc_gguf_kv *kv = rc_gguf_find(g, key);
    *out = NULL;
    *n = 0;
    if (!kv)
        return rc_fail(e, RC_E_MISSING, "%s: GGUF key '%s' is missing (no tokenizer?)", g->path, key);
    if (kv->type != RC_GGUF_ARRAY || kv->arr_type != RC_GGUF_STRING)
        return rc_fail(e, RC_E_FORMAT, "%s: GGUF key '%s' is not an array of strings", g->path, key);
    rc_gguf_str *s = calloc(kv->arr_n ? kv->arr_n : 1, sizeof *s);
    char **c = calloc(kv->arr_n ? kv->arr_n : 1, sizeof *c);
    int rc = (!s || !c) ? rc_fail(e, RC_E_NOMEM, "out of host memory") : rc_gguf_get_strs(g, kv, s, e);
    for (uint64_t i = 0; !rc && i < kv->arr_n; i++)
        if (!(c[i] = strndup(s[i].s, s[i].len)))
            rc = rc_fail(e, RC_E_NOMEM, "out of host memory");
    free(s);
    *out = c;
    *n = (int64_t)kv->arr_n;
    return rc;
}

/* An array key of n 4-byte values of GGUF type type (named tname in messages), copied into *out (malloc'd); *out
 * stays NULL, and RC_OK, when the key is absent. */
static int gguf_values(const rc_gguf *g, const char *key, uint32_t type, const char *tname, int64_t n, void **out,
                       rc_err *e)
{
    const rc_gguf_kv *kv = rc_gguf_find(g, key);
    if (!kv)
        return RC_OK;
    if (kv->type != RC_GGUF_ARRAY || kv->arr_type != type || (int64_t)kv->arr_n != n)
        return rc_fail(e, RC_E_FORMAT, "%s: %s is not %lld %s values", g->path, key, (long long)n, tname);
    if (!(*out = malloc((size_t)(n ? n : 1) * 4)))
        return rc_fail(e, RC_E_NOMEM, "out of host memory");
    memcpy(*out, kv->val, (size_t)n * 4); /* GGUF is little-endian, as the host */
    return RC_OK;
}

/* A boolean key (bool, or an integer read as nonzero) into *flag; *flag untouched when the key is absent. */
static int gguf_flag(const rc_gguf *g, const char *key, int *flag, rc_err *e)
{
    const rc_gguf_kv *kv = rc_gguf_find(g, key);
    int64_t v;
    if (!kv)
        return RC_OK;
    if (kv->type == RC_GGUF_BOOL) {
        *flag = kv->val[0] != 0;
        return RC_OK;
    }
    int rc = rc_gguf_get_int(g, kv, &v, e);
    if (!rc)
        *flag = v != 0;
    return rc;
}

static void free_strs(char **c, int64_t n)
{
    for (int64_t i = 0; c && i < n; i++)
        free(c[i]);
    free(c);
}

int rc_text_load_gguf(rc_text *t, const char *path, rc_err *e)
{
    memset(t, 0, sizeof *t);
    rc_gguf g;
    int rc = rc_gguf_open(&g, path, e);
    if (rc)
        return rc;
    char **tokens = NULL, **merges = NULL;
    int64_t n_tokens = 0, n_merges = 0;
    int32_t *types = NULL;
    float *scores = NULL;
    rc = gguf_cstrs(&g, "tokenizer.ggml.tokens", &tokens, &n_tokens, e);
    char *model = gguf_cstr(&g, "tokenizer.ggml.model", 1, &rc, e);
    const int spm = model && !strcmp(model, "llama"); /* SentencePiece: scores, no merges */
    if (!rc && !spm)
        rc = gguf_cstrs(&g, "tokenizer.ggml.merges", &merges, &n_merges, e);
    if (!rc && spm && !(rc = gguf_values(&g, "tokenizer.ggml.scores", RC_GGUF_F32, "float32", n_tokens,
                                         (void **)&scores, e)) && !scores)
        rc = rc_fail(e, RC_E_MISSING, "%s: GGUF key 'tokenizer.ggml.scores' is missing (a SentencePiece "
                     "tokenizer needs its piece scores)", path);
    if (!rc)
        rc = gguf_values(&g, "tokenizer.ggml.token_type", RC_GGUF_I32, "int32", n_tokens, (void **)&types, e);
    char *pre = gguf_cstr(&g, "tokenizer.ggml.pre", 0, &rc, e);
    char *tmpl = gguf_cstr(&g, "tokenizer.chat_template", 0, &rc, e);
    rc_tok_arrays a = {.n_vocab = n_tokens, .tokens = (const char *const *)tokens, .token_type = types,
                       .n_merges = n_merges, .merges = (const char *const *)merges, .model = model,
                       .pre = pre ? pre : "gpt2", .bos_id = -1, .eos_id = -1, .add_bos = 0, .scores = scores,
                       .add_space_prefix = 1, .unk_id = -1};
    const char *ids[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                         "tokenizer.ggml.unknown_token_id"};
    int32_t *dst[] = {&a.bos_id, &a.eos_id, &a.unk_id};
    for (int i = 0; i < (spm ? 3 : 2) && !rc; i++) {
        const rc_gguf_kv *kv = rc_gguf_find(&g, ids[i]);
        int64_t v;
        if (kv && !(rc = rc_gguf_get_int(&g, kv, &v, e))) {
            if (v < 0 || v >= n_tokens)
                rc = rc_fail(e, RC_E_RANGE, "%s: %s = %lld is outside the vocabulary of %lld", path, ids[i],
                             (long long)v, (long long)n_tokens);
            *dst[i] = (int32_t)v;
        }
    }
    if (!rc)
        rc = gguf_flag(&g, "tokenizer.ggml.add_bos_token", &a.add_bos, e);
    /* llama.cpp's reading: a SentencePiece file without the key adds the prefix space */
    if (!rc && spm)
        rc = gguf_flag(&g, "tokenizer.ggml.add_space_prefix", &a.add_space_prefix, e);
    if (!rc)
        rc = rc_text_from_gguf(t, &a, tmpl, e);
    free(scores);
    free_strs(tokens, n_tokens);
    free_strs(merges, n_merges);
    free(types);
    free(model);
    free(pre);
    free(tmpl);
    rc_gguf_close(&g);
    return rc;
}

int rc_text_load_model(rc_text *t, const char *path, rc_err *e)
{
    struct stat st;
    memset(t, 0, sizeof *t);
    if (rc_gguf_is_gguf(path))
        return rc_text_load_gguf(t, path, e);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return rc_text_load_hf(t, path, e);
    return rc_fail(e, RC_E_MISSING, "%s: has no tokenizer (a .gguf or an HF folder carries one)", path);
}

void rc_text_free(rc_text *t)
{
    rc_tokenizer_free(t->tok);
    free(t->chat_template);
    memset(t, 0, sizeof *t);
}
