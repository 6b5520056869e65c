/* The tokenizer against HF `tokenizers` (fixture.json, generated once by gen_fixture.py): every text's ids
 * identical for each committed tokenizer (from tokenizer.json, and SmolLM2's also from GGUF-style arrays);
 * decode round-trips valid UTF-8 and equals HF's lossy decode elsewhere; streamed decode equals whole decode;
 * unsupported or broken tokenizers are refused; a SentencePiece BPE from GGUF-style arrays gives SentencePiece's ids
 * (spm_tiny.json, gen_spm.py); chat templates recognised by text render as HF's Jinja does
 * (chat.json); an HF folder's tokenizer, template and stop ids load. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "io.h"
#include "text.h"
#include "tokenizer.h"
#include "../testutil.h"

#ifndef RC_TEST_TOKENIZER_DIR
#define RC_TEST_TOKENIZER_DIR "tests/tokenizer"
#endif

static const char *const names[] = {"smollm2", "llama3_tiny", "qwen2_tiny", "bytefb_tiny"};
enum { N_TOK = sizeof names / sizeof names[0] };

static cJSON *fixture;

static cJSON *read_json(const char *path) /* NULL (message printed) if unreadable */
{
    rc_err e = {0};
    char *text = rc_read_text(path, "fixture", 0, &e);
    if (!text) {
        fprintf(stderr, "%s\n", e.msg);
        return NULL;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    return j;
}

static int setup(void **state)
{
    (void)state;
    fixture = read_json(RC_TEST_TOKENIZER_DIR "/fixture.json");
    return fixture ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cJSON_Delete(fixture);
    return 0;
}

static rc_tokenizer *load(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.json", RC_TEST_TOKENIZER_DIR, name);
    rc_err e = {0};
    rc_tokenizer *t = NULL;
    if (rc_tokenizer_from_json(&t, path, &e))
        fprintf(stderr, "%s\n", e.msg);
    assert_non_null(t);
    return t;
}

static unsigned char *unhex(const char *h, size_t *n)
{
    *n = strlen(h) / 2;
    unsigned char *b = malloc(*n + 1);
    assert_non_null(b);
    for (size_t i = 0; i < *n; i++) {
        unsigned v;
        assert_int_equal(sscanf(h + 2 * i, "%2x", &v), 1);
        b[i] = (unsigned char)v;
    }
    b[*n] = 0;
    return b;
}

/* Python's bytes.decode('utf-8', errors='replace').encode(): one U+FFFD per maximal invalid subpart. */
static char *py_replace(const unsigned char *b, size_t n, size_t *len)
{
    char *o = malloc(3 * n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        const unsigned c = b[i];
        size_t need = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        size_t j = 1;
        while (j < need && i + j < n && b[i + j] >= (j == 1 ? lo : 0x80) && b[i + j] <= (j == 1 ? hi : 0xBF))
            j++;
        if (need && j == need)
            memcpy(o + k, b + i, j), k += j;
        else
            memcpy(o + k, "\xEF\xBF\xBD", 3), k += 3;
        i += need ? j : 1;
    }
    o[k] = 0;
    *len = k;
    return o;
}

static int64_t ids_of(const cJSON *arr, int32_t **out)
{
    const int64_t n = cJSON_GetArraySize(arr);
    int32_t *p = malloc((size_t)(n + 1) * sizeof *p);
    assert_non_null(p);
    const cJSON *it;
    int64_t i = 0;
    cJSON_ArrayForEach(it, arr) p[i++] = (int32_t)it->valuedouble;
    *out = p;
    return n;
}

/* Streamed decode (one push per id, then finish) concatenates to the whole decode dec[0..nd). */
static void assert_stream_equals(const rc_tokenizer *t, const int32_t *ids, int64_t n, const char *dec, size_t nd)
{
    rc_err e = {0};
    rc_tok_stream s;
    rc_tok_stream_init(&s, t);
    char *cat = malloc(nd + 1);
    size_t nc = 0;
    for (int64_t i = 0; i <= n; i++) {
        const char *piece;
        size_t np;
        assert_int_equal(i < n ? rc_tok_stream_push(&s, ids[i], &piece, &np, &e)
                               : rc_tok_stream_finish(&s, &piece, &np, &e), RC_OK);
        assert_true(nc + np <= nd);
        memcpy(cat + nc, piece, np);
        nc += np;
    }
    assert_int_equal(nc, nd);
    assert_memory_equal(cat, dec, nd);
    rc_tok_stream_free(&s);
    free(cat);
}

/* Encodes every fixture text with t; returns the number of ids that differ from HF's (0 to pass), printing the
 * first difference of each text. */
static int64_t check_encode(const rc_tokenizer *t, const char *name, int64_t *n_texts, int64_t *n_ids)
{
    const int nfc = !strcmp(name, "qwen2_tiny"); /* its NFC normalizer changes decomposed text */
    int64_t bad = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(fixture, "cases")) {
        size_t nb;
        unsigned char *b = unhex(cJSON_GetObjectItem(c, "bytes_hex")->valuestring, &nb);
        int32_t *want, *got;
        int64_t nw = ids_of(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "ids"), name), &want), ng;
        rc_err e = {0};
        assert_int_equal(rc_tokenizer_encode(t, (const char *)b, nb, 0, &got, &ng, &e), RC_OK);
        int64_t first = -1;
        for (int64_t i = 0; i < (nw > ng ? nw : ng); i++)
            if (i >= nw || i >= ng || want[i] != got[i]) {
                bad++;
                if (first < 0)
                    first = i;
            }
        if (first >= 0)
            fprintf(stderr, "%s/%s: %lld vs HF %lld ids, first difference at %lld: %d vs HF %d\n", name,
                    cJSON_GetObjectItem(c, "name")->valuestring, (long long)ng, (long long)nw, (long long)first,
                    first < ng ? got[first] : -1, first < nw ? want[first] : -1);

        /* decode = HF's decode; that is the text itself when valid UTF-8 (NFC'd for an NFC tokenizer), else
         * the replaced text; streamed = whole */
        char *dec;
        size_t nd, nh;
        assert_int_equal(rc_tokenizer_decode(t, got, ng, &dec, &nd, &e), RC_OK);
        unsigned char *hf = unhex(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "decoded_hex"), name)->valuestring, &nh);
        if (nd != nh || memcmp(dec, hf, nd))
            fprintf(stderr, "%s/%s: decode differs from HF's\n", name, cJSON_GetObjectItem(c, "name")->valuestring);
        assert_int_equal(nd, nh);
        assert_memory_equal(dec, hf, nd);
        free(hf);
        size_t ne;
        char *expect = py_replace(b, nb, &ne);
        if (!nfc) { /* round trip */
            assert_int_equal(nd, ne);
            assert_memory_equal(dec, expect, nd);
            if (cJSON_IsTrue(cJSON_GetObjectItem(c, "valid_utf8"))) {
                assert_int_equal(nd, nb);
                assert_memory_equal(dec, b, nb);
            }
        }
        assert_stream_equals(t, got, ng, dec, nd);
        free(expect);
        free(dec);
        (*n_texts)++;
        *n_ids += nw;
        free(b);
        free(want);
        free(got);
    }
    return bad;
}

