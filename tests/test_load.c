/* model/: golden loading and its errors, weight binding, safetensors (written by hand here), HF folders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "golden.h"
#include "isolate.h"
#include "model.h"
#include "safetensors.h"
#include "testutil.h"

static const char *const supported[] = {"llama", "llama_bias", "qwen3"};

/* ---- HDF5 edits of golden copies (every call checked) ---- */

static hid_t h5_open_rw(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    return f;
}

static void h5_set_int_attr(const char *path, const char *name, int64_t v)
{
    hid_t f = h5_open_rw(path), a = H5Aopen(f, name, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0);
    assert_true(H5Aclose(a) >= 0);
    assert_true(H5Fclose(f) >= 0);
}

static void h5_delete(const char *path, const char *name)
{
    hid_t f = h5_open_rw(path);
    assert_true(H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    assert_true(H5Fclose(f) >= 0);
}

/* Creates dataset 'name' (replacing any) of float32 [dims] filled with data, or int64 zeros if data is NULL. */
static void h5_put(const char *path, const char *name, int ndim, const hsize_t *dims, const float *data)
{
    hid_t f = h5_open_rw(path);
    htri_t ex = H5Lexists(f, name, H5P_DEFAULT);
    assert_true(ex >= 0);
    if (ex)
        assert_true(H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    hsize_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    hid_t s = H5Screate_simple(ndim, dims, NULL);
    hid_t type = data ? H5T_IEEE_F32LE : H5T_STD_I64LE;
    hid_t d = H5Dcreate2(f, name, type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(s >= 0 && d >= 0);
    int64_t *zeros = data ? NULL : calloc(n ? n : 1, sizeof *zeros);
    assert_true(H5Dwrite(d, data ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                         data ? (const void *)data : (const void *)zeros) >= 0);
    free(zeros);
    assert_true(H5Dclose(d) >= 0 && H5Sclose(s) >= 0 && H5Fclose(f) >= 0);
}

/* The probe_order attribute, read here independently of model/golden.c. */
static char *h5_probe_order(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t a = H5Aopen(f, "probe_order", H5P_DEFAULT), t = H5Tcopy(H5T_C_S1);
    assert_true(a >= 0 && t >= 0);
    assert_true(H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0);
    char *s = NULL;
    assert_true(H5Aread(a, t, &s) >= 0);
    char *out = strdup(s);
    H5free_memory(s);
    H5Tclose(t);
    H5Aclose(a);
    H5Fclose(f);
    return out;
}

static int64_t *h5_read_i64(const char *path, const char *name, int64_t *n)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, name, H5P_DEFAULT), s = H5Dget_space(d);
    assert_true(f >= 0 && d >= 0 && s >= 0);
    hsize_t dim;
    assert_int_equal(H5Sget_simple_extent_ndims(s), 1);
    H5Sget_simple_extent_dims(s, &dim, NULL);
    int64_t *v = calloc(dim + 1, sizeof *v);
    assert_true(H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Sclose(s);
    H5Dclose(d);
    H5Fclose(f);
    *n = (int64_t)dim;
    return v;
}

/* A private copy of a committed golden. */
static const char *golden_copy(const char *dir, const char *preset, const char *name)
{
    char src[4096];
    snprintf(src, sizeof src, "%s/%s.h5", RC_TEST_GOLDEN_DIR, preset);
    const char *dst = tu_path(dir, name);
    assert_int_equal(tu_copy(src, dst, -1), 0);
    return dst;
}

static void expect_load_error(const char *path, int what, int code, const char *needle)
{
    rc_golden g;
    rc_err e = {0};
    int rc = rc_golden_load(path, what, &g, &e);
    if (getenv("RC_TEST_VERBOSE"))
        fprintf(stderr, "  [%s] %s\n", rc_code_name(rc), e.msg);
    if (rc != code || (needle && !strstr(e.msg, needle)))
        fprintf(stderr, "  %s: got %s '%s', want %s naming '%s'\n", path, rc_code_name(rc), e.msg, rc_code_name(code),
                needle ? needle : "");
    assert_int_equal(rc, code);
    if (needle)
        assert_non_null(strstr(e.msg, needle));
    assert_null(g.path); /* freed and zeroed on error */
    assert_int_equal(g.weights.n + g.probes.n, 0);
}

/* Loads the golden at path and builds a model from it; expects code and a message naming needle. */
static void expect_model_error(const char *path, int code, const char *needle)
{
    rc_golden g;
    rc_model m;
    rc_err e = {0};
    assert_int_equal(rc_golden_load(path, RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    int rc = rc_model_from_golden(&m, &g, &e);
    if (getenv("RC_TEST_VERBOSE"))
        fprintf(stderr, "  [%s] %s\n", rc_code_name(rc), rc ? e.msg : "");
    if (rc != code || (needle && !strstr(e.msg, needle)))
        fprintf(stderr, "  %s: got %s '%s', want %s naming '%s'\n", path, rc_code_name(rc), e.msg, rc_code_name(code),
                needle ? needle : "");
    assert_int_equal(rc, code);
    if (needle)
        assert_non_null(strstr(e.msg, needle));
    if (rc == RC_OK)
        rc_model_free(&m);
    rc_golden_free(&g);
}

/* ---- committed goldens ---- */

static int argmax(const float *x, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return (int)b;
}

/* Every supported golden: provenance, probes in probe_order order, ids as stored, greedy shapes and
 * tokens = argmax of their logits, weights = the config's parameter count, and a model binds. */
static void test_golden_load(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof supported / sizeof supported[0]; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.h5", RC_TEST_GOLDEN_DIR, supported[k]);
        rc_golden g;
        rc_err e = {0};
        int rc = rc_golden_load(path, RC_GOLDEN_ALL, &g, &e);
        if (rc)
            fprintf(stderr, "  %s\n", e.msg);
        assert_int_equal(rc, RC_OK);
        assert_int_equal(g.format_version, RC_GOLDEN_FORMAT_VERSION);
        assert_string_equal(g.preset, supported[k]);
        assert_non_null(g.config_json);
        assert_non_null(g.regenerate);
        assert_non_null(strstr(g.regenerate, "gen.py"));

        char *order = h5_probe_order(path);
        int i = 0;
        for (char *tok = strtok(order, "\n"); tok; tok = strtok(NULL, "\n"), i++) {
            assert_true(i < g.probes.n);
            assert_string_equal(g.probes.t[i].name, tok);
        }
        free(order);
        assert_int_equal(i, g.probes.n);
        assert_string_equal(g.probes.t[0].name, "emb");
        assert_string_equal(g.probes.t[g.probes.n - 1].name, "logits");

        int64_t n;
        int64_t *ids = h5_read_i64(path, "input_ids", &n);
        assert_int_equal(g.n_ids, n);
        for (int64_t t = 0; t < n; t++)
            assert_int_equal(g.ids[t], ids[t]);
        free(ids);

        rc_config c;
        assert_int_equal(rc_config_parse(g.config_json, &c, &e), RC_OK);
        const rc_tensor *lg = rc_tensors_find(&g.probes, "logits"), *q = rc_tensors_find(&g.probes, "L0.attn.q");
        assert_non_null(lg);
        assert_int_equal(lg->ndim, 2);
        assert_int_equal(lg->shape[0], g.n_ids);
        assert_int_equal(lg->shape[1], c.vocab);
        assert_non_null(q);
        assert_int_equal(q->ndim, 3);
        assert_int_equal(q->shape[1], c.layers[0].n_heads);
        assert_int_equal(q->shape[2], c.layers[0].head_dim);
        assert_int_equal(g.vocab, c.vocab);
        assert_true(g.n_steps > 0);
        for (int64_t s = 0; s < g.n_steps; s++)
            assert_int_equal(argmax(g.greedy_logits + s * g.vocab, g.vocab), g.greedy_tokens[s]);
        assert_int_equal(argmax(lg->data + (g.n_ids - 1) * c.vocab, c.vocab), g.greedy_tokens[0]);

        int64_t total = 0, np;
        for (int w = 0; w < g.weights.n; w++)
            total += g.weights.t[w].numel;
        assert_true(rc_config_param_count(&c, &np));
        assert_int_equal(total, np);
        rc_config_free(&c);

        rc_model m;
        assert_int_equal(rc_model_from_golden(&m, &g, &e), RC_OK);
        assert_int_equal(g.weights.n, 0); /* taken */
        assert_true(m.w.lm_head == (m.cfg.tie_embeddings ? m.w.embed : rc_tensors_find(&m.store, "lm_head.weight")->data));
        assert_int_equal(rc_model_check_ids(&m, g.greedy_tokens, g.n_steps, &e), RC_OK);
        const int32_t bad_ids[] = {0, (int32_t)m.cfg.vocab};
        assert_int_equal(rc_model_check_ids(&m, bad_ids, 2, &e), RC_E_RANGE);
        rc_model_free(&m);
        rc_golden_free(&g);
        assert_null(g.path);
    }
}

/* 'what' selects the large parts. */
static void test_golden_parts(void **state)
{
    (void)state;
    rc_golden g;
    rc_err e = {0};
    assert_int_equal(rc_golden_load(GOLDEN("llama.h5"), RC_GOLDEN_PROBES, &g, &e), RC_OK);
    assert_int_equal(g.weights.n, 0);
    assert_true(g.probes.n > 0);
    rc_golden_free(&g);
    assert_int_equal(rc_golden_load(GOLDEN("llama.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    assert_int_equal(g.probes.n, 0);
    assert_int_equal(g.weights.n, 21);
    rc_golden_free(&g);
    rc_model m;
    assert_int_equal(rc_model_load(&m, GOLDEN("qwen3.h5"), &e), RC_OK);
    assert_true(m.cfg.tie_embeddings && m.w.lm_head == m.w.embed);
    rc_model_free(&m);
}

/* ---- golden errors ---- */

static void test_golden_missing_file(void **state)
{
    (void)state;
    expect_load_error("/nonexistent/refchain/llama.h5", RC_GOLDEN_ALL, RC_E_IO, "/nonexistent/refchain/llama.h5");
    rc_model m;
    rc_err e = {0};
    assert_int_equal(rc_model_load(&m, "/nonexistent/refchain", &e), RC_E_IO);
}

static void test_golden_not_hdf5(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    const char *p = tu_path(dir, "text.h5");
    assert_int_equal(tu_write(p, "not an HDF5 file\n", 17), 0);
    expect_load_error(p, RC_GOLDEN_ALL, RC_E_FORMAT, "not an HDF5 file");
    assert_int_equal(tu_write(p, "", 0), 0);
    expect_load_error(p, RC_GOLDEN_ALL, RC_E_FORMAT, NULL);
    expect_load_error(RC_TEST_GOLDEN_DIR "/README.md", RC_GOLDEN_ALL, RC_E_FORMAT, "not an HDF5 file");
    /* an HDF5 file that is not a golden */
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0 && H5Fclose(f) >= 0);
    expect_load_error(p, RC_GOLDEN_ALL, RC_E_FORMAT, "'format'");
    tu_rmdir(dir);
}

/* The isolated parse (isolate.h): a child's result and message come back as they were; a child that dies is a
 * corrupt-file refusal naming the file, the library and how it ended, and the caller lives on. */
static int iso_ok(void *arg, rc_err *e)
{
    (void)e;
    return *(const int *)arg == 7 ? RC_OK : RC_E_USAGE;
}
static int iso_refuse(void *arg, rc_err *e)
{
    return rc_fail(e, RC_E_SHAPE, "%s: shape 3, expected 4", (const char *)arg);
}
static int iso_abort(void *arg, rc_err *e)
{
    (void)arg, (void)e;
    abort();
}
static void test_isolated_parse(void **state)
{
    (void)state;
    rc_err e = {0, ""};
    int seven = 7;
    assert_int_equal(rc_isolated_parse("a.h5", "HDF5", 100, iso_ok, &seven, &e), RC_OK);
    assert_int_equal(rc_isolated_parse("b.h5", "HDF5", 100, iso_refuse, "b.h5", &e), RC_E_SHAPE);
    assert_string_equal(e.msg, "b.h5: shape 3, expected 4");
    assert_int_equal(rc_isolated_parse("c.h5", "HDF5", 100, iso_abort, NULL, &e), RC_E_FORMAT);
    assert_non_null(strstr(e.msg, "c.h5: corrupt file: parsing it, the HDF5 library "));
    assert_non_null(strstr(e.msg, "crashed (signal 6"));
}

/* Truncated copies at many lengths: an error (any code), never a crash or a leak. */
static void test_golden_truncated(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    size_t size = 0;
    char *all = tu_read(GOLDEN("llama.h5"), &size);
    assert_non_null(all);
    const size_t cuts[] = {8, 100, 512, 2048, 4096, size / 8, size / 4, size / 2, 3 * size / 4, size - 4096,
                           size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        const char *p = tu_path(dir, "trunc.h5");
        assert_int_equal(tu_write(p, all, cuts[i]), 0);
        rc_golden g;
        rc_err e = {0};
        int rc = rc_golden_load(p, RC_GOLDEN_ALL, &g, &e);
        assert_true(rc == RC_E_FORMAT || rc == RC_E_IO || rc == RC_E_MISSING || rc == RC_E_SHAPE);
        assert_true(e.msg[0] != 0);
        assert_null(g.path);
    }
    free(all);
    tu_rmdir(dir);
}

static void test_golden_version2(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    const char *p = golden_copy(dir, "llama", "v2.h5");
    h5_set_int_attr(p, "format_version", 2);
    expect_load_error(p, RC_GOLDEN_ALL, RC_E_FORMAT, "regenerate");
    expect_load_error(p, RC_GOLDEN_WEIGHTS, RC_E_FORMAT, "format_version 2");
    tu_rmdir(dir);
}

/* Missing / mis-typed datasets of the golden itself. */
static void test_golden_damaged(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    const char *p = golden_copy(dir, "llama", "noprobe.h5");
    h5_delete(p, "probes/L1.mlp.up");
    expect_load_error(p, RC_GOLDEN_ALL, RC_E_MISSING, "L1.mlp.up");
    p = golden_copy(dir, "llama", "noids.h5");
    h5_delete(p, "input_ids");
    expect_load_error(p, RC_GOLDEN_ALL, RC_E_MISSING, "input_ids");
    p = golden_copy(dir, "llama", "intweight.h5");
    const hsize_t d2[2] = {128, 64};
    h5_put(p, "weights/model.layers.0.mlp.up_proj.weight", 2, d2, NULL);
    expect_load_error(p, RC_GOLDEN_WEIGHTS, RC_E_FORMAT, "model.layers.0.mlp.up_proj.weight");
    p = golden_copy(dir, "llama", "greedy.h5"); /* logits rows must match the steps */
    float *z = calloc(5 * 256, sizeof *z);
    const hsize_t g2[2] = {5, 256};
    h5_put(p, "greedy/logits", 2, g2, z);
    free(z);
    expect_load_error(p, RC_GOLDEN_ALL, RC_E_SHAPE, "greedy/logits");
    tu_rmdir(dir);
}

/* rc_model_from_golden: missing -> RC_E_MISSING, mis-shaped -> RC_E_SHAPE, extra -> refused; each named. */
static void test_golden_weights_bind(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    const char *p = golden_copy(dir, "llama", "missing.h5");
    h5_delete(p, "weights/model.layers.1.self_attn.k_proj.weight");
    expect_model_error(p, RC_E_MISSING, "model.layers.1.self_attn.k_proj.weight");

    p = golden_copy(dir, "llama", "shape.h5");
    float *w = calloc(128 * 63, sizeof *w);
    const hsize_t bad[2] = {128, 63};
    h5_put(p, "weights/model.layers.0.mlp.up_proj.weight", 2, bad, w);
    expect_model_error(p, RC_E_SHAPE, "model.layers.0.mlp.up_proj.weight");
    expect_model_error(p, RC_E_SHAPE, "[128, 64]");
    const hsize_t flat[1] = {128 * 63};
    h5_put(p, "weights/model.layers.0.mlp.up_proj.weight", 1, flat, w);
    expect_model_error(p, RC_E_SHAPE, "model.layers.0.mlp.up_proj.weight");
    free(w);

    p = golden_copy(dir, "llama", "extra.h5");
    const float one[1] = {1.0f};
    const hsize_t d1[1] = {1};
    h5_put(p, "weights/model.layers.0.self_attn.rotary_emb.inv_freq", 1, d1, one);
    expect_model_error(p, RC_E_MISSING, "model.layers.0.self_attn.rotary_emb.inv_freq");
    expect_model_error(p, RC_E_MISSING, "unexpected");

    p = golden_copy(dir, "llama", "bias.h5"); /* a bias the config does not have */
    float *b = calloc(64, sizeof *b);
    const hsize_t d64[1] = {64};
    h5_put(p, "weights/model.layers.0.self_attn.q_proj.bias", 1, d64, b);
    expect_model_error(p, RC_E_MISSING, "model.layers.0.self_attn.q_proj.bias");

    p = golden_copy(dir, "llama_bias", "nobias.h5");
    h5_delete(p, "weights/model.layers.1.mlp.down_proj.bias");
    expect_model_error(p, RC_E_MISSING, "model.layers.1.mlp.down_proj.bias");

    p = golden_copy(dir, "qwen3", "qnorm.h5");
    h5_delete(p, "weights/model.layers.0.self_attn.q_norm.weight");
    expect_model_error(p, RC_E_MISSING, "model.layers.0.self_attn.q_norm.weight");
    p = golden_copy(dir, "qwen3", "qnorm_shape.h5");
    h5_put(p, "weights/model.layers.0.self_attn.q_norm.weight", 1, d64, b);
    expect_model_error(p, RC_E_SHAPE, "model.layers.0.self_attn.q_norm.weight");

    /* tied: a stored lm_head equal to the embedding is accepted, a different one refused */
    rc_golden g;
    rc_err e = {0};
    assert_int_equal(rc_golden_load(GOLDEN("qwen3.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    const rc_tensor *emb = rc_tensors_find(&g.weights, "model.embed_tokens.weight");
    const hsize_t de[2] = {(hsize_t)emb->shape[0], (hsize_t)emb->shape[1]};
    p = golden_copy(dir, "qwen3", "tied.h5");
    h5_put(p, "weights/lm_head.weight", 2, de, emb->data);
    expect_model_error(p, RC_OK, NULL);
    emb->data[5] += 1.0f;
    h5_put(p, "weights/lm_head.weight", 2, de, emb->data);
    expect_model_error(p, RC_E_MISSING, "lm_head.weight");
    rc_golden_free(&g);
    free(b);
    tu_rmdir(dir);
}

/* ---- safetensors, written by hand ---- */

typedef struct st_entry {
    const char *name, *dtype;
    int ndim;
    int64_t shape[RC_MAX_DIMS + 1];
    const void *data;
    size_t nbytes;
} st_entry;

/* 8-byte little-endian header length, JSON header (space-padded to 8), data in entry order. A non-zero
 * hlen_override replaces the header length; drop removes that many bytes from the end. */
static void st_write(const char *path, int n, const st_entry *es, uint64_t hlen_override, size_t drop)
{
    cJSON *h = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(h, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        cJSON *t = cJSON_AddObjectToObject(h, es[i].name);
        cJSON_AddStringToObject(t, "dtype", es[i].dtype);
        cJSON *sh = cJSON_AddArrayToObject(t, "shape");
        for (int d = 0; d < es[i].ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)es[i].shape[d]));
        cJSON *o = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + es[i].nbytes)));
        off += es[i].nbytes;
    }
    char *js = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    assert_non_null(js);
    size_t hl = strlen(js), pad = (8 - hl % 8) % 8, total = 8 + hl + pad + off;
    unsigned char *buf = calloc(total, 1);
    assert_non_null(buf);
    uint64_t L = hlen_override ? hlen_override : hl + pad;
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(L >> (8 * i));
    memcpy(buf + 8, js, hl);
    memset(buf + 8 + hl, ' ', pad);
    size_t at = 8 + hl + pad;
    for (int i = 0; i < n; i++) {
        memcpy(buf + at, es[i].data, es[i].nbytes);
        at += es[i].nbytes;
    }
    free(js);
    assert_int_equal(tu_write(path, buf, total - (drop < total ? drop : total)), 0);
    free(buf);
}

/* IEEE-style binary format with e exponent bits, m mantissa bits, decoded in double (independent of the
 * bit tricks in model/safetensors.c). */
static double minifloat(unsigned bits, int e, int m)
{
    const unsigned sign = bits >> (e + m), ex = (bits >> m) & ((1u << e) - 1), man = bits & ((1u << m) - 1);
    const int bias = (1 << (e - 1)) - 1;
    double v;
    if (ex == (1u << e) - 1)
        v = man ? NAN : INFINITY;
    else if (ex == 0)
        v = ldexp((double)man, 1 - bias - m);
    else
        v = ldexp(1.0 + ldexp((double)man, -m), (int)ex - bias);
    return sign ? -v : v;
}

static int load_st(const char *path, rc_tensors *s, rc_err *e)
{
    memset(s, 0, sizeof *s);
    return rc_safetensors_load(path, s, e);
}

/* F32 bit-exact (specials included); BF16 and F16 exhaustively: all 65536 codes against minifloat(). */
static void test_safetensors_dtypes(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    const char *p = tu_path(dir, "t.safetensors");
    float f32[6] = {1.5f, -0.0f, 1e-45f, INFINITY, -3.4028235e38f, NAN};
    uint16_t *codes = malloc(65536 * sizeof *codes);
    for (unsigned i = 0; i < 65536; i++)
        codes[i] = (uint16_t)i; /* little-endian on disk: this test assumes a little-endian host, as the loader */
    const st_entry es[] = {
        {"f32", "F32", 2, {2, 3}, f32, sizeof f32},
        {"bf16", "BF16", 2, {256, 256}, codes, 65536 * 2},
        {"f16", "F16", 1, {65536}, codes, 65536 * 2},
        {"scalar", "F32", 0, {0}, f32, 4},
        {"empty", "F16", 2, {0, 7}, codes, 0},
    };
    st_write(p, 5, es, 0, 0);
    rc_tensors s;
    rc_err e = {0};
    assert_int_equal(load_st(p, &s, &e), RC_OK);
    assert_int_equal(s.n, 5);
    const rc_tensor *t = rc_tensors_find(&s, "f32");
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[1], 3);
    assert_memory_equal(t->data, f32, sizeof f32);
    t = rc_tensors_find(&s, "scalar");
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->numel, 1);
    assert_true(t->data[0] == 1.5f);
    assert_int_equal(rc_tensors_find(&s, "empty")->numel, 0);
    for (int k = 0; k < 2; k++) {
        t = rc_tensors_find(&s, k ? "f16" : "bf16");
        assert_int_equal(t->numel, 65536);
        for (unsigned i = 0; i < 65536; i++) {
            const double want = k ? minifloat(i, 5, 10) : minifloat(i, 8, 7);
            const float got = t->data[i];
            if (isnan(want))
                assert_true(isnan(got));
            else {
                if (!(got == (float)want && !signbit(got) == !signbit(want)))
                    fprintf(stderr, "  %s code 0x%04x: got %.9g want %.9g\n", k ? "f16" : "bf16", i, got, want);
                assert_true(got == (float)want && !signbit(got) == !signbit(want));
            }
        }
    }
    /* named points: subnormals, the largest finite, infinities */
    const rc_tensor *h = rc_tensors_find(&s, "f16"), *b = rc_tensors_find(&s, "bf16");
    assert_true(h->data[0x0001] == 0x1p-24f && h->data[0x03ff] == 0x3ffp-24f && h->data[0x0400] == 0x1p-14f);
    assert_true(h->data[0x7bff] == 65504.0f && h->data[0x7c00] == INFINITY && h->data[0xfc00] == -INFINITY);
    assert_true(h->data[0x3c00] == 1.0f && h->data[0xc000] == -2.0f && signbit(h->data[0x8000]));
    assert_true(b->data[0x0001] == 0x1p-133f && b->data[0x007f] == 0x7fp-133f && b->data[0x0080] == 0x1p-126f);
    assert_true(b->data[0x7f80] == INFINITY && b->data[0xff80] == -INFINITY && b->data[0x3f80] == 1.0f);
    assert_true(isnan(b->data[0x7fc0]) && isnan(h->data[0x7e00]));
    assert_true(rc_bf16_to_f32(0x4049) == 3.140625f && rc_f16_to_f32(0x4248) == 3.140625f);
    rc_tensors_free(&s);
    free(codes);
    tu_rmdir(dir);
}

static void expect_st_error(const char *path, int code, const char *needle)
{
    rc_tensors s;
    rc_err e = {0};
    int rc = load_st(path, &s, &e);
    if (getenv("RC_TEST_VERBOSE"))
        fprintf(stderr, "  [%s] %s\n", rc_code_name(rc), e.msg);
    if (rc != code || (needle && !strstr(e.msg, needle)))
        fprintf(stderr, "  got %s '%s', want %s naming '%s'\n", rc_code_name(rc), e.msg, rc_code_name(code),
                needle ? needle : "");
    assert_int_equal(rc, code);
    if (needle)
        assert_non_null(strstr(e.msg, needle));
    rc_tensors_free(&s);
}

/* The length field, hdr, then ndata zero bytes of data. */
static void st_raw(const char *path, const char *hdr, size_t ndata)
{
    const size_t hl = strlen(hdr);
    unsigned char *buf = calloc(8 + hl + ndata, 1);
    assert_non_null(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    assert_int_equal(tu_write(path, buf, 8 + hl + ndata), 0);
    free(buf);
}

static void expect_st_ok(const char *path, int n)
{
    rc_tensors s;
    rc_err e = {0};
    int rc = load_st(path, &s, &e);
    if (rc)
        fprintf(stderr, "  %s\n", e.msg);
    assert_int_equal(rc, RC_OK);
    assert_int_equal(s.n, n);
    rc_tensors_free(&s);
}

static void test_safetensors_errors(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    const char *p = tu_path(dir, "bad.safetensors");
    const float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const st_entry ok[] = {{"a", "F32", 1, {4}, v, 16}, {"b", "F32", 2, {2, 2}, v + 4, 16}};

    expect_st_error(tu_path(dir, "absent.safetensors"), RC_E_IO, "absent.safetensors");
    st_write(p, 2, ok, 0, 4); /* data shorter than the offsets */
    expect_st_error(p, RC_E_IO, "'b'");
    st_write(p, 2, ok, 0, 32); /* all data gone */
    expect_st_error(p, RC_E_IO, "past the end");
    st_write(p, 2, ok, 100000, 0); /* header length past EOF */
    expect_st_error(p, RC_E_IO, "header length");
    st_write(p, 2, ok, UINT64_MAX, 0);
    expect_st_error(p, RC_E_IO, "header length");
    assert_int_equal(tu_write(p, "\x10\0\0", 3), 0); /* shorter than the length field */
    expect_st_error(p, RC_E_IO, NULL);
    assert_int_equal(tu_write(p, "\x04\0\0\0\0\0\0\0abcd", 12), 0);
    expect_st_error(p, RC_E_FORMAT, "JSON");

    const int8_t i8[4] = {1, 2, 3, 4};
    const st_entry q[] = {{"a", "F32", 1, {4}, v, 16}, {"quant", "I8", 1, {4}, i8, 4}};
    st_write(p, 2, q, 0, 0);
    expect_st_error(p, RC_E_UNSUPPORTED, "I8");
    expect_st_error(p, RC_E_UNSUPPORTED, "'quant'");
    const st_entry f64[] = {{"d", "F64", 1, {2}, v, 16}};
    st_write(p, 1, f64, 0, 0);
    expect_st_error(p, RC_E_UNSUPPORTED, "F64");
    const st_entry mis[] = {{"m", "F32", 1, {3}, v, 16}}; /* 3 floats in 16 bytes */
    st_write(p, 1, mis, 0, 0);
    expect_st_error(p, RC_E_SHAPE, "'m'");
    const st_entry rank5[] = {{"r", "F32", 5, {1, 1, 1, 1, 1}, v, 4}};
    st_write(p, 1, rank5, 0, 0);
    expect_st_error(p, RC_E_SHAPE, "rank 5");
    const char hdr[] = "{\"x\": {\"shape\": [1], \"data_offsets\": [0, 4]}}";
    unsigned char raw[8 + sizeof hdr - 1 + 4] = {sizeof hdr - 1};
    memcpy(raw + 8, hdr, sizeof hdr - 1);
    assert_int_equal(tu_write(p, raw, sizeof raw), 0);
    expect_st_error(p, RC_E_FORMAT, "'x'");

    /* hostile headers (issue 13): refused as safetensors itself refuses them, with a message that says why */
    st_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 0]}}", 8);
    expect_st_error(p, RC_E_FORMAT, "reversed data_offsets [4, 0]");
    st_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0.5, 4.5]}}", 8);
    expect_st_error(p, RC_E_FORMAT, "not two whole byte counts");
    st_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [\"0\", 4]}}", 4);
    expect_st_error(p, RC_E_FORMAT, "not two whole byte counts");
    st_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
              "\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8);
    expect_st_error(p, RC_E_FORMAT, "overlap");
    st_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8);
    expect_st_error(p, RC_E_FORMAT, "bytes [0, 4) belong to no tensor");
    st_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 8);
    expect_st_error(p, RC_E_FORMAT, "4 bytes after the last tensor");
    st_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}garbage", 4);
    expect_st_error(p, RC_E_FORMAT, "trailing bytes");
    st_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
              "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8);
    expect_st_error(p, RC_E_MISSING, "'a' appears twice");
    st_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}  \n ", 4);
    expect_st_ok(p, 1); /* trailing whitespace (the 8-byte padding) is allowed */
    if (mkfifo(tu_path(dir, "fifo.safetensors"), 0600) == 0) /* refused at once, not waited on */
        expect_st_error(tu_path(dir, "fifo.safetensors"), RC_E_IO, "not a regular file");

    /* 300k tensors of one element: linear in the count (it took minutes with a linear duplicate search) */
    const int many = 300000;
    size_t cap = (size_t)many * 80 + 16, len = 0;
    char *big = malloc(cap);
    assert_non_null(big);
    len += (size_t)snprintf(big + len, cap - len, "{");
    for (int i = 0; i < many; i++)
        len += (size_t)snprintf(big + len, cap - len, "%s\"t%d\": {\"dtype\": \"F16\", \"shape\": [1], "
                                "\"data_offsets\": [%d, %d]}", i ? ", " : "", i, 2 * i, 2 * i + 2);
    snprintf(big + len, cap - len, "}");
    st_raw(p, big, (size_t)many * 2);
    free(big);
    const double t0 = (double)clock() / CLOCKS_PER_SEC;
    expect_st_ok(p, many);
    const double secs = (double)clock() / CLOCKS_PER_SEC - t0;
    if (secs > 20)
        fprintf(stderr, "  300k tensors took %.1f s\n", secs);
    assert_true(secs < 60); /* a generous bound: the quadratic search it guards against takes minutes */
    tu_rmdir(dir);
}

