/* The monitor's proc and gpu reads: /proc and NVML, on a thread of the monitor's own. */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/nvml.h"
#include "vlmload/procmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB 1048576.0

/* A tree slot's series, by index in its row of tree_ser: HEAP, and the device and arenas series
 * right after it, only with the anatomy. */
enum { S_RSS, S_HWM, S_PSS, S_GPU, S_ANON, S_FILE, S_SHMEM, S_HEAP, N_SER };

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
  vl__tree_gpu_t *gall; /* every device's processes, for the trees */
  size_t n_gall, gall_cap;
  int gall_ok;
  /* The trees: the thread's, the copy published under mu, and the loop thread's copy with the
   * series made for each slot so far. */
  vl__tree_t *trees, *trees_pub, *trees_view;
  int n_trees;
  size_t (*tree_ser)[N_SER]; /* per tree and slot (VL__TREE_MAX each), by S_* */
  int anat;                  /* the anatomy is read: slots get its series */
  int *tree_made;            /* slots with series, per tree */
  int *tree_said;            /* the cap was said, per tree */
  size_t n_vals;             /* the first n_vals series are the thread's */
  val_t *scratch, *pub;
  vl_monitor_proc_info_t *info_scratch, *info_pub, *info;
} worker_t;

/* Reads the trees; their totals go to the scratch at k (rss, hwm, pss, anon, file, shmem each)
 * and, with gpu, at gk. */
static void trees_round(worker_t *w, size_t k, size_t gk) {
  for (int i = 0; i < w->n_trees; i++) {
    vl__tree_t *t = &w->trees[i];
    vl__tree_round(t, w->gpu, w->gall, w->n_gall, w->gall_ok);
    w->scratch[k++] = (val_t){t->rss, t->valid, t->t};
    w->scratch[k++] = (val_t){t->hwm, t->valid, t->t};
    if (w->pss)
      w->scratch[k++] = (val_t){t->pss, t->pss_valid, t->t};
    int kinds = t->valid && t->kinds_valid;
    w->scratch[k++] = (val_t){t->anon, kinds, t->t};
    w->scratch[k++] = (val_t){t->file, kinds, t->t};
    w->scratch[k++] = (val_t){t->shmem, kinds, t->t};
    if (w->gpu)
      w->scratch[gk + (size_t)i] = (val_t){t->gpu, t->gpu_valid, t->t};
  }
}

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
    int kinds = ok && m.has_kinds;
    w->scratch[k++] = (val_t){(double)m.anon_bytes / MB, kinds, t};
    w->scratch[k++] = (val_t){(double)m.file_bytes / MB, kinds, t};
    w->scratch[k++] = (val_t){(double)m.shmem_bytes / MB, kinds, t};
    vl_monitor_proc_info_t *in = &w->info_scratch[i];
    in->pid = tr->pid;
    in->present = tr->present;
    in->restarts = tr->restarts;
    in->matches = tr->matches;
    in->n_found = tr->n_found;
    memcpy(in->found, tr->found, sizeof(in->found));
    in->pss_denied = tr->pss_off;
  }
  size_t tree_k = k; /* the trees' totals, filled once the gpu reads are in */
  k += (size_t)w->n_trees * (w->pss ? 6 : 5);
  if (!w->gpu) {
    trees_round(w, tree_k, 0);
    return;
  }
  unsigned nd = vl_nvml_count(&w->nvml);
  for (unsigned d = 0; d < nd; d++) {
    uint64_t used = 0, total = 0;
    int ok = vl_nvml_memory(&w->nvml, d, &used, &total) == 0;
    w->scratch[k++] = (val_t){(double)used / MB, ok, vl_wall_ms()};
  }
  w->n_gall = 0;
  w->gall_ok = 1;
  if (w->n_tracks == 0 && w->n_trees == 0)
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
    if (rc != 0)
      w->gall_ok = 0;
    for (unsigned j = 0; rc == 0 && j < n; j++) {
      if (w->n_gall == w->gall_cap) {
        w->gall_cap = w->gall_cap ? w->gall_cap * 2 : 64;
        w->gall = vl_xrealloc(w->gall, w->gall_cap * sizeof(*w->gall));
      }
      w->gall[w->n_gall++] = (vl__tree_gpu_t){w->gprocs[j].pid, w->gprocs[j].used_bytes};
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
  trees_round(w, tree_k, base + (size_t)w->n_tracks);
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
    memcpy(w->trees_pub, w->trees, (size_t)w->n_trees * sizeof(*w->trees_pub));
    w->done = 1;
    uv_async_send(&w->async);
  }
  uv_mutex_unlock(&w->mu);
}

