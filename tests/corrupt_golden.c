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
    return 0;
}
