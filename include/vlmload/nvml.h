/* GPU memory through NVML, loaded at run time with dlopen: no build dependency on the NVIDIA
 * driver or its headers. The few entry points used are declared here from NVML's documented ABI.
 *
 * The library loaded is libnvidia-ml.so.1, or the file named by the environment variable
 * VLMLOAD_NVML_LIB when set: a hook for tests (a fake library) and for packagers whose driver
 * library lives outside the loader's path.
 *
 * NVML is thread-safe, but a vl_nvml_t holds scratch space: use it from one thread at a time.
 * Per-process figures name processes by their PID in the host's PID namespace; inside a container
 * those PIDs differ from the ones /proc shows.
 */
#ifndef VLMLOAD_NVML_H
#define VLMLOAD_NVML_H

#include <stddef.h>
#include <stdint.h>

#define VL_NVML_ENV "VLMLOAD_NVML_LIB"
/* used_bytes of a process whose figure NVML does not know (NVML_VALUE_NOT_AVAILABLE). */
#define VL_NVML_UNKNOWN UINT64_MAX

typedef struct vl_nvml_proc_s {
  unsigned pid;
  uint64_t used_bytes; /* or VL_NVML_UNKNOWN */
} vl_nvml_proc_t;

typedef struct vl_nvml_s {
  void *lib;
  int (*init)(void);
  int (*shutdown)(void);
  int (*count)(unsigned *n);
  int (*handle)(unsigned i, void **dev);
  int (*memory)(void *dev, void *mem);
  int (*memory_v2)(void *dev, void *mem);          /* may be NULL: drivers before r510 */
  int (*name)(void *dev, char *buf, unsigned len); /* may be NULL */
  int (*procs)(void *dev, unsigned *n, void *infos);
  const char *(*errstr)(int rc);
  int procs_version; /* 3, 2 or 1: which GetComputeRunningProcesses, and its record layout */
  unsigned n_devices;
  void **devices;
  unsigned char *pbuf; /* raw process records */
  unsigned pbuf_cap;   /* in records */
  int last_rc;         /* NVML's code for the last failure */
} vl_nvml_t;

/* Loads NVML and lists the devices. Returns 0; VL_ENOENT when the library or the driver is absent;
 * VL_EIO when NVML fails otherwise. err gets one line saying why. */
int vl_nvml_open(vl_nvml_t *n, char *err, size_t errlen);

/* Devices found by vl_nvml_open. */
static inline unsigned vl_nvml_count(const vl_nvml_t *n) {
  return n->n_devices;
}

/* The device's product name. Returns 0, or VL_EIO (buf is then "GPU i"). */
int vl_nvml_name(vl_nvml_t *n, unsigned i, char *buf, size_t len);

/* Used and total memory of device i, in bytes. Used memory is what nvidia-smi shows: from
 * nvmlDeviceGetMemoryInfo_v2, which leaves out the memory the driver reserves for itself (some
 * hundreds of MiB per GPU); with a driver that lacks it, the older call counts that reserve as
 * used. Returns 0, VL_ERANGE or VL_EIO. */
int vl_nvml_memory(vl_nvml_t *n, unsigned i, uint64_t *used, uint64_t *total);

/* The compute processes on device i: stores at most max in out and sets *count to how many there
 * are. Returns 0, VL_ERANGE or VL_EIO. */
int vl_nvml_processes(vl_nvml_t *n, unsigned i, vl_nvml_proc_t *out, unsigned max, unsigned *count);

/* NVML's text for the last failure. */
const char *vl_nvml_error(const vl_nvml_t *n);

/* Shuts NVML down and unloads it. Safe on a zeroed or failed vl_nvml_t. */
void vl_nvml_close(vl_nvml_t *n);

#endif
