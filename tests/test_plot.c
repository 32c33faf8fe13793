/* Plots drawn by the real gnuplot: a synthetic run decodes with libpng at the expected size with
 * each series' colour and the latency panel in it; the script carries every element and quotes
 * names safely; a high-water mark equal to the resident set leaves it in sight; the legend's
 * figures never take an exponent; sizes, paths, a missing gnuplot and a failing one give clear
 * errors. The PNGs are left in the working directory (test_plot_*.png) to be looked at. */
#include "task.h"
#include "vlmload/analyze.h"
#include "vlmload/common.h"
#include "vlmload/plot.h"
#include "vlmload/text.h"

#include <ctype.h>
#include <png.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static double gauss(uint64_t *s) {
  double u = ((double)(task_rand(s) >> 11) + 0.5) / 9007199254740992.0;
  double v = ((double)(task_rand(s) >> 11) + 0.5) / 9007199254740992.0;
  return sqrt(-2 * log(u)) * cos(2 * 3.14159265358979323846 * v);
}

#define N 600

typedef struct {
  double x[N], t[N], cache[N], leak[N], gpu[N], p50[N], p99[N], secs[N];
  vl_flush_event_t fl[32];
  double flush_x[32];
  size_t nfl;
  vl_analysis_t an[3];
} run_t;

/* A run of 12000 requests at 100 per second with a flush every 1500: one series whose cache comes
 * back at each flush, one that also leaks 4 MB per 1000 requests, one large and flat. */
static void make_run(run_t *r) {
  memset(r, 0, sizeof(*r));
  uint64_t st = 2026;
  double last = 0;
  for (size_t i = 0; i < N; i++) {
    double x = (double)i * 20;
    if (x > 0 && fmod(x, 1500) == 0) {
      last = x;
      r->fl[r->nfl] = (vl_flush_event_t){1.7e12 + x * 10 - 5, x, NAN};
      r->flush_x[r->nfl++] = x;
    }
    r->x[i] = x;
    r->t[i] = 1.7e12 + x * 10;
    r->secs[i] = x / 100;
    double warm = 60 * (1 - exp(-x / 300));
    r->cache[i] = 900 + warm + 0.06 * (x - last) + 1.5 * gauss(&st);
    r->leak[i] = 1000 + warm + 4.0 * x / 1000 + 0.04 * (x - last) + 1.5 * gauss(&st);
    r->gpu[i] = 1150 + 0.5 * gauss(&st);
    r->p50[i] = 180 + 10 * gauss(&st) + (x - last) * 0.005;
    r->p99[i] = 420 + 40 * fabs(gauss(&st)) + (x - last) * 0.02;
  }
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  const double *ys[3] = {r->cache, r->leak, r->gpu};
  const char *names[3] = {"rss_mb.scheduler", "rss_mb.tokenizer", "gpu0_used_mb"};
  for (int k = 0; k < 3; k++) {
    vl_series_t in = {.name = names[k],
                      .x = r->x,
                      .y = ys[k],
                      .t_ms = r->t,
                      .n = N,
                      .flushes = r->fl,
                      .n_flushes = r->nfl,
                      .warmup_x = 1000};
    ASSERT_INT_EQ(vl_analyze_series(&r->an[k], &in, &o), 0);
  }
  ASSERT_INT_EQ(r->an[0].verdict, VL_VERDICT_SAWTOOTH);
  ASSERT_INT_EQ(r->an[1].verdict, VL_VERDICT_GROWS);
  ASSERT_INT_EQ(r->an[2].verdict, VL_VERDICT_FLAT);
}

static void free_run(run_t *r) {
  for (int k = 0; k < 3; k++)
    vl_analyze_free(&r->an[k]);
}

/* Decodes a PNG into RGB. */
static uint8_t *decode(const char *path, int *w, int *h) {
  png_image img;
  memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  ASSERT(png_image_begin_read_from_file(&img, path));
  img.format = PNG_FORMAT_RGB;
  uint8_t *buf = malloc(PNG_IMAGE_SIZE(img));
  ASSERT(png_image_finish_read(&img, NULL, buf, 0, NULL));
  *w = (int)img.width;
  *h = (int)img.height;
  return buf;
}

