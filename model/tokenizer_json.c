/* HF tokenizer.json -> rc_tok_spec: the BPE model, added tokens, the pre-tokenizer as regex stages, the
 * post-processor's special-token prefix/suffix. What HF can express and we do not implement is refused by name. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "tokenizer_spec.h"

typedef struct json_ctx {
    rc_tok_spec *s;
    const char *what;
    rc_err *e;
    const cJSON *added;  /* for post-processor token names */
    const cJSON *vocab;
    int has_bytelevel_decoder;
} json_ctx;

static const char *type_of(const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "(no type)";
}

static int flag(const cJSON *o, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static int is_absent(const cJSON *o, const char *key) /* missing, null, or "" */
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return !v || cJSON_IsNull(v) || (cJSON_IsString(v) && !v->valuestring[0]);
}

static int add_regex(json_ctx *c, const char *re)
{
    if (c->s->n_pre == RC_TOK_MAX_PRE)
        return rc_fail(c->e, RC_E_UNSUPPORTED, "%s: more than %d pre-tokenizer stages", c->what, RC_TOK_MAX_PRE);
    c->s->pre_regex[c->s->n_pre++] = re;
    return RC_OK;
}

static int pre_tokenizer(json_ctx *c, const cJSON *p)
{
    if (!p || cJSON_IsNull(p))
        return RC_OK;
    const char *type = type_of(p);
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers"), *it;
        if (!cJSON_IsArray(list))
            return rc_fail(c->e, RC_E_FORMAT, "%s: pre_tokenizer Sequence without 'pretokenizers'", c->what);
        cJSON_ArrayForEach(it, list) {
            int rc = pre_tokenizer(c, it);
            if (rc)
                return rc;
        }
        return RC_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        if (flag(p, "add_prefix_space", 0))
            return rc_fail(c->e, RC_E_UNSUPPORTED, "%s: ByteLevel pre-tokenizer with add_prefix_space is not "
                           "supported", c->what);
        c->s->byte_level = 1;
        return flag(p, "use_regex", 1) ? add_regex(c, RC_TOK_RE_GPT2) : RC_OK;
    }
    if (!strcmp(type, "Digits"))
        return add_regex(c, flag(p, "individual_digits", 0) ? RC_TOK_RE_DIGIT : "\\p{N}+");
    if (!strcmp(type, "Split")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const cJSON *beh = cJSON_GetObjectItemCaseSensitive(p, "behavior");
        if (!cJSON_IsString(re))
            return rc_fail(c->e, RC_E_UNSUPPORTED, "%s: Split pre-tokenizer without a Regex pattern is not "
                           "supported", c->what);
        if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") || flag(p, "invert", 0))
            return rc_fail(c->e, RC_E_UNSUPPORTED, "%s: Split pre-tokenizer behavior '%s'%s is not supported "
                           "(Isolated is)", c->what, cJSON_IsString(beh) ? beh->valuestring : "(none)",
                           flag(p, "invert", 0) ? " inverted" : "");
        return add_regex(c, re->valuestring);
    }
    return rc_fail(c->e, RC_E_UNSUPPORTED, "%s: pre-tokenizer '%s' is not supported", c->what, type);
}

/* None, NFC, or a Sequence of those. */
static int normalizer(json_ctx *c, const cJSON *n)
{
    if (!n || cJSON_IsNull(n))
        return RC_OK;
    const char *type = type_of(n);
    if (!strcmp(type, "NFC")) {
        c->s->nfc = 1;
        return RC_OK;
    }
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers"), *it;
    if (!strcmp(type, "Sequence") && cJSON_IsArray(list)) {
        cJSON_ArrayForEach(it, list) {
            int rc = normalizer(c, it);
            if (rc)
                return rc;
        }
        return RC_OK;
    }
    return rc_fail(c->e, RC_E_UNSUPPORTED, "%s: normalizer '%s' is not supported (NFC is)", c->what, type);
}

static int decoder(json_ctx *c, const cJSON *d)
{
    if (!d || cJSON_IsNull(d))
        return rc_fail(c->e, RC_E_UNSUPPORTED, "%s: no decoder (HF joins tokens with spaces) is not supported",
                       c->what);
    const char *type = type_of(d);
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(d, "decoders"), *it;
        cJSON_ArrayForEach(it, list) {
            int rc = decoder(c, it);
            if (rc)
                return rc;
        }
        return RC_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        c->has_bytelevel_decoder = 1;
        return RC_OK;
    }
    if (!strcmp(type, "ByteFallback") || !strcmp(type, "Fuse"))
        return RC_OK;
    return rc_fail(c->e, RC_E_UNSUPPORTED, "%s: decoder '%s' is not supported", c->what, type);
}

static int32_t token_id(json_ctx *c, const char *tok)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, c->added) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (cJSON_IsString(content) && cJSON_IsNumber(id) && !strcmp(content->valuestring, tok))
            return (int32_t)id->valuedouble;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->vocab, tok);
    return cJSON_IsNumber(v) ? (int32_t)v->valuedouble : -1;
}

