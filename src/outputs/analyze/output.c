/* The analysis of one series as JSON, as text lines, and as the short label of a plot's legend. */
#include "vlmload/text.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void add_num(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

static cJSON *fit_json(const vl_fit_t *f, int with_r2) {
  cJSON *o = cJSON_CreateObject();
  add_num(o, "slope_per_1000", f->slope);
  cJSON *ci = cJSON_AddArrayToObject(o, "ci");
  cJSON_AddItemToArray(ci, isfinite(f->lo) ? cJSON_CreateNumber(f->lo) : cJSON_CreateNull());
  cJSON_AddItemToArray(ci, isfinite(f->hi) ? cJSON_CreateNumber(f->hi) : cJSON_CreateNull());
  add_num(o, "intercept", f->intercept);
  if (with_r2)
    add_num(o, "r2", f->r2);
  add_num(o, "lag1_autocorr", f->r1);
  add_num(o, "n_eff", f->n_eff);
  cJSON_AddNumberToObject(o, "n", (double)f->n);
  return o;
}

static cJSON *term_json(const vl_attr_term_t *t) {
  cJSON *o = cJSON_CreateObject();
  add_num(o, "value", t->value);
  cJSON *ci = cJSON_AddArrayToObject(o, "ci");
  cJSON_AddItemToArray(ci, isfinite(t->lo) ? cJSON_CreateNumber(t->lo) : cJSON_CreateNull());
  cJSON_AddItemToArray(ci, isfinite(t->hi) ? cJSON_CreateNumber(t->hi) : cJSON_CreateNull());
  if (t->dropped)
    cJSON_AddStringToObject(o, "dropped", t->dropped);
  else
    cJSON_AddNullToObject(o, "dropped");
  return o;
}

/* The attribution's object, or null when the series had no regressor or no fit was tried. */
static cJSON *attribution_json(const vl_attribution_t *at) {
  if (!at->tried)
    return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "per_1000_images_mb", term_json(&at->images));
  cJSON_AddItemToObject(o, "per_1000_text_requests_mb", term_json(&at->text));
  cJSON_AddItemToObject(o, "per_megapixel_mb", term_json(&at->mpix));
  cJSON_AddNumberToObject(o, "n", (double)at->n);
  add_num(o, "n_eff", at->n_eff);
  add_num(o, "lag1_autocorr", at->r1);
  add_num(o, "mean_image_megapixels", at->mean_mp);
  if (at->why)
    cJSON_AddStringToObject(o, "why_not", at->why);
  return o;
}

/* The jumps, the mechanism, where, its evidence and the runs that would decide. */
static void mechanism_json(cJSON *o, const vl_analysis_t *a) {
  cJSON *js = cJSON_AddArrayToObject(o, "jumps");
  for (size_t j = 0; j < a->n_jumps; j++) {
    const vl_jump_t *jp = &a->jumps[j];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, a->x_name, jp->x);
    add_num(e, "time_s", a->t0_ms > 0 && isfinite(jp->t_ms) ? (jp->t_ms - a->t0_ms) / 1000 : NAN);
    cJSON_AddNumberToObject(e, strcmp(a->unit, "MB") == 0 ? "mb" : "size", jp->size);
    if (jp->after)
      cJSON_AddStringToObject(e, "after", jp->after);
    else
      cJSON_AddNullToObject(e, "after");
    cJSON_AddItemToArray(js, e);
  }
  if (a->n_jumps) {
    cJSON *r = cJSON_AddObjectToObject(o, "after_jumps");
    cJSON_AddItemToObject(r, "fit", fit_json(&a->rest, 1));
    add_num(r, "growth", a->rest_growth);
  }
  if (a->cap_name) {
    cJSON *c = cJSON_AddObjectToObject(o, "cap");
    cJSON_AddStringToObject(c, "name", a->cap_name);
    add_num(c, "mb", a->cap);
    cJSON_AddBoolToObject(c, "levels_off_near", a->cap_near);
    add_num(c, "more", a->cap_more_x);
    add_num(c, "then_mb", a->cap_then);
  } else {
    cJSON_AddNullToObject(o, "cap");
  }
  cJSON_AddStringToObject(o, "mechanism", vl_analyze_mechanism_name(a->mechanism));
  cJSON *w = cJSON_AddObjectToObject(o, "where");
  cJSON_AddStringToObject(w, "kind", a->where_kind ? a->where_kind : "series");
  cJSON_AddStringToObject(w, "process", a->where_process);
  cJSON_AddStringToObject(w, "series", a->where_series);
  cJSON *ev = cJSON_AddArrayToObject(o, "evidence");
  for (size_t i = 0; i < a->n_evidence; i++)
    cJSON_AddItemToArray(ev, cJSON_CreateString(a->evidence[i]));
  cJSON *ex = cJSON_AddArrayToObject(o, "experiments");
  for (size_t i = 0; i < a->n_experiments; i++)
    cJSON_AddItemToArray(ex, cJSON_CreateString(a->experiments[i]));
}