/* Pixels within a small distance of a colour. */
static size_t near(const uint8_t *px, int w, int x0, int y0, int x1, int y1, int r, int g, int b) {
  size_t n = 0;
  for (int y = y0; y < y1; y++) {
    for (int x = x0; x < x1; x++) {
      const uint8_t *p = px + ((size_t)y * (size_t)w + (size_t)x) * 3;
      int dr = p[0] - r, dg = p[1] - g, db = p[2] - b;
      n += dr * dr + dg * dg + db * db < 30 * 30;
    }
  }
  return n;
}

/* Pixels that are not white. */
static size_t inked(const uint8_t *px, int w, int x0, int y0, int x1, int y1) {
  size_t n = 0;
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++) {
      const uint8_t *p = px + ((size_t)y * (size_t)w + (size_t)x) * 3;
      n += p[0] != 255 || p[1] != 255 || p[2] != 255;
    }
  return n;
}

/* The script vl_plot_script writes, as a string to free. */
static char *script_of(const vl_plot_t *p, const char *png) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ASSERT(f != NULL);
  ASSERT_INT_EQ(vl_plot_script(p, png, f), 0);
  ASSERT_INT_EQ(fclose(f), 0);
  return text;
}

TEST_IMPL(plot_run_png) {
  run_t *r = malloc(sizeof(*r));
  make_run(r);
  vl_plot_line_t lines[3] = {{"rss_mb.scheduler", r->x, r->cache, N, &r->an[0]},
                             {"rss_mb.tokenizer", r->x, r->leak, N, &r->an[1]},
                             {"gpu0_used_mb", r->x, r->gpu, N, &r->an[2]}};
  vl_plot_t p = {.title = "Memory over requests completed - synthetic run",
                 .lines = lines,
                 .n_lines = 3,
                 .flush_x = r->flush_x,
                 .n_flush = r->nfl,
                 .warmup_x = 1000,
                 .lat_x = r->x,
                 .lat_p50 = r->p50,
                 .lat_p99 = r->p99,
                 .n_lat = N};
  char err[512] = "";
  remove("test_plot_memory.png");
  int rc = vl_plot_write(&p, "test_plot_memory.png", err, sizeof(err));
  if (rc)
    fprintf(stderr, "%s\n", err);
  ASSERT_INT_EQ(rc, 0);
  ASSERT_INT_EQ(access("test_plot_memory.png.tmp", F_OK), -1);
  int w, h;
  uint8_t *px = decode("test_plot_memory.png", &w, &h);
  ASSERT_INT_EQ(w, 1200);
  ASSERT_INT_EQ(h, 700);
  /* Each series' colour in the main panel (the upper two thirds), the p99 line's red in the
   * latency panel (the lower third), ink everywhere, white corners. */
  int split = h * 2 / 3;
  ASSERT(near(px, w, 0, 0, w, split, 0x1f, 0x77, 0xb4) > 1000);
  ASSERT(near(px, w, 0, 0, w, split, 0xff, 0x7f, 0x0e) > 1000);
  ASSERT(near(px, w, 0, 0, w, split, 0x2c, 0xa0, 0x2c) > 300); /* flat, under its fit */
  ASSERT(near(px, w, 0, split, w, h, 0xd6, 0x27, 0x28) > 300);
  ASSERT(inked(px, w, 0, 0, w, 40) > 300); /* the title */
  ASSERT_INT_EQ(inked(px, w, 0, h - 4, 4, h), 0);
  free(px);

  /* The script holds every element, the warm-up and the legend's texts. */
  char *text = script_of(&p, "out.png");
  const char *want[] = {"set terminal pngcairo size 1200,700",
                        "set output 'out.png'",
                        "$S0 << EOD",
                        "$S2 << EOD",
                        "$FIT1 << EOD",
                        "$FLOOR1 << EOD",
                        "$TREND1 << EOD",
                        "$FLUSH << EOD",
                        "$P99 << EOD",
                        "'warm-up'",
                        "title 'rss_mb.tokenizer: grows, floor +4",
                        "title 'OLS fit'",
                        "title 'post-flush floor'",
                        "title 'post-flush floor trend'",
                        "title 'flush'",
                        "title 'p99 latency'",
                        "set xlabel 'requests completed'",
                        "set ylabel 'latency ms'"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(want); i++) {
    if (!strstr(text, want[i]))
      fprintf(stderr, "missing from the script: %s\n", want[i]);
    ASSERT(strstr(text, want[i]) != NULL);
  }
  free(text);

  /* A lone series, absolute, no analysis, no latency panel: still a full plot. */
  vl_plot_t q = {.lines = lines + 2, .n_lines = 1, .width = 800, .height = 480};
  ASSERT_INT_EQ(vl_plot_write(&q, "test_plot_single.png", err, sizeof(err)), 0);
  px = decode("test_plot_single.png", &w, &h);
  ASSERT_INT_EQ(w, 800);
  ASSERT_INT_EQ(h, 480);
  ASSERT(near(px, w, 0, 0, w, h, 0x1f, 0x77, 0xb4) > 300); /* first line: first colour */
  free(px);
  free_run(r);
  free(r);
}

