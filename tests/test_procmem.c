/* Process memory from /proc against real processes: a child that maps and touches 64 MiB, a
 * `sleep` found by its command line and followed across a kill and a restart, a fixed PID that
 * exits, PID reuse told by the start time, and the cost of one read. */
#include "task.h"
#include "children.h"
#include "vlmload/common.h"
#include "vlmload/procmem.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#define MIB (1024.0 * 1024.0)

/* Samples t until it finds a process (or 5 s pass). */
static int wait_present(vl_procmem_track_t *t, vl_procmem_t *m) {
  for (int i = 0; i < 500; i++) {
    if (vl_procmem_track_sample(t, m) == 0)
      return 0;
    sleep_ms(10);
  }
  return VL_ENOENT;
}

TEST_IMPL(procmem_self) {
  vl_procmem_t m;
  ASSERT_INT_EQ(vl_procmem_read(getpid(), 0, VL_PROCMEM_PSS, &m), 0);
  ASSERT(m.rss_bytes > 100 * 1024);
  ASSERT(m.hwm_bytes >= m.rss_bytes);
  ASSERT(m.start_time > 0);
  if (access("/proc/self/smaps_rollup", R_OK) == 0) {
    ASSERT_INT_EQ(m.has_pss, 1);
    ASSERT(m.pss_bytes > 0 && m.pss_bytes <= m.rss_bytes + 4096);
  } else {
    ASSERT_INT_EQ(m.pss_denied, 1); /* a kernel before 4.14: RSS still reads */
  }
  uint64_t st;
  ASSERT_INT_EQ(vl_procmem_start_time(getpid(), &st), 0);
  ASSERT_UINT_EQ(st, m.start_time);
  /* The expected start time must match. */
  ASSERT_INT_EQ(vl_procmem_read(getpid(), m.start_time, 0, &m), 0);
  ASSERT_INT_EQ(vl_procmem_read(getpid(), m.start_time + 1, 0, &m), VL_ENOENT);
  ASSERT_INT_EQ(vl_procmem_read(0, 0, 0, &m), VL_ENOENT);
  ASSERT_INT_EQ(vl_procmem_read(-5, 0, 0, &m), VL_ENOENT);
}

/* Touches every page without the sanitizer's shadow reads adding to the count. */
__attribute__((no_sanitize_address)) static void touch(volatile char *p, size_t n) {
  for (size_t i = 0; i < n; i += 4096)
    p[i] = (char)i | 1;
}

/* A child that maps and touches 64 MiB on 'g', unmaps it on 'f', exits on 'q'; it answers each
 * command with one byte. */
static void child_main(int in, int out) {
  size_t n = 64u << 20;
  char *p = NULL;
  char c;
  while (read(in, &c, 1) == 1) {
    if (c == 'g') {
      p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED)
        _exit(2);
      touch(p, n);
    } else if (c == 'f') {
      munmap(p, n);
    } else {
      _exit(0);
    }
    if (write(out, "k", 1) != 1)
      _exit(3);
  }
  _exit(0);
}

static void command(int to, int from, char c) {
  char ack;
  ASSERT_INT_EQ(write(to, &c, 1), 1);
  ASSERT_INT_EQ(read(from, &ack, 1), 1);
}

TEST_IMPL(procmem_rss_grows) {
  int down[2], up[2];
  ASSERT_INT_EQ(pipe(down), 0);
  ASSERT_INT_EQ(pipe(up), 0);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(down[1]);
    close(up[0]);
    child_main(down[0], up[1]);
  }
  close(down[0]);
  close(up[1]);
  vl_procmem_track_t t;
  char err[128];
  ASSERT_INT_EQ(vl_procmem_track_pid(&t, pid, VL_PROCMEM_PSS, err, sizeof(err)), 0);
  vl_procmem_t before, grown, freed;
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &before), 0);
  command(down[1], up[0], 'g');
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &grown), 0);
  double d_rss = ((double)grown.rss_bytes - (double)before.rss_bytes) / MIB;
  fprintf(stderr, "rss %.1f -> %.1f MiB (+%.1f), hwm %.1f, pss %.1f -> %.1f\n",
          (double)before.rss_bytes / MIB, (double)grown.rss_bytes / MIB, d_rss,
          (double)grown.hwm_bytes / MIB, (double)before.pss_bytes / MIB,
          (double)grown.pss_bytes / MIB);
  ASSERT(d_rss > 63.0 && d_rss < 68.0);
  ASSERT(grown.hwm_bytes >= grown.rss_bytes);
  if (grown.has_pss) {
    double d_pss = ((double)grown.pss_bytes - (double)before.pss_bytes) / MIB;
    ASSERT(d_pss > 63.0 && d_pss < 68.0);
  }
  command(down[1], up[0], 'f');
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &freed), 0);
  fprintf(stderr, "after unmap: rss %.1f hwm %.1f\n", (double)freed.rss_bytes / MIB,
          (double)freed.hwm_bytes / MIB);
  /* The resident set falls back; its peak stays (the kernel records the peak from its per-CPU
   * counters, which may lag the exact figure by a little). */
  ASSERT(freed.rss_bytes < before.rss_bytes + (4u << 20));
  ASSERT(freed.hwm_bytes >= before.rss_bytes + (60u << 20));
  ASSERT_UINT_EQ(freed.start_time, before.start_time);
  ASSERT_INT_EQ(write(down[1], "q", 1), 1);
  ASSERT_INT_EQ(waitpid(pid, NULL, 0), pid);
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &freed), VL_ENOENT);
  ASSERT_INT_EQ(t.present, 0);
  ASSERT_UINT_EQ(t.restarts, 0);
  vl_procmem_track_free(&t);
  close(down[1]);
  close(up[0]);
}

