/* `vlmload compare RUN RUN...` (comparecli.h): reads the runs, prints one table per run against
 * the baseline, and writes --output, --report and the exit status of --fail-if-worse. */
#include "comparecli.h"
#include "vlmload/common.h"
#include "vlmload/compare.h"
#include "vlmload/config.h"
#include "vlmload/csvin.h"
#include "vlmload/htmlreport.h"
#include "vlmload/json.h"
#include "vlmload/outfile.h"
#include "vlmload/plot.h"
#include "vlmload/rateauto.h"
#include "vlmload/series.h"
#include "vlmload/text.h"
#include "vlmload/units.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG "vlmload compare"

void vl_comparecli_usage(FILE *f) {
  vl_compare_opts_t o;
  vl_compare_opts_init(&o);
  fprintf(f,
          "Usage: vlmload compare BASELINE RUN... [options]\n"
          "\n"
          "Compares runs with the first (the baseline): for each figure both have, the change,\n"
          "its 95%% interval where the figure has one, and a word: better, worse or same (the\n"
          "interval holds 0, or the change is under the figure's materiality).\n"
          "A run is a summary written by --output (its timeline, for --report, the one its\n"
          "files name), or a matrix folder (DIR or DIR/matrix.json), whose\n"
          "cells are compared by name. Every run must be of the same kind.\n"
          "\n"
          "Figures: achieved_rate, request_throughput, output_throughput, goodput (higher is\n"
          "better); e2e, ttft, tpot, itl _p50 _p90 _p99 (ms; intervals by bootstrap over the\n"
          "runs' histograms); error_rate and errors.CLASS (%% of completed requests);\n"
          "slope:SERIES and floor:SERIES (each memory series' slope and post-flush floor slope,\n"
          "per 1000 requests; intervals from the fits'); mechanism:SERIES (same or changed).\n"
          "\n"
          "  --output FILE.json        write every comparison as JSON\n"
          "  --report FILE.html        one page: the tables, and each run's memory over\n"
          "                            requests on one chart with the baseline's (gnuplot)\n"
          "  --fail-if-worse FIGS      exit 3 when one of these figures got worse: names as\n"
          "                            above, or a group (rate, latency, errors, slope, floor)\n"
          "  --min-change PCT          rates and latencies: a change under PCT%% of the\n"
          "                            baseline is same (default %g)\n"
          "  --min-error-change PTS    error rates: under PTS percentage points is same\n"
          "                            (default %g)\n"
          "  --min-slope-change MB     slopes: under MB per 1000 requests is same (default %g)\n"
          "  --gnuplot PATH            the gnuplot to run for --report\n"
          "  --quiet                   no tables on stdout\n"
          "  -h, --help                this help\n"
          "\n"
          "Exit status: 0, 3 when a figure --fail-if-worse names got worse, 2 bad usage or\n"
          "input, 1 an output could not be written.\n",
          o.min_change * 100, o.min_error_change * 100, o.min_slope_change);
}

/* One run: a summary, or a matrix folder's cells. */
typedef struct {
  const char *arg;
  int matrix;
  char dir[PATH_MAX]; /* the summary's folder, or the matrix's */
  cJSON *root;        /* the summary, or matrix.json; owned */
} run_t;

/* One comparison: a run (or one of its cells) against the baseline's. */
typedef struct {
  const run_t *base, *run;
  char cell[256];       /* "" for a summary */
  cJSON *sum_a, *sum_b; /* owned */
  vl_compare_fig_t *figs;
  size_t n;
} cmp_t;

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(PROG ": ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 2;
}

static const cJSON *get(const cJSON *o, const char *k) {
  return cJSON_GetObjectItemCaseSensitive(o, k);
}

static void dirname_of(const char *path, char *out, size_t n) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(out, n, ".");
  else if (slash == path)
    snprintf(out, n, "/");
  else
    snprintf(out, n, "%.*s", (int)(slash - path), path);
}

static int is_summary(const cJSON *o) {
  return cJSON_IsString(get(o, "vlmload_version")) && cJSON_IsObject(get(o, "requests")) &&
         cJSON_IsObject(get(o, "rate"));
}

