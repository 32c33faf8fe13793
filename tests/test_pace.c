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

static const task_entry_t tests[] = {
    TEST_ENTRY(pace_parse),
    TEST_ENTRY(pace_constant),
    TEST_ENTRY(pace_poisson_open_ended),
    TEST_ENTRY(pace_poisson_planned),
    TEST_ENTRY(pace_gamma),
    TEST_ENTRY(pace_seeded),
    TEST_ENTRY(pace_shift),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
