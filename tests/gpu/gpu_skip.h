/* The GPU suite's skip rule: no usable CUDA device -> exit 77, which meson reports as SKIP. */
#ifndef TESTS_GPU_SKIP_H
#define TESTS_GPU_SKIP_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define GPU_SKIP_CODE 77

/* Exits 77 with the reason unless cudaGetDeviceCount finds a device. */
static inline void gpu_skip_unless_present(const char *test)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n < 1) {
        printf("%s: SKIP: no usable CUDA device (%s)\n", test,
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        fflush(stdout);
        (void)cudaGetLastError();
        exit(GPU_SKIP_CODE);
    }
}

#endif
