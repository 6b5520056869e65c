/* The fuzz targets that end with a tokenizer: a fixed text (ASCII, digits, whitespace, a two-byte character, a
 * special-token name, invalid UTF-8) encoded, decoded, and its ids decoded again through the streaming decoder. */
#ifndef RC_FUZZ_TEXT_H
#define RC_FUZZ_TEXT_H

#include <stdint.h>
#include <stdlib.h>

#include "tokenizer.h"

static void fuzz_text_roundtrip(const rc_tokenizer *t)
{
    static const char text[] = "Hello world, 12 345!\n\tcafé <|im_start|>user\xff\xfe ok";
    rc_err e = {0};
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
}

#endif
