/* `vlmload analyze` end to end on a synthetic run: the timeline read by column name, flushes from
 * the counter, the warm-up from the phase column, units from names, an external monitor joined by
 * time, the images axis, the JSON and PNG outputs, and the exit statuses. */
#include "task.h"
#include "vlmload/analyzecli.h"
#include "vlmload/common.h"
#include "vlmload/csvin.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <png.h>

#define ROWS   400
#define WALL0  1795970400000.0 /* 2026-11-29T16:40:00Z */
#define FLUSH  40              /* a flush every 40 rows (seconds) */
#define WARMUP 10              /* rows in the warm-up phase */

static double gauss(uint64_t *s) {
  double u = ((double)(task_rand(s) >> 11) + 0.5) / 9007199254740992.0;
  double v = ((double)(task_rand(s) >> 11) + 0.5) / 9007199254740992.0;
  return sqrt(-2 * log(u)) * cos(2 * 3.14159265358979323846 * v);
}

/* Requests per second: 50 for the first half of the run, 100 after, so that work is piecewise
 * linear in time and the join has to interpolate between the right rows. */
static double rate_at(int row) {
  return row < ROWS / 2 ? 50 : 100;
}

/* Requests completed at wall time t (exact: constant rate within each second). */
static double completed_at(double t) {
  double s = (t - WALL0) / 1000, x = 0;
  for (int i = 0; i < ROWS && s > 0; i++) {
    double d = s < 1 ? s : 1;
    x += rate_at(i) * d;
    s -= d;
  }
  return x;
}

/* The timeline as the run writes it (timeline.c's columns, images_sent a running total), memory
 * columns appended; with per_row_images, images_sent counts per row instead. As in a run, a row's
 * memory values were read when the row before it was written: the row that counts a flush still
 * shows the memory from before it. Caller frees. */
static char *timeline_text(int per_row_images) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fputs("wall_ms,elapsed_s,phase,in_flight,sent_total,completed_total,ok_total,failed_total,"
        "dropped_total,sent,completed,ok,failed,rate_sent,rate_ok,e2e_p50_ms,e2e_p99_ms,"
        "completion_tokens,flushes,images_sent,rss_mb.scheduler,pss_mb.tokenizer,gpu0_used_mb,"
        "prom.vlmmock_memory_bytes,cmd1\n",
        f);
  uint64_t st = 99;
  double done = 0, at_flush = 0, read_done = 0, read_cache = 0;
  int flushes = 0;
  for (int i = 0; i < ROWS; i++) {
    double rate = rate_at(i);
    /* The memory this row shows: the state when the previous row was written. */
    double mdone = read_done, cache = read_cache;
    done += rate;
    const char *phase = i < WARMUP ? "warmup" : "measure";
    if (i > 0 && i % FLUSH == 0) {
      flushes++;
      at_flush = done;
      phase = "flush";
    }
    read_done = done;
    read_cache = done - at_flush;
    double sched = 3000 + 3.0 * mdone / 1000 + 0.05 * cache + gauss(&st);
    double tok = 800 + 0.03 * cache + 0.5 * gauss(&st);
    double gpu = 70000 + 2 * gauss(&st);
    double prom = 1073741824.0 + 2.0 * mdone / 1000 * 1048576 + 1e5 * gauss(&st);
    double images = per_row_images ? 2 * rate : 2 * done;
    fprintf(f,
            "%.0f,%.3f,%s,%d,%.0f,%.0f,%.0f,0,0,%.0f,%.0f,%.0f,0,%.2f,%.2f,%.3f,%.3f,%.0f,%d,%.0f,"
            "%.3f,%.3f,%.1f,%.0f,\n",
            WALL0 + 1000.0 * (i + 1), (double)(i + 1), phase, 8, done + 8, done, done, rate, rate,
            rate, rate, rate, 180 + 5 * gauss(&st), 420 + 20 * fabs(gauss(&st)), rate * 100,
            flushes, images, sched, tok, gpu, prom);
  }
  fclose(f);
  return buf;
}

/* A GPU monitor's CSV: ISO times between the rows, a text column, one value that is an exact
 * linear function of the work done, and a sample before the run and two after its last row. */
static char *monitor_text(void) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fputs("timestamp, name, memory.used [MiB]\n", f);
  for (int k = -1; k <= 2 * ROWS + 1; k++) {
    double t = WALL0 + 500.0 * k + 250; /* x.250 and x.750 seconds */
    if (k == -1)
      t = WALL0 - 5000;
    if (k == 2 * ROWS + 1)
      t = WALL0 + 1000.0 * ROWS + 5000;
    time_t secs = (time_t)(t / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char iso[64];
    strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(f, "%s.%03dZ, NVIDIA H200, %.6f\n", iso, (int)fmod(t, 1000),
            50000 + 0.01 * completed_at(t));
  }
  fclose(f);
  return buf;
}

static vl_csv_t *parse(const char *name, const char *text) {
  vl_csv_t *c = NULL;
  char err[256];
  if (vl_csv_parse(&c, name, text, strlen(text), err, sizeof(err)) != 0)
    fprintf(stderr, "%s\n", err);
  ASSERT(c != NULL);
  return c;
}

static cJSON *series(cJSON *report, const char *name) {
  cJSON *s;
  cJSON_ArrayForEach(s, cJSON_GetObjectItem(report, "series")) {
    if (strcmp(cJSON_GetObjectItem(s, "series")->valuestring, name) == 0)
      return s;
  }
  fprintf(stderr, "no series %s\n", name);
  ASSERT(0);
  return NULL;
}

static const char *verdict(cJSON *report, const char *name) {
  return cJSON_GetObjectItem(series(report, name), "verdict")->valuestring;
}

static double slope(cJSON *s, const char *fit) {
  cJSON *o = strcmp(fit, "floor") == 0 ? cJSON_GetObjectItem(cJSON_GetObjectItem(s, "floor"), "fit")
                                       : cJSON_GetObjectItem(s, fit);
  return cJSON_GetObjectItem(o, "slope_per_1000")->valuedouble;
}

