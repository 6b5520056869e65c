/* golden_edit SRC.h5 OUT.h5 rename OLD NEW | empty: a golden whose probe OLD is renamed NEW (probe_order too),
 * or with no probes and no greedy steps, for the harness's bad-input tests (verdict_test.sh) without Python. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x)                                                                           \
    do {                                                                                   \
        if ((x) < 0) {                                                                     \
            fprintf(stderr, "golden_edit: %s:%d: %s failed\n", __FILE__, __LINE__, #x);   \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static void copy_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    char buf[1 << 16];
    size_t n;
    if (!in || !out) {
        fprintf(stderr, "golden_edit: cannot copy %s to %s\n", src, dst);
        exit(1);
    }
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            exit(1);
    fclose(in);
    if (fclose(out))
        exit(1);
}

/* probe_order (a variable-length string attribute) replaced by text */
static void write_order(hid_t f, const char *text)
{
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    CHECK(H5Tset_size(t, H5T_VARIABLE));
    CHECK(H5Tset_cset(t, H5T_CSET_UTF8));
    CHECK(H5Adelete(f, "probe_order"));
    hid_t a = H5Acreate2(f, "probe_order", t, s, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a);
    CHECK(H5Awrite(a, t, &text));
    CHECK(H5Aclose(a));
    CHECK(H5Sclose(s));
    CHECK(H5Tclose(t));
}

static char *read_order(hid_t f)
{
    hid_t a = H5Aopen(f, "probe_order", H5P_DEFAULT), t = H5Tcopy(H5T_C_S1);
    char *v = NULL;
    CHECK(a);
    CHECK(H5Tset_size(t, H5T_VARIABLE));
    CHECK(H5Tset_cset(t, H5T_CSET_UTF8));
    CHECK(H5Aread(a, t, &v));
    char *copy = strdup(v);
    H5free_memory(v);
    CHECK(H5Aclose(a));
    CHECK(H5Tclose(t));
    return copy;
}

/* an empty dataset of the same type in place of path: [0] or [0, cols] */
static void empty_dataset(hid_t f, const char *path)
{
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    CHECK(d);
    hid_t t = H5Dget_type(d), s = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int nd = H5Sget_simple_extent_dims(s, dims, NULL);
    CHECK(nd);
    dims[0] = 0;
    CHECK(H5Sclose(s));
    CHECK(H5Dclose(d));
    CHECK(H5Ldelete(f, path, H5P_DEFAULT));
    s = H5Screate_simple(nd, dims, NULL);
    d = H5Dcreate2(f, path, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d);
    CHECK(H5Dclose(d));
    CHECK(H5Sclose(s));
    CHECK(H5Tclose(t));
}

int main(int argc, char **argv)
{
    const int rename = argc == 6 && !strcmp(argv[3], "rename"), empty = argc == 4 && !strcmp(argv[3], "empty");
    if (!rename && !empty) {
        fprintf(stderr, "usage: golden_edit SRC.h5 OUT.h5 rename OLD NEW | empty\n");
        return 2;
    }
    copy_file(argv[1], argv[2]);
    hid_t f = H5Fopen(argv[2], H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f);
    char *order = read_order(f);
    if (rename) {
        char from[512], to[512];
        snprintf(from, sizeof from, "probes/%s", argv[4]);
        snprintf(to, sizeof to, "probes/%s", argv[5]);
        CHECK(H5Lmove(f, from, f, to, H5P_DEFAULT, H5P_DEFAULT));
        char *out = calloc(strlen(order) + strlen(argv[5]) + 2, 1), *save = NULL;
        for (char *line = strtok_r(order, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            strcat(out, *out ? "\n" : "");
            strcat(out, strcmp(line, argv[4]) ? line : argv[5]);
        }
        write_order(f, out);
        free(out);
    } else {
        char *save = NULL;
        for (char *line = strtok_r(order, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char path[512];
            snprintf(path, sizeof path, "probes/%s", line);
            CHECK(H5Ldelete(f, path, H5P_DEFAULT));
        }
        write_order(f, "");
        empty_dataset(f, "greedy/tokens");
        empty_dataset(f, "greedy/logits");
    }
    free(order);
    CHECK(H5Fclose(f));
    return 0;
}
