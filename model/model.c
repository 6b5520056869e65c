/* Model loading from a golden or an HF folder. */
#include "model.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "safetensors.h"

static int finish(rc_model *m, rc_err *e)
{
    int rc = rc_weights_bind(&m->cfg, &m->store, &m->w, e);
    if (rc)
        rc_model_free(m);
    return rc;
}

int rc_model_from_golden(rc_model *m, rc_golden *g, rc_err *e)
{
    memset(m, 0, sizeof *m);
    int rc = rc_config_parse(g->config_json, &m->cfg, e);
    if (rc) {
        char tmp[sizeof e->msg];
        snprintf(tmp, sizeof tmp, "%s", e->msg);
        return rc_fail(e, rc, "%s: %s", g->path, tmp);
    }
    m->store = g->weights;
    memset(&g->weights, 0, sizeof g->weights);
    return finish(m, e);
}

int rc_model_load_dir(rc_model *m, const char *dir, rc_err *e)
{
    memset(m, 0, sizeof *m);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = rc_config_load_file(path, &m->cfg, e);
    if (!rc)
        rc = rc_safetensors_load_dir(dir, &m->store, e);
    if (rc) {
        rc_model_free(m);
        return rc;
    }
    return finish(m, e);
}

int rc_model_load(rc_model *m, const char *path, rc_err *e)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return rc_fail(e, RC_E_IO, "%s: no such file or folder", path);
    if (S_ISDIR(st.st_mode))
        return rc_model_load_dir(m, path, e);
    rc_golden g;
    int rc = rc_golden_load(path, RC_GOLDEN_WEIGHTS, &g, e);
    if (rc)
        return rc;
    rc = rc_model_from_golden(m, &g, e);
    rc_golden_free(&g);
    return rc;
}

void rc_model_free(rc_model *m)
{
    rc_weights_free(&m->w);
    rc_tensors_free(&m->store);
    rc_config_free(&m->cfg);
}

int rc_model_check_ids(const rc_model *m, const int32_t *ids, int64_t n, rc_err *e)
{
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab)
            return rc_fail(e, RC_E_RANGE, "token id %d at position %lld is outside the vocabulary [0, %lld)", ids[i],
                           (long long)i, (long long)m->cfg.vocab);
        if (m->cfg.ple_dim && ids[i] >= m->cfg.ple_vocab)
            return rc_fail(e, RC_E_RANGE,
                           "token id %d at position %lld is outside the per-layer embedding table [0, %lld)", ids[i],
                           (long long)i, (long long)m->cfg.ple_vocab);
    }
    return RC_OK;
}
