/* Fault selection (see fault.h). */
#include "fault.h"

#ifdef RC_FAULTS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int loaded;
static char selected[64];

static void load(void)
{
    if (loaded)
        return;
    loaded = 1;
    const char *env = getenv("REFCHAIN_FAULT");
    snprintf(selected, sizeof selected, "%s", env ? env : "");
}

int rc_fault_active(const char *name)
{
    load();
    return selected[0] && strcmp(selected, name) == 0;
}

void rc_fault_select(const char *name)
{
    loaded = 1;
    snprintf(selected, sizeof selected, "%s", name ? name : "");
}

const char *rc_fault_selected(void)
{
    load();
    return selected[0] ? selected : NULL;
}
#else
typedef int rc_fault_unused; /* ISO C forbids an empty translation unit */
#endif
