/* GGUF reader: header, key/values, tensor infos, dequantization, and the llama and gemma3 mappings onto HF names. */
#include "gguf.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant.h"
#include "safetensors.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_MAX_NAME 256

/* ggml's type table (the gguf package's GGML_QUANT_SIZES): block size in values, bytes per block */
typedef struct ggml_type_info {
    const char *name;
    int blck, size;
} ggml_type_info;

static const ggml_type_info ggml_types[] = {
    [0] = {"F32", 1, 4},        [1] = {"F16", 1, 2},        [2] = {"Q4_0", 32, 18},     [3] = {"Q4_1", 32, 20},
    [6] = {"Q5_0", 32, 22},     [7] = {"Q5_1", 32, 24},     [8] = {"Q8_0", 32, 34},     [9] = {"Q8_1", 32, 40},
    [10] = {"Q2_K", 256, 84},   [11] = {"Q3_K", 256, 110},  [12] = {"Q4_K", 256, 144},  [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},  [15] = {"Q8_K", 256, 292},  [16] = {"IQ2_XXS", 256, 66}, [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50}, [20] = {"IQ4_NL", 32, 18},  [21] = {"IQ3_S", 256, 110},
    [22] = {"IQ2_S", 256, 82},  [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},       [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},       [27] = {"I64", 1, 8},       [28] = {"F64", 1, 8},       [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},      [34] = {"TQ1_0", 256, 54},  [35] = {"TQ2_0", 256, 66},  [39] = {"MXFP4", 32, 17},
    [40] = {"NVFP4", 64, 36},   [41] = {"Q1_0", 128, 18},
};
#define N_GGML_TYPES ((uint32_t)(sizeof ggml_types / sizeof ggml_types[0]))

const char *rc_ggml_type_name(uint32_t type)
{
    return type < N_GGML_TYPES ? ggml_types[type].name : NULL;
}

static int type_supported(uint32_t t)
{
    return t == RC_GGML_F32 || t == RC_GGML_F16 || t == RC_GGML_BF16 || t == RC_GGML_Q8_0 || t == RC_GGML_Q4_0 ||
           t == RC_GGML_Q4_1 || t == RC_GGML_Q5_0 || t == RC_GGML_Q5_1 || t == RC_GGML_Q2_K || t == RC_GGML_Q3_K ||
           t == RC_GGML_Q4_K || t == RC_GGML_Q5_K || t == RC_GGML_Q6_K;
}
#define SUPPORTED_TYPES "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K"

/* ---- a bounds-checked cursor over the mapping ---- */
typedef struct cur {
    const unsigned char *p, *end;
    const char *path;
    rc_err *e;
} cur;

static int truncated(cur *c, const char *what)
{
    return rc_fail(c->e, RC_E_IO, "%s: GGUF file ends inside %s (truncated?)", c->path, what);
}

static int take(cur *c, uint64_t n, const unsigned char **out, const char *what)
{
    if (n > (uint64_t)(c->end - c->p))
        return truncated(c, what);
    *out = c->p;
    c->p += n;
    return RC_OK;
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static int rd_u32(cur *c, uint32_t *v, const char *what)
{
    const unsigned char *p = NULL;
    int rc = take(c, 4, &p, what);
    if (!rc)
        *v = (uint32_t)le(p, 4);
    return rc;
}

static int rd_u64(cur *c, uint64_t *v, const char *what)
{
    const unsigned char *p = NULL;
    int rc = take(c, 8, &p, what);
    if (!rc)
        *v = le(p, 8);
    return rc;
}

static int rd_str(cur *c, rc_gguf_str *s, const char *what)
{
    uint64_t n;
    const unsigned char *p = NULL;
    int rc = rd_u64(c, &n, what);
    if (!rc && (rc = take(c, n, &p, what)) == RC_OK) {
        s->s = (const char *)p;
        s->len = n;
    }
    return rc;
}

static int scalar_size(uint32_t t)
{
    static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < sizeof sz / sizeof sz[0] ? sz[t] : -1;
}

/* Skips one value of type t (validating strings and nested arrays). */
static int skip_value(cur *c, uint32_t t, const char *key, int depth)
{
    const unsigned char *p = NULL;
    if (t == RC_GGUF_STRING) {
        rc_gguf_str s;
        return rd_str(c, &s, key);
    }
    if (t == RC_GGUF_ARRAY) {
        uint32_t at;
        uint64_t n;
        int rc;
        if ((rc = rd_u32(c, &at, key)) || (rc = rd_u64(c, &n, key)))
            return rc;
        if (depth > 2)
            return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF key '%s': arrays nested too deep", c->path, key);
        int es = scalar_size(at);
        if (at == RC_GGUF_STRING || at == RC_GGUF_ARRAY)
            es = at == RC_GGUF_STRING ? 8 : 12; /* the least one element can take */
        if (es <= 0)
            return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF key '%s': unknown array element type %u", c->path, key, at);
        if (n > (uint64_t)(c->end - c->p) / (uint64_t)es)
            return rc_fail(c->e, RC_E_IO, "%s: GGUF key '%s': %llu array elements cannot fit in the file (truncated?)",
                           c->path, key, (unsigned long long)n);
        if (at != RC_GGUF_STRING && at != RC_GGUF_ARRAY)
            return take(c, n * (uint64_t)es, &p, key);
        for (uint64_t i = 0; i < n; i++)
            if ((rc = skip_value(c, at, key, depth + 1)))
                return rc;
        return RC_OK;
    }
    int n = scalar_size(t);
    if (n <= 0)
        return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF key '%s' has unknown value type %u", c->path, key, t);
    return take(c, (uint64_t)n, &p, key);
}

static char *dup_str(rc_gguf_str s)
{
    char *d = malloc(s.len + 1);
    if (d) {
        memcpy(d, s.s, s.len);
        d[s.len] = 0;
    }
    return d;
}

static int read_kvs(rc_gguf *g, cur *c, uint64_t n_kv)
{
    /* a key/value takes at least 8 (key length) + 4 (type) + 1 bytes */
    if (n_kv > (uint64_t)(c->end - c->p) / 13)
        return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF header claims %llu key/values, more than the file can hold",
                       c->path, (unsigned long long)n_kv);
    if (!(g->kv = rc_calloc((int64_t)n_kv ? (int64_t)n_kv : 1, sizeof *g->kv, c->e, "GGUF key/values")))
        return c->e->code;
    for (uint64_t i = 0; i < n_kv; i++) {
        rc_gguf_kv *kv = &g->kv[i];
        rc_gguf_str k;
        int rc;
        if ((rc = rd_str(c, &k, "a metadata key")))
            return rc;
        if (!(kv->key = dup_str(k)))
            return rc_fail(c->e, RC_E_NOMEM, "out of host memory");
        g->n_kv++;
        if (strlen(kv->key) != k.len)
            return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF metadata key %llu contains a NUL byte", c->path,
                           (unsigned long long)i);
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->kv[j].key, kv->key))
                return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF key '%s' appears twice", c->path, kv->key);
        if ((rc = rd_u32(c, &kv->type, kv->key)))
            return rc;
        if (kv->type == RC_GGUF_ARRAY) {
            const unsigned char *start = c->p;
            if ((rc = rd_u32(c, &kv->arr_type, kv->key)) || (rc = rd_u64(c, &kv->arr_n, kv->key)))
                return rc;
            kv->val = c->p;
            c->p = start;
        } else
            kv->val = c->p;
        if ((rc = skip_value(c, kv->type, kv->key, 0)))
            return rc;
    }
    return RC_OK;
}

