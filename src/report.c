#include "vlmload/report.h"
#include "vlmload/common.h"

#include "vlmload/analyzecli.h"
#include "vlmload/csvin.h"
#include "vlmload/monitor.h"
#include "vlmload/outfile.h"
#include "vlmload/text.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct vl_report_s {
  const vl_config_t *cfg;
  FILE *timeline;
  FILE *log;
  int progress;       /* draw the live line on stderr */
  int progress_drawn; /* a line is on screen and needs a newline before other text */
  uint64_t last_tick_ns;
  char *log_buf; /* stdio buffer of the request log */
  int crossed;   /* --max-* thresholds crossed */
  FILE *samples;
  int scratch_timeline; /* the timeline is kept only for --analyze/--plot, in an unnamed file */
  /* Streams that failed a write, said on stderr once; nothing more is written to them. */
  int timeline_failed, log_failed, samples_failed;
  size_t n_cols; /* memory series in the timeline */
  /* Per series: samples seen, first, last, min and max value. */
  struct {
    uint64_t n;
    double first, last, min, max;
  } * mem;
  cJSON *intervals; /* --histograms: one record per timeline row */
};

#define TIMELINE_HEADER                                                                            \
  "wall_ms,elapsed_s,phase,in_flight,sent_total,completed_total,ok_total,failed_total,"            \
  "dropped_total,sent,completed,ok,failed,rate_sent,rate_ok,e2e_p50_ms,e2e_p99_ms,"                \
  "completion_tokens,flushes,images_sent"

/* The standard columns of a timeline row, in header order. */
static const char *const std_cols[] = {
    "wall_ms",  "elapsed_s",    "phase",         "in_flight",  "sent_total", "completed_total",
    "ok_total", "failed_total", "dropped_total", "sent",       "completed",  "ok",
    "failed",   "rate_sent",    "rate_ok",       "e2e_p50_ms", "e2e_p99_ms", "completion_tokens",
    "flushes",  "images_sent"};

void vl_report_columns(vl_report_t *rep, const struct vl_monitor_s *mon) {
  rep->n_cols = mon ? vl_monitor_count(mon) : 0;
  rep->mem = vl_xcalloc(rep->n_cols ? rep->n_cols : 1, sizeof(*rep->mem));
  if (!rep->timeline || rep->cfg->timeline_jsonl)
    return;
  for (size_t i = 0; i < rep->n_cols; i++)
    fprintf(rep->timeline, ",%s", vl_monitor_series(mon, i)->name);
  fputc('\n', rep->timeline);
  fflush(rep->timeline);
}

/* Opens a file written as the run goes and tries a byte on it, so that a full disk or /dev/full
 * is found before the run and not in its first write. */
static FILE *open_out(const char *path, const char *flag, char *err, size_t errlen) {
  char why[384];
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(err, errlen, "--%s '%s': %s", flag, path, strerror(errno));
    return NULL;
  }
  if (vl_outfile_probe(f, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "--%s '%s': %s", flag, path, why);
    fclose(f);
    return NULL;
  }
  return f;
}

/* Whether a file written at the end can be written; a reason in err when not. */
static int can_write(const char *path, const char *flag, char *err, size_t errlen) {
  char why[384];
  if (vl_outfile_check(path, why, sizeof(why)) == 0)
    return 1;
  snprintf(err, errlen, "--%s '%s': %s", flag, path, why);
  return 0;
}

int vl_report_open(vl_report_t **out, const vl_config_t *cfg, char *err, size_t errlen) {
  vl_report_t *rep = vl_xcalloc(1, sizeof(*rep));
  rep->cfg = cfg;
  rep->progress = cfg->progress < 0 ? isatty(STDERR_FILENO) : cfg->progress;
  struct stat st;
  if (cfg->timeline && (cfg->analyze || cfg->plot) && stat(cfg->timeline, &st) == 0 &&
      !S_ISREG(st.st_mode)) {
    /* The analysis reads the timeline back at the end: a terminal or a pipe cannot give it. */
    snprintf(err, errlen, "--%s reads the timeline back: --timeline '%s' must be a regular file",
             cfg->analyze ? "analyze" : "plot", cfg->timeline);
    goto fail;
  }
  if (cfg->timeline && !(rep->timeline = open_out(cfg->timeline, "timeline", err, errlen)))
    goto fail;
  if (!cfg->timeline && (cfg->analyze || cfg->plot)) {
    /* The analysis reads a timeline: keep one in a scratch file for it. */
    char why[384];
    rep->timeline = vl_outfile_scratch("vlmload-timeline", why, sizeof(why));
    if (!rep->timeline || vl_outfile_probe(rep->timeline, why, sizeof(why)) != 0) {
      snprintf(err, errlen, "--%s: the scratch timeline: %s", cfg->analyze ? "analyze" : "plot",
               why);
      goto fail;
    }
    rep->scratch_timeline = 1;
  }
  if (cfg->samples && !(rep->samples = open_out(cfg->samples, "samples", err, errlen)))
    goto fail;
  if (rep->samples)
    fputs("wall_ms,elapsed_s,series,value,unit\n", rep->samples);
  if (cfg->log_requests && !(rep->log = open_out(cfg->log_requests, "log-requests", err, errlen)))
    goto fail;
  if (cfg->histograms)
    rep->intervals = cJSON_CreateArray();
  if (rep->log) {
    rep->log_buf = vl_xmalloc(1 << 20);
    setvbuf(rep->log, rep->log_buf, _IOFBF, 1 << 20);
  }
  /* The files written at the end: check now that they can be. */
  if ((cfg->output && !can_write(cfg->output, "output", err, errlen)) ||
      (cfg->histograms && !can_write(cfg->histograms, "histograms", err, errlen)) ||
      (cfg->plot && !can_write(cfg->plot, "plot", err, errlen)))
    goto fail;
  if (rep->timeline && !cfg->timeline_jsonl) {
    /* The header is finished by vl_report_columns, once the memory series are known. */
    fputs(TIMELINE_HEADER, rep->timeline);
    if (fflush(rep->timeline) != 0) {
      if (cfg->timeline)
        snprintf(err, errlen, "--timeline '%s': %s", cfg->timeline, strerror(errno));
      else
        snprintf(err, errlen, "--%s: the scratch timeline: %s", cfg->analyze ? "analyze" : "plot",
                 strerror(errno));
      goto fail;
    }
  }
  *out = rep;
  return 0;

fail:
  /* What was opened is dropped without further complaint: err already says what went wrong. */
  if (rep->timeline)
    fclose(rep->timeline);
  if (rep->log)
    fclose(rep->log);
  if (rep->samples)
    fclose(rep->samples);
  cJSON_Delete(rep->intervals);
  free(rep->log_buf);
  free(rep);
  return VL_EIO;
}

