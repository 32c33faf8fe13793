#include "vlmload/analyzecli.h"
#include "vlmload/common.h"
#include "vlmload/outfile.h"
#include "vlmload/plot.h"
#include "vlmload/timeline.h"
#include "vlmload/units.h"

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
  char *name;
  const char *unit;
  double *x, *x2, *y, *t; /* owned, n each */
  size_t n;
  vl_analysis_t an;
  int analysed;
} mseries_t;

typedef struct {
  const vl_analyze_cfg_t *cfg;
  const char *tl_name, *ext_name;
  size_t rows;
  double *wall, *req, *img, *elapsed, *p50, *p99, *fl, *ok;
  double *X, *X2;              /* the work axes: borrowed from req / img */
  double t0;                   /* run start, or NAN */
  double *kt, *kx, *kt2, *kx2; /* interpolation knots for X and X2 */
  size_t nk, nk2;
  vl_flush_event_t *flushes;
  size_t n_flushes;
  double warmup_x, warmup_t;
  const char *warmup_from;
  mseries_t *ser;
  size_t nser;
  size_t ext_rows, ext_used, ext_dropped;
  char *err;
  size_t errlen;
} run_t;

static void set_err(run_t *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err, r->errlen, fmt, ap);
  va_end(ap);
}

void vl_analyze_cfg_init(vl_analyze_cfg_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->warmup = -1;
  cfg->text = stdout;
  vl_analyze_opts_init(&cfg->opts);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Columns that are not memory: the standard ones, image counts, and any latency ("_ms") or
 * counter ("_total") a later version may add. */
static int is_standard(const char *name) {
  if (vl_timeline_is_column(name))
    return 1;
  return strncmp(name, "images", 6) == 0 || ends_with(name, "_ms") || ends_with(name, "_total");
}

static int contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++)
    if (strncasecmp(hay, needle, n) == 0)
      return 1;
  return 0;
}

/* Whether a series is a high-water mark, which only rises: VmHWM (hwm_mb.LABEL), or a metric
 * named for its peak or maximum (torch's max_memory_allocated, *_peak_*). */
static int is_peak(const char *name) {
  return contains_ci(name, "hwm") || contains_ci(name, "peak") || contains_ci(name, "high_water") ||
         contains_ci(name, "max_memory");
}

/* The unit of a series from its name, and the factor that brings it there. */
static const char *series_unit(const char *name, double *scale) {
  *scale = 1;
  if (contains_ci(name, "bytes")) {
    *scale = 1.0 / 1048576;
    return "MB";
  }
  if (contains_ci(name, "kib") || contains_ci(name, "_kb")) {
    *scale = 1.0 / 1024;
    return "MB";
  }
  if (contains_ci(name, "gib") || contains_ci(name, "_gb")) {
    *scale = 1024;
    return "MB";
  }
  if (contains_ci(name, "perc") || contains_ci(name, "pct") || contains_ci(name, "ratio"))
    return "units";
  return "MB";
}

