/* The text summary of a run (summary.h). */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    vl__summary_phase_figs(p, &g);
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

/* Starts a summary line: its label, then values from column VALUES, wrapped there. */
static void start(vl_text_wrap_t *w, FILE *f, const char *label) {
  char head[VALUES + 1];
  snprintf(head, sizeof(head), "  %-*s", VALUES - 2, label);
  vl_text_wrap_start(w, f, VL_TEXT_COLUMNS, VALUES, head);
}

/* The server processes' own settings, one line: each process, then NAME VALUE, the default or
 * the environment said. */
static void print_settings(FILE *f, const vl_settings_t *st) {
  if (!st || !st->n)
    return;
  vl_text_wrap_t w;
  start(&w, f, "settings");
  for (size_t i = 0; i < st->n; i++) {
    const vl_setting_t *e = &st->v[i];
    if (i == 0 || e->pid != st->v[i - 1].pid)
      vl_text_wrap_add(&w, i ? "; " : "", "%s (pid %d):", e->process, e->pid);
    vl_text_wrap_add(&w, i == 0 || e->pid != st->v[i - 1].pid ? " " : ", ", "%s %s%s", e->name,
                     e->value,
                     strcmp(e->source, "flag") == 0  ? ""
                     : strcmp(e->source, "env") == 0 ? " (env)"
                                                     : " (default)");
  }
  vl_text_wrap_end(&w);
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
  sizerow_t *rows = vl__summary_size_table(s, m->pool, &n);
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
  for (int i = 0, n = vl__summary_pcts(c, &p); i < n; i++)
    vl_text_cell(f, vl__summary_pct_ms(h, p[i]));
  vl_text_cell(f, l.max);
  fputc('\n', f);
}