/* ---- HF folders ---- */

/* Writes the golden's weights (F32) as shards, with config.json and (nshards > 1) the index. */
static void write_hf_dir(const char *dir, const rc_golden *g, int nshards)
{
    const char *cfg = tu_path(dir, "config.json");
    assert_int_equal(tu_write(cfg, g->config_json, strlen(g->config_json)), 0);
    cJSON *idx = cJSON_CreateObject(), *map = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(idx, "metadata");
    int64_t total = 0;
    for (int s = 0; s < nshards; s++) {
        const int lo = g->weights.n * s / nshards, hi = g->weights.n * (s + 1) / nshards;
        st_entry *es = calloc((size_t)(hi - lo), sizeof *es);
        for (int i = lo; i < hi; i++) {
            const rc_tensor *t = &g->weights.t[i];
            es[i - lo] = (st_entry){.name = t->name, .dtype = "F32", .ndim = t->ndim, .data = t->data,
                                    .nbytes = (size_t)t->numel * 4};
            memcpy(es[i - lo].shape, t->shape, sizeof t->shape[0] * (size_t)t->ndim);
            total += t->numel * 4;
        }
        char name[64];
        if (nshards == 1)
            snprintf(name, sizeof name, "model.safetensors");
        else
            snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, nshards);
        /* the index lists tensors in reverse order: the loader must not depend on it */
        for (int i = hi - 1; i >= lo; i--)
            cJSON_AddStringToObject(map, g->weights.t[i].name, name);
        st_write(tu_path(dir, name), hi - lo, es, 0, 0);
        free(es);
    }
    cJSON_AddNumberToObject(meta, "total_size", (double)total);
    cJSON_AddItemToObject(idx, "weight_map", map);
    if (nshards > 1) {
        char *txt = cJSON_Print(idx);
        assert_int_equal(tu_write(tu_path(dir, "model.safetensors.index.json"), txt, strlen(txt)), 0);
        free(txt);
    }
    cJSON_Delete(idx);
}

