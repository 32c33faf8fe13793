/* The analysis's fits and their intervals: ordinary least squares with a Student-t interval,
 * Theil-Sen with Sen's rank interval, the common slope within flush windows, and the correction of
 * each interval for autocorrelated residuals (analyze.h says when). Slopes here are per unit of x;
 * the caller scales them. */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/dist.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void vl__analyze_fit_clear(vl_fit_t *f, size_t n) {
  f->slope = f->lo = f->hi = f->intercept = f->r2 = f->r1 = NAN;
  f->n_eff = (double)n;
  f->n = n;
}

/* Lag-1 autocorrelation of residuals e[0..n-1]; 0 when they are all zero. Pairs whose group
 * differs (when group is not NULL) are left out. */
double vl__analyze_fit_lag1(const double *e, const int *group, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    den += e[i] * e[i];
    if (i + 1 < n && (!group || group[i] == group[i + 1]))
      num += e[i] * e[i + 1];
  }
  return den > 0 ? num / den : 0;
}

/* The effective sample size for n residuals with lag-1 autocorrelation r1. */
double vl__analyze_fit_neff(double n, double r1, int autocorr) {
  if (autocorr && n >= VL_ANALYZE_AR1_MIN_N && r1 > 0)
    return r1 >= 1 ? 0 : n * (1 - r1) / (1 + r1);
  return n;
}

/* Fills lo and hi from the slope's standard error at `df` residual degrees of freedom. */
static void set_interval(vl_fit_t *f, double se, double df, double level) {
  if (!(df > 0)) {
    f->lo = -INFINITY;
    f->hi = INFINITY;
    return;
  }
  double q = vl_dist_tquantile(0.5 + level / 2, df);
  f->lo = f->slope - q * se;
  f->hi = f->slope + q * se;
}

int vl_analyze_ols(const double *x, const double *y, size_t n, double level, int autocorr,
                   vl_fit_t *fit) {
  vl__analyze_fit_clear(fit, n);
  if (n < 2)
    return VL_EINVAL;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; i++) {
    mx += x[i];
    my += y[i];
  }
  mx /= (double)n;
  my /= (double)n;
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < n; i++) {
    double dx = x[i] - mx, dy = y[i] - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  if (!(sxx > 0))
    return VL_EINVAL;
  double b = sxy / sxx, a = my - b * mx;
  fit->slope = b;
  fit->intercept = a;
  if (n < 3) {
    fit->r2 = syy > 0 ? 1 : NAN;
    return 0;
  }
  /* Memory that never moved fits exactly: its residuals would be rounding error alone (the mean
   * of a value that binary cannot hold), strongly autocorrelated, and leave no effective sample. */
  size_t same = 1;
  while (same < n && y[same] == y[0])
    same++;
  if (same == n) {
    fit->slope = b = 0;
    fit->intercept = a = my = y[0];
    syy = 0;
  }
  double *e = vl_xmalloc(n * sizeof(*e));
  double sse = 0;
  for (size_t i = 0; i < n; i++) {
    e[i] = same == n ? 0 : y[i] - (my + b * (x[i] - mx));
    sse += e[i] * e[i];
  }
  fit->r2 = syy > 0 ? fmax(0, 1 - sse / syy) : NAN;
  fit->r1 = vl__analyze_fit_lag1(e, NULL, n);
  free(e);
  fit->n_eff = vl__analyze_fit_neff((double)n, fit->r1, autocorr);
  double df = fit->n_eff - 2;
  set_interval(fit, df > 0 ? sqrt(sse / df / sxx) : INFINITY, df, level);
  return 0;
}

static void swap_d(double *a, double *b) {
  double t = *a;
  *a = *b;
  *b = t;
}

/* Rearranges v[0..n-1] so that v[k] holds the (k+1)-th smallest value, no larger values before it
 * and no smaller ones after (Hoare's selection, median-of-three pivot). Returns v[k]. */
