/* Leak analysis against series whose truth is known: the t quantile against table values, interval
 * coverage over seeded trials, Theil-Sen under outliers, and each verdict on a synthetic run. */
#include "task.h"
#include "vlmload/analyze.h"
#include "vlmload/dist.h"
#include "vlmload/common.h"

#include <cjson/cJSON.h>

/* Uniform in (0, 1) and standard normal (Box-Muller) from the harness's seeded generator. */
static double uniform(uint64_t *s) {
  return ((double)(task_rand(s) >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(uint64_t *s) {
  double u = uniform(s), v = uniform(s);
  return sqrt(-2 * log(u)) * cos(2 * 3.14159265358979323846 * v);
}

/* A synthetic run: a sample every `step` requests at 100 requests per second, memory from `mem`. */
typedef struct {
  double x[4096], y[4096], t[4096];
  size_t n;
  vl_flush_event_t fl[256];
  size_t nfl;
} synth_t;

/* base + leak per 1000 requests + fill per request since the last flush + N(0, sigma); a flush
 * every `every` requests (0: none). */
static void synth(synth_t *s, size_t n, double step, double base, double leak, double fill,
                  double every, double sigma, uint64_t seed) {
  memset(s, 0, sizeof(*s));
  uint64_t st = seed;
  double last_flush = 0;
  for (size_t i = 0; i < n; i++) {
    double x = (double)i * step;
    if (every > 0 && x > 0 && fmod(x, every) == 0) {
      last_flush = x;
      /* The flush happens just before the sample that sees the emptied cache. */
      s->fl[s->nfl++] = (vl_flush_event_t){1.7e12 + x * 10 - 5, x, NAN};
    }
    s->x[i] = x;
    s->t[i] = 1.7e12 + x * 10;
    s->y[i] = base + leak * x / 1000 + fill * (x - last_flush) + sigma * gauss(&st);
  }
  s->n = n;
}

static vl_series_t series_of(const synth_t *s, const char *name) {
  vl_series_t in = {.name = name,
                    .x = s->x,
                    .y = s->y,
                    .t_ms = s->t,
                    .n = s->n,
                    .flushes = s->fl,
                    .n_flushes = s->nfl};
  return in;
}

static vl_analysis_t analyse(const synth_t *s) {
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t a;
  vl_series_t in = series_of(s, "mem");
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  return a;
}

TEST_IMPL(tquantile_table) {
  /* Student's t table, two-sided 95% and a few others, to 3 decimals. */
  ASSERT_NEAR(vl_dist_tquantile(0.975, 1), 12.706, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.975, 2), 4.303, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.975, 3), 3.182, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.975, 5), 2.571, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.975, 10), 2.228, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.975, 20), 2.086, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.975, 30), 2.042, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.975, 120), 1.980, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.975, INFINITY), 1.960, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.95, 10), 1.812, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.9, 3), 1.638, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.995, 20), 2.845, 5e-4);
  ASSERT_NEAR(vl_dist_tquantile(0.9995, 4), 8.610, 5e-4);
  /* More digits where they are well known. */
  ASSERT_NEAR(vl_dist_tquantile(0.975, 1), 12.7062047, 1e-6);
  ASSERT_NEAR(vl_dist_tquantile(0.975, 10), 2.2281389, 1e-6);
  ASSERT_NEAR(vl_dist_tquantile(0.975, INFINITY), 1.959963985, 1e-9);
  ASSERT_NEAR(vl_dist_tquantile(0.975, 1e12), 1.959963985, 1e-9);
  /* Symmetry, the middle, and bad arguments. */
  ASSERT_NEAR(vl_dist_tquantile(0.025, 10), -2.2281389, 1e-6);
  ASSERT_EQ(vl_dist_tquantile(0.5, 7), 0.0);
  ASSERT(isnan(vl_dist_tquantile(0, 5)));
  ASSERT(isnan(vl_dist_tquantile(1, 5)));
  ASSERT(isnan(vl_dist_tquantile(0.9, 0)));
  ASSERT(isnan(vl_dist_tquantile(NAN, 3)));
}

TEST_IMPL(tquantile_inverts_cdf) {
  /* Fractional degrees of freedom come from effective sample sizes: the quantile must invert the
   * distribution there too, far into the tails. */
  const double dfs[] = {0.7, 1, 1.5, 2, 2.5, 3, 4.2, 7.3, 15, 48.6, 200, 5000};
  const double ps[] = {0.5001, 0.6, 0.75, 0.9, 0.95, 0.975, 0.99, 0.999, 0.99999};
  for (size_t i = 0; i < VL_ARRAY_SIZE(dfs); i++) {
    double prev = 0;
    for (size_t j = 0; j < VL_ARRAY_SIZE(ps); j++) {
      double t = vl_dist_tquantile(ps[j], dfs[i]);
      ASSERT(t > prev);
      prev = t;
      ASSERT_NEAR(vl_dist_tcdf(t, dfs[i]), ps[j], 1e-10);
      ASSERT_NEAR(vl_dist_tcdf(-t, dfs[i]), 1 - ps[j], 1e-10);
    }
  }
  /* t with one degree of freedom is Cauchy. */
  ASSERT_NEAR(vl_dist_tcdf(1, 1), 0.75, 1e-12);
}

TEST_IMPL(ols_exact_line) {
  double x[] = {0, 1, 2, 3, 4, 5}, y[6];
  for (int i = 0; i < 6; i++)
    y[i] = 3 + 0.5 * x[i];
  vl_fit_t f;
  ASSERT_INT_EQ(vl_analyze_ols(x, y, 6, 0.95, 1, &f), 0);
  ASSERT_NEAR(f.slope, 0.5, 1e-12);
  ASSERT_NEAR(f.intercept, 3, 1e-12);
  ASSERT_NEAR(f.r2, 1, 1e-12);
  ASSERT_NEAR(f.lo, 0.5, 1e-9);
  ASSERT_NEAR(f.hi, 0.5, 1e-9);
  ASSERT_UINT_EQ(f.n, 6);
  /* Too few points, or x that does not move. */
  ASSERT_INT_EQ(vl_analyze_ols(x, y, 1, 0.95, 1, &f), VL_EINVAL);
  double same[] = {2, 2, 2};
  ASSERT_INT_EQ(vl_analyze_ols(same, y, 3, 0.95, 1, &f), VL_EINVAL);
  ASSERT(isnan(f.slope));
  /* Two points: a slope, no interval. */
  ASSERT_INT_EQ(vl_analyze_ols(x, y, 2, 0.95, 1, &f), 0);
  ASSERT_NEAR(f.slope, 0.5, 1e-12);
  ASSERT(isnan(f.lo));
}

TEST_IMPL(ols_known_values) {
  /* A small data set worked by hand: Sxx = 10, Sxy = 19, b = 1.9, a = 0.3 (x mean 3, y mean 6),
   * SSE = 0.9, s^2 = 0.3, se = sqrt(0.03), 95% with 3 df: t = 3.182446. */
  double x[] = {1, 2, 3, 4, 5}, y[] = {2.1, 4.2, 6.0, 7.5, 10.2};
  vl_fit_t f;
  ASSERT_INT_EQ(vl_analyze_ols(x, y, 5, 0.95, 1, &f), 0);
  double sxy = 0, sse = 0;
  for (int i = 0; i < 5; i++)
    sxy += (x[i] - 3) * (y[i] - 6);
  double b = sxy / 10, a = 6 - 3 * b;
  for (int i = 0; i < 5; i++)
    sse += (y[i] - a - b * x[i]) * (y[i] - a - b * x[i]);
  double se = sqrt(sse / 3 / 10);
  ASSERT_NEAR(f.slope, b, 1e-12);
  ASSERT_NEAR(f.intercept, a, 1e-12);
  ASSERT_NEAR(f.hi - f.slope, 3.182446305 * se, 1e-8);
  ASSERT_NEAR(f.slope - f.lo, 3.182446305 * se, 1e-8);
  ASSERT_UINT_EQ((uint64_t)f.n_eff, 5); /* below VL_ANALYZE_AR1_MIN_N: never corrected */
}

/* Coverage of the slope's interval for a known slope of 2.0 MB per 1000 requests. */
TEST_IMPL(ols_coverage) {
  const int trials = 200;
  int covered_plain = 0, covered_adj = 0, covered_ts = 0;
  double sum = 0;
  for (int k = 0; k < trials; k++) {
    synth_t *s = malloc(sizeof(*s));
    synth(s, 100, 100, 500, 2.0, 0, 0, 3.0, 1000 + (uint64_t)k);
    vl_fit_t f, g, ts;
    ASSERT_INT_EQ(vl_analyze_ols(s->x, s->y, s->n, 0.95, 0, &f), 0);
    ASSERT_INT_EQ(vl_analyze_ols(s->x, s->y, s->n, 0.95, 1, &g), 0);
    ASSERT_INT_EQ(vl_analyze_theil_sen(s->x, s->y, s->n, 0.95, 1, 0, &ts), 0);
    covered_plain += f.lo * 1000 <= 2.0 && 2.0 <= f.hi * 1000;
    covered_adj += g.lo * 1000 <= 2.0 && 2.0 <= g.hi * 1000;
    covered_ts += ts.lo * 1000 <= 2.0 && 2.0 <= ts.hi * 1000;
    sum += f.slope * 1000;
    free(s);
  }
  fprintf(stderr, "coverage: OLS %d, OLS autocorr %d, Theil-Sen %d of %d\n", covered_plain,
          covered_adj, covered_ts, trials);
  ASSERT_NEAR(sum / trials, 2.0, 0.02);
  ASSERT(covered_plain >= 0.90 * trials && covered_plain <= 0.99 * trials);
  ASSERT(covered_adj >= 0.90 * trials && covered_adj <= 0.99 * trials);
  ASSERT(covered_ts >= 0.90 * trials && covered_ts <= 0.99 * trials);
}

