#include "vlmload/htmlreport.h"
#include "vlmload/common.h"
#include "vlmload/outfile.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHART_W 1100
#define CHART_H 300

static const char *const COLOURS[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"};

void vl_htmlreport_escape(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&':
      fputs("&amp;", f);
      break;
    case '<':
      fputs("&lt;", f);
      break;
    case '>':
      fputs("&gt;", f);
      break;
    case '"':
      fputs("&quot;", f);
      break;
    case '\'':
      fputs("&#39;", f);
      break;
    default:
      fputc(*s, f);
    }
  }
}

/* A number as the text summary shows it: integers whole, others to 3 significant decimals. */
static void put_num(FILE *f, double v) {
  if (!isfinite(v))
    fputs("&ndash;", f);
  else if (v == floor(v) && fabs(v) < 1e15)
    fprintf(f, "%.0f", v);
  else if (fabs(v) >= 100)
    fprintf(f, "%.2f", v);
  else
    fprintf(f, "%.3f", v);
}

/* Any JSON value as a table cell's text. */
static void put_value(FILE *f, const cJSON *v) {
  if (cJSON_IsNumber(v)) {
    put_num(f, v->valuedouble);
  } else if (cJSON_IsString(v)) {
    vl_htmlreport_escape(f, v->valuestring);
  } else if (cJSON_IsBool(v)) {
    fputs(cJSON_IsTrue(v) ? "true" : "false", f);
  } else if (!v || cJSON_IsNull(v)) {
    fputs("&ndash;", f);
  } else {
    char *t = cJSON_PrintUnformatted(v);
    vl_htmlreport_escape(f, t);
    cJSON_free(t);
  }
}

