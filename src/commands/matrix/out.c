/* `vlmload matrix`: its outputs. The comparison table (stdout and the page), matrix.json (every
 * cell: its status, options, server and summary), the chart of every cell's resident set
 * (rss.png, or rss.gp without gnuplot) and the --report page. */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/csvin.h"
#include "vlmload/htmlreport.h"
#include "vlmload/json.h"
#include "vlmload/outfile.h"
#include "vlmload/plot.h"
#include "vlmload/rateauto.h"
#include "vlmload/series.h"
#include "vlmload/text.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double num(const cJSON *o, const char *a, const char *b) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
  if (b)
    v = cJSON_GetObjectItemCaseSensitive(v, b);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const cJSON *series_of(const vl__matrix_cell_t *c) {
  const cJSON *an = cJSON_GetObjectItemCaseSensitive(c->summary, "memory_analysis");
  return cJSON_GetObjectItemCaseSensitive(an, "series");
}

static cJSON *str_list(char **v) {
  cJSON *a = cJSON_CreateArray();
  for (char **p = v; p && *p; p++)
    cJSON_AddItemToArray(a, cJSON_CreateString(*p));
  return a;
}

static void add_num(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

static cJSON *repeats_json(const vl__matrix_t *m);

static cJSON *cell_json(const vl__matrix_cell_t *c) {
  cJSON *o = cJSON_CreateObject();
  char rel[512];
  cJSON_AddStringToObject(o, "name", c->name);
  cJSON_AddStringToObject(o, "status", c->status);
  if (c->error[0])
    cJSON_AddStringToObject(o, "error", c->error);
  else
    cJSON_AddNullToObject(o, "error");
  cJSON_AddStringToObject(o, "dir", c->name);
  if (c->reps) {
    cJSON *r = cJSON_AddObjectToObject(o, "repeat");
    cJSON_AddStringToObject(r, "of", c->base);
    cJSON_AddNumberToObject(r, "run", c->rep);
    cJSON_AddNumberToObject(r, "runs", c->reps);
  } else {
    cJSON_AddNullToObject(o, "repeat");
  }
  add_num(o, "start_ms", c->start_ms ? (double)c->start_ms : NAN);
  add_num(o, "end_ms", c->end_ms ? (double)c->end_ms : NAN);
  cJSON_AddItemToObject(o, "options",
                        c->options ? cJSON_Duplicate(c->options, 1) : cJSON_CreateObject());
  cJSON_AddItemToObject(o, "load_command", str_list(c->load_started ? c->load_argv : NULL));
  if (c->has_server) {
    cJSON *s = cJSON_AddObjectToObject(o, "server");
    cJSON_AddItemToObject(s, "command", str_list(c->srv_argv));
    cJSON_AddStringToObject(s, "url", c->url);
    cJSON_AddNumberToObject(s, "port", c->port);
    if (c->srv_started)
      cJSON_AddNumberToObject(s, "pid", c->srv_proc.pid);
    else
      cJSON_AddNullToObject(s, "pid");
    cJSON_AddStringToObject(s, "health", c->srv.health);
    add_num(s, "ready_s", c->ready_s > 0 ? c->ready_s : NAN);
    if (c->stopped)
      cJSON_AddStringToObject(s, "stopped", c->stopped);
    else
      cJSON_AddNullToObject(s, "stopped");
    if (c->srv_started && !c->srv_running) {
      cJSON *e = cJSON_AddObjectToObject(s, "exit");
      cJSON_AddNumberToObject(e, "status", (double)c->srv_status);
      cJSON_AddNumberToObject(e, "signal", c->srv_signal);
    } else {
      cJSON_AddNullToObject(s, "exit");
    }
    snprintf(rel, sizeof(rel), "%s/server.log", c->name);
    cJSON_AddStringToObject(s, "log", rel);
  } else {
    cJSON_AddNullToObject(o, "server");
  }
  if (c->summary) {
    cJSON *s = cJSON_AddObjectToObject(o, "summary");
    snprintf(rel, sizeof(rel), "%s/summary.json", c->name);
    cJSON_AddStringToObject(s, "file", rel);
    cJSON_AddNumberToObject(s, "exit_status",
                            c->load_signal ? 128 + c->load_signal : (double)c->load_status);
    const char *keys[] = {"stop_reason", "interrupted", "duration_s",
                          "requests",    "rate",        "latency_ms"};
    for (size_t k = 0; k < VL_ARRAY_SIZE(keys); k++) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->summary, keys[k]);
      if (v)
        cJSON_AddItemToObject(s, keys[k], cJSON_Duplicate(v, 1));
    }
    add_num(s, "achieved_rate", num(c->summary, "rate", "achieved"));
    add_num(s, "e2e_p50_ms", num(c->summary, "latency_ms", "p50"));
  } else {
    cJSON_AddNullToObject(o, "summary");
  }
  const cJSON *series = series_of(c);
  cJSON_AddItemToObject(o, "series", series ? cJSON_Duplicate(series, 1) : cJSON_CreateArray());
  return o;
}

