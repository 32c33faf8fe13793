/* `vlmload merge` over two shards' --histograms files written here by hand: counters add up,
 * percentiles come from the added counts (not from the shards' own percentiles), the measured span
 * runs from the earliest start to the latest end, the timeline lines shards up by wall-clock
 * second; a file that is not such a record, or of another histogram layout, is refused. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/hist.h"
#include "../src/commands/merge.h"
#include "vlmload/stats.h"

#include <cjson/cJSON.h>

/* One histogram's JSON holding n values v[i] (microseconds), count c[i] each, with bucket indices
 * from the layout every vlmload histogram has. */
static void hist(FILE *f, int n, const int64_t *v, const uint64_t *c) {
  vl_hist_t h;
  ASSERT_INT_EQ(vl_hist_init(&h, VL_STATS_HIGHEST_US, VL_STATS_SIGDIGITS), 0);
  double sum = 0, sumsq = 0;
  uint64_t total = 0;
  int64_t mn = 0, mx = 0;
  for (int i = 0; i < n; i++) {
    sum += (double)v[i] * (double)c[i];
    sumsq += (double)v[i] * (double)v[i] * (double)c[i];
    total += c[i];
    if (i == 0 || v[i] < mn)
      mn = v[i];
    if (v[i] > mx)
      mx = v[i];
  }
  fprintf(f,
          "{\"total\":%llu,\"sum\":%.17g,\"sumsq\":%.17g,\"min\":%lld,\"max\":%lld,"
          "\"clamped\":0,\"counts\":[",
          (unsigned long long)total, sum, sumsq, (long long)mn, (long long)mx);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s[%d,%llu]", i ? "," : "", vl_hist_index(&h, v[i]), (unsigned long long)c[i]);
  fputs("]}", f);
  vl_hist_free(&h);
}

typedef struct {
  const char *name;
  /* e2e (and e2e_sent, ttft) values in ms and how many of each */
  int n;
  int64_t ms[3];
  uint64_t count[3];
  uint64_t sent, completed, ok, http_5xx, timeout, prompt_tokens, completion_tokens;
  uint64_t arrivals, dropped, warmup, measured, flushes;
  double measure_start_ms, measure_end_ms, duration_s;
  /* two intervals: wall ms, sent, completed, e2e ms (all of the interval's requests) */
  double iv_wall[2];
  uint64_t iv_sent[2], iv_n[2];
  int64_t iv_ms[2];
  const char *layout_highest; /* NULL: vlmload's own */
} shard_t;

static void counts(FILE *f, const shard_t *s) {
  fprintf(f,
          "\"sent\":%llu,\"completed\":%llu,\"ok\":%llu,\"failed\":%llu,\"prompt_tokens\":%llu,"
          "\"completion_tokens\":%llu,\"bytes_sent\":%llu,\"errors\":{\"http_5xx\":%llu,"
          "\"timeout\":%llu}",
          (unsigned long long)s->sent, (unsigned long long)s->completed, (unsigned long long)s->ok,
          (unsigned long long)(s->http_5xx + s->timeout), (unsigned long long)s->prompt_tokens,
          (unsigned long long)s->completion_tokens, (unsigned long long)(s->sent * 1000),
          (unsigned long long)s->http_5xx, (unsigned long long)s->timeout);
}

