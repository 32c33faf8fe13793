/* The comparison's intervals on known inputs: a percentile's change by bootstrap over histograms,
 * held to the normal theory of a median and to a bootstrap that resamples every value; a slope's
 * change from two fits' intervals; and the words. */
#include "vlmload/common.h"
#include "vlmload/compare.h"
#include "vlmload/hist.h"
#include "vlmload/rng.h"

#include "task.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

static void hist(vl_hist_t *h) {
  ASSERT_EQ(vl_hist_init(h, 60 * 1000 * 1000, 3), 0);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Every value the same: no resample can move a percentile, the interval is [0, 0]. */
TEST_IMPL(compare_pct_constant) {
  vl_hist_t a, b;
  hist(&a);
  hist(&b);
  vl_hist_record_n(&a, 5000, 1000);
  vl_hist_record_n(&b, 5000, 400);
  double lo, hi;
  vl_compare_pct_interval(&a, &b, 99, 0.95, 2000, 7, &lo, &hi);
  ASSERT(lo == 0 && hi == 0);
  vl_hist_free(&a);
  vl_hist_free(&b);
}

/* The values 1..1000 once each (buckets one value wide): the median's rank has a standard
 * deviation of sqrt(n p (1 - p)) = 15.8 values, the difference of two runs' medians 22.4, so its
 * 95% interval is about +/- 43.8; a run shifted by 100 moves the interval by 100. The 99th
 * percentile's is much narrower: +/- 8.7. */
TEST_IMPL(compare_pct_uniform) {
  vl_hist_t a, b, c;
  hist(&a);
  hist(&b);
  hist(&c);
  for (int v = 1; v <= 1000; v++) {
    vl_hist_record(&a, v);
    vl_hist_record(&b, v);
    vl_hist_record(&c, v + 100);
  }
  double lo, hi;
  vl_compare_pct_interval(&a, &b, 50, 0.95, 4000, 1, &lo, &hi);
  ASSERT((hi - lo) / 2 > 43.8 * 0.85 && (hi - lo) / 2 < 43.8 * 1.15);
  ASSERT(fabs((hi + lo) / 2) < 5);
  vl_compare_pct_interval(&a, &c, 50, 0.95, 4000, 2, &lo, &hi);
  ASSERT((hi - lo) / 2 > 43.8 * 0.85 && (hi - lo) / 2 < 43.8 * 1.15);
  ASSERT(fabs((hi + lo) / 2 - 100) < 5);
  vl_compare_pct_interval(&a, &b, 99, 0.95, 4000, 3, &lo, &hi);
  ASSERT((hi - lo) / 2 > 6 && (hi - lo) / 2 < 12);
  vl_hist_free(&a);
  vl_hist_free(&b);
  vl_hist_free(&c);
}

/* Skewed samples (exponential, values under 2048 us, each in a bucket one value wide), against
 * the bootstrap done the long way: every replicate draws n of the values themselves, sorts them
 * and reads the percentile by vl_hist_percentile's rule. Both are draws: the fast way's ends must
 * fall within a point and a half of the long way's 2.5% and 97.5% points. */
static void skewed(vl_hist_t *h, double *x, int n, double scale, uint64_t seed) {
  vl_rng_t rng;
  vl_rng_init(&rng, seed, 0);
  hist(h);
  for (int i = 0; i < n; i++) {
    x[i] = fmin(2000, floor(50 + scale * vl_rng_exp(&rng)));
    vl_hist_record(h, (int64_t)x[i]);
  }
}

static double resampled(const double *x, int n, double *buf, double p, vl_rng_t *rng) {
  for (int i = 0; i < n; i++)
    buf[i] = x[vl_rng_range(rng, 0, (uint64_t)n - 1)];
  qsort(buf, (size_t)n, sizeof(double), cmp_double);
  int r = (int)ceil(p / 100 * n);
  return buf[(r < 1 ? 1 : r) - 1];
}

TEST_IMPL(compare_pct_matches_resampling) {
  enum { NA = 400, NB = 300, REPS = 4000 };
  static double xa[NA], xb[NB], buf[NA];
  vl_hist_t a, b;
  skewed(&a, xa, NA, 150, 11);
  skewed(&b, xb, NB, 200, 12);
  const double pcts[] = {50, 90, 99};
  for (size_t t = 0; t < VL_ARRAY_SIZE(pcts); t++) {
    double *d = malloc(REPS * sizeof(double));
    vl_rng_t rng;
    vl_rng_init(&rng, 99, t);
    for (int i = 0; i < REPS; i++)
      d[i] = resampled(xb, NB, buf, pcts[t], &rng) - resampled(xa, NA, buf, pcts[t], &rng);
    qsort(d, REPS, sizeof(double), cmp_double);
    double lo, hi;
    vl_compare_pct_interval(&a, &b, pcts[t], 0.95, REPS, 5 + t, &lo, &hi);
    ASSERT(lo >= d[(int)(REPS * 0.01)] && lo <= d[(int)(REPS * 0.04)]);
    ASSERT(hi >= d[(int)(REPS * 0.96)] && hi <= d[(int)(REPS * 0.99)]);
    free(d);
  }
  vl_hist_free(&a);
  vl_hist_free(&b);
}

/* Two fits' 95% intervals [1, 3] and [5, 7]: standard errors of 0.51, a change of 4 with a
 * combined standard error of 0.72, so [2.586, 5.414]. */
TEST_IMPL(compare_slope_interval) {
  double lo, hi;
  vl_compare_slope_interval(1, 3, 0.95, 5, 7, 0.95, 0.95, &lo, &hi);
  ASSERT(fabs(lo - (4 - sqrt(2))) < 1e-6 && fabs(hi - (4 + sqrt(2))) < 1e-6);
  ASSERT(fabs(vl_compare_z(0.95) - 1.959964) < 1e-5);
  ASSERT(fabs(vl_compare_z(0.99) - 2.575829) < 1e-5);
  /* Proportions: 10 of 1000 against 30 of 1000. */
  vl_compare_prop_interval(10, 1000, 30, 1000, 0.95, &lo, &hi);
  double se = sqrt(0.01 * 0.99 / 1000 + 0.03 * 0.97 / 1000);
  ASSERT(fabs(lo - (0.02 - 1.959964 * se)) < 1e-6 && fabs(hi - (0.02 + 1.959964 * se)) < 1e-6);
}

TEST_IMPL(compare_words) {
  /* Lower is better: a rise whose interval excludes 0 is worse, a fall better. */
  ASSERT_EQ(vl_compare_judge(5, 2, 8, 1, 1), VL_COMPARE_WORSE);
  ASSERT_EQ(vl_compare_judge(-5, -8, -2, 1, 1), VL_COMPARE_BETTER);
  /* Higher is better: the other way round. */
  ASSERT_EQ(vl_compare_judge(5, 2, 8, 1, 0), VL_COMPARE_BETTER);
  /* The interval holds 0, or the change is under the materiality: same. */
  ASSERT_EQ(vl_compare_judge(5, -1, 11, 1, 1), VL_COMPARE_SAME);
  ASSERT_EQ(vl_compare_judge(0.5, 0.2, 0.8, 1, 1), VL_COMPARE_SAME);
  /* No interval: the materiality alone decides. */
  ASSERT_EQ(vl_compare_judge(5, NAN, NAN, 1, 0), VL_COMPARE_BETTER);
  ASSERT_EQ(vl_compare_judge(0.5, NAN, NAN, 1, 0), VL_COMPARE_SAME);
}

/* Two summaries as the JSON has them: a memory series' slopes and mechanism, the requests. */
static cJSON *summary(double slope, double half, const char *mechanism, double failed) {
  char text[1024];
  snprintf(text, sizeof(text),
           "{\"vlmload_version\": \"x\", \"rate\": {\"achieved\": 100},"
           " \"requests\": {\"completed\": 1000, \"failed\": %g}, \"errors\": {\"timeout\": %g},"
           " \"memory_analysis\": {\"series\": [{\"series\": \"rss_mb.s\", \"unit\": \"MB\","
           " \"x\": \"requests\", \"mechanism\": \"%s\", \"thresholds\": {\"level\": 0.95},"
           " \"ols\": {\"slope_per_1000\": %g, \"ci\": [%g, %g]},"
           " \"floor\": {\"fit\": {\"slope_per_1000\": null, \"ci\": [null, null]}}}]}}",
           failed, failed, mechanism, slope, slope - half, slope + half);
  cJSON *o = cJSON_Parse(text);
  ASSERT(o != NULL);
  return o;
}

static const vl_compare_fig_t *find(const vl_compare_fig_t *v, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].name, name) == 0)
      return &v[i];
  return NULL;
}