/* With AR(1) noise the plain interval is far too narrow; the effective-size correction restores
 * most of the coverage. */
TEST_IMPL(ols_autocorrelated_noise) {
  const int trials = 200;
  int covered_plain = 0, covered_adj = 0;
  for (int k = 0; k < trials; k++) {
    uint64_t st = 77 + (uint64_t)k;
    double x[400], y[400], e = 0;
    for (int i = 0; i < 400; i++) {
      e = 0.8 * e + gauss(&st);
      x[i] = i * 10;
      y[i] = 100 + 0.001 * x[i] + e;
    }
    vl_fit_t f, g;
    vl_analyze_ols(x, y, 400, 0.95, 0, &f);
    vl_analyze_ols(x, y, 400, 0.95, 1, &g);
    ASSERT(g.n_eff < 400 && g.r1 > 0.5);
    covered_plain += f.lo <= 0.001 && 0.001 <= f.hi;
    covered_adj += g.lo <= 0.001 && 0.001 <= g.hi;
  }
  fprintf(stderr, "AR(1) 0.8 coverage: plain %d, corrected %d of %d\n", covered_plain, covered_adj,
          trials);
  ASSERT(covered_plain < 0.75 * trials);
  ASSERT(covered_adj >= 0.88 * trials);
}

TEST_IMPL(theil_sen_outliers) {
  /* 10% of the samples read 300 MB high, all in the second half: OLS is dragged off, Theil-Sen
   * stays near the true 2.0 MB per 1000 requests. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 200, 50, 800, 2.0, 0, 0, 1.0, 5);
  for (size_t i = 100; i < 200; i += 5)
    s->y[i] += 300;
  vl_fit_t ols, ts;
  ASSERT_INT_EQ(vl_analyze_ols(s->x, s->y, s->n, 0.95, 1, &ols), 0);
  ASSERT_INT_EQ(vl_analyze_theil_sen(s->x, s->y, s->n, 0.95, 1, 0, &ts), 0);
  fprintf(stderr, "outliers: OLS %.3f, Theil-Sen %.3f [%.3f, %.3f] MB/1k\n", ols.slope * 1000,
          ts.slope * 1000, ts.lo * 1000, ts.hi * 1000);
  ASSERT(fabs(ols.slope * 1000 - 2.0) > 1.0);
  ASSERT_NEAR(ts.slope * 1000, 2.0, 0.2);
  ASSERT(ts.lo * 1000 <= 2.0 + 0.2 && ts.hi * 1000 >= 2.0 - 0.2);
  free(s);
}

TEST_IMPL(theil_sen_exact_and_subsampled) {
  /* Exact line: every pairwise slope is the slope. Ties in x are left out. */
  double x[] = {0, 1, 1, 2, 3, 5, 8}, y[7];
  for (int i = 0; i < 7; i++)
    y[i] = 4 - 0.25 * x[i];
  vl_fit_t f;
  ASSERT_INT_EQ(vl_analyze_theil_sen(x, y, 7, 0.95, 1, 0, &f), 0);
  ASSERT_NEAR(f.slope, -0.25, 1e-12);
  ASSERT_NEAR(f.intercept, 4, 1e-12);
  ASSERT_NEAR(f.lo, -0.25, 1e-12);
  ASSERT_NEAR(f.hi, -0.25, 1e-12);
  /* The median of an even count of slopes: the pairs of {0,1,3} -> slopes 1, 2, 1.5 ... use a
   * hand-checked set: points (0,0), (1,1), (2,4): slopes 1, 2, 3 -> median 2. */
  double x3[] = {0, 1, 2}, y3[] = {0, 1, 4};
  ASSERT_INT_EQ(vl_analyze_theil_sen(x3, y3, 3, 0.95, 1, 0, &f), 0);
  ASSERT_NEAR(f.slope, 2, 1e-12);
  double x4[] = {0, 1, 2, 3}, y4[] = {0, 1, 4, 4};
  /* Slopes: 1, 2, 4/3, 3, 1.5, 0 -> sorted 0 1 4/3 1.5 2 3 -> median (4/3 + 1.5) / 2. */
  ASSERT_INT_EQ(vl_analyze_theil_sen(x4, y4, 4, 0.95, 1, 0, &f), 0);
  ASSERT_NEAR(f.slope, (4.0 / 3 + 1.5) / 2, 1e-12);
  /* Above the limit, an even subsample: 5000 points, 1000 kept, same answer on a line. */
  double *bx = malloc(5000 * sizeof(double)), *by = malloc(5000 * sizeof(double));
  uint64_t st = 9;
  for (int i = 0; i < 5000; i++) {
    bx[i] = i;
    by[i] = 7 + 0.003 * i + 0.1 * gauss(&st);
  }
  ASSERT_INT_EQ(vl_analyze_theil_sen(bx, by, 5000, 0.95, 1, 1000, &f), 0);
  ASSERT_UINT_EQ(f.n, 1000);
  ASSERT_NEAR(f.slope, 0.003, 1e-4);
  ASSERT(f.lo < 0.003 && f.hi > 0.003);
  /* All x equal: nothing to fit. */
  double same[] = {1, 1, 1};
  ASSERT_INT_EQ(vl_analyze_theil_sen(same, y, 3, 0.95, 1, 0, &f), VL_EINVAL);
  free(bx);
  free(by);
}

TEST_IMPL(interp) {
  double tk[] = {0, 10, 10, 20, 40}, xk[] = {0, 100, 150, 150, 350};
  double x = -1;
  ASSERT_INT_EQ(vl_analyze_interp(tk, xk, 5, 0, &x), 0);
  ASSERT_NEAR(x, 0, 0);
  ASSERT_INT_EQ(vl_analyze_interp(tk, xk, 5, 5, &x), 0);
  ASSERT_NEAR(x, 50, 1e-12);
  ASSERT_INT_EQ(vl_analyze_interp(tk, xk, 5, 10, &x), 0);
  ASSERT_NEAR(x, 150, 0); /* equal knots: the later one */
  ASSERT_INT_EQ(vl_analyze_interp(tk, xk, 5, 15, &x), 0);
  ASSERT_NEAR(x, 150, 1e-12);
  ASSERT_INT_EQ(vl_analyze_interp(tk, xk, 5, 30, &x), 0);
  ASSERT_NEAR(x, 250, 1e-12);
  ASSERT_INT_EQ(vl_analyze_interp(tk, xk, 5, 40, &x), 0);
  ASSERT_NEAR(x, 350, 0);
  x = -1;
  ASSERT_INT_EQ(vl_analyze_interp(tk, xk, 5, -0.001, &x), VL_ERANGE);
  ASSERT_INT_EQ(vl_analyze_interp(tk, xk, 5, 40.001, &x), VL_ERANGE);
  ASSERT_INT_EQ(vl_analyze_interp(tk, xk, 5, NAN, &x), VL_ERANGE);
  ASSERT_INT_EQ(vl_analyze_interp(tk, xk, 0, 0, &x), VL_ERANGE);
  ASSERT_NEAR(x, -1, 0);
}

TEST_IMPL(verdict_leak_without_flushes) {
  synth_t *s = malloc(sizeof(*s));
  synth(s, 200, 100, 1000, 2.0, 0, 0, 3.0, 42);
  vl_analysis_t a = analyse(s);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_GROWS);
  ASSERT_STR_EQ(a.basis, "overall");
  ASSERT(a.ols.lo <= 2.0 && 2.0 <= a.ols.hi);
  ASSERT(a.ts.lo <= 2.0 && 2.0 <= a.ts.hi);
  ASSERT_NEAR(a.ols.slope, 2.0, 0.2);
  ASSERT_UINT_EQ(a.n_windows, 0);
  ASSERT(strstr(a.reason, "cannot be told apart") != NULL);
  ASSERT(strstr(a.reason, "slows") == NULL); /* one slope from start to end */
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(verdict_sawtooth_returns) {
  /* The cache fills by 0.05 MB per request and is emptied every 2000 requests; no leak. The floor
   * interval covers 0 at its 95% rate; the verdict holds in every run, since a stray significant
   * floor slope is far too small to be material. */
  int covered = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    synth_t *s = malloc(sizeof(*s));
    synth(s, 400, 50, 2000, 0, 0.05, 2000, 2.0, seed);
    vl_analysis_t a = analyse(s);
    if (seed == 1)
      vl_analyze_print(stderr, &a);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "sawtooth-returns");
    ASSERT_STR_EQ(a.basis, "floor");
    ASSERT_UINT_EQ(a.n_windows, 9);
    ASSERT_UINT_EQ(a.n_flushes, 9);
    covered += a.floor.lo <= 0 && 0 <= a.floor.hi;
    ASSERT_NEAR(a.floor.slope, 0, 0.5);
    ASSERT_NEAR(a.within.slope, 50, 1);
    ASSERT_NEAR(a.rise_mean, 0.05 * 1950, 3);
    /* The overall slope is positive (the sawtooth climbs): only the floors tell. */
    for (size_t w = 0; w < a.n_windows; w++) {
      ASSERT_NEAR(a.windows[w].x, 2000.0 * (double)(w + 1), 0);
      ASSERT_NEAR(a.windows[w].floor, 2000, 8);
      ASSERT_UINT_EQ(a.windows[w].n, 40);
    }
    vl_analyze_free(&a);
    free(s);
  }
  ASSERT(covered >= 17);
}