/* Writes the shard's record into the test's directory; returns its path, kept in path. */
static const char *write_shard(const shard_t *s, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s.json", task_tmpdir(), s->name);
  FILE *f = fopen(path, "w");
  ASSERT(f);
  int64_t us[3];
  for (int i = 0; i < s->n; i++)
    us[i] = s->ms[i] * 1000;
  fprintf(f,
          "{\"format\":\"vlmload-histograms\",\"version\":1,\"layout\":{\"unit\":\"us\","
          "\"highest\":%s,\"sigdigits\":%d},\"model\":\"m\",\"stop_reason\":\"requests\","
          "\"duration_s\":%.17g,\"wall_start_ms\":%.17g,\"first_send_wall_ms\":%.17g,"
          "\"last_send_wall_ms\":%.17g,\"paused_before_last_send_ms\":0,"
          "\"measure_start_wall_ms\":%.17g,\"measure_end_wall_ms\":%.17g,\"load_s\":%.17g,"
          "\"paused_s\":0,\"paused_flushes\":0,",
          s->layout_highest ? s->layout_highest : "3600000000", VL_STATS_SIGDIGITS, s->duration_s,
          s->measure_start_ms - 500, s->measure_start_ms - 100, s->measure_end_ms - 1000,
          s->measure_start_ms, s->measure_end_ms, s->duration_s - 1);
  fputs("\"counters\":{", f);
  counts(f, s);
  fprintf(f,
          ",\"arrivals\":%llu,\"dropped\":%llu,\"delayed\":0,\"retried\":0,\"warmup\":%llu,"
          "\"measured\":%llu,\"flushes\":%llu,\"servers\":[{",
          (unsigned long long)s->arrivals, (unsigned long long)s->dropped,
          (unsigned long long)s->warmup, (unsigned long long)s->measured,
          (unsigned long long)s->flushes);
  counts(f, s);
  fputs("}],\"past_warmup\":{", f);
  counts(f, s);
  fputs("}},\"metrics\":{", f);
  const char *names[] = {"e2e", "e2e_sent", "ttft", "tpot", "first_content", "itl", "send_lag"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(names); i++) {
    fprintf(f, "%s\"%s\":", i ? "," : "", names[i]);
    if (i < 3)
      hist(f, s->n, us, s->count);
    else
      hist(f, 0, NULL, NULL);
  }
  fputs("},\"intervals\":[", f);
  for (int i = 0; i < 2; i++) {
    int64_t v = s->iv_ms[i] * 1000;
    fprintf(f,
            "%s{\"wall_ms\":%.17g,\"sent\":%llu,\"completed\":%llu,\"ok\":%llu,\"failed\":0,"
            "\"completion_tokens\":%llu,\"e2e\":",
            i ? "," : "", s->iv_wall[i], (unsigned long long)s->iv_sent[i],
            (unsigned long long)s->iv_n[i], (unsigned long long)s->iv_n[i],
            (unsigned long long)(s->iv_n[i] * 5));
    hist(f, 1, &v, &s->iv_n[i]);
    fputs("}", f);
  }
  fprintf(f,
          "],\"config\":{\"rate\":20,\"concurrency\":64,\"on_full\":\"queue\",\"urls\":["
          "\"http://127.0.0.1:30000\"],\"shard\":\"%s\"}}\n",
          s->name);
  ASSERT_INT_EQ(fclose(f), 0);
  return path;
}

/* Shard A: 60 requests of 100 ms and 30 of 200 ms; shard B: 5 of 200 ms, 4 of 300 ms and 1 of
 * 1000 ms. */
static const shard_t shard_a = {
    .name = "a",
    .n = 2,
    .ms = {100, 200},
    .count = {60, 30},
    .sent = 95,
    .completed = 92,
    .ok = 90,
    .http_5xx = 2,
    .prompt_tokens = 900,
    .completion_tokens = 450,
    .arrivals = 96,
    .dropped = 1,
    .warmup = 4,
    .measured = 88,
    .flushes = 3,
    .measure_start_ms = 1000000,
    .measure_end_ms = 1010000,
    .duration_s = 14,
    .iv_wall = {1001500, 1002500},
    .iv_sent = {50, 45},
    .iv_n = {50, 40},
    .iv_ms = {100, 200},
};
static const shard_t shard_b = {
    .name = "b",
    .n = 3,
    .ms = {200, 300, 1000},
    .count = {5, 4, 1},
    .sent = 12,
    .completed = 11,
    .ok = 10,
    .timeout = 1,
    .prompt_tokens = 100,
    .completion_tokens = 50,
    .arrivals = 12,
    .warmup = 1,
    .measured = 10,
    .flushes = 2,
    .measure_start_ms = 1002000,
    .measure_end_ms = 1012000,
    .duration_s = 13,
    .iv_wall = {1001700, 1002800},
    .iv_sent = {5, 7},
    .iv_n = {5, 5},
    .iv_ms = {300, 200},
};

static int merge(const char *out, const char *a, const char *b, const char *timeline) {
  char *argv[8] = {"merge", (char *)out, (char *)a};
  int argc = 3;
  if (b)
    argv[argc++] = (char *)b;
  if (timeline) {
    argv[argc++] = "--timeline";
    argv[argc++] = (char *)timeline;
  }
  argv[argc] = NULL;
  return vl_merge_main(argc, argv);
}

static cJSON *load(const char *path) {
  FILE *f = fopen(path, "r");
  ASSERT(f);
  static char buf[1 << 17];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  cJSON *j = cJSON_Parse(buf);
  ASSERT(j);
  return j;
}

static double num(const cJSON *o, const char *path) {
  /* "a.b.c": nested members */
  char buf[128];
  snprintf(buf, sizeof(buf), "%s", path);
  const cJSON *it = o;
  for (char *tok = strtok(buf, "."); tok; tok = strtok(NULL, "."))
    it = cJSON_GetObjectItemCaseSensitive(it, tok);
  if (!cJSON_IsNumber(it)) {
    fprintf(stderr, "%s: not a number\n", path);
    abort();
  }
  return it->valuedouble;
}

