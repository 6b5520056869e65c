/* Reading reports: typed fields of a report's JSON and the reports recorded in a folder (see report.h). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "report.h"

const char *rc_jstr(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : "";
}

double rc_jnum(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsNumber(it))
        return it->valuedouble;
    if (cJSON_IsString(it) && !strcmp(it->valuestring, "inf"))
        return INFINITY;
    return NAN;
}

const cJSON *rc_jget(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

static int cmp_created(const void *a, const void *b)
{
    return strcmp(((const rc_recorded *)a)->created, ((const rc_recorded *)b)->created);
}

int rc_reports_load(const char *dir, rc_recorded **out)
{
    DIR *d = opendir(dir);
    rc_recorded *list = NULL;
    int n = 0;
    if (!d) {
        *out = NULL;
        return 0;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".json"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        char *text = rc_read_text(path, "report", 0, NULL);
        cJSON *j = text ? cJSON_Parse(text) : NULL;
        free(text);
        if (!j || strcmp(rc_jstr(j, "format"), "refchain-report")) {
            cJSON_Delete(j);
            continue;
        }
        rc_recorded *nl = realloc(list, (size_t)(n + 1) * sizeof *nl);
        if (!nl) {
            cJSON_Delete(j);
            break;
        }
        list = nl;
        snprintf(list[n].commit, sizeof list[n].commit, "%s", rc_jstr(j, "commit"));
        snprintf(list[n].created, sizeof list[n].created, "%s", rc_jstr(j, "created"));
        list[n].j = j;
        n++;
    }
    closedir(d);
    qsort(list, (size_t)n, sizeof *list, cmp_created);
    *out = list;
    return n;
}
