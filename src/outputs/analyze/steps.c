/* One-time rises (change points) of a series: a jump of at least the material growth over a few
 * samples, flat before and after, with what the run did just before it; and the slope of the
 * rest, the samples after the warm-up with the jumps taken out. */
#include "internal.h"
#include "vlmload/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The most samples a flat run around a jump holds. */
#define FLAT_MAX 200

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median and the range of v[0..n-1] (n >= 1, at most FLAT_MAX). */
static double median_range(const double *v, size_t n, double *range) {
  double w[FLAT_MAX];
  memcpy(w, v, n * sizeof(double));
  qsort(w, n, sizeof(double), cmp_double);
  *range = w[n - 1] - w[0];
  return n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
}

/* The finite samples of s: their indices in s, in order. Returns how many. */
static size_t finite_samples(const vl_series_t *s, size_t *idx) {
  size_t n = 0;
  for (size_t i = 0; i < s->n; i++)
    if (isfinite(s->x[i]) && isfinite(s->y[i]))
      idx[n++] = i;
  return n;
}

/* What came just before sample b of s (from sample a, a <= b): the first image request, the
 * first image of a new resolution, a flush; NULL when the run recorded none of them there. */
static const char *event_between(const vl_series_t *s, size_t a, size_t b) {
  if (s->images && isfinite(s->images[a]) && isfinite(s->images[b]) && s->images[a] < 1 &&
      s->images[b] >= 1)
    return "the first image request";
  if (s->resolutions && isfinite(s->resolutions[a]) && isfinite(s->resolutions[b]) &&
      s->resolutions[b] > s->resolutions[a])
    return "the first image of a resolution not seen before";
  for (size_t k = 0; k < s->n_flushes; k++) {
    const vl_flush_event_t *f = &s->flushes[k];
    int in = s->t_ms && isfinite(f->t_ms) && isfinite(s->t_ms[a]) && isfinite(s->t_ms[b])
                 ? f->t_ms >= s->t_ms[a] && f->t_ms < s->t_ms[b]
                 : f->x > s->x[a] && f->x <= s->x[b];
    if (in)
      return k == 0 ? "the first flush" : "a flush";
  }
  return NULL;
}

/* A flat run: the median and range of its samples. */
typedef struct {
  double med, range;
  size_t n;
} run_t;

/* The run of samples before (dir -1, ending at i) or after (dir +1, starting at i): those within
 * VL_ANALYZE_JUMP_FLAT_S seconds of sample i, and at least VL_ANALYZE_JUMP_FLAT samples where
 * there are as many, at most FLAT_MAX. */
static run_t flat_run(const double *y, const double *t, size_t n, size_t i, int dir) {
  double v[FLAT_MAX];
  size_t k = 0;
  for (size_t j = i; k < FLAT_MAX && j < n; j = dir < 0 ? j - 1 : j + 1) {
    int in_time =
        t && isfinite(t[j]) && isfinite(t[i]) && fabs(t[j] - t[i]) <= VL_ANALYZE_JUMP_FLAT_S * 1000;
    if (k >= VL_ANALYZE_JUMP_FLAT && !in_time)
      break;
    v[k++] = y[j];
    if (dir < 0 && j == 0)
      break;
  }
  run_t r = {0, 0, k};
  r.med = median_range(v, k, &r.range);
  return r;
}