static double *numbers(run_t *r, const vl_csv_t *c, const char *name, int required) {
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

static mseries_t *add_series(run_t *r, const char *name, size_t cap) {
  r->ser = vl_xrealloc(r->ser, (r->nser + 1) * sizeof(mseries_t));
  mseries_t *s = &r->ser[r->nser++];
  memset(s, 0, sizeof(*s));
  s->name = vl_xstrdup(name);
  s->x = vl_xmalloc((cap + 1) * sizeof(double));
  s->x2 = vl_xmalloc((cap + 1) * sizeof(double));
  s->y = vl_xmalloc((cap + 1) * sizeof(double));
  s->t = vl_xmalloc((cap + 1) * sizeof(double));
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

/* The timeline's own columns: axes, knots, flushes, warm-up. */
static int read_timeline(run_t *r, const vl_csv_t *tl) {
  const vl_analyze_cfg_t *cfg = r->cfg;
  r->rows = vl_csv_nrows(tl);
  if (!(r->wall = numbers(r, tl, "wall_ms", 1)))
    return VL_EINVAL;
  /* Requests completed: the running total, or (a merged timeline) the sum of the per-row counts. */
  if (vl_csv_col(tl, "completed_total") >= 0 || vl_csv_col(tl, "completed") < 0) {
    if (!(r->req = numbers(r, tl, "completed_total", 1)))
      return VL_EINVAL;
  } else {
    if (!(r->req = numbers(r, tl, "completed", 1)))
      return VL_EINVAL;
    double sum = 0;
    for (size_t i = 0; i < r->rows; i++)
      if (isfinite(r->req[i]))
        r->req[i] = sum += r->req[i];
  }
  const char *optional[] = {"elapsed_s", "e2e_p50_ms", "e2e_p99_ms", "flushes", "ok"};
  double **dst[] = {&r->elapsed, &r->p50, &r->p99, &r->fl, &r->ok};
  for (size_t i = 0; i < VL_ARRAY_SIZE(optional); i++) {
    *dst[i] = numbers(r, tl, optional[i], 0);
    if (!*dst[i] && vl_csv_col(tl, optional[i]) >= 0)
      return VL_EINVAL;
  }
  const char *img_col = vl_csv_col(tl, "images_sent_total") >= 0 ? "images_sent_total"
                        : vl_csv_col(tl, "images_sent") >= 0     ? "images_sent"
                                                                 : NULL;
  if (img_col) {
    if (!(r->img = numbers(r, tl, img_col, 1)))
      return VL_EINVAL;
    double *sent = numbers(r, tl, "sent", 0), *sent_total = numbers(r, tl, "sent_total", 0);
    int total = running_total(r->img, sent, sent_total, r->rows);
    free(sent);
    free(sent_total);
    double sum = 0;
    for (size_t i = 0; !total && i < r->rows; i++)
      if (isfinite(r->img[i]))
        r->img[i] = sum += r->img[i];
  }
  if (cfg->x_images && !r->img) {
    set_err(r, "%s: --x images needs an images_sent column", vl_csv_source(tl));
    return VL_ENOENT;
  }
  r->X = cfg->x_images ? r->img : r->req;
  r->X2 = cfg->x_images ? r->req : r->img;

  /* Run start: where no work was done. */
  r->t0 = NAN;
  if (r->rows && r->elapsed && isfinite(r->elapsed[0]) && isfinite(r->wall[0]))
    r->t0 = r->wall[0] - 1000 * r->elapsed[0];
  r->kt = vl_xmalloc((r->rows + 1) * sizeof(double));
  r->kx = vl_xmalloc((r->rows + 1) * sizeof(double));
  r->kt2 = vl_xmalloc((r->rows + 1) * sizeof(double));
  r->kx2 = vl_xmalloc((r->rows + 1) * sizeof(double));
  if (isfinite(r->t0) && r->t0 < r->wall[0]) {
    r->kt[r->nk] = r->t0;
    r->kx[r->nk++] = 0;
    if (r->X2) {
      r->kt2[r->nk2] = r->t0;
      r->kx2[r->nk2++] = 0;
    }
  }
  for (size_t i = 0; i < r->rows; i++) {
    if (!isfinite(r->wall[i]) || (r->nk && r->wall[i] < r->kt[r->nk - 1]))
      continue;
    if (isfinite(r->X[i])) {
      r->kt[r->nk] = r->wall[i];
      r->kx[r->nk++] = r->X[i];
    }
    if (r->X2 && isfinite(r->X2[i]) && !(r->nk2 && r->wall[i] < r->kt2[r->nk2 - 1])) {
      r->kt2[r->nk2] = r->wall[i];
      r->kx2[r->nk2++] = r->X2[i];
    }
  }

  /* Flushes: between two rows where the counter grows, the window opening after the earlier
   * row's time. */
  r->flushes = vl_xcalloc(r->rows + 1, sizeof(vl_flush_event_t));
  double prev = 0, prev_wall = r->t0;
  for (size_t i = 0; r->fl && i < r->rows; i++) {
    if (isfinite(r->fl[i])) {
      if (r->fl[i] > prev && isfinite(r->X[i])) {
        vl_flush_event_t *f = &r->flushes[r->n_flushes++];
        f->t_ms = prev_wall;
        f->x = r->X[i];
        f->x2 = r->X2 ? r->X2[i] : NAN;
      }
      prev = r->fl[i];
    }
    if (isfinite(r->wall[i]))
      prev_wall = r->wall[i];
  }

  /* Warm-up: --warmup, else the phase column; --warmup-time on top. */
  r->warmup_x = 0;
  r->warmup_t = 0;
  r->warmup_from = "none";
  int phase = vl_csv_col(tl, "phase");
  if (cfg->warmup >= 0) {
    r->warmup_x = cfg->warmup;
    r->warmup_from = "--warmup";
  } else if (phase >= 0) {
    int any = 0;
    size_t i = 0;
    for (; i < r->rows; i++) {
      const char *ph = vl_csv_cell(tl, i, (size_t)phase);
      /* A flush pauses the run in whatever phase it is: a flush row inside the warm-up does not
       * end it. */
      if (strcmp(ph, "warmup") == 0)
        any = 1;
      else if (*ph && strcmp(ph, "flush") != 0 && isfinite(r->wall[i]))
        break;
    }
    if (any) {
      r->warmup_t = i < r->rows ? r->wall[i] : INFINITY;
      r->warmup_from = "phase column";
    }
  }
  if (cfg->warmup_s > 0) {
    double start = isfinite(r->t0) ? r->t0 : r->rows ? r->wall[0] : 0;
    r->warmup_t = fmax(r->warmup_t, start + cfg->warmup_s * 1000);
    r->warmup_from = cfg->warmup >= 0 ? "--warmup and --warmup-time" : "--warmup-time";
  }
  return 0;
}

/* When the memory values of row i were read: the monitor's round starts as a row is written and
 * its values show in the next row, so at the row before (the first row's, before the load, at the
 * run start). A flush counted in row i happened after that read, so the row's values belong to the
 * window before it. */
static double read_time(const run_t *r, size_t i) {
  if (i > 0 && isfinite(r->wall[i - 1]))
    return r->wall[i - 1];
  if (i == 0 && isfinite(r->t0) && r->t0 < r->wall[0])
    return r->t0;
  return r->wall[i];
}

static int timeline_series(run_t *r, const vl_csv_t *tl) {
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
    mseries_t *s = add_series(r, name, r->rows);
    s->unit = series_unit(name, &scale);
    for (size_t i = 0; i < r->rows; i++) {
      s->x[s->n] = r->X[i];
      s->x2[s->n] = r->X2 ? r->X2[i] : NAN;
      s->y[s->n] = v[i] * scale;
      s->t[s->n++] = read_time(r, i);
    }
    free(v);
  }
  return 0;
}

static int pick_time_col(run_t *r, const vl_csv_t *ext) {
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

static int external_series(run_t *r, const vl_csv_t *ext) {
  int tc = pick_time_col(r, ext);
  if (tc < 0)
    return VL_ENOENT;
  size_t rows = vl_csv_nrows(ext);
  r->ext_rows = rows;
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
    if (isfinite(t[i]) && vl_analyze_interp(r->kt, r->kx, r->nk, t[i], &x) == 0)
      order[used++] = (stamp_t){t[i], i};
  }
  qsort(order, used, sizeof(stamp_t), cmp_stamp);
  for (size_t k = 0; k < used; k++) {
    vl_analyze_interp(r->kt, r->kx, r->nk, order[k].t, &ex[k]);
    if (!r->X2 || vl_analyze_interp(r->kt2, r->kx2, r->nk2, order[k].t, &ex2[k]) != 0)
      ex2[k] = NAN;
  }
  r->ext_used = used;
  r->ext_dropped = rows - used;

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
    for (size_t k = 0; k < r->nser; k++)
      if (strcmp(r->ser[k].name, name) == 0)
        snprintf(name, sizeof(name), "ext:%s", col);
    if (r->cfg->series && !listed(r->cfg->series, name) && !listed(r->cfg->series, col))
      continue;
    if (vl_csv_numbers(ext, c, v, r->err, r->errlen) != 0) {
      rc = VL_EINVAL;
      break;
    }
    double scale;
    mseries_t *s = add_series(r, name, used);
    s->unit = series_unit(col, &scale);
    for (size_t k = 0; k < used; k++) {
      s->x[s->n] = ex[k];
      s->x2[s->n] = ex2[k];
      s->y[s->n] = v[order[k].row] * scale;
      s->t[s->n++] = order[k].t;
    }
  }
  free(v);
  free(t);
  free(order);
  free(ex);
  free(ex2);
  return rc;
}