/* The figures of two summaries: a slope from 10 to 40 (each +/- 1.96) is worse by 30 +/- 2.77;
 * a floor neither has is left out; the mechanisms compare as words; 0 errors against 30 of 1000
 * is worse. */
TEST_IMPL(compare_runs) {
  vl_compare_opts_t o;
  vl_compare_opts_init(&o);
  cJSON *a = summary(10, 1.959964, "leak", 0), *b = summary(40, 1.959964, "cache", 30);
  size_t n;
  vl_compare_fig_t *v = vl_compare_runs(a, b, &o, &n);
  const vl_compare_fig_t *g = find(v, n, "slope:rss_mb.s");
  ASSERT(g != NULL);
  ASSERT(fabs(g->diff - 30) < 1e-9 && fabs(g->hi - g->lo - 2 * 1.959964 * sqrt(2)) < 1e-4);
  ASSERT_EQ(g->word, VL_COMPARE_WORSE);
  ASSERT(find(v, n, "floor:rss_mb.s") == NULL);
  g = find(v, n, "mechanism:rss_mb.s");
  ASSERT(g != NULL);
  ASSERT_EQ(g->word, VL_COMPARE_CHANGED);
  ASSERT_STR_EQ(g->text_a, "leak");
  ASSERT_STR_EQ(g->text_b, "cache");
  g = find(v, n, "error_rate");
  ASSERT(g != NULL && fabs(g->diff - 3) < 1e-9);
  ASSERT_EQ(g->word, VL_COMPARE_WORSE);
  ASSERT(find(v, n, "errors.timeout") != NULL);
  ASSERT_EQ(find(v, n, "achieved_rate")->word, VL_COMPARE_SAME);
  free(v);
  /* The same mechanism is the same. */
  cJSON *c = summary(10.5, 1.959964, "leak", 0);
  v = vl_compare_runs(a, c, &o, &n);
  ASSERT_EQ(find(v, n, "mechanism:rss_mb.s")->word, VL_COMPARE_SAME);
  ASSERT_EQ(find(v, n, "slope:rss_mb.s")->word, VL_COMPARE_SAME);
  free(v);
  cJSON_Delete(a);
  cJSON_Delete(b);
  cJSON_Delete(c);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(compare_pct_constant),
    TEST_ENTRY(compare_pct_uniform),
    TEST_ENTRY(compare_pct_matches_resampling),
    TEST_ENTRY(compare_slope_interval),
    TEST_ENTRY(compare_words),
    TEST_ENTRY(compare_runs),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
