/* HDF5 golden reader: every HDF5 call checked, every handle closed in one place per function. */
#include "golden.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct h5ctx {
    const char *path;
    rc_err *e;
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
        char *s = n ? calloc(n + 1, 1) : NULL;
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
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    int rc = RC_OK;
    if (a < 0 || H5Aread(a, H5T_NATIVE_INT64, out) < 0)
        rc = rc_fail(c->e, RC_E_FORMAT, "%s: attribute '%s' is not an integer", c->path, name);
    hclose(a, H5Aclose);
    return rc;
}

/* Reads dataset 'name' (relative to loc) converting to 'memtype'; *data malloc'd. */
static int read_dataset(h5ctx *c, hid_t loc, const char *name, hid_t memtype, H5T_class_t want, int *ndim,
                        int64_t *shape, void **data)
{
    *data = NULL;
    int rc = RC_OK;
    hid_t d = -1, s = -1, t = -1;
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
    hclose(t, H5Tclose);
    hclose(s, H5Sclose);
    hclose(d, H5Dclose);
    return rc;
}

static int read_ids(h5ctx *c, hid_t loc, const char *name, int32_t **out, int64_t *n, int64_t *shape2, int want_ndim)
{
    int nd;
    int64_t shape[RC_MAX_DIMS];
    int64_t *raw;
    int rc = read_dataset(c, loc, name, H5T_NATIVE_INT64, H5T_INTEGER, &nd, shape, (void **)&raw);
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
        if (raw[i] < 0 || raw[i] > INT32_MAX) {
            long long bad = (long long)raw[i];
            free(raw);
            free(ids);
            return rc_fail(c->e, RC_E_RANGE, "%s: %s[%lld] = %lld is not a token id", c->path, name, (long long)i, bad);
        }
        ids[i] = (int32_t)raw[i];
    }
    free(raw);
    *out = ids;
    return RC_OK;
}

static int read_float_tensor(h5ctx *c, hid_t loc, const char *path, const char *name, rc_tensors *store)
{
    int nd;
    int64_t shape[RC_MAX_DIMS];
    float *data;
    int rc = read_dataset(c, loc, path, H5T_NATIVE_FLOAT, H5T_FLOAT, &nd, shape, (void **)&data);
    if (rc)
        return rc;
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
    it->rc = read_float_tensor(it->c, grp, name, name, it->store);
    return it->rc ? -1 : 0;
}

static int read_probes(h5ctx *c, hid_t f, const char *order, rc_tensors *store)
{
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
            rc = read_float_tensor(c, grp, name, name, store);
        }
        p += len + (nl ? 1 : 0);
    }
    H5Gclose(grp);
    return rc;
}

int rc_golden_load(const char *path, int what, rc_golden *g, rc_err *e)
{
    memset(g, 0, sizeof *g);
    h5ctx c = {.path = path, .e = e};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (access(path, R_OK) != 0)
        return rc_fail(e, RC_E_IO, "%s: no such file or not readable", path);
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0)
        return rc_fail(e, RC_E_FORMAT, "%s: not an HDF5 file", path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return rc_fail(e, RC_E_FORMAT, "%s: cannot open as HDF5 (truncated or corrupt?)", path);
    g->path = strdup(path);
    char *fmt = NULL, *order = NULL;
    int rc = read_str_attr(&c, f, "format", 1, &fmt);
    if (!rc && strcmp(fmt, "refchain-golden") != 0)
        rc = rc_fail(e, RC_E_FORMAT, "%s: attribute 'format' = '%s', expected 'refchain-golden'", path, fmt);
    if (!rc)
        rc = read_int_attr(&c, f, "format_version", &g->format_version);
    if (!rc)
        rc = read_str_attr(&c, f, "regenerate", 0, &g->regenerate);
    if (!rc && g->format_version != RC_GOLDEN_FORMAT_VERSION)
        rc = rc_fail(e, RC_E_FORMAT, "%s: format_version %lld, this build reads %d. HINT: regenerate with: %s", path,
                     (long long)g->format_version, RC_GOLDEN_FORMAT_VERSION,
                     g->regenerate ? g->regenerate : "python3 golden/gen.py --all");
    if (!rc) rc = read_str_attr(&c, f, "config_json", 1, &g->config_json);
    if (!rc) rc = read_str_attr(&c, f, "probe_order", 1, &order);
    if (!rc) rc = read_str_attr(&c, f, "preset", 1, &g->preset);
    if (!rc) rc = read_str_attr(&c, f, "model_type", 1, &g->model_type);
    if (!rc) rc = read_str_attr(&c, f, "generator", 0, &g->generator);
    if (!rc) rc = read_str_attr(&c, f, "created", 0, &g->created);
    if (!rc) rc = read_str_attr(&c, f, "transformers_version", 0, &g->transformers_version);
    if (!rc) rc = read_str_attr(&c, f, "torch_version", 0, &g->torch_version);
    if (!rc) rc = read_int_attr(&c, f, "seed", &g->seed);
    if (!rc) rc = read_str_attr(&c, f, "weights_file", 0, &g->weights_file);
    if (!rc && g->weights_file) {
        rc = read_str_attr(&c, f, "weights_sha256", 1, &g->weights_sha256);
        if (!rc) rc = read_int_attr(&c, f, "weights_size", &g->weights_size);
    }
    if (!rc) rc = read_ids(&c, f, "input_ids", &g->ids, &g->n_ids, NULL, 1);
    if (!rc && g->n_ids < 1)
        rc = rc_fail(e, RC_E_SHAPE, "%s: input_ids is empty", path);
    if (!rc) rc = read_ids(&c, f, "greedy/tokens", &g->greedy_tokens, &g->n_steps, NULL, 1);
    if (!rc) {
        int nd;
        int64_t shape[RC_MAX_DIMS];
        rc = read_dataset(&c, f, "greedy/logits", H5T_NATIVE_FLOAT, H5T_FLOAT, &nd, shape, (void **)&g->greedy_logits);
        if (!rc && (nd != 2 || shape[0] != g->n_steps))
            rc = rc_fail(e, RC_E_SHAPE, "%s: greedy/logits must be [%lld, vocab]", path, (long long)g->n_steps);
        if (!rc)
            g->vocab = shape[1];
    }
    if (!rc && (what & RC_GOLDEN_PROBES))
        rc = read_probes(&c, f, order, &g->probes);
    if (!rc && (what & RC_GOLDEN_WEIGHTS) && !g->weights_file) { /* referenced weights: rc_model_from_golden */
        hid_t grp = H5Gopen2(f, "weights", H5P_DEFAULT);
        if (grp < 0)
            rc = rc_fail(e, RC_E_MISSING, "%s: group '/weights' is missing", path);
        else {
            iter_ctx it = {.c = &c, .store = &g->weights};
            hsize_t idx = 0;
            if (H5Literate(grp, H5_INDEX_NAME, H5_ITER_INC, &idx, weight_iter, &it) < 0)
                rc = it.rc ? it.rc : rc_fail(e, RC_E_FORMAT, "%s: cannot list '/weights'", path);
            H5Gclose(grp);
        }
    }
    free(fmt);
    free(order);
    if (H5Fclose(f) < 0 && !rc)
        rc = rc_fail(e, RC_E_FORMAT, "%s: H5Fclose failed", path);
    if (rc)
        rc_golden_free(g);
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
