/* The mechanism of a series on synthetic runs whose truth is known: a one-time step and what came
 * just before it, a leak a flush does not return, a cache it does, a cache held at its cap, one
 * still growing towards it, a warm-up, and where in a process's anatomy the change is. */
#include "task.h"
#include "vlmload/analyze.h"
#include "vlmload/common.h"

#include <cjson/cJSON.h>

/* A run of n samples, one every `step` requests at 100 requests per second from t 1.7e12 ms, with
 * images sent from request `first_image` on (one per request). */
typedef struct {
  double x[2048], y[2048], t[2048], img[2048];
  size_t n;
  vl_flush_event_t fl[64];
  size_t nfl;
} run_t;

static uint64_t seed_state = 7;
static double noise(double sigma) {
  double u = ((double)(task_rand(&seed_state) >> 11) + 0.5) / 9007199254740992.0;
  return sigma * (2 * u - 1);
}

/* base, plus `jump` MB from the first image on, plus `leak` MB per 1000 requests, plus a cache of
 * `fill` MB per request since the last flush (a flush every `every` requests, 0: none) held at most
 * at `cap` MB (0: no cap), plus uniform noise of +/- sigma. */
static void make(run_t *r, size_t n, double step, double base, double first_image, double jump,
                 double leak, double fill, double every, double cap, double sigma) {
  memset(r, 0, sizeof(*r));
  double last_flush = 0;
  for (size_t i = 0; i < n; i++) {
    double x = (double)i * step;
    if (every > 0 && x > 0 && fmod(x, every) == 0) {
      last_flush = x;
      r->fl[r->nfl++] = (vl_flush_event_t){1.7e12 + x * 10 - 5, x, NAN};
    }
    double cache = fill * (x - last_flush);
    if (cap > 0)
      cache = fmin(cache, cap);
    r->x[i] = x;
    r->t[i] = 1.7e12 + x * 10;
    r->img[i] = x >= first_image ? x - first_image + 1 : 0;
    r->y[i] = base + (x >= first_image ? jump : 0) + leak * x / 1000 + cache + noise(sigma);
  }
  r->n = n;
}

static vl_series_t input(const run_t *r, const char *name) {
  vl_series_t in = {.name = name,
                    .x = r->x,
                    .y = r->y,
                    .t_ms = r->t,
                    .n = r->n,
                    .flushes = r->fl,
                    .n_flushes = r->nfl,
                    .t0_ms = 1.7e12,
                    .images = r->img};
  return in;
}

static void analyse(vl_analysis_t *a, const vl_series_t *in) {
  vl_analyze_opts_t o;
  vl_analyze_opts_init(&o);
  ASSERT_INT_EQ(vl_analyze_series(a, in, &o), 0);
}

TEST_IMPL(step_at_first_image_then_flat) {
  run_t *r = malloc(sizeof(*r));
  /* 640 MB at request 130, in the middle of a 400-request warm-up. */
  make(r, 200, 10, 900, 130, 640, 0, 0, 0, 0, 2);
  vl_series_t in = input(r, "rss_mb.server");
  in.warmup_x = 400;
  vl_analysis_t a;
  analyse(&a, &in);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_FLAT);
  ASSERT_UINT_EQ(a.n_jumps, 1);
  ASSERT_NEAR(a.jumps[0].size, 640, 5);
  ASSERT(a.jumps[0].x >= 120 && a.jumps[0].x <= 130);
  ASSERT_STR_EQ(a.jumps[0].after, "the first image request");
  ASSERT_INT_EQ(a.mechanism, VL_MECH_STEP);
  cJSON *j = vl_analyze_json(&a);
  ASSERT_STR_EQ(cJSON_GetObjectItem(j, "mechanism")->valuestring, "step");
  cJSON *j0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "jumps"), 0);
  ASSERT_NEAR(cJSON_GetObjectItem(j0, "mb")->valuedouble, 640, 5);
  ASSERT_NEAR(cJSON_GetObjectItem(j0, "requests")->valuedouble, a.jumps[0].x, 0);
  ASSERT_NEAR(cJSON_GetObjectItem(j0, "time_s")->valuedouble, a.jumps[0].x / 100, 1e-6);
  ASSERT_STR_EQ(cJSON_GetObjectItem(j0, "after")->valuestring, "the first image request");
  cJSON_Delete(j);
  vl_analyze_free(&a);
  free(r);
}

TEST_IMPL(step_then_leak_is_not_a_step) {
  run_t *r = malloc(sizeof(*r));
  /* The step, then 60 MB per 1000 requests: the rest grows. */
  make(r, 200, 10, 900, 500, 300, 60, 0, 0, 0, 0.5);
  vl_series_t in = input(r, "rss_mb.server");
  vl_analysis_t a;
  analyse(&a, &in);
  ASSERT_UINT_EQ(a.n_jumps, 1);
  ASSERT_NEAR(a.jumps[0].size, 300, 15);
  ASSERT_NEAR(a.rest.slope, 60, 6);
  ASSERT(a.mechanism != VL_MECH_STEP);
  vl_analyze_free(&a);
  free(r);
}

