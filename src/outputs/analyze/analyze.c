/* One series through the leak analysis: the samples after the warm-up, the overall fits on both
 * axes, the post-flush windows and their floors, the within-window slope, then the levels-off
 * fit (level.c), the attribution (attr.c) and the verdict (verdict.c). */
#include "internal.h"
#include "vlmload/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vl_analyze_opts_init(vl_analyze_opts_t *o) {
  o->level = VL_ANALYZE_LEVEL;
  o->min_growth_frac = VL_ANALYZE_MIN_GROWTH_FRAC;
  o->min_growth_mb = VL_ANALYZE_MIN_GROWTH_MB;
  o->min_slope = VL_ANALYZE_MIN_SLOPE;
  o->min_points = VL_ANALYZE_MIN_POINTS;
  o->ts_max_points = VL_ANALYZE_TS_MAX_POINTS;
  o->min_eff = VL_ANALYZE_MIN_EFF;
  o->autocorr = 1;
}

/* Does flush f come before sample (x, t)? By time when both are known, else by work. */
static int flush_before(const vl_flush_event_t *f, double x, double t) {
  if (!isnan(f->t_ms) && !isnan(t))
    return t > f->t_ms;
  return x >= f->x;
}

/* Is flush f at or after the warm-up cut, so that its window is whole? */
static int flush_counts(const vl_flush_event_t *f, const vl_series_t *s) {
  if (!(f->x >= s->warmup_x))
    return 0;
  if (s->warmup_t_ms > 0 && !isnan(f->t_ms) && f->t_ms < s->warmup_t_ms)
    return 0;
  return 1;
}

/* Whether series name is a process's (monitor.h: rss_mb., hwm_mb., pss_mb., gpu_mb.), whose value
 * is missing only while the process is not there. */
static int of_a_process(const char *name) {
  static const char *const kinds[] = {"rss_mb.", "hwm_mb.", "pss_mb.", "gpu_mb."};
  for (size_t i = 0; name && i < VL_ARRAY_SIZE(kinds); i++)
    if (strncmp(name, kinds[i], strlen(kinds[i])) == 0)
      return 1;
  return 0;
}

/* Whether the samples of s stop before its run does: the rows after its last value, at least two
 * and a twentieth of them all, hold none, or for a process's series, the last row (its process was
 * gone at the end of the run). Sets a's reason when they do. */
static int ended_early(vl_analysis_t *a, const vl_series_t *s) {
  size_t last = 0, rows = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (!isfinite(s->x[i]))
      continue;
    rows++;
    if (isfinite(s->y[i]))
      last = rows;
  }
  size_t after = rows - last;
  if (!(after >= 1 && of_a_process(s->name)) && (after < 2 || after * 20 < rows))
    return 0;
  char at[64] = "";
  if (a->t0_ms > 0 && isfinite(a->t_last_ms))
    snprintf(at, sizeof(at), ", %.1f s into the run,", (a->t_last_ms - a->t0_ms) / 1000);
  snprintf(a->reason, sizeof(a->reason),
           "its samples end at %.0f %s%s and %zu of the run's %zu rows after it %s none: its "
           "process was gone, or its reading failed from then on; no verdict on growth",
           a->x_last, a->x_name, at, after, rows, after == 1 ? "has" : "have");
  return 1;
}

static char *dup_or(const char *s, const char *dflt) {
  return s ? vl_xstrdup(s) : dflt ? vl_xstrdup(dflt) : NULL;
}

