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

/* --metrics-listen's line. */

static char *put_hist_sum(char *p, const vl_hist_t *h) {
  uint64_t n = 0;
  for (int i = 0; i < h->counts_len; i++)
    n += h->counts[i] != 0;
  p = put_u64(p, h->total);
  p += sprintf(p, " %.17g", h->sum);
  p = put_u64(p, n);
  for (int i = 0; i < h->counts_len; i++)
    if (h->counts[i]) {
      p = put_u64(p, (uint64_t)i);
      p = put_u64(p, h->counts[i]);
    }
  return p;
}

static void write_all(const char *buf, size_t len) {
  size_t done = 0;
  while (done < len && report_fd >= 0) {
    ssize_t w = write(report_fd, buf + done, len - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      report_fd = -1;
      break;
    }
    done += (size_t)w;
  }
}

void vl_workerpipe_report_metrics(const vl_metrics_figures_t *f) {
  static char *buf;
  static size_t cap;
  if (report_fd < 0)
    return;
  const vl_hist_t *h[VL_WORKERPIPE_HISTS] = {f->e2e, f->e2e_sent, f->ttft,
                                             f->itl, f->tpot,     f->send_lag};
  size_t need = 1024 + 24 * VL_ERR__COUNT;
  for (int k = 0; k < VL_WORKERPIPE_HISTS; k++)
    need += h[k] ? 44 * (size_t)h[k]->counts_len + 64 : 64;
  for (size_t i = 0; i < f->n_mem; i++)
    need += strlen(f->mem[i].series) + 32;
  if (need > cap)
    buf = vl_xrealloc(buf, cap = need);
  char *end = buf;
  *end++ = 'M';
  const uint64_t counts[] = {
      f->sent,    f->ok,     f->failed,      f->dropped,       (uint64_t)VL_MAX(f->in_flight, 0),
      f->flushes, f->images, f->image_bytes, f->prompt_tokens, f->completion_tokens};
  for (size_t k = 0; k < VL_ARRAY_SIZE(counts); k++)
    end = put_u64(end, counts[k]);
  for (int c = 0; c < VL_ERR__COUNT; c++)
    end = put_u64(end, f->errors[c]);
  end += sprintf(end, " %.17g %.17g %.17g %.17g ", f->target_rate, f->achieved_rate, f->elapsed_s,
                 f->paused_s);
  for (const char *c = f->phase && *f->phase ? f->phase : "-"; *c && end - buf < 900; c++)
    *end++ = *c == ' ' || *c == '\n' ? '_' : *c;
  for (int k = 0; k < VL_WORKERPIPE_HISTS; k++) {
    if (h[k]) {
      end = put_hist_sum(end, h[k]);
    } else {
      end += sprintf(end, " 0 0 0");
    }
  }
  end = put_u64(end, f->n_mem);
  for (size_t i = 0; i < f->n_mem; i++) {
    *end++ = ' ';
    for (const char *c = f->mem[i].series; *c; c++)
      *end++ = *c == ' ' || *c == '\n' ? '_' : *c;
    end += sprintf(end, " %.17g", f->mem[i].bytes);
  }
  *end++ = '\n';
  write_all(buf, (size_t)(end - buf));
}

int vl_workerpipe_metrics_init(vl_workerpipe_metrics_t *m) {
  memset(m, 0, sizeof(*m));
  for (int k = 0; k < VL_WORKERPIPE_HISTS; k++)
    if (vl_hist_init(&m->hist[k], VL_STATS_HIGHEST_US, VL_STATS_SIGDIGITS) != 0)
      return VL_ENOMEM;
  vl_workerpipe_metrics_reset(m);
  return 0;
}

void vl_workerpipe_metrics_free(vl_workerpipe_metrics_t *m) {
  for (int k = 0; k < VL_WORKERPIPE_HISTS; k++)
    vl_hist_free(&m->hist[k]);
  for (size_t i = 0; i < m->cap_mem; i++)
    free(m->names[i]);
  free(m->names);
  free(m->mem);
}

void vl_workerpipe_metrics_reset(vl_workerpipe_metrics_t *m) {
  memset(&m->f, 0, sizeof(m->f));
  for (int k = 0; k < VL_WORKERPIPE_HISTS; k++)
    vl_hist_reset(&m->hist[k]);
  m->f.e2e = &m->hist[0];
  m->f.e2e_sent = &m->hist[1];
  m->f.ttft = &m->hist[2];
  m->f.itl = &m->hist[3];
  m->f.tpot = &m->hist[4];
  m->f.send_lag = &m->hist[5];
  m->phase[0] = '\0';
  m->f.phase = m->phase;
  m->n_mem = 0;
  m->f.mem = m->mem;
  m->f.n_mem = 0;
  m->reported = 0;
}

