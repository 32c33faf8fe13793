#include "vlmload/common.h"
#include "vlmload/hist.h"

#include "task.h"

#include <float.h>

static int64_t pow10i(int n) {
  int64_t v = 1;
  while (n-- > 0)
    v *= 10;
  return v;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The rank rule of vl_hist_percentile(): ceil(p/100 * n), between 1 and n, taking a product a few
 * ulps above an integer as that integer. */
static size_t rank_of(double p, size_t n) {
  double x = p / 100.0 * (double)n;
  double r = ceil(x - x * 4 * DBL_EPSILON);
  size_t rank = r < 1 ? 1 : (size_t)r;
  return rank > n ? n : rank;
}

/* The exact percentile of a sorted array. */
static int64_t exact_percentile(const int64_t *sorted, size_t n, double p) {
  return sorted[rank_of(p, n) - 1];
}

/* Checks the bucket that holds v: v lies inside it, and its width keeps the relative error within
 * 10^-sigdigits (buckets one value wide are exact). */
static void check_bucket(const vl_hist_t *h, int64_t v) {
  int i = vl_hist_index(h, v);
  ASSERT(i >= 0 && i < h->counts_len);
  int64_t lo = vl_hist_bucket_low(h, i), hi = vl_hist_bucket_high(h, i);
  ASSERT(lo <= v && v <= hi);
  int64_t width = hi - lo + 1;
  if (width > 1)
    ASSERT(width * pow10i(h->sigdigits) <= lo);
}

/* A value spread evenly over magnitudes: a random bit length, then random bits below it. */
static int64_t log_uniform(uint64_t *seed, int max_bits) {
  int bits = (int)(task_rand(seed) % (uint64_t)(max_bits + 1));
  if (bits == 0)
    return 0;
  uint64_t top = (uint64_t)1 << (bits - 1);
  return (int64_t)(top | (task_rand(seed) & (top - 1)));
}

static const double percentiles[] = {0,  0.1, 1,    10,   25,    33.3,   50,  66.6, 75,  90,
                                     95, 99,  99.5, 99.9, 99.99, 99.999, 100, 12.5, 87.5};

TEST_IMPL(hist_layout) {
  for (int sig = 1; sig <= 5; sig++) {
    vl_hist_t h;
    ASSERT_INT_EQ(vl_hist_init(&h, 3600LL * 1000000, sig), 0);
    int64_t sub = (int64_t)1 << h.sub_bits;
    ASSERT(sub >= 2 * pow10i(sig));
    ASSERT(sub / 2 < 2 * pow10i(sig));
    /* bucket_count is the fewest buckets that reach past highest. */
    ASSERT((sub << (h.bucket_count - 1)) > h.highest);
    ASSERT(h.bucket_count == 1 || (sub << (h.bucket_count - 2)) <= h.highest);
    ASSERT_INT_EQ(h.counts_len, (h.bucket_count + 1) * (int)(sub / 2));
    ASSERT(vl_hist_index(&h, h.highest) < h.counts_len);
    vl_hist_free(&h);
  }
  vl_hist_t h;
  ASSERT_INT_EQ(vl_hist_init(&h, INT64_MAX, 5), 0);
  int last = h.counts_len - 1;
  ASSERT_INT_EQ(vl_hist_index(&h, INT64_MAX), last);
  ASSERT_INT_EQ(vl_hist_bucket_high(&h, last), INT64_MAX);
  vl_hist_free(&h);
  ASSERT_INT_EQ(vl_hist_init(&h, 1, 1), 0);
  ASSERT_INT_EQ(h.bucket_count, 1);
  vl_hist_free(&h);
}

TEST_IMPL(hist_bad_layout) {
  vl_hist_t h;
  ASSERT_INT_EQ(vl_hist_init(&h, 1000, 0), VL_EINVAL);
  ASSERT_INT_EQ(vl_hist_init(&h, 1000, 6), VL_EINVAL);
  ASSERT_INT_EQ(vl_hist_init(&h, 0, 3), VL_EINVAL);
  ASSERT_INT_EQ(vl_hist_init(&h, -5, 3), VL_EINVAL);
  ASSERT(h.counts == NULL);
  vl_hist_free(&h);
}

/* Every value from 0 to highest: buckets tile the range without gaps, in order, each within the
 * error bound; recording them all gives the exact percentiles' buckets. */
TEST_IMPL(hist_every_value) {
  for (int sig = 1; sig <= 4; sig++) {
    vl_hist_t h;
    const int64_t highest = 200000;
    ASSERT_INT_EQ(vl_hist_init(&h, highest, sig), 0);
    int prev = -1;
    for (int64_t v = 0; v <= highest; v++) {
      check_bucket(&h, v);
      int i = vl_hist_index(&h, v);
      if (i != prev) {
        ASSERT_INT_EQ(i, prev + 1);
        ASSERT_INT_EQ(vl_hist_bucket_low(&h, i), v);
        prev = i;
      }
      vl_hist_record(&h, v);
    }
    ASSERT_UINT_EQ(h.total, highest + 1);
    ASSERT_UINT_EQ(h.clamped, 0);
    ASSERT_INT_EQ(vl_hist_min(&h), 0);
    ASSERT_INT_EQ(vl_hist_max(&h), highest);
    ASSERT_NEAR(vl_hist_mean(&h), highest / 2.0, 1e-9);
    for (size_t k = 0; k < VL_ARRAY_SIZE(percentiles); k++) {
      double p = percentiles[k];
      int64_t exact = (int64_t)rank_of(p, (size_t)highest + 1) - 1;
      int64_t got = vl_hist_percentile(&h, p);
      int64_t hi = vl_hist_bucket_high(&h, vl_hist_index(&h, exact));
      ASSERT_INT_EQ(got, VL_MIN(hi, highest));
    }
    vl_hist_free(&h);
  }
}

/* Random values over many magnitudes: each percentile is the top of the bucket holding the exact
 * percentile (capped at the maximum), hence within 10^-sigdigits of it. */
TEST_IMPL(hist_relative_error) {
  uint64_t seed = 42;
  enum { N = 100000 };
  int64_t *vals = vl_xmalloc(N * sizeof(*vals));
  for (int sig = 1; sig <= 5; sig++) {
    for (int max_bits = 10; max_bits <= 62; max_bits += 13) {
      vl_hist_t h;
      ASSERT_INT_EQ(vl_hist_init(&h, (int64_t)1 << 62, sig), 0);
      for (int k = 0; k < N; k++) {
        vals[k] = log_uniform(&seed, max_bits);
        check_bucket(&h, vals[k]);
        vl_hist_record(&h, vals[k]);
      }
      qsort(vals, N, sizeof(*vals), cmp_i64);
      ASSERT_INT_EQ(vl_hist_min(&h), vals[0]);
      ASSERT_INT_EQ(vl_hist_max(&h), vals[N - 1]);
      for (size_t k = 0; k < VL_ARRAY_SIZE(percentiles); k++) {
        double p = percentiles[k];
        int64_t exact = exact_percentile(vals, N, p);
        int64_t got = vl_hist_percentile(&h, p);
        int64_t hi = vl_hist_bucket_high(&h, vl_hist_index(&h, exact));
        ASSERT_INT_EQ(got, VL_MIN(hi, vals[N - 1]));
        ASSERT(got >= exact);
        ASSERT((double)(got - exact) <= (double)exact / (double)pow10i(sig));
      }
      ASSERT_INT_EQ(vl_hist_percentile(&h, 100), vals[N - 1]);
      vl_hist_free(&h);
    }
  }
  free(vals);
}

TEST_IMPL(hist_known_distributions) {
  vl_hist_t h;
  ASSERT_INT_EQ(vl_hist_init(&h, 1000000000, 3), 0);

  /* 1..100 once each: exact below 2048 at three digits. */
  for (int v = 1; v <= 100; v++)
    vl_hist_record(&h, v);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 0), 1);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 1), 1);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 25), 25);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 50), 50);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 50.5), 51);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 99), 99);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 100), 100);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 150), 100);
  ASSERT_INT_EQ(vl_hist_percentile(&h, -3), 1);
  ASSERT_NEAR(vl_hist_mean(&h), 50.5, 1e-12);

  /* 1..1000: 99.9% of 1000 is rank 999, although 99.9 / 100 * 1000 is not exactly 999 in binary. */
  vl_hist_reset(&h);
  for (int v = 1; v <= 1000; v++)
    vl_hist_record(&h, v);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 99.9), 999);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 0.1), 1);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 0.2), 2);

  /* Bimodal: 900 fast, 100 slow. */
  vl_hist_reset(&h);
  vl_hist_record_n(&h, 100, 900);
  vl_hist_record_n(&h, 10000, 100);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 50), 100);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 90), 100);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 90.1), 10000);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 99.9), 10000);
  ASSERT_NEAR(vl_hist_mean(&h), (900 * 100 + 100 * 10000) / 1000.0, 1e-9);

  /* One value, in a wide bucket: the bucket's top is capped at the exact maximum. */
  vl_hist_reset(&h);
  vl_hist_record_n(&h, 123456789, 5);
  int i = vl_hist_index(&h, 123456789);
  ASSERT(vl_hist_bucket_high(&h, i) > 123456789);
  for (size_t k = 0; k < VL_ARRAY_SIZE(percentiles); k++)
    ASSERT_INT_EQ(vl_hist_percentile(&h, percentiles[k]), 123456789);
  ASSERT_INT_EQ(vl_hist_min(&h), 123456789);

  /* A value in a wide bucket below the maximum reports the bucket's top. */
  vl_hist_reset(&h);
  vl_hist_record(&h, 123456789);
  vl_hist_record(&h, 999999999);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 50), vl_hist_bucket_high(&h, i));
  vl_hist_free(&h);
}

