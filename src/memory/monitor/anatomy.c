/* The monitor's anatomy reads: each process target's /proc/PID/smaps (smaps.h), every
 * spec.anatomy_us, on libuv's threadpool. The kernel walks every mapping for it, milliseconds for
 * a large server, so it runs neither on the loop thread nor in the proc thread's round (whose
 * samples it would delay). Its series are set when a read is in, and keep their latest value in
 * between: the timeline's rows repeat it until the next read.
 *
 * Series, per process target (--monitor-pid, --monitor-pid-match), made here:
 *   heap_mb.LABEL    Rss of [heap] and of glibc's arena heaps, MB
 *   device_mb.LABEL  mapped size of device mappings (/dev/nvidia*, /dev/dri/...), MB
 *   arenas.LABEL     glibc arena heaps, a count (no unit: not memory)
 * and the same per process of a --monitor-tree, LABEL/NAME, made by proc.c when the process is
 * found: each read takes the tree's processes of the latest round (vl__monitor_tree_anat), so a
 * process found later is read from then on, and a slot whose process is gone reads missing.
 * A read is started by a round when the last one is at least spec.anatomy_us old and none is
 * running; it is not part of the round (done_cb does not wait for it). */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/smaps.h"

#include <stdlib.h>
#include <string.h>

#define MB 1048576.0

typedef struct {
  vl__monitor_anat_proc_t p; /* p.pid 0: no process now */
  int ok;
  vl_smaps_t m;
  int64_t t;
} target_t;

/* Owned by the loop thread, except `targets` while a read is running, which the threadpool's
 * thread owns until after_read. */
typedef struct vl_monitor_anat_s {
  vl_monitor_t *mon;
  uv_work_t req;
  int busy;
  int started;                   /* a read was ever started */
  uint64_t last_ms;              /* loop time of the latest start */
  int n_direct;                  /* process targets: the first targets */
  int cap;                       /* n_direct, and VL__TREE_MAX per tree */
  int n;                         /* targets of the read running or last run */
  vl__monitor_anat_proc_t *tree; /* scratch for the tree's list */
  target_t *targets;
} anat_t;

void vl__monitor_anat_init(vl_monitor_t *mon) {
  const vl_monitor_spec_t *spec = mon->spec;
  int n = spec->n_pids + spec->n_matches;
  if (spec->anatomy_us == 0 || n + spec->n_trees == 0)
    return;
  anat_t *a = vl_xcalloc(1, sizeof(*a));
  a->mon = mon;
  a->n_direct = n;
  a->cap = n + spec->n_trees * VL__TREE_MAX;
  a->targets = vl_xcalloc((size_t)a->cap, sizeof(*a->targets));
  a->tree = vl_xcalloc((size_t)VL_MAX(a->cap - n, 1), sizeof(*a->tree));
  for (int i = 0; i < n; i++) {
    const char *l = i < spec->n_pids ? spec->pids[i].label : spec->matches[i - spec->n_pids].label;
    a->targets[i].p.ser = mon->n_series;
    vl__monitor_add_series(mon, vl_xfmt("heap_mb.%s", l), "MB", VL_MONITOR_PROC);
    vl__monitor_add_series(mon, vl_xfmt("device_mb.%s", l), "MB", VL_MONITOR_PROC);
    vl__monitor_add_series(mon, vl_xfmt("arenas.%s", l), "", VL_MONITOR_PROC);
  }
  mon->anat = a;
}

/* On the threadpool: reads every target's smaps. */
static void read_all(uv_work_t *req) {
  anat_t *a = vl_container_of(req, anat_t, req);
  for (int i = 0; i < a->n; i++) {
    target_t *t = &a->targets[i];
    memset(&t->m, 0, sizeof(t->m));
    t->ok = t->p.pid > 0 && vl_smaps_read(t->p.pid, t->p.start, &t->m) == 0;
    t->t = vl_wall_ms();
  }
}

/* On the loop thread: sets the series, or, closing, counts the read off. */
static void after_read(uv_work_t *req, int status) {
  anat_t *a = vl_container_of(req, anat_t, req);
  vl_monitor_t *mon = a->mon;
  a->busy = 0;
  if (mon->closing) {
    mon->to_close--;
    vl__monitor_maybe_closed(mon);
    return;
  }
  if (status != 0)
    return;
  for (int i = 0; i < a->n; i++) {
    const target_t *t = &a->targets[i];
    vl__monitor_ser_t **s = mon->series + t->p.ser;
    vl__monitor_set_value(s[0], (double)t->m.heap / MB, t->ok, t->t);
    vl__monitor_set_value(s[1], (double)t->m.device / MB, t->ok, t->t);
    vl__monitor_set_value(s[2], (double)t->m.arenas, t->ok, t->t);
  }
}

void vl__monitor_anat_sample(vl_monitor_t *mon) {
  anat_t *a = mon->anat;
  if (!a || a->busy || mon->closing) /* closing: no read may start after anat_close */
    return;
  uint64_t now = uv_now(mon->loop);
  /* A tree process found since the last read is read at once (proc.c calls this when a round
   * is in): its first reading is then near the start of its series, and the first round's
   * processes are read before the load, not a whole interval into it. */
  int nt = vl__monitor_tree_anat(mon, a->tree, a->cap - a->n_direct);
  if (a->started && (now - a->last_ms) * 1000 < mon->spec->anatomy_us && nt <= a->n - a->n_direct)
    return;
  /* The processes the proc thread followed at its latest round. */
  for (int i = 0; i < a->n_direct; i++) {
    vl_monitor_proc_info_t info;
    int known = vl_monitor_proc_info(mon, i, &info) == 0 && info.present;
    a->targets[i].p.pid = known ? info.pid : 0;
  }
  for (int i = 0; i < nt; i++)
    a->targets[a->n_direct + i].p = a->tree[i];
  a->n = a->n_direct + nt;
  if (uv_queue_work(mon->loop, &a->req, read_all, after_read) != 0)
    return;
  a->busy = 1;
  a->started = 1;
  a->last_ms = now;
}

void vl__monitor_anat_close(vl_monitor_t *mon) {
  anat_t *a = mon->anat;
  if (!a || !a->busy)
    return;
  mon->to_close++;
  uv_cancel((uv_req_t *)&a->req); /* a read not yet begun ends at once, as canceled */
}

void vl__monitor_anat_free(vl_monitor_t *mon) {
  anat_t *a = mon->anat;
  if (!a)
    return;
  free(a->targets);
  free(a->tree);
  free(a);
  mon->anat = NULL;
}
