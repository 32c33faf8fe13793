#include "vlmload/analyze.h"
#include "vlmload/common.h"
#include "vlmload/dist.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- fits -------------------------------------------------------------------------------------
 */

static void fit_clear(vl_fit_t *f, size_t n) {
  f->slope = f->lo = f->hi = f->intercept = f->r2 = f->r1 = NAN;
  f->n_eff = (double)n;
  f->n = n;
}

/* Lag-1 autocorrelation of residuals e[0..n-1]; 0 when they are all zero. Pairs whose group
 * differs (when group is not NULL) are left out. */
static double lag1(const double *e, const int *group, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    den += e[i] * e[i];
    if (i + 1 < n && (!group || group[i] == group[i + 1]))
      num += e[i] * e[i + 1];
  }
  return den > 0 ? num / den : 0;
}

/* The effective sample size for n residuals with lag-1 autocorrelation r1. */
static double effective_n(double n, double r1, int autocorr) {
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
  fit_clear(fit, n);
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
  fit->r1 = lag1(e, NULL, n);
  free(e);
  fit->n_eff = effective_n((double)n, fit->r1, autocorr);
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
  fit_clear(fit, m);
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
  fit->r1 = lag1(tmp, NULL, m);

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
  fit->n_eff = effective_n(md, fit->r1, autocorr);
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

/* ---- one series -------------------------------------------------------------------------------
 */

void vl_analyze_opts_init(vl_analyze_opts_t *o) {
  o->level = VL_ANALYZE_LEVEL;
  o->min_growth_frac = VL_ANALYZE_MIN_GROWTH_FRAC;
  o->min_slope = VL_ANALYZE_MIN_SLOPE;
  o->min_points = VL_ANALYZE_MIN_POINTS;
  o->ts_max_points = VL_ANALYZE_TS_MAX_POINTS;
  o->min_eff = VL_ANALYZE_MIN_EFF;
  o->autocorr = 1;
}

const char *vl_analyze_verdict_name(vl_verdict_t v) {
  switch (v) {
  case VL_VERDICT_FLAT:
    return "flat";
  case VL_VERDICT_SAWTOOTH:
    return "sawtooth-returns";
  case VL_VERDICT_GROWS:
    return "grows";
  case VL_VERDICT_INCONCLUSIVE:
    return "inconclusive";
  case VL_VERDICT_LEVELS_OFF:
    return "levels-off";
  case VL_VERDICT_PEAK:
    return "peak";
  case VL_VERDICT_NOT_MEMORY:
    return "not-memory";
  default:
    return "insufficient-data";
  }
}

static void scale_fit(vl_fit_t *f, double k) {
  f->slope *= k;
  f->lo *= k;
  f->hi *= k;
}

/* Whether `slope` (per 1000 x) is big enough to matter over `span` of x. */
static int material(const vl_analysis_t *a, double slope, double span) {
  double g = slope * span / 1000;
  if (g > 0 && g >= a->threshold)
    return 1;
  return a->opts.min_slope > 0 && slope >= a->opts.min_slope;
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
static void within_fit(const double *x, const double *y, const int *seg, size_t n,
                       const vl_analyze_opts_t *o, vl_fit_t *f, double *span) {
  fit_clear(f, 0);
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
  f->r1 = lag1(e, g, used);
  free(e);
  free(g);
  f->n_eff = effective_n((double)used, f->r1, o->autocorr);
  double df = f->n_eff - (double)groups - 1;
  set_interval(f, df > 0 ? sqrt(sse / df / sxx) : INFINITY, df, o->level);
}

static char *dup_or(const char *s, const char *dflt) {
  return s ? vl_xstrdup(s) : dflt ? vl_xstrdup(dflt) : NULL;
}

/* Whether autocorrelation leaves a fit fewer effective samples than the verdict needs. A fit on
 * few points that follow no pattern keeps them all: its t interval is wide by itself. */
static int too_few(const vl_fit_t *f, const vl_analyze_opts_t *o) {
  return f->n_eff < o->min_eff && f->n_eff < (double)f->n;
}

/* " (53.2 s into the run)", or "" when the time is unknown. */
static void when(const vl_analysis_t *a, double t_ms, char *out, size_t n) {
  if (a->t0_ms > 0 && isfinite(t_ms))
    snprintf(out, n, " (%.1f s into the run)", (t_ms - a->t0_ms) / 1000);
  else
    *out = '\0';
}

/* The means of x, y and z over nb blocks of equal x-span from x[0] to x[n - 1] (x non-decreasing)
 * into bx, by and bz, empty blocks left out. Returns how many were filled. */
static size_t block_means(const double *x, const double *y, const double *z, size_t n, size_t nb,
                          double *bx, double *by, double *bz) {
  double x0 = x[0], span = x[n - 1] - x[0];
  size_t filled = 0, i = 0;
  for (size_t b = 0; b < nb; b++) {
    double sx = 0, sy = 0, sz = 0;
    size_t j = i;
    while (j < n && (b + 1 == nb || (x[j] - x0) * (double)nb < span * (double)(b + 1))) {
      sx += x[j];
      sy += y[j];
      sz += z[j];
      j++;
    }
    if (j > i) {
      bx[filled] = sx / (double)(j - i);
      by[filled] = sy / (double)(j - i);
      bz[filled] = sz / (double)(j - i);
      filled++;
    }
    i = j;
  }
  return filled;
}

/* The levels-off fit of n points (x non-decreasing; t the samples' times or NULL) into a->rise,
 * a->last_half and a->level_*: the knot among the points of the first half of x whose broken line
 * y = c + b min(x, knot) leaves the least squared error, and the rise and last half fitted on the
 * points or on the means of blocks of them (analyze.h). Returns whether the shape holds. */
static int levels_off(vl_analysis_t *a, const double *x, const double *y, const double *t, size_t n,
                      const char *on) {
  const vl_analyze_opts_t *o = &a->opts;
  double x0 = x[0], x1 = x[n - 1], mid = (x0 + x1) / 2;
  size_t h = 0;
  while (h < n && x[h] < mid)
    h++;
  if (h < 3 || n - h < 3)
    return 0;
  double sy = 0, syy = 0;
  for (size_t i = 0; i < n; i++) {
    sy += y[i];
    syy += y[i] * y[i];
  }
  double nd = (double)n, cyy = syy - sy * sy / nd, best = INFINITY;
  size_t lo = 2, cands = h - lo + 1, tries = VL_MIN(cands, (size_t)VL_ANALYZE_LEVEL_KNOTS), k = 0;
  for (size_t c = 0; c < tries; c++) {
    size_t kc = lo + (size_t)((uint64_t)c * cands / tries);
    double xk = x[kc], sz = 0, szz = 0, szy = 0;
    for (size_t i = 0; i < n; i++) {
      double z = fmin(x[i], xk);
      sz += z;
      szz += z * z;
      szy += z * y[i];
    }
    double czz = szz - sz * sz / nd, czy = szy - sz * sy / nd;
    if (!(czz > 0))
      continue;
    double sse = cyy - czy * czy / czz;
    if (sse < best) {
      best = sse;
      k = kc;
    }
  }
  if (!isfinite(best))
    return 0;
  double *z = vl_xmalloc(n * sizeof(double));
  for (size_t i = 0; i < n; i++)
    z[i] = fmin(x[i], x[k]);
  const double *fx = x, *fy = y, *fz = z;
  size_t fn = n, fh = h, nb = VL_ANALYZE_LEVEL_BLOCKS;
  double *blocks = NULL;
  a->level_blocks = 0;
  if (n > 3 * nb) {
    blocks = vl_xmalloc(3 * nb * sizeof(double));
    fn = block_means(x, y, z, n, nb, blocks, blocks + nb, blocks + 2 * nb);
    fx = blocks;
    fy = blocks + nb;
    fz = blocks + 2 * nb;
    for (fh = 0; fh < fn && fx[fh] < mid;)
      fh++;
    a->level_blocks = fn;
  }
  a->level_on = on;
  a->level_x = x[k];
  a->level_t_ms = t ? t[k] : NAN;
  int fitted = fh >= 3 && fn - fh >= 3;
  if (fitted) {
    vl_analyze_ols(fx + fh, fy + fh, fn - fh, o->level, o->autocorr, &a->last_half);
    vl_analyze_ols(fx, fy, fh, o->level, o->autocorr, &a->first_half);
    vl_analyze_ols(fz, fy, fn, o->level, o->autocorr, &a->rise);
  }
  free(z);
  free(blocks);
  if (!fitted)
    return 0;
  a->level_y = a->rise.intercept + a->rise.slope * x[k];
  a->level_rise = a->rise.slope * (x[k] - x0);
  scale_fit(&a->rise, 1000);
  scale_fit(&a->last_half, 1000);
  scale_fit(&a->first_half, 1000);
  const vl_fit_t *r = &a->rise, *l = &a->last_half;
  /* The rise is material by how much it adds, not by its slope: over a short stretch a few
   * samples of noise make any slope. */
  int rises = r->lo > 0 && a->level_rise > 0 && a->level_rise >= a->threshold && !too_few(r, o);
  /* The last half may still climb, slowly: by at most a tenth of the rise's slope, significantly
   * less than it, and not by T over the run. */
  int stops = l->hi < r->slope && !(l->slope > VL_ANALYZE_LEVEL_TAIL_FRAC * r->slope) &&
              !(l->lo > 0 && l->slope * (x1 - x0) / 1000 >= a->threshold);
  a->level_creeps = l->lo > 0 && material(a, l->slope, x1 - x[h]);
  return rises && stops;
}

/* P(X >= k) for X ~ Binomial(m, 1/2): how often a series with no direction rises at k or more of
 * m steps. */
static double sign_p(size_t k, size_t m) {
  double p = 0, lm = lgamma((double)m + 1) - (double)m * log(2);
  for (size_t j = k; j <= m; j++)
    p += exp(lm - lgamma((double)j + 1) - lgamma((double)(m - j) + 1));
  return fmin(p, 1);
}

/* a->steps, a->steps_up and a->steps_p over the n points of y (analyze.h). */
static void count_steps(vl_analysis_t *a, const double *y, size_t n) {
  a->steps = a->steps_up = 0;
  a->steps_p = NAN;
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    lo = fmin(lo, y[i]);
    hi = fmax(hi, y[i]);
  }
  a->basis_range = n ? hi - lo : NAN;
  if (n < 9)
    return;
  double worst = 0;
  for (size_t q = 0; q < 4; q++) {
    size_t up = 0, moved = 0;
    for (size_t i = q * (n - 1) / 4; i < (q + 1) * (n - 1) / 4; i++) {
      moved += y[i + 1] != y[i];
      up += y[i + 1] > y[i];
    }
    a->steps += moved;
    a->steps_up += up;
    worst = fmax(worst, sign_p(up, moved));
  }
  a->steps_p = worst;
}

/* The verdict for a high-water mark: its peak, no slope. */
static void set_peak(vl_analysis_t *a) {
  char at[64];
  when(a, a->peak_t_ms, at, sizeof(at));
  a->verdict = VL_VERDICT_PEAK;
  snprintf(a->reason, sizeof(a->reason),
           "a high-water mark only rises, so its slope tells no leak from a cache: peak %.6g %s, "
           "first reached at %.0f %s%s, %+.4g %s over the analysed run; judge the resident set",
           a->y_max, a->unit, a->peak_x, a->x_name, at, a->y_last - a->y_first, a->unit);
}

/* Appends to a growth's reason that it slows, when the last half of the run climbs significantly
 * slower than the first (the halves' intervals apart), both fitted as the levels-off fit is. */
static void add_slowing(vl_analysis_t *a) {
  size_t len = strlen(a->reason);
  const vl_fit_t *f = &a->first_half, *l = &a->last_half;
  if (!isfinite(a->level_y) || !(l->hi < f->lo) || len >= sizeof(a->reason))
    return;
  snprintf(a->reason + len, sizeof(a->reason) - len,
           "; it slows: %+.4g per 1000 over the first half (CI %+.4g to %+.4g), %+.4g (CI %+.4g "
           "to %+.4g) over the last",
           f->slope, f->lo, f->hi, l->slope, l->lo, l->hi);
}

static void set_verdict(vl_analysis_t *a) {
  const char *u = a->unit, *xn = a->x_name;
  double pct = a->opts.level * 100;
  double span = a->x_last - a->x_first;
  const vl_fit_t *basis = a->n_windows >= 3 && !isnan(a->floor.slope) ? &a->floor : &a->ols;
  a->basis = basis == &a->floor ? "floor" : "overall";
  const char *what = basis == &a->floor ? "post-flush floor" : "overall";
  const char *whose = basis == &a->floor ? "post-flush floor" : "memory"; /* what moves */
  a->growth = basis->slope * span / 1000;
  if (a->level_on && a->verdict == VL_VERDICT_LEVELS_OFF) {
    char at[64];
    when(a, a->level_t_ms, at, sizeof(at));
    snprintf(a->reason, sizeof(a->reason),
             "the %s rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g), %+.4g %s, then levels "
             "off at about %.0f %s%s: the last half moves %+.4g per 1000 (CI %+.4g to %+.4g)",
             strcmp(a->level_on, "floor") == 0 ? "post-flush floor" : "memory", a->rise.slope, u,
             xn, pct, a->rise.lo, a->rise.hi, a->level_rise, u, a->level_x, xn, at,
             a->last_half.slope, a->last_half.lo, a->last_half.hi);
    size_t len = strlen(a->reason);
    if (a->level_blocks && len < sizeof(a->reason))
      snprintf(a->reason + len, sizeof(a->reason) - len, " (fitted on the means of %zu blocks)",
               a->level_blocks);
    len = strlen(a->reason);
    if (a->level_creeps && len < sizeof(a->reason))
      snprintf(a->reason + len, sizeof(a->reason) - len,
               "; it still creeps by a material slope: a slow leak or a cache still filling, "
               "which a longer run tells apart");
    return;
  }
  /* Too few effective samples about a line, but a rise in every quarter of the run that a series
   * without direction would make rarely: growth, though not at one constant slope. */
  if (too_few(basis, &a->opts) && a->steps_p <= 1 - a->opts.level && basis->lo > 0 &&
      material(a, basis->slope, span)) {
    a->verdict = VL_VERDICT_GROWS;
    snprintf(a->reason, sizeof(a->reason),
             "the %s rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g): %+.4g %s over the run; "
             "not at one slope (%.1f effective samples of %zu about the line), but at %zu of its "
             "%zu steps that moved, and in each quarter of the run (sign test, p <= %.2g)",
             whose, basis->slope, u, xn, pct, basis->lo, basis->hi, a->growth, u, basis->n_eff,
             basis->n, a->steps_up, a->steps, a->steps_p);
    add_slowing(a);
    return;
  }
  /* Too few effective samples, but a series that never moved by as much as counts: whatever its
   * line, no material growth fits between its smallest and largest value. */
  if (too_few(basis, &a->opts) && a->basis_range < a->threshold &&
      !(a->opts.min_slope > 0 && a->basis_range * 1000 / span >= a->opts.min_slope)) {
    a->verdict = VL_VERDICT_FLAT;
    snprintf(a->reason, sizeof(a->reason),
             "no material growth: the %s moved %.4g %s in all, smallest to largest, over %.0f %s, "
             "less than the %.4g %s that counts; its slope %+.4g %s per 1000 %s rests on %.1f "
             "effective samples of %zu",
             whose, a->basis_range, u, span, xn, a->threshold, u, basis->slope, u, xn, basis->n_eff,
             basis->n);
    return;
  }
  if (too_few(basis, &a->opts)) {
    a->verdict = VL_VERDICT_INCONCLUSIVE;
    snprintf(a->reason, sizeof(a->reason),
             "%.1f effective samples of %zu (lag-1 autocorrelation %.2f); need %g: the %s slope "
             "%+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g) can show "
             "neither growth nor its absence; run longer, or flush more often",
             basis->n_eff, basis->n, basis->r1, a->opts.min_eff, what, basis->slope, u, xn, pct,
             basis->lo, basis->hi);
    return;
  }
  if (basis->lo > 0 && material(a, basis->slope, span)) {
    a->verdict = VL_VERDICT_GROWS;
    if (basis == &a->floor)
      snprintf(a->reason, sizeof(a->reason),
               "the post-flush floor rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g) over %zu "
               "windows: %+.4g %s over the run",
               basis->slope, u, xn, pct, basis->lo, basis->hi, a->n_windows, a->growth, u);
    else
      snprintf(a->reason, sizeof(a->reason),
               "memory rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g): %+.4g %s over the run; "
               "with %zu post-flush windows (3 needed) a cache that fills cannot be told apart",
               basis->slope, u, xn, pct, basis->lo, basis->hi, a->growth, u, a->n_windows);
    add_slowing(a);
    return;
  }
  /* Neither flat nor a sawtooth that returns may be said while the interval admits growth of T
   * over the run (the slope rule alone would ask a short run for a needlessly tight interval). */
  if (basis->hi * span / 1000 > 0 && basis->hi * span / 1000 >= a->threshold) {
    a->verdict = VL_VERDICT_INCONCLUSIVE;
    snprintf(a->reason, sizeof(a->reason),
             "the %s slope is %+.4g %s per 1000 %s, but its %g%% CI (%+.4g to %+.4g) admits "
             "material growth (up to %+.4g %s over the run; %.4g counts): run longer",
             what, basis->slope, u, xn, pct, basis->lo, basis->hi, basis->hi * span / 1000, u,
             a->threshold);
    return;
  }
  if (a->n_flushes >= 1 && a->within.lo > 0 && material(a, a->within.slope, a->window_span)) {
    a->verdict = VL_VERDICT_SAWTOOTH;
    snprintf(a->reason, sizeof(a->reason),
             "memory climbs %+.4g %s per 1000 %s between flushes (%+.4g %s per window) and "
             "returns: the %s slope is %+.4g (%g%% CI %+.4g to %+.4g), %+.4g %s over the run",
             a->within.slope, u, xn, a->rise_mean, u, what, basis->slope, pct, basis->lo, basis->hi,
             a->growth, u);
    return;
  }
  a->verdict = VL_VERDICT_FLAT;
  snprintf(a->reason, sizeof(a->reason),
           "no material growth: the %s slope is %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g), "
           "%+.4g %s over the run",
           what, basis->slope, u, xn, pct, basis->lo, basis->hi, a->growth, u);
}

/* The attribution fit (vl_attribution_t) of y on up to three columns (NULL: not recorded), over
 * the n samples where every recorded column has a value. The columns' slopes are scaled by
 * scale[] (per 1000 images, per 1000 requests, per megapixel). */
#define ATTR_TERMS 3
static void attribute(vl_attribution_t *at, const double *const col[ATTR_TERMS], const double *y,
                      size_t n, const vl_analyze_opts_t *o) {
  static const double scale[ATTR_TERMS] = {1000, 1000, 1};
  vl_attr_term_t *term[ATTR_TERMS] = {&at->images, &at->text, &at->mpix};
  for (int j = 0; j < ATTR_TERMS; j++) {
    *term[j] = (vl_attr_term_t){NAN, NAN, NAN, col[j] ? NULL : "not recorded"};
  }
  at->r1 = at->n_eff = at->mean_mp = NAN;
  at->tried = col[0] || col[1] || col[2];
  if (!at->tried)
    return;
  /* The samples with every recorded column. */
  double *z[ATTR_TERMS] = {0}, *yc = vl_xmalloc((n + 1) * sizeof(double));
  for (int j = 0; j < ATTR_TERMS; j++)
    if (col[j])
      z[j] = vl_xmalloc((n + 1) * sizeof(double));
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int ok = isfinite(y[i]);
    for (int j = 0; j < ATTR_TERMS && ok; j++)
      ok = !col[j] || isfinite(col[j][i]);
    if (!ok)
      continue;
    yc[m] = y[i];
    for (int j = 0; j < ATTR_TERMS; j++)
      if (col[j])
        z[j][m] = col[j][i];
    m++;
  }
  at->n = m;
  double mean[ATTR_TERMS] = {0}, sd[ATTR_TERMS] = {0}, ym = 0;
  int keep[ATTR_TERMS], p = 0;
  if (m < o->min_points) {
    at->why = "too few samples with every regressor";
    goto out;
  }
  for (size_t i = 0; i < m; i++)
    ym += yc[i] / (double)m;
  for (size_t i = 0; i < m; i++)
    yc[i] -= ym;
  /* Running totals of images and of their megapixels rise together (megapixels is about images
   * times the mean image size), so the megapixels term is taken as what the pixels add beyond an
   * image of the mean size: the images term is then memory per image of that size, and both stay
   * apart. */
  at->mean_mp = NAN;
  if (z[0] && z[2] && z[0][m - 1] > z[0][0]) {
    at->mean_mp = (z[2][m - 1] - z[2][0]) / (z[0][m - 1] - z[0][0]);
    for (size_t i = 0; i < m; i++)
      z[2][i] -= at->mean_mp * z[0][i];
  }
  /* Centred and scaled to unit variance; a constant column is left out. */
  for (int j = 0; j < ATTR_TERMS; j++) {
    if (!z[j])
      continue;
    for (size_t i = 0; i < m; i++)
      mean[j] += z[j][i] / (double)m;
    for (size_t i = 0; i < m; i++)
      sd[j] += (z[j][i] - mean[j]) * (z[j][i] - mean[j]);
    sd[j] = sqrt(sd[j] / (double)m);
    if (!(sd[j] > 1e-9 * fmax(1, fabs(mean[j])))) {
      term[j]->dropped = "constant";
      continue;
    }
    for (size_t i = 0; i < m; i++)
      z[j][i] = (z[j][i] - mean[j]) / sd[j];
  }
  /* Cholesky of the columns' correlations, one column at a time: a pivot below 1e-6 is a column
   * the kept ones explain (collinear), left out. */
  double L[ATTR_TERMS][ATTR_TERMS] = {{0}};
  for (int j = 0; j < ATTR_TERMS; j++) {
    if (!z[j] || term[j]->dropped)
      continue;
    double gj[ATTR_TERMS];
    for (int a = 0; a < p; a++) {
      double s = 0;
      for (size_t i = 0; i < m; i++)
        s += z[keep[a]][i] * z[j][i];
      gj[a] = s / (double)m;
    }
    double row[ATTR_TERMS], d = 1;
    for (int a = 0; a < p; a++) {
      double s = gj[a];
      for (int b = 0; b < a; b++)
        s -= L[a][b] * row[b];
      row[a] = s / L[a][a];
      d -= row[a] * row[a];
    }
    if (!(d > 1e-6)) {
      term[j]->dropped = "collinear with the other terms";
      continue;
    }
    for (int a = 0; a < p; a++)
      L[p][a] = row[a];
    L[p][p] = sqrt(d);
    keep[p++] = j;
  }
  if (p == 0) {
    at->why = "no regressor varies";
    goto out;
  }
  /* Solve (Z'Z / m) beta = Z'y / m, and the diagonal of the inverse for the intervals. */
  double b[ATTR_TERMS], beta[ATTR_TERMS], w[ATTR_TERMS], inv[ATTR_TERMS];
  for (int a = 0; a < p; a++) {
    double s = 0;
    for (size_t i = 0; i < m; i++)
      s += z[keep[a]][i] * yc[i];
    b[a] = s / (double)m;
  }
  for (int a = 0; a < p; a++) { /* L w = b */
    double s = b[a];
    for (int c = 0; c < a; c++)
      s -= L[a][c] * w[c];
    w[a] = s / L[a][a];
  }
  for (int a = p - 1; a >= 0; a--) { /* L' beta = w */
    double s = w[a];
    for (int c = a + 1; c < p; c++)
      s -= L[c][a] * beta[c];
    beta[a] = s / L[a][a];
  }
  for (int e = 0; e < p; e++) { /* column e of the inverse: its e-th entry */
    double u[ATTR_TERMS], v[ATTR_TERMS];
    for (int a = 0; a < p; a++) {
      double s = a == e ? 1 : 0;
      for (int c = 0; c < a; c++)
        s -= L[a][c] * u[c];
      u[a] = s / L[a][a];
    }
    for (int a = p - 1; a >= 0; a--) {
      double s = u[a];
      for (int c = a + 1; c < p; c++)
        s -= L[c][a] * v[c];
      v[a] = s / L[a][a];
    }
    inv[e] = v[e];
  }
  double *res = vl_xmalloc(m * sizeof(double)), sse = 0;
  for (size_t i = 0; i < m; i++) {
    double f = 0;
    for (int a = 0; a < p; a++)
      f += beta[a] * z[keep[a]][i];
    res[i] = yc[i] - f;
    sse += res[i] * res[i];
  }
  at->r1 = lag1(res, NULL, m);
  free(res);
  at->n_eff = effective_n((double)m, at->r1, o->autocorr);
  double df = at->n_eff - p - 1;
  double q = df > 0 ? vl_dist_tquantile(0.5 + o->level / 2, df) : INFINITY;
  for (int a = 0; a < p; a++) {
    int j = keep[a];
    double k = scale[j] / sd[j];
    double se = df > 0 ? sqrt(sse / df / (double)m * inv[a]) : INFINITY;
    term[j]->value = beta[a] * k;
    term[j]->lo = df > 0 ? (beta[a] - q * se) * k : -INFINITY;
    term[j]->hi = df > 0 ? (beta[a] + q * se) * k : INFINITY;
  }
out:
  for (int j = 0; j < ATTR_TERMS; j++)
    free(z[j]);
  free(yc);
}

