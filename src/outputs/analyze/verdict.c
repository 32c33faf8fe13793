/* Verdicts: what is material, the sign test of the steps, and the verdict of one analysed series
 * with the sentence that says why (the rules are listed in analyze.h, in the order they apply). */
#include "internal.h"
#include "vlmload/dist.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int vl__analyze_verdict_material(const vl_analysis_t *a, double slope, double span) {
  double g = slope * span / 1000;
  if (!(g > 0) || g < a->floor_abs)
    return 0;
  if (g >= a->threshold)
    return 1;
  return a->opts.min_slope > 0 && slope >= a->opts.min_slope;
}

/* Whether memory climbs between flushes by enough to call it a sawtooth: its mean rise per window
 * at least min_growth_frac of the mean, or the within-window slope at least min_slope. The
 * absolute floor is for growth over the run, which the scatter of the floors blurs; the climb is
 * fitted inside every window at once. */
static int climbs(const vl_analysis_t *a) {
  double g = a->rise_mean;
  if (!(g > 0))
    return 0;
  return g >= a->opts.min_growth_frac * fabs(a->y_mean) ||
         (a->opts.min_slope > 0 && a->within.slope >= a->opts.min_slope);
}

/* " (53.2 s into the run)", or "" when the time is unknown. */
static void when(const vl_analysis_t *a, double t_ms, char *out, size_t n) {
  if (a->t0_ms > 0 && isfinite(t_ms))
    snprintf(out, n, " (%.1f s into the run)", (t_ms - a->t0_ms) / 1000);
  else
    *out = '\0';
}

/* "1 request", "250 requests": a count of x in words (x_name is a plural). */
static void count_of(const vl_analysis_t *a, double v, char *out, size_t n) {
  const char *xn = a->x_name;
  size_t len = strlen(xn);
  if (v == 1 && len > 1 && xn[len - 1] == 's')
    snprintf(out, n, "1 %.*s", (int)(len - 1), xn);
  else
    snprintf(out, n, "%.0f %s", v, xn);
}

/* An interval as the text says it: "95% CI -1.2 to +3.4", or "an unbounded interval". */
static void interval(const vl_analysis_t *a, const vl_fit_t *f, char *out, size_t n) {
  if (isfinite(f->lo) && isfinite(f->hi))
    snprintf(out, n, "%g%% CI %+.4g to %+.4g", a->opts.level * 100, f->lo, f->hi);
  else
    snprintf(out, n, "an unbounded interval");
}

/* v rounded to two significant figures. */
static double round2(double v) {
  if (!(v > 0) || !isfinite(v))
    return v;
  double p = pow(10, floor(log10(v)) - 1);
  return round(v / p) * p;
}

/* Whether the basis fit b, projected to a run f times as long (f >= 1), would decide nine times
 * in ten were the slope `slope`: the slope's standard error shrinks as the span to the power -3/2
 * (the degrees of freedom grow with it), and the next run's estimate lands within 1.28 of them of
 * the slope nine times in ten; then either its interval's upper bound admits no growth of T over
 * the longer span, or its lower bound is above 0 and the slope material over it. */
static int decides(const vl_analysis_t *a, const vl_fit_t *b, double slope, double span, double f) {
  double p = 0.5 + a->opts.level / 2, df = b->n_eff - 2;
  double se = (b->hi - b->slope) / vl_dist_tquantile(p, df) * pow(f, -1.5);
  double h = (vl_dist_tquantile(p, df * f) + 1.2816) * se, s = span * f;
  if ((slope + h) * s / 1000 < a->threshold)
    return 1;
  return slope - h > 0 && vl__analyze_verdict_material(a, slope, s);
}

/* a->more_x, more_windows and more_s for an inconclusive basis fit b (analyze.h): with too few
 * effective samples, the run that would give min_eff of them at the rate these came; otherwise
 * the shortest run, up to VL_ANALYZE_LONGER_MAX times this one, that would decide nine times in
 * ten whether the slope is what this run measured or, unless its interval rules it out, 0. */
