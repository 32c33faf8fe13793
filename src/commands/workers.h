/* --workers N: one stream run by N processes of this machine, each a single-threaded loop pinned
 * to its own core, and its results merged as `vlmload merge` merges shards.
 *
 * The parent sends no load. It starts the workers (fork and exec of this program through
 * uv_spawn, the same command line, each in a session of its own so that only the parent gets a
 * terminal's Ctrl-C), draws the one progress line from what they report, forwards SIGINT and
 * SIGTERM to every worker (each stops as one process does: the first signal waits --grace for
 * its requests in flight, a second cancels them), and when all have exited writes the outputs
 * merged from theirs (merge.h): the text summary, --output, --timeline (the merged timeline's
 * columns) and --histograms (itself mergeable); --log-requests is the workers' logs one after
 * the other, each in its own order.
 *
 * Worker i of N is --shard i/N of the stream (the same ids and bodies as one process sends), on
 * the i-th core of the set this process may run on (sched_getaffinity). It learns that it is one
 * from the environment (VL_WORKERS_ENV, which it removes), writes its records into a private
 * directory (made with mkdtemp beside --output, or in $TMPDIR; removed at the end, kept and
 * named when a worker or the merge failed), and reports its figures to the parent on a pipe,
 * one JSON line per tick. The memory monitor (--monitor-*, --samples) runs in worker 0 only: its
 * series are sampled once, the progress line shows its readings, and the summary's "memory" and
 * "processes" are worker 0's.
 *
 * Exit status: the worst of the workers' and the merge's, in the order 0 < 3 (a --max-*
 * threshold crossed by the merged run) < 130 (interrupted) < 1 < any other; a worker killed by a
 * signal counts as 1.
 */
#ifndef VLMLOAD_WORKERS_H
#define VLMLOAD_WORKERS_H

#include "vlmload/config.h"
#include "vlmload/metrics.h"

#include <stdio.h>

/* Names the worker a process is; set by the parent for each worker, read by
 * vl_workers_child_setup. */
#define VL_WORKERS_ENV "VLMLOAD_WORKER"

/* Called once after the configuration is parsed. Refuses --workers with phases (said on stderr).
 * In a worker, makes c its share of the run (its shard, its private outputs, no progress line or
 * text summary, the model the parent chose) and pins the process to its core; elsewhere does
 * nothing more. Returns 0, or 2 after saying why. */
int vl_workers_child_setup(vl_config_t *c);

/* --dry-run: how many workers, on which cores (nothing for one). */
void vl_workers_describe(const vl_config_t *c, FILE *out);

/* The parent's vl_report_open: whether the files it writes at the end (--output, --timeline,
 * --histograms, --log-requests) can be written, asked before the run. Returns 0, or VL_EIO with a
 * one-line reason in err. */
int vl_workers_check_outputs(const vl_config_t *c, char *err, size_t errlen);

/* The parent of c->workers workers: runs them with this program's command line argv, model as
 * the model name, and writes the merged outputs; publishes their merged figures to metrics at
 * each tick and at the end (NULL: none). Returns the exit status (above). */
int vl_workers_run(const vl_config_t *c, const char *model, char **argv, vl_metrics_t *metrics);

#endif
