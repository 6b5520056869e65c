/* corrupt_golden SRC.h5 OUTDIR: writes damaged copies of a golden for the harness exit-code tests
 * (harness_corrupt.sh), through the HDF5 C API so the tests need no Python. */
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *src_path, *out_dir;

#define CHECK(x)                                                                       \
    do {                                                                               \
        if ((x) < 0) {                                                                 \
            fprintf(stderr, "corrupt_golden: %s:%d: %s failed\n", __FILE__, __LINE__, #x); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)len)) && fread(buf, 1, (size_t)len, f) == (size_t)len) {
        fclose(f);
        *n = (size_t)len;
        return buf;
    }
    fprintf(stderr, "corrupt_golden: %s: cannot read\n", path);
    exit(1);
}

/* Writes the first n bytes of the source as OUTDIR/name; returns the path (static buffer). */
static const char *copy(const char *name, size_t limit)
{
    static char path[4096];
    size_t n;
    char *buf = slurp(src_path, &n);
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, limit && limit < n ? limit : n, f) != (limit && limit < n ? limit : n) || fclose(f)) {
        fprintf(stderr, "corrupt_golden: %s: cannot write\n", path);
        exit(1);
    }
    free(buf);
    return path;
}

/* Reads dataset name as doubles, lets edit() change it (and its shape), writes it back as mem type. */
static void rewrite(const char *path, const char *name, hid_t file_type, hid_t mem_type,
                    void (*edit)(double *v, hsize_t *dims, int *ndim))
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), s = H5Dget_space(d);
    CHECK(d);
    CHECK(s);
    hsize_t dims[4];
    int nd = H5Sget_simple_extent_ndims(s);
    CHECK(nd);
    CHECK(H5Sget_simple_extent_dims(s, dims, NULL));
    hsize_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= dims[i];
    double *v = calloc(n + 1, sizeof *v);
    CHECK(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v));
    CHECK(H5Sclose(s));
    CHECK(H5Dclose(d));
    edit(v, dims, &nd);
    CHECK(H5Ldelete(f, name, H5P_DEFAULT));
    s = H5Screate_simple(nd, dims, NULL);
    CHECK(s);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    CHECK(H5Pset_create_intermediate_group(lcpl, 1));
    d = H5Dcreate2(f, name, file_type, s, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d);
    CHECK(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v));
    CHECK(H5Pclose(lcpl));
    CHECK(H5Dclose(d));
    CHECK(H5Sclose(s));
    CHECK(H5Fclose(f));
    free(v);
}

static void nudge_first(double *v, hsize_t *dims, int *nd) { (void)dims; (void)nd; v[0] += 0.5; }
static void huge_first(double *v, hsize_t *dims, int *nd) { (void)dims; (void)nd; v[0] = 1e6; }
static void nan_first(double *v, hsize_t *dims, int *nd) { (void)dims; (void)nd; v[0] = NAN; }
static void drop_column(double *v, hsize_t *dims, int *nd) { (void)v; (void)nd; dims[1] -= 1; }
static void keep_100_columns(double *v, hsize_t *dims, int *nd)
{
    (void)nd;
    for (hsize_t r = 0; r < dims[0]; r++)
        for (hsize_t c = 0; c < 100; c++)
            v[r * 100 + c] = v[r * dims[1] + c];
    dims[1] = 100;
}

static void inf_first(double *v, hsize_t *dims, int *nd) { (void)dims; (void)nd; v[0] = INFINITY; }
static void token_300(double *v, hsize_t *dims, int *nd) { (void)dims; (void)nd; v[0] = 300; }

/* Replaces root attribute name with n values of type t (data: n elements of t's memory type). */
static void set_attr(const char *path, const char *name, hid_t t, hsize_t n, const void *data)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f);
    CHECK(H5Adelete(f, name));
    hid_t s = H5Screate_simple(1, &n, NULL);
    CHECK(s);
    hid_t a = H5Acreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a);
    CHECK(H5Awrite(a, t, data));
    CHECK(H5Aclose(a));
    CHECK(H5Sclose(s));
    CHECK(H5Fclose(f));
}

/* Replaces dataset name by one of rank 1 and n elements declared with dcpl (no data written unless zeros). */
static void declare(const char *path, const char *name, hid_t type, hsize_t n, hid_t dcpl, int write_zeros)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f);
    CHECK(H5Ldelete(f, name, H5P_DEFAULT));
    hid_t s = H5Screate_simple(1, &n, NULL);
    CHECK(s);
    hid_t d = H5Dcreate2(f, name, type, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d);
    if (write_zeros) {
        float *z = calloc(n, sizeof *z);
        CHECK(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, z));
        free(z);
    }
    CHECK(H5Dclose(d));
    CHECK(H5Sclose(s));
    CHECK(H5Fclose(f));
}

static void p_null(const char *name)
{
    hid_t f = H5Fopen(copy(name, 0), H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f);
    CHECK(H5Ldelete(f, "probes/L0.attn.q", H5P_DEFAULT));
    hid_t s = H5Screate(H5S_NULL);
    CHECK(s);
    hid_t d = H5Dcreate2(f, "probes/L0.attn.q", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d);
    CHECK(H5Dclose(d));
    CHECK(H5Sclose(s));
    CHECK(H5Fclose(f));
}

