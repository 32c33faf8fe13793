/* Cache flushes: when they go out and how.
 *
 * When: each phase's cadence (--flush-every N requests or DUR, --flush-mode). A drained flush
 * asks its owner to pause admission, goes out once nothing is in flight, and tells the owner to
 * resume when it is over; an inline flush goes out with requests in flight (one at a time: a flush
 * due while the previous one runs is skipped and counted).
 * How: one or more flush routes called in order through the run's transport, every server in turn,
 * with SGLang's "busy" refusal (HTTP 400 while requests run) retried a bounded number of times in
 * drain mode, and a record of every flush. A drained flush asks a route that can wait for the
 * server to be idle (SGLang's /flush_cache) to do so, with ?timeout= the flush timeout in seconds
 * (its call may then last that long and 2 s more); a server that ignores the parameter answers
 * 400 while busy, retried as before.
 *
 * The owner (the runner) only pauses and resumes admission, and says when requests are sent and
 * finished.
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
  double timeout_s;       /* the ?timeout=S sent to a route that waits for idle on the server's
                           * side (vl_profile_flush_waits); negative when none was sent */
  double server_wait_ms;  /* the last call of that route, from its send to its answer: the time
                           * the server waited for idle when it waited; negative when none */
  char answer[200];       /* start of the last answer body, cut between characters; line
                           * breaks as spaces, other control bytes and bytes that are not UTF-8
                           * as \xHH */
} vl_flush_record_t;

/* What the owner of the requests does for the flushes. */
typedef struct vl_flush_hooks_s {
  /* A drained flush is due: stop admitting (requests in flight run on). */
  void (*pause)(vl_flush_t *f);
  /* A flush finished, ok or not (rec is valid during the call). paused_ns: how long admission was
   * paused for it, 0 when it was not (inline, or no pause was asked); admission may resume. */
  void (*done)(vl_flush_t *f, const vl_flush_record_t *rec, uint64_t paused_ns);
  /* The requests so far: sent, finished, and in flight now. */
  void (*load)(const vl_flush_t *f, uint64_t *sent, uint64_t *finished, int *in_flight);
} vl_flush_hooks_t;

/* Fills cfg->flush_endpoints with the routes of cfg->server's profile when the run flushes
 * (cfg->run.flushes) and none was named. Returns 0, or VL_EINVAL with why (one line, naming what to
 * do) in err when the server kind has no flush route. */
int vl_flush_choose_routes(vl_config_t *cfg, char *err, size_t errlen);

/* The words for cfg's cadence, e.g. "drained flush every 50 requests", into out. */
void vl_flush_describe(const vl_config_t *cfg, char *out, size_t outlen);

struct vl_flush_s {
  vl_transport_t *tr;
  vl_transfer_t xfer; /* the calls' easy handle; the transport reports each call's end here */
  struct curl_slist *headers;
  char **urls;      /* every server's every route, server by server; owned */
  char **wait_urls; /* the same with ?timeout=S for a route that waits for idle on the server's
                       side, drained flushes only; NULL where the route does not; owned */
  uint64_t timeout_ms, call_t0_ns; /* --flush-timeout; when the call under way left */
  const char **paths;              /* the route of each of urls */
  int n_urls;
  int n_paths; /* routes per server */
  int post, max_retries;
  uint64_t retry_delay_ms;
  uv_timer_t retry_timer;
  const vl_flush_hooks_t *hooks;
  void *data; /* the owner's */
  /* The cadence: the current phase's. */
  uv_timer_t every_timer; /* --flush-every DUR */
  uint64_t every_n;       /* requests between flushes; 0: not by count */
  vl_flush_mode_t mode;
  int stopped; /* the cadence starts no more flushes */
  uint64_t sent_since, done_since;
  int paused;        /* admission is paused for a drained flush (due or under way) */
  uint64_t pause_ns; /* when it was */
  uint64_t skipped;  /* inline flushes not started: the previous one was still running */
  /* The flush under way. */
  int retry_on_busy;
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

/* Prepares calls of cfg->flush_endpoints (see vl_flush_choose_routes) on every distinct server of
 * cfg, the run's configuration. No cadence runs until vl_flush_phase. The calls run through tr,
 * which reports each call's end to the flush itself (its xfer): nothing else routes them. Returns
 * 0 or a VL_E* code. */
int vl_flush_init(vl_flush_t *f, uv_loop_t *loop, vl_transport_t *tr, const vl_config_t *cfg,
                  const vl_flush_hooks_t *hooks);

/* A phase begins, with its own cadence (phase is the run's configuration when it has no phases):
 * the counts start again and a timed cadence starts its timer. In drain mode a refused flush is
 * retried up to cfg->flush_retries times; inline, a 400 is a refusal at once. */
void vl_flush_phase(vl_flush_t *f, const vl_config_t *phase);

/* A request was sent. A drained flush by count may become due (hooks->pause is called). */
void vl_flush_sent(vl_flush_t *f);

/* A request finished (or was cancelled). A due drained flush goes out once none is in flight; an
 * inline flush by count may go out. */
void vl_flush_finished(vl_flush_t *f);

/* A flush now, beside the phase's cadence, as one it made due: drained (hooks->pause first) in
 * drain mode, at once inline. */
void vl_flush_now(vl_flush_t *f);

/* Whether admission is paused for a drained flush, due or under way. */
static inline int vl_flush_paused(const vl_flush_t *f) {
  return f->paused;
}

/* The cadence starts no more flushes. drop: a drained flush that is due but not yet begun is
 * dropped too (admission is no longer paused; hooks->done is not called). A flush under way
 * finishes. */
void vl_flush_stop(vl_flush_t *f, int drop);

/* Abandons a flush under way (no record is kept) and a pause, without calling hooks->done. */
void vl_flush_abort(vl_flush_t *f);

/* Closes the timers (the loop then has no handle of the flush's). */
void vl_flush_close(vl_flush_t *f);
/* Frees everything, records included; after the loop has run its last iteration. */
void vl_flush_free(vl_flush_t *f);

#endif