static int read_tensor_infos(rc_gguf *g, cur *c, uint64_t n_t, uint64_t **offsets)
{
    /* a tensor info takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset) bytes */
    if (n_t > (uint64_t)(c->end - c->p) / 24)
        return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF header claims %llu tensors, more than the file can hold", c->path,
                       (unsigned long long)n_t);
    g->t = rc_calloc((int64_t)n_t ? (int64_t)n_t : 1, sizeof *g->t, c->e, "GGUF tensors");
    *offsets = rc_calloc((int64_t)n_t ? (int64_t)n_t : 1, sizeof **offsets, c->e, "GGUF tensor offsets");
    if (!g->t || !*offsets)
        return c->e->code;
    for (uint64_t i = 0; i < n_t; i++) {
        rc_gguf_tensor *t = &g->t[i];
        rc_gguf_str nm;
        uint32_t nd;
        int rc;
        if ((rc = rd_str(c, &nm, "a tensor name")))
            return rc;
        if (nm.len == 0 || nm.len >= GGUF_MAX_NAME || memchr(nm.s, 0, nm.len))
            return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF tensor %llu has an empty, overlong or NUL-holding name",
                           c->path, (unsigned long long)i);
        if (!(t->name = dup_str(nm)))
            return rc_fail(c->e, RC_E_NOMEM, "out of host memory");
        g->n_t++;
        if ((rc = rd_u32(c, &nd, t->name)))
            return rc;
        if (nd < 1 || nd > RC_MAX_DIMS)
            return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF tensor '%s' has %u dimensions (1 to %d)", c->path, t->name,
                           nd, RC_MAX_DIMS);
        t->ndim = (int)nd;
        t->numel = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t v;
            if ((rc = rd_u64(c, &v, t->name)))
                return rc;
            if (v == 0 || v > (uint64_t)INT64_MAX || !rc_mul_i64(t->numel, (int64_t)v, &t->numel))
                return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF tensor '%s': dimension %u = %llu is zero or overflows",
                               c->path, t->name, d, (unsigned long long)v);
            t->ne[d] = (int64_t)v;
        }
        if ((rc = rd_u32(c, &t->type, t->name)) || (rc = rd_u64(c, &(*offsets)[i], t->name)))
            return rc;
        const char *tn = rc_ggml_type_name(t->type);
        if (!tn)
            return rc_fail(c->e, RC_E_UNSUPPORTED, "%s: GGUF tensor '%s' has unknown ggml type %u", c->path, t->name,
                           t->type);
        const ggml_type_info *ti = &ggml_types[t->type];
        if (t->ne[0] % ti->blck)
            return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF tensor '%s': row length %lld is not a multiple of %s's block %d",
                           c->path, t->name, (long long)t->ne[0], tn, ti->blck);
        if (!rc_mul_i64(t->numel / ti->blck, ti->size, &t->nbytes))
            return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF tensor '%s' is too large", c->path, t->name);
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->t[j].name, t->name))
                return rc_fail(c->e, RC_E_FORMAT, "%s: GGUF tensor '%s' appears twice", c->path, t->name);
    }
    return RC_OK;
}

int rc_gguf_is_gguf(const char *path)
{
    unsigned char m[4];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    int ok = fread(m, 1, 4, f) == 4 && le(m, 4) == GGUF_MAGIC;
    fclose(f);
    return ok;
}

