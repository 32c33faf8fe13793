/* Unique images through a real libuv loop: every image handed out decodes to different pixels,
 * buffers are reused without growing, late takes fall back to pool images, and closing waits for
 * the threadpool and leaves a loop that closes; repeats share a window image's buffer. */
#include "task.h"
#include "vlmload/base64.h"
#include "../src/images/codec.h"
#include "vlmload/common.h"
#include "vlmload/imagepool.h"
#include "vlmload/uniq.h"

static void pool_build(vl_imagepool_t *pool, const char *res_text, vl_image_fmt_t fmt, size_t n,
                       int keep_raw) {
  vl_imagespec_res_t res;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&res, res_text, NULL, 0), 0);
  vl_imagepool_opts_t o = {
      .res = &res, .fmt = fmt, .count = n, .seed = 11, .keep_raw = keep_raw, .quality = 75};
  char err[200];
  ASSERT_INT_EQ(vl_imagepool_build(pool, NULL, &o, err, sizeof(err)), 0);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static size_t count_distinct(uint64_t *h, size_t n) {
  qsort(h, n, sizeof(*h), cmp_u64);
  size_t d = n ? 1 : 0;
  for (size_t i = 1; i < n; i++)
    d += h[i] != h[i - 1];
  return d;
}

/* A consumer that behaves like requests: takes images as they become ready, keeps up to `hold`
 * of them "in flight", and releases the oldest half on each timer tick after decoding them. */
typedef struct {
  vl_uniq_t u;
  const vl_imagepool_t *pool;
  uv_timer_t tick;
  vl_uniq_img_t held[64];
  int n_held, hold;
  size_t want, got;
  uint64_t *pixel_hash, *stamp;
  vl_codec_t codec;
  size_t bytes_at_start;
  int closed;
} consumer_t;

static void check_and_record(consumer_t *c, const vl_uniq_img_t *img) {
  const vl_imagepool_image_t *pi = &c->pool->img[img->pool_index];
  ASSERT_UINT_EQ(strlen(img->uri), img->uri_len);
  const char *comma = strchr(img->uri, ',');
  size_t k = (size_t)(comma + 1 - img->uri);
  ASSERT_MEM_EQ(img->uri, pi->uri, k); /* same format, same prefix */
  uint8_t *bin = malloc((img->uri_len - k) / 4 * 3 + 1);
  long n = vl_base64_decode(bin, img->uri + k, img->uri_len - k);
  ASSERT(n > 0);
  ASSERT_UINT_EQ((size_t)n, img->bytes);
  ASSERT_INT_EQ(vl_codec_detect(bin, (size_t)n), img->fmt);
  vl_raw_t d = {0};
  ASSERT_INT_EQ(vl_codec_decode(&c->codec, bin, (size_t)n, 0, &d), 0);
  ASSERT_INT_EQ(d.w, pi->w);
  ASSERT_INT_EQ(d.h, pi->h);
  ASSERT_INT_EQ(d.channels, pi->channels);
  ASSERT(img->w == pi->w && img->h == pi->h && img->channels == pi->channels);
  c->pixel_hash[c->got] = vl_image_hash(&d);
  c->stamp[c->got] = img->stamp;
  c->got++;
  vl_image_raw_free(&d);
  free(bin);
}

static void on_closed(vl_uniq_t *u) {
  consumer_t *c = vl_container_of(u, consumer_t, u);
  c->closed++;
}

static void release_oldest(consumer_t *c, int n) {
  for (int i = 0; i < n; i++) {
    check_and_record(c, &c->held[i]);
    vl_uniq_release(&c->u, &c->held[i]);
  }
  memmove(c->held, c->held + n, (size_t)(c->n_held - n) * sizeof(c->held[0]));
  c->n_held -= n;
}

static void on_ready(vl_uniq_t *u, void *arg) {
  consumer_t *c = arg;
  while (c->n_held < c->hold && c->got + (size_t)c->n_held < c->want) {
    vl_uniq_img_t img;
    if (vl_uniq_take(u, &img) != 0)
      return;
    c->held[c->n_held++] = img;
  }
  (void)u;
}

