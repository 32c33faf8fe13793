/* --rate auto: the probe's decisions (which rate next, when it is over, the knee and the rate
 * chosen) and its record. The runner runs the stages. */
#include "vlmload/rateauto.h"
#include "vlmload/common.h"
#include "vlmload/stats.h"
#include "vlmload/text.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int vl_rateauto_init(vl_rateauto_t *a) {
  memset(a, 0, sizeof(*a));
  for (int i = 0; i < VL_RATEAUTO_MAX_STAGES; i++) {
    vl_phase_result_t *p = &a->stage[i];
    int rc;
    if ((rc = vl_hist_init(&p->e2e, VL_STATS_HIGHEST_US, 2)) != 0 ||
        (rc = vl_hist_init(&p->ttft, VL_STATS_HIGHEST_US, 2)) != 0 ||
        (rc = vl_hist_init(&p->tpot, VL_STATS_HIGHEST_US, 2)) != 0)
      return rc;
  }
  return 0;
}

void vl_rateauto_free(vl_rateauto_t *a) {
  for (int i = 0; i < VL_RATEAUTO_MAX_STAGES; i++) {
    vl_hist_free(&a->stage[i].e2e);
    vl_hist_free(&a->stage[i].ttft);
    vl_hist_free(&a->stage[i].tpot);
  }
}

static double p50_ms(const vl_phase_result_t *p) {
  return p->e2e.total ? (double)vl_hist_percentile(&p->e2e, 50) / 1e3 : NAN;
}

static double ok_rate(const vl_phase_result_t *p) {
  double open = p->seconds - p->paused_s;
  return open > 0 ? (double)p->ok / open : 0;
}

/* Ends the probe: the knee is the lowest rate that fell behind (none: the highest that kept up,
 * with no knee), the run's rate a fraction of it. */
static double finish(vl_rateauto_t *a, const char *why) {
  a->done = 1;
  a->knee = a->bad;
  double base = a->bad > 0 ? a->bad : a->good;
  a->chosen = why ? 0 : VL_RATEAUTO_FRACTION * base;
  if (!why && !(a->chosen >= 1e-3)) {
    why = "no stage kept up, down to the lowest rate tried";
    a->chosen = 0;
  }
  a->why = why;
  return 0;
}

double vl_rateauto_next(vl_rateauto_t *a) {
  if (a->done || a->n == 0)
    return 0;
  int k = a->n - 1;
  const vl_phase_result_t *p = &a->stage[k];
  if (p->target_rate == 0) {
    /* The closed loop: one request at a time gives the floor, and a rate that a server that
     * serves several at once keeps up with. */
    double first = ok_rate(p);
    if (!p->ok || !(first > 0))
      return finish(a, "no request of the closed-loop stage succeeded");
    a->floor_ms = p50_ms(p);
    return VL_MIN(first, 10e6);
  }
  int behind = vl_rateauto_behind(p, a->floor_ms);
  a->behind[k] = behind;
  double rate = p->target_rate;
  if (behind) {
    a->bad = a->bad > 0 ? VL_MIN(a->bad, rate) : rate;
  } else {
    a->good = VL_MAX(a->good, rate);
    double m = p50_ms(p);
    if (isfinite(m) && m < a->floor_ms)
      a->floor_ms = m;
  }
  if (!(a->bad > 0)) {
    /* Still doubling, within the stages and the largest rate there is. */
    if (a->n >= 1 + VL_RATEAUTO_DOUBLINGS || rate * 2 > 10e6 || a->n >= VL_RATEAUTO_MAX_STAGES)
      return finish(a, NULL);
    return rate * 2;
  }
  if (a->bisects < VL_RATEAUTO_BISECTS && a->n < VL_RATEAUTO_MAX_STAGES) {
    a->bisects++;
    return (a->good + a->bad) / 2;
  }
  return finish(a, NULL);
}

uint64_t vl_rateauto_stage_us(const vl_rateauto_t *a, double rate) {
  double us = 25 * a->floor_ms * 1e3;
  if (us > 10e6)
    us = 10e6;
  if (rate > 0 && us < VL_RATEAUTO_STAGE_REQUESTS / rate * 1e6)
    us = VL_RATEAUTO_STAGE_REQUESTS / rate * 1e6;
  if (!(us >= 1e6))
    us = 1e6;
  if (us > 30e6)
    us = 30e6;
  return (uint64_t)us;
}

