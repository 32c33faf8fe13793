#include "vlmload/monitor.h"
#include "vlmload/common.h"
#include "vlmload/nvml.h"
#include "vlmload/procmem.h"
#include "vlmload/prom.h"
#include "vlmload/transport.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A scrape answer larger than this fails: a /metrics page is tens of kilobytes. */
#define PROM_MAX_BYTES (8u << 20)
#define MB             1048576.0

/* A series and what the monitor needs to refresh it. */
typedef struct vl_monitor_ser_s {
  vl_monitor_series_t pub;
  char *name;
  char *metric; /* prom: sample name */
  char *canon;  /* prom: canonical label set */
  int seen;     /* prom: found in the scrape being parsed */
} ser_t;

typedef struct {
  double v;
  int valid;
  int64_t t;
} val_t;

/* The proc and gpu reads, on a thread of their own. The loop thread hands a round over by
 * setting `want`; the thread reads into its scratch, copies the results to `pub` under the mutex,
 * sets `done` and wakes the loop through `async`. The trackers, NVML and the scratch arrays belong
 * to the thread from init to close. */
typedef struct vl_monitor_worker_s {
  vl_monitor_t *mon;
  uv_thread_t thread;
  uv_mutex_t mu;
  uv_cond_t cv;
  uv_async_t async;
  int sync_init, thread_started, async_open;
  int want, quit, done; /* under mu */
  int busy;             /* loop thread: a round is handed over and not yet published */
  vl_procmem_track_t *tracks;
  int n_tracks;
  int pss;
  int gpu;
  vl_nvml_t nvml;
  vl_nvml_proc_t *gprocs;
  unsigned gprocs_cap;
  size_t n_vals; /* the first n_vals series are the thread's */
  val_t *scratch, *pub;
  vl_monitor_proc_info_t *info_scratch, *info_pub, *info;
} worker_t;

typedef struct vl_monitor_scrape_s {
  vl_monitor_t *mon;
  const vl_prom_target_t *tgt;
  char *prefix;       /* "prom." or "prom.LABEL." */
  vl_transfer_t xfer; /* the scrape's easy handle; done is on_scrape_done */
  struct curl_slist *headers;
  char *buf;
  size_t len, cap;
  int too_big;
  int busy;
  int fixed;
  size_t *ser; /* series indices */
  size_t n_ser;
  uint64_t ok, failed, skipped;
  char last_error[160];
} scrape_t;

typedef struct vl_monitor_run_s {
  vl_monitor_t *mon;
  const char *label, *cmd;
  size_t ser;
  uv_process_t proc;
  uv_pipe_t out;
  uv_timer_t timer;
  int running; /* from the spawn until both handles are closed */
  int handles; /* of proc and out, still to close */
  int exited, eof, finished, timed_out;
  int64_t exit_status;
  int term_signal;
  char buf[4096];
  size_t len;
  char sink[4096]; /* output past buf, read and dropped so the command never blocks */
  uint64_t ok, failed, skipped, timeouts;
  char last_error[160];
} run_t;

/* Spec. */

void vl_monitor_spec_init(vl_monitor_spec_t *spec) {
  memset(spec, 0, sizeof(*spec));
  spec->prom_timeout_ms = 2000;
  spec->cmd_timeout_ms = 10000;
  spec->rescan_ms = 1000;
}

static int label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

/* Length of a leading "LABEL=" (without the '='), or 0. */
static size_t label_len(const char *arg) {
  size_t i = 0;
  while (label_char(arg[i]))
    i++;
  return i > 0 && arg[i] == '=' ? i : 0;
}

static int proc_label_used(const vl_monitor_spec_t *spec, const char *l) {
  for (int i = 0; i < spec->n_pids; i++) {
    if (strcmp(spec->pids[i].label, l) == 0)
      return 1;
  }
  for (int i = 0; i < spec->n_matches; i++) {
    if (strcmp(spec->matches[i].label, l) == 0)
      return 1;
  }
  return 0;
}

static int cmd_label_used(const vl_monitor_spec_t *spec, const char *l) {
  for (int i = 0; i < spec->n_cmds; i++) {
    if (strcmp(spec->cmds[i].label, l) == 0)
      return 1;
  }
  return 0;
}

static int prom_label_used(const vl_monitor_spec_t *spec, const char *l) {
  for (int i = 0; i < spec->n_proms; i++) {
    if (spec->proms[i].label && strcmp(spec->proms[i].label, l) == 0)
      return 1;
  }
  return 0;
}

/* A label made up by the monitor: base, or base_2, base_3... when taken. */
static char *fresh_label(const vl_monitor_spec_t *spec, const char *base,
                         int (*used)(const vl_monitor_spec_t *, const char *)) {
  char *l = vl_xstrdup(base);
  for (int k = 2; used(spec, l); k++) {
    free(l);
    l = vl_xfmt("%s_%d", base, k);
  }
  return l;
}

int vl_monitor_spec_add_pid(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen) {
  size_t ll = label_len(arg);
  const char *p = arg + (ll ? ll + 1 : 0);
  long v = 0;
  const char *q = p;
  while (*q >= '0' && *q <= '9' && v <= INT_MAX)
    v = v * 10 + (*q++ - '0');
  if (q == p || *q != '\0' || v <= 0 || v > INT_MAX) {
    vl_set_err(err, errlen, "--monitor-pid %s: \"%s\" is not a process ID (want [LABEL=]PID)", arg,
               p);
    return VL_EINVAL;
  }
  char *label = ll ? vl_xstrndup(arg, ll) : vl_xfmt("%ld", v);
  if (proc_label_used(spec, label)) {
    vl_set_err(err, errlen, "--monitor-pid %s: label \"%s\" is already used by another process",
               arg, label);
    free(label);
    return VL_EINVAL;
  }
  spec->pids = vl_xrealloc(spec->pids, (size_t)(spec->n_pids + 1) * sizeof(*spec->pids));
  spec->pids[spec->n_pids++] = (vl_monitor_pid_t){label, (pid_t)v};
  return 0;
}