static cJSON *run(const vl_csv_t *tl, const vl_csv_t *ext, vl_analyzecli_cfg_t *cfg) {
  cJSON *report = NULL;
  char err[256] = "";
  int rc = vl_analyzecli_run(tl, ext, cfg, &report, err, sizeof(err));
  if (rc)
    fprintf(stderr, "vl_analyzecli_run: %s\n", err);
  ASSERT_INT_EQ(rc, 0);
  return report;
}

/* run() with the text report kept in *text (the caller frees it), and echoed for a failing test. */
static cJSON *run_text(const vl_csv_t *tl, const vl_csv_t *ext, vl_analyzecli_cfg_t *cfg,
                       char **text) {
  size_t tlen = 0;
  *text = NULL;
  cfg->text = open_memstream(text, &tlen);
  cJSON *r = run(tl, ext, cfg);
  fclose(cfg->text);
  cfg->text = NULL;
  fputs(*text, stderr);
  return r;
}

TEST_IMPL(cli_timeline_and_monitor) {
  char *tt = timeline_text(0), *mt = monitor_text();
  vl_csv_t *tl = parse("run/timeline.csv", tt), *ext = parse("gpu.csv", mt);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  char *text;
  cJSON *r = run_text(tl, ext, &cfg, &text);

  /* Series: the timeline's unknown columns and the monitor's numeric one, nothing standard. */
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r, "series")), 6);
  ASSERT_STR_EQ(cJSON_GetObjectItem(r, "x")->valuestring, "requests");
  ASSERT_STR_EQ(cJSON_GetObjectItem(r, "x2")->valuestring, "images");
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r, "flushes")), ROWS / FLUSH - 1);
  cJSON *f0 = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "flushes"), 0);
  ASSERT_EQ(cJSON_GetObjectItem(f0, "x")->valuedouble, 50.0 * (FLUSH + 1));
  ASSERT_EQ(cJSON_GetObjectItem(f0, "after_wall_ms")->valuedouble, WALL0 + 1000.0 * FLUSH);
  cJSON *w = cJSON_GetObjectItem(r, "warmup");
  ASSERT_STR_EQ(cJSON_GetObjectItem(w, "from")->valuestring, "phase column");
  ASSERT_EQ(cJSON_GetObjectItem(w, "wall_ms")->valuedouble, WALL0 + 1000.0 * (WARMUP + 1));

  /* Verdicts against the truth the timeline was made with. */
  ASSERT_STR_EQ(verdict(r, "rss_mb.scheduler"), "grows");
  ASSERT_NEAR(slope(series(r, "rss_mb.scheduler"), "floor"), 3.0, 0.3);
  ASSERT_STR_EQ(verdict(r, "pss_mb.tokenizer"), "sawtooth-returns");
  ASSERT_STR_EQ(verdict(r, "gpu0_used_mb"), "flat");
  ASSERT_STR_EQ(verdict(r, "cmd1"), "insufficient-data");
  /* Bytes become MB (2^20): 2 MB per 1000 requests. */
  cJSON *prom = series(r, "prom.vlmmock_memory_bytes");
  ASSERT_STR_EQ(cJSON_GetObjectItem(prom, "unit")->valuestring, "MB");
  ASSERT_NEAR(slope(prom, "ols"), 2.0, 0.05);
  ASSERT_NEAR(cJSON_GetObjectItem(prom, "mean")->valuedouble, 1024 + 2.0 * 20, 30);
  /* Two images a request: half the slope per 1000 images. */
  cJSON *sa = cJSON_GetObjectItem(series(r, "rss_mb.scheduler"), "second_axis");
  ASSERT_NEAR(slope(sa, "floor"), slope(series(r, "rss_mb.scheduler"), "floor") / 2, 1e-9);

  /* The monitor: every sample inside the run placed exactly on the work axis, so its value,
   * linear in the work done, fits a line of 10 MB per 1000 requests perfectly. */
  cJSON *e = cJSON_GetObjectItem(r, "external");
  ASSERT_STR_EQ(cJSON_GetObjectItem(e, "file")->valuestring, "gpu.csv");
  ASSERT_EQ(cJSON_GetObjectItem(e, "rows")->valuedouble, 2.0 * ROWS + 3);
  ASSERT_EQ(cJSON_GetObjectItem(e, "used")->valuedouble, 2.0 * ROWS);
  ASSERT_EQ(cJSON_GetObjectItem(e, "outside_run")->valuedouble,
            3.0); /* before, at 400.25 s, after */
  cJSON *gm = series(r, "memory.used [MiB]");
  ASSERT_NEAR(slope(gm, "ols"), 10.0, 1e-6);
  ASSERT_NEAR(cJSON_GetObjectItem(cJSON_GetObjectItem(gm, "ols"), "r2")->valuedouble, 1, 1e-9);
  ASSERT_STR_EQ(verdict(r, "memory.used [MiB]"), "grows");

  /* The text report names each series and the sources. */
  ASSERT(strstr(text, "run/timeline.csv: 400 rows, 30000 requests, 9 flushes; warm-up: first 11.0 "
                      "s (phase column)") == text);
  ASSERT(strstr(text, "gpu.csv: 803 samples, 800 inside the run, 3 outside dropped") != NULL);
  ASSERT(strstr(text, "\nrss_mb.scheduler: grows -- ") != NULL);
  ASSERT(strstr(text, "\ncmd1: insufficient-data -- ") != NULL);
  free(text);
  cJSON_Delete(r);

  /* --series picks; an unknown name is an error that names it. */
  cfg.text = NULL;
  cfg.read.series = "gpu0_used_mb,memory.used [MiB]";
  r = run(tl, ext, &cfg);
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r, "series")), 2);
  cJSON_Delete(r);
  cfg.read.series = "gpu0_used_mb,rss_mb.nothing";
  char err[256];
  cJSON *none = NULL;
  ASSERT_INT_EQ(vl_analyzecli_run(tl, ext, &cfg, &none, err, sizeof(err)), VL_ENOENT);
  ASSERT(none == NULL);
  ASSERT_STR_EQ(err, "--series: no memory series 'rss_mb.nothing' in run/timeline.csv or gpu.csv");
  cfg.read.series = NULL;

  /* The images axis, and an explicit warm-up in its units. */
  cfg.read.x_images = 1;
  cfg.read.warmup = 2000;
  r = run(tl, NULL, &cfg);
  cJSON *s = series(r, "rss_mb.scheduler");
  ASSERT_STR_EQ(cJSON_GetObjectItem(s, "x")->valuestring, "images");
  ASSERT_NEAR(slope(s, "floor"), 1.5, 0.15);
  /* A row's memory was read at the row before: the first sample past the warm-up is the row after
   * the one at 2000 images, as the phase column's cut would have it. */
  ASSERT_EQ(cJSON_GetObjectItem(s, "x_first")->valuedouble, 2100.0);
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "warmup"), "from")->valuestring,
                "--warmup");
  cJSON_Delete(r);

  vl_csv_free(tl);
  vl_csv_free(ext);
  free(tt);
  free(mt);
}

