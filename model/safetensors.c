/* safetensors: 8-byte little-endian header length, JSON header, then raw little-endian data. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"

float rc_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float rc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    }
    if (exp == 31)
        u = sign | 0x7f800000u | (man << 13);
    else
        u = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t rc_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* inf, nan (kept quiet) */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0));
    if (a >= 0x477ff000u) /* rounds past 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* a subnormal half: value / 2^-24, rounded to nearest even */
        float v;
        memcpy(&v, &a, sizeof v);
        return (uint16_t)(sign | (uint32_t)lrintf(v * 16777216.0f));
    }
    uint32_t h = ((a >> 13) - (112u << 10)), rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

/* The byte range [begin, end) of one tensor within the data section. */
typedef struct st_span {
    uint64_t begin, end;
    const char *name;
} st_span;

static int span_cmp(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    return x->begin != y->begin ? (x->begin < y->begin ? -1 : 1) : (x->end < y->end ? -1 : x->end > y->end);
}

/* An integral JSON number in [0, 2^53], else -1. */
static double offset_value(const cJSON *v)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != floor(v->valuedouble))
        return -1;
    return v->valuedouble;
}

static int add_tensor(const char *path, const cJSON *it, const unsigned char *data, uint64_t data_len,
                      rc_tensors *store, st_span *span, rc_err *e)
{
    const char *name = it->string;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return rc_fail(e, RC_E_FORMAT, "%s: tensor '%s' has a malformed header entry", path, name);
    int esz;
    const int is_i32 = strcmp(dt->valuestring, "I32") == 0;
    if (strcmp(dt->valuestring, "F32") == 0 || is_i32)
        esz = 4;
    else if (strcmp(dt->valuestring, "BF16") == 0 || strcmp(dt->valuestring, "F16") == 0)
        esz = 2;
    else
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: tensor '%s' has dtype %s (supported: F32, F16, BF16; I32 for GPTQ)",
                       path, name, dt->valuestring);
    int ndim = cJSON_GetArraySize(sh);
    int64_t shape[RC_MAX_DIMS];
    if (ndim > RC_MAX_DIMS)
        return rc_fail(e, RC_E_SHAPE, "%s: tensor '%s' has rank %d (max %d)", path, name, ndim, RC_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        const cJSON *d = cJSON_GetArrayItem(sh, i);
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble != floor(d->valuedouble) ||
            d->valuedouble > 9e15)
            return rc_fail(e, RC_E_FORMAT, "%s: tensor '%s' has a bad shape", path, name);
        shape[i] = (int64_t)d->valuedouble;
    }
    int64_t numel, bytes;
    const double b0 = offset_value(cJSON_GetArrayItem(off, 0)), b1 = offset_value(cJSON_GetArrayItem(off, 1));
    if (!rc_numel(ndim, shape, &numel) || !rc_mul_i64(numel, esz, &bytes))
        return rc_fail(e, RC_E_RANGE, "%s: tensor '%s' is too large", path, name);
    if (b0 < 0 || b1 < 0)
        return rc_fail(e, RC_E_FORMAT, "%s: tensor '%s' has data_offsets that are not two whole byte counts", path,
                       name);
    if (b1 < b0)
        return rc_fail(e, RC_E_FORMAT, "%s: tensor '%s' has reversed data_offsets [%.0f, %.0f]", path, name, b0, b1);
    if (b1 > (double)data_len)
        return rc_fail(e, RC_E_IO, "%s: tensor '%s' lies past the end of the file (truncated?)", path, name);
    if ((int64_t)(b1 - b0) != bytes)
        return rc_fail(e, RC_E_SHAPE, "%s: tensor '%s' holds %.0f bytes, its shape needs %lld", path, name, b1 - b0,
                       (long long)bytes);
    *span = (st_span){(uint64_t)b0, (uint64_t)b1, name};
    float *out = rc_calloc(numel ? numel : 1, sizeof(float), e, name);
    if (!out)
        return e->code;
    const unsigned char *src = data + (uint64_t)b0;
    for (int64_t i = 0; i < numel; i++) {
        if (esz == 4)
            memcpy(&out[i], src + 4 * i, 4);
        else {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            out[i] = dt->valuestring[0] == 'B' ? rc_bf16_to_f32(h) : rc_f16_to_f32(h);
        }
    }
    int rc = rc_tensors_add(store, name, ndim, shape, out, e);
    if (!rc)
        store->t[store->n - 1].is_i32 = is_i32;
    return rc;
}

