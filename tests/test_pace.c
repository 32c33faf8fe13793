/* The arrival schedule: the statistics of its gaps for each process, absolute times that do not
 * drift, exact run length for a planned Poisson run, and the shift a drained flush applies. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/pace.h"

typedef struct {
  double mean, cv;
  uint64_t first, last;
} gapstats_t;

static gapstats_t gaps(vl_arrival_kind_t kind, double rate, double cvarg, uint64_t n,
                       uint64_t planned, uint64_t seed) {
  vl_pace_t p;
  const uint64_t t0 = 1000000000ull;
  vl_pace_init(&p, kind, rate, cvarg, seed, t0, planned);
  double sum = 0, sum2 = 0;
  uint64_t prev = vl_pace_take(&p);
  gapstats_t g = {.first = prev};
  for (uint64_t i = 1; i < n; i++) {
    uint64_t t = vl_pace_take(&p);
    ASSERT(t >= prev);
    double d = (double)(t - prev);
    sum += d;
    sum2 += d * d;
    prev = t;
  }
  double m = sum / (double)(n - 1);
  g.mean = m;
  g.cv = sqrt(sum2 / (double)(n - 1) - m * m) / m;
  g.last = prev;
  return g;
}

TEST_IMPL(pace_parse) {
  vl_arrival_kind_t k;
  double cv;
  ASSERT_INT_EQ(vl_pace_parse("constant", &k, &cv), 0);
  ASSERT_INT_EQ(k, VL_ARRIVAL_CONSTANT);
  ASSERT_INT_EQ(vl_pace_parse("poisson", &k, &cv), 0);
  ASSERT_INT_EQ(k, VL_ARRIVAL_POISSON);
  ASSERT_INT_EQ(vl_pace_parse("gamma:2.5", &k, &cv), 0);
  ASSERT_INT_EQ(k, VL_ARRIVAL_GAMMA);
  ASSERT_NEAR(cv, 2.5, 1e-12);
  const char *bad[] = {"",         "gamma",   "gamma:",   "gamma:0",   "gamma:-1",  "gamma:x",
                       "gamma:1x", "Poisson", "poisson ", "gamma:nan", "gamma:inf", "gamma:1000"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++)
    ASSERT_INT_EQ(vl_pace_parse(bad[i], &k, &cv), VL_EINVAL);
}

TEST_IMPL(pace_constant) {
  gapstats_t g = gaps(VL_ARRIVAL_CONSTANT, 200, 0, 10000, 0, 1);
  ASSERT_NEAR(g.mean, 5e6, 1);
  ASSERT(g.cv < 1e-3);
  /* Absolute times: the 10000th arrival sits exactly 9999 gaps after the first. */
  ASSERT_NEAR((double)(g.last - g.first), 9999 * 5e6, 2);
}

TEST_IMPL(pace_poisson_open_ended) {
  gapstats_t g = gaps(VL_ARRIVAL_POISSON, 1000, 1, 200000, 0, 7);
  ASSERT_NEAR(g.mean, 1e6, 1e6 * 0.01);
  ASSERT_NEAR(g.cv, 1.0, 0.02);
}

TEST_IMPL(pace_poisson_planned) {
  /* 2000 planned arrivals at 200/s span 10 s to within a few gaps, for any seed. */
  for (uint64_t seed = 1; seed <= 20; seed++) {
    gapstats_t g = gaps(VL_ARRIVAL_POISSON, 200, 1, 2000, 2000, seed);
    double span = (double)(g.last - 1000000000ull);
    ASSERT(span < 10e9);
    ASSERT(span > 10e9 - 5 * 5e6 * 5);
    ASSERT_NEAR(g.cv, 1.0, 0.1);
  }
}

TEST_IMPL(pace_gamma) {
  const double cvs[] = {0.5, 1.0, 2.0, 3.0};
  for (size_t i = 0; i < VL_ARRAY_SIZE(cvs); i++) {
    gapstats_t g = gaps(VL_ARRIVAL_GAMMA, 500, cvs[i], 400000, 0, 3 + i);
    ASSERT_NEAR(g.mean, 2e6, 2e6 * 0.02);
    ASSERT_NEAR(g.cv, cvs[i], cvs[i] * 0.04);
  }
}