/* A fixed PID reads missing once its process exits, and stays so. */
TEST_IMPL(procmem_fixed_pid_exits) {
  pid_t pid = spawn_sleep("30");
  vl_procmem_track_t t;
  char err[128];
  ASSERT_INT_EQ(vl_procmem_track_pid(&t, pid, 0, err, sizeof(err)), 0);
  vl_procmem_t m;
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &m), 0);
  /* Killed but not reaped: a zombie holds no memory and reads missing. */
  kill(pid, SIGKILL);
  int gone = 0;
  for (int i = 0; i < 500 && !gone; i++) {
    gone = vl_procmem_track_sample(&t, &m) == VL_ENOENT;
    if (!gone)
      sleep_ms(10);
  }
  ASSERT(gone);
  ASSERT_INT_EQ(waitpid(pid, NULL, 0), pid);
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &m), VL_ENOENT);
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &m), VL_ENOENT);
  vl_procmem_track_free(&t);
  /* A PID with no process fails at once, with a reason. */
  ASSERT_INT_EQ(vl_procmem_track_pid(&t, pid, 0, err, sizeof(err)), VL_ENOENT);
  char want[64];
  snprintf(want, sizeof(want), "no process %ld", (long)pid);
  ASSERT_STR_EQ(err, want);
}

TEST_IMPL(procmem_find) {
  char arg[64], re[96], err[128];
  /* A fraction unique to this test run makes the command line unique. */
  snprintf(arg, sizeof(arg), "1000.%ld%ld", (long)getpid(), (long)(vl_now_ns() % 100000));
  snprintf(re, sizeof(re), "^sleep %s$", arg);
  pid_t pids[8];
  ASSERT_INT_EQ(vl_procmem_find(re, pids, 8, err, sizeof(err)), 0);
  pid_t pid = spawn_sleep(arg);
  int n = 0;
  for (int i = 0; i < 500 && n == 0; i++) {
    n = vl_procmem_find(re, pids, 8, err, sizeof(err));
    if (n == 0)
      sleep_ms(10);
  }
  ASSERT_INT_EQ(n, 1);
  ASSERT_INT_EQ(pids[0], pid);
  /* max bounds what is stored, not what is counted. */
  ASSERT_INT_EQ(vl_procmem_find("^sleep ", pids, 0, err, sizeof(err)) >= 1, 1);
  kill_reap(pid);
  /* The calling process is left out even when it matches. */
  char self[4096];
  int fd = open("/proc/self/cmdline", O_RDONLY);
  ASSERT(fd >= 0);
  ssize_t len = read(fd, self, sizeof(self) - 1);
  close(fd);
  ASSERT(len > 0);
  self[len] = '\0'; /* argv[0] alone */
  const char *base = strrchr(self, '/') ? strrchr(self, '/') + 1 : self;
  pid_t many[256];
  n = vl_procmem_find(base, many, 256, err, sizeof(err));
  ASSERT(n >= 0);
  for (int i = 0; i < n && i < 256; i++)
    ASSERT(many[i] != getpid());
  ASSERT_INT_EQ(vl_procmem_find("(", pids, 8, err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "bad regular expression \"(\"") == err);
}