void vl__analyze_steps_find(vl_analysis_t *a, const vl_series_t *s) {
  a->n_jumps = 0;
  size_t *idx = vl_xmalloc((s->n + 1) * sizeof(size_t));
  size_t n = finite_samples(s, idx);
  double *y = vl_xmalloc((n + 1) * sizeof(double)), *t = NULL;
  run_t *pre = vl_xmalloc((n + 1) * sizeof(run_t)), *post = vl_xmalloc((n + 1) * sizeof(run_t));
  if (s->t_ms)
    t = vl_xmalloc((n + 1) * sizeof(double));
  for (size_t i = 0; i < n; i++) {
    y[i] = s->y[idx[i]];
    if (t)
      t[i] = s->t_ms[idx[i]];
  }
  a->y_start = n ? y[0] : NAN;
  a->y_low = a->y_high = n ? y[0] : NAN;
  for (size_t i = 0; i < n; i++) {
    a->y_low = fmin(a->y_low, y[i]);
    a->y_high = fmax(a->y_high, y[i]);
    pre[i] = flat_run(y, t, n, i, -1);
    post[i] = flat_run(y, t, n, i, +1);
  }
  double floor = isfinite(a->threshold) ? a->threshold : a->floor_abs;
  int found_more = 0;
  /* From each sample b, the last at the old level, the first sample e at a new level within
   * VL_ANALYZE_JUMP_SPREAD samples or VL_ANALYZE_JUMP_SPREAD_S seconds, flat on both sides. */
  for (size_t b = 0; floor > 0 && b + 1 < n && !found_more; b++) {
    for (size_t e = b + 1; e < n; e++) {
      int near =
          e - b <= VL_ANALYZE_JUMP_SPREAD ||
          (t && isfinite(t[e]) && isfinite(t[b]) && t[e] - t[b] <= VL_ANALYZE_JUMP_SPREAD_S * 1000);
      if (!near)
        break;
      if (post[e].n < 3)
        break;
      double jump = post[e].med - pre[b].med;
      if (!(jump >= floor) || pre[b].range > jump / 8 || post[e].range > jump / 8)
        continue;
      /* It began at the last sample still at the old level. */
      size_t c = b;
      while (c + 1 < e && y[c + 1] <= pre[b].med + fmax(pre[b].range, jump / 20))
        c++;
      /* Its size from the old level where it began: b may lie well before it. */
      jump = post[e].med - pre[c].med;
      if (!(jump >= floor))
        continue;
      if (a->n_jumps == VL_ANALYZE_MAX_JUMPS) {
        found_more = 1;
        break;
      }
      vl_jump_t *j = &a->jumps[a->n_jumps++];
      j->x = s->x[idx[c]];
      j->t_ms = t ? t[c] : NAN;
      j->size = jump;
      j->first = idx[e];
      /* What came just before: as far back as a jump may take to show (pages fault in). */
      size_t from = c;
      while (from > 0 && (c - from < VL_ANALYZE_JUMP_SPREAD ||
                          (t && isfinite(t[from - 1]) && isfinite(t[c]) &&
                           t[c] - t[from - 1] <= VL_ANALYZE_JUMP_SPREAD_S * 1000)))
        from--;
      j->after = event_between(s, idx[from], idx[c + 1]);
      b = e - 1;
      break;
    }
  }
  /* A series that jumps at every turn moves in steps all along: none of them is one-time. */
  if (found_more)
    a->n_jumps = 0;
  free(idx);
  free(y);
  free(t);
  free(pre);
  free(post);
}

void vl__analyze_steps_rest(vl_analysis_t *a, const vl_series_t *s, const double *X,
                            const double *Y, const size_t *from, size_t m) {
  vl__analyze_fit_clear(&a->rest, 0);
  a->rest_growth = NAN;
  if (!a->n_jumps || m < 3)
    return;
  double *x = vl_xmalloc(m * sizeof(double)), *y = vl_xmalloc(m * sizeof(double));
  size_t k = 0;
  for (size_t i = 0; i < m; i++) {
    double off = 0;
    int inside = 0;
    for (size_t j = 0; j < a->n_jumps; j++) {
      const vl_jump_t *jp = &a->jumps[j];
      if (from[i] >= jp->first)
        off += jp->size;
      else if (s->x[from[i]] > jp->x)
        inside = 1; /* on its way up: neither level */
    }
    if (inside)
      continue;
    x[k] = X[i];
    y[k++] = Y[i] - off;
  }
  if (vl_analyze_ols(x, y, k, a->opts.level, a->opts.autocorr, &a->rest) == 0) {
    vl__analyze_fit_scale(&a->rest, 1000);
    a->rest_growth = a->rest.slope * (a->x_last - a->x_first) / 1000;
  }
  free(x);
  free(y);
}
