/* Leak analysis of one memory series against a work axis (requests completed, or images sent).
 *
 * A series is a list of samples (x = work done, y = memory, t = wall-clock ms) in time order, and
 * the cache flushes of the run. The analysis fits y against x after the warm-up and tells a leak
 * from a cache that fills up:
 *
 *  - the overall slope, by ordinary least squares (with a Student-t confidence interval and R^2)
 * and by Theil-Sen (the median of pairwise slopes, with Sen's rank interval), in y units per 1000
 * x;
 *  - the post-flush floor: in each window that starts at a flush and ends at the next one, the
 *    smallest sample (memory right after the cache was emptied), and the OLS slope of those floors
 *    against x at the window start;
 *  - the within-window slope: one common slope fitted inside every window with its own intercept
 *    (how fast memory climbs between flushes).
 *
 * Slopes are scaled to "per 1000 x"; y is taken as MB (1 MB = 2^20 bytes) for the thresholds, but
 * nothing else depends on the unit.
 *
 * Confidence intervals assume independent errors. Memory samples seldom are: when opts.autocorr is
 * set and a fit has at least VL_ANALYZE_AR1_MIN_N points with a positive lag-1 autocorrelation r1
 * of its residuals, the interval is widened to the effective sample size n (1 - r1) / (1 + r1)
 * (Santer et al., 2000); the Theil-Sen interval is widened by the same factor.
 *
 * Growth over the analysed span of x is material when it is at least the absolute floor A
 * (min_growth_mb, for a series in MB; 0 for any other unit) and either at least min_growth_frac of
 * |mean of y| or its slope at least min_slope per 1000 x. T = max(A, min_growth_frac * |mean y|)
 * is the growth over the run that counts ("threshold"). Verdicts, in this order:
 *  - not-memory: the series is no memory (vl_series_t.not_memory: a count of requests, a ratio):
 *    no fit and no verdict on growth; its first and last value after the warm-up are reported;
 *  - insufficient-data: fewer than min_points samples after the warm-up, or x does not advance;
 *  - peak: the series is a high-water mark (vl_series_t.peak: VmHWM only rises, so a slope would
 *    read every cache that ever filled as growth). No fit is made; its peak and where it was first
 *    reached are reported;
 *  - levels-off: memory rises and then stops: a broken line y = c + b min(x, knot) fits best with
 *    its knot anywhere that leaves at least VL_ANALYZE_LEVEL_TAIL_MIN of the analysed x after it,
 *    its rise has an interval above 0 and adds at least T, and the tail -- the points after the
 *    knot, or the last half of the analysed x when the knot comes before its middle -- climbs at
 *    most VL_ANALYZE_LEVEL_TAIL_FRAC as fast as the rise and significantly slower than it (its
 *    upper bound below the rise's slope), and does not grow by T over its own span with its
 *    interval above 0 (that is grows, judged after the knot, below). So a rise that stops is found
 *    wherever it stops, with no warm-up to set by hand. A tail that still climbs by a material
 *    slope levels off but "creeps", which the reason says with its slope: a slow leak or a cache
 *    still filling, which a longer run tells apart. Tried on the samples when the range holds no
 * flush, on the post-flush floors when there are at least VL_ANALYZE_LEVEL_MIN_WINDOWS of them.
 * With more than 3 VL_ANALYZE_LEVEL_BLOCKS samples, the rise and the tail are fitted on the means
 * of VL_ANALYZE_LEVEL_BLOCKS blocks of equal x-span (the knot still on the samples; the tail's
 *    blocks start after the knot's): memory that moves in steps leaves residuals that follow
 *    each other for hundreds of samples, which the AR(1) correction counts as a handful, while
 *    the means of blocks longer than a step are nearly independent. The knot says where it levels
 *    off;
 *  - inconclusive: the basis slope (below) rests on fewer than min_eff effective samples (its
 *    residuals follow each other so closely that a few hundred samples carry the information of
 *    a handful; at 2 or fewer its interval is unbounded), or no other verdict applies and its
 *    interval admits growth of T over the run (its upper bound times the analysed span). The
 *    reason says what the samples lacked and, in more_x, about how much longer a run would
 *    decide (vl_analysis_t);
 *  - grows: memory rose to a knot as levels-off says, and the tail after it still grows by T with
 *    its interval above 0 (basis "tail": a rise at start, then a leak); or the basis slope -- the
 *    post-flush floor's when there are at least 3 floor windows, the overall OLS slope otherwise
 *    -- has a confidence interval above 0 and is material;
 *  - sawtooth-returns: not grows, at least one flush in the analysed range, the within-window
 *    slope has a confidence interval above 0 and climbs enough (its mean rise per window at least
 *    min_growth_frac of the mean, or the slope at least min_slope: the absolute floor is for growth
 *    over the run, which the floors' scatter blurs, while the climb is fitted inside every window
 *    at once), and the basis interval rules out growth of T;
 *  - flat: neither, and the basis interval rules out growth of T. A significant fall is flat too.
 * Without flushes a cache that fills looks like a leak: flush during the run to tell them apart.
 */