static void test_encode_matches_hf(void **state)
{
    (void)state;
    int64_t texts = 0, ids = 0, bad = 0;
    for (int k = 0; k < N_TOK; k++) {
        rc_tokenizer *t = load(names[k]);
        bad += check_encode(t, names[k], &texts, &ids);
        rc_tokenizer_free(t);
    }
    printf("tokenizer fixture: %lld texts x tokenizer, %lld ids, %lld differ from HF (%.4f%% identical)\n",
           (long long)texts, (long long)ids, (long long)bad, ids ? 100.0 * (double)(ids - bad) / (double)ids : 0.0);
    assert_true(texts >= 4 * 40);
    assert_int_equal(bad, 0);
}

static void test_decode_matches_hf(void **state)
{
    (void)state;
    rc_tokenizer *t[N_TOK];
    for (int k = 0; k < N_TOK; k++)
        t[k] = load(names[k]);
    int64_t n = 0, fffd = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(fixture, "decode")) {
        int k = 0;
        while (k < N_TOK && strcmp(names[k], cJSON_GetObjectItem(c, "tokenizer")->valuestring))
            k++;
        assert_true(k < N_TOK);
        int32_t *ids;
        const int64_t ni = ids_of(cJSON_GetObjectItem(c, "ids"), &ids);
        size_t nw, nd;
        unsigned char *want = unhex(cJSON_GetObjectItem(c, "text_hex")->valuestring, &nw);
        char *dec;
        rc_err e = {0};
        assert_int_equal(rc_tokenizer_decode(t[k], ids, ni, &dec, &nd, &e), RC_OK);
        if (nd != nw || memcmp(dec, want, nw))
            fprintf(stderr, "%s: decode of %lld ids (first %d): '%s' vs HF '%s'\n", names[k], (long long)ni, ids[0],
                    dec, (const char *)want);
        assert_int_equal(nd, nw);
        assert_memory_equal(dec, want, nw);
        fffd += strstr(dec, "\xEF\xBF\xBD") != NULL;
        n++;
        free(dec);
        free(want);
        free(ids);
    }
    printf("decode: %lld id lists equal HF's decode (%lld with U+FFFD)\n", (long long)n, (long long)fffd);
    assert_true(fffd > 0); /* the fixture does exercise the lossy path */
    for (int k = 0; k < N_TOK; k++)
        rc_tokenizer_free(t[k]);
}