/* Reads r->arg. Returns 0 or 2 after one line. */
static int run_read(run_t *r) {
  char path[PATH_MAX + 16], why[512];
  struct stat st;
  if (stat(r->arg, &st) != 0)
    return bad("'%s': %s (give a summary written by --output, or a matrix folder)", r->arg,
               strerror(errno));
  if (S_ISDIR(st.st_mode)) {
    snprintf(path, sizeof(path), "%s/matrix.json", r->arg);
    if (access(path, R_OK) != 0)
      return bad("'%s': a folder without matrix.json: not a matrix folder (give a summary "
                 "written by --output, or the folder vlmload matrix wrote)",
                 r->arg);
    snprintf(r->dir, sizeof(r->dir), "%s", r->arg);
  } else {
    snprintf(path, sizeof(path), "%s", r->arg);
    dirname_of(r->arg, r->dir, sizeof(r->dir));
  }
  r->root = vl_json_read_file(path, why, sizeof(why));
  if (!r->root)
    return bad("'%s': %s (give a summary written by --output, or a matrix folder)", path, why);
  if (cJSON_IsArray(get(r->root, "cells")) && cJSON_IsString(get(r->root, "vlmload_version"))) {
    r->matrix = 1;
    return 0;
  }
  if (is_summary(r->root))
    return 0;
  const cJSON *fmt = get(r->root, "format");
  if (cJSON_IsString(fmt) && strcmp(fmt->valuestring, "vlmload-histograms") == 0)
    return bad("'%s': a --histograms file, not a run's summary (vlmload merge turns shards' "
               "files into one)",
               path);
  return bad("'%s': not a vlmload run (give a summary written by --output, or a matrix folder)",
             path);
}

/* The summary of matrix run r's cell name (a repeat's name is CELL/runK), or NULL with why when
 * the cell did not run to its end there: DIR/CELL/summary.json. */
static cJSON *cell_summary(const run_t *r, const char *name, char *why, size_t whylen) {
  const cJSON *c;
  cJSON_ArrayForEach(c, get(r->root, "cells")) {
    const cJSON *n = get(c, "name"), *st = get(c, "status"), *dir = get(c, "dir");
    if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0)
      continue;
    if (!cJSON_IsString(st) || strcmp(st->valuestring, "ok") != 0) {
      snprintf(why, whylen, "cell %s of %s is %s", name, r->arg,
               cJSON_IsString(st) ? st->valuestring : "of no status");
      return NULL;
    }
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s/%s/summary.json", r->dir,
             cJSON_IsString(dir) ? dir->valuestring : name);
    cJSON *s = vl_json_read_file(path, why, whylen);
    if (s && !is_summary(s)) {
      snprintf(why, whylen, "'%.900s': not a vlmload run's summary", path);
      cJSON_Delete(s);
      return NULL;
    }
    return s;
  }
  snprintf(why, whylen, "%s has no cell %s", r->arg, name);
  return NULL;
}

/* The comparisons of run against base (both of the same kind), appended to *v. */
static void compare_pair(const run_t *base, const run_t *run, const vl_compare_opts_t *o, cmp_t **v,
                         size_t *n, size_t *cap) {
  if (!base->matrix) {
    if (*n == *cap)
      *v = vl_xrealloc(*v, (*cap = *cap ? 2 * *cap : 8) * sizeof(**v));
    cmp_t *c = &(*v)[(*n)++];
    memset(c, 0, sizeof(*c));
    c->base = base;
    c->run = run;
    c->figs = vl_compare_runs(base->root, run->root, o, &c->n);
    return;
  }
  const cJSON *cell;
  cJSON_ArrayForEach(cell, get(base->root, "cells")) {
    const cJSON *name = get(cell, "name");
    char why[1024];
    if (!cJSON_IsString(name))
      continue;
    cJSON *a = cell_summary(base, name->valuestring, why, sizeof(why)), *b = NULL;
    if (a)
      b = cell_summary(run, name->valuestring, why, sizeof(why));
    if (!a || !b) {
      fprintf(stderr, PROG ": cell %s left out: %s\n", name->valuestring, why);
      cJSON_Delete(a);
      continue;
    }
    if (*n == *cap)
      *v = vl_xrealloc(*v, (*cap = *cap ? 2 * *cap : 8) * sizeof(**v));
    cmp_t *c = &(*v)[(*n)++];
    memset(c, 0, sizeof(*c));
    c->base = base;
    c->run = run;
    snprintf(c->cell, sizeof(c->cell), "%s", name->valuestring);
    c->sum_a = a;
    c->sum_b = b;
    c->figs = vl_compare_runs(a, b, o, &c->n);
  }
}