int rc_gguf_open(rc_gguf *g, const char *path, rc_err *e)
{
    memset(g, 0, sizeof *g);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return rc_fail(e, RC_E_IO, "%s: no such file or not readable", path);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 24) {
        close(fd);
        return rc_fail(e, RC_E_IO, "%s: too short for a GGUF file (truncated?)", path);
    }
    g->size = (uint64_t)st.st_size;
    void *map = mmap(NULL, (size_t)g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return rc_fail(e, RC_E_IO, "%s: mmap failed", path);
    g->map = map;
    if (!(g->path = strdup(path))) {
        rc_gguf_close(g);
        return rc_fail(e, RC_E_NOMEM, "out of host memory");
    }
    cur c = {.p = g->map, .end = g->map + g->size, .path = path, .e = e};
    uint32_t magic;
    uint64_t n_t, n_kv, *offsets = NULL;
    int rc = rd_u32(&c, &magic, "the header");
    if (!rc && magic != GGUF_MAGIC)
        rc = rc_fail(e, RC_E_FORMAT, "%s: not a GGUF file (bad magic)", path);
    if (!rc)
        rc = rd_u32(&c, &g->version, "the header");
    if (!rc && g->version != 2 && g->version != 3)
        rc = rc_fail(e, RC_E_UNSUPPORTED, "%s: GGUF version %u (this build reads 2 and 3)", path, g->version);
    if (!rc)
        rc = rd_u64(&c, &n_t, "the header");
    if (!rc)
        rc = rd_u64(&c, &n_kv, "the header");
    if (!rc)
        rc = read_kvs(g, &c, n_kv);
    if (!rc)
        rc = read_tensor_infos(g, &c, n_t, &offsets);
    g->alignment = 32;
    const rc_gguf_kv *al = rc_gguf_find(g, "general.alignment");
    if (!rc && al) {
        int64_t a;
        if ((rc = rc_gguf_get_int(g, al, &a, e)) == RC_OK && (a < 1 || a > (1 << 20) || (a & (a - 1))))
            rc = rc_fail(e, RC_E_FORMAT, "%s: general.alignment = %lld is not a power of two", path, (long long)a);
        if (!rc)
            g->alignment = (uint64_t)a;
    }
    uint64_t start = (uint64_t)(c.p - g->map);
    start = (start + g->alignment - 1) / g->alignment * g->alignment;
    for (int64_t i = 0; !rc && i < g->n_t; i++) {
        rc_gguf_tensor *t = &g->t[i];
        if (offsets[i] % g->alignment)
            rc = rc_fail(e, RC_E_FORMAT, "%s: GGUF tensor '%s' at offset %llu is not aligned to %llu", path, t->name,
                         (unsigned long long)offsets[i], (unsigned long long)g->alignment);
        else if (start > g->size || offsets[i] > g->size - start || (uint64_t)t->nbytes > g->size - start - offsets[i])
            rc = rc_fail(e, RC_E_IO, "%s: GGUF tensor '%s' lies past the end of the file (truncated?)", path, t->name);
        else
            t->data = g->map + start + offsets[i];
    }
    free(offsets);
    if (rc)
        rc_gguf_close(g);
    return rc;
}

void rc_gguf_close(rc_gguf *g)
{
    for (int64_t i = 0; i < g->n_kv; i++)
        free(g->kv[i].key);
    for (int64_t i = 0; i < g->n_t; i++)
        free(g->t[i].name);
    free(g->kv);
    free(g->t);
    if (g->map)
        munmap(g->map, (size_t)g->size);
    free(g->path);
    memset(g, 0, sizeof *g);
}

const rc_gguf_kv *rc_gguf_find(const rc_gguf *g, const char *key)
{
    for (int64_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key))
            return &g->kv[i];
    return NULL;
}

const rc_gguf_tensor *rc_gguf_find_tensor(const rc_gguf *g, const char *name)
{
    for (int64_t i = 0; i < g->n_t; i++)
        if (!strcmp(g->t[i].name, name))
            return &g->t[i];
    return NULL;
}

static int wrong_type(const rc_gguf *g, const rc_gguf_kv *kv, const char *want, rc_err *e)
{
    return rc_fail(e, RC_E_FORMAT, "%s: GGUF key '%s' has value type %u, expected %s", g->path, kv->key, kv->type,
                   want);
}

int rc_gguf_get_int(const rc_gguf *g, const rc_gguf_kv *kv, int64_t *out, rc_err *e)
{
    const unsigned char *p = kv->val;
    switch (kv->type) {
    case RC_GGUF_U8: *out = p[0]; break;
    case RC_GGUF_I8: *out = (int8_t)p[0]; break;
    case RC_GGUF_U16: *out = (int64_t)le(p, 2); break;
    case RC_GGUF_I16: *out = (int16_t)le(p, 2); break;
    case RC_GGUF_U32: *out = (int64_t)le(p, 4); break;
    case RC_GGUF_I32: *out = (int32_t)le(p, 4); break;
    case RC_GGUF_I64: *out = (int64_t)le(p, 8); break;
    case RC_GGUF_U64:
        if (le(p, 8) > (uint64_t)INT64_MAX)
            return rc_fail(e, RC_E_RANGE, "%s: GGUF key '%s' is out of range", g->path, kv->key);
        *out = (int64_t)le(p, 8);
        break;
    default: return wrong_type(g, kv, "an integer", e);
    }
    return RC_OK;
}

int rc_gguf_get_float(const rc_gguf *g, const rc_gguf_kv *kv, double *out, rc_err *e)
{
    if (kv->type == RC_GGUF_F32) {
        uint32_t u = (uint32_t)le(kv->val, 4);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
    } else if (kv->type == RC_GGUF_F64) {
        uint64_t u = le(kv->val, 8);
        memcpy(out, &u, 8);
    } else
        return wrong_type(g, kv, "a float", e);
    return RC_OK;
}

int rc_gguf_get_str(const rc_gguf *g, const rc_gguf_kv *kv, rc_gguf_str *out, rc_err *e)
{
    if (kv->type != RC_GGUF_STRING)
        return wrong_type(g, kv, "a string", e);
    out->len = le(kv->val, 8);
    out->s = (const char *)kv->val + 8;
    return RC_OK;
}

int rc_gguf_get_strs(const rc_gguf *g, const rc_gguf_kv *kv, rc_gguf_str *out, rc_err *e)
{
    if (kv->type != RC_GGUF_ARRAY || kv->arr_type != RC_GGUF_STRING)
        return wrong_type(g, kv, "an array of strings", e);
    const unsigned char *p = kv->val; /* validated by rc_gguf_open */
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        out[i].len = le(p, 8);
        out[i].s = (const char *)p + 8;
        p += 8 + out[i].len;
    }
    return RC_OK;
}

/* ---- dequantization: the gguf package's float32 arithmetic, operation for operation; the quantized block
 * types through the one rule of their family (model/quant.h) ---- */
static float f16_at(const unsigned char *p)
{
    return rc_f16_to_f32((uint16_t)le(p, 2));
}

/* A 4-bit block's 32 codes: low nibbles are values 0..15, high nibbles 16..31; minus bias. */
static const int8_t *nibbles(const unsigned char *qs, int bias, int8_t *codes)
{
    for (int j = 0; j < 16; j++) {
        codes[j] = (int8_t)((qs[j] & 0x0f) - bias);
        codes[j + 16] = (int8_t)((qs[j] >> 4) - bias);
    }
    return codes;
}

