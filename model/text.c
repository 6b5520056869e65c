/* Loads the text side of a model (tokenizer, chat template, stop ids) from an HF folder, a tokenizer.json or
 * GGUF metadata. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

void rc_text_free(rc_text *t)
{
    rc_tokenizer_free(t->tok);
    free(t->chat_template);
    memset(t, 0, sizeof *t);
}
