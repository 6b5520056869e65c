/* The cuda stage's error idiom and device allocations (kernels.h): a failed CUDA call named with file:line. */
#include <stdint.h>
#include <stdio.h>

#include "kernels.h"

int cuda_check_at(cudaError_t err, const char *call, const char *file, int line, rc_err *e)
{
    if (err == cudaSuccess)
        return RC_OK;
    (void)cudaGetLastError();
    return rc_fail(e, RC_E_DEVICE, "%s failed at %s:%d: %s", call, file, line, cudaGetErrorString(err));
}

int cuda_alloc(void **p, int64_t n, int64_t size, rc_err *e, const char *what)
{
    int64_t bytes;
    *p = NULL;
    if (!rc_mul_i64(n, size, &bytes) || (uint64_t)bytes > SIZE_MAX)
        return rc_fail(e, RC_E_RANGE, "cuda: %s: size %lld x %lld overflows", what, (long long)n, (long long)size);
    cudaError_t err = cudaMalloc(p, bytes ? (size_t)bytes : 1);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *p = NULL;
        return rc_fail(e, RC_E_NOMEM, "cuda: out of device memory allocating %lld bytes for %s", (long long)bytes,
                       what);
    }
    if (err == cudaSuccess)
        return RC_OK;
    char call[192];
    snprintf(call, sizeof call, "cudaMalloc(%lld bytes for %s)", (long long)bytes, what);
    *p = NULL;
    return cuda_check_at(err, call, __FILE__, __LINE__, e);
}
