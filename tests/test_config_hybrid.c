/* model/ for qwen3_5_text, its qwen3_5 wrapper, gemma4_text and gemma3_text: the description the goldens' configs
 * parse into, the documented alternative spellings, the capability gate (every unsupported option is
 * refused by name: each case takes a golden's config and flips one field), weight binding, caps. */
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
#include "forward.h"
#include "golden.h"
#include "model.h"
#include "testutil.h"

static char *qwen_json, *gemma_json, *g3_json, *wrap_json; /* the goldens' config_json, and qwen3_5 wrapping it */

static void parse_ok(char *json, rc_config *c)
{
    rc_err e = {0};
    int rc = rc_config_parse(json, c, &e);
    if (rc)
        fprintf(stderr, "  unexpected refusal: %s\n", e.msg);
    free(json);
    assert_int_equal(rc, RC_OK);
}

#define UNSUP(json, n1, n2) REFUSED((json), RC_E_UNSUPPORTED, (n1), (n2))

/* ---- the goldens' configs ---- */

static void test_qwen3_5(void **state)
{
    (void)state;
    rc_config c;
    parse_ok(strdup(qwen_json), &c);
    assert_string_equal(c.model_type, "qwen3_5_text");
    assert_int_equal(c.n_layers, 4);
    for (int i = 0; i < 3; i++) {
        const rc_layer_desc *l = &c.layers[i];
        assert_int_equal(l->mixer, RC_MIXER_GDN);
        assert_int_equal(l->state, RC_STATE_RECURRENT);
        assert_int_equal(l->gdn_k_heads, 2);
        assert_int_equal(l->gdn_v_heads, 4);
        assert_int_equal(l->gdn_k_dim, 16);
        assert_int_equal(l->gdn_v_dim, 24);
        assert_int_equal(l->gdn_conv_kernel, 4);
        assert_int_equal(l->intermediate, 128);
    }
    const rc_layer_desc *f = &c.layers[3];
    assert_int_equal(f->mixer, RC_MIXER_ATTN);
    assert_int_equal(f->state, RC_STATE_KV);
    assert_int_equal(f->n_heads, 4);
    assert_int_equal(f->n_kv_heads, 2);
    assert_int_equal(f->head_dim, 32);
    assert_int_equal(f->window, 0);
    assert_true(f->q_norm && f->k_norm && f->out_gate && !f->v_norm);
    assert_true(f->attn_scale == (float)pow(32.0, -0.5));
    assert_int_equal(c.norm, RC_NORM_1PW);
    assert_int_equal(c.qk_norm, RC_NORM_1PW);
    assert_true(c.emb_scale == 0.0f && c.final_softcap == 0.0f);
    assert_true(!c.post_norms && !c.layer_scalar && !c.ple_dim && !c.tie_embeddings);
    assert_string_equal(c.weight_prefix, "model.");
    /* partial rotary: R = int(32 * 0.25) = 8, pairs (i, i + 4) inside the first 8 dims */
    assert_int_equal(c.n_ropes, 1);
    assert_string_equal(c.ropes[0].kind, "all");
    assert_int_equal(c.ropes[0].rot_dim, 8);
    assert_int_equal(c.ropes[0].n_freq, 4);
    assert_int_equal(c.ropes[0].exp_den, 8);
    assert_true(c.ropes[0].theta == 1e7);
    rc_config_free(&c);
}

