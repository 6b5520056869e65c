/* BPE: added tokens split out of the raw text, NFC (utf8proc) where the tokenizer asks for it,
 * regex pre-tokenization (PCRE2, Unicode categories),
 * GPT-2's bytes_to_unicode mapping or SentencePiece's U+2581 for spaces, merges by rank (HF's order: lowest rank,
 * then leftmost; SentencePiece's piece scores give the ranks), byte fallback;
 * decoding back to bytes with HF's lossy UTF-8. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer.h"

#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_spec.h"

typedef struct str_map { /* token string -> id, open addressing */
    const char **key;
    uint32_t *len;
    int32_t *id;
    uint64_t mask;
} str_map;

typedef struct pair_map { /* (left id, right id) -> (rank, merged id) */
    uint64_t *key;
    int32_t *rank; /* -1: empty slot */
    int32_t *id;
    uint64_t mask;
} pair_map;

typedef struct added_set { /* tokens matched in the raw text, leftmost-longest */
    int64_t n;
    const char **s;
    uint32_t *len;
    int32_t *id;
    int64_t first[257]; /* after added_index: the tokens starting with byte b are [first[b], first[b + 1]) */
} added_set;

struct rc_tokenizer {
    int64_t n_tok;
    char *blob;          /* every vocabulary string, NUL-terminated */
    const char **str;    /* [n_tok] NULL: no such token */
    uint32_t *str_len;
    unsigned char *dec;  /* decode bytes of every token, back to back */
    int64_t *dec_off;    /* [n_tok + 1] */
    int16_t *byte_of;    /* [n_tok] the byte of a byte-fallback token, else -1 */
    int32_t byte_id[256];
    str_map vocab;
    pair_map merges;
    added_set added[2];  /* [0] not normalized, [1] normalized (second pass) */
    pcre2_code *re[RC_TOK_MAX_PRE];
    int n_pre, byte_level, byte_fallback, ignore_merges, fuse_unk, nfc, metaspace;
    int32_t unk_id, bos_id, eos_id;
    int n_prefix, n_suffix;
    int32_t prefix[RC_TOK_MAX_AFFIX], suffix[RC_TOK_MAX_AFFIX];
};

/* ---- UTF-8 ---- */

enum { U8_INVALID = 0, U8_COMPLETE = 1, U8_TRUNCATED = 2 };

/* The well-formed prefix of the character at s[0..n) (Unicode table 3-7): its length (1..4) and whether it is
 * a whole character, cut off by the end of the buffer (could still complete), or invalid (a maximal invalid
 * subpart, replaced by one U+FFFD as Python's errors='replace' and Rust's from_utf8_lossy do). */
static size_t utf8_char(const unsigned char *s, size_t n, int *state)
{
    const unsigned c = s[0];
    unsigned lo = 0x80, hi = 0xBF;
    size_t need;
    if (c < 0x80) {
        *state = U8_COMPLETE;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *state = U8_INVALID;
        return 1;
    }
    size_t i = 1;
    for (; i < need && i < n; i++) {
        const unsigned b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            break;
    }
    *state = i == need ? U8_COMPLETE : i == n ? U8_TRUNCATED : U8_INVALID;
    return i;
}

/* 1 if s[0..n) is whole, valid UTF-8 */
static int utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int st;
        i += utf8_char(s + i, n - i, &st);
        if (st != U8_COMPLETE)
            return 0;
    }
    return 1;
}

static size_t utf8_put(uint32_t cp, unsigned char *o)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static uint32_t utf8_get(const unsigned char *s, size_t len) /* a well-formed character of len bytes */
{
    static const unsigned lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t cp = s[0] & lead_mask[len];
    for (size_t i = 1; i < len; i++)
        cp = cp << 6 | (s[i] & 0x3F);
    return cp;
}

/* ---- growable byte buffer ---- */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static int buf_add(buf *b, const void *src, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    b->p[b->n] = 0;
    return 1;
}

static const unsigned char replacement[3] = {0xEF, 0xBF, 0xBD}; /* U+FFFD */

/* Appends s[0..n) to o with every invalid subpart replaced; stops before a trailing truncated character when
 * keep_tail (returning how many bytes were consumed). */
static size_t lossy_append(buf *o, const unsigned char *s, size_t n, int keep_tail, int *ok)
{
    size_t i = 0;
    while (i < n) {
        int st;
        size_t l = utf8_char(s + i, n - i, &st);
        if (st == U8_TRUNCATED && keep_tail)
            break;
        *ok = *ok && (st == U8_COMPLETE ? buf_add(o, s + i, l) : buf_add(o, replacement, 3));
        i += l;
    }
    return i;
}

/* ---- GPT-2 bytes_to_unicode ---- */

static uint32_t byte_cp[256];
static int16_t cp_byte[512];