TEST_IMPL(trailing_flush_window_left_out) {
  /* The run ends at a flush: its last sample is read as the cache is being dropped and still
   * holds it (the flush's x is the sample's own), and no request completes after it. That window
   * says nothing per request; were its sample taken for a floor, a full cache would pass for one
   * and the returning cache would read as growth. */
  for (uint64_t seed = 1; seed <= 10; seed++) {
    synth_t *s = malloc(sizeof(*s));
    synth(s, 400, 50, 2000, 0, 0.05, 2000, 2.0, seed);
    double last = s->x[s->n - 1];
    s->fl[s->nfl++] = (vl_flush_event_t){s->t[s->n - 1] - 1, last, NAN};
    vl_analysis_t a = analyse(s);
    ASSERT_UINT_EQ(a.n_flushes, 10);
    ASSERT_UINT_EQ(a.n_windows, 9);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "sawtooth-returns");
    ASSERT_NEAR(a.floor.slope, 0, 0.5);
    vl_analyze_free(&a);
    free(s);
  }
}

TEST_IMPL(verdict_sawtooth_with_leak) {
  /* The same cache plus a leak of 3 MB per 1000 requests that no flush gives back. */
  int covered = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    synth_t *s = malloc(sizeof(*s));
    synth(s, 400, 50, 2000, 3.0, 0.05, 2000, 2.0, seed);
    vl_analysis_t a = analyse(s);
    if (seed == 1)
      vl_analyze_print(stderr, &a);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "grows");
    ASSERT_STR_EQ(a.basis, "floor");
    ASSERT_NEAR(a.floor.slope, 3.0, 0.6);
    covered += a.floor.lo <= 3.0 && 3.0 <= a.floor.hi;
    ASSERT(strstr(a.reason, "post-flush floor rises") != NULL);
    vl_analyze_free(&a);
    free(s);
  }
  /* The floor of a window is the smallest of a few noisy samples: biased low by the same amount in
   * every window, so its slope is unbiased and its interval covers the truth. */
  ASSERT(covered >= 17);
}

TEST_IMPL(verdict_flat) {
  for (uint64_t seed = 1; seed <= 50; seed++) {
    synth_t *s = malloc(sizeof(*s));
    synth(s, 300, 50, 4000, 0, 0, seed % 2 ? 2500 : 0, 4.0, seed);
    vl_analysis_t a = analyse(s);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "flat");
    vl_analyze_free(&a);
    free(s);
  }
  /* Constant memory: slope 0 with a zero-width interval, R^2 undefined. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 50, 100, 512, 0, 0, 1000, 0, 1);
  vl_analysis_t a = analyse(s);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_FLAT);
  ASSERT_NEAR(a.ols.slope, 0, 1e-12);
  ASSERT(isnan(a.ols.r2));
  vl_analyze_free(&a);
  /* The same at a value binary cannot hold, sampled at uneven counts (as a server's resident set
   * that never moved): the rounding of its mean is no autocorrelation. */
  for (size_t i = 0; i < s->n; i++) {
    s->x[i] = 45 + (double)i * 97 + (double)(i % 3) * 7;
    s->y[i] = 69.269531;
  }
  a = analyse(s);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "flat");
  ASSERT(a.ols.slope == 0 && a.ols.lo == 0 && a.ols.hi == 0 && a.ols.r1 == 0);
  ASSERT_NEAR(a.ols.n_eff, (double)s->n, 1e-9);
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(verdict_small_growth_below_threshold) {
  /* A real but tiny rise: 0.05 MB per 1000 requests on 20 GB, almost without noise. Significant,
   * but 0.25 MB over the run is far below 1% of the mean and the slope below 1 MB/1000. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 100, 50, 20000, 0.05, 0, 0, 0.001, 3);
  vl_analysis_t a = analyse(s);
  ASSERT(a.ols.lo > 0);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_FLAT);
  vl_analyze_free(&a);
  /* The slope rule set low enough does not make it material while the absolute floor stands: 0.25
   * MB over the run is below 8 MB. */
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  o.min_slope = 0.01;
  vl_series_t in = series_of(s, "mem");
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_FLAT);
  vl_analyze_free(&a);
  /* With the floor off, the slope rule alone catches it. */
  o.min_growth_mb = 0;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_GROWS);
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(verdict_insufficient) {
  synth_t *s = malloc(sizeof(*s));
  synth(s, 5, 100, 1000, 50, 0, 0, 1, 1);
  vl_analysis_t a = analyse(s);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "insufficient-data");
  ASSERT_UINT_EQ(a.n, 5);
  ASSERT(strstr(a.reason, "at least 10") != NULL);
  vl_analyze_free(&a);

  /* One sample, and one flush window, in words: never "1 samples" or "1 windows". */
  synth(s, 1, 100, 1000, 50, 0, 0, 1, 1);
  a = analyse(s);
  ASSERT_STR_EQ(a.reason, "1 sample after the warm-up; at least 10 needed");
  vl_analyze_free(&a);
  synth(s, 40, 100, 1000, 50, 0, 2000, 1, 1);
  a = analyse(s);
  ASSERT_UINT_EQ(a.n_windows, 1);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  vl_analyze_print(f, &a);
  fclose(f);
  ASSERT(strstr(buf, "post-flush floor: 1 window after the warm-up, 3 needed") != NULL);
  free(buf);
  vl_analyze_free(&a);

  /* Enough rows, but missing values leave too few. */
  synth(s, 40, 100, 1000, 50, 0, 0, 1, 1);
  for (size_t i = 0; i < 35; i++)
    s->y[i] = NAN;
  a = analyse(s);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_INSUFFICIENT);
  vl_analyze_free(&a);

  /* Work that does not advance. */
  synth(s, 40, 100, 1000, 50, 0, 0, 1, 1);
  for (size_t i = 0; i < 40; i++)
    s->x[i] = 7;
  a = analyse(s);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_INSUFFICIENT);
  ASSERT(strstr(a.reason, "does not advance") != NULL);
  vl_analyze_free(&a);

  /* No samples at all. */
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_series_t in = {.name = "empty"};
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_INSUFFICIENT);
  cJSON *j = vl_analyze_json(&a);
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(j, "mean")));
  cJSON_Delete(j);
  vl_analyze_free(&a);

  /* Bad arguments. */
  ASSERT_INT_EQ(vl_analyze_series(&a, NULL, &o), VL_EINVAL);
  in = (vl_series_t){.name = "x", .n = 3};
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), VL_EINVAL);
  o.level = 1;
  in = series_of(s, "mem");
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), VL_EINVAL);
  free(s);
}

