/* HDF5 golden reader: every HDF5 call checked, every handle closed in one place per function. Nothing in a
 * golden is trusted: attributes must hold one value, every dataset's declared size is bounded by the file
 * and by what the config implies before a byte is allocated, and every float must be finite. */
#include "golden.h"

#include <cjson/cJSON.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checksum.h"
#include "config.h"
#include "io.h"
#include "isolate.h"
#include "weights.h"

typedef struct h5ctx {
    const char *path;
    rc_err *e;
    int64_t file_size;
    /* bounds the config implies (-1: no config, only the file size bounds) */
    int64_t vocab, ctx, weight_max, row_max, state_rows;
} h5ctx;

static int h5fail(h5ctx *c, int code, const char *what)
{
    return rc_fail(c->e, code, "%s: %s", c->path, what);
}

static void hclose(hid_t id, herr_t (*fn)(hid_t))
{
    if (id >= 0)
        fn(id);
}

/* An attribute must hold exactly one value (a list where one is expected would overrun the buffer). */
static int attr_single(h5ctx *c, hid_t a, const char *name)
{
    hid_t sp = H5Aget_space(a);
    hssize_t np = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    H5S_class_t cls = sp < 0 ? H5S_NO_CLASS : H5Sget_simple_extent_type(sp);
    hclose(sp, H5Sclose);
    if (np != 1 || (cls != H5S_SCALAR && cls != H5S_SIMPLE))
        return rc_fail(c->e, RC_E_FORMAT, "%s: attribute '%s' holds %lld values, expected one", c->path, name,
                       (long long)np);
    return RC_OK;
}

/* Reads a string attribute of obj; *out is malloc'd. */
static int read_str_attr(h5ctx *c, hid_t obj, const char *name, int required, char **out)
{
    *out = NULL;
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0)
        return h5fail(c, RC_E_FORMAT, "H5Aexists failed (corrupt file?)");
    if (!ex) {
        if (!required)
            return RC_OK;
        return rc_fail(c->e, RC_E_FORMAT, "%s: attribute '%s' is missing (not a refchain golden?)", c->path, name);
    }
    int rc = RC_OK;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), ft = -1, mt = -1;
    if (a < 0 || (ft = H5Aget_type(a)) < 0 || H5Tget_class(ft) != H5T_STRING) {
        rc = rc_fail(c->e, RC_E_FORMAT, "%s: attribute '%s' is not a string", c->path, name);
        goto done;
    }
    if ((rc = attr_single(c, a, name)))
        goto done;
    htri_t var = H5Tis_variable_str(ft);
    mt = H5Tcopy(H5T_C_S1);
    if (var < 0 || mt < 0) {
        rc = h5fail(c, RC_E_FORMAT, "H5Tis_variable_str/H5Tcopy failed");
        goto done;
    }
    if (var) {
        char *s = NULL;
        if (H5Tset_size(mt, H5T_VARIABLE) < 0 || H5Tset_cset(mt, H5Tget_cset(ft)) < 0 || H5Aread(a, mt, &s) < 0 ||
            !s) {
            rc = rc_fail(c->e, RC_E_FORMAT, "%s: cannot read attribute '%s'", c->path, name);
            goto done;
        }
        *out = strdup(s);
        H5free_memory(s);
    } else {
        size_t n = H5Tget_size(ft);
        if (n == 0 || n > (uint64_t)c->file_size) {
            rc = rc_fail(c->e, RC_E_FORMAT, "%s: attribute '%s' declares %zu characters, more than the file holds",
                         c->path, name, n);
            goto done;
        }
        char *s = calloc(n + 1, 1);
        if (!s || H5Tset_size(mt, n + 1) < 0 || H5Tset_strpad(mt, H5T_STR_NULLTERM) < 0 || H5Aread(a, mt, s) < 0) {
            free(s);
            rc = rc_fail(c->e, RC_E_FORMAT, "%s: cannot read attribute '%s'", c->path, name);
            goto done;
        }
        *out = s;
    }
    if (!*out)
        rc = rc_fail(c->e, RC_E_NOMEM, "out of host memory");
done:
    hclose(mt, H5Tclose);
    hclose(ft, H5Tclose);
    hclose(a, H5Aclose);
    return rc;
}