/* The table. */

#define NAME_W 35
#define NUM_W  9

/* A figure's name cut to NAME_W columns, its middle left out. */
static void short_name(char *out, size_t n, const char *name) {
  size_t len = strlen(name);
  if (len <= NAME_W)
    snprintf(out, n, "%s", name);
  else
    snprintf(out, n, "%.16s...%s", name, name + len - (NAME_W - 19));
}

/* The decimals a row's figures get: four significant digits of the larger of its two values,
 * at most 4 decimals. */
static int decimals(const vl_compare_fig_t *g) {
  double ref = fmax(fabs(isfinite(g->a) ? g->a : 0), fabs(isfinite(g->b) ? g->b : 0));
  if (!(ref > 0))
    return 2;
  int d = 3 - (int)floor(log10(ref));
  return d < 0 ? 0 : d > 4 ? 4 : d;
}

static void fig_num(char *out, size_t n, double v, int dec, int plus) {
  if (!isfinite(v))
    snprintf(out, n, "-");
  else
    snprintf(out, n, plus ? "%+.*f" : "%.*f", dec, v);
}

static void interval_text(char *out, size_t n, const vl_compare_fig_t *g) {
  char lo[40], hi[40]; /* "[lo, hi]" fits in 96 */
  if (!isfinite(g->lo) || !isfinite(g->hi)) {
    snprintf(out, n, "-");
    return;
  }
  fig_num(lo, sizeof(lo), g->lo, decimals(g), 1);
  fig_num(hi, sizeof(hi), g->hi, decimals(g), 1);
  snprintf(out, n, "[%s, %s]", lo, hi);
}

/* The comparison's heading: the cell, then each run on a line of its own. */
static void heading(FILE *f, const cmp_t *c, int html) {
  if (html) {
    fputs("<h2>", f);
    vl_htmlreport_escape(f, c->cell[0] ? c->cell : c->run->arg);
    fputs("</h2>\n<p>baseline: ", f);
    vl_htmlreport_escape(f, c->base->arg);
    fputs("<br>run: ", f);
    vl_htmlreport_escape(f, c->run->arg);
    fputs("</p>\n", f);
    return;
  }
  if (c->cell[0])
    fprintf(f, "cell %s\n", c->cell);
  fprintf(f, "baseline: %s\nrun:      %s\n", c->base->arg, c->run->arg);
}

static void print_table(FILE *f, const cmp_t *c, const vl_compare_opts_t *o) {
  heading(f, c, 0);
  fprintf(f, "%-*s %*s %*s %*s  %-23s  %s\n", NAME_W, "figure", NUM_W, "baseline", NUM_W, "run",
          NUM_W, "change", "95% interval", "word");
  for (size_t i = 0; i < c->n; i++) {
    const vl_compare_fig_t *g = &c->figs[i];
    char name[64], a[48], b[48], d[48], ci[112];
    short_name(name, sizeof(name), g->name);
    if (g->lower_better < 0) { /* a mechanism */
      snprintf(a, sizeof(a), "%.*s", NUM_W, g->text_a);
      snprintf(b, sizeof(b), "%.*s", NUM_W, g->text_b);
      snprintf(d, sizeof(d), "-");
    } else {
      fig_num(a, sizeof(a), g->a, decimals(g), 0);
      fig_num(b, sizeof(b), g->b, decimals(g), 0);
      fig_num(d, sizeof(d), g->diff, decimals(g), 1);
    }
    interval_text(ci, sizeof(ci), g);
    fprintf(f, "%-*s %*s %*s %*s  %-23s  %s\n", NAME_W, name, NUM_W, a, NUM_W, b, NUM_W, d, ci,
            vl_compare_word_name(g->word));
  }
  if (!c->n)
    fputs("(no figure both runs have)\n", f);
  fprintf(f,
          "rates in req/s (output_throughput tok/s), latencies in ms, error rates in %% of the\n"
          "requests completed, slopes in MB per 1000 requests completed; change: run minus\n"
          "baseline. same: the interval holds 0, or the change is under %g%% of the baseline\n"
          "(rates, latencies), %g points (error rates), %g MB/1000 requests (slopes).\n\n",
          o->min_change * 100, o->min_error_change * 100, o->min_slope_change);
}