/* Every --series name must name something. */
static int check_listed(run_t *r, const vl_csv_t *tl, const vl_csv_t *ext) {
  const char *p = r->cfg->series;
  while (p && *p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    int found = 0;
    for (size_t k = 0; k < r->nser && !found; k++) {
      const char *n = r->ser[k].name;
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

static cJSON *report_json(const run_t *r) {
  const vl_analyze_cfg_t *cfg = r->cfg;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "timeline", r->tl_name);
  if (r->ext_name) {
    cJSON *e = cJSON_AddObjectToObject(o, "external");
    cJSON_AddStringToObject(e, "file", r->ext_name);
    cJSON_AddNumberToObject(e, "rows", (double)r->ext_rows);
    cJSON_AddNumberToObject(e, "used", (double)r->ext_used);
    cJSON_AddNumberToObject(e, "outside_run", (double)r->ext_dropped);
  } else {
    cJSON_AddNullToObject(o, "external");
  }
  cJSON_AddStringToObject(o, "x", cfg->x_images ? "images" : "requests");
  if (r->X2)
    cJSON_AddStringToObject(o, "x2", cfg->x_images ? "requests" : "images");
  cJSON *w = cJSON_AddObjectToObject(o, "warmup");
  cJSON_AddStringToObject(w, "from", r->warmup_from);
  cJSON_AddNumberToObject(w, "x", r->warmup_x);
  if (r->warmup_t > 0 && isfinite(r->warmup_t))
    cJSON_AddNumberToObject(w, "wall_ms", r->warmup_t);
  else
    cJSON_AddNullToObject(w, "wall_ms");
  cJSON *fl = cJSON_AddArrayToObject(o, "flushes");
  for (size_t i = 0; i < r->n_flushes; i++) {
    cJSON *f = cJSON_CreateObject();
    if (isfinite(r->flushes[i].t_ms))
      cJSON_AddNumberToObject(f, "after_wall_ms", r->flushes[i].t_ms);
    else
      cJSON_AddNullToObject(f, "after_wall_ms");
    cJSON_AddNumberToObject(f, "x", r->flushes[i].x);
    cJSON_AddItemToArray(fl, f);
  }
  cJSON *arr = cJSON_AddArrayToObject(o, "series");
  for (size_t k = 0; k < r->nser; k++)
    if (r->ser[k].analysed)
      cJSON_AddItemToArray(arr, vl_analyze_json(&r->ser[k].an));
  return o;
}

static int write_json(run_t *r, cJSON *o, const char *path) {
  char *text = cJSON_Print(o);
  char why[384];
  int rc = vl_outfile_write_text(path, text, why, sizeof(why));
  if (rc)
    set_err(r, "--output '%s': %s", path, why);
  cJSON_free(text);
  return rc ? VL_EIO : 0;
}

static int write_plot(run_t *r) {
  const vl_analyze_cfg_t *cfg = r->cfg;
  vl_plot_line_t *lines = vl_xcalloc(r->nser + 1, sizeof(vl_plot_line_t));
  for (size_t k = 0; k < r->nser; k++)
    lines[k] = (vl_plot_line_t){r->ser[k].name, r->ser[k].x, r->ser[k].y, r->ser[k].n,
                                r->ser[k].analysed ? &r->ser[k].an : NULL};
  double *fx = vl_xmalloc((r->n_flushes + 1) * sizeof(double));
  for (size_t i = 0; i < r->n_flushes; i++)
    fx[i] = r->flushes[i].x;
  double wx = r->warmup_x, x;
  if (!(wx > 0) && r->warmup_t > 0 && vl_analyze_interp(r->kt, r->kx, r->nk, r->warmup_t, &x) == 0)
    wx = x;
  /* Latency over the same work axis, when the timeline has it: each row at the work done by its
   * end, and only the rows in which requests succeeded (another row's percentiles are 0, not a
   * latency; in work terms such a row has no width). */
  double *lx = NULL, *l50 = NULL, *l99 = NULL;
  size_t nl = 0;
  if (r->p50 || r->p99) {
    lx = vl_xmalloc((r->rows + 1) * sizeof(double));
    l50 = vl_xmalloc((r->rows + 1) * sizeof(double));
    l99 = vl_xmalloc((r->rows + 1) * sizeof(double));
    double done = 0;
    for (size_t i = 0; i < r->rows; i++) {
      int some =
          r->ok ? isfinite(r->ok[i]) && r->ok[i] > 0 : isfinite(r->req[i]) && r->req[i] > done;
      if (isfinite(r->req[i]))
        done = r->req[i];
      if (!some || !isfinite(r->X[i]))
        continue;
      lx[nl] = r->X[i];
      l50[nl] = r->p50 ? r->p50[i] : NAN;
      l99[nl++] = r->p99 ? r->p99[i] : NAN;
    }
  }
  const char *base = strrchr(r->tl_name, '/');
  base = base ? base + 1 : r->tl_name;
  char title[200];
  snprintf(title, sizeof(title), "Memory over %s - %s",
           cfg->x_images ? "images sent" : "requests completed", base);
  vl_plot_t p = {.gnuplot = cfg->gnuplot,
                 .width = cfg->plot_width,
                 .height = cfg->plot_height,
                 .title = title,
                 .x_label = cfg->x_images ? "images sent" : "requests completed",
                 .y_unit = "MB",
                 .lines = lines,
                 .n_lines = r->nser,
                 .flush_x = fx,
                 .n_flush = r->n_flushes,
                 .warmup_x = wx,
                 .lat_x = lx,
                 .lat_p50 = r->p50 ? l50 : NULL,
                 .lat_p99 = r->p99 ? l99 : NULL,
                 .n_lat = nl};
  /* A mix of MB and unitless series has no one y unit. */
  for (size_t k = 0; k < r->nser; k++)
    if (strcmp(r->ser[k].unit, "MB") != 0)
      p.y_unit = "value";
  char why[256];
  int rc = vl_plot_write(&p, cfg->plot, why, sizeof(why));
  if (rc)
    set_err(r, "--plot: %s", why);
  free(lines);
  free(fx);
  free(lx);
  free(l50);
  free(l99);
  return rc;
}

static void print_header(const run_t *r, FILE *f) {
  const char *xn = r->cfg->x_images ? "images" : "requests";
  double last = NAN;
  for (size_t i = 0; i < r->rows; i++)
    if (isfinite(r->X[i]))
      last = r->X[i];
  fprintf(f, "%s: %zu rows, %.0f %s, %zu flushes", r->tl_name, r->rows, last, xn, r->n_flushes);
  if (r->warmup_x > 0)
    fprintf(f, "; warm-up: below %.0f %s (%s)", r->warmup_x, xn, r->warmup_from);
  else if (r->warmup_t > 0 && isfinite(r->t0))
    fprintf(f, "; warm-up: first %.1f s (%s)", (r->warmup_t - r->t0) / 1000, r->warmup_from);
  else if (r->warmup_t > 0)
    fprintf(f, "; warm-up: before wall_ms %.0f (%s)", r->warmup_t, r->warmup_from);
  fputc('\n', f);
  if (r->ext_name)
    fprintf(f, "%s: %zu samples, %zu inside the run, %zu outside dropped\n", r->ext_name,
            r->ext_rows, r->ext_used, r->ext_dropped);
}

static void run_free(run_t *r) {
  free(r->wall);
  free(r->req);
  free(r->img);
  free(r->elapsed);
  free(r->p50);
  free(r->p99);
  free(r->fl);
  free(r->ok);
  free(r->kt);
  free(r->kx);
  free(r->kt2);
  free(r->kx2);
  free(r->flushes);
  for (size_t k = 0; k < r->nser; k++) {
    mseries_t *s = &r->ser[k];
    free(s->name);
    free(s->x);
    free(s->x2);
    free(s->y);
    free(s->t);
    vl_analyze_free(&s->an);
  }
  free(r->ser);
}

int vl_analyze_run(const vl_csv_t *timeline, const vl_csv_t *external, const vl_analyze_cfg_t *cfg,
                   cJSON **json, char *err, size_t errlen) {
  run_t r = {.cfg = cfg, .err = err, .errlen = errlen};
  r.tl_name = vl_csv_source(timeline);
  r.ext_name = external ? vl_csv_source(external) : NULL;
  if (json)
    *json = NULL;
  int rc = read_timeline(&r, timeline);
  if (!rc)
    rc = timeline_series(&r, timeline);
  if (!rc && external)
    rc = external_series(&r, external);
  if (!rc)
    rc = check_listed(&r, timeline, external);
  if (!rc && r.nser == 0) {
    set_err(&r, "%s: no memory series (no columns besides the standard ones)%s", r.tl_name,
            external ? ", and no numeric column in the external file" : "");
    rc = VL_EINVAL;
  }
  if (rc)
    goto done;

  const char *xn = cfg->x_images ? "images" : "requests";
  const char *x2n = cfg->x_images ? "requests" : "images";
  if (cfg->text)
    print_header(&r, cfg->text);
  for (size_t k = 0; k < r.nser; k++) {
    mseries_t *s = &r.ser[k];
    vl_series_t in = {.name = s->name,
                      .unit = s->unit,
                      .x_name = xn,
                      .x2_name = r.X2 ? x2n : NULL,
                      .x = s->x,
                      .x2 = r.X2 ? s->x2 : NULL,
                      .y = s->y,
                      .t_ms = s->t,
                      .n = s->n,
                      .flushes = r.flushes,
                      .n_flushes = r.n_flushes,
                      .warmup_x = r.warmup_x,
                      .warmup_t_ms = r.warmup_t,
                      .t0_ms = isfinite(r.t0) ? r.t0 : 0,
                      .peak = is_peak(s->name)};
    if ((rc = vl_analyze_series(&s->an, &in, &cfg->opts)) != 0) {
      set_err(&r, "%s: cannot analyse: %s", s->name, vl_strerror(rc));
      goto done;
    }
    s->analysed = 1;
    if (cfg->text) {
      fputc('\n', cfg->text);
      vl_analyze_print(cfg->text, &s->an);
    }
  }
  if (cfg->text)
    fflush(cfg->text);
  cJSON *o = report_json(&r);
  if (cfg->output && (rc = write_json(&r, o, cfg->output)) != 0) {
    cJSON_Delete(o);
    goto done;
  }
  if (cfg->plot && (rc = write_plot(&r)) != 0) {
    cJSON_Delete(o);
    goto done;
  }
  if (json)
    *json = o;
  else
    cJSON_Delete(o);

done:
  run_free(&r);
  return rc;
}

/* ---- command line -----------------------------------------------------------------------------
 */

enum {
  OPT_EXTERNAL = 256,
  OPT_EXT_TIME,
  OPT_X,
  OPT_WARMUP,
  OPT_WARMUP_TIME,
  OPT_SERIES,
  OPT_PLOT,
  OPT_PLOT_SIZE,
  OPT_GNUPLOT,
  OPT_OUTPUT,
  OPT_MIN_GROWTH,
  OPT_MIN_SLOPE,
  OPT_NO_AUTOCORR,
  OPT_QUIET,
  OPT_HELP,
};

static const struct option longopts[] = {
    {"external", required_argument, NULL, OPT_EXTERNAL},
    {"external-time", required_argument, NULL, OPT_EXT_TIME},
    {"x", required_argument, NULL, OPT_X},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"warmup-time", required_argument, NULL, OPT_WARMUP_TIME},
    {"series", required_argument, NULL, OPT_SERIES},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"plot-size", required_argument, NULL, OPT_PLOT_SIZE},
    {"gnuplot", required_argument, NULL, OPT_GNUPLOT},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"min-growth", required_argument, NULL, OPT_MIN_GROWTH},
    {"min-slope", required_argument, NULL, OPT_MIN_SLOPE},
    {"no-autocorr", no_argument, NULL, OPT_NO_AUTOCORR},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

