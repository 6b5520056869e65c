/* HF GPTQ layout: quantization_config, the packed qweight/qzeros/scales/g_idx tensors <-> rc_qtensor, and the
 * checkpoint writer. */
#include "gptq_layout.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io.h"
#include "json_strict.h"
#include "safetensors.h"

/* ---- quantization_config ---- */

static int cfg_bad(rc_err *e, const char *what, const char *field, const char *why)
{
    return rc_fail(e, RC_E_UNSUPPORTED, "%s: quantization_config.%s %s", what, field, why);
}

static int cfg_bool(const cJSON *q, const char *field, int dflt, int *out, const char *what, rc_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(q, field);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return RC_OK;
    }
    if (!cJSON_IsBool(v))
        return rc_fail(e, RC_E_FORMAT, "%s: quantization_config.%s is not true or false", what, field);
    *out = cJSON_IsTrue(v);
    return RC_OK;
}

static int parse_q(const cJSON *q, int root_form, const char *what, rc_quant_scheme *s, int *found, rc_err *e)
{
    const cJSON *qm = cJSON_GetObjectItemCaseSensitive(q, "quant_method");
    if (!qm && root_form && !cJSON_GetObjectItemCaseSensitive(q, "bits"))
        return RC_OK; /* a config.json without quantization_config */
    if (qm && !cJSON_IsString(qm))
        return rc_fail(e, RC_E_FORMAT, "%s: quantization_config.quant_method is not a string", what);
    if (qm && !strcmp(qm->valuestring, "gguf"))
        return RC_OK; /* a GGUF export's record: its weights are already fp32 */
    if (qm && strcmp(qm->valuestring, "gptq"))
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: quantization_config.quant_method \"%.40s\" is not supported (gptq)",
                       what, qm->valuestring);
    const cJSON *bits = cJSON_GetObjectItemCaseSensitive(q, "bits"), *gs = cJSON_GetObjectItemCaseSensitive(q, "group_size");
    if (!cJSON_IsNumber(bits) || (bits->valuedouble != 4 && bits->valuedouble != 8)) {
        char v[32] = "missing";
        if (cJSON_IsNumber(bits))
            snprintf(v, sizeof v, "%g", bits->valuedouble);
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: quantization_config.bits %s is not supported (4 or 8)", what, v);
    }
    if (!cJSON_IsNumber(gs) || gs->valuedouble != (double)(int64_t)gs->valuedouble ||
        (gs->valuedouble < 1 && gs->valuedouble != -1) || gs->valuedouble > 1e9)
        return cfg_bad(e, what, "group_size", "is not -1 or a positive whole number");
    int desc_act, sym, lm_head, rc;
    if ((rc = cfg_bool(q, "desc_act", 0, &desc_act, what, e)) || (rc = cfg_bool(q, "sym", 1, &sym, what, e)) ||
        (rc = cfg_bool(q, "lm_head", 0, &lm_head, what, e)))
        return rc;
    if (desc_act)
        return cfg_bad(e, what, "desc_act", "(act-order) true is not supported: columns must be in order");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(q, "checkpoint_format");
    if (!fmt)
        fmt = cJSON_GetObjectItemCaseSensitive(q, "format");
    if (fmt && !cJSON_IsNull(fmt) && !cJSON_IsString(fmt))
        return rc_fail(e, RC_E_FORMAT, "%s: quantization_config.checkpoint_format is not a string", what);
    const char *f = cJSON_IsString(fmt) ? fmt->valuestring : "gptq";
    if (strcmp(f, "gptq") && strcmp(f, "gptq_v2"))
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: quantization_config.checkpoint_format \"%.40s\" is not supported "
                       "(gptq: AutoGPTQ v1 zeros, gptq_v2)", what, f);
    const cJSON *pd = cJSON_GetObjectItemCaseSensitive(q, "pack_dtype");
    if (pd && !cJSON_IsNull(pd) && !(cJSON_IsString(pd) && !strcmp(pd->valuestring, "int32")))
        return cfg_bad(e, what, "pack_dtype", "is not int32");
    if (bits->valuedouble == 8 && !sym)
        return cfg_bad(e, what, "sym", "false with 8 bits (asymmetric int8) is not supported: W8A16 is symmetric");
    *s = (rc_quant_scheme){.family = sym ? RC_QF_SCALE : RC_QF_AFFINE, .bits = (int)bits->valuedouble,
                           .group = gs->valuedouble < 0 ? 0 : (int64_t)gs->valuedouble,
                           .gptq_v1 = !strcmp(f, "gptq"), .lm_head = lm_head};
    *found = 1;
    return RC_OK;
}

