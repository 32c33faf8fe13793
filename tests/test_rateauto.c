/* --rate auto's decisions against a model server: which rate comes next, when the probe ends, the
 * knee and the rate chosen, and the ends without a knee or without a rate. */
#include "vlmload/common.h"
#include "vlmload/rateauto.h"

#include "task.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

/* A server of capacity cap requests a second, each served in service_ms when it keeps up; over
 * its capacity the queue grows for the whole stage and the median request waits half of it.
 * fail is the share of requests that fail. */
typedef struct {
  double cap, service_ms, fail;
} model_t;

/* Fills the next stage (as the runner does, then its requests as they finish) at rate (0: the
 * closed loop of one at a time). */
static void run_stage(vl_rateauto_t *a, const model_t *m, double rate) {
  vl_phase_result_t *p = &a->stage[a->n++];
  p->target_rate = rate;
  p->max_concurrency = rate == 0 ? 1 : 256;
  double secs, lat_ms;
  uint64_t n;
  if (rate == 0) {
    n = VL_RATEAUTO_FLOOR_REQUESTS;
    lat_ms = m->service_ms;
    secs = n * lat_ms / 1e3;
  } else {
    secs = (double)vl_rateauto_stage_us(a, rate) / 1e6;
    n = (uint64_t)llround(rate * secs);
    lat_ms = m->service_ms;
    if (rate > m->cap)
      lat_ms += (rate - m->cap) / m->cap * secs / 2 * 1e3;
  }
  p->seconds = secs;
  p->sent = n;
  p->failed = (uint64_t)llround((double)n * m->fail);
  p->ok = n - p->failed;
  for (uint64_t i = 0; i < p->ok; i++)
    vl_hist_record(&p->e2e, (int64_t)(lat_ms * 1e3));
}

/* Runs the whole probe against m. */
static void probe(vl_rateauto_t *a, const model_t *m) {
  ASSERT_INT_EQ(vl_rateauto_init(a), 0);
  run_stage(a, m, 0);
  double rate;
  while ((rate = vl_rateauto_next(a)) > 0) {
    ASSERT(a->n < VL_RATEAUTO_MAX_STAGES);
    run_stage(a, m, rate);
  }
  ASSERT(a->done);
}

TEST_IMPL(rateauto_finds_the_knee) {
  model_t m = {300, 20, 0};
  vl_rateauto_t a;
  probe(&a, &m);
  /* The floor stage runs at 50 a second (one at a time, 20 ms each): 50, 100, 200, 400 (behind),
   * then 300 (keeps up) and 350 (behind). */
  ASSERT_NEAR(a.floor_ms, 20, 0.5);
  ASSERT_INT_EQ(a.n, 1 + 4 + VL_RATEAUTO_BISECTS);
  const double want[] = {0, 50, 100, 200, 400, 300, 350};
  for (int i = 0; i < a.n; i++)
    ASSERT_NEAR(a.stage[i].target_rate, want[i], 1e-6);
  ASSERT_NEAR(a.knee, 350, 1e-6);
  ASSERT_NEAR(a.good, 300, 1e-6);
  ASSERT_NEAR(a.chosen, 0.7 * 350, 1e-6);
  ASSERT(a.why == NULL);
  /* The record: the closed loop unjudged, each open-loop stage judged. */
  cJSON *j = vl_rateauto_json(&a);
  cJSON *st = cJSON_GetObjectItem(j, "stages");
  ASSERT_INT_EQ(cJSON_GetArraySize(st), a.n);
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(st, 0), "behind")));
  ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(st, 3), "behind")));
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(st, 4), "behind")));
  ASSERT_NEAR(cJSON_GetObjectItem(j, "chosen")->valuedouble, 245, 1e-6);
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(j, "error")));
  cJSON_Delete(j);
  char words[300];
  vl_rateauto_words(&a, words, sizeof(words));
  ASSERT(strstr(words, "knee 350 req/s (kept up at 300), run at 70%: 245 req/s; 7 probe stages") ==
         words);
  vl_rateauto_free(&a);
}