TEST_IMPL(cli_images_per_row) {
  /* images_sent written per row instead of as a running total: summed. */
  char *a = timeline_text(0), *b = timeline_text(1);
  vl_csv_t *ta = parse("a.csv", a), *tb = parse("b.csv", b);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  cfg.text = NULL;
  cfg.read.x_images = 1;
  cJSON *ra = run(ta, NULL, &cfg), *rb = run(tb, NULL, &cfg);
  ASSERT_EQ(slope(series(ra, "rss_mb.scheduler"), "ols"),
            slope(series(rb, "rss_mb.scheduler"), "ols"));
  cJSON_Delete(ra);
  cJSON_Delete(rb);
  vl_csv_free(ta);
  vl_csv_free(tb);
  free(a);
  free(b);
}

TEST_IMPL(cli_columns_by_name) {
  /* Columns in any order; latencies and counters a later version adds are not memory. */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fputs("rss_mb,ttft_p50_ms,flushes,prom.requests_total,completed_total,wall_ms\n", f);
  for (int i = 0; i < 50; i++)
    fprintf(f, "%d,%d,%d,%d,%d,%.0f\n", 500 + (i % 3), 100 + i, i / 10, 7 * i, 40 * (i + 1),
            WALL0 + 1000.0 * i);
  fclose(f);
  vl_csv_t *c = parse("t.csv", buf);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  cfg.text = NULL;
  cJSON *r = run(c, NULL, &cfg);
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r, "series")), 1);
  ASSERT_STR_EQ(verdict(r, "rss_mb"), "flat");
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r, "flushes")), 4);
  ASSERT(cJSON_GetObjectItem(r, "x2") == NULL);
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "warmup"), "from")->valuestring, "none");
  cJSON_Delete(r);
  vl_csv_free(c);
  free(buf);
}

TEST_IMPL(cli_merged_timeline_and_monitor) {
  /* A sharded run's merged timeline (per-second counts only, no memory) and a GPU monitor: the work
   * axis is the running sum of "completed". */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fputs("wall_ms,sent,completed,ok,failed,e2e_p50_ms,e2e_p99_ms,completion_tokens\n", f);
  for (int i = 0; i < 60; i++)
    fprintf(f, "%.0f,%d,%d,%d,0,180.0,400.0,1000\n", WALL0 + 1000.0 * i, i < 30 ? 20 : 40,
            i < 30 ? 20 : 40, i < 30 ? 20 : 40);
  fclose(f);
  vl_csv_t *tl = parse("merged.csv", buf);
  free(buf);
  buf = NULL;
  f = open_memstream(&buf, &len);
  fputs("time,used_mb\n", f);
  double done = 20; /* at the first row */
  for (int i = 0; i < 59; i++) {
    double mid = done + (i + 1 < 30 ? 20 : 40) / 2.0; /* half a second after row i */
    fprintf(f, "%.3f,%.4f\n", (WALL0 + 1000.0 * i + 500) / 1000, 1000 + 0.02 * mid);
    done += i + 1 < 30 ? 20 : 40;
  }
  fclose(f);
  vl_csv_t *ext = parse("gpu.csv", buf);
  free(buf);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  cfg.text = NULL;
  cJSON *r = run(tl, ext, &cfg);
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r, "series")), 1);
  cJSON *s = series(r, "used_mb");
  ASSERT_NEAR(slope(s, "ols"), 20.0, 1e-6);
  ASSERT_EQ(cJSON_GetObjectItem(s, "n")->valuedouble, 59.0);
  cJSON_Delete(r);
  vl_csv_free(tl);
  vl_csv_free(ext);
}

/* A row's memory values were read when the row before it was written: the row that counts a flush
 * still shows the memory from before the flush, and belongs to the window before it. A run that
 * ends with a flush leaves only such a row after it, which opens no window. */
