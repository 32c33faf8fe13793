#include "vlmload/plot.h"
#include "vlmload/common.h"
#include "vlmload/outfile.h"
#include "vlmload/text.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Tableau 10: distinct hues that stay apart for the colour-blind too. */
static const char *const PALETTE[] = {"1f77b4", "ff7f0e", "2ca02c", "d62728", "9467bd",
                                      "8c564b", "e377c2", "7f7f7f", "bcbd22", "17becf"};
/* The same, 70% as bright: fits and floors of each series. */
static const char *const DARKER[] = {"15537d", "b25809", "1e701e", "951b1c", "674884",
                                     "623c34", "9e5387", "585858", "838417", "108590"};

#define INK  "222222"
#define AXIS "5a5a5a"
/* Flushes: thin solid lines in one grey, darker than the grid, in both panels. */
#define FLUSH "a8a8a8"
#define SHADE "ececec"
#define GRID  "e8e8e8"

/* ---- finding gnuplot -------------------------------------------------------------------------
 */

static int executable(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int vl_plot_find_gnuplot(const char *given, char **path, char *err, size_t errlen) {
  const char *name = given && *given ? given : "gnuplot";
  *path = NULL;
  if (strchr(name, '/')) {
    if (executable(name)) {
      *path = vl_xstrdup(name);
      return 0;
    }
    snprintf(err, errlen, "--gnuplot '%s': not an executable file", name);
    return VL_ENOENT;
  }
  /* As execvp searches: each directory of $PATH in turn, an empty entry meaning the current one.
   */
  const char *dirs = getenv("PATH");
  if (!dirs)
    dirs = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = dirs;;) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    size_t n = len + strlen(name) + 3;
    char *cand = vl_xmalloc(n);
    snprintf(cand, n, "%.*s%s%s", (int)len, len ? p : ".", len && p[len - 1] == '/' ? "" : "/",
             name);
    if (executable(cand)) {
      *path = cand;
      return 0;
    }
    free(cand);
    if (!end)
      break;
    p = end + 1;
  }
  if (strcmp(name, "gnuplot") == 0)
    snprintf(err, errlen, "%s", VL_PLOT_NO_GNUPLOT);
  else
    snprintf(err, errlen, "--gnuplot '%s': not found on PATH", name);
  return VL_ENOENT;
}

/* ---- ranges and legend text -------------------------------------------------------------------
 */

/* Widens [lo, hi] by frac of its width on each side, or around a single value. */
static void pad_range(double *lo, double *hi, double frac) {
  if (!(*hi > *lo)) {
    double d = fabs(*lo) > 0 ? fabs(*lo) * 0.05 : 1;
    *lo -= d;
    *hi += d;
    return;
  }
  double d = (*hi - *lo) * frac;
  *lo -= d;
  *hi += d;
}

/* A range that starts near 0 (within a tenth of its end) starts at 0. */
static void anchor_zero(double *lo, double hi) {
  if (*lo > 0 && *lo < 0.1 * hi)
    *lo = 0;
}

/* The value each line is shown relative to: 0 for absolute plots, else its first sample after the
 * warm-up (or its first sample). */
static void baselines(const vl_plot_t *pl, int delta, double *base) {
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_plot_line_t *ln = &pl->lines[l];
    base[l] = 0;
    if (!delta)
      continue;
    if (ln->an && isfinite(ln->an->y_first)) {
      base[l] = ln->an->y_first;
      continue;
    }
    double first = NAN, after = NAN;
    for (size_t i = 0; i < ln->n && isnan(after); i++) {
      if (!isfinite(ln->y[i]) || !isfinite(ln->x[i]))
        continue;
      if (isnan(first))
        first = ln->y[i];
      if (ln->x[i] >= pl->warmup_x)
        after = ln->y[i];
    }
    base[l] = isfinite(after) ? after : isfinite(first) ? first : 0;
  }
}

/* Whether the series lie so far apart that a shared absolute axis would flatten the one that moves
 * most: the span of all of them over four times the widest single span. */
static int wants_delta(const vl_plot_t *pl) {
  if (pl->n_lines < 2)
    return 0;
  double lo = INFINITY, hi = -INFINITY, widest = 0;
  for (size_t l = 0; l < pl->n_lines; l++) {
    double a = INFINITY, b = -INFINITY;
    for (size_t i = 0; i < pl->lines[l].n; i++) {
      double v = pl->lines[l].y[i];
      if (isfinite(v) && isfinite(pl->lines[l].x[i])) {
        a = fmin(a, v);
        b = fmax(b, v);
      }
    }
    if (a > b)
      continue;
    lo = fmin(lo, a);
    hi = fmax(hi, b);
    widest = fmax(widest, b - a);
  }
  return hi > lo && hi - lo > 4 * widest;
}

