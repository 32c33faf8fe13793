#include "vlmload/summary.h"
#include "vlmload/common.h"

#include "lensum.h"
#include "vlmload/monitor.h"
#include "vlmload/rateauto.h"
#include "vlmload/sizestats.h"
#include "vlmload/text.h"
#include "vlmload/turnstats.h"
#include "vlmload/trace.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A figure as a JSON number, or null when it was not measured (NaN). */
static void add_num(cJSON *o, const char *name, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, name, v);
  else
    cJSON_AddNullToObject(o, name);
}

cJSON *vl_summary_flush_json(const vl_flush_record_t *f, double elapsed_s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "event", "flush");
  cJSON_AddNumberToObject(o, "n", (double)f->n);
  cJSON_AddNumberToObject(o, "wall_ms", (double)f->wall_ms);
  if (!isnan(elapsed_s))
    cJSON_AddNumberToObject(o, "elapsed_s", elapsed_s);
  cJSON_AddNumberToObject(o, "requests_sent", (double)f->requests_sent);
  cJSON_AddNumberToObject(o, "requests_done", (double)f->requests_done);
  cJSON_AddNumberToObject(o, "in_flight", f->in_flight);
  cJSON_AddBoolToObject(o, "drained", f->drained);
  cJSON_AddNumberToObject(o, "drain_ms", f->drain_ms);
  cJSON_AddNumberToObject(o, "call_ms", f->call_ms);
  cJSON_AddNumberToObject(o, "attempts", f->attempts);
  cJSON_AddNumberToObject(o, "status", (double)f->status);
  cJSON_AddBoolToObject(o, "ok", f->ok);
  cJSON_AddBoolToObject(o, "refused", f->refused);
  cJSON_AddStringToObject(o, "answer", f->answer);
  return o;
}

/* A phase's figures in milliseconds, NaN where it measured none. */
typedef struct {
  double achieved, ok_per_s, in_flight, p50, p99, ttft_mean, ttft_p50, ttft_p99, itl_mean,
      tpot_mean, tpot_p50, tpot_p99;
} phase_figs_t;

static double pct_ms(const vl_hist_t *h, double p) {
  return h->total ? (double)vl_hist_percentile(h, p) / 1e3 : NAN;
}

/* The percentiles the summary reports: --percentiles, else the list it always had. */
static const double default_pcts[] = {50, 90, 95, 99};
static int pcts(const vl_config_t *c, const double **p) {
  *p = c->n_percentiles ? c->percentiles : default_pcts;
  return c->n_percentiles ? c->n_percentiles : (int)VL_ARRAY_SIZE(default_pcts);
}

/* Adds key fmt (one %s: the percentile's name) for each --percentiles value p, with h's p-th
 * percentile, unless the object has the key already (the names the summary always wrote). */
static void add_pcts(cJSON *o, const vl_config_t *c, const char *fmt, const vl_hist_t *h) {
  char name[24], key[64];
  for (int i = 0; i < c->n_percentiles; i++) {
    vl_slo_pct_name(c->percentiles[i], name, sizeof(name));
    snprintf(key, sizeof(key), fmt, name);
    if (!cJSON_GetObjectItemCaseSensitive(o, key))
      add_num(o, key, pct_ms(h, c->percentiles[i]));
  }
}

/* Goodput (vLLM's request_goodput): requests meeting every --slo bound per second of span. */
static void add_goodput(cJSON *o, const vl_config_t *c, const vl_slo_met_t *m, double span) {
  if (!vl_slo_any(&c->slo))
    return;
  add_num(o, "request_goodput", span > 0 ? (double)m->met[3] / span : NAN);
  cJSON_AddItemToObject(o, "slo", vl_slo_json(&c->slo, m));
}

static void phase_figs(const vl_phase_result_t *p, phase_figs_t *f) {
  /* Rates over the time admission was open: the stage less its pauses for drained flushes. */
  double open = p->seconds - p->paused_s;
  f->achieved = open > 0 ? (double)p->sent / open : NAN;
  f->ok_per_s = open > 0 ? (double)p->ok / open : NAN;
  f->in_flight = p->seconds > 0 && p->ok ? p->e2e_sent_sum_s / p->seconds : NAN;
  f->p50 = pct_ms(&p->e2e, 50);
  f->p99 = pct_ms(&p->e2e, 99);
  f->ttft_mean = p->ttft.total ? vl_hist_mean(&p->ttft) / 1e3 : NAN;
  f->ttft_p50 = pct_ms(&p->ttft, 50);
  f->ttft_p99 = pct_ms(&p->ttft, 99);
  f->itl_mean = p->itl_gaps ? (double)p->itl_sum_ns / 1e6 / (double)p->itl_gaps : NAN;
  f->tpot_mean = p->tpot.total ? vl_hist_mean(&p->tpot) / 1e3 : NAN;
  f->tpot_p50 = pct_ms(&p->tpot, 50);
  f->tpot_p99 = pct_ms(&p->tpot, 99);
}

