/* The fault catalogue (harness/faults.json): where it is, how it is read, and selecting one of its faults
 * for a run. Shared by the chain (--fault), the faults command and the report. */
#ifndef HARNESS_FAULT_CATALOGUE_H
#define HARNESS_FAULT_CATALOGUE_H

/* $REFCHAIN_FAULTS, else the source tree's harness/faults.json. */
const char *rc_fault_catalogue_path(void);
/* The catalogue's root object (cJSON *), or NULL with one line printed. */
void *rc_fault_catalogue_load(const char *path);
/* Validates a --fault NAME against the catalogue and this build; selects it. Returns 0 or 2 (printed). */
int rc_fault_use(const char *name);

#endif
