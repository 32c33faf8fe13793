#include "vlmload/nvml.h"
#include "vlmload/common.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* From NVML's documented ABI (nvml.h): return codes and the records we read. */
#define NVML_SUCCESS                         0
#define NVML_ERROR_NOT_SUPPORTED             3
#define NVML_ERROR_INSUFFICIENT_SIZE         7
#define NVML_ERROR_DRIVER_NOT_LOADED         9
#define NVML_ERROR_LIBRARY_NOT_FOUND         12
#define NVML_ERROR_FUNCTION_NOT_FOUND        13
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_VALUE_NOT_AVAILABLE             (~0ULL)
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE      96

typedef struct {
  unsigned long long total, free, used;
} nvml_memory_t; /* nvmlMemory_t */

typedef struct {
  unsigned int version; /* NVML_STRUCT_VERSION(Memory, 2): the size | 2 << 24 */
  unsigned long long total, reserved, free, used;
} nvml_memory_v2_t; /* nvmlMemory_v2_t */

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvml_proc_v1_t; /* nvmlProcessInfo_v1_t */

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvml_proc_v2_t; /* nvmlProcessInfo_v2_t, also the record of _v3 */

/* dlsym into a function pointer without an object-to-function pointer cast. */
static int sym(void *lib, const char *name, void *fp) {
  void *p = dlsym(lib, name);
  memcpy(fp, &p, sizeof(p));
  return p ? 0 : -1;
}

static const char *rc_text(const vl_nvml_t *n, int rc) {
  const char *s = n->errstr ? n->errstr(rc) : NULL;
  return s ? s : "unknown NVML error";
}

int vl_nvml_open(vl_nvml_t *n, char *err, size_t errlen) {
  memset(n, 0, sizeof(*n));
  const char *path = getenv(VL_NVML_ENV);
  if (!path || !*path)
    path = "libnvidia-ml.so.1";
  int rc = VL_EIO, started = 0;
  n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!n->lib) {
    const char *why = dlerror();
    vl_set_err(err, errlen, "NVML not available: %s (is the NVIDIA driver installed?)",
               why ? why : path);
    return VL_ENOENT;
  }
  static const struct {
    const char *name;
    size_t off;
  } need[] = {
      {"nvmlInit_v2", offsetof(vl_nvml_t, init)},
      {"nvmlShutdown", offsetof(vl_nvml_t, shutdown)},
      {"nvmlErrorString", offsetof(vl_nvml_t, errstr)},
      {"nvmlDeviceGetCount_v2", offsetof(vl_nvml_t, count)},
      {"nvmlDeviceGetHandleByIndex_v2", offsetof(vl_nvml_t, handle)},
      {"nvmlDeviceGetMemoryInfo", offsetof(vl_nvml_t, memory)},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(need); i++) {
    if (sym(n->lib, need[i].name, (char *)n + need[i].off) != 0) {
      vl_set_err(err, errlen, "NVML library %s lacks %s", path, need[i].name);
      goto fail;
    }
  }
  sym(n->lib, "nvmlDeviceGetName", &n->name);
  sym(n->lib, "nvmlDeviceGetMemoryInfo_v2", &n->memory_v2);
  if (sym(n->lib, "nvmlDeviceGetComputeRunningProcesses_v3", &n->procs) == 0)
    n->procs_version = 3;
  else if (sym(n->lib, "nvmlDeviceGetComputeRunningProcesses_v2", &n->procs) == 0)
    n->procs_version = 2;
  else if (sym(n->lib, "nvmlDeviceGetComputeRunningProcesses", &n->procs) == 0)
    n->procs_version = 1;
  else {
    vl_set_err(err, errlen, "NVML library %s lacks nvmlDeviceGetComputeRunningProcesses", path);
    goto fail;
  }
  int nr = n->init();
  if (nr != NVML_SUCCESS) {
    vl_set_err(err, errlen, "NVML could not start: %s", rc_text(n, nr));
    rc = nr == NVML_ERROR_DRIVER_NOT_LOADED || nr == NVML_ERROR_LIBRARY_NOT_FOUND ? VL_ENOENT
                                                                                  : VL_EIO;
    goto fail;
  }
  started = 1;
  unsigned count = 0;
  if ((nr = n->count(&count)) != NVML_SUCCESS) {
    vl_set_err(err, errlen, "NVML could not count devices: %s", rc_text(n, nr));
    goto fail;
  }
  n->devices = calloc(count ? count : 1, sizeof(*n->devices));
  if (!n->devices) {
    rc = VL_ENOMEM;
    vl_set_err(err, errlen, "out of memory");
    goto fail;
  }
  for (unsigned i = 0; i < count; i++) {
    if ((nr = n->handle(i, &n->devices[i])) != NVML_SUCCESS) {
      vl_set_err(err, errlen, "NVML could not open GPU %u: %s", i, rc_text(n, nr));
      goto fail;
    }
  }
  n->n_devices = count;
  return 0;

