#include "vlmload/common.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *vl_strerror(int err) {
  switch (err) {
  case 0:
    return "success";
  case VL_ECURL:
    return "HTTP client error";
  case VL_EUV:
    return "event loop error";
  case VL_EJSON:
    return "malformed JSON";
  case VL_EIMAGE:
    return "image encode or decode failed";
  case VL_ETLS:
    return "TLS connection failed";
  case VL_ENOCONN:
    return "nothing answered";
  default:
    break;
  }
  if (err < 0 && err > -4000)
    return strerror(-err);
  return "unknown error";
}

void vl_set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  for (char *p = err; *p; p++) {
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  }
}

uint64_t vl_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t vl_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *oom(size_t n) {
  fprintf(stderr, "vlmload: out of memory allocating %zu bytes\n", n);
  abort();
}

void *vl_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  return p ? p : oom(n);
}

void *vl_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  return p ? p : oom(n * size);
}

void *vl_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  return q ? q : oom(n);
}

char *vl_xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(vl_xmalloc(n), s, n);
}

char *vl_xstrndup(const char *s, size_t n) {
  char *d = vl_xmalloc(n + 1);
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *vl_xfmt(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = vl_xmalloc((size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

int vl_cpu_list(int *cores, int cap) {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = 0;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int i = 0; i < CPU_SETSIZE && n < cap; i++)
      if (CPU_ISSET(i, &set))
        cores[n++] = i;
  if (n == 0 && cap > 0)
    cores[n++] = 0;
  return n;
}