int vl_monitor_spec_add_match(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen) {
  size_t ll = label_len(arg);
  const char *re = arg + (ll ? ll + 1 : 0);
  if (*re == '\0') {
    vl_set_err(err, errlen, "--monitor-pid-match %s: empty regular expression", arg);
    return VL_EINVAL;
  }
  regex_t rx;
  int rc = regcomp(&rx, re, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char why[128];
    regerror(rc, &rx, why, sizeof(why));
    vl_set_err(err, errlen, "--monitor-pid-match %s: bad regular expression: %s", arg, why);
    return VL_EINVAL;
  }
  regfree(&rx);
  char *label;
  if (ll) {
    label = vl_xstrndup(arg, ll);
    if (proc_label_used(spec, label)) {
      vl_set_err(err, errlen,
                 "--monitor-pid-match %s: label \"%s\" is already used by another process", arg,
                 label);
      free(label);
      return VL_EINVAL;
    }
  } else {
    /* The expression's letters and digits: "sglang::scheduler" gives "sglang_scheduler". */
    char base[33];
    size_t n = 0;
    for (const char *s = re; *s && n < sizeof(base) - 1; s++) {
      char c = *s;
      int keep =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
      if (keep)
        base[n++] = c;
      else if (n > 0 && base[n - 1] != '_')
        base[n++] = '_';
    }
    while (n > 0 && base[n - 1] == '_')
      n--;
    base[n] = '\0';
    if (n == 0)
      snprintf(base, sizeof(base), "match%d", spec->n_matches + 1);
    label = fresh_label(spec, base, proc_label_used);
  }
  spec->matches =
      vl_xrealloc(spec->matches, (size_t)(spec->n_matches + 1) * sizeof(*spec->matches));
  spec->matches[spec->n_matches++] = (vl_monitor_match_t){label, vl_xstrdup(re)};
  return 0;
}

int vl_monitor_spec_add_prom(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen) {
  size_t ll = label_len(arg);
  if (ll && strncasecmp(arg + ll + 1, "http://", 7) != 0 &&
      strncasecmp(arg + ll + 1, "https://", 8) != 0)
    ll = 0;
  char why[200];
  vl_prom_target_t *t = vl_xcalloc(1, sizeof(*t));
  if (vl_prom_select_parse(arg + (ll ? ll + 1 : 0), t, why, sizeof(why)) != 0) {
    vl_set_err(err, errlen, "--monitor-prom %s: %s", arg, why);
    free(t);
    return VL_EINVAL;
  }
  char *label = ll ? vl_xstrndup(arg, ll) : NULL;
  if (label && prom_label_used(spec, label)) {
    vl_set_err(err, errlen, "--monitor-prom %s: label \"%s\" is already used by another target",
               arg, label);
    free(label);
    vl_prom_target_free(t);
    free(t);
    return VL_EINVAL;
  }
  spec->proms = vl_xrealloc(spec->proms, (size_t)(spec->n_proms + 1) * sizeof(*spec->proms));
  spec->proms[spec->n_proms++] = (vl_monitor_prom_t){label, t};
  return 0;
}

int vl_monitor_spec_add_cmd(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen) {
  size_t ll = label_len(arg);
  const char *cmd = arg + (ll ? ll + 1 : 0);
  const char *s = cmd;
  while (*s == ' ' || *s == '\t')
    s++;
  if (*s == '\0') {
    vl_set_err(err, errlen, "--monitor-cmd %s: empty command", arg);
    return VL_EINVAL;
  }
  char *label;
  if (ll) {
    label = vl_xstrndup(arg, ll);
    if (cmd_label_used(spec, label)) {
      vl_set_err(err, errlen, "--monitor-cmd %s: label \"%s\" is already used by another command",
                 arg, label);
      free(label);
      return VL_EINVAL;
    }
  } else {
    char base[16];
    snprintf(base, sizeof(base), "%d", spec->n_cmds + 1);
    label = fresh_label(spec, base, cmd_label_used);
  }
  spec->cmds = vl_xrealloc(spec->cmds, (size_t)(spec->n_cmds + 1) * sizeof(*spec->cmds));
  spec->cmds[spec->n_cmds++] = (vl_monitor_cmd_t){label, vl_xstrdup(cmd)};
  return 0;
}

int vl_monitor_spec_empty(const vl_monitor_spec_t *spec) {
  return spec->n_pids == 0 && spec->n_matches == 0 && spec->n_proms == 0 && spec->n_cmds == 0 &&
         !spec->gpu;
}

void vl_monitor_spec_free(vl_monitor_spec_t *spec) {
  for (int i = 0; i < spec->n_pids; i++)
    free(spec->pids[i].label);
  for (int i = 0; i < spec->n_matches; i++) {
    free(spec->matches[i].label);
    free(spec->matches[i].regex);
  }
  for (int i = 0; i < spec->n_proms; i++) {
    free(spec->proms[i].label);
    vl_prom_target_free(spec->proms[i].target);
    free(spec->proms[i].target);
  }
  for (int i = 0; i < spec->n_cmds; i++) {
    free(spec->cmds[i].label);
    free(spec->cmds[i].cmd);
  }
  free(spec->pids);
  free(spec->matches);
  free(spec->proms);
  free(spec->cmds);
  uint64_t pt = spec->prom_timeout_ms, ct = spec->cmd_timeout_ms, rs = spec->rescan_ms;
  memset(spec, 0, sizeof(*spec));
  spec->prom_timeout_ms = pt;
  spec->cmd_timeout_ms = ct;
  spec->rescan_ms = rs;
}

/* Series. */

