/* Child processes for tests that watch processes: a `sleep` that dies with the test, killed and
 * reaped on demand. Include after task.h. */
#ifndef VLMLOAD_TESTS_CHILDREN_H
#define VLMLOAD_TESTS_CHILDREN_H

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Starts `sleep SECONDS` (SECONDS is also what makes its command line unique); it dies with the
 * test. */
static inline pid_t spawn_sleep(const char *seconds) {
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execlp("sleep", "sleep", seconds, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static inline void kill_reap(pid_t pid) {
  kill(pid, SIGKILL);
  ASSERT_INT_EQ(waitpid(pid, NULL, 0), pid);
}

#endif