static void print_lat_head(FILE *f, const vl_config_t *c) {
  char name[24];
  const double *p;
  fprintf(f, "\n  %-18s %9s %9s", "latency (ms)", "mean", "std");
  for (int i = 0, n = vl__summary_pcts(c, &p); i < n; i++) {
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
  vl__summary_run_time(s, m, &rt);
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
  if (!vl__summary_closed_loop(c, m))
    vl_text_wrap_add(&w, "", "arrivals %llu ", (unsigned long long)s->arrivals);
  const char *names[] = {"sent",    "ok",      "failed", "cancelled",
                         "dropped", "delayed", "unsent", "warm-up"};
  const uint64_t counts[] = {s->total.sent, s->total.ok, s->total.failed, s->total.cancelled,
                             s->dropped,    s->delayed,  s->unsent,       s->warmup};
  /* Shown also at 0, but unsent and (without --cancel) cancelled. */
  const int always[] = {1, 1, 1, c->cancel.share > 0, 1, 1, 0, 1};
  for (size_t i = 0; i < VL_ARRAY_SIZE(names); i++)
    if (counts[i] || always[i])
      vl_text_wrap_add(&w, i ? "  " : " ", "%s %llu", names[i], (unsigned long long)counts[i]);
  vl_text_wrap_end(&w);
  if (c->cancel.share > 0) {
    char after[64];
    vl_cancel_after_format(&c->cancel, after, sizeof(after));
    start(&w, f, "cancel");
    vl_text_wrap_add(&w, "", "%llu closed before their reply finished, of %llu chosen (%g, after",
                     (unsigned long long)s->total.cancelled, (unsigned long long)s->cancel_planned,
                     c->cancel.share);
    vl_text_wrap_add(&w, " ", "%s);", after);
    vl_text_wrap_add(&w, " ", "left out of latency and goodput");
    vl_text_wrap_end(&w);
  }
  if (c->probe_rate > 0) {
    const vl_probe_stats_t *ps = &s->probe;
    start(&w, f, "probes");
    vl_text_wrap_add(&w, "", "%g/s beside the load: sent %llu  ok %llu  failed %llu", c->probe_rate,
                     (unsigned long long)ps->sent, (unsigned long long)ps->ok,
                     (unsigned long long)ps->failed);
    if (ps->dropped)
      vl_text_wrap_add(&w, "  ", "dropped %llu", (unsigned long long)ps->dropped);
    vl_text_wrap_add(&w, " ", "(in no other figure)");
    vl_text_wrap_end(&w);
  }
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
  if (c->extra_body || c->ignore_eos || c->max_completion_tokens || c->no_prompt_cache) {
    start(&w, f, "fields");
    if (c->extra_body)
      vl_text_wrap_shown(&w, "", "extra-body ", c->extra_body);
    if (c->ignore_eos)
      vl_text_wrap_add(&w, "  ", "ignore_eos");
    if (c->max_completion_tokens)
      vl_text_wrap_add(&w, "  ", "max_completion_tokens %d", c->max_tokens);
    if (c->no_prompt_cache)
      vl_text_wrap_add(&w, "  ", "cache_prompt false");
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
    vl_text_wrap_add(&w, "", "target %.2f%s/s", vl__summary_target_rate(c, m),
                     c->turns_hi ? " conversations" : "");
  else if (c->rate_auto)
    vl_text_wrap_add(&w, "", "target none (--rate auto chose none)");
  else
    vl_text_wrap_add(&w, "", "closed loop");
  vl_text_wrap_add(&w, "  ", "achieved %.2f/s", vl__summary_per_load_s((double)s->total.sent, m));
  vl_text_wrap_add(&w, "  ", "ok %.2f/s", vl__summary_per_load_s((double)s->total.ok, m));
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
  double cap = vl__summary_max_concurrency(c, m), inflight = vl__summary_mean_in_flight(s);
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
    size_t nw;
    double wmean, wmax;
    vl__summary_flush_wait(fl, &nw, &wmean, &wmax);
    if (nw)
      vl_text_wrap_add(&w, ", ",
                       "the server waited for idle %.1f ms mean, %.1f ms max (%zu with "
                       "?timeout)",
                       wmean, wmax, nw);
    vl_text_wrap_end(&w);
    const char *leaves = vl_profile_flush_leaves(c->server);
    if (leaves) {
      /* Word by word, so that the line wraps. */
      char words[256];
      snprintf(words, sizeof(words), "%s: memory they hold stays after each flush", leaves);
      start(&w, f, "");
      for (char *save = NULL, *t = strtok_r(words, " ", &save); t; t = strtok_r(NULL, " ", &save))
        vl_text_wrap_add(&w, t == words ? "" : " ", "%s", t);
      vl_text_wrap_end(&w);
    }
  }
  if (m->pool)
    print_images(f, s, m);
  print_settings(f, m->settings);
  start(&w, f, "tokens");
  vl_text_wrap_add(&w, "", "prompt %llu", (unsigned long long)s->total.prompt_tokens);
  vl_text_wrap_add(&w, "  ", "completion %llu", (unsigned long long)s->total.completion_tokens);
  vl_text_wrap_add(&w, "  ", "(%.1f/s)",
                   vl__summary_per_load_s((double)s->total.completion_tokens, m));
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
  if (s->srv_e2e.total || s->srv_ttft.total) {
    /* The server's own timings against the same requests' latency. */
    vl_text_wrap_t w2;
    start(&w2, f, "timings");
    if (s->srv_e2e.total)
      vl_text_wrap_add(&w2, "", "e2e: the server %.1f ms, the rest %.1f ms (mean of %llu)",
                       vl_hist_mean(&s->srv_e2e) / 1e3, vl_hist_mean(&s->srv_e2e_rest) / 1e3,
                       (unsigned long long)s->srv_e2e.total);
    if (s->srv_ttft.total)
      vl_text_wrap_add(&w2, s->srv_e2e.total ? "; " : "",
                       "TTFT: the server %.1f ms, the rest %.1f ms",
                       vl_hist_mean(&s->srv_ttft) / 1e3, vl_hist_mean(&s->srv_ttft_rest) / 1e3);
    vl_text_wrap_add(&w2, " ",
                     "(the rest: queueing the server does not count, the network, vlmload)");
    vl_text_wrap_end(&w2);
  }
  if (c->probe_rate > 0) { /* --probe-rate: measured apart from every figure above */
    print_lat(f, c, "probe e2e", &s->probe.e2e);
    print_lat(f, c, "probe TTFT", &s->probe.ttft);
  }
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