int vl__matrixout_json(const vl__matrix_t *m) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "vlmload_version", VL_VERSION);
  cJSON_AddStringToObject(root, "file", m->file_path);
  cJSON_AddBoolToObject(root, "interrupted", m->signals > 0);
  cJSON *cells = cJSON_AddArrayToObject(root, "cells");
  for (int i = 0; i < m->n; i++)
    cJSON_AddItemToArray(cells, cell_json(&m->cells[i]));
  cJSON_AddItemToObject(root, "repeats", repeats_json(m));
  char *text = cJSON_Print(root), path[PATH_MAX + 64], why[256];
  snprintf(path, sizeof(path), "%s/matrix.json", m->out_dir);
  int rc = vl_outfile_write_text(path, text, why, sizeof(why));
  if (rc != 0)
    vl__matrix_say("'%s': %s", path, why);
  free(text);
  cJSON_Delete(root);
  return rc ? 1 : 0;
}

/* A figure of the table: "-" when unknown. */
static void fig(char *buf, size_t len, const char *fmt, double v) {
  if (isfinite(v))
    snprintf(buf, len, fmt, v);
  else
    snprintf(buf, len, "-");
}

static const cJSON *fit_of(const cJSON *s, const char *a, const char *b) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, a);
  return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

/* A repeated cell's figures for one series over its runs that ran: each slope's mean, standard
 * deviation (n - 1) and range, and how many runs gave the commonest verdict. */
typedef struct {
  const char *series, *verdict;
  int runs, agree;
  struct spread_s {
    int n;
    double mean, sd, min, max;
  } slope, floor;
} spread_t;

static void spread_add(struct spread_s *s, double v, double *sum, double *sumsq) {
  if (!isfinite(v))
    return;
  s->min = s->n ? fmin(s->min, v) : v;
  s->max = s->n ? fmax(s->max, v) : v;
  s->n++;
  *sum += v;
  *sumsq += v * v;
}

static void spread_end(struct spread_s *s, double sum, double sumsq) {
  s->mean = s->n ? sum / s->n : NAN;
  s->sd = s->n > 1 ? sqrt(fmax(0, (sumsq - sum * sum / s->n) / (s->n - 1))) : NAN;
  if (!s->n)
    s->min = s->max = NAN;
}

static const cJSON *series_named(const vl__matrix_cell_t *c, const char *name) {
  const cJSON *s;
  cJSON_ArrayForEach(s, series_of(c)) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "series");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
      return s;
  }
  return NULL;
}

/* The spreads of the repeated cell whose runs are m->cells[first .. first + reps), one per series
 * of its first run that has any; a new array, *n its length. */
