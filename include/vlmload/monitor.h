/* The memory monitor: a list of series (named values such as a process's RSS, a GPU's used memory,
 * a server metric, a command's output) sampled on demand without blocking the loop thread.
 *
 * Each vl_monitor_sample() starts one round made of parts, each of which finishes on its own:
 *   - proc and gpu: /proc and NVML reads, done on the monitor's own thread (a read of
 *     smaps_rollup or an NVML call can take milliseconds), published back through a uv_async_t;
 *   - prom: one HTTP GET per --monitor-prom target through the run's transport (no proxy, as
 *     for the load; answers over 8 MiB fail), parsed when done;
 *   - cmd: one `/bin/sh -c CMD` per --monitor-cmd, in a process group of its own, stdin and
 *     stderr on /dev/null. Its value is the first number in the first 4 KiB of its stdout:
 *     [+-]digits[.digits][e[+-]digits] not glued to a word before it ("gpu0: 1234 MiB" reads
 *     1234), in the unit of the word right after it when that names one (vl_memunit_word:
 *     "190956 kB", "1234 MiB"), else in the unit its series' name states (cmd.rss_kb), else
 *     taken as MB (the monitor says so once at start). A command that exits non-zero, is killed,
 *     or prints no number leaves the value missing; one still running after spec.cmd_timeout_ms
 *     is killed with its process group.
 * A part still running when the next round starts is not started twice; it counts as skipped.
 * A series keeps its latest value and the wall-clock time it was read; a value that could not be
 * read (process missing, scrape failed, command failed) is kept as invalid, with that time.
 *
 * Series names are stable, CSV-friendly column names (no comma, quote, space or newline):
 *   rss_mb.LABEL  hwm_mb.LABEL  pss_mb.LABEL   per process target (pss with spec.pss)
 *   anon_mb.LABEL  file_mb.LABEL  shmem_mb.LABEL
 *                                              per process target: its resident set by kind
 *                                              (RssAnon, RssFile, RssShmem), every round
 *   heap_mb.LABEL  device_mb.LABEL  arenas.LABEL
 *                                              per process target, every spec.anatomy_us, from
 *                                              smaps (smaps.h): heap and arena heaps resident,
 *                                              device mappings' size, arena heaps (a count)
 *   gpuI_used_mb                               per GPU, with spec.gpu
 *   gpu_mb.LABEL                               per process target with spec.gpu: its memory on
 *                                              every GPU together
 *   rss_mb.LABEL  hwm_mb.LABEL  pss_mb.LABEL   per --monitor-tree: the sums over its live
 *   anon_mb.LABEL  file_mb.LABEL  shmem_mb.LABEL
 *                                              processes (the root and its descendants)
 *   rss_mb.LABEL/NAME  hwm_mb.LABEL/NAME  pss_mb.LABEL/NAME  gpu_mb.LABEL/NAME
 *   anon_mb.LABEL/NAME  file_mb.LABEL/NAME  shmem_mb.LABEL/NAME
 *   heap_mb.LABEL/NAME  device_mb.LABEL/NAME  arenas.LABEL/NAME
 *                                              per process of a tree, NAME its command name
 *                                              (vl_procmem_name), NAME#2... for a second one
 *                                              alive under the same name; the last three every
 *                                              spec.anatomy_us
 *   prom.METRIC  prom.TLABEL.METRIC            per selected sample of a --monitor-prom target;
 *                                              a metric seen with several label sets gets one
 *                                              series each: prom.METRIC{k=v;k=v}
 *   cmd.LABEL                                  per --monitor-cmd (LABEL defaults to 1, 2, ...)
 * MB means MiB (1048576 bytes) throughout.
 *
 * Units follow the series' names (vl_memunit_series, the rule the analysis reads a timeline by):
 * the proc and gpu series are MB; a prom series keeps the value the server gives, in the unit its
 * metric's name states (prom.process_resident_memory_bytes: bytes), and one whose metric states
 * none (a gauge of requests, a ratio, a counter) is not memory (unit ""); a cmd series is in the
 * unit its name states, else MB, or not memory when its name says so (a share: "perc", "ratio").
 *
 * The proc, gpu and cmd series exist from vl_monitor_init, except a tree's per-process series:
 * those of the processes alive at the first round are made then, those of a process found later
 * at the end of the round that first read it (the list grows during the run). A tree's
 * descendants are looked for at most every spec.rescan_ms; a process that exits reads missing
 * from the round that finds it gone, and a later one of the same name continues its series. A prom
 * target's series are fixed at its first successful scrape, from the selected samples present then;
 * a metric missing from a later scrape reads invalid, and one that appears later is not added. Run
 * one round before the load starts (done_cb tells when it is over) so the series list is complete;
 * `generation` counts the changes of the list for a caller that must notice a late first scrape.
 *
 * All calls are made on the loop thread.
 */
