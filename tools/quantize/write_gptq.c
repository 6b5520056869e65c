/* GPTQ-layout checkpoint writer: packing, the safetensors file, config.json, the atomic folder. */
#include "write_gptq.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- packing: P.qweight int32 [K*bits/32, N], P.qzeros int32 [K/g, N*bits/32], P.scales f16 [K/g, N],
 * P.g_idx int32 [K] ---- */
typedef struct packed {
    char base[160];
    int32_t *qweight, *qzeros, *g_idx;
    uint16_t *scales;
    int64_t N, K, G, per; /* per: codes per int32 */
} packed;

static int pack(const rcq_linear *l, packed *p, rc_err *e)
{
    const rc_gq_tensor *t = &l->q;
    memset(p, 0, sizeof *p);
    const size_t n = strlen(l->name);
    if (n < 8 || strcmp(l->name + n - 7, ".weight"))
        return rc_fail(e, RC_E_FORMAT, "quantize: %s is not a .weight tensor", l->name);
    snprintf(p->base, sizeof p->base, "%.*s", (int)(n - 7), l->name);
    p->N = t->rows, p->K = t->cols, p->G = t->n_groups, p->per = 32 / t->bits;
    if (p->K % p->per || p->N % p->per)
        return rc_fail(e, RC_E_SHAPE, "quantize: %s [%lld, %lld] does not pack %lld codes per int32", l->name,
                       (long long)p->N, (long long)p->K, (long long)p->per);
    p->qweight = rc_calloc(p->K / p->per * p->N, sizeof *p->qweight, e, "qweight");
    p->qzeros = p->qweight ? rc_calloc(p->G * (p->N / p->per), sizeof *p->qzeros, e, "qzeros") : NULL;
    p->scales = p->qzeros ? rc_calloc(p->G * p->N, sizeof *p->scales, e, "scales") : NULL;
    p->g_idx = p->scales ? rc_calloc(p->K, sizeof *p->g_idx, e, "g_idx") : NULL;
    if (!p->g_idx)
        return e->code;
    const uint32_t mask = (1u << t->bits) - 1;
    for (int64_t r = 0; r < p->N; r++)
        for (int64_t k = 0; k < p->K; k++) {
            uint32_t *w = (uint32_t *)&p->qweight[(k / p->per) * p->N + r];
            *w |= ((uint32_t)t->q[r * p->K + k] & mask) << (t->bits * (k % p->per));
        }
    for (int64_t g = 0; g < p->G; g++)
        for (int64_t r = 0; r < p->N; r++) {
            uint32_t *z = (uint32_t *)&p->qzeros[g * (p->N / p->per) + r / p->per];
            *z |= ((uint32_t)t->zero[r * p->G + g] & mask) << (t->bits * (r % p->per));
            p->scales[g * p->N + r] = rc_gq_f16_bits(t->scale[r * p->G + g]);
        }
    for (int64_t k = 0; k < p->K; k++)
        p->g_idx[k] = (int32_t)(k / t->group);
    return RC_OK;
}

static void packed_free(packed *p)
{
    free(p->qweight);
    free(p->qzeros);
    free(p->scales);
    free(p->g_idx);
}

/* ---- safetensors ---- */
typedef struct st_entry {
    char name[192];
    const char *dtype;
    int ndim;
    int64_t shape[2];
    const void *data;
    int64_t bytes;
} st_entry;

static int write_safetensors(const char *path, const st_entry *t, int n, rc_err *e)
{
    cJSON *h = cJSON_CreateObject();
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_AddObjectToObject(h, t[i].name);
        cJSON_AddStringToObject(o, "dtype", t[i].dtype);
        cJSON *s = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < t[i].ndim; d++)
            cJSON_AddItemToArray(s, cJSON_CreateNumber((double)t[i].shape[d]));
        cJSON *d = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(d, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(d, cJSON_CreateNumber((double)(off + t[i].bytes)));
        off += t[i].bytes;
    }
    cJSON_AddStringToObject(cJSON_AddObjectToObject(h, "__metadata__"), "format", "pt");
    char *js = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    if (!js)
        return rc_fail(e, RC_E_NOMEM, "%s: out of memory for the header", path);
    uint64_t hl = strlen(js);
    const uint64_t pad = (8 - hl % 8) % 8;
    FILE *f = fopen(path, "wb");
    int ok = f != NULL;
    if (ok) {
        const uint64_t total = hl + pad;
        unsigned char len[8];
        for (int i = 0; i < 8; i++)
            len[i] = (unsigned char)(total >> (8 * i));
        ok = fwrite(len, 1, 8, f) == 8 && fwrite(js, 1, hl, f) == hl && fwrite("        ", 1, pad, f) == pad;
        for (int i = 0; i < n && ok; i++)
            ok = fwrite(t[i].data, 1, (size_t)t[i].bytes, f) == (size_t)t[i].bytes;
        ok = (fclose(f) == 0) && ok;
    }
    free(js);
    return ok ? RC_OK : rc_fail(e, RC_E_IO, "%s: cannot write: %s", path, strerror(errno));
}