static cJSON *phases_json(const vl_config_t *c, const vl_run_meta_t *m) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; i < m->n_phases; i++) {
    const vl_phase_result_t *p = &m->phases[i];
    phase_figs_t f;
    phase_figs(p, &f);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", p->name ? p->name : "");
    add_num(o, "target_rate", p->target_rate > 0 ? p->target_rate : NAN);
    cJSON_AddBoolToObject(o, "closed_loop", p->target_rate == 0);
    if (p->ramp_to >= 0)
      cJSON_AddNumberToObject(o, "ramp_to", p->ramp_to);
    cJSON_AddNumberToObject(o, "max_concurrency", p->max_concurrency);
    cJSON_AddNumberToObject(o, "seconds", p->seconds);
    cJSON_AddNumberToObject(o, "paused_s", p->paused_s);
    cJSON_AddNumberToObject(o, "sent", (double)p->sent);
    cJSON_AddNumberToObject(o, "ok", (double)p->ok);
    cJSON_AddNumberToObject(o, "failed", (double)p->failed);
    cJSON_AddNumberToObject(o, "images", (double)p->images);
    add_num(o, "achieved_rate", f.achieved);
    add_num(o, "ok_per_s", f.ok_per_s);
    add_num(o, "concurrency", f.in_flight);
    add_num(o, "latency_p50_ms", f.p50);
    add_num(o, "latency_p99_ms", f.p99);
    add_num(o, "mean_ttft_ms", f.ttft_mean);
    add_num(o, "median_ttft_ms", f.ttft_p50);
    add_num(o, "p99_ttft_ms", f.ttft_p99);
    add_num(o, "mean_itl_ms", f.itl_mean);
    add_num(o, "mean_tpot_ms", f.tpot_mean);
    add_num(o, "median_tpot_ms", f.tpot_p50);
    add_num(o, "p99_tpot_ms", f.tpot_p99);
    add_pcts(o, c, "latency_p%s_ms", &p->e2e);
    add_pcts(o, c, "p%s_ttft_ms", &p->ttft);
    add_pcts(o, c, "p%s_tpot_ms", &p->tpot);
    add_goodput(o, c, &p->slo, p->seconds - p->paused_s);
    cJSON_AddBoolToObject(o, "knee", p->knee);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

/* A table cell of `width` columns (a space, then the figure), or "-" where none was measured. */
static void cell_w(FILE *f, double v, int width) {
  if (isfinite(v))
    fprintf(f, " %*.2f", width - 1, v);
  else
    fprintf(f, " %*s", width - 1, "-");
}

/* The table of stages. Streamed runs have three more columns: their cells are a column narrower,
 * the names shorter and the knee named under the table, so that a row stays within
 * VL_TEXT_COLUMNS. */
static void print_phases(FILE *f, const vl_run_meta_t *m) {
  int streamed = 0;
  for (int i = 0; i < m->n_phases; i++)
    streamed |= m->phases[i].ttft.total > 0;
  int cw = streamed ? 9 : 10, nw = streamed ? 14 : 18;
  const char *heads[] = {"target/s", "sent/s",   "ok/s",     "failed",  "p50 ms",
                         "p99 ms",   "ttft p50", "itl mean", "tpot p50"};
  fprintf(f, "\n  %-*s", nw, "phase");
  for (size_t k = 0; k < (streamed ? 9u : 6u); k++)
    fprintf(f, " %*s", cw - 1, heads[k]);
  fputc('\n', f);
  const char *knee = NULL;
  for (int i = 0; i < m->n_phases; i++) {
    const vl_phase_result_t *p = &m->phases[i];
    phase_figs_t g;
    phase_figs(p, &g);
    fprintf(f, "  %-*.*s", nw, nw, p->name ? p->name : "");
    if (p->target_rate > 0)
      fprintf(f, " %*.1f", cw - 1, p->target_rate);
    else
      fprintf(f, " %*s", cw - 1, "closed");
    cell_w(f, g.achieved, cw);
    cell_w(f, g.ok_per_s, cw);
    fprintf(f, " %*llu", cw - 1, (unsigned long long)p->failed);
    cell_w(f, g.p50, cw);
    cell_w(f, g.p99, cw);
    if (streamed) {
      cell_w(f, g.ttft_p50, cw);
      cell_w(f, g.itl_mean, cw);
      cell_w(f, g.tpot_p50, cw);
    }
    if (p->knee)
      knee = p->name ? p->name : "";
    fprintf(f, "%s\n", p->knee && !streamed ? "  <- knee" : "");
  }
  if (knee && streamed) {
    fputs("  <- knee: ", f);
    vl_text_fput_shown(f, knee);
    fputc('\n', f);
  }
}

/* A latency summary; each figure is null when nothing was measured. */
static cJSON *lat_json(const vl_config_t *c, const vl_hist_t *h) {
  vl_lat_t l;
  vl_stats_lat(h, &l);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "count", (double)l.count);
  add_num(o, "mean", l.mean);
  add_num(o, "std", l.std);
  add_num(o, "min", l.min);
  add_num(o, "p50", l.p50);
  add_num(o, "p90", l.p90);
  add_num(o, "p95", l.p95);
  add_num(o, "p99", l.p99);
  add_pcts(o, c, "p%s", h);
  add_num(o, "max", l.max);
  return o;
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
    snprintf(out + len, n - (size_t)len, "; the %llu request%s after it could not connect",
             (unsigned long long)g->after, g->after == 1 ? "" : "s");
}

/* Whether the run (every phase of it) kept a number of requests in flight rather than following
 * a schedule. */
static int closed_loop(const vl_config_t *c, const vl_run_meta_t *m) {
  if (!m->n_phases)
    return c->rate == 0 && !c->rate_auto;
  for (int i = 0; i < m->n_phases; i++)
    if (m->phases[i].target_rate > 0)
      return 0;
  return 1;
}

/* This process's target rate: NaN for a closed loop and for a run of phases, whose stages have
 * their own. */
static double target_rate(const vl_config_t *c, const vl_run_meta_t *m) {
  return m->n_phases || c->rate == 0 ? NAN : c->rate / (double)c->shard_n;
}

/* The cap on requests in flight: NaN for phases with different caps. */
static double max_concurrency(const vl_config_t *c, const vl_run_meta_t *m) {
  for (int i = 1; i < m->n_phases; i++)
    if (m->phases[i].max_concurrency != m->phases[0].max_concurrency)
      return NAN;
  return m->n_phases ? m->phases[0].max_concurrency : c->concurrency;
}

/* bench_serving's concurrency: the mean number of requests in flight over the measured part of the
 * run, by Little's law: the sum of the successful requests' latencies from send over the span from
 * the first send past the warm-up to the last completion. NaN when nothing was measured. */
static double mean_in_flight(const vl_stats_t *s) {
  if (!s->e2e_sent.total || s->measure_end_ns <= s->measure_start_ns)
    return NAN;
  return s->e2e_sent.sum / 1e6 / ((double)(s->measure_end_ns - s->measure_start_ns) / 1e9);
}

/* Where the run's time went: load (admission open), paused for drained flushes, and finishing
 * the requests in flight after admission ended (less any pause in that). */
typedef struct {
  double total, load, paused, finishing;
  uint64_t pauses;
} run_time_t;

static void run_time(const vl_stats_t *s, const vl_run_meta_t *m, run_time_t *t) {
  t->total = (double)m->duration_ns / 1e9;
  t->load = (double)m->load_ns / 1e9;
  t->paused = (double)s->paused_ns / 1e9;
  t->finishing = VL_MAX(0.0, t->total - t->load - t->paused);
  t->pauses = s->flush_pauses;
}

/* The rates of the summary (achieved, ok, tokens) are per second of load: the time admission was
 * open, less its pauses for drained flushes. Arrivals that came due and waited past the end are
 * in it (unsent), so a server that stalls shows as a low achieved rate. NaN: no load. */
static double per_load_s(double count, const vl_run_meta_t *m) {
  return m->load_ns ? count / ((double)m->load_ns / 1e9) : NAN;
}

/* Send rate over the span of sends, (n - 1) gaps between the first and the last, less the time
 * admission was paused for drained flushes: how evenly the sends kept to the schedule while they
 * went on (as bench/pyclient.py measures a Python client). */
static double send_span_rate(const vl_stats_t *s) {
  if (s->total.sent < 2 || s->last_send_ns <= s->first_send_ns + s->paused_ns_before_last_send)
    return 0;
  double span = (double)(s->last_send_ns - s->first_send_ns - s->paused_ns_before_last_send);
  return (double)(s->total.sent - 1) / (span / 1e9);
}

/* Send rate over the whole span of sends, pauses included. */
static double wall_rate(const vl_stats_t *s) {
  if (s->total.sent < 2 || s->last_send_ns <= s->first_send_ns)
    return 0;
  return (double)(s->total.sent - 1) / ((double)(s->last_send_ns - s->first_send_ns) / 1e9);
}

