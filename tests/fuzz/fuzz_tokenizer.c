/* libFuzzer target: bytes -> a tokenizer.json text -> rc_tokenizer_from_json_text (model, vocabulary, merges,
 * added tokens, normalizers, pre-tokenizer regexes, decoders), then a fixed text through it and back, and the same
 * ids through the streaming decoder. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
        static const char text[] = "Hello world, 12 345!\n\tcafé <|im_start|>user\xff\xfe ok";
        int32_t *ids = NULL;
        int64_t n = 0;
        if (!rc_tokenizer_encode(t, text, sizeof text - 1, 1, &ids, &n, &e)) {
            char *out = NULL;
            size_t len = 0;
            if (!rc_tokenizer_decode(t, ids, n, &out, &len, &e))
                free(out);
            rc_tok_stream st;
            rc_tok_stream_init(&st, t);
            const char *piece;
            size_t plen;
            for (int64_t i = 0; i < n; i++)
                if (rc_tok_stream_push(&st, ids[i], &piece, &plen, &e))
                    break;
            rc_tok_stream_finish(&st, &piece, &plen, &e);
            rc_tok_stream_free(&st);
        }
        free(ids);
        rc_tokenizer_free(t);
    }
    free(json);
    return 0;
}
