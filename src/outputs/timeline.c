#include "vlmload/timeline.h"
#include "vlmload/common.h"
#include "vlmload/monitor.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define COL(name, fmt, type, in)                                                                   \
  { #name, fmt, VL_TIMELINE_##type, offsetof(vl_timeline_row_t, name), in }
#define RUN  VL_TIMELINE_RUN
#define BOTH (VL_TIMELINE_RUN | VL_TIMELINE_MERGED)

/* The standard columns, in header order, two a line. */
/* clang-format off */
static const vl_timeline_col_t cols[] = {
    COL(wall_ms, "%lld", I64, BOTH),      COL(elapsed_s, "%.3f", F64, RUN),
    COL(phase, "%s", STR, RUN),           COL(in_flight, "%lld", I64, RUN),
    COL(sent_total, "%llu", U64, RUN),    COL(completed_total, "%llu", U64, RUN),
    COL(ok_total, "%llu", U64, RUN),      COL(failed_total, "%llu", U64, RUN),
    COL(dropped_total, "%llu", U64, RUN), COL(sent, "%llu", U64, BOTH),
    COL(completed, "%llu", U64, BOTH),    COL(ok, "%llu", U64, BOTH),
    COL(failed, "%llu", U64, BOTH),       COL(rate_sent, "%.2f", F64, RUN),
    COL(rate_ok, "%.2f", F64, RUN),       COL(e2e_p50_ms, "%.3f", F64, BOTH),
    COL(e2e_p99_ms, "%.3f", F64, BOTH),   COL(completion_tokens, "%llu", U64, BOTH),
    COL(flushes, "%llu", U64, RUN),       COL(images_sent, "%llu", U64, RUN),
    COL(images_repeated, "%llu", U64, RUN),
    COL(good, "%llu", U64, RUN),
    COL(text_only_total, "%llu", U64, RUN),
    COL(image_megapixels_total, "%.6f", F64, RUN),
};
/* clang-format on */

const vl_timeline_col_t *vl_timeline_columns(size_t *n) {
  *n = VL_ARRAY_SIZE(cols);
  return cols;
}

int vl_timeline_is_column(const char *name) {
  for (size_t i = 0; i < VL_ARRAY_SIZE(cols); i++)
    if (strcmp(name, cols[i].name) == 0)
      return 1;
  return 0;
}

static double ms_since(uint64_t from_ns, uint64_t to_ns) {
  return (double)(int64_t)(to_ns - from_ns) / 1e6;
}

void vl_timeline_row_fill(vl_timeline_row_t *r, const vl_stats_t *s,
                          const struct vl_snapshot_s *snap, double secs) {
  r->wall_ms = (int64_t)((double)snap->wall0_ms + ms_since(snap->t0_ns, snap->now_ns));
  r->elapsed_s = ms_since(snap->t0_ns, snap->now_ns) / 1e3;
  r->phase = snap->phase;
  r->in_flight = snap->in_flight;
  r->sent_total = s->total.sent;
  r->completed_total = s->total.completed;
  r->ok_total = s->total.ok;
  r->failed_total = s->total.failed;
  r->dropped_total = s->dropped;
  r->sent = s->iv.sent;
  r->completed = s->iv.completed;
  r->ok = s->iv.ok;
  r->failed = s->iv.failed;
  r->rate_sent = (double)s->iv.sent / secs;
  r->rate_ok = (double)s->iv.ok / secs;
  /* Latency of an interval in which nothing completed was not measured: an empty cell (null in
   * JSON), which the plot draws as a gap. */
  r->e2e_p50_ms = r->e2e_p99_ms = NAN;
  if (s->iv_e2e.total) {
    r->e2e_p50_ms = (double)vl_hist_percentile(&s->iv_e2e, 50) / 1e3;
    r->e2e_p99_ms = (double)vl_hist_percentile(&s->iv_e2e, 99) / 1e3;
  }
  r->completion_tokens = s->iv.completion_tokens;
  r->flushes = s->flushes;
  r->images_sent = s->images_sent;
  r->images_repeated = s->images_repeated;
  r->good = s->iv_good;
  r->text_only_total = s->text_only;
  r->image_megapixels_total = (double)s->image_pixels / 1e6;
}

void vl_timeline_header(FILE *f, unsigned which) {
  int first = 1;
  for (size_t i = 0; i < VL_ARRAY_SIZE(cols); i++) {
    if (!(cols[i].in & which))
      continue;
    fprintf(f, "%s%s", first ? "" : ",", cols[i].name);
    first = 0;
  }
}

void vl_timeline_header_end(FILE *f, const struct vl_monitor_s *mon, size_t n_mem) {
  for (size_t i = 0; i < n_mem; i++)
    fprintf(f, ",%s", vl_monitor_series(mon, i)->name);
  fputc('\n', f);
}

/* A value as text in out (cap bytes); "" for a value not measured. */
static void cell_text(char *out, size_t cap, const vl_timeline_col_t *c,
                      const vl_timeline_row_t *r) {
  const char *p = (const char *)r + c->offset;
  switch (c->type) {
  case VL_TIMELINE_I64:
    snprintf(out, cap, c->fmt, (long long)*(const int64_t *)p);
    break;
  case VL_TIMELINE_U64:
    snprintf(out, cap, c->fmt, (unsigned long long)*(const uint64_t *)p);
    break;
  case VL_TIMELINE_F64: {
    double v = *(const double *)p;
    if (isnan(v))
      *out = '\0';
    else
      snprintf(out, cap, c->fmt, v);
    break;
  }
  case VL_TIMELINE_STR:
    snprintf(out, cap, c->fmt, *(const char *const *)p);
    break;
  }
}

void vl_timeline_write(FILE *f, unsigned which, int jsonl, const vl_timeline_row_t *r,
                       const struct vl_monitor_s *mon, size_t n_mem) {
  int first = 1;
  for (size_t i = 0; i < VL_ARRAY_SIZE(cols); i++) {
    const vl_timeline_col_t *c = &cols[i];
    if (!(c->in & which))
      continue;
    char v[48];
    cell_text(v, sizeof(v), c, r);
    if (!jsonl)
      fprintf(f, "%s%s", first ? "" : ",", v);
    else if (c->type == VL_TIMELINE_STR)
      fprintf(f, "%s\"%s\":\"%s\"", first ? "{" : ",", c->name, v);
    else
      fprintf(f, "%s\"%s\":%s", first ? "{" : ",", c->name, *v ? v : "null");
    first = 0;
  }
  for (size_t i = 0; i < n_mem; i++) {
    const vl_monitor_series_t *m = vl_monitor_series(mon, i);
    if (jsonl && m->valid)
      fprintf(f, ",\"%s\":%.6f", m->name, m->value);
    else if (jsonl)
      fprintf(f, ",\"%s\":null", m->name);
    else if (m->valid)
      fprintf(f, ",%.6f", m->value);
    else
      fputc(',', f);
  }
  fputs(jsonl ? "}\n" : "\n", f);
}
