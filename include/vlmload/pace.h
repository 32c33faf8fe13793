/* Arrival schedule for the open loop.
 *
 * Arrival times are absolute: t_k = t_0 + shift + (g_1 + ... + g_k), with gaps g drawn from the
 * chosen process at mean 1/rate. A late tick never moves later arrivals, so the achieved rate does
 * not drift; `shift` lets a pause (a drained flush) push the whole remaining schedule back.
 */
#ifndef VLMLOAD_PACE_H
#define VLMLOAD_PACE_H

#include "vlmload/rng.h"

#include <stdint.h>

typedef enum {
  VL_ARRIVAL_CONSTANT = 0, /* evenly spaced */
  VL_ARRIVAL_POISSON,      /* exponential gaps (CV 1) */
  VL_ARRIVAL_GAMMA,        /* gamma gaps with a chosen coefficient of variation */
  VL_ARRIVAL_TRACE,        /* the times a trace gives (vl_pace_trace) */
} vl_arrival_kind_t;

typedef struct vl_pace_s {
  vl_arrival_kind_t kind;
  double rate;  /* arrivals per second, > 0 */
  double cv;    /* gamma only: coefficient of variation of the gaps */
  double shape; /* gamma shape, 1/cv^2 */
  vl_rng_t rng;
  double offset_ns; /* place of the next arrival after t0, before any shift */
  uint64_t planned; /* poisson with a known count: arrivals spread over planned / rate */
  double u;         /* that spread: the last uniform order statistic drawn, in [0, 1) */
  /* A linear ramp from rate to rate_end over ramp_s seconds (then rate_end): arrivals are drawn
   * as unit gaps of the cumulative intensity L and placed at the time where it reaches L. */
  int ramp;
  double rate_end, ramp_s, level;
  uint64_t t0_ns; /* start of the schedule */
  uint64_t shift_ns;
  uint64_t next_ns; /* absolute time of the next arrival */
  uint64_t count;   /* arrivals taken so far */
  /* A replayed trace: arrival k at t0 + shift + at_ms[k] / speed; none after the last. */
  const double *at_ms;
  uint64_t n_at;
  double speed;
} vl_pace_t;

/* Parses "constant", "poisson" or "gamma:CV" (CV > 0). Returns 0 or VL_EINVAL. */
int vl_pace_parse(const char *s, vl_arrival_kind_t *kind, double *cv);

/* Starts a schedule at t0_ns. Constant arrivals start at t0; poisson and gamma ones a random gap
 * later.
 *
 * With planned > 0, Poisson arrivals are drawn as a Poisson process conditioned on `planned`
 * arrivals in planned / rate seconds: the sorted uniform points of that window, generated in order
 * one at a time. Gaps stay exponential (CV 1), and a run of that many requests takes the intended
 * time exactly instead of drifting by the sampling error of the sum of its gaps (2% at 2000
 * arrivals). Past `planned` arrivals, gaps are plain exponential. */
void vl_pace_init(vl_pace_t *p, vl_arrival_kind_t kind, double rate, double cv, uint64_t seed,
                  uint64_t t0_ns, uint64_t planned);

/* Makes the schedule a linear ramp from its rate to rate_end over ramp_s seconds (rate_end
 * afterwards). Call right after vl_pace_init. */
void vl_pace_ramp(vl_pace_t *p, double rate_end, double ramp_s);

/* Makes the schedule a trace's: arrival k (k < n) at t0 + at_ms[k] * 1e6 / speed ns (at_ms
 * ascending, borrowed: it must outlive the schedule), each on the absolute timeline, so a late
 * tick never moves the rows after it. Past the last row, the next arrival is UINT64_MAX (never).
 * Call right after vl_pace_init. */
void vl_pace_trace(vl_pace_t *p, const double *at_ms, uint64_t n, double speed);

/* Time of the next arrival. */
static inline uint64_t vl_pace_next(const vl_pace_t *p) {
  return p->next_ns;
}

/* Consumes the next arrival and draws the one after it. Returns the consumed arrival's time. */
uint64_t vl_pace_take(vl_pace_t *p);

/* Pushes every arrival not yet taken back by ns. */
void vl_pace_shift(vl_pace_t *p, uint64_t ns);

#endif
