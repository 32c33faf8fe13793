#include "vlmload/series.h"
#include "vlmload/common.h"
#include "vlmload/counters.h"
#include "vlmload/memunit.h"
#include "vlmload/text.h"
#include "vlmload/timeline.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The state of one vl_series_read. */
typedef struct {
  vl_series_set_t *s;
  const vl_series_opts_t *cfg;
  char *err;
  size_t errlen;
} reader_t;

static void set_err(reader_t *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err, r->errlen, fmt, ap);
  va_end(ap);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Columns that are not memory: the standard ones, image counts, the server's own counters
 * (prom.server.*, counters.h), and any latency ("_ms") or counter ("_total") a later version may
 * add. */
static int is_standard(const char *name) {
  if (vl_timeline_is_column(name) || vl_counters_is(name))
    return 1;
  return strncmp(name, "images", 6) == 0 || ends_with(name, "_ms") || ends_with(name, "_total");
}

/* Whether a series is a high-water mark, which only rises: VmHWM (hwm_mb.LABEL), or a metric
 * named for its peak or maximum (torch's max_memory_allocated, *_peak_*). */
static int is_peak(const char *name) {
  return vl_text_contains_ci(name, "hwm") || vl_text_contains_ci(name, "peak") ||
         vl_text_contains_ci(name, "high_water") || vl_text_contains_ci(name, "max_memory");
}

/* The unit of a series from its name (vl_memunit_series), and the factor that brings it to MB:
 * "MB" for memory, stated or assumed; "units" and *not_memory for a series that is no memory. */
static const char *series_unit(const char *name, double *scale, int *not_memory) {
  double b = vl_memunit_series(name);
  *scale = 1;
  *not_memory = b == 0;
  if (b == 0)
    return "units";
  if (b > 0)
    *scale = b / VL_MEMUNIT_MB;
  return "MB";
}

static double *numbers(reader_t *r, const vl_csv_t *c, const char *name, int required) {
  int col = vl_csv_col(c, name);
  if (col < 0) {
    if (required)
      set_err(r, "%s: no column '%s' (is this a vlmload timeline?)", vl_csv_source(c), name);
    return NULL;
  }
  double *v = vl_xmalloc((vl_csv_nrows(c) + 1) * sizeof(double));
  if (vl_csv_numbers(c, (size_t)col, v, r->err, r->errlen) != 0) {
    free(v);
    return NULL;
  }
  return v;
}

/* Is `name` in the comma-separated list? */
static int listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0)
      return 1;
    if (!e)
      break;
    p = e + 1;
  }
  return 0;
}

static vl_series_mem_t *add_series(reader_t *r, const char *name, size_t cap) {
  r->s->ser = vl_xrealloc(r->s->ser, (r->s->nser + 1) * sizeof(vl_series_mem_t));
  vl_series_mem_t *s = &r->s->ser[r->s->nser++];
  memset(s, 0, sizeof(*s));
  s->name = vl_xstrdup(name);
  s->x = vl_xmalloc((cap + 1) * sizeof(double));
  s->x2 = vl_xmalloc((cap + 1) * sizeof(double));
  s->y = vl_xmalloc((cap + 1) * sizeof(double));
  s->t = vl_xmalloc((cap + 1) * sizeof(double));
  s->img = vl_xmalloc((cap + 1) * sizeof(double));
  s->txt = vl_xmalloc((cap + 1) * sizeof(double));
  s->mpx = vl_xmalloc((cap + 1) * sizeof(double));
  s->peak = is_peak(name);
  return s;
}

/* Coefficient of variation of num[i] / den[i] over rows where both are known and den >= 1. */
static double ratio_cv(const double *num, const double *den, size_t n) {
  double s = 0, s2 = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (isfinite(num[i]) && isfinite(den[i]) && den[i] >= 1) {
      double q = num[i] / den[i];
      s += q;
      s2 += q * q;
      k++;
    }
  }
  if (k < 2 || s == 0)
    return INFINITY;
  double m = s / (double)k;
  return sqrt(fmax(0, s2 / (double)k - m * m)) / fabs(m);
}