void vl_analyze_usage(FILE *f) {
  fprintf(
      f,
      "Usage: vlmload analyze TIMELINE.csv [options]\n"
      "\n"
      "Tells a memory leak from a cache that fills up: fits every memory series of a run's\n"
      "timeline (and of an external monitor's CSV) against the work done, after the warm-up,\n"
      "and follows the post-flush floor (memory right after each cache flush).\n"
      "\n"
      "  --external FILE       a monitor's CSV: a timestamp column (epoch s or ms, ISO 8601)\n"
      "                        and value columns, joined to the run by time\n"
      "  --external-time COL   its timestamp column (default: timestamp, time, ts, ...)\n"
      "  --x requests|images   work axis (default requests completed)\n"
      "  --warmup N            leave out samples below N requests (or images); default:\n"
      "                        the rows the run marked as warm-up\n"
      "  --warmup-time DUR     leave out the first DUR of the run (30s, 2m)\n"
      "  --series A,B          analyse only these series\n"
      "  --plot FILE.png       draw memory over work, flushes, floors and fits with gnuplot\n"
      "  --plot-size WxH       plot size in pixels (default %dx%d)\n"
      "  --gnuplot PATH        the gnuplot to run (default: gnuplot on PATH; Debian:\n"
      "                        apt-get install gnuplot-nox)\n"
      "  --output FILE.json    write the analysis as JSON\n"
      "  --min-growth PCT      growth over the run that counts, in %% of the mean (default "
      "%g)\n"
      "  --min-slope MB        or a slope of at least MB per 1000 requests (default %g; 0 off)\n"
      "  --no-autocorr         do not widen intervals for autocorrelated samples\n"
      "  --quiet               no text report\n"
      "  -h, --help            this help\n"
      "\n"
      "Verdicts: grows (the post-flush floor -- or, with fewer than 3 flush windows, the\n"
      "overall slope -- rises with a %g%% interval above 0 and by a material amount),\n"
      "sawtooth-returns (memory climbs between flushes and comes back), levels-off (rises,\n"
      "then no growth in the last half: says where), flat (the interval rules out material\n"
      "growth), inconclusive (fewer than %g effective samples, or an interval that admits\n"
      "material growth), peak (a high-water mark such as hwm_mb.*, which only rises: its peak,\n"
      "no verdict on growth), and insufficient-data (fewer than %d samples after the warm-up).\n",
      VL_PLOT_WIDTH, VL_PLOT_HEIGHT, VL_ANALYZE_MIN_GROWTH_FRAC * 100, VL_ANALYZE_MIN_SLOPE,
      VL_ANALYZE_LEVEL * 100, VL_ANALYZE_MIN_EFF, VL_ANALYZE_MIN_POINTS);
}

