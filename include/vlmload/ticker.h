/* A one-shot timer on a libuv loop with sub-millisecond precision.
 *
 * libuv's timers count whole milliseconds of loop time, which would make every arrival up to a
 * millisecond late. The ticker arms a CLOCK_MONOTONIC timerfd at an absolute time in nanoseconds
 * (the clock uv_hrtime() reads) and watches it with a uv_poll_t, so the callback runs within the
 * kernel's wake-up latency of the due time, and never before it.
 */
#ifndef VLMLOAD_TICKER_H
#define VLMLOAD_TICKER_H

#include <stdint.h>
#include <uv.h>

typedef struct vl_ticker_s vl_ticker_t;
typedef void (*vl_ticker_cb)(vl_ticker_t *t);

struct vl_ticker_s {
  uv_poll_t poll;
  int fd;
  int armed;
  vl_ticker_cb cb;
  void (*close_cb)(vl_ticker_t *t);
  void *data; /* the owner's */
};

/* Returns 0, or a negative errno when no timerfd can be made. */
int vl_ticker_init(uv_loop_t *loop, vl_ticker_t *t, vl_ticker_cb cb);
/* Runs the callback once at due_ns (CLOCK_MONOTONIC); replaces any earlier arming. A time in the
 * past fires on the next loop iteration. Returns 0 or a negative errno. */
int vl_ticker_arm(vl_ticker_t *t, uint64_t due_ns);
void vl_ticker_stop(vl_ticker_t *t);
/* Closes the poll handle, then the descriptor; close_cb (may be NULL) runs once the handle is
 * closed, after which the memory may be freed. */
void vl_ticker_close(vl_ticker_t *t, void (*close_cb)(vl_ticker_t *t));

#endif