static int name_taken(const vl_monitor_t *mon, const char *name) {
  return vl_monitor_find(mon, name) != NULL;
}

/* Adds a series; takes name. */
static ser_t *add_series(vl_monitor_t *mon, char *name, const char *unit, vl_monitor_kind_t kind) {
  if (mon->n_series == mon->cap_series) {
    mon->cap_series = mon->cap_series ? mon->cap_series * 2 : 16;
    mon->series = vl_xrealloc(mon->series, mon->cap_series * sizeof(*mon->series));
  }
  ser_t *s = vl_xcalloc(1, sizeof(*s));
  s->name = name;
  s->pub.name = name;
  s->pub.unit = unit;
  s->pub.kind = kind;
  mon->series[mon->n_series++] = s;
  mon->generation++;
  return s;
}

const vl_monitor_series_t *vl_monitor_series(const vl_monitor_t *mon, size_t i) {
  return i < mon->n_series ? &mon->series[i]->pub : NULL;
}

const vl_monitor_series_t *vl_monitor_find(const vl_monitor_t *mon, const char *name) {
  for (size_t i = 0; i < mon->n_series; i++) {
    if (strcmp(mon->series[i]->name, name) == 0)
      return &mon->series[i]->pub;
  }
  return NULL;
}

static void set_value(ser_t *s, double v, int valid, int64_t t) {
  s->pub.value = valid ? v : 0;
  s->pub.valid = valid;
  s->pub.t_wall_ms = t;
}

static void part_done(vl_monitor_t *mon) {
  mon->pending--;
  if (mon->pending == 0 && !mon->closing && mon->done_cb)
    mon->done_cb(mon);
}

static void maybe_closed(vl_monitor_t *mon) {
  if (mon->closing && mon->to_close == 0 && mon->close_cb) {
    vl_monitor_close_cb cb = mon->close_cb;
    mon->close_cb = NULL;
    cb(mon);
  }
}

/* Worker: proc and gpu reads. */

static void worker_round(worker_t *w) {
  size_t k = 0;
  int64_t t = vl_wall_ms();
  for (int i = 0; i < w->n_tracks; i++) {
    vl_procmem_track_t *tr = &w->tracks[i];
    vl_procmem_t m;
    int ok = vl_procmem_track_sample(tr, &m) == 0;
    t = vl_wall_ms();
    w->scratch[k++] = (val_t){(double)m.rss_bytes / MB, ok, t};
    w->scratch[k++] = (val_t){(double)m.hwm_bytes / MB, ok, t};
    if (w->pss)
      w->scratch[k++] = (val_t){(double)m.pss_bytes / MB, ok && m.has_pss, t};
    vl_monitor_proc_info_t *in = &w->info_scratch[i];
    in->pid = tr->pid;
    in->present = tr->present;
    in->restarts = tr->restarts;
    in->matches = tr->matches;
    in->pss_denied = tr->pss_off;
  }
  if (!w->gpu)
    return;
  unsigned nd = vl_nvml_count(&w->nvml);
  for (unsigned d = 0; d < nd; d++) {
    uint64_t used = 0, total = 0;
    int ok = vl_nvml_memory(&w->nvml, d, &used, &total) == 0;
    w->scratch[k++] = (val_t){(double)used / MB, ok, vl_wall_ms()};
  }
  if (w->n_tracks == 0)
    return;
  size_t base = k;
  for (int i = 0; i < w->n_tracks; i++)
    w->scratch[base + (size_t)i] = (val_t){0, w->tracks[i].present, 0};
  for (unsigned d = 0; d < nd; d++) {
    unsigned n = 0;
    int rc = vl_nvml_processes(&w->nvml, d, w->gprocs, w->gprocs_cap, &n);
    if (rc == 0 && n > w->gprocs_cap) {
      vl_nvml_proc_t *g = realloc(w->gprocs, (size_t)n * sizeof(*g));
      if (g) {
        w->gprocs = g;
        w->gprocs_cap = n;
        rc = vl_nvml_processes(&w->nvml, d, w->gprocs, w->gprocs_cap, &n);
      }
      n = VL_MIN(n, w->gprocs_cap);
    }
    for (int i = 0; i < w->n_tracks; i++) {
      val_t *v = &w->scratch[base + (size_t)i];
      if (rc != 0) {
        v->valid = 0;
        continue;
      }
      for (unsigned j = 0; j < n; j++) {
        if ((pid_t)w->gprocs[j].pid != w->tracks[i].pid || !w->tracks[i].present)
          continue;
        if (w->gprocs[j].used_bytes == VL_NVML_UNKNOWN)
          v->valid = 0;
        else
          v->v += (double)w->gprocs[j].used_bytes / MB;
      }
    }
  }
  t = vl_wall_ms();
  for (int i = 0; i < w->n_tracks; i++)
    w->scratch[base + (size_t)i].t = t;
}

static void worker_main(void *arg) {
  worker_t *w = arg;
  uv_mutex_lock(&w->mu);
  for (;;) {
    while (!w->want && !w->quit)
      uv_cond_wait(&w->cv, &w->mu);
    if (w->quit)
      break;
    w->want = 0;
    uv_mutex_unlock(&w->mu);
    worker_round(w);
    uv_mutex_lock(&w->mu);
    memcpy(w->pub, w->scratch, w->n_vals * sizeof(*w->pub));
    memcpy(w->info_pub, w->info_scratch, (size_t)w->n_tracks * sizeof(*w->info_pub));
    w->done = 1;
    uv_async_send(&w->async);
  }
  uv_mutex_unlock(&w->mu);
}