TEST_IMPL(cli_flush_row_reads_before_the_flush) {
  /* 10 requests a second; 1 MB leaked and 10 MB cached per 10 requests; a flush every 5 rows;
   * the run ends on a flush. */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  fputs("wall_ms,elapsed_s,completed_total,flushes,rss_mb.s\n", f);
  double done = 0, cache = 0, read = 100;
  int flushes = 0;
  for (int i = 0; i < 30; i++) {
    double shown = read; /* read when the previous row was written */
    done += 10;
    cache += 10;
    if ((i + 1) % 5 == 0) {
      flushes++;
      cache = 0;
    }
    read = 100 + done / 10 + cache;
    fprintf(f, "%.0f,%d,%.0f,%d,%.1f\n", WALL0 + 1000.0 * (i + 1), i + 1, done, flushes, shown);
  }
  fclose(f);
  vl_csv_t *tl = parse("t.csv", text);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  cfg.text = NULL;
  cJSON *r = run(tl, NULL, &cfg);
  cJSON *fl = cJSON_GetObjectItem(series(r, "rss_mb.s"), "floor");
  cJSON *ws = cJSON_GetObjectItem(fl, "windows");
  /* Six flushes; the last one has no sample read after it. */
  ASSERT_INT_EQ(cJSON_GetArraySize(ws), 5);
  for (int k = 0; k < 5; k++) {
    cJSON *w = cJSON_GetArrayItem(ws, k);
    double x = 50.0 * (k + 1);
    ASSERT_EQ(cJSON_GetObjectItem(w, "x")->valuedouble, x);
    /* The floor is the memory right after the flush: the leak so far and an empty cache. */
    ASSERT_EQ(cJSON_GetObjectItem(w, "floor")->valuedouble, 100 + x / 10);
  }
  ASSERT_NEAR(slope(series(r, "rss_mb.s"), "floor"), 100.0, 1e-9);
  cJSON_Delete(r);
  vl_csv_free(tl);
  free(text);
}

TEST_IMPL(cli_bad_input) {
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  cfg.text = NULL;
  char err[256];
  cJSON *r = NULL;
  /* Not a timeline. */
  vl_csv_t *c = parse("x.csv", "a,b\n1,2\n");
  ASSERT_INT_EQ(vl_analyzecli_run(c, NULL, &cfg, &r, err, sizeof(err)), VL_EINVAL);
  ASSERT_STR_EQ(err, "x.csv: no column 'wall_ms' (is this a vlmload timeline?)");
  vl_csv_free(c);
  /* A timeline without memory columns. */
  c = parse("t.csv", "wall_ms,completed_total,flushes\n1000,1,0\n2000,2,0\n");
  ASSERT_INT_EQ(vl_analyzecli_run(c, NULL, &cfg, &r, err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "t.csv: no memory series") == err);
  /* --x images without an images column. */
  cfg.read.x_images = 1;
  ASSERT_INT_EQ(vl_analyzecli_run(c, NULL, &cfg, &r, err, sizeof(err)), VL_ENOENT);
  cfg.read.x_images = 0;
  vl_csv_free(c);
  /* A bad number, by line. */
  c = parse("t.csv", "wall_ms,completed_total,rss_mb\n1000,1,5\n2000,2,5\n3000,3,five\n");
  ASSERT_INT_EQ(vl_analyzecli_run(c, NULL, &cfg, &r, err, sizeof(err)), VL_EINVAL);
  ASSERT_STR_EQ(err, "t.csv:4: column 'rss_mb': 'five' is not a number");
  vl_csv_free(c);
  /* A monitor with a bad timestamp, and with no such --external-time column. */
  c = parse("t.csv", "wall_ms,completed_total,rss_mb\n1000,1,5\n2000,2,5\n");
  vl_csv_t *e = parse("m.csv", "time,used\n1000.5,3\nlater,4\n");
  ASSERT_INT_EQ(vl_analyzecli_run(c, e, &cfg, &r, err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "m.csv:3: column 'time': 'later' is not a timestamp") == err);
  cfg.read.ext_time = "when";
  ASSERT_INT_EQ(vl_analyzecli_run(c, e, &cfg, &r, err, sizeof(err)), VL_ENOENT);
  ASSERT_STR_EQ(err, "m.csv: --external-time 'when': no such column");
  ASSERT(r == NULL);
  vl_csv_free(c);
  vl_csv_free(e);
}

/* Runs vl_analyzecli_main with stdout and stderr caught in files; returns the exit status and what
 * went to stderr. */
static int main_with(const char *dir, char *errbuf, size_t errlen, int argc, char **argv) {
  char path[400];
  snprintf(path, sizeof(path), "%s/stderr.txt", dir);
  fflush(stdout);
  fflush(stderr);
  int save_out = dup(1), save_err = dup(2);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int nul = open("/dev/null", O_WRONLY);
  dup2(nul, 1);
  dup2(fd, 2);
  int status = vl_analyzecli_main(argc, argv);
  fflush(stdout);
  fflush(stderr);
  dup2(save_out, 1);
  dup2(save_err, 2);
  close(save_out);
  close(save_err);
  close(fd);
  close(nul);
  FILE *f = fopen(path, "r");
  size_t n = fread(errbuf, 1, errlen - 1, f);
  errbuf[n] = '\0';
  fclose(f);
  return status;
}

#define MAIN(...)                                                                                  \
  main_with(dir, err, sizeof(err), (int)VL_ARRAY_SIZE(((char *[]){__VA_ARGS__})),                  \
            (char *[]){__VA_ARGS__})

