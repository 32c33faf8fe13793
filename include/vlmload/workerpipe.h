/* A --workers worker's figures on its pipe to the parent, one line a tick: the worker writes its
 * progress figures and latency histograms, the parent reads them back for its one progress line
 * (workers.h). The line is plain numbers, cheap to write and read at every tick however many
 * buckets the histograms use:
 *   SENT OK FAILED DROPPED IN_FLIGHT RATE RSS_MB GPU_MB PHASE  E2E  TTFT
 * where each histogram is MAX N followed by N pairs INDEX COUNT of its non-empty buckets. */
#ifndef VLMLOAD_WORKERPIPE_H
#define VLMLOAD_WORKERPIPE_H

#include "vlmload/hist.h"
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

#endif