static void test_qwen3_5_spellings(void **state)
{
    (void)state;
    rc_config c;
    /* layer_types absent: full iff (i + 1) % full_attention_interval == 0 */
    parse_ok(EDIT(qwen_json, "layer_types", NULL, "full_attention_interval", "2"), &c);
    assert_true(c.layers[0].mixer == RC_MIXER_GDN && c.layers[1].mixer == RC_MIXER_ATTN &&
                c.layers[2].mixer == RC_MIXER_GDN && c.layers[3].mixer == RC_MIXER_ATTN);
    rc_config_free(&c);
    parse_ok(EDIT(qwen_json, "layer_types", NULL), &c); /* default interval 4 */
    assert_true(c.layers[2].mixer == RC_MIXER_GDN && c.layers[3].mixer == RC_MIXER_ATTN);
    rc_config_free(&c);
    /* legacy layer type names */
    parse_ok(EDIT(qwen_json, "layer_types", "[\"mamba\", \"conv\", \"linear_attention\", \"attention\"]"), &c);
    assert_true(c.layers[1].mixer == RC_MIXER_GDN && c.layers[3].mixer == RC_MIXER_ATTN);
    rc_config_free(&c);
    /* partial_rotary_factor defaults to 0.25 even with a rope dictionary; the dictionary wins over the
     * top-level field; mrope keys only matter for multimodal positions */
    parse_ok(EDIT(qwen_json, "partial_rotary_factor", NULL, "rope_parameters.partial_rotary_factor", NULL), &c);
    assert_int_equal(c.ropes[0].rot_dim, 8);
    rc_config_free(&c);
    parse_ok(EDIT(qwen_json, "partial_rotary_factor", "1.0", "rope_parameters.partial_rotary_factor", "0.5",
                  "rope_parameters.mrope_section", "[11, 11, 10]", "rope_parameters.mrope_interleaved", "true"),
             &c);
    assert_int_equal(c.ropes[0].rot_dim, 16);
    rc_config_free(&c);
    parse_ok(EDIT(qwen_json, "rope_parameters", NULL, "rope_theta", "5000.0"), &c);
    assert_true(c.ropes[0].theta == 5000.0 && c.ropes[0].rot_dim == 8);
    rc_config_free(&c);
}

static void test_qwen3_5_wrapper(void **state)
{
    (void)state;
    rc_config a, b;
    parse_ok(strdup(qwen_json), &a);
    parse_ok(strdup(wrap_json), &b);
    assert_string_equal(b.model_type, "qwen3_5");
    assert_string_equal(b.weight_prefix, "model.language_model.");
    assert_int_equal(a.n_layers, b.n_layers);
    assert_memory_equal(a.layers, b.layers, sizeof *a.layers * (size_t)a.n_layers);
    assert_memory_equal(&a.ropes[0], &b.ropes[0], sizeof a.ropes[0]);
    assert_true(a.vocab == b.vocab && a.hidden == b.hidden && a.eps == b.eps);
    rc_config_free(&a);
    rc_config_free(&b);
    /* the wrapper's tie_word_embeddings decides (it owns lm_head) */
    parse_ok(EDIT(wrap_json, "tie_word_embeddings", "true", "text_config.tie_word_embeddings", "false"), &b);
    assert_true(b.tie_embeddings);
    rc_config_free(&b);
}

static void test_gemma4(void **state)
{
    (void)state;
    rc_config c;
    parse_ok(strdup(gemma_json), &c);
    assert_string_equal(c.model_type, "gemma4_text");
    assert_int_equal(c.n_layers, 6);
    for (int i = 0; i < 6; i++) {
        const rc_layer_desc *l = &c.layers[i];
        int full = i == 2 || i == 5;
        assert_int_equal(l->mixer, RC_MIXER_ATTN);
        assert_int_equal(l->state, full ? RC_STATE_KV : RC_STATE_KV_RING);
        assert_int_equal(l->window, full ? 0 : 8);
        assert_int_equal(l->head_dim, full ? 32 : 16);
        assert_int_equal(l->n_kv_heads, 2);
        assert_int_equal(l->rope, full ? 1 : 0);
        assert_true(l->attn_scale == 1.0f);
        assert_true(l->q_norm && l->k_norm && l->v_norm && !l->out_gate);
    }
    assert_int_equal(c.norm, RC_NORM_POW_W);
    assert_int_equal(c.qk_norm, RC_NORM_POW_W);
    assert_int_equal(c.v_norm, RC_NORM_POW);
    assert_int_equal(c.act, RC_ACT_GELU_TANH);
    assert_true(c.emb_scale == 8.0f && c.final_softcap == 30.0f);
    assert_true(c.post_norms && c.layer_scalar && c.tie_embeddings);
    assert_int_equal(c.ple_dim, 8);
    assert_int_equal(c.ple_vocab, 256);
    assert_int_equal(c.n_ropes, 2);
    /* sliding: default, whole head; full: proportional, exponent over D = 32, int(0.25 * 32 // 2) = 4 freqs */
    assert_string_equal(c.ropes[0].kind, "sliding");
    assert_true(c.ropes[0].type == RC_ROPE_DEFAULT && c.ropes[0].rot_dim == 16 && c.ropes[0].n_freq == 8);
    assert_true(c.ropes[0].theta == 1e4);
    assert_string_equal(c.ropes[1].kind, "full");
    assert_true(c.ropes[1].type == RC_ROPE_PROPORTIONAL && c.ropes[1].rot_dim == 32 && c.ropes[1].n_freq == 4);
    assert_true(c.ropes[1].exp_den == 32 && c.ropes[1].theta == 1e6 && c.ropes[1].factor == 1.0);
    rc_config_free(&c);
}