static double ms_since(uint64_t from_ns, uint64_t to_ns) {
  return (double)(int64_t)(to_ns - from_ns) / 1e6;
}

static double wall_of(const vl_snapshot_t *s, uint64_t ns) {
  return (double)s->wall0_ms + ms_since(s->t0_ns, ns);
}

/* After writes to a stream: one that failed (a full disk) is said on stderr, once, and takes no
 * more writes. Returns 0 or VL_EIO. */
static int check_stream(vl_report_t *rep, FILE *f, int *failed, const char *flag,
                        const char *path) {
  if (*failed)
    return VL_EIO;
  if (!ferror(f))
    return 0;
  int e = errno ? errno : EIO;
  *failed = 1;
  if (rep->progress_drawn) {
    fputc('\n', stderr);
    rep->progress_drawn = 0;
  }
  if (path)
    fprintf(stderr, "vlmload: --%s '%s': %s; records are lost from here, stopping the run\n", flag,
            path, strerror(e));
  else
    fprintf(stderr, "vlmload: --%s: the scratch timeline: %s; stopping the run\n", flag,
            strerror(e));
  return VL_EIO;
}

static int check_log(vl_report_t *rep) {
  return check_stream(rep, rep->log, &rep->log_failed, "log-requests", rep->cfg->log_requests);
}

int vl_report_request(vl_report_t *rep, const vl_outcome_t *o, const vl_snapshot_t *snap) {
  FILE *f = rep->log;
  if (!f)
    return 0;
  if (rep->log_failed)
    return VL_EIO;
  fprintf(f,
          "{\"id\":%llu,\"phase\":\"%s\",\"kind\":\"%s\",\"images\":%d,\"image_bytes\":%llu,"
          "\"intended_ms\":%.3f,\"sent_ms\":%.3f,"
          "\"done_ms\":%.3f,\"send_lag_ms\":%.3f,\"latency_ms\":%.3f,\"latency_sent_ms\":%.3f,",
          (unsigned long long)o->id, o->measured ? "measure" : "warmup",
          o->images ? "image" : "text", o->images, (unsigned long long)o->image_bytes,
          wall_of(snap, o->intended_ns), wall_of(snap, o->sent_ns), wall_of(snap, o->done_ns),
          ms_since(o->intended_ns, o->sent_ns), ms_since(o->intended_ns, o->done_ns),
          ms_since(o->sent_ns, o->done_ns));
  if (o->first_token_ns)
    fprintf(f, "\"ttft_ms\":%.3f,", ms_since(o->sent_ns, o->first_token_ns));
  else
    fputs("\"ttft_ms\":null,", f);
  if (o->token_events > 1)
    fprintf(f, "\"itl_ms\":%.3f,", (double)o->itl_sum_ns / 1e6 / (o->token_events - 1));
  else
    fputs("\"itl_ms\":null,", f);
  fprintf(f, "\"status\":%ld,", o->status);
  if (o->err == VL_ERR_NONE)
    fputs("\"error\":null,", f);
  else
    fprintf(f, "\"error\":\"%s\",", vl_errclass_name(o->err));
  if (o->prompt_tokens >= 0)
    fprintf(f, "\"prompt_tokens\":%lld,", (long long)o->prompt_tokens);
  else
    fputs("\"prompt_tokens\":null,", f);
  if (o->completion_tokens >= 0)
    fprintf(f, "\"completion_tokens\":%lld,", (long long)o->completion_tokens);
  else
    fputs("\"completion_tokens\":null,", f);
  fprintf(f, "\"bytes_sent\":%llu}\n", (unsigned long long)o->bytes_sent);
  return check_log(rep);
}

static cJSON *flush_json(const vl_flush_record_t *f, const vl_snapshot_t *snap) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "event", "flush");
  cJSON_AddNumberToObject(o, "n", (double)f->n);
  cJSON_AddNumberToObject(o, "wall_ms", (double)f->wall_ms);
  if (snap)
    cJSON_AddNumberToObject(o, "elapsed_s", ms_since(snap->t0_ns, f->start_ns) / 1e3);
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

int vl_report_phase(vl_report_t *rep, int index, const char *name, const vl_snapshot_t *snap) {
  if (!rep->log)
    return 0;
  if (rep->log_failed)
    return VL_EIO;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "event", "phase");
  cJSON_AddNumberToObject(o, "index", index);
  cJSON_AddStringToObject(o, "name", name ? name : "");
  cJSON_AddNumberToObject(o, "wall_ms", (double)(int64_t)wall_of(snap, snap->now_ns));
  cJSON_AddNumberToObject(o, "elapsed_s", ms_since(snap->t0_ns, snap->now_ns) / 1e3);
  char *text = cJSON_PrintUnformatted(o);
  if (text) {
    fputs(text, rep->log);
    fputc('\n', rep->log);
  }
  cJSON_free(text);
  cJSON_Delete(o);
  return check_log(rep);
}