TEST_IMPL(rateauto_short_of_the_first_rate) {
  /* One request at a time is all it serves: the first open-loop rate already falls behind, and
   * the bisections go down from it. */
  model_t m = {45, 20, 0};
  vl_rateauto_t a;
  probe(&a, &m);
  ASSERT_INT_EQ(a.n, 1 + 1 + VL_RATEAUTO_BISECTS);
  ASSERT_NEAR(a.stage[2].target_rate, 25, 1e-6);
  ASSERT_NEAR(a.stage[3].target_rate, 37.5, 1e-6);
  ASSERT_NEAR(a.knee, 50, 1e-6);
  ASSERT_NEAR(a.good, 37.5, 1e-6);
  ASSERT_NEAR(a.chosen, 35, 1e-6);
  vl_rateauto_free(&a);
}

TEST_IMPL(rateauto_errors_fall_behind) {
  /* A server that fails a fifth of its requests over 150 a second: ok falls 10% short there. */
  vl_rateauto_t a;
  ASSERT_INT_EQ(vl_rateauto_init(&a), 0);
  model_t ok = {1e9, 20, 0}, failing = {1e9, 20, 0.2};
  run_stage(&a, &ok, 0);
  double rate;
  while ((rate = vl_rateauto_next(&a)) > 0)
    run_stage(&a, rate > 150 ? &failing : &ok, rate);
  ASSERT_NEAR(a.knee, 175, 1e-6); /* 50, 100, 200 behind, 150, 175 behind */
  ASSERT_NEAR(a.good, 150, 1e-6);
  vl_rateauto_free(&a);
}

TEST_IMPL(rateauto_no_knee) {
  /* Nothing falls behind: the probe stops after its doublings, with no knee, at 70% of the
   * highest rate it tried. */
  model_t m = {1e12, 20, 0};
  vl_rateauto_t a;
  probe(&a, &m);
  ASSERT_INT_EQ(a.n, 1 + VL_RATEAUTO_DOUBLINGS);
  ASSERT(a.knee == 0);
  ASSERT_NEAR(a.good, 50 * pow(2, VL_RATEAUTO_DOUBLINGS - 1), 1e-3);
  ASSERT_NEAR(a.chosen, 0.7 * a.good, 1e-6);
  cJSON *j = vl_rateauto_json(&a);
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(j, "knee")));
  cJSON_Delete(j);
  char words[300];
  vl_rateauto_words(&a, words, sizeof(words));
  ASSERT(strstr(words, "no knee up to ") == words);
  vl_rateauto_free(&a);
}

TEST_IMPL(rateauto_nothing_succeeds) {
  model_t m = {300, 20, 1};
  vl_rateauto_t a;
  probe(&a, &m);
  ASSERT_INT_EQ(a.n, 1);
  ASSERT(a.chosen == 0);
  ASSERT_STR_EQ(a.why, "no request of the closed-loop stage succeeded");
  char words[300];
  vl_rateauto_words(&a, words, sizeof(words));
  ASSERT_STR_EQ(words, "no rate found: no request of the closed-loop stage succeeded");
  vl_rateauto_free(&a);
}

TEST_IMPL(rateauto_stage_length) {
  vl_rateauto_t a;
  memset(&a, 0, sizeof(a));
  a.floor_ms = 2;
  ASSERT_UINT_EQ(vl_rateauto_stage_us(&a, 1000), 1000000);
  a.floor_ms = 200;
  ASSERT_UINT_EQ(vl_rateauto_stage_us(&a, 100), 5000000);
  a.floor_ms = 3000;
  ASSERT_UINT_EQ(vl_rateauto_stage_us(&a, 100), 10000000);
  /* A slow stage lasts long enough for 20 requests: 1.25 req/s, 16 s; never past 30 s. */
  a.floor_ms = 50;
  ASSERT_UINT_EQ(vl_rateauto_stage_us(&a, 1.25), 16000000);
  ASSERT_UINT_EQ(vl_rateauto_stage_us(&a, 0.1), 30000000);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(rateauto_finds_the_knee),     TEST_ENTRY(rateauto_short_of_the_first_rate),
      TEST_ENTRY(rateauto_errors_fall_behind), TEST_ENTRY(rateauto_no_knee),
      TEST_ENTRY(rateauto_nothing_succeeds),   TEST_ENTRY(rateauto_stage_length),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
