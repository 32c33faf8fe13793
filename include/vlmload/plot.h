/* PNG plots of memory against work, drawn by a small rasterizer of our own and written with libpng.
 *
 * The main panel shows memory (y) over the work axis (x, requests completed by default), one line
 * per series in distinct colours, dashed vertical markers at the flushes, a shaded warm-up, and for
 * each series that carries an analysis: its OLS fit (dashed), its post-flush floors (rings) and the
 * floor trend (dotted). Axes have "nice" ticks with numeric labels; the title and the legend use an
 * embedded 5x7 bitmap font (ASCII 32..126; other bytes draw as '?').
 *
 * When series differ so much in size that one would lie flat along an axis, the panel shows each
 * series as its change from its first sample after the warm-up (VL_PLOT_Y_AUTO), and the y label
 * says so. An optional second panel shows p50 and p99 latency over elapsed time.
 */
#ifndef VLMLOAD_PLOT_H
#define VLMLOAD_PLOT_H

#include "vlmload/analyze.h"

#include <stddef.h>
#include <stdint.h>

#define VL_PLOT_WIDTH  1200
#define VL_PLOT_HEIGHT 700

typedef enum {
  VL_PLOT_Y_AUTO = 0, /* absolute, or change from the first sample when sizes differ a lot */
  VL_PLOT_Y_ABS,
  VL_PLOT_Y_DELTA,
} vl_plot_ymode_t;

/* One series. Arrays are borrowed for the call; samples in time order; NAN in y breaks the line. */
typedef struct vl_plot_line_s {
  const char *name;
  const double *x, *y;
  size_t n;
  const vl_analysis_t *an; /* optional: fit, floors and verdict drawn for it */
} vl_plot_line_t;

typedef struct vl_plot_s {
  int width, height;   /* 0: VL_PLOT_WIDTH x VL_PLOT_HEIGHT; at least 320 x 200 */
  const char *title;   /* NULL: "Memory over <x_label>" */
  const char *x_label; /* NULL: "requests completed" */
  const char *y_unit;  /* NULL: "MB" */
  const vl_plot_line_t *lines;
  size_t n_lines;
  const double *flush_x; /* work axis value of each flush */
  size_t n_flush;
  double warmup_x; /* shade x below this; 0 for none */
  vl_plot_ymode_t y_mode;
  /* Optional latency panel: elapsed seconds, and p50 and p99 in ms (either may be NULL). */
  const double *lat_t, *lat_p50, *lat_p99;
  size_t n_lat;
} vl_plot_t;

/* Renders into a new buffer of *width x *height RGB pixels, 3 bytes each, rows top down, owned by
 * the caller (free()). Returns 0 or VL_EINVAL for a bad size. */
int vl_plot_render(const vl_plot_t *p, uint8_t **rgb, int *width, int *height);

/* Renders and writes a PNG file at path. Returns 0, VL_EINVAL, or VL_EIO with err saying why. */
int vl_plot_write(const vl_plot_t *p, const char *path, char *err, size_t errlen);

#endif
