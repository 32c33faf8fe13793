#include "vlmload/analyzecli.h"
#include "vlmload/common.h"
#include "vlmload/htmlreport.h"
#include "vlmload/outfile.h"
#include "vlmload/plot.h"
#include "vlmload/rateauto.h"
#include "vlmload/series.h"
#include "vlmload/units.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
  const vl_analyzecli_cfg_t *cfg;
  vl_series_set_t in;
  vl_analysis_t *an; /* one per series of in */
  int *analysed;     /* whether an[k] holds an analysis */
  char *err;
  size_t errlen;
} run_t;

void vl_analyzecli_cfg_init(vl_analyzecli_cfg_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  vl_series_opts_init(&cfg->read);
  cfg->text = stdout;
  cfg->fail_text = stdout;
  vl_analyze_opts_init(&cfg->opts);
}

static cJSON *report_json(const run_t *r) {
  const vl_analyzecli_cfg_t *cfg = r->cfg;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "timeline", r->in.tl_name);
  if (r->in.ext_name) {
    cJSON *e = cJSON_AddObjectToObject(o, "external");
    cJSON_AddStringToObject(e, "file", r->in.ext_name);
    cJSON_AddNumberToObject(e, "rows", (double)r->in.ext_rows);
    cJSON_AddNumberToObject(e, "used", (double)r->in.ext_used);
    cJSON_AddNumberToObject(e, "outside_run", (double)r->in.ext_dropped);
  } else {
    cJSON_AddNullToObject(o, "external");
  }
  cJSON_AddStringToObject(o, "x", cfg->read.x_images ? "images" : "requests");
  if (r->in.X2)
    cJSON_AddStringToObject(o, "x2", cfg->read.x_images ? "requests" : "images");
  cJSON *w = cJSON_AddObjectToObject(o, "warmup");
  cJSON_AddStringToObject(w, "from", r->in.warmup_from);
  cJSON_AddNumberToObject(w, "x", r->in.warmup_x);
  if (r->in.warmup_t > 0 && isfinite(r->in.warmup_t))
    cJSON_AddNumberToObject(w, "wall_ms", r->in.warmup_t);
  else
    cJSON_AddNullToObject(w, "wall_ms");
  cJSON *fl = cJSON_AddArrayToObject(o, "flushes");
  for (size_t i = 0; i < r->in.n_flushes; i++) {
    cJSON *f = cJSON_CreateObject();
    if (isfinite(r->in.flushes[i].t_ms))
      cJSON_AddNumberToObject(f, "after_wall_ms", r->in.flushes[i].t_ms);
    else
      cJSON_AddNullToObject(f, "after_wall_ms");
    cJSON_AddNumberToObject(f, "x", r->in.flushes[i].x);
    cJSON_AddItemToArray(fl, f);
  }
  cJSON *arr = cJSON_AddArrayToObject(o, "series");
  for (size_t k = 0; k < r->in.nser; k++)
    if (r->analysed[k])
      cJSON_AddItemToArray(arr, vl_analyze_json(&r->an[k]));
  if (!cfg->fail_on) {
    cJSON_AddNullToObject(o, "fail_on");
    return o;
  }
  cJSON *fo = cJSON_AddObjectToObject(o, "fail_on");
  cJSON *vs = cJSON_AddArrayToObject(fo, "verdicts"), *fs = cJSON_AddArrayToObject(fo, "failed");
  for (int v = 0; v < VL_VERDICT_N; v++)
    if (cfg->fail_on & (1u << v))
      cJSON_AddItemToArray(vs, cJSON_CreateString(vl_analyze_verdict_name((vl_verdict_t)v)));
  for (size_t k = 0; k < r->in.nser; k++)
    if (r->analysed[k] && (cfg->fail_on & (1u << r->an[k].verdict)))
      cJSON_AddItemToArray(fs, cJSON_CreateString(r->an[k].name));
  return o;
}

static int write_json(run_t *r, cJSON *o, const char *path) {
  char *text = cJSON_Print(o);
  char why[384];
  int rc = vl_outfile_write_text(path, text, why, sizeof(why));
  if (rc)
    snprintf(r->err, r->errlen, "--output '%s': %s", path, why);
  cJSON_free(text);
  return rc ? VL_EIO : 0;
}