static void test_gemma4_spellings(void **state)
{
    (void)state;
    rc_config c;
    /* global_head_dim (the kwarg) instead of per_layer_config */
    parse_ok(EDIT(gemma_json, "per_layer_config", NULL, "global_head_dim", "32"), &c);
    assert_true(c.layers[2].head_dim == 32 && c.layers[5].head_dim == 32 && c.layers[0].head_dim == 16);
    rc_config_free(&c);
    /* neither: full layers get 512 */
    parse_ok(EDIT(gemma_json, "per_layer_config", NULL), &c);
    assert_true(c.layers[5].head_dim == 512 && c.ropes[1].rot_dim == 512 && c.ropes[1].n_freq == 64);
    rc_config_free(&c);
    /* zero-padded keys, and a kv-head override */
    parse_ok(EDIT(gemma_json, "per_layer_config",
                  "{\"02\": {\"head_dim\": 32, \"num_key_value_heads\": 1}, \"05\": {\"head_dim\": 32, "
                  "\"num_key_value_heads\": 1}}"),
             &c);
    assert_true(c.layers[2].head_dim == 32 && c.layers[2].n_kv_heads == 1 && c.layers[1].n_kv_heads == 2);
    rc_config_free(&c);
    /* the last layer is forced to full_attention; default layer pattern is every 6th */
    parse_ok(EDIT(gemma_json, "layer_types.5", "\"sliding_attention\""), &c);
    assert_true(c.layers[5].window == 0 && c.layers[5].head_dim == 32);
    rc_config_free(&c);
    parse_ok(EDIT(gemma_json, "layer_types", NULL, "per_layer_config", NULL, "global_head_dim", "32"), &c);
    for (int i = 0; i < 6; i++)
        assert_int_equal(c.layers[i].window, i == 5 ? 0 : 8);
    rc_config_free(&c);
    /* PLE off: null or 0 */
    parse_ok(EDIT(gemma_json, "hidden_size_per_layer_input", "null"), &c);
    assert_int_equal(c.ple_dim, 0);
    rc_config_free(&c);
    parse_ok(EDIT(gemma_json, "hidden_size_per_layer_input", "0"), &c);
    assert_int_equal(c.ple_dim, 0);
    rc_config_free(&c);
    /* defaults for the rope dictionary; "vision" bidirectional attention changes nothing for text;
     * final softcap off; MoE sizes are inert while the block is off */
    parse_ok(EDIT(gemma_json, "rope_parameters", NULL, "use_bidirectional_attention", "\"vision\"",
                  "final_logit_softcapping", "null", "num_experts", "8", "top_k_experts", "2"),
             &c);
    assert_true(c.ropes[1].n_freq == 4 && c.ropes[1].theta == 1e6 && c.ropes[0].theta == 1e4);
    assert_true(c.final_softcap == 0.0f);
    rc_config_free(&c);
    /* proportional factor */
    parse_ok(EDIT(gemma_json, "rope_parameters.full_attention.factor", "8.0"), &c);
    assert_true(c.ropes[1].factor == 8.0);
    rc_config_free(&c);
}

