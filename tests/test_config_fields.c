/* model/config_fields.c and the RoPE scalings: metadata accepted knowingly, unknown and misspelled fields refused
 * by name, llama3 / linear / yarn parsed and their inv_freq bit-exact to HF, hostile JSON text refused. */
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
#include <unistd.h>

#include "cfgutil.h"
#include "config.h"
#include "config_fields.h"
#include "rope.h"
#include "rope_hf_cases.h"

static const char llama_json[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"head_dim\": 16, \"hidden_size\": 64, \"intermediate_size\": 128,"
    " \"max_position_embeddings\": 256, \"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
    " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, \"vocab_size\": 256,"
    " \"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}";

/* HF's buffers for real checkpoints' RoPE blocks (tests/rope_hf_cases.h): bit for bit, and cos/sin's factor.
 * Known exception: where torch's vectorised powf rounds theta^x one ulp away from the correctly rounded pow
 * (qwen3's theta 1e6 at head_dim 128, pair 37, on an AVX512 CPU), inv_freq may differ by that ulp. */
static void test_rope_inv_freq_matches_hf(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof rope_hf_cases / sizeof rope_hf_cases[0]; k++) {
        const rope_hf_case *h = &rope_hf_cases[k];
        rc_config c;
        cfg_parse_ok(h->config, &c);
        assert_int_equal(c.ropes[0].rot_dim / 2, h->half);
        float inv[RC_ROPE_MAX_HALF];
        rc_rope_inv_freq(inv, &c.ropes[0]);
        for (int i = 0; i < h->half; i++)
            if (h->vec_pow_differs[i] && fabsf(inv[i] - h->inv[i]) <= nextafterf(h->inv[i], INFINITY) - h->inv[i])
                fprintf(stderr, "  note: %s inv_freq[%d] = %a, HF %a (torch's vectorised powf)\n", h->name, i, inv[i],
                        h->inv[i]);
            else if (memcmp(&inv[i], &h->inv[i], sizeof inv[i])) {
                fprintf(stderr, "  %s: inv_freq[%d] = %a, HF %a\n", h->name, i, inv[i], h->inv[i]);
                fail();
            }
        float af = rc_rope_attn_factor(&c.ropes[0]);
        if (memcmp(&af, &h->attn_factor, sizeof af)) {
            fprintf(stderr, "  %s: attention factor %a, HF %a\n", h->name, af, h->attn_factor);
            fail();
        }
        assert_true(rc_config_features(&c) & RC_FEAT_ROPE_SCALING);
        rc_config_free(&c);
    }
}

/* Llama 3.1's published spelling: legacy rope_scaling, rope_theta at the top level. */
static void test_rope_llama3_legacy(void **state)
{
    (void)state;
    rc_config c;
    char *j = EDIT(llama_json, "rope_parameters", NULL, "rope_theta", "500000.0", "rope_scaling",
                   "{\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                   "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}");
    cfg_parse_ok(j, &c);
    free(j);
    const rc_rope_desc *r = &c.ropes[0];
    assert_int_equal(r->type, RC_ROPE_LLAMA3);
    assert_true(r->theta == 500000.0 && r->factor == 8.0 && r->low_freq_factor == 1.0 && r->high_freq_factor == 4.0);
    assert_true(r->original_max_pos == 8192.0);
    assert_true(rc_rope_attn_factor(r) == 1.0f);
    rc_config_free(&c);
    /* a top-level original_max_position_embeddings wins over the dictionary's, as in HF */
    j = EDIT(llama_json, "original_max_position_embeddings", "64", "rope_parameters",
             "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32}");
    cfg_parse_ok(j, &c);
    free(j);
    assert_true(c.ropes[0].original_max_pos == 64.0 && c.ropes[0].truncate == 1);
    assert_true(c.ropes[0].beta_fast == 32.0 && c.ropes[0].beta_slow == 1.0);
    assert_true(fabs(c.ropes[0].attn_factor - (0.1 * log(4.0) + 1.0)) < 1e-15);
    rc_config_free(&c);
    /* absent everywhere: max_position_embeddings */
    j = EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"yarn\", \"factor\": 2.0}");
    cfg_parse_ok(j, &c);
    free(j);
    assert_true(c.ropes[0].original_max_pos == 256.0);
    rc_config_free(&c);
    j = EDIT(llama_json, "rope_scaling", "{\"type\": \"linear\", \"factor\": 2.0}", "rope_parameters", NULL);
    cfg_parse_ok(j, &c);
    free(j);
    assert_int_equal(c.ropes[0].type, RC_ROPE_LINEAR);
    assert_true(c.ropes[0].factor == 2.0);
    assert_false(rc_config_features(&c) & RC_FEAT_PARTIAL_ROPE);
    rc_config_free(&c);
}