/* Q5_0 (32 values: fp16 d, 4 bytes of fifth bits, 16 bytes of nibbles) and Q5_1 (fp16 d, fp16 m, then the same):
 * value i's low four bits are Q4_0's (nibbles), its fifth bit is bit i of the little-endian word; q = that - bias
 * (Q5_0: 16, scale d; Q5_1: 0, d q + m). qh: the word, qs: the nibbles. */
static const int8_t *q5_codes(const unsigned char *qh4, const unsigned char *qs, int bias, int8_t *codes)
{
    const uint32_t qh = (uint32_t)le(qh4, 4);
    nibbles(qs, 0, codes);
    for (int i = 0; i < 32; i++)
        codes[i] = (int8_t)((codes[i] | (int)((qh >> i) & 1u) << 4) - bias);
    return codes;
}

/* Q4_K's 6-bit scale and min of sub-block j (0..7) from its 12 bytes: j < 4 the low six bits of bytes j and j + 4;
 * j >= 4 four bits of byte j + 4 (low: scale, high: min) and the top two bits of bytes j - 4 and j. */
static void q4_k_scale_min(const unsigned char *sc, int j, int *scale, int *min)
{
    if (j < 4) {
        *scale = sc[j] & 63;
        *min = sc[j + 4] & 63;
    } else {
        *scale = (sc[j + 4] & 0x0f) | (sc[j - 4] >> 6) << 4;
        *min = (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
    }
}

/* Q4_K (256 values: fp16 d, fp16 dmin, 12 bytes of scales and mins, 128 bytes of nibbles) and Q5_K (the same, with
 * 32 bytes of fifth bits before the nibbles): eight sub-blocks of 32 in the affine family, s = d * scale and
 * m = -(dmin * min) (both rounded to f32, as ggml and the gguf package); sub-blocks 2 i and 2 i + 1 are the low and
 * the high nibbles of bytes 32 i .. 32 i + 31; Q5_K: value l of sub-block j has bit j of fifth-bit byte l as its
 * fifth bit. */
static void q45_k_block(const unsigned char *blk, int five, float *y)
{
    const float d = f16_at(blk), dmin = f16_at(blk + 2);
    const unsigned char *sc = blk + 4, *qh = blk + 16, *qs = blk + (five ? 48 : 16);
    int8_t codes[32];
    for (int j = 0; j < 8; j++) {
        int scale, min;
        q4_k_scale_min(sc, j, &scale, &min);
        const unsigned char *q = qs + 32 * (j / 2);
        for (int l = 0; l < 32; l++)
            codes[l] = (int8_t)((j % 2 ? q[l] >> 4 : q[l] & 0x0f) | (five ? ((qh[l] >> j) & 1) << 4 : 0));
        const float s = d * (float)scale, m = dmin * (float)min;
        rc_qf_dequant_group(RC_QF_AFFINE, s, -m, codes, 32, y + 32 * j);
    }
}

/* Value v's 2-bit code in the 64 code bytes qs of a Q2_K / Q3_K block: for v = 128 h + 32 c + l (h < 2, c < 4,
 * l < 32), bits 2 c, 2 c + 1 of byte 32 h + l. */
static int k_code2(const unsigned char *qs, int v)
{
    return (qs[32 * (v / 128) + v % 32] >> (2 * (v % 128 / 32))) & 3;
}

/* Q2_K (256 values: 16 bytes of 4-bit scale and min pairs, 64 bytes of 2-bit codes, fp16 d, fp16 dmin): sixteen
 * groups of 16 in the affine family, s = d * (scale byte & 15) and m = -(dmin * (scale byte >> 4)), each rounded to
 * f32; q = the value's 2-bit code (k_code2). */
static void q2_k_block(const unsigned char *blk, float *y)
{
    const unsigned char *sc = blk, *qs = blk + 16;
    const float d = f16_at(blk + 80), dmin = f16_at(blk + 82);
    int8_t codes[256];
    for (int v = 0; v < 256; v++)
        codes[v] = (int8_t)k_code2(qs, v);
    for (int gi = 0; gi < 16; gi++) {
        const float s = d * (float)(sc[gi] & 15), m = dmin * (float)(sc[gi] >> 4);
        rc_qf_dequant_group(RC_QF_AFFINE, s, -m, codes + 16 * gi, 16, y + 16 * gi);
    }
}

/* Q3_K (256 values: 32 bytes of high-bit masks, 64 bytes of 2-bit codes, 12 bytes packing sixteen 6-bit scales,
 * fp16 d): sixteen groups of 16 in the scale family, s = d * (scale - 32) rounded to f32, q = the value's 2-bit
 * code (k_code2), minus 4 where its mask bit (bit v / 32 of mask byte v % 32) is 0 (q in -4..3). Scale i: the low
 * (i < 8) or high nibble of byte i % 8 as its low four bits, bits 2 (i / 4) and 2 (i / 4) + 1 of byte 8 + i % 4 as its
 * top two. */
static void q3_k_block(const unsigned char *blk, float *y)
{
    const unsigned char *hm = blk, *qs = blk + 32, *sc = blk + 96;
    const float d = f16_at(blk + 108);
    int8_t codes[256];
    for (int v = 0; v < 256; v++)
        codes[v] = (int8_t)(k_code2(qs, v) - (((hm[v % 32] >> (v / 32)) & 1) ? 0 : 4));
    for (int gi = 0; gi < 16; gi++) {
        const int low = (sc[gi % 8] >> (gi < 8 ? 0 : 4)) & 15, high = (sc[8 + gi % 4] >> (2 * (gi / 4))) & 3;
        rc_qf_dequant_group(RC_QF_SCALE, d * (float)((low | high << 4) - 32), 0.0f, codes + 16 * gi, 16, y + 16 * gi);
    }
}

/* Q6_K (256 values: 128 bytes of low nibbles, 64 of two-bit highs, 16 signed scales, fp16 d): sixteen groups of 16
 * in the scale family, s = d * scale (rounded to f32), q = the six bits - 32. In each half h of 128 values, value
 * 128 h + 32 c + l (c = 0..3, l < 32) takes the low (c < 2) or high nibble of low byte 64 h + 32 (c % 2) + l and
 * bits 2 c, 2 c + 1 of high byte 32 h + l. */
static void q6_k_block(const unsigned char *blk, float *y)
{
    const unsigned char *ql = blk, *qh = blk + 128;
    const signed char *sc = (const signed char *)(blk + 192);
    const float d = f16_at(blk + 208);
    int8_t codes[256];
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const unsigned char b = ql[64 * h + 32 * (c % 2) + l];
                const int lo = c < 2 ? b & 0x0f : b >> 4, hi = (qh[32 * h + l] >> (2 * c)) & 3;
                codes[128 * h + 32 * c + l] = (int8_t)((lo | hi << 4) - 32);
            }
    for (int gi = 0; gi < 16; gi++)
        rc_qf_dequant_group(RC_QF_SCALE, d * (float)sc[gi], 0.0f, codes + 16 * gi, 16, y + 16 * gi);
}