TEST_IMPL(leak_has_no_jumps) {
  /* 100 MB per 1000 requests sampled every 100 requests: 10 MB a sample, more than the 8 MB that
   * counts, but never flat around it. */
  run_t *r = malloc(sizeof(*r));
  make(r, 100, 100, 900, 0, 0, 100, 0, 0, 0, 0.5);
  vl_series_t in = input(r, "rss_mb.server");
  vl_analysis_t a;
  analyse(&a, &in);
  ASSERT_UINT_EQ(a.n_jumps, 0);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_GROWS);
  /* No flush and no repeats: a cache that fills looks the same. */
  ASSERT_INT_EQ(a.mechanism, VL_MECH_UNKNOWN);
  ASSERT(a.n_experiments >= 2);
  ASSERT(strstr(a.experiments[0], "--flush-every"));
  ASSERT(strstr(a.experiments[1], "--image-reuse 1"));
  vl_analyze_free(&a);
  free(r);
}

TEST_IMPL(leak_under_flushes_and_cache) {
  run_t *r = malloc(sizeof(*r));
  make(r, 400, 25, 2000, 0, 0, 30, 0, 1000, 0, 0.5);
  vl_series_t in = input(r, "rss_mb.server");
  vl_analysis_t a;
  analyse(&a, &in);
  ASSERT_INT_EQ(a.mechanism, VL_MECH_LEAK);
  ASSERT(strstr(a.evidence[0], "a flush does not return it"));
  vl_analyze_free(&a);
  make(r, 400, 25, 2000, 0, 0, 0, 0.05, 1000, 0, 0.5);
  in = input(r, "rss_mb.server");
  analyse(&a, &in);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_SAWTOOTH);
  ASSERT_INT_EQ(a.mechanism, VL_MECH_CACHE);
  ASSERT_UINT_EQ(a.n_jumps, 0);
  vl_analyze_free(&a);
  free(r);
}

TEST_IMPL(capped_cache_and_warmup) {
  run_t *r = malloc(sizeof(*r));
  /* 0.5 MB per request up to 256 MB: full at request 512 of 2000. */
  make(r, 200, 10, 1000, 0, 0, 0, 0.5, 0, 256, 0.5);
  vl_analyze_caps_t caps = {0};
  const char *why;
  ASSERT_INT_EQ(vl_analyze_caps_parse(&caps, "server=256MiB", &why), 0);
  ASSERT_NEAR(caps.cap[0].bytes, 256.0 * 1024 * 1024, 0);
  vl_series_t in = input(r, "rss_mb.server");
  in.caps = caps.cap;
  in.n_caps = caps.n;
  vl_analysis_t a;
  analyse(&a, &in);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_LEVELS_OFF);
  ASSERT_INT_EQ(a.cap_near, 1);
  ASSERT_INT_EQ(a.mechanism, VL_MECH_CAPPED);
  ASSERT_STR_EQ(a.cap_name, "--expect-cap");
  vl_analyze_free(&a);
  /* The same rise with no cap known: it fills and holds, a warm-up, and says how to tell. */
  in.caps = NULL;
  in.n_caps = 0;
  analyse(&a, &in);
  ASSERT_INT_EQ(a.mechanism, VL_MECH_WARMUP);
  ASSERT(a.n_experiments >= 1 && strstr(a.experiments[0], "--expect-cap rss_mb.server=SIZE"));
  vl_analyze_free(&a);
  /* A cap of another process does not apply. */
  vl_analyze_caps_add(&caps, "--cache-ram", "other", 256.0 * 1024 * 1024);
  in.caps = caps.cap + 1;
  in.n_caps = 1;
  analyse(&a, &in);
  ASSERT(a.cap_name == NULL);
  vl_analyze_free(&a);
  vl_analyze_caps_free(&caps);
  free(r);
}