static void on_async(uv_async_t *h) {
  worker_t *w = vl_container_of(h, worker_t, async);
  vl_monitor_t *mon = w->mon;
  uv_mutex_lock(&w->mu);
  int done = w->done;
  if (done) {
    for (size_t i = 0; i < w->n_vals; i++)
      set_value(mon->series[i], w->pub[i].v, w->pub[i].valid, w->pub[i].t);
    memcpy(w->info, w->info_pub, (size_t)w->n_tracks * sizeof(*w->info));
    w->done = 0;
  }
  uv_mutex_unlock(&w->mu);
  if (done && w->busy) {
    w->busy = 0;
    part_done(mon);
  }
}

static void worker_stop(worker_t *w) {
  if (!w->thread_started)
    return;
  uv_mutex_lock(&w->mu);
  w->quit = 1;
  uv_cond_signal(&w->cv);
  uv_mutex_unlock(&w->mu);
  uv_thread_join(&w->thread);
  w->thread_started = 0;
}

static void worker_free(worker_t *w) {
  if (!w)
    return;
  for (int i = 0; i < w->n_tracks; i++)
    vl_procmem_track_free(&w->tracks[i]);
  free(w->tracks);
  vl_nvml_close(&w->nvml);
  free(w->gprocs);
  free(w->scratch);
  free(w->pub);
  free(w->info_scratch);
  free(w->info_pub);
  free(w->info);
  if (w->sync_init) {
    uv_cond_destroy(&w->cv);
    uv_mutex_destroy(&w->mu);
  }
  free(w);
}

static int worker_init(vl_monitor_t *mon, char *err, size_t errlen) {
  const vl_monitor_spec_t *spec = mon->spec;
  worker_t *w = vl_xcalloc(1, sizeof(*w));
  mon->worker = w;
  w->mon = mon;
  w->pss = spec->pss;
  unsigned flags = spec->pss ? VL_PROCMEM_PSS : 0;
  int n = spec->n_pids + spec->n_matches;
  w->tracks = vl_xcalloc((size_t)n, sizeof(*w->tracks));
  w->info = vl_xcalloc((size_t)n, sizeof(*w->info));
  char why[160];
  for (int i = 0; i < spec->n_pids; i++) {
    const vl_monitor_pid_t *p = &spec->pids[i];
    if (vl_procmem_track_pid(&w->tracks[i], p->pid, flags, why, sizeof(why)) != 0) {
      vl_set_err(err, errlen, "--monitor-pid %s=%ld: %s", p->label, (long)p->pid, why);
      return VL_ENOENT;
    }
    w->n_tracks++;
    w->info[i] = (vl_monitor_proc_info_t){
        .label = p->label, .fixed = 1, .pid = p->pid, .present = 1, .matches = 1};
  }
  for (int i = 0; i < spec->n_matches; i++) {
    const vl_monitor_match_t *m = &spec->matches[i];
    vl_procmem_track_t *t = &w->tracks[spec->n_pids + i];
    if (vl_procmem_track_match(t, m->regex, flags, why, sizeof(why)) != 0) {
      vl_set_err(err, errlen, "--monitor-pid-match %s: %s", m->regex, why);
      return VL_EINVAL;
    }
    w->n_tracks++;
    t->rescan_ns = spec->rescan_ms * 1000000u;
    w->info[spec->n_pids + i] = (vl_monitor_proc_info_t){.label = m->label};
  }
  if (spec->gpu) {
    int rc = vl_nvml_open(&w->nvml, why, sizeof(why));
    if (rc) {
      vl_set_err(err, errlen, "--monitor-gpu: %s", why);
      return rc;
    }
    w->gpu = 1;
    w->gprocs_cap = 64;
    w->gprocs = vl_xcalloc(w->gprocs_cap, sizeof(*w->gprocs));
  }
  for (int i = 0; i < n; i++) {
    const char *l = w->info[i].label;
    add_series(mon, vl_xfmt("rss_mb.%s", l), "MB", VL_MONITOR_PROC);
    add_series(mon, vl_xfmt("hwm_mb.%s", l), "MB", VL_MONITOR_PROC);
    if (w->pss)
      add_series(mon, vl_xfmt("pss_mb.%s", l), "MB", VL_MONITOR_PROC);
  }
  if (w->gpu) {
    for (unsigned d = 0; d < vl_nvml_count(&w->nvml); d++)
      add_series(mon, vl_xfmt("gpu%u_used_mb", d), "MB", VL_MONITOR_GPU);
    for (int i = 0; i < n; i++)
      add_series(mon, vl_xfmt("gpu_mb.%s", w->info[i].label), "MB", VL_MONITOR_GPU);
  }
  w->n_vals = mon->n_series;
  w->scratch = vl_xcalloc(w->n_vals, sizeof(*w->scratch));
  w->pub = vl_xcalloc(w->n_vals, sizeof(*w->pub));
  w->info_scratch = vl_xcalloc((size_t)n, sizeof(*w->info_scratch));
  w->info_pub = vl_xcalloc((size_t)n, sizeof(*w->info_pub));
  memcpy(w->info_scratch, w->info, (size_t)n * sizeof(*w->info));
  memcpy(w->info_pub, w->info, (size_t)n * sizeof(*w->info));
  return 0;
}

/* Starts the thread, then the async handle it wakes the loop with: a failure of either leaves no
 * handle to close. */
static int worker_start(worker_t *w, char *err, size_t errlen) {
  if (uv_mutex_init(&w->mu) != 0)
    goto fail;
  if (uv_cond_init(&w->cv) != 0) {
    uv_mutex_destroy(&w->mu);
    goto fail;
  }
  w->sync_init = 1;
  if (uv_thread_create(&w->thread, worker_main, w) != 0)
    goto fail;
  w->thread_started = 1;
  if (uv_async_init(w->mon->loop, &w->async, on_async) != 0) {
    worker_stop(w);
    goto fail;
  }
  w->async_open = 1;
  return 0;

fail:
  vl_set_err(err, errlen, "cannot start the monitor's thread");
  return VL_EUV;
}

/* Prom scrapes. */