static cJSON *flushes_json(const vl_flush_t *f, const vl_stats_t *s, const vl_config_t *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "mode", c->flush_mode == VL_FLUSH_INLINE ? "inline" : "drain");
  cJSON *eps = cJSON_AddArrayToObject(o, "endpoints");
  for (int i = 0; i < f->n_paths; i++)
    cJSON_AddItemToArray(eps, cJSON_CreateString(f->paths[i]));
  cJSON_AddNumberToObject(o, "count", (double)f->count);
  cJSON_AddNumberToObject(o, "ok", (double)f->ok);
  cJSON_AddNumberToObject(o, "refused", (double)f->refused);
  cJSON_AddNumberToObject(o, "failed", (double)f->failed);
  cJSON_AddNumberToObject(o, "retries", (double)f->retries_total);
  cJSON_AddNumberToObject(o, "skipped", (double)s->flush_skipped);
  cJSON_AddNumberToObject(o, "paused_s", (double)s->paused_ns / 1e9);
  double dmax = 0, dsum = 0, cmax = 0, csum = 0;
  cJSON *ev = cJSON_CreateArray();
  for (size_t i = 0; i < f->n_recs; i++) {
    const vl_flush_record_t *r = &f->recs[i];
    dsum += r->drain_ms;
    dmax = VL_MAX(dmax, r->drain_ms);
    csum += r->call_ms;
    cmax = VL_MAX(cmax, r->call_ms);
    cJSON_AddItemToArray(ev, vl_summary_flush_json(r, NAN));
  }
  double n = f->n_recs ? (double)f->n_recs : 1;
  cJSON *d = cJSON_AddObjectToObject(o, "drain_ms");
  cJSON_AddNumberToObject(d, "mean", dsum / n);
  cJSON_AddNumberToObject(d, "max", dmax);
  cJSON *cm = cJSON_AddObjectToObject(o, "call_ms");
  cJSON_AddNumberToObject(cm, "mean", csum / n);
  cJSON_AddNumberToObject(cm, "max", cmax);
  cJSON_AddItemToObject(o, "events", ev);
  return o;
}

static cJSON *images_json(const vl_stats_t *s, const vl_run_meta_t *m);

