/* What the files of the monitor share; not a public header. One concern in several files, which
 * call each other.
 *
 * monitor.c keeps the series and runs the rounds (vl_monitor_init, _sample, _close, _free); each
 * kind of part has a file of its own that creates its series, starts its part of a round and ends
 * it with vl__monitor_part_done:
 *   proc.c    /proc and NVML reads on the monitor's worker thread (mon->worker);
 *   tree.c    the process trees of --monitor-tree, read by proc.c's thread;
 *   scrape.c  Prometheus scrapes through the run's transport (mon->scrapes);
 *   cmd.c     shell commands (mon->runs);
 *   anatomy.c smaps reads on libuv's threadpool, at a coarser cadence (mon->anat).
 * Each part's struct is private to its file. A part's _init creates its series and opens no
 * handle; its _open (or _start) opens the handles, after every _init has succeeded; _close stops
 * it and counts each handle it closes in mon->to_close; _free releases the rest, after close_cb.
 * Everything here runs on the loop thread, except what proc.c says runs on its thread.
 */
#ifndef VLMLOAD_MONITOR_INTERNAL_H
#define VLMLOAD_MONITOR_INTERNAL_H

#include "vlmload/monitor.h"
#include "vlmload/procmem.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* A series and what the monitor needs to refresh it. */
typedef struct vl_monitor_ser_s {
  vl_monitor_series_t pub;
  char *name;
  char *metric; /* prom: sample name */
  char *canon;  /* prom: canonical label set */
  int seen;     /* prom: found in the scrape being parsed */
} vl__monitor_ser_t;

/* Series (monitor.c). */

/* Appends a series to mon->series and counts a change of the list; takes name. unit is "" (not
 * memory) or a vl_memunit_label ("MB", "bytes", ...), static. */
vl__monitor_ser_t *vl__monitor_add_series(vl_monitor_t *mon, char *name, const char *unit,
                                          vl_monitor_kind_t kind);
/* Records a reading (valid) or a miss at wall-clock time t. */
void vl__monitor_set_value(vl__monitor_ser_t *s, double v, int valid, int64_t t);
/* A part of the round finished: done_cb runs when it was the last, unless closing. */
void vl__monitor_part_done(vl_monitor_t *mon);
/* Runs close_cb once closing and mon->to_close has come down to 0. */
void vl__monitor_maybe_closed(vl_monitor_t *mon);
/* A uv_close callback for a handle whose data is the monitor: counts it off mon->to_close. */
void vl__monitor_handle_closed(uv_handle_t *h);

/* Proc and gpu reads (proc.c). Only with process targets or spec->gpu. */

/* Sets up the worker (process trackers, NVML) and the proc and gpu series, which must be the
 * first series of the monitor. Returns 0 or a VL_E* code with a reason in err. */
int vl__monitor_proc_init(vl_monitor_t *mon, char *err, size_t errlen);
/* Starts the thread and the async handle that wakes the loop. Returns 0 or VL_EUV. */
int vl__monitor_proc_start(vl_monitor_t *mon, char *err, size_t errlen);
/* Hands a round to the thread, or counts it skipped while the last one is still running. */
void vl__monitor_proc_sample(vl_monitor_t *mon);
/* Joins the thread (after its round in progress) and closes the async handle. */
void vl__monitor_proc_close(vl_monitor_t *mon);
void vl__monitor_proc_free(vl_monitor_t *mon);

/* Process trees (tree.c): the state of one --monitor-tree, kept by the worker thread and copied
 * whole to the loop thread at each round's end. A slot is a name (COMM, COMM#2, ...) and the
 * series under it; a process takes the first slot of its name that no live process holds, so a
 * restarted process continues its predecessor's series. */

#define VL__TREE_MAX 256 /* live processes, and slots, per tree */

typedef struct vl__tree_slot_s {
  char name[64]; /* COMM or COMM#k */
  char base[64]; /* COMM */
  int holder;    /* index in procs of the live process that holds it, or -1 */
  double rss, hwm, pss, gpu;
  double anon, file, shmem;                     /* the resident set by kind (procmem.h), MB */
  int valid, pss_valid, gpu_valid, kinds_valid; /* this round */
} vl__tree_slot_t;

typedef struct vl__tree_proc_s {
  pid_t pid;
  uint64_t start_time;
  int slot;
  int live;
  int64_t first_ms, last_ms; /* wall clock of its first and latest reading */
} vl__tree_proc_t;