TEST_IMPL(cli_main) {
  char dir[300];
  snprintf(dir, sizeof(dir), "%s/vlanalyze.XXXXXX", task_tmpdir());
  ASSERT(mkdtemp(dir) != NULL);
  char tl[600], mon[600], png[600], json[600], err[1024];
  snprintf(tl, sizeof(tl), "%s/timeline.csv", dir);
  snprintf(mon, sizeof(mon), "%s/gpu.csv", dir);
  snprintf(png, sizeof(png), "%s/memory.png", dir);
  snprintf(json, sizeof(json), "%s/analysis.json", dir);
  char *t = timeline_text(0), *m = monitor_text();
  FILE *f = fopen(tl, "w");
  fputs(t, f);
  fclose(f);
  f = fopen(mon, "w");
  fputs(m, f);
  fclose(f);
  free(t);
  free(m);

  ASSERT_INT_EQ(MAIN("analyze", tl, "--external", mon, "--plot", png, "--output", json,
                     "--plot-size", "1000x640", "--quiet"),
                0);
  ASSERT_STR_EQ(err, "");
  /* The JSON parses and carries every series; the PNG has the asked size. */
  f = fopen(json, "r");
  ASSERT(f != NULL);
  char *buf = malloc(1 << 20);
  size_t n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = '\0';
  fclose(f);
  cJSON *r = cJSON_Parse(buf);
  ASSERT(r != NULL);
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r, "series")), 6);
  cJSON_Delete(r);
  free(buf);
  png_image img;
  memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  ASSERT(png_image_begin_read_from_file(&img, png));
  ASSERT_UINT_EQ(img.width, 1000);
  ASSERT_UINT_EQ(img.height, 640);
  png_image_free(&img);
  /* Left for a person to look at, when asked for. */
  if (getenv("VL_KEEP_PLOT")) {
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "cp %s %s", png, getenv("VL_KEEP_PLOT"));
    ASSERT_INT_EQ(system(cmd), 0);
  }

  /* Usage errors: status 2 and one line. */
  ASSERT_INT_EQ(MAIN("analyze"), 2);
  ASSERT_STR_EQ(err, "vlmload analyze: needs a timeline CSV (see --help)\n");
  ASSERT_INT_EQ(MAIN("analyze", tl, "--x", "tokens"), 2);
  ASSERT_STR_EQ(err, "vlmload analyze: --x 'tokens': want requests or images\n");
  ASSERT_INT_EQ(MAIN("analyze", tl, "--bogus"), 2);
  ASSERT_STR_EQ(err, "vlmload analyze: --bogus: unknown option (see --help)\n");
  ASSERT_INT_EQ(MAIN("analyze", tl, "--plot"), 2);
  ASSERT_STR_EQ(err, "vlmload analyze: --plot: needs a value (see --help)\n");
  ASSERT_INT_EQ(MAIN("analyze", tl, "--warmup", "ten"), 2);
  ASSERT_INT_EQ(MAIN("analyze", tl, "--warmup-time", "5parsecs"), 2);
  ASSERT_INT_EQ(MAIN("analyze", tl, "--min-growth", "150"), 2);
  ASSERT_INT_EQ(MAIN("analyze", tl, "--plot-size", "10x10"), 2);
  ASSERT_INT_EQ(MAIN("analyze", tl, "--series", "a,,b"), 2);
  ASSERT_INT_EQ(MAIN("analyze", tl, tl), 2);
  ASSERT_INT_EQ(MAIN("analyze", tl, "--series", "nothing", "--quiet", "--output", json), 2);
  ASSERT(strstr(err, "vlmload analyze: --series: no memory series 'nothing'") == err);
  /* Input and output errors: status 1. */
  char missing[400];
  snprintf(missing, sizeof(missing), "%s/none.csv", dir);
  ASSERT_INT_EQ(MAIN("analyze", missing), 1);
  ASSERT(strstr(err, "vlmload analyze: ") == err && strstr(err, "none.csv: No such file") != NULL);
  ASSERT_INT_EQ(MAIN("analyze", tl, "--quiet", "--output", "/nonexistent-dir/a.json"), 1);
  ASSERT(strstr(err, "--output '/nonexistent-dir/a.json'") != NULL);
  /* Options that parse; help. */
  ASSERT_INT_EQ(MAIN("analyze", "--quiet", "--warmup", "2k", "--min-growth", "0.5%", "--min-slope",
                     "0.25", "--min-growth-mb", "2", "--no-autocorr", "--warmup-time", "20s",
                     "--output", json, tl),
                0);
  ASSERT_INT_EQ(MAIN("analyze", "--help"), 0);
  ASSERT_INT_EQ(MAIN("analyze", "-h"), 0);

  unlink(tl);
  unlink(mon);
  unlink(png);
  unlink(json);
  char path[400];
  snprintf(path, sizeof(path), "%s/stderr.txt", dir);
  unlink(path);
  ASSERT_INT_EQ(rmdir(dir), 0);
}

/* A run at 50 requests a second, a row every 0.2 s (10 requests), the first 100 requests a
 * warm-up, a drained flush every 50 requests (its row marked "flush", inside the warm-up too), a
 * cache of 0.5 MB per request that each flush returns, and the process's high-water mark beside
 * its resident set. As in a run, a row shows the memory read when the row before it was written.
 */
static char *hwm_timeline(void) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fputs("wall_ms,elapsed_s,phase,sent_total,completed_total,flushes,rss_mb.srv,hwm_mb.srv\n", f);
  double done = 0, cache = 0, read = 1000, top = 1000;
  int flushes = 0;
  for (int i = 0; i < 150; i++) {
    double shown = read;
    top = fmax(top, shown);
    done += 10;
    cache += 5;
    const char *phase = done <= 100 ? "warmup" : "measure";
    if ((int)done % 50 == 0) {
      flushes++;
      cache = 0;
      phase = "flush";
    }
    read = 1000 + cache;
    fprintf(f, "%.0f,%.1f,%s,%.0f,%.0f,%d,%.1f,%.1f\n", WALL0 + 200.0 * (i + 1), 0.2 * (i + 1),
            phase, done, done, flushes, shown, top);
  }
  fclose(f);
  return buf;
}

TEST_IMPL(cli_hwm_gets_its_peak) {
  char *text = hwm_timeline();
  vl_csv_t *tl = parse("t.csv", text);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  cfg.text = NULL;
  cJSON *r = run(tl, NULL, &cfg);
  ASSERT_STR_EQ(verdict(r, "rss_mb.srv"), "sawtooth-returns");
  /* The high-water mark climbed with the first window's cache and never came down: no verdict on
   * growth, its peak. */
  cJSON *h = series(r, "hwm_mb.srv");
  ASSERT_STR_EQ(cJSON_GetObjectItem(h, "verdict")->valuestring, "peak");
  cJSON *pk = cJSON_GetObjectItem(h, "peak");
  ASSERT_EQ(cJSON_GetObjectItem(pk, "value")->valuedouble, 1020.0);
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(h, "ols"), "slope_per_1000")));
  cJSON_Delete(r);
  vl_csv_free(tl);
  free(text);
}