/* Whether an images column is a running total or per-row counts. One that ever decreases is per
 * row. Otherwise, with the run's request counters at hand, the column's ratio to the running total
 * of requests sent is steady if it is a running total, and its ratio to the requests sent in the
 * row is steady if it counts per row (non-decreasing per-row counts, as at a constant rate, would
 * fool a monotonicity test alone). Without the counters, a running total is assumed. */
static int running_total(const double *img, const double *sent, const double *sent_total,
                         size_t n) {
  double last = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    if (isfinite(img[i])) {
      if (img[i] < last)
        return 0;
      last = img[i];
    }
  }
  if (!sent || !sent_total)
    return 1;
  return ratio_cv(img, sent_total, n) <= ratio_cv(img, sent, n);
}

/* The knots (time, value) of a per-row running total col, for vl_analyze_interp: 0 at the run
 * start where it is known and before the first row, then every row with a time and a value, in
 * the rows' order, a row whose time goes back skipped. kt and kv hold rows + 1. Returns how many
 * (0 for no column). */
static size_t total_knots(const vl_series_set_t *set, const double *col, double *kt, double *kv) {
  size_t n = 0;
  if (!col)
    return 0;
  if (set->rows && isfinite(set->t0) && set->t0 < set->wall[0]) {
    kt[n] = set->t0;
    kv[n++] = 0;
  }
  for (size_t i = 0; i < set->rows; i++) {
    if (!isfinite(set->wall[i]) || !isfinite(col[i]) || (n && set->wall[i] < kt[n - 1]))
      continue;
    kt[n] = set->wall[i];
    kv[n++] = col[i];
  }
  return n;
}

