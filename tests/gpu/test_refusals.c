/* cuda stage gate, no GPU needed: descriptions outside the kernels are refused by name before any device work,
 * and cuda_fwd_available explains why it says no. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_forward.h"

static rc_layer_desc layer;
static rc_model model;

/* A two-head llama-like description (no weights: every case below must stop before they are read). */
static void base_model(void)
{
    memset(&model, 0, sizeof model);
    layer = (rc_layer_desc){.mixer = RC_MIXER_ATTN, .state = RC_STATE_KV, .n_heads = 2, .n_kv_heads = 1,
                            .head_dim = 16, .rope = 0, .attn_scale = 0.25f, .intermediate = 32};
    rc_config *c = &model.cfg;
    snprintf(c->model_type, sizeof c->model_type, "llama");
    c->vocab = 10;
    c->hidden = 32;
    c->n_layers = 1;
    c->eps = 1e-6f;
    c->n_ropes = 1;
    c->ropes[0] = (rc_rope_desc){.kind = "all", .theta = 10000, .factor = 1, .head_dim = 16, .rot_dim = 16,
                                 .n_freq = 8, .exp_den = 16};
    c->layers = &layer;
    c->max_heads = 2;
    c->max_kv_heads = 1;
    c->max_head_dim = 16;
    c->max_intermediate = 32;
}

static void expect_refused(const char *what)
{
    cuda_fwd *f = (cuda_fwd *)&model;
    rc_err e = {0};
    int rc = cuda_fwd_open(&f, &model, 0, &e);
    printf("  %-28s -> %s: %s\n", what, rc_code_name(rc), e.msg);
    assert_int_equal(rc, RC_E_UNSUPPORTED);
    assert_null(f);
    assert_non_null(strstr(e.msg, "stage cuda"));
}

/* What the gate once refused and now admits: open gets past it (no GPU: RC_E_DEVICE; a GPU: a handle). */
static void expect_admitted(const char *what)
{
    static rc_layer_weights lw; /* every weight NULL: nothing to upload */
    cuda_fwd *f = NULL;
    rc_err e = {0};
    memset(&lw, 0, sizeof lw);
    model.w.layers = &lw;
    int rc = cuda_fwd_open(&f, &model, 0, &e);
    printf("  %-28s -> %s%s%s\n", what, rc_code_name(rc), rc ? ": " : "", rc ? e.msg : "");
    assert_true(rc == RC_OK || rc == RC_E_DEVICE);
    cuda_fwd_close(f);
}

static void test_refusals(void **state)
{
    (void)state;
    base_model();
    layer.mixer = RC_MIXER_GDN;
    layer.state = RC_STATE_RECURRENT;
    layer.gdn_k_heads = 2;
    layer.gdn_v_heads = 3;
    layer.gdn_k_dim = layer.gdn_v_dim = 8;
    layer.gdn_conv_kernel = 4;
    expect_refused("gdn v heads % k heads != 0");
    base_model();
    model.cfg.ropes[0].rot_dim = 18;
    expect_refused("rot_dim > head_dim");
    base_model();
    layer.head_dim = 15;
    expect_refused("odd head_dim");
}

static void test_admitted(void **state)
{
    (void)state;
    base_model();
    layer.out_gate = 1;
    expect_admitted("attention output gate");
    base_model();
    layer.v_norm = 1;
    model.cfg.v_norm = RC_NORM_POW;
    expect_admitted("v_norm");
    base_model();
    model.cfg.post_norms = 1;
    expect_admitted("post-block norms");
    base_model();
    model.cfg.layer_scalar = 1;
    expect_admitted("layer scalar");
}

static void test_available(void **state)
{
    (void)state;
    char why[256] = "";
    assert_int_equal(cuda_fwd_available(-1, why, sizeof why), 0);
    printf("  device -1: %s\n", why);
    assert_true(why[0] != 0);
    why[0] = 0;
    assert_int_equal(cuda_fwd_available(100000, why, sizeof why), 0);
    printf("  device 100000: %s\n", why);
    assert_true(why[0] != 0);
    assert_int_equal(cuda_fwd_available(0, NULL, 0) == 0 || cuda_fwd_available(0, NULL, 0) == 1, 1);
    if (!cuda_fwd_available(0, why, sizeof why)) {
        base_model();
        cuda_fwd *f = NULL;
        rc_err e = {0};
        assert_int_equal(cuda_fwd_open(&f, &model, 0, &e), RC_E_DEVICE);
        printf("  open without a GPU: %s\n", e.msg);
        assert_null(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_admitted),
        cmocka_unit_test(test_available),
    };
    return cmocka_run_group_tests_name("cuda.refusals", tests, NULL, NULL);
}
