/* Chat templates recognised by their exact Jinja text (never guessed) and applied to one user turn in C; the
 * renders equal HF's own Jinja rendering (tests/tokenizer/chat.json). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

static const rc_chat known[] = {
    {"smollm2", RC_CHAT_CHATML, "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
     "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
     "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"},
    {"chatml", RC_CHAT_CHATML, NULL,
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
     "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"},
    {"llama3", RC_CHAT_LLAMA3, NULL,
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
     "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
     "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
     "{% endif %}"},
};

static int ascii_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

int rc_chat_find(const char *template_text, const rc_chat **out, rc_err *e)
{
    *out = NULL;
    const char *s = template_text;
    size_t n = strlen(s);
    while (n && ascii_space((unsigned char)*s))
        s++, n--;
    while (n && ascii_space((unsigned char)s[n - 1]))
        n--;
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (strlen(known[k].text) == n && !memcmp(known[k].text, s, n)) {
            *out = &known[k];
            return RC_OK;
        }
    return rc_fail(e, RC_E_UNSUPPORTED, "the model's chat template is not one we recognise (smollm2, chatml, "
                   "llama3), and we do not guess one; it begins '%.60s'", s);
}

/* Length of the Python-whitespace character at s (str.isspace, what Jinja's trim strips), or 0. */
static size_t py_space(const unsigned char *s, size_t n)
{
    if (n >= 1 && (ascii_space(s[0]) || (s[0] >= 0x1C && s[0] <= 0x1F)))
        return 1;
    if (n >= 2 && s[0] == 0xC2 && (s[1] == 0x85 || s[1] == 0xA0))
        return 2;
    if (n < 3)
        return 0;
    const uint32_t cp = (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    if ((s[0] & 0xF0) != 0xE0)
        return 0;
    return cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000 ? 3 : 0;
}

static void trim(const char **s, size_t *n)
{
    const unsigned char *p = (const unsigned char *)*s;
    size_t len = *n, k;
    while (len && (k = py_space(p, len)))
        p += k, len -= k;
    for (int moved = 1; moved && len;) { /* from the end: the space may be 1, 2 or 3 bytes long */
        moved = 0;
        for (size_t w = 1; w <= 3 && w <= len && !moved; w++)
            if (py_space(p + len - w, w) == w && (w == 1 || (p[len - w] & 0xC0) != 0x80)) {
                len -= w;
                moved = 1;
            }
    }
    *s = (const char *)p;
    *n = len;
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int ok;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (!b->ok)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->ok = 0;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(sbuf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void turn(sbuf *b, const rc_chat *c, const char *role, const char *content)
{
    const char *s = content;
    size_t n = strlen(s);
    if (c->kind == RC_CHAT_CHATML) {
        puts_(b, "<|im_start|>");
        puts_(b, role);
        puts_(b, "\n");
        put(b, s, n);
        puts_(b, "<|im_end|>\n");
    } else {
        trim(&s, &n);
        puts_(b, "<|start_header_id|>");
        puts_(b, role);
        puts_(b, "<|end_header_id|>\n\n");
        put(b, s, n);
        puts_(b, "<|eot_id|>");
    }
}

int rc_chat_apply(const rc_chat *c, const char *system, const char *user, const char *bos, char **out, rc_err *e)
{
    *out = NULL;
    sbuf b = {.ok = 1};
    puts_(&b, "");
    if (c->kind == RC_CHAT_LLAMA3)
        puts_(&b, bos ? bos : "");
    if (system || c->default_system)
        turn(&b, c, "system", system ? system : c->default_system);
    turn(&b, c, "user", user);
    puts_(&b, c->kind == RC_CHAT_CHATML ? "<|im_start|>assistant\n" : "<|start_header_id|>assistant<|end_header_id|>\n\n");
    if (!b.ok) {
        free(b.p);
        return rc_fail(e, RC_E_NOMEM, "chat template: out of host memory");
    }
    *out = b.p;
    return RC_OK;
}
