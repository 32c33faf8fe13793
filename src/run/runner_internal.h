/* What the files of the run share: the run's state and a request slot's. The run is one concern
 * in several files, which call each other (the one circle of files src/LAYERS allows, inside one
 * folder): runner.c owns admission, phases, flushes' pauses and stopping; slot.c the life of one
 * request in flight, from its body to its outcome; finish.c a request's end, one pass down from
 * the run (the outcome recorded, the slot freed, what comes next decided); converse.c the
 * conversations of --turns; watch.c what the outcomes say of the server (failing fast, gone). */
#ifndef VLMLOAD_RUNNER_INTERNAL_H
#define VLMLOAD_RUNNER_INTERNAL_H

#include "vlmload/body.h"
#include "vlmload/config.h"
#include "vlmload/flush.h"
#include "vlmload/history.h"
#include "vlmload/imagepool.h"
#include "vlmload/monitor.h"
#include "vlmload/pace.h"
#include "vlmload/plan.h"
#include "vlmload/prompts.h"
#include "vlmload/rateauto.h"
#include "vlmload/report.h"
#include "vlmload/response.h"
#include "vlmload/settings.h"
#include "vlmload/srvprof.h"
#include "vlmload/stats.h"
#include "vlmload/summary.h"
#include "vlmload/ticker.h"
#include "vlmload/transport.h"
#include "vlmload/turnstats.h"
#include "vlmload/uniq.h"

#include <curl/curl.h>
#include <stdint.h>
#include <uv.h>

typedef struct vl_runner_s vl_runner_t;
typedef struct vl_conv_s vl_conv_t;

/* Memory the unique-image buffers may take. */
#define UNIQ_BUDGET ((size_t)1 << 30)

/* Memory shared by all slots' curl download buffers (replies are small: JSON or SSE chunks). */
#define DOWNLOAD_BUDGET ((size_t)4 << 20)

/* Memory shared by all slots' curl upload buffers. */
#define UPLOAD_BUDGET ((size_t)32 << 20)

/* A request slot: one easy handle and everything one request in flight needs, allocated once and
 * reused for every request the slot carries. */
typedef struct vl_slot_s {
  vl_transfer_t xfer; /* its easy handle; done is vl__finish_done */
  vl_runner_t *run;
  uint64_t id;
  uint64_t intended_ns, sent_ns;
  int measured;
  int busy;
  int attempts; /* times curl was about to send this request (CURLOPT_PREREQFUNCTION) */
  int stale;    /* the attempt was stopped: its connection held a reply to nothing it sent */
  int drained;  /* curl had read the whole streamed body when it rewound it to send it again */
  int retries;  /* times this request was sent again on a new connection (at most RESENDS) */
  int fresh;    /* CURLOPT_FRESH_CONNECT is set on the handle */
  /* The handle's CURLOPT_POSTFIELDS and CURLOPT_POSTFIELDSIZE_LARGE as last set (curl's defaults
   * at first): each is set again only when it changes. */
  const char *postfields;
  curl_off_t postsize;
  char curl_err[CURL_ERROR_SIZE]; /* CURLOPT_ERRORBUFFER: why a transfer failed, in curl's words */
  int url;                        /* index of its server among the distinct URLs */
  int phase;                      /* the phase that sent it */
  int n_images;                   /* images the request carries */
  int n_uniq;                     /* of those, unique images to give back when it finishes */
  uint64_t image_bytes, image_pixels;
  vl_outcome_image_t image_info[VL_MAX_IMAGES]; /* its images' sizes and formats, in order */
  vl_uniq_img_t *uniq; /* VL_MAX_IMAGES of them, with --unique-images only */
  vl_body_t body;
  char max_tokens[VL_PLAN_NUMBER_MAX]; /* the body's max_tokens digits (vl_plan_fill) */
  int input_tokens;                    /* its synthetic prompt's tokens; 0: none */
  int req_max_tokens;                  /* its own max_tokens; 0: none */
  vl_response_t resp;
  vl_conv_t *conv; /* --turns: the conversation whose turn this is; NULL: a request of its own */
  /* --cancel: CANCEL_NONE, CANCEL_TOKENS (to close once cancel_after token events came) or
   * CANCEL_ARMED (to close at cancel_at_ms, on the loop's clock; cancel_after microseconds after
   * the send when drawn as a delay). */
  int cancel;
  uint64_t cancel_after;
  uint64_t cancel_at_ms;
  struct vl_slot_s *next_free;
} vl_slot_t;

/* A conversation (--turns), set up once at the start and reused: its history, the unique images
 * its turns sent (held until it ends, so later turns resend the same bytes), and its think timer.
 * converse.c owns its life. */