/* --output. */

static void add_num(cJSON *o, const char *k, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, k, v);
  else
    cJSON_AddNullToObject(o, k);
}

static cJSON *cmp_json(const cmp_t *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "baseline", c->base->arg);
  cJSON_AddStringToObject(o, "run", c->run->arg);
  if (c->cell[0])
    cJSON_AddStringToObject(o, "cell", c->cell);
  else
    cJSON_AddNullToObject(o, "cell");
  cJSON *arr = cJSON_AddArrayToObject(o, "figures");
  for (size_t i = 0; i < c->n; i++) {
    const vl_compare_fig_t *g = &c->figs[i];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", g->name);
    cJSON_AddStringToObject(e, "group", g->group);
    if (g->lower_better < 0) {
      cJSON_AddStringToObject(e, "baseline", g->text_a);
      cJSON_AddStringToObject(e, "run", g->text_b);
      cJSON_AddNullToObject(e, "better");
    } else {
      cJSON_AddStringToObject(e, "unit", g->unit);
      add_num(e, "baseline", g->a);
      add_num(e, "run", g->b);
      add_num(e, "change", g->diff);
      if (isfinite(g->lo)) {
        cJSON *ci = cJSON_AddArrayToObject(e, "ci");
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(g->lo));
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(g->hi));
      } else {
        cJSON_AddNullToObject(e, "ci");
      }
      add_num(e, "materiality", g->material);
      cJSON_AddStringToObject(e, "better", g->lower_better ? "lower" : "higher");
    }
    cJSON_AddStringToObject(e, "word", vl_compare_word_name(g->word));
    cJSON_AddItemToArray(arr, e);
  }
  return o;
}

static int write_json(const char *path, const cmp_t *v, size_t n, const vl_compare_opts_t *o,
                      const cJSON *worse) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "vlmload_version", VL_VERSION);
  cJSON_AddNumberToObject(root, "level", o->level);
  cJSON *m = cJSON_AddObjectToObject(root, "materiality");
  cJSON_AddNumberToObject(m, "change_frac", o->min_change);
  cJSON_AddNumberToObject(m, "error_points", o->min_error_change * 100);
  cJSON_AddNumberToObject(m, "slope_per_1000", o->min_slope_change);
  cJSON *arr = cJSON_AddArrayToObject(root, "comparisons");
  for (size_t i = 0; i < n; i++)
    cJSON_AddItemToArray(arr, cmp_json(&v[i]));
  cJSON_AddItemToObject(root, "worse", cJSON_Duplicate(worse, 1));
  char *text = cJSON_Print(root), why[512];
  int rc = vl_outfile_write_text(path, text, why, sizeof(why));
  if (rc != 0)
    fprintf(stderr, PROG ": --output '%s': %s\n", path, why);
  free(text);
  cJSON_Delete(root);
  return rc ? 1 : 0;
}

/* --report. */

/* The timeline of summary sum read from dir: the --timeline its files name, taken from the
 * summary's folder when relative and there, else as written; a matrix cell's CELL/timeline.csv.
 * Returns a loaded table or NULL. */
static vl_csv_t *timeline_of(const run_t *r, const cJSON *sum, const char *cell) {
  char path[PATH_MAX * 2], err[512];
  vl_csv_t *tl = NULL;
  if (cell) {
    snprintf(path, sizeof(path), "%s/%s/timeline.csv", r->dir, cell);
  } else {
    const cJSON *t = get(get(sum, "files"), "timeline");
    if (!cJSON_IsString(t) || !t->valuestring[0])
      return NULL;
    const char *base = strrchr(t->valuestring, '/');
    snprintf(path, sizeof(path), "%s/%s", r->dir, base ? base + 1 : t->valuestring);
    if (t->valuestring[0] == '/' || access(path, R_OK) != 0)
      snprintf(path, sizeof(path), "%s", t->valuestring);
  }
  if (vl_csv_load(&tl, path, err, sizeof(err)) != 0)
    return NULL;
  vl_csv_drop_rows(tl, "phase", VL_RATEAUTO_PHASE);
  return tl;
}