#ifndef VLMLOAD_MONITOR_H
#define VLMLOAD_MONITOR_H

#include "vlmload/monitorspec.h"
#include "vlmload/procmem.h"
#include "vlmload/prom.h"
#include "vlmload/transport.h"

#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <uv.h>

/* Series. */

typedef enum {
  VL_MONITOR_PROC = 1,
  VL_MONITOR_GPU,
  VL_MONITOR_PROM,
  VL_MONITOR_CMD
} vl_monitor_kind_t;

typedef struct vl_monitor_series_s {
  const char *name;
  const char *unit; /* of value: "MB", "bytes", "kB", "GB", "TB"; "" when it is not memory */
  double mb;        /* MB in one unit of value; 0 when it is not memory */
  vl_monitor_kind_t kind;
  double value;      /* the latest value read */
  int valid;         /* value holds a reading; 0 before the first and while missing */
  int64_t t_wall_ms; /* wall clock when the latest reading (or miss) happened; 0 before any */
} vl_monitor_series_t;

/* State of a process target, for the summary. */
typedef struct vl_monitor_proc_info_s {
  const char *label;
  int fixed;         /* a --monitor-pid (else a --monitor-pid-match) */
  pid_t pid;         /* the process followed; 0 before one was found */
  int present;       /* it was alive at the latest sample */
  uint64_t restarts; /* processes found after the first */
  int matches;       /* processes the latest search matched (more than one: the oldest is used) */
  pid_t found[VL_PROCMEM_FOUND]; /* the first n_found of them, the one followed first */
  int n_found;
  int pss_denied; /* PSS was asked for and smaps_rollup could not be read */
} vl_monitor_proc_info_t;

/* State of a --monitor-tree, for the summary. */
typedef struct vl_monitor_tree_info_s {
  const char *label;
  pid_t pid;          /* the root */
  int present;        /* the root was alive at the latest sample */
  int n_procs;        /* processes recorded (vl_monitor_tree_proc), the root first */
  int untracked;      /* live descendants left out at the latest search, past the cap */
  int capped;         /* the cap was ever reached */
  uint64_t forgotten; /* records of gone processes reused for new ones */
} vl_monitor_tree_info_t;

/* A process seen in a tree. */
typedef struct vl_monitor_tree_proc_s {
  pid_t pid;
  const char *name;          /* the series' suffix: COMM or COMM#k */
  int present;               /* alive at the latest sample */
  int64_t first_ms, last_ms; /* wall clock of its first and latest reading; 0 before one */
} vl_monitor_tree_proc_t;

/* Where a command's unit came from. */
typedef enum {
  VL_MONITOR_UNIT_NONE = 0,  /* no reading yet */
  VL_MONITOR_UNIT_OUTPUT,    /* the word after its number */
  VL_MONITOR_UNIT_NAME,      /* its series' name (cmd.rss_kb) */
  VL_MONITOR_UNIT_ASSUMED,   /* neither: taken as MB */
  VL_MONITOR_UNIT_NOT_MEMORY /* its name says it is not memory: the number as printed */
} vl_monitor_unit_from_t;

/* State of a prom target or a command, for the summary. The strings are the monitor's, valid
 * until the next round. */
typedef struct vl_monitor_part_info_s {
  const char *label; /* a command's label, or a prom target's URL */
  uint64_t ok, failed, skipped, timeouts;
  int last_failed;      /* the latest attempt that ended failed */
  char last_error[320]; /* why the latest failure failed, in the server's or curl's words for a
                           scrape ("HTTP 501: This server does not support ..."); "" when none */
  const char *advice;   /* prom: what to do about that failure, or "" */
  /* prom */
  int fixed;             /* the series are fixed (at the first good scrape) */
  size_t n_series;       /* series of this target */
  int defaults;          /* no metric was named: the default set was looked for */
  const char *missing;   /* named metrics no sample of which was on the first good page, ", "
                            between them; "" when none */
  size_t page_metrics;   /* metric names on the first good page */
  const char *page_some; /* a few of them, ", " between them */
  /* cmd */
  const char *unit;                 /* of its series */
  vl_monitor_unit_from_t unit_from; /* of its latest reading */
  const char *read_unit;            /* the unit its output named, when unit_from says so */
  char first_text[48];              /* what its first reading printed: the number and its unit */
} vl_monitor_part_info_t;

typedef struct vl_monitor_s vl_monitor_t;

/* Every part in progress has finished (the monitor is idle). Not called for a round that started
 * nothing, which only happens when every scrape failed to start and there is nothing else. */
typedef void (*vl_monitor_done_cb)(vl_monitor_t *mon);
/* Every handle of the monitor is closed. */
typedef void (*vl_monitor_close_cb)(vl_monitor_t *mon);