TEST_IMPL(cli_flush_inside_warmup_does_not_end_it) {
  /* The flush at 50 requests pauses the warm-up; it ends at the row after the 100th request. */
  char *text = hwm_timeline();
  vl_csv_t *tl = parse("t.csv", text);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  cfg.text = NULL;
  cJSON *r = run(tl, NULL, &cfg);
  cJSON *w = cJSON_GetObjectItem(r, "warmup");
  ASSERT_STR_EQ(cJSON_GetObjectItem(w, "from")->valuestring, "phase column");
  /* Row 10 (110 requests) is the first past the warm-up; row 9 is the flush at 100. */
  ASSERT_EQ(cJSON_GetObjectItem(w, "wall_ms")->valuedouble, WALL0 + 200.0 * 11);
  cJSON *s = series(r, "rss_mb.srv");
  ASSERT(cJSON_GetObjectItem(s, "x_first")->valuedouble >= 100);
  /* The windows opened by the flushes at 50 and 100 are the warm-up's. */
  cJSON *ws = cJSON_GetObjectItem(cJSON_GetObjectItem(s, "floor"), "windows");
  ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(ws, 0), "x")->valuedouble, 150.0);
  cJSON_Delete(r);
  vl_csv_free(tl);
  free(text);
}

TEST_IMPL(cli_levels_off) {
  /* Memory rises 360 MB over the first 2700 requests, then holds, over 8000 at 100 a second, no
   * flushes: levels-off, at about 2700 requests and 27 s into the run. */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fputs("wall_ms,elapsed_s,phase,completed_total,flushes,rss_mb.scheduler\n", f);
  uint64_t st = 5;
  for (int i = 0; i < 200; i++) {
    double done = 40.0 * (i + 1), mem = 3000 + 360 * fmin(40.0 * i, 2700) / 2700;
    fprintf(f, "%.0f,%.1f,measure,%.0f,0,%.3f\n", WALL0 + 400.0 * (i + 1), 0.4 * (i + 1), done,
            mem + 0.5 * gauss(&st));
  }
  fclose(f);
  vl_csv_t *tl = parse("t.csv", buf);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  char *text;
  cJSON *r = run_text(tl, NULL, &cfg, &text);
  cJSON *s = series(r, "rss_mb.scheduler");
  ASSERT_STR_EQ(cJSON_GetObjectItem(s, "verdict")->valuestring, "levels-off");
  cJSON *lv = cJSON_GetObjectItem(s, "levels_off");
  ASSERT_NEAR(cJSON_GetObjectItem(lv, "x")->valuedouble, 2700, 60);
  ASSERT_NEAR(cJSON_GetObjectItem(lv, "s_into_run")->valuedouble, 27, 0.8);
  ASSERT_NEAR(cJSON_GetObjectItem(lv, "rise")->valuedouble, 360, 5);
  ASSERT(strstr(text, "\nrss_mb.scheduler: levels-off -- ") != NULL);
  ASSERT(strstr(text, "s into the run)") != NULL);
  free(text);
  cJSON_Delete(r);
  vl_csv_free(tl);
  free(buf);
}

TEST_IMPL(cli_text_only_has_no_images_fit) {
  /* A text-only run: images_sent stays 0, so memory has no slope against images. The text names
   * no such fit (no "+nan MB/1000 images") and the JSON gives null for it. */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fputs("wall_ms,elapsed_s,phase,completed_total,flushes,images_sent,rss_mb.srv\n", f);
  uint64_t st = 7;
  for (int i = 0; i < 100; i++)
    fprintf(f, "%.0f,%.1f,measure,%d,0,0,%.3f\n", WALL0 + 1000.0 * (i + 1), 1.0 * (i + 1),
            50 * (i + 1), 2000 + 0.01 * 50 * (i + 1) + 0.2 * gauss(&st));
  fclose(f);
  vl_csv_t *tl = parse("t.csv", buf);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  char *text;
  cJSON *r = run_text(tl, NULL, &cfg, &text);
  /* The requests axis is fitted: 0.01 MB a request, 10 MB per 1000. */
  cJSON *s = series(r, "rss_mb.srv");
  ASSERT_NEAR(slope(s, "ols"), 10, 0.5);
  ASSERT(strstr(text, "MB/1000 requests") != NULL);
  ASSERT(strstr(text, "MB/1000 images") == NULL);
  ASSERT(strstr(text, "nan") == NULL);
  cJSON *ax = cJSON_GetObjectItem(s, "second_axis");
  ASSERT(ax != NULL);
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(ax, "ols"), "slope_per_1000")));
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(ax, "theil_sen"), "slope_per_1000")));
  char *js = cJSON_PrintUnformatted(r);
  ASSERT(strstr(js, "nan") == NULL && strstr(js, "NaN") == NULL);
  free(js);
  free(text);
  cJSON_Delete(r);
  vl_csv_free(tl);
  free(buf);
}

/* Images, text-only requests and megapixels completed by wall time t in the mixed run below: per
 * second, the share of image requests and their sizes vary, so the three totals are not in
 * proportion; within a second the work is done at a constant rate. */
static void mixed_totals_at(double t, double *img, double *txt, double *mpx) {
  double s = (t - WALL0) / 1000;
  *img = *txt = *mpx = 0;
  for (int i = 0; i < 200 && s > 0; i++) {
    double d = s < 1 ? s : 1, images = 30 + 20 * sin(i / 5.0);
    *img += images * d;
    *txt += (60 - images) * d;
    *mpx += images * (0.2 + 0.1 * cos(i / 3.0)) * d;
    s -= d;
  }
}