static void add_num(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

cJSON *vl_rateauto_json(const vl_rateauto_t *a) {
  cJSON *o = cJSON_CreateObject();
  add_num(o, "knee", a->knee > 0 ? a->knee : NAN);
  add_num(o, "sustained", a->good > 0 ? a->good : NAN);
  add_num(o, "chosen", a->chosen > 0 ? a->chosen : NAN);
  cJSON_AddNumberToObject(o, "fraction", VL_RATEAUTO_FRACTION);
  add_num(o, "floor_ms", a->floor_ms > 0 ? a->floor_ms : NAN);
  cJSON_AddNumberToObject(o, "seconds", a->seconds);
  if (a->error_class) {
    cJSON *e = cJSON_AddObjectToObject(o, "first_failure");
    cJSON_AddStringToObject(e, "class", a->error_class);
    add_num(e, "status", a->error_status ? (double)a->error_status : NAN);
    char shown[4 * VL_STATS_MESSAGE_MAX];
    vl_text_shown(shown, sizeof(shown), a->error_message);
    cJSON_AddStringToObject(e, "message", shown);
  } else {
    cJSON_AddNullToObject(o, "first_failure");
  }
  if (a->why)
    cJSON_AddStringToObject(o, "error", a->why);
  else if (!a->done)
    cJSON_AddStringToObject(o, "error", "the run stopped during the probe");
  else
    cJSON_AddNullToObject(o, "error");
  cJSON *st = cJSON_AddArrayToObject(o, "stages");
  for (int i = 0; i < a->n; i++) {
    const vl_phase_result_t *p = &a->stage[i];
    double open = p->seconds - p->paused_s;
    cJSON *s = cJSON_CreateObject();
    cJSON_AddBoolToObject(s, "closed_loop", p->target_rate == 0);
    add_num(s, "offered", p->target_rate > 0 ? p->target_rate : NAN);
    cJSON_AddNumberToObject(s, "max_concurrency", p->max_concurrency);
    cJSON_AddNumberToObject(s, "seconds", p->seconds);
    cJSON_AddNumberToObject(s, "sent", (double)p->sent);
    cJSON_AddNumberToObject(s, "ok", (double)p->ok);
    cJSON_AddNumberToObject(s, "errors", (double)p->failed);
    add_num(s, "achieved", open > 0 ? (double)p->sent / open : NAN);
    add_num(s, "ok_per_s", open > 0 ? (double)p->ok / open : NAN);
    add_num(s, "latency_p50_ms", p50_ms(p));
    add_num(s, "latency_p99_ms",
            p->e2e.total ? (double)vl_hist_percentile(&p->e2e, 99) / 1e3 : NAN);
    if (p->target_rate > 0 && (i < a->n - 1 || a->done))
      cJSON_AddBoolToObject(s, "behind", a->behind[i]);
    else
      cJSON_AddNullToObject(s, "behind");
    cJSON_AddItemToArray(st, s);
  }
  return o;
}

void vl_rateauto_words(const vl_rateauto_t *a, char *out, size_t n) {
  char good[64] = "";
  if (a->good > 0)
    snprintf(good, sizeof(good), " (kept up at %.4g)", a->good);
  if (!a->done)
    snprintf(out, n, "stopped during the probe, after %d stage%s", a->n, a->n == 1 ? "" : "s");
  else if (!(a->chosen > 0) && a->error_class) {
    char shown[4 * VL_STATS_MESSAGE_MAX], status[32] = "";
    vl_text_shown(shown, sizeof(shown), a->error_message);
    if (a->error_status)
      snprintf(status, sizeof(status), " HTTP %ld", a->error_status);
    snprintf(out, n, "no rate found: %s (the first failure: %s%s%s%s%s)", a->why ? a->why : "",
             a->error_class, status, *shown ? ": \"" : "", shown, *shown ? "\"" : "");
  } else if (!(a->chosen > 0))
    snprintf(out, n, "no rate found: %s", a->why ? a->why : "");
  else if (a->knee > 0)
    snprintf(out, n, "knee %.4g req/s%s, run at %.0f%%: %.4g req/s; %d probe stages, %.1f s",
             a->knee, good, VL_RATEAUTO_FRACTION * 100, a->chosen, a->n, a->seconds);
  else
    snprintf(out, n,
             "no knee up to %.4g req/s, run at %.0f%% of it: %.4g req/s; %d probe stages, %.1f s",
             a->good, VL_RATEAUTO_FRACTION * 100, a->chosen, a->n, a->seconds);
}

int vl_rateauto_behind(const vl_phase_result_t *p, double floor_ms) {
  double p50 = (double)vl_hist_percentile(&p->e2e, 50) / 1e3;
  double open = p->seconds - p->paused_s;
  double ok_rate = open > 0 ? (double)p->ok / open : 0;
  int slow = floor_ms > 0 && p50 > 2 * floor_ms;
  int short_rate = p->target_rate > 0 && ok_rate < 0.9 * p->target_rate;
  return slow || short_rate;
}

void vl_rateauto_mark_knee(vl_phase_result_t *ph, int n) {
  double floor_ms = -1;
  for (int i = 0; i < n; i++) {
    if (i >= 2 && vl_rateauto_behind(&ph[i], floor_ms)) {
      ph[i].knee = 1;
      return;
    }
    double p50 = (double)vl_hist_percentile(&ph[i].e2e, 50) / 1e3;
    if (ph[i].ok && (floor_ms < 0 || p50 < floor_ms))
      floor_ms = p50;
  }
}