static spread_t *spreads(const vl__matrix_t *m, int first, int reps, size_t *n) {
  const vl__matrix_cell_t *lead = NULL;
  for (int i = first; i < first + reps && !lead; i++)
    if (series_of(&m->cells[i]))
      lead = &m->cells[i];
  *n = 0;
  if (!lead)
    return NULL;
  spread_t *v = vl_xcalloc((size_t)cJSON_GetArraySize(series_of(lead)) + 1, sizeof(spread_t));
  const cJSON *s;
  cJSON_ArrayForEach(s, series_of(lead)) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "series");
    if (!cJSON_IsString(name))
      continue;
    spread_t *a = &v[(*n)++];
    a->series = name->valuestring;
    a->runs = reps;
    double ss[2] = {0}, sq[2] = {0};
    const char *verdicts[VL__MATRIX_REPEAT_MAX];
    int nv = 0;
    for (int i = first; i < first + reps; i++) {
      const cJSON *t = series_named(&m->cells[i], name->valuestring);
      if (!t)
        continue;
      spread_add(&a->slope, num(fit_of(t, "ols", NULL), "slope_per_1000", NULL), &ss[0], &sq[0]);
      spread_add(&a->floor, num(fit_of(t, "floor", "fit"), "slope_per_1000", NULL), &ss[1], &sq[1]);
      const cJSON *vd = cJSON_GetObjectItemCaseSensitive(t, "verdict");
      if (cJSON_IsString(vd))
        verdicts[nv++] = vd->valuestring;
    }
    spread_end(&a->slope, ss[0], sq[0]);
    spread_end(&a->floor, ss[1], sq[1]);
    for (int j = 0; j < nv; j++) {
      int same = 0;
      for (int k = 0; k < nv; k++)
        same += strcmp(verdicts[j], verdicts[k]) == 0;
      if (same > a->agree) {
        a->agree = same;
        a->verdict = verdicts[j];
      }
    }
  }
  return v;
}

static cJSON *spread_json(const struct spread_s *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "n", s->n);
  add_num(o, "mean", s->mean);
  add_num(o, "sd", s->sd);
  add_num(o, "min", s->min);
  add_num(o, "max", s->max);
  return o;
}

/* matrix.json's repeats[]: each repeated cell's spreads. */
static cJSON *repeats_json(const vl__matrix_t *m) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; i < m->n; i++) {
    const vl__matrix_cell_t *c = &m->cells[i];
    if (c->rep != 1)
      continue;
    int reps = 0;
    while (i + reps < m->n && m->cells[i + reps].base == c->base)
      reps++;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", c->base);
    cJSON_AddNumberToObject(o, "repeat", c->reps);
    cJSON *runs = cJSON_AddArrayToObject(o, "runs");
    int ok = 0;
    for (int k = i; k < i + reps; k++) {
      cJSON_AddItemToArray(runs, cJSON_CreateString(m->cells[k].name));
      ok += strcmp(m->cells[k].status, "ok") == 0;
    }
    cJSON_AddNumberToObject(o, "ok", ok);
    size_t n;
    spread_t *sp = spreads(m, i, reps, &n);
    cJSON *ser = cJSON_AddArrayToObject(o, "series");
    for (size_t k = 0; k < n; k++) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "series", sp[k].series);
      if (sp[k].verdict)
        cJSON_AddStringToObject(e, "verdict", sp[k].verdict);
      else
        cJSON_AddNullToObject(e, "verdict");
      cJSON_AddNumberToObject(e, "verdict_runs", sp[k].agree);
      cJSON_AddItemToObject(e, "slope_per_1000", spread_json(&sp[k].slope));
      cJSON_AddItemToObject(e, "floor_slope_per_1000", spread_json(&sp[k].floor));
      cJSON_AddItemToArray(ser, e);
    }
    free(sp);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

typedef struct {
  char cell[72], series[160], verdict[32], mech[48], slope[96], floor[32], rate[24], p50[24];
  int index; /* its cell's, or -1 for the heading */
} row_t;

/* An OLS slope and its interval, which is symmetric about it: "+62.52 +/- 0.03", with the unit
 * when it is not MB. */