/* The timeline's own columns: axes, knots, flushes, warm-up. */
static int read_timeline(reader_t *r, const vl_csv_t *tl) {
  const vl_series_opts_t *cfg = r->cfg;
  r->s->rows = vl_csv_nrows(tl);
  if (!(r->s->wall = numbers(r, tl, "wall_ms", 1)))
    return VL_EINVAL;
  /* Requests completed: the running total, or (a merged timeline) the sum of the per-row counts. */
  if (vl_csv_col(tl, "completed_total") >= 0 || vl_csv_col(tl, "completed") < 0) {
    if (!(r->s->req = numbers(r, tl, "completed_total", 1)))
      return VL_EINVAL;
  } else {
    if (!(r->s->req = numbers(r, tl, "completed", 1)))
      return VL_EINVAL;
    double sum = 0;
    for (size_t i = 0; i < r->s->rows; i++)
      if (isfinite(r->s->req[i]))
        r->s->req[i] = sum += r->s->req[i];
  }
  const char *optional[] = {"elapsed_s",
                            "e2e_p50_ms",
                            "e2e_p99_ms",
                            "flushes",
                            "ok",
                            "text_only_total",
                            "image_megapixels_total"};
  double **dst[] = {&r->s->elapsed, &r->s->p50, &r->s->p99, &r->s->fl,
                    &r->s->ok,      &r->s->txt, &r->s->mpx};
  for (size_t i = 0; i < VL_ARRAY_SIZE(optional); i++) {
    *dst[i] = numbers(r, tl, optional[i], 0);
    if (!*dst[i] && vl_csv_col(tl, optional[i]) >= 0)
      return VL_EINVAL;
  }
  const char *img_col = vl_csv_col(tl, "images_sent_total") >= 0 ? "images_sent_total"
                        : vl_csv_col(tl, "images_sent") >= 0     ? "images_sent"
                                                                 : NULL;
  if (img_col) {
    if (!(r->s->img = numbers(r, tl, img_col, 1)))
      return VL_EINVAL;
    double *sent = numbers(r, tl, "sent", 0), *sent_total = numbers(r, tl, "sent_total", 0);
    int total = running_total(r->s->img, sent, sent_total, r->s->rows);
    free(sent);
    free(sent_total);
    double sum = 0;
    for (size_t i = 0; !total && i < r->s->rows; i++)
      if (isfinite(r->s->img[i]))
        r->s->img[i] = sum += r->s->img[i];
  }
  if (cfg->x_images && !r->s->img) {
    set_err(r, "%s: --x images needs an images_sent column", vl_csv_source(tl));
    return VL_ENOENT;
  }
  r->s->X = cfg->x_images ? r->s->img : r->s->req;
  r->s->X2 = cfg->x_images ? r->s->req : r->s->img;

  /* Run start: where no work was done. */
  r->s->t0 = NAN;
  if (r->s->rows && r->s->elapsed && isfinite(r->s->elapsed[0]) && isfinite(r->s->wall[0]))
    r->s->t0 = r->s->wall[0] - 1000 * r->s->elapsed[0];
  r->s->kt = vl_xmalloc((r->s->rows + 1) * sizeof(double));
  r->s->kx = vl_xmalloc((r->s->rows + 1) * sizeof(double));
  r->s->kt2 = vl_xmalloc((r->s->rows + 1) * sizeof(double));
  r->s->kx2 = vl_xmalloc((r->s->rows + 1) * sizeof(double));
  r->s->nk = total_knots(r->s, r->s->X, r->s->kt, r->s->kx);
  r->s->nk2 = total_knots(r->s, r->s->X2, r->s->kt2, r->s->kx2);

  /* Flushes: between two rows where the counter grows, the window opening after the earlier
   * row's time. */
  r->s->flushes = vl_xcalloc(r->s->rows + 1, sizeof(vl_flush_event_t));
  double prev = 0, prev_wall = r->s->t0;
  for (size_t i = 0; r->s->fl && i < r->s->rows; i++) {
    if (isfinite(r->s->fl[i])) {
      if (r->s->fl[i] > prev && isfinite(r->s->X[i])) {
        vl_flush_event_t *f = &r->s->flushes[r->s->n_flushes++];
        f->t_ms = prev_wall;
        f->x = r->s->X[i];
        f->x2 = r->s->X2 ? r->s->X2[i] : NAN;
      }
      prev = r->s->fl[i];
    }
    if (isfinite(r->s->wall[i]))
      prev_wall = r->s->wall[i];
  }

  /* Warm-up: --warmup, else the phase column; --warmup-time on top. */
  r->s->warmup_x = 0;
  r->s->warmup_t = 0;
  r->s->warmup_from = "none";
  int phase = vl_csv_col(tl, "phase");
  if (cfg->warmup >= 0) {
    r->s->warmup_x = cfg->warmup;
    r->s->warmup_from = "--warmup";
    /* A row's memory values were read at the row before (read_time), so a sample is past the
     * warm-up once the work done when it was read is: from the first row that reached it on, in
     * time, as the phase column's cut is. */
    for (size_t i = 0; cfg->warmup > 0 && i < r->s->rows; i++)
      if (isfinite(r->s->X[i]) && r->s->X[i] >= cfg->warmup && isfinite(r->s->wall[i])) {
        r->s->warmup_t = r->s->wall[i];
        break;
      }
  } else if (phase >= 0) {
    int any = 0;
    size_t i = 0;
    for (; i < r->s->rows; i++) {
      const char *ph = vl_csv_cell(tl, i, (size_t)phase);
      /* A flush pauses the run in whatever phase it is: a flush row inside the warm-up does not
       * end it. */
      if (strcmp(ph, "warmup") == 0)
        any = 1;
      else if (*ph && strcmp(ph, "flush") != 0 && isfinite(r->s->wall[i]))
        break;
    }
    if (any) {
      r->s->warmup_t = i < r->s->rows ? r->s->wall[i] : INFINITY;
      r->s->warmup_from = "phase column";
    }
  }
  if (cfg->warmup_s > 0) {
    double start = isfinite(r->s->t0) ? r->s->t0 : r->s->rows ? r->s->wall[0] : 0;
    r->s->warmup_t = fmax(r->s->warmup_t, start + cfg->warmup_s * 1000);
    r->s->warmup_from = cfg->warmup >= 0 ? "--warmup and --warmup-time" : "--warmup-time";
  }
  return 0;
}