/* SmolLM2 built as the GGUF reader will build it: tokens, token types, "left right" merges, pre = "smollm". */
static void test_arrays_match_hf(void **state)
{
    (void)state;
    rc_err e = {0};
    cJSON *root = read_json(RC_TEST_TOKENIZER_DIR "/smollm2.json");
    assert_non_null(root);
    const cJSON *model = cJSON_GetObjectItem(root, "model"), *it;
    const int64_t nv = cJSON_GetArraySize(cJSON_GetObjectItem(model, "vocab"));
    const int64_t nm = cJSON_GetArraySize(cJSON_GetObjectItem(model, "merges"));
    const char **tokens = calloc((size_t)nv, sizeof *tokens);
    int32_t *types = malloc((size_t)nv * sizeof *types);
    char **merges = calloc((size_t)nm, sizeof *merges);
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(model, "vocab")) {
        tokens[(int64_t)it->valuedouble] = it->string;
        types[(int64_t)it->valuedouble] = RC_TOKT_NORMAL;
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(root, "added_tokens"))
        if (cJSON_IsTrue(cJSON_GetObjectItem(it, "special")))
            types[(int64_t)cJSON_GetObjectItem(it, "id")->valuedouble] = RC_TOKT_CONTROL;
    int64_t r = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(model, "merges")) {
        const char *a = cJSON_GetArrayItem(it, 0)->valuestring, *b = cJSON_GetArrayItem(it, 1)->valuestring;
        merges[r] = malloc(strlen(a) + strlen(b) + 2);
        sprintf(merges[r++], "%s %s", a, b);
    }
    rc_tok_arrays a = {.n_vocab = nv, .tokens = tokens, .token_type = types, .n_merges = nm,
                       .merges = (const char *const *)merges, .model = "gpt2", .pre = "smollm", .bos_id = 1,
                       .eos_id = 2, .add_bos = 0};
    rc_tokenizer *t = NULL;
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_OK);
    int64_t texts = 0, ids = 0;
    assert_int_equal(check_encode(t, "smollm2", &texts, &ids), 0);
    assert_int_equal(rc_tokenizer_eos(t), 2);
    assert_int_equal(rc_tokenizer_find(t, "<|im_end|>"), 2);
    rc_tokenizer_free(t);

    a.pre = "frobnicate";
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "frobnicate"));
    a.pre = "smollm";
    a.model = "llama"; /* SentencePiece without its scores */
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_MISSING);
    assert_non_null(strstr(e.msg, "scores"));
    a.model = "bert";
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "bert"));
    a.model = "gpt2";
    char *saved = merges[5];
    merges[5] = "nospace";
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_FORMAT);
    assert_non_null(strstr(e.msg, "merge 5"));
    merges[5] = "Ġ zzzz_not_a_token";
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_FORMAT);
    assert_non_null(strstr(e.msg, "not in the vocabulary"));
    merges[5] = saved;
    assert_null(t);
    /* a control token that is not valid UTF-8 (GGUF's token types), refused as tokenizer.json's added tokens are */
    const char *tok2 = tokens[2];
    tokens[2] = "<|im_end|\xef\xbf";
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_FORMAT);
    assert_non_null(strstr(e.msg, "special token 2 is not valid UTF-8"));
    assert_null(t);
    tokens[2] = tok2;

    for (int64_t i = 0; i < nm; i++)
        free(merges[i]);
    free(merges);
    free(types);
    free(tokens);
    cJSON_Delete(root);
}

