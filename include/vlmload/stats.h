/* Counters and latency histograms of a run, whole and per interval (one timeline row).
 *
 * Histograms hold microseconds and only requests of the measured phase (past --warmup); counters
 * hold every request. Recording is a few increments and a histogram index; nothing allocates.
 */
#ifndef VLMLOAD_STATS_H
#define VLMLOAD_STATS_H

#include "vlmload/counters.h"
#include "vlmload/hist.h"
#include "vlmload/response.h"
#include "vlmload/slo.h"

#include <stdint.h>

/* One image a request carried, as sent: its size in pixels and its format's name ("png",
 * "jpeg"; static). */
typedef struct vl_outcome_image_s {
  int w, h;
  const char *format;
} vl_outcome_image_t;

/* One finished request, as recorded and as logged. Times are CLOCK_MONOTONIC nanoseconds. */
typedef struct vl_outcome_s {
  uint64_t id;
  int measured; /* past the warm-up */
  int probe;    /* a request of the probe before a --rate auto run (rateauto.h), in no figure */
  uint64_t intended_ns, sent_ns, done_ns;
  uint64_t first_token_ns;   /* 0: no token came */
  uint64_t first_content_ns; /* first token of content, not reasoning; 0: none came */
  long status;
  vl_errclass_t err;
  uint32_t token_events;
  uint64_t itl_sum_ns;
  int64_t prompt_tokens, completion_tokens; /* -1: unknown */
  uint64_t bytes_sent;
  int url; /* index of the server among the distinct URLs */
  int images;
  const vl_outcome_image_t *image_list; /* its images, in order; NULL with none or unknown;
                                           valid during the call */
  uint64_t image_bytes;                 /* encoded bytes of its images */
  int retries;                          /* sent again after stale replies on reused connections */
  const char *error_message; /* the server's own error message, NULL none; valid during the call */
  const char *words;         /* what a failure is known by: the server's message, or curl's words
                                when no reply came; "" none; valid during the call */
  const char *detail;        /* the same at length: curl's own account when it gave one (which
                                port, after how long), else words */
  unsigned slo_met;          /* the VL_SLO_* bits of --slo it met (vl_stats_slo) */
  /* --turns: its conversation (the arrival's id) and its turn in it (1 = the first); turn 0:
   * not a conversation's. */
  uint64_t conversation;
  int turn;
  int input_tokens;    /* its synthetic prompt's text tokens (lengths.h); 0: none */
  int max_tokens;      /* its own max_tokens (--output-tokens, a trace); 0: --max-tokens */
  int over_max_tokens; /* it succeeded, and its reply declared more completion tokens than the
                          max_tokens it asked for */
  vl_srvtime_t srv;    /* the server's own timings of it, where its reply gave them */
  int closed;          /* closed by vlmload before its reply finished, as a user closing a page
                          does (--cancel): err is VL_ERR_CANCELLED, and it is neither ok nor
                          failed */
  int cancel_planned;  /* --cancel chose it (closed or not: its reply may have finished first) */
  int latency_probe;   /* a --probe-rate request: measured apart, in no other figure */
} vl_outcome_t;

/* Lengths (--input-tokens, --output-tokens): what the requests that succeeded past the warm-up
 * were meant to carry, and what their server reported in usage.prompt_tokens. */
typedef struct vl_lengths_stats_s {
  int exact;                  /* the prompts' tokens were counted by the server's tokenizer */
  uint64_t requests;          /* with a synthetic prompt */
  uint64_t intended;          /* their prompts' text tokens */
  uint64_t limited;           /* with their own max_tokens */
  uint64_t max_tokens;        /* the sum of those max_tokens */
  uint64_t reported_n;        /* of requests, those whose reply gave usage.prompt_tokens */
  uint64_t reported;          /* their usage.prompt_tokens */
  uint64_t reported_intended; /* their prompts' text tokens */
  uint64_t text_n;            /* of those, text-only ones */
  uint64_t text_intended;     /* their prompts' text tokens */
  int64_t text_extra;         /* their prompt_tokens less their text tokens: the chat template */
  uint64_t image_n;           /* of those, ones with images */
  uint64_t images;            /* their images */
  int64_t image_extra;        /* their prompt_tokens less their text tokens: template and images */
} vl_lengths_stats_t;