/* The ends of a fitted line (slope per 1000 x) between xa and xb. */
static void fit_ends(const vl_fit_t *f, double xa, double xb, double *ya, double *yb) {
  *ya = f->intercept + f->slope / 1000 * xa;
  *yb = f->intercept + f->slope / 1000 * xb;
}

static int has_data(const vl_plot_line_t *ln) {
  for (size_t i = 0; i < ln->n; i++)
    if (isfinite(ln->x[i]) && isfinite(ln->y[i]))
      return 1;
  return 0;
}

static int analysed(const vl_analysis_t *an) {
  return an && an->verdict != VL_VERDICT_INSUFFICIENT;
}

static int levels(const vl_analysis_t *an) {
  return an && an->verdict == VL_VERDICT_LEVELS_OFF && isfinite(an->rise.slope) &&
         isfinite(an->rise.intercept) && isfinite(an->level_x);
}

static int has_fit(const vl_analysis_t *an) {
  return levels(an) || (analysed(an) && isfinite(an->ols.slope) && isfinite(an->ols.intercept));
}

/* The fitted line drawn for a series, as up to 3 points: the broken line that rises and levels
 * off for levels-off (the verdict's own fit), the OLS line otherwise. Returns the count. */
static size_t fit_points(const vl_analysis_t *an, double *x, double *y) {
  if (levels(an)) {
    int fl = strcmp(an->level_on, "floor") == 0;
    x[0] = fl && an->n_windows ? an->windows[0].x : an->x_first;
    x[1] = an->level_x;
    x[2] = fl && an->n_windows ? an->windows[an->n_windows - 1].x : an->x_last;
    for (int i = 0; i < 3; i++)
      y[i] = an->rise.intercept + an->rise.slope / 1000 * fmin(x[i], an->level_x);
    return 3;
  }
  fit_ends(&an->ols, an->x_first, an->x_last, &y[0], &y[1]);
  x[0] = an->x_first;
  x[1] = an->x_last;
  return 2;
}

/* A high-water mark (VmHWM) only rises and equals the resident set while that rises too: drawn
 * dashed and under the other lines, so that the line it equals stays in sight. */
static int high_water(const vl_plot_line_t *ln) {
  return ln->an && ln->an->verdict == VL_VERDICT_PEAK;
}

#define HIGH_WATER_STYLE "with lines dashtype (5,4) linewidth 1.6"

static int has_trend(const vl_analysis_t *an) {
  return analysed(an) && !levels(an) && an->n_windows >= 3 && isfinite(an->floor.slope) &&
         isfinite(an->floor.intercept);
}

/* The legend text of a series: its name, verdict and deciding slope, and its baseline in delta
 * mode. */
static void series_label(const vl_plot_line_t *ln, int delta, double base, char *out, size_t n) {
  const vl_analysis_t *an = ln->an;
  char what[224] = "", from[48] = "";
  if (an) {
    what[0] = ':';
    what[1] = ' ';
    vl_analyze_label(an, what + 2, sizeof(what) - 2);
    /* The mechanism closes it: "; leak in heap". */
    if (an->verdict != VL_VERDICT_NOT_MEMORY && an->verdict != VL_VERDICT_PEAK) {
      size_t l = strlen(what);
      int where = an->mechanism != VL_MECH_NONE && an->mechanism != VL_MECH_UNKNOWN &&
                  an->where_kind && strcmp(an->where_kind, "rss") != 0 &&
                  strcmp(an->where_kind, "series") != 0;
      snprintf(what + l, sizeof(what) - l, "; %s%s%s", vl_analyze_mechanism_name(an->mechanism),
               where ? " in " : "", where ? an->where_kind : "");
    }
  }
  if (delta && has_data(ln)) {
    char num[40];
    snprintf(from, sizeof(from), " (from %s)", vl_text_num(num, sizeof(num), base, 5, 0));
  }
  snprintf(out, n, "%s%s%s", ln->name ? ln->name : "", what, from);
}

/* ---- the script -------------------------------------------------------------------------------
 */

/* A gnuplot single-quoted string: a quote is doubled, control bytes become '?'. */
static void put_str(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '\'')
      fputs("''", f);
    else if (c < 32 || c == 127)
      fputc('?', f);
    else
      fputc(c, f);
  }
  fputc('\'', f);
}