static double select_k(double *v, size_t n, size_t k) {
  ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
  while (lo < hi) {
    ptrdiff_t mid = lo + (hi - lo) / 2;
    if (v[mid] < v[lo])
      swap_d(&v[mid], &v[lo]);
    if (v[hi] < v[lo])
      swap_d(&v[hi], &v[lo]);
    if (v[hi] < v[mid])
      swap_d(&v[hi], &v[mid]);
    double pivot = v[mid];
    ptrdiff_t i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot)
        i++;
      while (v[j] > pivot)
        j--;
      if (i <= j) {
        swap_d(&v[i], &v[j]);
        i++;
        j--;
      }
    }
    /* Now v[lo..j] <= pivot <= v[i..hi], and anything between equals the pivot. */
    if (kk <= j)
      hi = j;
    else if (kk >= i)
      lo = i;
    else
      break;
  }
  return v[kk];
}

/* The value at 1-based rank r in [1, n] of v (linearly between neighbouring ranks). */
static double rank_value(double *v, size_t n, double r) {
  if (r < 1)
    r = 1;
  if (r > (double)n)
    r = (double)n;
  size_t k = (size_t)floor(r);
  double frac = r - (double)k;
  double lo = select_k(v, n, k - 1);
  if (frac <= 0 || k >= n)
    return lo;
  double hi = select_k(v, n, k);
  return lo + frac * (hi - lo);
}