cJSON *vl_summary_json(const vl_config_t *c, const vl_stats_t *s, const vl_run_meta_t *m) {
  double secs = (double)m->duration_ns / 1e9;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "vlmload_version", VL_VERSION);
  cJSON_AddStringToObject(o, "model", m->model);
  cJSON_AddStringToObject(o, "stop_reason", m->stop_reason);
  cJSON_AddBoolToObject(o, "interrupted", m->interrupted);
  if (m->gone) {
    cJSON *g = cJSON_AddObjectToObject(o, "server_gone");
    cJSON_AddStringToObject(g, "how", m->gone->how);
    if (m->gone->pid)
      cJSON_AddNumberToObject(g, "pid", m->gone->pid);
    else
      cJSON_AddNullToObject(g, "pid");
    if (m->gone->label)
      cJSON_AddStringToObject(g, "label", m->gone->label);
    else
      cJSON_AddNullToObject(g, "label");
    cJSON_AddNumberToObject(g, "at_s", m->gone->at_s);
    cJSON_AddNumberToObject(g, "requests_after", (double)m->gone->after);
  } else {
    cJSON_AddNullToObject(o, "server_gone");
  }
  cJSON_AddNumberToObject(o, "duration_s", secs);
  run_time_t rt;
  run_time(s, m, &rt);
  cJSON_AddNumberToObject(o, "load_s", rt.load);
  cJSON_AddNumberToObject(o, "paused_s", rt.paused);
  cJSON_AddNumberToObject(o, "paused_flushes", (double)rt.pauses);
  cJSON_AddNumberToObject(o, "finishing_s", rt.finishing);

  cJSON *req = cJSON_AddObjectToObject(o, "requests");
  cJSON_AddNumberToObject(req, "arrivals", (double)s->arrivals);
  cJSON_AddNumberToObject(req, "sent", (double)s->total.sent);
  cJSON_AddNumberToObject(req, "completed", (double)s->total.completed);
  cJSON_AddNumberToObject(req, "ok", (double)s->total.ok);
  cJSON_AddNumberToObject(req, "failed", (double)s->total.failed);
  cJSON_AddNumberToObject(req, "dropped", (double)s->dropped);
  cJSON_AddNumberToObject(req, "delayed", (double)s->delayed);
  cJSON_AddNumberToObject(req, "unsent", (double)s->unsent);
  cJSON_AddNumberToObject(req, "max_in_flight", (double)s->max_in_flight);
  cJSON_AddNumberToObject(req, "retried", (double)s->retried);
  cJSON_AddStringToObject(req, "on_full", c->on_full == VL_ONFULL_DROP ? "drop" : "queue");
  cJSON_AddNumberToObject(req, "warmup", (double)s->warmup);
  cJSON_AddNumberToObject(req, "measured", (double)s->measured);
  cJSON_AddNumberToObject(req, "text_only", (double)s->text_only);
  cJSON_AddNumberToObject(req, "with_images", (double)s->with_images);
  cJSON_AddItemToObject(o, "images", images_json(s, m));
  if (s->turns) /* --turns */
    cJSON_AddItemToObject(o, "conversations", vl_turnstats_json(s->turns, c));
  /* Lengths (issue 16): prompt tokens meant against those reported. */
  if (vl_lensum_any(c))
    cJSON_AddItemToObject(o, "lengths", vl_lensum_json(c, &s->len));

  cJSON *rate = cJSON_AddObjectToObject(o, "rate");
  double target = target_rate(c, m);
  add_num(rate, "target", target);
  add_num(rate, "target_all_shards", target * (double)c->shard_n);
  cJSON_AddBoolToObject(rate, "closed_loop", closed_loop(c, m));
  add_num(rate, "achieved", per_load_s((double)s->total.sent, m));
  add_num(rate, "ok_per_s", per_load_s((double)s->total.ok, m));
  cJSON_AddStringToObject(rate, "per_second_of", "load_s");
  cJSON_AddNumberToObject(rate, "achieved_over_sends", send_span_rate(s));
  cJSON_AddNumberToObject(rate, "achieved_with_pauses", wall_rate(s));
  if (m->rate_auto) /* --rate auto: the probe, whose requests no other figure counts */
    cJSON_AddItemToObject(o, "rate_auto", vl_rateauto_json(m->rate_auto));
  if (c->trace) /* trace replay (issue 16, item 7) */
    cJSON_AddItemToObject(o, "trace", vl_trace_json(c->trace, c->trace_speed));

  cJSON_AddItemToObject(o, "latency_ms", lat_json(c, &s->e2e));
  cJSON_AddItemToObject(o, "latency_sent_ms", lat_json(c, &s->e2e_sent));
  cJSON_AddItemToObject(o, "ttft_ms", lat_json(c, &s->ttft));
  cJSON_AddItemToObject(o, "tpot_ms", lat_json(c, &s->tpot));
  cJSON_AddItemToObject(o, "first_content_ms", lat_json(c, &s->ttfc));
  cJSON_AddItemToObject(o, "itl_ms", lat_json(c, &s->itl));
  cJSON_AddItemToObject(o, "send_lag_ms", lat_json(c, &s->send_lag));

  cJSON *err = cJSON_AddObjectToObject(o, "errors");
  for (int i = 1; i < VL_ERR__COUNT; i++)
    cJSON_AddNumberToObject(err, vl_errclass_name((vl_errclass_t)i), (double)s->total.errors[i]);
  cJSON *msgs = cJSON_AddArrayToObject(o, "error_messages");
  for (int i = 0; i < s->n_messages; i++) {
    const vl_errmsg_t *em = &s->messages[i];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "class", vl_errclass_name(em->err));
    add_num(e, "status", em->status ? (double)em->status : NAN);
    /* Cut between characters and with control bytes escaped: valid UTF-8 whatever came. */
    char shown[4 * VL_STATS_MESSAGE_MAX];
    vl_text_shown(shown, sizeof(shown), em->text);
    cJSON_AddStringToObject(e, "message", shown);
    cJSON_AddNumberToObject(e, "count", (double)em->count);
    cJSON_AddBoolToObject(e, "numbers_vary", em->numbers_vary);
    cJSON_AddItemToArray(msgs, e);
  }
  cJSON_AddNumberToObject(o, "error_messages_other", (double)s->messages_other);
  cJSON_AddItemToObject(o, "requests_by_image_size", vl_sizestats_json(s));

  cJSON *tok = cJSON_AddObjectToObject(o, "tokens");
  cJSON_AddNumberToObject(tok, "prompt", (double)s->total.prompt_tokens);
  cJSON_AddNumberToObject(tok, "completion", (double)s->total.completion_tokens);
  add_num(tok, "completion_per_s", per_load_s((double)s->total.completion_tokens, m));
  cJSON_AddNumberToObject(tok, "over_max_tokens", (double)s->over_max_tokens);
  cJSON_AddNumberToObject(o, "bytes_sent", (double)s->total.bytes_sent);
  cJSON_AddNumberToObject(o, "socket_errors", (double)m->socket_errors);
  cJSON *servers = cJSON_AddArrayToObject(o, "servers");
  for (int u = 0, k = 0; u < c->n_urls; u++) {
    if (vl_config_url_index(c, u) != k)
      continue; /* a repeated URL */
    const vl_counts_t *pc = &s->per_url[k++];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "url", c->urls[u]);
    cJSON_AddNumberToObject(e, "sent", (double)pc->sent);
    cJSON_AddNumberToObject(e, "ok", (double)pc->ok);
    cJSON_AddNumberToObject(e, "failed", (double)pc->failed);
    cJSON *pe = cJSON_AddObjectToObject(e, "errors");
    for (int i = 1; i < VL_ERR__COUNT; i++)
      if (pc->errors[i])
        cJSON_AddNumberToObject(pe, vl_errclass_name((vl_errclass_t)i), (double)pc->errors[i]);
    cJSON_AddItemToArray(servers, e);
  }
  if (m->n_phases)
    cJSON_AddItemToObject(o, "phases", phases_json(c, m));
  if (m->flush)
    cJSON_AddItemToObject(o, "flushes", flushes_json(m->flush, s, c));
  else
    cJSON_AddNullToObject(o, "flushes");

  /* The same figures under the names SGLang's bench_serving and vLLM's bench serve give them, with
   * their meaning: latencies from the send, of successful requests past the warm-up; std is the
   * population standard deviation; a figure not measured is null. */
  vl_lat_t e2e, ttft, tpot, itl;
  vl_stats_lat(&s->e2e_sent, &e2e);
  vl_stats_lat(&s->ttft, &ttft);
  vl_stats_lat(&s->tpot, &tpot);
  vl_stats_lat(&s->itl, &itl);
  /* bench_serving measures what it sends after its warm-up, from the first send to the last
   * completion; so do these. */
  const vl_counts_t *mc = &s->measured_c;
  double span = s->measure_end_ns > s->measure_start_ns && s->measure_start_ns
                    ? (double)(s->measure_end_ns - s->measure_start_ns) / 1e9
                    : NAN;
  add_num(o, "duration", span);
  cJSON_AddNumberToObject(o, "completed", (double)mc->ok);
  cJSON_AddNumberToObject(o, "total_input_tokens", (double)mc->prompt_tokens);
  cJSON_AddNumberToObject(o, "total_output_tokens", (double)mc->completion_tokens);
  add_num(o, "request_rate", target);
  cJSON_AddBoolToObject(o, "closed_loop", closed_loop(c, m));
  add_num(o, "max_concurrency", max_concurrency(c, m));
  add_num(o, "concurrency", mean_in_flight(s));
  add_num(o, "request_throughput", (double)mc->ok / span);
  add_goodput(o, c, &s->slo, span);
  add_num(o, "input_throughput", (double)mc->prompt_tokens / span);
  add_num(o, "output_throughput", (double)mc->completion_tokens / span);
  add_num(o, "mean_e2e_latency_ms", e2e.mean);
  add_num(o, "median_e2e_latency_ms", e2e.p50);
  add_num(o, "std_e2e_latency_ms", e2e.std);
  add_num(o, "p90_e2e_latency_ms", e2e.p90);
  add_num(o, "p99_e2e_latency_ms", e2e.p99);
  add_num(o, "mean_ttft_ms", ttft.mean);
  add_num(o, "median_ttft_ms", ttft.p50);
  add_num(o, "std_ttft_ms", ttft.std);
  add_num(o, "p99_ttft_ms", ttft.p99);
  vl_lat_t ttfc;
  vl_stats_lat(&s->ttfc, &ttfc);
  add_num(o, "mean_first_content_ms", ttfc.mean);
  add_num(o, "median_first_content_ms", ttfc.p50);
  add_num(o, "p99_first_content_ms", ttfc.p99);
  add_num(o, "mean_tpot_ms", tpot.mean);
  add_num(o, "median_tpot_ms", tpot.p50);
  add_num(o, "std_tpot_ms", tpot.std);
  add_num(o, "p99_tpot_ms", tpot.p99);
  add_num(o, "mean_itl_ms", itl.mean);
  add_num(o, "median_itl_ms", itl.p50);
  add_num(o, "std_itl_ms", itl.std);
  add_num(o, "p95_itl_ms", itl.p95);
  add_num(o, "p99_itl_ms", itl.p99);
  add_num(o, "max_itl_ms", itl.max);
  /* --percentiles under vLLM's names: p99.9_ttft_ms, p50_e2el_ms (from the send) ... */
  add_pcts(o, c, "p%s_ttft_ms", &s->ttft);
  add_pcts(o, c, "p%s_tpot_ms", &s->tpot);
  add_pcts(o, c, "p%s_itl_ms", &s->itl);
  add_pcts(o, c, "p%s_e2el_ms", &s->e2e_sent);

  cJSON_AddItemToObject(o, "config", vl_config_json(c));
  return o;
}

