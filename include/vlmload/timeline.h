/* The timeline's schema and its rows: one table of the standard columns (name, printf format,
 * where the value sits in a row), used by the run's writer (report.c), by `vlmload merge
 * --timeline` and by the reader that tells memory series from standard columns (series.c).
 *
 * A row is the standard columns, in table order, then one column per memory series (the
 * monitor's, named as it names them). As CSV, the header names every column and each row holds
 * a cell per column; a value not measured (NaN: the latency of an interval in which nothing
 * completed) is an empty cell. As JSON lines, each row is one object keyed by column name, with
 * null for a value not measured, the phase as a string and every other value a number.
 *
 * Adding a column: a field in vl_timeline_row_t, a line in the table (timeline.c) and a line in
 * vl_timeline_row_fill. Nothing else changes; readers find columns by name.
 */
#ifndef VLMLOAD_TIMELINE_H
#define VLMLOAD_TIMELINE_H

#include "vlmload/stats.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct vl_monitor_s;
struct vl_monitor_s;

/* The state of a run at one moment. */
typedef struct vl_snapshot_s {
  uint64_t now_ns;  /* CLOCK_MONOTONIC */
  uint64_t t0_ns;   /* start of the schedule */
  int64_t wall0_ms; /* wall clock at t0 */
  int in_flight;
  const char *phase;              /* "warmup", "measure", "stopping" */
  const struct vl_monitor_s *mon; /* memory series, or NULL */
  double target_rate;             /* the current phase's --rate at its start; 0: a closed loop */
} vl_snapshot_t;

/* Which timeline a column belongs to (bits of vl_timeline_col_t.in). */
#define VL_TIMELINE_RUN    1u /* a run's --timeline: every standard column */
#define VL_TIMELINE_MERGED 2u /* `vlmload merge --timeline`: one row per wall-clock second */

/* The values of one row's standard columns. Counters named *_total are the run's so far; the
 * others without a unit count the interval the row ends. */
typedef struct vl_timeline_row_s {
  int64_t wall_ms;   /* wall clock at the row's end */
  double elapsed_s;  /* since the start of the schedule */
  const char *phase; /* "warmup", "measure", "flush", "stopping" or a phase's name; borrowed */
  int64_t in_flight; /* requests in flight at the row's end */
  uint64_t sent_total, completed_total, ok_total, failed_total, dropped_total;
  uint64_t sent, completed, ok, failed;
  double rate_sent, rate_ok;     /* per second over the interval */
  double e2e_p50_ms, e2e_p99_ms; /* of the interval's successful requests; NaN when none */
  uint64_t completion_tokens;    /* of the interval */
  uint64_t flushes;              /* finished so far */
  uint64_t images_sent;          /* so far */
  uint64_t images_repeated;      /* so far: --image-reuse repeats */
  uint64_t good;                 /* of the interval's requests, those meeting every --slo bound
                                    (with no --slo, every one that succeeded) */
  uint64_t text_only_total;      /* requests sent without images, so far */
  double image_megapixels_total; /* pixels of the images sent so far, in millions */
} vl_timeline_row_t;

typedef enum {
  VL_TIMELINE_I64, /* int64_t */
  VL_TIMELINE_U64, /* uint64_t */
  VL_TIMELINE_F64, /* double; NaN is a value not measured */
  VL_TIMELINE_STR, /* const char * */
} vl_timeline_type_t;

/* One standard column. */
typedef struct vl_timeline_col_s {
  const char *name;
  const char *fmt; /* printf format of the value, for its type */
  vl_timeline_type_t type;
  size_t offset; /* of the value in vl_timeline_row_t */
  unsigned in;   /* VL_TIMELINE_* bits: the timelines that have it */
} vl_timeline_col_t;

/* The standard columns in header order; *n gets their number. The table is static. */
const vl_timeline_col_t *vl_timeline_columns(size_t *n);

/* Whether name is a standard column of a run's timeline. */
int vl_timeline_is_column(const char *name);

/* A run's row at the end of an interval of secs seconds (> 0): the counters of s, the interval's
 * counters and latency histogram (s->iv, s->iv_e2e), and the moment, the phase and the requests in
 * flight of snap. r->phase borrows snap->phase. */
void vl_timeline_row_fill(vl_timeline_row_t *r, const vl_stats_t *s,
                          const struct vl_snapshot_s *snap, double secs);

/* Writes the names of the standard columns of timeline `which`, comma-separated, without a
 * newline: the CSV header is finished by vl_timeline_header_end. */
void vl_timeline_header(FILE *f, unsigned which);

/* Finishes the CSV header: the names of the first n_mem series of mon (NULL when n_mem is 0),
 * then a newline. */
void vl_timeline_header_end(FILE *f, const struct vl_monitor_s *mon, size_t n_mem);

/* Writes one row of timeline `which`, newline included: the standard columns from r, then the
 * latest reading of the first n_mem series of mon (an empty cell, or null, for a series without
 * a valid reading). jsonl: a JSON object instead of a CSV line. Errors stay in f (ferror). */
void vl_timeline_write(FILE *f, unsigned which, int jsonl, const vl_timeline_row_t *r,
                       const struct vl_monitor_s *mon, size_t n_mem);

#endif