#ifndef VLMLOAD_ANALYZE_H
#define VLMLOAD_ANALYZE_H

#include "vlmload/analyzespec.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

/* Fits with fewer points than this are not corrected for autocorrelation: r1 is too noisy. */
#define VL_ANALYZE_AR1_MIN_N 20

/* Defaults of vl_analyze_opts_t. */
#define VL_ANALYZE_LEVEL         0.95
#define VL_ANALYZE_MIN_POINTS    10
#define VL_ANALYZE_TS_MAX_POINTS 3000
/* Fewer effective samples than this in the deciding fit: inconclusive. Below it the interval has
 * at most 2 degrees of freedom, and how wide it is depends more on the estimate of r1 than on the
 * data. */
#define VL_ANALYZE_MIN_EFF 5.0

/* Post-flush floors needed before levels-off is looked for in them. */
#define VL_ANALYZE_LEVEL_MIN_WINDOWS 6

/* Knots tried by the levels-off fit, at most (evenly over the first half). */
#define VL_ANALYZE_LEVEL_KNOTS 400
/* Blocks whose means the levels-off fits are made on, when there are more than 3 times as many
 * samples. */
#define VL_ANALYZE_LEVEL_BLOCKS 16
/* The fastest the tail may climb, as a fraction of the rise's slope, and still level off. */
#define VL_ANALYZE_LEVEL_TAIL_FRAC 0.1
/* The least share of the analysed x the tail after a knot must span. */
#define VL_ANALYZE_LEVEL_TAIL_MIN 0.25
/* How much longer a run the "run longer" estimate looks at, at most, as a multiple of the run. */
#define VL_ANALYZE_LONGER_MAX 100.0

/* The cap's share: a rise within this fraction of a cap levels off at it. */
#define VL_ANALYZE_CAP_NEAR 0.2

/* What a series' change is (mechanism.c): */
typedef enum {
  VL_MECH_UNKNOWN = 0, /* "unknown": the samples cannot tell */
  VL_MECH_NONE,        /* "none": flat */
  VL_MECH_LEAK,        /* "leak": grows, not returned by a flush nor stopped by repeats */
  VL_MECH_CACHE,       /* "cache": returned by a flush */
  VL_MECH_CAPPED,      /* "capped-cache": levels off at a known cap, or grows with unique
                          inputs but not repeated ones */
  VL_MECH_STEP,        /* "step": a one-time rise, flat around it */
  VL_MECH_WARMUP,      /* "warm-up": rises, then holds, no cap in sight */
} vl_mechanism_t;
#define VL_MECH_N 7

typedef struct vl_analyze_opts_s {
  double level;           /* two-sided confidence level of every interval, in (0, 1) */
  double min_growth_frac; /* growth over the run of less than this * |mean y| is not material */
  double min_growth_mb;   /* A: growth over the run of less than this many MB (a series in MB)
                             is not material, whatever the other rules say; 0 = no floor */
  double min_slope;       /* a slope (y per 1000 x) at least this is material; 0 = off */
  size_t min_points;      /* fewer samples after warm-up: insufficient-data (at least 3) */
  size_t ts_max_points;   /* Theil-Sen on at most this many points, evenly subsampled */
  double min_eff;         /* fewer effective samples in the deciding fit: inconclusive */
  int autocorr;           /* widen intervals for positively autocorrelated residuals */
} vl_analyze_opts_t;

