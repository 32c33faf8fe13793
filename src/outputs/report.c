#include "vlmload/report.h"
#include "vlmload/common.h"

#include "vlmload/analyzecli.h"
#include "vlmload/csvin.h"
#include "vlmload/htmlreport.h"
#include "vlmload/memunit.h"
#include "vlmload/metrics.h"
#include "vlmload/monitor.h"
#include "vlmload/outfile.h"
#include "vlmload/progress.h"
#include "vlmload/rateauto.h"
#include "vlmload/settings.h"
#include "vlmload/workerpipe.h"
#include "vlmload/text.h"
#include "vlmload/timeline.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
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
  int scratch_timeline; /* the timeline is kept only for --analyze/--plot/--report, unnamed */
  /* Streams that failed a write, said on stderr once; nothing more is written to them. */
  int timeline_failed, log_failed, samples_failed;
  size_t n_cols;         /* memory series followed: summary, samples and timeline */
  vl_summary_mem_t *mem; /* per memory series */
  const struct vl_monitor_s *mon;
  /* Series the monitor adds during the run (a process found late in a --monitor-tree) get
   * timeline columns too: in a CSV timeline, rows from then on carry more cells and
   * complete_timeline rewrites the header and pads the earlier rows at the end. n_head is the
   * header's count of memory columns; grown[k] = {rows written before, columns from then}. A CSV
   * timeline that is not a regular file cannot be rewritten and keeps the header's columns. */
  size_t n_head, n_tl;
  struct {
    uint64_t row;
    size_t n;
  } * grown;
  size_t n_grown;
  uint64_t rows;
  int tl_regular, tl_said;
  cJSON *intervals;      /* --histograms: one record per timeline row */
  vl_metrics_t *metrics; /* --metrics-listen: not owned; NULL without */
};

static double ms_since(uint64_t from_ns, uint64_t to_ns);

void vl_report_metrics(vl_report_t *rep, vl_metrics_t *m) {
  if (rep)
    rep->metrics = m;
}

/* --metrics-listen: the figures of the run so far, phase as the snapshot says or "done", rate
 * the latest interval's sending rate; a worker of --workers sends them to its parent. */
static void publish_metrics(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap,
                            const char *phase, double rate) {
  int worker = vl_workerpipe_fd() >= 0 && rep->cfg->metrics_listen;
  if (!rep->metrics && !worker)
    return;
  size_t n = snap->mon ? vl_monitor_count(snap->mon) : 0, n_mem = 0;
  vl_metrics_mem_t *mem = vl_xcalloc(n ? n : 1, sizeof(*mem));
  for (size_t i = 0; i < n; i++) {
    const vl_monitor_series_t *m = vl_monitor_series(snap->mon, i);
    if (m->valid && m->mb > 0)
      mem[n_mem++] = (vl_metrics_mem_t){m->name, m->value * m->mb * VL_MEMUNIT_MB};
  }
  vl_metrics_figures_t f = {
      .phase = phase,
      .elapsed_s = ms_since(snap->t0_ns, snap->now_ns) / 1e3,
      .sent = s->total.sent,
      .ok = s->total.ok,
      .failed = s->total.failed,
      .dropped = s->dropped,
      .in_flight = snap->in_flight,
      .target_rate = snap->target_rate,
      .achieved_rate = rate,
      .e2e = &s->e2e,
      .e2e_sent = &s->e2e_sent,
      .ttft = &s->ttft,
      .itl = &s->itl,
      .tpot = &s->tpot,
      .send_lag = &s->send_lag,
      .flushes = s->flushes,
      .paused_s = (double)s->paused_ns / 1e9,
      .images = s->images_sent,
      .image_bytes = s->image_bytes,
      .prompt_tokens = s->measured_c.prompt_tokens,
      .completion_tokens = s->measured_c.completion_tokens,
      .mem = mem,
      .n_mem = n_mem,
  };
  memcpy(f.errors, s->total.errors, sizeof(f.errors));
  if (rep->metrics)
    vl_metrics_publish(rep->metrics, &f);
  else
    vl_workerpipe_report_metrics(&f); /* --workers: the parent serves the merged figures */
  free(mem);
}

