/* Model loading from a golden, an HF folder or a GGUF file. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "gptq_layout.h"
#include "io.h"
#include "safetensors.h"
#include "weights_ref.h"

static int finish(rc_model *m, rc_err *e)
{
    int rc = rc_weights_bind(&m->cfg, &m->store, &m->w, e);
    if (rc)
        rc_model_free(m);
    return rc;
}

/* The first description field in which a and b differ, or NULL. */
static const char *config_diff(const rc_config *a, const rc_config *b)
{
    if (strcmp(a->model_type, b->model_type)) return "model_type";
    if (a->vocab != b->vocab) return "vocab_size";
    if (a->hidden != b->hidden) return "hidden_size";
    if (a->n_layers != b->n_layers) return "num_hidden_layers";
    if (a->eps != b->eps) return "rms_norm_eps";
    if (a->norm != b->norm || a->qk_norm != b->qk_norm || a->v_norm != b->v_norm) return "norm kind";
    if (a->act != b->act) return "hidden_act";
    if (a->attn_bias != b->attn_bias) return "attention_bias";
    if (a->mlp_bias != b->mlp_bias) return "mlp_bias";
    if (a->tie_embeddings != b->tie_embeddings) return "tie_word_embeddings";
    if (a->emb_scale != b->emb_scale || a->final_softcap != b->final_softcap || a->post_norms != b->post_norms ||
        a->layer_scalar != b->layer_scalar || a->ple_dim != b->ple_dim || a->ple_vocab != b->ple_vocab)
        return "a gemma feature";
    if (strcmp(a->weight_prefix, b->weight_prefix)) return "weight prefix";
    if (a->n_ropes != b->n_ropes) return "rope tables";
    for (int i = 0; i < a->n_ropes; i++) {
        const rc_rope_desc *x = &a->ropes[i], *y = &b->ropes[i];
        if (strcmp(x->kind, y->kind) || x->type != y->type || x->theta != y->theta || x->factor != y->factor ||
            x->head_dim != y->head_dim || x->rot_dim != y->rot_dim || x->n_freq != y->n_freq ||
            x->exp_den != y->exp_den)
            return "rope parameters";
    }
    if (memcmp(a->layers, b->layers, (size_t)a->n_layers * sizeof *a->layers)) return "a layer's description";
    return NULL;
}

/* A GPTQ checkpoint's store dequantized in place, when config_text (a config.json, or quantize_config.json)
 * says it is one. */
static int dequant_if_gptq(rc_model *m, const char *config_text, const char *what, rc_err *e)
{
    rc_quant_scheme s;
    int found = 0, rc = rc_gptq_config_parse(config_text, what, &s, &found, e);
    if (!rc && found)
        rc = rc_gptq_dequant_store(&m->store, &s, &m->quant, what, e);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* A golden that references a .safetensors file: the golden's config_json describes it (a GPTQ one through
 * its quantization_config). */
static int from_golden_safetensors(rc_model *m, rc_golden *g, const char *path, rc_err *e)
{
    int rc = rc_config_parse(g->config_json, &m->cfg, e);
    if (rc) {
        char tmp[sizeof e->msg];
        snprintf(tmp, sizeof tmp, "%s", e->msg);
        return rc_fail(e, rc, "%s: %s", g->path, tmp);
    }
    if ((rc = rc_safetensors_load(path, &m->store, e)) || (rc = dequant_if_gptq(m, g->config_json, path, e))) {
        rc_model_free(m);
        return rc;
    }
    return finish(m, e);
}

/* A golden that references its weights: the file found on the search path, whose own description must
 * be the golden's config. */
static int from_golden_ref(rc_model *m, rc_golden *g, rc_err *e)
{
    char path[4096];
    int rc = rc_weights_ref_resolve(g->path, g->weights_file, g->weights_size, g->weights_sha256, path,
                                    (int)sizeof path, e);
    if (rc)
        return rc;
    if (!rc_gguf_is_gguf(path) && ends_with(path, ".safetensors"))
        return from_golden_safetensors(m, g, path, e);
    if (!rc_gguf_is_gguf(path))
        return rc_fail(e, RC_E_UNSUPPORTED, "%s: referenced weights file %s is neither a GGUF nor a .safetensors "
                       "file", g->path, path);
    if ((rc = rc_model_load(m, path, e)))
        return rc;
    rc_config hf;
    if ((rc = rc_config_parse(g->config_json, &hf, e))) {
        char tmp[sizeof e->msg];
        snprintf(tmp, sizeof tmp, "%s", e->msg);
        rc_model_free(m);
        return rc_fail(e, rc, "%s: %s", g->path, tmp);
    }
    const char *diff = config_diff(&m->cfg, &hf);
    rc_config_free(&hf);
    if (diff) {
        rc_model_free(m);
        return rc_fail(e, RC_E_FORMAT, "%s: the golden's config and %s's own description differ in %s", g->path,
                       path, diff);
    }
    return RC_OK;
}

int rc_model_from_golden(rc_model *m, rc_golden *g, rc_err *e)
{
    memset(m, 0, sizeof *m);
    if (g->weights_file)
        return from_golden_ref(m, g, e);
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
    char *text = rc ? NULL : rc_read_text(path, "config", 0, e);
    if (!rc && !text)
        rc = e->code;
    if (!rc)
        rc = dequant_if_gptq(m, text, path, e);
    free(text);
    snprintf(path, sizeof path, "%s/quantize_config.json", dir);
    if (!rc && !m->quant.on && access(path, F_OK) == 0) { /* AutoGPTQ: the scheme beside config.json */
        if (!(text = rc_read_text(path, "quantize_config.json", 0, e)))
            rc = e->code;
        else
            rc = dequant_if_gptq(m, text, path, e);
        free(text);
    }
    if (rc) {
        rc_model_free(m);
        return rc;
    }
    return finish(m, e);
}

int rc_model_load_gguf(rc_model *m, const char *path, rc_err *e)
{
    memset(m, 0, sizeof *m);
    int rc = rc_gguf_load_model(path, &m->cfg, &m->store, &m->quant, e);
    if (rc) {
        memset(m, 0, sizeof *m);
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
    if (rc_gguf_is_gguf(path))
        return rc_model_load_gguf(m, path, e);
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
    rc_quant_free(&m->quant);
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