static size_t on_scrape_write(char *p, size_t size, size_t n, void *ud) {
  scrape_t *s = ud;
  size_t len = size * n;
  if (len > PROM_MAX_BYTES - s->len) {
    s->too_big = 1;
    return 0;
  }
  if (s->len + len + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 65536;
    while (cap < s->len + len + 1)
      cap *= 2;
    char *b = realloc(s->buf, cap);
    if (!b)
      return 0;
    s->buf = b;
    s->cap = cap;
  }
  memcpy(s->buf + s->len, p, len);
  s->len += len;
  return len;
}

static int part_eq(CURLU *a, CURLU *b, CURLUPart what) {
  char *x = NULL, *y = NULL;
  unsigned fl = what == CURLUPART_PORT ? CURLU_DEFAULT_PORT : 0;
  curl_url_get(a, what, &x, fl);
  curl_url_get(b, what, &y, fl);
  int eq = x && y && strcasecmp(x, y) == 0;
  curl_free(x);
  curl_free(y);
  return eq;
}

/* True when both URLs have the same scheme, host and port. */
static int same_origin(const char *a, const char *b) {
  CURLU *ua = curl_url(), *ub = curl_url();
  int same = 0;
  if (ua && ub && curl_url_set(ua, CURLUPART_URL, a, 0) == CURLUE_OK &&
      curl_url_set(ub, CURLUPART_URL, b, 0) == CURLUE_OK)
    same = part_eq(ua, ub, CURLUPART_SCHEME) && part_eq(ua, ub, CURLUPART_HOST) &&
           part_eq(ua, ub, CURLUPART_PORT);
  curl_url_cleanup(ua);
  curl_url_cleanup(ub);
  return same;
}

static void on_scrape_done(vl_transfer_t *xfer, CURLcode result);

static int scrape_init(vl_monitor_t *mon, scrape_t *s, int i, char *err, size_t errlen) {
  const vl_monitor_spec_t *spec = mon->spec;
  const vl_monitor_prom_t *p = &spec->proms[i];
  s->mon = mon;
  s->tgt = p->target;
  if (p->label)
    s->prefix = vl_xfmt("prom.%s.", p->label);
  else if (spec->n_proms > 1)
    s->prefix = vl_xfmt("prom.%d.", i + 1);
  else
    s->prefix = vl_xstrdup("prom.");
  s->headers = curl_slist_append(NULL, "Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1");
  if (s->headers && spec->server_url && same_origin(spec->server_url, s->tgt->url))
    s->headers = vl_transport_headers(s->headers, spec->api_key, spec->headers, spec->n_headers);
  s->xfer.easy = curl_easy_init();
  s->xfer.done = on_scrape_done;
  if (!s->xfer.easy || !s->headers ||
      vl_transport_policy(s->xfer.easy, spec->insecure, spec->cacert) != 0) {
    vl_set_err(err, errlen, "--monitor-prom %s: cannot set up an HTTP handle", s->tgt->url);
    return VL_ENOMEM;
  }
  CURL *e = s->xfer.easy;
  curl_easy_setopt(e, CURLOPT_URL, s->tgt->url);
  curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->headers);
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)spec->prom_timeout_ms);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_scrape_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
  if (vl_transport_prepare(mon->tr, &s->xfer) != 0) {
    vl_set_err(err, errlen, "--monitor-prom %s: cannot set up an HTTP handle", s->tgt->url);
    return VL_ECURL;
  }
  return 0;
}

static void scrape_invalidate(scrape_t *s, int64_t t) {
  for (size_t i = 0; i < s->n_ser; i++)
    set_value(s->mon->series[s->ser[i]], 0, 0, t);
}

static void scrape_failed(scrape_t *s, int64_t t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->last_error, sizeof(s->last_error), fmt, ap);
  va_end(ap);
  s->failed++;
  scrape_invalidate(s, t);
}

/* A sample selected at the first scrape. */
typedef struct {
  char *metric, *canon, *pairs;
  double value;
} found_t;

typedef struct {
  scrape_t *s;
  found_t *v;
  size_t n, cap;
  int64_t t;
} collect_t;

/* "k=v;k=v" sorted by label name, with characters that a CSV header or a shell would trip on
 * replaced by '_'. */
static char *pairs_text(const vl_prom_sample_t *smp) {
  size_t order[VL_PROM_MAX_LABELS], n = smp->n_labels, len = 1;
  for (size_t i = 0; i < n; i++) {
    size_t j = i;
    while (j > 0 && strcmp(smp->labels[order[j - 1]].name, smp->labels[i].name) > 0) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
    len += strlen(smp->labels[i].name) + strlen(smp->labels[i].value) + 2;
  }
  char *out = vl_xmalloc(len), *o = out;
  for (size_t i = 0; i < n; i++) {
    const vl_prom_label_t *l = &smp->labels[order[i]];
    if (i)
      *o++ = ';';
    for (const char *c = l->name; *c; c++)
      *o++ = *c;
    *o++ = '=';
    for (const unsigned char *c = (const unsigned char *)l->value; *c; c++) {
      int keep = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 *c == '_' || *c == '.' || *c == ':' || *c == '/' || *c == '-' || *c == '+';
      *o++ = keep ? (char)*c : '_';
    }
  }
  *o = '\0';
  return out;
}

static int on_collect(const vl_prom_sample_t *smp, void *ud) {
  collect_t *c = ud;
  if (!vl_prom_target_match(c->s->tgt, smp))
    return 0;
  for (size_t i = 0; i < c->n; i++) {
    if (strcmp(c->v[i].metric, smp->name) == 0 && strcmp(c->v[i].canon, smp->labels_canon) == 0)
      return 0; /* a repeated sample: the first counts */
  }
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 16;
    c->v = vl_xrealloc(c->v, c->cap * sizeof(*c->v));
  }
  c->v[c->n++] =
      (found_t){vl_xstrdup(smp->name), vl_xstrdup(smp->labels_canon), pairs_text(smp), smp->value};
  return 0;
}

