#include "vlmload/common.h"
#include "vlmload/units.h"

#include "task.h"

#define E VL_EINVAL
#define R VL_ERANGE

typedef struct {
  const char *in;
  int rc;     /* expected return */
  uint64_t v; /* expected value when rc is 0 */
} int_case_t;

/* Runs a table through an integer scanner; on failure the output must be left untouched. */
static void run_int_cases(int (*scan)(const char *, uint64_t *), const int_case_t *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t v = 0xdeadbeef;
    int rc = scan(c[i].in, &v);
    if (rc != c[i].rc || (rc == 0 && v != c[i].v))
      fprintf(stderr, "input \"%s\"\n", c[i].in);
    ASSERT_INT_EQ(rc, c[i].rc);
    uint64_t want = rc == 0 ? c[i].v : 0xdeadbeef;
    ASSERT_UINT_EQ(v, want);
  }
}

/* Inputs every scanner rejects. */
static const char *const junk[] = {"",         " 5",  "5 ",  " ",    "-1",   "+5",    "-0",  "inf",
                                   "infinity", "nan", "NaN", "0x10", "0X10", "0x1p3", ".",   "..5",
                                   "1.5.5",    "e5",  "5e",  "5e+",  "5ee3", "5,0",   "\t5", "5\n",
                                   "1_000",    "0b1", "x",   "5x",   "5 s"};

TEST_IMPL(units_junk) {
  for (size_t i = 0; i < VL_ARRAY_SIZE(junk); i++) {
    uint64_t u = 7, lo = 7, hi = 7;
    double d = 7;
    if (vl_units_duration(junk[i], &u) != E || vl_units_count(junk[i], &u) != E ||
        vl_units_bytes(junk[i], &u) != E || vl_units_double(junk[i], &d) != E ||
        vl_units_range(junk[i], &lo, &hi) != E)
      fprintf(stderr, "input \"%s\"\n", junk[i]);
    ASSERT_INT_EQ(vl_units_duration(junk[i], &u), E);
    ASSERT_INT_EQ(vl_units_count(junk[i], &u), E);
    ASSERT_INT_EQ(vl_units_bytes(junk[i], &u), E);
    ASSERT_INT_EQ(vl_units_double(junk[i], &d), E);
    ASSERT_INT_EQ(vl_units_range(junk[i], &lo, &hi), E);
    ASSERT_UINT_EQ(u, 7);
    ASSERT_EQ(d, 7.0);
    ASSERT_UINT_EQ(lo, 7);
    ASSERT_UINT_EQ(hi, 7);
  }
  uint64_t u;
  double d;
  ASSERT_INT_EQ(vl_units_duration(NULL, &u), E);
  ASSERT_INT_EQ(vl_units_count(NULL, &u), E);
  ASSERT_INT_EQ(vl_units_bytes(NULL, &u), E);
  ASSERT_INT_EQ(vl_units_double(NULL, &d), E);
  ASSERT_INT_EQ(vl_units_range(NULL, &u, &u), E);
}

TEST_IMPL(units_duration) {
  static const int_case_t c[] = {
      {"30s", 0, 30000000},
      {"250ms", 0, 250000},
      {"2m", 0, 120000000},
      {"1h", 0, 3600000000},
      {"1.5s", 0, 1500000},
      {"500us", 0, 500},
      {"0", 0, 0}, /* a bare zero is zero in any unit */
      {"0.0", 0, 0},
      {"0s", 0, 0},
      {".5s", 0, 500000},
      {"0.5ms", 0, 500},
      {"1e3ms", 0, 1000000},
      {"1.25m", 0, 75000000},
      {"0.001h", 0, 3600000},
      {"0.4us", 0, 0}, /* fractions of a microsecond round to nearest */
      {"0.5us", 0, 1},
      {"1.0000001us", 0, 1},
      {"0.005us", 0, 0},
      {"0.0005ms", 0, 1},
      {"0.00049ms", 0, 0},
      {"0.00000000000000000000000000000000001h", 0, 0},
      {"123456789012345678901234567890e-29us", 0, 1},
      {"123456789012345678901234567890e-28us", 0, 12},
      {"1.99999999999999999999999999999us", 0, 2},
      {"1e-400s", 0, 0},
      {"1000000000000000000us", 0, 1000000000000000000u},
      {"9007199254740993us", 0, 9007199254740993u}, /* past 2^53: no rounding through double */
      {"1000000000000000001us", R, 0},
      {"277777778h", R, 0},
      {"1e400us", R, 0},
      {"5S", E, 0},
      {"5sec", E, 0},
      {"5ms5", E, 0},
      {"5M", E, 0},
      {"s", E, 0},
      {"ms", E, 0},
      /* A bare number: its unit would be a guess. */
      {"5", E, 0},
      {"5.", E, 0},
      {"100", E, 0},
      {"0.5", E, 0},
      {"1e400", E, 0},
      {"1e3", E, 0},
      /* Compound: each unit once, largest first; each part rounded, then added. */
      {"1m30s", 0, 90000000},
      {"1h30m", 0, 5400000000u},
      {"2m30s", 0, 150000000},
      {"1m30.5s", 0, 90500000},
      {"1h0m0s", 0, 3600000000u},
      {"1h1ms", 0, 3600001000u},
      {"1s500ms", 0, 1500000},
      {"1.5h30m", 0, 7200000000u},
      {"1s0.4us", 0, 1000000},
      {"1h1h", E, 0},
      {"30m1h", E, 0},
      {"1s1m", E, 0},
      {"1ms1ms", E, 0},
      {"1m30", E, 0},
      {"1h 30m", E, 0},
      {"1h-30m", E, 0},
      {"1h+30m", E, 0},
      {"h30m", E, 0},
      {"1h30", E, 0},
      {"1hm", E, 0},
      {"5x", E, 0},
      {"1m30x", E, 0},
      {"277777777h3600s", R, 0},
      {"277777777h1e400us", R, 0},
  };
  run_int_cases(vl_units_duration, c, VL_ARRAY_SIZE(c));
}