int rc_ggml_dequant(uint32_t type, const unsigned char *src, int64_t n, float *dst, rc_err *e)
{
    int8_t codes[32];
    if (!type_supported(type))
        return rc_fail(e, RC_E_UNSUPPORTED, "ggml type %s is not supported (" SUPPORTED_TYPES ")",
                       rc_ggml_type_name(type) ? rc_ggml_type_name(type) : "?");
    const int blck = ggml_types[type].blck, bs = ggml_types[type].size;
    if (n % blck)
        return rc_fail(e, RC_E_SHAPE, "%lld values are not a whole number of %s blocks", (long long)n,
                       rc_ggml_type_name(type));
    for (int64_t b = 0; b < n / blck; b++) {
        const unsigned char *q = src + b * bs;
        float *y = dst + b * blck;
        switch (type) {
        case RC_GGML_F32: {
            uint32_t u = (uint32_t)le(q, 4);
            memcpy(y, &u, 4);
            break;
        }
        case RC_GGML_F16: y[0] = f16_at(q); break;
        case RC_GGML_BF16: y[0] = rc_bf16_to_f32((uint16_t)le(q, 2)); break;
        case RC_GGML_Q8_0: /* scale family, q = the signed byte */
            rc_qf_dequant_group(RC_QF_SCALE, f16_at(q), 0.0f, (const int8_t *)(q + 2), 32, y);
            break;
        case RC_GGML_Q4_0: /* scale family, q = nibble - 8 */
        case RC_GGML_Q4_1: /* affine family, q = nibble, offset m */
            rc_qf_dequant_group(type == RC_GGML_Q4_0 ? RC_QF_SCALE : RC_QF_AFFINE, f16_at(q),
                                type == RC_GGML_Q4_1 ? f16_at(q + 2) : 0.0f,
                                nibbles(q + (type == RC_GGML_Q4_1 ? 4 : 2), type == RC_GGML_Q4_0 ? 8 : 0, codes), 32, y);
            break;
        case RC_GGML_Q5_0: /* scale family, q = five bits - 16 */
            rc_qf_dequant_group(RC_QF_SCALE, f16_at(q), 0.0f, q5_codes(q + 2, q + 6, 16, codes), 32, y);
            break;
        case RC_GGML_Q5_1: /* affine family, q = five bits, offset m */
            rc_qf_dequant_group(RC_QF_AFFINE, f16_at(q), f16_at(q + 2), q5_codes(q + 4, q + 8, 0, codes), 32, y);
            break;
        case RC_GGML_Q2_K: q2_k_block(q, y); break;
        case RC_GGML_Q3_K: q3_k_block(q, y); break;
        case RC_GGML_Q4_K: q45_k_block(q, 0, y); break;
        case RC_GGML_Q5_K: q45_k_block(q, 1, y); break;
        case RC_GGML_Q6_K: q6_k_block(q, y); break;
        }
    }
    return RC_OK;
}

int rc_gguf_tensor_qtensor(const rc_gguf_tensor *t, const char *name, rc_qtensor *out, rc_err *e)
{
    memset(out, 0, sizeof *out);
    const int q8 = t->type == RC_GGML_Q8_0, q41 = t->type == RC_GGML_Q4_1;
    if ((!q8 && !q41 && t->type != RC_GGML_Q4_0) || t->ndim != 2)
        return rc_fail(e, RC_E_UNSUPPORTED, "GGUF tensor '%s' (%s, %d-d) is not a 2-d Q8_0, Q4_0 or Q4_1 matrix",
                       t->name, rc_ggml_type_name(t->type), t->ndim);
    int rc = rc_qtensor_alloc(out, name, q41 ? RC_QF_AFFINE : RC_QF_SCALE, q8 ? 8 : 4, t->ne[1], t->ne[0], 32, 0, e);
    if (rc)
        return rc;
    const int bs = ggml_types[t->type].size;
    for (int64_t b = 0; b < t->numel / 32; b++) { /* block b = row b / (K/32), group b % (K/32) */
        const unsigned char *q = t->data + b * bs;
        out->scale[b] = f16_at(q);
        if (q41)
            out->offset[b] = f16_at(q + 2);
        if (q8)
            memcpy(out->q + b * 32, q + 2, 32);
        else
            nibbles(q + (q41 ? 4 : 2), q41 ? 0 : 8, out->q + b * 32);
    }
    return RC_OK;
}

int rc_gguf_tensor_f32(const rc_gguf *g, const rc_gguf_tensor *t, float **out, rc_err *e)
{
    *out = NULL;
    if (!type_supported(t->type))
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: GGUF tensor '%s' has type %s (supported: " SUPPORTED_TYPES ")",
                       g->path, t->name, rc_ggml_type_name(t->type));
    float *y = rc_calloc(t->numel, sizeof *y, e, t->name);
    if (!y)
        return e->code;
    int rc = rc_ggml_dequant(t->type, t->data, t->numel, y, e);
    if (rc) {
        free(y);
        return rc;
    }
    *out = y;
    return RC_OK;
}

/* ---- architectures: metadata -> config.json, tensor names -> HF names (transformers' GGUF loader) ---- */