/* The memory series the chart draws: the first of the analysis's series found in both. */
static const char *chart_series(const cJSON *a, const cJSON *b) {
  const cJSON *s, *t;
  cJSON_ArrayForEach(s, get(get(a, "memory_analysis"), "series")) {
    const cJSON *n = get(s, "series");
    if (!cJSON_IsString(n))
      continue;
    cJSON_ArrayForEach(t, get(get(b, "memory_analysis"), "series")) {
      const cJSON *m = get(t, "series");
      if (cJSON_IsString(m) && strcmp(m->valuestring, n->valuestring) == 0)
        return n->valuestring;
    }
  }
  return NULL;
}

static int series_index(const vl_series_set_t *set, const char *name) {
  for (size_t k = 0; k < set->nser; k++)
    if (strcmp(set->ser[k].name, name) == 0)
      return (int)k;
  return -1;
}

/* The chart of c: the two runs' memory series over requests; *svg is a new document or NULL. */
static void chart(const cmp_t *c, const char *gnuplot, char **svg, char *note, size_t notelen) {
  const cJSON *a = c->sum_a ? c->sum_a : c->base->root, *b = c->sum_b ? c->sum_b : c->run->root;
  const char *name = chart_series(a, b);
  *svg = NULL;
  if (!name) {
    snprintf(note, notelen, "no memory series both runs analysed");
    return;
  }
  vl_csv_t *tl[2] = {timeline_of(c->base, a, c->cell[0] ? c->cell : NULL),
                     timeline_of(c->run, b, c->cell[0] ? c->cell : NULL)};
  vl_series_set_t sets[2] = {0};
  vl_plot_line_t lines[2];
  char labels[2][300];
  size_t nl = 0;
  for (int i = 0; i < 2; i++) {
    char err[512];
    vl_series_opts_t so;
    vl_series_opts_init(&so);
    if (!tl[i] || vl_series_read(&sets[i], tl[i], NULL, &so, err, sizeof(err)) != 0)
      continue;
    int k = series_index(&sets[i], name);
    if (k < 0 || sets[i].ser[k].n < 2)
      continue;
    snprintf(labels[i], sizeof(labels[i]), "%s (%s)", name, i ? "run" : "baseline");
    const vl_series_mem_t *s = &sets[i].ser[k];
    lines[nl++] = (vl_plot_line_t){.name = labels[i], .x = s->x, .y = s->y, .n = s->n};
  }
  if (nl < 2) {
    snprintf(note, notelen, "%s: the timelines of both runs are needed for the chart", name);
  } else {
    vl_plot_t p = {.title = "Memory over requests, the baseline and the run",
                   .lines = lines,
                   .n_lines = nl,
                   .y_mode = VL_PLOT_Y_ABS,
                   .gnuplot = gnuplot};
    char err[512];
    if (vl_plot_svg(&p, svg, err, sizeof(err)) != 0) {
      snprintf(note, notelen, "the chart: %s", err);
      *svg = NULL;
    }
  }
  for (int i = 0; i < 2; i++) {
    vl_series_free(&sets[i]);
    vl_csv_free(tl[i]);
  }
}