/* Seconds where the unit is the value's name: a bare number is seconds, the rest as durations. */
TEST_IMPL(units_seconds) {
  static const int_case_t c[] = {
      {"5", 0, 5000000},    {"0.25", 0, 250000},    {"5.", 0, 5000000}, {"0", 0, 0},
      {"250ms", 0, 250000}, {"1m30s", 0, 90000000}, {"1e400", R, 0},    {"5x", E, 0},
      {"", E, 0},           {"-1", E, 0},
  };
  run_int_cases(vl_units_seconds, c, VL_ARRAY_SIZE(c));
}

/* The line an option's error gives: a bare number asked for its unit, with forms that work. */
TEST_IMPL(units_duration_why) {
  char why[160];
  vl_units_duration_why("500", why, sizeof(why));
  ASSERT_STR_EQ(why, "a duration needs its unit: 500ms? 500s? (as 100ms, 2s, 1m30s, 1h)");
  vl_units_duration_why("1h1h", why, sizeof(why));
  ASSERT(strstr(why, "want a duration") != NULL);
  ASSERT(strstr(why, "1m30s") != NULL);
  vl_units_duration_why("1e400s", why, sizeof(why));
  ASSERT_STR_EQ(why, "too long a duration");
  ASSERT_INT_EQ(vl_units_bare("12.5"), 1);
  ASSERT_INT_EQ(vl_units_bare("12.5s"), 0);
  ASSERT_INT_EQ(vl_units_bare(""), 0);
}

TEST_IMPL(units_count) {
  static const int_case_t c[] = {
      {"0", 0, 0},
      {"100", 0, 100},
      {"007", 0, 7},
      {"10k", 0, 10000},
      {"10K", 0, 10000},
      {"2M", 0, 2000000},
      {"1G", 0, 1000000000},
      {"1.5k", 0, 1500},
      {"1.100k", 0, 1100},
      {"0.001k", 0, 1},
      {"2.5e3", 0, 2500},
      {"1E3", 0, 1000},
      {"1e+3", 0, 1000},
      {"1000000000000000000", 0, 1000000000000000000u},
      {"1000000000G", 0, 1000000000000000000u},
      /* Exact past 2^53: a double would make these ...992 and 10^18. */
      {"9007199254740993", 0, 9007199254740993u},
      {"999999999999999999", 0, 999999999999999999u},
      {"1.000000000000000000", 0, 1},
      {"1.5", E, 0},
      {"0.5", E, 0},
      {"0.0001k", E, 0},
      {"1e-3", E, 0},
      /* A fraction is a fraction however small next to the value. */
      {"1000000.0001", E, 0},
      {"1.0000000001", E, 0},
      {"1.00000000000000000000001", E, 0},
      {"1000000000000000001", R, 0},
      {"18446744073709551616", R, 0},
      {"1e19", R, 0},
      {"k", E, 0},
      {"10kk", E, 0},
      {"10m", E, 0},
      {"10 k", E, 0},
  };
  run_int_cases(vl_units_count, c, VL_ARRAY_SIZE(c));
}

TEST_IMPL(units_bytes) {
  static const int_case_t c[] = {
      {"512", 0, 512},          {"1B", 0, 1},
      {"64k", 0, 64000},        {"64K", 0, 64000},
      {"64KB", 0, 64000},       {"64kB", 0, 64000},
      {"64KiB", 0, 65536},      {"1M", 0, 1000000},
      {"1MB", 0, 1000000},      {"1MiB", 0, 1048576},
      {"2G", 0, 2000000000},    {"2GB", 0, 2000000000},
      {"2GiB", 0, 2147483648u}, {"1.5KiB", 0, 1536},
      {"0.5MiB", 0, 524288},    {"999999999999999999", 0, 999999999999999999u},
      {"2e18", R, 0},           {"64kib", E, 0},
      {"64KIB", E, 0},          {"1TB", E, 0},
      {"64 KiB", E, 0},         {"B", E, 0},
  };
  run_int_cases(vl_units_bytes, c, VL_ARRAY_SIZE(c));
}