/* Marks the knee: the first stage whose median latency is over twice the lowest median of the
 * stages before it, or that completes under 90% of its target rate. Needs two stages before it. */
static void mark_knee(vl_phase_result_t *ph, int n) {
  double floor_ms = -1;
  for (int i = 0; i < n; i++) {
    double p50 = (double)vl_hist_percentile(&ph[i].e2e, 50) / 1e3;
    double ok_rate = ph[i].seconds > 0 ? (double)ph[i].ok / ph[i].seconds : 0;
    int slow = floor_ms > 0 && p50 > 2 * floor_ms;
    int short_rate = ph[i].target_rate > 0 && ok_rate < 0.9 * ph[i].target_rate;
    if (i >= 2 && (slow || short_rate)) {
      ph[i].knee = 1;
      return;
    }
    if (ph[i].ok && (floor_ms < 0 || p50 < floor_ms))
      floor_ms = p50;
  }
}

static cJSON *phases_json(const vl_run_meta_t *m) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; i < m->n_phases; i++) {
    const vl_phase_result_t *p = &m->phases[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", p->name ? p->name : "");
    cJSON_AddNumberToObject(o, "target_rate", p->target_rate);
    if (p->ramp_to >= 0)
      cJSON_AddNumberToObject(o, "ramp_to", p->ramp_to);
    cJSON_AddNumberToObject(o, "concurrency", p->concurrency);
    cJSON_AddNumberToObject(o, "seconds", p->seconds);
    cJSON_AddNumberToObject(o, "sent", (double)p->sent);
    cJSON_AddNumberToObject(o, "ok", (double)p->ok);
    cJSON_AddNumberToObject(o, "failed", (double)p->failed);
    cJSON_AddNumberToObject(o, "images", (double)p->images);
    cJSON_AddNumberToObject(o, "rate", p->seconds > 0 ? (double)p->sent / p->seconds : 0);
    cJSON_AddNumberToObject(o, "ok_per_s", p->seconds > 0 ? (double)p->ok / p->seconds : 0);
    cJSON_AddNumberToObject(o, "latency_p50_ms", (double)vl_hist_percentile(&p->e2e, 50) / 1e3);
    cJSON_AddNumberToObject(o, "latency_p99_ms", (double)vl_hist_percentile(&p->e2e, 99) / 1e3);
    cJSON_AddBoolToObject(o, "knee", p->knee);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static void print_phases(FILE *f, const vl_run_meta_t *m) {
  fprintf(f, "\n  %-18s %9s %9s %9s %9s %9s %9s\n", "phase", "target/s", "sent/s", "ok/s", "failed",
          "p50 ms", "p99 ms");
  for (int i = 0; i < m->n_phases; i++) {
    const vl_phase_result_t *p = &m->phases[i];
    double s = p->seconds > 0 ? p->seconds : 1;
    fprintf(f, "  %-18.18s %9.1f %9.1f %9.1f %9llu %9.2f %9.2f%s\n", p->name ? p->name : "",
            p->target_rate, (double)p->sent / s, (double)p->ok / s, (unsigned long long)p->failed,
            (double)vl_hist_percentile(&p->e2e, 50) / 1e3,
            (double)vl_hist_percentile(&p->e2e, 99) / 1e3, p->knee ? "  <- knee" : "");
  }
}

int vl_report_flush(vl_report_t *rep, const vl_flush_record_t *f, const vl_snapshot_t *snap) {
  if (!rep->log)
    return 0;
  if (rep->log_failed)
    return VL_EIO;
  cJSON *o = flush_json(f, snap);
  char *text = cJSON_PrintUnformatted(o);
  if (text) {
    fputs(text, rep->log);
    fputc('\n', rep->log);
  }
  cJSON_free(text);
  cJSON_Delete(o);
  return check_log(rep);
}

static void draw_progress(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap,
                          double rate) {
  double elapsed = ms_since(snap->t0_ns, snap->now_ns) / 1e3;
  fprintf(stderr,
          "\r\033[K%7.1fs  sent %llu  ok %llu  err %llu  in flight %d  %.1f/s  p50 %.1fms  "
          "p99 %.1fms",
          elapsed, (unsigned long long)s->total.sent, (unsigned long long)s->total.ok,
          (unsigned long long)s->total.failed, snap->in_flight, rate,
          (double)vl_hist_percentile(&s->e2e, 50) / 1e3,
          (double)vl_hist_percentile(&s->e2e, 99) / 1e3);
  if (s->dropped)
    fprintf(stderr, "  dropped %llu", (unsigned long long)s->dropped);
  if (s->flushes || strcmp(snap->phase, "flush") == 0)
    fprintf(stderr, "  flushes %llu%s", (unsigned long long)s->flushes,
            strcmp(snap->phase, "flush") == 0 ? " (flushing)" : "");
  fflush(stderr);
  rep->progress_drawn = 1;
}

int vl_report_tick(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap) {
  uint64_t from = rep->last_tick_ns ? rep->last_tick_ns : snap->t0_ns;
  double secs = ms_since(from, snap->now_ns) / 1e3;
  rep->last_tick_ns = snap->now_ns;
  if (secs <= 0)
    return 0;
  double rate_sent = (double)s->iv.sent / secs, rate_ok = (double)s->iv.ok / secs;
  /* The row's values as text, in header order; the phase is the only string. */
  char vals[VL_ARRAY_SIZE(std_cols)][48];
  double wall = wall_of(snap, snap->now_ns), elapsed = ms_since(snap->t0_ns, snap->now_ns) / 1e3;
  snprintf(vals[0], 48, "%lld", (long long)wall);
  snprintf(vals[1], 48, "%.3f", elapsed);
  snprintf(vals[2], 48, "%s", snap->phase);
  snprintf(vals[3], 48, "%d", snap->in_flight);
  const uint64_t ints[] = {s->total.sent,   s->total.completed, s->total.ok,
                           s->total.failed, s->dropped,         s->iv.sent,
                           s->iv.completed, s->iv.ok,           s->iv.failed};
  for (size_t i = 0; i < VL_ARRAY_SIZE(ints); i++)
    snprintf(vals[4 + i], 48, "%llu", (unsigned long long)ints[i]);
  snprintf(vals[13], 48, "%.2f", rate_sent);
  snprintf(vals[14], 48, "%.2f", rate_ok);
  snprintf(vals[15], 48, "%.3f", (double)vl_hist_percentile(&s->iv_e2e, 50) / 1e3);
  snprintf(vals[16], 48, "%.3f", (double)vl_hist_percentile(&s->iv_e2e, 99) / 1e3);
  snprintf(vals[17], 48, "%llu", (unsigned long long)s->iv.completion_tokens);
  snprintf(vals[18], 48, "%llu", (unsigned long long)s->flushes);
  snprintf(vals[19], 48, "%llu", (unsigned long long)s->images_sent);
  if (rep->timeline && !rep->timeline_failed) {
    int jsonl = rep->cfg->timeline_jsonl;
    for (size_t i = 0; i < VL_ARRAY_SIZE(std_cols); i++) {
      if (jsonl)
        fprintf(rep->timeline, i == 2 ? "%s\"%s\":\"%s\"" : "%s\"%s\":%s", i ? "," : "{",
                std_cols[i], vals[i]);
      else
        fprintf(rep->timeline, "%s%s", i ? "," : "", vals[i]);
    }
    for (size_t i = 0; i < rep->n_cols; i++) {
      const vl_monitor_series_t *m = vl_monitor_series(snap->mon, i);
      if (jsonl && m->valid)
        fprintf(rep->timeline, ",\"%s\":%.6f", m->name, m->value);
      else if (jsonl)
        fprintf(rep->timeline, ",\"%s\":null", m->name);
      else if (m->valid)
        fprintf(rep->timeline, ",%.6f", m->value);
      else
        fputc(',', rep->timeline);
    }
    fputs(jsonl ? "}\n" : "\n", rep->timeline);
    fflush(rep->timeline);
  }
  for (size_t i = 0; i < rep->n_cols; i++) {
    const vl_monitor_series_t *m = vl_monitor_series(snap->mon, i);
    if (!m->valid)
      continue;
    if (rep->samples && !rep->samples_failed)
      fprintf(rep->samples, "%lld,%.3f,%s,%.6f,%s\n", (long long)m->t_wall_ms, elapsed, m->name,
              m->value, m->unit);
    if (rep->mem[i].n++ == 0)
      rep->mem[i].first = rep->mem[i].min = rep->mem[i].max = m->value;
    rep->mem[i].last = m->value;
    rep->mem[i].min = VL_MIN(rep->mem[i].min, m->value);
    rep->mem[i].max = VL_MAX(rep->mem[i].max, m->value);
  }
  if (rep->samples && !rep->samples_failed)
    fflush(rep->samples);
  /* The request log too, so that it is readable as the run goes and a full disk is found within
   * a tick. */
  if (rep->log && !rep->log_failed)
    fflush(rep->log);
  if (rep->intervals) {
    cJSON *iv = cJSON_CreateObject();
    cJSON_AddNumberToObject(iv, "wall_ms", (double)(int64_t)wall_of(snap, snap->now_ns));
    cJSON_AddNumberToObject(iv, "seconds", secs);
    cJSON_AddNumberToObject(iv, "sent", (double)s->iv.sent);
    cJSON_AddNumberToObject(iv, "completed", (double)s->iv.completed);
    cJSON_AddNumberToObject(iv, "ok", (double)s->iv.ok);
    cJSON_AddNumberToObject(iv, "failed", (double)s->iv.failed);
    cJSON_AddNumberToObject(iv, "completion_tokens", (double)s->iv.completion_tokens);
    cJSON_AddItemToObject(iv, "e2e", vl_stats_hist_json(&s->iv_e2e));
    cJSON_AddItemToArray(rep->intervals, iv);
  }
  int rc = 0;
  if (rep->timeline && check_stream(rep, rep->timeline, &rep->timeline_failed,
                                    rep->cfg->timeline  ? "timeline"
                                    : rep->cfg->analyze ? "analyze"
                                                        : "plot",
                                    rep->cfg->timeline) != 0)
    rc = VL_EIO;
  if (rep->samples &&
      check_stream(rep, rep->samples, &rep->samples_failed, "samples", rep->cfg->samples) != 0)
    rc = VL_EIO;
  if (rep->log && check_log(rep) != 0)
    rc = VL_EIO;
  if (rep->progress && !rc)
    draw_progress(rep, s, snap, rate_sent);
  return rc;
}

/* Writes a file of the end of the run whole (see outfile.h). Returns 0 or VL_EIO (reported). */
static int write_out(const char *path, const char *flag, const char *text) {
  char why[384];
  if (vl_outfile_write_text(path, text, why, sizeof(why)) == 0)
    return 0;
  fprintf(stderr, "vlmload: --%s '%s': %s\n", flag, path, why);
  return VL_EIO;
}

/* The mergeable run record of --histograms. */
static int write_histograms(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap,
                            const vl_run_meta_t *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "format", "vlmload-histograms");
  cJSON_AddNumberToObject(o, "version", 1);
  cJSON_AddStringToObject(o, "vlmload_version", VL_VERSION);
  cJSON *layout = cJSON_AddObjectToObject(o, "layout");
  cJSON_AddStringToObject(layout, "unit", "us");
  cJSON_AddNumberToObject(layout, "highest", (double)s->e2e.highest);
  cJSON_AddNumberToObject(layout, "sigdigits", s->e2e.sigdigits);
  cJSON_AddStringToObject(o, "model", m->model);
  cJSON_AddStringToObject(o, "stop_reason", m->stop_reason);
  cJSON_AddNumberToObject(o, "duration_s", (double)m->duration_ns / 1e9);
  cJSON_AddNumberToObject(o, "wall_start_ms", (double)snap->wall0_ms);
  if (s->total.sent) {
    cJSON_AddNumberToObject(o, "first_send_wall_ms", wall_of(snap, s->first_send_ns));
    cJSON_AddNumberToObject(o, "last_send_wall_ms", wall_of(snap, s->last_send_ns));
  }
  cJSON_AddNumberToObject(o, "paused_before_last_send_ms",
                          (double)s->paused_ns_before_last_send / 1e6);
  cJSON_AddItemToObject(o, "counters", vl_stats_counters_json(s));
  cJSON *metrics = cJSON_AddObjectToObject(o, "metrics");
  cJSON_AddItemToObject(metrics, "e2e", vl_stats_hist_json(&s->e2e));
  cJSON_AddItemToObject(metrics, "e2e_sent", vl_stats_hist_json(&s->e2e_sent));
  cJSON_AddItemToObject(metrics, "ttft", vl_stats_hist_json(&s->ttft));
  cJSON_AddItemToObject(metrics, "itl", vl_stats_hist_json(&s->itl));
  cJSON_AddItemToObject(metrics, "send_lag", vl_stats_hist_json(&s->send_lag));
  cJSON_AddItemToObject(o, "intervals", rep->intervals);
  rep->intervals = NULL;
  cJSON_AddItemToObject(o, "config", vl_config_json(rep->cfg));
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  int rc = write_out(rep->cfg->histograms, "histograms", text);
  cJSON_free(text);
  return rc;
}

static cJSON *lat_json(const vl_hist_t *h) {
  vl_lat_t l;
  vl_stats_lat(h, &l);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "count", (double)l.count);
  cJSON_AddNumberToObject(o, "mean", l.mean);
  cJSON_AddNumberToObject(o, "min", l.min);
  cJSON_AddNumberToObject(o, "p50", l.p50);
  cJSON_AddNumberToObject(o, "p90", l.p90);
  cJSON_AddNumberToObject(o, "p95", l.p95);
  cJSON_AddNumberToObject(o, "p99", l.p99);
  cJSON_AddNumberToObject(o, "max", l.max);
  return o;
}