static int write_plot(run_t *r) {
  const vl_analyzecli_cfg_t *cfg = r->cfg;
  vl_plot_line_t *lines = vl_xcalloc(r->in.nser + 1, sizeof(vl_plot_line_t));
  for (size_t k = 0; k < r->in.nser; k++)
    lines[k] = (vl_plot_line_t){r->in.ser[k].name, r->in.ser[k].x, r->in.ser[k].y, r->in.ser[k].n,
                                r->analysed[k] ? &r->an[k] : NULL};
  double *fx = vl_xmalloc((r->in.n_flushes + 1) * sizeof(double));
  for (size_t i = 0; i < r->in.n_flushes; i++)
    fx[i] = r->in.flushes[i].x;
  double wx = vl_series_warmup_at(&r->in);
  /* Latency over the same work axis, when the timeline has it: each row at the work done by its
   * end, and only the rows in which requests succeeded (another row's percentiles are 0, not a
   * latency; in work terms such a row has no width). */
  double *lx = NULL, *l50 = NULL, *l99 = NULL;
  size_t nl = 0;
  if (r->in.p50 || r->in.p99) {
    lx = vl_xmalloc((r->in.rows + 1) * sizeof(double));
    l50 = vl_xmalloc((r->in.rows + 1) * sizeof(double));
    l99 = vl_xmalloc((r->in.rows + 1) * sizeof(double));
    double done = 0;
    for (size_t i = 0; i < r->in.rows; i++) {
      int some = r->in.ok ? isfinite(r->in.ok[i]) && r->in.ok[i] > 0
                          : isfinite(r->in.req[i]) && r->in.req[i] > done;
      if (isfinite(r->in.req[i]))
        done = r->in.req[i];
      if (!some || !isfinite(r->in.X[i]))
        continue;
      lx[nl] = r->in.X[i];
      l50[nl] = r->in.p50 ? r->in.p50[i] : NAN;
      l99[nl++] = r->in.p99 ? r->in.p99[i] : NAN;
    }
  }
  const char *base = strrchr(r->in.tl_name, '/');
  base = base ? base + 1 : r->in.tl_name;
  char title[200];
  snprintf(title, sizeof(title), "Memory over %s - %s",
           cfg->read.x_images ? "images sent" : "requests completed", base);
  vl_plot_t p = {.gnuplot = cfg->gnuplot,
                 .width = cfg->plot_width,
                 .height = cfg->plot_height,
                 .title = title,
                 .x_label = cfg->read.x_images ? "images sent" : "requests completed",
                 .y_unit = "MB",
                 .lines = lines,
                 .n_lines = r->in.nser,
                 .flush_x = fx,
                 .n_flush = r->in.n_flushes,
                 .warmup_x = wx,
                 .lat_x = lx,
                 .lat_p50 = r->in.p50 ? l50 : NULL,
                 .lat_p99 = r->in.p99 ? l99 : NULL,
                 .n_lat = nl};
  /* A mix of MB and unitless series has no one y unit. */
  for (size_t k = 0; k < r->in.nser; k++)
    if (strcmp(r->in.ser[k].unit, "MB") != 0)
      p.y_unit = "value";
  char why[256];
  int rc = 0;
  if (cfg->plot && (rc = vl_plot_write(&p, cfg->plot, why, sizeof(why))) != 0)
    snprintf(r->err, r->errlen, "--plot: %s", why);
  if (!rc && cfg->svg && (rc = vl_plot_svg(&p, cfg->svg, why, sizeof(why))) != 0)
    snprintf(r->err, r->errlen, "--report: the memory plot: %s", why);
  free(lines);
  free(fx);
  free(lx);
  free(l50);
  free(l99);
  return rc;
}

static void print_header(const run_t *r, FILE *f) {
  const char *xn = r->cfg->read.x_images ? "images" : "requests";
  double last = NAN;
  for (size_t i = 0; i < r->in.rows; i++)
    if (isfinite(r->in.X[i]))
      last = r->in.X[i];
  fprintf(f, "%s: %zu rows, %.0f %s, %zu flushes", r->in.tl_name, r->in.rows, last, xn,
          r->in.n_flushes);
  if (r->in.warmup_x > 0)
    fprintf(f, "; warm-up: below %.0f %s (%s)", r->in.warmup_x, xn, r->in.warmup_from);
  else if (r->in.warmup_t > 0 && isfinite(r->in.t0))
    fprintf(f, "; warm-up: first %.1f s (%s)", (r->in.warmup_t - r->in.t0) / 1000,
            r->in.warmup_from);
  else if (r->in.warmup_t > 0)
    fprintf(f, "; warm-up: before wall_ms %.0f (%s)", r->in.warmup_t, r->in.warmup_from);
  fputc('\n', f);
  if (r->in.ext_name)
    fprintf(f, "%s: %zu samples, %zu inside the run, %zu outside dropped\n", r->in.ext_name,
            r->in.ext_rows, r->in.ext_used, r->in.ext_dropped);
}

