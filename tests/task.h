/* A small test harness: assertion macros and a runner for named test functions.
 *
 * A test is a `TEST_IMPL(name)` function; a failed assertion prints file:line, the expression and
 * the values, then calls abort(). run_tests() runs each test in a child process so that one abort
 * fails that test only, prints one line per test and a closing "N passed, N failed" line, and
 * returns the exit status for main(): 0 when every test passed, 1 otherwise.
 *
 * Arguments name the tests to run (all when none are given). With TASK_NOFORK set in the
 * environment, tests run in the runner's own process, for a debugger; the first failure ends it.
 *
 * Each test gets a directory of its own for the files it makes, task_tmpdir(), also its $TMPDIR:
 * the runner makes it under $TMPDIR (or /tmp) before the test starts and removes it, with whatever
 * is in it, once the test is over, whether it passed, failed or crashed.
 */
#ifndef VLMLOAD_TESTS_TASK_H
#define VLMLOAD_TESTS_TASK_H

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_IMPL(name) static void run_test_##name(void)
#define TEST_ENTRY(name)                                                                           \
  { #name, run_test_##name }

typedef struct {
  const char *name;
  void (*fn)(void);
} task_entry_t;

#define ASSERT(expr)                                                                               \
  do {                                                                                             \
    if (!(expr)) {                                                                                 \
      fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #expr);                 \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* Compares two integers or two floating-point values exactly, picking signed, unsigned or floating
 * comparison from the type of (a) + (b). Each operand is evaluated once. */
#define ASSERT_EQ(a, b)                                                                            \
  _Generic((a) + (b), unsigned int                                                                 \
           : task_eq_u, unsigned long                                                              \
           : task_eq_u, unsigned long long                                                         \
           : task_eq_u, float                                                                      \
           : task_eq_d, double                                                                     \
           : task_eq_d, long double                                                                \
           : task_eq_d, default                                                                    \
           : task_eq_i)((a), (b), #a, #b, __FILE__, __LINE__)
#define ASSERT_INT_EQ(a, b)  task_eq_i((a), (b), #a, #b, __FILE__, __LINE__)
#define ASSERT_UINT_EQ(a, b) task_eq_u((a), (b), #a, #b, __FILE__, __LINE__)
#define ASSERT_STR_EQ(a, b)  task_eq_s((a), (b), #a, #b, __FILE__, __LINE__)
#define ASSERT_NEAR(a, b, eps)                                                                     \
  task_near((double)(a), (double)(b), (double)(eps), #a, #b, __FILE__, __LINE__)
/* Compares n bytes; reports the first offset that differs. */
#define ASSERT_MEM_EQ(a, b, n) task_eq_m((a), (b), (n), #a, #b, __FILE__, __LINE__)

static inline void task_eq_i(intmax_t a, intmax_t b, const char *ea, const char *eb,
                             const char *file, int line) {
  if (a == b)
    return;
  fprintf(stderr, "%s:%d: assertion failed: %s == %s (%jd vs %jd)\n", file, line, ea, eb, a, b);
  abort();
}

static inline void task_eq_u(uintmax_t a, uintmax_t b, const char *ea, const char *eb,
                             const char *file, int line) {
  if (a == b)
    return;
  fprintf(stderr, "%s:%d: assertion failed: %s == %s (%ju vs %ju)\n", file, line, ea, eb, a, b);
  abort();
}

static inline void task_eq_d(double a, double b, const char *ea, const char *eb, const char *file,
                             int line) {
  if (a == b)
    return;
  fprintf(stderr, "%s:%d: assertion failed: %s == %s (%.17g vs %.17g)\n", file, line, ea, eb, a, b);
  abort();
}

static inline void task_eq_s(const char *a, const char *b, const char *ea, const char *eb,
                             const char *file, int line) {
  if (a && b && strcmp(a, b) == 0)
    return;
  fprintf(stderr, "%s:%d: assertion failed: %s == %s (\"%s\" vs \"%s\")\n", file, line, ea, eb,
          a ? a : "(null)", b ? b : "(null)");
  abort();
}

static inline void task_near(double a, double b, double eps, const char *ea, const char *eb,
                             const char *file, int line) {
  if (fabs(a - b) <= eps)
    return;
  fprintf(stderr, "%s:%d: assertion failed: %s ~= %s (%.17g vs %.17g, eps %g)\n", file, line, ea,
          eb, a, b, eps);
  abort();
}

static inline void task_eq_m(const void *a, const void *b, size_t n, const char *ea, const char *eb,
                             const char *file, int line) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++) {
    if (x[i] != y[i]) {
      fprintf(stderr, "%s:%d: assertion failed: %s == %s (%zu bytes; byte %zu: 0x%02x vs 0x%02x)\n",
              file, line, ea, eb, n, i, x[i], y[i]);
      abort();
    }
  }
}

/* A seeded pseudo-random generator (splitmix64), so that a failure can be replayed. */
static inline uint64_t task_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* The running test's directory (see the top). */
static char task_dir[256];

static inline const char *task_tmpdir(void) {
  return task_dir;
}

/* Makes task_dir for the next test and points $TMPDIR at it; the runner's own $TMPDIR (or /tmp)
 * is where it goes. Aborts when it cannot. */
static inline void task_dir_make(void) {
  static char base[200];
  if (!base[0]) {
    const char *t = getenv("TMPDIR");
    snprintf(base, sizeof(base), "%s", t && *t ? t : "/tmp");
  }
  snprintf(task_dir, sizeof(task_dir), "%s/vlmload-test-XXXXXX", base);
  if (!mkdtemp(task_dir)) {
    perror("mkdtemp");
    abort();
  }
  chmod(task_dir, 0711); /* others may pass through, as through /tmp: a test may drop to nobody */
  setenv("TMPDIR", task_dir, 1);
}

static inline int task_dir_open_up(const char *path, const struct stat *st, int flag,
                                   struct FTW *ftw) {
  if (flag == FTW_D || flag == FTW_DNR)
    chmod(path, 0700); /* a test may have closed one; its contents go too */
  return 0;
}

static inline int task_dir_remove_one(const char *path, const struct stat *st, int flag,
                                      struct FTW *ftw) {
  remove(path);
  return 0;
}

/* Removes task_dir and everything in it. */
static inline void task_dir_remove(void) {
  nftw(task_dir, task_dir_open_up, 16, FTW_PHYS);
  nftw(task_dir, task_dir_remove_one, 16, FTW_PHYS | FTW_DEPTH);
}

/* Runs one test in a child process. Returns 1 when it passed. */
static inline int task_run_one(const task_entry_t *t) {
  fflush(stdout);
  fflush(stderr);
  task_dir_make();
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    task_dir_remove();
    return 0;
  }
  if (pid == 0) {
    t->fn();
    /* exit(), not _exit(), so that LeakSanitizer checks the test's allocations. */
    exit(0);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      perror("waitpid");
      task_dir_remove();
      return 0;
    }
  }
  task_dir_remove();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    printf("ok   %s\n", t->name);
    return 1;
  }
  if (WIFSIGNALED(status))
    printf("FAIL %s (signal %d)\n", t->name, WTERMSIG(status));
  else
    printf("FAIL %s (exit status %d)\n", t->name, WEXITSTATUS(status));
  return 0;
}

static inline int run_tests(const task_entry_t *tests, size_t n, int argc, char **argv) {
  int nofork = getenv("TASK_NOFORK") != NULL;
  int passed = 0, failed = 0;
  for (int a = 1; a < argc; a++) {
    size_t i = 0;
    while (i < n && strcmp(tests[i].name, argv[a]) != 0)
      i++;
    if (i == n) {
      printf("FAIL %s (no such test)\n", argv[a]);
      failed++;
    }
  }
  for (size_t i = 0; i < n; i++) {
    int wanted = argc <= 1;
    for (int a = 1; a < argc && !wanted; a++)
      wanted = strcmp(tests[i].name, argv[a]) == 0;
    if (!wanted)
      continue;
    if (nofork) {
      task_dir_make();
      tests[i].fn();
      task_dir_remove();
      printf("ok   %s\n", tests[i].name);
      passed++;
    } else if (task_run_one(&tests[i])) {
      passed++;
    } else {
      failed++;
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  fflush(stdout);
  return failed ? 1 : 0;
}

#endif
