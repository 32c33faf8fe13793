#include "merge.h"
#include "vlmload/common.h"
#include "vlmload/json.h"
#include "vlmload/config.h"
#include "vlmload/summary.h"
#include "vlmload/stats.h"
#include "vlmload/timeline.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: vlmload merge OUT.json IN.json... [--timeline OUT.csv]\n"
    "\n"
    "Combine the --histograms files of shards into one JSON summary (the schema of --output).\n"
    "Counters and histogram counts are added, so every percentile is computed from the merged\n"
    "counts.\n"
    "\n"
    "  --timeline OUT.csv    also write one CSV row per wall-clock second across all shards\n"
    "  -h, --help            this help\n";

void vl_merge_usage(FILE *f) {
  fputs(usage, f);
}

/* One wall-clock second of the merged timeline. */
typedef struct {
  int64_t second; /* wall ms / 1000 */
  uint64_t sent, completed, ok, failed, completion_tokens;
  vl_hist_t e2e;
} second_t;

typedef struct {
  vl_stats_t stats;
  cJSON *config; /* of the first input; owned */
  char *model;   /* the first input's, whole; owned */
  double duration_s;
  double first_send_ms, last_send_ms, paused_ms;
  double measure_start_ms, measure_end_ms; /* the measured span, earliest start to latest end */
  double load_s, paused_s, paused_flushes; /* of the shard that ran longest (shards run at once) */
  int64_t wall_start_ms;
  second_t *secs;
  size_t n_secs, cap_secs;
  uint64_t shards;
} merged_t;

static cJSON *load(const char *path) {
  cJSON *root = vl_json_load_file(path);
  if (!root && errno) {
    fprintf(stderr, "vlmload merge: '%s': %s\n", path, strerror(errno));
    return NULL;
  }
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "vlmload-histograms") != 0) {
    fprintf(stderr, "vlmload merge: '%s': not a vlmload --histograms file\n", path);
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

static double numof(const cJSON *o, const char *name, double dflt) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsNumber(it) ? it->valuedouble : dflt;
}

static second_t *second_at(merged_t *m, int64_t second) {
  for (size_t i = 0; i < m->n_secs; i++)
    if (m->secs[i].second == second)
      return &m->secs[i];
  if (m->n_secs == m->cap_secs) {
    m->cap_secs = m->cap_secs ? m->cap_secs * 2 : 64;
    m->secs = vl_xrealloc(m->secs, m->cap_secs * sizeof(second_t));
  }
  second_t *s = &m->secs[m->n_secs++];
  memset(s, 0, sizeof(*s));
  s->second = second;
  if (vl_hist_init(&s->e2e, VL_STATS_HIGHEST_US, VL_STATS_SIGDIGITS) != 0)
    return NULL;
  return s;
}