static void test_rope_scaling_refusals(void **state)
{
    (void)state;
    const int U = RC_E_UNSUPPORTED;
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"dynamic\", \"factor\": 2.0}"), U,
            "rope_parameters.rope_type", "dynamic NTK");
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"longrope\", \"factor\": 2.0}"), U,
            "rope_parameters.rope_type", "longrope");
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0,"
                 " \"high_freq_factor\": 4.0, \"beta_fast\": 32}"), U, "rope_parameters.beta_fast", "rope type");
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0,"
                 " \"high_freq_factor\": 1.0}"), U, "rope_parameters.high_freq_factor", "greater");
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"linear\", \"factor\": 0.5}"), U,
            "rope_parameters.factor", NULL);
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"linear\"}"), RC_E_FORMAT, "rope_parameters.factor",
            "required");
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"yarn\", \"factor\": 2.0, \"truncate\": 1}"), U,
            "rope_parameters.truncate", NULL);
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"yarn\", \"type\": \"linear\", \"factor\": 2.0}"), U,
            "rope_parameters.type", "conflicts");
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"yarn\", \"factor\": 2.0, \"attention_factor\": 0}"),
            U, "rope_parameters.attention_factor", NULL);
    REFUSED(EDIT(llama_json, "rope_parameters", "{\"rope_type\": \"default\", \"factor\": 2.0}"), U,
            "rope_parameters.factor", NULL);
    /* a misspelled math field is refused by name, never ignored */
    REFUSED(EDIT(llama_json, "rope_thetta", "500000.0"), U, "rope_thetta", "unknown field");
    REFUSED(EDIT(llama_json, "rope_parameters.rope_thetta", "500000.0"), U, "rope_parameters.rope_thetta", NULL);
}

/* Metadata a real export carries loads; its types and the few values that would change the math are checked. */
static void test_metadata(void **state)
{
    (void)state;
    rc_config c;
    char *j = EDIT(llama_json, "_model_name_or_path", "\"Smollm2 135M Instruct\"", "unk_token_id", "0",
                   "quantization_config", "{\"quant_method\": \"gguf\", \"dequantize\": true}", "pretraining_tp", "1",
                   "eos_token_id", "[1, 2]", "torch_dtype", "\"bfloat16\"", "initializer_range", "0.02",
                   "pruned_heads", "{}", "hidden_dropout", "0.1", "sliding_window", "null");
    cfg_parse_ok(j, &c);
    free(j);
    rc_config_free(&c);
    const int U = RC_E_UNSUPPORTED;
    REFUSED(EDIT(llama_json, "pretraining_tp", "2"), U, "pretraining_tp", "only 1");
    REFUSED(EDIT(llama_json, "quantization_config", "{\"quant_method\": \"bitsandbytes\"}"), U,
            "quantization_config.quant_method", "gguf");
    REFUSED(EDIT(llama_json, "unk_token_id", "\"zero\""), U, "unk_token_id", "expected");
    REFUSED(EDIT(llama_json, "pruned_heads", "{\"0\": [1]}"), U, "pruned_heads", NULL);
    REFUSED(EDIT(llama_json, "use_cache", "1"), U, "use_cache", "bool");
    /* math of another family, or refused math: by name, with the reason */
    REFUSED(EDIT(llama_json, "sliding_window", "4096"), U, "sliding_window", "for this model_type");
    REFUSED(EDIT(llama_json, "query_pre_attn_scalar", "256"), U, "query_pre_attn_scalar", "gemma");
    REFUSED(EDIT(llama_json, "rope_interleaved", "true"), U, "rope_interleaved", NULL);
    /* mistral: llama without bias options; a sliding window is refused */
    REFUSED(EDIT(llama_json, "model_type", "\"mistral\"", "sliding_window", "4096"), U, "sliding_window", "mistral");
    REFUSED(EDIT(llama_json, "model_type", "\"mistral\"", "attention_bias", "true"), U, "attention_bias",
            "for this model_type");
}