fail:
  if (started)
    n->shutdown();
  free(n->devices);
  dlclose(n->lib);
  memset(n, 0, sizeof(*n));
  return rc;
}

int vl_nvml_name(vl_nvml_t *n, unsigned i, char *buf, size_t len) {
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  int nr = -1;
  if (i < n->n_devices && n->name)
    nr = n->name(n->devices[i], name, sizeof(name));
  if (nr == NVML_SUCCESS) {
    name[sizeof(name) - 1] = '\0';
    snprintf(buf, len, "%s", name);
    return 0;
  }
  if (nr > 0)
    n->last_rc = nr;
  snprintf(buf, len, "GPU %u", i);
  return VL_EIO;
}

int vl_nvml_memory(vl_nvml_t *n, unsigned i, uint64_t *used, uint64_t *total) {
  if (i >= n->n_devices)
    return VL_ERANGE;
  if (n->memory_v2) {
    nvml_memory_v2_t m2 = {.version = (unsigned)sizeof(nvml_memory_v2_t) | 2u << 24};
    int nr = n->memory_v2(n->devices[i], &m2);
    if (nr == NVML_SUCCESS) {
      *used = m2.used;
      *total = m2.total;
      return 0;
    }
    if (nr != NVML_ERROR_NOT_SUPPORTED && nr != NVML_ERROR_FUNCTION_NOT_FOUND &&
        nr != NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
      n->last_rc = nr;
      return VL_EIO;
    }
    n->memory_v2 = NULL; /* this driver or device cannot: the older call from now on */
  }
  nvml_memory_t m;
  int nr = n->memory(n->devices[i], &m);
  if (nr != NVML_SUCCESS) {
    n->last_rc = nr;
    return VL_EIO;
  }
  *used = m.used;
  *total = m.total;
  return 0;
}

int vl_nvml_processes(vl_nvml_t *n, unsigned i, vl_nvml_proc_t *out, unsigned max,
                      unsigned *count) {
  if (i >= n->n_devices)
    return VL_ERANGE;
  size_t rec = n->procs_version == 1 ? sizeof(nvml_proc_v1_t) : sizeof(nvml_proc_v2_t);
  size_t off_pid =
      n->procs_version == 1 ? offsetof(nvml_proc_v1_t, pid) : offsetof(nvml_proc_v2_t, pid);
  size_t off_used = n->procs_version == 1 ? offsetof(nvml_proc_v1_t, usedGpuMemory)
                                          : offsetof(nvml_proc_v2_t, usedGpuMemory);
  unsigned got = 0;
  for (int attempt = 0;; attempt++) {
    if (n->pbuf_cap == 0 || (attempt > 0 && got > n->pbuf_cap)) {
      unsigned cap = got > 64 ? got + 16 : 64;
      unsigned char *b = realloc(n->pbuf, (size_t)cap * rec);
      if (!b)
        return VL_ENOMEM;
      n->pbuf = b;
      n->pbuf_cap = cap;
    }
    got = n->pbuf_cap;
    int nr = n->procs(n->devices[i], &got, n->pbuf);
    if (nr == NVML_SUCCESS)
      break;
    /* The list grew between the two calls: try again with room for the new size. */
    if (nr != NVML_ERROR_INSUFFICIENT_SIZE || attempt == 3 || got > (1u << 20)) {
      n->last_rc = nr;
      return VL_EIO;
    }
  }
  got = VL_MIN(got, n->pbuf_cap);
  for (unsigned k = 0; k < got && k < max; k++) {
    const unsigned char *r = n->pbuf + (size_t)k * rec;
    unsigned int pid;
    unsigned long long usedmem;
    memcpy(&pid, r + off_pid, sizeof(pid));
    memcpy(&usedmem, r + off_used, sizeof(usedmem));
    out[k].pid = pid;
    out[k].used_bytes = usedmem == NVML_VALUE_NOT_AVAILABLE ? VL_NVML_UNKNOWN : usedmem;
  }
  *count = got;
  return 0;
}

const char *vl_nvml_error(const vl_nvml_t *n) {
  return n->last_rc ? rc_text(n, n->last_rc) : "no error";
}

void vl_nvml_close(vl_nvml_t *n) {
  if (n->lib) {
    n->shutdown();
    dlclose(n->lib);
  }
  free(n->devices);
  free(n->pbuf);
  memset(n, 0, sizeof(*n));
}
