/* PNG plots of memory against work, drawn by gnuplot.
 *
 * vl_plot_write writes a gnuplot script with the data inline (one `$NAME << EOD` block per line
 * drawn) to a scratch file, runs gnuplot on it (no shell; stdin and stdout on /dev/null, stderr
 * kept for the error message) with the PNG going to a second scratch file, checks its exit status,
 * and writes the PNG to its path as every output is written (outfile.h: whole, never half a
 * file). Both scratch files are unnamed from the start and reach gnuplot through /dev/fd, so no
 * exit leaves them behind. The script uses the pngcairo terminal, or png where gnuplot lacks
 * cairo; Debian's gnuplot-nox has both.
 *
 * The main panel shows memory (y) over the work axis (x, requests completed by default), one line
 * per series in distinct colours, thin solid grey vertical lines at the flushes, a shaded warm-up,
 * and for each series that carries an analysis: its OLS fit (dashed), its post-flush floors (rings)
 * and the floor trend (dash-dot with triangles). A high-water mark (a series whose verdict is
 * peak) is dashed and drawn under the others: it equals the resident set while that rises, and
 * would hide it. The legend names each series with its verdict and slope, every figure in plain
 * digits (never "1.2e+06"), and a key under the panel names each kind of mark.
 *
 * When series differ so much in size that one would lie flat along an axis, the panel shows each
 * series as its change from its first sample after the warm-up (VL_PLOT_Y_AUTO), and the y label
 * says so. An optional second panel shows p50 and p99 latency over the same work axis (the same
 * range and label), with the flushes and the warm-up drawn there too.
 */
#ifndef VLMLOAD_PLOT_H
#define VLMLOAD_PLOT_H

#include "vlmload/analyze.h"

#include <stddef.h>
#include <stdio.h>

#define VL_PLOT_WIDTH  1200
#define VL_PLOT_HEIGHT 700

/* What the error says when gnuplot cannot be found; vlmload prints it after "vlmload: ". */
#define VL_PLOT_NO_GNUPLOT "--plot needs gnuplot (apt-get install gnuplot-nox): not found on PATH"

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
  int width, height;   /* 0: VL_PLOT_WIDTH x VL_PLOT_HEIGHT; 320 x 200 to 16384 x 16384 */
  const char *title;   /* NULL: "Memory over <x_label>" */
  const char *x_label; /* NULL: "requests completed" */
  const char *y_unit;  /* NULL: "MB" */
  const vl_plot_line_t *lines;
  size_t n_lines;
  const double *flush_x; /* work axis value of each flush */
  size_t n_flush;
  double warmup_x; /* shade x below this; 0 for none */
  vl_plot_ymode_t y_mode;
  /* Optional latency panel: the work axis value at the end of each interval (the lines' x), and
   * the p50 and p99 in ms of the requests completed in it (either may be NULL). */
  const double *lat_x, *lat_p50, *lat_p99;
  size_t n_lat;
  const char *gnuplot; /* the program, as vl_plot_find_gnuplot takes it; NULL: gnuplot on PATH */
  int svg;             /* the script draws SVG (gnuplot's svg terminal) instead of PNG */
} vl_plot_t;

/* Finds the gnuplot program: `given` is a path when it holds a '/', else a name looked up in the
 * directories of $PATH (NULL or "": "gnuplot"). Returns 0 with *path set to a new string the
 * caller frees, or VL_ENOENT with err saying why: VL_PLOT_NO_GNUPLOT for the default name, else
 * which name or path is missing or not executable. */
int vl_plot_find_gnuplot(const char *given, char **path, char *err, size_t errlen);

/* Writes the gnuplot script that draws p into png_path, data included, to f. Returns 0,
 * VL_EINVAL for a bad size, or VL_EIO when f fails. */
int vl_plot_script(const vl_plot_t *p, const char *png_path, FILE *f);

/* Draws p with gnuplot and writes the PNG at path (vl_outfile_write). Returns 0,
 * VL_EINVAL (bad size), VL_ENOENT (no gnuplot) or VL_EIO (gnuplot failed, or a file could not be
 * written), with err saying why in one line. */
int vl_plot_write(const vl_plot_t *p, const char *path, char *err, size_t errlen);

/* Draws p with gnuplot as SVG (whatever p->svg says) and hands back the document in *svg, a new
 * NUL-terminated string the caller frees. Returns as vl_plot_write. */
int vl_plot_svg(const vl_plot_t *p, char **svg, char *err, size_t errlen);

#endif
