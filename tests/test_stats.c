/* The run's statistics: counters per error class, phase and server; latency histograms fed only by
 * successful requests past the warm-up, with percentiles of a known set; the measured span and the
 * mean concurrency the summary derives from it; distinct error messages. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/config.h"
#include "vlmload/summary.h"
#include "vlmload/stats.h"

#include <cjson/cJSON.h>

#define MS 1000000ull /* nanoseconds */

/* A successful streamed request: sent at sent_ms, first token after ttft_ms, done after e2e_ms. */
static vl_outcome_t ok_at(uint64_t id, int measured, uint64_t sent_ms, uint64_t ttft_ms,
                          uint64_t e2e_ms) {
  vl_outcome_t o = {
      .id = id,
      .measured = measured,
      .intended_ns = sent_ms * MS,
      .sent_ns = sent_ms * MS,
      .done_ns = (sent_ms + e2e_ms) * MS,
      .first_token_ns = ttft_ms ? (sent_ms + ttft_ms) * MS : 0,
      .status = 200,
      .err = VL_ERR_NONE,
      .prompt_tokens = 10,
      .completion_tokens = 5,
      .url = 0,
  };
  return o;
}

static vl_outcome_t failed_at(uint64_t id, int measured, uint64_t sent_ms, vl_errclass_t err,
                              long status) {
  vl_outcome_t o = ok_at(id, measured, sent_ms, 0, 10);
  o.err = err;
  o.status = status;
  return o;
}

static void send_and_finish(vl_stats_t *s, const vl_outcome_t *o) {
  vl_stats_sent(s, o->intended_ns, o->sent_ns, 100, o->measured);
  vl_stats_done(s, o);
}

static double num(const cJSON *o, const char *name) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
  ASSERT(cJSON_IsNumber(it));
  return it->valuedouble;
}

/* The summary's JSON for s, with the defaults' configuration (one server). */
static cJSON *summary(const vl_stats_t *s) {
  vl_config_t cfg;
  vl_config_defaults(&cfg);
  vl_run_meta_t meta = {
      .model = "m", .stop_reason = "requests", .duration_ns = 2000 * MS, .load_ns = 1000 * MS};
  cJSON *j = vl_summary_json(&cfg, s, &meta);
  vl_config_free(&cfg);
  ASSERT(j);
  return j;
}

