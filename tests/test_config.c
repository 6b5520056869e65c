/* model/config.c: HF config.json parsing, every capability-gate refusal, caps checks, overflow safety. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfgutil.h"
#include "config.h"
#include "testutil.h"

/* The llama golden's config as transformers 5 writes it (trimmed of nothing that matters). */
static const char llama_json[] =
    "{\"_name_or_path\": \"\", \"architectures\": null, \"attention_bias\": false, \"attention_dropout\": 0.0,"
    " \"bos_token_id\": 1, \"dtype\": \"float32\", \"eos_token_id\": 2, \"head_dim\": 16, \"hidden_act\": \"silu\","
    " \"hidden_size\": 64, \"id2label\": {\"0\": \"LABEL_0\"}, \"initializer_range\": 0.02,"
    " \"intermediate_size\": 128, \"label2id\": {\"LABEL_0\": 0}, \"max_position_embeddings\": 256,"
    " \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
    " \"num_key_value_heads\": 2, \"pad_token_id\": null, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-06,"
    " \"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}, \"tie_word_embeddings\": false,"
    " \"transformers_version\": \"5.17.0\", \"use_cache\": true, \"vocab_size\": 256}";

/* The qwen3 golden's config. */
static const char qwen3_json[] =
    "{\"attention_bias\": false, \"attention_dropout\": 0.0, \"bos_token_id\": null, \"dtype\": \"float32\","
    " \"eos_token_id\": null, \"head_dim\": 32, \"hidden_act\": \"silu\", \"hidden_size\": 64,"
    " \"intermediate_size\": 128, \"layer_types\": [\"full_attention\", \"full_attention\"],"
    " \"max_position_embeddings\": 256, \"max_window_layers\": 28, \"model_type\": \"qwen3\","
    " \"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06,"
    " \"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}, \"sliding_window\": null,"
    " \"tie_word_embeddings\": true, \"transformers_version\": \"5.17.0\", \"use_cache\": true,"
    " \"use_sliding_window\": false, \"vocab_size\": 256}";

/* ---- accepted configs ---- */

static void test_llama(void **state)
{
    (void)state;
    rc_config c;
    cfg_parse_ok(llama_json, &c);
    assert_string_equal(c.model_type, "llama");
    assert_int_equal(c.vocab, 256);
    assert_int_equal(c.hidden, 64);
    assert_int_equal(c.n_layers, 2);
    assert_true(c.eps == 1e-6f);
    assert_int_equal(c.norm, RC_NORM_W);
    assert_int_equal(c.act, RC_ACT_SILU);
    assert_int_equal(c.attn_bias, 0);
    assert_int_equal(c.mlp_bias, 0);
    assert_int_equal(c.tie_embeddings, 0);
    assert_true(c.emb_scale == 0.0f && c.final_softcap == 0.0f);
    assert_int_equal(c.n_ropes, 1);
    assert_string_equal(c.ropes[0].kind, "all");
    assert_int_equal(c.ropes[0].type, RC_ROPE_DEFAULT);
    assert_true(c.ropes[0].theta == 10000.0 && c.ropes[0].factor == 1.0);
    assert_int_equal(c.ropes[0].rot_dim, 16);
    assert_int_equal(c.ropes[0].n_freq, 8);
    assert_int_equal(c.ropes[0].exp_den, 16);
    for (int i = 0; i < c.n_layers; i++) {
        const rc_layer_desc *l = &c.layers[i];
        assert_int_equal(l->mixer, RC_MIXER_ATTN);
        assert_int_equal(l->state, RC_STATE_KV);
        assert_int_equal(l->n_heads, 4);
        assert_int_equal(l->n_kv_heads, 2); /* GQA */
        assert_int_equal(l->head_dim, 16);
        assert_int_equal(l->window, 0);
        assert_true(l->attn_scale == 0.25f);
        assert_int_equal(l->q_norm | l->k_norm | l->out_gate, 0);
        assert_int_equal(l->intermediate, 128);
    }
    assert_int_equal(c.max_heads, 4);
    assert_int_equal(c.max_kv_heads, 2);
    assert_int_equal(c.max_head_dim, 16);
    assert_int_equal(c.max_intermediate, 128);
    int64_t np = 0;
    assert_true(rc_config_param_count(&c, &np));
    /* 2 V Hd + Hd + L (2 Hd + Hd (H D + 2 Hkv D) + H D Hd + 3 Hd I) */
    assert_int_equal(np, 2 * 256 * 64 + 64 + 2 * (2 * 64 + 64 * (64 + 2 * 32) + 64 * 64 + 3 * 64 * 128));
    rc_config_free(&c);
    assert_null(c.layers);
}