/* A slope estimate. Slopes are in the unit of the function that filled it: per unit of x from the
 * low-level fits, per 1000 x inside vl_analysis_t. Undefined values are NAN; an interval that
 * autocorrelation leaves unbounded is (-INFINITY, INFINITY). */
typedef struct vl_fit_s {
  double slope;
  double lo, hi;    /* confidence interval of the slope (NAN when n < 3) */
  double intercept; /* y at x = 0 */
  double r2;        /* OLS only: coefficient of determination (NAN when y is constant) */
  double r1;        /* lag-1 autocorrelation of the residuals, in the order given (NAN if n < 3) */
  double n_eff;     /* sample size the interval was computed for (n unless corrected) */
  size_t n;         /* points used */
} vl_fit_t;

/* A cache flush: when it started and how much work had been done. Samples taken after t_ms (or,
 * without times, at x >= x) belong to the window it opens. */
typedef struct vl_flush_event_s {
  double t_ms; /* wall-clock ms; NAN when unknown (then windows go by x) */
  double x;    /* work axis value at the flush */
  double x2;   /* second axis value at the flush, NAN when unknown */
} vl_flush_event_t;

/* A cap on what a series may hold: a cache's configured size (a server's setting, or one the user
 * states with --expect-cap). A cap applies to the series named `target`, to every series of the
 * process labelled `target` (the part of a series' name after its first '.'), or, when target is
 * NULL, to every series in MB. Strings are borrowed. */
typedef struct vl_analyze_cap_s {
  const char *name;   /* what sets it: "--expect-cap", "--cache-ram", "SGLANG_VLM_CACHE_SIZE_MB" */
  const char *target; /* series name or process label; NULL: any */
  double bytes;       /* the cap, > 0 */
} vl_analyze_cap_t;

/* The most jumps one series reports (steps.c); a series with more has no one-time rise. */
#define VL_ANALYZE_MAX_JUMPS 8
/* A jump is found over at most VL_ANALYZE_JUMP_SPREAD samples, or VL_ANALYZE_JUMP_SPREAD_S
 * seconds (a gigabyte of pages takes a while to fault in), between flat runs: the samples within
 * VL_ANALYZE_JUMP_FLAT_S seconds of its ends, and at least VL_ANALYZE_JUMP_FLAT of them where
 * there are as many (at least one before it, three after). */
#define VL_ANALYZE_JUMP_SPREAD   3
#define VL_ANALYZE_JUMP_SPREAD_S 1.5
#define VL_ANALYZE_JUMP_FLAT     5
#define VL_ANALYZE_JUMP_FLAT_S   1.0

/* A one-time rise of a series (steps.c): a change of at least the material growth (T) over a
 * short spread (above), with the samples just before and just after it flat (each run's range at
 * most an eighth of the jump: a leak's ramp is never flat at that scale). Warm-up samples count:
 * the first image usually falls in the warm-up. */
typedef struct vl_jump_s {
  double x;          /* work done by the last sample still at the old level */
  double t_ms;       /* that sample's time (NAN when unknown) */
  double size;       /* the median after less the median before, in the series' unit */
  const char *after; /* what came just before it (static): "the first image request", "the
                        first image of a resolution not seen before", "the first flush", "a
                        flush"; NULL when nothing the run recorded */
  size_t first;      /* index (of the series' samples) of the first sample at the new level */
} vl_jump_t;

/* One memory series to analyse. Arrays are borrowed for the duration of the call; samples are in
 * time order; NAN in y (or x) marks a missing sample. */
