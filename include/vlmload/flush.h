/* Cache flush calls: one or more flush routes called in order through the run's transport, with
 * SGLang's "busy" refusal (HTTP 400 while requests run) retried a bounded number of times, and a
 * record of every flush.
 *
 * The flush module makes the HTTP calls and keeps the records; when to flush, and pausing
 * admission around it, is the runner's.
 */
#ifndef VLMLOAD_FLUSH_H
#define VLMLOAD_FLUSH_H

#include "vlmload/config.h"
#include "vlmload/transport.h"

#include <curl/curl.h>
#include <stdint.h>
#include <uv.h>

typedef struct vl_flush_s vl_flush_t;

/* One flush: every route called once (or more, with retries). */
typedef struct vl_flush_record_s {
  uint64_t n;             /* 1-based index */
  int64_t wall_ms;        /* wall clock when the first call left */
  uint64_t start_ns;      /* CLOCK_MONOTONIC, same */
  uint64_t requests_sent; /* requests sent before the flush */
  uint64_t requests_done; /* requests finished before the flush */
  int in_flight;          /* requests in flight when the first call left */
  int drained;            /* admission was paused and in-flight drained first */
  double drain_ms;        /* from the pause to the first call */
  double call_ms;         /* from the first call to the last answer */
  int attempts;           /* HTTP calls made, retries included */
  long status;            /* last route's final status; 0 when no answer came */
  int ok;                 /* every route answered 2xx */
  int refused;            /* a route still answered 400 after the retries */
  char answer[200];       /* start of the last answer body, cut between characters; line
                           * breaks as spaces, other control bytes and bytes that are not UTF-8
                           * as \xHH */
} vl_flush_record_t;

/* A flush finished (ok or not). rec is valid during the call. */
typedef void (*vl_flush_done_cb)(vl_flush_t *f, const vl_flush_record_t *rec);

struct vl_flush_s {
  vl_transport_t *tr;
  CURL *easy;
  struct curl_slist *headers;
  char **urls;        /* every server's every route, server by server; owned */
  const char **paths; /* the route of each of urls */
  int n_urls;
  int n_paths; /* routes per server */
  int post, max_retries, retry_on_busy;
  uint64_t retry_delay_ms;
  uv_timer_t retry_timer;
  vl_flush_done_cb done_cb;
  void *data; /* the owner's */
              /* The flush under way. */
  int busy;
  int in_transfer; /* the handle is in the transport */
  int step;        /* route being called */
  int retries;     /* retries of that route so far */
  vl_flush_record_t cur;
  char buf[1024];
  size_t len;
  int warned_404;
  /* Totals. */
  uint64_t count, ok, refused, failed, retries_total;
  vl_flush_record_t *recs; /* every flush, in order; owned */
  size_t n_recs, cap_recs;
};

/* Prepares calls of paths (NULL-terminated) on cfg->url. retry_on_busy: a 400 is retried up to
 * cfg->flush_retries times (drain mode); otherwise it is a refusal at once. Returns 0 or a VL_E*
 * code. */
int vl_flush_init(vl_flush_t *f, uv_loop_t *loop, vl_transport_t *tr, const vl_config_t *cfg,
                  const char *const *paths, int retry_on_busy, vl_flush_done_cb done_cb);

/* Starts a flush; rec carries what the caller knows (requests, in flight, drain). Returns 0, or
 * VL_EINVAL when one is already under way. */
int vl_flush_start(vl_flush_t *f, const vl_flush_record_t *rec);

/* True when easy is the flush's own handle; the runner then passes its completion here. */
static inline int vl_flush_owns(const vl_flush_t *f, const CURL *easy) {
  return f->easy == easy;
}
void vl_flush_on_done(vl_flush_t *f, CURLcode result);

/* Abandons a flush under way (its record says so) without calling done_cb. */
void vl_flush_abort(vl_flush_t *f);

/* Closes the retry timer (the loop then has no handle of the flush's). */
void vl_flush_close(vl_flush_t *f);
/* Frees everything, records included; after the loop has run its last iteration. */
void vl_flush_free(vl_flush_t *f);

#endif