cJSON *vl_analyze_json(const vl_analysis_t *a) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "series", a->name);
  cJSON_AddStringToObject(o, "unit", a->unit);
  cJSON_AddStringToObject(o, "x", a->x_name);
  cJSON_AddStringToObject(o, "verdict", vl_analyze_verdict_name(a->verdict));
  cJSON_AddStringToObject(o, "reason", a->reason);
  mechanism_json(o, a);
  cJSON_AddNumberToObject(o, "n", (double)a->n);
  add_num(o, "x_first", a->x_first);
  add_num(o, "x_last", a->x_last);
  add_num(o, "mean", a->y_mean);
  add_num(o, "min", a->y_min);
  add_num(o, "max", a->y_max);
  add_num(o, "first", a->y_first);
  add_num(o, "last", a->y_last);
  cJSON_AddItemToObject(o, "ols", fit_json(&a->ols, 1));
  cJSON_AddItemToObject(o, "theil_sen", fit_json(&a->ts, 0));
  if (a->x2_name) {
    cJSON *o2 = cJSON_AddObjectToObject(o, "second_axis");
    cJSON_AddStringToObject(o2, "x", a->x2_name);
    cJSON_AddItemToObject(o2, "ols", fit_json(&a->ols2, 1));
    cJSON_AddItemToObject(o2, "theil_sen", fit_json(&a->ts2, 0));
    cJSON *f2 = cJSON_AddObjectToObject(o2, "floor");
    cJSON_AddItemToObject(f2, "fit", fit_json(&a->floor2, 1));
  }
  cJSON *fl = cJSON_AddObjectToObject(o, "floor");
  cJSON_AddNumberToObject(fl, "flushes", (double)a->n_flushes);
  cJSON *ws = cJSON_AddArrayToObject(fl, "windows");
  for (size_t i = 0; i < a->n_windows; i++) {
    const vl_window_t *w = &a->windows[i];
    cJSON *wj = cJSON_CreateObject();
    add_num(wj, "x", w->x);
    if (a->x2_name)
      add_num(wj, "x2", w->x2);
    add_num(wj, "wall_ms", w->t_ms);
    add_num(wj, "floor", w->floor);
    add_num(wj, "x_at_floor", w->x_min);
    add_num(wj, "rise", w->rise);
    cJSON_AddNumberToObject(wj, "n", (double)w->n);
    cJSON_AddItemToArray(ws, wj);
  }
  cJSON_AddItemToObject(fl, "fit", fit_json(&a->floor, 1));
  cJSON *wi = cJSON_AddObjectToObject(o, "within_windows");
  cJSON_AddItemToObject(wi, "fit", fit_json(&a->within, 0));
  add_num(wi, "mean_span", a->window_span);
  add_num(wi, "mean_rise", a->rise_mean);
  cJSON *pk = cJSON_AddObjectToObject(o, "peak");
  add_num(pk, "value", a->y_max);
  add_num(pk, "x", a->peak_x);
  add_num(pk, "wall_ms", a->peak_t_ms);
  if (a->level_on) {
    cJSON *lv = cJSON_AddObjectToObject(o, "levels_off");
    cJSON_AddStringToObject(lv, "on", a->level_on);
    add_num(lv, "x", a->level_x);
    add_num(lv, "wall_ms", a->level_t_ms);
    add_num(lv, "s_into_run",
            a->t0_ms > 0 && isfinite(a->level_t_ms) ? (a->level_t_ms - a->t0_ms) / 1000 : NAN);
    add_num(lv, "level", a->level_y);
    add_num(lv, "rise", a->level_rise);
    cJSON_AddNumberToObject(lv, "blocks", (double)a->level_blocks);
    cJSON_AddBoolToObject(lv, "creeps", a->verdict == VL_VERDICT_LEVELS_OFF && a->level_creeps);
    cJSON_AddBoolToObject(lv, "grows_after", a->level_grows);
    cJSON_AddItemToObject(lv, "rise_fit", fit_json(&a->rise, 1));
    cJSON_AddItemToObject(lv, "first_half_fit", fit_json(&a->first_half, 1));
    cJSON_AddItemToObject(lv, "last_half_fit", fit_json(&a->last_half, 1));
    add_num(lv, "tail_x", a->tail_x);
    cJSON_AddItemToObject(lv, "tail_fit", fit_json(&a->tail, 1));
  }
  cJSON_AddItemToObject(o, "attribution", attribution_json(&a->attr));
  cJSON *st = cJSON_AddObjectToObject(o, "steps");
  cJSON_AddNumberToObject(st, "moved", (double)a->steps);
  cJSON_AddNumberToObject(st, "rose", (double)a->steps_up);
  add_num(st, "quarter_p_max", a->steps_p);
  add_num(o, "basis_range", a->basis_range);
  cJSON_AddStringToObject(o, "basis", a->basis);
  add_num(o, "growth", a->growth);
  if (isnan(a->more_x)) {
    cJSON_AddNullToObject(o, "run_longer");
  } else {
    cJSON *rl = cJSON_AddObjectToObject(o, "run_longer");
    add_num(rl, "more", a->more_x); /* null: not within VL_ANALYZE_LONGER_MAX times the run */
    add_num(rl, "more_windows", a->more_windows);
    add_num(rl, "more_minutes", a->more_s / 60);
  }
  cJSON *th = cJSON_AddObjectToObject(o, "thresholds");
  cJSON_AddNumberToObject(th, "level", a->opts.level);
  cJSON_AddNumberToObject(th, "min_growth_frac", a->opts.min_growth_frac);
  cJSON_AddNumberToObject(th, "min_growth_mb", a->floor_abs);
  add_num(th, "min_growth", a->threshold);
  cJSON_AddNumberToObject(th, "min_slope_per_1000", a->opts.min_slope);
  cJSON_AddNumberToObject(th, "min_points", (double)a->opts.min_points);
  cJSON_AddNumberToObject(th, "min_effective_samples", a->opts.min_eff);
  cJSON_AddBoolToObject(th, "autocorr", a->opts.autocorr);
  return o;
}