int vl_analyze_series(vl_analysis_t *a, const vl_series_t *s, const vl_analyze_opts_t *opts) {
  memset(a, 0, sizeof(*a));
  if (!s || !s->name || (s->n && (!s->x || !s->y)) || !opts || !(opts->level > 0) ||
      !(opts->level < 1) || opts->min_points < 3 || !(opts->min_growth_frac >= 0) ||
      !(opts->min_slope >= 0))
    return VL_EINVAL;
  a->opts = *opts;
  a->name = vl_xstrdup(s->name);
  a->unit = dup_or(s->unit, "MB");
  a->x_name = dup_or(s->x_name, "requests");
  a->x2_name = s->x2 ? dup_or(s->x2_name, "images") : NULL;
  a->x_first = a->x_last = a->y_mean = a->y_min = a->y_max = a->y_first = a->y_last = NAN;
  a->rise_mean = a->window_span = a->growth = a->threshold = NAN;
  a->peak_x = a->peak_t_ms = a->level_x = a->level_t_ms = a->level_y = a->level_rise = NAN;
  a->steps_p = a->basis_range = NAN;
  a->t0_ms = s->t0_ms > 0 ? s->t0_ms : 0;
  a->basis = "overall";
  fit_clear(&a->rise, 0);
  fit_clear(&a->last_half, 0);
  fit_clear(&a->first_half, 0);
  fit_clear(&a->ols, 0);
  fit_clear(&a->ts, 0);
  fit_clear(&a->ols2, 0);
  fit_clear(&a->ts2, 0);
  fit_clear(&a->floor, 0);
  fit_clear(&a->floor2, 0);
  fit_clear(&a->within, 0);

  /* The samples after the warm-up. */
  size_t n = s->n;
  double *X = vl_xmalloc(n * sizeof(double)), *Y = vl_xmalloc(n * sizeof(double));
  double *X2 = vl_xmalloc(n * sizeof(double)), *T = vl_xmalloc(n * sizeof(double));
  double *R[ATTR_TERMS];
  const double *rsrc[ATTR_TERMS] = {s->images, s->text_only, s->megapixels};
  for (int j = 0; j < ATTR_TERMS; j++)
    R[j] = rsrc[j] ? vl_xmalloc((n + 1) * sizeof(double)) : NULL;
  int *seg = vl_xmalloc(n * sizeof(int));
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
    for (int j = 0; j < ATTR_TERMS; j++)
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
    a->threshold = opts->min_growth_frac * fabs(a->y_mean);
  }
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
  if (m < opts->min_points) {
    a->verdict = VL_VERDICT_INSUFFICIENT;
    snprintf(a->reason, sizeof(a->reason), "%zu sample%s after the warm-up; at least %zu needed", m,
             m == 1 ? "" : "s", opts->min_points);
    goto done;
  }
  if (s->peak && m) {
    set_peak(a);
    goto done;
  }
  if (!(a->x_last > a->x_first)) {
    a->verdict = VL_VERDICT_INSUFFICIENT;
    snprintf(a->reason, sizeof(a->reason), "%s does not advance after the warm-up", a->x_name);
    goto done;
  }

  vl_analyze_ols(X, Y, m, opts->level, opts->autocorr, &a->ols);
  vl_analyze_theil_sen(X, Y, m, opts->level, opts->autocorr, opts->ts_max_points, &a->ts);
  scale_fit(&a->ols, 1000);
  scale_fit(&a->ts, 1000);
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
      scale_fit(&a->ols2, 1000);
      scale_fit(&a->ts2, 1000);
    }
    free(x2v);
    free(y2v);
  }
  attribute(&a->attr, (const double *const *)R, Y, m, opts);

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
    scale_fit(&a->floor, 1000);
    if (s->x2 && n2 == a->n_windows) {
      vl_analyze_ols(fx2, fy, n2, opts->level, opts->autocorr, &a->floor2);
      scale_fit(&a->floor2, 1000);
    }
    free(fx);
    free(fx2);
    free(fy);
  }
  within_fit(X, Y, seg, m, opts, &a->within, &a->window_span);
  scale_fit(&a->within, 1000);
  a->rise_mean = a->within.slope * a->window_span / 1000;
  /* Levels-off: on the samples when no flush cuts them into windows, else on the floors. */
  int level = 0;
  if (a->n_flushes == 0) {
    level = levels_off(a, X, Y, T, m, "samples");
  } else if (a->n_windows >= VL_ANALYZE_LEVEL_MIN_WINDOWS) {
    double *fx = vl_xmalloc(a->n_windows * sizeof(double));
    double *fy = vl_xmalloc(a->n_windows * sizeof(double));
    double *ft = vl_xmalloc(a->n_windows * sizeof(double));
    for (size_t w = 0; w < a->n_windows; w++) {
      fx[w] = a->windows[w].x;
      fy[w] = a->windows[w].floor;
      ft[w] = a->windows[w].t_ms;
    }
    level = levels_off(a, fx, fy, ft, a->n_windows, "floor");
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
    count_steps(a, fy, a->n_windows);
    free(fy);
  } else {
    count_steps(a, Y, m);
  }
  set_verdict(a);

