/* libFuzzer target: bytes -> a tokenizer.json text -> rc_tokenizer_from_json_text (model, vocabulary, merges,
 * added tokens, normalizers, pre-tokenizer regexes, decoders), then fuzz_text_roundtrip through it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_text.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = malloc(size + 1); /* the parser takes a NUL-terminated text */
    if (!json)
        abort();
    memcpy(json, data, size);
    json[size] = '\0';
    rc_tokenizer *t = NULL;
    rc_err e = {0};
    if (!rc_tokenizer_from_json_text(&t, json, "fuzz.json", &e)) {
        fuzz_text_roundtrip(t);
        rc_tokenizer_free(t);
    }
    free(json);
    return 0;
}