TEST_IMPL(stats_error_classes) {
  vl_stats_t s;
  ASSERT_INT_EQ(vl_stats_init(&s), 0);
  ASSERT_INT_EQ(vl_stats_init_urls(&s, 2), 0);
  /* Per class: how many failures, some of them in the warm-up. */
  struct {
    vl_errclass_t err;
    long status;
    int n, warm;
  } kinds[] = {
      {VL_ERR_HTTP_5XX, 503, 7, 2},  {VL_ERR_HTTP_429, 429, 3, 0}, {VL_ERR_TIMEOUT, 0, 2, 1},
      {VL_ERR_MALFORMED, 200, 1, 0}, {VL_ERR_TRANSPORT, 0, 4, 4},
  };
  uint64_t id = 0;
  for (size_t k = 0; k < VL_ARRAY_SIZE(kinds); k++)
    for (int i = 0; i < kinds[k].n; i++) {
      vl_outcome_t o = failed_at(id, i >= kinds[k].warm, id, kinds[k].err, kinds[k].status);
      o.url = (int)(id % 2);
      id++;
      send_and_finish(&s, &o);
    }
  for (int i = 0; i < 20; i++) { /* 20 successes, 5 of them in the warm-up, all on server 1 */
    vl_outcome_t o = ok_at(id++, i >= 5, 100 + (uint64_t)i, 5, 50);
    o.url = 1;
    send_and_finish(&s, &o);
  }
  ASSERT_UINT_EQ(s.total.sent, 37);
  ASSERT_UINT_EQ(s.total.completed, 37);
  ASSERT_UINT_EQ(s.total.ok, 20);
  ASSERT_UINT_EQ(s.total.failed, 17);
  ASSERT_UINT_EQ(s.total.errors[VL_ERR_NONE], 20);
  for (size_t k = 0; k < VL_ARRAY_SIZE(kinds); k++) {
    ASSERT_UINT_EQ(s.total.errors[kinds[k].err], (uint64_t)kinds[k].n);
    ASSERT_UINT_EQ(s.measured_c.errors[kinds[k].err], (uint64_t)(kinds[k].n - kinds[k].warm));
  }
  ASSERT_UINT_EQ(s.total.errors[VL_ERR_CONNECT], 0);
  ASSERT_UINT_EQ(s.total.errors[VL_ERR_HTTP_4XX], 0);
  /* Past the warm-up: 15 successes and 17 - 7 failures. */
  ASSERT_UINT_EQ(s.measured_c.ok, 15);
  ASSERT_UINT_EQ(s.measured_c.failed, 10);
  ASSERT_UINT_EQ(s.warmup, 12);
  ASSERT_UINT_EQ(s.measured, 25);
  /* Tokens only of successful requests: a failed reply's usage is not the server's output. */
  ASSERT_UINT_EQ(s.total.prompt_tokens, 20 * 10);
  ASSERT_UINT_EQ(s.total.completion_tokens, 20 * 5);
  ASSERT_UINT_EQ(s.measured_c.completion_tokens, 15 * 5);
  /* Failures alternate between the servers (9 on server 0, 8 on 1); successes all went to 1. */
  ASSERT_UINT_EQ(s.per_url[0].failed, 9);
  ASSERT_UINT_EQ(s.per_url[1].failed, 8);
  ASSERT_UINT_EQ(s.per_url[0].ok, 0);
  ASSERT_UINT_EQ(s.per_url[1].ok, 20);
  ASSERT_UINT_EQ(s.per_url[0].sent + s.per_url[1].sent, 37);
  /* Only successes past the warm-up are latencies. */
  ASSERT_UINT_EQ(s.e2e.total, 15);
  ASSERT_UINT_EQ(s.ttft.total, 15);
  /* The interval's e2e holds every finished request, both phases, failures too. */
  ASSERT_UINT_EQ(s.iv_e2e.total, 37);
  ASSERT_UINT_EQ(s.iv.completed, 37);

  /* The summary reports the same counts under the class names. */
  cJSON *j = summary(&s);
  const cJSON *errs = cJSON_GetObjectItemCaseSensitive(j, "errors");
  ASSERT_EQ(num(errs, "http_5xx"), 7.0);
  ASSERT_EQ(num(errs, "http_429"), 3.0);
  ASSERT_EQ(num(errs, "timeout"), 2.0);
  ASSERT_EQ(num(errs, "malformed"), 1.0);
  ASSERT_EQ(num(errs, "transport"), 4.0);
  ASSERT_EQ(num(errs, "connect"), 0.0);
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(j, "requests");
  ASSERT_EQ(num(req, "failed"), 17.0);
  ASSERT_EQ(num(req, "warmup"), 12.0);
  cJSON_Delete(j);

  /* A new interval starts from zero; the run's counters stay. */
  vl_stats_interval_reset(&s);
  ASSERT_UINT_EQ(s.iv.completed, 0);
  ASSERT_UINT_EQ(s.iv_e2e.total, 0);
  ASSERT_UINT_EQ(s.total.completed, 37);
  vl_stats_free(&s);
}

TEST_IMPL(stats_cancelled) {
  /* A request vlmload stopped is counted as failed, but it is no latency and no phase's. */
  vl_stats_t s;
  ASSERT_INT_EQ(vl_stats_init(&s), 0);
  vl_outcome_t o = failed_at(1, 1, 10, VL_ERR_CANCELLED, 0);
  send_and_finish(&s, &o);
  ASSERT_UINT_EQ(s.total.errors[VL_ERR_CANCELLED], 1);
  ASSERT_UINT_EQ(s.total.failed, 1);
  ASSERT_UINT_EQ(s.measured, 0);
  ASSERT_UINT_EQ(s.warmup, 0);
  ASSERT_UINT_EQ(s.iv_e2e.total, 0);
  ASSERT_UINT_EQ(s.measure_end_ns, 0);
  vl_stats_free(&s);
}

