/* The quantize command's folder: rc_gqtensor -> model/quant's rc_qtensor, the writer, the load-back check, the
 * atomic rename. */
#include "write_gptq.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gptq_layout.h"

/* sym: the scale family, q - zero signed; asym: the affine family with the integer zero. The dequant is the same
 * number: every scale is an fp16 value, so s * q, s * z and their difference are exact in fp32. */
static int to_qtensor(const rcq_linear *l, rc_qtensor *t, rc_err *e)
{
    const rc_gq_tensor *g = &l->q;
    int rc = rc_qtensor_alloc(t, l->name, g->sym ? RC_QF_SCALE : RC_QF_AFFINE, g->bits, g->rows, g->cols, g->group,
                              !g->sym, e);
    if (rc)
        return rc;
    for (int64_t r = 0; r < g->rows; r++)
        for (int64_t c = 0; c < g->cols; c++) {
            const int64_t gi = r * g->n_groups + c / g->group;
            t->q[r * g->cols + c] = (int8_t)(g->sym ? (int)g->q[r * g->cols + c] - (int)g->zero[gi]
                                                    : (int)g->q[r * g->cols + c]);
        }
    memcpy(t->scale, g->scale, (size_t)(g->rows * g->n_groups) * sizeof *t->scale);
    if (!g->sym) {
        for (int64_t i = 0; i < g->rows * g->n_groups; i++)
            t->zero[i] = g->zero[i];
        rc_qtensor_set_offsets(t);
    }
    return RC_OK;
}

static int write_meta(const char *path, const rcq_opts *o, const rcq_meta *meta, rc_err *e)
{
    char sch[48];
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "tool", "refchain quantize");
    cJSON_AddStringToObject(r, "scheme", rc_gq_scheme_str(&o->scheme, sch, sizeof sch));
    cJSON_AddStringToObject(r, "method", meta->method);
    cJSON_AddBoolToObject(r, "lm_head", o->lm_head);
    cJSON_AddStringToObject(r, "source", meta->source);
    cJSON_AddNumberToObject(r, "calibration_tokens", (double)meta->calib_tokens);
    cJSON_AddNumberToObject(r, "damp", meta->damp);
    cJSON_AddNumberToObject(r, "block", meta->block);
    char *text = cJSON_Print(r);
    cJSON_Delete(r);
    FILE *f = text ? fopen(path, "w") : NULL;
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f)
        ok = (fclose(f) == 0) && ok;
    free(text);
    return ok ? RC_OK : rc_fail(e, RC_E_IO, "%s: cannot write: %s", path, strerror(errno));
}

/* The folder loads back to m's tensors, bit for bit. */
static int verify(const char *tmp, const rc_model *m, rc_err *e)
{
    rc_model back;
    int rc = rc_model_load(&back, tmp, e);
    if (rc)
        return rc;
    for (int i = 0; i < m->store.n && !rc; i++) {
        const rc_tensor *a = &m->store.t[i], *b = rc_tensors_find(&back.store, a->name);
        if (!b || b->numel != a->numel || memcmp(a->data, b->data, (size_t)a->numel * sizeof *a->data))
            rc = rc_fail(e, RC_E_FORMAT, "quantize: %s reads back %s from the written folder", a->name,
                         b ? "different values" : "missing");
    }
    rc_model_free(&back);
    return rc;
}

static void remove_tmp(const char *tmp)
{
    DIR *d = opendir(tmp);
    char p[4400];
    for (struct dirent *x; d && (x = readdir(d));)
        if (strcmp(x->d_name, ".") && strcmp(x->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", tmp, x->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
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
    rc_tensors full = {0};
    rc_qtensor *qt = rc_calloc(q->n ? q->n : 1, sizeof *qt, e, "the quantized tensors");
    int rc = qt ? RC_OK : e->code;
    for (int i = 0; i < q->n && !rc; i++)
        rc = to_qtensor(&q->lin[i], &qt[i], e);
    for (int i = 0; i < m->store.n && !rc; i++) {
        const rc_tensor *t = &m->store.t[i];
        int quantized = 0;
        for (int j = 0; j < q->n && !quantized; j++)
            quantized = !strcmp(q->lin[j].name, t->name);
        if (quantized)
            continue;
        float *copy = rc_calloc(t->numel ? t->numel : 1, sizeof *copy, e, t->name);
        if (!copy) {
            rc = e->code;
            break;
        }
        memcpy(copy, t->data, (size_t)t->numel * sizeof *copy);
        rc = rc_tensors_add(&full, t->name, t->ndim, t->shape, copy, e);
    }
    const rc_quant_scheme qs = rcq_quant_scheme(&o->scheme, o->lm_head);
    if (!rc)
        rc = rc_gptq_write(tmp, meta->config_json, &qs, &full, qt, q->n, e);
    if (!rc) {
        snprintf(path, sizeof path, "%s/quantize.json", tmp);
        rc = write_meta(path, o, meta, e);
    }
    if (!rc)
        rc = verify(tmp, m, e);
    if (!rc && chmod(tmp, 0755)) /* mkdtemp made it 0700 */
        rc = rc_fail(e, RC_E_IO, "%s: cannot chmod: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, dir))
        rc = rc_fail(e, RC_E_IO, "%s: cannot rename %s into place: %s", dir, tmp, strerror(errno));
    if (rc)
        remove_tmp(tmp);
    for (int i = 0; qt && i < q->n; i++)
        rc_qtensor_free(&qt[i]);
    free(qt);
    rc_tensors_free(&full);
    return rc;
}