/* A data block of (x, y - base) rows; a missing value ends a line with a blank row. Points with
 * no drawn neighbour, which a line would not show, also go to *lone (when not NULL) as a block of
 * their own. Returns how many rows went to `name`. */
static size_t put_xy(FILE *f, const char *name, const double *x, const double *y, size_t n,
                     double base, const char *lone, size_t *n_lone) {
  size_t rows = 0;
  int gap = 1;
  fprintf(f, "$%s << EOD\n", name);
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i]) || !isfinite(y[i])) {
      if (!gap)
        fputc('\n', f);
      gap = 1;
      continue;
    }
    fprintf(f, "%.10g %.10g\n", x[i], y[i] - base);
    rows++;
    gap = 0;
  }
  fputs("EOD\n", f);
  if (lone) {
    *n_lone = 0;
    fprintf(f, "$%s << EOD\n", lone);
    for (size_t i = 0; i < n; i++) {
      int ok = isfinite(x[i]) && isfinite(y[i]);
      int prev = i > 0 && isfinite(x[i - 1]) && isfinite(y[i - 1]);
      int next = i + 1 < n && isfinite(x[i + 1]) && isfinite(y[i + 1]);
      if (ok && !prev && !next) {
        fprintf(f, "%.10g %.10g\n", x[i], y[i] - base);
        (*n_lone)++;
      }
    }
    fputs("EOD\n", f);
  }
  return rows;
}

/* Plot elements are joined by ", \" on the plot command; this writes the separator as needed. */
static void element(FILE *f, int *first) {
  fputs(*first ? "plot " : ", \\\n     ", f);
  *first = 0;
}

/* The look both panels share: axes, tics and grid (an overlay of keys unsets them). */
static void panel_style(FILE *f) {
  fputs("set border 15 linecolor rgb '#" AXIS "'\nset tics textcolor rgb '#" INK "'\n"
        "set xtics out nomirror\nset ytics out nomirror\n"
        "set grid xtics ytics linecolor rgb '#" GRID "' linewidth 1 dashtype solid\n"
        "set lmargin 12\nset rmargin 4\n",
        f);
}

/* The work axis both panels share: over the memory samples, or the latency rows when there are
 * none, starting at 0 when it starts near it. */
static void x_range(const vl_plot_t *pl, int has_lat, double *lo, double *hi) {
  double xmin = INFINITY, xmax = -INFINITY;
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_plot_line_t *ln = &pl->lines[l];
    for (size_t i = 0; i < ln->n; i++) {
      if (isfinite(ln->x[i]) && isfinite(ln->y[i])) {
        xmin = fmin(xmin, ln->x[i]);
        xmax = fmax(xmax, ln->x[i]);
      }
    }
  }
  for (size_t i = 0; has_lat && !(xmax >= xmin) && i < pl->n_lat; i++)
    if (isfinite(pl->lat_x[i])) {
      xmin = fmin(xmin, pl->lat_x[i]);
      xmax = fmax(xmax, pl->lat_x[i]);
    }
  if (!(xmax >= xmin)) {
    xmin = 0;
    xmax = 1;
  }
  anchor_zero(&xmin, xmax);
  if (!(xmax > xmin))
    pad_range(&xmin, &xmax, 0);
  *lo = xmin;
  *hi = xmax;
}

/* The flushes inside [xmin, xmax] as a data block of vertical segments from ymin to ymax; returns
 * their number. */
static size_t put_flushes(FILE *f, const vl_plot_t *pl, double xmin, double xmax, double ymin,
                          double ymax) {
  size_t n = 0;
  fputs("$FLUSH << EOD\n", f);
  for (size_t i = 0; i < pl->n_flush; i++) {
    double v = pl->flush_x[i];
    if (isfinite(v) && v >= xmin && v <= xmax) {
      fprintf(f, "%.10g %.10g\n%.10g %.10g\n\n", v, ymin, v, ymax);
      n++;
    }
  }
  fputs("EOD\n", f);
  return n;
}

/* How a flush is drawn, and its key entry: one thin solid line, never dashed, so that it reads
 * apart from the fits and the floor trend. */
#define FLUSH_STYLE "with lines dashtype solid linewidth 0.8 linecolor rgb '#" FLUSH "'"
/* How the post-flush floor trend is drawn: dash-dot with triangles along it, in the series' dark
 * colour (the key shows it in the axis colour). */
#define TREND_STYLE "with linespoints dashtype (8,3,2,3) linewidth 2 pointtype 9 pointsize 0.9"

