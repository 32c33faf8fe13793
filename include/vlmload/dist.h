/* Distributions the leak analysis draws its intervals from: Student's t (cumulative distribution
 * and quantile) and the normal quantile. Pure functions of their arguments, thread-safe.
 */
#ifndef VLMLOAD_DIST_H
#define VLMLOAD_DIST_H

/* Quantile of Student's t distribution with df > 0 degrees of freedom (df may be INFINITY, or
 * fractional) at probability p in (0, 1). Accurate to about 1e-10. Returns NAN for bad arguments.
 */
double vl_dist_tquantile(double p, double df);

/* Cumulative distribution of Student's t at t (df as vl_dist_tquantile's); NAN for bad arguments.
 */
double vl_dist_tcdf(double t, double df);

/* Quantile of the standard normal distribution at p in (0, 1). */
double vl_dist_norm_quantile(double p);

#endif