static int on_update(const vl_prom_sample_t *smp, void *ud) {
  collect_t *c = ud;
  scrape_t *s = c->s;
  if (!vl_prom_target_match(s->tgt, smp))
    return 0;
  for (size_t i = 0; i < s->n_ser; i++) {
    ser_t *x = s->mon->series[s->ser[i]];
    if (x->seen || strcmp(x->metric, smp->name) != 0 || strcmp(x->canon, smp->labels_canon) != 0)
      continue;
    x->seen = 1;
    set_value(x, smp->value, !isnan(smp->value), c->t);
    break;
  }
  return 0;
}

/* Makes the series of the first successful scrape. */
static void scrape_fix(scrape_t *s, collect_t *c) {
  vl_monitor_t *mon = s->mon;
  s->ser = vl_xcalloc(c->n ? c->n : 1, sizeof(*s->ser));
  for (size_t i = 0; i < c->n; i++) {
    found_t *f = &c->v[i];
    size_t same = 0;
    for (size_t j = 0; j < c->n; j++)
      same += strcmp(c->v[j].metric, f->metric) == 0;
    char *base = same > 1 ? vl_xfmt("%s%s{%s}", s->prefix, f->metric, f->pairs)
                          : vl_xfmt("%s%s", s->prefix, f->metric);
    char *name = vl_xstrdup(base);
    for (int k = 2; name_taken(mon, name); k++) {
      free(name);
      name = vl_xfmt("%s~%d", base, k);
    }
    free(base);
    ser_t *x = add_series(mon, name, "", VL_MONITOR_PROM);
    x->metric = vl_xstrdup(f->metric);
    x->canon = vl_xstrdup(f->canon);
    set_value(x, f->value, !isnan(f->value), c->t);
    s->ser[s->n_ser++] = mon->n_series - 1;
  }
  s->fixed = 1;
}

/* The transport ended the scrape. */
static void on_scrape_done(vl_transfer_t *xfer, CURLcode result) {
  scrape_t *s = vl_container_of(xfer, scrape_t, xfer);
  if (!s->busy || s->mon->closing)
    return;
  int64_t t = vl_wall_ms();
  long status = 0;
  s->busy = 0;
  if (result == CURLE_OK)
    curl_easy_getinfo(s->xfer.easy, CURLINFO_RESPONSE_CODE, &status);
  if (result != CURLE_OK) {
    if (s->too_big)
      scrape_failed(s, t, "answer larger than %u MiB", PROM_MAX_BYTES >> 20);
    else
      scrape_failed(s, t, "%s", curl_easy_strerror(result));
  } else if (status != 200) {
    scrape_failed(s, t, "HTTP status %ld", status);
  } else {
    collect_t c = {.s = s, .t = t};
    char why[160];
    int rc;
    if (!s->fixed) {
      rc = vl_prom_parse(s->buf, s->len, on_collect, &c, why, sizeof(why));
      if (rc == 0)
        scrape_fix(s, &c);
      for (size_t i = 0; i < c.n; i++) {
        free(c.v[i].metric);
        free(c.v[i].canon);
        free(c.v[i].pairs);
      }
      free(c.v);
    } else {
      for (size_t i = 0; i < s->n_ser; i++)
        s->mon->series[s->ser[i]]->seen = 0;
      rc = vl_prom_parse(s->buf, s->len, on_update, &c, why, sizeof(why));
      for (size_t i = 0; i < s->n_ser && rc == 0; i++) {
        ser_t *x = s->mon->series[s->ser[i]];
        if (!x->seen)
          set_value(x, 0, 0, t);
      }
    }
    if (rc == 0) {
      s->ok++;
      s->last_error[0] = '\0';
    } else {
      scrape_failed(s, t, "malformed metrics: %s", rc == VL_EINVAL ? why : vl_strerror(rc));
    }
  }
  part_done(s->mon);
}

static void scrape_start(scrape_t *s) {
  vl_monitor_t *mon = s->mon;
  if (s->busy) {
    s->skipped++;
    return;
  }
  s->len = 0;
  s->too_big = 0;
  if (vl_transport_add(mon->tr, &s->xfer) != 0) {
    scrape_failed(s, vl_wall_ms(), "cannot start the request");
    return;
  }
  s->busy = 1;
  mon->pending++;
}

/* Commands. */

/* The first number in the output: optional sign, digits with an optional fraction, optional
 * exponent, not glued to a word before it (the 0 of "gpu0" is not one). */
static int first_number(const char *s, size_t n, double *out) {
  for (size_t i = 0; i < n; i++) {
    size_t j = i;
    if (s[j] == '+' || s[j] == '-')
      j++;
    int digit = j < n && s[j] >= '0' && s[j] <= '9';
    int dotdigit = j + 1 < n && s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9';
    if (!digit && !dotdigit)
      continue;
    if (i > 0) {
      char b = s[i - 1];
      if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b == '_' ||
          b == '.')
        continue;
    }
    while (j < n && s[j] >= '0' && s[j] <= '9')
      j++;
    if (j < n && s[j] == '.') {
      j++;
      while (j < n && s[j] >= '0' && s[j] <= '9')
        j++;
    }
    if (j < n && (s[j] == 'e' || s[j] == 'E')) {
      size_t k = j + 1;
      if (k < n && (s[k] == '+' || s[k] == '-'))
        k++;
      if (k < n && s[k] >= '0' && s[k] <= '9') {
        while (k < n && s[k] >= '0' && s[k] <= '9')
          k++;
        j = k;
      }
    }
    char tmp[128];
    size_t len = VL_MIN(j - i, sizeof(tmp) - 1);
    memcpy(tmp, s + i, len);
    tmp[len] = '\0';
    *out = strtod(tmp, NULL);
    return 0;
  }
  return -1;
}

