/* Everything vlmload writes: the live progress line, the per-second timeline, the per-request
 * JSONL log, the text summary and the JSON summary.
 *
 * Output files are opened before the run starts, so a path that cannot be written is an error at
 * once and not after an hour. Each file is complete when vl_report_close returns, also after
 * Ctrl-C. A file written as the run goes that stops taking writes (a full disk) is said on stderr
 * once; the calls that write it return VL_EIO from then on, and the runner stops the run.
 * Files written at the end go through outfile.h.
 */
#ifndef VLMLOAD_REPORT_H
#define VLMLOAD_REPORT_H

#include "vlmload/config.h"
#include "vlmload/flush.h"
#include "vlmload/imagepool.h"
#include "vlmload/uniq.h"
#include "vlmload/stats.h"

#include <stdint.h>
#include <stdio.h>

typedef struct vl_report_s vl_report_t;

/* The state of a run at one moment. */
typedef struct vl_snapshot_s {
  uint64_t now_ns;  /* CLOCK_MONOTONIC */
  uint64_t t0_ns;   /* start of the schedule */
  int64_t wall0_ms; /* wall clock at t0 */
  int in_flight;
  const char *phase;              /* "warmup", "measure", "stopping" */
  const struct vl_monitor_s *mon; /* memory series, or NULL */
} vl_snapshot_t;

/* One phase (or sweep stage) of a run, for the summary. Latency figures are of its successful
 * requests. */
typedef struct vl_phase_result_s {
  const char *name;
  double target_rate; /* this shard's, at the start; 0 = closed loop */
  double ramp_to;     /* negative: no ramp */
  int max_concurrency;
  double seconds;  /* from its start to the next phase's (or the end of admission) */
  double paused_s; /* of that, admission paused for drained flushes */
  uint64_t sent, ok, failed, images;
  double e2e_sent_sum_s;         /* sum of its latencies from send, for the mean in flight */
  vl_hist_t e2e;                 /* latency of its requests (2 significant digits) */
  vl_hist_t ttft, tpot;          /* streamed requests' (2 significant digits) */
  uint64_t itl_sum_ns, itl_gaps; /* gaps between token events, in all, for the mean ITL */
  int knee;                      /* the first stage whose latency left its floor */
} vl_phase_result_t;

/* Facts about the finished run for the summary. */
typedef struct vl_run_meta_s {
  const char *model;
  const char *stop_reason; /* "requests", "duration", "signal", "error" */
  int interrupted;
  long socket_errors;
  uint64_t duration_ns; /* t0 to the last completion */
  uint64_t load_ns;     /* t0 to the end of admission, less the pauses for drained flushes in it */
  const vl_flush_t *flush;        /* NULL when no flushes were asked for */
  const vl_imagepool_t *pool;     /* NULL for text only */
  const vl_uniq_t *uniq;          /* NULL unless --unique-images */
  vl_phase_result_t *phases;      /* NULL for a run of one phase */
  const struct vl_monitor_s *mon; /* memory series, or NULL */
  int n_phases;
} vl_run_meta_t;

/* Opens every output the configuration names. On failure writes a one-line reason to err and
 * returns VL_EIO. */
int vl_report_open(vl_report_t **out, const vl_config_t *cfg, char *err, size_t errlen);

/* Prints "vlmload: line" on stderr, below the progress line if one is drawn. */
void vl_report_say(vl_report_t *rep, const char *line);

/* Appends one line to the request log (when there is one). Returns 0, or VL_EIO once the log has
 * failed a write. */
int vl_report_request(vl_report_t *rep, const vl_outcome_t *o, const vl_snapshot_t *snap);

/* Ends the timeline's header with the monitor's series (mon may be NULL). Call once, before the
 * first tick; series the monitor adds later are left out of the timeline. */
void vl_report_columns(vl_report_t *rep, const struct vl_monitor_s *mon);

/* Appends a phase boundary to the request log (when there is one). Returns as
 * vl_report_request. */
int vl_report_phase(vl_report_t *rep, int index, const char *name, const vl_snapshot_t *snap);

/* Appends a flush to the request log (when there is one). Returns as vl_report_request. */
int vl_report_flush(vl_report_t *rep, const vl_flush_record_t *f, const vl_snapshot_t *snap);

/* Ends an interval: writes a timeline row, flushes the request log and redraws the progress line.
 * The caller resets the interval counters afterwards. Returns 0, or VL_EIO once the timeline, the
 * samples or the request log has failed a write. */
int vl_report_tick(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap);

/* Writes the text summary (unless quiet) to stdout and the JSON summary (when asked). Returns 0 or
 * VL_EIO when a file could not be written completely. */
int vl_report_finish(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap,
                     const vl_run_meta_t *meta);

/* The JSON summary of a run (what --output holds). Caller owns the result. */
struct cJSON *vl_report_summary(const vl_config_t *cfg, const vl_stats_t *s,
                                const vl_run_meta_t *m);

/* Number of --max-* thresholds the finished run crossed (after vl_report_finish). */
int vl_report_thresholds_crossed(const vl_report_t *rep);

/* Flushes and closes every file. Returns 0 or VL_EIO when a write failed. */
int vl_report_close(vl_report_t *rep);

#endif