static int add_file(merged_t *m, const char *path, const cJSON *root) {
  const cJSON *layout = cJSON_GetObjectItemCaseSensitive(root, "layout");
  if (numof(layout, "highest", 0) != (double)VL_STATS_HIGHEST_US ||
      numof(layout, "sigdigits", 0) != VL_STATS_SIGDIGITS) {
    fprintf(stderr, "vlmload merge: '%s': histogram layout differs from this vlmload's\n", path);
    return 1;
  }
  const cJSON *metrics = cJSON_GetObjectItemCaseSensitive(root, "metrics");
  struct {
    const char *name;
    vl_hist_t *h;
  } hs[] = {{"e2e", &m->stats.e2e},   {"e2e_sent", &m->stats.e2e_sent},
            {"ttft", &m->stats.ttft}, {"tpot", &m->stats.tpot},
            {"itl", &m->stats.itl},   {"send_lag", &m->stats.send_lag}};
  /* Files written before vlmload measured the first content token lack it. */
  const cJSON *ttfc = cJSON_GetObjectItemCaseSensitive(metrics, "first_content");
  if (ttfc && vl_stats_hist_add_json(&m->stats.ttfc, ttfc)) {
    fprintf(stderr, "vlmload merge: '%s': bad histogram 'first_content'\n", path);
    return 1;
  }
  /* The server's own timings: only in files whose server gave them. */
  struct {
    const char *name;
    vl_hist_t *h;
  } srv[] = {{"server_e2e", &m->stats.srv_e2e},
             {"server_e2e_rest", &m->stats.srv_e2e_rest},
             {"server_ttft", &m->stats.srv_ttft},
             {"server_ttft_rest", &m->stats.srv_ttft_rest}};
  for (size_t i = 0; i < VL_ARRAY_SIZE(srv); i++) {
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(metrics, srv[i].name);
    if (h && vl_stats_hist_add_json(srv[i].h, h)) {
      fprintf(stderr, "vlmload merge: '%s': bad histogram '%s'\n", path, srv[i].name);
      return 1;
    }
  }
  for (size_t i = 0; i < VL_ARRAY_SIZE(hs); i++) {
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(metrics, hs[i].name);
    if (!h && hs[i].h == &m->stats.tpot)
      continue; /* an older vlmload's file, without TPOT */
    if (vl_stats_hist_add_json(hs[i].h, cJSON_GetObjectItemCaseSensitive(metrics, hs[i].name))) {
      fprintf(stderr, "vlmload merge: '%s': bad histogram '%s'\n", path, hs[i].name);
      return 1;
    }
  }
  if (vl_stats_counters_add_json(&m->stats, cJSON_GetObjectItemCaseSensitive(root, "counters"))) {
    fprintf(stderr, "vlmload merge: '%s': bad counters\n", path);
    return 1;
  }
  const cJSON *iv;
  cJSON_ArrayForEach(iv, cJSON_GetObjectItemCaseSensitive(root, "intervals")) {
    double wall = numof(iv, "wall_ms", -1);
    /* A row stands for the second its interval ended in, so shards line up by wall clock. */
    second_t *s = wall < 0 ? NULL : second_at(m, (int64_t)(wall / 1000));
    if (!s || vl_stats_hist_add_json(&s->e2e, cJSON_GetObjectItemCaseSensitive(iv, "e2e"))) {
      fprintf(stderr, "vlmload merge: '%s': bad interval\n", path);
      return 1;
    }
    s->sent += (uint64_t)numof(iv, "sent", 0);
    s->completed += (uint64_t)numof(iv, "completed", 0);
    s->ok += (uint64_t)numof(iv, "ok", 0);
    s->failed += (uint64_t)numof(iv, "failed", 0);
    s->completion_tokens += (uint64_t)numof(iv, "completion_tokens", 0);
  }
  double first = numof(root, "first_send_wall_ms", -1), last = numof(root, "last_send_wall_ms", -1);
  if (first >= 0 && (m->first_send_ms < 0 || first < m->first_send_ms))
    m->first_send_ms = first;
  if (last > m->last_send_ms)
    m->last_send_ms = last;
  m->paused_ms = VL_MAX(m->paused_ms, numof(root, "paused_before_last_send_ms", 0));
  double ms0 = numof(root, "measure_start_wall_ms", -1),
         ms1 = numof(root, "measure_end_wall_ms", -1);
  if (ms0 >= 0 && (m->measure_start_ms < 0 || ms0 < m->measure_start_ms))
    m->measure_start_ms = ms0;
  if (ms1 > m->measure_end_ms)
    m->measure_end_ms = ms1;
  m->load_s = VL_MAX(m->load_s, numof(root, "load_s", 0));
  m->paused_s = VL_MAX(m->paused_s, numof(root, "paused_s", 0));
  m->paused_flushes = VL_MAX(m->paused_flushes, numof(root, "paused_flushes", 0));
  m->duration_s = VL_MAX(m->duration_s, numof(root, "duration_s", 0));
  int64_t start = (int64_t)numof(root, "wall_start_ms", 0);
  if (!m->wall_start_ms || start < m->wall_start_ms)
    m->wall_start_ms = start;
  if (!m->config) {
    m->config = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(root, "config"), 1);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    m->model = vl_xstrdup(cJSON_IsString(model) ? model->valuestring : "");
  }
  m->shards++;
  return 0;
}

