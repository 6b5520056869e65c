/* Test tool: `tokenize TOKENIZER TEXT` prints TEXT's ids (no added specials); `tokenize --decode TOKENIZER
 * "IDS"` prints the ids' text and a newline, as the engine streams it. TOKENIZER: a tokenizer.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_text.h"

int main(int argc, char **argv)
{
    const int dec = argc == 4 && !strcmp(argv[1], "--decode");
    if (argc != 3 && !dec) {
        fprintf(stderr, "usage: tokenize [--decode] TOKENIZER.json TEXT|IDS\n");
        return 2;
    }
    rc_err e = {0};
    rc_text t;
    int32_t *ids = NULL;
    int64_t n = 0;
    int rc = eng_text_open(&t, NULL, argv[1 + dec], &e);
    if (!rc && dec) {
        if (!eng_parse_ids(argv[3], &ids, &n))
            rc = rc_fail(&e, RC_E_USAGE, "bad id list '%s'", argv[3]);
        eng_streamer st;
        eng_streamer_init(&st, &t, stdout);
        for (int64_t i = 0; i < n && !rc; i++)
            rc = eng_streamer_push(&st, ids[i], &e);
        if (!rc)
            rc = eng_streamer_finish(&st, &e);
        eng_streamer_free(&st);
    } else if (!rc) {
        rc = rc_tokenizer_encode(t.tok, argv[2], strlen(argv[2]), 0, &ids, &n, &e);
        for (int64_t i = 0; i < n && !rc; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        if (!rc)
            printf("\n");
    }
    free(ids);
    rc_text_free(&t);
    if (rc)
        fprintf(stderr, "tokenize: error: %s\n", e.msg);
    return rc ? 2 : 0;
}