TEST_IMPL(pace_seeded) {
  vl_pace_t a, b, c;
  vl_pace_init(&a, VL_ARRIVAL_POISSON, 50, 1, 42, 0, 0);
  vl_pace_init(&b, VL_ARRIVAL_POISSON, 50, 1, 42, 0, 0);
  vl_pace_init(&c, VL_ARRIVAL_POISSON, 50, 1, 43, 0, 0);
  int differ = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t ta = vl_pace_take(&a), tb = vl_pace_take(&b), tc = vl_pace_take(&c);
    ASSERT_UINT_EQ(ta, tb);
    differ |= ta != tc;
  }
  ASSERT(differ);
}

TEST_IMPL(pace_shift) {
  vl_pace_t a, b;
  vl_pace_init(&a, VL_ARRIVAL_POISSON, 100, 1, 9, 0, 0);
  vl_pace_init(&b, VL_ARRIVAL_POISSON, 100, 1, 9, 0, 0);
  for (int i = 0; i < 10; i++)
    ASSERT_UINT_EQ(vl_pace_take(&a), vl_pace_take(&b));
  vl_pace_shift(&b, 250000000ull);
  for (int i = 0; i < 100; i++)
    ASSERT_UINT_EQ(vl_pace_take(&a) + 250000000ull, vl_pace_take(&b));
}

/* Seconds at which a ramp from r0 to r1 over T (r1 after it) has made `level` arrivals: the root
 * of r0 t + (r1 - r0) t^2 / (2 T) = level, or past T at r1 per second. */
static double ramp_at(double r0, double r1, double T, double level) {
  double at_end = (r0 + r1) / 2 * T;
  if (level >= at_end)
    return T + (level - at_end) / r1;
  double slope = (r1 - r0) / T;
  if (slope == 0)
    return level / r0;
  return (-r0 + sqrt(r0 * r0 + 2 * slope * level)) / slope;
}

TEST_IMPL(pace_ramp_constant) {
  /* Evenly spaced in the cumulative intensity: arrival k comes when the integral of the rate
   * reaches k. Up from 10 to 110 per second over 10 s is 600 arrivals in the ramp, then 110/s; and
   * down from 100 to 20 over 5 s is 300, then 20/s. */
  const struct {
    double r0, r1, T;
    uint64_t in_ramp;
  } ramps[] = {{10, 110, 10, 600}, {100, 20, 5, 300}, {50, 50, 2, 100}};
  const uint64_t t0 = 5000000000ull;
  for (size_t r = 0; r < VL_ARRAY_SIZE(ramps); r++) {
    double r0 = ramps[r].r0, r1 = ramps[r].r1, T = ramps[r].T;
    vl_pace_t p;
    vl_pace_init(&p, VL_ARRIVAL_CONSTANT, r0, 0, 1, t0, 0);
    vl_pace_ramp(&p, r1, T);
    ASSERT_UINT_EQ(vl_pace_next(&p), t0);
    uint64_t in_ramp = 0, in_first_half = 0, prev = 0;
    uint64_t n = ramps[r].in_ramp + 200;
    for (uint64_t k = 0; k < n; k++) {
      uint64_t t = vl_pace_take(&p);
      ASSERT_NEAR((double)(t - t0), ramp_at(r0, r1, T, (double)k) * 1e9, 2);
      in_ramp += t - t0 < (uint64_t)(T * 1e9);
      in_first_half += t - t0 < (uint64_t)(T * 1e9 / 2);
      if (k == 1) /* the rate at the start: gaps of about 1 / r0 (the rate moves meanwhile) */
        ASSERT_NEAR((double)(t - prev), 1e9 / r0, 0.1 * 1e9 / r0);
      if (k == n - 1) /* past the ramp: gaps of 1 / r1 */
        ASSERT_NEAR((double)(t - prev), 1e9 / r1, 2);
      prev = t;
    }
    ASSERT_UINT_EQ(in_ramp, ramps[r].in_ramp);
    /* The integral to T / 2: r0 T / 2 + (r1 - r0) T / 8. */
    double half = r0 * T / 2 + (r1 - r0) * T / 8;
    ASSERT_UINT_EQ(in_first_half, (uint64_t)ceil(half));
    ASSERT_UINT_EQ(p.count, n);
  }
}