static const cJSON *get(const cJSON *o, const char *key) {
  return o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

/* A table column: the key of each row object, the cell's class (NULL: none), and the heading
 * (NULL: the key). */
typedef struct {
  const char *key, *cls, *head;
} column_t;

/* A table of the objects of rows, one per line, a cell per column. */
static void put_table(FILE *f, const char *id, const cJSON *rows, const column_t *cols, size_t n) {
  fprintf(f, "<table id=%s><tr>", id);
  for (size_t k = 0; k < n; k++)
    fprintf(f, "<th>%s</th>", cols[k].head ? cols[k].head : cols[k].key);
  fputs("</tr>\n", f);
  for (const cJSON *r = rows->child; r; r = r->next) {
    fputs("<tr>", f);
    for (size_t k = 0; k < n; k++) {
      if (cols[k].cls)
        fprintf(f, "<td class=%s>", cols[k].cls);
      else
        fputs("<td>", f);
      put_value(f, get(r, cols[k].key));
      fputs("</td>", f);
    }
    fputs("</tr>\n", f);
  }
  fputs("</table>\n", f);
}

/* One "name | value" row when the summary has key (path a.b: one level down). */
static void kv_row(FILE *f, const cJSON *sum, const char *label, const char *key, const char *sub,
                   const char *unit) {
  const cJSON *v = get(sum, key);
  if (sub)
    v = get(v, sub);
  if (!v)
    return;
  fputs("<tr><th>", f);
  vl_htmlreport_escape(f, label);
  fputs("</th><td class=num>", f);
  put_value(f, v);
  if (unit && cJSON_IsNumber(v))
    fprintf(f, " %s", unit);
  fputs("</td></tr>\n", f);
}

static void summary_section(FILE *f, const cJSON *sum) {
  fputs("<section id=summary><h2>Summary</h2>\n<table class=kv>\n", f);
  kv_row(f, sum, "model", "model", NULL, NULL);
  kv_row(f, sum, "stopped by", "stop_reason", NULL, NULL);
  kv_row(f, sum, "duration", "duration_s", NULL, "s");
  kv_row(f, sum, "requests sent", "requests", "sent", NULL);
  kv_row(f, sum, "requests ok", "requests", "ok", NULL);
  kv_row(f, sum, "requests failed", "requests", "failed", NULL);
  kv_row(f, sum, "requests dropped", "requests", "dropped", NULL);
  kv_row(f, sum, "images sent", "images", "sent", NULL);
  kv_row(f, sum, "target rate", "rate", "target", "req/s");
  kv_row(f, sum, "achieved rate", "rate", "achieved", "req/s");
  kv_row(f, sum, "request throughput", "request_throughput", NULL, "req/s");
  kv_row(f, sum, "input throughput", "input_throughput", NULL, "tok/s");
  kv_row(f, sum, "output throughput", "output_throughput", NULL, "tok/s");
  kv_row(f, sum, "prompt tokens", "total_input_tokens", NULL, NULL);
  kv_row(f, sum, "completion tokens", "total_output_tokens", NULL, NULL);
  kv_row(f, sum, "mean concurrency", "concurrency", NULL, NULL);
  fputs("</table>\n", f);

  /* Goodput and the SLO shares: whatever keys the summary has for them, an object's members one
   * row each ("slo.ttft"). */
  int any = 0;
  for (const cJSON *c = sum->child; c; c = c->next) {
    if (!c->string || (!strstr(c->string, "goodput") && !strstr(c->string, "slo")))
      continue;
    if (!any++)
      fputs("<h3>Goodput</h3>\n<table class=kv id=goodput>\n", f);
    const cJSON *first = cJSON_IsObject(c) && c->child ? c->child : c;
    for (const cJSON *m = first; m; m = first == c ? NULL : m->next) {
      fputs("<tr><th>", f);
      vl_htmlreport_escape(f, c->string);
      if (m != c) {
        fputc('.', f);
        vl_htmlreport_escape(f, m->string);
      }
      fputs("</th><td class=num>", f);
      put_value(f, m);
      fputs("</td></tr>\n", f);
    }
  }
  if (any)
    fputs("</table>\n", f);

  /* The error classes that occurred, a row each; none, no table. */
  const cJSON *errs = get(sum, "errors");
  int errors = 0;
  for (const cJSON *c = cJSON_IsObject(errs) ? errs->child : NULL; c; c = c->next) {
    if (!cJSON_IsNumber(c) || c->valuedouble == 0)
      continue;
    if (!errors++)
      fputs("<h3>Errors by class</h3>\n<table class=kv id=errors>\n", f);
    fputs("<tr><th>", f);
    vl_htmlreport_escape(f, c->string);
    fputs("</th><td class=num>", f);
    put_value(f, c);
    fputs("</td></tr>\n", f);
  }
  if (errors)
    fputs("</table>\n", f);
  /* Requests by the size of their images, where some failed and sizes differ: which size drew
   * which errors. */
  const cJSON *sizes = get(sum, "requests_by_image_size");
  if (errors && cJSON_GetArraySize(sizes) > 1) {
    fputs("<h3>Requests by image size</h3>\n<table id=sizes><tr><th>image size</th>"
          "<th>completed</th><th>failed</th><th>errors</th><th>first message</th></tr>\n",
          f);
    for (const cJSON *r = sizes->child; r; r = r->next) {
      fputs("<tr><td>", f);
      put_value(f, get(r, "size"));
      fputs("</td><td class=num>", f);
      put_value(f, get(r, "completed"));
      fputs("</td><td class=num>", f);
      put_value(f, get(r, "failed"));
      fputs("</td><td>", f);
      const cJSON *e = get(r, "errors");
      for (const cJSON *c = cJSON_IsObject(e) ? e->child : NULL; c; c = c->next) {
        fputs(c == e->child ? "" : ", ", f);
        vl_htmlreport_escape(f, c->string);
        fputc(' ', f);
        put_value(f, c);
      }
      fputs("</td><td>", f);
      put_value(f, get(r, "message"));
      fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
  }
  const cJSON *msgs = get(sum, "error_messages");
  if (cJSON_IsArray(msgs) && cJSON_GetArraySize(msgs) > 0) {
    static const column_t cols[] = {{"class", NULL, NULL},
                                    {"status", "num", NULL},
                                    {"count", "num", NULL},
                                    {"message", NULL, NULL}};
    fputs("<h3>Error messages</h3>\n", f);
    put_table(f, "messages", msgs, cols, VL_ARRAY_SIZE(cols));
  }
  fputs("</section>\n", f);
}

/* One row per latency the summary has; the columns are the figures of the first one (the same
 * for all: count, mean, std, min, the percentiles asked for, max). */
static void latency_section(FILE *f, const cJSON *sum) {
  static const char *const keys[][2] = {
      {"latency_ms", "end-to-end"}, {"latency_sent_ms", "from send"},
      {"ttft_ms", "TTFT"},          {"first_content_ms", "first content"},
      {"tpot_ms", "TPOT"},          {"itl_ms", "ITL"},
      {"send_lag_ms", "send lag"},
  };
  const cJSON *head = get(sum, "latency_ms");
  if (!cJSON_IsObject(head))
    return;
  fputs("<section id=latency><h2>Latency (ms)</h2>\n<table id=percentiles><tr><th></th>", f);
  for (const cJSON *c = head->child; c; c = c->next) {
    fputs("<th>", f);
    vl_htmlreport_escape(f, c->string);
    fputs("</th>", f);
  }
  fputs("</tr>\n", f);
  for (size_t i = 0; i < VL_ARRAY_SIZE(keys); i++) {
    const cJSON *o = get(sum, keys[i][0]);
    const cJSON *n = get(o, "count");
    if (!cJSON_IsObject(o) || !cJSON_IsNumber(n) || n->valuedouble <= 0)
      continue;
    fprintf(f, "<tr><th>%s</th>", keys[i][1]);
    for (const cJSON *c = head->child; c; c = c->next) {
      fputs("<td class=num>", f);
      put_value(f, get(o, c->string));
      fputs("</td>", f);
    }
    fputs("</tr>\n", f);
  }
  fputs("</table>\n</section>\n", f);
}

/* The server: its kind, its own settings read from its processes (the caps of its caches), and its
 * counters' change over the run. */
static void server_section(FILE *f, const cJSON *sum) {
  const cJSON *srv = get(sum, "server"), *set = get(srv, "settings"), *ctr = get(srv, "counters");
  int has_set = cJSON_IsArray(set) && set->child, has_ctr = cJSON_IsArray(ctr) && ctr->child;
  if (!has_set && !has_ctr)
    return;
  fputs("<section id=server><h2>Server</h2>\n", f);
  if (cJSON_IsString(get(srv, "kind"))) {
    fputs("<p>kind <b>", f);
    vl_htmlreport_escape(f, get(srv, "kind")->valuestring);
    fputs("</b></p>\n", f);
  }
  if (has_set) {
    static const column_t cols[] = {{"process", NULL, "process"},   {"pid", "num", "pid"},
                                    {"name", NULL, "setting"},      {"value", "num", "value"},
                                    {"bytes", "num", "bytes"},      {"source", NULL, "from"},
                                    {"means", NULL, "what it sets"}};
    put_table(f, "settings", set, cols, VL_ARRAY_SIZE(cols));
  }
  if (has_ctr) {
    static const column_t cols[] = {{"name", NULL, "counter"},
                                    {"first", "num", "first"},
                                    {"last", "num", "last"},
                                    {"change", "num", "change"}};
    put_table(f, "counters", ctr, cols, VL_ARRAY_SIZE(cols));
  }
  fputs("</section>\n", f);
}

/* The phases or sweep stages, one row each; the columns are the first one's keys (so figures
 * added per stage, such as goodput, show as they come). */
static void phases_section(FILE *f, const cJSON *sum) {
  const cJSON *arr = get(sum, "phases");
  if (!cJSON_IsArray(arr) || !cJSON_IsObject(arr->child))
    return;
  fputs("<section id=stages><h2>Phases</h2>\n<table id=stage-table><tr>", f);
  for (const cJSON *c = arr->child->child; c; c = c->next) {
    fputs("<th>", f);
    vl_htmlreport_escape(f, c->string);
    fputs("</th>", f);
  }
  fputs("</tr>\n", f);
  for (const cJSON *p = arr->child; p; p = p->next) {
    fputs("<tr>", f);
    for (const cJSON *c = arr->child->child; c; c = c->next) {
      fputs(cJSON_IsNumber(get(p, c->string)) ? "<td class=num>" : "<td>", f);
      put_value(f, get(p, c->string));
      fputs("</td>", f);
    }
    fputs("</tr>\n", f);
  }
  fputs("</table>\n</section>\n", f);
}

/* ---- charts drawn here ------------------------------------------------------------------------
 */

typedef struct {
  const char *name;
  double *y; /* NAN breaks the line */
} line_t;

/* A step of 1, 2 or 5 times a power of ten that cuts span into about 5 parts. */
static double nice_step(double span) {
  double raw = span / 5, mag = pow(10, floor(log10(raw))), r = raw / mag;
  return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

static void chart(FILE *f, const char *id, const char *title, const char *unit, const double *x,
                  size_t n, const line_t *lines, size_t nl) {
  double x0 = INFINITY, x1 = -INFINITY, y1 = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i]))
      continue;
    x0 = fmin(x0, x[i]);
    x1 = fmax(x1, x[i]);
    for (size_t k = 0; k < nl; k++)
      if (isfinite(lines[k].y[i]))
        y1 = fmax(y1, lines[k].y[i]);
  }
  if (!(x1 > x0))
    x1 = x0 + 1;
  if (!isfinite(x0))
    x0 = 0, x1 = 1;
  if (!(y1 > 0))
    y1 = 1;
  double ystep = nice_step(y1), xstep = nice_step(x1 - x0);
  y1 = ceil(y1 / ystep) * ystep;
  const double L = 70, R = 20, T = 34, B = 40;
  const double pw = CHART_W - L - R, ph = CHART_H - T - B;