/* SentencePiece BPE (GGUF tokenizer.ggml.model "llama"): spm_tiny.json's pieces, scores and types through
 * rc_tokenizer_from_arrays give SentencePiece's own ids on every text (runs of spaces as user-defined pieces,
 * pieces of equal score merged leftmost first, byte fallback, control pieces matched first) and its decode,
 * whole and streamed. */
static void test_spm_matches_sentencepiece(void **state)
{
    (void)state;
    cJSON *root = read_json(RC_TEST_TOKENIZER_DIR "/spm_tiny.json");
    assert_non_null(root);
    const cJSON *pieces = cJSON_GetObjectItem(root, "pieces"), *it;
    const int64_t nv = cJSON_GetArraySize(pieces);
    const char **tokens = calloc((size_t)nv, sizeof *tokens);
    int32_t *types = malloc((size_t)nv * sizeof *types);
    float *scores = malloc((size_t)nv * sizeof *scores);
    int64_t i = 0;
    cJSON_ArrayForEach(it, pieces) {
        tokens[i] = cJSON_GetArrayItem(it, 0)->valuestring;
        scores[i] = (float)cJSON_GetArrayItem(it, 1)->valuedouble;
        types[i++] = (int32_t)cJSON_GetArrayItem(it, 2)->valuedouble;
    }
    rc_tok_arrays a = {.n_vocab = nv, .tokens = tokens, .token_type = types, .model = "llama", .pre = "default",
                       .bos_id = (int32_t)cJSON_GetObjectItem(root, "bos_id")->valuedouble,
                       .eos_id = (int32_t)cJSON_GetObjectItem(root, "eos_id")->valuedouble, .add_bos = 1,
                       .scores = scores, .add_space_prefix = 0,
                       .unk_id = (int32_t)cJSON_GetObjectItem(root, "unk_id")->valuedouble};
    rc_tokenizer *t = NULL;
    rc_err e = {0};
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_OK);
    int64_t texts = 0, n_ids = 0, bad = 0, decoded = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(root, "cases")) {
        size_t nb;
        unsigned char *b = unhex(cJSON_GetObjectItem(it, "bytes_hex")->valuestring, &nb);
        int32_t *want, *got;
        const int64_t nw = ids_of(cJSON_GetObjectItem(it, "ids"), &want);
        int64_t ng;
        assert_int_equal(rc_tokenizer_encode(t, (const char *)b, nb, 0, &got, &ng, &e), RC_OK);
        int64_t first = -1;
        for (int64_t k = 0; k < (nw > ng ? nw : ng); k++)
            if (k >= nw || k >= ng || want[k] != got[k]) {
                bad++;
                first = first < 0 ? k : first;
            }
        if (first >= 0)
            fprintf(stderr, "spm_tiny/%s: %lld vs SentencePiece %lld ids, first difference at %lld: %d vs %d\n",
                    cJSON_GetObjectItem(it, "name")->valuestring, (long long)ng, (long long)nw, (long long)first,
                    first < ng ? got[first] : -1, first < nw ? want[first] : -1);
        const cJSON *dj = cJSON_GetObjectItem(it, "decoded_hex");
        if (dj) { /* SentencePiece's decode (spaces back from U+2581, byte runs as UTF-8) */
            char *dec;
            size_t nd, nx;
            unsigned char *x = unhex(dj->valuestring, &nx);
            assert_int_equal(rc_tokenizer_decode(t, got, ng, &dec, &nd, &e), RC_OK);
            assert_int_equal(nd, nx);
            assert_memory_equal(dec, x, nd);
            assert_stream_equals(t, got, ng, dec, nd);
            free(x);
            free(dec);
            decoded++;
        }
        texts++;
        n_ids += nw;
        free(want);
        free(got);
        free(b);
    }
    printf("spm_tiny: %lld texts, %lld ids, %lld differ from SentencePiece; %lld decodes equal\n", (long long)texts,
           (long long)n_ids, (long long)bad, (long long)decoded);
    assert_true(texts >= 50 && decoded >= 50);
    assert_int_equal(bad, 0);
    /* add_special: the GGUF's add_bos_token puts BOS first */
    int32_t *ids;
    int64_t n;
    assert_int_equal(rc_tokenizer_encode(t, "a b", 3, 1, &ids, &n, &e), RC_OK);
    assert_true(n >= 2);
    assert_int_equal(ids[0], a.bos_id);
    free(ids);
    rc_tokenizer_free(t);
    t = NULL;

    /* refusals, each by name */
    a.add_space_prefix = 1; /* Llama 2's prefix space */
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "add_space_prefix"));
    a.add_space_prefix = 0;
    a.scores = NULL;
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_MISSING);
    assert_non_null(strstr(e.msg, "tokenizer.ggml.scores"));
    a.scores = scores;
    const float keep = scores[300];
    scores[300] = 0.0f / 0.0f;
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_FORMAT);
    assert_non_null(strstr(e.msg, "token 300 has score"));
    scores[300] = keep;
    a.unk_id = (int32_t)nv;
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_RANGE);
    assert_non_null(strstr(e.msg, "unknown_token_id"));
    assert_null(t);
    free(scores);
    free(types);
    free(tokens);
    cJSON_Delete(root);
}

