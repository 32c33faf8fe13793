/* One-time rises (change points) of a series: a jump of at least the material growth over a few
 * samples, flat before and after, with what the run did just before it; and the slope of the
 * rest, the samples after the warm-up with the jumps taken out. */
#include "internal.h"
#include "vlmload/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median and the range of v[0..n-1] (n >= 1, at most VL_ANALYZE_JUMP_FLAT). */
static double median_range(const double *v, size_t n, double *range) {
  double w[VL_ANALYZE_JUMP_FLAT];
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

void vl__analyze_steps_find(vl_analysis_t *a, const vl_series_t *s) {
  a->n_jumps = 0;
  size_t *idx = vl_xmalloc((s->n + 1) * sizeof(size_t));
  size_t n = finite_samples(s, idx);
  double *y = vl_xmalloc((n + 1) * sizeof(double));
  for (size_t i = 0; i < n; i++)
    y[i] = s->y[idx[i]];
  a->y_start = n ? y[0] : NAN;
  a->y_low = a->y_high = n ? y[0] : NAN;
  for (size_t i = 0; i < n; i++) {
    a->y_low = fmin(a->y_low, y[i]);
    a->y_high = fmax(a->y_high, y[i]);
  }
  double floor = isfinite(a->threshold) ? a->threshold : a->floor_abs;
  int found_more = 0;
  for (size_t i = 1; floor > 0 && i < n; i++) {
    for (size_t k = 1; k <= VL_ANALYZE_JUMP_SPREAD; k++) {
      size_t p = i + k - 1; /* the first sample at the new level */
      if (p + 3 > n)
        break;
      size_t nb = VL_MIN(i, (size_t)VL_ANALYZE_JUMP_FLAT);
      size_t na = VL_MIN(n - p, (size_t)VL_ANALYZE_JUMP_FLAT);
      double rb, ra;
      double before = median_range(y + i - nb, nb, &rb), after = median_range(y + p, na, &ra);
      double jump = after - before;
      if (!(jump >= floor) || rb > jump / 4 || ra > jump / 4)
        continue;
      /* Where it crossed half way: the last sample before that is where it began. */
      size_t c = i;
      while (c < p && y[c] < before + jump / 2)
        c++;
      if (a->n_jumps == VL_ANALYZE_MAX_JUMPS) {
        found_more = 1;
        break;
      }
      vl_jump_t *j = &a->jumps[a->n_jumps++];
      j->x = s->x[idx[c - 1]];
      j->t_ms = s->t_ms ? s->t_ms[idx[c - 1]] : NAN;
      j->size = jump;
      j->first = idx[p];
      j->after = event_between(s, idx[c >= 2 ? c - 2 : 0], idx[c]);
      i = p;
      break;
    }
  }
  /* A series that jumps at every turn moves in steps all along: none of them is one-time. */
  if (found_more)
    a->n_jumps = 0;
  free(idx);
  free(y);
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