TEST_IMPL(warmup_cut) {
  /* Memory climbs 200 MB while the server warms up (first 1000 requests), then holds. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 300, 50, 3000, 0, 0, 0, 1.0, 8);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += fmin(s->x[i], 1000) * 0.2;
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t a;
  vl_series_t in = series_of(s, "mem");
  /* Uncut, the warm-up drags the slope up. The bend leaves residuals that follow each other
   * (lag-1 autocorrelation near 1), which widens the interval past 0: the shape says it, memory
   * rose by 200 MB and levelled off at 1000 requests. */
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  fprintf(stderr, "uncut warm-up: OLS %.3f MB/1k, r1 %.3f\n", a.ols.slope, a.ols.r1);
  ASSERT(a.ols.slope > 2); /* the truth after warm-up is 0 */
  ASSERT(a.ols.r1 > 0.9);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "levels-off");
  ASSERT_NEAR(a.level_x, 1000, 50);
  ASSERT_NEAR(a.level_rise, 200, 10);
  vl_analyze_free(&a);
  o.autocorr = 0;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_LEVELS_OFF);
  vl_analyze_free(&a);
  o.autocorr = 1;
  in.warmup_x = 1000;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_FLAT);
  ASSERT_NEAR(a.ols.slope, 0, 0.1);
  ASSERT_NEAR(a.x_first, 1000, 0);
  ASSERT_UINT_EQ(a.n, 280);
  vl_analyze_free(&a);
  /* The same cut by time: 1000 requests at 100 per second. */
  in.warmup_x = 0;
  in.warmup_t_ms = 1.7e12 + 10000;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_FLAT);
  ASSERT_UINT_EQ(a.n, 280);
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(warmup_drops_partial_window) {
  /* Flushes every 1000 requests, warm-up ends at 1500: the window opened at 1000 is cut and left
   * out of the floors; the ones from 2000 on count. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 200, 50, 2000, 0, 0.05, 1000, 1.0, 4);
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t a;
  vl_series_t in = series_of(s, "mem");
  in.warmup_x = 1500;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_UINT_EQ(a.n_windows, 8);
  ASSERT_NEAR(a.windows[0].x, 2000, 0);
  ASSERT_UINT_EQ(a.n_flushes, 8);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_SAWTOOTH);
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(windows_by_work_without_times) {
  synth_t *s = malloc(sizeof(*s));
  synth(s, 400, 50, 2000, 3.0, 0.05, 2000, 1.0, 12);
  for (size_t i = 0; i < s->nfl; i++)
    s->fl[i].t_ms = NAN;
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t a;
  vl_series_t in = series_of(s, "mem");
  in.t_ms = NULL;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_UINT_EQ(a.n_windows, 9);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_GROWS);
  ASSERT_NEAR(a.floor.slope, 3.0, 0.6);
  vl_analyze_free(&a);
  free(s);
}

/* Attribution on a mixed run whose truth is known: each step sends 10 requests, each with an image
 * (of a random size) or without at even odds, and memory grows 64 KiB per image only. The images
 * term finds it, the text-only and megapixel terms find nothing; a column that does not vary is
 * left out and said so, and images all of one size leave the megapixel term out. */
TEST_IMPL(attribution_mixed_run) {
  enum { N = 600 };
  static double x[N], y[N], img[N], txt[N], mp[N], same[N], zero[N];
  for (int round = 0; round < 3; round++) {
    uint64_t st = 77 + (uint64_t)round;
    double ni = 0, nt = 0, pix = 0;
    for (size_t i = 0; i < N; i++) {
      for (int k = 0; k < 10; k++) {
        if (uniform(&st) < 0.5) {
          ni++;
          double w = 256 + 768 * uniform(&st), h = 256 + 768 * uniform(&st);
          pix += w * h / 1e6;
        } else {
          nt++;
        }
      }
      x[i] = (double)(i + 1) * 10;
      img[i] = ni;
      txt[i] = nt;
      mp[i] = pix;
      same[i] = ni * 0.25;
      zero[i] = 0;
      y[i] = 500 + 0.0625 * ni + 0.2 * gauss(&st);
    }
    vl_series_t in = {.name = "rss_mb.server", .x = x, .y = y, .n = N};
    in.images = img;
    in.text_only = round == 1 ? zero : txt;
    in.megapixels = round == 2 ? same : mp;
    vl_analyze_opts_t o;
    vl_analyze_opts_init(&o);
    vl_analysis_t a;
    ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
    const vl_attribution_t *at = &a.attr;
    ASSERT(at->tried && !at->why);
    ASSERT_UINT_EQ(at->n, N);
    ASSERT(at->images.dropped == NULL);
    /* within two interval widths (about four standard errors) of the truth */
    ASSERT(at->images.lo < at->images.value && at->images.value < at->images.hi);
    ASSERT(fabs(at->images.value - 62.5) < 2 * (at->images.hi - at->images.lo));
    ASSERT(fabs(at->images.value - 62.5) < 3);
    if (round == 1) {
      ASSERT_STR_EQ(at->text.dropped, "constant");
      ASSERT(isnan(at->text.value));
    } else {
      ASSERT(at->text.dropped == NULL);
      ASSERT(fabs(at->text.value) < 2 * (at->text.hi - at->text.lo));
      ASSERT(fabs(at->text.value) < 3);
    }
    if (round == 2) {
      ASSERT_STR_EQ(at->mpix.dropped, "constant"); /* no pixels beyond the one size */
      ASSERT_NEAR(at->mean_mp, 0.25, 1e-9);
    } else {
      ASSERT(at->mpix.dropped == NULL);
      ASSERT(fabs(at->mpix.value) < 2 * (at->mpix.hi - at->mpix.lo));
      ASSERT(at->mean_mp > 0.35 && at->mean_mp < 0.47);
    }
    cJSON *j = vl_analyze_json(&a);
    cJSON *aj = cJSON_GetObjectItem(j, "attribution");
    cJSON *im = cJSON_GetObjectItem(aj, "per_1000_images_mb");
    ASSERT_NEAR(cJSON_GetObjectItem(im, "value")->valuedouble, at->images.value, 1e-9);
    ASSERT(cJSON_IsNull(cJSON_GetObjectItem(im, "dropped")));
    ASSERT(cJSON_GetObjectItem(aj, "per_1000_text_requests_mb") != NULL);
    ASSERT(cJSON_GetObjectItem(aj, "per_megapixel_mb") != NULL);
    cJSON_Delete(j);
    vl_analyze_free(&a);
  }
  /* Without regressors, no attribution: null in the JSON. */
  vl_series_t in = {.name = "m", .x = x, .y = y, .n = N};
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t a;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT(!a.attr.tried);
  cJSON *j = vl_analyze_json(&a);
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(j, "attribution")));
  cJSON_Delete(j);
  vl_analyze_free(&a);
}

TEST_IMPL(second_axis_images) {
  /* Two images per request: the per-image slopes are half the per-request ones. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 400, 50, 2000, 3.0, 0.05, 2000, 1.0, 21);
  double *img = malloc(s->n * sizeof(double));
  for (size_t i = 0; i < s->n; i++)
    img[i] = 2 * s->x[i];
  for (size_t i = 0; i < s->nfl; i++)
    s->fl[i].x2 = 2 * s->fl[i].x;
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t a;
  vl_series_t in = series_of(s, "mem");
  in.x2 = img;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_STR_EQ(a.x2_name, "images");
  ASSERT_NEAR(a.ols2.slope, a.ols.slope / 2, 1e-9);
  ASSERT_NEAR(a.ts2.slope, a.ts.slope / 2, 1e-9);
  ASSERT_NEAR(a.floor2.slope, a.floor.slope / 2, 1e-9);
  cJSON *j = vl_analyze_json(&a);
  cJSON *sa = cJSON_GetObjectItem(j, "second_axis");
  ASSERT(sa != NULL);
  ASSERT_STR_EQ(cJSON_GetObjectItem(sa, "x")->valuestring, "images");
  cJSON_Delete(j);
  vl_analyze_free(&a);
  free(img);
  free(s);
}

TEST_IMPL(json_and_text) {
  synth_t *s = malloc(sizeof(*s));
  synth(s, 400, 50, 2000, 3.0, 0.05, 2000, 2.0, 1);
  vl_analysis_t a = analyse(s);
  cJSON *j = vl_analyze_json(&a);
  ASSERT_STR_EQ(cJSON_GetObjectItem(j, "series")->valuestring, "mem");
  ASSERT_STR_EQ(cJSON_GetObjectItem(j, "verdict")->valuestring, "grows");
  ASSERT_STR_EQ(cJSON_GetObjectItem(j, "unit")->valuestring, "MB");
  ASSERT_STR_EQ(cJSON_GetObjectItem(j, "basis")->valuestring, "floor");
  cJSON *floor = cJSON_GetObjectItem(j, "floor");
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(floor, "windows")), 9);
  cJSON *fit = cJSON_GetObjectItem(floor, "fit");
  ASSERT_NEAR(cJSON_GetObjectItem(fit, "slope_per_1000")->valuedouble, a.floor.slope, 1e-9);
  cJSON *ci = cJSON_GetObjectItem(fit, "ci");
  ASSERT_INT_EQ(cJSON_GetArraySize(ci), 2);
  ASSERT_NEAR(cJSON_GetArrayItem(ci, 0)->valuedouble, a.floor.lo, 1e-9);
  cJSON *th = cJSON_GetObjectItem(j, "thresholds");
  ASSERT_NEAR(cJSON_GetObjectItem(th, "min_growth_frac")->valuedouble, 0.01, 0);
  ASSERT_NEAR(cJSON_GetObjectItem(th, "min_growth_mb")->valuedouble, 8, 0);
  ASSERT_NEAR(cJSON_GetObjectItem(th, "min_growth")->valuedouble, fmax(8, 0.01 * a.y_mean), 1e-9);
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(j, "run_longer")));
  ASSERT_NEAR(cJSON_GetObjectItem(th, "min_slope_per_1000")->valuedouble, 1.0, 0);
  ASSERT_NEAR(cJSON_GetObjectItem(th, "level")->valuedouble, 0.95, 0);
  ASSERT(cJSON_GetObjectItem(j, "second_axis") == NULL);
  char *txt = cJSON_PrintUnformatted(j);
  ASSERT(strstr(txt, "nan") == NULL && strstr(txt, "inf") == NULL);
  cJSON_free(txt);
  cJSON_Delete(j);

  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  vl_analyze_print(f, &a);
  fclose(f);
  ASSERT(strstr(buf, "mem: grows -- the post-flush floor rises") == buf);
  ASSERT(strstr(buf, "Theil-Sen") != NULL);
  ASSERT(strstr(buf, "thresholds: material if growth over the run >= 8 MB and either >= 1% of the "
                     "mean (") != NULL);
  ASSERT(strstr(buf, " or at a slope >= 1 MB/1000 requests; ") != NULL);
  free(buf);
  vl_analyze_free(&a);
  free(s);
}

/* The label for a plot's legend, as the verdict says it. */
static void label_of(const vl_analysis_t *a, char *out, size_t n) {
  vl_analyze_label(a, out, n);
  fprintf(stderr, "label: %s\n", out);
}

TEST_IMPL(verdict_levels_off) {
  /* A real GPU server: memory rises 364 MB over the first 2700 requests, then holds, over 8000
   * requests sampled every 40; 0.5 MB of noise. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 200, 40, 3000, 0, 0, 0, 0.5, 5);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += 364 * fmin(s->x[i], 2700) / 2700;
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t a;
  vl_series_t in = series_of(s, "rss_mb.scheduler");
  in.t0_ms = 1.7e12;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  vl_analyze_print(stderr, &a);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "levels-off");
  ASSERT_STR_EQ(a.level_on, "samples");
  ASSERT_NEAR(a.level_x, 2700, 40);
  ASSERT_NEAR(a.level_rise, 364, 5);
  ASSERT_NEAR(a.rise.slope, 364 / 2.7, 2);
  ASSERT_NEAR(a.last_half.slope, 0, 0.05);
  /* 100 requests a second: 27 s into the run. */
  ASSERT_NEAR((a.level_t_ms - 1.7e12) / 1000, 27, 0.4);
  ASSERT(strstr(a.reason, "levels off at about 2") != NULL);
  ASSERT(strstr(a.reason, "s into the run") != NULL);
  char label[160];
  label_of(&a, label, sizeof(label));
  ASSERT(strstr(label, "levels-off at 2") == label);
  ASSERT(strstr(label, "flat") == NULL);
  cJSON *j = vl_analyze_json(&a);
  cJSON *lv = cJSON_GetObjectItem(j, "levels_off");
  ASSERT(lv != NULL);
  ASSERT_NEAR(cJSON_GetObjectItem(lv, "x")->valuedouble, a.level_x, 0);
  ASSERT_NEAR(cJSON_GetObjectItem(lv, "s_into_run")->valuedouble, 27, 0.4);
  cJSON_Delete(j);
  vl_analyze_free(&a);

  /* A leak that never stops does not level off: the last half climbs as fast as the first. */
  synth(s, 200, 40, 3000, 20.0, 0, 0, 0.5, 6);
  in = series_of(s, "mem");
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "grows");
  vl_analyze_free(&a);

  /* Floors that rise and stop: a leak that stopped, under a cache every flush returns. */
  synth(s, 400, 50, 2000, 0, 0.05, 1000, 1.0, 7);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += 0.02 * fmin(s->x[i], 5000);
  in = series_of(s, "mem");
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  vl_analyze_print(stderr, &a);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "levels-off");
  ASSERT_STR_EQ(a.level_on, "floor");
  ASSERT_NEAR(a.level_x, 5000, 0);
  ASSERT_NEAR(a.level_rise, 80, 5);
  vl_analyze_free(&a);
  free(s);
}