TEST_IMPL(hist_clamping) {
  vl_hist_t h;
  ASSERT_INT_EQ(vl_hist_init(&h, 1000, 3), 0);
  vl_hist_record(&h, 5000);
  vl_hist_record(&h, -7);
  vl_hist_record(&h, 1000);
  ASSERT_UINT_EQ(h.total, 3);
  ASSERT_UINT_EQ(h.clamped, 1);
  ASSERT_INT_EQ(vl_hist_min(&h), 0);
  ASSERT_INT_EQ(vl_hist_max(&h), 5000);
  ASSERT_NEAR(h.sum, 6000, 0);
  ASSERT_INT_EQ(vl_hist_index(&h, 5000), vl_hist_index(&h, 1000));
  ASSERT_INT_EQ(vl_hist_index(&h, -7), 0);
  ASSERT_UINT_EQ(h.counts[vl_hist_index(&h, 1000)], 2);
  ASSERT_UINT_EQ(h.counts[0], 1);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 10), 0);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 50), 1000);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 100), 1000);
  vl_hist_free(&h);
}

TEST_IMPL(hist_empty) {
  vl_hist_t h;
  ASSERT_INT_EQ(vl_hist_init(&h, 60000000, 3), 0);
  ASSERT_UINT_EQ(h.total, 0);
  for (size_t k = 0; k < VL_ARRAY_SIZE(percentiles); k++)
    ASSERT_INT_EQ(vl_hist_percentile(&h, percentiles[k]), 0);
  ASSERT_NEAR(vl_hist_mean(&h), 0, 0);
  ASSERT_INT_EQ(vl_hist_min(&h), 0);
  ASSERT_INT_EQ(vl_hist_max(&h), 0);
  /* Recording nothing changes nothing. */
  vl_hist_record_n(&h, 77, 0);
  ASSERT_UINT_EQ(h.total, 0);
  ASSERT_INT_EQ(vl_hist_min(&h), 0);
  ASSERT_INT_EQ(vl_hist_max(&h), 0);
  vl_hist_free(&h);
}