static void run_free(run_t *r) {
  for (size_t k = 0; r->an && k < r->in.nser; k++)
    vl_analyze_free(&r->an[k]);
  free(r->an);
  free(r->analysed);
  vl_series_free(&r->in);
}

int vl_analyzecli_run(const vl_csv_t *timeline, const vl_csv_t *external,
                      const vl_analyzecli_cfg_t *cfg, cJSON **json, char *err, size_t errlen) {
  run_t r = {.cfg = cfg, .err = err, .errlen = errlen};
  if (json)
    *json = NULL;
  if (cfg->svg)
    *cfg->svg = NULL;
  int rc = vl_series_read(&r.in, timeline, external, &cfg->read, err, errlen);
  if (rc)
    goto done;

  r.an = vl_xcalloc(r.in.nser, sizeof(*r.an));
  r.analysed = vl_xcalloc(r.in.nser, sizeof(*r.analysed));
  if (cfg->text)
    print_header(&r, cfg->text);
  for (size_t k = 0; k < r.in.nser; k++) {
    vl_series_t in;
    vl_series_input(&r.in, k, &in);
    in.caps = cfg->caps;
    in.n_caps = cfg->n_caps;
    if ((rc = vl_analyze_series(&r.an[k], &in, &cfg->opts)) != 0) {
      snprintf(r.err, r.errlen, "%s: cannot analyse: %s", in.name, vl_strerror(rc));
      goto done;
    }
    r.analysed[k] = 1;
  }
  /* The mechanisms look across series: a process's anatomy says where its change is. */
  vl_analysis_t **all = vl_xcalloc(r.in.nser + 1, sizeof(*all));
  for (size_t k = 0; k < r.in.nser; k++)
    all[k] = &r.an[k];
  vl_analyze_mechanisms(all, r.in.nser);
  free(all);
  for (size_t k = 0; cfg->text && k < r.in.nser; k++) {
    fputc('\n', cfg->text);
    vl_analyze_print(cfg->text, &r.an[k]);
  }
  size_t failed = 0;
  for (size_t k = 0; k < r.in.nser; k++) {
    if (!(cfg->fail_on & (1u << r.an[k].verdict)))
      continue;
    failed++;
    if (cfg->fail_text)
      fprintf(cfg->fail_text, "%sfail-on: %s is %s\n", failed == 1 ? "\n" : "", r.an[k].name,
              vl_analyze_verdict_name(r.an[k].verdict));
  }
  if (cfg->failed)
    *cfg->failed = failed;
  if (cfg->text)
    fflush(cfg->text);
  if (cfg->fail_text)
    fflush(cfg->fail_text);
  cJSON *o = report_json(&r);
  if (cfg->output && (rc = write_json(&r, o, cfg->output)) != 0) {
    cJSON_Delete(o);
    goto done;
  }
  if ((cfg->plot || cfg->svg) && (rc = write_plot(&r)) != 0) {
    cJSON_Delete(o);
    goto done;
  }
  if (json)
    *json = o;
  else
    cJSON_Delete(o);

done:
  run_free(&r);
  return rc;
}

/* ---- command line -----------------------------------------------------------------------------
 */

enum {
  OPT_EXTERNAL = 256,
  OPT_EXT_TIME,
  OPT_X,
  OPT_WARMUP,
  OPT_WARMUP_TIME,
  OPT_SERIES,
  OPT_PLOT,
  OPT_PLOT_SIZE,
  OPT_GNUPLOT,
  OPT_OUTPUT,
  OPT_REPORT,
  OPT_MIN_GROWTH,
  OPT_MIN_GROWTH_MB,
  OPT_MIN_SLOPE,
  OPT_FAIL_ON,
  OPT_NO_AUTOCORR,
  OPT_EXPECT_CAP,
  OPT_QUIET,
  OPT_HELP,
};