TEST_IMPL(stats_percentiles) {
  /* Latencies of 1, 2, ..., 1000 ms, in a shuffled order, with a TTFT of a tenth of each. */
  vl_stats_t s;
  ASSERT_INT_EQ(vl_stats_init(&s), 0);
  uint64_t order[1000], rnd = 5;
  for (int i = 0; i < 1000; i++)
    order[i] = (uint64_t)i + 1;
  for (int i = 999; i > 0; i--) {
    int k = (int)(task_rand(&rnd) % (uint64_t)(i + 1));
    uint64_t t = order[i];
    order[i] = order[k];
    order[k] = t;
  }
  for (int i = 0; i < 1000; i++) {
    vl_outcome_t o = ok_at((uint64_t)i, 1, 10 * (uint64_t)i, order[i] / 10, order[i]);
    o.completion_tokens = 10;
    send_and_finish(&s, &o);
  }
  vl_lat_t l;
  vl_stats_lat(&s.e2e, &l);
  ASSERT_UINT_EQ(l.count, 1000);
  ASSERT_NEAR(l.mean, 500.5, 1e-9); /* the exact sum, not the buckets */
  /* Population std of 1..1000: sqrt((1000^2 - 1) / 12). */
  ASSERT_NEAR(l.std, sqrt((1e6 - 1) / 12), 1e-6);
  ASSERT_EQ(l.min, 1.0);
  ASSERT_EQ(l.max, 1000.0);
  /* Percentiles are the top of the bucket of the k-th value: within 0.1% above it. */
  ASSERT(l.p50 >= 500 && l.p50 <= 500.5);
  ASSERT(l.p90 >= 900 && l.p90 <= 900.9);
  ASSERT(l.p95 >= 950 && l.p95 <= 950.95);
  ASSERT(l.p99 >= 990 && l.p99 <= 990.99);
  /* From intended start and from send alike (both are the same here). */
  vl_lat_t ls;
  vl_stats_lat(&s.e2e_sent, &ls);
  ASSERT_EQ(ls.p50, l.p50);
  ASSERT_EQ(ls.p99, l.p99);
  /* TTFT: 0 ms for the first 9 (no token: not recorded), then 1..100 ms, ten requests each. */
  vl_lat_t t;
  vl_stats_lat(&s.ttft, &t);
  ASSERT_UINT_EQ(t.count, 991);
  ASSERT_EQ(t.min, 1.0);
  ASSERT_EQ(t.max, 100.0);
  ASSERT(t.p50 >= 50 && t.p50 <= 50.05);
  /* TPOT: (e2e - ttft) / 9 for the 991 with 10 tokens. */
  ASSERT_UINT_EQ(s.tpot.total, 991);
  vl_lat_t tp;
  vl_stats_lat(&s.tpot, &tp);
  ASSERT_NEAR(tp.max, (1000 - 100) / 9.0, 0.001);
  vl_stats_free(&s);

  /* With nothing measured, every figure is NaN. */
  vl_hist_t empty;
  ASSERT_INT_EQ(vl_hist_init(&empty, VL_STATS_HIGHEST_US, VL_STATS_SIGDIGITS), 0);
  vl_stats_lat(&empty, &l);
  ASSERT_UINT_EQ(l.count, 0);
  ASSERT(isnan(l.mean) && isnan(l.p50) && isnan(l.max));
  vl_hist_free(&empty);
}

TEST_IMPL(stats_send_lag) {
  /* Lateness of each send against its intended time, past the warm-up only. */
  vl_stats_t s;
  ASSERT_INT_EQ(vl_stats_init(&s), 0);
  vl_stats_sent(&s, 0, 50 * MS, 10, 0); /* warm-up: not a measured lag */
  for (uint64_t i = 1; i <= 100; i++)
    vl_stats_sent(&s, i * 10 * MS, i * 10 * MS + i * 100000, 10, 1); /* i * 0.1 ms late */
  ASSERT_UINT_EQ(s.total.sent, 101);
  ASSERT_UINT_EQ(s.total.bytes_sent, 1010);
  ASSERT_UINT_EQ(s.send_lag.total, 100);
  vl_lat_t l;
  vl_stats_lat(&s.send_lag, &l);
  ASSERT_NEAR(l.mean, 5.05, 1e-9);
  ASSERT_EQ(l.max, 10.0);
  ASSERT_EQ(l.min, 0.1);
  ASSERT_UINT_EQ(s.first_send_ns, 50 * MS);
  ASSERT_UINT_EQ(s.measure_start_ns, 10 * MS + 100000);
  ASSERT_UINT_EQ(s.last_send_ns, 1000 * MS + 10 * MS);
  vl_stats_free(&s);
}