typedef struct gguf_key {
    const char *gguf, *hf; /* <arch>.<gguf> -> HF config field hf; NULL: not a config field, must equal head_dim */
    int is_float;
} gguf_key;

typedef struct gguf_name {
    const char *gguf, *hf;
} gguf_name;

/* One architecture the reader maps as transformers 5.17's GGUF loader does (GGUF_CONFIG_MAPPING and its tensor
 * processors): the keys it turns into config fields (common_keys, then the architecture's own), the tensor names
 * (layer, then layer2), and what it does to the values. */
typedef struct gguf_arch {
    const char *name;           /* general.architecture */
    const char *model_type;     /* the config's; NULL: llama, or mistral for a file named so (as HF) */
    const gguf_key *keys;       /* beyond common_keys */
    int n_keys;
    const gguf_name *layer, *layer2; /* blk.N.<gguf> -> model.layers.N.<hf>; layer2: more of them, or NULL */
    int n_layer, n_layer2;
    int permute_qk;             /* llama: q/k rows un-interleaved (LlamaTensorProcessor) */
    int norm_minus_one;         /* gemma: every *norm.weight loaded as the file's value - 1 (Gemma2TensorProcessor:
                                 * llama.cpp's converter stores gemma's 1 + w, HF's norm adds the 1 back) */
    int output_tensor;          /* an output.weight (untied lm_head) maps to lm_head.weight */
    int mlp_bias;               /* the config has mlp_bias (llama), set from the file's tensors */
    int head_dim;               /* HF's default head_dim where no key maps to it (qwen3: Qwen3Config's 128), or 0 */
} gguf_arch;

/* the keys every architecture here maps alike */
static const gguf_key common_keys[] = {
    {"context_length", "max_position_embeddings", 0},
    {"block_count", "num_hidden_layers", 0},
    {"feed_forward_length", "intermediate_size", 0},
    {"embedding_length", "hidden_size", 0},
    {"rope.freq_base", "rope_theta", 1},
    {"attention.head_count", "num_attention_heads", 0},
    {"attention.head_count_kv", "num_key_value_heads", 0},
    {"attention.layer_norm_rms_epsilon", "rms_norm_eps", 1},
    {"vocab_size", "vocab_size", 0},
};

static const gguf_key llama_keys[] = {
    {"rope.dimension_count", "head_dim", 0},
};

static const gguf_name llama_layer_names[] = {
    {"attn_norm", "input_layernorm"},     {"attn_q", "self_attn.q_proj"},   {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},       {"attn_output", "self_attn.o_proj"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},        {"ffn_up", "mlp.up_proj"},        {"ffn_down", "mlp.down_proj"},
};

/* gemma3: rope.dimension_count and attention.value_length are not config fields in HF's mapping (HF uses
 * head_dim for both); they are read and must equal attention.key_length, so that llama.cpp and HF agree. Every
 * other gemma3_text field keeps Gemma3TextConfig's default (query_pre_attn_scalar 256, the sliding layers' RoPE
 * base 10000, a full layer every sixth), which parse_gemma3_text applies. */
static const gguf_key gemma3_keys[] = {
    {"rope.dimension_count", NULL, 0},
    {"attention.key_length", "head_dim", 0},
    {"attention.value_length", NULL, 0},
    {"attention.sliding_window", "sliding_window", 0},
};

static const gguf_name gemma3_layer_names[] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};

/* qwen3: HF's mapping reads no head size from the file (Qwen3Config's head_dim 128 stands), so rope.dimension_count
 * and attention.key_length / value_length, which llama.cpp writes, must equal 128. llama's tensors and q/k norms,
 * not permuted. */
static const gguf_key qwen3_keys[] = {
    {"rope.dimension_count", NULL, 0},
    {"attention.key_length", NULL, 0},
    {"attention.value_length", NULL, 0},
};

static const gguf_name qk_norm_names[] = {
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))
static const gguf_arch archs[] = {
    {"llama", NULL, llama_keys, N_OF(llama_keys), llama_layer_names, NULL, N_OF(llama_layer_names), 0, 1, 0, 1, 1, 0},
    /* HF: a gemma3 GGUF holds the text model only (model_type gemma3_text), its head tied to the embedding */
    {"gemma3", "gemma3_text", gemma3_keys, N_OF(gemma3_keys), gemma3_layer_names, NULL, N_OF(gemma3_layer_names), 0,
     0, 1, 0, 0, 0},
    {"qwen3", "qwen3", qwen3_keys, N_OF(qwen3_keys), llama_layer_names, qk_norm_names, N_OF(llama_layer_names),
     N_OF(qk_norm_names), 0, 0, 1, 0, 128},
};
#define GGUF_ARCH_LIST "llama, gemma3, qwen3"

/* The key <arch>.sub of A: its mapping, or NULL when HF's mapping has none. */
static const gguf_key *arch_key(const gguf_arch *A, const char *sub)
{
    for (int k = 0; k < N_OF(common_keys); k++)
        if (!strcmp(sub, common_keys[k].gguf))
            return &common_keys[k];
    for (int k = 0; k < A->n_keys; k++)
        if (!strcmp(sub, A->keys[k].gguf))
            return &A->keys[k];
    return NULL;
}

/* The HF name of a GGUF tensor into hf (empty when there is none); *qk = 1 for q, 2 for k. */
static void hf_name(const gguf_arch *A, const char *name, char *hf, size_t cap, int *qk)
{
    static const gguf_name globals[] = {
        {"token_embd.weight", "model.embed_tokens.weight"},
        {"output_norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"},
    };
    hf[0] = 0;
    *qk = 0;
    for (int i = 0; i < N_OF(globals); i++)
        if (!strcmp(name, globals[i].gguf)) {
            if (i < 2 || A->output_tensor)
                snprintf(hf, cap, "%s", globals[i].hf);
            return;
        }
    int layer, n = 0;
    char part[64], kind[16];
    if (sscanf(name, "blk.%d.%63[a-z_].%15[a-z]%n", &layer, part, kind, &n) != 3 || name[n] || layer < 0 ||
        (strcmp(kind, "weight") && strcmp(kind, "bias")))
        return;
    char canon[GGUF_MAX_NAME];
    snprintf(canon, sizeof canon, "blk.%d.%s.%s", layer, part, kind);
    if (strcmp(canon, name)) /* no leading zeros or signs in the layer number */
        return;
    for (int i = 0; i < A->n_layer + A->n_layer2; i++) {
        const gguf_name *nm = i < A->n_layer ? &A->layer[i] : &A->layer2[i - A->n_layer];
        if (!strcmp(part, nm->gguf)) {
            snprintf(hf, cap, "model.layers.%d.%s.%s", layer, nm->hf, kind);
            if (A->permute_qk)
                *qk = !strcmp(part, "attn_q") ? 1 : !strcmp(part, "attn_k") ? 2 : 0;
        }
    }
}