done:
  free(X);
  free(Y);
  free(X2);
  free(T);
  for (int j = 0; j < ATTR_TERMS; j++)
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

/* ---- output -----------------------------------------------------------------------------------
 */

static void add_num(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

static cJSON *fit_json(const vl_fit_t *f, int with_r2) {
  cJSON *o = cJSON_CreateObject();
  add_num(o, "slope_per_1000", f->slope);
  cJSON *ci = cJSON_AddArrayToObject(o, "ci");
  cJSON_AddItemToArray(ci, isfinite(f->lo) ? cJSON_CreateNumber(f->lo) : cJSON_CreateNull());
  cJSON_AddItemToArray(ci, isfinite(f->hi) ? cJSON_CreateNumber(f->hi) : cJSON_CreateNull());
  add_num(o, "intercept", f->intercept);
  if (with_r2)
    add_num(o, "r2", f->r2);
  add_num(o, "lag1_autocorr", f->r1);
  add_num(o, "n_eff", f->n_eff);
  cJSON_AddNumberToObject(o, "n", (double)f->n);
  return o;
}

static cJSON *term_json(const vl_attr_term_t *t) {
  cJSON *o = cJSON_CreateObject();
  add_num(o, "value", t->value);
  cJSON *ci = cJSON_AddArrayToObject(o, "ci");
  cJSON_AddItemToArray(ci, isfinite(t->lo) ? cJSON_CreateNumber(t->lo) : cJSON_CreateNull());
  cJSON_AddItemToArray(ci, isfinite(t->hi) ? cJSON_CreateNumber(t->hi) : cJSON_CreateNull());
  if (t->dropped)
    cJSON_AddStringToObject(o, "dropped", t->dropped);
  else
    cJSON_AddNullToObject(o, "dropped");
  return o;
}

/* The attribution's object, or null when the series had no regressor or no fit was tried. */
static cJSON *attribution_json(const vl_attribution_t *at) {
  if (!at->tried)
    return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "per_1000_images_mb", term_json(&at->images));
  cJSON_AddItemToObject(o, "per_1000_text_requests_mb", term_json(&at->text));
  cJSON_AddItemToObject(o, "per_megapixel_mb", term_json(&at->mpix));
  cJSON_AddNumberToObject(o, "n", (double)at->n);
  add_num(o, "n_eff", at->n_eff);
  add_num(o, "lag1_autocorr", at->r1);
  add_num(o, "mean_image_megapixels", at->mean_mp);
  if (at->why)
    cJSON_AddStringToObject(o, "why_not", at->why);
  return o;
}