/* The warm-up shade, below warmup_x, for a panel over [xmin, xmax]. */
static void put_warmup(FILE *f, const vl_plot_t *pl, double xmin, double xmax, int label) {
  if (!(pl->warmup_x > xmin))
    return;
  double wx = fmin(pl->warmup_x, xmax);
  fprintf(f,
          "set object 1 rectangle from %.10g, graph 0 to %.10g, graph 1 behind "
          "fillcolor rgb '#" SHADE "' fillstyle solid 1.0 noborder\n",
          xmin, wx);
  if (label && (wx - xmin) / (xmax - xmin) > 0.06)
    fprintf(f,
            "set label 1 'warm-up' at %.10g, graph 0.96 offset character 0.5, 0 "
            "textcolor rgb '#" AXIS "' front\n",
            xmin);
}

/* The memory panel over [xmin, xmax], whose area starts at `bottom` (screen fraction) and reaches
 * the top. */
static void main_panel(FILE *f, const vl_plot_t *pl, int delta, const double *base, double bottom,
                       double xmin, double xmax) {
  /* The y range over everything drawn. */
  double ymin = INFINITY, ymax = -INFINITY;
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_plot_line_t *ln = &pl->lines[l];
    for (size_t i = 0; i < ln->n; i++) {
      if (!isfinite(ln->x[i]) || !isfinite(ln->y[i]))
        continue;
      ymin = fmin(ymin, ln->y[i] - base[l]);
      ymax = fmax(ymax, ln->y[i] - base[l]);
    }
    if (has_fit(ln->an)) {
      double fx[3], fy[3];
      for (size_t k = 0, np = fit_points(ln->an, fx, fy); k < np; k++) {
        ymin = fmin(ymin, fy[k] - base[l]);
        ymax = fmax(ymax, fy[k] - base[l]);
      }
    }
  }
  if (!(ymax >= ymin)) {
    ymin = 0;
    ymax = 1;
  }
  pad_range(&ymin, &ymax, 0.06);

  const char *unit = pl->y_unit ? pl->y_unit : "MB";
  char ylabel[128];
  if (delta)
    snprintf(ylabel, sizeof(ylabel), "%s, change from first sample%s", unit,
             pl->warmup_x > xmin ? " after warm-up" : "");
  else
    snprintf(ylabel, sizeof(ylabel), "%s", unit);
  fputs("set xlabel ", f);
  put_str(f, pl->x_label ? pl->x_label : "requests completed");
  fputs("\nset ylabel ", f);
  put_str(f, ylabel);
  fprintf(f, "\nset xrange [%.10g:%.10g]\nset yrange [%.10g:%.10g]\n", xmin, xmax, ymin, ymax);
  /* Which marks there are: they get a key of their own, in one row under the x axis label. */
  int any_fit = 0, any_floor = 0, any_trend = 0, any_level = 0;
  size_t nfl = 0;
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_analysis_t *an = pl->lines[l].an;
    any_fit |= has_fit(an);
    any_level |= levels(an);
    any_trend |= has_trend(an);
    any_floor |= analysed(an) && an->n_windows > 0;
  }
  for (size_t i = 0; i < pl->n_flush; i++)
    nfl += isfinite(pl->flush_x[i]) && pl->flush_x[i] >= xmin && pl->flush_x[i] <= xmax;
  int marks = any_fit || any_floor || any_trend || nfl;
  /* The series' key stands above the panel, one row each, under the title. */
  panel_style(f);
  fprintf(f, "set tmargin %.2f\nset bmargin %.1f\n", 2.6 + 1.15 * (double)pl->n_lines,
          marks ? 5.2 : 3.5);
  if (pl->n_lines) /* one column of every row: a vertical key would wrap the rows that do not fit
                    * the panel's height into columns past the page's right edge */
    fputs("set key at graph 0, graph 1.01 left bottom horizontal maxcols 1 Left reverse noopaque "
          "samplen 3 spacing 1.15\n",
          f);
  else
    fputs("unset key\n", f);
  put_warmup(f, pl, xmin, xmax, 1);

  /* Data: series (and their lone points), flush lines, fits, floors, floor trends. */
  size_t *rows = vl_xcalloc(pl->n_lines + 1, sizeof(size_t));
  size_t *lone = vl_xcalloc(pl->n_lines + 1, sizeof(size_t));
  char name[32], lname[32];
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_plot_line_t *ln = &pl->lines[l];
    snprintf(name, sizeof(name), "S%zu", l);
    snprintf(lname, sizeof(lname), "L%zu", l);
    rows[l] = put_xy(f, name, ln->x, ln->y, ln->n, base[l], lname, &lone[l]);
    const vl_analysis_t *an = ln->an;
    if (has_fit(an)) {
      double fx[3], fy[3];
      fprintf(f, "$FIT%zu << EOD\n", l);
      for (size_t k = 0, np = fit_points(an, fx, fy); k < np; k++)
        fprintf(f, "%.10g %.10g\n", fx[k], fy[k] - base[l]);
      fputs("EOD\n", f);
    }
    if (analysed(an) && an->n_windows > 0) {
      fprintf(f, "$FLOOR%zu << EOD\n", l);
      for (size_t w = 0; w < an->n_windows; w++)
        if (isfinite(an->windows[w].x_min) && isfinite(an->windows[w].floor))
          fprintf(f, "%.10g %.10g\n", an->windows[w].x_min, an->windows[w].floor - base[l]);
      fputs("EOD\n", f);
    }
    if (has_trend(an)) {
      /* Five points along the line, for the triangles that mark it. */
      double xa = an->windows[0].x, xb = an->x_last, ya, yb;
      fprintf(f, "$TREND%zu << EOD\n", l);
      for (int k = 0; k <= 4; k++) {
        double xk = xa + (xb - xa) * k / 4;
        fit_ends(&an->floor, xk, xk, &ya, &yb);
        fprintf(f, "%.10g %.10g\n", xk, ya - base[l]);
      }
      fputs("EOD\n", f);
    }
  }
  put_flushes(f, pl, xmin, xmax, ymin, ymax);

  /* Flushes under the data; the series; then fits and floors on top. */
  int first = 1;
  if (nfl) {
    element(f, &first);
    fputs("$FLUSH using 1:2 " FLUSH_STYLE " notitle", f);
  }
  /* High-water marks first, under the rest; their key entries keep their places below. */
  for (size_t l = 0; l < pl->n_lines; l++) {
    if (!high_water(&pl->lines[l]) || !rows[l])
      continue;
    element(f, &first);
    fprintf(f, "$S%zu using 1:2 " HIGH_WATER_STYLE " linecolor rgb '#%s' notitle", l,
            PALETTE[l % VL_ARRAY_SIZE(PALETTE)]);
  }
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_plot_line_t *ln = &pl->lines[l];
    const char *col = PALETTE[l % VL_ARRAY_SIZE(PALETTE)];
    char label[512];
    series_label(ln, delta, base[l], label, sizeof(label));
    element(f, &first);
    if (high_water(ln)) {
      fprintf(f, "keyentry " HIGH_WATER_STYLE " linecolor rgb '#%s' title ", col);
      put_str(f, label);
    } else if (rows[l]) {
      fprintf(f, "$S%zu using 1:2 with lines linewidth 1.6 linecolor rgb '#%s' title ", l, col);
      put_str(f, label);
    } else {
      fprintf(f, "keyentry with lines linewidth 1.6 linecolor rgb '#%s' title ", col);
      put_str(f, label);
    }
    if (lone[l]) {
      element(f, &first);
      fprintf(f,
              "$L%zu using 1:2 with points pointtype 7 pointsize 0.5 linecolor rgb '#%s' notitle",
              l, col);
    }
  }
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_analysis_t *an = pl->lines[l].an;
    const char *dark = DARKER[l % VL_ARRAY_SIZE(DARKER)];
    if (has_fit(an)) {
      element(f, &first);
      fprintf(f,
              "$FIT%zu using 1:2 with lines dashtype (10,6) linewidth 2.2 linecolor rgb '#%s' "
              "notitle",
              l, dark);
    }
    if (has_trend(an)) {
      element(f, &first);
      fprintf(f, "$TREND%zu using 1:2 " TREND_STYLE " linecolor rgb '#%s' notitle", l, dark);
    }
    if (analysed(an) && an->n_windows > 0) {
      element(f, &first);
      fprintf(f,
              "$FLOOR%zu using 1:2 with points pointtype 6 pointsize 1.1 linewidth 1.6 "
              "linecolor rgb '#%s' notitle",
              l, dark);
    }
  }
  if (first) { /* nothing at all: empty axes */
    element(f, &first);
    fputs("NaN notitle", f);
  }
  fputc('\n', f);
  free(rows);
  free(lone);
  if (!marks)
    return;

  /* The marks' key, drawn once in the axis colour whatever the number of series, by a second
   * plot over the first that draws nothing else. */
  fputs("unset border\nunset tics\nunset grid\nunset xlabel\nunset ylabel\nunset object 1\n"
        "unset label 1\n",
        f);
  fprintf(f,
          "set key at screen 0.5, screen %.4f center bottom horizontal Left reverse noopaque "
          "samplen 3 maxrows 1 maxcols auto\n",
          bottom + 0.004);
  first = 1;
  if (any_fit) {
    element(f, &first);
    fputs("keyentry with lines dashtype (10,6) linewidth 2.2 linecolor rgb '#" AXIS "' title ", f);
    put_str(f, any_level ? "fit (OLS; rise and level)" : "OLS fit");
  }
  if (any_floor) {
    element(f, &first);
    fputs("keyentry with points pointtype 6 pointsize 1.1 linewidth 1.6 linecolor rgb '#" AXIS
          "' title 'post-flush floor'",
          f);
  }
  if (any_trend) {
    element(f, &first);
    fputs("keyentry " TREND_STYLE " linecolor rgb '#" AXIS "' title 'post-flush floor trend'", f);
  }
  if (nfl) {
    element(f, &first);
    fputs("keyentry " FLUSH_STYLE " title 'flush'", f);
  }
  fputs(", \\\n     NaN notitle\n", f);
}