static int read_int_attr(h5ctx *c, hid_t obj, const char *name, int64_t *out)
{
    htri_t ex = H5Aexists(obj, name);
    if (ex <= 0)
        return rc_fail(c->e, RC_E_FORMAT, "%s: attribute '%s' is missing (not a refchain golden?)", c->path, name);
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), t = a < 0 ? -1 : H5Aget_type(a);
    int rc = RC_OK;
    if (a < 0 || t < 0 || H5Tget_class(t) != H5T_INTEGER)
        rc = rc_fail(c->e, RC_E_FORMAT, "%s: attribute '%s' is not an integer", c->path, name);
    else if (!(rc = attr_single(c, a, name)) && H5Aread(a, H5T_NATIVE_INT64, out) < 0)
        rc = rc_fail(c->e, RC_E_FORMAT, "%s: attribute '%s' is not an integer", c->path, name);
    hclose(t, H5Tclose);
    hclose(a, H5Aclose);
    return rc;
}

/* Reads dataset 'name' (relative to loc) converting to 'memtype'; *data malloc'd. Before allocating, its
 * declared size must fit the file (uncompressed: its bytes are in the file) and cap elements (cap < 0: none;
 * what the config implies, the bound that also holds for compressed data). */
static int read_dataset(h5ctx *c, hid_t loc, const char *name, hid_t memtype, H5T_class_t want, int64_t cap,
                        int *ndim, int64_t *shape, void **data)
{
    *data = NULL;
    int rc = RC_OK;
    hid_t d = -1, s = -1, t = -1, pl = -1;
    htri_t ex = H5Lexists(loc, name, H5P_DEFAULT);
    if (ex <= 0)
        return rc_fail(c->e, RC_E_MISSING, "%s: dataset '%s' is missing", c->path, name);
    if ((d = H5Dopen2(loc, name, H5P_DEFAULT)) < 0 || (s = H5Dget_space(d)) < 0 || (t = H5Dget_type(d)) < 0) {
        rc = rc_fail(c->e, RC_E_FORMAT, "%s: cannot open dataset '%s'", c->path, name);
        goto done;
    }
    if (H5Tget_class(t) != want) {
        rc = rc_fail(c->e, RC_E_FORMAT, "%s: dataset '%s' has the wrong element type", c->path, name);
        goto done;
    }
    if (H5Sget_simple_extent_type(s) != H5S_SIMPLE && H5Sget_simple_extent_type(s) != H5S_SCALAR) {
        rc = rc_fail(c->e, RC_E_SHAPE, "%s: dataset '%s' has no data (null dataspace)", c->path, name);
        goto done;
    }
    int nd = H5Sget_simple_extent_ndims(s);
    hsize_t dims[RC_MAX_DIMS];
    if (nd < 0 || nd > RC_MAX_DIMS || H5Sget_simple_extent_dims(s, dims, NULL) < 0) {
        rc = rc_fail(c->e, RC_E_SHAPE, "%s: dataset '%s' has unsupported rank %d", c->path, name, nd);
        goto done;
    }
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        shape[i] = (int64_t)dims[i];
        if (dims[i] > (hsize_t)INT64_MAX || !rc_mul_i64(n, shape[i], &n)) {
            rc = rc_fail(c->e, RC_E_RANGE, "%s: dataset '%s' is too large", c->path, name);
            goto done;
        }
    }
    int64_t bytes;
    int nfilters = (pl = H5Dget_create_plist(d)) < 0 ? -1 : H5Pget_nfilters(pl);
    if (nfilters < 0 || !rc_mul_i64(n, (int64_t)H5Tget_size(t), &bytes)) {
        rc = rc_fail(c->e, RC_E_FORMAT, "%s: cannot read the layout of dataset '%s'", c->path, name);
        goto done;
    }
    if (nfilters == 0 && bytes > c->file_size) {
        rc = rc_fail(c->e, RC_E_SHAPE, "%s: dataset '%s' declares %lld bytes, more than the file's %lld", c->path,
                     name, (long long)bytes, (long long)c->file_size);
        goto done;
    }
    if (cap >= 0 && n > cap) {
        rc = rc_fail(c->e, RC_E_SHAPE, "%s: dataset '%s' declares %lld elements, the config implies at most %lld",
                     c->path, name, (long long)n, (long long)cap);
        goto done;
    }
    if (cap < 0 && nfilters > 0 && bytes > c->file_size) {
        rc = rc_fail(c->e, RC_E_SHAPE, "%s: compressed dataset '%s' declares %lld bytes and no config bounds it",
                     c->path, name, (long long)bytes);
        goto done;
    }
    *ndim = nd;
    size_t esz = H5Tget_size(memtype);
    void *buf = rc_calloc(n ? n : 1, (int64_t)esz, c->e, name);
    if (!buf) {
        rc = c->e->code;
        goto done;
    }
    if (n && H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        rc = rc_fail(c->e, RC_E_FORMAT, "%s: cannot read dataset '%s' (truncated or corrupt file?)", c->path, name);
        goto done;
    }
    *data = buf;