#define PX(v) (L + ((v)-x0) / (x1 - x0) * pw)
#define PY(v) (T + ph - (v) / y1 * ph)
  fprintf(f,
          "<svg id=\"%s\" class=chart xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
          "height=\"%d\" viewBox=\"0 0 %d %d\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
          "<text x=\"%d\" y=\"20\" text-anchor=\"middle\" font-size=\"15\">%s (%s)</text>\n",
          id, CHART_W, CHART_H, CHART_W, CHART_H, CHART_W / 2, title, unit);
  for (double v = 0; v <= y1 + ystep / 2; v += ystep) {
    fprintf(f,
            "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%g</text>\n",
            L, L + pw, PY(v), PY(v), L - 6, PY(v) + 4, v);
  }
  for (double v = ceil(x0 / xstep) * xstep; v <= x1 + xstep / 1e6; v += xstep)
    fprintf(f,
            "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\">%g</text>\n",
            PX(v), PX(v), T, T + ph, PX(v), T + ph + 16, v);
  fprintf(f,
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
          "stroke=\"#444\"/>\n<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
          "font-size=\"12\">seconds into the run</text>\n",
          L, T, pw, ph, L + pw / 2, CHART_H - 6);
  for (size_t k = 0; k < nl; k++) {
    const char *col = COLOURS[k % VL_ARRAY_SIZE(COLOURS)];
    int open = 0;
    for (size_t i = 0; i < n; i++) {
      if (!isfinite(x[i]) || !isfinite(lines[k].y[i])) {
        if (open)
          fputs("\"/>\n", f);
        open = 0;
        continue;
      }
      if (!open) {
        /* The figures drawn, beside their pixels: data-x and data-y, as a reader checks them. */
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" data-name=\"", col);
        vl_htmlreport_escape(f, lines[k].name);
        fputs("\" data-x=\"", f);
        for (size_t j = i; j < n && isfinite(x[j]) && isfinite(lines[k].y[j]); j++)
          fprintf(f, "%s%.10g", j > i ? " " : "", x[j]);
        fputs("\" data-y=\"", f);
        for (size_t j = i; j < n && isfinite(x[j]) && isfinite(lines[k].y[j]); j++)
          fprintf(f, "%s%.10g", j > i ? " " : "", lines[k].y[j]);
        fputs("\" points=\"", f);
      }
      fprintf(f, "%s%.1f,%.1f", open ? " " : "", PX(x[i]), PY(lines[k].y[i]));
      open = 1;
    }
    if (open)
      fputs("\"/>\n", f);
    double lx = L + 10 + (double)k * 180;
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">",
            lx, T + 8, col, lx + 18, T + 13);
    vl_htmlreport_escape(f, lines[k].name);
    fputs("</text>\n", f);
  }
