/* The JSON summary of a run (--output), its flush events and its thresholds (summary.h). */
#include "internal.h"
#include "vlmload/counters.h"
#include "vlmload/srvprof.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
  vl__summary_num(o, "timeout_s", f->timeout_s >= 0 ? f->timeout_s : NAN);
  vl__summary_num(o, "server_wait_ms", f->server_wait_ms >= 0 ? f->server_wait_ms : NAN);
  cJSON_AddStringToObject(o, "answer", f->answer);
  return o;
}

/* Adds key fmt (one %s: the percentile's name) for each --percentiles value p, with h's p-th
 * percentile, unless the object has the key already (the names the summary always wrote). */
static void add_pcts(cJSON *o, const vl_config_t *c, const char *fmt, const vl_hist_t *h) {
  char name[24], key[64];
  for (int i = 0; i < c->n_percentiles; i++) {
    vl_slo_pct_name(c->percentiles[i], name, sizeof(name));
    snprintf(key, sizeof(key), fmt, name);
    if (!cJSON_GetObjectItemCaseSensitive(o, key))
      vl__summary_num(o, key, vl__summary_pct_ms(h, c->percentiles[i]));
  }
}

/* One latency split: count, mean, p50 and p99 in milliseconds (null when nothing counted). */
static cJSON *split_json(const vl_hist_t *h) {
  vl_lat_t l;
  vl_stats_lat(h, &l);
  cJSON *o = cJSON_CreateObject();
  vl__summary_num(o, "mean", l.mean);
  vl__summary_num(o, "p50", l.p50);
  vl__summary_num(o, "p99", l.p99);
  return o;
}

/* The server's own timings of the successful measured requests whose reply gave them, beside the
 * rest of their latency (queueing the server did not count, the network, vlmload): e2e from the
 * send against the server's whole time, TTFT against its prompt time. */
static cJSON *server_time_json(const vl_stats_t *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "requests", (double)s->srv_e2e.total);
  cJSON_AddItemToObject(o, "e2e_server_ms", split_json(&s->srv_e2e));
  cJSON_AddItemToObject(o, "e2e_rest_ms", split_json(&s->srv_e2e_rest));
  double srv = vl_hist_mean(&s->srv_e2e), rest = vl_hist_mean(&s->srv_e2e_rest);
  vl__summary_num(o, "e2e_server_share",
                  s->srv_e2e.total && srv + rest > 0 ? srv / (srv + rest) : NAN);
  cJSON_AddNumberToObject(o, "ttft_requests", (double)s->srv_ttft.total);
  cJSON_AddItemToObject(o, "ttft_server_ms", split_json(&s->srv_ttft));
  cJSON_AddItemToObject(o, "ttft_rest_ms", split_json(&s->srv_ttft_rest));
  srv = vl_hist_mean(&s->srv_ttft);
  rest = vl_hist_mean(&s->srv_ttft_rest);
  vl__summary_num(o, "ttft_server_share",
                  s->srv_ttft.total && srv + rest > 0 ? srv / (srv + rest) : NAN);
  return o;
}

/* Goodput (vLLM's request_goodput): requests meeting every --slo bound per second of span. */
static void add_goodput(cJSON *o, const vl_config_t *c, const vl_slo_met_t *m, double span) {
  if (!vl_slo_any(&c->slo))
    return;
  vl__summary_num(o, "request_goodput", span > 0 ? (double)m->met[3] / span : NAN);
  cJSON_AddItemToObject(o, "slo", vl_slo_json(&c->slo, m));
}