/* llama without head_dim derives it as hidden / heads; without num_key_value_heads it is MHA. */
static void test_llama_derived(void **state)
{
    (void)state;
    rc_config c;
    char *j = EDIT(llama_json, "head_dim", NULL, "num_key_value_heads", NULL, "hidden_size", "96",
                   "num_attention_heads", "6", "attention_bias", "true", "mlp_bias", "true", "hidden_act",
                   "\"gelu_pytorch_tanh\"");
    cfg_parse_ok(j, &c);
    assert_int_equal(c.layers[0].head_dim, 16);
    assert_int_equal(c.layers[1].n_heads, 6);
    assert_int_equal(c.layers[1].n_kv_heads, 6);
    assert_int_equal(c.attn_bias, 1);
    assert_int_equal(c.mlp_bias, 1);
    assert_int_equal(c.act, RC_ACT_GELU_TANH);
    rc_config_free(&c);
    free(j);
    j = EDIT(llama_json, "hidden_act", "\"swish\"", "num_attention_heads", "8", "num_key_value_heads", "1",
             "head_dim", NULL);
    cfg_parse_ok(j, &c);
    assert_int_equal(c.act, RC_ACT_SILU);
    assert_int_equal(c.layers[0].head_dim, 8);
    assert_int_equal(c.layers[0].n_kv_heads, 1); /* MQA */
    assert_true(c.layers[0].attn_scale == (float)(1 / sqrt(8.0)));
    rc_config_free(&c);
    free(j);
}

static void test_qwen3(void **state)
{
    (void)state;
    rc_config c;
    cfg_parse_ok(qwen3_json, &c);
    assert_string_equal(c.model_type, "qwen3");
    assert_int_equal(c.tie_embeddings, 1);
    assert_int_equal(c.mlp_bias, 0);
    assert_int_equal(c.qk_norm, RC_NORM_W);
    assert_true(c.ropes[0].theta == 1e6);
    assert_int_equal(c.ropes[0].rot_dim, 32);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(c.layers[i].head_dim, 32);
        assert_int_equal(c.layers[i].n_heads, 4);
        assert_int_equal(c.layers[i].n_kv_heads, 2);
        assert_int_equal(c.layers[i].q_norm, 1);
        assert_int_equal(c.layers[i].k_norm, 1);
    }
    int64_t np = 0;
    assert_true(rc_config_param_count(&c, &np));
    /* tied: V Hd + Hd + L (2 Hd + Hd (H D + 2 Hkv D) + H D Hd + 2 D (q/k norms) + 3 Hd I) */
    assert_int_equal(np, 256 * 64 + 64 + 2 * (2 * 64 + 64 * (128 + 2 * 64) + 128 * 64 + 2 * 32 + 3 * 64 * 128));
    rc_config_free(&c);

    /* qwen3's head_dim defaults to 128, not hidden / heads */
    char *j = EDIT(qwen3_json, "head_dim", NULL, "layer_types", NULL);
    cfg_parse_ok(j, &c);
    assert_int_equal(c.layers[0].head_dim, 128);
    assert_int_equal(c.max_head_dim, 128);
    assert_int_equal(c.ropes[0].rot_dim, 128);
    assert_true(c.layers[0].attn_scale == (float)(1 / sqrt(128.0)));
    rc_config_free(&c);
    free(j);
}

/* rope theta from rope_parameters, from the legacy top-level rope_theta, and the default. */
static void test_rope_theta(void **state)
{
    (void)state;
    rc_config c;
    char *j = EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"default\", \"rope_theta\": 500000.0}");
    cfg_parse_ok(j, &c);
    assert_true(c.ropes[0].theta == 500000.0);
    rc_config_free(&c);
    free(j);
    j = EDIT(llama_json, "rope_parameters", NULL, "rope_theta", "250000.0");
    cfg_parse_ok(j, &c);
    assert_true(c.ropes[0].theta == 250000.0);
    rc_config_free(&c);
    free(j);
    j = EDIT(llama_json, "rope_parameters", NULL, "rope_scaling", "null", "rope_theta", "20000");
    cfg_parse_ok(j, &c);
    assert_true(c.ropes[0].theta == 20000.0);
    rc_config_free(&c);
    free(j);
    j = EDIT(llama_json, "rope_parameters", NULL, "rope_scaling", "{\"type\": \"default\"}");
    cfg_parse_ok(j, &c);
    assert_true(c.ropes[0].theta == 10000.0); /* llama's default */
    rc_config_free(&c);
    free(j);
    j = EDIT(qwen3_json, "rope_parameters", NULL, "rope_theta", NULL);
    cfg_parse_ok(j, &c);
    assert_true(c.ropes[0].theta == 10000.0);
    rc_config_free(&c);
    free(j);
}