TEST_IMPL(merge_two_shards) {
  char pa[512], pb[512], out[512], tl[512];
  write_shard(&shard_a, pa, sizeof(pa));
  write_shard(&shard_b, pb, sizeof(pb));
  snprintf(out, sizeof(out), "%s/merged.json", task_tmpdir());
  snprintf(tl, sizeof(tl), "%s/merged.csv", task_tmpdir());
  ASSERT_INT_EQ(merge(out, pa, pb, tl), 0);
  cJSON *j = load(out);
  /* Counters add. */
  ASSERT_EQ(num(j, "requests.sent"), 107.0);
  ASSERT_EQ(num(j, "requests.completed"), 103.0);
  ASSERT_EQ(num(j, "requests.ok"), 100.0);
  ASSERT_EQ(num(j, "requests.failed"), 3.0);
  ASSERT_EQ(num(j, "requests.arrivals"), 108.0);
  ASSERT_EQ(num(j, "requests.dropped"), 1.0);
  ASSERT_EQ(num(j, "requests.warmup"), 5.0);
  ASSERT_EQ(num(j, "requests.measured"), 98.0);
  ASSERT_EQ(num(j, "errors.http_5xx"), 2.0);
  ASSERT_EQ(num(j, "errors.timeout"), 1.0);
  ASSERT_EQ(num(j, "errors.connect"), 0.0);
  ASSERT_EQ(num(j, "tokens.prompt"), 1000.0);
  ASSERT_EQ(num(j, "tokens.completion"), 500.0);
  ASSERT_EQ(num(j, "bytes_sent"), 107000.0);
  ASSERT_EQ(num(j, "total_output_tokens"), 500.0);
  const cJSON *servers = cJSON_GetObjectItemCaseSensitive(j, "servers");
  ASSERT_INT_EQ(cJSON_GetArraySize(servers), 1);
  ASSERT_EQ(num(cJSON_GetArrayItem(servers, 0), "sent"), 107.0);
  /* Latency of the 100 merged requests: 60 x 100, 35 x 200 (30 of A's, 5 of B's in the same
   * bucket), 4 x 300, 1 x 1000 ms. The 50th is 100 ms, the 90th and 95th 200, the 99th 300;
   * averaging the shards' p99s (200 and 1000) would give 600. Percentiles are the top of their
   * bucket: within 0.1% above. */
  const char *lat[] = {"latency_ms", "latency_sent_ms", "ttft_ms"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(lat); i++) {
    char key[64];
    snprintf(key, sizeof(key), "%s.count", lat[i]);
    ASSERT_EQ(num(j, key), 100.0);
    snprintf(key, sizeof(key), "%s.mean", lat[i]);
    ASSERT_NEAR(num(j, key), 152.0, 1e-9);
    struct {
      const char *p;
      double v;
    } want[] = {{"p50", 100}, {"p90", 200}, {"p95", 200}, {"p99", 300}, {"max", 1000}};
    for (size_t k = 0; k < VL_ARRAY_SIZE(want); k++) {
      snprintf(key, sizeof(key), "%s.%s", lat[i], want[k].p);
      double v = num(j, key);
      if (!(v >= want[k].v && v <= want[k].v * 1.001)) {
        fprintf(stderr, "%s: %g, want %g\n", key, v, want[k].v);
        abort();
      }
    }
    snprintf(key, sizeof(key), "%s.min", lat[i]);
    ASSERT_EQ(num(j, key), 100.0);
  }
  /* Population std from the exact sums: E[x^2] = (60 x 1e4 + 35 x 4e4 + 4 x 9e4 + 1e6) / 100. */
  double ex2 = (60 * 1e4 + 35 * 4e4 + 4 * 9e4 + 1e6) / 100;
  ASSERT_NEAR(num(j, "latency_ms.std"), sqrt(ex2 - 152.0 * 152.0), 1e-6);
  ASSERT_NEAR(num(j, "p99_e2e_latency_ms"), 300, 0.3);
  ASSERT_NEAR(num(j, "median_e2e_latency_ms"), 100, 0.1);
  /* The measured span: A's start (1000 s) to B's end (1012 s); 15.2 s of requests in flight over
   * it is a mean concurrency of 15.2 / 12. The run lasted as long as its longest shard. */
  ASSERT_NEAR(num(j, "duration"), 12.0, 1e-9);
  ASSERT_NEAR(num(j, "concurrency"), 15.2 / 12, 1e-9);
  ASSERT_NEAR(num(j, "request_throughput"), 100 / 12.0, 1e-9);
  ASSERT_NEAR(num(j, "duration_s"), 14.0, 1e-9); /* A's, though B's came last */
  /* The first shard's configuration, and where the figures came from. */
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(j, "config");
  ASSERT_STR_EQ(cJSON_GetObjectItemCaseSensitive(cfg, "shard")->valuestring, "a");
  const cJSON *from = cJSON_GetObjectItemCaseSensitive(j, "merged_from");
  ASSERT_INT_EQ(cJSON_GetArraySize(from), 2);
  ASSERT_STR_EQ(cJSON_GetArrayItem(from, 1)->valuestring, pb);
  cJSON_Delete(j);

  /* The timeline: one row per wall-clock second, both shards' rows of a second added. */
  FILE *f = fopen(tl, "r");
  ASSERT(f);
  char line[256];
  ASSERT(fgets(line, sizeof(line), f));
  ASSERT_STR_EQ(line, "wall_ms,sent,completed,ok,failed,e2e_p50_ms,e2e_p99_ms,completion_tokens\n");
  long long wall;
  unsigned long long sent, completed, ok, failed, tokens;
  double p50, p99;
  const struct {
    long long wall;
    unsigned long long sent, completed;
    double p50, p99;
  } rows[] = {
      {1001999, 55, 55, 100, 300}, /* A's 50 of 100 ms and B's 5 of 300 ms */
      {1002999, 52, 45, 200, 200}, /* A's 40 and B's 5, all of 200 ms */
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(rows); i++) {
    ASSERT(fgets(line, sizeof(line), f));
    ASSERT_INT_EQ(sscanf(line, "%lld,%llu,%llu,%llu,%llu,%lf,%lf,%llu", &wall, &sent, &completed,
                         &ok, &failed, &p50, &p99, &tokens),
                  8);
    ASSERT_INT_EQ(wall, rows[i].wall);
    ASSERT_UINT_EQ(sent, rows[i].sent);
    ASSERT_UINT_EQ(completed, rows[i].completed);
    ASSERT_UINT_EQ(ok, rows[i].completed);
    ASSERT_UINT_EQ(tokens, rows[i].completed * 5);
    ASSERT(p50 >= rows[i].p50 && p50 <= rows[i].p50 * 1.001);
    ASSERT(p99 >= rows[i].p99 && p99 <= rows[i].p99 * 1.001);
  }
  ASSERT(!fgets(line, sizeof(line), f));
  fclose(f);
}

