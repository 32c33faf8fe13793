/* The test runner itself: every test's directory is gone once the test is over, whether it passed
 * or crashed, with whatever the test left in it. */
#include "task.h"
#include "vlmload/common.h"

#include <fcntl.h>

static void leave_files(void) {
  char path[400];
  ASSERT_STR_EQ(getenv("TMPDIR"), task_tmpdir());
  snprintf(path, sizeof(path), "%s/left.txt", task_tmpdir());
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fputs("left behind\n", f);
  fclose(f);
  /* A directory closed to everyone, with a file in it. */
  snprintf(path, sizeof(path), "%s/closed", task_tmpdir());
  ASSERT_INT_EQ(mkdir(path, 0700), 0);
  snprintf(path, sizeof(path), "%s/closed/inner.txt", task_tmpdir());
  int fd = open(path, O_WRONLY | O_CREAT, 0600);
  ASSERT(fd >= 0);
  close(fd);
  snprintf(path, sizeof(path), "%s/closed", task_tmpdir());
  ASSERT_INT_EQ(chmod(path, 0), 0);
}

static void inner_passes(void) {
  leave_files();
}

static void inner_crashes(void) {
  leave_files();
  abort();
}

/* Runs entry as the runner does, its line on stdout kept out of this test's output. Returns
 * whether it passed, and the directory it had in dir. */
static int run_inner(const task_entry_t *entry, char *dir, size_t dirlen) {
  fflush(stdout);
  int saved = dup(1), null = open("/dev/null", O_WRONLY);
  ASSERT(saved >= 0 && null >= 0);
  dup2(null, 1);
  close(null);
  int passed = task_run_one(entry);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  snprintf(dir, dirlen, "%s", task_tmpdir());
  return passed;
}

TEST_IMPL(task_dir_removed) {
  static const task_entry_t inner[] = {{"inner_passes", inner_passes},
                                       {"inner_crashes", inner_crashes}};
  char dir[300];
  struct stat st;
  ASSERT_INT_EQ(run_inner(&inner[0], dir, sizeof(dir)), 1);
  ASSERT(dir[0] != '\0');
  ASSERT_INT_EQ(stat(dir, &st), -1);
  ASSERT_INT_EQ(errno, ENOENT);
  ASSERT_INT_EQ(run_inner(&inner[1], dir, sizeof(dir)), 0);
  ASSERT_INT_EQ(stat(dir, &st), -1);
  ASSERT_INT_EQ(errno, ENOENT);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(task_dir_removed),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