static int write_report(const char *path, const cmp_t *v, size_t n, const vl_compare_opts_t *o,
                        const char *gnuplot) {
  char *page = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&page, &len);
  fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>vlmload compare</title>"
        "<style>body{font-family:sans-serif;margin:2em}svg{max-width:100%;height:auto}"
        "table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 8px}"
        ".worse{color:#b00}.better{color:#070}</style></head><body>\n"
        "<h1>vlmload compare</h1>\n",
        f);
  for (size_t i = 0; i < n; i++) {
    const cmp_t *c = &v[i];
    char note[1024] = "";
    heading(f, c, 1);
    const char *head[6] = {"figure", "baseline", "run", "change", "95% interval", "word"};
    vl_htmlreport_cell_t *cells = vl_xcalloc(c->n * 6 + 1, sizeof(*cells));
    char(*text)[5][96] = vl_xcalloc(c->n + 1, sizeof(*text));
    for (size_t k = 0; k < c->n; k++) {
      const vl_compare_fig_t *g = &c->figs[k];
      if (g->lower_better < 0) {
        snprintf(text[k][0], 96, "%s", g->text_a);
        snprintf(text[k][1], 96, "%s", g->text_b);
        snprintf(text[k][2], 96, "-");
      } else {
        fig_num(text[k][0], 96, g->a, decimals(g), 0);
        fig_num(text[k][1], 96, g->b, decimals(g), 0);
        fig_num(text[k][2], 96, g->diff, decimals(g), 1);
      }
      interval_text(text[k][3], 96, g);
      snprintf(text[k][4], 96, "%s", g->unit);
      cells[k * 6].text = g->name;
      for (int j = 0; j < 4; j++)
        cells[k * 6 + 1 + j].text = text[k][j];
      cells[k * 6 + 5].text = vl_compare_word_name(g->word);
    }
    vl_htmlreport_table(f, "figures", head, 6, cells, c->n);
    free(cells);
    free(text);
    char *svg = NULL;
    chart(c, gnuplot, &svg, note, sizeof(note));
    if (svg)
      fprintf(f, "%s\n", svg);
    else {
      fputs("<p class=note>No chart: ", f);
      vl_htmlreport_escape(f, note);
      fputs(".</p>\n", f);
    }
    free(svg);
  }
  fprintf(f,
          "<p class=note>Rates in req/s, latencies in ms, error rates in %% of the requests "
          "completed, slopes in MB per 1000 requests completed; change: run minus baseline. "
          "same: the interval holds 0, or the change is under %g%% of the baseline (rates, "
          "latencies), %g points (error rates), %g MB/1000 requests (slopes).</p>\n",
          o->min_change * 100, o->min_error_change * 100, o->min_slope_change);
  fputs("</body></html>\n", f);
  fclose(f);
  char why[512];
  int rc = vl_outfile_write_text(path, page, why, sizeof(why));
  if (rc != 0)
    fprintf(stderr, PROG ": --report '%s': %s\n", path, why);
  free(page);
  return rc ? 1 : 0;
}

/* --fail-if-worse: whether figure g is one the list names (a name, or its group). */
static int named(const char *list, const vl_compare_fig_t *g) {
  char *copy = vl_xstrdup(list), *save = NULL;
  int hit = 0;
  for (char *t = strtok_r(copy, ",", &save); t && !hit; t = strtok_r(NULL, ",", &save))
    hit = strcmp(t, g->name) == 0 || strcmp(t, g->group) == 0;
  free(copy);
  return hit;
}

