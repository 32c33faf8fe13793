/* NVML through dlopen: the library absent (for real on a machine without the driver, and forced
 * by a path that does not exist), a library lacking the entry points, a driver that fails to
 * start, and fake libraries exporting each version of the process list with its own record
 * layout. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/nvml.h"

#define GIB (1024ull * 1024 * 1024)
#define MIB (1024ull * 1024)

static void one_line(const char *s) {
  ASSERT(*s != '\0');
  ASSERT(strchr(s, '\n') == NULL);
}

TEST_IMPL(nvml_absent) {
  vl_nvml_t n;
  char err[256];
  ASSERT_INT_EQ(setenv(VL_NVML_ENV, "/nonexistent/libnvidia-ml.so.1", 1), 0);
  ASSERT_INT_EQ(vl_nvml_open(&n, err, sizeof(err)), VL_ENOENT);
  one_line(err);
  ASSERT(strstr(err, "NVML not available: /nonexistent/libnvidia-ml.so.1") == err);
  ASSERT(n.lib == NULL && n.n_devices == 0);
  vl_nvml_close(&n); /* safe on a failed open */
  /* The real library: absent on a machine without the NVIDIA driver, working on one with it. */
  ASSERT_INT_EQ(unsetenv(VL_NVML_ENV), 0);
  int rc = vl_nvml_open(&n, err, sizeof(err));
  if (rc == 0) {
    fprintf(stderr, "NVML found: %u devices\n", vl_nvml_count(&n));
    for (unsigned i = 0; i < vl_nvml_count(&n); i++) {
      uint64_t used, total;
      ASSERT_INT_EQ(vl_nvml_memory(&n, i, &used, &total), 0);
      ASSERT(used <= total);
    }
    vl_nvml_close(&n);
  } else {
    fprintf(stderr, "%s\n", err);
    ASSERT(rc == VL_ENOENT || rc == VL_EIO);
    one_line(err);
    if (rc == VL_ENOENT)
      ASSERT(strstr(err, "libnvidia-ml.so.1") != NULL || strstr(err, "Driver Not Loaded"));
  }
}

TEST_IMPL(nvml_not_nvml) {
  vl_nvml_t n;
  char err[256];
  ASSERT_INT_EQ(setenv(VL_NVML_ENV, "libm.so.6", 1), 0);
  ASSERT_INT_EQ(vl_nvml_open(&n, err, sizeof(err)), VL_EIO);
  ASSERT_STR_EQ(err, "NVML library libm.so.6 lacks nvmlInit_v2");
}

TEST_IMPL(nvml_driver_fails) {
  vl_nvml_t n;
  char err[256];
  ASSERT_INT_EQ(setenv(VL_NVML_ENV, FAKE_NVML_V3, 1), 0);
  ASSERT_INT_EQ(setenv("FAKE_NVML_INIT_RC", "9", 1), 0);
  ASSERT_INT_EQ(vl_nvml_open(&n, err, sizeof(err)), VL_ENOENT);
  ASSERT_STR_EQ(err, "NVML could not start: Driver Not Loaded");
  ASSERT_INT_EQ(setenv("FAKE_NVML_INIT_RC", "999", 1), 0);
  ASSERT_INT_EQ(vl_nvml_open(&n, err, sizeof(err)), VL_EIO);
  ASSERT_STR_EQ(err, "NVML could not start: Unknown Error");
}

static void check_fake(const char *lib, int version) {
  vl_nvml_t n;
  char err[256];
  ASSERT_INT_EQ(setenv(VL_NVML_ENV, lib, 1), 0);
  ASSERT_INT_EQ(setenv("FAKE_NVML_PROCS", "0:100:1024,0:200:512,1:100:256,1:300:na", 1), 0);
  ASSERT_INT_EQ(vl_nvml_open(&n, err, sizeof(err)), 0);
  ASSERT_INT_EQ(n.procs_version, version);
  ASSERT_UINT_EQ(vl_nvml_count(&n), 2);
  char name[64];
  ASSERT_INT_EQ(vl_nvml_name(&n, 1, name, sizeof(name)), 0);
  ASSERT_STR_EQ(name, "Fake GPU 1");
  uint64_t used, total;
  /* Only the _v3 build has the newer memory call, which leaves the driver's reserve out. */
  ASSERT_INT_EQ(n.memory_v2 != NULL, version == 3);
  uint64_t reserve = version == 3 ? 0 : 512 * MIB;
  ASSERT_INT_EQ(vl_nvml_memory(&n, 0, &used, &total), 0);
  ASSERT_UINT_EQ(total, 80 * GIB);
  ASSERT_UINT_EQ(used, 1 * GIB + 1536 * MIB + reserve);
  ASSERT_INT_EQ(vl_nvml_memory(&n, 1, &used, &total), 0);
  ASSERT_UINT_EQ(used, 2 * GIB + 256 * MIB + reserve);
  ASSERT_INT_EQ(vl_nvml_memory(&n, 2, &used, &total), VL_ERANGE);
  vl_nvml_proc_t p[8];
  unsigned count = 0;
  ASSERT_INT_EQ(vl_nvml_processes(&n, 0, p, 8, &count), 0);
  ASSERT_UINT_EQ(count, 2);
  ASSERT_UINT_EQ(p[0].pid, 100);
  ASSERT_UINT_EQ(p[0].used_bytes, 1024 * MIB);
  ASSERT_UINT_EQ(p[1].pid, 200);
  ASSERT_UINT_EQ(p[1].used_bytes, 512 * MIB);
  ASSERT_INT_EQ(vl_nvml_processes(&n, 1, p, 8, &count), 0);
  ASSERT_UINT_EQ(count, 2);
  ASSERT_UINT_EQ(p[0].pid, 100);
  ASSERT_UINT_EQ(p[0].used_bytes, 256 * MIB);
  ASSERT_UINT_EQ(p[1].pid, 300);
  ASSERT_UINT_EQ(p[1].used_bytes, VL_NVML_UNKNOWN);
  ASSERT_INT_EQ(vl_nvml_processes(&n, 5, p, 8, &count), VL_ERANGE);
  vl_nvml_close(&n);
  vl_nvml_close(&n); /* twice is harmless */
}