static void assert_same(const vl_hist_t *a, const vl_hist_t *b) {
  ASSERT_INT_EQ(a->counts_len, b->counts_len);
  ASSERT_MEM_EQ(a->counts, b->counts, (size_t)a->counts_len * sizeof(*a->counts));
  ASSERT_UINT_EQ(a->total, b->total);
  ASSERT_UINT_EQ(a->clamped, b->clamped);
  ASSERT_INT_EQ(vl_hist_min(a), vl_hist_min(b));
  ASSERT_INT_EQ(vl_hist_max(a), vl_hist_max(b));
  ASSERT_EQ(a->sum, b->sum);
  for (size_t k = 0; k < VL_ARRAY_SIZE(percentiles); k++)
    ASSERT_INT_EQ(vl_hist_percentile(a, percentiles[k]), vl_hist_percentile(b, percentiles[k]));
}

TEST_IMPL(hist_merge) {
  const int64_t highest = 10000000;
  vl_hist_t a, b, all, empty;
  ASSERT_INT_EQ(vl_hist_init(&a, highest, 3), 0);
  ASSERT_INT_EQ(vl_hist_init(&b, highest, 3), 0);
  ASSERT_INT_EQ(vl_hist_init(&all, highest, 3), 0);
  ASSERT_INT_EQ(vl_hist_init(&empty, highest, 3), 0);
  uint64_t seed = 7;
  for (int k = 0; k < 50000; k++) {
    /* a sees small values, b large ones and some past highest. */
    int64_t v = log_uniform(&seed, k % 2 ? 26 : 12);
    vl_hist_record(k % 2 ? &b : &a, v);
    vl_hist_record(&all, v);
  }
  ASSERT(b.clamped > 0);
  ASSERT_INT_EQ(vl_hist_merge(&a, &b), 0);
  assert_same(&a, &all);

  /* Merging an empty histogram changes nothing; merging into one copies. */
  ASSERT_INT_EQ(vl_hist_merge(&a, &empty), 0);
  assert_same(&a, &all);
  ASSERT_INT_EQ(vl_hist_merge(&empty, &all), 0);
  assert_same(&empty, &all);

  vl_hist_free(&a);
  vl_hist_free(&b);
  vl_hist_free(&all);
  vl_hist_free(&empty);
}