/* A matching tracker follows a `sleep` through a kill and a restart. */
TEST_IMPL(procmem_track_restart) {
  char arg[64], re[96], err[128];
  snprintf(arg, sizeof(arg), "1000.%ld%ld", (long)getpid(), (long)(vl_now_ns() % 100000));
  snprintf(re, sizeof(re), "^sleep %s$", arg);
  vl_procmem_track_t t;
  ASSERT_INT_EQ(vl_procmem_track_match(&t, re, 0, err, sizeof(err)), 0);
  t.rescan_ns = 0;
  vl_procmem_t m;
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &m), VL_ENOENT); /* nothing yet */
  ASSERT_INT_EQ(t.ever, 0);
  pid_t first = spawn_sleep(arg);
  ASSERT_INT_EQ(wait_present(&t, &m), 0);
  ASSERT_INT_EQ(t.pid, first);
  ASSERT_INT_EQ(t.matches, 1);
  ASSERT_UINT_EQ(t.restarts, 0);
  ASSERT(m.rss_bytes > 0);
  kill_reap(first);
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &m), VL_ENOENT);
  ASSERT_INT_EQ(t.present, 0);
  ASSERT_UINT_EQ(t.restarts, 0);
  pid_t second = spawn_sleep(arg);
  ASSERT_INT_EQ(wait_present(&t, &m), 0);
  ASSERT_INT_EQ(t.pid, second);
  ASSERT_UINT_EQ(t.restarts, 1);
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &m), 0);
  ASSERT_UINT_EQ(t.restarts, 1); /* the same process again is no restart */
  kill_reap(second);
  vl_procmem_track_free(&t);
  ASSERT_INT_EQ(vl_procmem_track_match(&t, "a[", 0, err, sizeof(err)), VL_EINVAL);
}

/* With several matches the oldest is followed; while none matches, searches are spaced. */
TEST_IMPL(procmem_track_oldest) {
  char arg[64], re[96], err[128];
  snprintf(arg, sizeof(arg), "1000.%ld%ld", (long)getpid(), (long)(vl_now_ns() % 100000));
  snprintf(re, sizeof(re), "^sleep %s$", arg);
  pid_t older = spawn_sleep(arg);
  pid_t found[2];
  for (int i = 0; i < 500 && vl_procmem_find(re, found, 2, err, sizeof(err)) < 1; i++)
    sleep_ms(10);
  sleep_ms(30); /* start times count in clock ticks (10 ms) */
  pid_t newer = spawn_sleep(arg);
  for (int i = 0; i < 500 && vl_procmem_find(re, found, 2, err, sizeof(err)) < 2; i++)
    sleep_ms(10);
  vl_procmem_track_t t;
  ASSERT_INT_EQ(vl_procmem_track_match(&t, re, 0, err, sizeof(err)), 0);
  vl_procmem_t m;
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &m), 0);
  ASSERT_INT_EQ(t.pid, older);
  ASSERT_INT_EQ(t.matches, 2);
  kill_reap(older);
  kill_reap(newer);
  /* Lost: one search at once, then none until rescan_ns has passed. */
  t.rescan_ns = 60 * 1000000000ull;
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &m), VL_ENOENT);
  ASSERT_INT_EQ(t.matches, 0);
  pid_t again = spawn_sleep(arg);
  sleep_ms(100);
  ASSERT_INT_EQ(vl_procmem_track_sample(&t, &m), VL_ENOENT);
  t.rescan_ns = 0;
  ASSERT_INT_EQ(wait_present(&t, &m), 0);
  ASSERT_INT_EQ(t.pid, again);
  ASSERT_UINT_EQ(t.restarts, 1);
  kill_reap(again);
  vl_procmem_track_free(&t);
}

/* What one sample costs: well under a millisecond without PSS. */
TEST_IMPL(procmem_cost) {
  vl_procmem_t m;
  int n = 2000;
  uint64_t t0 = vl_now_ns();
  for (int i = 0; i < n; i++)
    ASSERT_INT_EQ(vl_procmem_read(getpid(), 0, 0, &m), 0);
  uint64_t t1 = vl_now_ns();
  for (int i = 0; i < n; i++)
    ASSERT_INT_EQ(vl_procmem_read(getpid(), 0, VL_PROCMEM_PSS, &m), 0);
  uint64_t t2 = vl_now_ns();
  double plain = (double)(t1 - t0) / n / 1000, pss = (double)(t2 - t1) / n / 1000;
  fprintf(stderr, "one read: %.1f us; with PSS: %.1f us\n", plain, pss);
  ASSERT(plain < 500);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(procmem_self),
    TEST_ENTRY(procmem_rss_grows),
    TEST_ENTRY(procmem_fixed_pid_exits),
    TEST_ENTRY(procmem_find),
    TEST_ENTRY(procmem_track_restart),
    TEST_ENTRY(procmem_track_oldest),
    TEST_ENTRY(procmem_cost),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