static double median(double *v, size_t n) {
  return rank_value(v, n, ((double)n + 1) / 2);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int vl_analyze_theil_sen(const double *x, const double *y, size_t n, double level, int autocorr,
                         size_t max_points, vl_fit_t *fit) {
  size_t m = max_points && n > max_points ? max_points : n;
  vl__analyze_fit_clear(fit, m);
  if (m < 2)
    return VL_EINVAL;
  double *xs = malloc(m * sizeof(*xs)), *ys = malloc(m * sizeof(*ys));
  size_t npairs = m * (m - 1) / 2;
  double *slopes = malloc(npairs * sizeof(*slopes));
  int rc = 0;
  if (!xs || !ys || !slopes) {
    rc = VL_ENOMEM;
    goto done;
  }
  for (size_t i = 0; i < m; i++) {
    size_t src = (size_t)((uint64_t)i * n / m);
    xs[i] = x[src];
    ys[i] = y[src];
  }
  size_t ns = 0;
  for (size_t i = 0; i < m; i++)
    for (size_t j = i + 1; j < m; j++)
      if (xs[j] != xs[i])
        slopes[ns++] = (ys[j] - ys[i]) / (xs[j] - xs[i]);
  if (ns == 0) {
    rc = VL_EINVAL;
    goto done;
  }
  fit->slope = median(slopes, ns);

  /* Intercept: the median of y - b x; residuals about that line give the autocorrelation. */
  double *tmp = malloc(m * sizeof(*tmp));
  if (!tmp) {
    rc = VL_ENOMEM;
    goto done;
  }
  for (size_t i = 0; i < m; i++)
    tmp[i] = ys[i] - fit->slope * xs[i];
  fit->intercept = median(tmp, m);
  if (m < 3) {
    free(tmp);
    goto done;
  }
  for (size_t i = 0; i < m; i++)
    tmp[i] = ys[i] - fit->intercept - fit->slope * xs[i];
  fit->r1 = vl__analyze_fit_lag1(tmp, NULL, m);

  /* Sen's interval: Var(S) of Kendall's statistic with ties in x, C = z sqrt(Var S); the bounds
   * are the slopes of rank (N - C) / 2 and (N + C) / 2 + 1. */
  memcpy(tmp, xs, m * sizeof(*tmp));
  qsort(tmp, m, sizeof(*tmp), cmp_d);
  double md = (double)m;
  double var = md * (md - 1) * (2 * md + 5);
  for (size_t i = 0; i < m;) {
    size_t j = i;
    while (j < m && tmp[j] == tmp[i])
      j++;
    double t = (double)(j - i);
    var -= t * (t - 1) * (2 * t + 5);
    i = j;
  }
  var /= 18;
  free(tmp);
  fit->n_eff = vl__analyze_fit_neff(md, fit->r1, autocorr);
  double inflate = fit->n_eff > 0 ? md / fit->n_eff : INFINITY;
  double c = vl_dist_norm_quantile(0.5 + level / 2) * sqrt(var * inflate);
  double nsd = (double)ns;
  double r_lo = (nsd - c) / 2, r_hi = (nsd + c) / 2 + 1;
  fit->lo = r_lo < 1 ? -INFINITY : rank_value(slopes, ns, r_lo);
  fit->hi = r_hi > nsd ? INFINITY : rank_value(slopes, ns, r_hi);

done:
  free(xs);
  free(ys);
  free(slopes);
  return rc;
}

int vl_analyze_interp(const double *tk, const double *xk, size_t n, double t, double *x) {
  if (n == 0 || !(t >= tk[0] && t <= tk[n - 1]))
    return VL_ERANGE;
  /* The last knot at or before t. */
  size_t lo = 0, hi = n;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (tk[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  if (lo + 1 >= n || tk[lo] == t) {
    *x = xk[lo];
    return 0;
  }
  double w = (t - tk[lo]) / (tk[lo + 1] - tk[lo]);
  *x = xk[lo] + w * (xk[lo + 1] - xk[lo]);
  return 0;
}

void vl__analyze_fit_scale(vl_fit_t *f, double k) {
  f->slope *= k;
  f->lo *= k;
  f->hi *= k;
}

/* The segment that starts at i: the run of equal seg[] from i; returns where it ends and sets the
 * means of its x and y. */
static size_t segment(const double *x, const double *y, const int *seg, size_t n, size_t i,
                      double *mx, double *my) {
  size_t j = i;
  *mx = *my = 0;
  while (j < n && seg[j] == seg[i]) {
    *mx += x[j];
    *my += y[j];
    j++;
  }
  *mx /= (double)(j - i);
  *my /= (double)(j - i);
  return j;
}

/* The common slope within segments (one intercept each), per unit of x. Segments are runs of equal
 * seg[] in order; segments with fewer than 2 points are left out. Sets *span to the mean x-span of
 * the segments used. */
void vl__analyze_fit_within(const double *x, const double *y, const int *seg, size_t n,
                            const vl_analyze_opts_t *o, vl_fit_t *f, double *span) {
  vl__analyze_fit_clear(f, 0);
  *span = NAN;
  double sxx = 0, sxy = 0, spans = 0;
  size_t used = 0, groups = 0;
  for (size_t i = 0; i < n;) {
    double mx, my;
    size_t j = segment(x, y, seg, n, i, &mx, &my);
    if (j - i >= 2) {
      for (size_t k = i; k < j; k++) {
        sxx += (x[k] - mx) * (x[k] - mx);
        sxy += (x[k] - mx) * (y[k] - my);
      }
      spans += x[j - 1] - x[i];
      used += j - i;
      groups++;
    }
    i = j;
  }
  f->n = used;
  f->n_eff = (double)used;
  if (!groups || !(sxx > 0))
    return;
  double b = sxy / sxx;
  f->slope = b;
  *span = spans / (double)groups;
  double *e = vl_xmalloc(used * sizeof(*e));
  int *g = vl_xmalloc(used * sizeof(*g));
  double sse = 0;
  size_t m = 0;
  for (size_t i = 0; i < n;) {
    double mx, my;
    size_t j = segment(x, y, seg, n, i, &mx, &my);
    if (j - i >= 2) {
      for (size_t k = i; k < j; k++) {
        e[m] = y[k] - my - b * (x[k] - mx);
        g[m++] = seg[k];
        sse += e[m - 1] * e[m - 1];
      }
    }
    i = j;
  }
  f->r1 = vl__analyze_fit_lag1(e, g, used);
  free(e);
  free(g);
  f->n_eff = vl__analyze_fit_neff((double)used, f->r1, o->autocorr);
  double df = f->n_eff - (double)groups - 1;
  set_interval(f, df > 0 ? sqrt(sse / df / sxx) : INFINITY, df, o->level);
}

/* Whether autocorrelation leaves a fit fewer effective samples than the verdict needs. A fit on
 * few points that follow no pattern keeps them all: its t interval is wide by itself. */
int vl__analyze_fit_too_few(const vl_fit_t *f, const vl_analyze_opts_t *o) {
  return f->n_eff < o->min_eff && f->n_eff < (double)f->n;
}