static void test_gemma3(void **state)
{
    (void)state;
    rc_config c;
    parse_ok(strdup(g3_json), &c);
    assert_string_equal(c.model_type, "gemma3_text");
    assert_int_equal(c.n_layers, 6);
    for (int i = 0; i < 6; i++) {
        const rc_layer_desc *l = &c.layers[i];
        int full = i == 2 || i == 5;
        assert_int_equal(l->mixer, RC_MIXER_ATTN);
        assert_int_equal(l->state, full ? RC_STATE_KV : RC_STATE_KV_RING);
        assert_int_equal(l->window, full ? 0 : 8);
        assert_int_equal(l->head_dim, 16);
        assert_int_equal(l->n_kv_heads, 2);
        assert_int_equal(l->rope, full ? 1 : 0);
        assert_true(l->attn_scale == (float)pow(24.0, -0.5)); /* query_pre_attn_scalar 24, not head_dim 16 */
        assert_true(l->q_norm && l->k_norm && !l->v_norm && !l->out_gate);
    }
    assert_int_equal(c.norm, RC_NORM_1PW);
    assert_int_equal(c.qk_norm, RC_NORM_1PW);
    assert_int_equal(c.act, RC_ACT_GELU_TANH);
    assert_true(c.emb_scale == 8.0f && c.final_softcap == 0.0f);
    assert_true(c.post_norms && !c.layer_scalar && !c.ple_dim && c.tie_embeddings);
    assert_string_equal(c.weight_prefix, "model.");
    assert_int_equal(c.n_ropes, 2);
    assert_string_equal(c.ropes[0].kind, "sliding");
    assert_true(c.ropes[0].type == RC_ROPE_DEFAULT && c.ropes[0].rot_dim == 16 && c.ropes[0].n_freq == 8);
    assert_true(c.ropes[0].theta == 1e4 && c.ropes[0].factor == 1.0);
    assert_string_equal(c.ropes[1].kind, "full");
    assert_true(c.ropes[1].type == RC_ROPE_LINEAR && c.ropes[1].rot_dim == 16 && c.ropes[1].n_freq == 8);
    assert_true(c.ropes[1].exp_den == 16 && c.ropes[1].theta == 1e6 && c.ropes[1].factor == 8.0);
    assert_int_equal(rc_config_features(&c) & (RC_FEAT_V_NORM | RC_FEAT_PLE | RC_FEAT_LAYER_SCALAR), 0);
    rc_config_free(&c);
}

static void test_gemma3_spellings(void **state)
{
    (void)state;
    rc_config c;
    /* transformers 4.x's spelling (HF merges it as the dictionary form): top-level rope_theta for full layers,
     * rope_local_base_freq for sliding ones, rope_scaling applied to full layers */
    parse_ok(EDIT(g3_json, "rope_parameters", NULL, "rope_theta", "1000000.0", "rope_local_base_freq", "10000.0",
                  "rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 8.0}"),
             &c);
    assert_true(c.ropes[0].type == RC_ROPE_DEFAULT && c.ropes[0].theta == 1e4);
    assert_true(c.ropes[1].type == RC_ROPE_LINEAR && c.ropes[1].theta == 1e6 && c.ropes[1].factor == 8.0);
    rc_config_free(&c);
    /* HF's defaults: no rope fields (default on both, 1e4 / 1e6), no query_pre_attn_scalar (256) */
    parse_ok(EDIT(g3_json, "rope_parameters", NULL, "query_pre_attn_scalar", NULL), &c);
    assert_true(c.ropes[0].theta == 1e4 && c.ropes[1].theta == 1e6 && c.ropes[1].type == RC_ROPE_DEFAULT);
    assert_true(c.layers[0].attn_scale == 0.0625f);
    rc_config_free(&c);
    /* a dictionary entry without rope_theta takes the top-level one */
    parse_ok(EDIT(g3_json, "rope_parameters.full_attention.rope_theta", NULL, "rope_theta", "5e5"), &c);
    assert_true(c.ropes[1].theta == 5e5 && c.ropes[1].factor == 8.0);
    rc_config_free(&c);
    /* no layer_types: every sliding_window_pattern-th layer is full (6 by default), none forced */
    parse_ok(EDIT(g3_json, "layer_types", NULL, "sliding_window_pattern", "3"), &c);
    for (int i = 0; i < 6; i++)
        assert_int_equal(c.layers[i].window, i == 2 || i == 5 ? 0 : 8);
    rc_config_free(&c);
    parse_ok(EDIT(g3_json, "layer_types", NULL, "num_hidden_layers", "4"), &c);
    for (int i = 0; i < 4; i++)
        assert_int_equal(c.layers[i].window, 8);
    assert_int_equal(c.n_ropes, 1); /* only the sliding table is built */
    rc_config_free(&c);
    /* HF's record of the pattern is metadata; a final softcap is math gemma3 has */
    parse_ok(EDIT(g3_json, "_sliding_window_pattern", "6", "final_logit_softcapping", "30.0"), &c);
    assert_true(c.final_softcap == 30.0f);
    rc_config_free(&c);
}

/* ---- the capability gate: one flipped field each ---- */