#undef PX
#undef PY
  fputs("</svg>\n", f);
}

/* A column of the timeline as numbers (NULL when it is not there or not numeric). */
static double *column(const vl_csv_t *tl, const char *name) {
  int c = vl_csv_col(tl, name);
  if (c < 0)
    return NULL;
  size_t n = vl_csv_nrows(tl);
  double *v = vl_xmalloc((n + 1) * sizeof(double));
  char err[256];
  if (vl_csv_numbers(tl, (size_t)c, v, err, sizeof(err)) != 0) {
    free(v);
    return NULL;
  }
  return v;
}

/* Per second: the rows' counts (of requests sent, that succeeded, of tokens) added up over each
 * second of the run, however finely the timeline samples. Second k (1, 2, ...) holds the rows whose
 * middle falls in [k-1, k), and its figure is their count: requests per second. A second the rows
 * cover less than 0.9 s of (the run's last, cut short) shows its count over the time covered, and
 * is left out under half a second. Rows of a second or longer are shown as they are, each its count
 * over its length at its end. */
typedef struct {
  size_t n;     /* points */
  double *x;    /* each point's end, seconds into the run */
  double *span; /* the time its rows cover */
  long *bin;    /* per row: its point, or -1 */
} persec_t;

static void persec_init(persec_t *p, const double *x, size_t n) {
  memset(p, 0, sizeof(*p));
  p->x = vl_xmalloc((n + 1) * sizeof(double));
  p->span = vl_xcalloc(n + 1, sizeof(double));
  p->bin = vl_xmalloc((n + 1) * sizeof(long));
  /* The rows' usual length: their median. */
  double *dt = vl_xmalloc((n + 1) * sizeof(double)), prev = 0;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (isfinite(x[i]) && x[i] > prev)
      dt[m++] = x[i] - prev;
    if (isfinite(x[i]))
      prev = x[i];
  }
  for (size_t a = 1; a < m; a++) /* insertion sort: timelines are short */
    for (size_t b = a; b > 0 && dt[b - 1] > dt[b]; b--) {
      double t = dt[b];
      dt[b] = dt[b - 1];
      dt[b - 1] = t;
    }
  int whole = m == 0 || dt[m / 2] >= 0.95;
  free(dt);
  prev = 0;
  for (size_t i = 0; i < n; i++) {
    p->bin[i] = -1;
    if (!isfinite(x[i]) || !(x[i] > prev))
      continue;
    double len = x[i] - prev;
    prev = x[i];
    if (whole) {
      p->x[p->n] = x[i];
      p->span[p->n] = len;
      p->bin[i] = (long)p->n++;
      continue;
    }
    double end = floor(x[i] - len / 2) + 1;
    if (!p->n || p->x[p->n - 1] != end) {
      p->x[p->n] = end;
      p->span[p->n++] = 0;
    }
    p->span[p->n - 1] += len;
    p->bin[i] = (long)p->n - 1;
  }
  if (whole)
    return;
  /* A second covered for less than half of it is too short to stand for one. */
  for (size_t k = 0; k < p->n; k++)
    if (p->span[k] < 0.5)
      p->x[k] = NAN;
}