/* A config number from an <arch>.<key> value. */
static int key_number(const rc_gguf *g, const rc_gguf_kv *kv, int is_float, double *v, rc_err *e)
{
    int64_t iv;
    if (is_float)
        return rc_gguf_get_float(g, kv, v, e);
    int rc = rc_gguf_get_int(g, kv, &iv, e);
    *v = (double)iv;
    return rc;
}

/* The description HF's GGUF loader builds, as the config.json text rc_config_parse reads. */
static int arch_config_json(const rc_gguf *g, const gguf_arch *A, char **out, int64_t *n_heads, int64_t *n_kv_heads,
                            rc_err *e)
{
    *out = NULL;
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return rc_fail(e, RC_E_NOMEM, "out of host memory");
    int rc = RC_OK;
    const size_t plen = strlen(A->name);
    if (!A->model_type) {
        const rc_gguf_kv *name = rc_gguf_find(g, "general.name");
        rc_gguf_str s = {"", 0};
        if (name && (rc = rc_gguf_get_str(g, name, &s, e)))
            goto done;
        /* transformers loads a llama GGUF named exactly "mistral" as model_type mistral ("mistral" in [name]) */
        cJSON_AddStringToObject(j, "model_type", s.len == 7 && !memcmp(s.s, "mistral", 7) ? "mistral" : "llama");
    } else
        cJSON_AddStringToObject(j, "model_type", A->model_type);
    for (int64_t i = 0; i < g->n_kv; i++) {
        const rc_gguf_kv *kv = &g->kv[i];
        if (strncmp(kv->key, A->name, plen) || kv->key[plen] != '.')
            continue;
        const char *sub = kv->key + plen + 1;
        const gguf_key *key = arch_key(A, sub);
        if (!key) {
            rc = rc_fail(e, RC_E_UNSUPPORTED, "%s: GGUF key '%s' is not supported (HF's %s mapping ignores it)",
                         g->path, kv->key, A->name);
            goto done;
        }
        double v;
        if ((rc = key_number(g, kv, key->is_float, &v, e)))
            goto done;
        if (key->hf)
            cJSON_AddNumberToObject(j, key->hf, v);
    }
    if (A->head_dim && !cJSON_GetObjectItemCaseSensitive(j, "head_dim"))
        cJSON_AddNumberToObject(j, "head_dim", A->head_dim);
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(j, "head_dim");
    for (int k = 0; k < A->n_keys; k++) { /* the keys HF reads as head_dim: they must agree with it */
        char key[96];
        snprintf(key, sizeof key, "%s.%s", A->name, A->keys[k].gguf);
        const rc_gguf_kv *kv = A->keys[k].hf ? NULL : rc_gguf_find(g, key);
        double v;
        if (kv && (rc = key_number(g, kv, A->keys[k].is_float, &v, e)))
            goto done;
        if (kv && !(cJSON_IsNumber(hd) && hd->valuedouble == v)) {
            rc = rc_fail(e, RC_E_UNSUPPORTED, "%s: GGUF key '%s' = %g differs from the head_dim HF's %s mapping "
                         "gives (%g): not supported", g->path, key, v, A->name,
                         cJSON_IsNumber(hd) ? hd->valuedouble : 0.0);
            goto done;
        }
    }
    const rc_gguf_tensor *emb = rc_gguf_find_tensor(g, "token_embd.weight");
    if (!cJSON_GetObjectItemCaseSensitive(j, "vocab_size")) {
        const rc_gguf_kv *tok = rc_gguf_find(g, "tokenizer.ggml.tokens");
        if (tok && tok->type == RC_GGUF_ARRAY)
            cJSON_AddNumberToObject(j, "vocab_size", (double)tok->arr_n);
        else if (emb && emb->ndim == 2)
            cJSON_AddNumberToObject(j, "vocab_size", (double)emb->ne[1]);
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "num_attention_heads");
    const cJSON *kvh = cJSON_GetObjectItemCaseSensitive(j, "num_key_value_heads");
    *n_heads = cJSON_IsNumber(h) ? (int64_t)h->valuedouble : 0;
    *n_kv_heads = cJSON_IsNumber(kvh) ? (int64_t)kvh->valuedouble : *n_heads;
    if (A->output_tensor) {
        cJSON_AddBoolToObject(j, "tie_word_embeddings", rc_gguf_find_tensor(g, "output.weight") == NULL);
        cJSON_AddBoolToObject(j, "attention_bias", rc_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL);
    }
    if (A->mlp_bias)
        cJSON_AddBoolToObject(j, "mlp_bias", rc_gguf_find_tensor(g, "blk.0.ffn_gate.bias") != NULL);
    if (!(*out = cJSON_PrintUnformatted(j)))
        rc = rc_fail(e, RC_E_NOMEM, "out of host memory");
done:
    cJSON_Delete(j);
    return rc;
}

/* transformers' LlamaTensorProcessor._reverse_permute_weights: rows viewed as [heads, 2, D/2] become
 * [heads, D/2, 2] (llama.cpp's convert script interleaved the rotary halves). A row is row_bytes bytes (fp32
 * weights, or a quantized matrix's codes, scales and offsets: its groups run along the row). */
