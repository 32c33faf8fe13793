/* The comparison of two runs' figures: what `vlmload compare` computes, apart from reading files
 * and printing.
 *
 * Each figure both runs have gives the baseline's value, the run's, their difference (run minus
 * baseline), a 95% interval for that difference where the figure has one, and a word: better,
 * worse or same (the interval holds 0, or the change is under the figure's materiality). A
 * percentile's interval comes from a bootstrap over each run's histogram counts; a memory slope's
 * from the two fits' intervals, taken as independent estimates with combined standard errors; an
 * error rate's from the two proportions (Wald). Rates and goodput have no interval: only their
 * materiality decides.
 */
#ifndef VLMLOAD_COMPARE_H
#define VLMLOAD_COMPARE_H

#include "vlmload/hist.h"

#include <stddef.h>
#include <stdint.h>

struct cJSON;

/* The materialities: a change under them is `same` whatever its interval. */
typedef struct vl_compare_opts_s {
  double min_change;       /* rates, goodput, latencies: a fraction of the baseline (0.05) */
  double min_error_change; /* error rates: a difference of proportions (0.001: 0.1 points) */
  double min_slope_change; /* memory slopes: the series' unit per 1000 of its x (1 MB) */
  double level;            /* the intervals' confidence (0.95) */
  int reps;                /* bootstrap replicates per percentile (2000) */
  uint64_t seed;           /* the bootstrap's random stream */
} vl_compare_opts_t;

void vl_compare_opts_init(vl_compare_opts_t *o);

typedef enum {
  VL_COMPARE_SAME = 0,
  VL_COMPARE_BETTER,
  VL_COMPARE_WORSE,
  VL_COMPARE_CHANGED, /* a figure with no direction (a mechanism) that differs */
} vl_compare_word_t;

/* One figure of a comparison. */
typedef struct vl_compare_fig_s {
  char name[192];              /* e2e_p99, achieved_rate, slope:rss_mb.mock ... */
  const char *group;           /* "rate", "latency", "errors", "slope", "floor", "mechanism" */
  char unit[48];               /* "ms", "req/s", "%", "MB/1k requests" ... */
  double a, b;                 /* the baseline's value and the run's */
  double diff;                 /* b - a */
  double lo, hi;               /* the difference's interval; NAN when the figure has none */
  double material;             /* the change under which the word is same, in the figure's unit */
  int lower_better;            /* 1: lower is better; 0: higher is; -1: no direction */
  char text_a[64], text_b[64]; /* a mechanism's words */
  vl_compare_word_t word;
} vl_compare_fig_t;

/* The word's name: "better", "worse", "same", "changed". */
const char *vl_compare_word_name(vl_compare_word_t w);

/* The word for a change diff with interval [lo, hi] (NAN: none) under materiality material
 * (absolute, >= 0) when lower (1) or higher (0) is better. */
vl_compare_word_t vl_compare_judge(double diff, double lo, double hi, double material,
                                   int lower_better);

/* The interval at level of the difference between b's and a's p-th percentile (vl_hist_percentile's
 * rule), in the histograms' unit: a bootstrap of reps replicates, each run's resampled percentile
 * drawn exactly as its order statistic (the k-th of n resampled values is the empirical quantile
 * of a Beta(k, n + 1 - k) draw). Both histograms must be non-empty. */
void vl_compare_pct_interval(const vl_hist_t *a, const vl_hist_t *b, double p, double level,
                             int reps, uint64_t seed, double *lo, double *hi);

/* The interval at level of slope_b - slope_a from each fit's own interval [lo, hi], taken as a
 * symmetric normal interval at level_a and level_b: the standard errors combine in quadrature. */
void vl_compare_slope_interval(double lo_a, double hi_a, double level_a, double lo_b, double hi_b,
                               double level_b, double level, double *lo, double *hi);

/* The interval at level of k_b/n_b - k_a/n_a (Wald). n_a, n_b > 0. */
void vl_compare_prop_interval(double k_a, double n_a, double k_b, double n_b, double level,
                              double *lo, double *hi);

/* The two-sided normal quantile for level (1.96 for 0.95). */
double vl_compare_z(double level);

/* The figures both summaries (the JSON of --output) have, in a new array; *n gets their number.
 * Never fails: a figure one summary lacks is left out. */
vl_compare_fig_t *vl_compare_runs(const struct cJSON *a, const struct cJSON *b,
                                  const vl_compare_opts_t *o, size_t *n);

#endif