TEST_IMPL(stats_from_intended) {
  /* A request due at 1 s went out 30 ms late, had its first token 50 ms after the send and its
   * first content token 80 ms after it, and finished 100 ms after it with 11 tokens: 130 ms from
   * its intended start (what the open loop measures), 100 ms from the send, a TTFT of 50 ms and a
   * TPOT of (100 - 50) / 10 ms. */
  vl_stats_t s;
  ASSERT_INT_EQ(vl_stats_init(&s), 0);
  vl_outcome_t o = ok_at(1, 1, 1030, 50, 100);
  o.intended_ns = 1000 * MS;
  o.first_content_ns = (1030 + 80) * MS;
  o.completion_tokens = 11;
  send_and_finish(&s, &o);
  vl_lat_t l;
  vl_stats_lat(&s.e2e, &l);
  ASSERT_EQ(l.max, 130.0);
  vl_stats_lat(&s.e2e_sent, &l);
  ASSERT_EQ(l.max, 100.0);
  vl_stats_lat(&s.ttft, &l);
  ASSERT_EQ(l.max, 50.0);
  vl_stats_lat(&s.ttfc, &l);
  ASSERT_EQ(l.max, 80.0);
  vl_stats_lat(&s.tpot, &l);
  ASSERT_EQ(l.max, 5.0);
  vl_stats_lat(&s.send_lag, &l);
  ASSERT_EQ(l.max, 30.0);
  double tpot;
  ASSERT_INT_EQ(vl_stats_tpot_us(&o, &tpot), 1);
  ASSERT_EQ(tpot, 5000.0);
  /* No TPOT for one token, an unknown count, or a failure. */
  o.completion_tokens = 1;
  ASSERT_INT_EQ(vl_stats_tpot_us(&o, &tpot), 0);
  o.completion_tokens = -1;
  ASSERT_INT_EQ(vl_stats_tpot_us(&o, &tpot), 0);
  o.completion_tokens = 11;
  o.err = VL_ERR_TRUNCATED;
  ASSERT_INT_EQ(vl_stats_tpot_us(&o, &tpot), 0);
  vl_stats_free(&s);
}

TEST_IMPL(stats_measured_span_and_concurrency) {
  /* Five warm-up requests sent every 100 ms from t = 0, one of them finishing last of all (at
   * 5.2 s); then ten measured ones sent every 100 ms from t = 500 ms, each taking 400 ms, and a
   * measured failure done at 2.1 s. The measured span runs from the first measured send (500 ms)
   * to the last measured completion (2100 ms): 1.6 s, whatever the warm-up did. Little's law:
   * 10 x 0.4 s of successful requests in flight over 1.6 s is a mean concurrency of 2.5. */
  vl_stats_t s;
  ASSERT_INT_EQ(vl_stats_init(&s), 0);
  ASSERT_INT_EQ(vl_stats_init_urls(&s, 1), 0);
  for (uint64_t i = 0; i < 5; i++) {
    vl_outcome_t o = ok_at(i, 0, 100 * i, 0, i == 2 ? 5000 : 300);
    send_and_finish(&s, &o);
  }
  for (uint64_t i = 0; i < 10; i++) {
    vl_outcome_t o = ok_at(5 + i, 1, 500 + 100 * i, 50, 400);
    o.intended_ns -= 20 * MS; /* sent late: in flight from the send, not from its due time */
    send_and_finish(&s, &o);
  }
  /* The failure ends the span, but adds nothing to the latencies. */
  vl_outcome_t f = failed_at(15, 1, 1500, VL_ERR_HTTP_5XX, 500);
  f.done_ns = 2100 * MS;
  send_and_finish(&s, &f);
  ASSERT_UINT_EQ(s.measure_start_ns, 500 * MS);
  ASSERT_UINT_EQ(s.measure_end_ns, 2100 * MS);
  ASSERT_UINT_EQ(s.warmup, 5);
  ASSERT_UINT_EQ(s.measured, 11);
  ASSERT_UINT_EQ(s.e2e_sent.total, 10);
  cJSON *j = summary(&s);
  ASSERT_NEAR(num(j, "duration"), 1.6, 1e-9);
  ASSERT_NEAR(num(j, "concurrency"), 4.0 / 1.6, 1e-9);
  ASSERT_EQ(num(j, "completed"), 10.0); /* successes past the warm-up */
  ASSERT_NEAR(num(j, "request_throughput"), 10 / 1.6, 1e-9);
  ASSERT_NEAR(num(j, "output_throughput"), 50 / 1.6, 1e-9);
  ASSERT_NEAR(num(j, "median_e2e_latency_ms"), 400, 0.4);
  ASSERT_NEAR(num(j, "mean_ttft_ms"), 50, 1e-9);
  cJSON_Delete(j);
  vl_stats_free(&s);
}

