/* The attention micro-benchmark's read ceiling: a kernel that reads every 16-byte word of a buffer once. */
#ifndef TEST_ENGK_ATTN_READ_H
#define TEST_ENGK_ATTN_READ_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reads bytes (a multiple of 64) of buf; sink: 4096 bytes of device memory, written only to keep the loads. */
cudaError_t engk_test_read(const void *buf, size_t bytes, unsigned *sink, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
