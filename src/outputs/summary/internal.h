/* What the summary's files share (summary.h): the figures both the JSON and the text give, each
 * computed once here, and the tables they show. json.c: the JSON summary and its thresholds;
 * text.c: the text summary; memory.c: the memory and process tables of both; figures.c: the
 * figures. */
#ifndef VLMLOAD_SUMMARY_INTERNAL_H
#define VLMLOAD_SUMMARY_INTERNAL_H

#include "vlmload/summary.h"
#include "vlmload/common.h"
#include "vlmload/monitor.h"
#include "vlmload/profile.h"
#include "vlmload/rateauto.h"
#include "vlmload/settings.h"
#include "vlmload/sizestats.h"
#include "vlmload/text.h"
#include "vlmload/trace.h"
#include "vlmload/turnstats.h"

#include "../lensum.h"

#include <stdio.h>

struct cJSON;

/* The column where the summary's values start, after "  label      ". */
#define VALUES 13

/* A phase's figures in milliseconds, NaN where it measured none. */
typedef struct {
  double achieved, ok_per_s, in_flight, p50, p99, ttft_mean, ttft_p50, ttft_p99, itl_mean,
      tpot_mean, tpot_p50, tpot_p99;
} phase_figs_t;

/* Where the run's time went: load (admission open), paused for drained flushes, and finishing
 * the requests in flight after admission ended (less any pause in that). */
typedef struct {
  double total, load, paused, finishing;
  uint64_t pauses;
} run_time_t;

/* Images sent, aggregated by size and format. */
typedef struct {
  int w, h;
  vl_image_fmt_t fmt;
  uint64_t count;
} sizerow_t;

/* A figure as a JSON number, or null when it was not measured (NaN). */
void vl__summary_num(struct cJSON *o, const char *name, double v);
/* Percentile p of h in milliseconds; NaN when h is empty. */
double vl__summary_pct_ms(const vl_hist_t *h, double p);
/* The percentiles the summary reports: --percentiles, else the list it always had. */
int vl__summary_pcts(const vl_config_t *c, const double **p);
void vl__summary_phase_figs(const vl_phase_result_t *p, phase_figs_t *f);
/* Whether the run (every phase of it) kept a number of requests in flight rather than following
 * a schedule. */
int vl__summary_closed_loop(const vl_config_t *c, const vl_run_meta_t *m);
/* This process's target rate: NaN for a closed loop and for a run of phases. */
double vl__summary_target_rate(const vl_config_t *c, const vl_run_meta_t *m);
/* The cap on requests in flight: NaN for phases with different caps. */
double vl__summary_max_concurrency(const vl_config_t *c, const vl_run_meta_t *m);
/* bench_serving's concurrency, the mean in flight (Little's law); NaN when nothing was measured. */
double vl__summary_mean_in_flight(const vl_stats_t *s);
void vl__summary_run_time(const vl_stats_t *s, const vl_run_meta_t *m, run_time_t *t);
/* count per second of load (the time admission was open, less its flush pauses); NaN: no load. */
double vl__summary_per_load_s(double count, const vl_run_meta_t *m);
/* The sends' own rate, (n - 1) over their span less its pauses; and with the pauses in. */
double vl__summary_send_span_rate(const vl_stats_t *s);
double vl__summary_wall_rate(const vl_stats_t *s);
/* The flushes' waits for idle on the server's side (vl_flush_record_t.server_wait_ms): how many
 * flushes asked for one, their mean and largest, in milliseconds (NaN when none). */
void vl__summary_flush_wait(const vl_flush_t *f, size_t *n, double *mean, double *max);
/* Rows of the resolution table, most sent first; *n gets their number. Caller frees. */
sizerow_t *vl__summary_size_table(const vl_stats_t *s, const vl_imagepool_t *pool, size_t *n);

#endif