int rc_gptq_config_parse(const char *json_text, const char *what, rc_quant_scheme *s, int *found, rc_err *e)
{
    memset(s, 0, sizeof *s);
    *found = 0;
    cJSON *j = rc_json_parse_strict(json_text, strlen(json_text), what, e);
    if (!j)
        return e->code;
    int rc = RC_OK;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "quantization_config");
    if (q && !cJSON_IsNull(q) && !cJSON_IsObject(q))
        rc = rc_fail(e, RC_E_FORMAT, "%s: quantization_config is not an object", what);
    else if (cJSON_IsObject(q))
        rc = parse_q(q, 0, what, s, found, e);
    else if (cJSON_IsObject(j))
        rc = parse_q(j, 1, what, s, found, e);
    cJSON_Delete(j);
    return rc;
}

cJSON *rc_gptq_config_json(const rc_quant_scheme *s)
{
    cJSON *q = cJSON_CreateObject();
    if (!q)
        return NULL;
    int ok = cJSON_AddStringToObject(q, "quant_method", "gptq") && cJSON_AddNumberToObject(q, "bits", s->bits) &&
             cJSON_AddNumberToObject(q, "group_size", s->group ? (double)s->group : -1.0) &&
             cJSON_AddBoolToObject(q, "desc_act", 0) && cJSON_AddBoolToObject(q, "sym", s->family == RC_QF_SCALE) &&
             cJSON_AddStringToObject(q, "checkpoint_format", s->gptq_v1 ? "gptq" : "gptq_v2") &&
             cJSON_AddBoolToObject(q, "lm_head", s->lm_head) && cJSON_AddStringToObject(q, "pack_dtype", "int32");
    if (!ok) {
        cJSON_Delete(q);
        return NULL;
    }
    return q;
}

/* ---- reading: GPTQ tensors -> rc_qtensor -> fp32 ---- */

static const rc_tensor *part(const rc_tensors *st, const char *prefix, const char *suffix)
{
    char n[600];
    snprintf(n, sizeof n, "%.512s.%s", prefix, suffix);
    return rc_tensors_find(st, n);
}

static int32_t i32_at(const rc_tensor *t, int64_t i)
{
    int32_t v;
    memcpy(&v, &t->data[i], sizeof v);
    return v;
}

static int want_shape(const rc_tensor *t, int is_i32, int64_t r, int64_t c, const char *what, rc_err *e)
{
    if (!t)
        return RC_OK;
    if (t->is_i32 != is_i32)
        return rc_fail(e, RC_E_FORMAT, "%s: GPTQ tensor '%s' is %s, the layout stores it as %s", what, t->name,
                       t->is_i32 ? "I32" : "a float type", is_i32 ? "I32" : "F16");
    if (t->ndim != (c ? 2 : 1) || t->shape[0] != r || (c && t->shape[1] != c)) {
        char got[64], want[64];
        const int64_t ws[2] = {r, c};
        return rc_fail(e, RC_E_SHAPE, "%s: GPTQ tensor '%s' has shape %s, the layout implies %s", what, t->name,
                       rc_shape_str(t->ndim, t->shape, got, sizeof got), rc_shape_str(c ? 2 : 1, ws, want, sizeof want));
    }
    return RC_OK;
}