int vl_summary_thresholds(const vl_config_t *c, const vl_stats_t *s, cJSON *o) {
  cJSON *arr = NULL;
  struct {
    const char *name;
    double limit, value;
    int at_least; /* a floor (--min-*), not a ceiling */
  } t[3] = {{0}};
  int n = 0;
  if (c->max_error_rate >= 0) {
    double done = (double)s->total.completed;
    t[n].name = "max_error_rate";
    t[n].limit = c->max_error_rate;
    t[n++].value = done > 0 ? (double)s->total.failed / done : 0;
  }
  if (c->max_p99_ms >= 0) {
    t[n].name = "max_p99_ms";
    t[n].limit = c->max_p99_ms;
    t[n++].value = (double)vl_hist_percentile(&s->e2e, 99) / 1e3;
  }
  if (c->min_goodput >= 0) {
    double span = s->measure_end_ns > s->measure_start_ns && s->measure_start_ns
                      ? (double)(s->measure_end_ns - s->measure_start_ns) / 1e9
                      : 0;
    t[n].name = "min_goodput";
    t[n].limit = c->min_goodput;
    t[n].at_least = 1;
    t[n++].value = span > 0 ? (double)s->slo.met[3] / span : 0;
  }
  int crossed = 0;
  if (n && o)
    arr = cJSON_AddArrayToObject(o, "thresholds");
  for (int i = 0; i < n; i++) {
    int passed = t[i].at_least ? t[i].value >= t[i].limit : t[i].value <= t[i].limit;
    crossed += !passed;
    if (!passed && !c->quiet)
      fprintf(stdout, "  THRESHOLD  %s: %.4g %s %.4g\n", t[i].name, t[i].value,
              t[i].at_least ? "is under" : "exceeds", t[i].limit);
    if (arr) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "name", t[i].name);
      cJSON_AddNumberToObject(e, "limit", t[i].limit);
      cJSON_AddNumberToObject(e, "value", t[i].value);
      cJSON_AddBoolToObject(e, "passed", passed);
      cJSON_AddItemToArray(arr, e);
    }
  }
  return crossed;
}

/* Images sent, aggregated by size and format. */
typedef struct {
  int w, h;
  vl_image_fmt_t fmt;
  uint64_t count;
} sizerow_t;

static int by_count(const void *a, const void *b) {
  const sizerow_t *x = a, *y = b;
  return (x->count < y->count) - (x->count > y->count);
}

/* Rows of the resolution table, most sent first; *n gets their number. Caller frees. */
static sizerow_t *size_table(const vl_stats_t *s, const vl_imagepool_t *pool, size_t *n) {
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

static cJSON *images_json(const vl_stats_t *s, const vl_run_meta_t *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "sent", (double)s->images_sent);
  cJSON_AddNumberToObject(o, "bytes", (double)s->image_bytes);
  uint64_t distinct = 0, raw = 0;
  for (size_t i = 0; i < s->n_pool; i++) {
    distinct += s->per_pool[i] > 0;
    raw += s->per_pool_raw[i] > 0;
  }
  /* Distinct images the server saw: each unique one, and each pool entry sent as it is (in a phase
   * without --unique-images, or in place of a unique image that was late). */
  cJSON_AddNumberToObject(o, "unique", (double)(s->images_unique + raw));
  cJSON_AddNumberToObject(o, "late", (double)s->images_late);
  /* --image-reuse: images that were one sent before (a cache hit for the server), of all sent. */
  cJSON_AddNumberToObject(o, "repeated", (double)s->images_repeated);
  cJSON_AddNumberToObject(o, "repeat_share",
                          s->images_sent ? (double)s->images_repeated / (double)s->images_sent : 0);
  if (!m->pool)
    return o;
  cJSON_AddNumberToObject(o, "pool_size", (double)m->pool->n);
  cJSON_AddNumberToObject(o, "pool_bytes", (double)m->pool->total_bytes);
  cJSON_AddNumberToObject(o, "pool_distinct_used", (double)distinct);
  size_t n;
  sizerow_t *rows = size_table(s, m->pool, &n);
  cJSON *t = cJSON_AddArrayToObject(o, "sizes");
  for (size_t i = 0; i < n; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "w", rows[i].w);
    cJSON_AddNumberToObject(e, "h", rows[i].h);
    cJSON_AddStringToObject(e, "format", vl_image_fmt_name(rows[i].fmt));
    cJSON_AddNumberToObject(e, "count", (double)rows[i].count);
    cJSON_AddItemToArray(t, e);
  }
  free(rows);
  return o;
}

/* The column where the summary's values start, after "  label      ". */
#define VALUES 13

/* Starts a summary line: its label, then values from column VALUES, wrapped there. */
static void start(vl_text_wrap_t *w, FILE *f, const char *label) {
  char head[VALUES + 1];
  snprintf(head, sizeof(head), "  %-*s", VALUES - 2, label);
  vl_text_wrap_start(w, f, VL_TEXT_COLUMNS, VALUES, head);
}

static void print_images(FILE *f, const vl_stats_t *s, const vl_run_meta_t *m) {
  vl_text_wrap_t w;
  start(&w, f, "images");
  vl_text_wrap_add(&w, "", "sent %llu (%.1f MB)", (unsigned long long)s->images_sent,
                   (double)s->image_bytes / 1e6);
  vl_text_wrap_add(&w, " ", "in %llu requests", (unsigned long long)s->with_images);
  vl_text_wrap_add(&w, ", ", "text-only %llu", (unsigned long long)s->text_only);
  /* --unique-images: how many were made unique, and how many were not ready in time and went as
   * the pool image they would have been made from. */
  if (m->uniq)
    vl_text_wrap_add(&w, ", ", "made unique %llu", (unsigned long long)s->images_unique);
  if (m->uniq && s->images_late)
    vl_text_wrap_add(&w, ", ", "%llu not ready in time (sent as pool images)",
                     (unsigned long long)s->images_late);
  if (s->images_repeated)
    vl_text_wrap_add(&w, ", ", "repeated %llu (%.1f%%)", (unsigned long long)s->images_repeated,
                     100.0 * (double)s->images_repeated / (double)s->images_sent);
  vl_text_wrap_end(&w);
  size_t n;
  sizerow_t *rows = size_table(s, m->pool, &n);
  uint64_t png = 0, jpeg = 0;
  for (size_t i = 0; i < n; i++) {
    if (rows[i].fmt == VL_IMG_PNG)
      png += rows[i].count;
    else
      jpeg += rows[i].count;
  }
  start(&w, f, "formats");
  vl_text_wrap_add(&w, "", "png %llu", (unsigned long long)png);
  vl_text_wrap_add(&w, "  ", "jpeg %llu;", (unsigned long long)jpeg);
  vl_text_wrap_add(&w, "  ", "sizes");
  for (size_t i = 0; i < n && i < 6; i++)
    vl_text_wrap_add(&w, i ? ", " : " ", "%dx%d %s %llu", rows[i].w, rows[i].h,
                     vl_image_fmt_name(rows[i].fmt), (unsigned long long)rows[i].count);
  if (n > 6)
    vl_text_wrap_add(&w, " ", "and %zu more", n - 6);
  vl_text_wrap_end(&w);
  free(rows);
}