/* Reads a histogram with its sum into h (emptied first). Returns 0 or -1. */
static int take_hist_sum(vl_hist_t *h, char **pos) {
  vl_hist_reset(h);
  char *p = *pos;
  uint64_t total = strtoull(p, &p, 10);
  double sum = strtod(p, &p);
  uint64_t n = strtoull(p, &p, 10);
  for (uint64_t k = 0; k < n; k++) {
    uint64_t i = strtoull(p, &p, 10), count = strtoull(p, &p, 10);
    if (i >= (uint64_t)h->counts_len)
      return -1;
    h->counts[i] += count;
    if (count) {
      int64_t lo = vl_hist_bucket_low(h, (int)i), hi = vl_hist_bucket_high(h, (int)i);
      h->min = VL_MIN(h->min, lo);
      h->max = VL_MAX(h->max, hi);
    }
  }
  h->total = total;
  h->sum = sum;
  *pos = p;
  return 0;
}

static void set_mem(vl_workerpipe_metrics_t *m, size_t i, const char *name, size_t len,
                    double bytes) {
  if (i >= m->cap_mem) {
    size_t cap = m->cap_mem ? m->cap_mem * 2 : 16;
    m->names = vl_xrealloc(m->names, cap * sizeof(*m->names));
    m->mem = vl_xrealloc(m->mem, cap * sizeof(*m->mem));
    memset(m->names + m->cap_mem, 0, (cap - m->cap_mem) * sizeof(*m->names));
    m->cap_mem = cap;
  }
  free(m->names[i]);
  m->names[i] = vl_xmalloc(len + 1);
  memcpy(m->names[i], name, len);
  m->names[i][len] = '\0';
  m->mem[i] = (vl_metrics_mem_t){m->names[i], bytes};
}

int vl_workerpipe_parse_metrics(char *line, vl_workerpipe_metrics_t *m) {
  vl_workerpipe_metrics_reset(m);
  if (line[0] != 'M')
    return -1;
  char *pos = line + 1;
  uint64_t *counts[] = {
      &m->f.sent,    &m->f.ok,     &m->f.failed,      &m->f.dropped,       NULL,
      &m->f.flushes, &m->f.images, &m->f.image_bytes, &m->f.prompt_tokens, &m->f.completion_tokens};
  for (size_t k = 0; k < VL_ARRAY_SIZE(counts); k++) {
    uint64_t v = strtoull(pos, &pos, 10);
    if (counts[k])
      *counts[k] = v;
    else
      m->f.in_flight = (int64_t)v;
  }
  for (int c = 0; c < VL_ERR__COUNT; c++)
    m->f.errors[c] = strtoull(pos, &pos, 10);
  m->f.target_rate = strtod(pos, &pos);
  m->f.achieved_rate = strtod(pos, &pos);
  m->f.elapsed_s = strtod(pos, &pos);
  m->f.paused_s = strtod(pos, &pos);
  while (*pos == ' ')
    pos++;
  size_t len = strcspn(pos, " ");
  snprintf(m->phase, sizeof(m->phase), "%.*s", (int)VL_MIN(len, sizeof(m->phase) - 1), pos);
  if (strcmp(m->phase, "-") == 0)
    m->phase[0] = '\0';
  pos += len;
  for (int k = 0; k < VL_WORKERPIPE_HISTS; k++)
    if (take_hist_sum(&m->hist[k], &pos) != 0)
      return -1;
  uint64_t n = strtoull(pos, &pos, 10);
  for (uint64_t i = 0; i < n; i++) {
    while (*pos == ' ')
      pos++;
    size_t nl = strcspn(pos, " ");
    if (!nl)
      return -1;
    char *name = pos;
    pos += nl;
    set_mem(m, (size_t)i, name, nl, strtod(pos, &pos));
  }
  m->n_mem = (size_t)n;
  m->f.mem = m->mem;
  m->f.n_mem = m->n_mem;
  m->reported = 1;
  return 0;
}

void vl_workerpipe_metrics_add(vl_workerpipe_metrics_t *dst, const vl_workerpipe_metrics_t *src) {
  if (!src->reported)
    return;
  vl_metrics_figures_t *d = &dst->f;
  const vl_metrics_figures_t *s = &src->f;
  d->sent += s->sent;
  d->ok += s->ok;
  d->failed += s->failed;
  d->dropped += s->dropped;
  d->in_flight += s->in_flight;
  d->flushes += s->flushes;
  d->images += s->images;
  d->image_bytes += s->image_bytes;
  d->prompt_tokens += s->prompt_tokens;
  d->completion_tokens += s->completion_tokens;
  for (int c = 0; c < VL_ERR__COUNT; c++)
    d->errors[c] += s->errors[c];
  d->achieved_rate += s->achieved_rate;
  d->paused_s = VL_MAX(d->paused_s, s->paused_s);
  d->elapsed_s = VL_MAX(d->elapsed_s, s->elapsed_s);
  for (int k = 0; k < VL_WORKERPIPE_HISTS; k++)
    vl_hist_merge(&dst->hist[k], &src->hist[k]);
  if (!dst->reported) {
    d->target_rate = s->target_rate; /* every shard follows the whole schedule */
    snprintf(dst->phase, sizeof(dst->phase), "%s", src->phase);
    for (size_t i = 0; i < src->n_mem; i++)
      set_mem(dst, i, src->mem[i].series, strlen(src->mem[i].series), src->mem[i].bytes);
    dst->n_mem = src->n_mem;
    d->mem = dst->mem;
    d->n_mem = dst->n_mem;
    dst->reported = 1;
  }
}