static void print_fit(FILE *f, const char *label, const vl_fit_t *fit, const char *u,
                      const char *xn, double pct) {
  fprintf(f, "  %-16s %+10.4g %s/1000 %s", label, fit->slope, u, xn);
  if (!isnan(fit->lo))
    fprintf(f, "  %g%% CI [%+.4g, %+.4g]", pct, fit->lo, fit->hi);
  if (!isnan(fit->r2))
    fprintf(f, "  R2 %.3f", fit->r2);
  if (fit->n_eff < (double)fit->n)
    fprintf(f, "  (lag-1 autocorr %.2f, n_eff %.0f of %zu)", fit->r1, fit->n_eff, fit->n);
  fputc('\n', f);
}

static void print_attribution(FILE *f, const vl_attribution_t *at, const char *u, double pct) {
  if (!at->tried)
    return;
  if (at->why) {
    fprintf(f, "  attribution: none (%s)\n", at->why);
    return;
  }
  fprintf(f, "  attribution (images, text-only requests and megapixels fitted together");
  if (isfinite(at->mean_mp))
    fprintf(f, "; images of the mean size, %.3g MP, pixels beyond it per megapixel", at->mean_mp);
  fprintf(f, "):\n");
  const vl_attr_term_t *t[] = {&at->images, &at->text, &at->mpix};
  const char *label[] = {"per 1000 images", "per 1000 text-only", "per megapixel"};
  for (int j = 0; j < 3; j++) {
    if (t[j]->dropped) {
      fprintf(f, "    %-18s left out: %s\n", label[j], t[j]->dropped);
      continue;
    }
    fprintf(f, "    %-18s %+10.4g %s", label[j], t[j]->value, u);
    if (isfinite(t[j]->lo) || isfinite(t[j]->hi))
      fprintf(f, "  %g%% CI [%+.4g, %+.4g]", pct, t[j]->lo, t[j]->hi);
    fputc('\n', f);
  }
  if (at->n_eff < (double)at->n)
    fprintf(f, "    (lag-1 autocorr %.2f, n_eff %.0f of %zu)\n", at->r1, at->n_eff, at->n);
}