static void print_lat(FILE *f, const vl_config_t *c, const char *name, const vl_hist_t *h) {
  vl_lat_t l;
  vl_stats_lat(h, &l);
  if (!l.count)
    return;
  fprintf(f, "  %-18s", name);
  vl_text_cell(f, l.mean);
  vl_text_cell(f, l.std);
  const double *p;
  for (int i = 0, n = pcts(c, &p); i < n; i++)
    vl_text_cell(f, pct_ms(h, p[i]));
  vl_text_cell(f, l.max);
  fputc('\n', f);
}

static void print_lat_head(FILE *f, const vl_config_t *c) {
  char name[24];
  const double *p;
  fprintf(f, "\n  %-18s %9s %9s", "latency (ms)", "mean", "std");
  for (int i = 0, n = pcts(c, &p); i < n; i++) {
    vl_slo_pct_name(p[i], name + 1, sizeof(name) - 1);
    name[0] = 'p';
    fprintf(f, " %9s", name);
  }
  fprintf(f, " %9s\n", "max");
}

/* The goodput line: the rate meeting every --slo bound and the share meeting each. */
static void print_goodput(FILE *f, const vl_config_t *c, const vl_slo_met_t *m, double span,
                          const char *label, const char *phase) {
  static const char *names[] = {"ttft", "tpot", "e2e"};
  const uint64_t given[] = {c->slo.ttft_us, c->slo.tpot_us, c->slo.e2e_us};
  char spec[128];
  vl_text_wrap_t w;
  start(&w, f, label);
  if (phase)
    vl_text_wrap_shown(&w, "", "", phase);
  if (span > 0)
    vl_text_wrap_add(&w, phase ? " " : "", "%.2f/s", (double)m->met[3] / span);
  else
    vl_text_wrap_add(&w, "", "-");
  vl_slo_format(&c->slo, spec, sizeof(spec));
  if (!phase) /* a stage's line follows the run's, which names the SLOs */
    vl_text_wrap_add(&w, " ", "meeting %s:", spec);
  for (int i = 0; i < 3; i++)
    if (given[i] && m->judged)
      vl_text_wrap_add(&w, "  ", "%s %.1f%%", names[i],
                       100.0 * (double)m->met[i] / (double)m->judged);
  if (m->judged)
    vl_text_wrap_add(&w, "  ", "all %.1f%% of %llu", 100.0 * (double)m->met[3] / (double)m->judged,
                     (unsigned long long)m->judged);
  vl_text_wrap_end(&w);
}

