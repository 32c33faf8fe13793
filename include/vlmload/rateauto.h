/* --rate auto: the probe before a run that finds a rate the server sustains.
 *
 * The probe is a few short stages of the run's own kind of request, each drained (nothing left in
 * flight) before the next is judged: first a closed loop of one request at a time
 * (VL_RATEAUTO_FLOOR_REQUESTS of them, or VL_RATEAUTO_FLOOR_S), whose median latency is the floor
 * and whose throughput the first open-loop rate; then open-loop stages of vl_rateauto_stage_us
 * each, the rate doubled every stage until one falls behind as a sweep's knee does
 * (vl_rateauto_behind: requests ok under 90% of the rate -- the sends lagged, or failed -- or a
 * median latency from the intended start over twice the lowest median so far); then the interval
 * between the highest rate that kept up and the lowest that fell behind is halved
 * VL_RATEAUTO_BISECTS times. The knee is the lowest rate that fell behind; the run goes at
 * VL_RATEAUTO_FRACTION of it.
 *
 * This module decides and records; the runner runs the stages (runner.c), keeps their requests out
 * of the run's statistics and marks their timeline rows VL_RATEAUTO_PHASE.
 */
#ifndef VLMLOAD_RATEAUTO_H
#define VLMLOAD_RATEAUTO_H

#include "vlmload/stats.h"
#include "vlmload/stats.h"

#include <stddef.h>
#include <stdint.h>

struct cJSON;

#define VL_RATEAUTO_PHASE          "rate-auto" /* the phase of the probe's timeline rows */
#define VL_RATEAUTO_FRACTION       0.7
#define VL_RATEAUTO_FLOOR_REQUESTS 20
#define VL_RATEAUTO_FLOOR_S        5
#define VL_RATEAUTO_DOUBLINGS      16 /* open-loop stages before the first bisection, at most */
#define VL_RATEAUTO_BISECTS        2
#define VL_RATEAUTO_MAX_STAGES     (1 + VL_RATEAUTO_DOUBLINGS + VL_RATEAUTO_BISECTS)
/* The probe's request ids start here, apart from the run's own (which start at 0, as without
 * --rate auto): its requests' contents are drawn from other ids than the run's. */
#define VL_RATEAUTO_FIRST_ID ((uint64_t)1 << 48)

typedef struct vl_rateauto_s {
  /* The stages begun, in order; stage[0] is the closed loop (target_rate 0). The runner records
   * each one's requests as a phase's; seconds is its time admitting, not its drain. */
  vl_phase_result_t stage[VL_RATEAUTO_MAX_STAGES];
  int behind[VL_RATEAUTO_MAX_STAGES]; /* the stage fell behind (open-loop stages only) */
  int n;
  double floor_ms; /* lowest median of the stages that kept up */
  double good;     /* highest rate that kept up; 0: none */
  double bad;      /* lowest rate that fell behind; 0: none */
  int bisects;
  int done;
  double knee;     /* when done: the lowest rate that fell behind; 0: none did */
  double chosen;   /* when done: the run's rate; 0: none could be found */
  double seconds;  /* from the probe's start to the run's, drains included */
  const char *why; /* when done without a rate: why not */
  /* The probe's first failure with words (the run's statistics, which keep such messages, start
   * after the probe): its error class (NULL: none), HTTP status (0: no answer) and message. */
  const char *error_class;
  long error_status;
  char error_message[VL_STATS_MESSAGE_MAX];
} vl_rateauto_t;

/* Sets up the record (the stages' histograms). Returns 0 or a VL_E* code. */
int vl_rateauto_init(vl_rateauto_t *a);
void vl_rateauto_free(vl_rateauto_t *a);

/* The last stage begun (stage[n - 1]) ended and drained: judges it, and returns the rate of the
 * next stage, or 0 when the probe is over (done set; chosen, knee, or why). */
double vl_rateauto_next(vl_rateauto_t *a);

/* How long an open-loop stage at rate admits: 25 floor latencies (at most 10 s), and at least
 * VL_RATEAUTO_STAGE_REQUESTS requests' worth at that rate, within 1 s to 30 s, so that its median
 * rests on many requests and its verdict on more than a handful. */
#define VL_RATEAUTO_STAGE_REQUESTS 20
uint64_t vl_rateauto_stage_us(const vl_rateauto_t *a, double rate);

/* The record as the summary's "rate_auto" object. Caller owns it. */
struct cJSON *vl_rateauto_json(const vl_rateauto_t *a);

/* The outcome in one line (no newline), e.g. "knee 250 req/s (kept up at 225), run at 70%: 175
 * req/s; 7 probe stages, 8.4 s". */
void vl_rateauto_words(const vl_rateauto_t *a, char *out, size_t n);

/* Whether a stage fell behind its load: its requests ok, over its time admitting, under 90% of its
 * target rate (sends that lagged, or failures), or its median latency over twice floor_ms (the
 * lowest median before it; 0 or less: none yet). A closed-loop stage has no rate to fall short
 * of. The one rule for a sweep's knee and --rate auto (rateauto.h). */
int vl_rateauto_behind(const vl_phase_result_t *p, double floor_ms);

/* Marks the knee of a sweep (sets .knee of one stage at most): the first stage that fell behind
 * (vl_rateauto_behind, against the lowest median of the stages before it). Needs two stages
 * before it. */
void vl_rateauto_mark_knee(vl_phase_result_t *ph, int n);

#endif