/* Rewrites the index after edit(weight_map). */
static void edit_index(const char *dir, void (*edit)(cJSON *map))
{
    const char *p = tu_path(dir, "model.safetensors.index.json");
    char *txt = tu_read(p, NULL);
    assert_non_null(txt);
    cJSON *idx = cJSON_Parse(txt);
    free(txt);
    edit(cJSON_GetObjectItemCaseSensitive(idx, "weight_map"));
    txt = cJSON_Print(idx);
    assert_int_equal(tu_write(p, txt, strlen(txt)), 0);
    free(txt);
    cJSON_Delete(idx);
}

static void add_ghost(cJSON *map) { cJSON_AddStringToObject(map, "model.layers.9.mlp.up_proj.weight", "model-00001-of-00002.safetensors"); }
static void add_missing_shard(cJSON *map) { cJSON_AddStringToObject(map, "x.weight", "model-00003-of-00003.safetensors"); }
static void add_path_shard(cJSON *map) { cJSON_AddStringToObject(map, "y.weight", "../model-00001-of-00002.safetensors"); }
static void add_number(cJSON *map) { cJSON_AddNumberToObject(map, "z.weight", 1); }

static void expect_dir_error(const char *dir, int code, const char *needle)
{
    rc_model m;
    rc_err e = {0};
    int rc = rc_model_load_dir(&m, dir, &e);
    if (getenv("RC_TEST_VERBOSE"))
        fprintf(stderr, "  [%s] %s\n", rc_code_name(rc), e.msg);
    if (rc != code || (needle && !strstr(e.msg, needle)))
        fprintf(stderr, "  got %s '%s', want %s naming '%s'\n", rc_code_name(rc), e.msg, rc_code_name(code),
                needle ? needle : "");
    assert_int_equal(rc, code);
    if (needle)
        assert_non_null(strstr(e.msg, needle));
    assert_null(m.store.t);
    assert_null(m.cfg.layers);
}

