#include "vlmload/common.h"
#include "vlmload/slo.h"
#include "vlmload/stats.h"

#include "task.h"

#include <string.h>

TEST_IMPL(slo_parse) {
  vl_slo_t s;
  char why[160];
  ASSERT_INT_EQ(vl_slo_parse("ttft=500ms,tpot=50ms,e2e=10s", &s, why, sizeof(why)), 0);
  ASSERT_UINT_EQ(s.ttft_us, 500000);
  ASSERT_UINT_EQ(s.tpot_us, 50000);
  ASSERT_UINT_EQ(s.e2e_us, 10000000);
  ASSERT_INT_EQ(vl_slo_parse("e2el=1.5s", &s, why, sizeof(why)), 0);
  ASSERT_UINT_EQ(s.ttft_us, 0);
  ASSERT_UINT_EQ(s.tpot_us, 0);
  ASSERT_UINT_EQ(s.e2e_us, 1500000);
  ASSERT(vl_slo_any(&s));
  char out[128];
  vl_slo_format(&s, out, sizeof(out));
  ASSERT_STR_EQ(out, "e2e=1500ms");
  ASSERT_INT_EQ(vl_slo_parse("tpot=250us,ttft=2s", &s, why, sizeof(why)), 0);
  vl_slo_format(&s, out, sizeof(out));
  ASSERT_STR_EQ(out, "ttft=2s,tpot=250us");
}

/* Each bad spec is refused with a reason naming its bad part, and leaves the SLOs as they were. */
TEST_IMPL(slo_parse_bad) {
  static const struct {
    const char *in, *named;
  } bad[] = {
      {"", "empty"},         {"ttft", "'ttft'"},           {"ttfb=1s", "'ttfb'"},
      {"ttft=fast", "fast"}, {"ttft=0", "'ttft=0'"},       {"ttft=1s,,e2e=2s", "empty"},
      {"ttft=1s,", "empty"}, {"ttft=1s,ttft=2s", "twice"}, {"e2e=1s,e2el=2s", "twice"},
      {"tpot=-5ms", "-5ms"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    vl_slo_t s = {1, 2, 3};
    char why[160] = "";
    ASSERT_INT_EQ(vl_slo_parse(bad[i].in, &s, why, sizeof(why)), -1);
    if (!strstr(why, bad[i].named))
      fprintf(stderr, "input \"%s\": %s\n", bad[i].in, why);
    ASSERT(strstr(why, bad[i].named) != NULL);
    ASSERT_UINT_EQ(s.ttft_us, 1);
    ASSERT_UINT_EQ(s.e2e_us, 3);
  }
}

/* As vLLM judges: TTFT and TPOT that were not measured count as 0 and meet their bounds. */
TEST_IMPL(slo_judge) {
  vl_slo_t s = {.ttft_us = 100000, .tpot_us = 10000, .e2e_us = 500000};
  const uint64_t ms = 1000000;
  vl_outcome_t o = {.sent_ns = 1000 * ms,
                    .first_token_ns = 1080 * ms,
                    .done_ns = 1480 * ms,
                    .completion_tokens = 41,
                    .err = VL_ERR_NONE};
  ASSERT_UINT_EQ(vl_stats_slo(&s, &o), VL_SLO_TTFT | VL_SLO_TPOT | VL_SLO_E2E | VL_SLO_ALL);
  o.first_token_ns = 1120 * ms; /* ttft 120 ms; tpot 9 ms */
  ASSERT_UINT_EQ(vl_stats_slo(&s, &o), VL_SLO_TPOT | VL_SLO_E2E);
  o.done_ns = 1600 * ms; /* e2e 600 ms; tpot 12 ms */
  ASSERT_UINT_EQ(vl_stats_slo(&s, &o), 0);
  o.first_token_ns = 0; /* not streamed: ttft and tpot not measured */
  o.done_ns = 1400 * ms;
  ASSERT_UINT_EQ(vl_stats_slo(&s, &o), VL_SLO_TTFT | VL_SLO_TPOT | VL_SLO_E2E | VL_SLO_ALL);
  o.err = VL_ERR_HTTP_5XX;
  ASSERT_UINT_EQ(vl_stats_slo(&s, &o), 0);
  vl_slo_t none = {0};
  o.err = VL_ERR_NONE;
  o.done_ns = 100000 * ms;
  ASSERT_UINT_EQ(vl_stats_slo(&none, &o) & VL_SLO_ALL, VL_SLO_ALL);
  vl_slo_met_t m = {0};
  vl_slo_count(&m, VL_SLO_TTFT | VL_SLO_E2E);
  vl_slo_count(&m, VL_SLO_TTFT | VL_SLO_TPOT | VL_SLO_E2E | VL_SLO_ALL);
  ASSERT_UINT_EQ(m.judged, 2);
  ASSERT_UINT_EQ(m.met[0], 2);
  ASSERT_UINT_EQ(m.met[1], 1);
  ASSERT_UINT_EQ(m.met[3], 1);
}

TEST_IMPL(slo_percentiles) {
  double p[VL_SLO_MAX_PERCENTILES];
  int n = 0;
  char why[160], name[24];
  ASSERT_INT_EQ(vl_slo_parse_percentiles("50,90,95,99,99.9", p, &n, why, sizeof(why)), 0);
  ASSERT_INT_EQ(n, 5);
  vl_slo_pct_name(p[4], name, sizeof(name));
  ASSERT_STR_EQ(name, "99.9");
  vl_slo_pct_name(p[0], name, sizeof(name));
  ASSERT_STR_EQ(name, "50");
  vl_slo_pct_name(99.99, name, sizeof(name));
  ASSERT_STR_EQ(name, "99.99");
  static const char *bad[] = {"",  "0",     "101",         "50,,90", "50,",
                              "x", "50,50", "1,2,3,4,5,6", "nan",    "-1"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    n = 7;
    ASSERT_INT_EQ(vl_slo_parse_percentiles(bad[i], p, &n, why, sizeof(why)), -1);
    ASSERT_INT_EQ(n, 7);
  }
}

static const task_entry_t tests[] = {
    TEST_ENTRY(slo_parse),
    TEST_ENTRY(slo_parse_bad),
    TEST_ENTRY(slo_judge),
    TEST_ENTRY(slo_percentiles),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
