#include "vlmload/progress.h"
#include "vlmload/common.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

/* Fields in the order they are shown; each has a rank, 0 the most important. A line that does not
 * fit loses its highest-ranked fields first. */
enum { MAX_FIELDS = 16, FIELD_LEN = 48 };

typedef struct {
  char text[FIELD_LEN];
  int rank;
} field_t;

int vl_progress_columns(int fd) {
  struct winsize ws;
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  return 80;
}

/* Megabytes as a person reads them: "812 MB", "12.3 GB". */
static void mem_text(char *out, size_t cap, const char *label, double mb) {
  if (mb >= 10000)
    snprintf(out, cap, "%s %.1f GB", label, mb / 1000);
  else
    snprintf(out, cap, "%s %.0f MB", label, mb);
}

/* Milliseconds with three significant figures or so: "0.42ms", "35.1ms", "1234ms". */
static void ms_text(char *out, size_t cap, const char *label, double ms) {
  snprintf(out, cap, ms < 1 ? "%s %.2fms" : ms < 100 ? "%s %.1fms" : "%s %.0fms", label, ms);
}

size_t vl_progress_format(char *out, size_t cap, int width, const vl_progress_t *p) {
  field_t f[MAX_FIELDS];
  int n = 0;
#define FIELD(r, ...)                                                                              \
  do {                                                                                             \
    snprintf(f[n].text, FIELD_LEN, __VA_ARGS__);                                                   \
    f[n++].rank = (r);                                                                             \
  } while (0)
  FIELD(0, "%.0fs", p->elapsed_s);
  if (p->phase && strcmp(p->phase, "measure") != 0 && strcmp(p->phase, "flush") != 0)
    FIELD(5, "[%.20s]", p->phase);
  FIELD(1, "%.1f req/s", p->rate);
  FIELD(2, "ok %llu", (unsigned long long)p->ok);
  FIELD(3, "err %llu", (unsigned long long)p->failed);
  if (p->dropped)
    FIELD(6, "dropped %llu", (unsigned long long)p->dropped);
  FIELD(9, "in flight %d", p->in_flight);
  if (p->p50_ms >= 0) {
    ms_text(f[n].text, FIELD_LEN, "p50", p->p50_ms);
    f[n++].rank = 4;
  }
  if (p->p99_ms >= 0) {
    ms_text(f[n].text, FIELD_LEN, "p99", p->p99_ms);
    f[n++].rank = 10;
  }
  if (p->ttft_p50_ms >= 0) {
    ms_text(f[n].text, FIELD_LEN, "TTFT p50", p->ttft_p50_ms);
    f[n++].rank = 8;
  }
  if (p->rss_mb >= 0) {
    mem_text(f[n].text, FIELD_LEN, "rss", p->rss_mb);
    f[n++].rank = 5;
  }
  if (p->gpu_mb >= 0) {
    mem_text(f[n].text, FIELD_LEN, "gpu", p->gpu_mb);
    f[n++].rank = 5;
  }
  if (p->flushes_on) {
    if (p->flushing)
      FIELD(3, "flushing (%llu done)", (unsigned long long)p->flushes);
    else
      FIELD(3, "flushes %llu", (unsigned long long)p->flushes);
  }
  FIELD(11, "sent %llu", (unsigned long long)p->sent);
#undef FIELD
  /* Two spaces between fields; drop the highest rank (the last of equals) until it fits. */
  int keep[MAX_FIELDS];
  for (int i = 0; i < n; i++)
    keep[i] = 1;
  size_t limit = width > 1 ? (size_t)width - 1 : 0;
  for (;;) {
    size_t len = 0;
    int kept = 0, worst = -1;
    for (int i = 0; i < n; i++) {
      if (!keep[i])
        continue;
      len += (kept++ ? 2 : 0) + strlen(f[i].text);
      if (worst < 0 || f[i].rank >= f[worst].rank)
        worst = i;
    }
    if (len <= limit || kept <= 1)
      break;
    keep[worst] = 0;
  }
  size_t len = 0;
  int kept = 0;
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    if (!keep[i])
      continue;
    int w = snprintf(out + len, len < cap ? cap - len : 0, "%s%s", kept++ ? "  " : "", f[i].text);
    len += (size_t)VL_MAX(w, 0);
  }
  if (len >= cap)
    len = cap ? cap - 1 : 0;
  /* Even the elapsed time alone may not fit a terminal a few columns wide. */
  if (len > limit && limit < cap) {
    out[limit] = '\0';
    len = limit;
  }
  return len;
}
