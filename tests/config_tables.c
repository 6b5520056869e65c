/* Prints the markdown tables the docs carry, so a test can hold the docs to the code:
 *   config_tables fields            model/config_fields.c's table (model/FIELDS.md)
 *   config_tables corpus FILE...    each real config.json: loads (and where it runs) or the math it is refused for
 * corpus exits 1 when a config is refused for a metadata field (metadata must never block a model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_fields.h"
#include "eng_weights.h"
#include "forward.h"

static int print_fields(void)
{
    printf("# config.json fields\n\n"
           "Generated from `model/config_fields.c` by `build/tests/config_tables fields` (the test `unit.config_fields_doc`\n"
           "fails when this file and the table differ). *math*: read by the parser of each model_type that has it\n"
           "(null or false elsewhere; any other value is refused for that model_type). *refused*: math we do not implement,\n"
           "refused by name unless null or false. *metadata*: read, type-checked and ignored — it cannot change the forward\n"
           "pass. A field in none of these rows is refused as unknown, so a misspelling (`rope_thetta`) never\n"
           "passes silently.\n\n| field | class | JSON types | reason |\n|---|---|---|---|\n");
    for (int i = 0; rc_config_field_at(i); i++) {
        const rc_config_field *f = rc_config_field_at(i);
        printf("| `%s` | %s | %s | %s |\n", f->name, rc_field_class_name(f->cls), f->types ? f->types : "",
               f->reason);
    }
    return 0;
}

/* The field a refusal names: "config field 'text_config.rope_parameters.x' ..." -> "rope_parameters". */
static void refused_field(const char *msg, char *out, size_t cap)
{
    const char *q = strstr(msg, "config field '");
    out[0] = 0;
    if (!q)
        return;
    q += strlen("config field '");
    if (strncmp(q, "text_config.", 12) == 0)
        q += 12;
    size_t n = strcspn(q, ".'");
    snprintf(out, cap, "%.*s", (int)n, q);
}

static int print_corpus(int n, char **paths)
{
    int bad = 0;
    printf("| config | outcome |\n|---|---|\n");
    for (int i = 0; i < n; i++) {
        const char *name = strrchr(paths[i], '/') ? strrchr(paths[i], '/') + 1 : paths[i];
        rc_config c;
        rc_err e = {0};
        if (rc_config_load_file(paths[i], &c, &e) == RC_OK) {
            rc_err se = {0};
            const int on_ref = rc_config_check(&c, &ref_caps, &se) == RC_OK;
            const int on_eng = eng_config_check(&c, &se) == RC_OK;
            printf("| %s | loads: %s, %d layers, hidden %lld; ref %s, engine %s |\n", name, c.model_type, c.n_layers,
                   (long long)c.hidden, on_ref ? "yes" : "no", on_eng ? "yes" : se.msg);
            rc_config_free(&c);
            continue;
        }
        char field[64];
        refused_field(e.msg, field, sizeof field);
        const rc_config_field *f = field[0] ? rc_config_field_find(field) : NULL;
        const int meta = f && f->cls == RC_FIELD_META && strcmp(field, "model_type") != 0;
        const char *msg = strstr(e.msg, "config field '") ? strstr(e.msg, "config field '") : e.msg;
        printf("| %s | refused%s: %s |\n", name, meta ? " FOR METADATA" : "", msg);
        bad |= meta || e.code != RC_E_UNSUPPORTED;
    }
    return bad;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "fields") == 0)
        return print_fields();
    if (argc >= 3 && strcmp(argv[1], "corpus") == 0)
        return print_corpus(argc - 2, argv + 2);
    fprintf(stderr, "usage: config_tables fields | corpus CONFIG.json...\n");
    return 2;
}
