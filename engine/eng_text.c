/* Text in and out of the engine command (see eng_text.h). */
#include "eng_text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"

static int is_dir(const char *p)
{
    struct stat st;
    return p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int eng_text_open(rc_text *txt, const char *model, const char *tokenizer, rc_err *e)
{
    memset(txt, 0, sizeof *txt);
    if (tokenizer && rc_gguf_is_gguf(tokenizer))
        return rc_text_load_gguf(txt, tokenizer, e);
    if (tokenizer)
        return is_dir(tokenizer) ? rc_text_load_hf(txt, tokenizer, e) : rc_text_load_tokenizer(txt, tokenizer, e);
    if (!model)
        return RC_OK;
    const int rc = rc_text_load_model(txt, model, e);
    return rc == RC_E_MISSING ? RC_OK : rc; /* a golden, a folder without tokenizer.json: ids only */
}

int eng_parse_ids(const char *s, int32_t **ids, int64_t *n)
{
    int64_t cap = 16, cnt = 0;
    int32_t *a = malloc((size_t)cap * sizeof *a);
    if (!a)
        return 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || v < INT32_MIN || v > INT32_MAX) {
            free(a);
            return 0;
        }
        if (cnt == cap) {
            int32_t *na = realloc(a, (size_t)(cap *= 2) * sizeof *a);
            if (!na) {
                free(a);
                return 0;
            }
            a = na;
        }
        a[cnt++] = (int32_t)v;
        p = end;
    }
    *ids = a;
    *n = cnt;
    return 1;
}

static int chat_ids(const rc_text *txt, const eng_prompt *p, int32_t **ids, int64_t *n, rc_err *e)
{
    if (!txt->chat_template)
        return rc_fail(e, RC_E_MISSING, "--chat: the model has no chat template");
    const rc_chat *c;
    int rc = rc_chat_find(txt->chat_template, &c, e);
    if (rc)
        return rc;
    const int32_t bos = rc_tokenizer_bos(txt->tok);
    const char *bos_s = bos >= 0 ? rc_tokenizer_token(txt->tok, bos) : NULL;
    char *text;
    if ((rc = rc_chat_apply(c, p->system, p->prompt, bos_s ? bos_s : "", &text, e)))
        return rc;
    rc = rc_tokenizer_encode(txt->tok, text, strlen(text), 0, ids, n, e); /* the template holds the specials */
    free(text);
    return rc;
}

int eng_prompt_ids(const rc_text *txt, const eng_prompt *p, int32_t **ids, int64_t *n, int *text_mode, rc_err *e)
{
    *ids = NULL;
    *n = 0;
    *text_mode = 0;
    const int has_tok = txt && txt->tok;
    if (!p->prompt == !p->ids)
        return rc_fail(e, RC_E_USAGE, "give exactly one of --prompt \"TEXT\", --ids \"IDS\" and --prompt-golden");
    if ((p->chat || p->system) && !p->prompt)
        return rc_fail(e, RC_E_USAGE, "--chat and --system need --prompt \"TEXT\"");
    if (p->system && !p->chat)
        return rc_fail(e, RC_E_USAGE, "--system needs --chat");
    if (p->ids) {
        if (!eng_parse_ids(p->ids, ids, n))
            return rc_fail(e, RC_E_USAGE, "--ids needs space-separated integer token ids, got '%s'", p->ids);
        return RC_OK;
    }
    if (!has_tok) {
        if (!p->chat && eng_parse_ids(p->prompt, ids, n))
            return RC_OK; /* no tokenizer: --prompt keeps its old meaning, an id list */
        return rc_fail(e, RC_E_MISSING, "%s needs a tokenizer and the model has none (no tokenizer.json): give "
                       "--tokenizer FILE, or token ids with --ids", p->chat ? "--chat" : "a text --prompt");
    }
    *text_mode = 1;
    return p->chat ? chat_ids(txt, p, ids, n, e)
                   : rc_tokenizer_encode(txt->tok, p->prompt, strlen(p->prompt), 1, ids, n, e);
}

int eng_is_stop(const rc_text *txt, int32_t id)
{
    for (int i = 0; txt && i < txt->n_stop; i++)
        if (txt->stop[i] == id)
            return 1;
    return 0;
}

void eng_streamer_init(eng_streamer *st, const rc_text *txt, FILE *out)
{
    rc_tok_stream_init(&st->s, txt->tok);
    st->out = out;
}

static int emit(eng_streamer *st, const char *s, size_t n, rc_err *e)
{
    if ((n && fwrite(s, 1, n, st->out) != n) || fflush(st->out))
        return rc_fail(e, RC_E_IO, "writing the output: %s", strerror(errno));
    return RC_OK;
}

int eng_streamer_push(eng_streamer *st, int32_t id, rc_err *e)
{
    const char *s;
    size_t n;
    const int rc = rc_tok_stream_push(&st->s, id, &s, &n, e);
    return rc ? rc : emit(st, s, n, e);
}

int eng_streamer_finish(eng_streamer *st, rc_err *e)
{
    const char *s;
    size_t n;
    int rc = rc_tok_stream_finish(&st->s, &s, &n, e);
    if (!rc)
        rc = emit(st, s, n, e);
    return rc ? rc : emit(st, "\n", 1, e);
}

void eng_streamer_free(eng_streamer *st)
{
    rc_tok_stream_free(&st->s);
}