static const struct option longopts[] = {
    {"external", required_argument, NULL, OPT_EXTERNAL},
    {"external-time", required_argument, NULL, OPT_EXT_TIME},
    {"x", required_argument, NULL, OPT_X},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"warmup-time", required_argument, NULL, OPT_WARMUP_TIME},
    {"series", required_argument, NULL, OPT_SERIES},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"plot-size", required_argument, NULL, OPT_PLOT_SIZE},
    {"gnuplot", required_argument, NULL, OPT_GNUPLOT},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"report", required_argument, NULL, OPT_REPORT},
    {"min-growth", required_argument, NULL, OPT_MIN_GROWTH},
    {"min-growth-mb", required_argument, NULL, OPT_MIN_GROWTH_MB},
    {"min-slope", required_argument, NULL, OPT_MIN_SLOPE},
    {"fail-on", required_argument, NULL, OPT_FAIL_ON},
    {"no-autocorr", no_argument, NULL, OPT_NO_AUTOCORR},
    {"expect-cap", required_argument, NULL, OPT_EXPECT_CAP},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

void vl_analyzecli_usage(FILE *f) {
  fprintf(
      f,
      "Usage: vlmload analyze TIMELINE.csv [options]\n"
      "\n"
      "Tells a memory leak from a cache that fills up: fits every memory series of a run's\n"
      "timeline (and of an external monitor's CSV) against the work done, after the warm-up,\n"
      "and follows the post-flush floor (memory right after each cache flush).\n"
      "\n"
      "  --external FILE       a monitor's CSV: a timestamp column (epoch s or ms, ISO 8601)\n"
      "                        and value columns, joined to the run by time\n"
      "  --external-time COL   its timestamp column (default: timestamp, time, ts, ...)\n"
      "  --x requests|images   work axis (default requests completed)\n"
      "  --warmup N            leave out samples below N requests (or images); default:\n"
      "                        the rows the run marked as warm-up\n"
      "  --warmup-time DUR     leave out the first DUR of the run (30s, 2m)\n"
      "  --series A,B          analyse only these series\n"
      "  --plot FILE.png       draw memory over work, flushes, floors and fits with gnuplot\n"
      "  --plot-size WxH       plot size in pixels (default %dx%d)\n"
      "  --gnuplot PATH        the gnuplot to run (default: gnuplot on PATH; Debian:\n"
      "                        apt-get install gnuplot-nox)\n"
      "  --output FILE.json    write the analysis as JSON\n"
      "  --report FILE.html    write one self-contained HTML page: throughput and latency\n"
      "                        per second, the memory plot (gnuplot's SVG) and verdicts\n"
      "  --min-growth PCT      growth over the run that counts, in %% of the mean (default "
      "%g)\n"
      "  --min-growth-mb MB    and never below MB over the run, for series in MB (default %g;\n"
      "                        0 off): what a process holding its memory still moves by\n"
      "  --min-slope MB        or, above that floor, a slope of MB per 1000 requests (default\n"
      "                        %g; 0 off)\n"
      "  --fail-on VERDICTS    exit with status 3 when a series' verdict is one of VERDICTS,\n"
      "                        separated by commas (grows, levels-off, sawtooth-returns, flat,\n"
      "                        inconclusive, peak, not-memory, ended-early,\n"
      "                        insufficient-data): --fail-on grows\n"
      "  --no-autocorr         do not widen intervals for autocorrelated samples\n"
      "  --expect-cap S=SIZE   a cache's cap (512MiB, 8GiB) for series S, or for every series\n"
      "                        of process S: a series that levels off near it is a\n"
      "                        capped-cache; one still growing says when it reaches it\n"
      "  --quiet               no text report (needs --output, --plot, --report or --fail-on)\n"
      "  -h, --help            this help\n"
      "\n"
      "Verdicts: grows (the post-flush floor -- or, with fewer than 3 flush windows, the\n"
      "overall slope -- rises with a %g%% interval above 0 and by a material amount, or,\n"
      "when it follows no one line, rises at most of its steps in every quarter of the run),\n"
      "sawtooth-returns (memory climbs between flushes and comes back), levels-off (rises,\n"
      "then stops wherever it stops, with no warm-up needed: after it, memory climbs at most\n"
      "a tenth as fast; says where, and whether it still creeps), flat (the interval rules out\n"
      "material growth, or the series never moved by as much as counts), inconclusive (fewer\n"
      "than %g effective samples, or an interval that admits material growth: says how much\n"
      "longer to run), peak (a high-water mark such as hwm_mb.*, which only rises: its peak,\n"
      "no verdict on growth), not-memory (a series whose name states no unit of memory, as a\n"
      "server's gauge of requests or a ratio: its first and last value, no verdict),\n"
      "ended-early (its samples stop before the run does: its process exited, or its reading\n"
      "failed from then on; no verdict), and insufficient-data (fewer than %d samples after\n"
      "the warm-up).\n"
      "\n"
      "Exit status: 0 analysed, 1 an input could not be read or an output written, 2 bad\n"
      "command line, 3 a series' verdict is one --fail-on names.\n",
      VL_PLOT_WIDTH, VL_PLOT_HEIGHT, VL_ANALYZE_MIN_GROWTH_FRAC * 100, VL_ANALYZE_MIN_GROWTH_MB,
      VL_ANALYZE_MIN_SLOPE, VL_ANALYZE_LEVEL * 100, VL_ANALYZE_MIN_EFF, VL_ANALYZE_MIN_POINTS);
}