void vl_summary_print(FILE *f, const vl_config_t *c, const vl_stats_t *s, const vl_run_meta_t *m) {
  double secs = (double)m->duration_ns / 1e9;
  vl_text_wrap_t w;
  fputc('\n', f);
  vl_text_wrap_start(&w, f, VL_TEXT_COLUMNS, 2, "");
  vl_text_wrap_add(&w, "", "vlmload %s", VL_VERSION);
  vl_text_wrap_add(&w, "  ", "%s%s", c->url, c->endpoint);
  vl_text_wrap_shown(&w, "  ", "model ", m->model);
  vl_text_wrap_end(&w);
  run_time_t rt;
  run_time(s, m, &rt);
  vl_text_wrap_start(&w, f, VL_TEXT_COLUMNS, VALUES, "  ");
  /* Where the time went, when more than the load: pauses, and the wait for the last replies
   * (bounded by --grace after --duration or a signal). */
  int parts = rt.pauses || rt.finishing >= 0.05;
  vl_text_wrap_add(&w, "", "stopped by %s after %.2fs%s", m->stop_reason, secs, parts ? ":" : "");
  if (parts) {
    vl_text_wrap_add(&w, " ", "%.2fs of load", rt.load);
    if (rt.pauses)
      vl_text_wrap_add(&w, " ", "+ %.2fs paused for %llu flush%s", rt.paused,
                       (unsigned long long)rt.pauses, rt.pauses == 1 ? "" : "es");
    if (rt.finishing >= 0.005)
      vl_text_wrap_add(&w, " ", "+ %.2fs finishing", rt.finishing);
  }
  if (m->interrupted)
    vl_text_wrap_add(&w, " ", "(interrupted)");
  vl_text_wrap_end(&w);
  if (m->gone) { /* the headline: the figures below stop where the server did */
    char words[400];
    vl_summary_gone_words(m->gone, words, sizeof(words));
    start(&w, f, "server");
    vl_text_wrap_words(&w, words);
    vl_text_wrap_end(&w);
  }
  start(&w, f, "requests");
  /* An open loop's arrivals are sent, dropped, or never sent (still waiting for a slot at the
   * end); a closed loop's are its sends. */
  if (!closed_loop(c, m))
    vl_text_wrap_add(&w, "", "arrivals %llu ", (unsigned long long)s->arrivals);
  const char *names[] = {"sent", "ok", "failed", "dropped", "delayed", "unsent", "warm-up"};
  const uint64_t counts[] = {s->total.sent, s->total.ok, s->total.failed, s->dropped,
                             s->delayed,    s->unsent,   s->warmup};
  for (size_t i = 0; i < VL_ARRAY_SIZE(names); i++)
    if (counts[i] || strcmp(names[i], "unsent") != 0)
      vl_text_wrap_add(&w, i ? "  " : " ", "%s %llu", names[i], (unsigned long long)counts[i]);
  vl_text_wrap_end(&w);
  if (s->retried) {
    start(&w, f, "retried");
    vl_text_wrap_add(&w, "", "%llu on a new connection:", (unsigned long long)s->retried);
    vl_text_wrap_add(&w, " ", "the server closed the kept-alive one before it took the request");
    vl_text_wrap_end(&w);
  }
  if (c->shard_n > 1)
    fprintf(f, "  shard      %llu of %llu (ids %llu mod %llu)\n", (unsigned long long)c->shard_i,
            (unsigned long long)c->shard_n, (unsigned long long)c->shard_i,
            (unsigned long long)c->shard_n);
  /* Extra request fields (issue 16): what every body carried beyond vlmload's own. */
  if (c->extra_body || c->ignore_eos || c->max_completion_tokens) {
    start(&w, f, "fields");
    if (c->extra_body)
      vl_text_wrap_shown(&w, "", "extra-body ", c->extra_body);
    if (c->ignore_eos)
      vl_text_wrap_add(&w, "  ", "ignore_eos");
    if (c->max_completion_tokens)
      vl_text_wrap_add(&w, "  ", "max_completion_tokens %d", c->max_tokens);
    vl_text_wrap_end(&w);
  }
  if (c->trace) { /* trace replay (issue 16, item 7) */
    char words[600];
    vl_trace_words(c->trace, c->trace_speed, words, sizeof(words));
    start(&w, f, "trace");
    vl_text_wrap_shown(&w, "", "", words);
    vl_text_wrap_end(&w);
  }
  /* Lengths (issue 16). */
  if (vl_lensum_any(c))
    vl_lensum_print(f, c, &s->len, VALUES);
  start(&w, f, "rate");
  if (m->n_phases)
    vl_text_wrap_add(&w, "", "%d stages, each its own target (table below)", m->n_phases);
  else if (c->rate > 0) /* --turns: arrivals start conversations; the rest counts requests */
    vl_text_wrap_add(&w, "", "target %.2f%s/s", target_rate(c, m),
                     c->turns_hi ? " conversations" : "");
  else if (c->rate_auto)
    vl_text_wrap_add(&w, "", "target none (--rate auto chose none)");
  else
    vl_text_wrap_add(&w, "", "closed loop");
  vl_text_wrap_add(&w, "  ", "achieved %.2f/s", per_load_s((double)s->total.sent, m));
  vl_text_wrap_add(&w, "  ", "ok %.2f/s", per_load_s((double)s->total.ok, m));
  vl_text_wrap_add(&w, "  ", "per second of load (%.2fs%s%s)", (double)m->load_ns / 1e9,
                   rt.pauses ? ", flush pauses left out" : "", m->n_phases ? ", all stages" : "");
  vl_text_wrap_end(&w);
  if (m->rate_auto) {
    char words[300];
    vl_rateauto_words(m->rate_auto, words, sizeof(words));
    start(&w, f, "rate auto");
    vl_text_wrap_add(&w, "", "%s", words);
    vl_text_wrap_add(&w, " ", "(the probe's requests are left out of every figure)");
    vl_text_wrap_end(&w);
  }
  /* The mean and the most in flight that were observed, and the cap they were held to. */
  double cap = max_concurrency(c, m), inflight = mean_in_flight(s);
  fprintf(f, "  in flight  mean");
  if (isfinite(inflight))
    fprintf(f, " %.2f", inflight);
  else
    fprintf(f, " -");
  fprintf(f, "  max %s%llu", m->processes > 1 ? "<= " : "", (unsigned long long)s->max_in_flight);
  if (isfinite(cap))
    fprintf(f, "  cap %.0f", cap);
  else
    fprintf(f, "  cap per stage");
  if (m->processes > 1)
    fprintf(f, " (max: the sum of each process's)");
  fputc('\n', f);
  if (m->flush) {
    const vl_flush_t *fl = m->flush;
    start(&w, f, "flushes");
    vl_text_wrap_add(&w, "", "%llu (ok %llu,", (unsigned long long)fl->count,
                     (unsigned long long)fl->ok);
    vl_text_wrap_add(&w, " ", "refused %llu,", (unsigned long long)fl->refused);
    vl_text_wrap_add(&w, " ", "failed %llu,", (unsigned long long)fl->failed);
    vl_text_wrap_add(&w, " ", "retries %llu%s", (unsigned long long)fl->retries_total,
                     s->flush_skipped ? "," : "),");
    if (s->flush_skipped)
      vl_text_wrap_add(&w, " ", "skipped %llu),", (unsigned long long)s->flush_skipped);
    vl_text_wrap_add(&w, " ", "paused %.2fs", (double)s->paused_ns / 1e9);
    vl_text_wrap_end(&w);
  }
  if (m->pool)
    print_images(f, s, m);
  start(&w, f, "tokens");
  vl_text_wrap_add(&w, "", "prompt %llu", (unsigned long long)s->total.prompt_tokens);
  vl_text_wrap_add(&w, "  ", "completion %llu", (unsigned long long)s->total.completion_tokens);
  vl_text_wrap_add(&w, "  ", "(%.1f/s)", per_load_s((double)s->total.completion_tokens, m));
  if (s->over_max_tokens)
    vl_text_wrap_add(&w, "  ",
                     "(%llu replies declared more than their max_tokens; counted as sent)",
                     (unsigned long long)s->over_max_tokens);
  vl_text_wrap_end(&w);
  if (vl_slo_any(&c->slo)) {
    double span = s->measure_end_ns > s->measure_start_ns && s->measure_start_ns
                      ? (double)(s->measure_end_ns - s->measure_start_ns) / 1e9
                      : 0;
    print_goodput(f, c, &s->slo, span, "goodput", NULL);
  }
  print_lat_head(f, c);
  print_lat(f, c, "end-to-end", &s->e2e);
  print_lat(f, c, "from send", &s->e2e_sent);
  print_lat(f, c, "time to 1st token", &s->ttft);
  print_lat(f, c, "per output token", &s->tpot);
  if (s->ttfc.total != s->ttft.total || vl_hist_mean(&s->ttfc) != vl_hist_mean(&s->ttft))
    print_lat(f, c, "time to content", &s->ttfc); /* reasoning came first */
  print_lat(f, c, "inter-token", &s->itl);
  print_lat(f, c, "send lag", &s->send_lag);
  if (s->turns) /* --turns: the latency of each turn index */
    vl_turnstats_print(f, s->turns);
  if (m->n_phases)
    print_phases(f, m);
  for (int i = 0; i < m->n_phases && vl_slo_any(&c->slo); i++) {
    const vl_phase_result_t *p = &m->phases[i];
    print_goodput(f, c, &p->slo, p->seconds - p->paused_s, i ? "" : "goodput",
                  p->name ? p->name : "");
  }
  if (s->n_urls > 1) {
    fprintf(f, "\n");
    for (int u = 0, k = 0; u < c->n_urls; u++) {
      if (vl_config_url_index(c, u) != k)
        continue;
      const vl_counts_t *pc = &s->per_url[k++];
      start(&w, f, "server");
      vl_text_wrap_add(&w, "", "%s", c->urls[u]);
      vl_text_wrap_add(&w, "  ", "sent %llu", (unsigned long long)pc->sent);
      vl_text_wrap_add(&w, "  ", "ok %llu", (unsigned long long)pc->ok);
      vl_text_wrap_add(&w, "  ", "failed %llu", (unsigned long long)pc->failed);
      vl_text_wrap_end(&w);
    }
  }
  if (s->total.failed) {
    fputc('\n', f);
    start(&w, f, "errors");
    for (int i = 1; i < VL_ERR__COUNT; i++)
      if (s->total.errors[i])
        vl_text_wrap_add(&w, " ", "%s %llu", vl_errclass_name((vl_errclass_t)i),
                         (unsigned long long)s->total.errors[i]);
    vl_text_wrap_end(&w);
    if (vl_sizestats_worth_printing(s))
      vl_sizestats_print(f, s);
    for (int i = 0; i < s->n_messages; i++) {
      const vl_errmsg_t *em = &s->messages[i];
      char head[96], full[4 * VL_STATS_MESSAGE_MAX];
      int n = snprintf(head, sizeof(head), "  %-10s %llu x %s", i ? "" : "messages",
                       (unsigned long long)em->count, vl_errclass_name(em->err));
      if (em->status)
        n += snprintf(head + n, sizeof(head) - (size_t)n, " %ld", em->status);
      snprintf(head + n, sizeof(head) - (size_t)n, ": ");
      /* The whole message, wrapped between words; a kind of several gives its first. */
      vl_text_shown(full, sizeof(full), em->text);
      vl_text_wrap_t mw;
      vl_text_wrap_start(&mw, f, VL_TEXT_COLUMNS, 15, head);
      vl_text_wrap_words(&mw, full);
      if (em->numbers_vary)
        vl_text_wrap_words(&mw, "(numbers vary; the first shown)");
      vl_text_wrap_end(&mw);
    }
    if (s->messages_other)
      fprintf(f, "  %-10s %llu x other messages\n", "", (unsigned long long)s->messages_other);
  }
  fflush(f);
}

