/* The JSONL record. Each line is rendered by cJSON, then written with a single write(2) on an
 * O_APPEND descriptor under a mutex: no stdio buffer, so every line is in the file (and whole) as
 * soon as the request that caused it is admitted, even if the server is then killed. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fd = -1;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool warned;

int vl__record_open(const char *path) {
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  return fd < 0 ? -errno : 0;
}

bool vl__record_enabled(void) {
  return fd >= 0;
}

void vl__record_write(const cJSON *obj) {
  if (fd < 0)
    return;
  char *s = cJSON_PrintUnformatted(obj);
  if (!s)
    return;
  size_t n = strlen(s);
  s[n] = '\n'; /* replaces the terminator: the buffer is written by length */
  pthread_mutex_lock(&mu);
  size_t off = 0;
  while (off <= n) {
    ssize_t w = write(fd, s + off, n + 1 - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      if (!warned)
        fprintf(stderr, "vlmmock: --record: write failed: %s\n", strerror(errno));
      warned = true;
      break;
    }
    off += (size_t)w;
  }
  pthread_mutex_unlock(&mu);
  free(s);
}

void vl__record_close(void) {
  if (fd >= 0)
    close(fd);
  fd = -1;
}