/* One GPTQ group P.{qweight,qzeros,scales,g_idx} -> t (named P.weight). */
static int unpack_one(const rc_tensors *st, const char *prefix, const rc_quant_scheme *s, rc_qtensor *t,
                      const char *what, rc_err *e)
{
    const rc_tensor *qw = part(st, prefix, "qweight"), *qz = part(st, prefix, "qzeros"),
                    *sc = part(st, prefix, "scales"), *gi = part(st, prefix, "g_idx");
    char wname[600];
    snprintf(wname, sizeof wname, "%.512s.weight", prefix);
    const int b = s->bits, per = 32 / b;
    const uint32_t mask = (1u << b) - 1;
    if (!qz || !sc)
        return rc_fail(e, RC_E_MISSING, "%s: GPTQ tensor '%s.%s' is missing", what, prefix, qz ? "scales" : "qzeros");
    if (qw->ndim != 2 || !qw->is_i32)
        return rc_fail(e, RC_E_FORMAT, "%s: GPTQ tensor '%s.qweight' is not a 2-d I32 tensor", what, prefix);
    const int64_t K = qw->shape[0] * per, N = qw->shape[1], g = s->group ? s->group : K;
    const char *why;
    if (rc_quant_policy(wname, &why) == RC_QP_FULL)
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: '%s' is quantized, but it stays in full precision (%s)", what, wname,
                       why);
    if (K % g)
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: group_size %lld does not divide the %lld input columns of '%s'", what,
                       (long long)g, (long long)K, wname);
    if (N % per)
        return rc_fail(e, RC_E_SHAPE, "%s: '%s' has %lld output rows, not a multiple of the %d zeros an int32 packs",
                       what, wname, (long long)N, per);
    int rc;
    if ((rc = want_shape(qz, 1, K / g, N / per, what, e)) || (rc = want_shape(sc, 0, K / g, N, what, e)) ||
        (rc = want_shape(gi, 1, K, 0, what, e)))
        return rc;
    for (int64_t k = 0; gi && k < K; k++)
        if (i32_at(gi, k) != k / g)
            return rc_fail(e, RC_E_UNSUPPORTED, "%s: '%s.g_idx'[%lld] = %d, not %lld: act-order (desc_act) column "
                           "order is not supported", what, prefix, (long long)k, i32_at(gi, k), (long long)(k / g));
    if ((rc = rc_qtensor_alloc(t, wname, s->family, b, N, K, g, s->family == RC_QF_AFFINE, e)))
        return rc;
    const int half = 1 << (b - 1), G = (int)(K / g);
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) {
            const uint32_t u = ((uint32_t)i32_at(qw, (k / per) * N + n) >> (b * (k % per))) & mask;
            t->q[n * K + k] = (int8_t)(s->family == RC_QF_SCALE ? (int)u - half : (int)u);
        }
    for (int64_t j = 0; j < G; j++)
        for (int64_t n = 0; n < N; n++) {
            const uint32_t zs = ((uint32_t)i32_at(qz, j * (N / per) + n / per) >> (b * (n % per))) & mask;
            const int z = (int)zs + (s->gptq_v1 ? 1 : 0);
            t->scale[n * G + j] = sc->data[j * N + n];
            if (s->family == RC_QF_AFFINE)
                t->zero[n * G + j] = (int16_t)z;
            else if (z != half) {
                rc_qtensor_free(t);
                return rc_fail(e, RC_E_FORMAT, "%s: '%s' is symmetric (sym true) but row %lld group %lld has zero %d, "
                               "not %d (%s zeros)", what, wname, (long long)n, (long long)j, z, half,
                               s->gptq_v1 ? "gptq v1: stored + 1" : "gptq_v2");
            }
        }
    rc_qtensor_set_offsets(t);
    if ((rc = rc_qtensor_check(t, e)))
        rc_qtensor_free(t);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static const char *const gptq_parts[] = {"qweight", "qzeros", "scales", "g_idx"};