/* The latency panel, over the same work axis [xmin, xmax] as the memory panel (each row at the
 * work done by its end), with the flushes and the warm-up drawn as there. */
static void latency_panel(FILE *f, const vl_plot_t *pl, double xmin, double xmax) {
  double ymax = 0;
  const double *ys[2] = {pl->lat_p50, pl->lat_p99};
  for (size_t i = 0; i < pl->n_lat; i++) {
    if (!isfinite(pl->lat_x[i]) || pl->lat_x[i] < xmin || pl->lat_x[i] > xmax)
      continue;
    for (int k = 0; k < 2; k++)
      if (ys[k] && isfinite(ys[k][i]))
        ymax = fmax(ymax, ys[k][i]);
  }
  if (!(ymax > 0))
    ymax = 1;
  panel_style(f);
  fputs("unset object 1\nunset label 1\nset tmargin 1.5\nset bmargin 3.5\n", f);
  put_warmup(f, pl, xmin, xmax, 0);
  /* The same axis and label as the memory panel: the two read against each other. */
  fputs("set xlabel ", f);
  put_str(f, pl->x_label ? pl->x_label : "requests completed");
  fputs("\nset ylabel 'latency ms'\n", f);
  /* Headroom for the legend inside the panel. */
  fprintf(f, "set xrange [%.10g:%.10g]\nset yrange [0:%.10g]\n", xmin, xmax, ymax * 1.25);
  fputs("set key inside top left horizontal maxrows auto maxcols auto opaque box linecolor "
        "rgb '#ffffff' samplen 3\n",
        f);
  size_t nfl = put_flushes(f, pl, xmin, xmax, 0, ymax * 1.25);
  static const char *const names[2] = {"p50 latency", "p99 latency"};
  static const char *const cols[2] = {"1f77b4", "d62728"};
  static const char *const blocks[2] = {"P50", "P99"}, *const lones[2] = {"PL50", "PL99"};
  size_t n_lone[2] = {0, 0};
  for (int k = 0; k < 2; k++)
    if (ys[k])
      put_xy(f, blocks[k], pl->lat_x, ys[k], pl->n_lat, 0, lones[k], &n_lone[k]);
  int first = 1;
  if (nfl) {
    element(f, &first);
    fputs("$FLUSH using 1:2 " FLUSH_STYLE " notitle", f);
  }
  for (int k = 0; k < 2; k++) {
    if (!ys[k])
      continue;
    element(f, &first);
    fprintf(f, "$%s using 1:2 with lines linewidth 1.4 linecolor rgb '#%s' title '%s'", blocks[k],
            cols[k], names[k]);
    if (n_lone[k]) {
      element(f, &first);
      fprintf(f, "$%s using 1:2 with points pointtype 7 pointsize 0.5 linecolor rgb '#%s' notitle",
              lones[k], cols[k]);
    }
  }
  fputc('\n', f);
}

