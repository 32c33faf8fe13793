/* The engine of `vlmload analyze`: reads a run's timeline (and optionally an external monitor's
 * CSV), finds its memory series and flushes, analyses each series (analyze.h), and writes the text
 * report, a JSON report and a PNG plot.
 *
 * Timeline columns are found by name; unknown columns are memory series, so new samplers need no
 * change here. Used: wall_ms and completed_total (required; a timeline from `vlmload merge` has
 * per-row "completed" instead, which is summed); flushes (a flush happened between two
 * rows where it increments; its window starts after the earlier row's time, at the later row's
 * request count); elapsed_s (run start = wall_ms - 1000 elapsed_s, where 0 requests were done);
 * phase (rows marked "warmup" are left out unless --warmup says otherwise; the warm-up ends at
 * the first row in another phase than "warmup" or "flush", since a flush may pause the warm-up);
 * e2e_p50_ms and
 * e2e_p99_ms (latency panel); images_sent_total, or images_sent, as the images axis: a running
 * total or per-row counts (then summed), told apart by which of sent_total and sent it keeps a
 * steady ratio to (a column that ever decreases is per row). Every other column is a memory
 * series, except the standard ones (report.c's header), names starting with "images", and names
 * ending in "_ms" (latencies) or "_total" (counters).
 *
 * A row's memory values were read when the row before it was written (vlmload's monitor reads
 * during the interval and the next row shows it; the first row's before the load): for flush
 * windows and a warm-up by time they count at that earlier time, so the row that counts a flush,
 * which still shows the memory from before it, stays in the window before the flush.
 *
 * A series named for a high-water mark ("hwm", "peak", "high_water" or "max_memory" in its
 * name, as hwm_mb.LABEL) only rises: it is analysed as such (vl_series_t.peak).
 *
 * Units come from the name: "*bytes*" is divided by 2^20, "*kib*" / "*_kb*" by 2^10, "*gib*" /
 * "*_gb*" multiplied by 2^10, all into MB; "*perc*", "*pct*", "*ratio*" stay unitless; anything
 * else is taken as MB already.
 *
 * External monitor CSV: a timestamp column (--external-time, else the first called timestamp, time,
 * ts, wall_ms, date or datetime, else the first column) in epoch s, epoch ms or ISO 8601; every
 * other numeric column is a series (columns whose first value is not a number are skipped as
 * text). Each sample is placed on the work axis by linear interpolation between the timeline rows
 * around its time; samples outside the run are dropped.
 */
#ifndef VLMLOAD_ANALYZECLI_H
#define VLMLOAD_ANALYZECLI_H

#include "vlmload/analyze.h"
#include "vlmload/csvin.h"

#include <cjson/cJSON.h>
#include <stdio.h>

typedef struct vl_analyze_cfg_s {
  int x_images;                /* work axis: 0 requests completed, 1 images sent */
  double warmup;               /* ignore samples below this much work; < 0: from the phase column */
  double warmup_s;             /* ignore samples before this many seconds into the run; 0 = none */
  const char *series;          /* comma-separated names to analyse; NULL = all */
  const char *ext_time;        /* timestamp column of the external CSV; NULL = guess */
  const char *plot;            /* PNG path, or NULL */
  int plot_width, plot_height; /* 0 = default */
  const char *gnuplot;         /* the program that draws it; NULL: gnuplot on PATH */
  const char *output;          /* JSON path, or NULL */
  FILE *text;                  /* the text report, or NULL for none */
  vl_analyze_opts_t opts;
} vl_analyze_cfg_t;

/* Defaults: requests axis, warm-up from the phase column, all series, no outputs, text to stdout.
 */
void vl_analyze_cfg_init(vl_analyze_cfg_t *cfg);

/* Analyses the timeline table (and the external one, or NULL): prints to cfg->text, writes
 * cfg->plot and cfg->output when set, and when json is not NULL hands back the report object
 * (caller frees with cJSON_Delete). timeline_name and external_name label the sources in the
 * report (NULL: the tables' own names). Returns 0, VL_EINVAL (bad input: missing column, bad
 * number, unknown --series name, no series at all), VL_EIO (an output cannot be written); err gets
 * one line. */
int vl_analyze_run(const vl_csv_t *timeline, const vl_csv_t *external, const vl_analyze_cfg_t *cfg,
                   cJSON **json, char *err, size_t errlen);

/* `vlmload analyze TIMELINE.csv [options]`: argv[0] is the subcommand's name ("analyze"), options
 * follow. Prints --help to stdout and one-line errors to stderr. Returns the exit status: 0, 1 when
 * an input cannot be read or an output written, 2 for bad usage. */
int vl_analyze_main(int argc, char **argv);

/* Writes the text `vlmload analyze --help` prints to f: a Usage line, a description, one line per
 * option ("  --name ARG   meaning", continued on lines indented further) and the verdicts. The
 * man page and the shell completion are generated from it. */
void vl_analyze_usage(FILE *f);

#endif