int vl_analyze_series(vl_analysis_t *a, const vl_series_t *s, const vl_analyze_opts_t *opts) {
  memset(a, 0, sizeof(*a));
  if (!s || !s->name || (s->n && (!s->x || !s->y)) || !opts || !(opts->level > 0) ||
      !(opts->level < 1) || opts->min_points < 3 || !(opts->min_growth_frac >= 0) ||
      !(opts->min_growth_mb >= 0) || !(opts->min_slope >= 0))
    return VL_EINVAL;
  a->opts = *opts;
  a->name = vl_xstrdup(s->name);
  a->unit = dup_or(s->unit, "MB");
  a->x_name = dup_or(s->x_name, "requests");
  a->x2_name = s->x2 ? dup_or(s->x2_name, "images") : NULL;
  a->x_first = a->x_last = a->y_mean = a->y_min = a->y_max = a->y_first = a->y_last = NAN;
  a->rise_mean = a->window_span = a->growth = a->threshold = NAN;
  a->peak_x = a->peak_t_ms = a->level_x = a->level_t_ms = a->level_y = a->level_rise = NAN;
  a->steps_p = a->basis_range = a->tail_x = a->t_first_ms = a->t_last_ms = NAN;
  a->more_x = a->more_windows = a->more_s = NAN;
  a->y_start = a->y_low = a->y_high = a->rest_growth = NAN;
  a->cap = a->cap_more_x = a->cap_then = NAN;
  vl__analyze_fit_clear(&a->rest, 0);
  a->t0_ms = s->t0_ms > 0 ? s->t0_ms : 0;
  a->basis = "overall";
  vl__analyze_fit_clear(&a->rise, 0);
  vl__analyze_fit_clear(&a->tail, 0);
  vl__analyze_fit_clear(&a->last_half, 0);
  vl__analyze_fit_clear(&a->first_half, 0);
  vl__analyze_fit_clear(&a->ols, 0);
  vl__analyze_fit_clear(&a->ts, 0);
  vl__analyze_fit_clear(&a->ols2, 0);
  vl__analyze_fit_clear(&a->ts2, 0);
  vl__analyze_fit_clear(&a->floor, 0);
  vl__analyze_fit_clear(&a->floor2, 0);
  vl__analyze_fit_clear(&a->within, 0);
  a->basis = "overall";

  /* The samples after the warm-up. */
  size_t n = s->n;
  double *X = vl_xmalloc(n * sizeof(double)), *Y = vl_xmalloc(n * sizeof(double));
  double *X2 = vl_xmalloc(n * sizeof(double)), *T = vl_xmalloc(n * sizeof(double));
  double *R[VL__ANALYZE_ATTR_TERMS];
  const double *rsrc[VL__ANALYZE_ATTR_TERMS] = {s->images, s->text_only, s->megapixels};
  for (int j = 0; j < VL__ANALYZE_ATTR_TERMS; j++)
    R[j] = rsrc[j] ? vl_xmalloc((n + 1) * sizeof(double)) : NULL;
  int *seg = vl_xmalloc(n * sizeof(int));
  size_t *from = vl_xmalloc((n + 1) * sizeof(size_t));
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    double t = s->t_ms ? s->t_ms[i] : NAN;
    if (!isfinite(s->x[i]) || !isfinite(s->y[i]) || s->x[i] < s->warmup_x)
      continue;
    if (s->warmup_t_ms > 0 && !(t >= s->warmup_t_ms))
      continue;
    X[m] = s->x[i];
    Y[m] = s->y[i];
    X2[m] = s->x2 ? s->x2[i] : NAN;
    T[m] = t;
    from[m] = i;
    for (int j = 0; j < VL__ANALYZE_ATTR_TERMS; j++)
      if (R[j])
        R[j][m] = rsrc[j][i];
    m++;
  }
  a->n = m;
  if (m) {
    double sum = 0;
    a->y_min = a->y_max = Y[0];
    for (size_t i = 0; i < m; i++) {
      sum += Y[i];
      a->y_min = fmin(a->y_min, Y[i]);
      if (i == 0 || Y[i] > a->y_max) {
        a->y_max = Y[i];
        a->peak_x = X[i];
        a->peak_t_ms = T[i];
      }
    }
    a->y_mean = sum / (double)m;
    a->y_first = Y[0];
    a->y_last = Y[m - 1];
    a->x_first = X[0];
    a->x_last = X[m - 1];
    a->t_first_ms = T[0];
    a->t_last_ms = T[m - 1];
    /* The absolute floor is in MB: a series of another unit (a share, a count) has none. */
    a->floor_abs = strcmp(a->unit, "MB") == 0 ? opts->min_growth_mb : 0;
    a->threshold = fmax(a->floor_abs, opts->min_growth_frac * fabs(a->y_mean));
  }
  if (!s->not_memory && !s->peak)
    vl__analyze_steps_find(a, s);
  if (s->not_memory) {
    a->verdict = VL_VERDICT_NOT_MEMORY;
    if (m)
      snprintf(a->reason, sizeof(a->reason),
               "its name states no unit of memory: no verdict on growth; %.6g to %.6g (%+.4g) "
               "over the analysed run",
               a->y_first, a->y_last, a->y_last - a->y_first);
    else
      snprintf(a->reason, sizeof(a->reason),
               "its name states no unit of memory: no verdict on growth; no sample after the "
               "warm-up");
    goto done;
  }
  /* A series whose samples stop well before the run does (its process exited, its scrape or
   * command failed from then on) says nothing of how memory moved over the run. */
  if (m && ended_early(a, s)) {
    a->verdict = VL_VERDICT_ENDED_EARLY;
    goto done;
  }
  if (m < opts->min_points) {
    a->verdict = VL_VERDICT_INSUFFICIENT;
    snprintf(a->reason, sizeof(a->reason), "%zu sample%s after the warm-up; at least %zu needed", m,
             m == 1 ? "" : "s", opts->min_points);
    goto done;
  }
  if (s->peak && m) {
    vl__analyze_verdict_peak(a);
    goto done;
  }
  if (!(a->x_last > a->x_first)) {
    a->verdict = VL_VERDICT_INSUFFICIENT;
    snprintf(a->reason, sizeof(a->reason), "%s does not advance after the warm-up", a->x_name);
    goto done;
  }

  vl_analyze_ols(X, Y, m, opts->level, opts->autocorr, &a->ols);
  vl_analyze_theil_sen(X, Y, m, opts->level, opts->autocorr, opts->ts_max_points, &a->ts);
  vl__analyze_fit_scale(&a->ols, 1000);
  vl__analyze_fit_scale(&a->ts, 1000);
  if (s->x2) {
    /* The second axis may miss values: fit the samples that have one. */
    double *x2v = vl_xmalloc(m * sizeof(double)), *y2v = vl_xmalloc(m * sizeof(double));
    size_t m2 = 0;
    double lo2 = INFINITY, hi2 = -INFINITY;
    for (size_t i = 0; i < m; i++) {
      if (isfinite(X2[i])) {
        x2v[m2] = X2[i];
        y2v[m2++] = Y[i];
        lo2 = fmin(lo2, X2[i]);
        hi2 = fmax(hi2, X2[i]);
      }
    }
    /* An axis that does not advance (a text-only run sends no images) has no slope: its fits
     * stay NAN and are neither printed nor given in JSON. */
    if (hi2 > lo2) {
      vl_analyze_ols(x2v, y2v, m2, opts->level, opts->autocorr, &a->ols2);
      vl_analyze_theil_sen(x2v, y2v, m2, opts->level, opts->autocorr, opts->ts_max_points, &a->ts2);
      vl__analyze_fit_scale(&a->ols2, 1000);
      vl__analyze_fit_scale(&a->ts2, 1000);
    }
    free(x2v);
    free(y2v);
  }
  vl__analyze_attr_fit(&a->attr, (const double *const *)R, Y, m, opts);

  /* Windows: seg[i] counts the flushes before sample i. */
  size_t k = 0;
  for (size_t i = 0; i < m; i++) {
    while (k < s->n_flushes && flush_before(&s->flushes[k], X[i], T[i]))
      k++;
    seg[i] = (int)k;
  }
  a->n_flushes = (size_t)(seg[m - 1] - seg[0]);
  a->windows = vl_xcalloc(s->n_flushes + 1, sizeof(vl_window_t));
  for (size_t i = 0; i < m;) {
    size_t j = i;
    while (j < m && seg[j] == seg[i])
      j++;
    /* A window in which no request completed after its flush (the run ended there) says
     * nothing per request, and its samples race the flush: a value read as the cache was being
     * dropped would pass for the floor. */
    int after = 0;
    if (seg[i] > 0) {
      double fx = s->flushes[seg[i] - 1].x;
      for (size_t q = i; q < j && !after; q++)
        after = !isfinite(fx) || X[q] > fx;
    }
    if (seg[i] > 0 && after && flush_counts(&s->flushes[seg[i] - 1], s)) {
      const vl_flush_event_t *f = &s->flushes[seg[i] - 1];
      vl_window_t *w = &a->windows[a->n_windows++];
      w->x = isfinite(f->x) ? f->x : X[i];
      w->x2 = s->x2 ? (isfinite(f->x2) ? f->x2 : X2[i]) : NAN;
      w->t_ms = f->t_ms;
      w->floor = Y[i];
      w->x_min = X[i];
      double top = Y[i];
      for (size_t q = i; q < j; q++) {
        if (Y[q] < w->floor) {
          w->floor = Y[q];
          w->x_min = X[q];
        }
        top = fmax(top, Y[q]);
      }
      w->rise = top - w->floor;
      w->n = j - i;
    }
    i = j;
  }
  if (a->n_windows >= 3) {
    double *fx = vl_xmalloc(a->n_windows * sizeof(double));
    double *fx2 = vl_xmalloc(a->n_windows * sizeof(double));
    double *fy = vl_xmalloc(a->n_windows * sizeof(double));
    size_t n2 = 0;
    for (size_t w = 0; w < a->n_windows; w++) {
      fx[w] = a->windows[w].x;
      fy[w] = a->windows[w].floor;
      if (isfinite(a->windows[w].x2))
        fx2[n2++] = a->windows[w].x2;
    }
    vl_analyze_ols(fx, fy, a->n_windows, opts->level, opts->autocorr, &a->floor);
    vl__analyze_fit_scale(&a->floor, 1000);
    if (s->x2 && n2 == a->n_windows) {
      vl_analyze_ols(fx2, fy, n2, opts->level, opts->autocorr, &a->floor2);
      vl__analyze_fit_scale(&a->floor2, 1000);
    }
    free(fx);
    free(fx2);
    free(fy);
  }
  vl__analyze_fit_within(X, Y, seg, m, opts, &a->within, &a->window_span);
  vl__analyze_fit_scale(&a->within, 1000);
  a->rise_mean = a->within.slope * a->window_span / 1000;
  /* Levels-off: on the samples when no flush cuts them into windows, else on the floors. */
  int level = 0;
  if (a->n_flushes == 0) {
    level = vl__analyze_level_fit(a, X, Y, T, m, "samples");
  } else if (a->n_windows >= VL_ANALYZE_LEVEL_MIN_WINDOWS) {
    double *fx = vl_xmalloc(a->n_windows * sizeof(double));
    double *fy = vl_xmalloc(a->n_windows * sizeof(double));
    double *ft = vl_xmalloc(a->n_windows * sizeof(double));
    for (size_t w = 0; w < a->n_windows; w++) {
      fx[w] = a->windows[w].x;
      fy[w] = a->windows[w].floor;
      ft[w] = a->windows[w].t_ms;
    }
    level = vl__analyze_level_fit(a, fx, fy, ft, a->n_windows, "floor");
    free(fx);
    free(fy);
    free(ft);
  }
  if (level)
    a->verdict = VL_VERDICT_LEVELS_OFF;
  if (a->n_windows >= 3 && !isnan(a->floor.slope)) {
    double *fy = vl_xmalloc(a->n_windows * sizeof(double));
    for (size_t w = 0; w < a->n_windows; w++)
      fy[w] = a->windows[w].floor;
    vl__analyze_verdict_steps(a, fy, a->n_windows);
    free(fy);
  } else {
    vl__analyze_verdict_steps(a, Y, m);
  }
  vl__analyze_verdict_set(a);
  vl__analyze_steps_rest(a, s, X, Y, from, m);
  vl__analyze_caps_judge(a, s);

done:
  /* Its mechanism by itself; vl_analyze_mechanisms over a run's series adds where it is. */
  vl_analyze_mechanisms(&a, 1);
  free(from);
  free(X);
  free(Y);
  free(X2);
  free(T);
  for (int j = 0; j < VL__ANALYZE_ATTR_TERMS; j++)
    free(R[j]);
  free(seg);
  return 0;
}

void vl_analyze_free(vl_analysis_t *a) {
  if (!a)
    return;
  free(a->name);
  free(a->unit);
  free(a->x_name);
  free(a->x2_name);
  free(a->windows);
  memset(a, 0, sizeof(*a));
}