struct vl_conv_s {
  uv_timer_t think; /* the think time before its next turn */
  vl_runner_t *run;
  uint64_t id;     /* the arrival that started it: its turns are drawn from it and their index */
  int turns;       /* turns it sends in all */
  int sent;        /* turns sent so far */
  int in_flight;   /* one of its turns is in flight */
  int live;        /* started and not ended */
  uint64_t due_ns; /* when its next turn is due: the turn's intended start */
  vl_history_t h;
  vl_uniq_img_t *uniq; /* turns x images of them, with --unique-images only */
  int n_uniq;
  vl_conv_t *next; /* in the free list or the queue of due turns */
};

/* The run's conversations. */
typedef struct vl__convs_s {
  vl_conv_t *all;
  int n;
  int max_images;            /* images one turn can carry (0: text only) */
  vl_conv_t *free_list;      /* not live */
  vl_conv_t *due, *due_tail; /* live, their next turn due, waiting for a slot: oldest first */
  int live;
  uint64_t committed; /* turns of the arrivals so far, this shard's and the others' (--requests) */
  uint64_t next_req;  /* the next turn's request id (turns are numbered as they leave) */
  size_t reply_room;  /* bytes of history for the replies of one conversation */
  vl_turnstats_t stats;
  int told_long; /* the warning for a reply too long was printed */
} vl__convs_t;

/* A slot's --cancel state (vl_slot_t.cancel). */
enum { CANCEL_NONE = 0, CANCEL_TOKENS, CANCEL_ARMED };

/* How a request was ended by vlmload rather than by its reply (vl__finish's cancelled): not, by
 * the run (Ctrl-C, or the grace period after --duration), or closed as a user would (--cancel). */
enum { VL__CLOSED_NONE = 0, VL__CLOSED_BY_RUN = 1, VL__CLOSED_BY_USER = 2 };

/* --probe-rate (latprobe.c): the probes' schedule, timer and transfers. */
typedef struct vl__latprobe_slot_s vl__latprobe_slot_t;
typedef struct vl__latprobe_s {
  vl__latprobe_slot_t *slots; /* n of them; owned */
  int n, in_flight;
  uv_timer_t timer; /* the next probe's arrival */
  int timer_open;
  vl_pace_t sched;
  char *body; /* every probe's body; owned */
  size_t body_len;
  uint64_t next_id; /* probes count their ids apart from the load's requests */
} vl__latprobe_t;

typedef enum {
  STOP_NONE = 0,
  STOP_REQUESTS,
  STOP_DURATION,
  STOP_SIGNAL,
  STOP_ERROR,
  STOP_FAILING,
  STOP_GONE
} vl__stop_t;

/* Failures alike, with none succeeding, that stop a run: a server that is not there, a route or
 * model it does not have, a key it refuses, fails every request the same way from the first. */
#define FAIL_FAST_N 5

