/* --server-profile-at: the server's own profiling routes, called when given counts of requests
 * have completed, through the run's transport (never blocking its loop): SGLang's POST
 * /start_profile with {"activities": ["MEM"]} (the server writes a CUDA memory snapshot) and then
 * POST /stop_profile, vLLM's /start_profile and /stop_profile. Each call is recorded (route, the
 * count that set it off, when, how long, the status and the start of the answer), handed to the
 * owner as it ends, and in the summary.
 */
#ifndef VLMLOAD_SRVPROF_H
#define VLMLOAD_SRVPROF_H

#include "vlmload/config.h"
#include "vlmload/transport.h"

#include <curl/curl.h>
#include <stdint.h>

struct cJSON;

/* One call of a profiling route. */
typedef struct vl_srvprof_call_s {
  const char *route;    /* "/start_profile" or "/stop_profile" (static) */
  uint64_t at_requests; /* the --server-profile-at count that set the pair off */
  uint64_t completed;   /* requests completed when the call left */
  int64_t wall_ms;      /* when it left */
  uint64_t start_ns;    /* CLOCK_MONOTONIC, same */
  double ms;            /* until its answer (or failure) */
  long status;          /* 0: no answer */
  int ok;               /* answered 2xx */
  char answer[120];     /* the start of the answer body, or curl's words when none came */
} vl_srvprof_call_t;

typedef struct vl_srvprof_s vl_srvprof_t;

/* A call ended (call valid during it). */
typedef void (*vl_srvprof_cb)(vl_srvprof_t *p, const vl_srvprof_call_t *call);

struct vl_srvprof_s {
  vl_transport_t *tr;
  vl_transfer_t xfer;
  struct curl_slist *headers;
  char *start_url, *stop_url; /* owned */
  const char *start_body;     /* static */
  const uint64_t *at;         /* cfg->profile_at */
  int n_at, next;             /* the next count to reach */
  int busy;                   /* 0, or 1 while the start call runs, 2 the stop call */
  uint64_t completed;         /* requests completed, as last told */
  vl_srvprof_call_t calls[2 * VL_MAX_PROFILE_AT];
  int n_calls;
  size_t answer_len;
  char curl_err[CURL_ERROR_SIZE];
  vl_srvprof_cb on_call;
  void *data;     /* the owner's */
  uint64_t t0_ns; /* the run's start, set by the owner: elapsed_s counts from it */
};

/* The routes of kind's profile: whether it has any (SGLang, vLLM), and the start call's body
 * (NULL: none). */
int vl_srvprof_routes(vl_server_kind_t kind, const char **start_body);

/* Sets p up on tr for cfg's counts against cfg->urls[0] of cfg->server's profile (which has
 * routes). Returns 0 or a VL_E* code. */
int vl_srvprof_init(vl_srvprof_t *p, vl_transport_t *tr, const vl_config_t *cfg, vl_srvprof_cb cb);

/* completed requests have completed: the next pair goes out once it reaches the next count and
 * no call runs (counts passed while one ran go out together as one pair). */
void vl_srvprof_count(vl_srvprof_t *p, uint64_t completed);

/* The call in flight, if any, is stopped and recorded as unanswered; nothing more goes out. */
void vl_srvprof_abort(vl_srvprof_t *p);

void vl_srvprof_free(vl_srvprof_t *p);

/* The calls as a JSON array; elapsed_s of each from p->t0_ns. Caller owns it. */
struct cJSON *vl_srvprof_json(const vl_srvprof_t *p);

/* One call as JSON (the request log's event and the summary's entries). */
struct cJSON *vl_srvprof_call_json(const vl_srvprof_call_t *c, uint64_t t0_ns);

#endif