static void on_tick(uv_timer_t *t) {
  consumer_t *c = vl_container_of(t, consumer_t, tick);
  if (c->got + (size_t)c->n_held >= c->want) {
    release_oldest(c, c->n_held);
    /* Buffers were all allocated at init: reuse did not grow anything. */
    ASSERT_UINT_EQ(c->u.bytes, c->bytes_at_start);
    ASSERT_UINT_EQ(c->u.grown, 0);
    ASSERT_INT_EQ(c->u.out, 0);
    uv_timer_stop(t);
    uv_close((uv_handle_t *)t, NULL);
    vl_uniq_close(&c->u, on_closed);
    return;
  }
  release_oldest(c, (c->n_held + 1) / 2);
  on_ready(&c->u, c);
}

static void run_consumer(const vl_imagepool_t *pool, size_t want, int hold, int depth) {
  uv_loop_t loop;
  ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  consumer_t *c = calloc(1, sizeof(*c));
  c->pool = pool;
  c->want = want;
  c->hold = hold;
  c->pixel_hash = calloc(want, sizeof(uint64_t));
  c->stamp = calloc(want, sizeof(uint64_t));
  vl_uniq_opts_t o = {.depth = depth,
                      .capacity = depth + hold + 8,
                      .first_stamp = 1000,
                      .on_ready = on_ready,
                      .arg = c};
  ASSERT_INT_EQ(vl_uniq_init(&c->u, &loop, pool, &o), 0);
  c->bytes_at_start = c->u.bytes;
  ASSERT(c->u.bytes > 0);
  ASSERT_INT_EQ(uv_timer_init(&loop, &c->tick), 0);
  ASSERT_INT_EQ(uv_timer_start(&c->tick, on_tick, 1, 1), 0);
  ASSERT_INT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ASSERT_INT_EQ(c->closed, 1);
  ASSERT_UINT_EQ(c->got, want);
  ASSERT_UINT_EQ(c->u.taken, want);
  ASSERT_UINT_EQ(c->u.failed, 0);
  ASSERT(c->u.produced >= want);
  ASSERT_UINT_EQ(c->u.bytes, 0); /* freed */
  /* Every image distinct, by stamp and by decoded pixels; stamps from first_stamp on. */
  ASSERT_UINT_EQ(count_distinct(c->stamp, want), want);
  ASSERT_UINT_EQ(c->stamp[0], 1000);
  ASSERT_UINT_EQ(count_distinct(c->pixel_hash, want), want);
  ASSERT_INT_EQ(uv_loop_close(&loop), 0);
  vl_codec_free(&c->codec);
  free(c->pixel_hash);
  free(c->stamp);
  free(c);
}

TEST_IMPL(uniq_distinct_mixed) {
  vl_imagepool_t pool;
  pool_build(&pool, "40x30-160x120", VL_IMG_MIXED, 12, 1);
  run_consumer(&pool, 2000, 24, 8);
  vl_imagepool_free(&pool);
}

TEST_IMPL(uniq_distinct_jpeg_224) {
  vl_imagepool_t pool;
  pool_build(&pool, "224x224", VL_IMG_JPEG, 3, 1);
  run_consumer(&pool, 1000, 32, 16);
  vl_imagepool_free(&pool);
}

/* Without kept pixels, workers decode the pool image's bytes instead. */
TEST_IMPL(uniq_without_raw) {
  vl_imagepool_t pool;
  pool_build(&pool, "64x64-96x96", VL_IMG_MIXED, 6, 0);
  ASSERT(pool.img[0].raw.px == NULL);
  run_consumer(&pool, 300, 8, 4);
  vl_imagepool_free(&pool);
}

static int closes;
static void count_close(vl_uniq_t *u) {
  (void)u;
  closes++;
}

static void run_until(uv_loop_t *loop, vl_uniq_t *u, int ready) {
  for (int i = 0; i < 100000 && u->ready < ready; i++)
    uv_run(loop, UV_RUN_ONCE);
  ASSERT(u->ready >= ready);
}

