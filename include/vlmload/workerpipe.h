/* A --workers worker's figures on its pipe to the parent, one line a tick: the worker writes its
 * progress figures and latency histograms, the parent reads them back for its one progress line
 * (workers.h). The line is plain numbers, cheap to write and read at every tick however many
 * buckets the histograms use:
 *   SENT OK FAILED DROPPED IN_FLIGHT RATE RSS_MB GPU_MB PHASE  E2E  TTFT
 * where each histogram is MAX N followed by N pairs INDEX COUNT of its non-empty buckets. */
#ifndef VLMLOAD_WORKERPIPE_H
#define VLMLOAD_WORKERPIPE_H

#include "vlmload/hist.h"
#include "vlmload/metrics.h"
#include "vlmload/progress.h"
#include "vlmload/stats.h"

#include <stddef.h>

/* This process is a worker that reports on descriptor fd (blocking). */
void vl_workerpipe_open(int fd);

/* The descriptor this worker reports on, or -1 outside a worker. */
int vl_workerpipe_fd(void);

/* A worker's figures at one tick, for the parent's line: p as a progress line would show them,
 * s for the latency histograms of the run so far. Blocks until the line is written; a parent
 * gone ends the reports. */
void vl_workerpipe_report(const vl_progress_t *p, const vl_stats_t *s);

/* Reads one report line (without its newline) into p, its phase into phase[0..n) ("" for none)
 * and its histograms into e2e and ttft (emptied first; they must have the layout the worker's
 * have). Returns 0, or -1 on a malformed line. */
int vl_workerpipe_parse(char *line, vl_progress_t *p, char *phase, size_t n, vl_hist_t *e2e,
                        vl_hist_t *ttft);

/* --metrics-listen: a worker's figures for the parent's endpoint, one more line a tick after its
 * progress line, marked by a leading "M":
 *   M SENT OK FAILED DROPPED IN_FLIGHT FLUSHES IMAGES IMAGE_BYTES PROMPT COMPLETION
 *     ERRORS(VL_ERR__COUNT) TARGET ACHIEVED ELAPSED PAUSED PHASE
 *     E2E E2E_SENT TTFT ITL TPOT SEND_LAG  N_MEM (SERIES BYTES)*N_MEM
 * where each histogram is TOTAL SUM N followed by N pairs INDEX COUNT. Blocks as
 * vl_workerpipe_report. */
void vl_workerpipe_report_metrics(const vl_metrics_figures_t *f);

/* One worker's latest figures as the parent keeps them: f's histograms point at hist, its memory
 * series at mem (their names into names). */
#define VL_WORKERPIPE_HISTS 6
typedef struct vl_workerpipe_metrics_s {
  vl_metrics_figures_t f;
  vl_hist_t hist[VL_WORKERPIPE_HISTS]; /* e2e, e2e_sent, ttft, itl, tpot, send_lag */
  char phase[32];
  vl_metrics_mem_t *mem;
  char **names;
  size_t n_mem, cap_mem;
  int reported; /* a line has come */
} vl_workerpipe_metrics_t;

/* Sets m up empty (histograms of vlmload's layout); frees it. Returns 0 or VL_ENOMEM. */
int vl_workerpipe_metrics_init(vl_workerpipe_metrics_t *m);
void vl_workerpipe_metrics_free(vl_workerpipe_metrics_t *m);

/* Reads one "M" line (without its newline) into m. Returns 0, or -1 on a malformed line (m then
 * holds part of it and is not marked reported). */
int vl_workerpipe_parse_metrics(char *line, vl_workerpipe_metrics_t *m);

/* Adds src's figures into dst: counters, the achieved rate, in flight and histograms summed; the
 * target rate, phase and memory series are src's when dst has none yet (worker 0's come first:
 * its monitor is the run's, and every shard follows the whole schedule). */
void vl_workerpipe_metrics_add(vl_workerpipe_metrics_t *dst, const vl_workerpipe_metrics_t *src);

/* Empties m's figures, keeping its memory. */
void vl_workerpipe_metrics_reset(vl_workerpipe_metrics_t *m);

#endif
