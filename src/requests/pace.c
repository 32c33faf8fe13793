#include "vlmload/pace.h"
#include "vlmload/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int vl_pace_parse(const char *s, vl_arrival_kind_t *kind, double *cv) {
  if (strcmp(s, "constant") == 0 || strcmp(s, "uniform") == 0) {
    *kind = VL_ARRIVAL_CONSTANT;
    *cv = 0;
    return 0;
  }
  if (strcmp(s, "poisson") == 0) {
    *kind = VL_ARRIVAL_POISSON;
    *cv = 1;
    return 0;
  }
  if (strncmp(s, "gamma:", 6) == 0) {
    char *end;
    errno = 0;
    double v = strtod(s + 6, &end);
    if (end == s + 6 || *end || errno || !isfinite(v) || v <= 0 || v > 100)
      return VL_EINVAL;
    *kind = VL_ARRIVAL_GAMMA;
    *cv = v;
    return 0;
  }
  return VL_EINVAL;
}

/* Next gap after the arrival at offset_ns, in nanoseconds. */
static double gap_ns(vl_pace_t *p) {
  double mean = 1e9 / p->rate;
  switch (p->kind) {
  case VL_ARRIVAL_POISSON:
    if (p->count < p->planned) {
      /* Ascending uniform order statistics of `planned` points: the next one is the minimum of
       * the remaining planned - count points in (u, 1). */
      double left = (double)(p->planned - p->count);
      double u = p->u - expm1(log1p(-vl_rng_double(&p->rng)) / left) * (1.0 - p->u);
      double gap = (u - p->u) * (double)p->planned * mean;
      p->u = u;
      return gap;
    }
    return mean * vl_rng_exp(&p->rng);
  case VL_ARRIVAL_GAMMA:
    /* Gamma(shape) has mean shape; scale it to mean 1. */
    return mean * vl_rng_gamma(&p->rng, p->shape) / p->shape;
  case VL_ARRIVAL_CONSTANT:
  default:
    return mean;
  }
}

void vl_pace_init(vl_pace_t *p, vl_arrival_kind_t kind, double rate, double cv, uint64_t seed,
                  uint64_t t0_ns, uint64_t planned) {
  memset(p, 0, sizeof(*p));
  p->kind = kind;
  p->rate = rate;
  p->cv = cv;
  p->shape = cv > 0 ? 1.0 / (cv * cv) : 1.0;
  p->planned = kind == VL_ARRIVAL_POISSON ? planned : 0;
  vl_rng_init(&p->rng, seed, 0x9ace);
  p->t0_ns = t0_ns;
  p->offset_ns = kind == VL_ARRIVAL_CONSTANT ? 0 : gap_ns(p);
  p->next_ns = t0_ns + (uint64_t)llround(p->offset_ns);
}

/* A gap of the process at rate 1. */
static double unit_gap(vl_pace_t *p) {
  switch (p->kind) {
  case VL_ARRIVAL_POISSON:
    return vl_rng_exp(&p->rng);
  case VL_ARRIVAL_GAMMA:
    return vl_rng_gamma(&p->rng, p->shape) / p->shape;
  case VL_ARRIVAL_CONSTANT:
  default:
    return 1.0;
  }
}

/* Seconds after t0 at which the ramp's cumulative intensity, r0 t + (r1 - r0) t^2 / (2 T) up to T
 * and r1 per second after it, reaches level. */
static double ramp_time(const vl_pace_t *p, double level) {
  double r0 = p->rate, r1 = p->rate_end, T = p->ramp_s;
  double at_end = (r0 + r1) / 2 * T;
  if (level > at_end)
    return r1 > 0 ? T + (level - at_end) / r1 : 1e12;
  double a = (r1 - r0) / (2 * T);
  /* The root of a t^2 + r0 t - level = 0 in a form that stays exact as a goes to 0. */
  double disc = r0 * r0 + 4 * a * level;
  return 2 * level / (r0 + sqrt(disc > 0 ? disc : 0));
}

void vl_pace_ramp(vl_pace_t *p, double rate_end, double ramp_s) {
  p->ramp = 1;
  p->rate_end = rate_end;
  p->ramp_s = ramp_s > 0 ? ramp_s : 1e-9;
  p->planned = 0;
  p->level = p->kind == VL_ARRIVAL_CONSTANT ? 0 : unit_gap(p);
  p->offset_ns = ramp_time(p, p->level) * 1e9;
  p->next_ns = p->t0_ns + p->shift_ns + (uint64_t)llround(p->offset_ns);
}

/* Trace replay (issue 16, item 7): each arrival at its row's offset, scaled by the speed. */
static uint64_t trace_next(const vl_pace_t *p) {
  if (p->count >= p->n_at)
    return UINT64_MAX;
  return p->t0_ns + p->shift_ns + (uint64_t)llround(p->at_ms[p->count] * 1e6 / p->speed);
}

void vl_pace_trace(vl_pace_t *p, const double *at_ms, uint64_t n, double speed) {
  p->kind = VL_ARRIVAL_TRACE;
  p->at_ms = at_ms;
  p->n_at = n;
  p->speed = speed > 0 ? speed : 1;
  p->planned = 0;
  p->count = 0;
  p->next_ns = trace_next(p);
}

uint64_t vl_pace_take(vl_pace_t *p) {
  uint64_t t = p->next_ns;
  p->count++;
  if (p->kind == VL_ARRIVAL_TRACE) {
    p->next_ns = trace_next(p);
    return t;
  }
  if (p->ramp) {
    p->level += unit_gap(p);
    p->offset_ns = ramp_time(p, p->level) * 1e9;
    p->next_ns = p->t0_ns + p->shift_ns + (uint64_t)llround(p->offset_ns);
    return t;
  }
  p->offset_ns += gap_ns(p);
  p->next_ns = p->t0_ns + p->shift_ns + (uint64_t)llround(p->offset_ns);
  return t;
}

void vl_pace_shift(vl_pace_t *p, uint64_t ns) {
  p->shift_ns += ns;
  if (p->next_ns != UINT64_MAX)
    p->next_ns += ns;
}