static void byte_map_init(void)
{
    if (byte_cp['!'])
        return;
    uint32_t extra = 256;
    for (int c = 0; c < 512; c++)
        cp_byte[c] = -1;
    for (int b = 0; b < 256; b++) {
        const int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_cp[b] = printable ? (uint32_t)b : extra++;
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

/* ---- hash maps ---- */

/* FNV-1a: hash_bytes(s, n + 1) = hash_step(hash_bytes(s, n), s[n]), so a string's prefixes hash incrementally. */
#define HASH_START 1469598103934665603ull
static uint64_t hash_step(uint64_t h, unsigned char c)
{
    return (h ^ c) * 1099511628211ull;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = HASH_START;
    for (size_t i = 0; i < n; i++)
        h = hash_step(h, (unsigned char)s[i]);
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static uint64_t table_size(int64_t n)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2)
        cap *= 2;
    return cap;
}

static int str_map_init(str_map *m, int64_t n)
{
    const uint64_t cap = table_size(n);
    m->mask = cap - 1;
    m->key = calloc(cap, sizeof *m->key);
    m->len = calloc(cap, sizeof *m->len);
    m->id = calloc(cap, sizeof *m->id);
    return m->key && m->len && m->id;
}

/* The id of s[0..n), whose hash_bytes is hash; -1 if none. */
static int32_t str_map_get_hashed(const str_map *m, uint64_t hash, const char *s, size_t n)
{
    for (uint64_t h = hash & m->mask;; h = (h + 1) & m->mask) {
        if (!m->key[h])
            return -1;
        if (m->len[h] == n && !memcmp(m->key[h], s, n))
            return m->id[h];
    }
}

static int32_t str_map_get(const str_map *m, const char *s, size_t n)
{
    return str_map_get_hashed(m, hash_bytes(s, n), s, n);
}

/* A string given twice maps to its last id, as a dict built from the token list does (llama.cpp, HF's GGUF
 * converter). */
static void str_map_put(str_map *m, const char *s, uint32_t n, int32_t id)
{
    uint64_t h = hash_bytes(s, n) & m->mask;
    for (; m->key[h]; h = (h + 1) & m->mask)
        if (m->len[h] == n && !memcmp(m->key[h], s, n)) {
            m->id[h] = id;
            return;
        }
    m->key[h] = s;
    m->len[h] = n;
    m->id[h] = id;
}

static int pair_map_init(pair_map *m, int64_t n)
{
    const uint64_t cap = table_size(n);
    m->mask = cap - 1;
    m->key = calloc(cap, sizeof *m->key);
    m->rank = malloc(cap * sizeof *m->rank);
    m->id = calloc(cap, sizeof *m->id);
    if (!m->key || !m->rank || !m->id)
        return 0;
    memset(m->rank, 0xff, cap * sizeof *m->rank);
    return 1;
}

static uint64_t *pair_slot(const pair_map *m, int32_t a, int32_t b, uint64_t *at)
{
    const uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t h = hash_u64(k) & m->mask;
    while (m->rank[h] >= 0 && m->key[h] != k)
        h = (h + 1) & m->mask;
    *at = h;
    return &m->key[h];
}

static int32_t pair_rank(const pair_map *m, int32_t a, int32_t b, int32_t *id)
{
    uint64_t h;
    pair_slot(m, a, b, &h);
    *id = m->id[h];
    return m->rank[h];
}

/* ---- build ---- */

#define SPM_SPACE "\xE2\x96\x81" /* U+2581, SentencePiece's space */

/* Appends s[0..n) with every occurrence of from[0..nf) replaced by to[0..nt) (left to right, not overlapping). */
static int buf_add_replaced(buf *o, const unsigned char *s, size_t n, const char *from, size_t nf, const char *to,
                            size_t nt)
{
    size_t done = 0;
    for (size_t i = 0; i + nf <= n;)
        if (!memcmp(s + i, from, nf)) {
            if (!buf_add(o, s + done, i - done) || !buf_add(o, to, nt))
                return 0;
            done = i += nf;
        } else
            i++;
    return buf_add(o, s + done, n - done);
}

static int parse_byte_token(const char *s, size_t n) /* "<0xNN>" -> NN, else -1 */
{
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        const char c = s[i];
        v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1000);
    }
    return v >= 0 ? v : -1;
}

/* A token's bytes on decode: byte-level tokens map each character back to its byte (a token with a character
 * outside the map decodes to its own UTF-8, as HF's ByteLevel decoder does); byte-fallback tokens are their
 * byte; anything else is its own UTF-8. */
static int token_bytes(const rc_tokenizer *t, int64_t id, buf *o)
{
    const unsigned char *s = (const unsigned char *)t->str[id];
    const size_t n = t->str_len[id];
    if (t->byte_of[id] >= 0) {
        const unsigned char b = (unsigned char)t->byte_of[id];
        return buf_add(o, &b, 1);
    }
    if (t->byte_level) {
        const size_t start = o->n;
        for (size_t i = 0; i < n;) {
            int st;
            size_t l = utf8_char(s + i, n - i, &st);
            const uint32_t cp = st == U8_COMPLETE ? utf8_get(s + i, l) : 0xFFFFFFFFu;
            if (cp >= 512 || cp_byte[cp] < 0) {
                o->n = start;
                return buf_add(o, s, n);
            }
            const unsigned char b = (unsigned char)cp_byte[cp];
            if (!buf_add(o, &b, 1))
                return 0;
            i += l;
        }
        return 1;
    }
    if (t->metaspace) /* U+2581 back to a space */
        return buf_add_replaced(o, s, n, SPM_SPACE, 3, " ", 1);
    return buf_add(o, s, n);
}

static int added_add(added_set *a, const char *s, uint32_t n, int32_t id)
{
    a->s[a->n] = s;
    a->len[a->n] = n;
    a->id[a->n++] = id;
    return 1;
}

/* Orders a set by its tokens' first byte (stable: the order among equal first bytes is kept) and fills first[]. */
static int added_index(added_set *a)
{
    int64_t cnt[257] = {0};
    for (int64_t j = 0; j < a->n; j++)
        cnt[(unsigned char)a->s[j][0] + 1]++;
    for (int b = 0; b < 256; b++)
        cnt[b + 1] += cnt[b];
    memcpy(a->first, cnt, sizeof a->first);
    const char **s = malloc((size_t)(a->n ? a->n : 1) * sizeof *s);
    uint32_t *len = malloc((size_t)(a->n ? a->n : 1) * sizeof *len);
    int32_t *id = malloc((size_t)(a->n ? a->n : 1) * sizeof *id);
    if (!s || !len || !id) {
        free(s);
        free(len);
        free(id);
        return 0;
    }
    for (int64_t j = 0; j < a->n; j++) {
        const int64_t k = cnt[(unsigned char)a->s[j][0]]++;
        s[k] = a->s[j];
        len[k] = a->len[j];
        id[k] = a->id[j];
    }
    free(a->s);
    free(a->len);
    free(a->id);
    a->s = s;
    a->len = len;
    a->id = id;
    return 1;
}

/* SentencePiece BPE's pieces a merge may produce or take (NORMAL and USER_DEFINED: not control, unknown or byte;
 * unused pieces are refused where scores are read). */
static int spm_mergeable(const rc_tok_spec *sp, int64_t i)
{
    const int type = sp->token_type ? sp->token_type[i] : RC_TOKT_NORMAL;
    return sp->tokens[i] && (type == RC_TOKT_NORMAL || type == RC_TOKT_USER);
}

/* Splits of every mergeable piece at its UTF-8 character boundaries: the most merges the scores can give. */
static int64_t spm_splits(const rc_tok_spec *sp)
{
    int64_t n = 0;
    for (int64_t i = 0; i < sp->n_vocab; i++)
        if (spm_mergeable(sp, i)) {
            const unsigned char *p = (const unsigned char *)sp->tokens[i];
            for (size_t k = 1; p[0] && p[k]; k++)
                n += (p[k] & 0xC0) != 0x80;
        }
    return n;
}