static void run_closed(uv_handle_t *h) {
  run_t *r = h->data;
  vl_monitor_t *mon = r->mon;
  if (--r->handles > 0)
    return;
  r->running = 0;
  if (mon->closing) {
    mon->to_close--;
    maybe_closed(mon);
  } else {
    part_done(mon);
  }
}

static void run_finish(run_t *r) {
  if (r->finished || !r->exited || !r->eof)
    return;
  r->finished = 1;
  uv_timer_stop(&r->timer);
  vl_monitor_t *mon = r->mon;
  if (mon->closing)
    return;
  int64_t t = vl_wall_ms();
  double v = 0;
  int ok = 0;
  if (r->timed_out) {
    snprintf(r->last_error, sizeof(r->last_error), "still running after %llu ms: killed",
             (unsigned long long)mon->spec->cmd_timeout_ms);
  } else if (r->term_signal) {
    snprintf(r->last_error, sizeof(r->last_error), "killed by signal %d", r->term_signal);
  } else if (r->exit_status != 0) {
    snprintf(r->last_error, sizeof(r->last_error), "exit status %lld", (long long)r->exit_status);
  } else if (first_number(r->buf, r->len, &v) != 0) {
    snprintf(r->last_error, sizeof(r->last_error), "printed no number");
  } else {
    ok = 1;
    r->last_error[0] = '\0';
  }
  if (ok)
    r->ok++;
  else
    r->failed++;
  set_value(mon->series[r->ser], v, ok, t);
}

static void close_pipe(run_t *r) {
  if (r->eof)
    return;
  r->eof = 1;
  uv_close((uv_handle_t *)&r->out, run_closed);
}

static void on_run_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  run_t *r = h->data;
  if (r->len < sizeof(r->buf))
    *buf = uv_buf_init(r->buf + r->len, (unsigned)(sizeof(r->buf) - r->len));
  else
    *buf = uv_buf_init(r->sink, sizeof(r->sink));
}

static void on_run_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  run_t *r = st->data;
  if (nread > 0) {
    if (buf->base == r->buf + r->len)
      r->len += (size_t)nread;
    return;
  }
  if (nread == 0)
    return;
  close_pipe(r); /* end of output, or a read error: nothing more will come */
  run_finish(r);
}

static void on_run_exit(uv_process_t *p, int64_t exit_status, int term_signal) {
  run_t *r = p->data;
  r->exited = 1;
  r->exit_status = exit_status;
  r->term_signal = term_signal;
  uv_close((uv_handle_t *)&r->proc, run_closed);
  run_finish(r);
}

/* Kills the command and everything it started (its own process group), and stops reading. Once
 * the shell has exited and its output has ended, the group may be gone and its number reused:
 * then nothing is killed. */
static void run_kill(run_t *r) {
  if (r->proc.pid > 0 && (!r->exited || !r->eof))
    uv_kill(-r->proc.pid, SIGKILL);
  close_pipe(r);
}

static void on_run_timeout(uv_timer_t *h) {
  run_t *r = h->data;
  r->timed_out = 1;
  r->timeouts++;
  run_kill(r);
  run_finish(r);
}

static void run_start(run_t *r) {
  vl_monitor_t *mon = r->mon;
  if (r->running) {
    r->skipped++;
    return;
  }
  r->running = 1;
  r->exited = r->eof = r->finished = r->timed_out = 0;
  r->exit_status = 0;
  r->term_signal = 0;
  r->len = 0;
  mon->pending++;
  uv_pipe_init(mon->loop, &r->out, 0);
  r->out.data = r;
  r->proc.data = r;
  char *args[] = {"/bin/sh", "-c", (char *)r->cmd, NULL};
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_IGNORE},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->out},
      {.flags = UV_IGNORE},
  };
  uv_process_options_t o = {.exit_cb = on_run_exit,
                            .file = "/bin/sh",
                            .args = args,
                            .flags = UV_PROCESS_DETACHED, /* its own process group, killed whole */
                            .stdio_count = 3,
                            .stdio = stdio};
  r->handles = 2;
  int rc = uv_spawn(mon->loop, &r->proc, &o);
  if (rc != 0) {
    /* Both handles were initialized and are closed as usual. */
    r->exited = 1;
    r->proc.pid = 0;
    close_pipe(r);
    uv_close((uv_handle_t *)&r->proc, run_closed);
    r->finished = 1;
    r->failed++;
    snprintf(r->last_error, sizeof(r->last_error), "cannot start /bin/sh: %s", uv_strerror(rc));
    set_value(mon->series[r->ser], 0, 0, vl_wall_ms());
    return;
  }
  if (uv_read_start((uv_stream_t *)&r->out, on_run_alloc, on_run_read) != 0)
    close_pipe(r);
  uv_update_time(mon->loop); /* the timeout counts from the spawn, not the loop's last wake-up */
  uv_timer_start(&r->timer, on_run_timeout, mon->spec->cmd_timeout_ms, 0);
}

/* The monitor. */

static void monitor_free(vl_monitor_t *mon) {
  worker_free(mon->worker);
  mon->worker = NULL;
  for (int i = 0; i < mon->n_scrapes; i++) {
    scrape_t *s = &mon->scrapes[i];
    if (s->xfer.easy)
      curl_easy_cleanup(s->xfer.easy);
    curl_slist_free_all(s->headers);
    free(s->buf);
    free(s->ser);
    free(s->prefix);
  }
  free(mon->scrapes);
  mon->scrapes = NULL;
  mon->n_scrapes = 0;
  free(mon->runs);
  mon->runs = NULL;
  mon->n_runs = 0;
  for (size_t i = 0; i < mon->n_series; i++) {
    ser_t *s = mon->series[i];
    free(s->name);
    free(s->metric);
    free(s->canon);
    free(s);
  }
  free(mon->series);
  mon->series = NULL;
  mon->n_series = mon->cap_series = 0;
}