/* Memory that moves in steps, as a server's resident set does when its allocator takes arenas: n
 * samples every `step` requests from 200, each a step up with probability p of 2 to 8 MB before
 * `knee` and with probability p_late of lo_mb to hi_mb after it, with 0.2 MB of noise. */
static void staircase(synth_t *s, size_t n, double step, double knee, double p, double p_late,
                      double lo_mb, double hi_mb, uint64_t seed) {
  memset(s, 0, sizeof(*s));
  uint64_t st = seed;
  double level = 2000;
  for (size_t i = 0; i < n; i++) {
    double x = 200 + (double)i * step;
    int early = x < knee;
    if (uniform(&st) < (early ? p : p_late))
      level += early ? 2 + 6 * uniform(&st) : lo_mb + (hi_mb - lo_mb) * uniform(&st);
    s->x[i] = x;
    s->t[i] = 1.7e12 + x * 100;
    s->y[i] = level + 0.2 * gauss(&st);
  }
  s->n = n;
}

TEST_IMPL(verdict_levels_off_in_steps) {
  /* A GPU server's text-only run: about 110 MB in steps over the first 750 of 2800 requests, then
   * a step of half a megabyte now and then; 760 samples. The residuals about one line follow each
   * other for hundreds of samples, so the overall fit's AR(1) correction leaves a handful; the
   * levels-off fit, on the means of 16 blocks, shows the rise and its end. */
  synth_t *s = malloc(sizeof(*s));
  for (uint64_t seed = 1; seed <= 5; seed++) {
    staircase(s, 760, 3.68, 950, 0.108, 0.003, 0.2, 0.5, seed);
    vl_analysis_t a = analyse(s);
    vl_analyze_print(stderr, &a);
    ASSERT(a.ols.n_eff < 5);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "levels-off");
    ASSERT_INT_EQ((int)a.level_blocks, 16);
    ASSERT_NEAR(a.level_x, 950, 150);
    ASSERT_NEAR(a.level_rise, s->y[200] - s->y[0], 25);
    ASSERT_INT_EQ(a.level_creeps, 0);
    ASSERT(strstr(a.reason, "(fitted on the means of 16 blocks)") != NULL);
    ASSERT(strstr(a.reason, "creeps") == NULL);
    vl_analyze_free(&a);
  }

  /* The same rise, then small steps that go on adding about 9 MB per 1000 requests, some 12 MB
   * after the knot (more than the 8 MB floor, less than the 1% of the mean that T is here): it
   * levels off, and the verdict says it still creeps. */
  for (uint64_t seed = 1; seed <= 5; seed++) {
    staircase(s, 760, 3.68, 950, 0.108, 0.08, 0.3, 0.5, seed);
    vl_analysis_t a = analyse(s);
    vl_analyze_print(stderr, &a);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "levels-off");
    ASSERT_INT_EQ(a.level_creeps, 1);
    ASSERT(a.tail.lo > 0);
    /* Steps of 0.4 MB on 8% of samples 3.68 requests apart: 8.7 MB per 1000 expected. */
    ASSERT(a.tail.slope >= 5 && a.tail.slope < 13);
    ASSERT(strstr(a.reason, "; it still creeps by a material slope") != NULL);
    /* The whole sentence fits: it ends as written, not cut off. */
    ASSERT(strstr(a.reason, "which a longer run tells apart") != NULL);
    char label[160];
    label_of(&a, label, sizeof(label));
    ASSERT(strstr(label, "levels-off at ") == label);
    ASSERT(strstr(label, ", creeps +") != NULL);
    cJSON *j = vl_analyze_json(&a);
    ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "levels_off"), "creeps")));
    cJSON_Delete(j);
    vl_analyze_free(&a);
  }

  /* Steps that never slow down do not level off. */
  for (uint64_t seed = 1; seed <= 5; seed++) {
    staircase(s, 760, 3.68, 1e9, 0.108, 0, 0, 0, seed);
    vl_analysis_t a = analyse(s);
    vl_analyze_print(stderr, &a);
    ASSERT(a.verdict != VL_VERDICT_LEVELS_OFF);
    vl_analyze_free(&a);
  }
  free(s);
}