static cJSON *phases_json(const vl_config_t *c, const vl_run_meta_t *m) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; i < m->n_phases; i++) {
    const vl_phase_result_t *p = &m->phases[i];
    phase_figs_t f;
    vl__summary_phase_figs(p, &f);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", p->name ? p->name : "");
    vl__summary_num(o, "target_rate", p->target_rate > 0 ? p->target_rate : NAN);
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
    vl__summary_num(o, "achieved_rate", f.achieved);
    vl__summary_num(o, "ok_per_s", f.ok_per_s);
    vl__summary_num(o, "concurrency", f.in_flight);
    vl__summary_num(o, "latency_p50_ms", f.p50);
    vl__summary_num(o, "latency_p99_ms", f.p99);
    vl__summary_num(o, "mean_ttft_ms", f.ttft_mean);
    vl__summary_num(o, "median_ttft_ms", f.ttft_p50);
    vl__summary_num(o, "p99_ttft_ms", f.ttft_p99);
    vl__summary_num(o, "mean_itl_ms", f.itl_mean);
    vl__summary_num(o, "mean_tpot_ms", f.tpot_mean);
    vl__summary_num(o, "median_tpot_ms", f.tpot_p50);
    vl__summary_num(o, "p99_tpot_ms", f.tpot_p99);
    add_pcts(o, c, "latency_p%s_ms", &p->e2e);
    add_pcts(o, c, "p%s_ttft_ms", &p->ttft);
    add_pcts(o, c, "p%s_tpot_ms", &p->tpot);
    add_goodput(o, c, &p->slo, p->seconds - p->paused_s);
    cJSON_AddBoolToObject(o, "knee", p->knee);
    /* The server's counters' change during the phase, by name. */
    cJSON *sc = cJSON_AddObjectToObject(o, "server_counters");
    for (size_t k = 0, j = 0; m->mon && k < vl_monitor_count(m->mon); k++) {
      const char *name = vl_monitor_series(m->mon, k)->name;
      if (!vl_counters_is(name))
        continue;
      if ((int)j < p->n_ctr)
        vl__summary_num(sc, name + strlen(VL_COUNTERS_PREFIX), p->ctr_end[j] - p->ctr_start[j]);
      j++;
    }
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

/* A latency summary; each figure is null when nothing was measured. */
static cJSON *lat_json(const vl_config_t *c, const vl_hist_t *h) {
  vl_lat_t l;
  vl_stats_lat(h, &l);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "count", (double)l.count);
  vl__summary_num(o, "mean", l.mean);
  vl__summary_num(o, "std", l.std);
  vl__summary_num(o, "min", l.min);
  vl__summary_num(o, "p50", l.p50);
  vl__summary_num(o, "p90", l.p90);
  vl__summary_num(o, "p95", l.p95);
  vl__summary_num(o, "p99", l.p99);
  add_pcts(o, c, "p%s", h);
  vl__summary_num(o, "max", l.max);
  return o;
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
  /* The server's own wait for idle, where the route waits (SGLang's ?timeout). */
  size_t nw;
  double wmean, wmax;
  vl__summary_flush_wait(f, &nw, &wmean, &wmax);
  cJSON *sw = cJSON_AddObjectToObject(o, "server_wait_ms");
  cJSON_AddNumberToObject(sw, "count", (double)nw);
  vl__summary_num(sw, "mean", wmean);
  vl__summary_num(sw, "max", wmax);
  const char *leaves = vl_profile_flush_leaves(c->server);
  if (leaves)
    cJSON_AddStringToObject(o, "not_cleared", leaves);
  else
    cJSON_AddNullToObject(o, "not_cleared");
  cJSON_AddItemToObject(o, "events", ev);
  return o;
}

static cJSON *images_json(const vl_stats_t *s, const vl_run_meta_t *m);

/* The latency histograms the bench-style figures come from (their layout, and each non-empty
 * bucket as [index, count], as --histograms writes them), so that `vlmload compare` can put an
 * interval on a percentile's change. */
