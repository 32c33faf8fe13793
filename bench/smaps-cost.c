/* What one read of /proc/PID/smaps costs (vl_smaps_read, the monitor's anatomy read) for a process
 * of many mappings, beside a read of status (vl_procmem_read, every sample's). Printed figures,
 * not a test.
 *
 * Usage: vlmload-bench-smaps [MAPPINGS [READS]]   (default 5000 mappings, 50 reads)
 *        vlmload-bench-smaps --hold MAPPINGS      make the process, print its PID, wait for stdin
 *                                                 to close (for bench/anatomy.sh)
 * A child maps MAPPINGS regions of two pages each, every other one read-only so that no two
 * merge, and writes one page of each; the parent reads the child's smaps READS times. */
#include "vlmload/common.h"
#include "vlmload/procmem.h"
#include "vlmload/smaps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Makes n mappings in this process. */
static void make_mappings(long n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  for (long i = 0; i < n; i++) {
    char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      perror("mmap");
      _exit(1);
    }
    p[0] = 1;
    if (i % 2)
      mprotect(p, 2 * page, PROT_READ);
  }
}

/* Waits for stdin to close. */
static void wait_stdin(void) {
  char c;
  while (read(0, &c, 1) > 0)
    ;
}

int main(int argc, char **argv) {
  int hold = argc > 1 && strcmp(argv[1], "--hold") == 0;
  long n = argc > 1 + hold ? strtol(argv[1 + hold], NULL, 10) : 5000;
  long reads = !hold && argc > 2 ? strtol(argv[2], NULL, 10) : 50;
  if (n < 1 || n > 60000 || reads < 1) {
    fprintf(stderr, "usage: vlmload-bench-smaps [MAPPINGS (1..60000) [READS]] | --hold MAPPINGS\n");
    return 2;
  }
  if (hold) {
    make_mappings(n);
    printf("%ld\n", (long)getpid());
    fflush(stdout);
    wait_stdin();
    return 0;
  }
  int fds[2];
  if (pipe(fds) != 0)
    return 1;
  int in[2];
  if (pipe(in) != 0)
    return 1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    close(in[1]);
    close(fds[0]);
    make_mappings(n);
    char one = 1;
    if (write(fds[1], &one, 1) != 1)
      _exit(1);
    wait_stdin();
    _exit(0);
  }
  close(in[0]);
  close(fds[1]);
  char c;
  if (read(fds[0], &c, 1) != 1) {
    fprintf(stderr, "vlmload-bench-smaps: the child could not make its mappings\n");
    return 1;
  }
  double *t = malloc((size_t)reads * sizeof(*t)), *ts = malloc((size_t)reads * sizeof(*ts));
  vl_smaps_t m;
  vl_procmem_t pm;
  for (long i = 0; i < reads; i++) {
    double a = now_s();
    if (vl_smaps_read(pid, 0, &m) != 0) {
      fprintf(stderr, "vlmload-bench-smaps: cannot read the child's smaps\n");
      return 1;
    }
    double b = now_s();
    vl_procmem_read(pid, 0, 0, &pm);
    t[i] = (b - a) * 1e3;
    ts[i] = (now_s() - b) * 1e3;
  }
  qsort(t, (size_t)reads, sizeof(*t), cmp);
  qsort(ts, (size_t)reads, sizeof(*ts), cmp);
  printf("process of %u mappings (%ld asked), %ld reads each\n", m.mappings, n, reads);
  printf("  smaps (anatomy)   min %.2f ms  median %.2f ms  max %.2f ms\n", t[0], t[reads / 2],
         t[reads - 1]);
  printf("  status (sample)   min %.3f ms  median %.3f ms  max %.3f ms\n", ts[0], ts[reads / 2],
         ts[reads - 1]);
  close(in[1]);
  waitpid(pid, NULL, 0);
  free(t);
  free(ts);
  return 0;
}