struct vl_runner_s {
  const vl_config_t *cfg; /* the current phase's, or the probe stage's */
  const vl_prompts_t *prompts;
  vl_report_t *rep;
  uv_loop_t loop;
  vl_transport_t tr;
  vl_ticker_t pace;      /* next arrival */
  uv_timer_t tick_timer; /* one timeline row per second */
  uv_timer_t stop_timer; /* --duration, then --grace */
  uv_signal_t sig_int, sig_term;
  vl_slot_t *slots;
  int n_slots;
  vl_slot_t *free_slots;
  int in_flight;
  vl_pace_t sched;
  int closed_loop;
  const vl_config_t *top; /* the run's configuration; cfg is the current phase's */
  vl_plan_t *plans;       /* one per phase */
  int body_cap;           /* segments of each slot's body: the most any phase's plan needs */
  int n_phases, phase;
  uint64_t phase_t0_ns;     /* start of the current phase's schedule */
  uint64_t phase_first_id;  /* its first request id */
  uint64_t phase_paused_ns; /* its admission paused for drained flushes so far */
  int cap;                  /* its limit on requests in flight */
  vl_phase_result_t *results;
  const vl_imagepool_t *pool; /* NULL: text only */
  vl_uniq_t uniq;
  int has_uniq;
  struct curl_slist *headers;
  const char *accept_encoding; /* CURLOPT_ACCEPT_ENCODING: NULL, "" (all) or the user's list */
  int stale_check;   /* plain HTTP/1.1: look for stale replies before each send on a reused
                        connection */
  char **full_urls;  /* cfg->urls[i] + endpoint */
  int *url_distinct; /* index of urls[i] among the distinct URLs */
  vl_stats_t stats;
  uint64_t t0_ns;
  int64_t wall0_ms;
  uint64_t next_id;
  int admitting;       /* new requests may start */
  int blocked_counted; /* the arrival now due was already counted as delayed */
  vl__stop_t stop;
  int signals;
  int grace; /* the grace period for the requests in flight has begun (stop_timer runs it) */
  int closing;
  int fatal;
  uint64_t stop_ns; /* when admission stopped */
  uint64_t load_ns; /* t0 to stop_ns, less the pauses for drained flushes before it */
  vl_monitor_t mon;
  int has_mon;
  vl_settings_t settings; /* the monitored server processes' own settings */
  uint64_t ended_ns;      /* when the run ended, before the monitor's round after it (uv_hrtime) */
  int final_round; /* the monitor's round after the last request: 1 waiting for the round under
                      way, 3 under way, 2 done */
  /* Conversations (--turns). */
  int has_conv;
  vl__convs_t conv;
  /* --rate auto: the probe's stages run before the run's own load, each drained before the next;
   * their requests go to stats and results as a run's would, and are dropped from both when the
   * run's own load begins (stats start again, ids from 0, t0 then). */
  int probing;
  int draining;       /* a stage ended: the next waits until none of its requests is in flight */
  vl_rateauto_t ra;   /* results points at ra.stage while probing */
  vl_config_t ra_cfg; /* the stage's configuration: the run's, with the stage's load */
  uint64_t ra_t0_ns;
  vl_config_t *rate_out; /* where the rate chosen goes: the run's configuration */
  /* Cache flushes. */
  int has_flush;
  vl_flush_t flush;
  /* --probe-rate: short text-only requests beside the load, measured apart (latprobe.c). */
  int has_latprobe;
  vl__latprobe_t lp;
  /* --server-profile-at: the server's profiling routes. */
  int has_srvprof;
  vl_srvprof_t srvprof;
  /* Failing fast (not with --keep-going): until a request succeeds, how the first ones failed. */
  int ff_open;          /* still watching: nothing succeeded and every failure was alike */
  int ff_n;             /* failures alike so far */
  int ff_stop;          /* the run is to stop once the current completion is handled */
  vl_errclass_t ff_err; /* their class and status */
  long ff_status;
  char ff_line[1400]; /* what the user is told */
  /* The server gone (watch.c): a followed server process exited, or connections were refused
   * one after another once a request had succeeded. */
  vl_gone_t gone;      /* gone.how NULL: not gone */
  uint64_t gone_ns;    /* when (uv_hrtime) */
  int refused;         /* connections refused in a row since the last success */
  uint64_t refused_ns; /* when the first of them was sent */
  int *was_present;    /* per process target and tree, alive at an earlier round */
};

/* Whether admission is paused for a drained flush. */
static inline int vl__runner_paused(const vl_runner_t *r) {
  return r->has_flush && vl_flush_paused(&r->flush);
}

/* The plan of the requests the current phase sends: a probe stage's are the run's own. */
static inline vl_plan_t *vl__runner_plan(vl_runner_t *r) {
  return &r->plans[r->probing ? 0 : r->phase];
}

/* runner.c, for slot.c. */
vl_snapshot_t vl__runner_snapshot(const vl_runner_t *r);
/* An output file stopped taking writes: the run stops, and ends with status 1. */
void vl__runner_output_failed(vl_runner_t *r);
void vl__runner_begin_stop(vl_runner_t *r, vl__stop_t why);
/* Starts what the schedule and the free slots allow. */
void vl__runner_admit(vl_runner_t *r);
/* Closes the loop once nothing runs any more. */
void vl__runner_maybe_finish(vl_runner_t *r);
/* Aborts every request in flight, logging each as cancelled. */
void vl__runner_cancel_all(vl_runner_t *r);

/* slot.c, for runner.c. */
/* Sets up a slot's easy handle once, for every request it will carry. Returns 0 or a VL_E* code. */
int vl__slot_setup(vl_runner_t *r, vl_slot_t *s);
/* The run's header list: the API key, --header lines, and what --compressed asks. Returns 0 or a
 * VL_E* code. */
int vl__slot_headers(vl_runner_t *r);
/* Starts the next request, whose place on the schedule is intended_ns, in a free slot: a request
 * of its own (conv NULL), or conv's next turn. */
void vl__slot_start(vl_runner_t *r, uint64_t intended_ns, vl_conv_t *conv);
/* The outcome of the request that ended in s with curl's result (cancelled: by the run) into o;
 * its words point into the slot, valid until it carries another request. Its unique images are
 * given back; the slot stays busy until vl__slot_free. */
