/* Memory series read from a run's timeline (and optionally an external monitor's CSV), placed on
 * the work axes, with the run's flushes and warm-up: the input of the leak analysis (analyze.h),
 * which `vlmload analyze` and --analyze run on them.
 *
 * Timeline columns are found by name; unknown columns are memory series, so new samplers need no
 * change here. Used: wall_ms and completed_total (required; a timeline from `vlmload merge` has
 * per-row "completed" instead, which is summed); flushes (a flush happened between two
 * rows where it increments; its window starts after the earlier row's time, at the later row's
 * request count); elapsed_s (run start = wall_ms - 1000 elapsed_s, where 0 requests were done);
 * phase (rows marked "warmup" are left out unless --warmup says otherwise; the warm-up ends at
 * the first row in another phase than "warmup" or "flush", since a flush may pause the warm-up);
 * e2e_p50_ms and
 * e2e_p99_ms (latency panel); text_only_total and image_megapixels_total (the attribution's
 * other two regressors, with the images; placed on an external sample by time); images_sent_total,
 * or images_sent, as the images axis: a running total or per-row counts (then summed), told apart
 * by which of sent_total and sent it keeps a steady ratio to (a column that ever decreases is per
 * row). Every other column is a memory series, except the standard ones (timeline.h's table), names
 * starting with "images", and names ending in "_ms" (latencies) or "_total" (counters).
 *
 * A row's memory values were read when the row before it was written (vlmload's monitor reads
 * during the interval and the next row shows it; the first row's before the load): for flush
 * windows and the warm-up they count at that earlier time, so the row that counts a flush, which
 * still shows the memory from before it, stays in the window before the flush, and a warm-up of
 * --warmup N ends at the first row with N done, in time, as one from the phase column does.
 *
 * A series named for a high-water mark ("hwm", "peak", "high_water" or "max_memory" in its
 * name, as hwm_mb.LABEL) only rises: it is analysed as such (vl_series_t.peak).
 *
 * Units come from the name (vl_memunit_series, the rule the monitor names its series by): a name
 * that states a unit of memory ("bytes", "_kb", "kib", "_mb", "_gb", ...) is brought to MB (2^20
 * bytes); a name that is no memory -- a Prometheus series (prom.*) whose metric states no unit of
 * memory, as a gauge of requests or a ratio, or a name of a share ("perc", "pct", "ratio") --
 * keeps its values, in "units", and is marked not_memory (the analysis gives it no verdict on
 * growth); any other name is taken as MB already.
 *
 * External monitor CSV: a timestamp column (--external-time, else the first called timestamp, time,
 * ts, wall_ms, date or datetime, else the first column) in epoch s, epoch ms or ISO 8601; every
 * other numeric column is a series (columns whose first value is not a number are skipped as
 * text). Each sample is placed on the work axis by linear interpolation between the timeline rows
 * around its time; samples outside the run are dropped.
 */
#ifndef VLMLOAD_SERIES_H
#define VLMLOAD_SERIES_H

#include "vlmload/analyze.h"
#include "vlmload/csvin.h"

#include <stddef.h>

/* What to read. */
typedef struct vl_series_opts_s {
  int x_images;         /* work axis: 0 requests completed, 1 images sent */
  double warmup;        /* ignore samples below this much work; < 0: from the phase column */
  double warmup_s;      /* ignore samples before this many seconds into the run; 0 = none */
  const char *series;   /* comma-separated names to read; NULL = all */
  const char *ext_time; /* timestamp column of the external CSV; NULL = guess */
} vl_series_opts_t;

/* One memory series: n samples in time order (NAN marks a missing one). */
typedef struct vl_series_mem_s {
  char *name;              /* as in the file; "ext:NAME" for an external column named as a
                              timeline's series */
  const char *unit;        /* "MB" or "units" (static; "units": not_memory) */
  double *x, *x2, *y, *t;  /* work axis, second axis (NAN without one), value, read time (ms) */
  double *img, *txt, *mpx; /* images, text-only requests and image megapixels sent by the time the
                              value was read (NAN: unknown) */
  size_t n;
  int peak;       /* a high-water mark: only rises */
  int not_memory; /* its name says it is no memory (unit "units") */
} vl_series_mem_t;

/* A run's series, axes, flushes and warm-up. Every array is owned and freed by vl_series_free. */
typedef struct vl_series_set_s {
  int x_images;                /* the axis X is: as vl_series_opts_t */
  const char *tl_name;         /* the timeline's source name (borrowed from its table) */
  const char *ext_name;        /* the external file's, or NULL */
  size_t rows;                 /* of the timeline */
  double *wall, *req, *img;    /* per row: wall ms, requests completed, images sent (or NULL) */
  double *elapsed, *p50, *p99; /* per row, or NULL when the timeline lacks the column */
  double *fl, *ok;             /* per row: flushes so far, requests ok in the row; or NULL */
  double *txt, *mpx;           /* per row: text-only requests, image megapixels so far; or NULL */
  double *X, *X2;              /* the work axes: borrowed from req / img (X2 may be NULL) */
  double t0;                   /* run start (wall ms), or NAN */
  double *kt, *kx, *kt2, *kx2; /* interpolation knots, time to X and to X2 */
  size_t nk, nk2;
  vl_flush_event_t *flushes; /* in time order */
  size_t n_flushes;
  double warmup_x, warmup_t; /* samples below this work, or before this wall ms, are left out */
  const char *warmup_from;   /* what set the warm-up: "none", "--warmup", "phase column", ... */
  vl_series_mem_t *ser;      /* the timeline's series first, then the external file's */
  size_t nser;
  size_t ext_rows, ext_used, ext_dropped; /* external samples: all, inside the run, outside */
} vl_series_set_t;

void vl_series_opts_init(vl_series_opts_t *o);

/* Reads the series of the timeline table (and of the external one, or NULL) into *set, which the
 * caller frees with vl_series_free (also after a failure). Returns 0, VL_EINVAL (bad input:
 * missing column, bad number, no series at all), VL_ENOENT (an unknown --series name or
 * --external-time column, --x images without an images column); err gets one line. */
int vl_series_read(vl_series_set_t *set, const vl_csv_t *timeline, const vl_csv_t *external,
                   const vl_series_opts_t *o, char *err, size_t errlen);

/* The analysis input of series k of set; its arrays are borrowed from set. */
void vl_series_input(const vl_series_set_t *set, size_t k, vl_series_t *in);

/* Where the warm-up ends on the X axis: warmup_x, or the work done at warmup_t; 0 when none. */
double vl_series_warmup_at(const vl_series_set_t *set);

void vl_series_free(vl_series_set_t *set);

#endif