cJSON *vl_analyze_json(const vl_analysis_t *a) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "series", a->name);
  cJSON_AddStringToObject(o, "unit", a->unit);
  cJSON_AddStringToObject(o, "x", a->x_name);
  cJSON_AddStringToObject(o, "verdict", vl_analyze_verdict_name(a->verdict));
  cJSON_AddStringToObject(o, "reason", a->reason);
  cJSON_AddNumberToObject(o, "n", (double)a->n);
  add_num(o, "x_first", a->x_first);
  add_num(o, "x_last", a->x_last);
  add_num(o, "mean", a->y_mean);
  add_num(o, "min", a->y_min);
  add_num(o, "max", a->y_max);
  add_num(o, "first", a->y_first);
  add_num(o, "last", a->y_last);
  cJSON_AddItemToObject(o, "ols", fit_json(&a->ols, 1));
  cJSON_AddItemToObject(o, "theil_sen", fit_json(&a->ts, 0));
  if (a->x2_name) {
    cJSON *o2 = cJSON_AddObjectToObject(o, "second_axis");
    cJSON_AddStringToObject(o2, "x", a->x2_name);
    cJSON_AddItemToObject(o2, "ols", fit_json(&a->ols2, 1));
    cJSON_AddItemToObject(o2, "theil_sen", fit_json(&a->ts2, 0));
    cJSON *f2 = cJSON_AddObjectToObject(o2, "floor");
    cJSON_AddItemToObject(f2, "fit", fit_json(&a->floor2, 1));
  }
  cJSON *fl = cJSON_AddObjectToObject(o, "floor");
  cJSON_AddNumberToObject(fl, "flushes", (double)a->n_flushes);
  cJSON *ws = cJSON_AddArrayToObject(fl, "windows");
  for (size_t i = 0; i < a->n_windows; i++) {
    const vl_window_t *w = &a->windows[i];
    cJSON *wj = cJSON_CreateObject();
    add_num(wj, "x", w->x);
    if (a->x2_name)
      add_num(wj, "x2", w->x2);
    add_num(wj, "wall_ms", w->t_ms);
    add_num(wj, "floor", w->floor);
    add_num(wj, "x_at_floor", w->x_min);
    add_num(wj, "rise", w->rise);
    cJSON_AddNumberToObject(wj, "n", (double)w->n);
    cJSON_AddItemToArray(ws, wj);
  }
  cJSON_AddItemToObject(fl, "fit", fit_json(&a->floor, 1));
  cJSON *wi = cJSON_AddObjectToObject(o, "within_windows");
  cJSON_AddItemToObject(wi, "fit", fit_json(&a->within, 0));
  add_num(wi, "mean_span", a->window_span);
  add_num(wi, "mean_rise", a->rise_mean);
  cJSON *pk = cJSON_AddObjectToObject(o, "peak");
  add_num(pk, "value", a->y_max);
  add_num(pk, "x", a->peak_x);
  add_num(pk, "wall_ms", a->peak_t_ms);
  if (a->level_on) {
    cJSON *lv = cJSON_AddObjectToObject(o, "levels_off");
    cJSON_AddStringToObject(lv, "on", a->level_on);
    add_num(lv, "x", a->level_x);
    add_num(lv, "wall_ms", a->level_t_ms);
    add_num(lv, "s_into_run",
            a->t0_ms > 0 && isfinite(a->level_t_ms) ? (a->level_t_ms - a->t0_ms) / 1000 : NAN);
    add_num(lv, "level", a->level_y);
    add_num(lv, "rise", a->level_rise);
    cJSON_AddNumberToObject(lv, "blocks", (double)a->level_blocks);
    cJSON_AddBoolToObject(lv, "creeps", a->verdict == VL_VERDICT_LEVELS_OFF && a->level_creeps);
    cJSON_AddItemToObject(lv, "rise_fit", fit_json(&a->rise, 1));
    cJSON_AddItemToObject(lv, "first_half_fit", fit_json(&a->first_half, 1));
    cJSON_AddItemToObject(lv, "last_half_fit", fit_json(&a->last_half, 1));
  }
  cJSON_AddItemToObject(o, "attribution", attribution_json(&a->attr));
  cJSON *st = cJSON_AddObjectToObject(o, "steps");
  cJSON_AddNumberToObject(st, "moved", (double)a->steps);
  cJSON_AddNumberToObject(st, "rose", (double)a->steps_up);
  add_num(st, "quarter_p_max", a->steps_p);
  add_num(o, "basis_range", a->basis_range);
  cJSON_AddStringToObject(o, "basis", a->basis);
  add_num(o, "growth", a->growth);
  cJSON *th = cJSON_AddObjectToObject(o, "thresholds");
  cJSON_AddNumberToObject(th, "level", a->opts.level);
  cJSON_AddNumberToObject(th, "min_growth_frac", a->opts.min_growth_frac);
  add_num(th, "min_growth", a->threshold);
  cJSON_AddNumberToObject(th, "min_slope_per_1000", a->opts.min_slope);
  cJSON_AddNumberToObject(th, "min_points", (double)a->opts.min_points);
  cJSON_AddNumberToObject(th, "min_effective_samples", a->opts.min_eff);
  cJSON_AddBoolToObject(th, "autocorr", a->opts.autocorr);
  return o;
}