TEST_IMPL(uniq_late_and_capacity) {
  vl_imagepool_t pool;
  pool_build(&pool, "32x32", VL_IMG_PNG, 3, 1);
  uv_loop_t loop;
  ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  vl_uniq_t u;
  vl_uniq_opts_t o = {.depth = 2, .capacity = 2, .workers = 1};
  ASSERT_INT_EQ(vl_uniq_init(&u, &loop, &pool, &o), 0);
  /* Nothing is ready yet: a pool image, counted late; its release is a no-op. */
  vl_uniq_img_t img, a, b;
  ASSERT_INT_EQ(vl_uniq_take(&u, &img), VL_EAGAIN);
  ASSERT_INT_EQ(img.slot, -1);
  ASSERT(img.uri == pool.img[0].uri);
  ASSERT_UINT_EQ(u.late, 1);
  vl_uniq_release(&u, &img);
  run_until(&loop, &u, 2);
  ASSERT_INT_EQ(vl_uniq_take(&u, &a), 0);
  ASSERT_INT_EQ(vl_uniq_take(&u, &b), 0);
  ASSERT(a.stamp != b.stamp && a.uri != b.uri);
  ASSERT_INT_EQ(u.out, 2);
  /* Both buffers are out: nothing can be made, so takes are late. */
  uv_run(&loop, UV_RUN_NOWAIT);
  ASSERT_INT_EQ(u.working, 0);
  ASSERT_INT_EQ(vl_uniq_take(&u, &img), VL_EAGAIN);
  ASSERT(img.uri == pool.img[1].uri); /* the fallback goes round the pool too */
  ASSERT_UINT_EQ(u.late, 2);
  /* A release lets production resume. */
  vl_uniq_release(&u, &a);
  ASSERT_INT_EQ(u.working, 1);
  run_until(&loop, &u, 1);
  ASSERT_INT_EQ(vl_uniq_take(&u, &a), 0);
  ASSERT(a.stamp > b.stamp);
  ASSERT_UINT_EQ(u.taken, 3);
  vl_uniq_release(&u, &a);
  vl_uniq_release(&u, &b);
  closes = 0;
  vl_uniq_close(&u, count_close);
  ASSERT_INT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ASSERT_INT_EQ(closes, 1);
  ASSERT_INT_EQ(uv_loop_close(&loop), 0);
  vl_imagepool_free(&pool);
}

/* Closing with large encodes queued and running: queued ones are cancelled, running ones are
 * waited for, and the loop is left with nothing active. */
TEST_IMPL(uniq_close_in_flight) {
  vl_imagepool_t pool;
  pool_build(&pool, "1024x1024", VL_IMG_PNG, 2, 1);
  uv_loop_t loop;
  ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  vl_uniq_t u;
  vl_uniq_opts_t o = {.depth = 16, .workers = 8};
  ASSERT_INT_EQ(vl_uniq_init(&u, &loop, &pool, &o), 0);
  ASSERT_INT_EQ(u.working, 8);
  closes = 0;
  vl_uniq_close(&u, count_close);
  ASSERT_INT_EQ(closes, 0); /* encodes were running */
  ASSERT_INT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ASSERT_INT_EQ(closes, 1);
  ASSERT_INT_EQ(u.working, 0);
  ASSERT_INT_EQ(uv_loop_close(&loop), 0);
  vl_imagepool_free(&pool);
}

/* The repeat window: a repeat is a window image's own buffer, kept by reference. An image the
 * window has moved past stays valid while a request still holds it, and its buffer is made again
 * only once the last holder lets go. */