static void estimate_longer(vl_analysis_t *a, const vl_fit_t *b, double span, int few) {
  double f = NAN;
  if (few) {
    if (b->n_eff > 0)
      f = fmax(1, a->opts.min_eff / b->n_eff);
  } else if (b->n_eff > 2 && isfinite(b->hi)) {
    f = INFINITY;
    /* The slope this run measured, and no slope at all unless the interval rules that out. */
    for (double g = 1.02; g <= VL_ANALYZE_LONGER_MAX; g *= 1.02)
      if (decides(a, b, b->slope, span, g) && (b->lo > 0 || decides(a, b, 0, span, g))) {
        f = g;
        break;
      }
  }
  a->more_x = isnan(f) ? NAN : isinf(f) ? INFINITY : round2(span * (f - 1));
  if (!isfinite(a->more_x))
    return;
  double secs = (a->t_last_ms - a->t_first_ms) / 1000;
  if (secs > 0)
    a->more_s = a->more_x * secs / span;
  if (b == &a->floor && a->n_windows >= 2) {
    double period = (a->windows[a->n_windows - 1].x - a->windows[0].x) / (double)(a->n_windows - 1);
    if (period > 0)
      a->more_windows = ceil(a->more_x / period);
  }
}

/* Appends to the reason what a->more_* say: how much longer to run. */
static void add_longer(vl_analysis_t *a, int few) {
  size_t len = strlen(a->reason);
  if (len >= sizeof(a->reason) || isnan(a->more_x))
    return;
  char *p = a->reason + len;
  size_t room = sizeof(a->reason) - len;
  if (isinf(a->more_x)) {
    snprintf(p, room,
             "; at this noise no run up to %g times as long would narrow it enough: sample more "
             "often%s",
             VL_ANALYZE_LONGER_MAX, a->n_flushes ? ", or flush more often" : "");
    return;
  }
  char windows[64] = "", pace[96] = "";
  if (isfinite(a->more_windows))
    snprintf(windows, sizeof(windows), " (%.0f more flush window%s)", a->more_windows,
             a->more_windows == 1 ? "" : "s");
  if (isfinite(a->more_s)) {
    double min = a->more_s / 60;
    snprintf(pace, sizeof(pace), ", %.*f min at the run's %.3g %s/s,", min < 10 ? 1 : 0, min,
             a->more_x / a->more_s, a->x_name);
  }
  snprintf(p, room, "; run longer: about %.0f more %s%s%s would %s", a->more_x, a->x_name, windows,
           pace,
           few ? "give enough, were they to follow one another as these do"
               : "narrow the interval enough to decide");
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

void vl__analyze_verdict_peak(vl_analysis_t *a) {
  char at[64], where[96];
  when(a, a->peak_t_ms, at, sizeof(at));
  if (a->peak_x <= a->x_first) {
    snprintf(where, sizeof(where), "at the first sample%s", at);
  } else {
    char x[64];
    count_of(a, a->peak_x, x, sizeof(x));
    snprintf(where, sizeof(where), "first at %s%s", x, at);
  }
  a->verdict = VL_VERDICT_PEAK;
  snprintf(a->reason, sizeof(a->reason),
           "a high-water mark only rises, so its slope tells no leak from a cache: peak %.6g %s, "
           "reached %s, %+.4g %s over the analysed run; judge the resident set",
           a->y_max, a->unit, where, a->y_last - a->y_first, a->unit);
}

/* Appends to a growth's reason that it slows, when the last half of the run climbs significantly
 * slower than the first (the halves' intervals apart), both fitted as the levels-off fit is. */
static void add_slowing(vl_analysis_t *a) {
  size_t len = strlen(a->reason);
  const vl_fit_t *f = &a->first_half, *l = &a->last_half;
  if (!isfinite(a->level_y) || !(l->hi < f->lo) || len >= sizeof(a->reason))
    return;
  snprintf(a->reason + len, sizeof(a->reason) - len,
           "; it slows: %+.4g %s per 1000 %s over the first half (CI %+.4g to %+.4g), %+.4g "
           "(CI %+.4g to %+.4g) over the last",
           f->slope, a->unit, a->x_name, f->lo, f->hi, l->slope, l->lo, l->hi);
}

/* The reason of a series that levels off. */
static void say_levels_off(vl_analysis_t *a) {
  const char *u = a->unit, *xn = a->x_name;
  char at[64], ci[64], tail[64];
  when(a, a->level_t_ms, at, sizeof(at));
  interval(a, &a->tail, ci, sizeof(ci));
  count_of(a, a->x_last - a->tail_x, tail, sizeof(tail));
  snprintf(a->reason, sizeof(a->reason),
           "the %s rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g), %+.4g %s, then levels "
           "off at about %.0f %s%s: the last %s move %+.4g %s per 1000 %s (%s)",
           strcmp(a->level_on, "floor") == 0 ? "post-flush floor" : "memory", a->rise.slope, u, xn,
           a->opts.level * 100, a->rise.lo, a->rise.hi, a->level_rise, u, a->level_x, xn, at, tail,
           a->tail.slope, u, xn, ci);
  size_t len = strlen(a->reason);
  if (a->level_blocks && len < sizeof(a->reason))
    snprintf(a->reason + len, sizeof(a->reason) - len, " (fitted on the means of %zu blocks)",
             a->level_blocks);
  len = strlen(a->reason);
  if (a->level_creeps && len < sizeof(a->reason))
    snprintf(a->reason + len, sizeof(a->reason) - len,
             "; it still creeps by a material slope: a slow leak or a cache still filling, "
             "which a longer run tells apart");
}

/* The reason of a basis fit with too few effective samples: what its samples lack. */
static void say_too_few(vl_analysis_t *a, const vl_fit_t *b, const char *whose) {
  const char *u = a->unit, *xn = a->x_name;
  char ci[64];
  interval(a, b, ci, sizeof(ci));
  snprintf(a->reason, sizeof(a->reason),
           "%.1f effective samples of %zu, %g needed: the %s strays from one line in long runs "
           "of one sign (lag-1 autocorrelation of its residuals %.2f), as memory that moves in "
           "steps or along a curve does, so its slope %+.4g %s per 1000 %s has %s%s and can show "
           "neither growth nor its absence",
           b->n_eff, b->n, a->opts.min_eff, whose, b->r1, b->slope, u, xn, ci,
           isfinite(b->lo) ? "" : " (an interval needs more than 2)");
  estimate_longer(a, b, a->x_last - a->x_first, 1);
  add_longer(a, 1);
}

void vl__analyze_verdict_set(vl_analysis_t *a) {
  const char *u = a->unit, *xn = a->x_name;
  double pct = a->opts.level * 100;
  double span = a->x_last - a->x_first;
  const vl_fit_t *basis = a->n_windows >= 3 && !isnan(a->floor.slope) ? &a->floor : &a->ols;
  a->basis = basis == &a->floor ? "floor" : "overall";
  const char *what = basis == &a->floor ? "post-flush floor" : "overall";
  const char *whose = basis == &a->floor ? "post-flush floor" : "memory"; /* what moves */
  int few = vl__analyze_fit_too_few(basis, &a->opts);
  a->growth = basis->slope * span / 1000;
  if (a->level_on && a->verdict == VL_VERDICT_LEVELS_OFF) {
    say_levels_off(a);
    return;
  }
  /* A rise that slowed at a knot and then grew on: judged after the knot, where the rise at the
   * start (a warm-up) no longer hides or inflates it. */
  if (a->level_on && a->level_grows) {
    char at[64], tail[64], ci[64];
    when(a, a->level_t_ms, at, sizeof(at));
    count_of(a, a->x_last - a->tail_x, tail, sizeof(tail));
    interval(a, &a->tail, ci, sizeof(ci));
    a->verdict = VL_VERDICT_GROWS;
    a->basis = "tail";
    a->growth = a->tail.slope * (a->x_last - a->tail_x) / 1000;
    snprintf(a->reason, sizeof(a->reason),
             "the %s rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g), %+.4g %s, to about "
             "%.0f %s%s, and grows on after it: %+.4g %s per 1000 %s (%s), %+.4g %s over the last "
             "%s",
             strcmp(a->level_on, "floor") == 0 ? "post-flush floor" : "memory", a->rise.slope, u,
             xn, pct, a->rise.lo, a->rise.hi, a->level_rise, u, a->level_x, xn, at, a->tail.slope,
             u, xn, ci, a->growth, u, tail);
    return;
  }
  /* Too few effective samples about a line, but a rise in every quarter of the run that a series
   * without direction would make rarely: growth, though not at one constant slope. */
  if (few && a->steps_p <= 1 - a->opts.level && basis->lo > 0 &&
      vl__analyze_verdict_material(a, basis->slope, span)) {
    a->verdict = VL_VERDICT_GROWS;
    snprintf(a->reason, sizeof(a->reason),
             "the %s rises %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g): %+.4g %s over the run; "
             "not at one slope (%.1f effective samples of %zu about the line), but at %zu of its "
             "%zu steps that moved, and in each quarter of the run (sign test, p %.2g at most)",
             whose, basis->slope, u, xn, pct, basis->lo, basis->hi, a->growth, u, basis->n_eff,
             basis->n, a->steps_up, a->steps, a->steps_p);
    add_slowing(a);
    return;
  }
  /* A series that never moved by as much as counts, smallest to largest: whatever its line and
   * however wide its interval (too few effective samples, or a short run's few windows), no
   * material growth fits between its smallest and largest value. */
  if ((few || (basis->hi * span / 1000 >= a->threshold && !(basis->lo > 0))) &&
      !vl__analyze_verdict_material(a, a->basis_range * 1000 / span, span)) {
    a->verdict = VL_VERDICT_FLAT;
    snprintf(a->reason, sizeof(a->reason),
             "no material growth: the %s moved %.4g %s in all, smallest to largest, over %.0f %s, "
             "less than the %.4g %s that counts; its slope %+.4g %s per 1000 %s (%g%% CI %+.4g "
             "to %+.4g) rests on %.1f effective samples of %zu",
             whose, a->basis_range, u, span, xn, a->threshold, u, basis->slope, u, xn, pct,
             basis->lo, basis->hi, basis->n_eff, basis->n);
    return;
  }
  if (few) {
    a->verdict = VL_VERDICT_INCONCLUSIVE;
    say_too_few(a, basis, whose);
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
             "material growth (up to %+.4g %s over the run; %.4g %s counts)",
             what, basis->slope, u, xn, pct, basis->lo, basis->hi, basis->hi * span / 1000, u,
             a->threshold, u);
    estimate_longer(a, basis, span, 0);
    add_longer(a, 0);
    return;
  }
  if (a->n_flushes >= 1 && a->within.lo > 0 && climbs(a)) {
    a->verdict = VL_VERDICT_SAWTOOTH;
    snprintf(a->reason, sizeof(a->reason),
             "memory climbs %+.4g %s per 1000 %s between flushes (%+.4g %s per window) and "
             "returns: the %s slope is %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g), %+.4g %s "
             "over the run",
             a->within.slope, u, xn, a->rise_mean, u, what, basis->slope, u, xn, pct, basis->lo,
             basis->hi, a->growth, u);
    return;
  }
  a->verdict = VL_VERDICT_FLAT;
  snprintf(a->reason, sizeof(a->reason),
           "no material growth: the %s slope is %+.4g %s per 1000 %s (%g%% CI %+.4g to %+.4g), "
           "%+.4g %s over the run",
           what, basis->slope, u, xn, pct, basis->lo, basis->hi, a->growth, u);
}