static void print_fit(FILE *f, const char *label, const vl_fit_t *fit, const char *u,
                      const char *xn, double pct) {
  fprintf(f, "  %-16s %+10.4g %s/1000 %s", label, fit->slope, u, xn);
  if (!isnan(fit->lo))
    fprintf(f, "  %g%% CI [%+.4g, %+.4g]", pct, fit->lo, fit->hi);
  if (!isnan(fit->r2))
    fprintf(f, "  R2 %.3f", fit->r2);
  if (fit->n_eff < (double)fit->n)
    fprintf(f, "  (lag-1 autocorr %.2f, n_eff %.0f of %zu)", fit->r1, fit->n_eff, fit->n);
  fputc('\n', f);
}

static void print_attribution(FILE *f, const vl_attribution_t *at, const char *u, double pct) {
  if (!at->tried)
    return;
  if (at->why) {
    fprintf(f, "  attribution: none (%s)\n", at->why);
    return;
  }
  fprintf(f, "  attribution (images, text-only requests and megapixels fitted together");
  if (isfinite(at->mean_mp))
    fprintf(f, "; images of the mean size, %.3g MP, pixels beyond it per megapixel", at->mean_mp);
  fprintf(f, "):\n");
  const vl_attr_term_t *t[] = {&at->images, &at->text, &at->mpix};
  const char *label[] = {"per 1000 images", "per 1000 text-only", "per megapixel"};
  for (int j = 0; j < 3; j++) {
    if (t[j]->dropped) {
      fprintf(f, "    %-18s left out: %s\n", label[j], t[j]->dropped);
      continue;
    }
    fprintf(f, "    %-18s %+10.4g %s", label[j], t[j]->value, u);
    if (isfinite(t[j]->lo) || isfinite(t[j]->hi))
      fprintf(f, "  %g%% CI [%+.4g, %+.4g]", pct, t[j]->lo, t[j]->hi);
    fputc('\n', f);
  }
  if (at->n_eff < (double)at->n)
    fprintf(f, "    (lag-1 autocorr %.2f, n_eff %.0f of %zu)\n", at->r1, at->n_eff, at->n);
}

