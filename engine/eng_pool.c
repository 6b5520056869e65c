/* Persistent host thread pool (see eng_pool.h). */
#include "eng_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

struct eng_pool {
    int n;                 /* workers, the caller included */
    pthread_t *th;         /* [n - 1] */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int pending, quit;
    eng_task_fn fn;
    void *ctx;
    int64_t count;
};

typedef struct worker_arg {
    eng_pool *p;
    int w;
} worker_arg;

static void share(const eng_pool *p, int w, int64_t n, int64_t *b, int64_t *e)
{
    *b = n * w / p->n;
    *e = n * (w + 1) / p->n;
}

static void *worker(void *arg)
{
    worker_arg *a = arg;
    eng_pool *p = a->p;
    const int w = a->w;
    free(a);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->quit)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->gen;
        eng_task_fn fn = p->fn;
        void *ctx = p->ctx;
        int64_t b, e;
        share(p, w, p->count, &b, &e);
        pthread_mutex_unlock(&p->mu);
        if (b < e)
            fn(ctx, b, e, w);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int eng_pool_create(eng_pool **out, int threads, rc_err *e)
{
    *out = NULL;
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n > 64 ? 64 : (int)n;
    }
    eng_pool *p = rc_calloc(1, sizeof *p, e, "thread pool");
    if (!p)
        return e->code;
    p->th = rc_calloc(threads, sizeof *p->th, e, "thread pool");
    if (!p->th) {
        free(p);
        return e->code;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->n = 1;
    for (int w = 1; w < threads; w++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a)
            break;
        a->p = p;
        a->w = w;
        if (pthread_create(&p->th[w - 1], NULL, worker, a) != 0) {
            free(a);
            break;
        }
        p->n++;
    }
    *out = p;
    return RC_OK;
}

int eng_pool_size(const eng_pool *p) { return p->n; }

void eng_pool_run(eng_pool *p, int64_t n, eng_task_fn fn, void *ctx)
{
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->count = n;
    p->pending = p->n - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    int64_t b, e;
    share(p, 0, n, &b, &e);
    if (b < e)
        fn(ctx, b, e, 0);
    pthread_mutex_lock(&p->mu);
    while (p->pending)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void eng_pool_free(eng_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int w = 1; w < p->n; w++)
        pthread_join(p->th[w - 1], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p);
}
