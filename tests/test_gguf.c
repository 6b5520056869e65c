/* GGUF reader: dequantization bit-exact against the gguf package, the llama mapping equal to what
 * transformers loads, and one-line refusals of truncated or inconsistent files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <cmocka.h>

#include "gguf.h"
#include "model.h"
#include "checksum.h"
#include "testutil.h"

#ifndef RC_TEST_GGUF_DIR
#define RC_TEST_GGUF_DIR "tests/gguf"
#endif
#define FIXTURE(name) RC_TEST_GGUF_DIR "/" name

/* Every supported type dequantizes to the bytes gguf.quants.dequantize produced (zeros, fp16-subnormal
 * scales and large values included; the K-quants from random block bytes, 4 blocks of 256). */
static void test_dequant_bit_exact(void **state)
{
    (void)state;
    static const char *const types[] = {"f32",  "f16",  "bf16", "q8_0", "q4_0", "q4_1", "q5_0",
                                        "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};
    rc_gguf g;
    rc_err e = {0};
    assert_int_equal(rc_gguf_open(&g, FIXTURE("dequant.gguf"), &e), RC_OK);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char exp_name[64];
        snprintf(exp_name, sizeof exp_name, "%s.expected", types[i]);
        const rc_gguf_tensor *t = rc_gguf_find_tensor(&g, types[i]), *x = rc_gguf_find_tensor(&g, exp_name);
        assert_non_null(t);
        assert_non_null(x);
        assert_int_equal(x->type, RC_GGML_F32);
        assert_int_equal(t->numel, types[i][strlen(types[i]) - 1] == 'k' ? 1024 : 256);
        assert_int_equal(x->numel, t->numel);
        char tn[16];
        for (size_t k = 0; k <= strlen(types[i]); k++)
            tn[k] = (char)(types[i][k] >= 'a' && types[i][k] <= 'z' ? types[i][k] - 32 : types[i][k]);
        assert_string_equal(rc_ggml_type_name(t->type), tn);
        float *got, *want;
        assert_int_equal(rc_gguf_tensor_f32(&g, t, &got, &e), RC_OK);
        assert_int_equal(rc_gguf_tensor_f32(&g, x, &want, &e), RC_OK);
        if (memcmp(got, want, (size_t)t->numel * sizeof *got)) {
            for (int64_t k = 0; k < t->numel; k++)
                if (memcmp(&got[k], &want[k], sizeof *got))
                    fail_msg("%s[%lld]: %.9g, gguf.quants.dequantize gives %.9g", types[i], (long long)k, got[k],
                             want[k]);
        }
        free(got);
        free(want);
    }
    rc_gguf_close(&g);
}

/* A fixture loaded as a model equals, tensor by tensor and bit by bit, what transformers loads from it (names,
 * shapes, dequantized values; llama: q/k rows un-permuted; gemma3: norm weights minus 1); returns HF's config. */
