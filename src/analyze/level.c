/* The levels-off fit: a broken line that rises to a knot and is flat after it, the knot chosen by
 * least squares, and the rise and the halves of the run fitted on the points or on the means of
 * blocks of them (analyze.h says why blocks). */
#include "internal.h"
#include "vlmload/common.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

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
int vl__analyze_level_fit(vl_analysis_t *a, const double *x, const double *y, const double *t,
                          size_t n, const char *on) {
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
  vl__analyze_fit_scale(&a->rise, 1000);
  vl__analyze_fit_scale(&a->last_half, 1000);
  vl__analyze_fit_scale(&a->first_half, 1000);
  const vl_fit_t *r = &a->rise, *l = &a->last_half;
  /* The rise is material by how much it adds, not by its slope: over a short stretch a few
   * samples of noise make any slope. */
  int rises = r->lo > 0 && a->level_rise > 0 && a->level_rise >= a->threshold &&
              !vl__analyze_fit_too_few(r, o);
  /* The last half may still climb, slowly: by at most a tenth of the rise's slope, significantly
   * less than it, and not by T over the run. */
  int stops = l->hi < r->slope && !(l->slope > VL_ANALYZE_LEVEL_TAIL_FRAC * r->slope) &&
              !(l->lo > 0 && l->slope * (x1 - x0) / 1000 >= a->threshold);
  a->level_creeps = l->lo > 0 && vl__analyze_verdict_material(a, l->slope, x1 - x[h]);
  return rises && stops;
}