TEST_IMPL(hist_merge_mismatch) {
  vl_hist_t a, b, c;
  ASSERT_INT_EQ(vl_hist_init(&a, 1000000, 3), 0);
  ASSERT_INT_EQ(vl_hist_init(&b, 1000000, 2), 0);
  ASSERT_INT_EQ(vl_hist_init(&c, 2000000, 3), 0);
  vl_hist_record(&a, 5);
  vl_hist_record(&b, 6);
  vl_hist_record(&c, 7);
  ASSERT_INT_EQ(vl_hist_merge(&a, &b), VL_EINVAL);
  ASSERT_INT_EQ(vl_hist_merge(&a, &c), VL_EINVAL);
  ASSERT_INT_EQ(vl_hist_merge(&c, &a), VL_EINVAL);
  ASSERT_UINT_EQ(a.total, 1);
  ASSERT_INT_EQ(vl_hist_max(&a), 5);
  ASSERT_UINT_EQ(c.total, 1);
  ASSERT_INT_EQ(vl_hist_max(&c), 7);
  vl_hist_free(&a);
  vl_hist_free(&b);
  vl_hist_free(&c);
}

TEST_IMPL(hist_reset) {
  vl_hist_t h;
  ASSERT_INT_EQ(vl_hist_init(&h, 1000, 2), 0);
  uint64_t *counts = h.counts;
  int len = h.counts_len;
  for (int v = 0; v < 3000; v++)
    vl_hist_record(&h, v);
  vl_hist_reset(&h);
  ASSERT(h.counts == counts);
  ASSERT_INT_EQ(h.counts_len, len);
  ASSERT_INT_EQ(h.highest, 1000);
  ASSERT_INT_EQ(h.sigdigits, 2);
  ASSERT_UINT_EQ(h.total, 0);
  ASSERT_UINT_EQ(h.clamped, 0);
  ASSERT_EQ(h.sum, 0.0);
  for (int i = 0; i < h.counts_len; i++)
    ASSERT_UINT_EQ(h.counts[i], 0);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 50), 0);
  ASSERT_INT_EQ(vl_hist_min(&h), 0);
  ASSERT_INT_EQ(vl_hist_max(&h), 0);
  vl_hist_record(&h, 42);
  ASSERT_INT_EQ(vl_hist_percentile(&h, 50), 42);
  ASSERT_INT_EQ(vl_hist_min(&h), 42);
  vl_hist_free(&h);
}

/* The standard deviation is numpy's std (population) of the exact values, kept through merges and
 * reset with the histogram; it is not measured for an empty one. */
TEST_IMPL(hist_stddev) {
  vl_hist_t a, b;
  ASSERT_INT_EQ(vl_hist_init(&a, 10000000, 3), 0);
  ASSERT_INT_EQ(vl_hist_init(&b, 10000000, 3), 0);
  ASSERT(isnan(vl_hist_stddev(&a)));
  /* Values a bucket cannot tell apart (12001..12009 share one at 3 digits), so a std from the
   * buckets would be 0 or a bucket width. */
  static const int64_t v[] = {12001, 12003, 12009, 12004, 12002, 12007, 50000, 5};
  double n = (double)VL_ARRAY_SIZE(v), mean = 0, var = 0;
  for (size_t i = 0; i < VL_ARRAY_SIZE(v); i++)
    mean += (double)v[i] / n;
  for (size_t i = 0; i < VL_ARRAY_SIZE(v); i++)
    var += ((double)v[i] - mean) * ((double)v[i] - mean) / n;
  for (size_t i = 0; i < VL_ARRAY_SIZE(v); i++)
    vl_hist_record(i % 2 ? &a : &b, v[i]);
  ASSERT_INT_EQ(vl_hist_merge(&a, &b), 0);
  ASSERT_NEAR(vl_hist_stddev(&a), sqrt(var), 1e-6);
  vl_hist_reset(&b);
  vl_hist_record_n(&b, 700, 5);
  ASSERT_EQ(vl_hist_stddev(&b), 0.0);
  vl_hist_reset(&b);
  ASSERT(isnan(vl_hist_stddev(&b)));
  vl_hist_free(&a);
  vl_hist_free(&b);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(hist_layout),
    TEST_ENTRY(hist_bad_layout),
    TEST_ENTRY(hist_every_value),
    TEST_ENTRY(hist_relative_error),
    TEST_ENTRY(hist_known_distributions),
    TEST_ENTRY(hist_clamping),
    TEST_ENTRY(hist_empty),
    TEST_ENTRY(hist_merge),
    TEST_ENTRY(hist_merge_mismatch),
    TEST_ENTRY(hist_reset),
    TEST_ENTRY(hist_stddev),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
