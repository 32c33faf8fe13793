/* A --workers worker's figures on its pipe to the parent (workerpipe.h). */
#include "vlmload/workerpipe.h"
#include "vlmload/common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int report_fd = -1;

void vl_workerpipe_open(int fd) {
  report_fd = fd;
}

int vl_workerpipe_fd(void) {
  return report_fd;
}

static char *put_u64(char *p, uint64_t v) {
  char tmp[24];
  int n = 0;
  do
    tmp[n++] = (char)('0' + v % 10);
  while ((v /= 10) > 0);
  *p++ = ' ';
  while (n > 0)
    *p++ = tmp[--n];
  return p;
}

static char *put_hist(char *p, const vl_hist_t *h) {
  uint64_t n = 0;
  for (int i = 0; i < h->counts_len; i++)
    n += h->counts[i] != 0;
  p = put_u64(p, (uint64_t)VL_MAX(h->max, 0));
  p = put_u64(p, n);
  for (int i = 0; i < h->counts_len; i++)
    if (h->counts[i]) {
      p = put_u64(p, (uint64_t)i);
      p = put_u64(p, h->counts[i]);
    }
  return p;
}

void vl_workerpipe_report(const vl_progress_t *p, const vl_stats_t *s) {
  static char *buf;
  static size_t cap;
  if (report_fd < 0)
    return;
  /* At most 21 characters a number: the fixed fields, and two per non-empty bucket. */
  size_t need = 256 + 44 * (size_t)(s->e2e.counts_len + s->ttft.counts_len);
  if (need > cap)
    buf = vl_xrealloc(buf, cap = need);
  char *end = buf;
  end = put_u64(end, p->sent);
  end = put_u64(end, p->ok);
  end = put_u64(end, p->failed);
  end = put_u64(end, p->dropped);
  end = put_u64(end, (uint64_t)VL_MAX(p->in_flight, 0));
  end += snprintf(end, 96, " %.3f %.3f %.3f ", p->rate, p->rss_mb, p->gpu_mb);
  for (const char *c = p->phase && *p->phase ? p->phase : "-"; *c && end - buf < 200; c++)
    *end++ = *c == ' ' || *c == '\n' ? '_' : *c;
  end = put_hist(end, &s->e2e);
  end = put_hist(end, &s->ttft);
  *end++ = '\n';
  size_t len = (size_t)(end - buf), done = 0;
  while (done < len) {
    ssize_t w = write(report_fd, buf + done, len - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      report_fd = -1; /* the parent is gone: the run goes on, its outputs are still written */
      break;
    }
    done += (size_t)w;
  }
}

/* Reads a histogram of a report into h (emptied first). Returns 0, or -1 on a malformed one. */
static int take_hist(vl_hist_t *h, char **pos) {
  vl_hist_reset(h);
  char *p = *pos;
  uint64_t max = strtoull(p, &p, 10), n = strtoull(p, &p, 10);
  for (uint64_t k = 0; k < n; k++) {
    uint64_t i = strtoull(p, &p, 10), count = strtoull(p, &p, 10);
    if (i >= (uint64_t)h->counts_len)
      return -1;
    h->counts[i] += count;
    h->total += count;
  }
  h->max = (int64_t)max;
  *pos = p;
  return 0;
}

int vl_workerpipe_parse(char *line, vl_progress_t *p, char *phase, size_t n, vl_hist_t *e2e,
                        vl_hist_t *ttft) {
  char *pos = line;
  p->sent = strtoull(pos, &pos, 10);
  p->ok = strtoull(pos, &pos, 10);
  p->failed = strtoull(pos, &pos, 10);
  p->dropped = strtoull(pos, &pos, 10);
  p->in_flight = (int)strtol(pos, &pos, 10);
  p->rate = strtod(pos, &pos);
  p->rss_mb = strtod(pos, &pos);
  p->gpu_mb = strtod(pos, &pos);
  while (*pos == ' ')
    pos++;
  size_t len = strcspn(pos, " ");
  snprintf(phase, n, "%.*s", (int)VL_MIN(len, n - 1), pos);
  if (strcmp(phase, "-") == 0)
    phase[0] = '\0';
  pos += len;
  return take_hist(e2e, &pos) == 0 && take_hist(ttft, &pos) == 0 ? 0 : -1;
}
