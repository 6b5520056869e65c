/* BPE tokenizers: byte-level (GPT-2, Llama-3, Qwen2, SmolLM pre-tokenizers) from GGUF-style arrays or an HF
 * tokenizer.json, and SentencePiece BPE (GGUF model "llama": merges by piece score, U+2581 for spaces, byte
 * fallback; Gemma 3); encodes text to ids and decodes ids (also as a stream) to UTF-8, as HF `tokenizers` does. */
#ifndef RC_TOKENIZER_H
#define RC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct rc_tokenizer rc_tokenizer;

/* GGUF tokenizer.ggml.token_type values. CONTROL and USER_DEFINED tokens are matched in the raw text before
 * pre-tokenization (as HF's added tokens are); BYTE tokens (<0xNN>) serve byte fallback. */
enum { RC_TOKT_NORMAL = 1, RC_TOKT_UNKNOWN = 2, RC_TOKT_CONTROL = 3, RC_TOKT_USER = 4, RC_TOKT_UNUSED = 5,
       RC_TOKT_BYTE = 6 };

/* The tokenizer as GGUF metadata stores it (tokenizer.ggml.*), borrowed for the call. */
typedef struct rc_tok_arrays {
    int64_t n_vocab;
    const char *const *tokens;  /* [n_vocab] tokenizer.ggml.tokens, UTF-8 */
    const int32_t *token_type;  /* [n_vocab] tokenizer.ggml.token_type, or NULL: all NORMAL */
    int64_t n_merges;
    const char *const *merges;  /* [n_merges] tokenizer.ggml.merges, "left right", by rank */
    const char *model;          /* tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE) */
    const char *pre;            /* tokenizer.ggml.pre: gpt2, smollm, starcoder, llama-bpe, qwen2, ... */
    int32_t bos_id, eos_id;     /* -1: none */
    int add_bos;                /* tokenizer.ggml.add_bos_token (0 / 1) */
    /* "llama" only: */
    const float *scores;        /* [n_vocab] tokenizer.ggml.scores: a piece's merge priority */
    int add_space_prefix;       /* tokenizer.ggml.add_space_prefix (1 is refused: not implemented) */
    int32_t unk_id;             /* tokenizer.ggml.unknown_token_id; -1: none */
} rc_tok_arrays;

int rc_tokenizer_from_arrays(rc_tokenizer **out, const rc_tok_arrays *a, rc_err *e);
/* HF tokenizer.json (BPE model; ByteLevel / Digits / Split(Regex, Isolated) pre-tokenizers; no normalizer).
 * Anything else is refused by name. */
int rc_tokenizer_from_json(rc_tokenizer **out, const char *path, rc_err *e);
int rc_tokenizer_from_json_text(rc_tokenizer **out, const char *json, const char *what, rc_err *e);
void rc_tokenizer_free(rc_tokenizer *t);

/* Encodes n bytes of s. Invalid UTF-8 is first replaced as Python's bytes.decode('utf-8', errors='replace')
 * does (each maximal invalid subpart becomes U+FFFD), so the ids equal HF's on that decoded string.
 * add_special: add the tokenizer's own prefix/suffix (HF's post-processor, e.g. Llama-3's BOS; GGUF add_bos).
 * *ids is malloc'd. */
int rc_tokenizer_encode(const rc_tokenizer *t, const char *s, size_t n, int add_special, int32_t **ids,
                        int64_t *n_ids, rc_err *e);
/* Decodes ids to UTF-8 (malloc'd, NUL-terminated; *len without the NUL). Bytes that do not form valid UTF-8
 * become U+FFFD as HF's decode does; ids outside the vocabulary are skipped, as HF does. */
int rc_tokenizer_decode(const rc_tokenizer *t, const int32_t *ids, int64_t n, char **out, size_t *len,
                        rc_err *e);

int64_t rc_tokenizer_size(const rc_tokenizer *t); /* one past the largest token id */
int32_t rc_tokenizer_find(const rc_tokenizer *t, const char *token); /* id of a token's exact string, or -1 */
const char *rc_tokenizer_token(const rc_tokenizer *t, int32_t id);   /* its string, or NULL */
int32_t rc_tokenizer_bos(const rc_tokenizer *t);                    /* -1: none */
int32_t rc_tokenizer_eos(const rc_tokenizer *t);                    /* -1: none */
void rc_tokenizer_set_special(rc_tokenizer *t, int32_t bos_id, int32_t eos_id);

/* Streaming decode: push ids one at a time; each push yields the text that is final so far (a multi-byte
 * character split across tokens waits for its last byte). The concatenation of every push and the finish
 * equals rc_tokenizer_decode of all the ids. */
typedef struct rc_tok_stream {
    const rc_tokenizer *t;
    unsigned char *pend; /* bytes not yet emitted (at most an incomplete character, or a byte-fallback run) */
    size_t n_pend, cap_pend;
    size_t n_run;        /* of pend's bytes: the trailing run of byte-fallback tokens */
    char *out;           /* the text of the last push/finish */
    size_t n_out, cap_out;
} rc_tok_stream;

void rc_tok_stream_init(rc_tok_stream *s, const rc_tokenizer *t);
/* *text (owned by s, valid until the next call) gets the newly final UTF-8, *len bytes, NUL-terminated. */
int rc_tok_stream_push(rc_tok_stream *s, int32_t id, const char **text, size_t *len, rc_err *e);
int rc_tok_stream_finish(rc_tok_stream *s, const char **text, size_t *len, rc_err *e);
void rc_tok_stream_free(rc_tok_stream *s);

#endif
