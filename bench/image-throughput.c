/* Unique-image throughput: how many stamped, re-encoded data URIs per second the vl_uniq producer
 * delivers on this machine, consuming each as soon as it is ready.
 *
 *   vlmload-bench-image [SECONDS [WxH [jpeg|png [CONTENT [POOL]]]]]
 *
 * Defaults: 5 seconds, 1024x1024, jpeg, photo content, 8 pool images. The threadpool gets one
 * thread per core unless UV_THREADPOOL_SIZE says otherwise; vl_uniq's default of two workers per
 * thread keeps every thread busy.
 */
#include "vlmload/common.h"
#include "vlmload/imagepool.h"
#include "vlmload/imagespec.h"
#include "vlmload/uniq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

typedef struct {
  vl_uniq_t u;
  uv_timer_t timer;
  uint64_t t0, t1;
  uint64_t taken, bytes;
  int stopping;
} bench_t;

static void on_ready(vl_uniq_t *u, void *arg) {
  bench_t *b = arg;
  vl_uniq_img_t img;
  while (!b->stopping && vl_uniq_take(u, &img) == 0) {
    b->taken++;
    b->bytes += img.bytes;
    vl_uniq_release(u, &img);
  }
}

static void on_closed(vl_uniq_t *u) {
  (void)u;
}

static void on_timer(uv_timer_t *t) {
  bench_t *b = vl_container_of(t, bench_t, timer);
  b->t1 = uv_hrtime();
  b->stopping = 1;
  vl_uniq_close(&b->u, on_closed);
  uv_close((uv_handle_t *)t, NULL);
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  const char *size = argc > 2 ? argv[2] : "1024x1024";
  const char *fmt = argc > 3 ? argv[3] : "jpeg";
  const char *content = argc > 4 ? argv[4] : "photo";
  int pool_n = argc > 5 ? atoi(argv[5]) : 8;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  char env[32];
  if (!getenv("UV_THREADPOOL_SIZE")) {
    snprintf(env, sizeof(env), "%ld", cores > 0 ? cores : 1);
    setenv("UV_THREADPOOL_SIZE", env, 1);
  }

  vl_imagespec_res_t res;
  char why[200];
  vl_imagepool_opts_t po = {.res = &res, .count = (size_t)pool_n, .seed = 1, .keep_raw = 1};
  if (vl_imagespec_res_parse(&res, size, why, sizeof(why)) != 0 ||
      vl_imagespec_format(fmt, &po.fmt) != 0 || vl_imagespec_content(content, &po.content) != 0 ||
      pool_n < 1 || seconds <= 0) {
    fprintf(stderr, "usage: %s [SECONDS [WxH [jpeg|png|mixed [CONTENT [POOL]]]]]\n", argv[0]);
    return 2;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  vl_imagepool_t pool;
  char err[256];
  int rc = vl_imagepool_build(&pool, &loop, &po, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "pool: %s\n", err);
    return 1;
  }
  size_t pool_bytes = 0;
  for (size_t i = 0; i < pool.n; i++)
    pool_bytes += pool.img[i].bytes;

  bench_t b;
  memset(&b, 0, sizeof(b));
  vl_uniq_opts_t uo = {.depth = 32, .first_stamp = 1, .on_ready = on_ready, .arg = &b};
  if ((rc = vl_uniq_init(&b.u, &loop, &pool, &uo)) != 0) {
    fprintf(stderr, "uniq: %s\n", vl_strerror(rc));
    return 1;
  }
  int workers = b.u.o.workers;
  uv_timer_init(&loop, &b.timer);
  uv_timer_start(&b.timer, on_timer, (uint64_t)(seconds * 1000), 0);
  b.t0 = uv_hrtime();
  uv_rusage_t ru0, ru1;
  uv_getrusage(&ru0);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_getrusage(&ru1);
  double wall = (double)(b.t1 - b.t0) / 1e9;
  double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec -
                        ru0.ru_stime.tv_sec) +
               (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
                        ru0.ru_stime.tv_usec) /
                   1e6;
  printf("unique %s %s %s images: %.0f/s over %.1f s (%llu images, %.1f KB average, %.1f MB/s of "
         "image bytes), %ld cores, %s threads, %d workers, %.2f CPU-ms per image; pool %zu images, "
         "%.1f KB "
         "average\n",
         size, fmt, content, (double)b.taken / wall, wall, (unsigned long long)b.taken,
         b.taken ? (double)b.bytes / (double)b.taken / 1e3 : 0, (double)b.bytes / wall / 1e6, cores,
         getenv("UV_THREADPOOL_SIZE"), workers, b.taken ? cpu * 1e3 / (double)b.taken : 0, pool.n,
         (double)pool_bytes / (double)pool.n / 1e3);
  int closed = uv_loop_close(&loop);
  vl_imagepool_free(&pool);
  return closed == 0 ? 0 : 1;
}
