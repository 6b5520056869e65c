/* Unit tests of the engine command's text parts (suite 'unit', no GPU): the prompt as ids (text, chat
 * template = HF's apply_chat_template ids, --ids, the old id --prompt without a tokenizer, refusals) and the
 * streamed continuation (never half a character, whole = decode). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "eng_text.h"
#include "io.h"
#include "../testutil.h"

#ifndef RC_TEST_TOKENIZER_DIR
#define RC_TEST_TOKENIZER_DIR "tests/tokenizer"
#endif

static char *dir; /* an HF folder: SmolLM2's tokenizer.json, its chat template, eos 2 */
static cJSON *chat;

static void put_file(const char *name, const char *text)
{
    assert_int_equal(tu_write(tu_path(dir, name), text, strlen(text)), 0);
}

static int setup(void **state)
{
    (void)state;
    rc_err e = {0};
    char *c = rc_read_text(RC_TEST_TOKENIZER_DIR "/chat.json", "chat fixture", 0, &e);
    if (!c)
        return -1;
    chat = cJSON_Parse(c);
    dir = tu_tmpdir();
    if (tu_copy(RC_TEST_TOKENIZER_DIR "/smollm2.json", tu_path(dir, "tokenizer.json"), -1))
        return -1;
    cJSON *tc = cJSON_CreateObject();
    cJSON_AddStringToObject(tc, "chat_template",
                            cJSON_GetObjectItem(cJSON_GetObjectItem(chat, "templates"), "smollm2")->valuestring);
    cJSON_AddStringToObject(tc, "eos_token", "<|im_end|>");
    char *tcs = cJSON_Print(tc);
    put_file("tokenizer_config.json", tcs);
    put_file("config.json", "{\"eos_token_id\": 2}");
    free(tcs);
    cJSON_Delete(tc);
    free(c);
    return chat ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(dir);
    cJSON_Delete(chat);
    return 0;
}

static void test_chat_prompt_ids_match_hf(void **state)
{
    (void)state;
    rc_err e = {0};
    rc_text txt;
    assert_int_equal(eng_text_open(&txt, dir, NULL, &e), RC_OK);
    assert_non_null(txt.tok);
    assert_true(eng_is_stop(&txt, 2));
    assert_false(eng_is_stop(&txt, 1));
    int n = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(chat, "renders")) {
        if (strcmp(cJSON_GetObjectItem(r, "template")->valuestring, "smollm2"))
            continue;
        const cJSON *sys = cJSON_GetObjectItem(r, "system");
        eng_prompt p = {.prompt = cJSON_GetObjectItem(r, "user")->valuestring, .chat = 1,
                        .system = cJSON_IsString(sys) ? sys->valuestring : NULL};
        int32_t *ids;
        int64_t ni;
        int text_mode;
        assert_int_equal(eng_prompt_ids(&txt, &p, &ids, &ni, &text_mode, &e), RC_OK);
        assert_true(text_mode);
        const cJSON *want = cJSON_GetObjectItem(r, "smollm2_ids"), *it;
        assert_int_equal(ni, cJSON_GetArraySize(want));
        int64_t i = 0;
        cJSON_ArrayForEach(it, want) assert_int_equal(ids[i++], (int32_t)it->valuedouble);
        free(ids);
        n++;
    }
    assert_true(n >= 5);

    /* a plain text prompt: the tokenizer's ids (SmolLM2 adds no BOS) */
    eng_prompt p = {.prompt = "Hello world"};
    int32_t *ids, *want;
    int64_t ni, nw;
    int text_mode;
    assert_int_equal(eng_prompt_ids(&txt, &p, &ids, &ni, &text_mode, &e), RC_OK);
    assert_int_equal(rc_tokenizer_encode(txt.tok, "Hello world", 11, 0, &want, &nw, &e), RC_OK);
    assert_true(text_mode);
    assert_int_equal(ni, nw);
    assert_memory_equal(ids, want, (size_t)ni * sizeof *ids);
    free(ids);
    free(want);
    /* with a tokenizer, --prompt "1 2 3" is text; --ids is ids */
    p = (eng_prompt){.prompt = "1 2 3"};
    assert_int_equal(eng_prompt_ids(&txt, &p, &ids, &ni, &text_mode, &e), RC_OK);
    assert_int_equal(ni, 5); /* "1" " " "2" " " "3" as SmolLM2 splits digits */
    free(ids);
    p = (eng_prompt){.ids = "1, 2 3"};
    assert_int_equal(eng_prompt_ids(&txt, &p, &ids, &ni, &text_mode, &e), RC_OK);
    assert_false(text_mode);
    assert_int_equal(ni, 3);
    assert_int_equal(ids[2], 3);
    free(ids);
    rc_text_free(&txt);
}