TEST_IMPL(merge_one_shard_is_itself) {
  /* Merging one file gives that shard's own figures. */
  char pb[512], out[512];
  write_shard(&shard_b, pb, sizeof(pb));
  snprintf(out, sizeof(out), "%s/one.json", task_tmpdir());
  ASSERT_INT_EQ(merge(out, pb, NULL, NULL), 0);
  cJSON *j = load(out);
  ASSERT_EQ(num(j, "requests.sent"), 12.0);
  ASSERT_EQ(num(j, "latency_ms.count"), 10.0);
  ASSERT_NEAR(num(j, "latency_ms.mean"), (5 * 200 + 4 * 300 + 1000) / 10.0, 1e-9);
  ASSERT_NEAR(num(j, "latency_ms.p50"), 200, 0.2);
  ASSERT_NEAR(num(j, "latency_ms.p99"), 1000, 1);
  ASSERT_NEAR(num(j, "duration"), 10.0, 1e-9);
  cJSON_Delete(j);
}

TEST_IMPL(merge_refuses_bad_input) {
  char pa[512], bad[512], out[512], other[512];
  write_shard(&shard_a, pa, sizeof(pa));
  snprintf(out, sizeof(out), "%s/out.json", task_tmpdir());
  /* Not a histograms record: a summary (--output) is JSON too, but no input to merge. */
  snprintf(bad, sizeof(bad), "%s/summary.json", task_tmpdir());
  FILE *f = fopen(bad, "w");
  ASSERT(f);
  fputs("{\"requests\":{\"sent\":5}}\n", f);
  ASSERT_INT_EQ(fclose(f), 0);
  ASSERT_INT_EQ(merge(out, pa, bad, NULL), 1);
  /* Another histogram layout cannot be added bucket by bucket. */
  shard_t o = shard_b;
  o.name = "other-layout";
  o.layout_highest = "60000000";
  write_shard(&o, other, sizeof(other));
  ASSERT_INT_EQ(merge(out, pa, other, NULL), 1);
  /* A file that is not there, and usage errors. */
  snprintf(bad, sizeof(bad), "%s/missing.json", task_tmpdir());
  ASSERT_INT_EQ(merge(out, pa, bad, NULL), 1);
  char *only_out[] = {"merge", out, NULL};
  ASSERT_INT_EQ(vl_merge_main(2, only_out), 2);
  char *unknown[] = {"merge", "--frobnicate", out, pa, NULL};
  ASSERT_INT_EQ(vl_merge_main(4, unknown), 2);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(merge_two_shards),
    TEST_ENTRY(merge_one_shard_is_itself),
    TEST_ENTRY(merge_refuses_bad_input),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