/* When the memory values of row i were read: the monitor's round starts as a row is written and
 * its values show in the next row, so at the row before (the first row's, before the load, at the
 * run start). A flush counted in row i happened after that read, so the row's values belong to the
 * window before it. */
static double read_time(const reader_t *r, size_t i) {
  if (i > 0 && isfinite(r->s->wall[i - 1]))
    return r->s->wall[i - 1];
  if (i == 0 && isfinite(r->s->t0) && r->s->t0 < r->s->wall[0])
    return r->s->t0;
  return r->s->wall[i];
}

/* A running total (col, NULL when the timeline lacks it) when row i's memory was read: the row
 * before's value, as read_time; 0 at the run start. */
static double read_count(const reader_t *r, const double *col, size_t i) {
  if (!col)
    return NAN;
  if (i > 0 && isfinite(r->s->wall[i - 1]))
    return col[i - 1];
  if (i == 0 && isfinite(r->s->t0) && r->s->t0 < r->s->wall[0])
    return 0;
  return col[i];
}

static int timeline_series(reader_t *r, const vl_csv_t *tl) {
  for (size_t c = 0; c < vl_csv_ncols(tl); c++) {
    const char *name = vl_csv_colname(tl, c);
    if (is_standard(name) || !*name)
      continue;
    if (r->cfg->series && !listed(r->cfg->series, name))
      continue;
    double *v = numbers(r, tl, name, 1);
    if (!v)
      return VL_EINVAL;
    double scale;
    vl_series_mem_t *s = add_series(r, name, r->s->rows);
    s->unit = series_unit(name, &scale, &s->not_memory);
    for (size_t i = 0; i < r->s->rows; i++) {
      s->x[s->n] = r->s->X[i];
      s->x2[s->n] = r->s->X2 ? r->s->X2[i] : NAN;
      s->y[s->n] = v[i] * scale;
      s->img[s->n] = read_count(r, r->s->img, i);
      s->txt[s->n] = read_count(r, r->s->txt, i);
      s->mpx[s->n] = read_count(r, r->s->mpx, i);
      s->t[s->n++] = read_time(r, i);
    }
    free(v);
  }
  return 0;
}

static int pick_time_col(reader_t *r, const vl_csv_t *ext) {
  if (r->cfg->ext_time) {
    int c = vl_csv_col(ext, r->cfg->ext_time);
    if (c < 0)
      set_err(r, "%s: --external-time '%s': no such column", vl_csv_source(ext), r->cfg->ext_time);
    return c;
  }
  static const char *const names[] = {"timestamp", "time", "ts", "wall_ms", "date", "datetime"};
  for (size_t k = 0; k < VL_ARRAY_SIZE(names); k++)
    for (size_t c = 0; c < vl_csv_ncols(ext); c++)
      if (strcasecmp(vl_csv_colname(ext, c), names[k]) == 0)
        return (int)c;
  return 0;
}

typedef struct {
  double t;
  size_t row;
} stamp_t;

static int cmp_stamp(const void *a, const void *b) {
  const stamp_t *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return x->row < y->row ? -1 : x->row > y->row;
}

/* Per-row running totals (the timeline's images, text-only requests, megapixels) at the wall times
 * t[0..n) of external samples, into out[0..n): interpolated between the rows around each time, from
 * 0 at the run start; NAN where the timeline lacks the column or t is outside its rows. */
static void totals_at(const vl_series_set_t *set, const double *col, const double *t, size_t n,
                      double *out) {
  double *kt = vl_xmalloc((set->rows + 1) * sizeof(double)),
         *kv = vl_xmalloc((set->rows + 1) * sizeof(double));
  size_t nk = total_knots(set, col, kt, kv);
  for (size_t k = 0; k < n; k++)
    if (vl_analyze_interp(kt, kv, nk, t[k], &out[k]) != 0)
      out[k] = NAN;
  free(kt);
  free(kv);
}