/* The llama golden's weights as two shards + index + config.json load into the same model, bit for bit;
 * one file without an index too. */
static void test_hf_dir_sharded(void **state)
{
    (void)state;
    rc_golden g;
    rc_err e = {0};
    assert_int_equal(rc_golden_load(GOLDEN("llama.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    for (int nshards = 1; nshards <= 2; nshards++) {
        char *dir = tu_tmpdir();
        write_hf_dir(dir, &g, nshards);
        rc_model m;
        int rc = nshards == 1 ? rc_model_load(&m, dir, &e) : rc_model_load_dir(&m, dir, &e);
        if (rc)
            fprintf(stderr, "  %s\n", e.msg);
        assert_int_equal(rc, RC_OK);
        assert_int_equal(m.store.n, g.weights.n);
        for (int i = 0; i < g.weights.n; i++) {
            const rc_tensor *want = &g.weights.t[i], *got = rc_tensors_find(&m.store, want->name);
            assert_non_null(got);
            assert_int_equal(got->ndim, want->ndim);
            assert_memory_equal(got->shape, want->shape, sizeof want->shape[0] * (size_t)want->ndim);
            assert_memory_equal(got->data, want->data, (size_t)want->numel * sizeof(float));
        }
        assert_true(m.w.layers[1].up == rc_tensors_find(&m.store, "model.layers.1.mlp.up_proj.weight")->data);
        assert_int_equal(m.cfg.layers[0].n_kv_heads, 2);
        rc_model_free(&m);
        tu_rmdir(dir);
    }
    rc_golden_free(&g);
}

static void test_hf_dir_errors(void **state)
{
    (void)state;
    rc_golden g;
    rc_err e = {0};
    assert_int_equal(rc_golden_load(GOLDEN("llama.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    char *dir = tu_tmpdir();

    write_hf_dir(dir, &g, 2);
    edit_index(dir, add_ghost); /* the index names a tensor no shard has */
    expect_dir_error(dir, RC_E_MISSING, "model.layers.9.mlp.up_proj.weight");
    write_hf_dir(dir, &g, 2);
    edit_index(dir, add_missing_shard);
    expect_dir_error(dir, RC_E_IO, "model-00003-of-00003.safetensors");
    write_hf_dir(dir, &g, 2);
    edit_index(dir, add_path_shard);
    expect_dir_error(dir, RC_E_FORMAT, "plain file name");
    write_hf_dir(dir, &g, 2);
    edit_index(dir, add_number);
    expect_dir_error(dir, RC_E_FORMAT, "z.weight");
    assert_int_equal(tu_write(tu_path(dir, "model.safetensors.index.json"), "{\"metadata\": {}}", 16), 0);
    expect_dir_error(dir, RC_E_FORMAT, "weight_map");

    /* a shard truncated on disk */
    write_hf_dir(dir, &g, 2);
    const char *sh = tu_path(dir, "model-00002-of-00002.safetensors");
    size_t n = 0;
    char *buf = tu_read(sh, &n);
    assert_int_equal(tu_write(sh, buf, n - 100), 0);
    free(buf);
    expect_dir_error(dir, RC_E_IO, "model-00002-of-00002.safetensors");

    /* a tensor in both shards */
    write_hf_dir(dir, &g, 2);
    const rc_tensor *t0 = &g.weights.t[0];
    st_entry dup = {.name = t0->name, .dtype = "F32", .ndim = t0->ndim, .data = t0->data, .nbytes = (size_t)t0->numel * 4};
    memcpy(dup.shape, t0->shape, sizeof t0->shape[0] * (size_t)t0->ndim);
    st_write(sh, 1, &dup, 0, 0);
    expect_dir_error(dir, RC_E_MISSING, "twice");

    /* a weight absent from shards and index alike: the binder names it */
    tu_rmdir(dir);
    dir = tu_tmpdir();
    rc_tensor *last = &g.weights.t[g.weights.n - 1];
    char *keep = strdup(last->name);
    g.weights.n--; /* hide it from write_hf_dir */
    write_hf_dir(dir, &g, 2);
    g.weights.n++;
    expect_dir_error(dir, RC_E_MISSING, keep);
    free(keep);

    /* no config.json; an unsupported one */
    unlink(tu_path(dir, "config.json"));
    expect_dir_error(dir, RC_E_IO, "config.json");
    const char *c = "{\"model_type\": \"falcon\"}";
    assert_int_equal(tu_write(tu_path(dir, "config.json"), c, strlen(c)), 0);
    expect_dir_error(dir, RC_E_UNSUPPORTED, "model_type");
    /* no weights at all */
    tu_rmdir(dir);
    dir = tu_tmpdir();
    assert_int_equal(tu_write(tu_path(dir, "config.json"), g.config_json, strlen(g.config_json)), 0);
    expect_dir_error(dir, RC_E_IO, "model.safetensors");
    tu_rmdir(dir);
    rc_golden_free(&g);
}

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_load),
        cmocka_unit_test(test_golden_parts),
        cmocka_unit_test(test_golden_missing_file),
        cmocka_unit_test(test_golden_not_hdf5),
        cmocka_unit_test(test_golden_truncated),
        cmocka_unit_test(test_isolated_parse),
        cmocka_unit_test(test_golden_version2),
        cmocka_unit_test(test_golden_damaged),
        cmocka_unit_test(test_golden_weights_bind),
        cmocka_unit_test(test_safetensors_dtypes),
        cmocka_unit_test(test_safetensors_errors),
        cmocka_unit_test(test_hf_dir_sharded),
        cmocka_unit_test(test_hf_dir_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