done:
    hclose(pl, H5Pclose);
    hclose(t, H5Tclose);
    hclose(s, H5Sclose);
    hclose(d, H5Dclose);
    return rc;
}

/* A golden holds what HF computed: a NaN or an infinity there is a broken file, not a reference. */
static int check_finite(h5ctx *c, const char *what, const char *name, const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return rc_fail(c->e, RC_E_FORMAT, "%s: %s%s holds %s at flat index %lld (a golden must be finite)",
                           c->path, what, name, isnan(v[i]) ? "NaN" : "an infinity", (long long)i);
    return RC_OK;
}

static int read_ids(h5ctx *c, hid_t loc, const char *name, int64_t cap, int32_t **out, int64_t *n, int64_t *shape2,
                    int want_ndim)
{
    int nd;
    int64_t shape[RC_MAX_DIMS];
    int64_t *raw;
    int rc = read_dataset(c, loc, name, H5T_NATIVE_INT64, H5T_INTEGER, cap, &nd, shape, (void **)&raw);
    if (rc)
        return rc;
    if (nd != want_ndim) {
        free(raw);
        return rc_fail(c->e, RC_E_SHAPE, "%s: dataset '%s' must have rank %d", c->path, name, want_ndim);
    }
    *n = shape[0];
    if (shape2)
        *shape2 = shape[0];
    int32_t *ids = rc_calloc(*n ? *n : 1, sizeof *ids, c->e, name);
    if (!ids) {
        free(raw);
        return c->e->code;
    }
    for (int64_t i = 0; i < *n; i++) {
        if (raw[i] < 0 || raw[i] > INT32_MAX || (c->vocab > 0 && raw[i] >= c->vocab)) {
            long long bad = (long long)raw[i];
            free(raw);
            free(ids);
            if (c->vocab > 0)
                return rc_fail(c->e, RC_E_RANGE, "%s: %s[%lld] = %lld is outside the vocabulary [0, %lld)", c->path,
                               name, (long long)i, bad, (long long)c->vocab);
            return rc_fail(c->e, RC_E_RANGE, "%s: %s[%lld] = %lld is not a token id", c->path, name, (long long)i, bad);
        }
        ids[i] = (int32_t)raw[i];
    }
    free(raw);
    *out = ids;
    return RC_OK;
}

static int read_float_tensor(h5ctx *c, hid_t loc, const char *group, const char *name, int64_t cap, int probe,
                             rc_tensors *store)
{
    int nd;
    int64_t shape[RC_MAX_DIMS], n = 0;
    float *data;
    int rc = read_dataset(c, loc, name, H5T_NATIVE_FLOAT, H5T_FLOAT, cap, &nd, shape, (void **)&data);
    if (rc)
        return rc;
    rc_numel(nd, shape, &n);
    if (probe && (nd == 0 || n == 0)) /* an empty probe would compare nothing and pass */
        rc = rc_fail(c->e, RC_E_SHAPE, "%s: probe '%s' is %s", c->path, name, nd ? "empty" : "a scalar");
    if (!rc)
        rc = check_finite(c, group, name, data, n);
    if (rc) {
        free(data);
        return rc;
    }
    return rc_tensors_add(store, name, nd, shape, data, c->e);
}

typedef struct iter_ctx {
    h5ctx *c;
    rc_tensors *store;
    int rc;
} iter_ctx;

static herr_t weight_iter(hid_t grp, const char *name, const H5L_info_t *info, void *op)
{
    (void)info;
    iter_ctx *it = op;
    it->rc = read_float_tensor(it->c, grp, "weights/", name, it->c->weight_max, 0, it->store);
    return it->rc ? -1 : 0;
}