TEST_IMPL(verdict_inconclusive_few_effective_samples) {
  /* Memory that swings 20 MB either way, four times over 8000 requests, on 3000 MB: its residuals
   * about one line follow each other so closely that 200 samples carry about 3. That is no
   * evidence of flatness, and no rise that stops (the swing adds less than T, 30 MB). */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 200, 40, 3000, 0, 0, 0, 2.0, 5);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += 20 * sin(2 * 3.14159265358979323846 * s->x[i] / 2000);
  vl_analysis_t a = analyse(s);
  vl_analyze_print(stderr, &a);
  ASSERT(a.ols.n_eff < 5 && a.ols.n_eff > 2);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "inconclusive");
  char want[64];
  snprintf(want, sizeof(want), "%.1f effective samples of 200, 5 needed", a.ols.n_eff);
  ASSERT(strstr(a.reason, want) == a.reason);
  ASSERT(strstr(a.reason, "strays from one line") != NULL);
  char label[160];
  label_of(&a, label, sizeof(label));
  ASSERT(strstr(label, "inconclusive (") == label);
  vl_analyze_free(&a);

  /* Independent samples, but too few and too noisy to rule growth out: 12 samples with 20 MB of
   * noise on 1000 MB. */
  synth(s, 12, 100, 1000, 0, 0, 0, 20, 3);
  a = analyse(s);
  vl_analyze_print(stderr, &a);
  ASSERT(a.ols.lo < 0);
  ASSERT(a.ols.hi * 1.1 >= a.threshold);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "inconclusive");
  ASSERT(strstr(a.reason, "admits material growth") != NULL);
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(verdict_grows_by_steps_when_not_linear) {
  /* A floor that rises after every flush, by less each time (+3.4 GB over 3000 requests,
   * the shape of a heap that fragments): the residuals about one line follow the curve, so the
   * line leaves too few effective samples; the steps still say growth, in every quarter. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 600, 5, 3900, 0, 1, 50, 0.3, 11);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += 3400 * sqrt(floor(s->x[i] / 50) * 50 / 3000);
  vl_analysis_t a = analyse(s);
  vl_analyze_print(stderr, &a);
  ASSERT_STR_EQ(a.basis, "floor");
  ASSERT(a.floor.n_eff < 5);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "grows");
  ASSERT_INT_EQ((long long)a.steps, (long long)a.n_windows - 1);
  ASSERT_INT_EQ((long long)a.steps_up, (long long)a.steps);
  ASSERT(a.steps_p < 1e-3);
  char want[96];
  snprintf(want, sizeof(want), "but at %zu of its %zu steps that moved", a.steps, a.steps);
  ASSERT(strstr(a.reason, want) != NULL);
  /* and it says the rise slows, with the slopes of both halves */
  ASSERT(a.last_half.hi < a.first_half.lo);
  snprintf(want, sizeof(want), "; it slows: %+.4g MB per 1000 requests over the first half",
           a.first_half.slope);
  ASSERT(strstr(a.reason, want) != NULL);
  vl_analyze_free(&a);

  /* The same floor, flat from the third quarter on: the last quarter's steps go either way, and
   * a line with too few effective samples says nothing. */
  synth(s, 600, 5, 3900, 0, 1, 50, 0.3, 11);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += 3400 * sqrt(fmin(floor(s->x[i] / 50) * 50, 2000) / 3000);
  a = analyse(s);
  vl_analyze_print(stderr, &a);
  ASSERT(a.verdict != VL_VERDICT_GROWS);
  ASSERT(a.steps_p > 0.05);
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(verdict_flat_when_it_never_moved_enough) {
  /* A resident set that takes one more 32 KiB page halfway through a run and otherwise holds:
   * its samples are all alike, so a line through them has almost no effective samples, but no
   * material growth fits between its smallest and its largest value. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 130, 20, 69.2266, 0, 0, 0, 0, 1);
  for (size_t i = s->n / 2; i < s->n; i++)
    s->y[i] += 0.03125;
  vl_analysis_t a = analyse(s);
  vl_analyze_print(stderr, &a);
  ASSERT(a.ols.n_eff < 5);
  ASSERT_NEAR(a.basis_range, 0.03125, 1e-9);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "flat");
  ASSERT(strstr(a.reason, "the memory moved 0.03125 MB in all") != NULL);
  vl_analyze_free(&a);

  /* The same step, ten times the threshold: a step that large is no evidence of flatness. */
  synth(s, 130, 20, 69.2266, 0, 0, 0, 0, 1);
  for (size_t i = s->n / 2; i < s->n; i++)
    s->y[i] += 7;
  a = analyse(s);
  vl_analyze_print(stderr, &a);
  ASSERT(a.ols.n_eff < 5);
  ASSERT(a.verdict != VL_VERDICT_FLAT);
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(peak_series_no_growth_verdict) {
  /* VmHWM over a cache that fills by 0.05 MB per request and is flushed every 2000: the resident
   * set is a sawtooth that returns, its high-water mark the running peak of it. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 400, 50, 2000, 0, 0.05, 2000, 0, 1);
  double *hwm = malloc(s->n * sizeof(double)), top = 0;
  for (size_t i = 0; i < s->n; i++)
    hwm[i] = top = fmax(top, s->y[i] + 0.001 * (double)i);
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t a;
  vl_series_t in = series_of(s, "hwm_mb.server");
  in.y = hwm;
  in.peak = 1;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  vl_analyze_print(stderr, &a);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "peak");
  ASSERT_NEAR(a.y_max, hwm[s->n - 1], 0);
  ASSERT(strstr(a.reason, "a high-water mark only rises") == a.reason);
  ASSERT(isnan(a.ols.slope));
  char label[160];
  label_of(&a, label, sizeof(label));
  ASSERT(strstr(label, "peak 2") == label);
  cJSON *j = vl_analyze_json(&a);
  cJSON *pk = cJSON_GetObjectItem(j, "peak");
  ASSERT_NEAR(cJSON_GetObjectItem(pk, "value")->valuedouble, hwm[s->n - 1], 0);
  ASSERT_NEAR(cJSON_GetObjectItem(pk, "x")->valuedouble, a.peak_x, 0);
  cJSON_Delete(j);
  vl_analyze_free(&a);
  /* The resident set itself is still judged. */
  in = series_of(s, "rss_mb.server");
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "sawtooth-returns");
  vl_analyze_free(&a);
  free(hwm);
  free(s);
}

/* A cache of `fill` MB per request emptied by a flush every 50 requests, sampled every 10
 * requests as a monitor samples a server at 50 requests/s every 200 ms: each sample lands a
 * uniform 0 to 10 requests after the moment its x says, so each window's floor (its first sample,
 * read some requests after the flush) scatters by up to 5 MB, as the mock server's do. `leak` MB
 * per 1000 requests on top, 0.3 MB of noise, 150 samples (1500 requests). */
static void short_sawtooth(synth_t *s, double base, double fill, double leak, uint64_t seed) {
  memset(s, 0, sizeof(*s));
  uint64_t st = seed;
  for (size_t i = 0; i < 150; i++) {
    double x = 10.0 * (double)i;
    if (i > 0 && fmod(x, 50) == 0)
      s->fl[s->nfl++] = (vl_flush_event_t){1.7e12 + x * 20 - 5, x, NAN};
    s->x[i] = x;
    s->t[i] = 1.7e12 + x * 20;
    s->y[i] = base + leak * x / 1000 + fill * (fmod(x, 50) + 10 * uniform(&st)) + 0.3 * gauss(&st);
  }
  s->n = 150;
}

TEST_IMPL(verdict_sawtooth_holds_on_a_short_run) {
  /* The README's main job against the mock, less its leak: a pure cache of 0.5 MB per request,
   * 30 s at 50 requests/s, 30 flush windows. The floors scatter by some 1.5 MB, so the floor
   * slope's interval admits a few MB of growth over the run: far above 1% of the mean (0.3 MB),
   * which left it inconclusive; below the absolute floor of 8 MB, so it is the sawtooth it is. */
  int old_inconclusive = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    synth_t *s = malloc(sizeof(*s));
    short_sawtooth(s, 16, 0.5, 0, seed);
    vl_analysis_t a = analyse(s);
    if (seed == 1)
      vl_analyze_print(stderr, &a);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "sawtooth-returns");
    ASSERT_STR_EQ(a.basis, "floor");
    ASSERT_NEAR(a.threshold, 8, 0);
    ASSERT_NEAR(a.floor_abs, 8, 0);
    ASSERT(a.opts.min_growth_frac * a.y_mean < 0.5);
    vl_analyze_free(&a);
    /* Judged by 1% of the mean alone, as before the floor, the same runs are mostly inconclusive.
     */
    vl_analyze_opts_t o;
    vl_analyze_opts_init(&o);
    o.min_growth_mb = 0;
    vl_series_t in = series_of(s, "mem");
    ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
    old_inconclusive += a.verdict == VL_VERDICT_INCONCLUSIVE;
    vl_analyze_free(&a);
    /* The README's job itself: the same cache and a leak of 64 KiB per request, 62.5 MB per 1000
     * requests, still grows. */
    short_sawtooth(s, 16, 0.5, 62.5, seed);
    a = analyse(s);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "grows");
    ASSERT(a.floor.lo <= 62.5 * 1.15 && a.floor.hi >= 62.5 * 0.85);
    vl_analyze_free(&a);
    free(s);
  }
  ASSERT(old_inconclusive >= 10);
}

/* A server whose memory rises `rise` MB over its first `knee` requests and then holds: a sample
 * every 5 requests up to `end`, on 20 MB, with 0.3 MB of noise; `leak` MB per 1000 requests after
 * the knee. */
static void rise_and_hold(synth_t *s, double rise, double knee, double end, double leak,
                          uint64_t seed) {
  memset(s, 0, sizeof(*s));
  uint64_t st = seed;
  size_t n = (size_t)(end / 5) + 1;
  for (size_t i = 0; i < n; i++) {
    double x = 5.0 * (double)i;
    s->x[i] = x;
    s->t[i] = 1.7e12 + x * 20;
    s->y[i] = 20 + rise * fmin(x, knee) / knee + leak * fmax(0, x - knee) / 1000 + 0.3 * gauss(&st);
  }
  s->n = n;
}

static vl_analysis_t analyse_from(const synth_t *s, double warmup_x) {
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t a;
  vl_series_t in = series_of(s, "mem");
  in.warmup_x = warmup_x;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  return a;
}