typedef struct vl__tree_s {
  const char *label;
  pid_t root;
  uint64_t root_start;
  int root_live;
  unsigned flags;     /* VL_PROCMEM_* */
  uint64_t rescan_ns; /* least time between searches for descendants */
  uint64_t last_scan_ns;
  vl__tree_slot_t slots[VL__TREE_MAX];
  int n_slots;
  vl__tree_proc_t procs[VL__TREE_MAX]; /* the root first; a gone one is reused when full */
  int n_procs;
  vl_procmem_kin_t *kin; /* the worker's scan buffer; the loop's copy never touches it */
  size_t kin_cap;
  int untracked;             /* live descendants left out at the latest search: past the cap */
  int capped;                /* the cap was ever reached */
  uint64_t forgotten;        /* gone processes whose record was reused */
  double rss, hwm, pss, gpu; /* totals over the live processes read this round */
  double anon, file, shmem;
  int valid, pss_valid, gpu_valid, kinds_valid;
  int64_t t; /* wall clock of the round's end */
} vl__tree_t;

/* A gpu reading: what NVML says a process holds on one device. */
typedef struct vl__tree_gpu_s {
  unsigned pid;
  uint64_t used_bytes; /* or VL_NVML_UNKNOWN */
} vl__tree_gpu_t;

/* Starts following the tree under root, which must exist. Returns 0 or VL_ENOENT. vl__tree_free
 * releases the scan buffer. */
int vl__tree_init(vl__tree_t *t, const char *label, pid_t root, unsigned flags, uint64_t rescan_ns);
/* The slot a new process named base takes; a new one is made when none is free. Returns its
 * index, or -1 when every slot is taken (VL__TREE_MAX). */
int vl__tree_slot(vl__tree_t *t, const char *base);
/* A round on the worker thread: finds the descendants when due, reads each live process, and
 * with gpu (n entries; gpu_ok 0 when NVML failed) their GPU memory; sets the totals. */
void vl__tree_round(vl__tree_t *t, int with_gpu, const vl__tree_gpu_t *gpu, size_t n, int gpu_ok);
void vl__tree_free(vl__tree_t *t);

/* A process whose smaps the anatomy reads: its pid (0 while none is alive) and start time, and
 * the first of its three series (heap_mb, device_mb, arenas, in that order). */
typedef struct vl__monitor_anat_proc_s {
  pid_t pid;
  uint64_t start; /* 0: not checked */
  size_t ser;
} vl__monitor_anat_proc_t;

/* On the loop thread: every tree process with anatomy series, as of the latest round, into out
 * (at most max). A slot whose process is gone is listed with pid 0. Returns how many. The
 * anatomy series of a slot are made with its other series (spec->anatomy_us > 0). */
int vl__monitor_tree_anat(const vl_monitor_t *mon, vl__monitor_anat_proc_t *out, int max);

/* Anatomy (anatomy.c). Only with process targets or trees, and spec->anatomy_us > 0. */

/* Adds the heap_mb, device_mb and arenas series of every process target; a tree's processes get
 * theirs as they are found (proc.c). */
void vl__monitor_anat_init(vl_monitor_t *mon);
/* Starts a read of every target's smaps when one is due (or a tree process is new) and none is
 * running; never once closing. Called at each round's start and by proc.c when a round is in. */
void vl__monitor_anat_sample(vl_monitor_t *mon);
/* Cancels a read not yet begun; a read running counts on mon->to_close until it ends. */
void vl__monitor_anat_close(vl_monitor_t *mon);
void vl__monitor_anat_free(vl_monitor_t *mon);

/* Prometheus scrapes (scrape.c). Only with spec->n_proms > 0, through mon->tr. */

/* Prepares one easy handle per target; the series come at each target's first good scrape.
 * Returns 0 or a VL_E* code with a reason in err. */
int vl__monitor_scrape_init(vl_monitor_t *mon, char *err, size_t errlen);
/* Starts every scrape not still running; those are counted skipped. */
void vl__monitor_scrape_sample(vl_monitor_t *mon);
/* Removes the scrapes running from the transport. */
void vl__monitor_scrape_close(vl_monitor_t *mon);
void vl__monitor_scrape_free(vl_monitor_t *mon);

/* Commands (cmd.c). Only with spec->n_cmds > 0. */

/* Adds one series per command. */
void vl__monitor_cmd_init(vl_monitor_t *mon);
/* Opens each command's timer. */
void vl__monitor_cmd_open(vl_monitor_t *mon);
/* Spawns every command not still running; those are counted skipped. */
void vl__monitor_cmd_sample(vl_monitor_t *mon);
/* Kills the commands running (with their process group) and closes the timers; each command
 * running counts on mon->to_close until it is reaped. */
void vl__monitor_cmd_close(vl_monitor_t *mon);
void vl__monitor_cmd_free(vl_monitor_t *mon);

#endif
