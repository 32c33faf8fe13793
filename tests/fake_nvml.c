/* A stand-in for libnvidia-ml.so.1 with the entry points vlmload uses, loaded by the tests through
 * VLMLOAD_NVML_LIB. It is built three times: FAKE_NVML_PROCS_VERSION picks which
 * nvmlDeviceGetComputeRunningProcesses it exports (_v3, _v2 or the first) and so which record
 * layout it writes, as the real library's versions do.
 *
 * Configured from the environment when nvmlInit_v2 runs:
 *   FAKE_NVML_INIT_RC   nvmlInit_v2 returns this code (default 0)
 *   FAKE_NVML_DEVICES   device count (default 2, at most 8)
 *   FAKE_NVML_PROCS     "DEV:PID:MIB,..." compute processes; MIB "na" means not available
 *   FAKE_NVML_MEM_V2_RC nvmlDeviceGetMemoryInfo_v2 returns this code (default 0)
 * Device i has 80 GiB, of which the driver reserves 512 MiB and (i + 1) GiB plus its processes'
 * memory is used. nvmlDeviceGetMemoryInfo counts the reserve as used, as the real one does;
 * nvmlDeviceGetMemoryInfo_v2, exported by the _v3 build only (a newer driver), does not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FAKE_NVML_PROCS_VERSION
#define FAKE_NVML_PROCS_VERSION 3
#endif

#define GIB      (1024ull * 1024 * 1024)
#define MIB      (1024ull * 1024)
#define NA       (~0ull)
#define RESERVED (512 * MIB)

typedef struct {
  unsigned long long total, free, used;
} memory_t;

typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} memory_v2_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} proc_v1_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} proc_v2_t;

typedef struct {
  unsigned magic;
  unsigned index;
} fake_device_t;

int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int rc);
int nvmlDeviceGetCount_v2(unsigned *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev);
int nvmlDeviceGetMemoryInfo(void *dev, memory_t *m);
int nvmlDeviceGetName(void *dev, char *buf, unsigned len);
#if FAKE_NVML_PROCS_VERSION == 3
int nvmlDeviceGetMemoryInfo_v2(void *dev, memory_v2_t *m);
int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned *count, proc_v2_t *infos);
#elif FAKE_NVML_PROCS_VERSION == 2
int nvmlDeviceGetComputeRunningProcesses_v2(void *dev, unsigned *count, proc_v2_t *infos);
#else
int nvmlDeviceGetComputeRunningProcesses(void *dev, unsigned *count, proc_v1_t *infos);
#endif

static fake_device_t devices[8];
static unsigned n_devices;
static int started;
static struct {
  unsigned dev, pid;
  unsigned long long used;
} procs[1024];
static unsigned n_procs;

static unsigned long num(const char **p) {
  unsigned long v = 0;
  while (**p >= '0' && **p <= '9')
    v = v * 10 + (unsigned long)(*(*p)++ - '0');
  return v;
}

int nvmlInit_v2(void) {
  const char *rc = getenv("FAKE_NVML_INIT_RC");
  if (rc && *rc)
    return (int)strtol(rc, NULL, 10);
  const char *nd = getenv("FAKE_NVML_DEVICES");
  n_devices = nd && *nd ? (unsigned)strtoul(nd, NULL, 10) : 2;
  if (n_devices > 8)
    n_devices = 8;
  for (unsigned i = 0; i < 8; i++)
    devices[i] = (fake_device_t){0x6e766d6c, i};
  n_procs = 0;
  const char *p = getenv("FAKE_NVML_PROCS");
  while (p && *p && n_procs < 1024) {
    procs[n_procs].dev = (unsigned)num(&p);
    p += *p == ':';
    procs[n_procs].pid = (unsigned)num(&p);
    p += *p == ':';
    if (strncmp(p, "na", 2) == 0) {
      procs[n_procs].used = NA;
      p += 2;
    } else {
      procs[n_procs].used = num(&p) * MIB;
    }
    n_procs++;
    p += *p == ',';
  }
  started++;
  return 0;
}

int nvmlShutdown(void) {
  if (!started)
    return 1; /* NVML_ERROR_UNINITIALIZED */
  started--;
  return 0;
}