int vl_plot_script(const vl_plot_t *pl, const char *png_path, FILE *f) {
  int w = pl->width ? pl->width : VL_PLOT_WIDTH, h = pl->height ? pl->height : VL_PLOT_HEIGHT;
  if (w < 320 || h < 200 || w > 16384 || h > 16384)
    return VL_EINVAL;
  int font = w >= 900 && h >= 500 ? 11 : 8;
  char title[512];
  if (pl->title)
    snprintf(title, sizeof(title), "%s", pl->title);
  else
    snprintf(title, sizeof(title), "Memory over %s",
             pl->x_label ? pl->x_label : "requests completed");

  fputs("# Written by vlmload; run with: gnuplot -d THIS_FILE\n", f);
  if (pl->svg)
    fprintf(f, "set terminal svg size %d,%d font 'sans,%d' noenhanced\n", w, h, font);
  else
    fprintf(f,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
            "  set terminal pngcairo size %d,%d font 'sans,%d' noenhanced\n"
            "} else {\n"
            "  set terminal png size %d,%d font 'sans,%d' noenhanced\n"
            "}\n",
            w, h, font, w, h, font);
  fputs("set output ", f);
  put_str(f, png_path);
  fputs("\nset encoding utf8\n", f);

  int delta = pl->y_mode == VL_PLOT_Y_DELTA || (pl->y_mode == VL_PLOT_Y_AUTO && wants_delta(pl));
  double *base = vl_xcalloc(pl->n_lines + 1, sizeof(double));
  baselines(pl, delta, base);
  int has_lat = pl->n_lat > 0 && pl->lat_x && (pl->lat_p50 || pl->lat_p99);
  double xmin, xmax;
  x_range(pl, has_lat, &xmin, &xmax);
  fputs("set multiplot title ", f);
  put_str(f, title);
  fprintf(f, " font ',%d'\n", font + 2);
  double bottom = has_lat ? 0.32 : 0;
  fprintf(f, "set origin 0, %.2f\nset size 1, %.2f\n", bottom, 1 - bottom);
  main_panel(f, pl, delta, base, bottom, xmin, xmax);
  if (has_lat) {
    fputs("set origin 0, 0\nset size 1, 0.32\n", f);
    latency_panel(f, pl, xmin, xmax);
  }
  fputs("unset multiplot\nset output\n", f);
  free(base);
  return ferror(f) ? VL_EIO : 0;
}