int rc_gptq_dequant_store(rc_tensors *store, const rc_quant_scheme *s, rc_quant *q, const char *what, rc_err *e)
{
    memset(q, 0, sizeof *q);
    q->on = 1;
    q->scheme = *s;
    int nq = 0;
    for (int i = 0; i < store->n; i++)
        nq += ends_with(store->t[i].name, ".qweight");
    if (!nq)
        return rc_fail(e, RC_E_MISSING, "%s: the config says gptq but no tensor is named '*.qweight'", what);
    unsigned char *gone = rc_calloc(store->n, 1, e, what);
    if (!(q->t = rc_calloc(nq, sizeof *q->t, e, what)) || !gone) {
        free(gone);
        rc_quant_free(q);
        return e->code;
    }
    rc_tensors out = {0};
    int rc = RC_OK;
    for (int i = 0; !rc && i < store->n; i++) {
        const char *name = store->t[i].name;
        if (!ends_with(name, ".qweight"))
            continue;
        char prefix[512];
        if (strlen(name) >= sizeof prefix) {
            rc = rc_fail(e, RC_E_FORMAT, "%s: GPTQ tensor name '%.64s...' is too long", what, name);
            break;
        }
        snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(name) - strlen(".qweight")), name);
        if (part(store, prefix, "weight"))
            rc = rc_fail(e, RC_E_MISSING, "%s: '%s' is both quantized (.qweight) and stored as '%s.weight'", what,
                         prefix, prefix);
        else
            rc = unpack_one(store, prefix, s, &q->t[q->n], what, e);
        if (rc)
            break;
        q->n++;
        for (size_t p = 0; p < sizeof gptq_parts / sizeof gptq_parts[0]; p++) {
            const rc_tensor *t = part(store, prefix, gptq_parts[p]);
            if (t)
                gone[t - store->t] = 1;
        }
    }
    /* a new store in the old order: each group's P.weight where its qweight was, every other tensor moved over */
    for (int i = 0, j = 0; !rc && i < store->n; i++) {
        rc_tensor *t = &store->t[i];
        if (ends_with(t->name, ".qweight")) {
            const rc_qtensor *x = &q->t[j++];
            float *w = rc_calloc(x->n * x->k, sizeof *w, e, x->name);
            if (!w) {
                rc = e->code;
                break;
            }
            rc_qtensor_dequant(x, w);
            rc = rc_tensors_add(&out, x->name, 2, (const int64_t[]){x->n, x->k}, w, e);
        } else if (!gone[i]) {
            rc = rc_tensors_add(&out, t->name, t->ndim, t->shape, t->data, e); /* owns data now, even on error */
            t->data = NULL;
            if (!rc)
                out.t[out.n - 1].is_i32 = t->is_i32;
        }
    }
    free(gone);
    if (rc) {
        rc_tensors_free(&out);
        rc_quant_free(q);
        return rc;
    }
    rc_tensors_free(store);
    *store = out;
    return RC_OK;
}

/* ---- writing ---- */

void rc_gptq_packed_free(rc_gptq_packed *p)
{
    free(p->qweight);
    free(p->qzeros);
    free(p->g_idx);
    free(p->scales);
    memset(p, 0, sizeof *p);
}