/* The points of one count column (count[i]: row i's count), or NULL without it. */
static double *persec_of(const persec_t *p, const double *count, size_t n) {
  if (!count)
    return NULL;
  double *y = vl_xcalloc(p->n + 1, sizeof(double));
  for (size_t i = 0; i < n; i++)
    if (p->bin[i] >= 0 && isfinite(count[i]))
      y[p->bin[i]] += count[i];
  for (size_t k = 0; k < p->n; k++)
    if (p->span[k] < 0.9 || p->span[k] >= 1.1)
      y[k] /= p->span[k];
  return y;
}

static void persec_free(persec_t *p) {
  free(p->x);
  free(p->span);
  free(p->bin);
}

/* A row's count of a column the timeline gives as a count, or as a rate per second (times the
 * row's length), or NULL with neither. */
static double *counts(const vl_csv_t *tl, const char *count, const char *rate, const double *x) {
  double *c = count ? column(tl, count) : NULL;
  if (c || !rate)
    return c;
  double *r = column(tl, rate);
  size_t n = vl_csv_nrows(tl);
  for (size_t i = 0, prev = 0; r && i < n; i++) {
    double len = isfinite(x[i]) && i > 0 && isfinite(x[prev]) ? x[i] - x[prev] : x[i];
    r[i] *= len;
    if (isfinite(x[i]))
      prev = i;
  }
  return r;
}

/* The phases, where the timeline has them: one row per phase, however often it came back (a
 * flush's, at each flush): how many times, from when, for how long in all. */