typedef struct vl_series_s {
  const char *name;    /* "rss_mb.scheduler" */
  const char *unit;    /* "MB" when NULL */
  const char *x_name;  /* "requests" when NULL */
  const char *x2_name; /* name of the second axis ("images"), or NULL */
  const double *x;     /* work axis, non-decreasing */
  const double *x2;    /* second work axis or NULL */
  const double *y;     /* memory */
  const double *t_ms;  /* wall-clock ms or NULL */
  size_t n;
  const vl_flush_event_t *flushes; /* in time order; may be NULL */
  size_t n_flushes;
  double warmup_x;    /* samples with x < warmup_x are ignored; 0 = none */
  double warmup_t_ms; /* samples with t_ms < warmup_t_ms are ignored; 0 = none */
  double t0_ms;       /* wall-clock ms of the run start, for "s into the run"; 0 = unknown */
  int peak;       /* a high-water mark (only rises): its peak is reported, no verdict on growth */
  int not_memory; /* no memory (a count, a ratio): its change is reported, no verdict on growth */
  /* The attribution's regressors at each sample, running totals (NULL: unknown): images sent,
   * text-only requests sent, and the images' megapixels. */
  const double *images, *text_only, *megapixels;
  /* Running totals at each sample (NULL: unknown): images sent again (--image-reuse), and
   * distinct image resolutions sent; jumps and the mechanism's evidence use them. */
  const double *repeated, *resolutions;
  const vl_analyze_cap_t *caps; /* caps that may apply (borrowed); NULL when none */
  size_t n_caps;
} vl_series_t;

/* One post-flush window. */
typedef struct vl_window_s {
  double x;     /* work axis at the flush that opened it */
  double x2;    /* second axis at the flush (NAN without one) */
  double t_ms;  /* time of that flush (NAN when unknown) */
  double floor; /* smallest sample in the window */
  double x_min; /* where that smallest sample was taken */
  double rise;  /* largest minus smallest sample */
  size_t n;     /* samples in the window */
} vl_window_t;

/* One term of the attribution: memory per 1000 images, per 1000 text-only requests, or per
 * megapixel, in the series' unit, with its interval. */
typedef struct vl_attr_term_s {
  double value, lo, hi; /* NAN when left out */
  const char *dropped;  /* why it was left out of the fit (static), NULL when fitted */
} vl_attr_term_t;

/* Growth attributed to its cause in one mixed run: y regressed on the running totals of images
 * sent, text-only requests sent and the images' megapixels together, after the warm-up (ordinary
 * least squares on the centred and scaled columns, by Cholesky). A column that is constant, or that
 * the columns before it (in that order) explain to within 1e-6 of its variance, is left out with a
 * reason: with every image the same size, megapixels is images times a constant. Megapixels enter
 * as the pixels beyond an image of the mean size (mean_mp), so the images term is memory per image
 * of that size and the two stay apart (their running totals rise together). The intervals are
 * widened for autocorrelated residuals as the other fits' are, at n_eff - terms - 1 degrees of
 * freedom. Separating the terms rests on the random draw of images against text-only requests: both
 * rise with time, so the intervals are wide when the mix varies little. */
typedef struct vl_attribution_s {
  int tried; /* the series had at least one regressor */
  vl_attr_term_t images, text, mpix;
  size_t n;         /* samples fitted */
  double r1, n_eff; /* lag-1 autocorrelation of the residuals; the sample size used */
  double mean_mp;   /* megapixels per image sent over the fitted samples (NAN: no images) */
  const char *why;  /* why no fit was made (static), NULL when one was */
} vl_attribution_t;