TEST_IMPL(growing_towards_a_cap_says_when) {
  run_t *r = malloc(sizeof(*r));
  /* 17 MB per request for 200 requests from 1000 MB; a cap of 8192 MiB is 8192 - 3400 MB away:
   * about 282 more requests, the process then at 9192 MB. */
  make(r, 200, 1, 1000, 0, 0, 17000, 0, 0, 0, 0.5);
  vl_analyze_caps_t caps = {0};
  vl_analyze_caps_add(&caps, "--cache-ram", NULL, 8192.0 * 1024 * 1024);
  vl_series_t in = input(r, "rss_mb.llama");
  in.caps = caps.cap;
  in.n_caps = caps.n;
  vl_analysis_t a;
  analyse(&a, &in);
  ASSERT_INT_EQ(a.verdict, VL_VERDICT_GROWS);
  ASSERT_STR_EQ(a.cap_name, "--cache-ram");
  double held = a.y_last - a.y_low;
  ASSERT_NEAR(a.cap_more_x, (8192 - held) / 17, 2);
  ASSERT_NEAR(a.cap_then, 1000 + 8192, 2);
  int said = 0;
  for (size_t i = 0; i < a.n_evidence; i++)
    said |= strstr(a.evidence[i], "reaches the cap --cache-ram") != NULL;
  ASSERT(said);
  vl_analyze_free(&a);
  vl_analyze_caps_free(&caps);
  const char *why;
  ASSERT_INT_EQ(vl_analyze_caps_parse(&caps, "server", &why), VL_EINVAL);
  ASSERT_INT_EQ(vl_analyze_caps_parse(&caps, "server=lots", &why), VL_EINVAL);
  ASSERT_INT_EQ(vl_analyze_caps_parse(&caps, "=8GiB", &why), VL_EINVAL);
  ASSERT_UINT_EQ(caps.n, 0);
  free(r);
}

TEST_IMPL(where_is_the_part_that_moved) {
  /* A process whose heap leaks and whose shared memory is steady: rss and anon move with the heap;
   * the finer kind, heap, carries it. */
  run_t *rss = malloc(sizeof(*rss)), *heap = malloc(sizeof(*heap)), *anon = malloc(sizeof(*anon));
  run_t *shm = malloc(sizeof(*shm));
  make(rss, 400, 25, 2000, 0, 0, 30, 0, 1000, 0, 0.5);
  make(heap, 400, 25, 100, 0, 0, 30, 0, 1000, 0, 0.5);
  make(anon, 400, 25, 300, 0, 0, 30, 0, 1000, 0, 0.5);
  make(shm, 400, 25, 50, 0, 0, 0, 0, 1000, 0, 0.5);
  vl_series_t in[4] = {input(rss, "rss_mb.server"), input(heap, "heap_mb.server"),
                       input(anon, "anon_mb.server"), input(shm, "shmem_mb.server")};
  vl_analysis_t a[4];
  vl_analysis_t *all[4];
  for (int i = 0; i < 4; i++) {
    analyse(&a[i], &in[i]);
    all[i] = &a[i];
  }
  vl_analyze_mechanisms(all, 4);
  ASSERT_INT_EQ(a[0].mechanism, VL_MECH_LEAK);
  ASSERT_STR_EQ(a[0].where_kind, "heap");
  ASSERT_STR_EQ(a[0].where_process, "server");
  ASSERT_STR_EQ(a[0].where_series, "heap_mb.server");
  ASSERT_INT_EQ(a[3].mechanism, VL_MECH_NONE);
  for (int i = 0; i < 4; i++)
    vl_analyze_free(&a[i]);
  /* The same growth in shared memory instead: shmem carries it. */
  make(heap, 400, 25, 100, 0, 0, 0, 0, 1000, 0, 0.5);
  make(anon, 400, 25, 300, 0, 0, 0, 0, 1000, 0, 0.5);
  make(shm, 400, 25, 50, 0, 0, 30, 0, 1000, 0, 0.5);
  for (int i = 0; i < 4; i++)
    analyse(&a[i], &in[i]);
  vl_analyze_mechanisms(all, 4);
  ASSERT_INT_EQ(a[0].mechanism, VL_MECH_LEAK);
  ASSERT_STR_EQ(a[0].where_kind, "shmem");
  for (int i = 0; i < 4; i++)
    vl_analyze_free(&a[i]);
  free(rss);
  free(heap);
  free(anon);
  free(shm);
}

TEST_IMPL(flush_just_before_a_jump) {
  run_t *r = malloc(sizeof(*r));
  /* Text only, a flush at request 1000, and 200 MB more from then on. */
  make(r, 200, 10, 900, 1e9, 0, 0, 0, 0, 0, 1);
  r->fl[r->nfl++] = (vl_flush_event_t){1.7e12 + 1000 * 10 - 5, 1000, NAN};
  for (size_t i = 0; i < r->n; i++)
    r->y[i] += r->x[i] >= 1000 ? 200 : 0;
  vl_series_t in = input(r, "rss_mb.server");
  vl_analysis_t a;
  analyse(&a, &in);
  ASSERT_UINT_EQ(a.n_jumps, 1);
  ASSERT_STR_EQ(a.jumps[0].after, "the first flush");
  vl_analyze_free(&a);
  free(r);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(step_at_first_image_then_flat),
      TEST_ENTRY(step_then_leak_is_not_a_step),
      TEST_ENTRY(leak_has_no_jumps),
      TEST_ENTRY(leak_under_flushes_and_cache),
      TEST_ENTRY(capped_cache_and_warmup),
      TEST_ENTRY(growing_towards_a_cap_says_when),
      TEST_ENTRY(where_is_the_part_that_moved),
      TEST_ENTRY(flush_just_before_a_jump),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