static void phases_table(FILE *f, const vl_csv_t *tl, const double *x) {
  int pc = vl_csv_col(tl, "phase");
  size_t n = vl_csv_nrows(tl);
  if (pc < 0 || n == 0)
    return;
  typedef struct {
    const char *name;
    size_t times;
    double from, seconds;
  } phase_t;
  phase_t *ph = vl_xcalloc(n, sizeof(phase_t));
  size_t np = 0;
  const char *last = NULL;
  for (size_t i = 0; i < n; i++) {
    const char *p = vl_csv_cell(tl, i, (size_t)pc);
    double start = i ? x[i - 1] : 0, len = isfinite(x[i]) && isfinite(start) ? x[i] - start : 0;
    size_t k = 0;
    while (k < np && strcmp(ph[k].name, p) != 0)
      k++;
    if (k == np)
      ph[np++] = (phase_t){p, 0, start, 0};
    if (!last || strcmp(last, p) != 0)
      ph[k].times++;
    ph[k].seconds += len;
    last = p;
  }
  fputs("<h3>Phases</h3>\n<table id=phases><tr><th>phase</th><th>times</th><th>from (s)</th>"
        "<th>seconds in all</th></tr>\n",
        f);
  for (size_t k = 0; k < np; k++) {
    fputs("<tr><td>", f);
    vl_htmlreport_escape(f, ph[k].name);
    fprintf(f, "</td><td class=num>%zu</td><td class=num>", ph[k].times);
    put_num(f, ph[k].from);
    fputs("</td><td class=num>", f);
    put_num(f, round(ph[k].seconds * 1000) / 1000);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
  free(ph);
}

static void timeline_section(FILE *f, const vl_csv_t *tl) {
  size_t n = vl_csv_nrows(tl);
  if (n == 0)
    return;
  double *x = column(tl, "elapsed_s"), *wall = column(tl, "wall_ms");
  if (!x && wall) {
    x = vl_xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++)
      x[i] = (wall[i] - wall[0]) / 1000;
  }
  if (!x) {
    free(wall);
    return;
  }
  fputs("<section id=timeline><h2>Per second</h2>\n", f);
  persec_t ps;
  persec_init(&ps, x, n);
  double *sent_c = counts(tl, "sent", "rate_sent", x), *ok_c = counts(tl, "ok", "rate_ok", x);
  double *tok_c = counts(tl, "completion_tokens", NULL, x);
  /* A goodput column (requests/s meeting the SLOs), where the timeline has one. */
  const char *gname = NULL;
  for (size_t k = 0; k < vl_csv_ncols(tl) && !gname; k++)
    if (strstr(vl_csv_colname(tl, k), "goodput"))
      gname = vl_csv_colname(tl, k);
  double *good_c = gname ? counts(tl, NULL, gname, x) : NULL;
  double *sent = persec_of(&ps, sent_c, n), *ok = persec_of(&ps, ok_c, n);
  double *tok = persec_of(&ps, tok_c, n), *good = persec_of(&ps, good_c, n);
  line_t thr[3];
  size_t nt = 0;
  if (ok)
    thr[nt++] = (line_t){"ok requests/s", ok};
  if (sent)
    thr[nt++] = (line_t){"sent requests/s", sent};
  if (good)
    thr[nt++] = (line_t){gname, good};
  if (nt)
    chart(f, "chart-throughput", "Requests per second", "req/s", ps.x, ps.n, thr, nt);
  if (tok)
    chart(f, "chart-tokens", "Output tokens per second", "tok/s", ps.x, ps.n,
          &(line_t){"completion tokens/s", tok}, 1);

  /* Latency per row: percentiles of rows do not add up into seconds. A row in which no request
   * succeeded has no latency (its percentiles read 0). */
  double *okn = column(tl, "ok"), *p50 = column(tl, "e2e_p50_ms"), *p99 = column(tl, "e2e_p99_ms");
  for (size_t i = 0; okn && i < n; i++)
    if (!(okn[i] > 0)) {
      if (p50)
        p50[i] = NAN;
      if (p99)
        p99[i] = NAN;
    }
  line_t lat[2];
  size_t nla = 0;
  if (p50)
    lat[nla++] = (line_t){"e2e p50", p50};
  if (p99)
    lat[nla++] = (line_t){"e2e p99", p99};
  if (nla)
    chart(f, "chart-latency", "End-to-end latency per timeline row", "ms", x, n, lat, nla);
  phases_table(f, tl, x);
  fputs("</section>\n", f);
  persec_free(&ps);
  double *all[] = {x, wall, sent_c, ok_c, tok_c, good_c, sent, ok, tok, good, okn, p50, p99};
  for (size_t k = 0; k < VL_ARRAY_SIZE(all); k++)
    free(all[k]);
}

/* Whether a series is one of a process's memory by kind (the monitor's anatomy). */
static int is_kind(const char *name) {
  static const char *const kinds[] = {"anon_mb.", "file_mb.",   "shmem_mb.",
                                      "heap_mb.", "device_mb.", "arenas."};
  for (size_t i = 0; i < VL_ARRAY_SIZE(kinds); i++)
    if (strncmp(name, kinds[i], strlen(kinds[i])) == 0)
      return 1;
  return 0;
}