TEST_IMPL(plot_edges) {
  char err[512] = "";
  int w, h;
  /* Nothing to draw is still a plot (empty axes). */
  vl_plot_t e = {.width = 400, .height = 300};
  ASSERT_INT_EQ(vl_plot_write(&e, "test_plot_empty.png", err, sizeof(err)), 0);
  free(decode("test_plot_empty.png", &w, &h));
  ASSERT_INT_EQ(w, 400);
  ASSERT_INT_EQ(h, 300);

  /* Missing values break the line; a sample alone between them is drawn as a point. A quote in a
   * name or a path is doubled, a control byte dropped. */
  double xs[] = {0, 1, 2, 3, 4, 5}, ys[] = {1, 2, NAN, 3, NAN, 5};
  vl_plot_line_t holes = {"it's\na series", xs, ys, 6, NULL};
  vl_plot_t g = {.lines = &holes, .n_lines = 1};
  char *text = script_of(&g, "it's.png");
  ASSERT(strstr(text, "$S0 << EOD\n0 1\n1 2\n\n3 3\n\n5 5\nEOD\n") != NULL);
  ASSERT(strstr(text, "$L0 << EOD\n3 3\n5 5\nEOD\n") != NULL);
  ASSERT(strstr(text, "title 'it''s?a series'") != NULL);
  ASSERT(strstr(text, "set output 'it''s.png'") != NULL);
  free(text);
  ASSERT_INT_EQ(vl_plot_write(&g, "test_plot_it's.png", err, sizeof(err)), 0);
  free(decode("test_plot_it's.png", &w, &h));
  ASSERT_INT_EQ(w, VL_PLOT_WIDTH);
  ASSERT_INT_EQ(h, VL_PLOT_HEIGHT);

  vl_plot_t bad = {.width = 100, .height = 700};
  ASSERT_INT_EQ(vl_plot_write(&bad, "never.png", err, sizeof(err)), VL_EINVAL);
  ASSERT_STR_EQ(err, "plot size 100x700 out of range");
  ASSERT_INT_EQ(access("never.png", F_OK), -1);
  ASSERT_INT_EQ(vl_plot_write(&g, "/nonexistent-dir/x.png", err, sizeof(err)), VL_EIO);
  ASSERT(strstr(err, "/nonexistent-dir/x.png: ") == err);
}

/* Writes an executable shell script at path. */
static void script_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fputs(text, f);
  ASSERT_INT_EQ(fclose(f), 0);
  ASSERT_INT_EQ(chmod(path, 0755), 0);
}