TEST_IMPL(verdict_levels_off_wherever_it_stops) {
  /* Memory rises 100 MB over the first 200 requests and holds for the last 100, as glibc's arenas
   * fill and stay: the rise stops past the middle of the run. It levels off with no warm-up set,
   * and with the warm-up cutting half the rise; a warm-up past the rise leaves a flat series. */
  synth_t *s = malloc(sizeof(*s));
  for (uint64_t seed = 1; seed <= 10; seed++) {
    rise_and_hold(s, 100, 200, 300, 0, seed);
    vl_analysis_t a = analyse_from(s, 0);
    if (seed == 1)
      vl_analyze_print(stderr, &a);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "levels-off");
    ASSERT_NEAR(a.level_x, 200, 10);
    ASSERT_NEAR(a.level_rise, 100, 5);
    ASSERT_NEAR(a.tail_x, a.level_x, 0); /* judged after the knot, not over the last half */
    ASSERT_NEAR(a.tail.slope, 0, 20);
    ASSERT(strstr(a.reason, "then levels off at about ") != NULL);
    vl_analyze_free(&a);
    a = analyse_from(s, 100);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "levels-off");
    ASSERT_NEAR(a.level_x, 200, 10);
    ASSERT_NEAR(a.level_rise, 50, 5);
    vl_analyze_free(&a);
    a = analyse_from(s, 205);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "flat");
    vl_analyze_free(&a);
  }

  /* A rise to 5600 of 8000 requests, 200 samples: the knot is far past the middle. */
  synth(s, 200, 40, 3000, 0, 0, 0, 0.5, 5);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += 364 * fmin(s->x[i], 5600) / 5600;
  vl_analysis_t a = analyse(s);
  vl_analyze_print(stderr, &a);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "levels-off");
  ASSERT_NEAR(a.level_x, 5600, 120);
  ASSERT_NEAR(a.level_rise, 364, 10);
  vl_analyze_free(&a);

  /* A leak that never stops never levels off, wherever the knot may go. */
  for (uint64_t seed = 1; seed <= 20; seed++) {
    synth(s, 200, 40, 3000, 20.0, 0, 0, 2.0, seed);
    a = analyse(s);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "grows");
    vl_analyze_free(&a);
  }

  /* A rise at start, then a leak: judged after the knot, it grows, at the leak's slope. */
  for (uint64_t seed = 1; seed <= 10; seed++) {
    rise_and_hold(s, 100, 200, 1200, 30, seed);
    a = analyse(s);
    if (seed == 1)
      vl_analyze_print(stderr, &a);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "grows");
    ASSERT_STR_EQ(a.basis, "tail");
    ASSERT_NEAR(a.tail.slope, 30, 6);
    ASSERT(strstr(a.reason, "and grows on after it: +") != NULL);
    char label[160];
    label_of(&a, label, sizeof(label));
    ASSERT(strstr(label, "grows, +") == label && strstr(label, " MB/1k requests after ") != NULL);
    vl_analyze_free(&a);
  }
  free(s);
}

TEST_IMPL(verdict_unbounded_interval_says_why) {
  /* Memory that swings 20 MB up and back twice over 8000 requests: its residuals about one line
   * follow each other so closely that 200 samples count as about one, and the slope's interval is
   * unbounded. The reason says what the samples lack, not "-inf to +inf". */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 200, 40, 3000, 0, 0, 0, 0.2, 5);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += 20 * sin(2 * 3.14159265358979323846 * s->x[i] / 4000);
  vl_analysis_t a = analyse(s);
  vl_analyze_print(stderr, &a);
  ASSERT(a.ols.n_eff <= 2);
  ASSERT(isinf(a.ols.hi));
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "inconclusive");
  ASSERT(strstr(a.reason, "strays from one line in long runs of one sign") != NULL);
  ASSERT(strstr(a.reason, "has an unbounded interval (an interval needs more than 2)") != NULL);
  ASSERT(strstr(a.reason, "inf") == NULL);
  cJSON *j = vl_analyze_json(&a);
  char *txt = cJSON_PrintUnformatted(j);
  ASSERT(strstr(txt, "inf") == NULL && strstr(txt, "nan") == NULL);
  cJSON_free(txt);
  cJSON_Delete(j);
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(verdict_tiny_moves_are_flat) {
  /* A server with no leak, stopped after 3 s: 150 requests, a sample every 5, 5 MB of resident
   * set that takes 0.1 MB more as its heap warms. Significant, but no growth that matters. */
  synth_t *s = malloc(sizeof(*s));
  for (uint64_t seed = 1; seed <= 10; seed++) {
    synth(s, 30, 5, 5.16, 0, 0, 0, 0.003, seed);
    for (size_t i = 0; i < s->n; i++)
      s->y[i] += 0.1 * s->x[i] / 150;
    vl_analysis_t a = analyse(s);
    if (seed == 1)
      vl_analyze_print(stderr, &a);
    ASSERT(a.ols.lo > 0);
    ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "flat");
    ASSERT(strstr(a.reason, "no material growth") == a.reason);
    vl_analyze_free(&a);
  }
  /* A warmed server whose memory moved by -0.6 MB in steps over 40 samples: too few effective
   * samples for its line, and a range far below what counts. */
  synth(s, 40, 50, 60, 0, 0, 0, 0.01, 1);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] -= 0.2 * floor((double)i / 10);
  vl_analysis_t a = analyse(s);
  vl_analyze_print(stderr, &a);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "flat");
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(verdict_short_flushed_run_that_never_moved_is_flat) {
  /* A server with no leak and no cache, flushed every 60 requests, stopped after 280: four
   * post-flush floors that scatter by 1.1 MB. Their interval, on two degrees of freedom, admits
   * 8 MB over the run, but the floor never moved by as much, smallest to largest: flat. */
  synth_t *s = malloc(sizeof(*s));
  int flat = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    synth(s, 28, 10, 60, 0, 0, 60, 1.1, seed);
    vl_analysis_t a = analyse(s);
    if (seed == 1)
      vl_analyze_print(stderr, &a);
    ASSERT_STR_EQ(a.basis, "floor");
    ASSERT(strcmp(vl_analyze_verdict_name(a.verdict), "grows") != 0);
    if (a.verdict == VL_VERDICT_FLAT && a.floor.hi * (a.x_last - a.x_first) / 1000 >= 8 &&
        strstr(a.reason, "in all, smallest to largest"))
      flat++;
    ASSERT(a.verdict != VL_VERDICT_INCONCLUSIVE);
    vl_analyze_free(&a);
  }
  ASSERT(flat > 0); /* some of the twenty had an interval that admitted 8 MB */
  free(s);
}

/* The verdict of series name over s, with the last `missing` values gone. */
static vl_verdict_t verdict_with_missing_end(synth_t *s, const char *name, size_t missing,
                                             vl_analysis_t *a) {
  for (size_t i = s->n - missing; i < s->n; i++)
    s->y[i] = NAN;
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_series_t in = series_of(s, name);
  ASSERT_INT_EQ(vl_analyze_series(a, &in, &o), 0);
  return a->verdict;
}

TEST_IMPL(verdict_ended_early) {
  /* A leak of 60 MB per 1000 requests over 100 samples: a series whose values stop 30 rows before
   * the run's end gets no verdict on growth; its reason says where they stop. */
  synth_t *s = malloc(sizeof(*s));
  vl_analysis_t a;
  synth(s, 100, 10, 500, 60, 0, 0, 0.5, 1);
  ASSERT_INT_EQ(verdict_with_missing_end(s, "prom.process_resident_memory_bytes", 30, &a),
                VL_VERDICT_ENDED_EARLY);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "ended-early");
  ASSERT(strstr(a.reason, "its samples end at 690 requests") == a.reason);
  ASSERT(strstr(a.reason, "30 of the run's 100 rows after it have none"));
  vl_analyze_free(&a);
  /* One missing row at the end of a process's series: the process was gone when the run ended. */
  synth(s, 100, 10, 500, 60, 0, 0, 0.5, 1);
  ASSERT_INT_EQ(verdict_with_missing_end(s, "rss_mb.server", 1, &a), VL_VERDICT_ENDED_EARLY);
  vl_analyze_free(&a);
  synth(s, 100, 10, 500, 60, 0, 0, 0.5, 1);
  ASSERT_INT_EQ(verdict_with_missing_end(s, "rss_mb.server/vlmmock#2", 1, &a),
                VL_VERDICT_ENDED_EARLY);
  vl_analyze_free(&a);
  /* Of any other series, one missing reading at the end is a reading that failed: judged. */
  synth(s, 100, 10, 500, 60, 0, 0, 0.5, 1);
  ASSERT_INT_EQ(verdict_with_missing_end(s, "cmd.rss_kb", 1, &a), VL_VERDICT_GROWS);
  vl_analyze_free(&a);
  /* Missing values in the middle, the last ones there: judged. */
  synth(s, 100, 10, 500, 60, 0, 0, 0.5, 1);
  for (size_t i = 40; i < 70; i++)
    s->y[i] = NAN;
  ASSERT_INT_EQ(verdict_with_missing_end(s, "rss_mb.server", 0, &a), VL_VERDICT_GROWS);
  vl_analyze_free(&a);
  free(s);
}