/* hostile files: each must be refused with one line naming what is wrong (exit 2), never crash or pass */
static void hostile(void)
{
    int64_t seeds[256];
    for (int i = 0; i < 256; i++)
        seeds[i] = i;
    set_attr(copy("seed_list.h5", 0), "seed", H5T_NATIVE_INT64, 256, seeds);
    const int64_t v2[2] = {1, 77};
    set_attr(copy("format_version_pair.h5", 0), "format_version", H5T_NATIVE_INT64, 2, v2);
    hid_t vs = H5Tcopy(H5T_C_S1);
    CHECK(vs);
    CHECK(H5Tset_size(vs, H5T_VARIABLE));
    const char *xs[1000];
    for (int i = 0; i < 1000; i++)
        xs[i] = "x";
    set_attr(copy("created_list.h5", 0), "created", vs, 1000, xs);
    hid_t fs = H5Tcopy(H5T_C_S1);
    CHECK(fs);
    CHECK(H5Tset_size(fs, 8));
    char tv[500][8];
    memset(tv, 'a', sizeof tv);
    set_attr(copy("torch_version_list.h5", 0), "torch_version", fs, 500, tv);
    CHECK(H5Tclose(vs));
    CHECK(H5Tclose(fs));

    /* a chunked input_ids of 2^31 elements, no chunk written: a 1 MB file declaring 16 GB */
    hid_t pl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t chunk = 1 << 16;
    CHECK(pl);
    CHECK(H5Pset_chunk(pl, 1, &chunk));
    declare(copy("huge_ids.h5", 0), "input_ids", H5T_STD_I64LE, (hsize_t)1 << 31, pl, 0);
    /* a gzip probe of 4M zeros: small on disk, far beyond what the config implies */
    CHECK(H5Pset_deflate(pl, 9));
    declare(copy("gzip_probe.h5", 0), "probes/emb", H5T_IEEE_F32LE, 4u << 20, pl, 1);
    CHECK(H5Pclose(pl));

    /* a probe with a null dataspace */
    p_null("null_probe.h5");

    rewrite(copy("nan_weight.h5", 0), "weights/model.layers.0.mlp.up_proj.weight", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE,
            nan_first);
    rewrite(copy("nan_logits.h5", 0), "greedy/logits", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, nan_first);
    rewrite(copy("inf_probe.h5", 0), "probes/logits", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, inf_first);
    rewrite(copy("token_300.h5", 0), "greedy/tokens", H5T_STD_I64LE, H5T_NATIVE_DOUBLE, token_300);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: corrupt_golden SRC.h5 OUTDIR\n");
        return 2;
    }
    src_path = argv[1];
    out_dir = argv[2];
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    size_t n;
    free(slurp(src_path, &n));

    copy("truncated.h5", n / 2);
    copy("superblock_only.h5", 100); /* HDF5 signature, nothing after it */

    const char *p = copy("v2.h5", 0);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT), a = H5Aopen(f, "format_version", H5P_DEFAULT);
    const int64_t two = 2;
    CHECK(f);
    CHECK(a);
    CHECK(H5Awrite(a, H5T_NATIVE_INT64, &two));
    CHECK(H5Aclose(a));
    CHECK(H5Fclose(f));

    p = copy("missing_weight.h5", 0);
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f);
    CHECK(H5Ldelete(f, "weights/model.layers.0.mlp.up_proj.weight", H5P_DEFAULT));
    CHECK(H5Fclose(f));

    rewrite(copy("shape.h5", 0), "weights/model.layers.0.mlp.up_proj.weight", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE,
            drop_column);
    rewrite(copy("probe_shape.h5", 0), "probes/L0.attn.q", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, drop_column);
    rewrite(copy("vocab.h5", 0), "greedy/logits", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, keep_100_columns);
    rewrite(copy("bad_ids.h5", 0), "input_ids", H5T_STD_I64LE, H5T_NATIVE_DOUBLE, huge_first);
    rewrite(copy("bad_tokens.h5", 0), "greedy/tokens", H5T_STD_I64LE, H5T_NATIVE_DOUBLE, huge_first);
    p = copy("extra.h5", 0);
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f);
    const hsize_t d8[1] = {8};
    const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    hid_t s = H5Screate_simple(1, d8, NULL);
    CHECK(s);
    hid_t d = H5Dcreate2(f, "weights/model.layers.0.self_attn.rotary_emb.inv_freq", H5T_IEEE_F32LE, s, H5P_DEFAULT,
                         H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d);
    CHECK(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ones));
    CHECK(H5Dclose(d));
    CHECK(H5Sclose(s));
    CHECK(H5Fclose(f));

    /* valid files whose numbers differ from what the reference computes: a bound fails (exit 1) */
    rewrite(copy("weight_changed.h5", 0), "weights/model.layers.1.mlp.up_proj.weight", H5T_IEEE_F32LE,
            H5T_NATIVE_DOUBLE, nudge_first);
    rewrite(copy("nan_probe.h5", 0), "probes/L0.attn.q", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, nan_first);
    hostile();
    return 0;
}
