/* Figures of a run's conversations (--turns): latency per turn index, so the prefix cache shows
 * (turn k carries turns 1..k-1 again), and how the conversations ended.
 *
 * Histograms hold microseconds of the turns that succeeded past the warm-up, as the run's own do:
 * time to first token from the send, and e2el from the send to the last byte (vLLM's e2el).
 * Recording is an index and an increment; everything is allocated by vl_turnstats_init.
 */
#ifndef VLMLOAD_TURNSTATS_H
#define VLMLOAD_TURNSTATS_H

#include "vlmload/hist.h"

#include <stdint.h>
#include <stdio.h>

struct cJSON;
struct vl_config_s;
struct vl_outcome_s;

typedef struct vl_turnstats_turn_s {
  uint64_t sent, ok, failed; /* requests of this turn index (failed: cancelled ones too) */
  vl_hist_t ttft, e2el;
} vl_turnstats_turn_t;

typedef struct vl_turnstats_s {
  int n;                     /* turn indices kept: --turns' largest */
  vl_turnstats_turn_t *turn; /* turn[0] is the first turn */
  /* Conversations: started; completed (every turn answered); failed (a turn failed, which ends
   * its conversation); too_long (a reply longer than the history keeps, see
   * vl_config_reply_room); cut (the run ended first: --duration, --requests, Ctrl-C). */
  uint64_t started, completed, failed, too_long, cut;
} vl_turnstats_t;

/* Keeps figures for turns 1..n. Returns 0 or VL_ENOMEM. */
int vl_turnstats_init(vl_turnstats_t *t, int n);
void vl_turnstats_free(vl_turnstats_t *t);

/* A turn left (turn is 1-based). */
void vl_turnstats_sent(vl_turnstats_t *t, int turn);
/* A turn finished: o->turn names it (0: not a conversation's, ignored). */
void vl_turnstats_done(vl_turnstats_t *t, const struct vl_outcome_s *o);

/* The summary's "conversations" object: the counters, the turns and think time asked for, and
 * "turns": [{"turn", "requests", "ok", "failed", "ttft_ms": {...}, "e2el_ms": {...}}, ...] with
 * mean, p50, p90, p99 (null when nothing was measured). */
struct cJSON *vl_turnstats_json(const vl_turnstats_t *t, const struct vl_config_s *c);
/* The text summary's lines: the counters and a table of one row per turn index. */
void vl_turnstats_print(FILE *f, const vl_turnstats_t *t);

#endif
