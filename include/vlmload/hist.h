/* Log-linear histogram of non-negative integer values (HdrHistogram's layout).
 *
 * Values are kept to `sigdigits` significant decimal digits (1..5) between 0 and `highest` (at
 * least 1); larger values are clamped to `highest` and counted in `clamped`. Recording is an index
 * computation and an increment: no allocation, no branches on the counts. Two histograms with the
 * same layout merge exactly by adding counts, so shards and intervals combine without averaging
 * percentiles.
 */
#ifndef VLMLOAD_HIST_H
#define VLMLOAD_HIST_H

#include <stdint.h>

typedef struct vl_hist_s {
  int64_t highest;  /* largest trackable value */
  int sigdigits;    /* significant decimal digits kept */
  int sub_bits;     /* log2 of the sub-bucket count */
  int bucket_count; /* number of power-of-two buckets */
  int counts_len;   /* number of counters */
  uint64_t *counts; /* owned */
  uint64_t total;   /* values recorded, clamped included */
  uint64_t clamped; /* values above `highest` */
  int64_t min, max; /* exact extremes of what was recorded (max before clamping); while
                       empty, min is INT64_MAX and max 0: read them with vl_hist_min/max */
  double sum;       /* exact sum, for the mean */
  double sumsq;     /* exact sum of squares, for the standard deviation; NaN when a merged
                       part did not carry one */
} vl_hist_t;

/* Builds an empty histogram. Returns 0, VL_EINVAL for a bad layout, or VL_ENOMEM. */
int vl_hist_init(vl_hist_t *h, int64_t highest, int sigdigits);
void vl_hist_free(vl_hist_t *h);
/* Forgets every value; keeps the layout and the memory. */
void vl_hist_reset(vl_hist_t *h);

/* Records one value (n times for _n); negative values count as 0. */
void vl_hist_record(vl_hist_t *h, int64_t v);
void vl_hist_record_n(vl_hist_t *h, int64_t v, uint64_t n);

/* Value at percentile p in [0, 100]: the highest value equivalent to the bucket holding the
 * ceil(p/100 * total)-th value (at least the first), capped at max. p outside [0, 100] is taken
 * as the nearer end. Returns 0 for an empty histogram. */
int64_t vl_hist_percentile(const vl_hist_t *h, double p);
double vl_hist_mean(const vl_hist_t *h);
/* Population standard deviation (numpy's std) of the exact values recorded (before clamping),
 * from the exact sums, not the buckets. NaN for an empty histogram or one whose sum of squares
 * is unknown. */
double vl_hist_stddev(const vl_hist_t *h);
/* Exact smallest and largest value recorded (before clamping); 0 for an empty histogram. */
int64_t vl_hist_min(const vl_hist_t *h);
int64_t vl_hist_max(const vl_hist_t *h);

/* Adds src's counts (and total, clamped, min, max, sum, sumsq) into dst. Returns VL_EINVAL, leaving
 * dst untouched, when the layouts (highest and sigdigits) differ. */
int vl_hist_merge(vl_hist_t *dst, const vl_hist_t *src);

/* Bucket helpers, for serialisation and tests: the counter index a value lands in (after the same
 * clamping as recording), and the lowest and highest value counter `index` stands for. */
int vl_hist_index(const vl_hist_t *h, int64_t v);
int64_t vl_hist_bucket_low(const vl_hist_t *h, int index);
int64_t vl_hist_bucket_high(const vl_hist_t *h, int index);

#endif
