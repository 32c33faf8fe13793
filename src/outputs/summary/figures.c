/* The figures the JSON and the text summaries share, each computed once (internal.h). */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A figure as a JSON number, or null when it was not measured (NaN). */
void vl__summary_num(cJSON *o, const char *name, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, name, v);
  else
    cJSON_AddNullToObject(o, name);
}

double vl__summary_pct_ms(const vl_hist_t *h, double p) {
  return h->total ? (double)vl_hist_percentile(h, p) / 1e3 : NAN;
}

/* The percentiles the summary reports: --percentiles, else the list it always had. */
static const double default_pcts[] = {50, 90, 95, 99};
int vl__summary_pcts(const vl_config_t *c, const double **p) {
  *p = c->n_percentiles ? c->percentiles : default_pcts;
  return c->n_percentiles ? c->n_percentiles : (int)VL_ARRAY_SIZE(default_pcts);
}

void vl__summary_phase_figs(const vl_phase_result_t *p, phase_figs_t *f) {
  /* Rates over the time admission was open: the stage less its pauses for drained flushes. */
  double open = p->seconds - p->paused_s;
  f->achieved = open > 0 ? (double)p->sent / open : NAN;
  f->ok_per_s = open > 0 ? (double)p->ok / open : NAN;
  f->in_flight = p->seconds > 0 && p->ok ? p->e2e_sent_sum_s / p->seconds : NAN;
  f->p50 = vl__summary_pct_ms(&p->e2e, 50);
  f->p99 = vl__summary_pct_ms(&p->e2e, 99);
  f->ttft_mean = p->ttft.total ? vl_hist_mean(&p->ttft) / 1e3 : NAN;
  f->ttft_p50 = vl__summary_pct_ms(&p->ttft, 50);
  f->ttft_p99 = vl__summary_pct_ms(&p->ttft, 99);
  f->itl_mean = p->itl_gaps ? (double)p->itl_sum_ns / 1e6 / (double)p->itl_gaps : NAN;
  f->tpot_mean = p->tpot.total ? vl_hist_mean(&p->tpot) / 1e3 : NAN;
  f->tpot_p50 = vl__summary_pct_ms(&p->tpot, 50);
  f->tpot_p99 = vl__summary_pct_ms(&p->tpot, 99);
}

void vl_summary_gone_words(const vl_gone_t *g, char *out, size_t n) {
  int len;
  if (strcmp(g->how, "exited") == 0 && !g->after)
    len = snprintf(out, n, "the process %s (pid %d) followed as the server exited at %.1f s",
                   g->label ? g->label : "", g->pid, g->at_s);
  else if (strcmp(g->how, "exited") == 0)
    len = snprintf(out, n, "the server (pid %d%s%s) exited at %.1f s", g->pid, g->label ? ", " : "",
                   g->label ? g->label : "", g->at_s);
  else
    len = snprintf(out, n, "the server at %s stopped accepting connections at %.1f s", g->url,
                   g->at_s);
  if (g->after && len > 0 && (size_t)len < n)
    len += snprintf(out + len, n - (size_t)len, "; the %llu request%s after it could not connect",
                    (unsigned long long)g->after, g->after == 1 ? "" : "s");
  if (g->back_at_s >= 0 && len > 0 && (size_t)len < n)
    snprintf(out + len, n - (size_t)len, "; it answered again at %.1f s", g->back_at_s);
}

/* Whether the run (every phase of it) kept a number of requests in flight rather than following
 * a schedule. */
int vl__summary_closed_loop(const vl_config_t *c, const vl_run_meta_t *m) {
  if (!m->n_phases)
    return c->rate == 0 && !c->rate_auto;
  for (int i = 0; i < m->n_phases; i++)
    if (m->phases[i].target_rate > 0)
      return 0;
  return 1;
}

/* This process's target rate: NaN for a closed loop and for a run of phases, whose stages have
 * their own. */
double vl__summary_target_rate(const vl_config_t *c, const vl_run_meta_t *m) {
  return m->n_phases || c->rate == 0 ? NAN : c->rate / (double)c->shard_n;
}