/* As safetensors itself requires: the tensors tile the data section exactly, no overlap, no hole, nothing after. */
static int check_spans(const char *path, st_span *sp, int n, uint64_t data_len, rc_err *e)
{
    qsort(sp, (size_t)n, sizeof *sp, span_cmp);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (sp[i].begin < at)
            return rc_fail(e, RC_E_FORMAT, "%s: tensors '%s' and '%s' overlap (data_offsets)", path, sp[i - 1].name,
                           sp[i].name);
        if (sp[i].begin > at)
            return rc_fail(e, RC_E_FORMAT, "%s: data bytes [%llu, %llu) belong to no tensor", path,
                           (unsigned long long)at, (unsigned long long)sp[i].begin);
        at = sp[i].end;
    }
    if (at != data_len)
        return rc_fail(e, RC_E_FORMAT, "%s: %llu bytes after the last tensor's data", path,
                       (unsigned long long)(data_len - at));
    return RC_OK;
}

int rc_safetensors_load(const char *path, rc_tensors *store, rc_err *e)
{
    int64_t size;
    int fd = rc_open_regular(path, "safetensors file", &size, e);
    if (fd < 0)
        return e->code;
    if (size < 8) {
        close(fd);
        return rc_fail(e, RC_E_IO, "%s: too short for a safetensors file (truncated?)", path);
    }
    unsigned char *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return rc_fail(e, RC_E_IO, "%s: mmap failed", path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | map[i];
    int rc = RC_OK;
    cJSON *hdr = NULL;
    st_span *spans = NULL;
    if (hlen > (uint64_t)size - 8 || hlen > (100u << 20)) {
        rc = rc_fail(e, RC_E_IO, "%s: header length %llu exceeds the file (truncated or not safetensors)", path,
                     (unsigned long long)hlen);
        goto done;
    }
    const char *js = (const char *)map + 8, *end = NULL;
    hdr = cJSON_ParseWithLengthOpts(js, (size_t)hlen, &end, 0);
    if (!hdr || !cJSON_IsObject(hdr)) {
        rc = rc_fail(e, RC_E_FORMAT, "%s: header is not a JSON object", path);
        goto done;
    }
    for (; end < js + hlen; end++) /* the header may be padded with spaces (to 8 bytes), nothing else */
        if (!strchr(" \t\r\n", *end) || !*end) {
            rc = rc_fail(e, RC_E_FORMAT, "%s: header has trailing bytes after its JSON object", path);
            goto done;
        }
    const unsigned char *data = map + 8 + hlen;
    uint64_t data_len = (uint64_t)size - 8 - hlen;
    int n = 0;
    if (!(spans = rc_calloc(cJSON_GetArraySize(hdr) + 1, sizeof *spans, e, path))) {
        rc = e->code;
        goto done;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, hdr) {
        if (strcmp(it->string, "__metadata__") == 0)
            continue;
        if (!cJSON_IsObject(it)) {
            rc = rc_fail(e, RC_E_FORMAT, "%s: tensor '%s' has a malformed header entry", path, it->string);
            break;
        }
        if ((rc = add_tensor(path, it, data, data_len, store, &spans[n++], e)))
            break;
    }
    if (!rc)
        rc = check_spans(path, spans, n, data_len, e);
done:
    free(spans);
    cJSON_Delete(hdr);
    munmap(map, (size_t)size);
    return rc;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int rc_safetensors_load_dir(const char *dir, rc_tensors *store, rc_err *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (access(path, F_OK) != 0) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        return rc_safetensors_load(path, store, e);
    }
    char *text = rc_read_text(path, "the shard index", 256 << 20, e);
    if (!text)
        return e->code;
    cJSON *idx = cJSON_Parse(text);
    free(text);
    const cJSON *map = idx ? cJSON_GetObjectItemCaseSensitive(idx, "weight_map") : NULL;
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(idx);
        return rc_fail(e, RC_E_FORMAT, "%s: no 'weight_map' object", path);
    }
    /* load each distinct shard once (names sorted, so repeats are neighbours), then check every mapped name
     * arrived */
    int rc = RC_OK, n = 0;
    const char **names = rc_calloc(cJSON_GetArraySize(map) + 1, sizeof *names, e, path);
    if (!names) {
        cJSON_Delete(idx);
        return e->code;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, map) {
        if (!cJSON_IsString(it)) {
            rc = rc_fail(e, RC_E_FORMAT, "%s: weight_map['%s'] is not a file name", path, it->string);
            break;
        }
        if (strchr(it->valuestring, '/')) {
            rc = rc_fail(e, RC_E_FORMAT, "%s: shard name '%s' must be a plain file name", path, it->valuestring);
            break;
        }
        names[n++] = it->valuestring;
    }
    if (!rc)
        qsort(names, (size_t)n, sizeof *names, str_cmp);
    for (int i = 0; !rc && i < n; i++) {
        if (i && !strcmp(names[i], names[i - 1]))
            continue;
        char shard[4096];
        snprintf(shard, sizeof shard, "%s/%s", dir, names[i]);
        rc = rc_safetensors_load(shard, store, e);
    }
    free(names);
    cJSON_ArrayForEach(it, map) {
        if (rc)
            break;
        if (!rc_tensors_find(store, it->string))
            rc = rc_fail(e, RC_E_MISSING, "%s: tensor '%s' is listed in the index but not in shard %s", path,
                         it->string, it->valuestring);
    }
    cJSON_Delete(idx);
    return rc;
}