static int read_probes(h5ctx *c, hid_t f, const char *order, int64_t T, rc_tensors *store)
{
    /* every probe is one row per prompt token (or per state row) of at most row_max values */
    int64_t cap = -1;
    if (c->row_max > 0 && !rc_mul_i64(T > c->state_rows ? T : c->state_rows, c->row_max, &cap))
        cap = -1;
    hid_t grp = H5Gopen2(f, "probes", H5P_DEFAULT);
    if (grp < 0)
        return rc_fail(c->e, RC_E_MISSING, "%s: group '/probes' is missing", c->path);
    int rc = RC_OK;
    const char *p = order;
    while (*p && !rc) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 0) {
            char name[256];
            if (len >= sizeof name) {
                rc = rc_fail(c->e, RC_E_FORMAT, "%s: probe name too long", c->path);
                break;
            }
            memcpy(name, p, len);
            name[len] = 0;
            rc = read_float_tensor(c, grp, "probes/", name, cap, 1, store);
        }
        p += len + (nl ? 1 : 0);
    }
    H5Gclose(grp);
    return rc;
}

typedef struct max_ctx {
    int64_t max;
} max_ctx;

static int max_numel(void *user, const char *name, int ndim, const int64_t *shape, const float **slot, int required)
{
    (void)name, (void)slot, (void)required;
    int64_t n;
    max_ctx *m = user;
    if (rc_numel(ndim, shape, &n) && n > m->max)
        m->max = n;
    return RC_OK;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The bounds the golden's own config implies: vocabulary, context, the largest weight, the widest row of any
 * probe. An unreadable config leaves them at -1 (the file size still bounds everything). */
static void config_bounds(h5ctx *c, const char *json)
{
    c->vocab = c->ctx = c->weight_max = c->row_max = -1;
    c->state_rows = 1;
    cJSON *root = cJSON_Parse(json);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    const cJSON *mp = cJSON_GetObjectItemCaseSensitive(root, "max_position_embeddings");
    if (!cJSON_IsNumber(mp))
        mp = cJSON_GetObjectItemCaseSensitive(tc, "max_position_embeddings");
    if (cJSON_IsNumber(mp) && mp->valuedouble >= 1 && mp->valuedouble < 9e15)
        c->ctx = (int64_t)mp->valuedouble;
    cJSON_Delete(root);
    rc_config cfg;
    rc_err ignore = {0};
    if (rc_config_parse(json, &cfg, &ignore))
        return;
    rc_weights w = {0};
    max_ctx m = {0};
    if ((w.layers = rc_calloc(cfg.n_layers, sizeof *w.layers, &ignore, "layers"))) {
        rc_weights_visit(&cfg, &w, max_numel, &m);
        c->weight_max = m.max;
    }
    free(w.layers);
    c->vocab = cfg.vocab;
    int64_t W = max64(max64(cfg.vocab, cfg.hidden), max64((int64_t)cfg.n_layers * cfg.ple_dim, cfg.max_intermediate));
    W = max64(W, 2 * (int64_t)cfg.max_heads * cfg.max_head_dim);
    for (int i = 0; i < cfg.n_layers; i++) {
        const rc_layer_desc *d = &cfg.layers[i];
        const int64_t kd = (int64_t)d->gdn_k_heads * d->gdn_k_dim, vd = (int64_t)d->gdn_v_heads * d->gdn_v_dim;
        W = max64(W, max64(2 * kd + vd, vd * d->gdn_k_dim)); /* conv channels; the state [Hv, dk, dv] */
        c->state_rows = max64(c->state_rows, d->gdn_conv_kernel);
    }
    c->row_max = W;
    rc_config_free(&cfg);
}

/* The HDF5 signature at offset 0, 512, 1024, 2048, ... (after a user block). */
static int has_hdf5_signature(const unsigned char *b, int64_t n)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    for (int64_t at = 0; at + 8 <= n; at = at ? 2 * at : 512)
        if (!memcmp(b + at, sig, 8))
            return 1;
    return 0;
}