static void slope_text(char *buf, size_t len, const cJSON *fit, const char *unit) {
  double v = num(fit, "slope_per_1000", NULL);
  const cJSON *ci = cJSON_GetObjectItemCaseSensitive(fit, "ci");
  const cJSON *lo = cJSON_GetArrayItem(ci, 0), *hi = cJSON_GetArrayItem(ci, 1);
  if (!isfinite(v))
    snprintf(buf, len, "-");
  else if (cJSON_IsNumber(lo) && cJSON_IsNumber(hi))
    snprintf(buf, len, "%+.2f +/- %.2f", v, (hi->valuedouble - lo->valuedouble) / 2);
  else
    snprintf(buf, len, "%+.2f", v);
  if (isfinite(v) && unit && strcmp(unit, "MB") != 0) {
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, " %s", unit);
  }
}

/* A series' mechanism and where it is: "leak (heap)", "step (anon)", "none"; "-" when the
 * analysis gives none. */
static void mech_text(char *buf, size_t len, const cJSON *s) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(s, "mechanism");
  const cJSON *k =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "where"), "kind");
  if (!cJSON_IsString(m))
    snprintf(buf, len, "-");
  else if (cJSON_IsString(k) && strcmp(m->valuestring, "none") != 0 &&
           strcmp(m->valuestring, "unknown") != 0)
    snprintf(buf, len, "%s (%s)", m->valuestring, k->valuestring);
  else
    snprintf(buf, len, "%s", m->valuestring);
}
static void repeat_rows(const vl__matrix_t *m, int last, row_t **rows, size_t *n, size_t *cap);

/* The comparison table's rows, the heading first, as a new array; *count gets their number. */
static row_t *table_rows(const vl__matrix_t *m, size_t *count) {
  size_t cap = 16, n = 0;
  row_t *rows = vl_xcalloc(cap, sizeof(row_t));
  row_t head = {"cell",  "series", "verdict", "mechanism", "MB/1000 req",
                "floor", "req/s",  "p50 ms",  -1};
  rows[n++] = head;
  for (int i = 0; i < m->n; i++) {
    const vl__matrix_cell_t *c = &m->cells[i];
    const cJSON *series = series_of(c), *s;
    char rate[24], p50[24];
    fig(rate, sizeof(rate), "%.1f", num(c->summary, "rate", "achieved"));
    fig(p50, sizeof(p50), "%.2f", num(c->summary, "latency_ms", "p50"));
    int any = 0;
    cJSON_ArrayForEach(s, series) {
      if (n == cap)
        rows = vl_xrealloc(rows, (cap *= 2) * sizeof(row_t));
      row_t *r = &rows[n++];
      memset(r, 0, sizeof(*r));
      r->index = i;
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "series");
      const cJSON *verdict = cJSON_GetObjectItemCaseSensitive(s, "verdict");
      snprintf(r->cell, sizeof(r->cell), "%s", any ? "" : c->name);
      vl_text_shown(r->series, sizeof(r->series), cJSON_IsString(name) ? name->valuestring : "?");
      snprintf(r->verdict, sizeof(r->verdict), "%s",
               cJSON_IsString(verdict) ? verdict->valuestring : "-");
      mech_text(r->mech, sizeof(r->mech), s);
      const cJSON *unit = cJSON_GetObjectItemCaseSensitive(s, "unit");
      slope_text(r->slope, sizeof(r->slope), fit_of(s, "ols", NULL),
                 cJSON_IsString(unit) ? unit->valuestring : NULL);
      fig(r->floor, sizeof(r->floor), "%+.2f",
          num(fit_of(s, "floor", "fit"), "slope_per_1000", NULL));
      snprintf(r->rate, sizeof(r->rate), "%s", any ? "" : rate);
      snprintf(r->p50, sizeof(r->p50), "%s", any ? "" : p50);
      any = 1;
    }
    if (!any || strcmp(c->status, "ok") != 0) {
      if (n == cap)
        rows = vl_xrealloc(rows, (cap *= 2) * sizeof(row_t));
      row_t *r = &rows[n++];
      memset(r, 0, sizeof(*r));
      r->index = i;
      snprintf(r->cell, sizeof(r->cell), "%s", any ? "" : c->name);
      snprintf(r->series, sizeof(r->series), "%s",
               strcmp(c->status, "ok") == 0 ? "(no memory series)" : c->status);
      snprintf(r->rate, sizeof(r->rate), "%s", any ? "" : rate);
      snprintf(r->p50, sizeof(r->p50), "%s", any ? "" : p50);
    }
    if (c->reps && c->rep == c->reps && i + 1 >= c->reps)
      repeat_rows(m, i, &rows, &n, &cap);
  }
  *count = n;
  return rows;
}