static int dtype_size(const char *dt)
{
    return !strcmp(dt, "F32") || !strcmp(dt, "I32") ? 4 : !strcmp(dt, "F16") || !strcmp(dt, "BF16") ? 2 : 0;
}

int rc_safetensors_write(const char *path, const rc_st_entry *t, int n, rc_err *e)
{
    cJSON *h = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(h, "__metadata__");
    if (!h || !meta || !cJSON_AddStringToObject(meta, "format", "pt")) {
        cJSON_Delete(h);
        return rc_fail(e, RC_E_NOMEM, "out of host memory");
    }
    int64_t at = 0, *bytes = rc_calloc(n ? n : 1, sizeof *bytes, e, path);
    int rc = bytes ? RC_OK : e->code;
    for (int i = 0; !rc && i < n; i++) {
        int64_t numel;
        const int es = dtype_size(t[i].dtype);
        if (!es || !rc_numel(t[i].ndim, t[i].shape, &numel) || !rc_mul_i64(numel, es, &bytes[i])) {
            rc = rc_fail(e, RC_E_USAGE, "%s: tensor '%s': dtype %s or its shape cannot be written", path, t[i].name,
                         t[i].dtype);
            break;
        }
        cJSON *o = cJSON_AddObjectToObject(h, t[i].name), *sh = cJSON_CreateArray(), *off = cJSON_CreateArray();
        int ok = o && sh && off && cJSON_AddStringToObject(o, "dtype", t[i].dtype);
        for (int d = 0; ok && d < t[i].ndim; d++)
            ok = cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t[i].shape[d]));
        ok = ok && cJSON_AddItemToArray(off, cJSON_CreateNumber((double)at)) &&
             cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(at + bytes[i])));
        if (ok) {
            cJSON_AddItemToObject(o, "shape", sh);
            cJSON_AddItemToObject(o, "data_offsets", off);
        } else {
            cJSON_Delete(sh);
            cJSON_Delete(off);
            rc = rc_fail(e, RC_E_NOMEM, "out of host memory");
        }
        at += bytes[i];
    }
    char *js = rc ? NULL : cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    if (!rc && !js)
        rc = rc_fail(e, RC_E_NOMEM, "out of host memory");
    rc_atomic_file f;
    if (!rc && !(rc = rc_atomic_open(&f, path, e))) {
        const size_t len = strlen(js), padded = (len + 7) / 8 * 8;
        unsigned char lenb[8];
        for (int i = 0; i < 8; i++)
            lenb[i] = (unsigned char)((uint64_t)padded >> (8 * i));
        int ok = fwrite(lenb, 1, 8, f.f) == 8 && fwrite(js, 1, len, f.f) == len;
        for (size_t i = len; ok && i < padded; i++)
            ok = fputc(' ', f.f) != EOF;
        for (int i = 0; ok && i < n; i++)
            ok = fwrite(t[i].data, 1, (size_t)bytes[i], f.f) == (size_t)bytes[i];
        if (ok)
            rc = rc_atomic_commit(&f, e);
        else {
            rc_atomic_abort(&f);
            rc = rc_fail(e, RC_E_IO, "%s: write failed", path);
        }
    }
    free(js);
    free(bytes);
    return rc;
}
