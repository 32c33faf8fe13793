#include "vlmload/dist.h"

#include <math.h>

#define PI 3.14159265358979323846

/* Continued fraction of the regularized incomplete beta function, by the modified Lentz method. It
 * converges fast for x < (a + 1) / (a + b + 2); the caller uses the symmetry I_x(a, b) =
 * 1 - I_{1-x}(b, a) elsewhere. */
static double beta_cf(double a, double b, double x) {
  const double tiny = 1e-300, eps = 1e-16;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (fabs(d) < tiny)
    d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; m++) {
    double m2 = 2.0 * m;
    /* Even step: d_2m = m (b - m) x / ((a + 2m - 1)(a + 2m)). */
    double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + num * d;
    if (fabs(d) < tiny)
      d = tiny;
    c = 1 + num / c;
    if (fabs(c) < tiny)
      c = tiny;
    d = 1 / d;
    h *= d * c;
    /* Odd step: d_2m+1 = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)). */
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + num * d;
    if (fabs(d) < tiny)
      d = tiny;
    c = 1 + num / c;
    if (fabs(c) < tiny)
      c = tiny;
    d = 1 / d;
    double del = d * c;
    h *= del;
    if (fabs(del - 1) < eps)
      break;
  }
  return h;
}

/* Regularized incomplete beta function I_x(a, b). */
static double beta_inc(double a, double b, double x) {
  if (x <= 0)
    return 0;
  if (x >= 1)
    return 1;
  double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
  if (x < (a + 1) / (a + b + 2))
    return front * beta_cf(a, b, x) / a;
  return 1 - front * beta_cf(b, a, 1 - x) / b;
}

static double norm_cdf(double z) {
  return 0.5 * erfc(-z / sqrt(2.0));
}

/* Normal quantile: Acklam's rational approximation (relative error 1.2e-9), then one Halley step
 * on erfc, which brings it to full double precision. */
double vl_dist_norm_quantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double plow = 0.02425;
  double x;
  if (p < plow) {
    double q = sqrt(-2 * log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - plow) {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    double q = sqrt(-2 * log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  double e = norm_cdf(x) - p;
  double u = e * sqrt(2 * PI) * exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double vl_dist_tcdf(double t, double df) {
  if (isnan(t) || !(df > 0))
    return NAN;
  if (isinf(df) || df > 1e10)
    return norm_cdf(t);
  if (isinf(t))
    return t > 0 ? 1 : 0;
  double tail = 0.5 * beta_inc(df / 2, 0.5, df / (df + t * t));
  return t > 0 ? 1 - tail : tail;
}

static double t_pdf(double t, double df) {
  return exp(lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * log(df * PI) -
             (df + 1) / 2 * log1p(t * t / df));
}

double vl_dist_tquantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0))
    return NAN;
  if (p == 0.5)
    return 0;
  if (p < 0.5)
    return -vl_dist_tquantile(1 - p, df);
  if (isinf(df) || df > 1e10)
    return vl_dist_norm_quantile(p);
  if (df == 1)
    return tan(PI * (p - 0.5));
  if (df == 2)
    return (2 * p - 1) / sqrt(2 * p * (1 - p));
  /* Start from the Cornish-Fisher expansion around the normal quantile, then Newton's method inside
   * a bracket that bisection keeps when a step would leave it. */
  double z = vl_dist_norm_quantile(p), z2 = z * z;
  double t = z + z * (z2 + 1) / (4 * df) + z * ((5 * z2 + 16) * z2 + 3) / (96 * df * df);
  double lo = 0, hi = t > 1 ? t : 1;
  for (int i = 0; i < 2000 && vl_dist_tcdf(hi, df) < p; i++) {
    lo = hi;
    hi *= 2;
  }
  if (!(t > lo && t < hi))
    t = (lo + hi) / 2;
  for (int i = 0; i < 200; i++) {
    double f = vl_dist_tcdf(t, df) - p;
    if (f < 0)
      lo = t;
    else
      hi = t;
    double step = f / t_pdf(t, df);
    double next = t - step;
    if (!(next > lo && next < hi))
      next = (lo + hi) / 2;
    if (fabs(next - t) <= 1e-14 * (1 + fabs(t)))
      return next;
    t = next;
  }
  return t;
}