/* SentencePiece edge cases, each against what SentencePiece does: a byte-fallback piece never merges with its
 * neighbour; a string listed twice merges onward under the id every lookup gives it; UNUSED pieces are refused; a
 * vocabulary with a 1 MB piece builds (its splits are hashed incrementally, not in O(L^2)). */
static void encode_is(const rc_tok_arrays *a, const char *text, const int32_t *want, int64_t nw)
{
    rc_tokenizer *t = NULL;
    rc_err e = {0};
    assert_int_equal(rc_tokenizer_from_arrays(&t, a, &e), RC_OK);
    int32_t *ids;
    int64_t n;
    assert_int_equal(rc_tokenizer_encode(t, text, strlen(text), 0, &ids, &n, &e), RC_OK);
    assert_int_equal(n, nw);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
    free(ids);
    rc_tokenizer_free(t);
}

static void test_spm_edges(void **state)
{
    (void)state;
    const char *tok1[] = {"x", "<0x41>", "x<0x41>"};
    const int32_t typ1[] = {RC_TOKT_NORMAL, RC_TOKT_BYTE, RC_TOKT_NORMAL};
    const float sc1[] = {0, 0, 5};
    rc_tok_arrays a = {.n_vocab = 3, .tokens = tok1, .token_type = typ1, .model = "llama", .scores = sc1,
                       .bos_id = -1, .eos_id = -1, .unk_id = -1};
    encode_is(&a, "xA", (const int32_t[]){0, 1}, 2); /* 'A' falls back to <0x41> after merging */

    const char *tok2[] = {"a", "b", "ab", "c", "abc", "ab"};
    const float sc2[] = {0, 0, -1, 0, -2, -3};
    a = (rc_tok_arrays){.n_vocab = 6, .tokens = tok2, .model = "llama", .scores = sc2, .bos_id = -1, .eos_id = -1,
                        .unk_id = -1};
    encode_is(&a, "abc", (const int32_t[]){4}, 1);

    const int32_t typ3[] = {RC_TOKT_NORMAL, RC_TOKT_NORMAL, RC_TOKT_UNUSED, RC_TOKT_NORMAL, RC_TOKT_NORMAL,
                            RC_TOKT_NORMAL};
    a.token_type = typ3;
    rc_tokenizer *t = NULL;
    rc_err e = {0};
    assert_int_equal(rc_tokenizer_from_arrays(&t, &a, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "token 2 is UNUSED"));
    assert_null(t);

    const size_t big = (size_t)1 << 20;
    char *longest = malloc(big + 1);
    memset(longest, 'a', big);
    longest[big] = 0;
    const char *tok4[] = {"a", "aa", longest};
    const float sc4[] = {0, -1, -2};
    a = (rc_tok_arrays){.n_vocab = 3, .tokens = tok4, .model = "llama", .scores = sc4, .bos_id = -1, .eos_id = -1,
                        .unk_id = -1};
    encode_is(&a, "aaaaa", (const int32_t[]){1, 1, 0}, 3);
    free(longest);
}

