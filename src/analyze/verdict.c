/* Verdicts: what is material, the sign test of the steps, and the verdict of one analysed series
 * with the sentence that says why (the rules are listed in analyze.h, in the order they apply). */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Whether `slope` (per 1000 x) is big enough to matter over `span` of x. */
int vl__analyze_verdict_material(const vl_analysis_t *a, double slope, double span) {
  double g = slope * span / 1000;
  if (g > 0 && g >= a->threshold)
    return 1;
  return a->opts.min_slope > 0 && slope >= a->opts.min_slope;
}

/* " (53.2 s into the run)", or "" when the time is unknown. */
static void when(const vl_analysis_t *a, double t_ms, char *out, size_t n) {
  if (a->t0_ms > 0 && isfinite(t_ms))
    snprintf(out, n, " (%.1f s into the run)", (t_ms - a->t0_ms) / 1000);
  else
    *out = '\0';
}

/* P(X >= k) for X ~ Binomial(m, 1/2): how often a series with no direction rises at k or more of
 * m steps. */
static double sign_p(size_t k, size_t m) {
  double p = 0, lm = lgamma((double)m + 1) - (double)m * log(2);
  for (size_t j = k; j <= m; j++)
    p += exp(lm - lgamma((double)j + 1) - lgamma((double)(m - j) + 1));
  return fmin(p, 1);
}

/* a->steps, a->steps_up and a->steps_p over the n points of y (analyze.h). */
void vl__analyze_verdict_steps(vl_analysis_t *a, const double *y, size_t n) {
  a->steps = a->steps_up = 0;
  a->steps_p = NAN;
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    lo = fmin(lo, y[i]);
    hi = fmax(hi, y[i]);
  }
  a->basis_range = n ? hi - lo : NAN;
  if (n < 9)
    return;
  double worst = 0;
  for (size_t q = 0; q < 4; q++) {
    size_t up = 0, moved = 0;
    for (size_t i = q * (n - 1) / 4; i < (q + 1) * (n - 1) / 4; i++) {
      moved += y[i + 1] != y[i];
      up += y[i + 1] > y[i];
    }
    a->steps += moved;
    a->steps_up += up;
    worst = fmax(worst, sign_p(up, moved));
  }
  a->steps_p = worst;
}

/* The verdict for a high-water mark: its peak, no slope. */
void vl__analyze_verdict_peak(vl_analysis_t *a) {
  char at[64];
  when(a, a->peak_t_ms, at, sizeof(at));
  a->verdict = VL_VERDICT_PEAK;
  snprintf(a->reason, sizeof(a->reason),
           "a high-water mark only rises, so its slope tells no leak from a cache: peak %.6g %s, "
           "first reached at %.0f %s%s, %+.4g %s over the analysed run; judge the resident set",
           a->y_max, a->unit, a->peak_x, a->x_name, at, a->y_last - a->y_first, a->unit);
}

/* Appends to a growth's reason that it slows, when the last half of the run climbs significantly
 * slower than the first (the halves' intervals apart), both fitted as the levels-off fit is. */
static void add_slowing(vl_analysis_t *a) {
  size_t len = strlen(a->reason);
  const vl_fit_t *f = &a->first_half, *l = &a->last_half;
  if (!isfinite(a->level_y) || !(l->hi < f->lo) || len >= sizeof(a->reason))
    return;
  snprintf(a->reason + len, sizeof(a->reason) - len,
           "; it slows: %+.4g per 1000 over the first half (CI %+.4g to %+.4g), %+.4g (CI %+.4g "
           "to %+.4g) over the last",
           f->slope, f->lo, f->hi, l->slope, l->lo, l->hi);
}

