/* Device-memory plan (see eng_plan.h). */
#include "eng_plan.h"

#include <stdio.h>

static int all_resident(const eng_plan_sizes *s, int n) { return n < 0 || n >= s->n_layers; }

void eng_plan_bytes(const eng_plan_sizes *s, int n, int kv_offload, int vocab_on_cpu, eng_plan *p)
{
    p->resident_layers = all_resident(s, n) ? ENG_ALL_LAYERS : n;
    p->kv_offload = kv_offload;
    p->vocab_on_cpu = vocab_on_cpu;
    p->weights = all_resident(s, n) ? s->layer_total : (int64_t)n * s->layer_max;
    if (!vocab_on_cpu)
        p->weights += s->vocab_dev;
    p->kv = (kv_offload ? s->kv_offload : s->kv_resident) + s->state;
    p->workspace = s->workspace + (vocab_on_cpu ? 0 : s->logits_dev);
    p->total = p->weights + p->kv + p->workspace;
}

/* Bytes over the host link per token (weights streamed whole every token when not all resident). */
static double cost(const eng_plan_sizes *s, const eng_plan *p)
{
    double c = 0.0;
    if (p->resident_layers == 0)
        c += 1.5 * (double)s->layer_total; /* zero-copy: no prefetch overlap, read in place */
    else if (p->resident_layers == 1)
        c += 1.25 * (double)s->layer_total; /* one slot: copy and compute alternate */
    else if (p->resident_layers > 1)
        c += (double)s->layer_total;
    if (p->kv_offload)
        c += (double)s->kv_resident;
    if (p->vocab_on_cpu)
        c += 2.0 * (double)s->vocab_dev; /* a host GEMV over the lm_head */
    return c;
}

int eng_plan_choose(const eng_plan_sizes *s, int64_t budget, int fix_resident, int fix_offload, int fix_vocab,
                    eng_plan *out, rc_err *e)
{
    int slots[5], ns = 0;
    if (fix_resident >= -1)
        slots[ns++] = fix_resident;
    else {
        slots[ns++] = ENG_ALL_LAYERS;
        for (int n = 2; n >= 0; n--)
            if (n < s->n_layers)
                slots[ns++] = n;
    }
    int found = 0;
    double best_cost = 0.0;
    eng_plan best = {0}, smallest = {0};
    for (int i = 0; i < ns; i++)
        for (int off = 0; off < 2; off++)
            for (int voc = 0; voc < 2; voc++) {
                if ((fix_offload >= 0 && off != fix_offload) || (fix_vocab >= 0 && voc != fix_vocab))
                    continue;
                eng_plan p;
                eng_plan_bytes(s, slots[i], off, voc, &p);
                if (smallest.total == 0 || p.total < smallest.total)
                    smallest = p;
                if (p.total > budget)
                    continue;
                double c = cost(s, &p);
                if (!found || c < best_cost) {
                    best = p;
                    best_cost = c;
                    found = 1;
                }
            }
    if (!found) {
        char b1[32], b2[32], d[256];
        return rc_fail(e, RC_E_NOMEM, "engine: --vram-budget %s is too small: the smallest plan (%s) needs %s",
                       eng_bytes_str(budget, b1, sizeof b1), eng_plan_describe(&smallest, s->n_layers, d, sizeof d),
                       eng_bytes_str(smallest.total, b2, sizeof b2));
    }
    *out = best;
    return RC_OK;
}

const char *eng_bytes_str(int64_t b, char *buf, size_t cap)
{
    if (b >= (int64_t)1 << 30)
        snprintf(buf, cap, "%.2f GiB", (double)b / (double)(1 << 30));
    else if (b >= 1 << 20)
        snprintf(buf, cap, "%.2f MiB", (double)b / (double)(1 << 20));
    else if (b >= 1 << 10)
        snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(buf, cap, "%lld B", (long long)b);
    return buf;
}

const char *eng_plan_describe(const eng_plan *p, int n_layers, char *buf, size_t cap)
{
    char lay[48];
    if (p->resident_layers < 0)
        snprintf(lay, sizeof lay, "all %d layers resident", n_layers);
    else if (p->resident_layers == 0)
        snprintf(lay, sizeof lay, "layers read from pinned host memory");
    else
        snprintf(lay, sizeof lay, "%d layer slot%s streamed", p->resident_layers, p->resident_layers > 1 ? "s" : "");
    snprintf(buf, cap, "%s, KV %s, vocab on %s", lay, p->kv_offload ? "offloaded" : "on device",
             p->vocab_on_cpu ? "CPU" : "device");
    return buf;
}