TEST_IMPL(plot_gnuplot_missing_or_failing) {
  char dir[] = "/tmp/vlmload-test-plot-XXXXXX";
  ASSERT(mkdtemp(dir) != NULL);
  char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
  char err[512], *path = NULL;
  double xs[] = {0, 1}, ys[] = {1, 2};
  vl_plot_line_t one = {"a", xs, ys, 2, NULL};
  vl_plot_t p = {.lines = &one, .n_lines = 1};

  /* PATH without gnuplot: the one-line error, and no file. */
  ASSERT_INT_EQ(setenv("PATH", dir, 1), 0);
  ASSERT_INT_EQ(vl_plot_find_gnuplot(NULL, &path, err, sizeof(err)), VL_ENOENT);
  ASSERT(path == NULL);
  ASSERT_STR_EQ(err, "--plot needs gnuplot (apt-get install gnuplot-nox): not found on PATH");
  ASSERT_INT_EQ(vl_plot_write(&p, "test_plot_never.png", err, sizeof(err)), VL_ENOENT);
  ASSERT_STR_EQ(err, VL_PLOT_NO_GNUPLOT);
  ASSERT_INT_EQ(access("test_plot_never.png", F_OK), -1);

  /* A gnuplot that fails: its exit status and last words, and no file. */
  char fake[256];
  snprintf(fake, sizeof(fake), "%s/gnuplot", dir);
  script_file(fake, "#!/bin/sh\necho 'line 1: something odd' >&2\necho 'line 2: it broke' >&2\n"
                    "exit 3\n");
  ASSERT_INT_EQ(vl_plot_find_gnuplot(NULL, &path, err, sizeof(err)), 0);
  ASSERT_STR_EQ(path, fake);
  free(path);
  ASSERT_INT_EQ(vl_plot_write(&p, "test_plot_never.png", err, sizeof(err)), VL_EIO);
  ASSERT_STR_EQ(err, "gnuplot failed (exit status 3): line 1: something odd line 2: it broke");
  ASSERT_INT_EQ(access("test_plot_never.png", F_OK), -1);
  ASSERT_INT_EQ(access("test_plot_never.png.tmp", F_OK), -1);

  /* One that exits 0 without drawing. */
  script_file(fake, "#!/bin/sh\nexit 0\n");
  ASSERT_INT_EQ(vl_plot_write(&p, "test_plot_never.png", err, sizeof(err)), VL_EIO);
  ASSERT_STR_EQ(err, "test_plot_never.png: gnuplot wrote no image");
  ASSERT_INT_EQ(access("test_plot_never.png", F_OK), -1);

  /* --gnuplot: a path is taken as it is, a name is looked up on PATH. */
  ASSERT_INT_EQ(vl_plot_find_gnuplot("/nonexistent/gnuplot", &path, err, sizeof(err)), VL_ENOENT);
  ASSERT_STR_EQ(err, "--gnuplot '/nonexistent/gnuplot': not an executable file");
  ASSERT_INT_EQ(vl_plot_find_gnuplot("gnuplot-other", &path, err, sizeof(err)), VL_ENOENT);
  ASSERT_STR_EQ(err, "--gnuplot 'gnuplot-other': not found on PATH");
  ASSERT_INT_EQ(vl_plot_find_gnuplot(fake, &path, err, sizeof(err)), 0);
  ASSERT_STR_EQ(path, fake);
  free(path);
  unlink(fake);
  rmdir(dir);
  if (old) {
    setenv("PATH", old, 1);
    free(old);
  } else {
    unsetenv("PATH");
  }
}

TEST_IMPL(plot_legend_agrees_with_verdict) {
  /* Memory that rises 140 MB over the first 1000 requests and holds after: the legend says where it
   * levels off, never "flat" with a slope of +140 MB/1k, and the fit drawn is the broken line. */
  static double x[300], y[300], t[300];
  uint64_t st = 7;
  for (int i = 0; i < 300; i++) {
    x[i] = 20.0 * i;
    t[i] = 1.7e12 + x[i] * 10;
    y[i] = 2000 + 0.14 * fmin(x[i], 1000) + 0.3 * gauss(&st);
  }
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t an;
  vl_series_t in = {.name = "rss_mb.server", .x = x, .y = y, .t_ms = t, .n = 300};
  ASSERT_INT_EQ(vl_analyze_series(&an, &in, &o), 0);
  ASSERT_INT_EQ(an.verdict, VL_VERDICT_LEVELS_OFF);
  vl_plot_line_t one = {"rss_mb.server", x, y, 300, &an};
  vl_plot_t p = {.lines = &one, .n_lines = 1};
  char *text = script_of(&p, "out.png");
  ASSERT(strstr(text, "title 'rss_mb.server: levels-off at 1000 requests (+140 MB); warm-up'") !=
         NULL);
  ASSERT(strstr(text, "flat") == NULL);
  const char *fit = strstr(text, "$FIT0 << EOD\n");
  ASSERT(fit != NULL);
  double fx[3], fy[3];
  ASSERT_INT_EQ(sscanf(fit, "$FIT0 << EOD\n%lf %lf\n%lf %lf\n%lf %lf\nEOD", &fx[0], &fy[0], &fx[1],
                       &fy[1], &fx[2], &fy[2]),
                6);
  ASSERT_NEAR(fx[1], 1000, 0);
  ASSERT_NEAR(fy[1], fy[2], 1e-9);
  ASSERT_NEAR(fy[1] - fy[0], 140, 2);
  free(text);
  vl_analyze_free(&an);
}

