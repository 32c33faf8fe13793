/* What the files of the leak analysis share; not a public header.
 *
 * analyze.c takes one series through the analysis (vl_analyze_series, _free, _opts_init,
 * _verdict_name): the samples after the warm-up, the overall and second-axis fits, the post-flush
 * windows and their floors, then the shapes and the verdict below. Each concern has a file:
 *   fit.c      the fits and their intervals: OLS, Theil-Sen, the common slope within windows,
 *              autocorrelation and the effective sample size (vl_analyze_ols, _theil_sen,
 *              _interp and the vl__analyze_fit_* helpers);
 *   level.c    the levels-off fit: the broken line, its knot and the halves around it;
 *   verdict.c  materiality, the steps' sign test, and the verdict with its reason;
 *   attr.c     the attribution of growth to images, text-only requests and megapixels;
 *   steps.c    one-time rises (jumps) and the slope of the rest;
 *   caps.c     caps: which applies, whether a series levels off at one or how soon it reaches it;
 *   mechanism.c the mechanism of each series, where it is, its evidence and the deciding runs;
 *   output.c   the analysis as JSON, as text, and as a plot's label.
 * Slopes inside vl_analysis_t are per 1000 x; the low-level fits give them per unit of x, and
 * vl__analyze_fit_scale converts.
 */
#ifndef VLMLOAD_ANALYZE_INTERNAL_H
#define VLMLOAD_ANALYZE_INTERNAL_H

#include "vlmload/analyze.h"

#include <stddef.h>

/* The attribution's regressors: images, text-only requests, megapixels. */
#define VL__ANALYZE_ATTR_TERMS 3

/* Fits (fit.c). */

/* Clears every figure of f to NAN, with n points and n effective samples. */
void vl__analyze_fit_clear(vl_fit_t *f, size_t n);
/* Lag-1 autocorrelation of residuals e[0..n-1]; 0 when they are all zero. Pairs whose group
 * differs (when group is not NULL) are left out. */
double vl__analyze_fit_lag1(const double *e, const int *group, size_t n);
/* The effective sample size for n residuals with lag-1 autocorrelation r1 (n unless autocorr). */
double vl__analyze_fit_neff(double n, double r1, int autocorr);
/* Multiplies the slope and its interval by k (per x to per 1000 x). */
void vl__analyze_fit_scale(vl_fit_t *f, double k);
/* The common slope within segments (one intercept each), per unit of x, into f. Segments are runs
 * of equal seg[] in order; segments with fewer than 2 points are left out. Sets *span to the mean
 * x-span of the segments used (NAN when none). */
void vl__analyze_fit_within(const double *x, const double *y, const int *seg, size_t n,
                            const vl_analyze_opts_t *o, vl_fit_t *f, double *span);
/* Whether autocorrelation leaves f fewer effective samples than the verdict needs. A fit on few
 * points that follow no pattern keeps them all: its t interval is wide by itself. */
int vl__analyze_fit_too_few(const vl_fit_t *f, const vl_analyze_opts_t *o);

/* The levels-off fit (level.c). */

/* The levels-off fit of n points (x non-decreasing; t the samples' times or NULL) into a->rise,
 * a->last_half, a->first_half and a->level_*, on the points or on the means of blocks of them
 * (analyze.h); `on` names them ("samples" or "floor", static). Needs a->threshold. Returns whether
 * the shape holds. */
int vl__analyze_level_fit(vl_analysis_t *a, const double *x, const double *y, const double *t,
                          size_t n, const char *on);

/* Verdicts (verdict.c). */

/* Whether `slope` (per 1000 x) is big enough to matter over `span` of x. */
int vl__analyze_verdict_material(const vl_analysis_t *a, double slope, double span);
/* a->steps, a->steps_up, a->steps_p and a->basis_range over the n points of y (analyze.h). */
void vl__analyze_verdict_steps(vl_analysis_t *a, const double *y, size_t n);
/* The verdict for a high-water mark: its peak, no slope. */
void vl__analyze_verdict_peak(vl_analysis_t *a);
/* The verdict and its reason, once every fit of a is made (a->verdict is VL_VERDICT_LEVELS_OFF
 * when the levels-off shape held). */
void vl__analyze_verdict_set(vl_analysis_t *a);

/* Attribution (attr.c). */

/* The attribution fit (vl_attribution_t) of y on up to three columns (NULL: not recorded), over
 * the n samples where every recorded column has a value. */
void vl__analyze_attr_fit(vl_attribution_t *at, const double *const col[VL__ANALYZE_ATTR_TERMS],
                          const double *y, size_t n, const vl_analyze_opts_t *o);

/* Steps (steps.c). */

/* a->jumps and a->y_start, y_low, y_high over every finite sample of s. Needs a->threshold (or
 * a->floor_abs when it is NAN). */
void vl__analyze_steps_find(vl_analysis_t *a, const vl_series_t *s);
/* a->rest and a->rest_growth: OLS of the m analysed samples (X, Y; from[i] their index in s) with
 * each jump's size taken out of the samples after it, and samples inside a jump left out. */
void vl__analyze_steps_rest(vl_analysis_t *a, const vl_series_t *s, const double *X,
                            const double *Y, const size_t *from, size_t m);

/* Caps (caps.c): the cap of s->caps that applies to a, once its verdict is set. */
void vl__analyze_caps_judge(vl_analysis_t *a, const vl_series_t *s);

#endif