/* What the page leads with: each memory series' verdict, then the plot they are read from; with
 * flushes that leave caches as they are (the summary's flushes.not_cleared), a note that the
 * post-flush floor holds them. */
static void memory_section(FILE *f, const cJSON *an, const char *svg, const cJSON *sum) {
  const cJSON *series = get(an, "series");
  if (!svg && !cJSON_IsArray(series))
    return;
  fputs("<section id=memory><h2>Memory</h2>\n", f);
  const cJSON *left = get(get(sum, "flushes"), "not_cleared");
  if (cJSON_IsString(left)) {
    fputs("<p class=note id=not-cleared>", f);
    vl_htmlreport_escape(f, left->valuestring);
    fputs(": the post-flush floor holds what they keep.</p>\n", f);
  }
  /* The resident sets and the server's own figures lead, then the plot, then the memory by kind
   * (anatomy: anon_mb., file_mb., ... of each process), which only says where a change is. */
  static const column_t cols[] = {
      {"series", NULL, "series"}, {"verdict", "verdict", "verdict"}, {"reason", NULL, "why"}};
  cJSON *lead = cJSON_CreateArray(), *kinds = cJSON_CreateArray();
  const cJSON *s;
  cJSON_ArrayForEach(s, series) {
    const cJSON *name = get(s, "series");
    cJSON_AddItemReferenceToArray(cJSON_IsString(name) && is_kind(name->valuestring) ? kinds : lead,
                                  (cJSON *)s);
  }
  if (cJSON_GetArraySize(lead))
    put_table(f, "verdicts", lead, cols, VL_ARRAY_SIZE(cols));
  if (svg) {
    /* The document's XML declaration and DOCTYPE have no place inside HTML: from <svg on. */
    const char *at = strstr(svg, "<svg");
    fputs("<div class=plot>\n", f);
    fputs(at ? at : "", f);
    fputs("</div>\n", f);
  }
  if (cJSON_GetArraySize(kinds)) {
    fputs("<h3>Memory by kind</h3>\n", f);
    put_table(f, "kinds", kinds, cols, VL_ARRAY_SIZE(cols));
  }
  cJSON_Delete(lead);
  cJSON_Delete(kinds);
  fputs("</section>\n", f);
}

/* The page's header under its title: what was loaded and which model answered, and the version
 * and source. */
static void header(FILE *f, const vl_htmlreport_t *r, const cJSON *sum) {
  const cJSON *cfg = get(sum, "config"), *url = get(cfg, "url"), *ep = get(cfg, "endpoint");
  const cJSON *model = get(sum, "model");
  if (cJSON_IsString(url) || cJSON_IsString(model)) {
    fputs("<p class=target>", f);
    if (cJSON_IsString(url)) {
      fputs("target <b>", f);
      vl_htmlreport_escape(f, url->valuestring);
      if (cJSON_IsString(ep))
        vl_htmlreport_escape(f, ep->valuestring);
      fputs("</b>", f);
    }
    if (cJSON_IsString(model)) {
      fputs(cJSON_IsString(url) ? " &middot; model <b>" : "model <b>", f);
      vl_htmlreport_escape(f, model->valuestring);
      /* --model not given: detected, the model the server named (GET /v1/models). */
      fputs(cfg && !cJSON_IsString(get(cfg, "model")) ? "</b> (detected)" : "</b>", f);
    }
    fputs("</p>\n", f);
  }
  const cJSON *ver = get(sum, "vlmload_version");
  if (ver || r->source) {
    fputs("<p class=meta>", f);
    if (ver) {
      fputs("vlmload ", f);
      put_value(f, ver);
    }
    if (r->source) {
      fputs(ver ? " &middot; " : "", f);
      vl_htmlreport_escape(f, r->source);
    }
    fputs("</p>\n", f);
  }
}