/* ---- config.json ---- */
static int write_config(const char *path, const rcq_opts *o, const rcq_meta *meta, rc_err *e)
{
    cJSON *c = cJSON_Parse(meta->config_json);
    if (!cJSON_IsObject(c)) {
        cJSON_Delete(c);
        return rc_fail(e, RC_E_FORMAT, "quantize: the source's config is not a JSON object");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(c, "quantization_config");
    cJSON *q = cJSON_AddObjectToObject(c, "quantization_config");
    cJSON_AddStringToObject(q, "quant_method", "gptq");
    cJSON_AddNumberToObject(q, "bits", o->scheme.bits);
    cJSON_AddNumberToObject(q, "group_size", o->scheme.group ? o->scheme.group : -1);
    cJSON_AddBoolToObject(q, "desc_act", 0);
    cJSON_AddBoolToObject(q, "sym", o->scheme.sym);
    cJSON_AddStringToObject(q, "checkpoint_format", "gptq_v2");
    cJSON_AddNumberToObject(q, "damp_percent", meta->damp);
    char sch[48];
    cJSON *r = cJSON_AddObjectToObject(q, "refchain");
    cJSON_AddStringToObject(r, "scheme", rc_gq_scheme_str(&o->scheme, sch, sizeof sch));
    cJSON_AddStringToObject(r, "method", meta->method);
    cJSON_AddStringToObject(r, "source", meta->source);
    cJSON_AddNumberToObject(r, "calibration_tokens", (double)meta->calib_tokens);
    cJSON_AddNumberToObject(r, "block", meta->block);
    cJSON_AddStringToObject(r, "kept_fp32", "embeddings, lm_head, norms, biases, gated-delta-net projections");
    char *text = cJSON_Print(c);
    cJSON_Delete(c);
    FILE *f = text ? fopen(path, "w") : NULL;
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f)
        ok = (fclose(f) == 0) && ok;
    free(text);
    return ok ? RC_OK : rc_fail(e, RC_E_IO, "%s: cannot write: %s", path, strerror(errno));
}

/* ---- the folder ---- */
static int is_quantized(const rcq_model *q, const char *name)
{
    for (int i = 0; i < q->n; i++)
        if (!strcmp(q->lin[i].name, name))
            return 1;
    return 0;
}

static void remove_tmp(const char *tmp)
{
    static const char *const files[] = {"model.safetensors", "config.json"};
    char p[4200];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", tmp, files[i]);
        unlink(p);
    }
    rmdir(tmp);
}

int rcq_write_gptq(const char *dir, const rc_model *m, const rcq_model *q, const rcq_opts *o, const rcq_meta *meta,
                   rc_err *e)
{
    struct stat sb;
    if (strlen(dir) > 4000)
        return rc_fail(e, RC_E_USAGE, "quantize: the output path is too long");
    if (!stat(dir, &sb))
        return rc_fail(e, RC_E_USAGE, "%s: already exists; quantize writes a new folder", dir);
    char tmp[4100], path[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", dir);
    if (!mkdtemp(tmp))
        return rc_fail(e, RC_E_IO, "%s: cannot create a temporary folder beside it: %s", dir, strerror(errno));
    const int n_st = m->store.n, n_ent = n_st + 3 * q->n;
    st_entry *ent = rc_calloc(n_ent, sizeof *ent, e, "the tensor list");
    packed *pk = ent ? rc_calloc(q->n ? q->n : 1, sizeof *pk, e, "the packed tensors") : NULL;
    int rc = pk ? RC_OK : e->code, k = 0;
    for (int i = 0; i < n_st && !rc; i++) {
        const rc_tensor *t = &m->store.t[i];
        if (is_quantized(q, t->name))
            continue;
        if (t->ndim > 2) {
            rc = rc_fail(e, RC_E_UNSUPPORTED, "quantize: %s has rank %d; the writer takes rank <= 2", t->name,
                         t->ndim);
            break;
        }
        st_entry *s = &ent[k++];
        *s = (st_entry){.dtype = "F32", .ndim = t->ndim, .data = t->data, .bytes = t->numel * 4};
        snprintf(s->name, sizeof s->name, "%s", t->name);
        for (int d = 0; d < t->ndim; d++)
            s->shape[d] = t->shape[d];
    }
    for (int i = 0; i < q->n && !rc; i++) {
        packed *p = &pk[i];
        if ((rc = pack(&q->lin[i], p, e)))
            break;
        const st_entry add[4] = {
            {"", "I32", 2, {p->K / p->per, p->N}, p->qweight, p->K / p->per * p->N * 4},
            {"", "I32", 2, {p->G, p->N / p->per}, p->qzeros, p->G * (p->N / p->per) * 4},
            {"", "F16", 2, {p->G, p->N}, p->scales, p->G * p->N * 2},
            {"", "I32", 1, {p->K, 0}, p->g_idx, p->K * 4},
        };
        static const char *const suffix[4] = {"qweight", "qzeros", "scales", "g_idx"};
        for (int j = 0; j < 4; j++) {
            ent[k] = add[j];
            snprintf(ent[k].name, sizeof ent[k].name, "%s.%s", p->base, suffix[j]);
            k++;
        }
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/model.safetensors", tmp);
        rc = write_safetensors(path, ent, k, e);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/config.json", tmp);
        rc = write_config(path, o, meta, e);
    }
    if (!rc && chmod(tmp, 0755)) /* mkdtemp made it 0700 */
        rc = rc_fail(e, RC_E_IO, "%s: cannot chmod: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, dir))
        rc = rc_fail(e, RC_E_IO, "%s: cannot rename %s into place: %s", dir, tmp, strerror(errno));
    if (rc)
        remove_tmp(tmp);
    for (int i = 0; pk && i < q->n; i++)
        packed_free(&pk[i]);
    free(pk);
    free(ent);
    return rc;
}
