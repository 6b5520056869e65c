/* The fault catalogue: its path, loading it, and selecting one fault by name (see fault_catalogue.h). */
#include "fault_catalogue.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "fault.h"
#include "io.h"
#include "util.h"

#ifndef RC_FAULT_CATALOGUE
#define RC_FAULT_CATALOGUE "harness/faults.json"
#endif

const char *rc_fault_catalogue_path(void)
{
    const char *p = getenv("REFCHAIN_FAULTS");
    return p && *p ? p : RC_FAULT_CATALOGUE;
}

void *rc_fault_catalogue_load(const char *path)
{
    return rc_json_file(path, "the fault catalogue", "refchain-faults", "faults", "a refchain-faults catalogue");
}

int rc_fault_use(const char *name)
{
    if (!RC_FAULTS_BUILT) {
        fprintf(stderr, "harness: error: --fault %s: this harness was built without fault hooks "
                        "(meson setup -Dfaults=true)\n", name);
        return RC_EXIT_ERROR;
    }
    cJSON *root = rc_fault_catalogue_load(rc_fault_catalogue_path());
    if (!root)
        return RC_EXIT_ERROR;
    const cJSON *f;
    int found = 0;
    char names[2048] = "";
    size_t n = 0;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(root, "faults"))
    {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
        const char *s = cJSON_IsString(nm) ? nm->valuestring : "";
        found |= !strcmp(s, name);
        if (n < sizeof names)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", s);
    }
    cJSON_Delete(root);
    if (!found) {
        fprintf(stderr, "harness: error: --fault %s: not in the catalogue %s (%s)\n", name, rc_fault_catalogue_path(),
                names);
        return RC_EXIT_ERROR;
    }
    rc_fault_select(name);
    return RC_EXIT_PASS;
}