/* Adds the series KIND.LABEL/NAME; returns its index. */
static size_t add_slot_series(vl_monitor_t *mon, const char *kind, const char *label,
                              const char *name, const char *unit, vl_monitor_kind_t k) {
  vl__monitor_add_series(mon, vl_xfmt("%s.%s/%s", kind, label, name), unit, k);
  return mon->n_series - 1;
}

/* On the loop thread, after a round: makes the series of the slots found since the last round
 * (rss_mb.LABEL/NAME and the rest) and sets every slot's values. The anatomy's series of a slot
 * are made here too; anatomy.c sets them. */
static void trees_publish(worker_t *w) {
  vl_monitor_t *mon = w->mon;
  const vl_monitor_kind_t P = VL_MONITOR_PROC;
  for (int i = 0; i < w->n_trees; i++) {
    const vl__tree_t *t = &w->trees_view[i];
    size_t(*ser)[N_SER] = w->tree_ser + (size_t)i * VL__TREE_MAX;
    for (int s = w->tree_made[i]; s < t->n_slots; s++) {
      const char *l = t->label, *nm = t->slots[s].name;
      ser[s][S_RSS] = add_slot_series(mon, "rss_mb", l, nm, "MB", P);
      ser[s][S_HWM] = add_slot_series(mon, "hwm_mb", l, nm, "MB", P);
      if (w->pss)
        ser[s][S_PSS] = add_slot_series(mon, "pss_mb", l, nm, "MB", P);
      if (w->gpu)
        ser[s][S_GPU] = add_slot_series(mon, "gpu_mb", l, nm, "MB", VL_MONITOR_GPU);
      ser[s][S_ANON] = add_slot_series(mon, "anon_mb", l, nm, "MB", P);
      ser[s][S_FILE] = add_slot_series(mon, "file_mb", l, nm, "MB", P);
      ser[s][S_SHMEM] = add_slot_series(mon, "shmem_mb", l, nm, "MB", P);
      if (w->anat) {
        ser[s][S_HEAP] = add_slot_series(mon, "heap_mb", l, nm, "MB", P);
        add_slot_series(mon, "device_mb", l, nm, "MB", P);
        add_slot_series(mon, "arenas", l, nm, "", P);
      }
    }
    w->tree_made[i] = t->n_slots;
    for (int s = 0; s < t->n_slots; s++) {
      const vl__tree_slot_t *sl = &t->slots[s];
      vl__monitor_ser_t **S = mon->series;
      vl__monitor_set_value(S[ser[s][S_RSS]], sl->rss, sl->valid, t->t);
      vl__monitor_set_value(S[ser[s][S_HWM]], sl->hwm, sl->valid, t->t);
      if (w->pss)
        vl__monitor_set_value(S[ser[s][S_PSS]], sl->pss, sl->pss_valid, t->t);
      if (w->gpu)
        vl__monitor_set_value(S[ser[s][S_GPU]], sl->gpu, sl->gpu_valid, t->t);
      int kinds = sl->valid && sl->kinds_valid;
      vl__monitor_set_value(S[ser[s][S_ANON]], sl->anon, kinds, t->t);
      vl__monitor_set_value(S[ser[s][S_FILE]], sl->file, kinds, t->t);
      vl__monitor_set_value(S[ser[s][S_SHMEM]], sl->shmem, kinds, t->t);
    }
    if (t->capped && !w->tree_said[i]) {
      w->tree_said[i] = 1;
      fprintf(stderr,
              "vlmload: --monitor-tree %s: more than %d processes under pid %ld; the ones past "
              "that are left out of its series and its total\n",
              t->label, VL__TREE_MAX, (long)t->root);
    }
  }
}