/* ---- refusals: each names the field ---- */

static void test_refuse_model_type(void **state)
{
    (void)state;
    REFUSED(EDIT(llama_json, "model_type", "\"falcon\""), RC_E_UNSUPPORTED, "model_type", "falcon");
    REFUSED(EDIT(llama_json, "model_type", NULL), RC_E_FORMAT, "model_type", NULL);
    REFUSED(EDIT(llama_json, "model_type", "7"), RC_E_FORMAT, "model_type", NULL);
}

static void test_refuse_rope(void **state)
{
    (void)state;
    /* llama3 / linear / yarn load (test_config_fields.c); their required parameters are required */
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"llama3\"}"), RC_E_FORMAT,
            "rope_parameters.factor", "required");
    REFUSED(EDIT(llama_json, "rope_parameters", NULL, "rope_scaling", "{\"rope_type\": \"dynamic\", \"factor\": 2.0}"),
            RC_E_UNSUPPORTED, "rope_scaling.rope_type", "dynamic");
    REFUSED(EDIT(llama_json, "rope_scaling", "{\"rope_type\": \"yarn\"}"), RC_E_UNSUPPORTED, "rope_scaling",
            "conflicts");
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"default\", \"partial_rotary_factor\": 0.5}"),
            RC_E_UNSUPPORTED, "rope_parameters.partial_rotary_factor", NULL);
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": 3}"), RC_E_UNSUPPORTED, "rope_parameters.rope_type",
            NULL);
    REFUSED(EDIT(llama_json, "rope_parameters", "\"default\""), RC_E_UNSUPPORTED, "rope_parameters", NULL);
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"default\", \"rope_theta\": 0}"), RC_E_UNSUPPORTED,
            "rope_parameters.rope_theta", NULL);
    REFUSED(EDIT(llama_json, "rope_parameters", NULL, "rope_theta", "-5.0"), RC_E_UNSUPPORTED, "rope_theta", NULL);
}

static void test_refuse_qwen3_sliding(void **state)
{
    (void)state;
    REFUSED(EDIT(qwen3_json, "use_sliding_window", "true", "sliding_window", "4096"), RC_E_UNSUPPORTED,
            "use_sliding_window", NULL);
    REFUSED(EDIT(qwen3_json, "layer_types", "[\"full_attention\", \"sliding_attention\"]"), RC_E_UNSUPPORTED,
            "layer_types", "sliding_attention");
    REFUSED(EDIT(qwen3_json, "layer_types", "[\"full_attention\"]"), RC_E_UNSUPPORTED, "layer_types", NULL);
}

static void test_refuse_unknown_field(void **state)
{
    (void)state;
    REFUSED(EDIT(llama_json, "attn_logit_softcapping", "50.0"), RC_E_UNSUPPORTED, "attn_logit_softcapping", "50");
    REFUSED(EDIT(qwen3_json, "final_logit_softcapping", "30.0"), RC_E_UNSUPPORTED, "final_logit_softcapping", NULL);
    REFUSED(EDIT(qwen3_json, "mlp_bias", "true"), RC_E_UNSUPPORTED, "mlp_bias", NULL); /* not a qwen3 field */
    rc_config c; /* null means absent, for known and unknown fields alike */
    char *j = EDIT(llama_json, "attn_logit_softcapping", "null", "head_dim", "null");
    cfg_parse_ok(j, &c);
    assert_int_equal(c.layers[0].head_dim, 16);
    rc_config_free(&c);
    free(j);
}

static void test_refuse_activation(void **state)
{
    (void)state;
    REFUSED(EDIT(llama_json, "hidden_act", "\"relu\""), RC_E_UNSUPPORTED, "hidden_act", "relu");
    REFUSED(EDIT(llama_json, "hidden_act", "\"gelu\""), RC_E_UNSUPPORTED, "hidden_act", "gelu");
    REFUSED(EDIT(qwen3_json, "hidden_act", "1"), RC_E_UNSUPPORTED, "hidden_act", NULL);
}

static void test_refuse_heads(void **state)
{
    (void)state;
    REFUSED(EDIT(llama_json, "num_key_value_heads", "3"), RC_E_UNSUPPORTED, "num_key_value_heads", NULL);
    REFUSED(EDIT(llama_json, "num_key_value_heads", "8"), RC_E_UNSUPPORTED, "num_key_value_heads", NULL);
    REFUSED(EDIT(qwen3_json, "num_key_value_heads", "3"), RC_E_UNSUPPORTED, "num_key_value_heads", NULL);
    REFUSED(EDIT(llama_json, "num_attention_heads", "5", "num_key_value_heads", "5", "head_dim", NULL),
            RC_E_UNSUPPORTED, "num_attention_heads", "hidden_size");
}