/* The cap on requests in flight: NaN for phases with different caps. */
double vl__summary_max_concurrency(const vl_config_t *c, const vl_run_meta_t *m) {
  for (int i = 1; i < m->n_phases; i++)
    if (m->phases[i].max_concurrency != m->phases[0].max_concurrency)
      return NAN;
  return m->n_phases ? m->phases[0].max_concurrency : c->concurrency;
}

/* bench_serving's concurrency: the mean number of requests in flight over the measured part of the
 * run, by Little's law: the sum of the successful requests' latencies from send over the span from
 * the first send past the warm-up to the last completion. NaN when nothing was measured. */
double vl__summary_mean_in_flight(const vl_stats_t *s) {
  if (!s->e2e_sent.total || s->measure_end_ns <= s->measure_start_ns)
    return NAN;
  return s->e2e_sent.sum / 1e6 / ((double)(s->measure_end_ns - s->measure_start_ns) / 1e9);
}

void vl__summary_run_time(const vl_stats_t *s, const vl_run_meta_t *m, run_time_t *t) {
  t->total = (double)m->duration_ns / 1e9;
  t->load = (double)m->load_ns / 1e9;
  t->paused = (double)s->paused_ns / 1e9;
  t->finishing = VL_MAX(0.0, t->total - t->load - t->paused);
  t->pauses = s->flush_pauses;
}

/* The rates of the summary (achieved, ok, tokens) are per second of load: the time admission was
 * open, less its pauses for drained flushes. Arrivals that came due and waited past the end are
 * in it (unsent), so a server that stalls shows as a low achieved rate. NaN: no load. */
double vl__summary_per_load_s(double count, const vl_run_meta_t *m) {
  return m->load_ns ? count / ((double)m->load_ns / 1e9) : NAN;
}

/* Send rate over the span of sends, (n - 1) gaps between the first and the last, less the time
 * admission was paused for drained flushes: how evenly the sends kept to the schedule while they
 * went on (as bench/pyclient.py measures a Python client). */
double vl__summary_send_span_rate(const vl_stats_t *s) {
  if (s->total.sent < 2 || s->last_send_ns <= s->first_send_ns + s->paused_ns_before_last_send)
    return 0;
  double span = (double)(s->last_send_ns - s->first_send_ns - s->paused_ns_before_last_send);
  return (double)(s->total.sent - 1) / (span / 1e9);
}

/* Send rate over the whole span of sends, pauses included. */
double vl__summary_wall_rate(const vl_stats_t *s) {
  if (s->total.sent < 2 || s->last_send_ns <= s->first_send_ns)
    return 0;
  return (double)(s->total.sent - 1) / ((double)(s->last_send_ns - s->first_send_ns) / 1e9);
}

static int by_count(const void *a, const void *b) {
  const sizerow_t *x = a, *y = b;
  return (x->count < y->count) - (x->count > y->count);
}

/* Rows of the resolution table, most sent first; *n gets their number. Caller frees. */
sizerow_t *vl__summary_size_table(const vl_stats_t *s, const vl_imagepool_t *pool, size_t *n) {
  sizerow_t *rows = vl_xcalloc(pool->n ? pool->n : 1, sizeof(sizerow_t));
  size_t k = 0;
  for (size_t i = 0; i < pool->n && i < s->n_pool; i++) {
    const vl_imagepool_image_t *im = &pool->img[i];
    if (!s->per_pool[i])
      continue;
    size_t j = 0;
    while (j < k && !(rows[j].w == im->w && rows[j].h == im->h && rows[j].fmt == im->fmt))
      j++;
    if (j == k)
      rows[k++] = (sizerow_t){im->w, im->h, im->fmt, 0};
    rows[j].count += s->per_pool[i];
  }
  qsort(rows, k, sizeof(*rows), by_count);
  *n = k;
  return rows;
}

void vl__summary_flush_wait(const vl_flush_t *f, size_t *n, double *mean, double *max) {
  double sum = 0;
  *n = 0;
  *mean = *max = NAN;
  for (size_t i = 0; f && i < f->n_recs; i++) {
    double w = f->recs[i].server_wait_ms;
    if (w < 0)
      continue;
    sum += w;
    *max = *n ? VL_MAX(*max, w) : w;
    (*n)++;
  }
  if (*n)
    *mean = sum / (double)*n;
}