/* Every name of the list must be a figure or a group some comparison has. Returns 0 or 2. */
static int check_names(const char *list, const cmp_t *v, size_t n) {
  static const char *const groups[] = {"rate", "latency", "errors", "slope", "floor"};
  char *copy = vl_xstrdup(list), *save = NULL;
  int rc = 0;
  for (char *t = strtok_r(copy, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (size_t k = 0; k < VL_ARRAY_SIZE(groups); k++)
      found |= strcmp(t, groups[k]) == 0;
    for (size_t i = 0; i < n && !found; i++)
      for (size_t k = 0; k < v[i].n && !found; k++)
        found = strcmp(t, v[i].figs[k].name) == 0;
    if (!found)
      rc = bad("--fail-if-worse: '%s' is not a figure of these runs (names as the table "
               "gives them, or rate, latency, errors, slope, floor)",
               t);
  }
  free(copy);
  return rc;
}

enum {
  OPT_OUTPUT = 256,
  OPT_REPORT,
  OPT_FAIL,
  OPT_MIN_CHANGE,
  OPT_MIN_ERR,
  OPT_MIN_SLOPE,
  OPT_GNUPLOT,
  OPT_QUIET
};

static const struct option longopts[] = {
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"report", required_argument, NULL, OPT_REPORT},
    {"fail-if-worse", required_argument, NULL, OPT_FAIL},
    {"min-change", required_argument, NULL, OPT_MIN_CHANGE},
    {"min-error-change", required_argument, NULL, OPT_MIN_ERR},
    {"min-slope-change", required_argument, NULL, OPT_MIN_SLOPE},
    {"gnuplot", required_argument, NULL, OPT_GNUPLOT},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int nonneg(const char *opt, const char *arg, double *out, double scale) {
  double v;
  if (vl_units_double(arg, &v) != 0 || !(v >= 0) || !isfinite(v))
    return bad("%s '%s': want a number, 0 or more", opt, arg);
  *out = v * scale;
  return 0;
}

int vl_comparecli_main(int argc, char **argv) {
  vl_compare_opts_t o;
  vl_compare_opts_init(&o);
  const char *output = NULL, *report = NULL, *fail = NULL, *gnuplot_arg = NULL;
  int quiet = 0, opt;
  optind = 1;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (opt) {
    case OPT_OUTPUT:
      output = optarg;
      break;
    case OPT_REPORT:
      report = optarg;
      break;
    case OPT_FAIL:
      fail = optarg;
      break;
    case OPT_MIN_CHANGE:
      if (nonneg("--min-change", optarg, &o.min_change, 0.01))
        return 2;
      break;
    case OPT_MIN_ERR:
      if (nonneg("--min-error-change", optarg, &o.min_error_change, 0.01))
        return 2;
      break;
    case OPT_MIN_SLOPE:
      if (nonneg("--min-slope-change", optarg, &o.min_slope_change, 1))
        return 2;
      break;
    case OPT_GNUPLOT:
      gnuplot_arg = optarg;
      break;
    case OPT_QUIET:
      quiet = 1;
      break;
    case 'h':
      vl_comparecli_usage(stdout);
      return 0;
    case ':':
      return bad("'%s' needs a value (see vlmload compare --help)", argv[optind - 1]);
    default:
      return bad("'%s': not an option of vlmload compare (see vlmload compare --help)",
                 argv[optind - 1]);
    }
  }
  int nruns = argc - optind;
  if (nruns < 2)
    return bad("give two runs or more: the baseline first (see vlmload compare --help)");
  run_t *runs = vl_xcalloc((size_t)nruns, sizeof(run_t));
  int rc = 0;
  for (int i = 0; i < nruns && !rc; i++) {
    runs[i].arg = argv[optind + i];
    rc = run_read(&runs[i]);
    if (!rc && runs[i].matrix != runs[0].matrix)
      rc = bad("'%s' is %s and '%s' %s: runs of different kinds cannot be compared", runs[0].arg,
               runs[0].matrix ? "a matrix folder" : "a run's summary", runs[i].arg,
               runs[i].matrix ? "a matrix folder" : "a run's summary");
  }
  char *gnuplot = NULL;
  if (!rc && report) {
    char err[512];
    if (vl_plot_find_gnuplot(gnuplot_arg, &gnuplot, err, sizeof(err)) != 0)
      fprintf(stderr, PROG ": --report: %s; the page has no chart\n", err);
  }
  cmp_t *v = NULL;
  size_t n = 0, cap = 0;
  for (int i = 1; i < nruns && !rc; i++)
    compare_pair(&runs[0], &runs[i], &o, &v, &n, &cap);
  if (!rc && fail)
    rc = check_names(fail, v, n);
  cJSON *worse = cJSON_CreateArray();
  if (!rc) {
    for (size_t i = 0; i < n; i++) {
      if (!quiet)
        print_table(stdout, &v[i], &o);
      for (size_t k = 0; fail && k < v[i].n; k++)
        if (v[i].figs[k].word == VL_COMPARE_WORSE && named(fail, &v[i].figs[k])) {
          char what[600];
          snprintf(what, sizeof(what), "%s%s%s", v[i].cell, v[i].cell[0] ? ":" : "",
                   v[i].figs[k].name);
          cJSON_AddItemToArray(worse, cJSON_CreateString(what));
          fprintf(stderr, PROG ": %s got worse against the baseline (%s)\n", what, v[i].run->arg);
        }
    }
    int orc = 0;
    if (output)
      orc |= write_json(output, v, n, &o, worse);
    if (report)
      orc |= write_report(report, v, n, &o, gnuplot);
    rc = orc ? 1 : cJSON_GetArraySize(worse) ? 3 : 0;
  }
  cJSON_Delete(worse);
  for (size_t i = 0; i < n; i++) {
    free(v[i].figs);
    cJSON_Delete(v[i].sum_a);
    cJSON_Delete(v[i].sum_b);
  }
  free(v);
  for (int i = 0; i < nruns; i++)
    cJSON_Delete(runs[i].root);
  free(runs);
  free(gnuplot);
  return rc;
}
