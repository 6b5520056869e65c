/* Run-time fault injection for test builds: a stage asks rc_fault_active("name") where a known bug
 * can be switched on. Catalogue: harness/faults.json. Built with -Dfaults=true (RC_FAULTS) only; in any
 * other build every hook is the constant 0 and compiles away. */
#ifndef RC_FAULT_H
#define RC_FAULT_H

#ifdef __cplusplus
extern "C" {
#endif

#ifdef RC_FAULTS
/* 1 if fault `name` is selected: by rc_fault_select(), else by $REFCHAIN_FAULT (read once). */
int rc_fault_active(const char *name);
/* Selects one fault by name (NULL or "" = none); overrides $REFCHAIN_FAULT. */
void rc_fault_select(const char *name);
/* The selected fault's name, or NULL. */
const char *rc_fault_selected(void);
#define RC_FAULTS_BUILT 1
#else
#define rc_fault_active(name) ((void)(name), 0)
#define rc_fault_select(name) ((void)(name))
#define rc_fault_selected() ((const char *)0)
#define RC_FAULTS_BUILT 0
#endif

#ifdef __cplusplus
}
#endif

#endif
