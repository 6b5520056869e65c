/* libFuzzer target: config.json text -> rc_config_parse (the model description every stage builds from). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    rc_config c;
    rc_err e = {0};
    if (rc_config_parse(text, &c, &e) == RC_OK) {
        int64_t n;
        rc_config_param_count(&c, &n);
        rc_config_free(&c);
    }
    free(text);
    return 0;
}
