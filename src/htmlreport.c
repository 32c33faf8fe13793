#include "vlmload/htmlreport.h"
#include "vlmload/common.h"
#include "vlmload/outfile.h"

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

  const cJSON *errs = get(sum, "errors");
  if (cJSON_IsObject(errs)) {
    fputs("<h3>Errors by class</h3>\n<table class=kv id=errors>\n", f);
    for (const cJSON *c = errs->child; c; c = c->next) {
      fputs("<tr><th>", f);
      vl_htmlreport_escape(f, c->string);
      fputs("</th><td class=num>", f);
      put_value(f, c);
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
      if (!open)
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
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
  double *sent = column(tl, "rate_sent"), *ok = column(tl, "rate_ok");
  double *okn = column(tl, "ok"), *tok = column(tl, "completion_tokens");
  double *p50 = column(tl, "e2e_p50_ms"), *p99 = column(tl, "e2e_p99_ms");
  /* Each row's length: from the previous row (the first from the run's start). */
  double *tps = tok ? vl_xmalloc(n * sizeof(double)) : NULL;
  for (size_t i = 0; tps && i < n; i++) {
    double dt = i ? x[i] - x[i - 1] : x[i];
    tps[i] = dt > 0 ? tok[i] / dt : NAN;
  }
  /* A goodput column (requests/s meeting the SLOs), where the run wrote one. */
  const char *gname = NULL;
  for (size_t k = 0; k < vl_csv_ncols(tl) && !gname; k++)
    if (strstr(vl_csv_colname(tl, k), "goodput"))
      gname = vl_csv_colname(tl, k);
  double *good = gname ? column(tl, gname) : NULL;
  line_t thr[3];
  size_t nt = 0;
  if (ok)
    thr[nt++] = (line_t){"ok requests/s", ok};
  if (sent)
    thr[nt++] = (line_t){"sent requests/s", sent};
  if (good)
    thr[nt++] = (line_t){gname, good};
  if (nt)
    chart(f, "chart-throughput", "Requests per second", "req/s", x, n, thr, nt);
  if (tps)
    chart(f, "chart-tokens", "Output tokens per second", "tok/s", x, n,
          &(line_t){"completion tokens/s", tps}, 1);
  /* A row in which no request succeeded has no latency (its percentiles read 0). */
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
    chart(f, "chart-latency", "End-to-end latency per row", "ms", x, n, lat, nla);

  /* The phases, where the timeline has them: the first row of each. */
  int pc = vl_csv_col(tl, "phase");
  if (pc >= 0) {
    fputs("<h3>Phases</h3>\n<table id=phases><tr><th>phase</th><th>from (s)</th></tr>\n", f);
    const char *last = NULL;
    for (size_t i = 0; i < n; i++) {
      const char *p = vl_csv_cell(tl, i, (size_t)pc);
      if (last && strcmp(last, p) == 0)
        continue;
      last = p;
      fputs("<tr><td>", f);
      vl_htmlreport_escape(f, p);
      fputs("</td><td class=num>", f);
      put_num(f, i ? x[i - 1] : 0);
      fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
  }
  fputs("</section>\n", f);
  free(x);
  free(wall);
  free(sent);
  free(good);
  free(ok);
  free(okn);
  free(tok);
  free(tps);
  free(p50);
  free(p99);
}

static void memory_section(FILE *f, const cJSON *an, const char *svg) {
  const cJSON *series = get(an, "series");
  if (!svg && !cJSON_IsArray(series))
    return;
  fputs("<section id=memory><h2>Memory</h2>\n", f);
  if (svg) {
    /* The document's XML declaration and DOCTYPE have no place inside HTML: from <svg on. */
    const char *at = strstr(svg, "<svg");
    fputs("<div class=plot>\n", f);
    fputs(at ? at : "", f);
    fputs("</div>\n", f);
  }
  if (cJSON_IsArray(series)) {
    static const column_t cols[] = {
        {"series", NULL, "series"}, {"verdict", "verdict", "verdict"}, {"reason", NULL, "why"}};
    put_table(f, "verdicts", series, cols, VL_ARRAY_SIZE(cols));
  }
  fputs("</section>\n", f);
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
  if (cJSON_IsObject(sum)) {
    summary_section(f, sum);
    latency_section(f, sum);
    phases_section(f, sum);
  }
  if (r->timeline)
    timeline_section(f, r->timeline);
  memory_section(f, an, r->memory_svg);
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
