#include "vlmload/turnstats.h"
#include "vlmload/common.h"
#include "vlmload/text.h"
#include "vlmload/config.h"
#include "vlmload/stats.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int vl_turnstats_init(vl_turnstats_t *t, int n) {
  memset(t, 0, sizeof(*t));
  t->turn = calloc((size_t)n, sizeof(*t->turn));
  if (!t->turn)
    return VL_ENOMEM;
  t->n = n;
  for (int i = 0; i < n; i++)
    if (vl_hist_init(&t->turn[i].ttft, VL_STATS_HIGHEST_US, 2) != 0 ||
        vl_hist_init(&t->turn[i].e2el, VL_STATS_HIGHEST_US, 2) != 0) {
      vl_turnstats_free(t);
      return VL_ENOMEM;
    }
  return 0;
}

void vl_turnstats_free(vl_turnstats_t *t) {
  for (int i = 0; t->turn && i < t->n; i++) {
    vl_hist_free(&t->turn[i].ttft);
    vl_hist_free(&t->turn[i].e2el);
  }
  free(t->turn);
  memset(t, 0, sizeof(*t));
}

void vl_turnstats_sent(vl_turnstats_t *t, int turn) {
  if (turn >= 1 && turn <= t->n)
    t->turn[turn - 1].sent++;
}

void vl_turnstats_done(vl_turnstats_t *t, const vl_outcome_t *o) {
  if (o->turn < 1 || o->turn > t->n)
    return;
  vl_turnstats_turn_t *u = &t->turn[o->turn - 1];
  if (o->err != VL_ERR_NONE) {
    u->failed++;
    return;
  }
  u->ok++;
  if (!o->measured)
    return;
  if (o->first_token_ns)
    vl_hist_record(&u->ttft, (int64_t)(o->first_token_ns - o->sent_ns) / 1000);
  vl_hist_record(&u->e2el, (int64_t)(o->done_ns - o->sent_ns) / 1000);
}

static void add_num(cJSON *o, const char *name, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, name, v);
  else
    cJSON_AddNullToObject(o, name);
}

static cJSON *lat(const vl_hist_t *h) {
  vl_lat_t l;
  vl_stats_lat(h, &l);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "count", (double)l.count);
  add_num(o, "mean", l.mean);
  add_num(o, "p50", l.p50);
  add_num(o, "p90", l.p90);
  add_num(o, "p99", l.p99);
  add_num(o, "max", l.max);
  return o;
}

cJSON *vl_turnstats_json(const vl_turnstats_t *t, const vl_config_t *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "turns_min", c->turns_lo);
  cJSON_AddNumberToObject(o, "turns_max", c->turns_hi);
  cJSON_AddNumberToObject(o, "think_time_s", (double)c->think_us / 1e6);
  cJSON_AddNumberToObject(o, "started", (double)t->started);
  cJSON_AddNumberToObject(o, "completed", (double)t->completed);
  cJSON_AddNumberToObject(o, "failed", (double)t->failed);
  cJSON_AddNumberToObject(o, "too_long", (double)t->too_long);
  cJSON_AddNumberToObject(o, "cut", (double)t->cut);
  cJSON *arr = cJSON_AddArrayToObject(o, "turns");
  for (int i = 0; i < t->n; i++) {
    const vl_turnstats_turn_t *u = &t->turn[i];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "turn", i + 1);
    cJSON_AddNumberToObject(e, "requests", (double)u->sent);
    cJSON_AddNumberToObject(e, "ok", (double)u->ok);
    cJSON_AddNumberToObject(e, "failed", (double)u->failed);
    cJSON_AddItemToObject(e, "ttft_ms", lat(&u->ttft));
    cJSON_AddItemToObject(e, "e2el_ms", lat(&u->e2el));
    cJSON_AddItemToArray(arr, e);
  }
  return o;
}

void vl_turnstats_print(FILE *f, const vl_turnstats_t *t) {
  fprintf(f,
          "\n  conversations  started %llu  completed %llu  failed %llu  too long %llu  cut by "
          "the end %llu\n",
          (unsigned long long)t->started, (unsigned long long)t->completed,
          (unsigned long long)t->failed, (unsigned long long)t->too_long,
          (unsigned long long)t->cut);
  fprintf(f, "\n  %-6s %8s %8s %9s %9s %9s %9s %9s %9s\n", "turn", "requests", "failed",
          "ttft mean", "ttft p50", "ttft p99", "e2el mean", "e2el p50", "e2el p99");
  for (int i = 0; i < t->n; i++) {
    const vl_turnstats_turn_t *u = &t->turn[i];
    if (!u->sent)
      continue;
    vl_lat_t a, b;
    vl_stats_lat(&u->ttft, &a);
    vl_stats_lat(&u->e2el, &b);
    fprintf(f, "  %-6d %8llu %8llu", i + 1, (unsigned long long)u->sent,
            (unsigned long long)u->failed);
    vl_text_cell(f, a.mean);
    vl_text_cell(f, a.p50);
    vl_text_cell(f, a.p99);
    vl_text_cell(f, b.mean);
    vl_text_cell(f, b.p50);
    vl_text_cell(f, b.p99);
    fputc('\n', f);
  }
}