/* The gnuplot style of the first plot element drawn from block `name` (the text after
 * "$NAME using 1:2 " up to the element's end), or of the key entry titled `title`, as a string to
 * free; NULL when there is none. */
static char *style_of(const char *text, const char *name, const char *title) {
  char want[128];
  if (name)
    snprintf(want, sizeof(want), "$%s using 1:2 ", name);
  else
    snprintf(want, sizeof(want), "keyentry ");
  for (const char *p = strstr(text, want); p; p = strstr(p + 1, want)) {
    const char *b = p + strlen(want), *e = strstr(b, name ? " notitle" : " title '");
    const char *eol = strchr(b, '\n');
    if (!e || (eol && eol < e))
      continue;
    if (title && strncmp(e + 8, title, strlen(title)) != 0)
      continue;
    return strndup(b, (size_t)(e - b));
  }
  return NULL;
}

/* Every "set KEY ..." line's value, in order, joined by '|', as a string to free. */
static char *settings(const char *text, const char *key) {
  size_t n = 0;
  char *out = calloc(1, 4096);
  for (const char *p = strstr(text, key); p; p = strstr(p + 1, key)) {
    if (p != text && p[-1] != '\n')
      continue;
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    n += (size_t)snprintf(out + n, 4096 - n, "%s%.*s", n ? "|" : "", (int)len, p);
  }
  return out;
}

TEST_IMPL(plot_marks_and_shared_axis) {
  run_t *r = malloc(sizeof(*r));
  make_run(r);
  vl_plot_line_t lines[2] = {{"rss_mb.scheduler", r->x, r->cache, N, &r->an[0]},
                             {"rss_mb.tokenizer", r->x, r->leak, N, &r->an[1]}};
  vl_plot_t p = {.lines = lines,
                 .n_lines = 2,
                 .flush_x = r->flush_x,
                 .n_flush = r->nfl,
                 .warmup_x = 1000,
                 .lat_x = r->x,
                 .lat_p50 = r->p50,
                 .lat_p99 = r->p99,
                 .n_lat = N};
  char *text = script_of(&p, "out.png");

  /* Flushes: thin solid lines in one colour, the same in the panel and in the key. The floor
   * trend: never solid, with markers, in the series' colour, and named apart in the key. */
  char *flush = style_of(text, "FLUSH", NULL), *flush_key = style_of(text, NULL, "flush'");
  char *trend = style_of(text, "TREND1", NULL);
  char *trend_key = style_of(text, NULL, "post-flush floor trend'");
  ASSERT(flush && flush_key && trend && trend_key);
  ASSERT_STR_EQ(flush, flush_key);
  ASSERT(strstr(flush, "with lines dashtype solid") != NULL);
  ASSERT(strstr(trend, "with linespoints") != NULL);
  ASSERT(strstr(trend, "pointtype") != NULL);
  ASSERT(strstr(trend, "dashtype solid") == NULL);
  ASSERT(strstr(trend_key, "with linespoints") != NULL);
  const char *fc = strstr(flush, "rgb '#"), *tc = strstr(trend, "rgb '#"),
             *kc = strstr(trend_key, "rgb '#");
  ASSERT(fc && tc && kc);
  ASSERT(strncmp(fc, tc, 13) != 0);
  ASSERT(strncmp(fc, kc, 13) != 0);
  /* Every flush is drawn in both panels: two blocks, each with every flush. */
  size_t blocks = 0;
  for (const char *q = strstr(text, "$FLUSH << EOD\n"); q; q = strstr(q + 1, "$FLUSH << EOD\n")) {
    blocks++;
    ASSERT(strstr(q, "1500 ") == q + 14);
  }
  ASSERT_INT_EQ(blocks, 2);
  free(flush);
  free(flush_key);
  free(trend);
  free(trend_key);

  /* Both panels share the x axis: one range and one label, twice; the latency rows are drawn at
   * their requests completed, not their seconds. */
  char *xr = settings(text, "set xrange "), *xl = settings(text, "set xlabel ");
  ASSERT_STR_EQ(xr, "set xrange [0:11980]|set xrange [0:11980]");
  ASSERT_STR_EQ(xl, "set xlabel 'requests completed'|set xlabel 'requests completed'");
  ASSERT(strstr(text, "elapsed") == NULL);
  const char *p99 = strstr(text, "$P99 << EOD\n");
  ASSERT(p99 != NULL);
  double x0, y0, x1, y1;
  ASSERT_INT_EQ(sscanf(p99 + 12, "%lf %lf\n%lf %lf", &x0, &y0, &x1, &y1), 4);
  ASSERT_NEAR(x0, 0, 0);
  ASSERT_NEAR(x1, 20, 0);
  free(xr);
  free(xl);
  free(text);

  /* Drawn, for a person to look at. */
  char err[512] = "";
  ASSERT_INT_EQ(vl_plot_write(&p, "test_plot_marks.png", err, sizeof(err)), 0);
  free_run(r);
  free(r);
}