/* A spread as the table shows it: "+31.50 (31.20..31.80)", "-" with no run. */
static void spread_text(char *buf, size_t len, const struct spread_s *s) {
  if (!s->n)
    snprintf(buf, len, "-");
  else if (s->n == 1)
    snprintf(buf, len, "%+.2f", s->mean);
  else
    snprintf(buf, len, "%+.2f (%+.2f..%+.2f)", s->mean, s->min, s->max);
}

/* The rows of the repeated cell whose runs end at index last: one per series, its mean and
 * range over the runs. */
static void repeat_rows(const vl__matrix_t *m, int last, row_t **rows, size_t *n, size_t *cap) {
  const vl__matrix_cell_t *c = &m->cells[last];
  int first = last - c->reps + 1;
  size_t ns;
  spread_t *sp = spreads(m, first, c->reps, &ns);
  for (size_t k = 0; k < ns; k++) {
    if (*n == *cap)
      *rows = vl_xrealloc(*rows, (*cap *= 2) * sizeof(row_t));
    row_t *r = &(*rows)[(*n)++];
    memset(r, 0, sizeof(*r));
    r->index = -2; /* no folder of its own to link */
    if (k == 0)
      snprintf(r->cell, sizeof(r->cell), "%s (%d runs)", c->base, c->reps);
    vl_text_shown(r->series, sizeof(r->series), sp[k].series);
    snprintf(r->verdict, sizeof(r->verdict), "%s %d/%d", sp[k].verdict ? sp[k].verdict : "-",
             sp[k].agree, sp[k].runs);
    snprintf(r->mech, sizeof(r->mech), "-"); /* each run's own row has its mechanism */
    spread_text(r->slope, sizeof(r->slope), &sp[k].slope);
    spread_text(r->floor, sizeof(r->floor), &sp[k].floor);
  }
  free(sp);
}

#define TABLE_NOTE                                                                                 \
  "mechanism: what the change is: leak, cache, capped-cache, step, warm-up, none or unknown;\n"    \
  "in brackets: the part of the process that carries it\n"                                         \
  "MB/1000 req: the slope over requests completed after the warm-up (OLS), +/- its 95%\n"          \
  "interval; floor: the post-flush floor's slope, in the same unit\n"                              \
  "CELL (N runs): a repeated cell's mean over its runs (min..max), the commonest verdict\n"

/* The comparison table, on f. */
void vl__matrixout_table(const vl__matrix_t *m, FILE *f) {
  size_t n;
  row_t *rows = table_rows(m, &n);
  int w[8] = {0};
  for (size_t i = 0; i < n; i++) {
    const char *cols[8] = {rows[i].cell,  rows[i].series, rows[i].verdict, rows[i].mech,
                           rows[i].slope, rows[i].floor,  rows[i].rate,    rows[i].p50};
    for (int k = 0; k < 8; k++)
      w[k] = VL_MAX(w[k], (int)strlen(cols[k]));
  }
  for (size_t i = 0; i < n; i++) {
    const row_t *r = &rows[i];
    char line[1024];
    int len = snprintf(line, sizeof(line), "%-*s  %-*s  %-*s  %-*s  %*s  %*s  %*s  %*s", w[0],
                       r->cell, w[1], r->series, w[2], r->verdict, w[3], r->mech, w[4], r->slope,
                       w[5], r->floor, w[6], r->rate, w[7], r->p50);
    len = VL_MIN(len, (int)sizeof(line) - 1);
    while (len > 0 && line[len - 1] == ' ')
      len--;
    fprintf(f, "%.*s\n", len, line);
  }
  for (int i = 0; i < m->n; i++)
    if (m->cells[i].error[0])
      fprintf(f, "%s: %s\n", m->cells[i].name, m->cells[i].error);
  fputs(TABLE_NOTE, f);
  free(rows);
}