const char *nvmlErrorString(int rc) {
  switch (rc) {
  case 0:
    return "Success";
  case 1:
    return "Uninitialized";
  case 2:
    return "Invalid Argument";
  case 7:
    return "Insufficient Size";
  case 9:
    return "Driver Not Loaded";
  default:
    return "Unknown Error";
  }
}

static fake_device_t *check(void *dev) {
  fake_device_t *d = dev;
  if (!started || d < devices || d >= devices + n_devices || d->magic != 0x6e766d6c)
    return NULL;
  return d;
}

int nvmlDeviceGetCount_v2(unsigned *n) {
  if (!started)
    return 1;
  *n = n_devices;
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev) {
  if (!started)
    return 1;
  if (i >= n_devices)
    return 2;
  *dev = &devices[i];
  return 0;
}

static unsigned long long allocated(const fake_device_t *d) {
  unsigned long long used = (d->index + 1) * GIB;
  for (unsigned k = 0; k < n_procs; k++) {
    if (procs[k].dev == d->index && procs[k].used != NA)
      used += procs[k].used;
  }
  return used;
}

int nvmlDeviceGetMemoryInfo(void *dev, memory_t *m) {
  fake_device_t *d = check(dev);
  if (!d || !m)
    return 2;
  m->total = 80 * GIB;
  m->used = RESERVED + allocated(d);
  m->free = m->total - m->used;
  return 0;
}

#if FAKE_NVML_PROCS_VERSION == 3
int nvmlDeviceGetMemoryInfo_v2(void *dev, memory_v2_t *m) {
  const char *rc = getenv("FAKE_NVML_MEM_V2_RC");
  if (rc && *rc)
    return (int)strtol(rc, NULL, 10);
  fake_device_t *d = check(dev);
  if (!d || !m)
    return 2;
  if (m->version != ((unsigned)sizeof(memory_v2_t) | 2u << 24))
    return 13; /* what the real library answers to a wrong version */
  m->total = 80 * GIB;
  m->reserved = RESERVED;
  m->used = allocated(d);
  m->free = m->total - m->reserved - m->used;
  return 0;
}
#endif

int nvmlDeviceGetName(void *dev, char *buf, unsigned len) {
  fake_device_t *d = check(dev);
  if (!d)
    return 2;
  snprintf(buf, len, "Fake GPU %u", d->index);
  return 0;
}

static int list(void *dev, unsigned *count, void *infos) {
  fake_device_t *d = check(dev);
  if (!d || !count)
    return 2;
  unsigned n = 0;
  for (unsigned k = 0; k < n_procs; k++)
    n += procs[k].dev == d->index;
  if (*count < n) {
    *count = n;
    return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
  }
  unsigned j = 0;
  for (unsigned k = 0; k < n_procs; k++) {
    if (procs[k].dev != d->index)
      continue;
#if FAKE_NVML_PROCS_VERSION == 1
    proc_v1_t *r = (proc_v1_t *)infos + j;
    *r = (proc_v1_t){procs[k].pid, procs[k].used};
#else
    proc_v2_t *r = (proc_v2_t *)infos + j;
    *r = (proc_v2_t){procs[k].pid, procs[k].used, 0xffffffffu, 0xffffffffu};
#endif
    j++;
  }
  *count = n;
  return 0;
}

#if FAKE_NVML_PROCS_VERSION == 3
int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned *count, proc_v2_t *infos) {
  return list(dev, count, infos);
}
#elif FAKE_NVML_PROCS_VERSION == 2
int nvmlDeviceGetComputeRunningProcesses_v2(void *dev, unsigned *count, proc_v2_t *infos) {
  return list(dev, count, infos);
}
#else
int nvmlDeviceGetComputeRunningProcesses(void *dev, unsigned *count, proc_v1_t *infos) {
  return list(dev, count, infos);
}
#endif
