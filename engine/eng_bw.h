/* The read-bandwidth probe of engine bench and the kernel benchmarks: one read-only kernel, over a large buffer
 * (the decode floor: a decode step reads every weight once and writes almost nothing) or a given buffer's bytes. */
#ifndef ENG_BW_H
#define ENG_BW_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Launches the read-only kernel over bytes (a multiple of 16, at least 16) at p on stream s; sink: 4 bytes of
 * device memory, written only to keep the loads. */
cudaError_t engk_read_launch(const void *p, size_t bytes, void *sink, cudaStream_t s);
/* Reads `bytes` (rounded down to 64 bytes) of a device buffer filled with a non-zero pattern, once for warm-up
 * and then `reps` timed passes (cudaEvents); best_bps / median_bps: bytes per second of the fastest and the
 * median pass. On error returns it and names the failing call in *what. */
cudaError_t engk_read_bandwidth(int device, size_t bytes, int reps, double *best_bps, double *median_bps,
                                const char **what);
/* The device's name (cudaGetDeviceProperties), "" on error. */
void engk_device_name(int device, char *name, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