static int reverse_permute(void *w, int64_t rows, size_t row_bytes, int64_t heads, const char *name, rc_err *e)
{
    if (heads < 1 || rows % (2 * heads))
        return rc_fail(e, RC_E_SHAPE, "GGUF tensor '%s': %lld rows do not split into %lld heads of rotary pairs", name,
                       (long long)rows, (long long)heads);
    const int64_t half = rows / heads / 2;
    unsigned char *tmp = rc_calloc(rows, (int64_t)row_bytes, e, name), *src = w;
    if (!tmp)
        return e->code;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t d = 0; d < half; d++)
            for (int64_t j = 0; j < 2; j++) /* new row [h, j, d] = old row [h, d, j] */
                memcpy(tmp + ((h * 2 + j) * half + d) * row_bytes, src + ((h * half + d) * 2 + j) * row_bytes,
                       row_bytes);
    memcpy(w, tmp, (size_t)rows * row_bytes);
    free(tmp);
    return RC_OK;
}

/* A Q8_0/Q4_0/Q4_1 matrix kept as a qtensor (rows un-permuted like its fp32 copy) in quant. */
static int keep_qtensor(const rc_gguf_tensor *t, const char *hf, int64_t heads, rc_quant *quant, rc_err *e)
{
    rc_qtensor *grown = realloc(quant->t, (size_t)(quant->n + 1) * sizeof *grown);
    if (!grown)
        return rc_fail(e, RC_E_NOMEM, "out of host memory");
    quant->t = grown;
    rc_qtensor *x = &quant->t[quant->n];
    int rc = rc_gguf_tensor_qtensor(t, hf, x, e);
    if (rc)
        return rc;
    const int64_t G = x->k / x->group;
    if (heads && ((rc = reverse_permute(x->q, x->n, (size_t)x->k, heads, t->name, e)) ||
                  (rc = reverse_permute(x->scale, x->n, (size_t)G * sizeof *x->scale, heads, t->name, e)) ||
                  (x->offset && (rc = reverse_permute(x->offset, x->n, (size_t)G * sizeof *x->offset, heads, t->name,
                                                      e))))) {
        rc_qtensor_free(x);
        return rc;
    }
    quant->n++;
    quant->on = 1;
    return RC_OK;
}

/* *norm.weight: HF's gemma rule (the name ends in norm.weight) */
static int is_norm_weight(const char *hf)
{
    const size_t n = strlen(hf);
    return n >= 11 && !strcmp(hf + n - 11, "norm.weight");
}

static int load_tensors(const rc_gguf *g, const gguf_arch *A, int64_t n_heads, int64_t n_kv_heads, rc_tensors *store,
                        rc_quant *quant, rc_err *e)
{
    for (int64_t i = 0; i < g->n_t; i++) {
        const rc_gguf_tensor *t = &g->t[i];
        char hf[GGUF_MAX_NAME + 64];
        int qk, rc;
        hf_name(A, t->name, hf, sizeof hf, &qk);
        if (!hf[0])
            return rc_fail(e, RC_E_UNSUPPORTED, "%s: GGUF tensor '%s' has no %s weight it maps to", g->path, t->name,
                           A->name);
        int64_t shape[RC_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) /* GGUF lists dimensions innermost first */
            shape[d] = t->ne[t->ndim - 1 - d];
        const int64_t heads = qk ? (qk == 1 ? n_heads : n_kv_heads) : 0;
        float *w;
        if ((rc = rc_gguf_tensor_f32(g, t, &w, e)))
            return rc;
        if (qk && (rc = reverse_permute(w, shape[0], (size_t)(t->ndim > 1 ? shape[1] : 1) * sizeof *w, heads,
                                        t->name, e))) {
            free(w);
            return rc;
        }
        const int minus_one = A->norm_minus_one && is_norm_weight(hf);
        for (int64_t k = 0; minus_one && k < t->numel; k++) /* fp32, one rounding: numpy's float32 weights - 1 */
            w[k] -= 1.0f;
        if ((rc = rc_tensors_add(store, hf, t->ndim, shape, w, e)))
            return rc;
        const int qtype = t->type == RC_GGML_Q8_0 || t->type == RC_GGML_Q4_0 || t->type == RC_GGML_Q4_1;
        if (quant && qtype && t->ndim == 2 && !minus_one && (rc = keep_qtensor(t, hf, heads, quant, e)))
            return rc;
    }
    return RC_OK;
}

int rc_gguf_load_model(const char *path, rc_config *cfg, rc_tensors *store, rc_quant *quant, rc_err *e)
{
    memset(cfg, 0, sizeof *cfg);
    rc_gguf g;
    int rc = rc_gguf_open(&g, path, e);
    if (rc)
        return rc;
    const rc_gguf_kv *arch = rc_gguf_find(&g, "general.architecture");
    rc_gguf_str a;
    char *json = NULL;
    int64_t nh = 0, nkv = 0;
    const gguf_arch *A = NULL;
    if (!arch)
        rc = rc_fail(e, RC_E_FORMAT, "%s: GGUF key 'general.architecture' is missing", path);
    else if ((rc = rc_gguf_get_str(&g, arch, &a, e)) == RC_OK) {
        for (int i = 0; i < N_OF(archs) && !A; i++)
            if (a.len == strlen(archs[i].name) && !memcmp(a.s, archs[i].name, a.len))
                A = &archs[i];
        if (!A)
            rc = rc_fail(e, RC_E_UNSUPPORTED, "%s: GGUF architecture '%.*s' is not supported (supported: "
                         GGUF_ARCH_LIST ")", path, (int)(a.len > 64 ? 64 : a.len), a.s);
    }
    if (!rc)
        rc = arch_config_json(&g, A, &json, &nh, &nkv, e);
    if (!rc && (rc = rc_config_parse(json, cfg, e))) {
        char tmp[sizeof e->msg];
        snprintf(tmp, sizeof tmp, "%s", e->msg);
        rc = rc_fail(e, rc, "%s: %s", path, tmp);
    }
    if (!rc)
        rc = load_tensors(&g, A, nh, nkv, store, quant, e);
    free(json);
    rc_gguf_close(&g);
    if (rc) {
        rc_config_free(cfg);
        rc_tensors_free(store);
        if (quant)
            rc_quant_free(quant);
    }
    return rc;
}
