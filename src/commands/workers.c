/* --workers: the parent that runs N workers and merges them, and a worker's side (workers.h). */
#include "workers.h"
#include "vlmload/child.h"
#include "vlmload/common.h"
#include "vlmload/json.h"
#include "vlmload/hist.h"
#include "merge.h"
#include "vlmload/monitorspec.h"
#include "vlmload/outfile.h"
#include "vlmload/workerpipe.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#define MODEL_ENV VL_WORKERS_ENV "_MODEL"
#define REPORT_FD 3 /* the worker's end of its pipe */

/* The worker's side. */

static void set_path(char **dst, const char *dir, unsigned long long i, const char *what) {
  free(*dst);
  size_t len = strlen(dir) + 64;
  *dst = vl_xmalloc(len);
  snprintf(*dst, len, "%s/worker-%llu.%s", dir, i, what);
}

int vl_workers_child_setup(vl_config_t *c) {
  const char *env = getenv(VL_WORKERS_ENV);
  /* Phases are known only once the whole configuration is read, after the option checks. */
  if (c->workers > 1 && c->n_phases) {
    fprintf(stderr, "vlmload: --workers with phases or --sweep: the merged summary (as vlmload "
                    "merge's) has no table of stages; run them with --workers 1\n");
    return 2;
  }
  if (!env)
    return 0;
  unsigned long long i, n, ppid;
  int cpu, off = 0;
  if (sscanf(env, "%llu %llu %d %llu %n", &i, &n, &cpu, &ppid, &off) != 4 || !off || i >= n ||
      fcntl(REPORT_FD, F_GETFD) < 0) {
    fprintf(stderr, "vlmload: %s is for the workers of --workers only; unset it\n", VL_WORKERS_ENV);
    return 2;
  }
  char *dir = vl_xstrdup(env + off);
  const char *model = getenv(MODEL_ENV);
  if (model) {
    free(c->model);
    c->model = vl_xstrdup(model);
  }
  unsetenv(VL_WORKERS_ENV);
  unsetenv(MODEL_ENV);
  /* A parent gone (killed outright) stops its workers rather than leave load running. */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if ((unsigned long long)getppid() != ppid) {
    free(dir);
    return 2;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    fprintf(stderr, "vlmload: worker %llu: cannot pin to core %d: %s\n", i, cpu, strerror(errno));
  /* Reports block (a slow parent slows the worker, never loses a line); commands the monitor
   * runs do not inherit the pipe. */
  fcntl(REPORT_FD, F_SETFL, fcntl(REPORT_FD, F_GETFL) & ~O_NONBLOCK);
  fcntl(REPORT_FD, F_SETFD, FD_CLOEXEC);
  vl_workerpipe_open(REPORT_FD);

  c->workers = 1;
  c->shard_i = i;
  c->shard_n = n;
  c->quiet = 1;
  c->progress = 0;
  c->health_check = 0; /* the parent waited */
  set_path(&c->histograms, dir, i, "histograms.json");
  free(c->timeline);
  c->timeline = NULL;
  if (c->log_requests)
    set_path(&c->log_requests, dir, i, "requests.jsonl");
  /* The monitor is worker 0's: its summary gives the merged one its memory. */
  free(c->output);
  c->output = NULL;
  if (i == 0 && !vl_monitor_spec_empty(&c->monitor)) {
    set_path(&c->output, dir, i, "json");
  } else if (i > 0) {
    vl_monitor_spec_free(&c->monitor);
    vl_monitor_spec_init(&c->monitor);
    free(c->samples);
    c->samples = NULL;
  }
  free(dir);
  return 0;
}

/* --dry-run. */

void vl_workers_describe(const vl_config_t *c, FILE *out) {
  if (c->workers <= 1)
    return;
  int cores[CPU_SETSIZE];
  int n = vl_cpu_list(cores, CPU_SETSIZE);
  fprintf(out,
          "workers       %d processes, worker i sends every %d-th request (--shard i/%d), on "
          "cores ",
          c->workers, c->workers, c->workers);
  for (int i = 0; i < c->workers; i++)
    fprintf(out, "%s%d", i ? "," : "", cores[i % n]);
  fputc('\n', out);
}

/* The parent. */

typedef struct worker_s {
  uv_process_t proc;
  uv_pipe_t pipe;
  struct parent_s *par;
  int index, cpu;
  int running;    /* the process has not exited */
  int reading;    /* the pipe is open */
  int64_t status; /* exit status; 1 when killed by a signal */
  char *line;     /* a report not yet ended by its newline */
  size_t len, cap;
  int reported; /* a report has come */
  vl_progress_t last;
  char phase[32];
  vl_hist_t e2e, ttft;
  vl_workerpipe_metrics_t m; /* --metrics-listen: its latest figures */
} worker_t;

typedef struct parent_s {
  uv_loop_t loop;
  uv_timer_t timer;
  uv_signal_t sig_int, sig_term;
  const vl_config_t *cfg;
  worker_t *w;
  int n;
  int open; /* processes and pipes not yet closed */
  int signals;
  int stopping; /* a worker failed: the others were told to stop */
  int progress, drawn;
  uint64_t t0_ns;
  uint64_t last_sent, last_ns; /* for the line's rate */
  vl_hist_t e2e, ttft;         /* every worker's, merged for the line */
  vl_metrics_t *metrics;       /* --metrics-listen: not owned; NULL without */
  vl_workerpipe_metrics_t sum; /* every worker's figures, merged for the endpoint */
} parent_t;

static void close_all(parent_t *p);

static void take_report(worker_t *w, char *text) {
  if (text[0] == 'M') {
    vl_workerpipe_parse_metrics(text, &w->m);
    return;
  }
  if (vl_workerpipe_parse(text, &w->last, w->phase, sizeof(w->phase), &w->e2e, &w->ttft) == 0)
    w->reported = 1;
}

/* The one line: the workers' counts added, their latency histograms merged, worker 0's phase
 * and memory readings (its monitor is the run's). */
static void draw(parent_t *p) {
  vl_progress_t sum = {.phase = p->w[0].phase, .rss_mb = -1, .gpu_mb = -1};
  vl_hist_reset(&p->e2e);
  vl_hist_reset(&p->ttft);
  int any = 0;
  for (int i = 0; i < p->n; i++) {
    const worker_t *w = &p->w[i];
    if (!w->reported)
      continue;
    any = 1;
    sum.sent += w->last.sent;
    sum.ok += w->last.ok;
    sum.failed += w->last.failed;
    sum.dropped += w->last.dropped;
    sum.in_flight += w->last.in_flight;
    sum.rate += w->last.rate;
    vl_hist_merge(&p->e2e, &w->e2e);
    vl_hist_merge(&p->ttft, &w->ttft);
  }
  if (!any)
    return;
  if (p->w[0].reported) {
    sum.rss_mb = p->w[0].last.rss_mb;
    sum.gpu_mb = p->w[0].last.gpu_mb;
  }
  if (!sum.phase[0])
    sum.phase = "measure";
  sum.elapsed_s = (double)(uv_hrtime() - p->t0_ns) / 1e9;
  sum.p50_ms = p->e2e.total ? (double)vl_hist_percentile(&p->e2e, 50) / 1e3 : -1;
  sum.p99_ms = p->e2e.total ? (double)vl_hist_percentile(&p->e2e, 99) / 1e3 : -1;
  sum.ttft_p50_ms = p->ttft.total ? (double)vl_hist_percentile(&p->ttft, 50) / 1e3 : -1;
  char line[512];
  vl_progress_format(line, sizeof(line), vl_progress_columns(STDERR_FILENO), &sum);
  fprintf(stderr, "\r\033[K%s", line);
  fflush(stderr);
  p->drawn = 1;
}

/* --metrics-listen: the workers' figures merged, worker 0's phase and memory series (its monitor
 * is the run's); "done" only once the merged outputs are written (done set). */
static void publish(parent_t *p, int done) {
  if (!p->metrics)
    return;
  vl_workerpipe_metrics_reset(&p->sum);
  for (int i = 0; i < p->n; i++)
    vl_workerpipe_metrics_add(&p->sum, &p->w[i].m);
  p->sum.f.elapsed_s = (double)(uv_hrtime() - p->t0_ns) / 1e9;
  if (done)
    p->sum.f.phase = "done";
  else if (!p->sum.phase[0] || strcmp(p->sum.phase, "done") == 0)
    p->sum.f.phase = "stopping";
  if (done)
    p->sum.f.in_flight = 0;
  vl_metrics_publish(p->metrics, &p->sum.f);
}

static void on_timer(uv_timer_t *h) {
  parent_t *p = h->data;
  if (p->progress)
    draw(p);
  publish(p, 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  worker_t *w = h->data;
  (void)suggested;
  if (w->cap - w->len < 65536) {
    w->cap = w->cap ? w->cap * 2 : 131072;
    w->line = vl_xrealloc(w->line, w->cap);
  }
  *buf = uv_buf_init(w->line + w->len, (unsigned)(w->cap - w->len));
}

static void on_closed(uv_handle_t *h) {
  worker_t *w = h->data;
  if (--w->par->open == 0)
    close_all(w->par);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  worker_t *w = s->data;
  (void)buf;
  if (nread < 0) {
    uv_read_stop(s);
    w->reading = 0;
    uv_close((uv_handle_t *)s, on_closed);
    return;
  }
  w->len += (size_t)nread;
  char *start = w->line, *nl;
  while ((nl = memchr(start, '\n', w->len - (size_t)(start - w->line)))) {
    *nl = '\0';
    take_report(w, start);
    start = nl + 1;
  }
  w->len -= (size_t)(start - w->line);
  memmove(w->line, start, w->len);
}

static int rank(int64_t status);

static void on_exit_cb(uv_process_t *proc, int64_t status, int term_signal) {
  worker_t *w = proc->data;
  parent_t *p = w->par;
  w->running = 0;
  w->status = term_signal ? 1 : status;
  if (term_signal)
    fprintf(stderr, "\nvlmload: worker %d was killed by signal %d\n", w->index, term_signal);
  /* A worker that failed makes the run a failure: the others stop now, as after Ctrl-C, rather
   * than run on for nothing. */
  int others = 0;
  for (int i = 0; i < p->n; i++)
    others += p->w[i].running;
  if (rank(w->status) >= 3 && others && !p->stopping) {
    p->stopping = 1;
    fprintf(stderr, "\nvlmload: worker %d failed (exit status %lld); stopping the others\n",
            w->index, (long long)w->status);
    for (int i = 0; i < p->n; i++)
      if (p->w[i].running)
        uv_process_kill(&p->w[i].proc, SIGTERM);
  }
  uv_close((uv_handle_t *)proc, on_closed);
}

static void on_signal(uv_signal_t *h, int signum) {
  parent_t *p = h->data;
  int in_flight = 0;
  for (int i = 0; i < p->n; i++)
    in_flight += p->w[i].last.in_flight;
  if (++p->signals == 1 && p->cfg->progress)
    fprintf(stderr, "\nvlmload: stopping: waiting up to %.1fs for %d in flight (again to quit)\n",
            (double)p->cfg->grace_us / 1e6, in_flight);
  for (int i = 0; i < p->n; i++)
    if (p->w[i].running)
      uv_process_kill(&p->w[i].proc, signum);
}

static void close_all(parent_t *p) {
  uv_timer_stop(&p->timer);
  uv_signal_stop(&p->sig_int);
  uv_signal_stop(&p->sig_term);
  if (!uv_is_closing((uv_handle_t *)&p->timer)) {
    uv_close((uv_handle_t *)&p->timer, NULL);
    uv_close((uv_handle_t *)&p->sig_int, NULL);
    uv_close((uv_handle_t *)&p->sig_term, NULL);
  }
}

/* Starts worker i on its core. Returns 0 or a libuv error. */
static int spawn(parent_t *p, worker_t *w, const char *exe, char **argv, const char *dir,
                 const char *model) {
  char env[4096 + 128];
  snprintf(env, sizeof(env), "%d %d %d %llu %s", w->index, p->n, w->cpu,
           (unsigned long long)getpid(), dir);
  setenv(VL_WORKERS_ENV, env, 1);
  if (model)
    setenv(MODEL_ENV, model, 1);
  uv_pipe_init(&p->loop, &w->pipe, 0);
  w->pipe.data = w->proc.data = w;
  vl_child_opts_t o = {.file = exe,
                       .args = argv,
                       .in_fd = -1,
                       .out_fd = -1,
                       .err_fd = -1,
                       .report = &w->pipe,
                       .exit_cb = on_exit_cb};
  int rc = vl_child_spawn(&p->loop, &w->proc, &o);
  unsetenv(VL_WORKERS_ENV);
  unsetenv(MODEL_ENV);
  p->open++; /* the pipe */
  if (rc != 0) {
    uv_close((uv_handle_t *)&w->pipe, on_closed);
    return rc;
  }
  p->open++; /* the process */
  w->running = 1;
  w->reading = 1;
  uv_read_start((uv_stream_t *)&w->pipe, on_alloc, on_read);
  return 0;
}

int vl_workers_check_outputs(const vl_config_t *c, char *err, size_t errlen) {
  const struct {
    const char *flag, *path;
  } outs[] = {{"output", c->output},
              {"timeline", c->timeline},
              {"histograms", c->histograms},
              {"log-requests", c->log_requests}};
  for (size_t i = 0; i < VL_ARRAY_SIZE(outs); i++) {
    char why[384];
    if (outs[i].path && vl_outfile_check(outs[i].path, why, sizeof(why)) != 0) {
      snprintf(err, errlen, "--%s '%s': %s", outs[i].flag, outs[i].path, why);
      return VL_EIO;
    }
  }
  return 0;
}

/* The private directory: beside --output, else in $TMPDIR. Returns it (owned) or NULL. */
static char *make_dir(const vl_config_t *c) {
  char base[4096];
  const char *slash = c->output ? strrchr(c->output, '/') : NULL;
  if (slash)
    snprintf(base, sizeof(base), "%.*s", (int)(slash - c->output), c->output);
  else if (c->output)
    snprintf(base, sizeof(base), ".");
  else
    snprintf(base, sizeof(base), "%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!base[0])
    snprintf(base, sizeof(base), "/");
  size_t len = strlen(base) + 32;
  char *dir = vl_xmalloc(len);
  snprintf(dir, len, "%s/vlmload-workers-XXXXXX", base);
  if (!mkdtemp(dir)) {
    fprintf(stderr,
            "vlmload: --workers: cannot make a directory in '%s' for the workers' "
            "records: %s\n",
            base, strerror(errno));
    free(dir);
    return NULL;
  }
  return dir;
}

/* --log-requests: the workers' logs one after the other. Returns 0 or 1 (said). */
static int join_logs(const vl_config_t *c, const char *dir, int n) {
  FILE *out = fopen(c->log_requests, "w");
  int bad = !out;
  char path[4200], chunk[1 << 16];
  for (int i = 0; out && i < n; i++) {
    snprintf(path, sizeof(path), "%s/worker-%d.requests.jsonl", dir, i);
    FILE *in = fopen(path, "rb");
    size_t got;
    while (in && (got = fread(chunk, 1, sizeof(chunk), in)) > 0)
      if (fwrite(chunk, 1, got, out) != got)
        bad = 1;
    if (in)
      fclose(in);
  }
  if (out && fclose(out) != 0)
    bad = 1;
  if (bad)
    fprintf(stderr, "vlmload: --log-requests '%s': %s\n", c->log_requests, strerror(errno));
  return bad;
}

static void remove_dir(const char *dir, int n) {
  static const char *const what[] = {"histograms.json", "requests.jsonl", "json"};
  char path[4200];
  for (int i = 0; i < n; i++)
    for (size_t k = 0; k < VL_ARRAY_SIZE(what); k++) {
      snprintf(path, sizeof(path), "%s/worker-%d.%s", dir, i, what[k]);
      unlink(path);
    }
  rmdir(dir);
}

/* Order of exit statuses, the worst highest. */
static int rank(int64_t status) {
  switch (status) {
  case 0:
    return 0;
  case 3:
    return 1;
  case 130:
    return 2;
  case 1:
    return 3;
  default:
    return 4;
  }
}

static int64_t worse(int64_t a, int64_t b) {
  return rank(b) > rank(a) ? b : a;
}

/* Merges the workers' records into the run's outputs. Returns the merge's status. */
static int64_t merge(const vl_config_t *c, const char *dir, int n, int interrupted) {
  char **inputs = vl_xcalloc((size_t)n, sizeof(char *));
  for (int i = 0; i < n; i++) {
    inputs[i] = NULL;
    set_path(&inputs[i], dir, (unsigned long long)i, "histograms.json");
  }
  /* Worker 0's record says why the run stopped; its summary holds the memory when monitored. */
  cJSON *first = vl_json_load_file(inputs[0]), *extra = cJSON_CreateObject();
  const cJSON *why = cJSON_GetObjectItemCaseSensitive(first, "stop_reason");
  char *summary0 = NULL;
  set_path(&summary0, dir, 0, "json");
  cJSON *sum0 = vl_monitor_spec_empty(&c->monitor) ? NULL : vl_json_load_file(summary0);
  const char *keys[] = {"memory", "processes", "scrapes", "commands"};
  for (size_t k = 0; k < VL_ARRAY_SIZE(keys); k++) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(sum0, keys[k]);
    if (it)
      cJSON_AddItemToObject(extra, keys[k], cJSON_Duplicate(it, 1));
  }
  cJSON *workers = cJSON_AddObjectToObject(extra, "workers");
  cJSON_AddNumberToObject(workers, "count", n);
  int cores[CPU_SETSIZE], nc = vl_cpu_list(cores, CPU_SETSIZE);
  cJSON *list = cJSON_AddArrayToObject(workers, "cores");
  for (int i = 0; i < n; i++)
    cJSON_AddItemToArray(list, cJSON_CreateNumber(cores[i % nc]));
  vl_merge_opts_t o = {.summary = c->output,
                       .timeline = c->timeline,
                       .histograms = c->histograms,
                       .cfg = c,
                       .stop_reason = interrupted           ? "signal"
                                      : cJSON_IsString(why) ? why->valuestring
                                                            : NULL,
                       .interrupted = interrupted,
                       .text = c->quiet ? NULL : stdout,
                       .extra = extra};
  int64_t status = vl_merge_files((const char *const *)inputs, n, &o) ? 1 : 0;
  if (status == 0 && o.crossed)
    status = 3;
  if (c->log_requests && join_logs(c, dir, n))
    status = 1;
  cJSON_Delete(first);
  cJSON_Delete(sum0);
  cJSON_Delete(extra);
  free(summary0);
  for (int i = 0; i < n; i++)
    free(inputs[i]);
  free(inputs);
  return status;
}

int vl_workers_run(const vl_config_t *c, const char *model, char **argv, vl_metrics_t *metrics) {
  int n = c->workers;
  char exe[4096];
  if (vl_child_self(exe, sizeof(exe)) != 0) {
    fprintf(stderr, "vlmload: --workers: cannot find this program to start its workers\n");
    return 1;
  }
  char *dir = make_dir(c);
  if (!dir)
    return 1;
  int cores[CPU_SETSIZE], nc = vl_cpu_list(cores, CPU_SETSIZE);
  parent_t *p = vl_xcalloc(1, sizeof(*p));
  p->cfg = c;
  p->n = n;
  p->w = vl_xcalloc((size_t)n, sizeof(worker_t));
  p->progress = !c->quiet && (c->progress < 0 ? isatty(STDERR_FILENO) : c->progress);
  p->metrics = metrics;
  vl_workerpipe_metrics_init(&p->sum);
  uv_loop_init(&p->loop);
  uv_timer_init(&p->loop, &p->timer);
  uv_signal_init(&p->loop, &p->sig_int);
  uv_signal_init(&p->loop, &p->sig_term);
  p->timer.data = p->sig_int.data = p->sig_term.data = p;
  vl_hist_init(&p->e2e, VL_STATS_HIGHEST_US, VL_STATS_SIGDIGITS);
  vl_hist_init(&p->ttft, VL_STATS_HIGHEST_US, VL_STATS_SIGDIGITS);
  /* Signals are caught before the first worker starts, so none is lost between the two. */
  uv_signal_start(&p->sig_int, on_signal, SIGINT);
  uv_signal_start(&p->sig_term, on_signal, SIGTERM);
  p->t0_ns = uv_hrtime();
  int64_t status = 0;
  for (int i = 0; i < n; i++) {
    worker_t *w = &p->w[i];
    w->par = p;
    w->index = i;
    w->cpu = cores[i % nc];
    w->last.rss_mb = w->last.gpu_mb = -1;
    vl_hist_init(&w->e2e, VL_STATS_HIGHEST_US, VL_STATS_SIGDIGITS);
    vl_hist_init(&w->ttft, VL_STATS_HIGHEST_US, VL_STATS_SIGDIGITS);
    vl_workerpipe_metrics_init(&w->m);
    int rc = spawn(p, w, exe, argv, dir, model);
    if (rc != 0) {
      fprintf(stderr, "vlmload: --workers: cannot start worker %d: %s\n", i, uv_strerror(rc));
      status = 1;
      /* Those started stop as after Ctrl-C; their records are not merged. */
      for (int k = 0; k < i; k++)
        uv_process_kill(&p->w[k].proc, SIGTERM);
      n = i;
      break;
    }
  }
  if (p->progress || p->metrics)
    uv_timer_start(&p->timer, on_timer, c->sample_every_us / 1000, c->sample_every_us / 1000);
  if (p->open == 0)
    close_all(p);
  uv_run(&p->loop, UV_RUN_DEFAULT);
  if (p->drawn) {
    draw(p);
    fputc('\n', stderr);
  }
  if (uv_loop_close(&p->loop) != 0)
    fprintf(stderr, "vlmload: internal error: event loop closed with handles open\n");
  for (int i = 0; i < p->n; i++)
    status = worse(status, p->w[i].status);
  if (n == p->n) {
    publish(p, 0); /* the workers' last figures, while the merge writes the outputs */
    status = worse(status, merge(c, dir, n, p->signals > 0));
  }
  publish(p, 1);
  if (status == 0 || status == 3 || status == 130)
    remove_dir(dir, p->n);
  else
    fprintf(stderr, "vlmload: --workers: the workers' records are kept in %s\n", dir);
  for (int i = 0; i < p->n; i++) {
    vl_hist_free(&p->w[i].e2e);
    vl_hist_free(&p->w[i].ttft);
    vl_workerpipe_metrics_free(&p->w[i].m);
    free(p->w[i].line);
  }
  vl_hist_free(&p->e2e);
  vl_hist_free(&p->ttft);
  vl_workerpipe_metrics_free(&p->sum);
  free(p->w);
  free(p);
  free(dir);
  return (int)status;
}