static int cmp_second(const void *a, const void *b) {
  int64_t x = ((const second_t *)a)->second, y = ((const second_t *)b)->second;
  return (x > y) - (x < y);
}

static int write_timeline(merged_t *m, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "vlmload merge: --timeline '%s': %s\n", path, strerror(errno));
    return 1;
  }
  qsort(m->secs, m->n_secs, sizeof(second_t), cmp_second);
  vl_timeline_header(f, VL_TIMELINE_MERGED);
  vl_timeline_header_end(f, NULL, 0);
  for (size_t i = 0; i < m->n_secs; i++) {
    const second_t *s = &m->secs[i];
    /* A second's row stands at its last millisecond; an empty second's percentiles are 0. */
    vl_timeline_row_t row = {.wall_ms = s->second * 1000 + 999,
                             .sent = s->sent,
                             .completed = s->completed,
                             .ok = s->ok,
                             .failed = s->failed,
                             .e2e_p50_ms = (double)vl_hist_percentile(&s->e2e, 50) / 1e3,
                             .e2e_p99_ms = (double)vl_hist_percentile(&s->e2e, 99) / 1e3,
                             .completion_tokens = s->completion_tokens};
    vl_timeline_write(f, VL_TIMELINE_MERGED, 0, &row, NULL, 0);
  }
  if (fclose(f) != 0) {
    fprintf(stderr, "vlmload merge: --timeline '%s': write failed\n", path);
    return 1;
  }
  return 0;
}

/* A configuration with the fields the summary reads, taken from the first shard's. */
static void config_from_json(vl_config_t *c, const cJSON *j) {
  vl_config_defaults(c);
  c->rate = numof(j, "rate", 0);
  c->concurrency = (int)numof(j, "concurrency", c->concurrency);
  const cJSON *onfull = cJSON_GetObjectItemCaseSensitive(j, "on_full");
  if (cJSON_IsString(onfull) && strcmp(onfull->valuestring, "drop") == 0)
    c->on_full = VL_ONFULL_DROP;
  const cJSON *urls = cJSON_GetObjectItemCaseSensitive(j, "urls"), *u;
  int n = 0;
  cJSON_ArrayForEach(u, urls) {
    if (cJSON_IsString(u))
      n++;
  }
  if (n > 0) {
    free(c->urls[0]);
    free(c->urls);
    c->urls = vl_xcalloc((size_t)n, sizeof(char *));
    c->n_urls = 0;
    cJSON_ArrayForEach(u, urls) {
      if (cJSON_IsString(u))
        c->urls[c->n_urls++] = vl_xstrdup(u->valuestring);
    }
    c->url = c->urls[0];
  }
  c->max_error_rate = c->max_p99_ms = -1;
  /* The shards' --slo, for the goodput their counters hold. */
  const cJSON *slo = cJSON_GetObjectItemCaseSensitive(j, "slo");
  char why[160];
  if (cJSON_IsString(slo))
    vl_slo_parse(slo->valuestring, &c->slo, why, sizeof(why));
  /* The shards' --input-tokens and --output-tokens, for the lengths their counters hold. */
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, "input_tokens");
  const cJSON *outl = cJSON_GetObjectItemCaseSensitive(j, "output_tokens");
  if (cJSON_IsString(in))
    vl_lengths_dist_parse(in->valuestring, &c->input_tokens, why, sizeof(why));
  if (cJSON_IsString(outl))
    vl_lengths_dist_parse(outl->valuestring, &c->output_tokens, why, sizeof(why));
}

/* The merged run's --histograms record (the shape report.c writes), so a merged run merges again
 * as one input. */