TEST_IMPL(run_longer_says_how_much) {
  /* 12 samples, 100 requests apart at 100 requests/s, with 20 MB of noise on 1000 MB: the interval
   * admits growth of T (10 MB) over the run. The reason says about how many more requests, and
   * minutes at the run's pace, would decide. */
  synth_t *s = malloc(sizeof(*s));
  synth(s, 12, 100, 1000, 0, 0, 0, 20, 3);
  vl_analysis_t a = analyse(s);
  vl_analyze_print(stderr, &a);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "inconclusive");
  ASSERT(isfinite(a.more_x) && a.more_x > 0);
  ASSERT_NEAR(a.more_s, a.more_x / 100, 1e-6);
  ASSERT(isnan(a.more_windows));
  char want[256];
  snprintf(want, sizeof(want),
           "; run longer: about %.0f more requests, %.1f min at the run's 100 requests/s, would "
           "narrow the interval enough to decide",
           a.more_x, a.more_s / 60);
  ASSERT(strstr(a.reason, want) != NULL);
  cJSON *j = vl_analyze_json(&a);
  cJSON *rl = cJSON_GetObjectItem(j, "run_longer");
  ASSERT_NEAR(cJSON_GetObjectItem(rl, "more")->valuedouble, a.more_x, 0);
  ASSERT_NEAR(cJSON_GetObjectItem(rl, "more_minutes")->valuedouble, a.more_s / 60, 1e-9);
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(rl, "more_windows")));
  cJSON_Delete(j);
  /* The estimate is enough: runs that long, with the same noise, decide in most cases. */
  size_t n = 12 + (size_t)(a.more_x / 100);
  int decided = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    synth(s, n, 100, 1000, 0, 0, 0, 20, 100 + seed);
    vl_analysis_t b = analyse(s);
    decided += b.verdict != VL_VERDICT_INCONCLUSIVE;
    vl_analyze_free(&b);
  }
  fprintf(stderr, "runs of %zu samples: %d of 20 decided\n", n, decided);
  ASSERT(decided >= 14);
  vl_analyze_free(&a);

  /* On the post-flush floor, in flush windows too: the short sawtooth judged by a floor of 2 MB,
   * which its 30 windows cannot always rule out. */
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  o.min_growth_mb = 2;
  int undecided = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    short_sawtooth(s, 16, 0.5, 0, seed);
    vl_series_t in = series_of(s, "mem");
    ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
    if (a.verdict == VL_VERDICT_INCONCLUSIVE) {
      undecided++;
      ASSERT(isfinite(a.more_x));
      ASSERT_NEAR(a.more_windows, ceil(a.more_x / 50), 1);
      ASSERT(strstr(a.reason, " more flush windows), ") != NULL);
    }
    vl_analyze_free(&a);
  }
  ASSERT(undecided >= 5);

  /* Too few effective samples: the run that would give 5 at the rate these came. */
  synth(s, 200, 40, 3000, 0, 0, 0, 2.0, 5);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += 20 * sin(2 * 3.14159265358979323846 * s->x[i] / 2000);
  a = analyse(s);
  ASSERT_STR_EQ(vl_analyze_verdict_name(a.verdict), "inconclusive");
  double span = a.x_last - a.x_first, want_x = span * (5 / a.ols.n_eff - 1);
  ASSERT_NEAR(a.more_x, want_x, want_x * 0.05);
  ASSERT(strstr(a.reason, "would give enough, were they to follow one another as these do") !=
         NULL);
  vl_analyze_free(&a);
  free(s);
}

/* Every "per 1000" in text is "MB per 1000 requests", every "/1k" "MB/1k"; no p-value is given as
 * a bound that says nothing ("p <= 1") and no count of one in the plural. */
static void assert_worded(const char *text) {
  for (const char *p = strstr(text, "per 1000"); p; p = strstr(p + 1, "per 1000")) {
    ASSERT(p - text >= 3 && strncmp(p - 3, "MB ", 3) == 0);
    ASSERT(strncmp(p, "per 1000 requests", 17) == 0);
  }
  for (const char *p = strstr(text, "/1k"); p; p = strstr(p + 1, "/1k"))
    ASSERT(p - text >= 2 && strncmp(p - 2, "MB", 2) == 0);
  ASSERT(strstr(text, "p <=") == NULL);
  ASSERT(strstr(text, " 1 requests") == NULL);
}

static void assert_text_of(const vl_analysis_t *a) {
  char *buf = NULL, label[200];
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  vl_analyze_print(f, a);
  fclose(f);
  vl_analyze_label(a, label, sizeof(label));
  fprintf(stderr, "%s%s\n", buf, label);
  assert_worded(buf);
  assert_worded(label);
  free(buf);
}

TEST_IMPL(text_has_units_on_every_slope) {
  synth_t *s = malloc(sizeof(*s));
  vl_analysis_t a;
  /* grows on the floor, with a slowing rise; sawtooth; levels-off that creeps; flat; both kinds
   * of inconclusive; grows after a knot. */
  synth(s, 600, 5, 3900, 0, 1, 50, 0.3, 11);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += 3400 * sqrt(floor(s->x[i] / 50) * 50 / 3000);
  a = analyse(s);
  ASSERT(strstr(a.reason, "it slows") != NULL);
  assert_text_of(&a);
  vl_analyze_free(&a);
  synth(s, 400, 50, 2000, 0, 0.05, 2000, 2.0, 1);
  a = analyse(s);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_SAWTOOTH);
  assert_text_of(&a);
  vl_analyze_free(&a);
  staircase(s, 760, 3.68, 950, 0.108, 0.08, 0.3, 0.5, 1);
  a = analyse(s);
  ASSERT(a.verdict == VL_VERDICT_LEVELS_OFF && a.level_creeps);
  assert_text_of(&a);
  vl_analyze_free(&a);
  synth(s, 300, 50, 4000, 0, 0, 2500, 4.0, 1);
  a = analyse(s);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_FLAT);
  assert_text_of(&a);
  vl_analyze_free(&a);
  synth(s, 12, 100, 1000, 0, 0, 0, 20, 3);
  a = analyse(s);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_INCONCLUSIVE);
  assert_text_of(&a);
  vl_analyze_free(&a);
  synth(s, 200, 40, 3000, 0, 0, 0, 2.0, 5);
  for (size_t i = 0; i < s->n; i++)
    s->y[i] += 20 * sin(2 * 3.14159265358979323846 * s->x[i] / 2000);
  a = analyse(s);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_INCONCLUSIVE);
  assert_text_of(&a);
  vl_analyze_free(&a);
  rise_and_hold(s, 100, 200, 1200, 30, 1);
  a = analyse(s);
  ASSERT_STR_EQ(a.basis, "tail");
  assert_text_of(&a);
  vl_analyze_free(&a);

  /* A high-water mark at its peak from the first sample, one request in: no "first reached at 1
   * requests". */
  synth(s, 20, 1, 100, 0, 0, 0, 0, 1);
  for (size_t i = 0; i < s->n; i++)
    s->x[i] += 1;
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_series_t in = series_of(s, "hwm_mb.x");
  in.peak = 1;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_PEAK);
  ASSERT(strstr(a.reason, "peak 100 MB, reached at the first sample,") != NULL);
  assert_text_of(&a);
  vl_analyze_free(&a);
  /* ... and one reached 1 request in says it in the singular. */
  s->x[0] = 0;
  s->x[1] = 1;
  s->y[1] = 101;
  ASSERT_INT_EQ(vl_analyze_series(&a, &in, &o), 0);
  ASSERT(strstr(a.reason, "reached first at 1 request,") != NULL);
  vl_analyze_free(&a);
  free(s);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(tquantile_table),
      TEST_ENTRY(tquantile_inverts_cdf),
      TEST_ENTRY(ols_exact_line),
      TEST_ENTRY(ols_known_values),
      TEST_ENTRY(ols_coverage),
      TEST_ENTRY(ols_autocorrelated_noise),
      TEST_ENTRY(theil_sen_outliers),
      TEST_ENTRY(theil_sen_exact_and_subsampled),
      TEST_ENTRY(interp),
      TEST_ENTRY(verdict_leak_without_flushes),
      TEST_ENTRY(verdict_sawtooth_returns),
      TEST_ENTRY(trailing_flush_window_left_out),
      TEST_ENTRY(verdict_sawtooth_with_leak),
      TEST_ENTRY(verdict_flat),
      TEST_ENTRY(verdict_small_growth_below_threshold),
      TEST_ENTRY(verdict_insufficient),
      TEST_ENTRY(warmup_cut),
      TEST_ENTRY(warmup_drops_partial_window),
      TEST_ENTRY(windows_by_work_without_times),
      TEST_ENTRY(second_axis_images),
      TEST_ENTRY(attribution_mixed_run),
      TEST_ENTRY(json_and_text),
      TEST_ENTRY(verdict_levels_off),
      TEST_ENTRY(verdict_levels_off_in_steps),
      TEST_ENTRY(verdict_inconclusive_few_effective_samples),
      TEST_ENTRY(verdict_grows_by_steps_when_not_linear),
      TEST_ENTRY(verdict_flat_when_it_never_moved_enough),
      TEST_ENTRY(peak_series_no_growth_verdict),
      TEST_ENTRY(verdict_sawtooth_holds_on_a_short_run),
      TEST_ENTRY(verdict_levels_off_wherever_it_stops),
      TEST_ENTRY(verdict_unbounded_interval_says_why),
      TEST_ENTRY(verdict_tiny_moves_are_flat),
      TEST_ENTRY(verdict_short_flushed_run_that_never_moved_is_flat),
      TEST_ENTRY(verdict_ended_early),
      TEST_ENTRY(run_longer_says_how_much),
      TEST_ENTRY(text_has_units_on_every_slope),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
