/* Child processes for tests that watch processes: a `sleep` that dies with the test, killed and
 * reaped on demand. Include after task.h. */
#ifndef VLMLOAD_TESTS_CHILDREN_H
#define VLMLOAD_TESTS_CHILDREN_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
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
  /* Returns once the child is sleep: until its exec, it is a copy of this process, whose memory
   * a reading of it would show. */
  char path[64], comm[32] = "";
  snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
  for (int i = 0; i < 10000 && strcmp(comm, "sleep\n") != 0; i++) {
    FILE *f = fopen(path, "r");
    if (f) {
      if (!fgets(comm, sizeof(comm), f))
        comm[0] = '\0';
      fclose(f);
    }
    if (strcmp(comm, "sleep\n") != 0)
      sleep_ms(1);
  }
  return pid;
}

static inline void kill_reap(pid_t pid) {
  kill(pid, SIGKILL);
  ASSERT_INT_EQ(waitpid(pid, NULL, 0), pid);
}

#endif
