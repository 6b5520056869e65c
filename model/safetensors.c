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

static int add_tensor(const char *path, const cJSON *it, const unsigned char *data, uint64_t data_len,
                      rc_tensors *store, rc_err *e)
{
    const char *name = it->string;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return rc_fail(e, RC_E_FORMAT, "%s: tensor '%s' has a malformed header entry", path, name);
    int esz;
    if (strcmp(dt->valuestring, "F32") == 0)
        esz = 4;
    else if (strcmp(dt->valuestring, "BF16") == 0 || strcmp(dt->valuestring, "F16") == 0)
        esz = 2;
    else
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: tensor '%s' has dtype %s (supported: F32, F16, BF16)", path, name,
                       dt->valuestring);
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
    double b0 = cJSON_GetArrayItem(off, 0)->valuedouble, b1 = cJSON_GetArrayItem(off, 1)->valuedouble;
    if (!rc_numel(ndim, shape, &numel) || !rc_mul_i64(numel, esz, &bytes))
        return rc_fail(e, RC_E_RANGE, "%s: tensor '%s' is too large", path, name);
    if (!(b0 >= 0 && b1 >= b0 && b1 <= (double)data_len))
        return rc_fail(e, RC_E_IO, "%s: tensor '%s' lies past the end of the file (truncated?)", path, name);
    if ((int64_t)(b1 - b0) != bytes)
        return rc_fail(e, RC_E_SHAPE, "%s: tensor '%s' holds %.0f bytes, its shape needs %lld", path, name, b1 - b0,
                       (long long)bytes);
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
    return rc_tensors_add(store, name, ndim, shape, out, e);
}

int rc_safetensors_load(const char *path, rc_tensors *store, rc_err *e)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return rc_fail(e, RC_E_IO, "%s: no such file or not readable", path);
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 8) {
        close(fd);
        return rc_fail(e, RC_E_IO, "%s: too short for a safetensors file (truncated?)", path);
    }
    unsigned char *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return rc_fail(e, RC_E_IO, "%s: mmap failed", path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | map[i];
    int rc = RC_OK;
    cJSON *hdr = NULL;
    if (hlen > (uint64_t)st.st_size - 8 || hlen > (100u << 20)) {
        rc = rc_fail(e, RC_E_IO, "%s: header length %llu exceeds the file (truncated or not safetensors)", path,
                     (unsigned long long)hlen);
        goto done;
    }
    hdr = cJSON_ParseWithLength((const char *)map + 8, (size_t)hlen);
    if (!hdr || !cJSON_IsObject(hdr)) {
        rc = rc_fail(e, RC_E_FORMAT, "%s: header is not a JSON object", path);
        goto done;
    }
    const unsigned char *data = map + 8 + hlen;
    uint64_t data_len = (uint64_t)st.st_size - 8 - hlen;
    const cJSON *it;
    cJSON_ArrayForEach(it, hdr) {
        if (strcmp(it->string, "__metadata__") == 0)
            continue;
        if ((rc = add_tensor(path, it, data, data_len, store, e)))
            break;
    }
done:
    cJSON_Delete(hdr);
    munmap(map, (size_t)st.st_size);
    return rc;
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
    /* load each distinct shard once, then check every mapped name arrived */
    int rc = RC_OK;
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
        int seen = 0;
        for (const cJSON *p = map->child; p != it; p = p->next)
            seen |= strcmp(p->valuestring, it->valuestring) == 0;
        if (seen)
            continue;
        char shard[4096];
        snprintf(shard, sizeof shard, "%s/%s", dir, it->valuestring);
        if ((rc = rc_safetensors_load(shard, store, e)))
            break;
    }
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
