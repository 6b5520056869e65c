/* The quantization faults of harness/faults.json, argued on the CPU: a host twin of the cuda stage's dequant rule
 * (cuda/dequant.cu: the packed word order, one rule per family, each fault's mutation) is bit-equal to
 * rc_qtensor_dequant when no fault is on, and on each fault's golden the fault leaves every layer-0 matrix used before
 * its catalogued first probe unchanged and changes the matrix that probe uses: the fault can show there, and first. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "model.h"
#include "quant.h"
#include "testutil.h"

enum { F_NONE, F_NIBBLE_SWAP, F_ZERO_PLUS1, F_GROUP_WORD, F_NO_SIGN_EXT };

/* cuda/dequant.cu's dequant_kernel on the host: codes packed per = 32 / bits to a word along k, low bits first */
static void twin_dequant(const rc_qtensor *t, int fault, float *out)
{
    const int per = 32 / t->bits;
    const int64_t G = t->k / t->group;
    const uint32_t mask = (1u << t->bits) - 1u, half = 1u << (t->bits - 1);
    for (int64_t r = 0; r < t->n; r++)
        for (int64_t wd = 0; wd < t->k / per; wd++) {
            uint32_t word = 0;
            for (int j = 0; j < per; j++)
                word |= ((uint32_t)(int32_t)t->q[r * t->k + wd * per + j] & mask) << (t->bits * j);
            const int64_t g = fault == F_GROUP_WORD ? wd / t->group : wd * per / t->group;
            const float s = t->scale[r * G + g];
            float m = 0.0f;
            if (t->family == RC_QF_AFFINE)
                m = t->zero ? rc_qf_offset(s, t->zero[r * G + g] + (fault == F_ZERO_PLUS1)) : t->offset[r * G + g];
            for (int j = 0; j < per; j++) {
                const int pos = fault == F_NIBBLE_SWAP && t->bits == 4 ? j ^ 1 : j;
                const uint32_t u = (word >> (t->bits * pos)) & mask;
                const int q = t->family == RC_QF_AFFINE || fault == F_NO_SIGN_EXT ? (int)u : (int)(u ^ half) - (int)half;
                out[r * t->k + wd * per + j] = t->family == RC_QF_AFFINE ? rc_qf_affine(s, q, m) : rc_qf_scale(s, q);
            }
        }
}

/* elements of t the fault changes (the twin against the exact dequant) */
static int64_t changed(const rc_qtensor *t, int fault)
{
    const int64_t n = t->n * t->k;
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    rc_qtensor_dequant(t, a);
    twin_dequant(t, fault, b);
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += memcmp(&a[i], &b[i], sizeof *a) != 0;
    free(a);
    free(b);
    return d;
}

/* layer 0's matrices in the order the forward uses them, with the first probe each feeds */
static const char *const l0[][2] = {
    {"self_attn.q_proj", "L0.attn.q"}, {"self_attn.k_proj", "L0.attn.k"}, {"self_attn.v_proj", "L0.attn.v"},
    {"self_attn.o_proj", "L0.attn.out"}, {"mlp.gate_proj", "L0.mlp.gate"}, {"mlp.up_proj", "L0.mlp.up"},
    {"mlp.down_proj", "L0.mlp.out"},
};

static void check_fault(const char *golden, int fault, const char *probe)
{
    rc_model m;
    rc_err e = {0};
    if (rc_model_load(&m, golden, &e))
        fail_msg("%s", e.msg);
    assert_true(m.quant.on);
    for (int i = 0; i < m.quant.n; i++) /* the twin is the rule, bit for bit */
        assert_int_equal(changed(&m.quant.t[i], F_NONE), 0);
    int reached = 0;
    for (size_t i = 0; i < sizeof l0 / sizeof l0[0] && !reached; i++) {
        char name[128];
        snprintf(name, sizeof name, "model.layers.0.%s.weight", l0[i][0]);
        const rc_qtensor *t = rc_quant_find(&m.quant, name);
        assert_non_null(t);
        const int64_t d = changed(t, fault);
        reached = !strcmp(l0[i][1], probe);
        printf("  %s: %s: %lld of %lld weights changed%s\n", golden, name, (long long)d, (long long)(t->n * t->k),
               reached ? " (the catalogued first probe's matrix)" : "");
        if (reached)
            assert_true(d > 0);
        else
            assert_int_equal(d, 0);
    }
    assert_true(reached);
    rc_model_free(&m);
}