void vl__analyze_verdict_set(vl_analysis_t *a) {
  const char *u = a->unit, *xn = a->x_name;
  double pct = a->opts.level * 100;
  double span = a->x_last - a->x_first;
  const vl_fit_t *basis = a->n_windows >= 3 && !isnan(a->floor.slope) ? &a->floor : &a->ols;
  a->basis = basis == &a->floor ? "floor" : "overall";
  const char *what = basis == &a->floor ? "post-flush floor" : "overall";
  const char *whose = basis == &a->floor ? "post-flush floor" : "memory"; /* what moves */
  a->growth = basis->slope * span / 1000;
  if (a->level_on && a->verdict == VL_VERDICT_LEVELS_OFF) {
    char at[64];
    when(a, a->level_t_ms, at, sizeof(at));
    snprintf(a->reason, sizeof(a->reason),
             "the %s rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g), %+.4g %s, then levels "
             "off at about %.0f %s%s: the last half moves %+.4g per 1000 (CI %+.4g to %+.4g)",
             strcmp(a->level_on, "floor") == 0 ? "post-flush floor" : "memory", a->rise.slope, u,
             xn, pct, a->rise.lo, a->rise.hi, a->level_rise, u, a->level_x, xn, at,
             a->last_half.slope, a->last_half.lo, a->last_half.hi);
    size_t len = strlen(a->reason);
    if (a->level_blocks && len < sizeof(a->reason))
      snprintf(a->reason + len, sizeof(a->reason) - len, " (fitted on the means of %zu blocks)",
               a->level_blocks);
    len = strlen(a->reason);
    if (a->level_creeps && len < sizeof(a->reason))
      snprintf(a->reason + len, sizeof(a->reason) - len,
               "; it still creeps by a material slope: a slow leak or a cache still filling, "
               "which a longer run tells apart");
    return;
  }
  /* Too few effective samples about a line, but a rise in every quarter of the run that a series
   * without direction would make rarely: growth, though not at one constant slope. */
  if (vl__analyze_fit_too_few(basis, &a->opts) && a->steps_p <= 1 - a->opts.level &&
      basis->lo > 0 && vl__analyze_verdict_material(a, basis->slope, span)) {
    a->verdict = VL_VERDICT_GROWS;
    snprintf(a->reason, sizeof(a->reason),
             "the %s rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g): %+.4g %s over the run; "
             "not at one slope (%.1f effective samples of %zu about the line), but at %zu of its "
             "%zu steps that moved, and in each quarter of the run (sign test, p <= %.2g)",
             whose, basis->slope, u, xn, pct, basis->lo, basis->hi, a->growth, u, basis->n_eff,
             basis->n, a->steps_up, a->steps, a->steps_p);
    add_slowing(a);
    return;
  }
  /* Too few effective samples, but a series that never moved by as much as counts: whatever its
   * line, no material growth fits between its smallest and largest value. */
  if (vl__analyze_fit_too_few(basis, &a->opts) && a->basis_range < a->threshold &&
      !(a->opts.min_slope > 0 && a->basis_range * 1000 / span >= a->opts.min_slope)) {
    a->verdict = VL_VERDICT_FLAT;
    snprintf(a->reason, sizeof(a->reason),
             "no material growth: the %s moved %.4g %s in all, smallest to largest, over %.0f %s, "
             "less than the %.4g %s that counts; its slope %+.4g %s per 1000 %s rests on %.1f "
             "effective samples of %zu",
             whose, a->basis_range, u, span, xn, a->threshold, u, basis->slope, u, xn, basis->n_eff,
             basis->n);
    return;
  }
  if (vl__analyze_fit_too_few(basis, &a->opts)) {
    a->verdict = VL_VERDICT_INCONCLUSIVE;
    snprintf(a->reason, sizeof(a->reason),
             "%.1f effective samples of %zu (lag-1 autocorrelation %.2f); need %g: the %s slope "
             "%+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g) can show "
             "neither growth nor its absence; run longer, or flush more often",
             basis->n_eff, basis->n, basis->r1, a->opts.min_eff, what, basis->slope, u, xn, pct,
             basis->lo, basis->hi);
    return;
  }
  if (basis->lo > 0 && vl__analyze_verdict_material(a, basis->slope, span)) {
    a->verdict = VL_VERDICT_GROWS;
    if (basis == &a->floor)
      snprintf(a->reason, sizeof(a->reason),
               "the post-flush floor rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g) over %zu "
               "windows: %+.4g %s over the run",
               basis->slope, u, xn, pct, basis->lo, basis->hi, a->n_windows, a->growth, u);
    else
      snprintf(a->reason, sizeof(a->reason),
               "memory rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g): %+.4g %s over the run; "
               "with %zu post-flush windows (3 needed) a cache that fills cannot be told apart",
               basis->slope, u, xn, pct, basis->lo, basis->hi, a->growth, u, a->n_windows);
    add_slowing(a);
    return;
  }
  /* Neither flat nor a sawtooth that returns may be said while the interval admits growth of T
   * over the run (the slope rule alone would ask a short run for a needlessly tight interval). */
  if (basis->hi * span / 1000 > 0 && basis->hi * span / 1000 >= a->threshold) {
    a->verdict = VL_VERDICT_INCONCLUSIVE;
    snprintf(a->reason, sizeof(a->reason),
             "the %s slope is %+.4g %s per 1000 %s, but its %g%% CI (%+.4g to %+.4g) admits "
             "material growth (up to %+.4g %s over the run; %.4g counts): run longer",
             what, basis->slope, u, xn, pct, basis->lo, basis->hi, basis->hi * span / 1000, u,
             a->threshold);
    return;
  }
  if (a->n_flushes >= 1 && a->within.lo > 0 &&
      vl__analyze_verdict_material(a, a->within.slope, a->window_span)) {
    a->verdict = VL_VERDICT_SAWTOOTH;
    snprintf(a->reason, sizeof(a->reason),
             "memory climbs %+.4g %s per 1000 %s between flushes (%+.4g %s per window) and "
             "returns: the %s slope is %+.4g (%g%% CI %+.4g to %+.4g), %+.4g %s over the run",
             a->within.slope, u, xn, a->rise_mean, u, what, basis->slope, pct, basis->lo, basis->hi,
             a->growth, u);
    return;
  }
  a->verdict = VL_VERDICT_FLAT;
  snprintf(a->reason, sizeof(a->reason),
           "no material growth: the %s slope is %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g), "
           "%+.4g %s over the run",
           what, basis->slope, u, xn, pct, basis->lo, basis->hi, a->growth, u);
}
