/* The sub-millisecond arrival timer on a real loop: never early, re-armable, stoppable, and the
 * loop closes with every handle closed. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/ticker.h"

typedef struct {
  vl_ticker_t t;
  uint64_t due[64];
  int64_t late_ns[64];
  int n, want;
} ctx_t;

static void on_tick(vl_ticker_t *t) {
  ctx_t *c = vl_container_of(t, ctx_t, t);
  uint64_t now = uv_hrtime();
  c->late_ns[c->n] = (int64_t)(now - c->due[c->n]);
  c->n++;
  if (c->n < c->want) {
    /* Uneven gaps between 0.2 and 1.5 ms, off the millisecond grid. */
    c->due[c->n] = now + 200000 + (uint64_t)(c->n * 37000 % 1300000);
    ASSERT_INT_EQ(vl_ticker_arm(t, c->due[c->n]), 0);
  } else {
    vl_ticker_close(t, NULL);
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* 64 wake-ups on a loop of their own; sets c->late_ns and returns the median lateness. */
static int64_t tick_64(ctx_t *c) {
  uv_loop_t loop;
  ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  memset(c, 0, sizeof(*c));
  c->want = 64;
  ASSERT_INT_EQ(vl_ticker_init(&loop, &c->t, on_tick), 0);
  c->due[0] = uv_hrtime() + 1000000;
  ASSERT_INT_EQ(vl_ticker_arm(&c->t, c->due[0]), 0);
  ASSERT_INT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ASSERT_INT_EQ(c->n, 64);
  ASSERT_INT_EQ(uv_loop_close(&loop), 0);
  int64_t sorted[64];
  memcpy(sorted, c->late_ns, sizeof(sorted));
  qsort(sorted, 64, sizeof(sorted[0]), cmp_i64);
  return (sorted[31] + sorted[32]) / 2;
}

TEST_IMPL(ticker_precise) {
  ctx_t c;
  int64_t best = INT64_MAX;
  for (int trial = 0; trial < 3 && best >= 200000; trial++) {
    if (trial)
      usleep(300000); /* let a burst of load pass */
    int64_t median = tick_64(&c);
    int within = 0;
    for (int i = 0; i < c.n; i++) {
      ASSERT(c.late_ns[i] >= 0); /* never before the due time */
      within += c.late_ns[i] < 1000000;
    }
    fprintf(stderr, "ticker_precise: %d of %d within 1 ms; late by %.1f us median\n", within, c.n,
            (double)median / 1e3);
    /* A loaded test machine may delay a few wake-ups; most land within a millisecond. */
    if (trial == 0)
      ASSERT(within >= 48);
    best = VL_MIN(best, median);
  }
  /* What the ticker is for: a libuv timer counts whole milliseconds of loop time, so its wake-ups
   * land a fraction of a millisecond late (the median 600 to 700 us on an idle machine, never
   * under 600 us in a hundred runs); a timerfd's land within the kernel's wake-up latency, 20 to
   * 50 us. A busy machine (a parallel build) delays some by a time slice or more, which the median
   * does not see; one that starves the whole 60 ms of a trial gets two more tries. */
  ASSERT(best < 200000);
}

static void on_never(vl_ticker_t *t) {
  ASSERT(0);
}

static void on_stop_timer(uv_timer_t *h) {
  vl_ticker_t *t = h->data;
  vl_ticker_close(t, NULL);
  uv_close((uv_handle_t *)h, NULL);
}

TEST_IMPL(ticker_stop) {
  uv_loop_t loop;
  uv_timer_t timer;
  vl_ticker_t t;
  ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  ASSERT_INT_EQ(vl_ticker_init(&loop, &t, on_never), 0);
  ASSERT_INT_EQ(vl_ticker_arm(&t, uv_hrtime() + 5000000), 0);
  vl_ticker_stop(&t);
  uv_timer_init(&loop, &timer);
  timer.data = &t;
  uv_timer_start(&timer, on_stop_timer, 20, 0);
  ASSERT_INT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ASSERT_INT_EQ(uv_loop_close(&loop), 0);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(ticker_precise),
    TEST_ENTRY(ticker_stop),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
