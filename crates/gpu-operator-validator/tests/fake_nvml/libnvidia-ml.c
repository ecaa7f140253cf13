/* An NVML library that is not one: the entry points the health agent calls (through nvml-wrapper),
 * answering from a state file that is re-read on every call, so a test can flip a fault while the
 * agent runs. FAKE_NVML_STATE is the file's path; without it (or while it cannot be read) there is
 * one healthy GPU. One setting a line, `#` starts a comment:
 *   gpus N             N GPUs (default 1)
 *   dbe I N            GPU I has N volatile and aggregate double-bit (uncorrected) ECC errors
 *   retired I          GPU I has retired pages pending
 *   remap-failure I    GPU I has a row-remap failure (field 145)
 *   remap-pending I    GPU I has a row remap pending (field 144)
 *   recovery I N       GPU I's recovery action is N (field 230)
 *   lost I             GPU I has fallen off the bus (NVML_ERROR_GPU_IS_LOST)
 *   thermal I          GPU I is in hardware thermal slowdown
 *   xid I X SEQ        XID X on GPU I, delivered once per SEQ (a larger SEQ delivers it again)
 * Built by the tests with `cc -shared -fPIC`; nothing here touches a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef void *nvmlEventSet_t;

enum {
    OK = 0, INVALID_ARG = 2, NOT_SUPPORTED = 3, TIMEOUT = 10, GPU_IS_LOST = 15,
    MAX_GPUS = 16,
    FIELD_REMAPPED_PENDING = 144, FIELD_REMAPPED_FAILURE = 145, FIELD_RECOVERY_ACTION = 230,
    VALUE_UNSIGNED_LONG_LONG = 3,
    EVENT_CRITICAL_XID = 0x8,
    HW_THERMAL_SLOWDOWN = 0x40,
};

struct gpu {
    unsigned long long dbe, recovery;
    int retired, remap_failure, remap_pending, lost, thermal;
};

struct state {
    unsigned gpus;
    struct gpu gpu[MAX_GPUS];
    unsigned xid_gpu;
    unsigned long long xid, xid_seq;
};

/* The state file as it is now. */
static struct state load(void) {
    struct state s;
    memset(&s, 0, sizeof s);
    s.gpus = 1;
    const char *path = getenv("FAKE_NVML_STATE");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return s;
    char line[256], key[32];
    unsigned i;
    unsigned long long a, b;
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        int n = sscanf(line, "%31s %u %llu %llu", key, &i, &a, &b);
        if (n < 2) continue;
        if (!strcmp(key, "gpus")) { s.gpus = i > MAX_GPUS ? MAX_GPUS : i; continue; }
        if (i >= MAX_GPUS) continue;
        struct gpu *g = &s.gpu[i];
        if (!strcmp(key, "dbe") && n >= 3) g->dbe = a;
        else if (!strcmp(key, "recovery") && n >= 3) g->recovery = a;
        else if (!strcmp(key, "retired")) g->retired = 1;
        else if (!strcmp(key, "remap-failure")) g->remap_failure = 1;
        else if (!strcmp(key, "remap-pending")) g->remap_pending = 1;
        else if (!strcmp(key, "lost")) g->lost = 1;
        else if (!strcmp(key, "thermal")) g->thermal = 1;
        else if (!strcmp(key, "xid") && n == 4) { s.xid_gpu = i; s.xid = a; s.xid_seq = b; }
    }
    fclose(f);
    return s;
}

/* Handles are the index plus one, so none is NULL. */
static unsigned index_of(nvmlDevice_t d) { return (unsigned)((unsigned long)d - 1); }

/* The GPU behind `d`, or the error NVML would give. */
static nvmlReturn_t gpu_of(nvmlDevice_t d, struct state *s, struct gpu **g) {
    *s = load();
    unsigned i = index_of(d);
    if (i >= s->gpus) return INVALID_ARG;
    if (s->gpu[i].lost) return GPU_IS_LOST;
    *g = &s->gpu[i];
    return OK;
}