typedef struct vl_counts_s {
  uint64_t sent, completed, ok, failed;
  uint64_t cancelled; /* closed by --cancel before their reply finished: not in completed */
  uint64_t errors[VL_ERR__COUNT];
  uint64_t prompt_tokens, completion_tokens, bytes_sent;
} vl_counts_t;

/* One kind of error message of a run: its class, status and the server's words (or curl's, when
 * no reply came), with how many requests failed with it. Messages that differ only in their
 * numbers ("request (2754 tokens) exceeds ... (1024 tokens)") are one kind: the first is kept as
 * its example. */
#define VL_STATS_MESSAGES    16
#define VL_STATS_MESSAGE_MAX 201
typedef struct vl_errmsg_s {
  vl_errclass_t err;
  long status;
  char text[VL_STATS_MESSAGE_MAX]; /* the first one's first line, at most 200 bytes, as received */
  uint64_t count;
  int numbers_vary; /* some of them had other numbers than the example */
} vl_errmsg_t;

/* Requests by the size of their images: a request counts under its largest image (most pixels),
 * a text-only one under 0x0. What they drew: how many completed and failed, by class, and the
 * server's message of the first that failed with one. */
#define VL_STATS_SIZES 16
typedef struct vl_sizestat_s {
  int w, h;
  uint64_t completed, failed;
  uint64_t errors[VL_ERR__COUNT];
  char message[VL_STATS_MESSAGE_MAX]; /* its first line, at most 200 bytes; "" none */
} vl_sizestat_t;

/* --probe-rate: the probes beside the load, measured apart. Latencies in microseconds, of the
 * probes that succeeded: e2e from the probe's intended start, e2e_sent from its send, ttft from
 * its send (streaming). */
typedef struct vl_probe_stats_s {
  uint64_t arrivals, sent, ok, failed;
  uint64_t dropped;    /* arrivals that found every probe transfer busy */
  uint64_t unfinished; /* in flight when the run was stopped at once (Ctrl-C, the grace period) */
  vl_hist_t e2e, e2e_sent, ttft;
} vl_probe_stats_t;

