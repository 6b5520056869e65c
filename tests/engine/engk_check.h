/* Shared helpers of the engine kernel checkers (tests/engine/test_engk*.c): the GPU skip, checked CUDA calls,
 * seeded inputs, NaN-poisoned device buffers, compare-and-report against a stated bound, and for --bench the
 * timing of a launcher and the device's read ceiling. Every failure path exits 1 with one line naming it. */
#ifndef ENGK_CHECK_H
#define ENGK_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EKC_U 0x1p-24 /* unit roundoff of fp32: a correctly rounded result is within EKC_U |x| */

/* Exits 77 (meson: SKIP) with the reason unless a CUDA device is present. */
void ekc_skip_unless_gpu(const char *test);

/* A failed CUDA call: "CALL failed at FILE:LINE: message", exit 1. */
void ekc_cuda_ok(cudaError_t err, const char *call, const char *file, int line);
#define EKC_CU(call) ekc_cuda_ok((call), #call, __FILE__, __LINE__)

void *ekc_hmalloc(int64_t n, size_t size); /* zeroed; n may be 0 */
/* x[n] uniform in [lo, hi) from an MT19937 seeded with seed alone, so a case's inputs never depend on the
 * cases that ran before it. */
void ekc_fill(float *x, int64_t n, double lo, double hi, unsigned long seed);

/* The seeded streams the cmocka checkers draw from (their cases were tuned on these values): the state advances
 * with every draw, so a case's inputs depend on the draws before it. splitmix64: a double in [0, 1) from 53
 * bits; xorshift64 (13, 7, 17): the next raw state. */
double ekc_splitmix_unif(uint64_t *state);
uint64_t ekc_xorshift64(uint64_t *state);

/* Device buffers. Poison sets every byte to 0xff: NaN as fp32 and as bf16, so an element a kernel does not
 * write fails any comparison. Call it before every launch that writes the buffer. */
void *ekc_dev_alloc(int64_t n, size_t size);
void ekc_poison(void *d, int64_t n, size_t size);
void *ekc_to_dev(const void *h, int64_t n, size_t size);
void ekc_from_dev(void *h, const void *d, int64_t n, size_t size); /* synchronizes the device first */
void ekc_dev_free(void *d);
void *ekc_dev_nan(int64_t n, size_t size); /* ekc_dev_alloc, then ekc_poison */

double ekc_ulp(float x);      /* spacing of fp32 numbers at |x| (2^-149 at 0) */
double ekc_ulp_bf16(double x); /* spacing of bf16 numbers at |x| */

/* Compares got[n] with want[n] and prints one line: what, the max |error| (and in ulps of want), its ratio to
 * the bound, the bound as stated by `rule`, ok/FAIL; then the first few failing elements. bound == NULL: bit
 * equality; else element i passes iff got[i] is finite and |got[i] - want[i]| <= bound[i]. Returns 1 on a
 * failure, else 0. */
int ekc_check(const char *what, const float *got, const float *want, const float *bound, const char *rule,
              int64_t n);

/* Bit equality of got[n] and want[n] (a NaN passes only against the same bits): prints the first three elements
 * that differ, then one line: what, "bit-identical" or "DIFFER" (and how many differ). Returns that count. */
int64_t ekc_bits(const char *what, const float *got, const float *want, int64_t n);

/* --bench: mean device time of one call of fn(ctx) in microseconds (cudaEvents around a batch of back-to-back
 * calls after a warm-up; the best of three batches), and the read ceiling in GB/s: the engine's read-only kernel
 * over 1 GiB, the best of 10 passes (engk_read_bandwidth, eng_bw.h). */
double ekc_time_us(cudaError_t (*fn)(void *ctx), void *ctx);
/* --bench: the median device time in ms of one call of fn(ctx): reps (<= 64) back-to-back calls after three
 * warm-ups, a cudaEvent between every two. */
double ekc_time_median_ms(cudaError_t (*fn)(void *ctx), void *ctx, int reps);
double ekc_read_ceiling_gbs(void);

#ifdef __cplusplus
}
#endif

#endif