static cJSON *matches_hf(const char *fixture, const char *hf_fixture, rc_model *m)
{
    rc_gguf hf;
    rc_err e = {0};
    if (rc_model_load(m, fixture, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(rc_gguf_open(&hf, hf_fixture, &e), RC_OK);
    assert_int_equal(m->store.n, hf.n_t);
    for (int64_t i = 0; i < hf.n_t; i++) {
        const rc_gguf_tensor *x = &hf.t[i];
        const rc_tensor *t = rc_tensors_find(&m->store, x->name);
        if (!t)
            fail_msg("HF tensor %s is missing", x->name);
        assert_int_equal(t->ndim, x->ndim);
        for (int d = 0; d < t->ndim; d++)
            assert_int_equal(t->shape[d], x->ne[x->ndim - 1 - d]);
        float *want;
        assert_int_equal(rc_gguf_tensor_f32(&hf, x, &want, &e), RC_OK);
        if (memcmp(t->data, want, (size_t)t->numel * sizeof *want))
            fail_msg("%s differs from what transformers loads", x->name);
        free(want);
    }
    rc_gguf_str js;
    const rc_gguf_kv *kv = rc_gguf_find(&hf, "hf.config_json");
    assert_non_null(kv);
    assert_int_equal(rc_gguf_get_str(&hf, kv, &js, &e), RC_OK);
    cJSON *j = cJSON_ParseWithLength(js.s, js.len);
    assert_non_null(j);
    rc_gguf_close(&hf);
    return j;
}

#define NUM(k) cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, k))

/* the sizes every description shares with HF's config */
static void same_sizes(const rc_config *c, const cJSON *j)
{
    assert_int_equal(c->vocab, (int64_t)NUM("vocab_size"));
    assert_int_equal(c->hidden, (int64_t)NUM("hidden_size"));
    assert_int_equal(c->n_layers, (int)NUM("num_hidden_layers"));
    assert_int_equal(c->layers[0].n_heads, (int)NUM("num_attention_heads"));
    assert_int_equal(c->layers[0].n_kv_heads, (int)NUM("num_key_value_heads"));
    assert_int_equal(c->layers[0].head_dim, (int)NUM("head_dim"));
    assert_int_equal(c->layers[0].intermediate, (int)NUM("intermediate_size"));
    assert_true(c->eps == (float)NUM("rms_norm_eps"));
    assert_int_equal(c->tie_embeddings, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings")));
}

/* A fixture of one RoPE table (llama, qwen3) against transformers: its tensors, sizes, RoPE base and head
 * (lm_head the embedding exactly when tied); HF's config returned. */
static cJSON *one_rope_matches_hf(const char *fixture, const char *hf_fixture, const char *model_type, rc_model *m)
{
    cJSON *j = matches_hf(fixture, hf_fixture, m);
    const rc_config *c = &m->cfg;
    assert_string_equal(c->model_type, model_type);
    same_sizes(c, j);
    assert_true(c->ropes[0].theta == cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(
                                         cJSON_GetObjectItemCaseSensitive(j, "rope_parameters"), "rope_theta")));
    assert_int_equal(m->w.lm_head == m->w.embed, c->tie_embeddings);
    return j;
}

/* tiny_llama.gguf against transformers, and its description HF's config (a tied head). */
static void test_llama_matches_hf(void **state)
{
    (void)state;
    rc_model m;
    cJSON *j = one_rope_matches_hf(FIXTURE("tiny_llama.gguf"), FIXTURE("tiny_llama_hf.gguf"), "llama", &m);
    assert_true(m.cfg.tie_embeddings);
    cJSON_Delete(j);
    rc_model_free(&m);
}

/* tiny_qwen3.gguf against transformers: q/k norms, no q/k permutation, head_dim 128 from Qwen3Config's default
 * (the file's attention.key_length agrees with it), an untied output.weight as lm_head. */
static void test_qwen3_matches_hf(void **state)
{
    (void)state;
    rc_model m;
    cJSON *j = one_rope_matches_hf(FIXTURE("tiny_qwen3.gguf"), FIXTURE("tiny_qwen3_hf.gguf"), "qwen3", &m);
    const rc_config *c = &m.cfg;
    assert_int_equal(c->layers[0].head_dim, 128);
    assert_true(c->qk_norm == RC_NORM_W && c->layers[1].q_norm && c->layers[1].k_norm);
    assert_false(c->tie_embeddings);
    cJSON_Delete(j);
    rc_model_free(&m);
}

/* tiny_gemma3.gguf against transformers (gemma3_text: HF's default layer pattern, its default sliding-layer RoPE
 * base and query_pre_attn_scalar, the file's base for full layers). */
static void test_gemma3_matches_hf(void **state)
{
    (void)state;
    rc_model m;
    cJSON *j = matches_hf(FIXTURE("tiny_gemma3.gguf"), FIXTURE("tiny_gemma3_hf.gguf"), &m);
    const rc_config *c = &m.cfg;
    assert_string_equal(c->model_type, "gemma3_text");
    same_sizes(c, j);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(j, "layer_types");
    assert_int_equal(cJSON_GetArraySize(lt), c->n_layers);
    for (int i = 0; i < c->n_layers; i++) {
        const int full = !strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(lt, i)), "full_attention");
        assert_int_equal(full, i == 5);
        assert_int_equal(c->layers[i].window, full ? 0 : (int)NUM("sliding_window"));
        assert_true(c->layers[i].attn_scale == (float)pow(NUM("query_pre_attn_scalar"), -0.5));
    }
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(j, "rope_parameters");
    for (int t = 0; t < 2; t++) {
        const cJSON *ent = cJSON_GetObjectItemCaseSensitive(rp, t ? "full_attention" : "sliding_attention");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ent, "rope_type")), "default");
        assert_true(c->ropes[c->layers[t ? 5 : 0].rope].theta ==
                    cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ent, "rope_theta")));
    }
    assert_true(c->norm == RC_NORM_1PW && c->qk_norm == RC_NORM_1PW && c->post_norms);
    assert_ptr_equal(m.w.lm_head, m.w.embed);
    cJSON_Delete(j);
    rc_model_free(&m);
}

