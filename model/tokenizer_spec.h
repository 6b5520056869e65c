/* What every tokenizer source (GGUF arrays, tokenizer.json) reduces to before tokenizer.c builds it. */
#ifndef RC_TOKENIZER_SPEC_H
#define RC_TOKENIZER_SPEC_H

#include "tokenizer.h"

enum { RC_TOK_MAX_PRE = 8, RC_TOK_MAX_AFFIX = 4 };
/* The highest token id + 1 a source with n defined tokens may use: real vocabularies are dense, and every table
 * is sized by the highest id, so a sparse one (one token at id 10^9) would cost gigabytes for nothing. */
#define RC_TOK_SPARSE_MAX(n) (2 * (int64_t)(n) + 1024)

/* Pre-tokenizer regexes of HF's ByteLevel(use_regex) and Split pre-tokenizers (PCRE2 syntax, UTF + UCP). */
#define RC_TOK_RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RC_TOK_RE_LLAMA3 \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RC_TOK_RE_QWEN2 \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RC_TOK_RE_DIGIT "\\p{N}"

typedef struct rc_tok_spec {
    const char *what;           /* names the source in messages */
    int64_t n_vocab;            /* the BPE model's vocabulary: tokens[i] has id i (NULL: no token) */
    const char *const *tokens;
    const int32_t *token_type;  /* [n_vocab] or NULL */
    int64_t n_merges;
    const char *const *merge_left, *const *merge_right;
    int64_t n_added;            /* tokens matched in the raw text before pre-tokenization */
    const int32_t *added_id;
    const char *const *added_content;
    const unsigned char *added_normalized; /* HF: matched in a second pass, after the non-normalized ones */
    int n_pre;                  /* Isolated splits applied in order; then each piece goes through BPE */
    const char *pre_regex[RC_TOK_MAX_PRE];
    int byte_level;             /* GPT-2 bytes_to_unicode mapping before BPE, back on decode */
    int byte_fallback;          /* unknown characters -> <0xNN> tokens */
    int ignore_merges;          /* a piece that is itself a token is that token (Llama-3) */
    int fuse_unk;
    int nfc;                    /* HF's NFC normalizer (Qwen2): text outside non-normalized added tokens */
    const float *scores;        /* [n_vocab] or NULL. SentencePiece BPE (n_merges 0): a pair of symbols merges when
                                 * its concatenation is a NORMAL or USER_DEFINED piece, the highest score first, the
                                 * leftmost on equal scores */
    int metaspace;              /* SentencePiece's whitespace: ' ' is U+2581 on encode, and back on decode */
    int32_t unk_id, bos_id, eos_id;
    int n_prefix, n_suffix;     /* ids added around the text when add_special */
    int32_t prefix[RC_TOK_MAX_AFFIX], suffix[RC_TOK_MAX_AFFIX];
} rc_tok_spec;

int rc_tokenizer_build(rc_tokenizer **out, const rc_tok_spec *s, rc_err *e);

#endif