TEST_IMPL(uniq_repeat_window) {
  vl_imagepool_t pool;
  pool_build(&pool, "32x32", VL_IMG_PNG, 3, 1);
  uv_loop_t loop;
  ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  vl_uniq_t u;
  vl_uniq_opts_t o = {.depth = 2, .capacity = 5, .workers = 1, .keep = 2};
  ASSERT_INT_EQ(vl_uniq_init(&u, &loop, &pool, &o), 0);
  vl_uniq_img_t a, b, c, r1, r2, r3;
  ASSERT_INT_EQ(vl_uniq_repeat(&u, 0.5, &r1), VL_EAGAIN); /* nothing sent yet */
  run_until(&loop, &u, 2);
  ASSERT_INT_EQ(vl_uniq_take(&u, &a), 0);
  char *saved = malloc(a.uri_len + 1);
  memcpy(saved, a.uri, a.uri_len + 1);
  vl_uniq_release(&u, &a); /* the window still holds it */
  ASSERT_INT_EQ(u.kept, 1);
  ASSERT_INT_EQ(vl_uniq_repeat(&u, 0.9, &r1), 0);
  ASSERT(r1.uri == a.uri && r1.stamp == a.stamp);
  ASSERT_UINT_EQ(u.repeated, 1);
  ASSERT_INT_EQ(u.out, 1);
  run_until(&loop, &u, 2);
  ASSERT_INT_EQ(vl_uniq_take(&u, &b), 0);
  run_until(&loop, &u, 2);
  ASSERT_INT_EQ(vl_uniq_take(&u, &c), 0);
  /* The window is [b, c] now: picks go oldest first. */
  ASSERT_INT_EQ(u.kept, 2);
  ASSERT_INT_EQ(vl_uniq_repeat(&u, 0.0, &r2), 0);
  ASSERT(r2.stamp == b.stamp);
  ASSERT_INT_EQ(vl_uniq_repeat(&u, 0.99, &r3), 0);
  ASSERT(r3.stamp == c.stamp && r3.uri == c.uri);
  /* a left the window, but r1 still holds it: production (one buffer free) must not touch it. */
  for (int i = 0; i < 1000 && u.working > 0; i++)
    uv_run(&loop, UV_RUN_ONCE);
  ASSERT_MEM_EQ(r1.uri, saved, a.uri_len + 1);
  ASSERT_INT_EQ(u.n_free, 0);
  vl_uniq_release(&u, &r1); /* the last holder: a's buffer is free again */
  ASSERT_INT_EQ(u.n_free + u.working, 1);
  vl_uniq_release(&u, &b);
  vl_uniq_release(&u, &r2);
  ASSERT_INT_EQ(u.n_free + u.working, 1); /* the window holds b and c */
  vl_uniq_release(&u, &c);
  vl_uniq_release(&u, &r3);
  ASSERT_INT_EQ(u.out, 0);
  ASSERT_UINT_EQ(u.repeated, 3);
  ASSERT_UINT_EQ(u.taken, 3);
  free(saved);
  closes = 0;
  vl_uniq_close(&u, count_close);
  ASSERT_INT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ASSERT_INT_EQ(closes, 1);
  ASSERT_INT_EQ(uv_loop_close(&loop), 0);
  vl_imagepool_free(&pool);
}

TEST_IMPL(uniq_bad_options) {
  vl_imagepool_t pool = {0};
  uv_loop_t loop;
  ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  vl_uniq_t u;
  ASSERT_INT_EQ(vl_uniq_init(&u, &loop, &pool, NULL), VL_EINVAL); /* empty pool */
  pool_build(&pool, "8x8", VL_IMG_JPEG, 1, 1);
  vl_uniq_opts_t o = {.depth = 4, .capacity = 2};
  ASSERT_INT_EQ(vl_uniq_init(&u, &loop, &pool, &o), VL_EINVAL);
  o = (vl_uniq_opts_t){.quality = 101};
  ASSERT_INT_EQ(vl_uniq_init(&u, &loop, &pool, &o), VL_EINVAL);
  ASSERT_INT_EQ(uv_loop_close(&loop), 0);
  vl_imagepool_free(&pool);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(uniq_distinct_mixed),  TEST_ENTRY(uniq_distinct_jpeg_224),
      TEST_ENTRY(uniq_without_raw),     TEST_ENTRY(uniq_late_and_capacity),
      TEST_ENTRY(uniq_close_in_flight), TEST_ENTRY(uniq_bad_options),
      TEST_ENTRY(uniq_repeat_window),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