static int write_histograms(merged_t *m, const char *path, const cJSON *config,
                            const char *stop_reason) {
  cJSON *o = cJSON_CreateObject();
  vl_stats_record_json(o, &m->stats);
  cJSON_AddStringToObject(o, "model", m->model ? m->model : "");
  cJSON_AddStringToObject(o, "stop_reason", stop_reason);
  cJSON_AddNumberToObject(o, "duration_s", m->duration_s);
  cJSON_AddNumberToObject(o, "wall_start_ms", (double)m->wall_start_ms);
  if (m->first_send_ms >= 0) {
    cJSON_AddNumberToObject(o, "first_send_wall_ms", m->first_send_ms);
    cJSON_AddNumberToObject(o, "last_send_wall_ms", m->last_send_ms);
  }
  cJSON_AddNumberToObject(o, "paused_before_last_send_ms", m->paused_ms);
  if (m->measure_start_ms >= 0 && m->measure_end_ms > m->measure_start_ms) {
    cJSON_AddNumberToObject(o, "measure_start_wall_ms", m->measure_start_ms);
    cJSON_AddNumberToObject(o, "measure_end_wall_ms", m->measure_end_ms);
  }
  cJSON_AddNumberToObject(o, "load_s", m->load_s);
  cJSON_AddNumberToObject(o, "paused_s", m->paused_s);
  cJSON_AddNumberToObject(o, "paused_flushes", m->paused_flushes);
  cJSON *ivs = cJSON_AddArrayToObject(o, "intervals");
  for (size_t i = 0; i < m->n_secs; i++) {
    const second_t *s = &m->secs[i];
    cJSON *iv = cJSON_CreateObject();
    cJSON_AddNumberToObject(iv, "wall_ms", (double)(s->second * 1000 + 999));
    cJSON_AddNumberToObject(iv, "seconds", 1);
    cJSON_AddNumberToObject(iv, "sent", (double)s->sent);
    cJSON_AddNumberToObject(iv, "completed", (double)s->completed);
    cJSON_AddNumberToObject(iv, "ok", (double)s->ok);
    cJSON_AddNumberToObject(iv, "failed", (double)s->failed);
    cJSON_AddNumberToObject(iv, "completion_tokens", (double)s->completion_tokens);
    cJSON_AddItemToObject(iv, "e2e", vl_stats_hist_json(&s->e2e));
    cJSON_AddItemToArray(ivs, iv);
  }
  cJSON_AddItemToObject(o, "config", cJSON_Duplicate(config, 1));
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  FILE *f = fopen(path, "w");
  int status = 0;
  if (!f || !text || fputs(text, f) < 0 || fputc('\n', f) < 0)
    status = 1;
  if (f && fclose(f) != 0)
    status = 1;
  if (status)
    fprintf(stderr, "vlmload merge: --histograms '%s': %s\n", path, strerror(errno));
  cJSON_free(text);
  return status;
}