/* ---- running it -------------------------------------------------------------------------------
 */

/* Runs `prog -d /dev/fd/SCRIPT` with stdin and stdout on /dev/null, stderr into a pipe and the
 * descriptors script and png (open in this process) inherited at the same numbers, waits, and
 * returns 0 when it exited 0, else VL_EIO with err holding its last error line. */
static int run_gnuplot(const char *prog, int script, int png, char *err, size_t errlen) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    snprintf(err, errlen, "cannot run gnuplot: %s", strerror(errno));
    return VL_EIO;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
  /* A descriptor dup'ed onto itself is inherited (its close-on-exec flag cleared). */
  posix_spawn_file_actions_adddup2(&fa, script, script);
  posix_spawn_file_actions_adddup2(&fa, png, png);
  /* gnuplot gets default signal dispositions and an empty mask, whatever the caller set. */
  posix_spawnattr_init(&at);
  sigset_t none, def;
  sigemptyset(&none);
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGTERM);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &def);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char path[32];
  snprintf(path, sizeof(path), "/dev/fd/%d", script);
  char *argv[] = {(char *)prog, "-d", path, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, prog, &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(pfd[1]);
  if (rc != 0) {
    close(pfd[0]);
    snprintf(err, errlen, "cannot run %s: %s", prog, strerror(rc));
    return VL_EIO;
  }
  /* Keep the last 1 KiB it says: gnuplot's error comes last. */
  char buf[1024], chunk[512];
  size_t len = 0;
  for (;;) {
    ssize_t n = read(pfd[0], chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    /* chunk is smaller than buf: drop the oldest bytes to make room. */
    if (len + (size_t)n >= sizeof(buf)) {
      size_t drop = len + (size_t)n - (sizeof(buf) - 1);
      memmove(buf, buf + drop, len - drop);
      len -= drop;
    }
    memcpy(buf + len, chunk, (size_t)n);
    len += (size_t)n;
  }
  close(pfd[0]);
  buf[len] = '\0';
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) {
      snprintf(err, errlen, "gnuplot: %s", strerror(errno));
      return VL_EIO;
    }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
    return 0;
  /* One line: the text's lines joined, the script's name left out. */
  for (char *p = buf; *p; p++)
    if (*p == '\n' || *p == '\r' || *p == '\t')
      *p = ' ';
  char *msg = buf;
  while (*msg == ' ')
    msg++;
  size_t m = strlen(msg);
  while (m && msg[m - 1] == ' ')
    msg[--m] = '\0';
  if (WIFEXITED(st))
    snprintf(err, errlen, "gnuplot failed (exit status %d)%s%s", WEXITSTATUS(st), m ? ": " : "",
             msg);
  else
    snprintf(err, errlen, "gnuplot killed by signal %d%s%s", WTERMSIG(st), m ? ": " : "", msg);
  return VL_EIO;
}