/* Whether a gnuplot title in text holds a number in scientific notation ("1.2e+06", "3e-05"). */
static int exponent_in_titles(const char *text) {
  for (const char *p = strstr(text, "title '"); p; p = strstr(p + 1, "title '")) {
    const char *b = p + 7, *e = strchr(b, '\'');
    for (const char *q = b + 1; e && q + 2 < e; q++)
      if ((*q == 'e' || *q == 'E') && isdigit((unsigned char)q[-1]) &&
          (q[1] == '+' || q[1] == '-') && isdigit((unsigned char)q[2])) {
        fprintf(stderr, "exponent in: %.*s\n", (int)(e - b), b);
        return 1;
      }
  }
  return 0;
}

TEST_IMPL(plot_high_water_and_plain_numbers) {
  /* Fixed notation, whatever the size. */
  char b[64];
  ASSERT_STR_EQ(vl_text_num(b, sizeof(b), 1234567.0, 5, 0), "1234567");
  ASSERT_STR_EQ(vl_text_num(b, sizeof(b), 0.000012345, 3, 1), "+0.0000123");
  ASSERT_STR_EQ(vl_text_num(b, sizeof(b), -0.000012345, 2, 1), "-0.000012");
  ASSERT_STR_EQ(vl_text_num(b, sizeof(b), 9.996, 3, 0), "10");
  ASSERT_STR_EQ(vl_text_num(b, sizeof(b), 62.5, 3, 1), "+62.5");
  ASSERT_STR_EQ(vl_text_num(b, sizeof(b), 3.0, 3, 1), "+3");
  ASSERT_STR_EQ(vl_text_num(b, sizeof(b), 0, 3, 1), "+0");
  ASSERT_STR_EQ(vl_text_num(b, sizeof(b), -1e-12, 3, 1), "+0");
  ASSERT_STR_EQ(vl_text_num(b, sizeof(b), NAN, 3, 1), "-");

  /* A resident set that only rises, in steps, and its high-water mark, equal to it at every
   * sample: the resident set is drawn over the mark, which is dashed, so that both stay in
   * sight. */
  static double x[200], rss[200], hwm[200], t[200];
  for (int i = 0; i < 200; i++) {
    x[i] = 10.0 * i;
    t[i] = 1.7e12 + x[i] * 10;
    rss[i] = 500 + 6.25 * (i / 10); /* in steps, away from its straight fit */
    hwm[i] = i ? fmax(hwm[i - 1], rss[i]) : rss[i];
  }
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  vl_analysis_t an[2];
  vl_series_t in[2] = {{.name = "rss_mb.mock", .x = x, .y = rss, .t_ms = t, .n = 200},
                       {.name = "hwm_mb.mock", .x = x, .y = hwm, .t_ms = t, .n = 200, .peak = 1}};
  for (int k = 0; k < 2; k++)
    ASSERT_INT_EQ(vl_analyze_series(&an[k], &in[k], &o), 0);
  ASSERT_INT_EQ(an[0].verdict, VL_VERDICT_GROWS);
  ASSERT_INT_EQ(an[1].verdict, VL_VERDICT_PEAK);
  vl_plot_line_t lines[2] = {{"rss_mb.mock", x, rss, 200, &an[0]},
                             {"hwm_mb.mock", x, hwm, 200, &an[1]}};
  vl_plot_t p = {.lines = lines, .n_lines = 2, .y_mode = VL_PLOT_Y_ABS};
  char *text = script_of(&p, "out.png");
  const char *mark = strstr(text, "$S1 using 1:2 "), *set = strstr(text, "$S0 using 1:2 ");
  ASSERT(mark && set && mark < set);
  char *style = style_of(text, "S1", NULL);
  ASSERT(style && strstr(style, "dashtype (") != NULL);
  free(style);
  /* The key keeps the series' order: the resident set, then the mark (dashed there too). */
  const char *k0 = strstr(text, "title 'rss_mb.mock: grows"),
             *k1 = strstr(text, "title 'hwm_mb.mock: peak ");
  ASSERT(k0 && k1 && k0 < k1);
  free(text);
  char err[512] = "";
  ASSERT_INT_EQ(vl_plot_write(&p, "test_plot_high_water.png", err, sizeof(err)), 0);
  int w, h;
  uint8_t *px = decode("test_plot_high_water.png", &w, &h);
  /* The resident set's blue shows along its whole length in the panel, under the key. */
  ASSERT(near(px, w, 0, 100, w, h, 0x1f, 0x77, 0xb4) > 800);
  free(px);
  for (int k = 0; k < 2; k++)
    vl_analyze_free(&an[k]);

  /* Series far apart in size (change from their first sample) with a peak in millions and a
   * slope of millionths: every figure of the legend in plain digits. */
  static double big[200], tiny[200];
  uint64_t st = 11;
  for (int i = 0; i < 200; i++) {
    big[i] = 1234000 + 0.00625 * x[i];
    tiny[i] = 10 + 2e-8 * x[i] + 1e-7 * gauss(&st);
  }
  vl_series_t in2[2] = {{.name = "hwm_mb.big", .x = x, .y = big, .t_ms = t, .n = 200, .peak = 1},
                        {.name = "rss_mb.tiny", .x = x, .y = tiny, .t_ms = t, .n = 200}};
  for (int k = 0; k < 2; k++)
    ASSERT_INT_EQ(vl_analyze_series(&an[k], &in2[k], &o), 0);
  vl_plot_line_t far[2] = {{"hwm_mb.big", x, big, 200, &an[0]},
                           {"rss_mb.tiny", x, tiny, 200, &an[1]}};
  vl_plot_t q = {.lines = far, .n_lines = 2};
  text = script_of(&q, "out.png");
  ASSERT(strstr(text, "change from first sample") != NULL);
  ASSERT(strstr(text, "title 'hwm_mb.big: peak 1234012 MB (from 1234000)'") != NULL);
  ASSERT(strstr(text, "title 'rss_mb.tiny: flat, +0.00002 MB/1k requests; none (from 10)'") !=
         NULL);
  ASSERT(!exponent_in_titles(text));
  free(text);
  for (int k = 0; k < 2; k++)
    vl_analyze_free(&an[k]);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(plot_run_png),
      TEST_ENTRY(plot_edges),
      TEST_ENTRY(plot_legend_agrees_with_verdict),
      TEST_ENTRY(plot_marks_and_shared_axis),
      TEST_ENTRY(plot_high_water_and_plain_numbers),
      TEST_ENTRY(plot_gnuplot_missing_or_failing),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