static void test_add_special_and_edges(void **state)
{
    (void)state;
    rc_tokenizer *t = load("smollm2");
    rc_err e = {0};
    int32_t *ids;
    int64_t n;
    assert_int_equal(rc_tokenizer_encode(t, "", 0, 1, &ids, &n, &e), RC_OK);
    assert_int_equal(n, 0); /* SmolLM2 adds no BOS */
    free(ids);
    /* a long run of one character: the merge heap keeps it fast and HF-equal (all 'a' merges) */
    const size_t big = 200000;
    char *s = malloc(big + 1);
    memset(s, 'a', big);
    s[big] = 0;
    assert_int_equal(rc_tokenizer_encode(t, s, big, 0, &ids, &n, &e), RC_OK);
    char *dec;
    size_t nd;
    assert_int_equal(rc_tokenizer_decode(t, ids, n, &dec, &nd, &e), RC_OK);
    assert_int_equal(nd, big);
    assert_memory_equal(dec, s, big);
    free(dec);
    free(ids);
    free(s);
    /* ids outside the vocabulary decode to nothing, as HF's */
    const int32_t odd[] = {-5, 1 << 30, 2};
    assert_int_equal(rc_tokenizer_decode(t, odd, 3, &dec, &nd, &e), RC_OK);
    assert_string_equal(dec, "<|im_end|>");
    free(dec);
    rc_tokenizer_free(t);
    /* the llama3 tiny tokenizer has no post-processor: add_special adds nothing there either */
    t = load("llama3_tiny");
    assert_int_equal(rc_tokenizer_encode(t, "hi", 2, 1, &ids, &n, &e), RC_OK);
    assert_true(n >= 1);
    free(ids);
    rc_tokenizer_free(t);
}

static void expect_refused(const char *json, int code, const char *needle)
{
    rc_err e = {0};
    rc_tokenizer *t = NULL;
    assert_int_equal(rc_tokenizer_from_json_text(&t, json, "bad.json", &e), code);
    assert_null(t);
    if (!strstr(e.msg, needle))
        fprintf(stderr, "message '%s' lacks '%s'\n", e.msg, needle);
    assert_non_null(strstr(e.msg, needle));
}