typedef struct spm_piece {
    float score;
    int32_t id;
} spm_piece;

static int spm_piece_cmp(const void *pa, const void *pb)
{
    const spm_piece *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* The merges of SentencePiece BPE, from the scores: the pair (a, b) -> the piece a b, ranked by that piece's score
 * (dense ranks, highest score first: pieces of equal score share a rank, so the leftmost pair wins between them, as
 * in SentencePiece). Every split of a mergeable piece into two mergeable pieces is a merge (a byte, control or
 * unknown piece is never a symbol SentencePiece merges: unknown characters fall back to bytes after merging). The
 * merged id is the one the vocabulary map gives the string (a string listed twice: its last id, as every lookup).
 * Prefixes are hashed incrementally and a suffix looked up only after its prefix is a piece, so a piece of L
 * bytes costs O(L) hashing plus a lookup per piece prefix, not O(L^2). UNUSED pieces (SentencePiece merges
 * through them and splits any left at the end) are refused, not approximated. */
static int spm_merges(rc_tokenizer *t, const rc_tok_spec *sp, const char *what, rc_err *e)
{
    spm_piece *p = malloc((size_t)(sp->n_vocab ? sp->n_vocab : 1) * sizeof *p);
    if (!p)
        return rc_fail(e, RC_E_NOMEM, "%s: out of host memory", what);
    int64_t n = 0;
    for (int64_t i = 0; i < sp->n_vocab; i++) {
        if (!isfinite(sp->scores[i])) {
            free(p);
            return rc_fail(e, RC_E_FORMAT, "%s: token %lld has score %g", what, (long long)i, (double)sp->scores[i]);
        }
        if (sp->token_type && sp->token_type[i] == RC_TOKT_UNUSED) {
            free(p);
            return rc_fail(e, RC_E_UNSUPPORTED, "%s: token %lld is UNUSED (type 5): SentencePiece merges through such "
                           "pieces and splits them again, which is not implemented", what, (long long)i);
        }
        if (spm_mergeable(sp, i) && t->str_len[i] > 1)
            p[n++] = (spm_piece){sp->scores[i], (int32_t)i};
    }
    qsort(p, (size_t)n, sizeof *p, spm_piece_cmp);
    int32_t rank = -1;
    for (int64_t k = 0; k < n; k++) {
        if (k == 0 || p[k].score != p[k - 1].score)
            rank++;
        const char *s = t->str[p[k].id];
        const size_t len = t->str_len[p[k].id];
        const int32_t merged = str_map_get(&t->vocab, s, len);
        uint64_t hp = hash_step(HASH_START, (unsigned char)s[0]); /* hash of s[0..at) */
        for (size_t at = 1; at < len; hp = hash_step(hp, (unsigned char)s[at]), at++) {
            if (((unsigned char)s[at] & 0xC0) == 0x80)
                continue; /* inside a character */
            const int32_t a = str_map_get_hashed(&t->vocab, hp, s, at);
            if (a < 0 || !spm_mergeable(sp, a))
                continue;
            const int32_t b = str_map_get(&t->vocab, s + at, len - at);
            if (b < 0 || !spm_mergeable(sp, b))
                continue;
            uint64_t h;
            uint64_t *key = pair_slot(&t->merges, a, b, &h);
            if (t->merges.rank[h] < 0) {
                *key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
                t->merges.rank[h] = rank;
                t->merges.id[h] = merged;
            }
        }
    }
    free(p);
    return RC_OK;
}

int rc_tokenizer_build(rc_tokenizer **out, const rc_tok_spec *sp, rc_err *e)
{
    *out = NULL;
    byte_map_init();
    const char *what = sp->what ? sp->what : "tokenizer";
    int64_t n_tok = sp->n_vocab;
    for (int64_t i = 0; i < sp->n_added; i++) {
        if (sp->added_id[i] < 0 || sp->added_id[i] >= INT32_MAX)
            return rc_fail(e, RC_E_FORMAT, "%s: added token '%s' has id %d", what, sp->added_content[i],
                           sp->added_id[i]);
        if (sp->added_id[i] >= n_tok)
            n_tok = (int64_t)sp->added_id[i] + 1;
    }
    if (n_tok < 1 || n_tok >= INT32_MAX)
        return rc_fail(e, RC_E_FORMAT, "%s: %lld tokens", what, (long long)n_tok);
    if (sp->scores && sp->n_merges) /* the merge table is sized for one source of merges */
        return rc_fail(e, RC_E_FORMAT, "%s: both a merge list and piece scores", what);
    int64_t defined = sp->n_added;
    for (int64_t i = 0; i < sp->n_vocab; i++)
        defined += sp->tokens[i] != NULL;
    if (n_tok > RC_TOK_SPARSE_MAX(defined)) /* every table below is sized by the highest id */
        return rc_fail(e, RC_E_FORMAT, "%s: token ids reach %lld for %lld defined tokens: a vocabulary this sparse "
                       "is refused", what, (long long)(n_tok - 1), (long long)defined);
    rc_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return rc_fail(e, RC_E_NOMEM, "%s: out of host memory", what);
    int rc = RC_OK;
    size_t blob_n = 0;
    for (int64_t i = 0; i < sp->n_vocab; i++)
        blob_n += sp->tokens[i] ? strlen(sp->tokens[i]) + 1 : 0;
    for (int64_t i = 0; i < sp->n_added; i++)
        blob_n += strlen(sp->added_content[i]) + 1;
    t->n_tok = n_tok;
    t->blob = malloc(blob_n + 1);
    t->str = calloc((size_t)n_tok, sizeof *t->str);
    t->str_len = calloc((size_t)n_tok, sizeof *t->str_len);
    t->byte_of = malloc((size_t)n_tok * sizeof *t->byte_of);
    t->dec_off = calloc((size_t)n_tok + 1, sizeof *t->dec_off);
    for (int k = 0; k < 2; k++) {
        added_set *a = &t->added[k];
        const size_t cap = (size_t)(sp->n_vocab + sp->n_added) + 1;
        a->s = calloc(cap, sizeof *a->s);
        a->len = calloc(cap, sizeof *a->len);
        a->id = calloc(cap, sizeof *a->id);
        if (!a->s || !a->len || !a->id)
            rc = RC_E_NOMEM;
    }
    if (rc || !t->blob || !t->str || !t->str_len || !t->byte_of || !t->dec_off ||
        !str_map_init(&t->vocab, n_tok) ||
        !pair_map_init(&t->merges, sp->scores ? spm_splits(sp) : sp->n_merges)) {
        rc_tokenizer_free(t);
        return rc_fail(e, RC_E_NOMEM, "%s: out of host memory", what);
    }
    t->byte_level = sp->byte_level;
    t->byte_fallback = sp->byte_fallback;
    t->ignore_merges = sp->ignore_merges;
    t->fuse_unk = sp->fuse_unk;
    t->nfc = sp->nfc;
    t->metaspace = sp->metaspace;
    t->unk_id = sp->unk_id;
    t->bos_id = sp->bos_id;
    t->eos_id = sp->eos_id;
    t->n_prefix = sp->n_prefix;
    t->n_suffix = sp->n_suffix;
    memcpy(t->prefix, sp->prefix, sizeof t->prefix);
    memcpy(t->suffix, sp->suffix, sizeof t->suffix);
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = -1;
    for (int64_t i = 0; i < n_tok; i++)
        t->byte_of[i] = -1;

    char *p = t->blob;
    for (int64_t i = 0; i < sp->n_vocab; i++) {
        if (!sp->tokens[i])
            continue;
        const size_t n = strlen(sp->tokens[i]);
        memcpy(p, sp->tokens[i], n + 1);
        t->str[i] = p;
        t->str_len[i] = (uint32_t)n;
        p += n + 1;
        const int type = sp->token_type ? sp->token_type[i] : RC_TOKT_NORMAL;
        str_map_put(&t->vocab, t->str[i], (uint32_t)n, (int32_t)i);
        const int bv = parse_byte_token(t->str[i], n);
        if (bv >= 0 && (type == RC_TOKT_BYTE || sp->byte_fallback)) {
            t->byte_of[i] = (int16_t)bv;
            if (t->byte_id[bv] < 0)
                t->byte_id[bv] = (int32_t)i;
        }
        if (n && (type == RC_TOKT_CONTROL || type == RC_TOKT_USER)) {
            /* text is split on these bytes: an invalid sequence could cut a character of valid text in two, and
             * the pre-tokenizer's regex reads its pieces as valid UTF-8 */
            if (!utf8_valid((const unsigned char *)t->str[i], n)) {
                rc_tokenizer_free(t);
                return rc_fail(e, RC_E_FORMAT, "%s: special token %lld is not valid UTF-8", what, (long long)i);
            }
            added_add(&t->added[0], t->str[i], (uint32_t)n, (int32_t)i);
        }
    }
    for (int64_t i = 0; i < sp->n_added; i++) {
        const size_t n = strlen(sp->added_content[i]);
        const int32_t id = sp->added_id[i];
        if (!n) {
            rc_tokenizer_free(t);
            return rc_fail(e, RC_E_FORMAT, "%s: added token %d is empty", what, id);
        }
        if (!utf8_valid((const unsigned char *)sp->added_content[i], n)) { /* as the special tokens above */
            rc_tokenizer_free(t);
            return rc_fail(e, RC_E_FORMAT, "%s: added token %d is not valid UTF-8", what, id);
        }
        memcpy(p, sp->added_content[i], n + 1);
        if (t->str[id] && (t->str_len[id] != n || memcmp(t->str[id], p, n))) { /* both strings live in t */
            rc = rc_fail(e, RC_E_FORMAT, "%s: added token %d '%s' differs from the vocabulary's '%s'", what, id, p,
                         t->str[id]);
            rc_tokenizer_free(t);
            return rc;
        }
        t->str[id] = p;
        t->str_len[id] = (uint32_t)n;
        added_add(&t->added[sp->added_normalized && sp->added_normalized[i] ? 1 : 0], p, (uint32_t)n, id);
        p += n + 1;
    }

    for (int64_t r = 0; r < sp->n_merges; r++) {
        const char *l = sp->merge_left[r], *rr = sp->merge_right[r];
        const size_t nl = strlen(l), nr = strlen(rr);
        const int32_t a = str_map_get(&t->vocab, l, nl), b = str_map_get(&t->vocab, rr, nr);
        char *cat = malloc(nl + nr + 1);
        if (!cat) {
            rc_tokenizer_free(t);
            return rc_fail(e, RC_E_NOMEM, "%s: out of host memory", what);
        }
        memcpy(cat, l, nl);
        memcpy(cat + nl, rr, nr + 1);
        const int32_t m = str_map_get(&t->vocab, cat, nl + nr);
        free(cat);
        if (a < 0 || b < 0 || m < 0) {
            rc_tokenizer_free(t);
            return rc_fail(e, RC_E_FORMAT, "%s: merge %lld ('%s' '%s') names a token not in the vocabulary", what,
                           (long long)r, l, rr);
        }
        uint64_t h;
        uint64_t *k = pair_slot(&t->merges, a, b, &h);
        if (t->merges.rank[h] < 0) { /* a repeated merge keeps its first (best) rank */
            *k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
            t->merges.rank[h] = (int32_t)r;
            t->merges.id[h] = m;
        }
    }

    if (sp->scores && (rc = spm_merges(t, sp, what, e))) {
        rc_tokenizer_free(t);
        return rc;
    }
    if (!added_index(&t->added[0]) || !added_index(&t->added[1])) {
        rc_tokenizer_free(t);
        return rc_fail(e, RC_E_NOMEM, "%s: out of host memory", what);
    }

    buf d = {0};
    int ok = 1;
    for (int64_t i = 0; i < n_tok && ok; i++) {
        t->dec_off[i] = (int64_t)d.n;
        if (t->str[i])
            ok = token_bytes(t, i, &d);
    }
    t->dec_off[n_tok] = (int64_t)d.n;
    t->dec = d.p;
    if (!ok) {
        rc_tokenizer_free(t);
        return rc_fail(e, RC_E_NOMEM, "%s: out of host memory", what);
    }

    t->n_pre = sp->n_pre;
    for (int k = 0; k < sp->n_pre; k++) {
        int err;
        PCRE2_SIZE at;
        t->re[k] = pcre2_compile((PCRE2_SPTR)sp->pre_regex[k], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                                 &at, NULL);
        if (!t->re[k]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            rc_tokenizer_free(t);
            return rc_fail(e, RC_E_FORMAT, "%s: pre-tokenizer regex '%s': %s at offset %zu", what,
                           sp->pre_regex[k], (const char *)msg, (size_t)at);
        }
        pcre2_jit_compile(t->re[k], PCRE2_JIT_COMPLETE); /* optional: same matches, faster */
    }
    *out = t;
    return RC_OK;
}

void rc_tokenizer_free(rc_tokenizer *t)
{
    if (!t)
        return;
    for (int k = 0; k < RC_TOK_MAX_PRE; k++)
        pcre2_code_free(t->re[k]);
    for (int k = 0; k < 2; k++) {
        free(t->added[k].s);
        free(t->added[k].len);
        free(t->added[k].id);
    }
    free(t->vocab.key);
    free(t->vocab.len);
    free(t->vocab.id);
    free(t->merges.key);
    free(t->merges.rank);
    free(t->merges.id);
    free(t->blob);
    free(t->str);
    free(t->str_len);
    free(t->byte_of);
    free(t->dec);
    free(t->dec_off);
    free(t);
}

/* ---- GGUF arrays ---- */

static int pre_regexes(const char *pre, rc_tok_spec *s)
{
    static const char *const gpt2[] = {"gpt2", "mpt", "olmo", "jais", NULL};
    static const char *const digits_gpt2[] = {"smollm", "starcoder", "refact", "codeshell", "command-r", "exaone",
                                              NULL};
    static const char *const llama3[] = {"llama-bpe", "llama3", "dbrx", "smaug-bpe", "falcon3", NULL};
    static const char *const qwen2[] = {"qwen2", "stablelm2", "deepseek-r1-qwen", NULL};
    const struct {
        const char *const *names;
        int n;
        const char *re[2];
        int ignore_merges;
    } kinds[] = {
        {gpt2, 1, {RC_TOK_RE_GPT2, NULL}, 0},
        {digits_gpt2, 2, {RC_TOK_RE_DIGIT, RC_TOK_RE_GPT2}, 0},
        {llama3, 1, {RC_TOK_RE_LLAMA3, NULL}, 1},
        {qwen2, 1, {RC_TOK_RE_QWEN2, NULL}, 0},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (const char *const *nm = kinds[k].names; *nm; nm++)
            if (!strcmp(*nm, pre)) {
                s->n_pre = kinds[k].n;
                s->pre_regex[0] = kinds[k].re[0];
                s->pre_regex[1] = kinds[k].re[1];
                s->ignore_merges = kinds[k].ignore_merges;
                return 1;
            }
    return 0;
}

/* The tokens every GGUF tokenizer checks: present, and bos / eos inside them. */
static int arrays_check(const rc_tok_arrays *a, rc_err *e)
{
    if (a->n_vocab < 1 || !a->tokens)
        return rc_fail(e, RC_E_FORMAT, "GGUF tokenizer: no tokens");
    for (int64_t i = 0; i < a->n_vocab; i++)
        if (!a->tokens[i])
            return rc_fail(e, RC_E_FORMAT, "GGUF tokenizer: token %lld is missing", (long long)i);
    if (a->bos_id >= a->n_vocab || a->eos_id >= a->n_vocab)
        return rc_fail(e, RC_E_RANGE, "GGUF tokenizer: bos %d / eos %d outside the %lld tokens", a->bos_id,
                       a->eos_id, (long long)a->n_vocab);
    return RC_OK;
}

/* tokenizer.ggml.model "llama": SentencePiece BPE (docs/tokenizers.md): no pre-tokenizer (tokenizer.ggml.pre is
 * not read), spaces as U+2581, merges from the scores, byte fallback, CONTROL and USER_DEFINED pieces matched in the
 * raw text first. A prefix space (add_space_prefix, Llama 2's tokenizer) is not implemented. */
static int spm_from_arrays(rc_tokenizer **out, const rc_tok_arrays *a, rc_err *e)
{
    int rc = arrays_check(a, e);
    if (rc)
        return rc;
    if (!a->scores)
        return rc_fail(e, RC_E_MISSING, "GGUF tokenizer: tokenizer.ggml.model 'llama' needs tokenizer.ggml.scores");
    if (a->add_space_prefix)
        return rc_fail(e, RC_E_UNSUPPORTED, "GGUF tokenizer: tokenizer.ggml.add_space_prefix true (absent counts as "
                       "true) is not implemented: only SentencePiece tokenizers without a prefix space (Gemma's) are");
    if (a->unk_id >= a->n_vocab)
        return rc_fail(e, RC_E_RANGE, "GGUF tokenizer: unknown_token_id %d outside the %lld tokens", a->unk_id,
                       (long long)a->n_vocab);
    rc_tok_spec s;
    memset(&s, 0, sizeof s);
    s.what = "GGUF tokenizer";
    s.n_vocab = a->n_vocab;
    s.tokens = a->tokens;
    s.token_type = a->token_type;
    s.scores = a->scores;
    s.metaspace = 1;
    s.byte_fallback = 1;
    s.fuse_unk = 1;
    s.unk_id = a->unk_id;
    s.bos_id = a->bos_id;
    s.eos_id = a->eos_id;
    if (a->add_bos && a->bos_id >= 0)
        s.prefix[s.n_prefix++] = a->bos_id;
    return rc_tokenizer_build(out, &s, e);
}

int rc_tokenizer_from_arrays(rc_tokenizer **out, const rc_tok_arrays *a, rc_err *e)
{
    *out = NULL;
    if (a->model && !strcmp(a->model, "llama"))
        return spm_from_arrays(out, a, e);
    if (!a->model || strcmp(a->model, "gpt2"))
        return rc_fail(e, RC_E_UNSUPPORTED, "GGUF tokenizer.ggml.model '%s' is not supported (byte-level BPE "
                       "'gpt2' and SentencePiece BPE 'llama' are)", a->model ? a->model : "(missing)");
    rc_tok_spec s;
    memset(&s, 0, sizeof s);
    s.what = "GGUF tokenizer";
    if (!a->pre || !pre_regexes(a->pre, &s))
        return rc_fail(e, RC_E_UNSUPPORTED, "GGUF tokenizer.ggml.pre '%s' is not supported (gpt2, smollm, "
                       "starcoder, llama-bpe, qwen2 and their aliases are)", a->pre ? a->pre : "(missing)");
    int rc0 = a->n_merges && !a->merges ? rc_fail(e, RC_E_FORMAT, "GGUF tokenizer: no merges") : arrays_check(a, e);
    if (rc0)
        return rc0;
    char **left = calloc((size_t)a->n_merges + 1, sizeof *left);
    const char **right = calloc((size_t)a->n_merges + 1, sizeof *right);
    int rc = left && right ? RC_OK : rc_fail(e, RC_E_NOMEM, "GGUF tokenizer: out of host memory");
    for (int64_t r = 0; r < a->n_merges && !rc; r++) {
        const char *sp = a->merges[r] ? strchr(a->merges[r], ' ') : NULL;
        if (!sp || sp == a->merges[r] || !sp[1] || strchr(sp + 1, ' '))
            rc = rc_fail(e, RC_E_FORMAT, "GGUF tokenizer: merge %lld '%s' is not 'left right'", (long long)r,
                         a->merges[r] ? a->merges[r] : "(null)");
        else if (!(left[r] = strndup(a->merges[r], (size_t)(sp - a->merges[r]))))
            rc = rc_fail(e, RC_E_NOMEM, "GGUF tokenizer: out of host memory");
        else
            right[r] = sp + 1;
    }
    if (!rc) {
        s.n_vocab = a->n_vocab;
        s.tokens = a->tokens;
        s.token_type = a->token_type;
        s.n_merges = a->n_merges;
        s.merge_left = (const char *const *)left;
        s.merge_right = right;
        s.byte_level = 1;
        s.unk_id = -1;
        s.bos_id = a->bos_id;
        s.eos_id = a->eos_id;
        if (a->add_bos && a->bos_id >= 0)
            s.prefix[s.n_prefix++] = a->bos_id;
        rc = rc_tokenizer_build(out, &s, e);
    }
    for (int64_t r = 0; left && r < a->n_merges; r++)
        free(left[r]);
    free(left);
    free(right);
    return rc;
}

/* ---- encode ---- */

typedef struct ids_vec {
    int32_t *p;
    int64_t n, cap;
} ids_vec;

/* Makes room for one more element in a growable array (*p, n used of *cap). */
static int grow(void **p, int64_t n, int64_t *cap, size_t elem)
{
    if (n < *cap)
        return 1;
    const int64_t c = *cap ? *cap * 2 : 64;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

static int ids_push(ids_vec *v, int32_t id)
{
    if (!grow((void **)&v->p, v->n, &v->cap, sizeof *v->p))
        return 0;
    v->p[v->n++] = id;
    return 1;
}

typedef struct sym { /* one BPE symbol: a token id over a span of the piece, in a linked list */
    int32_t id;
    int32_t prev, next;
} sym;

typedef struct merge_cand {
    int32_t rank, pos, left, right;
} merge_cand;

static int cand_less(const merge_cand *a, const merge_cand *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

typedef struct cand_heap {
    merge_cand *p;
    int64_t n, cap;
} cand_heap;

static int heap_push(cand_heap *h, merge_cand c)
{
    if (!grow((void **)&h->p, h->n, &h->cap, sizeof *h->p))
        return 0;
    int64_t i = h->n++;
    while (i > 0 && cand_less(&c, &h->p[(i - 1) / 2])) {
        h->p[i] = h->p[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->p[i] = c;
    return 1;
}

static merge_cand heap_pop(cand_heap *h)
{
    const merge_cand top = h->p[0], last = h->p[--h->n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && cand_less(&h->p[c + 1], &h->p[c]))
            c++;
        if (!cand_less(&h->p[c], &last))
            break;
        h->p[i] = h->p[c];
        i = c;
    }
    if (h->n)
        h->p[i] = last;
    return top;
}

typedef struct enc_ctx {
    const rc_tokenizer *t;
    ids_vec *out;
    buf mapped;
    sym *syms;
    int64_t cap_syms;
    cand_heap heap;
    pcre2_match_data *md;
    rc_err *e;
} enc_ctx;

static int push_cand(enc_ctx *c, int32_t pos)
{
    const int32_t nx = c->syms[pos].next;
    if (nx < 0)
        return 1;
    int32_t id;
    const int32_t r = pair_rank(&c->t->merges, c->syms[pos].id, c->syms[nx].id, &id);
    if (r < 0)
        return 1;
    return heap_push(&c->heap, (merge_cand){r, pos, c->syms[pos].id, c->syms[nx].id});
}

static int add_sym(enc_ctx *c, int64_t *n, int32_t id)
{
    if (!grow((void **)&c->syms, *n, &c->cap_syms, sizeof *c->syms))
        return 0;
    c->syms[*n] = (sym){id, (int32_t)*n - 1, -1};
    if (*n > 0)
        c->syms[*n - 1].next = (int32_t)*n;
    (*n)++;
    return 1;
}

/* BPE of one pre-tokenized piece (valid UTF-8). */
static int bpe_piece(enc_ctx *c, const unsigned char *s, size_t n)
{
    const rc_tokenizer *t = c->t;
    const unsigned char *m = s;
    size_t mn = n;
    if (t->byte_level) {
        c->mapped.n = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned char u[4];
            if (!buf_add(&c->mapped, u, utf8_put(byte_cp[s[i]], u)))
                return rc_fail(c->e, RC_E_NOMEM, "tokenizer: out of host memory");
        }
        m = c->mapped.p;
        mn = c->mapped.n;
    } else if (t->metaspace) {
        c->mapped.n = 0;
        if (!buf_add_replaced(&c->mapped, s, n, " ", 1, SPM_SPACE, 3))
            return rc_fail(c->e, RC_E_NOMEM, "tokenizer: out of host memory");
        m = c->mapped.p;
        mn = c->mapped.n;
    }
    if (t->ignore_merges) {
        const int32_t id = str_map_get(&t->vocab, (const char *)m, mn);
        if (id >= 0)
            return ids_push(c->out, id) ? RC_OK : rc_fail(c->e, RC_E_NOMEM, "tokenizer: out of host memory");
    }
    int64_t ns = 0;
    int last_unk = 0;
    for (size_t i = 0; i < mn;) {
        int st;
        const size_t l = utf8_char(m + i, mn - i, &st);
        int32_t id = str_map_get(&t->vocab, (const char *)m + i, l);
        int ok = 1;
        if (id >= 0) {
            ok = add_sym(c, &ns, id);
            last_unk = 0;
        } else {
            int all = t->byte_fallback;
            for (size_t k = 0; k < l && all; k++)
                all = t->byte_id[m[i + k]] >= 0;
            if (all) {
                for (size_t k = 0; k < l && ok; k++)
                    ok = add_sym(c, &ns, t->byte_id[m[i + k]]);
                last_unk = 0;
            } else if (t->unk_id >= 0) { /* no unk token: HF drops the character */
                if (!(t->fuse_unk && last_unk))
                    ok = add_sym(c, &ns, t->unk_id);
                last_unk = 1;
            }
        }
        if (!ok)
            return rc_fail(c->e, RC_E_NOMEM, "tokenizer: out of host memory");
        i += l;
    }
    c->heap.n = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if (!push_cand(c, i))
            return rc_fail(c->e, RC_E_NOMEM, "tokenizer: out of host memory");
    while (c->heap.n) {
        const merge_cand top = heap_pop(&c->heap);
        sym *a = &c->syms[top.pos];
        if (a->id != top.left || a->next < 0 || c->syms[a->next].id != top.right)
            continue; /* stale: one side was merged since */
        int32_t merged;
        pair_rank(&t->merges, top.left, top.right, &merged);
        const int32_t gone = a->next;
        a->id = merged;
        a->next = c->syms[gone].next;
        if (a->next >= 0)
            c->syms[a->next].prev = top.pos;
        c->syms[gone].id = -1;
        if ((a->prev >= 0 && !push_cand(c, a->prev)) || !push_cand(c, top.pos))
            return rc_fail(c->e, RC_E_NOMEM, "tokenizer: out of host memory");
    }
    for (int32_t i = ns ? 0 : -1; i >= 0; i = c->syms[i].next)
        if (!ids_push(c->out, c->syms[i].id))
            return rc_fail(c->e, RC_E_NOMEM, "tokenizer: out of host memory");
    return RC_OK;
}

/* Pre-tokenizer stage k over s[0..n): its regex's matches and the gaps between them are pieces (HF's
 * Isolated split), each going through the next stage; after the last, BPE. */
static int pre_split(enc_ctx *c, int k, const unsigned char *s, size_t n)
{
    if (!n)
        return RC_OK;
    if (k == c->t->n_pre)
        return bpe_piece(c, s, n);
    size_t prev = 0, at = 0;
    while (at <= n) {
        const int r = pcre2_match(c->t->re[k], s, n, at, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (r == PCRE2_ERROR_NOMATCH)
            break;
        if (r < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(r, msg, sizeof msg);
            return rc_fail(c->e, RC_E_FORMAT, "tokenizer: pre-tokenizer regex: %s", (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        const size_t b = ov[0], en = ov[1];
        if (b > en || en > n || b < at) /* not on valid UTF-8 from the checks above; never slice outside s */
            return rc_fail(c->e, RC_E_FORMAT, "tokenizer: pre-tokenizer regex matched outside its text");
        if (en == b) { /* an empty match yields no piece; step over one character */
            if (b >= n)
                break;
            int st;
            at = b + utf8_char(s + b, n - b, &st);
            continue;
        }
        int rc = pre_split(c, k + 1, s + prev, b - prev);
        if (!rc)
            rc = pre_split(c, k + 1, s + b, en - b);
        if (rc)
            return rc;
        prev = at = en;
    }
    return pre_split(c, k + 1, s + prev, n - prev);
}

static int split_added(enc_ctx *c, int k, const unsigned char *s, size_t n);

/* HF's order: the text between non-normalized added tokens is normalized, then split on the normalized ones. */
static int normalize_then_split(enc_ctx *c, const unsigned char *s, size_t n)
{
    if (!c->t->nfc || !n)
        return split_added(c, 1, s, n);
    utf8proc_uint8_t *nfc = NULL;
    const utf8proc_ssize_t len = utf8proc_map(s, (utf8proc_ssize_t)n, &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (len < 0)
        return rc_fail(c->e, len == UTF8PROC_ERROR_NOMEM ? RC_E_NOMEM : RC_E_FORMAT, "tokenizer: NFC: %s",
                       utf8proc_errmsg(len));
    const int rc = split_added(c, 1, nfc, (size_t)len);
    free(nfc);
    return rc;
}

/* Splits s[0..n) on the added tokens of set k (leftmost, then longest), the rest to set k+1 / pre-tokenizing. */
static int split_added(enc_ctx *c, int k, const unsigned char *s, size_t n)
{
    if (k == 2)
        return pre_split(c, 0, s, n);
    const added_set *a = &c->t->added[k];
    size_t prev = 0;
    for (size_t i = 0; i < n && a->n;) {
        int64_t best = -1;
        for (int64_t j = a->first[s[i]]; j < a->first[s[i] + 1]; j++)
            if (a->len[j] <= n - i && (best < 0 || a->len[j] > a->len[best]) && !memcmp(s + i, a->s[j], a->len[j]))
                best = j;
        if (best < 0) {
            i++;
            continue;
        }
        int rc = k ? split_added(c, 2, s + prev, i - prev) : normalize_then_split(c, s + prev, i - prev);
        if (rc)
            return rc;
        if (!ids_push(c->out, a->id[best]))
            return rc_fail(c->e, RC_E_NOMEM, "tokenizer: out of host memory");
        i += a->len[best];
        prev = i;
    }
    return k ? split_added(c, 2, s + prev, n - prev) : normalize_then_split(c, s + prev, n - prev);
}

int rc_tokenizer_encode(const rc_tokenizer *t, const char *s, size_t n, int add_special, int32_t **ids,
                        int64_t *n_ids, rc_err *e)
{
    *ids = NULL;
    *n_ids = 0;
    buf text = {0};
    int ok = 1;
    lossy_append(&text, (const unsigned char *)s, n, 0, &ok);
    ids_vec out = {0};
    enc_ctx c = {.t = t, .out = &out, .e = e};
    c.md = pcre2_match_data_create(4, NULL);
    int rc = ok && c.md ? RC_OK : rc_fail(e, RC_E_NOMEM, "tokenizer: out of host memory");
    for (int i = 0; add_special && i < t->n_prefix && !rc; i++)
        rc = ids_push(&out, t->prefix[i]) ? RC_OK : rc_fail(e, RC_E_NOMEM, "tokenizer: out of host memory");
    if (!rc)
        rc = split_added(&c, 0, text.p, text.n);
    for (int i = 0; add_special && i < t->n_suffix && !rc; i++)
        rc = ids_push(&out, t->suffix[i]) ? RC_OK : rc_fail(e, RC_E_NOMEM, "tokenizer: out of host memory");
    pcre2_match_data_free(c.md);
    free(c.mapped.p);
    free(c.syms);
    free(c.heap.p);
    free(text.p);
    if (rc) {
        free(out.p);
        return rc;
    }
    if (!out.p && !(out.p = malloc(sizeof *out.p)))
        return rc_fail(e, RC_E_NOMEM, "tokenizer: out of host memory");
    *ids = out.p;
    *n_ids = out.n;
    return RC_OK;
}

/* ---- decode ---- */

int64_t rc_tokenizer_size(const rc_tokenizer *t) { return t->n_tok; }
int32_t rc_tokenizer_bos(const rc_tokenizer *t) { return t->bos_id; }
int32_t rc_tokenizer_eos(const rc_tokenizer *t) { return t->eos_id; }

void rc_tokenizer_set_special(rc_tokenizer *t, int32_t bos_id, int32_t eos_id)
{
    t->bos_id = bos_id;
    t->eos_id = eos_id;
}

const char *rc_tokenizer_token(const rc_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_tok ? t->str[id] : NULL;
}

int32_t rc_tokenizer_find(const rc_tokenizer *t, const char *token)
{
    const size_t n = strlen(token);
    for (int k = 0; k < 2; k++)
        for (int64_t j = 0; j < t->added[k].n; j++)
            if (t->added[k].len[j] == n && !memcmp(t->added[k].s[j], token, n))
                return t->added[k].id[j];
    return str_map_get(&t->vocab, token, n);
}

void rc_tok_stream_init(rc_tok_stream *s, const rc_tokenizer *t)
{
    memset(s, 0, sizeof *s);
    s->t = t;
}

void rc_tok_stream_free(rc_tok_stream *s)
{
    free(s->pend);
    free(s->out);
    memset(s, 0, sizeof *s);
}

/* HF's ByteFallback decoder: a run of byte tokens is its bytes when they are valid UTF-8, else one U+FFFD per
 * byte. Resolves the trailing run into pend. */
static int resolve_run(rc_tok_stream *s, buf *pend)
{
    if (!s->n_run)
        return 1;
    const size_t start = pend->n - s->n_run;
    size_t i = start;
    int valid = 1;
    while (i < pend->n && valid) {
        int st;
        i += utf8_char(pend->p + i, pend->n - i, &st);
        valid = st == U8_COMPLETE;
    }
    const size_t n_run = s->n_run;
    s->n_run = 0;
    if (valid)
        return 1;
    pend->n = start;
    for (size_t k = 0; k < n_run; k++)
        if (!buf_add(pend, replacement, 3))
            return 0;
    return 1;
}

static int stream_step(rc_tok_stream *s, int32_t id, int final, const char **text, size_t *len, rc_err *e)
{
    const rc_tokenizer *t = s->t;
    buf pend = {s->pend, s->n_pend, s->cap_pend};
    buf out = {(unsigned char *)s->out, 0, s->cap_out};
    int ok = 1;
    if (!final && id >= 0 && id < t->n_tok && t->str[id]) {
        if (t->byte_of[id] < 0)
            ok = resolve_run(s, &pend);
        const int64_t a = t->dec_off[id], b = t->dec_off[id + 1];
        ok = ok && buf_add(&pend, t->dec + a, (size_t)(b - a));
        if (t->byte_of[id] >= 0 && t->byte_fallback)
            s->n_run++;
    }
    if (final)
        ok = ok && resolve_run(s, &pend);
    size_t used = 0;
    if (ok) {
        const size_t upto = pend.n - s->n_run; /* a byte-fallback run is held until it ends */
        used = lossy_append(&out, pend.p, upto, !final, &ok);
        if (used) {
            memmove(pend.p, pend.p + used, pend.n - used);
            pend.n -= used;
        }
    }
    ok = ok && buf_add(&out, "", 0);
    s->pend = pend.p;
    s->n_pend = pend.n;
    s->cap_pend = pend.cap;
    s->out = (char *)out.p;
    s->n_out = out.n;
    s->cap_out = out.cap;
    if (!ok)
        return rc_fail(e, RC_E_NOMEM, "tokenizer: out of host memory");
    *text = s->out;
    *len = s->n_out;
    return RC_OK;
}

int rc_tok_stream_push(rc_tok_stream *s, int32_t id, const char **text, size_t *len, rc_err *e)
{
    return stream_step(s, id, 0, text, len, e);
}

int rc_tok_stream_finish(rc_tok_stream *s, const char **text, size_t *len, rc_err *e)
{
    return stream_step(s, -1, 1, text, len, e);
}

int rc_tokenizer_decode(const rc_tokenizer *t, const int32_t *ids, int64_t n, char **out, size_t *len, rc_err *e)
{
    *out = NULL;
    *len = 0;
    rc_tok_stream s;
    rc_tok_stream_init(&s, t);
    buf all = {0};
    int rc = buf_add(&all, "", 0) ? RC_OK : rc_fail(e, RC_E_NOMEM, "tokenizer: out of host memory");
    for (int64_t i = 0; i <= n && !rc; i++) {
        const char *piece;
        size_t np;
        rc = i < n ? rc_tok_stream_push(&s, ids[i], &piece, &np, e) : rc_tok_stream_finish(&s, &piece, &np, e);
        if (!rc && !buf_add(&all, piece, np))
            rc = rc_fail(e, RC_E_NOMEM, "tokenizer: out of host memory");
    }
    rc_tok_stream_free(&s);
    if (rc) {
        free(all.p);
        return rc;
    }
    *out = (char *)all.p;
    *len = all.n;
    return RC_OK;
}