TEST_IMPL(stats_messages) {
  vl_stats_t s;
  ASSERT_INT_EQ(vl_stats_init(&s), 0);
  /* The same first line with different tails is one message; a different status is another. */
  vl_stats_message(&s, VL_ERR_HTTP_5XX, 503, "overloaded\nretry later");
  vl_stats_message(&s, VL_ERR_HTTP_5XX, 503, "overloaded\r\nsomething else");
  vl_stats_message(&s, VL_ERR_HTTP_5XX, 503, "overloaded");
  vl_stats_message(&s, VL_ERR_HTTP_5XX, 500, "overloaded");
  vl_stats_message(&s, VL_ERR_HTTP_4XX, 400, "bad image");
  ASSERT_INT_EQ(s.n_messages, 3);
  ASSERT_STR_EQ(s.messages[0].text, "overloaded");
  ASSERT_UINT_EQ(s.messages[0].count, 3);
  ASSERT_INT_EQ(s.messages[1].status, 500);
  ASSERT_UINT_EQ(s.messages[1].count, 1);
  ASSERT_INT_EQ(s.messages[2].err, VL_ERR_HTTP_4XX);
  /* At most 200 bytes of a line are kept. */
  char longer[400];
  memset(longer, 'x', sizeof(longer) - 1);
  longer[sizeof(longer) - 1] = '\0';
  vl_stats_message(&s, VL_ERR_STREAM, 200, longer);
  ASSERT_UINT_EQ(strlen(s.messages[3].text), 200);
  /* Past VL_STATS_MESSAGES kinds, the rest are counted together. */
  for (int i = 0; i < 20; i++) {
    char m[32];
    snprintf(m, sizeof(m), "message %c", 'a' + i);
    vl_stats_message(&s, VL_ERR_HTTP_5XX, 502, m);
  }
  ASSERT_INT_EQ(s.n_messages, VL_STATS_MESSAGES);
  ASSERT_UINT_EQ(s.messages_other, 4 + 20 - VL_STATS_MESSAGES);
  vl_stats_free(&s);
}

/* Messages that differ only in their numbers are one kind: counted together, the first kept
 * whole as the example, flagged as having other numbers; any other difference is another kind. */
TEST_IMPL(stats_messages_numbers) {
  vl_stats_t s;
  ASSERT_INT_EQ(vl_stats_init(&s), 0);
  const char *first = "request (2754 tokens) exceeds the available context size (1024 tokens), "
                      "try increasing it";
  vl_stats_message(&s, VL_ERR_HTTP_4XX, 400, first);
  ASSERT_INT_EQ(s.messages[0].numbers_vary, 0);
  vl_stats_message(&s, VL_ERR_HTTP_4XX, 400, first);
  ASSERT_INT_EQ(s.messages[0].numbers_vary, 0);
  for (int i = 0; i < 300; i++) {
    char m[200];
    snprintf(m, sizeof(m),
             "request (%d tokens) exceeds the available context size (%d tokens), try "
             "increasing it",
             1025 + 97 * i, i % 2 ? 1024 : 512);
    vl_stats_message(&s, VL_ERR_HTTP_4XX, 400, m);
  }
  vl_stats_message(&s, VL_ERR_HTTP_4XX, 400, "request (9 tokens) exceeds the available context");
  vl_stats_message(&s, VL_ERR_HTTP_4XX, 400, "request (x tokens) exceeds the available context");
  vl_stats_message(&s, VL_ERR_HTTP_5XX, 500, first);
  ASSERT_INT_EQ(s.n_messages, 4);
  ASSERT_STR_EQ(s.messages[0].text, first);
  ASSERT_UINT_EQ(s.messages[0].count, 302);
  ASSERT_INT_EQ(s.messages[0].numbers_vary, 1);
  ASSERT_UINT_EQ(s.messages[1].count, 1);
  ASSERT_UINT_EQ(s.messages[2].count, 1);
  ASSERT_INT_EQ(s.messages[3].status, 500);
  ASSERT_UINT_EQ(s.messages_other, 0);
  vl_stats_free(&s);
}

TEST_IMPL(stats_images) {
  vl_stats_t s;
  ASSERT_INT_EQ(vl_stats_init(&s), 0);
  vl_stats_images(&s, 0, 0, 0);
  vl_stats_images(&s, 0, 0, 0);
  vl_stats_images(&s, 3, 3000, 3 * 640 * 480);
  vl_stats_images(&s, 1, 500, 224 * 224);
  ASSERT_UINT_EQ(s.text_only, 2);
  ASSERT_UINT_EQ(s.with_images, 2);
  ASSERT_UINT_EQ(s.images_sent, 4);
  ASSERT_UINT_EQ(s.image_bytes, 3500);
  ASSERT_UINT_EQ(s.image_pixels, 3 * 640 * 480 + 224 * 224);
  vl_stats_free(&s);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(stats_error_classes), TEST_ENTRY(stats_cancelled),
    TEST_ENTRY(stats_percentiles),   TEST_ENTRY(stats_send_lag),
    TEST_ENTRY(stats_from_intended), TEST_ENTRY(stats_measured_span_and_concurrency),
    TEST_ENTRY(stats_messages),      TEST_ENTRY(stats_messages_numbers),
    TEST_ENTRY(stats_images),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
