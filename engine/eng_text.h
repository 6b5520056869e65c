/* Text in and out of the engine command: the prompt as token ids (text through the model's tokenizer, its
 * chat template, or an id list) and the continuation streamed as UTF-8. Host-only (unit-tested in CI). */
#ifndef ENG_TEXT_H
#define ENG_TEXT_H

#include <stdint.h>
#include <stdio.h>

#include "text.h"

typedef struct eng_prompt {
    const char *prompt; /* --prompt: text; ids when the model has no tokenizer (the old meaning) */
    const char *ids;    /* --ids "1 2 3" */
    int chat;           /* --chat: the prompt is the user turn of the model's chat template */
    const char *system; /* --system: the system turn (--chat) */
} eng_prompt;

/* The text side for --model PATH (an HF folder: its tokenizer.json etc.) or --tokenizer T (a tokenizer.json,
 * or a folder holding one), T winning. txt->tok stays NULL when there is none (a golden .h5, --synth). */
int eng_text_open(rc_text *txt, const char *model, const char *tokenizer, rc_err *e);

/* Space/comma-separated integer ids (malloc'd). 0 if s is not such a list. */
int eng_parse_ids(const char *s, int32_t **ids, int64_t *n);

/* The prompt's ids (malloc'd). *text_mode: the continuation is to be printed as text (a text prompt). */
int eng_prompt_ids(const rc_text *txt, const eng_prompt *p, int32_t **ids, int64_t *n, int *text_mode, rc_err *e);

int eng_is_stop(const rc_text *txt, int32_t id);

/* Streams generated ids to out as UTF-8, flushed per token (a character split over tokens is printed whole
 * once complete). */
typedef struct eng_streamer {
    rc_tok_stream s;
    FILE *out;
} eng_streamer;

void eng_streamer_init(eng_streamer *st, const rc_text *txt, FILE *out);
int eng_streamer_push(eng_streamer *st, int32_t id, rc_err *e);
int eng_streamer_finish(eng_streamer *st, rc_err *e); /* the rest, then a newline */
void eng_streamer_free(eng_streamer *st);

#endif