static int load_file(h5ctx *c, hid_t f, int what, rc_golden *g)
{
    const char *path = c->path;
    rc_err *e = c->e;
    char *fmt = NULL, *order = NULL;
    int rc = read_str_attr(c, f, "format", 1, &fmt);
    if (!rc && strcmp(fmt, "refchain-golden") != 0)
        rc = rc_fail(e, RC_E_FORMAT, "%s: attribute 'format' = '%s', expected 'refchain-golden'", path, fmt);
    if (!rc)
        rc = read_int_attr(c, f, "format_version", &g->format_version);
    if (!rc)
        rc = read_str_attr(c, f, "regenerate", 0, &g->regenerate);
    if (!rc && g->format_version != RC_GOLDEN_FORMAT_VERSION)
        rc = rc_fail(e, RC_E_FORMAT, "%s: format_version %lld, this build reads %d. HINT: regenerate with: %s", path,
                     (long long)g->format_version, RC_GOLDEN_FORMAT_VERSION,
                     g->regenerate ? g->regenerate : "python3 golden/gen.py --all");
    if (!rc) rc = read_str_attr(c, f, "config_json", 1, &g->config_json);
    if (!rc) config_bounds(c, g->config_json);
    if (!rc) rc = read_str_attr(c, f, "probe_order", 1, &order);
    if (!rc) rc = read_str_attr(c, f, "preset", 1, &g->preset);
    if (!rc) rc = read_str_attr(c, f, "model_type", 1, &g->model_type);
    if (!rc) rc = read_str_attr(c, f, "generator", 0, &g->generator);
    if (!rc) rc = read_str_attr(c, f, "created", 0, &g->created);
    if (!rc) rc = read_str_attr(c, f, "transformers_version", 0, &g->transformers_version);
    if (!rc) rc = read_str_attr(c, f, "torch_version", 0, &g->torch_version);
    if (!rc) rc = read_int_attr(c, f, "seed", &g->seed);
    if (!rc) rc = read_str_attr(c, f, "weights_file", 0, &g->weights_file);
    if (!rc && g->weights_file) {
        rc = read_str_attr(c, f, "weights_sha256", 1, &g->weights_sha256);
        if (!rc) rc = read_int_attr(c, f, "weights_size", &g->weights_size);
    }
    if (!rc) rc = read_ids(c, f, "input_ids", c->ctx, &g->ids, &g->n_ids, NULL, 1);
    if (!rc && g->n_ids < 1)
        rc = rc_fail(e, RC_E_SHAPE, "%s: input_ids is empty", path);
    if (!rc) rc = read_ids(c, f, "greedy/tokens", c->ctx > 0 ? c->ctx - g->n_ids : -1, &g->greedy_tokens, &g->n_steps,
                           NULL, 1);
    if (!rc && c->ctx > 0 && g->n_ids + g->n_steps > c->ctx)
        rc = rc_fail(e, RC_E_RANGE, "%s: %lld prompt tokens and %lld greedy steps exceed the context of %lld", path,
                     (long long)g->n_ids, (long long)g->n_steps, (long long)c->ctx);
    if (!rc) {
        int nd;
        int64_t shape[RC_MAX_DIMS], cap = -1;
        if (c->vocab > 0 && !rc_mul_i64(g->n_steps, c->vocab, &cap))
            cap = -1;
        rc = read_dataset(c, f, "greedy/logits", H5T_NATIVE_FLOAT, H5T_FLOAT, cap, &nd, shape,
                          (void **)&g->greedy_logits);
        if (!rc && (nd != 2 || shape[0] != g->n_steps || (c->vocab > 0 && shape[1] != c->vocab)))
            rc = rc_fail(e, RC_E_SHAPE, "%s: greedy/logits must be [%lld, vocab%s%.0f]", path, (long long)g->n_steps,
                         c->vocab > 0 ? " = " : "", c->vocab > 0 ? (double)c->vocab : 0.0);
        if (!rc) {
            g->vocab = shape[1];
            rc = check_finite(c, "greedy/", "logits", g->greedy_logits, g->n_steps * g->vocab);
        }
    }
    if (!rc && (what & RC_GOLDEN_PROBES))
        rc = read_probes(c, f, order, g->n_ids, &g->probes);
    if (!rc && (what & RC_GOLDEN_WEIGHTS) && !g->weights_file) { /* referenced weights: rc_model_from_golden */
        hid_t grp = H5Gopen2(f, "weights", H5P_DEFAULT);
        if (grp < 0)
            rc = rc_fail(e, RC_E_MISSING, "%s: group '/weights' is missing", path);
        else {
            iter_ctx it = {.c = c, .store = &g->weights};
            hsize_t idx = 0;
            if (H5Literate(grp, H5_INDEX_NAME, H5_ITER_INC, &idx, weight_iter, &it) < 0)
                rc = it.rc ? it.rc : rc_fail(e, RC_E_FORMAT, "%s: cannot list '/weights'", path);
            H5Gclose(grp);
        }
    }
    free(fmt);
    free(order);
    return rc;
}