/* "leak, in heap of server (heap_mb.server)" and its evidence, one line each. */
static void print_mechanism(FILE *f, const vl_analysis_t *a) {
  fprintf(f, "  mechanism: %s", vl_analyze_mechanism_name(a->mechanism));
  if (a->mechanism != VL_MECH_NONE && a->mechanism != VL_MECH_UNKNOWN && a->where_kind) {
    fprintf(f, ", in %s", a->where_kind);
    if (*a->where_process)
      fprintf(f, " of %s", a->where_process);
    if (strcmp(a->where_series, a->name) != 0)
      fprintf(f, " (%s)", a->where_series);
  }
  fputc('\n', f);
  for (size_t i = 0; i < a->n_evidence; i++)
    fprintf(f, "    - %s\n", a->evidence[i]);
  for (size_t i = 0; i < a->n_experiments; i++)
    fprintf(f, "    to decide: %s\n", a->experiments[i]);
}

void vl_analyze_print(FILE *f, const vl_analysis_t *a) {
  double pct = a->opts.level * 100;
  const char *u = a->unit, *xn = a->x_name;
  fprintf(f, "%s: %s -- %s\n", a->name, vl_analyze_verdict_name(a->verdict), a->reason);
  print_mechanism(f, a);
  if (a->n == 0)
    return;
  fprintf(f,
          "  %zu samples, %s %.0f..%.0f; %s mean %.6g, min %.6g, max %.6g, first %.6g, last %.6g\n",
          a->n, xn, a->x_first, a->x_last, u, a->y_mean, a->y_min, a->y_max, a->y_first, a->y_last);
  if (a->verdict == VL_VERDICT_INSUFFICIENT || a->verdict == VL_VERDICT_PEAK ||
      a->verdict == VL_VERDICT_NOT_MEMORY || a->verdict == VL_VERDICT_ENDED_EARLY)
    return;
  print_fit(f, "OLS", &a->ols, u, xn, pct);
  print_fit(f, "Theil-Sen", &a->ts, u, xn, pct);
  if (a->x2_name && !isnan(a->ols2.slope))
    print_fit(f, "OLS", &a->ols2, u, a->x2_name, pct);
  if (a->x2_name && !isnan(a->ts2.slope))
    print_fit(f, "Theil-Sen", &a->ts2, u, a->x2_name, pct);
  if (a->n_windows >= 3) {
    print_fit(f, "post-flush floor", &a->floor, u, xn, pct);
    if (a->x2_name && !isnan(a->floor2.slope))
      print_fit(f, "post-flush floor", &a->floor2, u, a->x2_name, pct);
  } else {
    fprintf(f, "  post-flush floor: %zu window%s after the warm-up, 3 needed for a slope\n",
            a->n_windows, a->n_windows == 1 ? "" : "s");
  }
  if (!isnan(a->within.slope)) {
    print_fit(f, "within windows", &a->within, u, xn, pct);
    fprintf(f, "  %-16s %+10.4g %s per window of %.0f %s (%zu flushes)\n", "mean rise",
            a->rise_mean, u, a->window_span, xn, a->n_flushes);
  }
  if (a->level_on && (a->verdict == VL_VERDICT_LEVELS_OFF || a->level_grows)) {
    print_fit(f, "rise to the knot", &a->rise, u, xn, pct);
    print_fit(f, a->tail_x == a->level_x ? "after the knot" : "last half", &a->tail, u, xn, pct);
    fprintf(f, "  %-16s %10.0f %s, level %.6g %s (%+.4g %s)\n", "levels off at", a->level_x, xn,
            a->level_y, u, a->level_rise, u);
  }
  if (a->steps)
    fprintf(f, "  %-16s %zu of %zu rose (%s); sign test in each quarter, largest p %.2g\n", "steps",
            a->steps_up, a->steps,
            a->basis && strcmp(a->basis, "floor") == 0 ? "floors" : "samples", a->steps_p);
  print_attribution(f, &a->attr, u, pct);
  char abs[64] = "", slope[96] = "";
  if (a->floor_abs > 0)
    snprintf(abs, sizeof(abs), "%g %s and %s", a->floor_abs, u,
             a->opts.min_slope > 0 ? "either >= " : ">= ");
  if (a->opts.min_slope > 0)
    snprintf(slope, sizeof(slope), " or at a slope >= %g %s/1000 %s", a->opts.min_slope, u, xn);
  fprintf(f,
          "  thresholds: material if growth over the run >= %s%g%% of the mean (%.4g %s)%s; %g%% "
          "intervals%s; at least %g effective samples\n",
          abs, a->opts.min_growth_frac * 100, a->opts.min_growth_frac * fabs(a->y_mean), u, slope,
          pct, a->opts.autocorr ? ", widened for autocorrelation" : "", a->opts.min_eff);
}