void vl__slot_outcome(vl_slot_t *s, CURLcode result, int cancelled, vl_outcome_t *o);
/* Whether the transfer that ended in s goes again on a new connection (a stale or a reused
 * connection that ended it unanswered, slot.c): then it is in flight again and returns 1; else 0,
 * with result said as what it was. */
int vl__slot_resend(vl_slot_t *s, CURLcode *result);
/* Gives the slot back to the free ones. */
void vl__slot_free(vl_slot_t *s);
/* watch.c, for finish.c and runner.c: what the outcomes say of the server. */
/* A request ended with outcome o: failing fast at the start (FAIL_FAST_N failures alike before any
 * success set ff_stop and ff_line), refusals in a row once a request succeeded (the server gone:
 * the run stops, unless --keep-going). */
void vl__watch_outcome(vl_runner_t *r, const vl_outcome_t *o);
/* A monitor round ended: a followed --monitor-pid or --monitor-tree root gone since is said. */
void vl__watch_round(vl_monitor_t *mon);
void vl__watch_free(vl_runner_t *r);

/* finish.c, for runner.c and slot.c: a request's end, one pass down. */
/* Ends the request in s with curl's result (cancelled: by the run, Ctrl-C or the grace period):
 * its outcome (vl__slot_outcome) goes into the statistics, the phase's figures, the request log
 * and the watch, the slot is freed, and a conversation's turn is handed to its conversation. */
void vl__finish(vl_runner_t *r, vl_slot_t *s, CURLcode result, int cancelled);
/* Every slot's transfer callback (vl_transfer_t.done): a request sent again goes on; one that
 * ended is finished, then the run decides what comes next (failing fast, a flush, admission, the
 * end). */
void vl__finish_done(vl_transfer_t *x, CURLcode result);

/* latprobe.c, for runner.c: --probe-rate. */
/* Sets up the probes (their body for model, their transfers, their timer). Returns 0 or a VL_E*
 * code. */
int vl__latprobe_init(vl_runner_t *r, const char *model);
/* The run's own load begins: probes start on their schedule, until admission ends. */
void vl__latprobe_start(vl_runner_t *r);
/* Stops the probes in flight, uncounted but as unfinished (Ctrl-C, the grace period). */
void vl__latprobe_abort(vl_runner_t *r);
/* Closes the timer (the loop is closing). */
void vl__latprobe_close(vl_runner_t *r);
void vl__latprobe_free(vl_runner_t *r);

/* converse.c, for runner.c and slot.c: conversations (--turns). */
/* Sets up the run's conversations (cfg->turns_hi > 0). Returns 0 or a VL_E* code. */
int vl__converse_init(vl_runner_t *r);
void vl__converse_free(vl_runner_t *r);
/* Closes every think timer (the loop is closing). */
void vl__converse_close(vl_runner_t *r);
/* Whether a conversation can start now (one is free). */
int vl__converse_room(const vl_runner_t *r);
/* Whether a live conversation's next turn waits for a slot. */
static inline int vl__converse_due(const vl_runner_t *r) {
  return r->conv.due != NULL;
}
/* The arrival r->next_id starts a conversation, its first turn at intended_ns (r->next_id moves
 * on). The caller checked vl__converse_room and that a slot is free. */
void vl__converse_start(vl_runner_t *r, uint64_t intended_ns);
/* Sends the oldest due turn. The caller checked that a slot is free. */
void vl__converse_send_due(vl_runner_t *r);
/* The arrival id starts no conversation here (another shard's, or dropped): its turns still count
 * toward --requests, as every process counts them. */
void vl__converse_skip(vl_runner_t *r, uint64_t id);
/* Whether the conversations' turns so far reach --requests. */
int vl__converse_count_reached(const vl_runner_t *r);
/* Turn of s's conversation finished with err (cut: its reply could not be kept whole): the
 * conversation goes on after its think time, or ends. */
void vl__converse_turn_done(vl_runner_t *r, vl_conv_t *cv, vl_errclass_t err, int cut);
/* Admission stopped: every conversation with no turn in flight ends, cut. */
void vl__converse_stop(vl_runner_t *r);
/* Fills s's body with its conversation's next turn (the plan's choices rp, the images of the turn
 * in images) and keeps the reply's content when a turn follows. */
void vl__converse_fill(vl_runner_t *r, vl_slot_t *s, const vl_request_plan_t *rp,
                       const vl_seg_t *images);
/* The turn in s has begun (vl_response_begin): counts it, and sends its reply's content into
 * the history when a turn follows. */
void vl__converse_listen(vl_runner_t *r, vl_slot_t *s);
/* The id the plan draws a conversation's next turn from. */
uint64_t vl__converse_plan_id(const vl_conv_t *cv);

#endif