/* Send rate over the span of sends, (n - 1) gaps between the first and the last, less the time
 * admission was paused for drained flushes. */
static double achieved_rate(const vl_stats_t *s) {
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
    cJSON_AddItemToArray(ev, flush_json(r, NULL));
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

cJSON *vl_report_summary(const vl_config_t *c, const vl_stats_t *s, const vl_run_meta_t *m) {
  double secs = (double)m->duration_ns / 1e9;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "vlmload_version", VL_VERSION);
  cJSON_AddStringToObject(o, "model", m->model);
  cJSON_AddStringToObject(o, "stop_reason", m->stop_reason);
  cJSON_AddBoolToObject(o, "interrupted", m->interrupted);
  cJSON_AddNumberToObject(o, "duration_s", secs);

  cJSON *req = cJSON_AddObjectToObject(o, "requests");
  cJSON_AddNumberToObject(req, "arrivals", (double)s->arrivals);
  cJSON_AddNumberToObject(req, "sent", (double)s->total.sent);
  cJSON_AddNumberToObject(req, "completed", (double)s->total.completed);
  cJSON_AddNumberToObject(req, "ok", (double)s->total.ok);
  cJSON_AddNumberToObject(req, "failed", (double)s->total.failed);
  cJSON_AddNumberToObject(req, "dropped", (double)s->dropped);
  cJSON_AddNumberToObject(req, "delayed", (double)s->delayed);
  cJSON_AddStringToObject(req, "on_full", c->on_full == VL_ONFULL_DROP ? "drop" : "queue");
  cJSON_AddNumberToObject(req, "warmup", (double)s->warmup);
  cJSON_AddNumberToObject(req, "measured", (double)s->measured);
  cJSON_AddNumberToObject(req, "text_only", (double)s->text_only);
  cJSON_AddNumberToObject(req, "with_images", (double)s->with_images);
  cJSON_AddItemToObject(o, "images", images_json(s, m));

  cJSON *rate = cJSON_AddObjectToObject(o, "rate");
  cJSON_AddNumberToObject(rate, "target", c->rate / (double)c->shard_n);
  cJSON_AddNumberToObject(rate, "target_all_shards", c->rate);
  cJSON_AddNumberToObject(rate, "achieved", achieved_rate(s));
  cJSON_AddNumberToObject(rate, "achieved_with_pauses", wall_rate(s));
  cJSON_AddNumberToObject(rate, "ok_per_s", secs > 0 ? (double)s->total.ok / secs : 0);

  cJSON_AddItemToObject(o, "latency_ms", lat_json(&s->e2e));
  cJSON_AddItemToObject(o, "latency_sent_ms", lat_json(&s->e2e_sent));
  cJSON_AddItemToObject(o, "ttft_ms", lat_json(&s->ttft));
  cJSON_AddItemToObject(o, "itl_ms", lat_json(&s->itl));
  cJSON_AddItemToObject(o, "send_lag_ms", lat_json(&s->send_lag));

  cJSON *err = cJSON_AddObjectToObject(o, "errors");
  for (int i = 1; i < VL_ERR__COUNT; i++)
    cJSON_AddNumberToObject(err, vl_errclass_name((vl_errclass_t)i), (double)s->total.errors[i]);

  cJSON *tok = cJSON_AddObjectToObject(o, "tokens");
  cJSON_AddNumberToObject(tok, "prompt", (double)s->total.prompt_tokens);
  cJSON_AddNumberToObject(tok, "completion", (double)s->total.completion_tokens);
  cJSON_AddNumberToObject(tok, "completion_per_s",
                          secs > 0 ? (double)s->total.completion_tokens / secs : 0);
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
    cJSON_AddItemToObject(o, "phases", phases_json(m));
  if (m->flush)
    cJSON_AddItemToObject(o, "flushes", flushes_json(m->flush, s, c));
  else
    cJSON_AddNullToObject(o, "flushes");

  /* The same figures under SGLang bench_serving's names, for dashboards that read those. */
  vl_lat_t e2e, ttft, itl;
  vl_stats_lat(&s->e2e, &e2e);
  vl_stats_lat(&s->ttft, &ttft);
  vl_stats_lat(&s->itl, &itl);
  cJSON_AddNumberToObject(o, "duration", secs);
  cJSON_AddNumberToObject(o, "completed", (double)s->total.ok);
  cJSON_AddNumberToObject(o, "total_input_tokens", (double)s->total.prompt_tokens);
  cJSON_AddNumberToObject(o, "total_output_tokens", (double)s->total.completion_tokens);
  cJSON_AddNumberToObject(o, "request_rate", c->rate);
  cJSON_AddNumberToObject(o, "request_throughput", secs > 0 ? (double)s->total.ok / secs : 0);
  cJSON_AddNumberToObject(o, "input_throughput",
                          secs > 0 ? (double)s->total.prompt_tokens / secs : 0);
  cJSON_AddNumberToObject(o, "output_throughput",
                          secs > 0 ? (double)s->total.completion_tokens / secs : 0);
  cJSON_AddNumberToObject(o, "mean_e2e_latency_ms", e2e.mean);
  cJSON_AddNumberToObject(o, "median_e2e_latency_ms", e2e.p50);
  cJSON_AddNumberToObject(o, "p90_e2e_latency_ms", e2e.p90);
  cJSON_AddNumberToObject(o, "p99_e2e_latency_ms", e2e.p99);
  cJSON_AddNumberToObject(o, "mean_ttft_ms", ttft.mean);
  cJSON_AddNumberToObject(o, "median_ttft_ms", ttft.p50);
  cJSON_AddNumberToObject(o, "p99_ttft_ms", ttft.p99);
  cJSON_AddNumberToObject(o, "mean_itl_ms", itl.mean);
  cJSON_AddNumberToObject(o, "median_itl_ms", itl.p50);
  cJSON_AddNumberToObject(o, "p95_itl_ms", itl.p95);
  cJSON_AddNumberToObject(o, "p99_itl_ms", itl.p99);
  cJSON_AddNumberToObject(o, "max_itl_ms", itl.max);
  cJSON_AddNumberToObject(o, "concurrency", c->concurrency);

  cJSON_AddItemToObject(o, "config", vl_config_json(c));
  return o;
}