typedef struct vl_analysis_s {
  char *name, *unit, *x_name, *x2_name; /* owned copies; x2_name NULL without a second axis */
  vl_analyze_opts_t opts;
  vl_verdict_t verdict;
  char reason[768]; /* one sentence that says why */

  size_t n; /* samples after warm-up */
  double x_first, x_last;
  double t_first_ms, t_last_ms; /* times of the first and last of them (NAN when unknown) */
  double y_mean, y_min, y_max, y_first, y_last;

  vl_fit_t ols, ts;   /* per 1000 x */
  vl_fit_t ols2, ts2; /* per 1000 x2; slope NAN without a second axis */

  vl_window_t *windows; /* owned: post-flush windows that start after the warm-up */
  size_t n_windows;
  vl_fit_t floor;   /* floors against window start, per 1000 x (NAN below 3 windows) */
  vl_fit_t floor2;  /* the same against x2 */
  size_t n_flushes; /* flushes inside the analysed range */

  vl_fit_t within;    /* common slope inside the windows, per 1000 x */
  double rise_mean;   /* within.slope times the mean x-span of a window, y units */
  double window_span; /* mean x-span of a window */

  const char *basis; /* "floor", "overall" or "tail" (after a knot): which slope decided */
  double growth;     /* basis slope times the analysed x-span / 1000, y units */
  double threshold;  /* T, y units */
  double floor_abs;  /* A as applied: min_growth_mb for a series in MB, else 0 */

  /* Inconclusive: about how much more x (and how many more flush windows, and seconds at the
   * run's pace) would give the basis slope enough effective samples, or narrow its interval until
   * it shows material growth or rules it out, were the run to go on as it went (the interval's
   * half-width taken to shrink as the span to the power -3/2, the effective samples to grow with
   * it). INFINITY: not within VL_ANALYZE_LONGER_MAX times the run; NAN: not estimated (another
   * verdict, or nothing to go on). more_windows and more_s are NAN when unknown. */
  double more_x, more_windows, more_s;

  double peak_x, peak_t_ms; /* where y_max was first reached (t NAN when unknown) */
  double t0_ms;             /* the run start from the series, 0 when unknown */

  /* The levels-off fit, on the samples or the floors (level_on says which; NULL when not tried):
   * y = rise.intercept + rise.slope / 1000 * min(x, level_x). */
  const char *level_on; /* "samples", "floor" or NULL */
  vl_fit_t rise;        /* slope before the knot, per 1000 x */
  vl_fit_t tail;        /* OLS after the knot (from the middle of the analysed x when the knot
                           comes before it), per 1000 x: what levels-off judges */
  double tail_x;        /* where the tail starts */
  vl_fit_t last_half;   /* OLS over the last half of the analysed x, per 1000 x */
  vl_fit_t first_half;  /* the same over the first half */
  double level_x;       /* the knot: where memory levels off (NAN when not tried) */
  double level_t_ms;    /* time of the sample at the knot (NAN when unknown) */
  double level_y;       /* the fitted level after the knot */
  double level_rise;    /* fitted rise from the first analysed x to the knot, y units */
  size_t level_blocks;  /* block means the rise and the tail were fitted on; 0: the points */
  int level_creeps;     /* levels off, but the tail still climbs by a material slope */
  int level_grows;      /* the rise slows by the knot, but the tail still grows by T: grows */

  /* The steps from each point of the basis series (the floors, or the samples) to the next, in
   * four quarters of its points: a series whose line leaves too few effective samples still grows
   * when it rises at most steps of every quarter (a one-sided sign test in each). */
  size_t steps, steps_up; /* steps that changed the value, and those that raised it */
  double steps_p;         /* the largest of the quarters' p-values (NAN: fewer than 9 points) */
  double basis_range;     /* its largest value less its smallest (NAN: no points) */

  vl_attribution_t attr;

  /* One-time rises (steps.c), over every sample, the warm-up's too. */
  vl_jump_t jumps[VL_ANALYZE_MAX_JUMPS];
  size_t n_jumps;
  vl_fit_t rest;        /* OLS after the warm-up with the jumps taken out, per 1000 x */
  double rest_growth;   /* rest.slope times the analysed span / 1000 */
  double y_start;       /* the first sample of all, warm-up included (NAN: none) */
  double y_low, y_high; /* smallest and largest sample of all */

  /* The cap that applies (caps.c): cap_name is NULL when none matched. */
  const char *cap_name; /* borrowed from the vl_analyze_cap_t, which must outlive this */
  double cap;           /* MB */
  int cap_near;         /* levels off with its rise within VL_ANALYZE_CAP_NEAR of the cap */
  double cap_more_x;    /* growing: more x at the basis slope until the rise reaches the cap */
  double cap_then;      /* the series' value then (NAN: not estimated) */

  /* The mechanism (mechanism.c), set by vl_analyze_mechanisms. */
  vl_mechanism_t mechanism;
  const char *where_kind; /* "heap", "anon", "shmem", "file", "device", "rss", ... (static) */
  char where_process[64]; /* the process label, "" when the series names none */
  char where_series[96];  /* the series that carries the change */
  char evidence[8][256];  /* short sentences */
  size_t n_evidence;
  char experiments[3][256]; /* runs that would decide what this one cannot */
  size_t n_experiments;
} vl_analysis_t;

