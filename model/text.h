/* The text side of a model: its tokenizer, chat template and stop (EOS) ids, from an HF folder, a tokenizer.json
 * or GGUF metadata; and the chat templates we recognise by their exact text and apply in C. */
#ifndef RC_TEXT_H
#define RC_TEXT_H

#include <stdint.h>

#include "err.h"
#include "tokenizer.h"

enum { RC_TEXT_MAX_STOP = 8 };

typedef struct rc_text {
    rc_tokenizer *tok;
    char *chat_template;              /* NULL: the model has none */
    int32_t stop[RC_TEXT_MAX_STOP];   /* generation ends at any of these */
    int n_stop;
} rc_text;

/* An HF folder: tokenizer.json; tokenizer_config.json (chat_template, bos/eos_token) or chat_template.jinja;
 * stop ids from generation_config.json's eos_token_id, else config.json's, else tokenizer_config's eos_token.
 * RC_E_MISSING (message names the file) when the folder has no tokenizer.json. */
int rc_text_load_hf(rc_text *t, const char *dir, rc_err *e);
/* A bare tokenizer.json (no template; stop ids from its post-processor-free guess: none). */
int rc_text_load_tokenizer(rc_text *t, const char *path, rc_err *e);
/* GGUF metadata (tokenizer.ggml.* and tokenizer.chat_template, NULL if absent); the GGUF reader calls this. */
int rc_text_from_gguf(rc_text *t, const rc_tok_arrays *a, const char *chat_template, rc_err *e);
/* A GGUF file's tokenizer.ggml.* arrays and tokenizer.chat_template (through rc_text_from_gguf). */
int rc_text_load_gguf(rc_text *t, const char *path, rc_err *e);
/* The text side of a model path: a .gguf's metadata or an HF folder's files; RC_E_MISSING, naming the path,
 * when it carries no tokenizer (a golden, a folder without tokenizer.json). */
int rc_text_load_model(rc_text *t, const char *path, rc_err *e);
void rc_text_free(rc_text *t);

typedef struct rc_chat {
    const char *name;            /* smollm2, chatml, llama3 */
    int kind;                    /* RC_CHAT_CHATML, RC_CHAT_LLAMA3 */
    const char *default_system;  /* the system turn the template adds when none is given, or NULL */
    const char *text;            /* the template's exact Jinja text */
} rc_chat;

enum { RC_CHAT_CHATML = 1, RC_CHAT_LLAMA3 = 2 };

/* The known template whose text equals template_text (surrounding whitespace ignored); RC_E_UNSUPPORTED
 * naming the known ones otherwise: we never guess a template. */
int rc_chat_find(const char *template_text, const rc_chat **out, rc_err *e);
/* The prompt text of one user turn (system may be NULL) with the assistant's turn opened, as HF's
 * apply_chat_template(add_generation_prompt=True) renders it; bos is the tokenizer's BOS string ("" if none).
 * *out is malloc'd. */
int rc_chat_apply(const rc_chat *c, const char *system, const char *user, const char *bos, char **out, rc_err *e);

#endif
