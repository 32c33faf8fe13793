/* The levels-off fit: a broken line that rises to a knot and is flat after it, the knot chosen by
 * least squares, and the rise and the halves of the run fitted on the points or on the means of
 * blocks of them (analyze.h says why blocks). */
#include "internal.h"
#include "vlmload/common.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* The means of x, y and z over nb blocks of equal x-span from x[0] to x[n - 1] (x non-decreasing)
 * into bx, by and bz, empty blocks left out, and each filled block's index (0 to nb - 1) into bi.
 * Returns how many were filled. */
static size_t block_means(const double *x, const double *y, const double *z, size_t n, size_t nb,
                          double *bx, double *by, double *bz, size_t *bi) {
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
      bi[filled] = b;
      filled++;
    }
    i = j;
  }
  return filled;
}

/* The block (as block_means counts them) that x falls in. */
static size_t block_of(double x, double x0, double span, size_t nb) {
  double b = floor((x - x0) * (double)nb / span);
  return b < 0 ? 0 : b >= (double)nb ? nb - 1 : (size_t)b;
}

/* The levels-off fit of n points (x non-decreasing; t the samples' times or NULL) into a->rise,
 * a->tail, a->first_half, a->last_half and a->level_*: the knot, among the points from the third
 * to the last that leaves VL_ANALYZE_LEVEL_TAIL_MIN of the x-span after it, whose broken line
 * y = c + b min(x, knot) leaves the least squared error; the rise, the tail and the halves fitted
 * on the points or on the means of blocks of them (analyze.h). Returns whether it levels off;
 * a->level_grows says when it rose, stopped rising as fast, and grows on after the knot. */
int vl__analyze_level_fit(vl_analysis_t *a, const double *x, const double *y, const double *t,
                          size_t n, const char *on) {
  const vl_analyze_opts_t *o = &a->opts;
  double x0 = x[0], x1 = x[n - 1], mid = (x0 + x1) / 2, span = x1 - x0;
  size_t h = 0;
  while (h < n && x[h] < mid)
    h++;
  if (h < 3 || n - h < 3)
    return 0;
  /* The last knot tried: the tail after it spans enough of x and holds at least 3 points. */
  size_t last = n - 3;
  while (last > h && x[last] > x1 - VL_ANALYZE_LEVEL_TAIL_MIN * span)
    last--;
  double sy = 0, syy = 0;
  for (size_t i = 0; i < n; i++) {
    sy += y[i];
    syy += y[i] * y[i];
  }
  double nd = (double)n, cyy = syy - sy * sy / nd, best = INFINITY;
  size_t lo = 2, cands = last - lo + 1, k = 0;
  size_t tries = VL_MIN(cands, (size_t)VL_ANALYZE_LEVEL_KNOTS);
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
  /* The tail: the last half while the knot is in the first, else what follows the knot. */
  int late = k > h;
  size_t ts = late ? k : h;
  const double *fx = x, *fy = y, *fz = z;
  size_t fn = n, fh = h, ft = ts, nb = VL_ANALYZE_LEVEL_BLOCKS;
  double *blocks = NULL;
  size_t bi[VL_ANALYZE_LEVEL_BLOCKS];
  a->level_blocks = 0;
  if (n > 3 * nb) {
    blocks = vl_xmalloc(3 * nb * sizeof(double));
    fn = block_means(x, y, z, n, nb, blocks, blocks + nb, blocks + 2 * nb, bi);
    fx = blocks;
    fy = blocks + nb;
    fz = blocks + 2 * nb;
    for (fh = 0; fh < fn && fx[fh] < mid;)
      fh++;
    /* A late knot's tail starts with the block after the knot's, whose mean holds no rise. */
    size_t kb = block_of(x[k], x0, span, nb);
    for (ft = fh; late && ft < fn && bi[ft] <= kb;)
      ft++;
    a->level_blocks = fn;
  }
  a->level_on = on;
  a->level_x = x[k];
  a->level_t_ms = t ? t[k] : NAN;
  a->tail_x = late ? x[k] : mid;
  int fitted = fh >= 3 && fn - fh >= 3 && fn - ft >= 3;
  if (fitted) {
    vl_analyze_ols(fx + ft, fy + ft, fn - ft, o->level, o->autocorr, &a->tail);
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
  vl__analyze_fit_scale(&a->tail, 1000);
  vl__analyze_fit_scale(&a->last_half, 1000);
  vl__analyze_fit_scale(&a->first_half, 1000);
  const vl_fit_t *r = &a->rise, *l = &a->tail;
  double after = x1 - a->tail_x; /* the tail's x-span */
  /* The rise is material by how much it adds, not by its slope: over a short stretch a few
   * samples of noise make any slope. */
  int rises = r->lo > 0 && a->level_rise > 0 && a->level_rise >= a->threshold &&
              !vl__analyze_fit_too_few(r, o);
  /* It stops: the tail climbs by at most a tenth of the rise's slope, significantly less than it.
   */
  int slows = l->hi < r->slope && !(l->slope > VL_ANALYZE_LEVEL_TAIL_FRAC * r->slope);
  /* What it grew after that, judged as any growth is: significant and by T over the tail. */
  a->level_grows = rises && slows && l->lo > 0 && l->slope * after / 1000 >= a->threshold &&
                   !vl__analyze_fit_too_few(l, o);
  a->level_creeps = l->lo > 0 && vl__analyze_verdict_material(a, l->slope, after);
  return rises && slows && !a->level_grows;
}