static int bad_arg(const char *opt, const char *arg, const char *want) {
  fprintf(stderr, "vlmload analyze: --%s '%s': %s\n", opt, arg, want);
  return 2;
}

int vl_analyze_main(int argc, char **argv) {
  vl_analyze_cfg_t cfg;
  vl_analyze_cfg_init(&cfg);
  const char *external = NULL;
  opterr = 0;
  optind = 0; /* full re-initialisation: main() may have used getopt already */
  for (;;) {
    int li = -1;
    int id = getopt_long(argc, argv, ":h", longopts, &li);
    if (id == -1)
      break;
    const char *name = li >= 0 ? longopts[li].name : "";
    switch (id) {
    case 'h':
    case OPT_HELP:
      vl_analyze_usage(stdout);
      return 0;
    case ':':
      fprintf(stderr, "vlmload analyze: %s: needs a value (see --help)\n", argv[optind - 1]);
      return 2;
    case '?':
      fprintf(stderr, "vlmload analyze: %s: unknown option (see --help)\n", argv[optind - 1]);
      return 2;
    case OPT_EXTERNAL:
      external = optarg;
      break;
    case OPT_EXT_TIME:
      cfg.ext_time = optarg;
      break;
    case OPT_X:
      if (strcmp(optarg, "requests") == 0)
        cfg.x_images = 0;
      else if (strcmp(optarg, "images") == 0)
        cfg.x_images = 1;
      else
        return bad_arg(name, optarg, "want requests or images");
      break;
    case OPT_WARMUP: {
      uint64_t n;
      if (vl_units_count(optarg, &n) != 0)
        return bad_arg(name, optarg, "want a count, such as 500 or 2k");
      cfg.warmup = (double)n;
      break;
    }
    case OPT_WARMUP_TIME: {
      uint64_t us;
      if (vl_units_duration(optarg, &us) != 0)
        return bad_arg(name, optarg, "want a duration, such as 30s or 2m");
      cfg.warmup_s = (double)us / 1e6;
      break;
    }
    case OPT_SERIES:
      if (!*optarg || strstr(optarg, ",,") || optarg[0] == ',' || optarg[strlen(optarg) - 1] == ',')
        return bad_arg(name, optarg, "want series names separated by commas");
      cfg.series = optarg;
      break;
    case OPT_PLOT:
      cfg.plot = optarg;
      break;
    case OPT_PLOT_SIZE: {
      int w, h, end = 0;
      if (sscanf(optarg, "%5dx%5d%n", &w, &h, &end) != 2 || optarg[end] || w < 320 || h < 200 ||
          w > 8000 || h > 8000)
        return bad_arg(name, optarg, "want WIDTHxHEIGHT, at least 320x200, at most 8000x8000");
      cfg.plot_width = w;
      cfg.plot_height = h;
      break;
    }
    case OPT_GNUPLOT:
      cfg.gnuplot = optarg;
      break;
    case OPT_OUTPUT:
      cfg.output = optarg;
      break;
    case OPT_MIN_GROWTH: {
      char buf[64];
      snprintf(buf, sizeof(buf), "%s", optarg);
      size_t n = strlen(buf);
      if (n && buf[n - 1] == '%')
        buf[n - 1] = '\0';
      double v;
      if (vl_units_double(buf, &v) != 0 || v > 100)
        return bad_arg(name, optarg, "want a percentage from 0 to 100, such as 1 or 0.5%");
      cfg.opts.min_growth_frac = v / 100;
      break;
    }
    case OPT_MIN_SLOPE: {
      double v;
      if (vl_units_double(optarg, &v) != 0)
        return bad_arg(name, optarg, "want MB per 1000 requests, such as 1 or 0.25");
      cfg.opts.min_slope = v;
      break;
    }
    case OPT_NO_AUTOCORR:
      cfg.opts.autocorr = 0;
      break;
    case OPT_QUIET:
      cfg.text = NULL;
      break;
    default:
      return 2;
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "vlmload analyze: needs a timeline CSV (see --help)\n");
    return 2;
  }
  if (argc - optind > 1) {
    fprintf(stderr, "vlmload analyze: '%s': unexpected argument (one timeline only)\n",
            argv[optind + 1]);
    return 2;
  }
  const char *path = argv[optind];
  char err[512] = "";
  vl_csv_t *tl = NULL, *ext = NULL;
  int status = 1;
  /* gnuplot draws the plot: find it before the work. */
  char *gnuplot = NULL;
  if (cfg.plot) {
    if (vl_plot_find_gnuplot(cfg.gnuplot, &gnuplot, err, sizeof(err)) != 0) {
      fprintf(stderr, "vlmload analyze: %s\n", err);
      return 1;
    }
    cfg.gnuplot = gnuplot;
  }
  if (vl_csv_load(&tl, path, err, sizeof(err)) != 0 ||
      (external && vl_csv_load(&ext, external, err, sizeof(err)) != 0)) {
    fprintf(stderr, "vlmload analyze: %s\n", err);
    goto done;
  }
  int rc = vl_analyze_run(tl, ext, &cfg, NULL, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "vlmload analyze: %s\n", err);
    status = rc == VL_ENOENT ? 2 : 1;
    goto done;
  }
  status = 0;

done:
  vl_csv_free(tl);
  vl_csv_free(ext);
  free(gnuplot);
  return status;
}