int vl_monitor_init(vl_monitor_t *mon, uv_loop_t *loop, vl_transport_t *tr,
                    const vl_monitor_spec_t *spec, vl_monitor_done_cb done_cb, char *err,
                    size_t errlen) {
  memset(mon, 0, sizeof(*mon));
  mon->loop = loop;
  mon->tr = tr;
  mon->spec = spec;
  mon->done_cb = done_cb;
  int rc = 0;
  if (spec->n_proms > 0 && !tr) {
    vl_set_err(err, errlen, "--monitor-prom needs the run's HTTP transport");
    return VL_EINVAL;
  }
  if (spec->n_pids + spec->n_matches > 0 || spec->gpu) {
    if ((rc = worker_init(mon, err, errlen)) != 0)
      goto fail;
  }
  if (spec->n_proms > 0) {
    mon->scrapes = vl_xcalloc((size_t)spec->n_proms, sizeof(*mon->scrapes));
    for (int i = 0; i < spec->n_proms; i++) {
      mon->n_scrapes++;
      if ((rc = scrape_init(mon, &mon->scrapes[i], i, err, errlen)) != 0)
        goto fail;
    }
  }
  if (spec->n_cmds > 0) {
    mon->runs = vl_xcalloc((size_t)spec->n_cmds, sizeof(*mon->runs));
    for (int i = 0; i < spec->n_cmds; i++) {
      run_t *r = &mon->runs[i];
      r->mon = mon;
      r->label = spec->cmds[i].label;
      r->cmd = spec->cmds[i].cmd;
      add_series(mon, vl_xfmt("cmd.%s", r->label), "", VL_MONITOR_CMD);
      r->ser = mon->n_series - 1;
    }
  }
  /* Handles last: nothing above leaves one to close. */
  if (mon->worker && (rc = worker_start(mon->worker, err, errlen)) != 0)
    goto fail;
  for (int i = 0; i < spec->n_cmds; i++) {
    run_t *r = &mon->runs[i];
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    mon->n_runs++;
  }
  return 0;

fail:
  monitor_free(mon);
  return rc;
}

int vl_monitor_sample(vl_monitor_t *mon) {
  if (mon->closing)
    return VL_ECANCEL;
  mon->rounds++;
  worker_t *w = mon->worker;
  if (w) {
    if (w->busy) {
      mon->proc_skipped++;
    } else {
      w->busy = 1;
      mon->pending++;
      uv_mutex_lock(&w->mu);
      w->want = 1;
      uv_cond_signal(&w->cv);
      uv_mutex_unlock(&w->mu);
    }
  }
  for (int i = 0; i < mon->n_scrapes; i++)
    scrape_start(&mon->scrapes[i]);
  for (int i = 0; i < mon->n_runs; i++)
    run_start(&mon->runs[i]);
  return 0;
}

int vl_monitor_proc_info(const vl_monitor_t *mon, int i, vl_monitor_proc_info_t *out) {
  const worker_t *w = mon->worker;
  if (!w || i < 0 || i >= w->n_tracks)
    return VL_ERANGE;
  *out = w->info[i];
  return 0;
}

int vl_monitor_prom_info(const vl_monitor_t *mon, int i, vl_monitor_part_info_t *out) {
  if (i < 0 || i >= mon->n_scrapes)
    return VL_ERANGE;
  const scrape_t *s = &mon->scrapes[i];
  memset(out, 0, sizeof(*out));
  out->label = s->tgt->url;
  out->ok = s->ok;
  out->failed = s->failed;
  out->skipped = s->skipped;
  out->fixed = s->fixed;
  out->n_series = s->n_ser;
  snprintf(out->last_error, sizeof(out->last_error), "%s", s->last_error);
  return 0;
}

int vl_monitor_cmd_info(const vl_monitor_t *mon, int i, vl_monitor_part_info_t *out) {
  if (i < 0 || i >= mon->n_runs)
    return VL_ERANGE;
  const run_t *r = &mon->runs[i];
  memset(out, 0, sizeof(*out));
  out->label = r->label;
  out->ok = r->ok;
  out->failed = r->failed;
  out->skipped = r->skipped;
  out->timeouts = r->timeouts;
  out->n_series = 1;
  snprintf(out->last_error, sizeof(out->last_error), "%s", r->last_error);
  return 0;
}

static void on_handle_closed(uv_handle_t *h) {
  vl_monitor_t *mon = h->data;
  mon->to_close--;
  maybe_closed(mon);
}

void vl_monitor_close(vl_monitor_t *mon, vl_monitor_close_cb close_cb) {
  if (mon->closing)
    return;
  mon->closing = 1;
  mon->close_cb = close_cb;
  mon->to_close = 0;
  worker_t *w = mon->worker;
  if (w) {
    worker_stop(w);
    if (w->async_open) {
      w->async_open = 0;
      mon->to_close++;
      w->async.data = mon;
      uv_close((uv_handle_t *)&w->async, on_handle_closed);
    }
  }
  for (int i = 0; i < mon->n_scrapes; i++) {
    scrape_t *s = &mon->scrapes[i];
    if (s->busy)
      vl_transport_remove(mon->tr, &s->xfer);
    s->busy = 0;
  }
  for (int i = 0; i < mon->n_runs; i++) {
    run_t *r = &mon->runs[i];
    if (r->running) {
      mon->to_close++; /* run_closed counts it down once the command is reaped */
      run_kill(r);
    }
    uv_timer_stop(&r->timer);
    mon->to_close++;
    r->timer.data = mon;
    uv_close((uv_handle_t *)&r->timer, on_handle_closed);
  }
  maybe_closed(mon);
}

void vl_monitor_free(vl_monitor_t *mon) {
  monitor_free(mon);
}
