/* The classification of every config.json field we know: math we implement, math refused by name, or
 * metadata that cannot change the forward pass (read, type-checked, ignored). Unknown fields are refused. */
#ifndef RC_CONFIG_FIELDS_H
#define RC_CONFIG_FIELDS_H

typedef enum { RC_FIELD_MATH, RC_FIELD_REFUSED, RC_FIELD_META } rc_field_class;

typedef struct rc_config_field {
    const char *name;
    rc_field_class cls;
    /* metadata: the JSON types accepted, '|'-separated: int, num, str, bool, obj, strs (array of strings),
     * ids (an integer or an array of integers), empty (an empty object or array), null */
    const char *types;
    const char *reason;
} rc_config_field;

/* Row i of the table (NULL past the end), or the row named name (NULL if unknown). */
const rc_config_field *rc_config_field_at(int i);
const rc_config_field *rc_config_field_find(const char *name);
const char *rc_field_class_name(rc_field_class c);

#endif