static void test_nibble_swap(void **state)
{
    (void)state;
    check_fault(GOLDEN("llama_int4_g32.h5"), F_NIBBLE_SWAP, "L0.attn.q");
}

static void test_zero_off_by_one(void **state)
{
    (void)state;
    check_fault(GOLDEN("llama_int4_g128.h5"), F_ZERO_PLUS1, "L0.attn.q");
}

static void test_scale_wrong_group(void **state)
{
    (void)state;
    check_fault(GOLDEN("llama_int4_g128.h5"), F_GROUP_WORD, "L0.mlp.out");
}

/* the int8 golden has negative codes in q_proj: the only ones sign extension changes */
static void test_no_sign_extend(void **state)
{
    (void)state;
    rc_model m;
    rc_err e = {0};
    if (rc_model_load(&m, GOLDEN("llama_int8.h5"), &e))
        fail_msg("%s", e.msg);
    const rc_qtensor *t = rc_quant_find(&m.quant, "model.layers.0.self_attn.q_proj.weight");
    assert_non_null(t);
    assert_int_equal(t->family, RC_QF_SCALE);
    int64_t neg = 0;
    for (int64_t i = 0; i < t->n * t->k; i++)
        neg += t->q[i] < 0;
    printf("  q_proj: %lld negative codes of %lld\n", (long long)neg, (long long)(t->n * t->k));
    assert_true(neg > 0);
    rc_model_free(&m);
    check_fault(GOLDEN("llama_int8.h5"), F_NO_SIGN_EXT, "L0.attn.q");
}

/* the twin's families on synthetic tensors: a signed nibble (scale family, 4 bits) loses its sign too, GGUF Q4_1's
 * float offsets (no integer zero) pass through */
static void test_twin_families(void **state)
{
    (void)state;
    rc_qtensor t;
    rc_err e = {0};
    assert_int_equal(rc_qtensor_alloc(&t, "model.layers.0.mlp.up_proj.weight", RC_QF_SCALE, 4, 2, 64, 32, 0, &e), RC_OK);
    for (int64_t i = 0; i < 128; i++)
        t.q[i] = (int8_t)((i % 16) - 8);
    for (int i = 0; i < 4; i++)
        t.scale[i] = 0.5f + (float)i;
    assert_int_equal(changed(&t, F_NONE), 0);
    assert_int_equal(changed(&t, F_NO_SIGN_EXT), 64); /* the 8 negative codes of every 16 */
    assert_int_equal(changed(&t, F_NIBBLE_SWAP), 128);
    assert_int_equal(changed(&t, F_GROUP_WORD), 60); /* columns 32..63 read group 0, but for their 2 zero codes */
    rc_qtensor_free(&t);
    assert_int_equal(rc_qtensor_alloc(&t, "model.layers.0.mlp.up_proj.weight", RC_QF_AFFINE, 4, 2, 32, 32, 0, &e), RC_OK);
    for (int64_t i = 0; i < 64; i++)
        t.q[i] = (int8_t)(i % 16);
    t.scale[0] = 0.25f, t.scale[1] = 0.125f, t.offset[0] = -1.1f, t.offset[1] = 0.3f;
    assert_int_equal(changed(&t, F_NONE), 0);
    assert_int_equal(changed(&t, F_ZERO_PLUS1), 0); /* no integer zero to be off by one */
    rc_qtensor_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nibble_swap),    cmocka_unit_test(test_zero_off_by_one),
        cmocka_unit_test(test_scale_wrong_group), cmocka_unit_test(test_no_sign_extend),
        cmocka_unit_test(test_twin_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