/* Checks the --max-* thresholds; adds a "thresholds" array to o (when not NULL). */
static void check_thresholds(vl_report_t *rep, const vl_stats_t *s, cJSON *o) {
  const vl_config_t *c = rep->cfg;
  cJSON *arr = NULL;
  struct {
    const char *name;
    double limit, value;
  } t[2];
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
  rep->crossed = 0;
  if (n && o)
    arr = cJSON_AddArrayToObject(o, "thresholds");
  for (int i = 0; i < n; i++) {
    int passed = t[i].value <= t[i].limit;
    rep->crossed += !passed;
    if (!passed && !c->quiet)
      fprintf(stdout, "  THRESHOLD  %s: %.4g exceeds %.4g\n", t[i].name, t[i].value, t[i].limit);
    if (arr) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "name", t[i].name);
      cJSON_AddNumberToObject(e, "limit", t[i].limit);
      cJSON_AddNumberToObject(e, "value", t[i].value);
      cJSON_AddBoolToObject(e, "passed", passed);
      cJSON_AddItemToArray(arr, e);
    }
  }
}

int vl_report_thresholds_crossed(const vl_report_t *rep) {
  return rep->crossed;
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
  uint64_t distinct = 0;
  for (size_t i = 0; i < s->n_pool; i++)
    distinct += s->per_pool[i] > 0;
  /* Unique images are each distinct; otherwise as many as the pool entries that were used. */
  cJSON_AddNumberToObject(o, "unique",
                          m->uniq ? (double)(s->images_sent - s->images_late) : (double)distinct);
  cJSON_AddNumberToObject(o, "late", (double)s->images_late);
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

static void print_images(FILE *f, const vl_stats_t *s, const vl_run_meta_t *m) {
  fprintf(f, "  images     sent %llu (%.1f MB) in %llu requests, text-only %llu",
          (unsigned long long)s->images_sent, (double)s->image_bytes / 1e6,
          (unsigned long long)s->with_images, (unsigned long long)s->text_only);
  if (m->uniq)
    fprintf(f, ", unique (late %llu)", (unsigned long long)s->images_late);
  fputc('\n', f);
  size_t n;
  sizerow_t *rows = size_table(s, m->pool, &n);
  uint64_t png = 0, jpeg = 0;
  for (size_t i = 0; i < n; i++) {
    if (rows[i].fmt == VL_IMG_PNG)
      png += rows[i].count;
    else
      jpeg += rows[i].count;
  }
  fprintf(f, "  formats    png %llu  jpeg %llu;  sizes", (unsigned long long)png,
          (unsigned long long)jpeg);
  for (size_t i = 0; i < n && i < 6; i++)
    fprintf(f, " %dx%d %s %llu%s", rows[i].w, rows[i].h, vl_image_fmt_name(rows[i].fmt),
            (unsigned long long)rows[i].count, i + 1 < n && i < 5 ? "," : "");
  if (n > 6)
    fprintf(f, " and %zu more", n - 6);
  fputc('\n', f);
  free(rows);
}

static void print_lat(FILE *f, const char *name, const vl_hist_t *h) {
  vl_lat_t l;
  vl_stats_lat(h, &l);
  if (!l.count)
    return;
  fprintf(f, "  %-18s %9.2f %9.2f %9.2f %9.2f %9.2f\n", name, l.mean, l.p50, l.p90, l.p99, l.max);
}

static void print_summary(const vl_report_t *rep, const vl_stats_t *s, const vl_run_meta_t *m) {
  const vl_config_t *c = rep->cfg;
  FILE *f = stdout;
  double secs = (double)m->duration_ns / 1e9;
  fprintf(f, "\nvlmload %s  %s%s  model ", VL_VERSION, c->url, c->endpoint);
  vl_text_fput_shown(f, m->model);
  fputc('\n', f);
  fprintf(f, "  stopped by %s after %.2fs%s\n", m->stop_reason, secs,
          m->interrupted ? " (interrupted)" : "");
  fprintf(
      f, "  requests   sent %llu  ok %llu  failed %llu  dropped %llu  delayed %llu  warm-up %llu\n",
      (unsigned long long)s->total.sent, (unsigned long long)s->total.ok,
      (unsigned long long)s->total.failed, (unsigned long long)s->dropped,
      (unsigned long long)s->delayed, (unsigned long long)s->warmup);
  if (c->shard_n > 1)
    fprintf(f, "  shard      %llu of %llu (ids %llu mod %llu)\n", (unsigned long long)c->shard_i,
            (unsigned long long)c->shard_n, (unsigned long long)c->shard_i,
            (unsigned long long)c->shard_n);
  if (c->rate > 0)
    fprintf(f, "  rate       target %.2f/s  achieved %.2f/s  ok %.2f/s\n",
            c->rate / (double)c->shard_n, achieved_rate(s),
            secs > 0 ? (double)s->total.ok / secs : 0);
  else
    fprintf(f, "  rate       closed loop, concurrency %d  achieved %.2f/s  ok %.2f/s\n",
            c->concurrency, achieved_rate(s), secs > 0 ? (double)s->total.ok / secs : 0);
  if (m->flush) {
    const vl_flush_t *fl = m->flush;
    fprintf(f, "  flushes    %llu (ok %llu, refused %llu, failed %llu, retries %llu",
            (unsigned long long)fl->count, (unsigned long long)fl->ok,
            (unsigned long long)fl->refused, (unsigned long long)fl->failed,
            (unsigned long long)fl->retries_total);
    if (s->flush_skipped)
      fprintf(f, ", skipped %llu", (unsigned long long)s->flush_skipped);
    fprintf(f, "), paused %.2fs\n", (double)s->paused_ns / 1e9);
  }
  if (m->pool)
    print_images(f, s, m);
  fprintf(f, "  tokens     prompt %llu  completion %llu  (%.1f/s)\n",
          (unsigned long long)s->total.prompt_tokens,
          (unsigned long long)s->total.completion_tokens,
          secs > 0 ? (double)s->total.completion_tokens / secs : 0);
  fprintf(f, "\n  %-18s %9s %9s %9s %9s %9s\n", "latency (ms)", "mean", "p50", "p90", "p99", "max");
  print_lat(f, "end-to-end", &s->e2e);
  print_lat(f, "from send", &s->e2e_sent);
  print_lat(f, "time to 1st token", &s->ttft);
  print_lat(f, "inter-token", &s->itl);
  print_lat(f, "send lag", &s->send_lag);
  if (m->n_phases)
    print_phases(f, m);
  if (s->n_urls > 1) {
    fprintf(f, "\n");
    for (int u = 0, k = 0; u < c->n_urls; u++) {
      if (vl_config_url_index(c, u) != k)
        continue;
      const vl_counts_t *pc = &s->per_url[k++];
      fprintf(f, "  server     %s  sent %llu  ok %llu  failed %llu\n", c->urls[u],
              (unsigned long long)pc->sent, (unsigned long long)pc->ok,
              (unsigned long long)pc->failed);
    }
  }
  if (s->total.failed) {
    fprintf(f, "\n  errors    ");
    for (int i = 1; i < VL_ERR__COUNT; i++)
      if (s->total.errors[i])
        fprintf(f, " %s %llu", vl_errclass_name((vl_errclass_t)i),
                (unsigned long long)s->total.errors[i]);
    fputc('\n', f);
  }
  fflush(f);
}

/* The memory series: first, last, lowest and highest sample of each. */
static cJSON *memory_json(const vl_report_t *rep, const vl_run_meta_t *m) {
  cJSON *arr = cJSON_CreateArray();
  for (size_t i = 0; i < rep->n_cols; i++) {
    const vl_monitor_series_t *sr = vl_monitor_series(m->mon, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sr->name);
    cJSON_AddStringToObject(o, "unit", sr->unit);
    cJSON_AddNumberToObject(o, "samples", (double)rep->mem[i].n);
    if (rep->mem[i].n) {
      cJSON_AddNumberToObject(o, "first", rep->mem[i].first);
      cJSON_AddNumberToObject(o, "last", rep->mem[i].last);
      cJSON_AddNumberToObject(o, "min", rep->mem[i].min);
      cJSON_AddNumberToObject(o, "max", rep->mem[i].max);
      cJSON_AddNumberToObject(o, "change", rep->mem[i].last - rep->mem[i].first);
    }
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static void print_memory(const vl_report_t *rep, const vl_run_meta_t *m) {
  if (!rep->n_cols)
    return;
  fprintf(stdout, "\n  %-32s %10s %10s %10s %10s\n", "memory", "first", "last", "max", "change");
  for (size_t i = 0; i < rep->n_cols; i++) {
    const vl_monitor_series_t *sr = vl_monitor_series(m->mon, i);
    if (!rep->mem[i].n) {
      fprintf(stdout, "  %-32.32s %10s\n", sr->name, "no sample");
      continue;
    }
    fprintf(stdout, "  %-32.32s %10.1f %10.1f %10.1f %+10.1f %s\n", sr->name, rep->mem[i].first,
            rep->mem[i].last, rep->mem[i].max, rep->mem[i].last - rep->mem[i].first, sr->unit);
  }
}

/* The timeline written so far, parsed. The scratch timeline has no name: it is read back through
 * its descriptor, from the start. */
static int load_timeline(vl_report_t *rep, vl_csv_t **tl, char *err, size_t errlen) {
  if (fflush(rep->timeline) != 0 || ferror(rep->timeline)) {
    snprintf(err, errlen, "the timeline: %s", strerror(errno));
    return VL_EIO;
  }
  if (!rep->scratch_timeline)
    return vl_csv_load(tl, rep->cfg->timeline, err, errlen);
  int fd = fileno(rep->timeline);
  size_t cap = 1 << 16, len = 0;
  char *buf = vl_xmalloc(cap);
  for (;;) {
    if (len == cap)
      buf = vl_xrealloc(buf, cap *= 2);
    ssize_t got = pread(fd, buf + len, cap - len, (off_t)len);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      snprintf(err, errlen, "the scratch timeline: %s", strerror(errno));
      free(buf);
      return VL_EIO;
    }
    if (got == 0)
      break;
    len += (size_t)got;
  }
  int rc = vl_csv_parse(tl, "timeline", buf, len, err, errlen);
  free(buf);
  return rc;
}

/* --analyze and --plot: the leak analysis of the timeline just written. Returns its JSON, or
 * NULL when it could not run (said on stderr). */
static cJSON *analyze_run(vl_report_t *rep) {
  char err[512];
  vl_csv_t *tl = NULL;
  cJSON *json = NULL;
  if (load_timeline(rep, &tl, err, sizeof(err)) != 0) {
    fprintf(stderr, "vlmload: --analyze: %s\n", err);
    return NULL;
  }
  vl_analyze_cfg_t ac;
  vl_analyze_cfg_init(&ac);
  ac.plot = rep->cfg->plot;
  ac.gnuplot = rep->cfg->gnuplot;
  ac.text = rep->cfg->analyze && !rep->cfg->quiet ? stdout : NULL;
  if (ac.text)
    fputc('\n', stdout);
  if (vl_analyze_run(tl, NULL, &ac, &json, err, sizeof(err)) != 0)
    fprintf(stderr, "vlmload: --analyze: %s\n", err);
  vl_csv_free(tl);
  return json;
}

int vl_report_finish(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap,
                     const vl_run_meta_t *meta) {
  if (rep->progress_drawn) {
    fputc('\n', stderr);
    rep->progress_drawn = 0;
  }
  if (meta->n_phases)
    mark_knee(meta->phases, meta->n_phases);
  if (!rep->cfg->quiet) {
    print_summary(rep, s, meta);
    if (meta->mon)
      print_memory(rep, meta);
  }
  cJSON *analysis =
      rep->timeline && (rep->cfg->analyze || rep->cfg->plot) ? analyze_run(rep) : NULL;
  int hrc = rep->cfg->histograms ? write_histograms(rep, s, snap, meta) : 0;
  if (!rep->cfg->output) {
    check_thresholds(rep, s, NULL);
    cJSON_Delete(analysis);
    return hrc;
  }
  cJSON *j = vl_report_summary(rep->cfg, s, meta);
  if (meta->mon)
    cJSON_AddItemToObject(j, "memory", memory_json(rep, meta));
  if (analysis)
    cJSON_AddItemToObject(j, "memory_analysis", analysis);
  check_thresholds(rep, s, j);
  char *text = cJSON_Print(j);
  cJSON_Delete(j);
  int rc = write_out(rep->cfg->output, "output", text);
  cJSON_free(text);
  return rc ? rc : hrc;
}

/* Closes a stream; says why it failed unless that was said already. */
static int close_file(FILE *f, int failed, const char *flag, const char *path) {
  if (!f)
    return 0;
  int bad = ferror(f);
  errno = 0;
  if (fclose(f) == 0 && !bad)
    return 0;
  if (!failed)
    fprintf(stderr, "vlmload: --%s '%s': %s\n", flag, path, strerror(errno ? errno : EIO));
  return VL_EIO;
}

int vl_report_close(vl_report_t *rep) {
  if (!rep)
    return 0;
  int rc = 0;
  if (rep->scratch_timeline)
    fclose(rep->timeline); /* unlinked since it was made: closing removes it */
  else
    rc = close_file(rep->timeline, rep->timeline_failed, "timeline", rep->cfg->timeline);
  int rc2 = close_file(rep->log, rep->log_failed, "log-requests", rep->cfg->log_requests);
  if (close_file(rep->samples, rep->samples_failed, "samples", rep->cfg->samples) != 0)
    rc2 = VL_EIO;
  free(rep->mem);
  cJSON_Delete(rep->intervals);
  free(rep->log_buf);
  free(rep);
  return rc ? rc : rc2;
}