/* Writes the outputs of o from the merged m (inputs added). Returns 0 or 1 (said on stderr). */
static int write_merged(merged_t *m, const char *const *inputs, int n_inputs, vl_merge_opts_t *o) {
  int status = 0;
  vl_config_t cfg;
  config_from_json(&cfg, m->config);
  const vl_config_t *c = o->cfg ? o->cfg : &cfg;
  m->stats.n_urls = vl_config_distinct_urls(c);
  /* Send times of different processes compare by wall clock, kept here in nanoseconds. */
  if (m->first_send_ms >= 0) {
    m->stats.first_send_ns = (uint64_t)(m->first_send_ms * 1e6);
    m->stats.last_send_ns = (uint64_t)(m->last_send_ms * 1e6);
    m->stats.paused_ns_before_last_send = (uint64_t)(m->paused_ms * 1e6);
  }
  if (m->measure_start_ms >= 0 && m->measure_end_ms > m->measure_start_ms) {
    m->stats.measure_start_ns = (uint64_t)(m->measure_start_ms * 1e6);
    m->stats.measure_end_ns = (uint64_t)(m->measure_end_ms * 1e6);
  }
  m->stats.paused_ns = (uint64_t)(m->paused_s * 1e9);
  m->stats.flush_pauses = (uint64_t)m->paused_flushes;
  vl_run_meta_t meta = {.model = m->model ? m->model : "",
                        .stop_reason = o->stop_reason ? o->stop_reason : "merged",
                        .interrupted = o->interrupted,
                        .duration_ns = (uint64_t)(m->duration_s * 1e9),
                        .load_ns = (uint64_t)(m->load_s * 1e9),
                        .processes = (int)m->shards};
  if (o->text)
    vl_summary_print(o->text, c, &m->stats, &meta);
  cJSON *config = o->cfg ? vl_config_json(o->cfg) : m->config;
  if (!o->cfg)
    m->config = NULL;
  cJSON *sum = vl_summary_json(c, &m->stats, &meta);
  cJSON_ReplaceItemInObjectCaseSensitive(sum, "config", cJSON_Duplicate(config, 1));
  const cJSON *extra;
  cJSON_ArrayForEach(extra, o->extra) {
    cJSON_DeleteItemFromObjectCaseSensitive(sum, extra->string);
    cJSON_AddItemToObject(sum, extra->string, cJSON_Duplicate(extra, 1));
  }
  if (o->list_inputs) {
    cJSON *from = cJSON_AddArrayToObject(sum, "merged_from");
    for (int i = 0; i < n_inputs; i++)
      cJSON_AddItemToArray(from, cJSON_CreateString(inputs[i]));
  }
  o->crossed = o->cfg ? vl_summary_thresholds(o->cfg, &m->stats, sum) : 0;
  if (o->summary) {
    char *text = cJSON_Print(sum);
    FILE *f = fopen(o->summary, "w");
    if (!f || !text || fputs(text, f) < 0 || fputc('\n', f) < 0) {
      fprintf(stderr, "vlmload merge: '%s': %s\n", o->summary, strerror(errno));
      status = 1;
    }
    if (f && fclose(f) != 0)
      status = 1;
    cJSON_free(text);
  }
  cJSON_Delete(sum);
  /* The timeline sorts the seconds; the histograms record is written in that order too. */
  if (status == 0 && o->timeline)
    status = write_timeline(m, o->timeline);
  if (status == 0 && o->histograms) {
    qsort(m->secs, m->n_secs, sizeof(second_t), cmp_second);
    status = write_histograms(m, o->histograms, config, meta.stop_reason);
  }
  cJSON_Delete(config);
  vl_config_free(&cfg);
  return status;
}

int vl_merge_files(const char *const *inputs, int n_inputs, vl_merge_opts_t *o) {
  merged_t m;
  memset(&m, 0, sizeof(m));
  m.first_send_ms = m.measure_start_ms = -1;
  o->crossed = 0;
  if (vl_stats_init(&m.stats) != 0 || vl_stats_init_urls(&m.stats, 64) != 0) {
    fprintf(stderr, "vlmload merge: out of memory\n");
    return 1;
  }
  int status = 0;
  for (int i = 0; i < n_inputs && status == 0; i++) {
    cJSON *root = load(inputs[i]);
    status = root ? add_file(&m, inputs[i], root) : 1;
    cJSON_Delete(root);
  }
  if (status == 0)
    status = write_merged(&m, inputs, n_inputs, o);
  for (size_t i = 0; i < m.n_secs; i++)
    vl_hist_free(&m.secs[i].e2e);
  free(m.secs);
  free(m.model);
  cJSON_Delete(m.config);
  vl_stats_free(&m.stats);
  return status;
}

int vl_merge_main(int argc, char **argv) {
  const char *out = NULL, *timeline = NULL;
  const char **inputs = vl_xcalloc((size_t)argc, sizeof(char *));
  int n_inputs = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      vl_merge_usage(stdout);
      free(inputs);
      return 0;
    } else if (strcmp(argv[i], "--timeline") == 0) {
      if (++i == argc) {
        fprintf(stderr, "vlmload merge: --timeline: needs a file name\n");
        free(inputs);
        return 2;
      }
      timeline = argv[i];
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "vlmload merge: %s: unknown option (see vlmload merge --help)\n", argv[i]);
      free(inputs);
      return 2;
    } else if (!out) {
      out = argv[i];
    } else {
      inputs[n_inputs++] = argv[i];
    }
  }
  if (!out || n_inputs == 0) {
    fprintf(stderr, "vlmload merge: want OUT.json and at least one IN.json (see --help)\n");
    free(inputs);
    return 2;
  }
  vl_merge_opts_t o = {.summary = out, .timeline = timeline, .list_inputs = 1};
  int status = vl_merge_files(inputs, n_inputs, &o);
  free(inputs);
  return status;
}