typedef struct vl_stats_s {
  vl_hist_t e2e;          /* completion minus intended start */
  vl_hist_t e2e_sent;     /* completion minus actual send */
  vl_hist_t ttft;         /* first token minus actual send */
  vl_hist_t tpot;         /* per request: completion minus first token over the tokens after the
                             first (see vl_stats_tpot_us) */
  vl_hist_t ttfc;         /* first content token (not reasoning) minus actual send */
  vl_hist_t itl;          /* gaps between token events */
  vl_hist_t send_lag;     /* actual send minus intended start */
  vl_hist_t iv_e2e;       /* e2e of the current interval, all phases */
  vl_probe_stats_t probe; /* --probe-rate */
  /* The server's own timings (vl_srvtime_t) of successful requests whose reply gave them, and the
   * rest of the same requests' latency: e2e from the send less the server's whole time, TTFT less
   * its prompt time (streamed requests). The rest is queueing the server did not count, the
   * network and vlmload; a negative rest (clocks that disagree) counts as 0. */
  vl_hist_t srv_e2e, srv_e2e_rest, srv_ttft, srv_ttft_rest;
  vl_counts_t total;
  vl_counts_t iv;          /* the current interval */
  vl_counts_t measured_c;  /* requests finished past the warm-up (what bench_serving measures) */
  vl_slo_met_t slo;        /* of those, the ones meeting each --slo bound */
  uint64_t iv_good;        /* requests of the current interval meeting every --slo bound */
  uint64_t arrivals;       /* arrivals that came due: sent, dropped or unsent */
  uint64_t dropped;        /* arrivals not sent: every slot busy in drop mode */
  uint64_t delayed;        /* arrivals sent after waiting for a slot in queue mode */
  uint64_t unsent;         /* arrivals that came due and were never sent: still waiting for a slot
                              (queue mode) when admission stopped */
  uint64_t max_in_flight;  /* the most requests in flight at once */
  uint64_t cancel_planned; /* requests --cancel chose to close (cancel.h) */
  uint64_t retried;  /* requests sent again on a fresh connection: their reused connection held a
                        reply to nothing they sent (a 408 from an idle close) */
  uint64_t warmup;   /* requests finished inside the warm-up */
  uint64_t measured; /* requests finished past the warm-up */
  uint64_t first_send_ns, last_send_ns;
  uint64_t flushes;       /* flushes finished */
  uint64_t flush_skipped; /* inline flushes not started: the previous one was still running */
  uint64_t paused_ns;     /* admission paused for drained flushes */
  uint64_t paused_ns_before_last_send;     /* of that, before the last send */
  uint64_t measure_start_ns;               /* first send past the warm-up */
  uint64_t measure_end_ns;                 /* last completion of a request past the warm-up */
  uint64_t flush_pauses;                   /* admission pauses for drained flushes, ended */
  vl_errmsg_t messages[VL_STATS_MESSAGES]; /* the first distinct ones, in order of first sight */
  int n_messages;
  uint64_t messages_other;  /* failures with a message past the first VL_STATS_MESSAGES kinds */
  uint64_t over_max_tokens; /* successes whose reply declared more completion tokens than their
                               max_tokens: their counts are kept in the figures, and flagged */
  vl_counts_t *per_url;     /* one per distinct server URL */
  int n_urls;
  /* Images. */
  uint64_t text_only, with_images; /* requests sent */
  uint64_t images_sent, image_bytes;
  uint64_t image_pixels;  /* width times height of every image sent */
  uint64_t images_unique; /* unique images sent, each distinct from every other image */
  uint64_t images_late;   /* unique images not ready in time: a pool image went instead */
  uint64_t *per_pool;     /* images sent of each pool entry, as it is or made unique from it */
  uint64_t *per_pool_raw; /* of those, sent as they are in the pool */
  size_t n_pool;
  /* --image-reuse: images that repeated a unique one sent before (a hit on the server's cache). */
  uint64_t images_repeated;
  /* Requests completed by image size: the first VL_STATS_SIZES sizes seen, in order of first
   * sight; requests of other sizes in sizes_other. */
  vl_sizestat_t sizes[VL_STATS_SIZES];
  int n_sizes;
  uint64_t sizes_other;
  /* --turns: the figures per turn index and the conversations' ends, for the summary; not owned
   * (the runner's, which records each turn's outcome into it), NULL without conversations. */
  struct vl_turnstats_s *turns;
  vl_lengths_stats_t len;
} vl_stats_t;

int vl_stats_init(vl_stats_t *s);
void vl_stats_free(vl_stats_t *s);
/* Keeps a counter for each of n pool images. Returns 0 or VL_ENOMEM. */
int vl_stats_init_pool(vl_stats_t *s, size_t n);
/* A request left carrying n images of bytes encoded bytes and pixels pixels in all (0, 0, 0: text
 * only). */
void vl_stats_images(vl_stats_t *s, int n, uint64_t bytes, uint64_t pixels);

/* Keeps counters for n servers. Returns 0 or VL_ENOMEM. */
int vl_stats_init_urls(vl_stats_t *s, int n);

/* A request left at sent_ns for its place at intended_ns. */
void vl_stats_sent(vl_stats_t *s, uint64_t intended_ns, uint64_t sent_ns, uint64_t bytes,
                   int measured);