/* TemplateProcessing's "single": special tokens before and after $A. */
static int post_processor(json_ctx *c, const cJSON *p)
{
    if (!p || cJSON_IsNull(p))
        return RC_OK;
    const char *type = type_of(p);
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "processors"), *it;
        cJSON_ArrayForEach(it, list) {
            int rc = post_processor(c, it);
            if (rc)
                return rc;
        }
        return RC_OK;
    }
    if (!strcmp(type, "ByteLevel"))
        return RC_OK; /* offsets only */
    if (strcmp(type, "TemplateProcessing"))
        return rc_fail(c->e, RC_E_UNSUPPORTED, "%s: post-processor '%s' is not supported", c->what, type);
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single"), *it;
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens");
    int seen_seq = 0;
    cJSON_ArrayForEach(it, single) {
        if (cJSON_GetObjectItemCaseSensitive(it, "Sequence")) {
            seen_seq = 1;
            continue;
        }
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(it, "SpecialToken"),
                                                           "id");
        if (!cJSON_IsString(sp))
            return rc_fail(c->e, RC_E_FORMAT, "%s: TemplateProcessing item is neither Sequence nor SpecialToken",
                           c->what);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(specials, sp->valuestring), "ids"), *idv;
        int32_t one[1] = {token_id(c, sp->valuestring)};
        int n = 0;
        int32_t *dst = seen_seq ? c->s->suffix : c->s->prefix;
        int *nd = seen_seq ? &c->s->n_suffix : &c->s->n_prefix;
        if (cJSON_IsArray(ids)) {
            cJSON_ArrayForEach(idv, ids) {
                if (!cJSON_IsNumber(idv) || *nd + n >= RC_TOK_MAX_AFFIX)
                    return rc_fail(c->e, RC_E_FORMAT, "%s: TemplateProcessing special token '%s' ids", c->what,
                                   sp->valuestring);
                dst[*nd + n++] = (int32_t)idv->valuedouble;
            }
        } else if (one[0] >= 0 && *nd < RC_TOK_MAX_AFFIX)
            dst[*nd + n++] = one[0];
        else
            return rc_fail(c->e, RC_E_FORMAT, "%s: TemplateProcessing names unknown token '%s'", c->what,
                           sp->valuestring);
        *nd += n;
    }
    return RC_OK;
}