#undef NUM

/* ---- a minimal GGUF writer for hostile files ---- */
typedef struct spec {
    uint32_t magic, version;
    uint64_t n_kv_claim, n_t_claim; /* 0: the real counts */
    const char *arch;               /* general.architecture, NULL: none */
    const char *key2, *val2;        /* one more string key/value, NULL: none */
    int64_t alignment;              /* general.alignment (u32), 0: none */
    int n_t;                        /* tensors written (0..2), all alike but for the name */
    const char *name2;              /* the second tensor's name */
    uint32_t ndim, type;
    uint64_t ne[5];
    uint64_t offset, offset2;
    uint64_t data_bytes;            /* bytes after the aligned header */
    uint64_t key_len_claim;         /* 0: the real length of the first key */
} spec;

typedef struct wbuf {
    unsigned char *b;
    size_t n, cap;
} wbuf;

static void put(wbuf *w, const void *p, size_t n)
{
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2;
        w->b = realloc(w->b, w->cap);
        assert_non_null(w->b);
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void put_u32(wbuf *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(wbuf *w, uint64_t v) { put(w, &v, 8); }

static void put_str(wbuf *w, const char *s, uint64_t claim)
{
    put_u64(w, claim ? claim : strlen(s));
    put(w, s, strlen(s));
}

static spec base_spec(void)
{
    spec s = {.magic = 0x46554747u, .version = 3, .arch = "llama", .n_t = 1, .ndim = 2, .type = RC_GGML_F32,
              .ne = {32, 2}, .data_bytes = 256, .name2 = "b"};
    return s;
}

static const char *write_spec(const spec *s, const char *dir)
{
    wbuf w = {0};
    int n_kv = (s->arch != NULL) + (s->key2 != NULL) + (s->alignment != 0);
    put_u32(&w, s->magic);
    put_u32(&w, s->version);
    put_u64(&w, s->n_t_claim ? s->n_t_claim : (uint64_t)s->n_t);
    put_u64(&w, s->n_kv_claim ? s->n_kv_claim : (uint64_t)n_kv);
    int first = 1;
    if (s->arch) {
        put_str(&w, "general.architecture", first ? s->key_len_claim : 0);
        first = 0;
        put_u32(&w, RC_GGUF_STRING);
        put_str(&w, s->arch, 0);
    }
    if (s->key2) {
        put_str(&w, s->key2, first ? s->key_len_claim : 0);
        first = 0;
        put_u32(&w, RC_GGUF_STRING);
        put_str(&w, s->val2, 0);
    }
    if (s->alignment) {
        put_str(&w, "general.alignment", 0);
        put_u32(&w, RC_GGUF_U32);
        put_u32(&w, (uint32_t)s->alignment);
    }
    for (int t = 0; t < s->n_t; t++) {
        put_str(&w, t ? s->name2 : "a", 0);
        put_u32(&w, s->ndim);
        for (uint32_t d = 0; d < s->ndim && d < 5; d++)
            put_u64(&w, s->ne[d]);
        put_u32(&w, s->type);
        put_u64(&w, t ? s->offset2 : s->offset);
    }
    uint64_t al = s->alignment > 0 ? (uint64_t)s->alignment : 32;
    while (w.n % al)
        put(&w, "", 1);
    for (uint64_t i = 0; i < s->data_bytes; i++)
        put(&w, "\x01", 1);
    const char *path = tu_path(dir, "case.gguf");
    assert_int_equal(tu_write(path, w.b, w.n), 0);
    free(w.b);
    return path;
}

typedef struct bad_case {
    const char *what;
    int code;
    const char *msg;
} bad_case;

static void expect_open(const spec *s, const char *dir, const bad_case *c)
{
    rc_gguf g;
    rc_err e = {0};
    int rc = rc_gguf_open(&g, write_spec(s, dir), &e);
    if (rc != c->code || !strstr(e.msg, c->msg) || strchr(e.msg, '\n'))
        fail_msg("%s: got %d '%s', want %d '%s'", c->what, rc, e.msg, c->code, c->msg);
    if (rc == RC_OK)
        rc_gguf_close(&g);
}

static void test_bad_files(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    spec s = base_spec();
    expect_open(&s, dir, &(bad_case){"the base case", RC_OK, ""});
    s.magic = 0x46554746u;
    expect_open(&s, dir, &(bad_case){"bad magic", RC_E_FORMAT, "bad magic"});
    s = base_spec(), s.version = 1;
    expect_open(&s, dir, &(bad_case){"version 1", RC_E_UNSUPPORTED, "GGUF version 1"});
    s = base_spec(), s.version = 4;
    expect_open(&s, dir, &(bad_case){"version 4", RC_E_UNSUPPORTED, "GGUF version 4"});
    s = base_spec(), s.n_kv_claim = 1ull << 60;
    expect_open(&s, dir, &(bad_case){"huge kv count", RC_E_FORMAT, "key/values, more than the file can hold"});
    s = base_spec(), s.n_t_claim = 1ull << 40;
    expect_open(&s, dir, &(bad_case){"huge tensor count", RC_E_FORMAT, "tensors, more than the file can hold"});
    s = base_spec(), s.key_len_claim = 1ull << 62;
    expect_open(&s, dir, &(bad_case){"huge string length", RC_E_IO, "ends inside a metadata key"});
    s = base_spec(), s.data_bytes = 255;
    expect_open(&s, dir, &(bad_case){"tensor past EOF", RC_E_IO, "tensor 'a' lies past the end of the file"});
    s = base_spec(), s.offset = 1ull << 62;
    expect_open(&s, dir, &(bad_case){"offset past EOF", RC_E_IO, "past the end of the file"});
    s = base_spec(), s.offset = 4, s.data_bytes = 512;
    expect_open(&s, dir, &(bad_case){"misaligned offset", RC_E_FORMAT, "at offset 4 is not aligned to 32"});
    s = base_spec(), s.ne[0] = 1ull << 40, s.ne[1] = 1ull << 40;
    expect_open(&s, dir, &(bad_case){"dims overflow", RC_E_FORMAT, "dimension 1 = 1099511627776 is zero or overflows"});
    s = base_spec(), s.ne[1] = 0;
    expect_open(&s, dir, &(bad_case){"zero dim", RC_E_FORMAT, "dimension 1 = 0"});
    s = base_spec(), s.ndim = 5;
    expect_open(&s, dir, &(bad_case){"rank 5", RC_E_FORMAT, "has 5 dimensions"});
    s = base_spec(), s.type = 99;
    expect_open(&s, dir, &(bad_case){"unknown type", RC_E_UNSUPPORTED, "unknown ggml type 99"});
    s = base_spec(), s.type = RC_GGML_Q8_0, s.ne[0] = 16;
    expect_open(&s, dir, &(bad_case){"partial block", RC_E_FORMAT, "row length 16 is not a multiple of Q8_0's block 32"});
    s = base_spec(), s.alignment = 24;
    expect_open(&s, dir, &(bad_case){"alignment", RC_E_FORMAT, "general.alignment = 24 is not a power of two"});
    s = base_spec(), s.n_t = 2, s.name2 = "a", s.data_bytes = 512;
    expect_open(&s, dir, &(bad_case){"duplicate tensor", RC_E_FORMAT, "tensor 'a' appears twice"});
    s = base_spec(), s.key2 = "general.architecture", s.val2 = "llama";
    expect_open(&s, dir, &(bad_case){"duplicate key", RC_E_FORMAT, "key 'general.architecture' appears twice"});

    /* a type ggml defines but this reader does not dequantize: the file opens, the tensor is refused */
    s = base_spec(), s.type = 16, s.ne[0] = 256, s.ne[1] = 1, s.data_bytes = 66; /* IQ2_XXS */
    rc_gguf g;
    rc_err e = {0};
    assert_int_equal(rc_gguf_open(&g, write_spec(&s, dir), &e), RC_OK);
    float *y = NULL;
    assert_int_equal(rc_gguf_tensor_f32(&g, &g.t[0], &y, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "tensor 'a' has type IQ2_XXS"));
    rc_gguf_close(&g);
    tu_rmdir(dir);
}

/* The model loader: another architecture, an unknown llama key and an unmapped tensor, each named. */
static void test_bad_models(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    rc_model m;
    rc_err e = {0};
    assert_int_equal(rc_model_load(&m, FIXTURE("dequant.gguf"), &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "GGUF architecture 'none' is not supported (supported: llama, gemma3, qwen3)"));
    spec s = base_spec();
    s.arch = "qwen2";
    assert_int_equal(rc_model_load(&m, write_spec(&s, dir), &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "GGUF architecture 'qwen2'"));
    s = base_spec(), s.key2 = "llama.rope.scaling.type", s.val2 = "linear";
    assert_int_equal(rc_model_load(&m, write_spec(&s, dir), &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "GGUF key 'llama.rope.scaling.type' is not supported"));
    tu_rmdir(dir);
}

/* Every proper prefix of a valid file is refused with an error, never a crash. */
static void test_every_truncation(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    size_t n = 0;
    char *buf = tu_read(FIXTURE("tiny_llama.gguf"), &n);
    assert_non_null(buf);
    const char *path = tu_path(dir, "cut.gguf");
    for (size_t len = 0; len < n; len += len < 4096 ? 1 : 97) {
        assert_int_equal(tu_write(path, buf, len), 0);
        rc_gguf g;
        rc_err e = {0};
        int rc = rc_gguf_open(&g, path, &e);
        if (rc == RC_OK)
            fail_msg("a %zu-byte prefix of a %zu-byte file opened", len, n);
        assert_true(e.msg[0] != 0);
    }
    free(buf);
    tu_rmdir(dir);
}

/* A fixture whose integer key (a u32, low byte was) is set to now is refused, the message saying want. */
static void refused_with_key(const char *fixture, const char *key, int was, int now, const char *want)
{
    char *dir = tu_tmpdir();
    size_t n = 0;
    char *buf = tu_read(fixture, &n);
    assert_non_null(buf);
    const size_t kn = strlen(key);
    char *at = NULL;
    for (size_t i = 0; !at && i + kn <= n; i++) /* memmem is not C11 */
        if (!memcmp(buf + i, key, kn))
            at = buf + i;
    assert_non_null(at);
    unsigned char *val = (unsigned char *)at + kn + 4; /* after the key: u32 type, then the value */
    assert_int_equal(val[0], was);
    val[0] = (unsigned char)now;
    const char *path = tu_path(dir, "edited.gguf");
    assert_int_equal(tu_write(path, buf, n), 0);
    rc_model m;
    rc_err e = {0};
    assert_int_equal(rc_model_load(&m, path, &e), RC_E_UNSUPPORTED);
    if (!strstr(e.msg, want))
        fail_msg("%s: '%s' does not say '%s'", key, e.msg, want);
    free(buf);
    tu_rmdir(dir);
}

/* a gemma3 file whose attention.value_length differs from key_length (HF's head_dim), and a qwen3 file whose
 * key_length or rope width differs from Qwen3Config's head_dim 128 that HF's mapping keeps: refused by that key */
static void test_head_dim_keys(void **state)
{
    (void)state;
    refused_with_key(FIXTURE("tiny_gemma3.gguf"), "gemma3.attention.value_length", 16, 32,
                     "'gemma3.attention.value_length' = 32 differs from the head_dim HF's gemma3 mapping gives (16)");
    refused_with_key(FIXTURE("tiny_qwen3.gguf"), "qwen3.attention.key_length", 128, 64,
                     "'qwen3.attention.key_length' = 64 differs from the head_dim HF's qwen3 mapping gives (128)");
    refused_with_key(FIXTURE("tiny_qwen3.gguf"), "qwen3.rope.dimension_count", 128, 64,
                     "'qwen3.rope.dimension_count' = 64 differs from the head_dim HF's qwen3 mapping gives (128)");
}

/* FIPS 180-4 test vectors through libcrypto, and a file of a million 'a's hashed in blocks. */
static void test_sha256(void **state)
{
    (void)state;
    static const struct { const char *in, *hex; } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        rc_sha256_hex(v[i].in, (int64_t)strlen(v[i].in), hex);
        assert_string_equal(hex, v[i].hex);
    }
    char path[] = "/tmp/rc_sha256_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    for (int i = 0; i < 1000000; i++)
        fputc('a', f);
    fclose(f);
    rc_err e = {0};
    assert_int_equal(rc_sha256_file(path, hex, &e), RC_OK);
    unlink(path);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dequant_bit_exact),
        cmocka_unit_test(test_llama_matches_hf),
        cmocka_unit_test(test_gemma3_matches_hf),
        cmocka_unit_test(test_head_dim_keys),
        cmocka_unit_test(test_qwen3_matches_hf),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_bad_models),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_sha256),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