/* A request's time per output token in microseconds, as SGLang's bench_serving and vLLM's bench
 * serve compute it: (completion - first token) / (completion tokens - 1), for a successful
 * streamed request whose server declared more than one completion token. Returns 1 and sets *us
 * when it is defined, 0 when not. */
int vl_stats_tpot_us(const vl_outcome_t *o, double *us);
/* --slo: The VL_SLO_* bits o met; 0 for a request that failed. */
unsigned vl_stats_slo(const vl_slo_t *slo, const vl_outcome_t *o);
/* A request finished (its ITL gaps, if it succeeded, were recorded by the runner). Only a request
 * that succeeded feeds the latency histograms and the token counts. */
void vl_stats_done(vl_stats_t *s, const vl_outcome_t *o);
/* A request failed with message text (NUL-terminated; its first line is kept, at most 200 bytes):
 * counted with the failures of the same class, status and text. */
void vl_stats_message(vl_stats_t *s, vl_errclass_t err, long status, const char *text);
/* Starts a new interval. */
void vl_stats_interval_reset(vl_stats_t *s);

/* A histogram as JSON: {"total","sum","sumsq","min","max","clamped","counts":[[index,count],...]}
 * with only the non-zero counters. */
struct cJSON *vl_stats_hist_json(const vl_hist_t *h);
/* Adds such a JSON histogram into h (same layout as vl_stats_init's); one without "sumsq" (an
 * older vlmload's) leaves h's sum of squares unknown. Returns 0 or VL_EJSON. */
int vl_stats_hist_add_json(vl_hist_t *h, const struct cJSON *o);
/* The run's counters as JSON, and adding such counters into s (errors by class name). */
struct cJSON *vl_stats_counters_json(const vl_stats_t *s);
int vl_stats_counters_add_json(vl_stats_t *s, const struct cJSON *o);
/* Adds to o what every --histograms record holds of s: its format and version, the histograms'
 * layout, the counters and the latency histograms ("metrics"). A run and a merge add the rest. */
void vl_stats_record_json(struct cJSON *o, const vl_stats_t *s);
/* The layout every vlmload latency histogram has (microseconds). */
#define VL_STATS_HIGHEST_US (3600ll * 1000000)
#define VL_STATS_SIGDIGITS  3

/* One phase (or sweep stage) of a run, for the summary and the rate probe. Latency figures are of
 * its successful requests. */
typedef struct vl_phase_result_s {
  const char *name;
  double target_rate; /* this shard's, at the start; 0 = closed loop */
  double ramp_to;     /* negative: no ramp */
  int max_concurrency;
  double seconds;  /* from its start to the next phase's (or the end of admission) */
  double paused_s; /* of that, admission paused for drained flushes */
  uint64_t sent, ok, failed, images;
  double e2e_sent_sum_s;         /* sum of its latencies from send, for the mean in flight */
  vl_hist_t e2e;                 /* latency of its requests (2 significant digits) */
  vl_hist_t ttft, tpot;          /* streamed requests' (2 significant digits) */
  uint64_t itl_sum_ns, itl_gaps; /* gaps between token events, in all, for the mean ITL */
  int knee;                      /* the first stage whose latency left its floor */
  /* The server's counters (counters.h) as the phase began and as it ended (the next began, or
   * the monitor's round after the last request), in the monitor's order; NaN where not read. */
  double ctr_start[VL_COUNTERS_MAX], ctr_end[VL_COUNTERS_MAX];
  int n_ctr;
  vl_slo_met_t slo; /* its finished requests meeting each --slo bound */
} vl_phase_result_t;

/* Latency summary of a histogram in milliseconds: mean, std (population), percentiles, extremes.
 * With count 0 nothing was measured: the other fields are then NaN. */
typedef struct {
  uint64_t count;
  double mean, std, p50, p90, p95, p99, max, min;
} vl_lat_t;
void vl_stats_lat(const vl_hist_t *h, vl_lat_t *out);

#endif