nvmlReturn_t nvmlInit_v2(void) { return OK; }
nvmlReturn_t nvmlInitWithFlags(unsigned flags) { (void)flags; return OK; }
nvmlReturn_t nvmlShutdown(void) { return OK; }

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case OK: return "Success";
    case INVALID_ARG: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case TIMEOUT: return "Timeout";
    case GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned len) {
    snprintf(version, len, "570.172.08");
    return OK;
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned len) {
    snprintf(version, len, "12.570.172.08");
    return OK;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count) {
    *count = load().gpus;
    return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *device) {
    struct state s = load();
    if (index >= s.gpus) return INVALID_ARG;
    if (s.gpu[index].lost) return GPU_IS_LOST;
    *device = (nvmlDevice_t)(unsigned long)(index + 1);
    return OK;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned *index) {
    *index = index_of(device);
    return OK;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned len) {
    struct state s;
    struct gpu *g;
    nvmlReturn_t r = gpu_of(device, &s, &g);
    if (r != OK) return r;
    snprintf(uuid, len, "GPU-fa4e0000-0000-0000-0000-%012u", index_of(device));
    return OK;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
                                         unsigned long long *count) {
    (void)counter_type;
    struct state s;
    struct gpu *g;
    nvmlReturn_t r = gpu_of(device, &s, &g);
    if (r != OK) return r;
    *count = error_type == 1 ? g->dbe : 0; /* 1: NVML_MEMORY_ERROR_TYPE_UNCORRECTED */
    return OK;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int *pending) {
    struct state s;
    struct gpu *g;
    nvmlReturn_t r = gpu_of(device, &s, &g);
    if (r != OK) return r;
    *pending = g->retired;
    return OK;
}

/* nvmlFieldValue_t as nvml.h lays it out. */
typedef struct {
    unsigned fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    union { double d; unsigned long long ull; } value;
} nvmlFieldValue_t;

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t *values) {
    struct state s;
    struct gpu *g;
    nvmlReturn_t r = gpu_of(device, &s, &g);
    if (r != OK) return r;
    for (int k = 0; k < count; k++) {
        nvmlFieldValue_t *v = &values[k];
        v->valueType = VALUE_UNSIGNED_LONG_LONG;
        v->nvmlReturn = OK;
        switch (v->fieldId) {
        case FIELD_REMAPPED_PENDING: v->value.ull = (unsigned long long)g->remap_pending; break;
        case FIELD_REMAPPED_FAILURE: v->value.ull = (unsigned long long)g->remap_failure; break;
        case FIELD_RECOVERY_ACTION: v->value.ull = g->recovery; break;
        default: v->nvmlReturn = NOT_SUPPORTED;
        }
    }
    return OK;
}

static nvmlReturn_t slowdown(nvmlDevice_t device, unsigned long long *reasons) {
    struct state s;
    struct gpu *g;
    nvmlReturn_t r = gpu_of(device, &s, &g);
    if (r != OK) return r;
    *reasons = g->thermal ? HW_THERMAL_SLOWDOWN : 0;
    return OK;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r) {
    return slowdown(d, r);
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r) {
    return slowdown(d, r);
}

/* Events: one set; an `xid` line is delivered once per sequence number. */
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

static int the_set;
static unsigned long long delivered_seq;

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) { *set = &the_set; return OK; }
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) { (void)set; return OK; }
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *types) {
    (void)device;
    *types = EVENT_CRITICAL_XID;
    return OK;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) {
    (void)device; (void)types; (void)set;
    return OK;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeout_ms) {
    (void)set;
    /* Look for a new XID every 100 ms until the timeout, as a driver would wake the waiter. */
    for (unsigned waited = 0;; waited += 100) {
        struct state s = load();
        if (s.xid_seq > delivered_seq && s.xid_gpu < s.gpus) {
            delivered_seq = s.xid_seq;
            memset(data, 0, sizeof *data);
            data->device = (nvmlDevice_t)(unsigned long)(s.xid_gpu + 1);
            data->eventType = EVENT_CRITICAL_XID;
            data->eventData = s.xid;
            return OK;
        }
        if (waited >= timeout_ms) return TIMEOUT;
        unsigned step = timeout_ms - waited < 100 ? timeout_ms - waited : 100;
        struct timespec ts = {0, (long)step * 1000000L};
        nanosleep(&ts, NULL);
    }
}