static void test_refuse_odd_head_dim(void **state)
{
    (void)state;
    REFUSED(EDIT(llama_json, "head_dim", "15"), RC_E_UNSUPPORTED, "head_dim", "15");
    REFUSED(EDIT(qwen3_json, "head_dim", "33"), RC_E_UNSUPPORTED, "head_dim", "33");
    /* derived: 60 / 4 = 15 */
    REFUSED(EDIT(llama_json, "head_dim", NULL, "hidden_size", "60"), RC_E_UNSUPPORTED, "head_dim", "15");
}

/* Non-integer, wrong-typed, negative, zero and absurd sizes: refused, naming the field. */
static void test_refuse_bad_sizes(void **state)
{
    (void)state;
    static const char *const fields[] = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                         "num_attention_heads", "num_key_value_heads", "head_dim"};
    static const char *const values[] = {"64.5", "\"64\"", "true", "-1", "0", "1e12", "1e300", "[64]"};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++)
            for (int q = 0; q < 2; q++)
                REFUSED(EDIT(q ? qwen3_json : llama_json, fields[f], values[v]), RC_E_UNSUPPORTED, fields[f], NULL);
    REFUSED(EDIT(llama_json, "rms_norm_eps", "0"), RC_E_UNSUPPORTED, "rms_norm_eps", NULL);
    REFUSED(EDIT(llama_json, "rms_norm_eps", "-1e-6"), RC_E_UNSUPPORTED, "rms_norm_eps", NULL);
    REFUSED(EDIT(llama_json, "rms_norm_eps", "\"1e-6\""), RC_E_UNSUPPORTED, "rms_norm_eps", NULL);
    REFUSED(EDIT(llama_json, "attention_bias", "\"yes\""), RC_E_UNSUPPORTED, "attention_bias", NULL);
    REFUSED(EDIT(llama_json, "tie_word_embeddings", "1"), RC_E_UNSUPPORTED, "tie_word_embeddings", NULL);
    REFUSED(EDIT(llama_json, "mlp_bias", "0"), RC_E_UNSUPPORTED, "mlp_bias", NULL);
}

static void test_refuse_malformed(void **state)
{
    (void)state;
    static const char *const texts[] = {"", "{", "[1, 2]", "null", "\"llama\"", "{\"model_type\": \"llama\",}",
                                        "{\"model_type\": \"llama\" \"vocab_size\": 3}", "{'model_type': 'llama'}"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        REFUSED(strdup(texts[i]), RC_E_FORMAT, "config", NULL);
}

static void test_refuse_missing_required(void **state)
{
    (void)state;
    static const char *const req[] = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                      "num_attention_heads"};
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        REFUSED(EDIT(llama_json, req[i], NULL), RC_E_FORMAT, req[i], "required");
        REFUSED(EDIT(qwen3_json, req[i], "null"), RC_E_FORMAT, req[i], "required");
    }
}

/* rc_config_load_file: reads and parses, prefixes the path; a missing file is RC_E_IO. */
static void test_load_file(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    rc_config c;
    rc_err e = {0};
    assert_int_equal(rc_config_load_file(tu_path(dir, "absent.json"), &c, &e), RC_E_IO);
    assert_non_null(strstr(e.msg, "absent.json"));
    const char *p = tu_path(dir, "config.json");
    assert_int_equal(tu_write(p, qwen3_json, strlen(qwen3_json)), 0);
    assert_int_equal(rc_config_load_file(p, &c, &e), RC_OK);
    assert_int_equal(c.layers[1].head_dim, 32);
    rc_config_free(&c);
    char *bad = EDIT(qwen3_json, "hidden_act", "\"relu\"");
    assert_int_equal(tu_write(p, bad, strlen(bad)), 0);
    free(bad);
    assert_int_equal(rc_config_load_file(p, &c, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "config.json"));
    assert_non_null(strstr(e.msg, "hidden_act"));
    tu_rmdir(dir);
}

/* ---- capability checks ---- */

