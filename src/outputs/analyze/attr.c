/* The attribution: growth regressed on images sent, text-only requests sent and the images'
 * megapixels together, by least squares on centred and scaled columns solved by Cholesky, each
 * term with its interval (analyze.h, vl_attribution_t). */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/dist.h"

#include <math.h>
#include <stdlib.h>

/* The attribution fit (vl_attribution_t) of y on up to three columns (NULL: not recorded), over
 * the n samples where every recorded column has a value. The columns' slopes are scaled by
 * scale[] (per 1000 images, per 1000 requests, per megapixel). */
void vl__analyze_attr_fit(vl_attribution_t *at, const double *const col[VL__ANALYZE_ATTR_TERMS],
                          const double *y, size_t n, const vl_analyze_opts_t *o) {
  static const double scale[VL__ANALYZE_ATTR_TERMS] = {1000, 1000, 1};
  vl_attr_term_t *term[VL__ANALYZE_ATTR_TERMS] = {&at->images, &at->text, &at->mpix};
  for (int j = 0; j < VL__ANALYZE_ATTR_TERMS; j++) {
    *term[j] = (vl_attr_term_t){NAN, NAN, NAN, col[j] ? NULL : "not recorded"};
  }
  at->r1 = at->n_eff = at->mean_mp = NAN;
  at->tried = col[0] || col[1] || col[2];
  if (!at->tried)
    return;
  /* The samples with every recorded column. */
  double *z[VL__ANALYZE_ATTR_TERMS] = {0}, *yc = vl_xmalloc((n + 1) * sizeof(double));
  for (int j = 0; j < VL__ANALYZE_ATTR_TERMS; j++)
    if (col[j])
      z[j] = vl_xmalloc((n + 1) * sizeof(double));
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int ok = isfinite(y[i]);
    for (int j = 0; j < VL__ANALYZE_ATTR_TERMS && ok; j++)
      ok = !col[j] || isfinite(col[j][i]);
    if (!ok)
      continue;
    yc[m] = y[i];
    for (int j = 0; j < VL__ANALYZE_ATTR_TERMS; j++)
      if (col[j])
        z[j][m] = col[j][i];
    m++;
  }
  at->n = m;
  double mean[VL__ANALYZE_ATTR_TERMS] = {0}, sd[VL__ANALYZE_ATTR_TERMS] = {0}, ym = 0;
  int keep[VL__ANALYZE_ATTR_TERMS], p = 0;
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
  for (int j = 0; j < VL__ANALYZE_ATTR_TERMS; j++) {
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
  double L[VL__ANALYZE_ATTR_TERMS][VL__ANALYZE_ATTR_TERMS] = {{0}};
  for (int j = 0; j < VL__ANALYZE_ATTR_TERMS; j++) {
    if (!z[j] || term[j]->dropped)
      continue;
    double gj[VL__ANALYZE_ATTR_TERMS];
    for (int a = 0; a < p; a++) {
      double s = 0;
      for (size_t i = 0; i < m; i++)
        s += z[keep[a]][i] * z[j][i];
      gj[a] = s / (double)m;
    }
    double row[VL__ANALYZE_ATTR_TERMS], d = 1;
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
  double b[VL__ANALYZE_ATTR_TERMS], beta[VL__ANALYZE_ATTR_TERMS], w[VL__ANALYZE_ATTR_TERMS],
      inv[VL__ANALYZE_ATTR_TERMS];
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
    double u[VL__ANALYZE_ATTR_TERMS], v[VL__ANALYZE_ATTR_TERMS];
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
  at->r1 = vl__analyze_fit_lag1(res, NULL, m);
  free(res);
  at->n_eff = vl__analyze_fit_neff((double)m, at->r1, o->autocorr);
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
  for (int j = 0; j < VL__ANALYZE_ATTR_TERMS; j++)
    free(z[j]);
  free(yc);
}