static int external_series(reader_t *r, const vl_csv_t *ext) {
  int tc = pick_time_col(r, ext);
  if (tc < 0)
    return VL_ENOENT;
  size_t rows = vl_csv_nrows(ext);
  r->s->ext_rows = rows;
  double *t = vl_xmalloc((rows + 1) * sizeof(double));
  if (vl_csv_times(ext, (size_t)tc, t, r->err, r->errlen) != 0) {
    free(t);
    return VL_EINVAL;
  }
  /* Samples in time order, those inside the run placed on the work axes. */
  stamp_t *order = vl_xmalloc((rows + 1) * sizeof(stamp_t));
  double *ex = vl_xmalloc((rows + 1) * sizeof(double)),
         *ex2 = vl_xmalloc((rows + 1) * sizeof(double));
  size_t used = 0;
  for (size_t i = 0; i < rows; i++) {
    double x;
    if (isfinite(t[i]) && vl_analyze_interp(r->s->kt, r->s->kx, r->s->nk, t[i], &x) == 0)
      order[used++] = (stamp_t){t[i], i};
  }
  qsort(order, used, sizeof(stamp_t), cmp_stamp);
  double *eim = vl_xmalloc((rows + 1) * sizeof(double)),
         *etx = vl_xmalloc((rows + 1) * sizeof(double)),
         *emp = vl_xmalloc((rows + 1) * sizeof(double)),
         *et = vl_xmalloc((rows + 1) * sizeof(double));
  for (size_t k = 0; k < used; k++) {
    et[k] = order[k].t;
    vl_analyze_interp(r->s->kt, r->s->kx, r->s->nk, et[k], &ex[k]);
    if (vl_analyze_interp(r->s->kt2, r->s->kx2, r->s->nk2, et[k], &ex2[k]) != 0)
      ex2[k] = NAN;
  }
  totals_at(r->s, r->s->img, et, used, eim);
  totals_at(r->s, r->s->txt, et, used, etx);
  totals_at(r->s, r->s->mpx, et, used, emp);
  r->s->ext_used = used;
  r->s->ext_dropped = rows - used;

  int rc = 0;
  double *v = vl_xmalloc((rows + 1) * sizeof(double));
  for (size_t c = 0; c < vl_csv_ncols(ext); c++) {
    if ((int)c == tc)
      continue;
    const char *col = vl_csv_colname(ext, c);
    /* A column whose first value is not a number is text (a GPU's name, a host): skipped. */
    size_t first = 0;
    while (first < rows && !*vl_csv_cell(ext, first, c))
      first++;
    double probe;
    if (first == rows || vl_csv_parse_number(vl_csv_cell(ext, first, c), &probe) != 0)
      continue;
    char name[256];
    snprintf(name, sizeof(name), "%s", col);
    for (size_t k = 0; k < r->s->nser; k++)
      if (strcmp(r->s->ser[k].name, name) == 0)
        snprintf(name, sizeof(name), "ext:%s", col);
    if (r->cfg->series && !listed(r->cfg->series, name) && !listed(r->cfg->series, col))
      continue;
    if (vl_csv_numbers(ext, c, v, r->err, r->errlen) != 0) {
      rc = VL_EINVAL;
      break;
    }
    double scale;
    vl_series_mem_t *s = add_series(r, name, used);
    s->unit = series_unit(col, &scale, &s->not_memory);
    for (size_t k = 0; k < used; k++) {
      s->x[s->n] = ex[k];
      s->x2[s->n] = ex2[k];
      s->y[s->n] = v[order[k].row] * scale;
      s->img[s->n] = eim[k];
      s->txt[s->n] = etx[k];
      s->mpx[s->n] = emp[k];
      s->t[s->n++] = order[k].t;
    }
  }
  free(v);
  free(t);
  free(order);
  free(ex);
  free(ex2);
  free(eim);
  free(et);
  free(etx);
  free(emp);
  return rc;
}