int rc_gptq_pack(const rc_qtensor *t, const rc_quant_scheme *s, rc_gptq_packed *p, rc_err *e)
{
    memset(p, 0, sizeof *p);
    const int b = t->bits, per = 32 / b, half = 1 << (b - 1);
    const int64_t K = t->k, N = t->n, g = s->group ? s->group : K, G = K / g;
    if (b != s->bits || t->family != s->family || t->group != g)
        return rc_fail(e, RC_E_USAGE, "GPTQ writer: '%s' (int%d, group %lld, %s) is not the scheme's", t->name, b,
                       (long long)t->group, t->family == RC_QF_SCALE ? "symmetric" : "asymmetric");
    if (t->family == RC_QF_AFFINE && !t->zero)
        return rc_fail(e, RC_E_UNSUPPORTED, "GPTQ writer: '%s' has offsets but no integer zeros (GGUF Q4_1 offsets do "
                       "not fit the GPTQ layout)", t->name);
    if (K % per || N % per)
        return rc_fail(e, RC_E_SHAPE, "GPTQ writer: '%s' [%lld, %lld]: both sizes must be multiples of %d", t->name,
                       (long long)N, (long long)K, per);
    int rc = rc_qtensor_check(t, e);
    if (rc)
        return rc;
    p->rows_w = K / per;
    p->cols_z = N / per;
    p->groups = G;
    p->rows_z = G;
    p->qweight = rc_calloc(p->rows_w * N, sizeof *p->qweight, e, t->name);
    p->qzeros = rc_calloc(G * p->cols_z, sizeof *p->qzeros, e, t->name);
    p->scales = rc_calloc(G * N, sizeof *p->scales, e, t->name);
    p->g_idx = rc_calloc(K, sizeof *p->g_idx, e, t->name);
    if (!p->qweight || !p->qzeros || !p->scales || !p->g_idx) {
        rc_gptq_packed_free(p);
        return e->code;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            const uint32_t u = (uint32_t)(t->family == RC_QF_SCALE ? t->q[n * K + k] + half : t->q[n * K + k]);
            uint32_t *w = (uint32_t *)&p->qweight[(k / per) * N + n];
            *w |= u << (b * (k % per));
        }
    for (int64_t j = 0; j < G; j++)
        for (int64_t n = 0; n < N; n++) {
            const float sc = t->scale[n * G + j];
            const uint16_t h = rc_f32_to_f16(sc);
            const int z = t->family == RC_QF_SCALE ? half : t->zero[n * G + j], zs = z - (s->gptq_v1 ? 1 : 0);
            if (rc_f16_to_f32(h) != sc) {
                rc_gptq_packed_free(p);
                return rc_fail(e, RC_E_RANGE, "GPTQ writer: '%s' row %lld group %lld: scale %.9g is not an fp16 value "
                               "(round the scales to fp16 before choosing the codes)", t->name, (long long)n,
                               (long long)j, sc);
            }
            if (zs < 0 || zs > (1 << b) - 1) {
                rc_gptq_packed_free(p);
                return rc_fail(e, RC_E_RANGE, "GPTQ writer: '%s' row %lld group %lld: zero %d cannot be stored in the "
                               "%s format", t->name, (long long)n, (long long)j, z, s->gptq_v1 ? "gptq (v1: z - 1)" :
                               "gptq_v2");
            }
            p->scales[j * N + n] = h;
            uint32_t *w = (uint32_t *)&p->qzeros[j * p->cols_z + n / per];
            *w |= (uint32_t)zs << (b * (n % per));
        }
    for (int64_t k = 0; k < K; k++)
        p->g_idx[k] = (int32_t)(k / g);
    return RC_OK;
}

static int write_json(const char *path, const cJSON *j, rc_err *e)
{
    char *txt = cJSON_Print(j);
    if (!txt)
        return rc_fail(e, RC_E_NOMEM, "out of host memory");
    rc_atomic_file f;
    int rc = rc_atomic_open(&f, path, e);
    if (!rc) {
        if (fputs(txt, f.f) >= 0 && fputc('\n', f.f) != EOF)
            rc = rc_atomic_commit(&f, e);
        else {
            rc_atomic_abort(&f);
            rc = rc_fail(e, RC_E_IO, "%s: write failed", path);
        }
    }
    free(txt);
    return rc;
}