struct vl_monitor_worker_s;
struct vl_monitor_scrape_s;
struct vl_monitor_run_s;
struct vl_monitor_anat_s;
struct vl_monitor_ser_s;

struct vl_monitor_s {
  uv_loop_t *loop;
  vl_transport_t *tr;
  const vl_monitor_spec_t *spec;
  vl_monitor_done_cb done_cb;
  vl_monitor_close_cb close_cb;
  void *data; /* the owner's */
  struct vl_monitor_ser_s **series;
  size_t n_series, cap_series;
  uint64_t generation;                /* changes of the series list */
  struct vl_monitor_worker_s *worker; /* NULL without proc or gpu series */
  struct vl_monitor_scrape_s *scrapes;
  int n_scrapes;
  struct vl_monitor_run_s *runs;
  int n_runs;
  struct vl_monitor_anat_s *anat; /* NULL without process targets or trees, or anatomy_us 0 */
  int pending;                    /* parts in progress */
  int closing;
  int to_close; /* handles and processes still to close or end */
  uint64_t rounds;
  uint64_t proc_skipped; /* rounds in which the proc/gpu reads were still running */
};

/* Sets mon up on loop. tr may be NULL when the spec has no prom target; otherwise the scrapes run
 * through tr, which reports each one's end to the monitor itself (the scrape's vl_transfer_t):
 * nothing else routes them. done_cb may be NULL. Loads NVML for spec->gpu: a machine without it
 * fails with the reason in err. Returns 0, or a VL_E* code with a one-line reason in err; the
 * monitor then holds nothing. */
int vl_monitor_init(vl_monitor_t *mon, uv_loop_t *loop, vl_transport_t *tr,
                    const vl_monitor_spec_t *spec, vl_monitor_done_cb done_cb, char *err,
                    size_t errlen);

/* Starts a round; returns at once. Returns 0, or VL_ECANCEL once closing. */
int vl_monitor_sample(vl_monitor_t *mon);

/* Series, in a stable order; new ones are appended. The pointer stays valid until
 * vl_monitor_free. */
static inline size_t vl_monitor_count(const vl_monitor_t *mon) {
  return mon->n_series;
}
const vl_monitor_series_t *vl_monitor_series(const vl_monitor_t *mon, size_t i);
/* The series named name, or NULL. */
const vl_monitor_series_t *vl_monitor_find(const vl_monitor_t *mon, const char *name);

/* The process of target label (a --monitor-pid or a --monitor-tree) is known to be gone: its
 * series, and its tree's, read missing from now, before a round finds it so. */
void vl_monitor_gone(vl_monitor_t *mon, const char *label);

/* Process targets (pids first, then matches), prom targets and commands, in spec order. Return 0
 * or VL_ERANGE. */
int vl_monitor_proc_info(const vl_monitor_t *mon, int i, vl_monitor_proc_info_t *out);
int vl_monitor_prom_info(const vl_monitor_t *mon, int i, vl_monitor_part_info_t *out);
int vl_monitor_cmd_info(const vl_monitor_t *mon, int i, vl_monitor_part_info_t *out);
/* Trees in spec order, and process j of tree i as of the latest round. Return 0 or VL_ERANGE. */
int vl_monitor_tree_info(const vl_monitor_t *mon, int i, vl_monitor_tree_info_t *out);
int vl_monitor_tree_proc(const vl_monitor_t *mon, int i, int j, vl_monitor_tree_proc_t *out);

/* What the first round found wrong, said once before the load, one line each on f, each starting
 * "vlmload: " and naming its option: a --monitor-pid-match that matches nothing yet, or several
 * processes (which it follows, and --monitor-tree for a server of several); a --monitor-prom
 * target that failed (HTTP status and the server's message, or curl's words, and what to do) or
 * lacks metrics it names; a --monitor-cmd that failed, or whose unit was taken as MB. Call it after
 * the round is done. */
void vl_monitor_say_start(const vl_monitor_t *mon, FILE *f);

/* The prom targets' and commands' records for the summary: "scrapes" and "commands" arrays added
 * to o (a cJSON object) when there are such targets, and as text lines on f ("  scrapes    URL:
 * ...", "  command    NAME: ..."), after a blank line with blank_first. */
struct cJSON;
void vl_monitor_parts_json(const vl_monitor_t *mon, struct cJSON *o);
void vl_monitor_print_parts(const vl_monitor_t *mon, FILE *f, int blank_first);

/* Stops everything: scrapes are removed from the transport (close the monitor before the
 * transport), commands running are killed with their process group, the thread is joined (after
 * its round in progress). close_cb runs once every handle is closed and every command has been
 * reaped; it may run before this returns when there is none. done_cb is not called any more. */
void vl_monitor_close(vl_monitor_t *mon, vl_monitor_close_cb close_cb);

/* Frees everything; after close_cb (and after the transport is closed). */
void vl_monitor_free(vl_monitor_t *mon);

#endif