static cJSON *histograms_json(const vl_stats_t *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON *layout = cJSON_AddObjectToObject(o, "layout");
  cJSON_AddStringToObject(layout, "unit", "us");
  cJSON_AddNumberToObject(layout, "highest", (double)s->e2e_sent.highest);
  cJSON_AddNumberToObject(layout, "sigdigits", s->e2e_sent.sigdigits);
  cJSON_AddItemToObject(o, "e2e", vl_stats_hist_json(&s->e2e_sent));
  cJSON_AddItemToObject(o, "ttft", vl_stats_hist_json(&s->ttft));
  cJSON_AddItemToObject(o, "tpot", vl_stats_hist_json(&s->tpot));
  cJSON_AddItemToObject(o, "itl", vl_stats_hist_json(&s->itl));
  return o;
}

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
    vl__summary_num(g, "back_at_s", m->gone->back_at_s >= 0 ? m->gone->back_at_s : NAN);
  } else {
    cJSON_AddNullToObject(o, "server_gone");
  }
  cJSON_AddNumberToObject(o, "duration_s", secs);
  run_time_t rt;
  vl__summary_run_time(s, m, &rt);
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
  cJSON_AddNumberToObject(req, "cancelled", (double)s->total.cancelled);
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
  if (m->srvprof) /* --server-profile-at: each call of the server's profiling routes */
    cJSON_AddItemToObject(o, "server_profile", vl_srvprof_json(m->srvprof));
  if (c->probe_rate > 0) { /* --probe-rate: the probes beside the load, measured apart */
    const vl_probe_stats_t *ps = &s->probe;
    cJSON *p = cJSON_AddObjectToObject(o, "probe");
    cJSON_AddNumberToObject(p, "rate", c->probe_rate);
    cJSON_AddNumberToObject(p, "arrivals", (double)ps->arrivals);
    cJSON_AddNumberToObject(p, "sent", (double)ps->sent);
    cJSON_AddNumberToObject(p, "ok", (double)ps->ok);
    cJSON_AddNumberToObject(p, "failed", (double)ps->failed);
    cJSON_AddNumberToObject(p, "dropped", (double)ps->dropped);
    cJSON_AddNumberToObject(p, "unfinished", (double)ps->unfinished);
    cJSON_AddItemToObject(p, "ttft_ms", lat_json(c, &ps->ttft));
    cJSON_AddItemToObject(p, "latency_ms", lat_json(c, &ps->e2e));
    cJSON_AddItemToObject(p, "latency_sent_ms", lat_json(c, &ps->e2e_sent));
  }
  if (c->cancel.share > 0) { /* --cancel: what was chosen, and what was closed in time */
    char after[64];
    vl_cancel_after_format(&c->cancel, after, sizeof(after));
    cJSON *cn = cJSON_AddObjectToObject(o, "cancel");
    cJSON_AddNumberToObject(cn, "share", c->cancel.share);
    cJSON_AddStringToObject(cn, "after", after);
    cJSON_AddNumberToObject(cn, "planned", (double)s->cancel_planned);
    cJSON_AddNumberToObject(cn, "cancelled", (double)s->total.cancelled);
  }
  if (s->turns) /* --turns */
    cJSON_AddItemToObject(o, "conversations", vl_turnstats_json(s->turns, c));
  /* Lengths (issue 16): prompt tokens meant against those reported. */
  if (vl_lensum_any(c))
    cJSON_AddItemToObject(o, "lengths", vl_lensum_json(c, &s->len));

  cJSON *rate = cJSON_AddObjectToObject(o, "rate");
  double target = vl__summary_target_rate(c, m);
  vl__summary_num(rate, "target", target);
  vl__summary_num(rate, "target_all_shards", target * (double)c->shard_n);
  cJSON_AddBoolToObject(rate, "closed_loop", vl__summary_closed_loop(c, m));
  vl__summary_num(rate, "achieved", vl__summary_per_load_s((double)s->total.sent, m));
  vl__summary_num(rate, "ok_per_s", vl__summary_per_load_s((double)s->total.ok, m));
  cJSON_AddStringToObject(rate, "per_second_of", "load_s");
  cJSON_AddNumberToObject(rate, "achieved_over_sends", vl__summary_send_span_rate(s));
  cJSON_AddNumberToObject(rate, "achieved_with_pauses", vl__summary_wall_rate(s));
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
  if (s->srv_e2e.total || s->srv_ttft.total)
    cJSON_AddItemToObject(o, "server_time", server_time_json(s));
  else
    cJSON_AddNullToObject(o, "server_time");
  cJSON_AddItemToObject(o, "histograms", histograms_json(s));

  cJSON *err = cJSON_AddObjectToObject(o, "errors");
  for (int i = 1; i < VL_ERR__COUNT; i++)
    cJSON_AddNumberToObject(err, vl_errclass_name((vl_errclass_t)i), (double)s->total.errors[i]);
  cJSON *msgs = cJSON_AddArrayToObject(o, "error_messages");
  for (int i = 0; i < s->n_messages; i++) {
    const vl_errmsg_t *em = &s->messages[i];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "class", vl_errclass_name(em->err));
    vl__summary_num(e, "status", em->status ? (double)em->status : NAN);
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
  vl__summary_num(tok, "completion_per_s",
                  vl__summary_per_load_s((double)s->total.completion_tokens, m));
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
  /* The server as vlmload knows it: its kind, and its own settings read from its processes. */
  cJSON *srv = cJSON_AddObjectToObject(o, "server");
  cJSON_AddStringToObject(srv, "kind", vl_profile_name(c->server));
  cJSON_AddItemToObject(srv, "settings", vl_settings_json(m->settings));
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
  vl__summary_num(o, "duration", span);
  cJSON_AddNumberToObject(o, "completed", (double)mc->ok);
  cJSON_AddNumberToObject(o, "total_input_tokens", (double)mc->prompt_tokens);
  cJSON_AddNumberToObject(o, "total_output_tokens", (double)mc->completion_tokens);
  vl__summary_num(o, "request_rate", target);
  cJSON_AddBoolToObject(o, "closed_loop", vl__summary_closed_loop(c, m));
  vl__summary_num(o, "max_concurrency", vl__summary_max_concurrency(c, m));
  vl__summary_num(o, "concurrency", vl__summary_mean_in_flight(s));
  vl__summary_num(o, "request_throughput", (double)mc->ok / span);
  add_goodput(o, c, &s->slo, span);
  vl__summary_num(o, "input_throughput", (double)mc->prompt_tokens / span);
  vl__summary_num(o, "output_throughput", (double)mc->completion_tokens / span);
  vl__summary_num(o, "mean_e2e_latency_ms", e2e.mean);
  vl__summary_num(o, "median_e2e_latency_ms", e2e.p50);
  vl__summary_num(o, "std_e2e_latency_ms", e2e.std);
  vl__summary_num(o, "p90_e2e_latency_ms", e2e.p90);
  vl__summary_num(o, "p99_e2e_latency_ms", e2e.p99);
  vl__summary_num(o, "mean_ttft_ms", ttft.mean);
  vl__summary_num(o, "median_ttft_ms", ttft.p50);
  vl__summary_num(o, "std_ttft_ms", ttft.std);
  vl__summary_num(o, "p99_ttft_ms", ttft.p99);
  vl_lat_t ttfc;
  vl_stats_lat(&s->ttfc, &ttfc);
  vl__summary_num(o, "mean_first_content_ms", ttfc.mean);
  vl__summary_num(o, "median_first_content_ms", ttfc.p50);
  vl__summary_num(o, "p99_first_content_ms", ttfc.p99);
  vl__summary_num(o, "mean_tpot_ms", tpot.mean);
  vl__summary_num(o, "median_tpot_ms", tpot.p50);
  vl__summary_num(o, "std_tpot_ms", tpot.std);
  vl__summary_num(o, "p99_tpot_ms", tpot.p99);
  vl__summary_num(o, "mean_itl_ms", itl.mean);
  vl__summary_num(o, "median_itl_ms", itl.p50);
  vl__summary_num(o, "std_itl_ms", itl.std);
  vl__summary_num(o, "p95_itl_ms", itl.p95);
  vl__summary_num(o, "p99_itl_ms", itl.p99);
  vl__summary_num(o, "max_itl_ms", itl.max);
  /* --percentiles under vLLM's names: p99.9_ttft_ms, p50_e2el_ms (from the send) ... */
  add_pcts(o, c, "p%s_ttft_ms", &s->ttft);
  add_pcts(o, c, "p%s_tpot_ms", &s->tpot);
  add_pcts(o, c, "p%s_itl_ms", &s->itl);
  add_pcts(o, c, "p%s_e2el_ms", &s->e2e_sent);

  cJSON_AddItemToObject(o, "config", vl_config_json(c));
  /* The run's other files as their options named them, so that a reader of the summary (vlmload
   * compare) finds its timeline; null where not written. */
  cJSON *files = cJSON_AddObjectToObject(o, "files");
  const struct {
    const char *key, *path;
  } fl[] = {{"timeline", c->timeline},
            {"log_requests", c->log_requests},
            {"histograms", c->histograms},
            {"samples", c->samples}};
  for (size_t i = 0; i < VL_ARRAY_SIZE(fl); i++) {
    if (fl[i].path)
      cJSON_AddStringToObject(files, fl[i].key, fl[i].path);
    else
      cJSON_AddNullToObject(files, fl[i].key);
  }
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
  sizerow_t *rows = vl__summary_size_table(s, m->pool, &n);
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
