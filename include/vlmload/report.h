/* The outputs of a run: opens every file the configuration names, writes the per-request JSONL
 * log (requests, phase boundaries, flushes), a timeline row (timeline.h), the memory samples and
 * the live progress line (progress.h) at each tick, and at the end the text and JSON summaries
 * (summary.h), the --histograms record and the --analyze / --plot read-back of the timeline.
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
#include "vlmload/timeline.h"
#include "vlmload/flush.h"
#include "vlmload/imagepool.h"
#include "vlmload/uniq.h"
#include "vlmload/stats.h"
#include "vlmload/summary.h"

#include <stdint.h>
#include <stdio.h>

typedef struct vl_report_s vl_report_t;

/* Opens every output the configuration names. On failure writes a one-line reason to err and
 * returns VL_EIO. */
int vl_report_open(vl_report_t **out, const vl_config_t *cfg, char *err, size_t errlen);

/* --metrics-listen: each tick from now on, and the end, publish the run's figures to m (not
 * owned; it must outlive rep's last call). */
struct vl_metrics_s;
void vl_report_metrics(vl_report_t *rep, struct vl_metrics_s *m);

/* Prints "vlmload: line" on stderr, below the progress line if one is drawn. */
void vl_report_say(vl_report_t *rep, const char *line);

/* Appends one line to the request log (when there is one). Returns 0, or VL_EIO once the log has
 * failed a write. */
int vl_report_request(vl_report_t *rep, const vl_outcome_t *o, const vl_snapshot_t *snap);

/* Ends the timeline's header with the monitor's series (mon may be NULL). Call once, before the
 * first tick. Series the monitor adds later are followed from the tick that sees them; a CSV
 * timeline in a regular file gets their columns, its header completed at the end of the run. */
void vl_report_columns(vl_report_t *rep, const struct vl_monitor_s *mon);

/* Appends a phase boundary to the request log (when there is one). Returns as
 * vl_report_request. */
int vl_report_phase(vl_report_t *rep, int index, const char *name, const vl_snapshot_t *snap);

/* Appends a flush to the request log (when there is one). Returns as vl_report_request. */
int vl_report_flush(vl_report_t *rep, const vl_flush_record_t *f, const vl_snapshot_t *snap);
/* Appends the event object o (its "event" names it) to the request log, and frees o. Returns as
 * vl_report_request. */
int vl_report_event(vl_report_t *rep, struct cJSON *o);

/* Ends an interval: writes a timeline row, flushes the request log and redraws the progress line.
 * The caller resets the interval counters afterwards. Returns 0, or VL_EIO once the timeline, the
 * samples or the request log has failed a write. */
int vl_report_tick(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap);

/* Writes the text summary (unless quiet) to stdout and the JSON summary (when asked). Returns 0 or
 * VL_EIO when a file could not be written completely. */
int vl_report_finish(vl_report_t *rep, const vl_stats_t *s, const vl_snapshot_t *snap,
                     const vl_run_meta_t *meta);

/* Number of --max-* thresholds the finished run crossed (after vl_report_finish). */
int vl_report_thresholds_crossed(const vl_report_t *rep);

/* Flushes and closes every file. Returns 0 or VL_EIO when a write failed. */
int vl_report_close(vl_report_t *rep);

#endif