TEST_IMPL(cli_monitor_attribution) {
  /* An external monitor's samples fall between the timeline's rows; its memory grows 60 MB per
   * 1000 images and with nothing else. Its attribution needs the images, text-only requests and
   * megapixels done at each sample's time, interpolated between the rows around it: exact here,
   * so the fit gives the truth. */
  char *tb = NULL, *mb = NULL;
  size_t tl_len = 0, m_len = 0;
  FILE *f = open_memstream(&tb, &tl_len);
  fputs("wall_ms,elapsed_s,phase,completed_total,flushes,images_sent_total,text_only_total,"
        "image_megapixels_total\n",
        f);
  for (int i = 0; i < 200; i++) {
    double t = WALL0 + 1000.0 * (i + 1), img, txt, mpx;
    mixed_totals_at(t, &img, &txt, &mpx);
    fprintf(f, "%.0f,%d,measure,%.6f,0,%.6f,%.6f,%.6f\n", t, i + 1, img + txt, img, txt, mpx);
  }
  fclose(f);
  f = open_memstream(&mb, &m_len);
  fputs("time_ms,mem_mb\n", f);
  for (int k = 0; k < 400; k++) {
    double t = WALL0 + 500.0 * k + 250, img, txt, mpx; /* x.250 and x.750 seconds */
    mixed_totals_at(t, &img, &txt, &mpx);
    fprintf(f, "%.0f,%.9f\n", t, 4000 + 0.06 * img);
  }
  fclose(f);
  vl_csv_t *tl = parse("t.csv", tb), *ext = parse("m.csv", mb);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  char *text;
  cJSON *r = run_text(tl, ext, &cfg, &text);
  cJSON *at = cJSON_GetObjectItem(series(r, "mem_mb"), "attribution");
  ASSERT(cJSON_IsObject(at));
  ASSERT_INT_EQ(cJSON_GetObjectItem(at, "n")->valueint, 400); /* 0.25 s: from 0 at the start */
  const char *terms[] = {"per_1000_images_mb", "per_1000_text_requests_mb", "per_megapixel_mb"};
  const double want[] = {60, 0, 0};
  for (int i = 0; i < 3; i++) {
    cJSON *term = cJSON_GetObjectItem(at, terms[i]);
    ASSERT(cJSON_IsNull(cJSON_GetObjectItem(term, "dropped")));
    ASSERT_NEAR(cJSON_GetObjectItem(term, "value")->valuedouble, want[i], 1e-3);
  }
  ASSERT(strstr(text, "    per 1000 images           +60 MB  95% CI [+60, +60]\n") != NULL);
  free(text);
  cJSON_Delete(r);
  vl_csv_free(tl);
  vl_csv_free(ext);
  free(tb);
  free(mb);
}

TEST_IMPL(cli_leaves_out_the_rate_auto_probe) {
  /* A --rate auto run's timeline: the probe's rows first (phase rate-auto, counting its own
   * requests from 0 and memory rising with them), then the run's rows counting from 0 again,
   * memory flat. The analysis reads the run's rows only: flat, over the run's requests. */
  char dir[300];
  snprintf(dir, sizeof(dir), "%s/vlprobe.XXXXXX", task_tmpdir());
  ASSERT(mkdtemp(dir) != NULL);
  char tl[600], json[600], err[1024];
  snprintf(tl, sizeof(tl), "%s/timeline.csv", dir);
  snprintf(json, sizeof(json), "%s/analysis.json", dir);
  FILE *f = fopen(tl, "w");
  fputs("wall_ms,elapsed_s,phase,completed_total,flushes,rss_mb.srv\n", f);
  for (int i = 0; i < 8; i++)
    fprintf(f, "%.0f,%d,rate-auto,%d,0,%d\n", WALL0 + 1000.0 * (i + 1), i + 1, 300 * (i + 1),
            1000 + 100 * i);
  uint64_t st = 3;
  for (int i = 0; i < 60; i++)
    fprintf(f, "%.0f,%d,measure,%d,0,%.3f\n", WALL0 + 8000 + 1000.0 * (i + 1), i + 1, 100 * (i + 1),
            1800 + 0.05 * gauss(&st));
  fclose(f);
  ASSERT_INT_EQ(MAIN("analyze", tl, "--output", json, "--quiet"), 0);
  f = fopen(json, "r");
  ASSERT(f != NULL);
  char *buf = malloc(1 << 20);
  size_t n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = '\0';
  fclose(f);
  cJSON *r = cJSON_Parse(buf);
  ASSERT(r != NULL);
  cJSON *s = series(r, "rss_mb.srv");
  ASSERT_INT_EQ(cJSON_GetObjectItem(s, "n")->valueint, 60);
  ASSERT_NEAR(cJSON_GetObjectItem(s, "x_first")->valuedouble, 100, 1e-9);
  ASSERT_NEAR(cJSON_GetObjectItem(s, "x_last")->valuedouble, 6000, 1e-9);
  ASSERT_STR_EQ(cJSON_GetObjectItem(s, "verdict")->valuestring, "flat");
  cJSON_Delete(r);
  free(buf);
  unlink(tl);
  unlink(json);
  char path[400];
  snprintf(path, sizeof(path), "%s/stderr.txt", dir);
  unlink(path);
  ASSERT_INT_EQ(rmdir(dir), 0);
}

