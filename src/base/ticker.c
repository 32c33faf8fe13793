#include "vlmload/ticker.h"
#include "vlmload/common.h"

#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void on_ready(uv_poll_t *h, int status, int events) {
  vl_ticker_t *t = vl_container_of(h, vl_ticker_t, poll);
  uint64_t expirations;
  /* Drain the expiration count; EAGAIN means a re-arm raced the wake-up and nothing is due. */
  if (read(t->fd, &expirations, sizeof(expirations)) != (ssize_t)sizeof(expirations))
    return;
  t->armed = 0;
  t->cb(t);
}

int vl_ticker_init(uv_loop_t *loop, vl_ticker_t *t, vl_ticker_cb cb) {
  t->cb = cb;
  t->armed = 0;
  t->close_cb = NULL;
  t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (t->fd < 0)
    return -errno;
  /* The default timer slack lets the kernel fire up to 50 us late to batch wake-ups. */
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  int rc = uv_poll_init(loop, &t->poll, t->fd);
  if (rc != 0) {
    close(t->fd);
    t->fd = -1;
    return rc;
  }
  return 0;
}

int vl_ticker_arm(vl_ticker_t *t, uint64_t due_ns) {
  struct itimerspec its = {{0, 0}, {0, 0}};
  if (due_ns == 0)
    due_ns = 1; /* an all-zero value would disarm */
  its.it_value.tv_sec = (time_t)(due_ns / 1000000000u);
  its.it_value.tv_nsec = (long)(due_ns % 1000000000u);
  if (timerfd_settime(t->fd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
    return -errno;
  if (!t->armed) {
    int rc = uv_poll_start(&t->poll, UV_READABLE, on_ready);
    if (rc != 0)
      return rc;
    t->armed = 1;
  }
  return 0;
}

void vl_ticker_stop(vl_ticker_t *t) {
  struct itimerspec its = {{0, 0}, {0, 0}};
  if (!t->armed)
    return;
  timerfd_settime(t->fd, 0, &its, NULL);
  uv_poll_stop(&t->poll);
  t->armed = 0;
}

static void on_closed(uv_handle_t *h) {
  vl_ticker_t *t = vl_container_of((uv_poll_t *)h, vl_ticker_t, poll);
  close(t->fd);
  t->fd = -1;
  if (t->close_cb)
    t->close_cb(t);
}

void vl_ticker_close(vl_ticker_t *t, void (*close_cb)(vl_ticker_t *t)) {
  t->close_cb = close_cb;
  t->armed = 0;
  uv_close((uv_handle_t *)&t->poll, on_closed);
}