static void test_gemma3_refusals(void **state)
{
    (void)state;
    UNSUP(EDIT(g3_json, "attn_logit_softcapping", "50.0"), "attn_logit_softcapping", "50");
    UNSUP(EDIT(g3_json, "use_bidirectional_attention", "true"), "use_bidirectional_attention", "bidirectional");
    UNSUP(EDIT(g3_json, "rope_parameters.full_attention.rope_type", "\"yarn\""),
          "rope_parameters.full_attention.rope_type", "yarn");
    UNSUP(EDIT(g3_json, "rope_parameters.full_attention.rope_type", "\"proportional\""),
          "rope_parameters.full_attention.rope_type", "(default, linear)");
    UNSUP(EDIT(g3_json, "rope_parameters.sliding_attention.factor", "2.0"), "rope_parameters.sliding_attention.factor",
          "default");
    UNSUP(EDIT(g3_json, "rope_parameters.sliding_attention.beta_fast", "32"),
          "rope_parameters.sliding_attention.beta_fast", "not implemented");
    UNSUP(EDIT(g3_json, "rope_parameters.chunked_attention", "{}"), "rope_parameters.chunked_attention",
          "per layer type");
    UNSUP(EDIT(g3_json, "rope_scaling", "{\"rope_type\": \"dynamic\", \"factor\": 2.0}"),
          "rope_parameters.full_attention.rope_type", "dynamic");
    UNSUP(EDIT(g3_json, "query_pre_attn_scalar", "0"), "query_pre_attn_scalar", "positive");
    UNSUP(EDIT(g3_json, "global_head_dim", "32"), "global_head_dim", "for this model_type");
    UNSUP(EDIT(g3_json, "hidden_size_per_layer_input", "8"), "hidden_size_per_layer_input", "for this model_type");
    UNSUP(EDIT(g3_json, "hidden_activation", "\"gelu\""), "hidden_activation", "gelu");
    UNSUP(EDIT(g3_json, "layer_types.1", "\"linear_attention\""), "layer_types", "linear_attention");
    UNSUP(EDIT(g3_json, "num_key_value_heads", "3"), "kv head", "num_attention_heads");
    REFUSED(EDIT(g3_json, "rope_parameters.full_attention.factor", NULL), RC_E_FORMAT,
            "rope_parameters.full_attention.factor", "required");
}


static void test_gemma4_refusals(void **state)
{
    (void)state;
    UNSUP(EDIT(gemma_json, "enable_moe_block", "true"), "enable_moe_block", "true");
    UNSUP(EDIT(gemma_json, "num_kv_shared_layers", "2"), "num_kv_shared_layers", "= 2");
    UNSUP(EDIT(gemma_json, "use_double_wide_mlp", "true"), "use_double_wide_mlp", "true");
    UNSUP(EDIT(gemma_json, "attention_k_eq_v", "true"), "attention_k_eq_v", "true");
    UNSUP(EDIT(gemma_json, "attn_logit_softcapping", "50.0"), "attn_logit_softcapping", "50");
    UNSUP(EDIT(gemma_json, "use_bidirectional_attention", "\"all\""), "use_bidirectional_attention", "all");
    UNSUP(EDIT(gemma_json, "rope_parameters.full_attention.rope_type", "\"yarn\""),
          "rope_parameters.full_attention.rope_type", "yarn");
    UNSUP(EDIT(gemma_json, "rope_parameters.sliding_attention.rope_type", "\"llama3\""),
          "rope_parameters.sliding_attention.rope_type", "llama3");
    UNSUP(EDIT(gemma_json, "rope_parameters.sliding_attention.factor", "2.0"),
          "rope_parameters.sliding_attention.factor", "2");
    UNSUP(EDIT(gemma_json, "rope_parameters.full_attention.beta_fast", "32"), "rope_parameters.full_attention.beta_fast",
          "not implemented");
    UNSUP(EDIT(gemma_json, "rope_parameters.full_attention.rope_type", "\"yarn\"",
               "rope_parameters.full_attention.beta_fast", "32"),
          "rope_parameters.full_attention.rope_type", "yarn"); /* the type is named, not its parameters */
    UNSUP(EDIT(gemma_json, "rope_parameters", "{\"rope_type\": \"default\", \"rope_theta\": 10000.0}"),
          "rope_parameters.rope_type", "layer type");
    UNSUP(EDIT(gemma_json, "per_layer_config.2.intermediate_size", "256"), "per_layer_config.2.intermediate_size",
          "256");
    UNSUP(EDIT(gemma_json, "per_layer_config.5.head_dim", "64"), "per_layer_config", "layers 2 and 5");
    UNSUP(EDIT(gemma_json, "per_layer_config.9", "{\"head_dim\": 32}"), "per_layer_config.9", "layer index");
    /* gemma4's config under gemma3_text: refused for what gemma3 lacks (its full layers' proportional RoPE) */
    UNSUP(EDIT(gemma_json, "model_type", "\"gemma3_text\""), "rope_type", "proportional");
    UNSUP(EDIT(gemma_json, "hidden_activation", "\"gelu\""), "hidden_activation", "gelu");
    UNSUP(EDIT(gemma_json, "final_logit_softcapping", "0.0"), "final_logit_softcapping", "positive");
    UNSUP(EDIT(gemma_json, "layer_types.0", "\"chunked_attention\""), "layer_types", "chunked_attention");
    UNSUP(EDIT(gemma_json, "query_pre_attn_scalar", "256"), "query_pre_attn_scalar", "not implemented");
    UNSUP(EDIT(gemma_json, "hidden_act", "\"silu\""), "hidden_act", "for this model_type");
    UNSUP(EDIT(gemma_json, "num_attention_heads", "3"), "num_attention_heads", "kv head");
}

