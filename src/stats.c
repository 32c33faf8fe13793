#include "vlmload/stats.h"
#include "vlmload/common.h"

#include <stdlib.h>
#include <string.h>

/* One hour in microseconds: the longest latency kept exactly; longer ones are clamped. */
#define HIGHEST_US (3600ll * 1000000)
#define SIGDIGITS  3

int vl_stats_init(vl_stats_t *s) {
  memset(s, 0, sizeof(*s));
  vl_hist_t *all[] = {&s->e2e, &s->e2e_sent, &s->ttft, &s->itl, &s->send_lag, &s->iv_e2e};
  for (size_t i = 0; i < VL_ARRAY_SIZE(all); i++) {
    int rc = vl_hist_init(all[i], HIGHEST_US, SIGDIGITS);
    if (rc) {
      vl_stats_free(s);
      return rc;
    }
  }
  return 0;
}

int vl_stats_init_urls(vl_stats_t *s, int n) {
  free(s->per_url);
  s->per_url = calloc((size_t)(n > 0 ? n : 1), sizeof(vl_counts_t));
  s->n_urls = n;
  return s->per_url ? 0 : VL_ENOMEM;
}

void vl_stats_free(vl_stats_t *s) {
  free(s->per_url);
  s->per_url = NULL;
  vl_hist_t *all[] = {&s->e2e, &s->e2e_sent, &s->ttft, &s->itl, &s->send_lag, &s->iv_e2e};
  for (size_t i = 0; i < VL_ARRAY_SIZE(all); i++)
    vl_hist_free(all[i]);
}

void vl_stats_sent(vl_stats_t *s, uint64_t intended_ns, uint64_t sent_ns, uint64_t bytes,
                   int measured) {
  s->total.sent++;
  s->iv.sent++;
  s->total.bytes_sent += bytes;
  s->iv.bytes_sent += bytes;
  if (!s->first_send_ns)
    s->first_send_ns = sent_ns;
  s->last_send_ns = sent_ns;
  s->paused_ns_before_last_send = s->paused_ns;
  if (measured) {
    if (!s->measure_start_ns)
      s->measure_start_ns = sent_ns;
    vl_hist_record(&s->send_lag, (int64_t)(sent_ns - intended_ns) / 1000);
  }
}

static void count_done(vl_counts_t *c, const vl_outcome_t *o) {
  c->completed++;
  if (o->err == VL_ERR_NONE)
    c->ok++;
  else
    c->failed++;
  c->errors[o->err]++;
  if (o->prompt_tokens > 0)
    c->prompt_tokens += (uint64_t)o->prompt_tokens;
  if (o->completion_tokens > 0)
    c->completion_tokens += (uint64_t)o->completion_tokens;
}

void vl_stats_done(vl_stats_t *s, const vl_outcome_t *o) {
  count_done(&s->total, o);
  count_done(&s->iv, o);
  if (o->url >= 0 && o->url < s->n_urls) {
    count_done(&s->per_url[o->url], o);
    s->per_url[o->url].sent++;
  }
  if (o->err == VL_ERR_CANCELLED)
    return;
  int64_t e2e_us = (int64_t)(o->done_ns - o->intended_ns) / 1000;
  vl_hist_record(&s->iv_e2e, e2e_us);
  if (!o->measured) {
    s->warmup++;
    return;
  }
  s->measured++;
  if (o->err != VL_ERR_NONE)
    return;
  vl_hist_record(&s->e2e, e2e_us);
  vl_hist_record(&s->e2e_sent, (int64_t)(o->done_ns - o->sent_ns) / 1000);
  if (o->first_token_ns)
    vl_hist_record(&s->ttft, (int64_t)(o->first_token_ns - o->sent_ns) / 1000);
}

void vl_stats_interval_reset(vl_stats_t *s) {
  memset(&s->iv, 0, sizeof(s->iv));
  vl_hist_reset(&s->iv_e2e);
}

void vl_stats_lat(const vl_hist_t *h, vl_lat_t *out) {
  out->count = h->total;
  out->mean = vl_hist_mean(h) / 1e3;
  out->p50 = (double)vl_hist_percentile(h, 50) / 1e3;
  out->p90 = (double)vl_hist_percentile(h, 90) / 1e3;
  out->p95 = (double)vl_hist_percentile(h, 95) / 1e3;
  out->p99 = (double)vl_hist_percentile(h, 99) / 1e3;
  out->max = h->total ? (double)h->max / 1e3 : 0;
  out->min = h->total ? (double)h->min / 1e3 : 0;
}