static void expect_error(const rc_text *txt, eng_prompt p, int code, const char *needle)
{
    rc_err e = {0};
    int32_t *ids;
    int64_t n;
    int text_mode;
    assert_int_equal(eng_prompt_ids(txt, &p, &ids, &n, &text_mode, &e), code);
    assert_null(ids);
    if (!strstr(e.msg, needle))
        fprintf(stderr, "'%s' lacks '%s'\n", e.msg, needle);
    assert_non_null(strstr(e.msg, needle));
}

static void test_prompt_refusals(void **state)
{
    (void)state;
    rc_err e = {0};
    rc_text none;
    assert_int_equal(eng_text_open(&none, RC_TEST_TOKENIZER_DIR "/../../golden/llama.h5", NULL, &e), RC_OK);
    assert_null(none.tok);
    /* no tokenizer: --prompt keeps meaning ids */
    eng_prompt p = {.prompt = "3 1 4"};
    int32_t *ids;
    int64_t n;
    int text_mode;
    assert_int_equal(eng_prompt_ids(&none, &p, &ids, &n, &text_mode, &e), RC_OK);
    assert_false(text_mode);
    assert_int_equal(n, 3);
    free(ids);
    expect_error(&none, (eng_prompt){.prompt = "1 two 3"}, RC_E_MISSING, "token ids with --ids");
    expect_error(&none, (eng_prompt){.prompt = "hi", .chat = 1}, RC_E_MISSING, "--chat");
    expect_error(&none, (eng_prompt){0}, RC_E_USAGE, "exactly one");
    expect_error(&none, (eng_prompt){.prompt = "1", .ids = "1"}, RC_E_USAGE, "exactly one");
    expect_error(&none, (eng_prompt){.ids = "1 x"}, RC_E_USAGE, "--ids");
    expect_error(&none, (eng_prompt){.ids = "1", .chat = 1}, RC_E_USAGE, "--chat");
    expect_error(&none, (eng_prompt){.prompt = "hi", .system = "s"}, RC_E_USAGE, "--system needs --chat");

    /* a tokenizer without a template; then an unknown template */
    rc_text bare;
    assert_int_equal(eng_text_open(&bare, NULL, RC_TEST_TOKENIZER_DIR "/smollm2.json", &e), RC_OK);
    expect_error(&bare, (eng_prompt){.prompt = "hi", .chat = 1}, RC_E_MISSING, "no chat template");
    bare.chat_template = strdup("{{ messages[0]['content'] }}");
    expect_error(&bare, (eng_prompt){.prompt = "hi", .chat = 1}, RC_E_UNSUPPORTED, "not one we recognise");
    rc_text_free(&bare);
    assert_int_equal(eng_text_open(&bare, NULL, "/nonexistent/tokenizer.json", &e), RC_E_IO);
}

/* Streams the ids of a text with multi-byte characters one at a time: after every push the output so far is
 * whole characters only, and at the end it is the text and a newline. */
static void test_streamer(void **state)
{
    (void)state;
    rc_err e = {0};
    rc_text txt;
    assert_int_equal(eng_text_open(&txt, dir, NULL, &e), RC_OK);
    const char *text = "Emoji 😀👍🏽 日本語 naïve \xF0\x9F\x87\xAB\xF0\x9F\x87\xB7 end";
    int32_t *ids;
    int64_t n;
    assert_int_equal(rc_tokenizer_encode(txt.tok, text, strlen(text), 0, &ids, &n, &e), RC_OK);
    FILE *f = tmpfile();
    assert_non_null(f);
    eng_streamer st;
    eng_streamer_init(&st, &txt, f);
    int split_seen = 0;
    for (int64_t i = 0; i < n; i++) {
        const long before = ftell(f);
        assert_int_equal(eng_streamer_push(&st, ids[i], &e), RC_OK);
        const long after = ftell(f);
        split_seen += after == before; /* a token that ended inside a character printed nothing yet */
        char buf[512] = {0};
        rewind(f);
        assert_int_equal(fread(buf, 1, (size_t)after, f), (size_t)after);
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        assert_memory_equal(buf, text, (size_t)after); /* a prefix of the text: no partial or replaced chars */
    }
    assert_true(split_seen > 0);
    assert_int_equal(eng_streamer_finish(&st, &e), RC_OK);
    eng_streamer_free(&st);
    char buf[512] = {0};
    rewind(f);
    const size_t got = fread(buf, 1, sizeof buf - 1, f);
    assert_int_equal(got, strlen(text) + 1);
    assert_memory_equal(buf, text, strlen(text));
    assert_int_equal(buf[got - 1], '\n');
    fclose(f);
    free(ids);
    rc_text_free(&txt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_prompt_ids_match_hf),
        cmocka_unit_test(test_prompt_refusals),
        cmocka_unit_test(test_streamer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