static void test_qwen3_5_refusals(void **state)
{
    (void)state;
    UNSUP(EDIT(qwen_json, "rope_parameters.rope_type", "\"yarn\""), "rope_parameters.rope_type", "yarn");
    UNSUP(EDIT(qwen_json, "rope_parameters.factor", "4.0"), "rope_parameters.factor", "4");
    UNSUP(EDIT(qwen_json, "rope_parameters.rope_type", "\"llama3\"", "rope_parameters.low_freq_factor", "1.0"),
          "rope_parameters.rope_type", "llama3");
    UNSUP(EDIT(qwen_json, "rope_parameters.original_max_position_embeddings", "8192"),
          "rope_parameters.original_max_position_embeddings", "not implemented");
    UNSUP(EDIT(qwen_json, "rope_parameters.partial_rotary_factor", "1.5"), "partial_rotary_factor", "1.5");
    UNSUP(EDIT(qwen_json, "rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 2.0}"), "rope_scaling",
          "rope_parameters");
    UNSUP(EDIT(qwen_json, "linear_num_value_heads", "3"), "linear_num_value_heads", "linear_num_key_heads");
    UNSUP(EDIT(qwen_json, "num_attention_heads", "3"), "num_attention_heads", "num_key_value_heads");
    UNSUP(EDIT(qwen_json, "layer_types.1", "\"sliding_attention\""), "layer_types", "sliding_attention");
    UNSUP(EDIT(qwen_json, "hidden_act", "\"relu\""), "hidden_act", "relu");
    UNSUP(EDIT(qwen_json, "linear_conv_kernel_dim", "1"), "linear_conv_kernel_dim", "range");
    UNSUP(EDIT(qwen_json, "mlp_bias", "true"), "mlp_bias", "for this model_type");
    UNSUP(EDIT(qwen_json, "use_sliding_window", "true"), "use_sliding_window", "for this model_type");
    UNSUP(EDIT(qwen_json, "model_type", "\"qwen3_next\""), "model_type", "qwen3_next");
}

static void test_qwen3_5_wrapper_refusals(void **state)
{
    (void)state;
    REFUSED(EDIT(wrap_json, "text_config", NULL), RC_E_FORMAT, "text_config", "required");
    UNSUP(EDIT(wrap_json, "text_config.model_type", "\"qwen3_next\""), "text_config.model_type", "qwen3_next");
    UNSUP(EDIT(wrap_json, "text_config.rope_parameters.rope_type", "\"mrope\""), "text_config.rope_parameters.rope_type",
          "mrope");
    UNSUP(EDIT(wrap_json, "text_config.foo", "1"), "text_config.foo", "unknown field");
    UNSUP(EDIT(wrap_json, "foo", "1"), "'foo'", "unknown field");
}

/* ---- weights ---- */

static int bind_store(const char *json, rc_tensors *store, rc_err *e)
{
    rc_config c;
    rc_weights w;
    int rc = rc_config_parse(json, &c, e);
    assert_int_equal(rc, RC_OK);
    rc = rc_weights_bind(&c, store, &w, e);
    if (!rc)
        rc_weights_free(&w);
    rc_config_free(&c);
    return rc;
}

static float *fzeros(int64_t n) { float *p = calloc((size_t)n, sizeof *p); assert_non_null(p); return p; }