int vl_htmlreport_render(const vl_htmlreport_t *r, FILE *f) {
  const cJSON *sum = r->summary;
  const cJSON *an = r->analysis ? r->analysis : get(sum, "memory_analysis");
  fputs("<!DOCTYPE html>\n<html lang=en>\n<head>\n<meta charset=\"utf-8\">\n"
        "<title>vlmload report",
        f);
  if (r->source) {
    fputs(" - ", f);
    vl_htmlreport_escape(f, r->source);
  }
  fputs("</title>\n<style>\n"
        "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1200px}\n"
        "table{border-collapse:collapse;margin:.5em 0 1em}\n"
        "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}\n"
        "td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
        "svg{display:block;max-width:100%;height:auto;margin:.5em 0}\n"
        "pre{background:#f6f6f6;padding:1em;overflow:auto}\n"
        "section{overflow-x:auto}\n"
        "</style>\n</head>\n<body>\n<h1>vlmload report</h1>\n",
        f);
  header(f, r, sum);
  /* The verdict first: memory, then the run's figures, then each second of it. */
  memory_section(f, an, r->memory_svg, sum);
  if (cJSON_IsObject(sum)) {
    summary_section(f, sum);
    latency_section(f, sum);
    phases_section(f, sum);
    server_section(f, sum);
  }
  if (r->timeline)
    timeline_section(f, r->timeline);
  const cJSON *cfg = get(sum, "config");
  if (cfg) {
    fputs("<section id=config><h2>Configuration</h2>\n<pre>", f);
    char *t = cJSON_Print(cfg);
    vl_htmlreport_escape(f, t);
    cJSON_free(t);
    fputs("</pre>\n</section>\n", f);
  }
  fputs("</body>\n</html>\n", f);
  return ferror(f) ? VL_EIO : 0;
}

static int fill(FILE *f, void *arg, char *why, size_t whylen) {
  (void)why;
  (void)whylen;
  return vl_htmlreport_render(arg, f);
}

int vl_htmlreport_write(const vl_htmlreport_t *r, const char *path, char *why, size_t whylen) {
  return vl_outfile_write(path, fill, (void *)r, why, whylen) ? VL_EIO : 0;
}

/* Writes path percent-encoded for an href: unreserved bytes and '/' as they are. */
static void put_href(FILE *f, const char *path) {
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if (isalnum(*p) || strchr("-._~/", *p))
      fputc(*p, f);
    else
      fprintf(f, "%%%02X", *p);
  }
}

void vl_htmlreport_table(FILE *f, const char *id, const char *const *head, size_t ncols,
                         const vl_htmlreport_cell_t *cells, size_t nrows) {
  fprintf(f, "<table id=%s><tr>", id);
  for (size_t k = 0; k < ncols; k++) {
    fputs("<th>", f);
    vl_htmlreport_escape(f, head[k]);
    fputs("</th>", f);
  }
  fputs("</tr>\n", f);
  for (size_t i = 0; i < nrows; i++) {
    fputs("<tr>", f);
    for (size_t k = 0; k < ncols; k++) {
      const vl_htmlreport_cell_t *c = &cells[i * ncols + k];
      fputs("<td>", f);
      if (c->href) {
        fputs("<a href=\"", f);
        put_href(f, c->href);
        fputs("\">", f);
      }
      vl_htmlreport_escape(f, c->text);
      fputs(c->href ? "</a></td>" : "</td>", f);
    }
    fputs("</tr>\n", f);
  }
  fputs("</table>\n", f);
}

int vl_htmlreport_relative(const char *page, const char *target, char *out, size_t n) {
  char dir[PATH_MAX], from[PATH_MAX], to[PATH_MAX];
  snprintf(dir, sizeof(dir), "%s", page);
  char *slash = strrchr(dir, '/');
  if (slash == dir)
    dir[1] = '\0';
  else if (slash)
    *slash = '\0';
  else
    snprintf(dir, sizeof(dir), ".");
  if (!realpath(dir, from) || !realpath(target, to))
    return -1;
  /* The longest common prefix that ends at a folder's end. */
  size_t common = 0;
  for (size_t i = 0; from[i] && from[i] == to[i]; i++)
    if (from[i] == '/')
      common = i + 1;
  size_t fl = strlen(from);
  if (strncmp(from, to, fl) == 0 && to[fl] == '/')
    common = fl + 1; /* the page's folder holds the target */
  /* Up one folder for each part of the page's folder past the common prefix. */
  const char *rest = from + VL_MIN(common, fl);
  size_t ups = *rest ? 1 : 0, len = 0;
  for (const char *p = rest; *p; p++)
    ups += *p == '/';
  if (3 * ups + strlen(to + common) + 1 > n)
    return -1;
  for (size_t k = 0; k < ups; k++, len += 3)
    memcpy(out + len, "../", 3);
  memcpy(out + len, to + common, strlen(to + common) + 1);
  return 0;
}