void vl_analyze_label(const vl_analysis_t *a, char *out, size_t n) {
  const char *u = a->unit ? a->unit : "MB", *xn = a->x_name ? a->x_name : "requests";
  const char *v = vl_analyze_verdict_name(a->verdict);
  int floor = a->basis && strcmp(a->basis, "floor") == 0;
  int tail = a->basis && strcmp(a->basis, "tail") == 0;
  const vl_fit_t *b = floor ? &a->floor : tail ? &a->tail : &a->ols;
  /* Figures in fixed notation: a legend reads "+0.00012 MB", never "+1.2e-04 MB". */
  char n1[64], n2[64];
  switch (a->verdict) {
  case VL_VERDICT_PEAK:
    snprintf(out, n, "peak %s %s", vl_text_num(n1, sizeof(n1), a->y_max, 5, 0), u);
    break;
  case VL_VERDICT_NOT_MEMORY:
    snprintf(out, n, "not memory, %s to %s", vl_text_num(n1, sizeof(n1), a->y_first, 5, 0),
             vl_text_num(n2, sizeof(n2), a->y_last, 5, 0));
    break;
  case VL_VERDICT_LEVELS_OFF:
    snprintf(out, n, "levels-off at %.0f %s (%s %s)", a->level_x, xn,
             vl_text_num(n1, sizeof(n1), a->level_rise, 3, 1), u);
    if (a->level_creeps) {
      size_t l = strlen(out);
      snprintf(out + l, n - l, ", creeps %s %s/1k",
               vl_text_num(n2, sizeof(n2), a->tail.slope, 2, 1), u);
    }
    break;
  case VL_VERDICT_INCONCLUSIVE:
    if (vl__analyze_fit_too_few(b, &a->opts))
      snprintf(out, n, "inconclusive (%.1f effective samples)", b->n_eff);
    else
      snprintf(out, n, "inconclusive (%s%s %s/1k %s, CI to %s %s/1k)", floor ? "floor " : "",
               vl_text_num(n1, sizeof(n1), b->slope, 3, 1), u, xn,
               vl_text_num(n2, sizeof(n2), b->hi, 3, 1), u);
    break;
  case VL_VERDICT_GROWS:
    if (tail) {
      snprintf(out, n, "%s, %s %s/1k %s after %.0f", v, vl_text_num(n1, sizeof(n1), b->slope, 3, 1),
               u, xn, a->level_x);
      break;
    }
    /* fall through */
  case VL_VERDICT_FLAT:
    snprintf(out, n, "%s, %s%s %s/1k %s", v, floor ? "floor " : "",
             vl_text_num(n1, sizeof(n1), b->slope, 3, 1), u, xn);
    break;
  case VL_VERDICT_SAWTOOTH:
    snprintf(out, n, "%s, %s %s/1k %s between flushes, floor %s %s/1k", v,
             vl_text_num(n1, sizeof(n1), a->within.slope, 3, 1), u, xn,
             vl_text_num(n2, sizeof(n2), b->slope, 3, 1), u);
    break;
  default:
    snprintf(out, n, "%s", v);
  }
}