TEST_IMPL(units_double) {
  static const struct {
    const char *in;
    int rc;
    double v;
  } c[] = {
      {"50", 0, 50},   {"0.5", 0, 0.5}, {".25", 0, 0.25}, {"1.5k", 0, 1500},
      {"2M", 0, 2e6},  {"0", 0, 0},     {"1e3", 0, 1000}, {"1.5K", 0, 1500},
      {"1e400", R, 0}, {"1.5kk", E, 0}, {"2G", E, 0},     {"5m", E, 0},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(c); i++) {
    double v = -1;
    int rc = vl_units_double(c[i].in, &v);
    if (rc != c[i].rc)
      fprintf(stderr, "input \"%s\"\n", c[i].in);
    ASSERT_INT_EQ(rc, c[i].rc);
    ASSERT_EQ(v, rc == 0 ? c[i].v : -1.0);
  }
}

TEST_IMPL(units_range) {
  static const struct {
    const char *in;
    int rc;
    uint64_t lo, hi;
  } c[] = {
      {"1-3", 0, 1, 3},         {"5", 0, 5, 5},          {"0-0", 0, 0, 0},   {"3-3", 0, 3, 3},
      {"1k-2k", 0, 1000, 2000}, {"0-1M", 0, 0, 1000000}, {"3-1", E, 0, 0},   {"-", E, 0, 0},
      {"1-", E, 0, 0},          {"-3", E, 0, 0},         {"1--3", E, 0, 0},  {"1-3-5", E, 0, 0},
      {"a-b", E, 0, 0},         {"1 - 3", E, 0, 0},      {"1.5-3", E, 0, 0}, {"1-3.5", E, 0, 0},
      {"1-1e400", R, 0, 0},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(c); i++) {
    uint64_t lo = 77, hi = 77;
    int rc = vl_units_range(c[i].in, &lo, &hi);
    if (rc != c[i].rc)
      fprintf(stderr, "input \"%s\"\n", c[i].in);
    ASSERT_INT_EQ(rc, c[i].rc);
    ASSERT_UINT_EQ(lo, rc == 0 ? c[i].lo : 77);
    ASSERT_UINT_EQ(hi, rc == 0 ? c[i].hi : 77);
  }
}

/* Random integers up to the limit, written plainly and with a decimal point before a suffix,
 * come back exact. */
TEST_IMPL(units_exact_integers) {
  uint64_t seed = 5;
  for (int i = 0; i < 100000; i++) {
    uint64_t n = task_rand(&seed) % (1000000000000000000u + 1);
    n >>= task_rand(&seed) % 60; /* all magnitudes */
    char s[64];
    uint64_t v;
    snprintf(s, sizeof(s), "%" PRIu64, n);
    ASSERT_INT_EQ(vl_units_count(s, &v), 0);
    ASSERT_UINT_EQ(v, n);
    snprintf(s, sizeof(s), "%" PRIu64 ".%03" PRIu64 "k", n / 1000, n % 1000);
    ASSERT_INT_EQ(vl_units_count(s, &v), 0);
    ASSERT_UINT_EQ(v, n);
    snprintf(s, sizeof(s), "%" PRIu64 ".%06" PRIu64 "s", n / 1000000, n % 1000000);
    ASSERT_INT_EQ(vl_units_duration(s, &v), 0);
    ASSERT_UINT_EQ(v, n);
    snprintf(s, sizeof(s), "%" PRIu64 "us", n);
    ASSERT_INT_EQ(vl_units_duration(s, &v), 0);
    ASSERT_UINT_EQ(v, n);
    snprintf(s, sizeof(s), "%" PRIu64 "B", n);
    ASSERT_INT_EQ(vl_units_bytes(s, &v), 0);
    ASSERT_UINT_EQ(v, n);
    /* Half a unit more rounds up where rounding is allowed, and is refused in a count. */
    snprintf(s, sizeof(s), "%" PRIu64 ".5us", n);
    ASSERT_INT_EQ(vl_units_duration(s, &v), n < 1000000000000000000u ? 0 : VL_ERANGE);
    if (n < 1000000000000000000u)
      ASSERT_UINT_EQ(v, n + 1);
    snprintf(s, sizeof(s), "%" PRIu64 ".5", n);
    ASSERT(vl_units_count(s, &v) < 0);
  }
}

static const task_entry_t tests[] = {
    TEST_ENTRY(units_junk),         TEST_ENTRY(units_duration), TEST_ENTRY(units_seconds),
    TEST_ENTRY(units_duration_why), TEST_ENTRY(units_count),    TEST_ENTRY(units_bytes),
    TEST_ENTRY(units_double),       TEST_ENTRY(units_range),    TEST_ENTRY(units_exact_integers),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