void vl_analyze_print(FILE *f, const vl_analysis_t *a) {
  double pct = a->opts.level * 100;
  const char *u = a->unit, *xn = a->x_name;
  fprintf(f, "%s: %s -- %s\n", a->name, vl_analyze_verdict_name(a->verdict), a->reason);
  if (a->n == 0)
    return;
  fprintf(f,
          "  %zu samples, %s %.0f..%.0f; %s mean %.6g, min %.6g, max %.6g, first %.6g, last %.6g\n",
          a->n, xn, a->x_first, a->x_last, u, a->y_mean, a->y_min, a->y_max, a->y_first, a->y_last);
  if (a->verdict == VL_VERDICT_INSUFFICIENT || a->verdict == VL_VERDICT_PEAK ||
      a->verdict == VL_VERDICT_NOT_MEMORY)
    return;
  print_fit(f, "OLS", &a->ols, u, xn, pct);
  print_fit(f, "Theil-Sen", &a->ts, u, xn, pct);
  if (a->x2_name && !isnan(a->ols2.slope))
    print_fit(f, "OLS", &a->ols2, u, a->x2_name, pct);
  if (a->x2_name && !isnan(a->ts2.slope))
    print_fit(f, "Theil-Sen", &a->ts2, u, a->x2_name, pct);
  if (a->n_windows >= 3) {
    print_fit(f, "post-flush floor", &a->floor, u, xn, pct);
    if (a->x2_name && !isnan(a->floor2.slope))
      print_fit(f, "post-flush floor", &a->floor2, u, a->x2_name, pct);
  } else {
    fprintf(f, "  post-flush floor: %zu window%s after the warm-up, 3 needed for a slope\n",
            a->n_windows, a->n_windows == 1 ? "" : "s");
  }
  if (!isnan(a->within.slope)) {
    print_fit(f, "within windows", &a->within, u, xn, pct);
    fprintf(f, "  %-16s %+10.4g %s per window of %.0f %s (%zu flushes)\n", "mean rise",
            a->rise_mean, u, a->window_span, xn, a->n_flushes);
  }
  if (a->level_on && a->verdict == VL_VERDICT_LEVELS_OFF) {
    print_fit(f, "rise to the knot", &a->rise, u, xn, pct);
    print_fit(f, "last half", &a->last_half, u, xn, pct);
    fprintf(f, "  %-16s %10.0f %s, level %.6g %s (%+.4g %s)\n", "levels off at", a->level_x, xn,
            a->level_y, u, a->level_rise, u);
  }
  if (a->steps)
    fprintf(f, "  %-16s %zu of %zu rose (%s); sign test in each quarter, p <= %.2g\n", "steps",
            a->steps_up, a->steps,
            a->basis && strcmp(a->basis, "floor") == 0 ? "floors" : "samples", a->steps_p);
  print_attribution(f, &a->attr, u, pct);
  fprintf(f,
          "  thresholds: material if growth over the run >= %g%% of the mean (%.4g %s) or slope "
          ">= %g %s/1000 %s; %g%% intervals%s; at least %g effective samples\n",
          a->opts.min_growth_frac * 100, a->threshold, u, a->opts.min_slope, u, xn, pct,
          a->opts.autocorr ? ", widened for autocorrelation" : "", a->opts.min_eff);
}