void vl_summary_mem_add(vl_summary_mem_t *m, double v) {
  if (m->n++ == 0)
    m->first = m->min = m->max = v;
  m->last = v;
  m->min = VL_MIN(m->min, v);
  m->max = VL_MAX(m->max, v);
}

cJSON *vl_summary_memory_json(const vl_summary_mem_t *mem, size_t n, const vl_monitor_t *mon) {
  cJSON *arr = cJSON_CreateArray();
  for (size_t i = 0; i < n; i++) {
    const vl_monitor_series_t *sr = vl_monitor_series(mon, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sr->name);
    cJSON_AddStringToObject(o, "unit", sr->unit);
    cJSON_AddNumberToObject(o, "samples", (double)mem[i].n);
    if (mem[i].n) {
      cJSON_AddNumberToObject(o, "first", mem[i].first);
      cJSON_AddNumberToObject(o, "last", mem[i].last);
      cJSON_AddNumberToObject(o, "min", mem[i].min);
      cJSON_AddNumberToObject(o, "max", mem[i].max);
      cJSON_AddNumberToObject(o, "change", mem[i].last - mem[i].first);
    }
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

/* The regular expression of process target i when it is a --monitor-pid-match, else NULL. */
static const char *match_regex(const vl_config_t *c, int i) {
  const vl_monitor_spec_t *spec = &c->monitor;
  return i >= spec->n_pids && i < spec->n_pids + spec->n_matches
             ? spec->matches[i - spec->n_pids].regex
             : NULL;
}

/* The processes followed: which process each target found, or that a match never found one. */
cJSON *vl_summary_processes_json(const vl_config_t *c, const vl_monitor_t *mon) {
  cJSON *arr = cJSON_CreateArray();
  vl_monitor_proc_info_t info;
  for (int i = 0; vl_monitor_proc_info(mon, i, &info) == 0; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "label", info.label);
    if (match_regex(c, i))
      cJSON_AddStringToObject(o, "match", match_regex(c, i));
    if (info.pid)
      cJSON_AddNumberToObject(o, "pid", (double)info.pid);
    else
      cJSON_AddNullToObject(o, "pid");
    cJSON_AddBoolToObject(o, "matched", info.pid != 0);
    cJSON_AddBoolToObject(o, "present", info.present);
    cJSON_AddNumberToObject(o, "restarts", (double)info.restarts);
    cJSON_AddItemToArray(arr, o);
  }
  /* Each --monitor-tree: its root and every process seen under it. */
  vl_monitor_tree_info_t ti;
  for (int i = 0; vl_monitor_tree_info(mon, i, &ti) == 0; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "label", ti.label);
    cJSON_AddStringToObject(o, "tree", ti.label);
    cJSON_AddNumberToObject(o, "pid", (double)ti.pid);
    cJSON_AddBoolToObject(o, "present", ti.present);
    cJSON_AddBoolToObject(o, "capped", ti.capped);
    cJSON_AddNumberToObject(o, "untracked", ti.untracked);
    cJSON_AddNumberToObject(o, "forgotten", (double)ti.forgotten);
    cJSON *ps = cJSON_AddArrayToObject(o, "processes");
    vl_monitor_tree_proc_t tp;
    for (int j = 0; vl_monitor_tree_proc(mon, i, j, &tp) == 0; j++) {
      cJSON *q = cJSON_CreateObject();
      cJSON_AddNumberToObject(q, "pid", (double)tp.pid);
      cJSON_AddStringToObject(q, "name", tp.name);
      cJSON_AddBoolToObject(q, "present", tp.present);
      if (tp.first_ms) {
        cJSON_AddNumberToObject(q, "first_seen_ms", (double)tp.first_ms);
        cJSON_AddNumberToObject(q, "last_seen_ms", (double)tp.last_ms);
      } else {
        cJSON_AddNullToObject(q, "first_seen_ms");
        cJSON_AddNullToObject(q, "last_seen_ms");
      }
      cJSON_AddItemToArray(ps, q);
    }
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static void print_processes(FILE *f, const vl_config_t *c, const vl_monitor_t *mon) {
  vl_monitor_proc_info_t info;
  for (int i = 0; vl_monitor_proc_info(mon, i, &info) == 0; i++) {
    if (i == 0)
      fputc('\n', f);
    if (!info.pid && strcmp(info.label, match_regex(c, i)) == 0)
      fprintf(f, "  process    never matched: --monitor-pid-match '%.60s'\n", info.label);
    else if (!info.pid)
      fprintf(f, "  process    %.30s: never matched (--monitor-pid-match '%.40s')\n", info.label,
              match_regex(c, i));
    else
      fprintf(f, "  process    %.40s: pid %ld%s%s\n", info.label, (long)info.pid,
              info.present ? "" : " (gone at the end)", info.restarts ? ", restarted" : "");
  }
  vl_monitor_tree_info_t ti;
  for (int i = 0; vl_monitor_tree_info(mon, i, &ti) == 0; i++) {
    int live = 0;
    vl_monitor_tree_proc_t tp;
    for (int j = 0; vl_monitor_tree_proc(mon, i, j, &tp) == 0; j++)
      live += tp.present;
    fprintf(f, "%s  tree       %.40s: pid %ld%s, %d processes seen, %d alive at the end%s\n",
            i == 0 && vl_monitor_proc_info(mon, 0, &info) != 0 ? "\n" : "", ti.label, (long)ti.pid,
            ti.present ? "" : " (gone at the end)", ti.n_procs, live,
            ti.capped ? " (capped: some left out)" : "");
  }
}

void vl_summary_print_memory(FILE *f, const vl_config_t *c, const vl_summary_mem_t *mem, size_t n,
                             const vl_monitor_t *mon) {
  print_processes(f, c, mon);
  vl_monitor_proc_info_t pi;
  vl_monitor_tree_info_t ti;
  vl_monitor_print_parts(
      mon, f, vl_monitor_proc_info(mon, 0, &pi) != 0 && vl_monitor_tree_info(mon, 0, &ti) != 0);
  if (!n)
    return;
  fprintf(f, "\n  %-32s %10s %10s %10s %10s\n", "memory", "first", "last", "max", "change");
  for (size_t i = 0; i < n; i++) {
    const vl_monitor_series_t *sr = vl_monitor_series(mon, i);
    if (!mem[i].n) {
      fprintf(f, "  %-32.32s %10s\n", sr->name, "no sample");
      continue;
    }
    /* Memory in MB whatever its unit; a series that is not memory as it reads. */
    double k = sr->mb;
    if (k > 0)
      fprintf(f, "  %-32.32s %10.1f %10.1f %10.1f %+10.1f MB\n", sr->name, mem[i].first * k,
              mem[i].last * k, mem[i].max * k, (mem[i].last - mem[i].first) * k);
    else
      fprintf(f, "  %-32.32s %10.4g %10.4g %10.4g %+10.4g (not memory)\n", sr->name, mem[i].first,
              mem[i].last, mem[i].max, mem[i].last - mem[i].first);
  }
}