static void on_async(uv_async_t *h) {
  worker_t *w = vl_container_of(h, worker_t, async);
  vl_monitor_t *mon = w->mon;
  uv_mutex_lock(&w->mu);
  int done = w->done;
  if (done) {
    for (size_t i = 0; i < w->n_vals; i++)
      vl__monitor_set_value(mon->series[i], w->pub[i].v, w->pub[i].valid, w->pub[i].t);
    memcpy(w->info, w->info_pub, (size_t)w->n_tracks * sizeof(*w->info));
    memcpy(w->trees_view, w->trees_pub, (size_t)w->n_trees * sizeof(*w->trees_view));
    w->done = 0;
  }
  uv_mutex_unlock(&w->mu);
  if (done) {
    trees_publish(w);
    vl__monitor_anat_sample(mon); /* reads a tree process just found at once */
  }
  if (done && w->busy) {
    w->busy = 0;
    vl__monitor_part_done(mon);
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
  free(w->gall);
  for (int i = 0; i < w->n_trees; i++)
    vl__tree_free(&w->trees[i]);
  free(w->trees);
  free(w->trees_pub);
  free(w->trees_view);
  free(w->tree_ser);
  free(w->tree_made);
  free(w->tree_said);
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

/* The series one status read gives a process or a tree's total: its resident set, high-water
 * mark, proportional set (with --monitor-pss) and the resident set by kind. */
static void add_status_series(vl_monitor_t *mon, const char *l, int pss) {
  vl__monitor_add_series(mon, vl_xfmt("rss_mb.%s", l), "MB", VL_MONITOR_PROC);
  vl__monitor_add_series(mon, vl_xfmt("hwm_mb.%s", l), "MB", VL_MONITOR_PROC);
  if (pss)
    vl__monitor_add_series(mon, vl_xfmt("pss_mb.%s", l), "MB", VL_MONITOR_PROC);
  vl__monitor_add_series(mon, vl_xfmt("anon_mb.%s", l), "MB", VL_MONITOR_PROC);
  vl__monitor_add_series(mon, vl_xfmt("file_mb.%s", l), "MB", VL_MONITOR_PROC);
  vl__monitor_add_series(mon, vl_xfmt("shmem_mb.%s", l), "MB", VL_MONITOR_PROC);
}

int vl__monitor_proc_init(vl_monitor_t *mon, char *err, size_t errlen) {
  const vl_monitor_spec_t *spec = mon->spec;
  worker_t *w = vl_xcalloc(1, sizeof(*w));
  mon->worker = w;
  w->mon = mon;
  w->pss = spec->pss;
  w->anat = spec->anatomy_us > 0;
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
  w->n_trees = spec->n_trees;
  w->trees = vl_xcalloc((size_t)VL_MAX(w->n_trees, 1), sizeof(*w->trees));
  for (int i = 0; i < spec->n_trees; i++) {
    const vl_monitor_tree_t *tr = &spec->trees[i];
    if (vl__tree_init(&w->trees[i], tr->label, tr->pid, flags, spec->rescan_ms * 1000000u) != 0) {
      vl_set_err(err, errlen, "--monitor-tree %s=%ld: no process %ld", tr->label, (long)tr->pid,
                 (long)tr->pid);
      w->n_trees = i;
      return VL_ENOENT;
    }
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
  for (int i = 0; i < n; i++)
    add_status_series(mon, w->info[i].label, w->pss);
  /* A tree's totals (the kinds' sums over its processes, as rss_mb.LABEL is theirs); its
   * processes' series come as they are found (trees_publish). */
  for (int i = 0; i < w->n_trees; i++)
    add_status_series(mon, w->trees[i].label, w->pss);
  if (w->gpu) {
    for (unsigned d = 0; d < vl_nvml_count(&w->nvml); d++)
      vl__monitor_add_series(mon, vl_xfmt("gpu%u_used_mb", d), "MB", VL_MONITOR_GPU);
    for (int i = 0; i < n; i++)
      vl__monitor_add_series(mon, vl_xfmt("gpu_mb.%s", w->info[i].label), "MB", VL_MONITOR_GPU);
    for (int i = 0; i < w->n_trees; i++)
      vl__monitor_add_series(mon, vl_xfmt("gpu_mb.%s", w->trees[i].label), "MB", VL_MONITOR_GPU);
  }
  size_t nt = (size_t)VL_MAX(w->n_trees, 1);
  w->trees_pub = vl_xcalloc(nt, sizeof(*w->trees_pub));
  w->trees_view = vl_xcalloc(nt, sizeof(*w->trees_view));
  memcpy(w->trees_pub, w->trees, (size_t)w->n_trees * sizeof(*w->trees));
  memcpy(w->trees_view, w->trees, (size_t)w->n_trees * sizeof(*w->trees));
  w->tree_ser = vl_xcalloc(nt * VL__TREE_MAX, sizeof(*w->tree_ser));
  w->tree_made = vl_xcalloc(nt, sizeof(*w->tree_made));
  w->tree_said = vl_xcalloc(nt, sizeof(*w->tree_said));
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
int vl__monitor_proc_start(vl_monitor_t *mon, char *err, size_t errlen) {
  worker_t *w = mon->worker;
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

void vl__monitor_proc_sample(vl_monitor_t *mon) {
  worker_t *w = mon->worker;
  if (!w)
    return;
  if (w->busy) {
    mon->proc_skipped++;
    return;
  }
  w->busy = 1;
  mon->pending++;
  uv_mutex_lock(&w->mu);
  w->want = 1;
  uv_cond_signal(&w->cv);
  uv_mutex_unlock(&w->mu);
}

void vl__monitor_proc_close(vl_monitor_t *mon) {
  worker_t *w = mon->worker;
  if (!w)
    return;
  worker_stop(w);
  if (w->async_open) {
    w->async_open = 0;
    mon->to_close++;
    w->async.data = mon;
    uv_close((uv_handle_t *)&w->async, vl__monitor_handle_closed);
  }
}

void vl__monitor_proc_free(vl_monitor_t *mon) {
  worker_free(mon->worker);
  mon->worker = NULL;
}

int vl_monitor_tree_info(const vl_monitor_t *mon, int i, vl_monitor_tree_info_t *out) {
  const worker_t *w = mon->worker;
  if (!w || i < 0 || i >= w->n_trees)
    return VL_ERANGE;
  const vl__tree_t *t = &w->trees_view[i];
  *out = (vl_monitor_tree_info_t){.label = t->label,
                                  .pid = t->root,
                                  .present = t->root_live,
                                  .n_procs = t->n_procs,
                                  .untracked = t->untracked,
                                  .capped = t->capped,
                                  .forgotten = t->forgotten};
  return 0;
}

int vl_monitor_tree_proc(const vl_monitor_t *mon, int i, int j, vl_monitor_tree_proc_t *out) {
  const worker_t *w = mon->worker;
  if (!w || i < 0 || i >= w->n_trees || j < 0 || j >= w->trees_view[i].n_procs)
    return VL_ERANGE;
  const vl__tree_t *t = &w->trees_view[i];
  const vl__tree_proc_t *p = &t->procs[j];
  *out = (vl_monitor_tree_proc_t){.pid = p->pid,
                                  .name = t->slots[p->slot].name,
                                  .present = p->live,
                                  .first_ms = p->first_ms,
                                  .last_ms = p->last_ms};
  return 0;
}

int vl_monitor_proc_info(const vl_monitor_t *mon, int i, vl_monitor_proc_info_t *out) {
  const worker_t *w = mon->worker;
  if (!w || i < 0 || i >= w->n_tracks)
    return VL_ERANGE;
  *out = w->info[i];
  return 0;
}

int vl__monitor_tree_anat(const vl_monitor_t *mon, vl__monitor_anat_proc_t *out, int max) {
  const worker_t *w = mon->worker;
  int n = 0;
  if (!w || !w->anat)
    return 0;
  for (int i = 0; i < w->n_trees; i++) {
    const vl__tree_t *t = &w->trees_view[i];
    const size_t(*ser)[N_SER] = (const size_t(*)[N_SER])(w->tree_ser + (size_t)i * VL__TREE_MAX);
    for (int s = 0; s < w->tree_made[i] && n < max; s++) {
      int h = t->slots[s].holder;
      const vl__tree_proc_t *p = h >= 0 && t->procs[h].live ? &t->procs[h] : NULL;
      out[n++] = (vl__monitor_anat_proc_t){
          .pid = p ? p->pid : 0, .start = p ? p->start_time : 0, .ser = ser[s][S_HEAP]};
    }
  }
  return n;
}