TEST_IMPL(cli_fail_on) {
  /* The synthetic run's verdicts: rss_mb.scheduler and prom.vlmmock_memory_bytes grow, the
   * monitor's column grows, pss_mb.tokenizer is a sawtooth, gpu0_used_mb flat, cmd1 has no data. */
  char *tt = timeline_text(0), *mt = monitor_text();
  vl_csv_t *tl = parse("run/timeline.csv", tt), *ext = parse("gpu.csv", mt);
  vl_analyzecli_cfg_t cfg;
  vl_analyzecli_cfg_init(&cfg);
  cfg.text = NULL;
  char why[256], *lines = NULL;
  size_t len = 0, failed = 99;
  ASSERT_INT_EQ(vl_analyze_spec_fail_on("grows", &cfg.fail_on, why, sizeof(why)), 0);
  cfg.fail_text = open_memstream(&lines, &len);
  cfg.failed = &failed;
  cJSON *r = run(tl, ext, &cfg);
  fclose(cfg.fail_text);
  ASSERT_UINT_EQ(failed, 3);
  ASSERT_STR_EQ(lines, "\nfail-on: rss_mb.scheduler is grows\nfail-on: prom.vlmmock_memory_bytes "
                       "is grows\nfail-on: memory.used [MiB] is grows\n");
  cJSON *fo = cJSON_GetObjectItem(r, "fail_on");
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(fo, "verdicts")), 1);
  ASSERT_STR_EQ(cJSON_GetArrayItem(cJSON_GetObjectItem(fo, "verdicts"), 0)->valuestring, "grows");
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(fo, "failed")), 3);
  ASSERT_STR_EQ(cJSON_GetArrayItem(cJSON_GetObjectItem(fo, "failed"), 0)->valuestring,
                "rss_mb.scheduler");
  cJSON_Delete(r);
  free(lines);

  /* Several verdicts; none of them found: nothing fails. */
  cfg.fail_text = NULL;
  ASSERT_INT_EQ(vl_analyze_spec_fail_on("flat,sawtooth-returns", &cfg.fail_on, why, sizeof(why)),
                0);
  r = run(tl, ext, &cfg);
  ASSERT_UINT_EQ(failed, 2);
  cJSON_Delete(r);
  ASSERT_INT_EQ(vl_analyze_spec_fail_on("levels-off,peak", &cfg.fail_on, why, sizeof(why)), 0);
  r = run(tl, ext, &cfg);
  ASSERT_UINT_EQ(failed, 0);
  cJSON_Delete(r);
  /* Without --fail-on, the report says so. */
  cfg.fail_on = 0;
  r = run(tl, ext, &cfg);
  ASSERT(cJSON_IsNull(cJSON_GetObjectItem(r, "fail_on")));
  cJSON_Delete(r);

  /* Names that are not verdicts, one line that lists them. */
  unsigned mask = 7;
  ASSERT_INT_EQ(vl_analyze_spec_fail_on("grows,leak", &mask, why, sizeof(why)), -1);
  ASSERT_STR_EQ(
      why, "'leak' is not a verdict; want some of grows, levels-off, sawtooth-returns, "
           "flat, inconclusive, peak, not-memory, ended-early, insufficient-data, separated by "
           "commas");
  ASSERT_INT_EQ(vl_analyze_spec_fail_on("grows,", &mask, why, sizeof(why)), -1);
  ASSERT_INT_EQ(vl_analyze_spec_fail_on("", &mask, why, sizeof(why)), -1);
  ASSERT_INT_EQ(mask, 7);
  vl_csv_free(tl);
  vl_csv_free(ext);
  free(tt);
  free(mt);
}

TEST_IMPL(cli_fail_on_exit_status) {
  char dir[300];
  snprintf(dir, sizeof(dir), "%s/vlanalyze.XXXXXX", task_tmpdir());
  ASSERT(mkdtemp(dir) != NULL);
  char tl[600], json[600], err[1024];
  snprintf(tl, sizeof(tl), "%s/timeline.csv", dir);
  snprintf(json, sizeof(json), "%s/analysis.json", dir);
  char *t = timeline_text(0);
  FILE *f = fopen(tl, "w");
  fputs(t, f);
  fclose(f);
  free(t);

  /* A verdict --fail-on names: status 3, with or without the text report. */
  ASSERT_INT_EQ(MAIN("analyze", tl, "--fail-on", "grows"), 3);
  ASSERT_STR_EQ(err, "");
  ASSERT_INT_EQ(MAIN("analyze", tl, "--quiet", "--fail-on", "inconclusive,grows"), 3);
  ASSERT_INT_EQ(MAIN("analyze", tl, "--quiet", "--fail-on", "levels-off", "--output", json), 0);
  /* A floor above every series' growth: nothing grows. */
  ASSERT_INT_EQ(MAIN("analyze", tl, "--quiet", "--fail-on", "grows", "--min-growth-mb", "1e6"), 0);
  /* --quiet with nothing to give is refused, not a silent 0. */
  ASSERT_INT_EQ(MAIN("analyze", tl, "--quiet"), 2);
  ASSERT_STR_EQ(err, "vlmload analyze: --quiet: nothing would be written; add --output FILE.json, "
                     "--plot FILE.png, --report FILE.html or --fail-on VERDICTS (an exit "
                     "status)\n");
  ASSERT_INT_EQ(MAIN("analyze", tl, "--fail-on", "leak"), 2);
  ASSERT(strstr(err, "vlmload analyze: --fail-on 'leak': 'leak' is not a verdict; want some of "
                     "grows, ") == err);
  ASSERT_INT_EQ(MAIN("analyze", tl, "--min-growth-mb", "-1"), 2);
  ASSERT_STR_EQ(err, "vlmload analyze: --min-growth-mb '-1': want MB over the run, such as 4 or "
                     "0.5 (0: no absolute floor)\n");

  unlink(tl);
  unlink(json);
  char path[400];
  snprintf(path, sizeof(path), "%s/stderr.txt", dir);
  unlink(path);
  ASSERT_INT_EQ(rmdir(dir), 0);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(cli_timeline_and_monitor),
      TEST_ENTRY(cli_images_per_row),
      TEST_ENTRY(cli_columns_by_name),
      TEST_ENTRY(cli_merged_timeline_and_monitor),
      TEST_ENTRY(cli_flush_row_reads_before_the_flush),
      TEST_ENTRY(cli_bad_input),
      TEST_ENTRY(cli_hwm_gets_its_peak),
      TEST_ENTRY(cli_flush_inside_warmup_does_not_end_it),
      TEST_ENTRY(cli_levels_off),
      TEST_ENTRY(cli_text_only_has_no_images_fit),
      TEST_ENTRY(cli_monitor_attribution),
      TEST_ENTRY(cli_leaves_out_the_rate_auto_probe),
      TEST_ENTRY(cli_main),
      TEST_ENTRY(cli_fail_on),
      TEST_ENTRY(cli_fail_on_exit_status),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
