/* Plots: a rendered run decodes with libpng at the expected size, with the series' colours in the
 * plot area, the title and labels drawn, and sizes and paths checked. The PNGs are left in the
 * working directory (test_plot_*.png) to be looked at. */
#include "task.h"
#include "vlmload/analyze.h"
#include "vlmload/common.h"
#include "vlmload/plot.h"

#include <png.h>

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

/* Pixels near a colour or its darker shade (the fit lines), within a small distance. */
static size_t near(const uint8_t *px, int w, int x0, int y0, int x1, int y1, int r, int g, int b) {
  size_t n = 0;
  for (int y = y0; y < y1; y++) {
    for (int x = x0; x < x1; x++) {
      const uint8_t *p = px + ((size_t)y * (size_t)w + (size_t)x) * 3;
      for (double k = 0.7; k <= 1.0; k += 0.3) {
        int dr = p[0] - (int)(r * k), dg = p[1] - (int)(g * k), db = p[2] - (int)(b * k);
        if (dr * dr + dg * dg + db * db < 30 * 30) {
          n++;
          break;
        }
      }
    }
  }
  return n;
}

static size_t count(const uint8_t *px, int w, int x0, int y0, int x1, int y1, int r, int g, int b,
                    int exact) {
  size_t n = 0;
  for (int y = y0; y < y1; y++) {
    for (int x = x0; x < x1; x++) {
      const uint8_t *p = px + ((size_t)y * (size_t)w + (size_t)x) * 3;
      int same = p[0] == r && p[1] == g && p[2] == b;
      n += exact ? same : !same;
    }
  }
  return n;
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
                 .lat_t = r->secs,
                 .lat_p50 = r->p50,
                 .lat_p99 = r->p99,
                 .n_lat = N};
  char err[256];
  ASSERT_INT_EQ(vl_plot_write(&p, "test_plot_memory.png", err, sizeof(err)), 0);
  int w, h;
  uint8_t *px = decode("test_plot_memory.png", &w, &h);
  ASSERT_INT_EQ(w, 1200);
  ASSERT_INT_EQ(h, 700);
  /* The main plot area (inside the frame) is mostly drawn on; each series' colour appears. */
  size_t drawn = count(px, w, 110, 150, 1160, 440, 255, 255, 255, 0);
  ASSERT(drawn > 20000);
  ASSERT(near(px, w, 100, 140, 1176, 450, 31, 119, 180) > 1000);
  ASSERT(near(px, w, 100, 140, 1176, 450, 255, 127, 14) > 1000);
  ASSERT(near(px, w, 100, 140, 1176, 450, 44, 160, 44) > 1000);
  /* Legend swatches above the panel. */
  ASSERT(count(px, w, 100, 40, 130, 140, 44, 160, 44, 1) > 20);
  /* The title, the tick labels left of the axis, the latency panel. */
  ASSERT(count(px, w, 200, 0, 1000, 36, 34, 34, 34, 1) > 300);
  ASSERT(count(px, w, 0, 150, 95, 440, 34, 34, 34, 1) > 300);
  ASSERT(near(px, w, 110, 500, 1160, 640, 214, 39, 40) > 300);
  /* The frame around nothing: the corners of the canvas stay white. */
  ASSERT_INT_EQ(count(px, w, 0, h - 4, 4, h, 255, 255, 255, 0), 0);
  free(px);

  /* A lone series, absolute, no analysis, no latency panel: still a full plot. */
  vl_plot_t q = {.lines = lines + 2, .n_lines = 1, .width = 800, .height = 480};
  ASSERT_INT_EQ(vl_plot_write(&q, "test_plot_single.png", err, sizeof(err)), 0);
  px = decode("test_plot_single.png", &w, &h);
  ASSERT_INT_EQ(w, 800);
  ASSERT_INT_EQ(h, 480);
  ASSERT(near(px, w, 0, 0, w, h, 31, 119, 180) > 300); /* first line: first colour */
  free(px);
  free_run(r);
  free(r);
}

TEST_IMPL(plot_render_buffer) {
  run_t *r = malloc(sizeof(*r));
  make_run(r);
  vl_plot_line_t lines[2] = {{"a", r->x, r->cache, N, NULL}, {"b", r->x, r->gpu, N, NULL}};
  vl_plot_t p = {.lines = lines, .n_lines = 2, .y_mode = VL_PLOT_Y_DELTA};
  uint8_t *px;
  int w, h;
  ASSERT_INT_EQ(vl_plot_render(&p, &px, &w, &h), 0);
  ASSERT_INT_EQ(w, VL_PLOT_WIDTH);
  ASSERT_INT_EQ(h, VL_PLOT_HEIGHT);
  ASSERT(count(px, w, 0, 0, w, h, 31, 119, 180, 1) > 300);
  free(px);

  /* Nothing to draw is still a plot (empty axes); missing values break lines. */
  vl_plot_t e = {0};
  ASSERT_INT_EQ(vl_plot_render(&e, &px, &w, &h), 0);
  free(px);
  double xs[] = {0, 1, 2, 3, 4}, ys[] = {1, NAN, 3, NAN, 5};
  vl_plot_line_t holes = {"holes", xs, ys, 5, NULL};
  vl_plot_t g = {.lines = &holes, .n_lines = 1};
  ASSERT_INT_EQ(vl_plot_render(&g, &px, &w, &h), 0);
  ASSERT(count(px, w, 0, 0, w, h, 31, 119, 180, 1) > 20);
  free(px);

  vl_plot_t bad = {.width = 100, .height = 700};
  ASSERT_INT_EQ(vl_plot_render(&bad, &px, &w, &h), VL_EINVAL);
  char err[256];
  ASSERT_INT_EQ(vl_plot_write(&bad, "never.png", err, sizeof(err)), VL_EINVAL);
  ASSERT_INT_EQ(access("never.png", F_OK), -1);
  ASSERT_INT_EQ(vl_plot_write(&p, "/nonexistent-dir/x.png", err, sizeof(err)), VL_EIO);
  ASSERT(strstr(err, "/nonexistent-dir/x.png") == err);
  free_run(r);
  free(r);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(plot_run_png),
      TEST_ENTRY(plot_render_buffer),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