/* The series of a cell the chart of every cell draws: the server's tree, else the first
 * resident set, else none (-1). */
static int rss_series(const vl_series_set_t *set) {
  int first = -1;
  for (size_t k = 0; k < set->nser; k++) {
    const char *nm = set->ser[k].name;
    if (strcmp(nm, "rss_mb." VL__MATRIX_TREE_LABEL) == 0)
      return (int)k;
    if (first < 0 && strncmp(nm, "rss_mb.", 7) == 0 && !strchr(nm, '/'))
      first = (int)k;
  }
  return first;
}

/* Each cell's resident set from its timeline, the rate-auto probe's rows left out. */
void vl__matrixout_rss_read(const vl__matrix_t *m, vl__matrix_rss_t *r) {
  r->n = m->n;
  r->sets = vl_xcalloc((size_t)m->n, sizeof(vl_series_set_t));
  r->tables = vl_xcalloc((size_t)m->n, sizeof(vl_csv_t *));
  r->lines = vl_xcalloc((size_t)m->n, sizeof(vl_plot_line_t));
  for (int i = 0; i < m->n; i++) {
    const vl__matrix_cell_t *c = &m->cells[i];
    char path[PATH_MAX + 64], err[512];
    if (!c->load_started)
      continue;
    vl__matrix_cell_path(c, path, sizeof(path), "timeline.csv");
    vl_series_opts_t o;
    vl_series_opts_init(&o);
    if (vl_csv_load(&r->tables[i], path, err, sizeof(err)) != 0)
      continue;
    vl_csv_drop_rows(r->tables[i], "phase", VL_RATEAUTO_PHASE); /* the probe's rows, as analyze */
    if (vl_series_read(&r->sets[i], r->tables[i], NULL, &o, err, sizeof(err)) != 0)
      continue;
    int k = rss_series(&r->sets[i]);
    if (k < 0 || r->sets[i].ser[k].n < 2) /* no line to draw */
      continue;
    const vl_series_mem_t *s = &r->sets[i].ser[k];
    r->lines[r->n_lines++] = (vl_plot_line_t){.name = c->name, .x = s->x, .y = s->y, .n = s->n};
  }
}

void vl__matrixout_rss_free(vl__matrix_rss_t *r) {
  for (int i = 0; i < r->n; i++) {
    vl_series_free(&r->sets[i]);
    vl_csv_free(r->tables[i]);
  }
  free(r->sets);
  free(r->tables);
  free(r->lines);
}

static vl_plot_t rss_plot(const vl__matrix_t *m, const vl__matrix_rss_t *r) {
  return (vl_plot_t){.title = "Resident set of every cell",
                     .y_unit = "MB",
                     .lines = r->lines,
                     .n_lines = r->n_lines,
                     .y_mode = VL_PLOT_Y_ABS,
                     .gnuplot = m->gnuplot};
}

/* DIR/rss.png, or without gnuplot DIR/rss.gp (its script, data included). Returns 0 or 1. */
int vl__matrixout_rss(const vl__matrix_t *m, const vl__matrix_rss_t *r) {
  char png[PATH_MAX + 64], err[512];
  snprintf(png, sizeof(png), "%s/rss.png", m->out_dir);
  if (r->n_lines == 0)
    return 0;
  vl_plot_t p = rss_plot(m, r);
  if (m->gnuplot) {
    if (vl_plot_write(&p, png, err, sizeof(err)) != 0) {
      vl__matrix_say("%s: %s", png, err);
      return 1;
    }
    return 0;
  }
  char gp[PATH_MAX + 64];
  snprintf(gp, sizeof(gp), "%s/rss.gp", m->out_dir);
  FILE *f = fopen(gp, "w");
  int bad = !f || vl_plot_script(&p, "rss.png", f) != 0;
  if (f && fclose(f) != 0)
    bad = 1;
  if (bad) {
    vl__matrix_say("'%s': %s", gp, strerror(errno));
    return 1;
  }
  return 0;
}