TEST_IMPL(nvml_fake_v3) {
  check_fake(FAKE_NVML_V3, 3);
}

TEST_IMPL(nvml_fake_v2) {
  check_fake(FAKE_NVML_V2, 2);
}

TEST_IMPL(nvml_fake_v1) {
  check_fake(FAKE_NVML_V1, 1);
}

/* A driver that has the newer memory call but cannot answer it: the older one from then on. A
 * real failure is an error. */
TEST_IMPL(nvml_memory_v2_fallback) {
  vl_nvml_t n;
  char err[256];
  uint64_t used, total;
  ASSERT_INT_EQ(setenv(VL_NVML_ENV, FAKE_NVML_V3, 1), 0);
  ASSERT_INT_EQ(setenv("FAKE_NVML_MEM_V2_RC", "3", 1), 0); /* NVML_ERROR_NOT_SUPPORTED */
  ASSERT_INT_EQ(vl_nvml_open(&n, err, sizeof(err)), 0);
  ASSERT(n.memory_v2 != NULL);
  ASSERT_INT_EQ(vl_nvml_memory(&n, 0, &used, &total), 0);
  ASSERT_UINT_EQ(used, 1 * GIB + 512 * MIB);
  ASSERT(n.memory_v2 == NULL);
  ASSERT_INT_EQ(vl_nvml_memory(&n, 1, &used, &total), 0);
  ASSERT_UINT_EQ(used, 2 * GIB + 512 * MIB);
  vl_nvml_close(&n);
  ASSERT_INT_EQ(setenv("FAKE_NVML_MEM_V2_RC", "999", 1), 0);
  ASSERT_INT_EQ(vl_nvml_open(&n, err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_nvml_memory(&n, 0, &used, &total), VL_EIO);
  ASSERT_STR_EQ(vl_nvml_error(&n), "Unknown Error");
  vl_nvml_close(&n);
}

/* More processes than the first call has room for: the list is asked for again, larger. */
TEST_IMPL(nvml_many_processes) {
  char procs[4096];
  size_t k = 0;
  for (int i = 0; i < 300; i++)
    k += (size_t)snprintf(procs + k, sizeof(procs) - k, "%s%d:%d:%d", i ? "," : "", i % 3, 1000 + i,
                          i);
  ASSERT(k < sizeof(procs) - 1);
  ASSERT_INT_EQ(setenv(VL_NVML_ENV, FAKE_NVML_V1, 1), 0);
  ASSERT_INT_EQ(setenv("FAKE_NVML_DEVICES", "3", 1), 0);
  ASSERT_INT_EQ(setenv("FAKE_NVML_PROCS", procs, 1), 0);
  vl_nvml_t n;
  char err[256];
  ASSERT_INT_EQ(vl_nvml_open(&n, err, sizeof(err)), 0);
  ASSERT_UINT_EQ(vl_nvml_count(&n), 3);
  vl_nvml_proc_t p[128];
  unsigned count = 0;
  ASSERT_INT_EQ(vl_nvml_processes(&n, 2, p, 128, &count), 0);
  ASSERT_UINT_EQ(count, 100);
  for (unsigned i = 0; i < 100; i++) {
    ASSERT_UINT_EQ(p[i].pid, 1000 + 3 * i + 2);
    ASSERT_UINT_EQ(p[i].used_bytes, (3 * i + 2) * MIB);
  }
  /* A smaller array gets the first ones; count still says how many there are. */
  ASSERT_INT_EQ(vl_nvml_processes(&n, 0, p, 10, &count), 0);
  ASSERT_UINT_EQ(count, 100);
  ASSERT_UINT_EQ(p[9].pid, 1027);
  vl_nvml_close(&n);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(nvml_absent),
    TEST_ENTRY(nvml_not_nvml),
    TEST_ENTRY(nvml_driver_fails),
    TEST_ENTRY(nvml_fake_v3),
    TEST_ENTRY(nvml_fake_v2),
    TEST_ENTRY(nvml_fake_v1),
    TEST_ENTRY(nvml_memory_v2_fallback),
    TEST_ENTRY(nvml_many_processes),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