TEST_IMPL(pace_ramp_poisson) {
  /* Poisson arrivals on a ramp from 20 to 220 per second over 5 s: the number in each part of the
   * ramp is Poisson with the integral of the rate over it as its mean. Per seed: 175 in the first
   * half of the ramp (20 x 2.5 + 200 x 2.5^2 / 10), 425 in the second (600 in all: the mean rate,
   * 120, for 5 s), and 220 in the second after it. */
  const uint64_t t0 = 1000000000ull;
  uint64_t first = 0, second = 0, after = 0, gaps = 0;
  double sum = 0, sum2 = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vl_pace_t p;
    vl_pace_init(&p, VL_ARRIVAL_POISSON, 20, 1, seed, t0, 0);
    vl_pace_ramp(&p, 220, 5);
    uint64_t prev = t0;
    double prev_level = 0;
    for (;;) {
      uint64_t t = vl_pace_take(&p);
      ASSERT(t >= prev);
      prev = t;
      double s = (double)(t - t0) / 1e9;
      if (s >= 6)
        break;
      /* The integral of the rate up to the arrival: its steps are exponential with mean 1. */
      double level = s < 5 ? 20 * s + 200 * s * s / 10 : 600 + 220 * (s - 5);
      double g = level - prev_level;
      prev_level = level;
      sum += g;
      sum2 += g * g;
      gaps++;
      first += s < 2.5;
      second += s >= 2.5 && s < 5;
      after += s >= 5;
    }
  }
  /* Over 40 seeds, standard deviations of sqrt(40 x 175) = 84, sqrt(40 x 425) = 130 and
   * sqrt(40 x 220) = 94. */
  ASSERT_NEAR((double)first, 40 * 175.0, 4 * 84.0);
  ASSERT_NEAR((double)second, 40 * 425.0, 4 * 130.0);
  ASSERT_NEAR((double)after, 40 * 220.0, 4 * 94.0);
  /* Gaps in the integral: mean 1 and coefficient of variation 1, as a Poisson process's. */
  double mean = sum / (double)gaps;
  fprintf(stderr,
          "ramp poisson: %llu, %llu and %llu arrivals; gaps of the integral: mean %.4f, cv %.4f\n",
          (unsigned long long)first, (unsigned long long)second, (unsigned long long)after, mean,
          sqrt(sum2 / (double)gaps - mean * mean) / mean);
  ASSERT_NEAR(mean, 1.0, 0.03);
  ASSERT_NEAR(sqrt(sum2 / (double)gaps - mean * mean) / mean, 1.0, 0.03);
}

TEST_IMPL(pace_ramp_shift) {
  /* A pause pushes the rest of a ramp back whole, as it does a plain schedule. */
  vl_pace_t a, b;
  vl_pace_init(&a, VL_ARRIVAL_POISSON, 10, 1, 4, 0, 0);
  vl_pace_init(&b, VL_ARRIVAL_POISSON, 10, 1, 4, 0, 0);
  vl_pace_ramp(&a, 100, 3);
  vl_pace_ramp(&b, 100, 3);
  for (int i = 0; i < 20; i++)
    ASSERT_UINT_EQ(vl_pace_take(&a), vl_pace_take(&b));
  vl_pace_shift(&b, 400000000ull);
  for (int i = 0; i < 300; i++)
    ASSERT_UINT_EQ(vl_pace_take(&a) + 400000000ull, vl_pace_take(&b));
}

static const task_entry_t tests[] = {
    TEST_ENTRY(pace_parse),
    TEST_ENTRY(pace_constant),
    TEST_ENTRY(pace_poisson_open_ended),
    TEST_ENTRY(pace_poisson_planned),
    TEST_ENTRY(pace_gamma),
    TEST_ENTRY(pace_seeded),
    TEST_ENTRY(pace_shift),
    TEST_ENTRY(pace_ramp_constant),
    TEST_ENTRY(pace_ramp_poisson),
    TEST_ENTRY(pace_ramp_shift),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