void vl_analyze_label(const vl_analysis_t *a, char *out, size_t n) {
  const char *u = a->unit ? a->unit : "MB", *xn = a->x_name ? a->x_name : "requests";
  const char *v = vl_analyze_verdict_name(a->verdict);
  int floor = a->basis && strcmp(a->basis, "floor") == 0;
  const vl_fit_t *b = floor ? &a->floor : &a->ols;
  switch (a->verdict) {
  case VL_VERDICT_PEAK:
    snprintf(out, n, "peak %.5g %s", a->y_max, u);
    break;
  case VL_VERDICT_NOT_MEMORY:
    snprintf(out, n, "not memory, %.5g to %.5g", a->y_first, a->y_last);
    break;
  case VL_VERDICT_LEVELS_OFF:
    if (a->level_creeps)
      snprintf(out, n, "levels-off at %.0f %s (%+.3g %s), creeps %+.2g %s/1k", a->level_x, xn,
               a->level_rise, u, a->last_half.slope, u);
    else
      snprintf(out, n, "levels-off at %.0f %s (%+.3g %s)", a->level_x, xn, a->level_rise, u);
    break;
  case VL_VERDICT_INCONCLUSIVE:
    if (too_few(b, &a->opts))
      snprintf(out, n, "inconclusive (%.1f effective samples)", b->n_eff);
    else
      snprintf(out, n, "inconclusive (%s%+.3g %s/1k %s, CI to %+.3g)", floor ? "floor " : "",
               b->slope, u, xn, b->hi);
    break;
  case VL_VERDICT_GROWS:
  case VL_VERDICT_FLAT:
    snprintf(out, n, "%s, %s%+.3g %s/1k %s", v, floor ? "floor " : "", b->slope, u, xn);
    break;
  case VL_VERDICT_SAWTOOTH:
    snprintf(out, n, "%s, %+.3g %s/1k %s between flushes, floor %+.3g", v, a->within.slope, u, xn,
             b->slope);
    break;
  default:
    snprintf(out, n, "%s", v);
  }
}