static void test_caps(void **state)
{
    (void)state;
    rc_config c;
    rc_err e = {0};
    cfg_parse_ok(llama_json, &c);
    const rc_caps ok = {.stage = "t", .max_head_dim = 16, .head_dim_multiple = 16, .mixers = 1u << RC_MIXER_ATTN};
    assert_int_equal(rc_config_check(&c, &ok, &e), RC_OK);

    rc_caps caps = ok;
    caps.max_head_dim = 8;
    assert_int_equal(rc_config_check(&c, &caps, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "head_dim = 16"));
    assert_non_null(strstr(e.msg, "stage t"));

    caps = ok;
    caps.head_dim_multiple = 32;
    assert_int_equal(rc_config_check(&c, &caps, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "multiple of 32"));

    caps = ok;
    caps.mixers = 1u << RC_MIXER_GDN;
    assert_int_equal(rc_config_check(&c, &caps, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "mixer"));

    c.layers[1].window = 4; /* as a sliding-window architecture would describe it */
    caps = ok;
    assert_int_equal(rc_config_check(&c, &caps, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "sliding_window"));
    assert_non_null(strstr(e.msg, "layer 1"));
    caps.sliding_window = 1;
    assert_int_equal(rc_config_check(&c, &caps, &e), RC_OK);
    rc_config_free(&c);
}

/* ---- overflow safety ---- */

/* vocab 2e9 x hidden 1e6 is inside the parser's ranges: it must be counted exactly (checked in 128 bits). */
static void test_absurd_sizes_counted(void **state)
{
    (void)state;
    rc_config c;
    char *j = EDIT(llama_json, "vocab_size", "2000000000", "hidden_size", "1000000", "num_attention_heads", "8",
                   "num_key_value_heads", "8", "head_dim", NULL, "intermediate_size", "4000000",
                   "num_hidden_layers", "4096");
    rc_err e = {0};
    int rc = rc_config_parse(j, &c, &e);
    free(j);
    if (getenv("RC_TEST_VERBOSE"))
        fprintf(stderr, "  absurd sizes: [%s] %s\n", rc_code_name(rc), rc ? e.msg : "parsed, counting");
    if (rc) { /* refusing is allowed, if it says why */
        assert_true(rc == RC_E_UNSUPPORTED || rc == RC_E_RANGE);
        assert_true(e.msg[0] != 0);
        return;
    }
    int64_t np = -1;
    assert_true(rc_config_param_count(&c, &np));
    const __int128 Hd = 1000000, V = 2000000000, hd = 125000, H = 8, I = 4000000, L = 4096;
    const __int128 want = 2 * V * Hd + Hd + L * (2 * Hd + Hd * (H * hd + 2 * H * hd) + H * hd * Hd + 3 * Hd * I);
    assert_true((__int128)np == want);
    rc_config_free(&c);
}

/* A description whose count does not fit 64 bits makes rc_config_param_count fail, not wrap. */
static void test_param_count_overflow(void **state)
{
    (void)state;
    rc_layer_desc l = {.mixer = RC_MIXER_ATTN, .n_heads = 4096, .n_kv_heads = 4096, .head_dim = 4096,
                       .intermediate = 1 << 22};
    rc_config c = {.vocab = INT64_MAX / 4, .hidden = 4, .n_layers = 1, .layers = &l};
    int64_t np = 7;
    assert_false(rc_config_param_count(&c, &np));
    assert_int_equal(np, 7);
    c.vocab = 1000;
    c.hidden = INT64_MAX / 8;
    assert_false(rc_config_param_count(&c, &np));
    c.hidden = 1 << 20;
    c.n_layers = 1;
    assert_true(rc_config_param_count(&c, &np));
    assert_true(np > 0);
    int64_t out = 5; /* and the helpers it rests on */
    assert_false(rc_mul_i64(INT64_MAX / 2 + 1, 2, &out));
    assert_false(rc_mul_i64(-1, 2, &out));
    assert_int_equal(out, 5);
    assert_true(rc_mul_i64(INT64_MAX, 1, &out));
    const int64_t shp[3] = {1 << 30, 1 << 30, 1 << 30};
    assert_false(rc_numel(3, shp, &out));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_llama_derived),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_rope_theta),
        cmocka_unit_test(test_refuse_model_type),
        cmocka_unit_test(test_refuse_rope),
        cmocka_unit_test(test_refuse_qwen3_sliding),
        cmocka_unit_test(test_refuse_unknown_field),
        cmocka_unit_test(test_refuse_activation),
        cmocka_unit_test(test_refuse_heads),
        cmocka_unit_test(test_refuse_odd_head_dim),
        cmocka_unit_test(test_refuse_bad_sizes),
        cmocka_unit_test(test_refuse_malformed),
        cmocka_unit_test(test_refuse_missing_required),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_absurd_sizes_counted),
        cmocka_unit_test(test_param_count_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
