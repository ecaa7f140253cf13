/* A CUDA driver library that is not one: the entry points the workload calls, with "device"
 * memory in host memory and a "GPU" whose kernel launch does what FAKE_GPU says:
 *   add     C[i] = A[i] + B[i] for every thread of the launch (a GPU that works)
 *   wrong   the same, but element 7 is off by one
 *   nothing the launch succeeds and writes nothing
 *   fail    the launch fails (CUDA_ERROR_LAUNCH_FAILED)
 * FAKE_DEVICES is the device count (default 1); 0 makes cuInit report CUDA_ERROR_NO_DEVICE.
 * FAKE_MEMORY_POOLS=1 reports memory pools (as a data-centre GPU does: stream-ordered allocation).
 * Built by tests/fake_driver.rs; the kernel parameters are read as the PTX declares them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static const char *mode(void) { const char *m = getenv("FAKE_GPU"); return m ? m : "add"; }
static int devices(void) { const char *d = getenv("FAKE_DEVICES"); return d ? atoi(d) : 1; }

CUresult cuGetErrorString(CUresult e, const char **s) {
    *s = e == 100 ? "no CUDA-capable device is detected" : e == 719 ? "unspecified launch failure" : "error";
    return 0;
}
CUresult cuGetErrorName(CUresult e, const char **s) {
    *s = e == 100 ? "CUDA_ERROR_NO_DEVICE" : e == 719 ? "CUDA_ERROR_LAUNCH_FAILED" : "CUDA_ERROR_UNKNOWN";
    return 0;
}
CUresult cuInit(unsigned flags) { return devices() == 0 ? 100 : 0; }
CUresult cuDeviceGetCount(int *n) { *n = devices(); return 0; }
CUresult cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }
CUresult cuDeviceGetName(char *name, int len, int device) { strncpy(name, "Fake GPU", len); return 0; }
CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
    *value = getenv("FAKE_MEMORY_POOLS") != NULL; /* the only attribute asked for */
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int device) { *ctx = (void *)(intptr_t)(device + 1); return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int device) { return 0; }
static void *current;
CUresult cuCtxGetCurrent(void **ctx) { *ctx = current; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { current = ctx; return 0; }
CUresult cuModuleLoadData(void **module, const void *image) {
    if (!strstr((const char *)image, ".entry vector_add(")) return 218; /* CUDA_ERROR_INVALID_PTX */
    *module = (void *)1;
    return 0;
}
CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
    if (strcmp(name, "vector_add") != 0) return 500; /* CUDA_ERROR_NOT_FOUND */
    *function = (void *)1;
    return 0;
}
CUresult cuModuleUnload(void *module) { return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) { *ptr = (CUdeviceptr)(uintptr_t)malloc(bytes); return 0; }
CUresult cuMemFree_v2(CUdeviceptr ptr) { free((void *)(uintptr_t)ptr); return 0; }
CUresult cuMemAllocAsync(CUdeviceptr *ptr, size_t bytes, void *stream) { return cuMemAlloc_v2(ptr, bytes); }
CUresult cuMemFreeAsync(CUdeviceptr ptr, void *stream) { return cuMemFree_v2(ptr); }
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, void *stream) {
    memset((void *)(uintptr_t)dst, value, n);
    return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream) {
    memcpy((void *)(uintptr_t)dst, src, n);
    return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream) {
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return 0;
}
CUresult cuEventCreate(void **event, unsigned flags) { *event = malloc(1); return 0; }
CUresult cuEventDestroy_v2(void *event) { free(event); return 0; }
CUresult cuStreamSynchronize(void *stream) { return 0; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    if (strcmp(mode(), "fail") == 0) return 719;
    if (strcmp(mode(), "nothing") == 0) return 0;
    const float *a = (const float *)(uintptr_t)*(CUdeviceptr *)params[0];
    const float *b = (const float *)(uintptr_t)*(CUdeviceptr *)params[1];
    float *c = (float *)(uintptr_t)*(CUdeviceptr *)params[2];
    unsigned n = *(unsigned *)params[3];
    for (unsigned i = 0; i < gx * bx; i++)
        if (i < n) c[i] = a[i] + b[i];
    if (strcmp(mode(), "wrong") == 0 && n > 7) c[7] += 1.0f;
    return 0;
}