static int write_configs(const char *dir, const char *config_json, const rc_quant_scheme *s, rc_err *e)
{
    char path[4096];
    cJSON *cfg = rc_json_parse_strict(config_json, strlen(config_json), "the model's config.json", e);
    if (!cfg)
        return e->code;
    cJSON *q = rc_gptq_config_json(s), *q2 = q ? cJSON_Duplicate(q, 1) : NULL;
    int rc = RC_OK;
    if (!q2 || !cJSON_IsObject(cfg)) {
        cJSON_Delete(q);
        rc = rc_fail(e, cJSON_IsObject(cfg) ? RC_E_NOMEM : RC_E_FORMAT, "GPTQ writer: the model's config.json is "
                     "not an object (or out of memory)");
    } else {
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, "quantization_config");
        cJSON_AddItemToObject(cfg, "quantization_config", q);
        snprintf(path, sizeof path, "%s/quantize_config.json", dir);
        rc = write_json(path, q2, e);
        snprintf(path, sizeof path, "%s/config.json", dir);
        if (!rc)
            rc = write_json(path, cfg, e);
    }
    cJSON_Delete(q2);
    cJSON_Delete(cfg);
    return rc;
}

int rc_gptq_write(const char *dir, const char *config_json, const rc_quant_scheme *s, const rc_tensors *full,
                  const rc_qtensor *q, int nq, rc_err *e)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return rc_fail(e, RC_E_IO, "%s: cannot create the checkpoint folder (%s)", dir, strerror(errno));
    const int n = full->n + 4 * nq;
    rc_st_entry *ent = rc_calloc(n ? n : 1, sizeof *ent, e, dir);
    rc_gptq_packed *pk = rc_calloc(nq ? nq : 1, sizeof *pk, e, dir);
    char (*names)[512] = rc_calloc(4 * (int64_t)nq + 1, sizeof *names, e, dir);
    int rc = ent && pk && names ? RC_OK : e->code, m = 0;
    for (int i = 0; !rc && i < nq; i++) {
        const char *nm = q[i].name;
        if (!ends_with(nm, ".weight") || strlen(nm) >= 400)
            rc = rc_fail(e, RC_E_USAGE, "GPTQ writer: quantized tensor name '%.200s' does not end in .weight", nm);
        else if (rc_tensors_find(full, nm))
            rc = rc_fail(e, RC_E_USAGE, "GPTQ writer: '%s' is given both quantized and in full precision", nm);
        else if (!rc_quant_policy_quantizes(nm, s))
            rc = rc_fail(e, RC_E_USAGE, "GPTQ writer: the policy keeps '%s' in full precision", nm);
        else
            rc = rc_gptq_pack(&q[i], s, &pk[i], e);
        if (rc)
            break;
        const int pl = (int)(strlen(nm) - strlen(".weight"));
        const void *data[4] = {pk[i].qweight, pk[i].qzeros, pk[i].scales, pk[i].g_idx};
        const int64_t shp[4][2] = {{pk[i].rows_w, q[i].n}, {pk[i].groups, pk[i].cols_z}, {pk[i].groups, q[i].n},
                                   {q[i].k, 0}};
        for (int p = 0; p < 4; p++) {
            snprintf(names[4 * i + p], sizeof names[0], "%.*s.%s", pl, nm, gptq_parts[p]);
            ent[m] = (rc_st_entry){.name = names[4 * i + p], .dtype = p == 2 ? "F16" : "I32", .ndim = p == 3 ? 1 : 2,
                                   .data = data[p]};
            ent[m].shape[0] = shp[p][0];
            ent[m].shape[1] = shp[p][1];
            m++;
        }
    }
    for (int i = 0; !rc && i < full->n; i++) {
        const rc_tensor *t = &full->t[i];
        if (t->is_i32)
            rc = rc_fail(e, RC_E_USAGE, "GPTQ writer: full-precision tensor '%s' holds int32 values", t->name);
        ent[m] = (rc_st_entry){.name = t->name, .dtype = "F32", .ndim = t->ndim, .data = t->data};
        memcpy(ent[m].shape, t->shape, sizeof t->shape);
        m++;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!rc)
        rc = rc_safetensors_write(path, ent, m, e);
    if (!rc)
        rc = write_configs(dir, config_json, s, e);
    for (int i = 0; pk && i < nq; i++)
        rc_gptq_packed_free(&pk[i]);
    free(pk);
    free(ent);
    free(names);
    return rc;
}