/* Hostile JSON text: each one line, RC_E_FORMAT (exit 2 at the command line). */
static void test_hostile_json(void **state)
{
    (void)state;
    const int F = RC_E_FORMAT;
    char buf[2048];
    snprintf(buf, sizeof buf, "\xEF\xBB\xBF%s", llama_json);
    REFUSED(strdup(buf), F, "byte-order mark", NULL);
    snprintf(buf, sizeof buf, "%s }", llama_json);
    REFUSED(strdup(buf), F, "text after the JSON value", NULL);
    snprintf(buf, sizeof buf, "%s\n\n{\"model_type\": \"qwen3\"}", llama_json);
    REFUSED(strdup(buf), F, "text after", NULL);
    snprintf(buf, sizeof buf, "{\"model_type\": \"qwen3\", %s", llama_json + 1); /* cJSON keeps the first */
    REFUSED(strdup(buf), F, "'model_type' appears twice", NULL);
    snprintf(buf, sizeof buf, "{\"rope_parameters\": {\"rope_theta\": 1.0, \"rope_theta\": 2.0}, %s", llama_json + 1);
    REFUSED(strdup(buf), F, "'rope_parameters' appears twice", NULL);
    snprintf(buf, sizeof buf, "{\"x\": {\"rope_theta\": 1.0, \"rope_theta\": 2.0}, %s", llama_json + 1);
    REFUSED(strdup(buf), F, "'rope_theta' appears twice", NULL);
    char *j = EDIT(llama_json, "model_type", NULL);
    snprintf(buf, sizeof buf, "{\"model_type\": \"llama\\u0000x\", %s", j + 1);
    free(j);
    REFUSED(strdup(buf), F, "\\u0000", NULL);
    /* an escaped backslash before u0000 is text, not a NUL */
    j = EDIT(llama_json, "_name_or_path", "\"C:\\\\u0000dir\"");
    rc_config c;
    cfg_parse_ok(j, &c);
    free(j);
    rc_config_free(&c);
    /* a raw NUL byte in the file: the string would end there */
    char path[] = "/tmp/rc_cfg_nul_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    fwrite(llama_json, 1, strlen(llama_json), f);
    fwrite("\0garbage", 1, 8, f);
    fclose(f);
    rc_err e = {0};
    assert_int_equal(rc_config_load_file(path, &c, &e), F);
    assert_non_null(strstr(e.msg, "NUL byte"));
    assert_null(strchr(e.msg, '\n'));
    assert_null(c.layers);
    unlink(path);
}

/* The table: unique names, a reason on every row, types on metadata rows only. */
static void test_field_table(void **state)
{
    (void)state;
    int n = 0;
    for (const rc_config_field *f; (f = rc_config_field_at(n)); n++) {
        assert_true(f->reason && f->reason[0]);
        assert_true((f->cls == RC_FIELD_META) == (f->types != NULL));
        assert_ptr_equal(rc_config_field_find(f->name), f);
    }
    assert_true(n > 50);
    assert_null(rc_config_field_find("rope_thetta"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_inv_freq_matches_hf),
        cmocka_unit_test(test_rope_llama3_legacy),
        cmocka_unit_test(test_rope_scaling_refusals),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_hostile_json),
        cmocka_unit_test(test_field_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
