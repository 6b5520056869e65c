/* A persistent pool of host threads (created once) that runs a [0, n) range split into fixed contiguous
 * shares, one per worker: worker w always gets [n*w/W, n*(w+1)/W), so results never depend on timing. */
#ifndef ENG_POOL_H
#define ENG_POOL_H

#include <stdint.h>

#include "err.h"

typedef struct eng_pool eng_pool;

/* fn handles [begin, end) as worker w (0 = the calling thread). */
typedef void (*eng_task_fn)(void *ctx, int64_t begin, int64_t end, int w);

/* threads <= 0: the number of online CPUs (at most 64). A thread that cannot be created shrinks the pool. */
int eng_pool_create(eng_pool **out, int threads, rc_err *e);
int eng_pool_size(const eng_pool *p);
/* Runs fn over [0, n) on every worker and returns when all are done. */
void eng_pool_run(eng_pool *p, int64_t n, eng_task_fn fn, void *ctx);
void eng_pool_free(eng_pool *p);

#endif