/* Every --series name must name something. */
static int check_listed(reader_t *r, const vl_csv_t *tl, const vl_csv_t *ext) {
  const char *p = r->cfg->series;
  while (p && *p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    int found = 0;
    for (size_t k = 0; k < r->s->nser && !found; k++) {
      const char *n = r->s->ser[k].name;
      found = (strlen(n) == len && strncmp(n, p, len) == 0) ||
              (strncmp(n, "ext:", 4) == 0 && strlen(n + 4) == len && strncmp(n + 4, p, len) == 0);
    }
    if (!found) {
      set_err(r, "--series: no memory series '%.*s' in %s%s%s", (int)len, p, vl_csv_source(tl),
              ext ? " or " : "", ext ? vl_csv_source(ext) : "");
      return VL_ENOENT;
    }
    p = e ? e + 1 : NULL;
  }
  return 0;
}
void vl_series_opts_init(vl_series_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->warmup = -1;
}

int vl_series_read(vl_series_set_t *set, const vl_csv_t *timeline, const vl_csv_t *external,
                   const vl_series_opts_t *o, char *err, size_t errlen) {
  memset(set, 0, sizeof(*set));
  reader_t r = {.s = set, .cfg = o, .err = err, .errlen = errlen};
  set->x_images = o->x_images;
  set->tl_name = vl_csv_source(timeline);
  set->ext_name = external ? vl_csv_source(external) : NULL;
  int rc = read_timeline(&r, timeline);
  if (!rc)
    rc = timeline_series(&r, timeline);
  if (!rc && external)
    rc = external_series(&r, external);
  if (!rc)
    rc = check_listed(&r, timeline, external);
  if (!rc && set->nser == 0) {
    set_err(&r, "%s: no memory series (no columns besides the standard ones)%s", set->tl_name,
            external ? ", and no numeric column in the external file" : "");
    rc = VL_EINVAL;
  }
  return rc;
}

void vl_series_input(const vl_series_set_t *set, size_t k, vl_series_t *in) {
  const vl_series_mem_t *s = &set->ser[k];
  const char *xn = set->x_images ? "images" : "requests";
  const char *x2n = set->x_images ? "requests" : "images";
  *in = (vl_series_t){.name = s->name,
                      .unit = s->unit,
                      .x_name = xn,
                      .x2_name = set->X2 ? x2n : NULL,
                      .x = s->x,
                      .x2 = set->X2 ? s->x2 : NULL,
                      .y = s->y,
                      .t_ms = s->t,
                      .n = s->n,
                      .flushes = set->flushes,
                      .n_flushes = set->n_flushes,
                      .warmup_x = set->warmup_x,
                      .warmup_t_ms = set->warmup_t,
                      .t0_ms = isfinite(set->t0) ? set->t0 : 0,
                      .images = set->img ? s->img : NULL,
                      .text_only = set->txt ? s->txt : NULL,
                      .megapixels = set->mpx ? s->mpx : NULL,
                      .peak = s->peak,
                      .not_memory = s->not_memory};
}

double vl_series_warmup_at(const vl_series_set_t *set) {
  double wx = set->warmup_x, x;
  if (!(wx > 0) && set->warmup_t > 0 &&
      vl_analyze_interp(set->kt, set->kx, set->nk, set->warmup_t, &x) == 0)
    wx = x;
  return wx;
}

void vl_series_free(vl_series_set_t *set) {
  free(set->wall);
  free(set->req);
  free(set->img);
  free(set->elapsed);
  free(set->p50);
  free(set->p99);
  free(set->fl);
  free(set->ok);
  free(set->txt);
  free(set->mpx);
  free(set->kt);
  free(set->kx);
  free(set->kt2);
  free(set->kx2);
  free(set->flushes);
  for (size_t k = 0; k < set->nser; k++) {
    vl_series_mem_t *s = &set->ser[k];
    free(s->name);
    free(s->x);
    free(s->x2);
    free(s->y);
    free(s->t);
    free(s->img);
    free(s->txt);
    free(s->mpx);
  }
  free(set->ser);
  memset(set, 0, sizeof(*set));
}
