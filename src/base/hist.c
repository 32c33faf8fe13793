#include "vlmload/hist.h"
#include "vlmload/common.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Layout (HdrHistogram's, with a unit of 1): counter indexes run through buckets of
 * 2^sub_bits sub-buckets each. Bucket 0 covers [0, 2^sub_bits) one value per counter; bucket b > 0
 * covers [2^(sub_bits+b-1), 2^(sub_bits+b)) with counters 2^b values wide. Bucket b > 0 shares its
 * lower half with bucket b-1, so only its upper half gets counters: half = 2^(sub_bits-1) counters
 * per bucket after the first. Within bucket b the narrowest value is 2^(sub_bits-1) * 2^b and the
 * width 2^b, so the relative error is at most 2^-(sub_bits-1) <= 10^-sigdigits. */

static int bucket_of(int sub_bits, int64_t v) {
  uint64_t mask = ((uint64_t)1 << sub_bits) - 1;
  return 64 - __builtin_clzll((uint64_t)v | mask) - sub_bits;
}

static int index_of(const vl_hist_t *h, int64_t v) {
  int b = bucket_of(h->sub_bits, v);
  int half_bits = h->sub_bits - 1;
  int sub = (int)(v >> b);
  return ((b + 1) << half_bits) + sub - (1 << half_bits);
}

int vl_hist_init(vl_hist_t *h, int64_t highest, int sigdigits) {
  memset(h, 0, sizeof(*h));
  if (sigdigits < 1 || sigdigits > 5 || highest < 1)
    return VL_EINVAL;
  int64_t need = 2;
  for (int i = 0; i < sigdigits; i++)
    need *= 10;
  int sub_bits = 1;
  while (((int64_t)1 << sub_bits) < need)
    sub_bits++;
  int bucket_count = bucket_of(sub_bits, highest) + 1;
  int counts_len = (bucket_count + 1) << (sub_bits - 1);
  uint64_t *counts = calloc((size_t)counts_len, sizeof(*counts));
  if (!counts)
    return VL_ENOMEM;
  h->highest = highest;
  h->sigdigits = sigdigits;
  h->sub_bits = sub_bits;
  h->bucket_count = bucket_count;
  h->counts_len = counts_len;
  h->counts = counts;
  vl_hist_reset(h);
  return 0;
}

void vl_hist_free(vl_hist_t *h) {
  free(h->counts);
  memset(h, 0, sizeof(*h));
}

void vl_hist_reset(vl_hist_t *h) {
  if (h->counts)
    memset(h->counts, 0, (size_t)h->counts_len * sizeof(*h->counts));
  h->total = 0;
  h->clamped = 0;
  h->min = INT64_MAX;
  h->max = 0;
  h->sum = 0;
  h->sumsq = 0;
}

void vl_hist_record(vl_hist_t *h, int64_t v) {
  vl_hist_record_n(h, v, 1);
}

void vl_hist_record_n(vl_hist_t *h, int64_t v, uint64_t n) {
  if (n == 0)
    return;
  v = v < 0 ? 0 : v;
  int over = v > h->highest;
  h->counts[index_of(h, over ? h->highest : v)] += n;
  h->total += n;
  h->clamped += over ? n : 0;
  h->min = v < h->min ? v : h->min;
  h->max = v > h->max ? v : h->max;
  h->sum += (double)v * (double)n;
  h->sumsq += (double)v * (double)v * (double)n;
}

int64_t vl_hist_min(const vl_hist_t *h) {
  return h->total ? h->min : 0;
}

int64_t vl_hist_max(const vl_hist_t *h) {
  return h->max;
}

int64_t vl_hist_percentile(const vl_hist_t *h, double p) {
  if (h->total == 0)
    return 0;
  if (!(p > 0))
    p = 0;
  if (p > 100)
    p = 100;
  /* The rank is ceil(p/100 * total). p is usually a decimal fraction with no exact binary form
   * (99.9), so a product a few ulps above an integer is taken as that integer. */
  double x = p / 100.0 * (double)h->total;
  double r = ceil(x - x * 4 * DBL_EPSILON);
  uint64_t rank = r < 1 ? 1 : (uint64_t)r;
  if (rank > h->total)
    rank = h->total;
  uint64_t seen = 0;
  int i = 0;
  for (; i < h->counts_len - 1; i++) {
    seen += h->counts[i];
    if (seen >= rank)
      break;
  }
  int64_t high = vl_hist_bucket_high(h, i);
  return high < h->max ? high : h->max;
}

double vl_hist_mean(const vl_hist_t *h) {
  return h->total ? h->sum / (double)h->total : 0.0;
}

double vl_hist_stddev(const vl_hist_t *h) {
  if (!h->total || !isfinite(h->sumsq))
    return NAN;
  double n = (double)h->total, mean = h->sum / n;
  double var = h->sumsq / n - mean * mean;
  /* Rounding can leave a tiny negative variance for values that are all equal. */
  return var > 0 ? sqrt(var) : 0.0;
}

int vl_hist_merge(vl_hist_t *dst, const vl_hist_t *src) {
  if (dst->highest != src->highest || dst->sigdigits != src->sigdigits ||
      dst->counts_len != src->counts_len)
    return VL_EINVAL;
  for (int i = 0; i < dst->counts_len; i++)
    dst->counts[i] += src->counts[i];
  dst->total += src->total;
  dst->clamped += src->clamped;
  dst->min = VL_MIN(dst->min, src->min);
  dst->max = VL_MAX(dst->max, src->max);
  dst->sum += src->sum;
  dst->sumsq += src->sumsq;
  return 0;
}

int vl_hist_index(const vl_hist_t *h, int64_t v) {
  v = v < 0 ? 0 : v;
  return index_of(h, v > h->highest ? h->highest : v);
}

int64_t vl_hist_bucket_low(const vl_hist_t *h, int index) {
  int half_bits = h->sub_bits - 1;
  int b = (index >> half_bits) - 1;
  int64_t sub = (index & ((1 << half_bits) - 1)) + ((int64_t)1 << half_bits);
  if (b < 0) {
    sub -= (int64_t)1 << half_bits;
    b = 0;
  }
  return sub << b;
}

int64_t vl_hist_bucket_high(const vl_hist_t *h, int index) {
  int b = (index >> (h->sub_bits - 1)) - 1;
  int64_t width = (int64_t)1 << (b < 0 ? 0 : b);
  return vl_hist_bucket_low(h, index) + (width - 1);
}