#define BPE_OK "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}"
#define BL_DEC "\"decoder\":{\"type\":\"ByteLevel\"}"
#define BL_PRE "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"

static void test_refusals(void **state)
{
    (void)state;
    expect_refused("{not json", RC_E_FORMAT, "not valid JSON");
    expect_refused("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", RC_E_UNSUPPORTED, "WordPiece");
    expect_refused("{" BPE_OK ",\"normalizer\":{\"type\":\"NFKC\"}," BL_PRE "," BL_DEC "}", RC_E_UNSUPPORTED, "NFKC");
    expect_refused("{" BPE_OK ",\"pre_tokenizer\":{\"type\":\"Metaspace\"}," BL_DEC "}", RC_E_UNSUPPORTED,
                   "Metaspace");
    expect_refused("{" BPE_OK "," BL_PRE ",\"decoder\":{\"type\":\"WordPiece\"}}", RC_E_UNSUPPORTED, "WordPiece");
    expect_refused("{" BPE_OK "," BL_PRE "}", RC_E_UNSUPPORTED, "no decoder");
    expect_refused("{" BPE_OK ",\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},"
                   "\"behavior\":\"Removed\"}," BL_DEC "}", RC_E_UNSUPPORTED, "Removed");
    expect_refused("{" BPE_OK ",\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},"
                   "\"behavior\":\"Isolated\"},\"decoder\":{\"type\":\"Fuse\"}}", RC_E_FORMAT, "regex");
    expect_refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a zz\"]}," BL_PRE "," BL_DEC "}",
                   RC_E_FORMAT, "not in the vocabulary");
    expect_refused("{" BPE_OK "," BL_PRE "," BL_DEC ",\"added_tokens\":[{\"id\":3,\"content\":\"<x>\","
                   "\"rstrip\":true}]}", RC_E_UNSUPPORTED, "rstrip");
    expect_refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}," BL_PRE "," BL_DEC "}",
                   RC_E_FORMAT, "share id");
    /* an added token at a vocabulary id with another string: the message names both (it once read them after the
     * tokenizer holding them was freed: found by tests/fuzz/fuzz_tokenizer, its input in the fuzz corpus) */
    expect_refused("{" BPE_OK "," BL_PRE "," BL_DEC ",\"added_tokens\":[{\"id\":1,\"content\":\"<x>\"}]}",
                   RC_E_FORMAT, "added token 1 '<x>' differs from the vocabulary's 'b'");
    /* ids far past the tokens defined: every table is sized by the highest id (found by fuzz_tokenizer: one vocab
     * entry at id 744555556 asked for 6 GB) */
    expect_refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1000000},\"merges\":[]}," BL_PRE
                   "," BL_DEC "}", RC_E_FORMAT, "vocab ids reach 1000000 for 2 entries");
    expect_refused("{" BPE_OK "," BL_PRE "," BL_DEC ",\"added_tokens\":[{\"id\":100000000,\"content\":\"<x>\"}]}",
                   RC_E_FORMAT, "token ids reach 100000000 for 4 defined tokens");
    /* an added token that is not valid UTF-8: text split on it could be cut inside a character, and the
     * pre-tokenizer's regex then read past its piece (found by fuzz_tokenizer: a heap read past the text in
     * bpe_piece, an added token "|im_start|>user" EF BF matching the start of a U+FFFD) */
    expect_refused("{" BPE_OK "," BL_PRE "," BL_DEC ",\"added_tokens\":[{\"id\":3,\"content\":\"x\xef\xbf\"}]}",
                   RC_E_FORMAT, "added token 3 is not valid UTF-8");
    rc_err e = {0};
    rc_tokenizer *t = NULL;
    assert_int_equal(rc_tokenizer_from_json(&t, "/nonexistent/tokenizer.json", &e), RC_E_IO);
    assert_non_null(strstr(e.msg, "/nonexistent/tokenizer.json"));
}