/* --report: the table and the resident sets on one page. Returns 0 or 1. */
int vl__matrixout_report(const vl__matrix_t *m, const vl__matrix_rss_t *r) {
  char *svg = NULL, err[512];
  vl_plot_t p = rss_plot(m, r);
  if (r->n_lines && vl_plot_svg(&p, &svg, err, sizeof(err)) != 0)
    vl__matrix_say("--report: the chart of resident sets: %s", err);
  size_t len = 0, nr;
  row_t *rows = table_rows(m, &nr);
  char *page = NULL;
  FILE *f = open_memstream(&page, &len);
  fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>vlmload matrix: ", f);
  vl_htmlreport_escape(f, m->file_path);
  fputs("</title><style>body{font-family:sans-serif;margin:2em}svg{max-width:100%;height:auto}"
        "table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 8px}</style>"
        "</head><body>\n<h1>vlmload matrix: ",
        f);
  vl_htmlreport_escape(f, m->file_path);
  fprintf(f, "</h1>\n<p>%d cells%s; each cell's own report is CELL/report.html in ", m->n,
          m->signals ? ", interrupted" : "");
  vl_htmlreport_escape(f, m->out_dir);
  fputs(".</p>\n", f);
  /* The table, each cell's name a link to its own report where it wrote one. */
  const char *head[8] = {rows[0].cell,  rows[0].series, rows[0].verdict, rows[0].mech,
                         rows[0].slope, rows[0].floor,  rows[0].rate,    rows[0].p50};
  vl_htmlreport_cell_t *cells = vl_xcalloc(nr * 8, sizeof(*cells));
  char(*links)[PATH_MAX] = vl_xcalloc(nr, sizeof(*links));
  for (size_t i = 1; i < nr; i++) {
    const row_t *w = &rows[i];
    const char *text[8] = {w->cell,  w->series, w->verdict, w->mech,
                           w->slope, w->floor,  w->rate,    w->p50};
    for (int k = 0; k < 8; k++)
      cells[(i - 1) * 8 + k].text = text[k];
    char path[PATH_MAX + 64];
    if (w->index >= 0)
      vl__matrix_cell_path(&m->cells[w->index], path, sizeof(path), "report.html");
    if (w->index >= 0 && w->cell[0] && access(path, R_OK) == 0 &&
        vl_htmlreport_relative(m->report, path, links[i], sizeof(links[i])) == 0)
      cells[(i - 1) * 8].href = links[i];
  }
  vl_htmlreport_table(f, "cells", head, 8, cells, nr - 1);
  for (int i = 0; i < m->n; i++)
    if (m->cells[i].error[0]) {
      fputs("<p class=error>", f);
      vl_htmlreport_escape(f, m->cells[i].name);
      fputs(": ", f);
      vl_htmlreport_escape(f, m->cells[i].error);
      fputs("</p>\n", f);
    }
  fputs("<p class=note>", f);
  vl_htmlreport_escape(f, TABLE_NOTE);
  fputs("</p>\n", f);
  free(cells);
  free(links);
  free(rows);
  if (svg)
    fprintf(f, "<h2>Resident set of every cell</h2>\n%s\n", svg);
  fputs("</body></html>", f);
  fclose(f);
  char why[256];
  int rc = vl_outfile_write_text(m->report, page, why, sizeof(why));
  if (rc != 0)
    vl__matrix_say("--report '%s': %s", m->report, why);
  free(page);
  free(svg);
  return rc ? 1 : 0;
}