void vl_analyze_opts_init(vl_analyze_opts_t *o);

/* Analyses one series into *a, which the caller frees with vl_analyze_free. Returns 0 (a verdict,
 * insufficient-data included, is always set), VL_EINVAL for a bad argument (no name, n > 0
 * without x or y, bad options). */
int vl_analyze_series(vl_analysis_t *a, const vl_series_t *s, const vl_analyze_opts_t *opts);
void vl_analyze_free(vl_analysis_t *a);

/* "leak", "capped-cache", ... */
const char *vl_analyze_mechanism_name(vl_mechanism_t m);

/* The mechanism of each of the n analyses (mechanism.c): its own figures (jumps, cap, flushes,
 * attribution) and, for a process's series, the anatomy series of the same process among them
 * (heap_mb., anon_mb., shmem_mb., file_mb., device_mb., arenas.), which say where the change is.
 * Sets mechanism, where_*, evidence and experiments of each. */
void vl_analyze_mechanisms(vl_analysis_t *const *an, size_t n);

/* Adds a cap to a list (caps.c): name and target are copied into *list's own storage. bytes must
 * be > 0. The list is freed by vl_analyze_caps_free. */
typedef struct vl_analyze_caps_s {
  vl_analyze_cap_t *cap;
  size_t n;
} vl_analyze_caps_t;
void vl_analyze_caps_add(vl_analyze_caps_t *list, const char *name, const char *target,
                         double bytes);
void vl_analyze_caps_free(vl_analyze_caps_t *list);
/* --expect-cap SERIES=SIZE (SIZE in bytes, or with a unit: 512MiB, 8GiB, 8192M): adds it to
 * *list. Returns 0, or VL_EINVAL with *why saying what is wrong (static). */
int vl_analyze_caps_parse(vl_analyze_caps_t *list, const char *arg, const char **why);

/* A short summary that agrees with the verdict, for a plot's legend: "grows, floor +3.01 MB/1k
 * requests", "levels-off at 2700 requests (+364 MB)", "inconclusive (2 effective samples)",
 * "peak 812 MB". Writes at most n bytes, NUL included. */
void vl_analyze_label(const vl_analysis_t *a, char *out, size_t n);

/* The analysis as a new cJSON object, owned by the caller. Undefined numbers are null. */
cJSON *vl_analyze_json(const vl_analysis_t *a);

/* The analysis as a few human-readable lines. */
void vl_analyze_print(FILE *f, const vl_analysis_t *a);

/* Low-level statistics, exported for tests and the plot. */

/* Ordinary least squares of y on x, slope per unit of x, with a `level` interval. Returns 0, or
 * VL_EINVAL (fit all NAN, n set) when n < 2 or x is constant. */
int vl_analyze_ols(const double *x, const double *y, size_t n, double level, int autocorr,
                   vl_fit_t *fit);

/* Theil-Sen slope (median of the slopes of all pairs with distinct x) with Sen's `level` interval,
 * on at most max_points points taken evenly when n is larger (0 = no limit). intercept is the
 * median of y - slope x; r2 is NAN. Returns 0, VL_EINVAL when fewer than 2 points have distinct x,
 * VL_ENOMEM. */
int vl_analyze_theil_sen(const double *x, const double *y, size_t n, double level, int autocorr,
                         size_t max_points, vl_fit_t *fit);

/* Linear interpolation of a piecewise-linear function given by knots (tk[i], xk[i]), tk
 * non-decreasing, at t. Returns 0, or VL_ERANGE (x untouched) when t lies outside [tk[0],
 * tk[n-1]] or n == 0. Equal knots give the later one's value. */
int vl_analyze_interp(const double *tk, const double *xk, size_t n, double t, double *x);

#endif