static void test_chat_matches_hf(void **state)
{
    (void)state;
    rc_err e = {0};
    cJSON *root = read_json(RC_TEST_TOKENIZER_DIR "/chat.json");
    assert_non_null(root);
    const cJSON *it;
    int n = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(root, "renders")) {
        const char *name = cJSON_GetObjectItem(it, "template")->valuestring;
        const char *tpl = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "templates"), name)->valuestring;
        const rc_chat *c;
        assert_int_equal(rc_chat_find(tpl, &c, &e), RC_OK);
        assert_string_equal(c->name, name);
        const cJSON *sys = cJSON_GetObjectItem(it, "system");
        char *out;
        assert_int_equal(rc_chat_apply(c, cJSON_IsString(sys) ? sys->valuestring : NULL,
                                       cJSON_GetObjectItem(it, "user")->valuestring,
                                       cJSON_GetObjectItem(it, "bos_token")->valuestring, &out, &e), RC_OK);
        assert_string_equal(out, cJSON_GetObjectItem(it, "text")->valuestring);
        free(out);
        n++;
    }
    assert_true(n >= 15);
    const rc_chat *c;
    assert_int_equal(rc_chat_find("{% for m in messages %}{{ m['content'] }}{% endfor %}", &c, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "not one we recognise"));
    assert_null(c);
    cJSON_Delete(root);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    assert_int_equal(tu_write(tu_path(dir, name), text, strlen(text)), 0);
}

static void test_hf_folder(void **state)
{
    (void)state;
    rc_err e = {0};
    char *dir = tu_tmpdir();
    rc_text t;
    assert_int_equal(rc_text_load_hf(&t, dir, &e), RC_E_MISSING);
    assert_non_null(strstr(e.msg, "tokenizer.json"));
    assert_int_equal(tu_copy(RC_TEST_TOKENIZER_DIR "/smollm2.json", tu_path(dir, "tokenizer.json"), -1), 0);
    write_file(dir, "config.json", "{\"eos_token_id\": 2, \"bos_token_id\": 1}");
    write_file(dir, "tokenizer_config.json", "{\"bos_token\": \"<|im_start|>\", \"eos_token\": \"<|im_end|>\"}");
    write_file(dir, "chat_template.jinja", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
               "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
               "'<|im_start|>assistant\n' }}{% endif %}\n");
    assert_int_equal(rc_text_load_hf(&t, dir, &e), RC_OK);
    assert_int_equal(t.n_stop, 1);
    assert_int_equal(t.stop[0], 2);
    assert_int_equal(rc_tokenizer_bos(t.tok), 1);
    const rc_chat *c;
    assert_int_equal(rc_chat_find(t.chat_template, &c, &e), RC_OK);
    assert_string_equal(c->name, "chatml");
    rc_text_free(&t);
    /* generation_config's list wins over config.json */
    write_file(dir, "generation_config.json", "{\"eos_token_id\": [2, 0]}");
    assert_int_equal(rc_text_load_hf(&t, dir, &e), RC_OK);
    assert_int_equal(t.n_stop, 2);
    assert_int_equal(t.stop[1], 0);
    rc_text_free(&t);
    write_file(dir, "generation_config.json", "{\"eos_token_id\": \"two\"}");
    assert_int_equal(rc_text_load_hf(&t, dir, &e), RC_E_FORMAT);
    assert_non_null(strstr(e.msg, "generation_config.json"));
    write_file(dir, "generation_config.json", "not json");
    assert_int_equal(rc_text_load_hf(&t, dir, &e), RC_E_FORMAT);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_matches_hf),
        cmocka_unit_test(test_decode_matches_hf),
        cmocka_unit_test(test_arrays_match_hf),
        cmocka_unit_test(test_spm_matches_sentencepiece),
        cmocka_unit_test(test_spm_edges),
        cmocka_unit_test(test_add_special_and_edges),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_chat_matches_hf),
        cmocka_unit_test(test_hf_folder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