int rc_golden_load_image(const void *data, int64_t size, const char *path, int what, rc_golden *g, rc_err *e)
{
    memset(g, 0, sizeof *g);
    h5ctx c = {.path = path, .e = e, .file_size = size};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (!has_hdf5_signature(data, size))
        return rc_fail(e, RC_E_FORMAT, "%s: not an HDF5 file", path);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1;
    /* the core driver parses the bytes in memory (a copy of data). HDF5 1.10 refuses an image whose name is an
     * existing file, so it gets a name that cannot exist; path only names it in messages. */
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0 || H5Pset_file_image(fapl, (void *)data, (size_t)size) < 0) {
        hclose(fapl, H5Pclose);
        return rc_fail(e, RC_E_FORMAT, "%s: cannot set up the HDF5 in-memory driver", path);
    }
    f = H5Fopen("/proc/self/refchain-golden-image", H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return rc_fail(e, RC_E_FORMAT, "%s: cannot open as HDF5 (truncated or corrupt?)", path);
    g->path = strdup(path);
    int rc = g->path ? load_file(&c, f, what, g) : rc_fail(e, RC_E_NOMEM, "out of host memory");
    if (H5Fclose(f) < 0 && !rc)
        rc = rc_fail(e, RC_E_FORMAT, "%s: H5Fclose failed", path);
    if (rc)
        rc_golden_free(g);
    return rc;
}

typedef struct {
    const void *data;
    int64_t size;
    const char *path;
    int what;
} image_args;

static int try_image(void *arg, rc_err *e) /* rc_isolated_fn: the whole load, its result dropped */
{
    const image_args *a = arg;
    rc_golden g;
    const int rc = rc_golden_load_image(a->data, a->size, a->path, a->what, &g, e);
    if (!rc)
        rc_golden_free(&g);
    return rc;
}

int rc_golden_load(const char *path, int what, rc_golden *g, rc_err *e)
{
    memset(g, 0, sizeof *g);
    int64_t size;
    int fd = rc_open_regular(path, "golden", &size, e);
    if (fd < 0)
        return e->code;
    unsigned char *buf = rc_calloc(size ? size : 1, 1, e, path);
    const int64_t got = buf ? (int64_t)rc_read_full(fd, buf, (size_t)size) : 0;
    close(fd);
    if (!buf)
        return e->code;
    int listed = 0, rc = got == size ? RC_OK : rc_fail(e, RC_E_IO, "%s: read failed", path);
    if (!rc && !has_hdf5_signature(buf, size))
        rc = rc_fail(e, RC_E_FORMAT, "%s: not an HDF5 file", path);
    /* verified before the HDF5 library parses a byte: a flipped byte can reach bugs inside libhdf5 */
    if (!rc && !(rc = rc_checksum_verify(path, buf, size, &listed, e)) && !listed) {
        static char warned[4096];
        if (strcmp(warned, path)) {
            fprintf(stderr, "warning: %s: no SHA256SUMS entry beside it; its bytes are not verified\n", path);
            snprintf(warned, sizeof warned, "%s", path);
        }
    }
    /* unverified bytes go to libhdf5 in a child process first: on a corrupt file it can crash, loop or run out of
     * memory rather than return an error (tests/hostile/README.md) */
    if (!rc && !listed) {
        image_args a = {.data = buf, .size = size, .path = path, .what = what};
        rc = rc_isolated_parse(path, "HDF5", size, try_image, &a, e);
    }
    if (!rc)
        rc = rc_golden_load_image(buf, size, path, what, g, e);
    free(buf);
    return rc;
}

void rc_golden_free(rc_golden *g)
{
    free(g->path);
    free(g->preset);
    free(g->model_type);
    free(g->generator);
    free(g->regenerate);
    free(g->created);
    free(g->transformers_version);
    free(g->torch_version);
    free(g->config_json);
    free(g->weights_file);
    free(g->weights_sha256);
    free(g->ids);
    free(g->greedy_tokens);
    free(g->greedy_logits);
    rc_tensors_free(&g->probes);
    rc_tensors_free(&g->weights);
    memset(g, 0, sizeof *g);
}