void vl_report_columns(vl_report_t *rep, const struct vl_monitor_s *mon) {
  rep->mon = mon;
  rep->n_cols = rep->n_head = rep->n_tl = mon ? vl_monitor_count(mon) : 0;
  rep->mem = vl_xcalloc(rep->n_cols ? rep->n_cols : 1, sizeof(*rep->mem));
  struct stat st;
  rep->tl_regular = rep->timeline && fstat(fileno(rep->timeline), &st) == 0 && S_ISREG(st.st_mode);
  if (!rep->timeline || rep->cfg->timeline_jsonl)
    return;
  vl_timeline_header_end(rep->timeline, mon, rep->n_cols);
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

/* The option that reads the timeline back at the end, or NULL. */
static const char *reader(const vl_config_t *cfg) {
  return cfg->analyze ? "analyze" : cfg->plot ? "plot" : cfg->report ? "report" : NULL;
}

/* Whether the memory analysis runs at the end: asked for, or drawn in the report. */
static int wants_analysis(const vl_config_t *cfg) {
  return cfg->analyze || cfg->plot || cfg->fail_on ||
         (cfg->report && !vl_monitor_spec_empty(&cfg->monitor));
}

int vl_report_open(vl_report_t **out, const vl_config_t *cfg, char *err, size_t errlen) {
  vl_report_t *rep = vl_xcalloc(1, sizeof(*rep));
  rep->cfg = cfg;
  rep->progress = cfg->progress < 0 ? isatty(STDERR_FILENO) : cfg->progress;
  struct stat st;
  if (cfg->timeline && reader(cfg) && stat(cfg->timeline, &st) == 0 && !S_ISREG(st.st_mode)) {
    /* The analysis reads the timeline back at the end: a terminal or a pipe cannot give it. */
    snprintf(err, errlen, "--%s reads the timeline back: --timeline '%s' must be a regular file",
             reader(cfg), cfg->timeline);
    goto fail;
  }
  if (cfg->timeline && !(rep->timeline = open_out(cfg->timeline, "timeline", err, errlen)))
    goto fail;
  if (!cfg->timeline && reader(cfg)) {
    /* The analysis and the report read a timeline: keep one in a scratch file for them. */
    char why[384];
    rep->timeline = vl_outfile_scratch("vlmload-timeline", why, sizeof(why));
    if (!rep->timeline || vl_outfile_probe(rep->timeline, why, sizeof(why)) != 0) {
      snprintf(err, errlen, "--%s: the scratch timeline: %s", reader(cfg), why);
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
      (cfg->plot && !can_write(cfg->plot, "plot", err, errlen)) ||
      (cfg->report && !can_write(cfg->report, "report", err, errlen)))
    goto fail;
  if (rep->timeline && !cfg->timeline_jsonl) {
    /* The header is finished by vl_report_columns, once the memory series are known. */
    vl_timeline_header(rep->timeline, VL_TIMELINE_RUN);
    if (fflush(rep->timeline) != 0) {
      if (cfg->timeline)
        snprintf(err, errlen, "--timeline '%s': %s", cfg->timeline, strerror(errno));
      else
        snprintf(err, errlen, "--%s: the scratch timeline: %s", reader(cfg), strerror(errno));
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

void vl_report_say(vl_report_t *rep, const char *line) {
  if (rep->progress_drawn) {
    fputc('\n', stderr);
    rep->progress_drawn = 0;
  }
  fprintf(stderr, "vlmload: %s\n", line);
}

/* "key":value then sep, to the request log; null for a timing not given (NaN, -1). */
static void put_ms(FILE *f, const char *key, double ms, const char *sep) {
  if (isnan(ms))
    fprintf(f, "\"%s\":null%s", key, sep);
  else
    fprintf(f, "\"%s\":%.3f%s", key, ms, sep);
}

static void put_n(FILE *f, const char *key, int64_t n, const char *sep) {
  if (n < 0)
    fprintf(f, "\"%s\":null%s", key, sep);
  else
    fprintf(f, "\"%s\":%lld%s", key, (long long)n, sep);
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
          (unsigned long long)o->id,
          o->latency_probe ? "probe"
          : o->probe       ? VL_RATEAUTO_PHASE
          : o->measured    ? "measure"
                           : "warmup",
          o->images ? "image" : "text", o->images, (unsigned long long)o->image_bytes,
          wall_of(snap, o->intended_ns), wall_of(snap, o->sent_ns), wall_of(snap, o->done_ns),
          ms_since(o->intended_ns, o->sent_ns), ms_since(o->intended_ns, o->done_ns),
          ms_since(o->sent_ns, o->done_ns));
  /* Each image's size and format, in the order the request carries them. */
  fputs("\"image_sizes\":[", f);
  for (int k = 0; o->image_list && k < o->images; k++)
    fprintf(f, "%s\"%dx%d\"", k ? "," : "", o->image_list[k].w, o->image_list[k].h);
  fputs("],\"image_formats\":[", f);
  for (int k = 0; o->image_list && k < o->images; k++)
    fprintf(f, "%s\"%s\"", k ? "," : "", o->image_list[k].format);
  fputs("],", f);
  if (o->turn) /* --turns: which conversation, which of its turns */
    fprintf(f, "\"conversation\":%llu,\"turn\":%d,", (unsigned long long)o->conversation, o->turn);
  if (o->first_token_ns)
    fprintf(f, "\"ttft_ms\":%.3f,", ms_since(o->sent_ns, o->first_token_ns));
  else
    fputs("\"ttft_ms\":null,", f);
  if (o->token_events > 1)
    fprintf(f, "\"itl_ms\":%.3f,", (double)o->itl_sum_ns / 1e6 / (o->token_events - 1));
  else
    fputs("\"itl_ms\":null,", f);
  double tpot_us;
  if (vl_stats_tpot_us(o, &tpot_us))
    fprintf(f, "\"tpot_ms\":%.3f,", tpot_us / 1e3);
  else
    fputs("\"tpot_ms\":null,", f);
  fprintf(f, "\"status\":%ld,", o->status);
  /* The outcome: ok, failed (its class in error), or cancelled: closed by --cancel before its
   * reply finished, which is no error. */
  fprintf(f, "\"outcome\":\"%s\",",
          o->closed               ? "cancelled"
          : o->err == VL_ERR_NONE ? "ok"
                                  : "failed");
  if (o->cancel_planned)
    fputs("\"cancel_planned\":true,", f);
  if (o->err == VL_ERR_NONE || o->closed)
    fputs("\"error\":null,", f);
  else
    fprintf(f, "\"error\":\"%s\",", vl_errclass_name(o->err));
  if (o->error_message) {
    /* The server's words: escaped as JSON, never raw. */
    cJSON *m = cJSON_CreateString(o->error_message);
    char *t = m ? cJSON_PrintUnformatted(m) : NULL;
    fprintf(f, "\"error_message\":%s,", t ? t : "null");
    cJSON_free(t);
    cJSON_Delete(m);
  } else {
    fputs("\"error_message\":null,", f);
  }
  if (o->prompt_tokens >= 0)
    fprintf(f, "\"prompt_tokens\":%lld,", (long long)o->prompt_tokens);
  else
    fputs("\"prompt_tokens\":null,", f);
  /* Lengths: the synthetic prompt's tokens and the max_tokens the request sent, when its own. */
  if (o->input_tokens > 0)
    fprintf(f, "\"input_tokens\":%d,", o->input_tokens);
  if (o->max_tokens > 0)
    fprintf(f, "\"max_tokens\":%d,", o->max_tokens);
  if (o->completion_tokens >= 0)
    fprintf(f, "\"completion_tokens\":%lld,", (long long)o->completion_tokens);
  else
    fputs("\"completion_tokens\":null,", f);
  /* The server's own timings, where its reply gave them. */
  const vl_srvtime_t *t = &o->srv;
  if (!isnan(t->e2e_ms) || t->prompt_n >= 0 || t->predicted_n >= 0 || t->cache_n >= 0) {
    fputs("\"server\":{", f);
    put_ms(f, "prompt_ms", t->prompt_ms, ",");
    put_ms(f, "predicted_ms", t->predicted_ms, ",");
    put_ms(f, "e2e_ms", t->e2e_ms, ",");
    put_n(f, "prompt_n", t->prompt_n, ",");
    put_n(f, "predicted_n", t->predicted_n, ",");
    put_n(f, "cache_n", t->cache_n, "},");
  }
  fprintf(f, "\"retries\":%d,\"bytes_sent\":%llu}\n", o->retries,
          (unsigned long long)o->bytes_sent);
  return check_log(rep);
}

/* Appends one event object to the request log and frees it. Returns as vl_report_request. */
static int log_event(vl_report_t *rep, cJSON *o) {
  char *text = cJSON_PrintUnformatted(o);
  if (text) {
    fputs(text, rep->log);
    fputc('\n', rep->log);
  }
  cJSON_free(text);
  cJSON_Delete(o);
  return check_log(rep);
}

int vl_report_event(vl_report_t *rep, cJSON *o) {
  if (!rep->log || rep->log_failed) {
    cJSON_Delete(o);
    return rep->log_failed ? VL_EIO : 0;
  }
  return log_event(rep, o);
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
  return log_event(rep, o);
}

int vl_report_flush(vl_report_t *rep, const vl_flush_record_t *f, const vl_snapshot_t *snap) {
  if (!rep->log)
    return 0;
  if (rep->log_failed)
    return VL_EIO;
  return log_event(rep,
                   vl_summary_flush_json(f, snap ? ms_since(snap->t0_ns, f->start_ns) / 1e3 : NAN));
}

/* The first valid reading of a series whose name starts with prefix, or -1. */
static double first_reading(const vl_monitor_t *mon, const char *prefix) {
  size_t n = mon ? vl_monitor_count(mon) : 0;
  for (size_t i = 0; i < n; i++) {
    const vl_monitor_series_t *m = vl_monitor_series(mon, i);
    if (m->valid && strncmp(m->name, prefix, strlen(prefix)) == 0)
      return m->value;
  }
  return -1;
}

/* The figures of the progress line at this tick. */
static vl_progress_t progress_of(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap,
                                 double rate) {
  const vl_config_t *c = rep->cfg;
  int flushes_on = s->flushes || c->run.flushes;
  return (vl_progress_t){
      .elapsed_s = ms_since(snap->t0_ns, snap->now_ns) / 1e3,
      .phase = snap->phase,
      .rate = rate,
      .sent = s->total.sent,
      .ok = s->total.ok,
      .failed = s->total.failed,
      .dropped = s->dropped,
      .in_flight = snap->in_flight,
      .p50_ms = s->e2e.total ? (double)vl_hist_percentile(&s->e2e, 50) / 1e3 : -1,
      .p99_ms = s->e2e.total ? (double)vl_hist_percentile(&s->e2e, 99) / 1e3 : -1,
      .ttft_p50_ms = s->ttft.total ? (double)vl_hist_percentile(&s->ttft, 50) / 1e3 : -1,
      .rss_mb = first_reading(snap->mon, "rss_mb"),
      .gpu_mb = first_reading(snap->mon, "gpu_mb"),
      .flushes_on = flushes_on,
      .flushes = s->flushes,
      .flushing = strcmp(snap->phase, "flush") == 0,
  };
}

static void draw_progress(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap,
                          double rate) {
  vl_progress_t p = progress_of(rep, s, snap, rate);
  char line[512];
  vl_progress_format(line, sizeof(line), vl_progress_columns(STDERR_FILENO), &p);
  fprintf(stderr, "\r\033[K%s", line);
  fflush(stderr);
  rep->progress_drawn = 1;
}

/* The monitor added series since the last tick: they are followed from now on. */
static void grow_columns(vl_report_t *rep, size_t n) {
  rep->mem = vl_xrealloc(rep->mem, n * sizeof(*rep->mem));
  memset(rep->mem + rep->n_cols, 0, (n - rep->n_cols) * sizeof(*rep->mem));
  rep->n_cols = n;
  if (!rep->timeline || rep->cfg->timeline_jsonl) {
    rep->n_tl = n; /* a JSON line names each of its values */
    return;
  }
  if (!rep->tl_regular) {
    if (!rep->tl_said)
      fprintf(stderr,
              "vlmload: --timeline '%s' is not a regular file: the series found after the "
              "start (%s, ...) are left out of it (--samples FILE has them)\n",
              rep->cfg->timeline, vl_monitor_series(rep->mon, rep->n_tl)->name);
    rep->tl_said = 1;
    return;
  }
  rep->grown = vl_xrealloc(rep->grown, (rep->n_grown + 1) * sizeof(*rep->grown));
  rep->grown[rep->n_grown].row = rep->rows;
  rep->grown[rep->n_grown].n = n;
  rep->n_grown++;
  rep->n_tl = n;
}

/* A CSV timeline whose series list grew: its header gets every column and each earlier row
 * empty cells for the columns it lacks (unread then), rewritten in place. Returns 0 or VL_EIO
 * (reported). */
static int complete_timeline(vl_report_t *rep) {
  if (!rep->n_grown || rep->timeline_failed)
    return 0;
  FILE *f = rep->timeline;
  char *text = NULL, *out = NULL;
  size_t len = 0, cap = 1 << 16, olen = 0;
  if (fflush(f) != 0)
    goto fail;
  int fd = rep->scratch_timeline ? fileno(f) : open(rep->cfg->timeline, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    goto fail;
  text = vl_xmalloc(cap);
  for (;;) {
    if (len == cap)
      text = vl_xrealloc(text, cap *= 2);
    ssize_t got = pread(fd, text + len, cap - len, (off_t)len);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      if (fd != fileno(f))
        close(fd);
      if (got < 0)
        goto fail;
      break;
    }
    len += (size_t)got;
  }
  FILE *m = open_memstream(&out, &olen);
  vl_timeline_header(m, VL_TIMELINE_RUN);
  vl_timeline_header_end(m, rep->mon, rep->n_tl);
  const char *p = memchr(text, '\n', len);
  p = p ? p + 1 : text + len;
  size_t k = 0, have = rep->n_head;
  for (uint64_t row = 0; p < text + len; row++) {
    while (k < rep->n_grown && rep->grown[k].row <= row)
      have = rep->grown[k++].n;
    const char *e = memchr(p, '\n', (size_t)(text + len - p));
    size_t l = e ? (size_t)(e - p) : (size_t)(text + len - p);
    fwrite(p, 1, l, m);
    for (size_t c = have; c < rep->n_tl; c++)
      fputc(',', m);
    fputc('\n', m);
    p += l + (e ? 1 : 0);
  }
  fclose(m);
  if (ftruncate(fileno(f), 0) != 0 || fseek(f, 0, SEEK_SET) != 0 ||
      fwrite(out, 1, olen, f) != olen || fflush(f) != 0)
    goto fail;
  free(text);
  free(out);
  rep->n_head = rep->n_tl;
  rep->n_grown = 0;
  return 0;

fail:
  fprintf(stderr, "vlmload: --%s: completing the timeline's header: %s\n",
          rep->cfg->timeline ? "timeline" : reader(rep->cfg), strerror(errno ? errno : EIO));
  rep->timeline_failed = 1;
  free(text);
  free(out);
  return VL_EIO;
}

int vl_report_tick(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap) {
  if (snap->mon && vl_monitor_count(snap->mon) > rep->n_cols) {
    rep->mon = snap->mon;
    grow_columns(rep, vl_monitor_count(snap->mon));
  }
  uint64_t from = rep->last_tick_ns ? rep->last_tick_ns : snap->t0_ns;
  double secs = ms_since(from, snap->now_ns) / 1e3;
  rep->last_tick_ns = snap->now_ns;
  if (secs <= 0)
    return 0;
  vl_timeline_row_t row;
  vl_timeline_row_fill(&row, s, snap, secs);
  if (rep->timeline && !rep->timeline_failed) {
    vl_timeline_write(rep->timeline, VL_TIMELINE_RUN, rep->cfg->timeline_jsonl, &row, snap->mon,
                      rep->n_tl);
    fflush(rep->timeline);
    rep->rows++;
  }
  /* The probe before a --rate auto run is not the run: its rows say so, and nothing else of the
   * run counts them. */
  int probe = snap->phase && strcmp(snap->phase, VL_RATEAUTO_PHASE) == 0;
  for (size_t i = 0; i < rep->n_cols; i++) {
    const vl_monitor_series_t *m = vl_monitor_series(snap->mon, i);
    if (!m->valid)
      continue;
    if (rep->samples && !rep->samples_failed)
      fprintf(rep->samples, "%lld,%.3f,%s,%.6f,%s\n", (long long)m->t_wall_ms, row.elapsed_s,
              m->name, m->value, m->unit);
    if (!probe)
      vl_summary_mem_add(&rep->mem[i], m->value);
  }
  if (rep->samples && !rep->samples_failed)
    fflush(rep->samples);
  /* The request log too, so that it is readable as the run goes and a full disk is found within
   * a tick. */
  if (rep->log && !rep->log_failed)
    fflush(rep->log);
  if (rep->intervals && !probe) {
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
  if (rep->timeline &&
      check_stream(rep, rep->timeline, &rep->timeline_failed,
                   rep->cfg->timeline ? "timeline" : reader(rep->cfg), rep->cfg->timeline) != 0)
    rc = VL_EIO;
  if (rep->samples &&
      check_stream(rep, rep->samples, &rep->samples_failed, "samples", rep->cfg->samples) != 0)
    rc = VL_EIO;
  if (rep->log && check_log(rep) != 0)
    rc = VL_EIO;
  if (rep->progress && !rc)
    draw_progress(rep, s, snap, row.rate_sent);
  publish_metrics(rep, s, snap, snap->phase, row.rate_sent);
  /* --workers: a worker's figures go to the parent, which draws the one line (workers.h). */
  if (!rc && vl_workerpipe_fd() >= 0) {
    vl_progress_t p = progress_of(rep, s, snap, row.rate_sent);
    vl_workerpipe_report(&p, s);
  }
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
  vl_stats_record_json(o, s);
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
  if (s->measure_end_ns > s->measure_start_ns && s->measure_start_ns) {
    cJSON_AddNumberToObject(o, "measure_start_wall_ms", wall_of(snap, s->measure_start_ns));
    cJSON_AddNumberToObject(o, "measure_end_wall_ms", wall_of(snap, s->measure_end_ns));
  }
  cJSON_AddNumberToObject(o, "load_s", (double)m->load_ns / 1e9);
  cJSON_AddNumberToObject(o, "paused_s", (double)s->paused_ns / 1e9);
  cJSON_AddNumberToObject(o, "paused_flushes", (double)s->flush_pauses);
  cJSON_AddItemToObject(o, "intervals", rep->intervals);
  rep->intervals = NULL;
  cJSON_AddItemToObject(o, "config", vl_config_json(rep->cfg));
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  int rc = write_out(rep->cfg->histograms, "histograms", text);
  cJSON_free(text);
  return rc;
}

int vl_report_thresholds_crossed(const vl_report_t *rep) {
  return rep->crossed;
}

/* The timeline written so far, parsed. The scratch timeline has no name: it is read back through
 * its descriptor, from the start. */
static int load_timeline(vl_report_t *rep, vl_csv_t **tl, char *err, size_t errlen) {
  if (fflush(rep->timeline) != 0 || ferror(rep->timeline)) {
    snprintf(err, errlen, "the timeline: %s", strerror(errno));
    return VL_EIO;
  }
  if (!rep->scratch_timeline) {
    int rc = vl_csv_load(tl, rep->cfg->timeline, err, errlen);
    if (rc == 0) /* the rows of the probe before a --rate auto run are not the run's */
      vl_csv_drop_rows(*tl, "phase", VL_RATEAUTO_PHASE);
    return rc;
  }
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
  if (rc == 0)
    vl_csv_drop_rows(*tl, "phase", VL_RATEAUTO_PHASE);
  return rc;
}

/* --analyze, --plot, --fail-on and --report: the leak analysis of the timeline tl just written
 * (and, when svg is not NULL, the memory plot as SVG in it); *failed gets how many series' verdicts
 * --fail-on names. The caps it knows are --expect-cap's and the sizes among the server processes'
 * own settings (NULL: none read). Returns its JSON, or NULL when it could not run (said on
 * stderr). */
static cJSON *analyze_run(vl_report_t *rep, const vl_csv_t *tl, const vl_settings_t *settings,
                          char **svg, size_t *failed) {
  char err[512];
  cJSON *json = NULL;
  vl_analyzecli_cfg_t ac;
  vl_analyzecli_cfg_init(&ac);
  ac.opts.min_growth_frac = rep->cfg->min_growth_frac;
  ac.opts.min_growth_mb = rep->cfg->min_growth_mb;
  ac.opts.min_slope = rep->cfg->min_slope;
  ac.fail_on = rep->cfg->fail_on;
  ac.failed = failed;
  vl_analyze_caps_t caps = {0};
  const char *why;
  if (rep->cfg->expect_cap)
    (void)vl_analyze_caps_parse(&caps, rep->cfg->expect_cap, &why); /* checked with the options */
  for (size_t i = 0; settings && i < settings->n; i++)
    if (settings->v[i].bytes > 0)
      vl_analyze_caps_add(&caps, settings->v[i].name, settings->v[i].process, settings->v[i].bytes);
  ac.caps = caps.cap;
  ac.n_caps = caps.n;
  /* The warm-up is the first --warmup requests: the analysis starts once as many have completed.
   * A shard's request ids are global, so its own count cannot say where that is: its timeline's
   * phase column does. */
  if (rep->cfg->warmup > 0 && rep->cfg->shard_n <= 1)
    ac.read.warmup = (double)rep->cfg->warmup;
  ac.plot = rep->cfg->plot;
  ac.gnuplot = rep->cfg->gnuplot;
  ac.text = rep->cfg->analyze && !rep->cfg->quiet ? stdout : NULL;
  ac.svg = svg;
  if (ac.text)
    fputc('\n', stdout);
  if (vl_analyzecli_run(tl, NULL, &ac, &json, err, sizeof(err)) != 0)
    fprintf(stderr, "vlmload: --analyze: %s\n", err);
  /* A post-flush floor of a server whose flush leaves some caches holds what they keep. */
  const char *left = rep->cfg->run.flushes ? vl_profile_flush_leaves(rep->cfg->server) : NULL;
  if (json && left) {
    cJSON_AddStringToObject(json, "not_cleared_by_flush", left);
    if (ac.text)
      fprintf(ac.text, "  note: %s; the post-flush floor holds what they keep\n", left);
  }
  vl_analyze_caps_free(&caps);
  return json;
}

/* --report: the page of summary j (NULL: none), the timeline and the memory plot. */
static int write_report(vl_report_t *rep, const cJSON *j, const vl_csv_t *tl, const char *svg) {
  vl_htmlreport_t h = {.summary = j, .timeline = tl, .memory_svg = svg};
  char why[384];
  if (vl_htmlreport_write(&h, rep->cfg->report, why, sizeof(why)) == 0)
    return 0;
  fprintf(stderr, "vlmload: --report '%s': %s\n", rep->cfg->report, why);
  return VL_EIO;
}

int vl_report_finish(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap,
                     const vl_run_meta_t *meta) {
  if (rep->progress_drawn) {
    fputc('\n', stderr);
    rep->progress_drawn = 0;
  }
  /* The endpoint shows the end while the outputs are written, and after (--metrics-linger). */
  publish_metrics(rep, s, snap, "done", 0);
  if (meta->n_phases)
    vl_rateauto_mark_knee(meta->phases, meta->n_phases);
  if (!rep->cfg->quiet) {
    vl_summary_print(stdout, rep->cfg, s, meta);
    if (meta->mon) {
      vl_summary_print_memory(stdout, rep->cfg, rep->mem, rep->n_cols, meta->mon);
      vl_summary_print_counters(stdout, s, rep->mem, rep->n_cols, meta->mon);
    }
  }
  vl_csv_t *tl = NULL;
  char *svg = NULL, err[512];
  int trc = rep->timeline ? complete_timeline(rep) : 0;
  if (rep->timeline && (wants_analysis(rep->cfg) || rep->cfg->report) &&
      load_timeline(rep, &tl, err, sizeof(err)) != 0)
    fprintf(stderr, "vlmload: --%s: %s\n", reader(rep->cfg), err);
  size_t failed = 0;
  cJSON *analysis =
      tl && wants_analysis(rep->cfg)
          ? analyze_run(rep, tl, meta->settings, rep->cfg->report ? &svg : NULL, &failed)
          : NULL;
  /* --fail-on cannot be judged without the analysis: a run whose analysis failed fails it. */
  if (rep->cfg->fail_on && !analysis)
    failed = 1;
  int hrc = rep->cfg->histograms ? write_histograms(rep, s, snap, meta) : 0;
  if (trc && !hrc)
    hrc = trc;
  if (!rep->cfg->output && !rep->cfg->report) {
    rep->crossed = vl_summary_thresholds(rep->cfg, s, NULL) + (int)failed;
    cJSON_Delete(analysis);
    vl_csv_free(tl);
    return hrc;
  }
  cJSON *j = vl_summary_json(rep->cfg, s, meta);
  if (meta->mon) {
    cJSON_AddItemToObject(j, "memory", vl_summary_memory_json(rep->mem, rep->n_cols, meta->mon));
    cJSON_AddItemToObject(j, "processes", vl_summary_processes_json(rep->cfg, meta->mon));
    vl_monitor_parts_json(meta->mon, j);
    /* The server's counters over the run, and beside the images sent again the share the
     * server counted as cache hits. */
    cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(j, "server"), "counters",
                          vl_summary_counters_json(rep->mem, rep->n_cols, meta->mon));
    double hits, queries;
    vl_summary_hit_share(rep->mem, rep->n_cols, meta->mon, &hits, &queries);
    cJSON *im = cJSON_GetObjectItemCaseSensitive(j, "images");
    if (queries > 0) {
      cJSON_AddNumberToObject(im, "server_cache_queries", queries);
      cJSON_AddNumberToObject(im, "server_cache_hits", hits);
      cJSON_AddNumberToObject(im, "server_hit_share", hits / queries);
    }
  }
  if (analysis)
    cJSON_AddItemToObject(j, "memory_analysis", analysis);
  rep->crossed = vl_summary_thresholds(rep->cfg, s, j) + (int)failed;
  int rc = 0;
  if (rep->cfg->output) {
    char *text = cJSON_Print(j);
    rc = write_out(rep->cfg->output, "output", text);
    cJSON_free(text);
  }
  if (rep->cfg->report && write_report(rep, j, tl, svg) != 0 && !rc)
    rc = VL_EIO;
  cJSON_Delete(j);
  vl_csv_free(tl);
  free(svg);
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
  int rc = rep->timeline ? complete_timeline(rep) : 0;
  if (rep->scratch_timeline)
    fclose(rep->timeline); /* unlinked since it was made: closing removes it */
  else
    rc = close_file(rep->timeline, rep->timeline_failed, "timeline", rep->cfg->timeline) ? VL_EIO
                                                                                         : rc;
  int rc2 = close_file(rep->log, rep->log_failed, "log-requests", rep->cfg->log_requests);
  if (close_file(rep->samples, rep->samples_failed, "samples", rep->cfg->samples) != 0)
    rc2 = VL_EIO;
  free(rep->mem);
  free(rep->grown);
  cJSON_Delete(rep->intervals);
  free(rep->log_buf);
  free(rep);
  return rc ? rc : rc2;
}
