/* json_check FILE EXIT_CODE: FILE is the JSON `harness compare --json` wrote for a run that exited EXIT_CODE:
 * a valid object whose exit_code matches, with one result per golden (verdict pass / fail). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *path, const char *why)
{
    fprintf(stderr, "json_check: %s: %s\n", path, why);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return fail("?", "usage: json_check FILE EXIT_CODE");
    const char *path = argv[1];
    const int want = atoi(argv[2]);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(path, "cannot open");
    static char buf[64 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *root = cJSON_ParseWithLength(buf, n);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return fail(path, "not a JSON object");
    }
    int rc = 0;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(root, "exit_code");
    const cJSON *results = cJSON_GetObjectItemCaseSensitive(root, "results");
    if (!cJSON_IsNumber(code) || code->valueint != want)
        rc = fail(path, "exit_code missing or different from the process's");
    else if (!cJSON_IsArray(results))
        rc = fail(path, "no results array");
    else if (want < 2) {
        int nfail = 0, n_res = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, results) {
            const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "verdict"));
            n_res++;
            if (!v || (strcmp(v, "pass") && strcmp(v, "fail")))
                rc = fail(path, "a result without a pass/fail verdict");
            else
                nfail += !strcmp(v, "fail");
        }
        if (!n_res)
            rc = fail(path, "empty results");
        else if ((want == 0) != (nfail == 0))
            rc = fail(path, "verdicts disagree with the exit code");
    }
    cJSON_Delete(root);
    if (!rc)
        printf("json_check: %s: valid, exit_code %d\n", path, want);
    return rc;
}
