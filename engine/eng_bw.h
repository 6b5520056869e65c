/* The read-bandwidth probe of engine bench: a read-only kernel over a large buffer (the decode floor: a decode
 * step reads every weight once and writes almost nothing). */
#ifndef ENG_BW_H
#define ENG_BW_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

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