static void test_weights(void **state)
{
    (void)state;
    rc_err e = {0};
    rc_golden g;
    rc_model m;
    /* gemma naming: post_attention_layernorm norms the attention output, pre_feedforward is the MLP norm */
    assert_int_equal(rc_golden_load(GOLDEN("gemma4.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    const float *pa = rc_tensors_find(&g.weights, "model.layers.3.post_attention_layernorm.weight")->data;
    const float *pf = rc_tensors_find(&g.weights, "model.layers.3.pre_feedforward_layernorm.weight")->data;
    assert_int_equal(rc_model_from_golden(&m, &g, &e), RC_OK);
    assert_ptr_equal(m.w.layers[3].attn_post_norm, pa);
    assert_ptr_equal(m.w.layers[3].mlp_norm, pf);
    assert_ptr_equal(m.w.lm_head, m.w.embed);
    int64_t np = 0, sum = 0;
    assert_true(rc_config_param_count(&m.cfg, &np));
    for (int i = 0; i < m.store.n; i++)
        sum += m.store.t[i].numel;
    assert_int_equal(np, sum);
    rc_model_free(&m);
    rc_golden_free(&g);

    assert_int_equal(rc_golden_load(GOLDEN("qwen3_5.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    assert_int_equal(rc_model_from_golden(&m, &g, &e), RC_OK);
    np = sum = 0;
    assert_true(rc_config_param_count(&m.cfg, &np));
    for (int i = 0; i < m.store.n; i++)
        sum += m.store.t[i].numel;
    assert_int_equal(np, sum);
    assert_non_null(m.w.layers[0].gdn_conv);
    assert_null(m.w.layers[0].q);
    assert_non_null(m.w.layers[3].q);
    assert_null(m.w.layers[3].gdn_conv);
    rc_model_free(&m);
    rc_golden_free(&g);

    /* an unexpected, a missing and a mis-shaped tensor */
    assert_int_equal(rc_golden_load(GOLDEN("qwen3_5.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    int64_t one[1] = {4};
    assert_int_equal(rc_tensors_add(&g.weights, "model.layers.3.linear_attn.A_log", 1, one, fzeros(4), &e), RC_OK);
    assert_int_equal(bind_store(qwen_json, &g.weights, &e), RC_E_MISSING);
    assert_non_null(strstr(e.msg, "unexpected tensor 'model.layers.3.linear_attn.A_log'"));
    rc_golden_free(&g);
    assert_int_equal(rc_golden_load(GOLDEN("qwen3_5.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    rc_tensor *t = (rc_tensor *)rc_tensors_find(&g.weights, "model.layers.1.linear_attn.dt_bias");
    t->name[0] = 'X';
    assert_int_equal(bind_store(qwen_json, &g.weights, &e), RC_E_MISSING);
    assert_non_null(strstr(e.msg, "'model.layers.1.linear_attn.dt_bias' is missing"));
    t->name[0] = 'm';
    t = (rc_tensor *)rc_tensors_find(&g.weights, "model.layers.0.linear_attn.conv1d.weight");
    t->shape[2] = 2, t->shape[0] = 320;
    assert_int_equal(bind_store(qwen_json, &g.weights, &e), RC_E_SHAPE);
    assert_non_null(strstr(e.msg, "conv1d.weight"));
    rc_golden_free(&g);

    /* the wrapper: decoder under model.language_model., vision tower and MTP head ignored as HF does */
    assert_int_equal(rc_golden_load(GOLDEN("qwen3_5.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    assert_int_equal(bind_store(wrap_json, &g.weights, &e), RC_E_MISSING); /* names without the prefix */
    for (int i = 0; i < g.weights.n; i++) {
        char *old = g.weights.t[i].name;
        if (strncmp(old, "model.", 6) == 0) {
            char *nn = malloc(strlen(old) + 16);
            sprintf(nn, "model.language_model.%s", old + 6);
            g.weights.t[i].name = nn;
            free(old);
        }
    }
    assert_int_equal(rc_tensors_reindex(&g.weights, &e), RC_OK);
    assert_int_equal(rc_tensors_add(&g.weights, "model.visual.patch_embed.proj.weight", 1, one, fzeros(4), &e),
                     RC_OK);
    assert_int_equal(rc_tensors_add(&g.weights, "mtp.fc.weight", 1, one, fzeros(4), &e), RC_OK);
    int rc = bind_store(wrap_json, &g.weights, &e);
    if (rc)
        fprintf(stderr, "  %s\n", e.msg);
    assert_int_equal(rc, RC_OK);
    rc_golden_free(&g);
}

/* ---- capabilities: a stage that lists no feature bits refuses both models by feature name ---- */

static void test_caps(void **state)
{
    (void)state;
    rc_err e = {0};
    rc_config q, g;
    parse_ok(strdup(qwen_json), &q);
    parse_ok(strdup(gemma_json), &g);
    assert_int_equal(rc_config_check(&q, &ref_caps, &e), RC_OK);
    assert_int_equal(rc_config_check(&g, &ref_caps, &e), RC_OK);
    rc_caps core = {.stage = "core", .mixers = 1u << RC_MIXER_ATTN, .sliding_window = 1};
    assert_int_equal(rc_config_check(&g, &core, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "stage core"));
    assert_non_null(strstr(e.msg, "RMSNorm"));
    core.features = RC_FEAT_ALL & ~RC_FEAT_PLE;
    assert_int_equal(rc_config_check(&g, &core, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "per-layer embeddings"));
    core.features = RC_FEAT_ALL;
    assert_int_equal(rc_config_check(&q, &core, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "mixer"));
    unsigned fq = rc_config_features(&q), fg = rc_config_features(&g);
    assert_true(fq & RC_FEAT_OUT_GATE && fq & RC_FEAT_PARTIAL_ROPE && fq & RC_FEAT_NORM_1PW && fq & RC_FEAT_MIXED_LAYERS);
    assert_true(!(fq & (RC_FEAT_PLE | RC_FEAT_SOFTCAP | RC_FEAT_V_NORM | RC_FEAT_POST_NORMS)));
    assert_true(fg & RC_FEAT_V_NORM && fg & RC_FEAT_POST_NORMS && fg & RC_FEAT_PLE && fg & RC_FEAT_SOFTCAP &&
                fg & RC_FEAT_EMB_SCALE && fg & RC_FEAT_LAYER_SCALAR && fg & RC_FEAT_GELU_TANH &&
                fg & RC_FEAT_NORM_POW && fg & RC_FEAT_MIXED_LAYERS && fg & RC_FEAT_PARTIAL_ROPE);
    rc_config_free(&q);
    rc_config_free(&g);
}

static char *golden_config(const char *path)
{
    rc_err e = {0};
    rc_golden g;
    if (rc_golden_load(path, 0, &g, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return NULL;
    }
    char *s = strdup(g.config_json);
    rc_golden_free(&g);
    return s;
}

static int setup(void **state)
{
    (void)state;
    qwen_json = golden_config(GOLDEN("qwen3_5.h5"));
    gemma_json = golden_config(GOLDEN("gemma4.h5"));
    g3_json = golden_config(GOLDEN("gemma3.h5"));
    if (!qwen_json || !gemma_json || !g3_json)
        return -1;
    cJSON *w = cJSON_CreateObject(), *tc = cJSON_Parse(qwen_json);
    cJSON_AddStringToObject(w, "model_type", "qwen3_5");
    cJSON_AddItemToObject(w, "text_config", tc);
    cJSON_AddItemToObject(w, "vision_config", cJSON_Parse("{\"depth\": 27, \"hidden_size\": 1152}"));
    cJSON_AddNumberToObject(w, "image_token_id", 248056);
    cJSON_AddNumberToObject(w, "video_token_id", 248057);
    cJSON_AddFalseToObject(w, "tie_word_embeddings");
    cJSON_AddStringToObject(w, "transformers_version", "5.17.0");
    wrap_json = cJSON_PrintUnformatted(w);
    cJSON_Delete(w);
    return wrap_json ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    free(qwen_json);
    free(gemma_json);
    free(g3_json);
    free(wrap_json);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3_5),
        cmocka_unit_test(test_qwen3_5_spellings),
        cmocka_unit_test(test_qwen3_5_wrapper),
        cmocka_unit_test(test_gemma4),
        cmocka_unit_test(test_gemma4_spellings),
        cmocka_unit_test(test_gemma4_refusals),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_gemma3_spellings),
        cmocka_unit_test(test_gemma3_refusals),
        cmocka_unit_test(test_qwen3_5_refusals),
        cmocka_unit_test(test_qwen3_5_wrapper_refusals),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_caps),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