/* Copies the PNG gnuplot drew into its scratch file (arg) to f (an outfile.h fill callback). */
static int copy_png(FILE *f, void *arg, char *why, size_t whylen) {
  FILE *png = arg;
  char buf[65536];
  size_t n;
  rewind(png);
  while ((n = fread(buf, 1, sizeof(buf), png)) > 0)
    if (fwrite(buf, 1, n, f) != n)
      return VL_EIO;
  if (ferror(png)) {
    snprintf(why, whylen, "reading gnuplot's image: %s", strerror(errno));
    return VL_EIO;
  }
  return 0;
}

/* Draws pl with gnuplot into a scratch file, handed back in *img (rewound) on success. */
static int draw(const vl_plot_t *pl, FILE **img, char *err, size_t errlen) {
  *img = NULL;
  int w = pl->width ? pl->width : VL_PLOT_WIDTH, h = pl->height ? pl->height : VL_PLOT_HEIGHT;
  if (w < 320 || h < 200 || w > 16384 || h > 16384) {
    snprintf(err, errlen, "plot size %dx%d out of range", w, h);
    return VL_EINVAL;
  }
  char *prog = NULL;
  int rc = vl_plot_find_gnuplot(pl->gnuplot, &prog, err, errlen);
  if (rc)
    return rc;
  /* The script and the image live in scratch files that have no name from the start (no exit
   * leaves them behind); gnuplot reaches both through /dev/fd. */
  char why[384] = "", png_path[32];
  FILE *script = vl_outfile_scratch("vlmload-plot", why, sizeof(why)), *png = NULL;
  if (script)
    png = vl_outfile_scratch("vlmload-plot", why, sizeof(why));
  if (!png) {
    snprintf(err, errlen, "%s", why);
    rc = VL_EIO;
    goto done;
  }
  snprintf(png_path, sizeof(png_path), "/dev/fd/%d", fileno(png));
  if ((rc = vl_plot_script(pl, png_path, script)) != 0 || fflush(script) != 0) {
    snprintf(err, errlen, "cannot write the gnuplot script: %s", strerror(errno));
    rc = VL_EIO;
    goto done;
  }
  if ((rc = run_gnuplot(prog, fileno(script), fileno(png), err, errlen)) != 0)
    goto done;
  struct stat st;
  if (fstat(fileno(png), &st) != 0 || st.st_size == 0) {
    snprintf(err, errlen, "gnuplot wrote no image");
    rc = VL_EIO;
    goto done;
  }
  rewind(png);
  *img = png;
  png = NULL;

done:
  if (script)
    fclose(script);
  if (png)
    fclose(png);
  free(prog);
  return rc;
}

int vl_plot_write(const vl_plot_t *pl, const char *path, char *err, size_t errlen) {
  FILE *png;
  char why[384];
  int rc = draw(pl, &png, why, sizeof(why));
  if (rc) {
    if (strcmp(why, "gnuplot wrote no image") == 0)
      snprintf(err, errlen, "%s: %s", path, why);
    else
      snprintf(err, errlen, "%s", why);
    return rc;
  }
  if (vl_outfile_write(path, copy_png, png, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "%s: %s", path, why);
    rc = VL_EIO;
  }
  fclose(png);
  return rc;
}

int vl_plot_svg(const vl_plot_t *pl, char **svg, char *err, size_t errlen) {
  *svg = NULL;
  vl_plot_t p = *pl;
  p.svg = 1;
  FILE *img;
  int rc = draw(&p, &img, err, errlen);
  if (rc)
    return rc;
  size_t cap = 1 << 16, len = 0, n;
  char *buf = vl_xmalloc(cap);
  while ((n = fread(buf + len, 1, cap - len - 1, img)) > 0)
    if ((len += n) + 1 == cap)
      buf = vl_xrealloc(buf, cap *= 2);
  int bad = ferror(img);
  fclose(img);
  if (bad) {
    snprintf(err, errlen, "cannot read the SVG gnuplot drew: %s", strerror(errno));
    free(buf);
    return VL_EIO;
  }
  buf[len] = '\0';
  *svg = buf;
  return 0;
}
