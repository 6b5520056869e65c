/* Shared by the config suites (test_config.c, test_config_hybrid.c): edits of a config's JSON and the check
 * that a config is refused with the right code and message. Include after <cmocka.h>. */
#ifndef RC_CFGUTIL_H
#define RC_CFGUTIL_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* The object holding the last key of a dotted path ("rope_parameters.full_attention.rope_type",
 * "layer_types.0"), creating missing objects on the way; *last = that key. Cuts path at the dots. */
static inline cJSON *cfg_walk(cJSON *root, char *path, char **last)
{
    char *dot;
    while ((dot = strchr(path, '.'))) {
        *dot = 0;
        cJSON *next = cJSON_IsArray(root) ? cJSON_GetArrayItem(root, atoi(path))
                                          : cJSON_GetObjectItemCaseSensitive(root, path);
        if (!next) {
            next = cJSON_CreateObject();
            cJSON_AddItemToObject(root, path, next);
        }
        root = next;
        path = dot + 1;
    }
    *last = path;
    return root;
}

/* base with n (path, value) pairs applied: value is JSON text, NULL deletes the path; malloc'd text. */
static inline char *edit(const char *base, int n, const char *const *kv)
{
    cJSON *root = cJSON_Parse(base);
    assert_non_null(root);
    for (int i = 0; i < 2 * n; i += 2) {
        char path[256], *key;
        snprintf(path, sizeof path, "%s", kv[i]);
        cJSON *obj = cfg_walk(root, path, &key);
        cJSON *v = kv[i + 1] ? cJSON_Parse(kv[i + 1]) : NULL;
        assert_true(!kv[i + 1] || v);
        if (cJSON_IsArray(obj)) {
            assert_non_null(v);
            assert_true(cJSON_ReplaceItemInArray(obj, atoi(key), v));
        } else {
            cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
            if (v)
                cJSON_AddItemToObject(obj, key, v);
        }
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    assert_non_null(s);
    return s;
}
#define EDIT(base, ...) edit((base), (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *) / 2), \
                             (const char *[]){__VA_ARGS__})

/* Parses json (freed here); expects code (returned and in e) and a message naming n1 and n2 (each may be NULL),
 * with nothing left allocated. RC_TEST_VERBOSE=1 prints the message. */
static inline void refused_(char *json, int code, const char *n1, const char *n2, int line)
{
    rc_err e = {0};
    rc_config c;
    int rc = rc_config_parse(json, &c, &e);
    if (rc != code || (n1 && !strstr(e.msg, n1)) || (n2 && !strstr(e.msg, n2)))
        fprintf(stderr, "  line %d: got %s (%d) '%s', want %s naming '%s'%s%s\n", line, rc_code_name(rc), rc, e.msg,
                rc_code_name(code), n1 ? n1 : "", n2 ? " and " : "", n2 ? n2 : "");
    else if (getenv("RC_TEST_VERBOSE"))
        fprintf(stderr, "  refused [%s]: %s\n", rc_code_name(rc), e.msg);
    free(json);
    assert_int_equal(rc, code);
    assert_int_equal(e.code, code);
    if (n1)
        assert_non_null(strstr(e.msg, n1));
    if (n2)
        assert_non_null(strstr(e.msg, n2));
    assert_null(c.layers);
}
#define REFUSED(json, code, n1, n2) refused_((json), (code), (n1), (n2), __LINE__)

/* Parses json into c, which must load; prints the refusal otherwise. */
static inline void cfg_parse_ok(const char *json, rc_config *c)
{
    rc_err e = {0};
    int rc = rc_config_parse(json, c, &e);
    if (rc)
        fprintf(stderr, "  unexpected refusal: %s\n", e.msg);
    assert_int_equal(rc, RC_OK);
}

#endif