static int load(json_ctx *c, const cJSON *root)
{
    rc_tok_spec *s = c->s;
    rc_err *e = c->e;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model))
        return rc_fail(e, RC_E_FORMAT, "%s: no 'model' object", c->what);
    if (strcmp(type_of(model), "BPE"))
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: model '%s' is not supported (BPE is)", c->what, type_of(model));
    if (!is_absent(model, "dropout") || !is_absent(model, "continuing_subword_prefix") ||
        !is_absent(model, "end_of_word_suffix"))
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: BPE dropout / continuing_subword_prefix / end_of_word_suffix are "
                       "not supported", c->what);
    c->vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    c->added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(c->vocab))
        return rc_fail(e, RC_E_FORMAT, "%s: model.vocab is not an object", c->what);
    int64_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, c->vocab) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= (1 << 30) ||
            it->valuedouble != (double)(int64_t)it->valuedouble)
            return rc_fail(e, RC_E_FORMAT, "%s: vocab entry '%s' has a bad id", c->what, it->string);
        if ((int64_t)it->valuedouble >= n)
            n = (int64_t)it->valuedouble + 1;
    }
    const int64_t entries = cJSON_GetArraySize(c->vocab), na = cJSON_IsArray(c->added) ? cJSON_GetArraySize(c->added)
                                                                                         : 0;
    if (n > RC_TOK_SPARSE_MAX(entries + na)) /* every table is sized by the highest id */
        return rc_fail(e, RC_E_FORMAT, "%s: vocab ids reach %lld for %lld entries (and %lld added tokens): a "
                       "vocabulary this sparse is refused", c->what, (long long)(n - 1), (long long)entries,
                       (long long)na);
    const char **tokens = calloc((size_t)n + 1, sizeof *tokens);
    if (!tokens)
        return rc_fail(e, RC_E_NOMEM, "%s: out of host memory", c->what);
    s->tokens = tokens;
    s->n_vocab = n;
    cJSON_ArrayForEach(it, c->vocab) {
        const int64_t id = (int64_t)it->valuedouble;
        if (tokens[id])
            return rc_fail(e, RC_E_FORMAT, "%s: vocab entries '%s' and '%s' share id %lld", c->what, tokens[id],
                           it->string, (long long)id);
        tokens[id] = it->string;
    }
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const int64_t nm = cJSON_IsArray(merges) ? cJSON_GetArraySize(merges) : 0;
    const char **left = calloc((size_t)nm + 1, sizeof *left), **right = calloc((size_t)nm + 1, sizeof *right);
    s->merge_left = left;
    s->merge_right = right;
    if (!left || !right)
        return rc_fail(e, RC_E_NOMEM, "%s: out of host memory", c->what);
    int64_t r = 0;
    cJSON_ArrayForEach(it, merges) {
        if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
            cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            left[r] = cJSON_GetArrayItem(it, 0)->valuestring;
            right[r] = cJSON_GetArrayItem(it, 1)->valuestring;
        } else if (cJSON_IsString(it) && strchr(it->valuestring, ' ') && strchr(it->valuestring, ' ') ==
                   strrchr(it->valuestring, ' ') && it->valuestring[0] != ' ') {
            char *sp = strchr(it->valuestring, ' '); /* "left right": split in place, the tree is ours */
            *sp = 0;
            left[r] = it->valuestring;
            right[r] = sp + 1;
        } else
            return rc_fail(e, RC_E_FORMAT, "%s: merge %lld is neither [left, right] nor \"left right\"", c->what,
                           (long long)r);
        r++;
    }
    s->n_merges = r;
    s->byte_fallback = flag(model, "byte_fallback", 0);
    s->ignore_merges = flag(model, "ignore_merges", 0);
    s->fuse_unk = flag(model, "fuse_unk", 0);
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    s->unk_id = -1;
    if (cJSON_IsString(unk)) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(c->vocab, unk->valuestring);
        if (!cJSON_IsNumber(u))
            return rc_fail(e, RC_E_FORMAT, "%s: unk_token '%s' is not in the vocabulary", c->what, unk->valuestring);
        s->unk_id = (int32_t)u->valuedouble;
    }

    int32_t *aid = calloc((size_t)na + 1, sizeof *aid);
    const char **acontent = calloc((size_t)na + 1, sizeof *acontent);
    unsigned char *anorm = calloc((size_t)na + 1, 1);
    s->added_id = aid;
    s->added_content = acontent;
    s->added_normalized = anorm;
    if (!aid || !acontent || !anorm)
        return rc_fail(e, RC_E_NOMEM, "%s: out of host memory", c->what);
    int64_t k = 0;
    cJSON_ArrayForEach(it, c->added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content) || id->valuedouble < 0 || id->valuedouble >= (1 << 30))
            return rc_fail(e, RC_E_FORMAT, "%s: added token %lld lacks an id or content", c->what, (long long)k);
        if (flag(it, "single_word", 0) || flag(it, "lstrip", 0) || flag(it, "rstrip", 0))
            return rc_fail(e, RC_E_UNSUPPORTED, "%s: added token '%s' uses single_word/lstrip/rstrip (not "
                           "supported)", c->what, content->valuestring);
        aid[k] = (int32_t)id->valuedouble;
        acontent[k] = content->valuestring;
        anorm[k] = (unsigned char)flag(it, "normalized", !flag(it, "special", 0));
        k++;
    }
    s->n_added = k;
    int rc = normalizer(c, cJSON_GetObjectItemCaseSensitive(root, "normalizer"));
    if (!rc)
        rc = pre_tokenizer(c, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
    if (!rc)
        rc = decoder(c, cJSON_GetObjectItemCaseSensitive(root, "decoder"));
    if (!rc && c->has_bytelevel_decoder != s->byte_level)
        rc = rc_fail(e, RC_E_UNSUPPORTED, "%s: a ByteLevel %s without a ByteLevel %s is not supported", c->what,
                     s->byte_level ? "pre-tokenizer" : "decoder", s->byte_level ? "decoder" : "pre-tokenizer");
    if (!rc)
        rc = post_processor(c, cJSON_GetObjectItemCaseSensitive(root, "post_processor"));
    return rc;
}

int rc_tokenizer_from_json_text(rc_tokenizer **out, const char *json, const char *what, rc_err *e)
{
    *out = NULL;
    cJSON *root = cJSON_Parse(json);
    if (!root)
        return rc_fail(e, RC_E_FORMAT, "%s: not valid JSON", what);
    rc_tok_spec s;
    memset(&s, 0, sizeof s);
    s.what = what;
    s.bos_id = s.eos_id = -1;
    json_ctx c = {.s = &s, .what = what, .e = e};
    int rc = load(&c, root);
    if (!rc)
        rc = rc_tokenizer_build(out, &s, e);
    free((void *)s.tokens);
    free((void *)s.merge_left);
    free((void *)s.merge_right);
    free((void *)s.added_id);
    free((void *)s.added_content);
    free((void *)s.added_normalized);
    cJSON_Delete(root);
    return rc;
}

int rc_tokenizer_from_json(rc_tokenizer **out, const char *path, rc_err *e)
{
    *out = NULL;
    char *text = rc_read_text(path, "tokenizer", 256 << 20, e);
    if (!text)
        return e ? e->code : RC_E_IO;
    int rc = rc_tokenizer_from_json_text(out, text, path, e);
    free(text);
    return rc;
}