static int bad_arg(const char *opt, const char *arg, const char *want) {
  fprintf(stderr, "vlmload analyze: --%s '%s': %s\n", opt, arg, want);
  return 2;
}

int vl_analyzecli_main(int argc, char **argv) {
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  const char *external = NULL, *report = NULL, *why;
  char *svg = NULL;
  vl_analyze_caps_t caps = {0};
  opterr = 0;
  optind = 0; /* full re-initialisation: main() may have used getopt already */
  for (;;) {
    int li = -1;
    int id = getopt_long(argc, argv, ":h", longopts, &li);
    if (id == -1)
      break;
    const char *name = li >= 0 ? longopts[li].name : "";
    switch (id) {
    case 'h':
    case OPT_HELP:
      vl_analyzecli_usage(stdout);
      return 0;
    case ':':
      fprintf(stderr, "vlmload analyze: %s: needs a value (see --help)\n", argv[optind - 1]);
      return 2;
    case '?':
      fprintf(stderr, "vlmload analyze: %s: unknown option (see --help)\n", argv[optind - 1]);
      return 2;
    case OPT_EXTERNAL:
      external = optarg;
      break;
    case OPT_EXT_TIME:
      cfg.read.ext_time = optarg;
      break;
    case OPT_X:
      if (strcmp(optarg, "requests") == 0)
        cfg.read.x_images = 0;
      else if (strcmp(optarg, "images") == 0)
        cfg.read.x_images = 1;
      else
        return bad_arg(name, optarg, "want requests or images");
      break;
    case OPT_WARMUP: {
      uint64_t n;
      if (vl_units_count(optarg, &n) != 0)
        return bad_arg(name, optarg, "want a count, such as 500 or 2k");
      cfg.read.warmup = (double)n;
      break;
    }
    case OPT_WARMUP_TIME: {
      uint64_t us;
      if (vl_units_duration(optarg, &us) != 0)
        return bad_arg(name, optarg, "want a duration, such as 30s or 2m");
      cfg.read.warmup_s = (double)us / 1e6;
      break;
    }
    case OPT_SERIES:
      if (!*optarg || strstr(optarg, ",,") || optarg[0] == ',' || optarg[strlen(optarg) - 1] == ',')
        return bad_arg(name, optarg, "want series names separated by commas");
      cfg.read.series = optarg;
      break;
    case OPT_PLOT:
      cfg.plot = optarg;
      break;
    case OPT_PLOT_SIZE: {
      int w, h, end = 0;
      if (sscanf(optarg, "%5dx%5d%n", &w, &h, &end) != 2 || optarg[end] || w < 320 || h < 200 ||
          w > 8000 || h > 8000)
        return bad_arg(name, optarg, "want WIDTHxHEIGHT, at least 320x200, at most 8000x8000");
      cfg.plot_width = w;
      cfg.plot_height = h;
      break;
    }
    case OPT_GNUPLOT:
      cfg.gnuplot = optarg;
      break;
    case OPT_OUTPUT:
      cfg.output = optarg;
      break;
    case OPT_REPORT:
      report = optarg;
      break;
    case OPT_MIN_GROWTH:
      if (vl_analyze_spec_min_growth(optarg, &cfg.opts.min_growth_frac, &why))
        return bad_arg(name, optarg, why);
      break;
    case OPT_MIN_GROWTH_MB:
      if (vl_analyze_spec_min_growth_mb(optarg, &cfg.opts.min_growth_mb, &why))
        return bad_arg(name, optarg, why);
      break;
    case OPT_MIN_SLOPE:
      if (vl_analyze_spec_min_slope(optarg, &cfg.opts.min_slope, &why))
        return bad_arg(name, optarg, why);
      break;
    case OPT_FAIL_ON: {
      char line[256];
      if (vl_analyze_spec_fail_on(optarg, &cfg.fail_on, line, sizeof(line)))
        return bad_arg(name, optarg, line);
      break;
    }
    case OPT_NO_AUTOCORR:
      cfg.opts.autocorr = 0;
      break;
    case OPT_EXPECT_CAP:
      if (vl_analyze_caps_parse(&caps, optarg, &why))
        return vl_analyze_caps_free(&caps), bad_arg(name, optarg, why);
      cfg.caps = caps.cap;
      cfg.n_caps = caps.n;
      break;
    case OPT_QUIET:
      cfg.text = cfg.fail_text = NULL;
      break;
    default:
      return 2;
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "vlmload analyze: needs a timeline CSV (see --help)\n");
    return 2;
  }
  if (argc - optind > 1) {
    fprintf(stderr, "vlmload analyze: '%s': unexpected argument (one timeline only)\n",
            argv[optind + 1]);
    return 2;
  }
  /* --quiet alone would analyse and say nothing: a silent 0 that reads as a pass. */
  if (!cfg.text && !cfg.output && !cfg.plot && !report && !cfg.fail_on) {
    fprintf(stderr, "vlmload analyze: --quiet: nothing would be written; add --output FILE.json, "
                    "--plot FILE.png, --report FILE.html or --fail-on VERDICTS (an exit status)\n");
    return 2;
  }
  const char *path = argv[optind];
  char err[512] = "";
  vl_csv_t *tl = NULL, *ext = NULL;
  int status = 1;
  /* gnuplot draws the plot: find it before the work. */
  char *gnuplot = NULL;
  if (cfg.plot || report) {
    if (vl_plot_find_gnuplot(cfg.gnuplot, &gnuplot, err, sizeof(err)) != 0) {
      if (!cfg.plot && strcmp(err, VL_PLOT_NO_GNUPLOT) == 0)
        snprintf(err, sizeof(err), "%s", VL_HTMLREPORT_NO_GNUPLOT);
      fprintf(stderr, "vlmload analyze: %s\n", err);
      return 1;
    }
    cfg.gnuplot = gnuplot;
  }
  /* The page is written at the end: a path that cannot take it is an error before the work. */
  if (report && vl_outfile_check(report, err, sizeof(err)) != 0) {
    fprintf(stderr, "vlmload analyze: --report '%s': %s\n", report, err);
    free(gnuplot);
    return 1;
  }
  if (report)
    cfg.svg = &svg;
  if (vl_csv_load(&tl, path, err, sizeof(err)) != 0 ||
      (external && vl_csv_load(&ext, external, err, sizeof(err)) != 0)) {
    fprintf(stderr, "vlmload analyze: %s\n", err);
    goto done;
  }
  /* The probe before a --rate auto run is not the run: the run's rows start after it. */
  vl_csv_drop_rows(tl, "phase", VL_RATEAUTO_PHASE);
  cJSON *json = NULL;
  size_t failed = 0;
  cfg.failed = &failed;
  int rc = vl_analyzecli_run(tl, ext, &cfg, report ? &json : NULL, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "vlmload analyze: %s\n", err);
    status = rc == VL_ENOENT ? 2 : 1;
    goto done;
  }
  status = failed ? 3 : 0;
  if (report) {
    vl_htmlreport_t h = {.analysis = json, .timeline = tl, .memory_svg = svg, .source = path};
    if (vl_htmlreport_write(&h, report, err, sizeof(err)) != 0) {
      fprintf(stderr, "vlmload analyze: --report '%s': %s\n", report, err);
      status = 1;
    }
  }
  cJSON_Delete(json);

done:
  vl_csv_free(tl);
  vl_csv_free(ext);
  free(gnuplot);
  free(svg);
  vl_analyze_caps_free(&caps);
  return status;
}
