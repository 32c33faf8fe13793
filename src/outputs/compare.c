/* The comparison of two runs' figures (compare.h). */
#include "vlmload/compare.h"
#include "vlmload/common.h"
#include "vlmload/rng.h"
#include "vlmload/stats.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vl_compare_opts_init(vl_compare_opts_t *o) {
  o->min_change = 0.05;
  o->min_error_change = 0.001;
  o->min_slope_change = 1.0;
  o->level = 0.95;
  o->reps = 2000;
  o->seed = 1;
}

const char *vl_compare_word_name(vl_compare_word_t w) {
  switch (w) {
  case VL_COMPARE_BETTER:
    return "better";
  case VL_COMPARE_WORSE:
    return "worse";
  case VL_COMPARE_CHANGED:
    return "changed";
  default:
    return "same";
  }
}

vl_compare_word_t vl_compare_judge(double diff, double lo, double hi, double material,
                                   int lower_better) {
  if (!isfinite(diff) || fabs(diff) < material || diff == 0)
    return VL_COMPARE_SAME;
  if (isfinite(lo) && isfinite(hi) && lo <= 0 && hi >= 0)
    return VL_COMPARE_SAME;
  int lower = diff < 0;
  return lower == (lower_better == 1) ? VL_COMPARE_BETTER : VL_COMPARE_WORSE;
}

double vl_compare_z(double level) {
  /* Bisection on the normal tail: 0.5 * erfc(z / sqrt 2) = (1 - level) / 2. */
  double tail = (1 - level) / 2, lo = 0, hi = 40;
  if (!(tail > 0 && tail < 0.5))
    return NAN;
  for (int i = 0; i < 200; i++) {
    double mid = (lo + hi) / 2;
    if (0.5 * erfc(mid / sqrt(2)) > tail)
      lo = mid;
    else
      hi = mid;
  }
  return (lo + hi) / 2;
}

/* A histogram's non-empty buckets as a cumulative table: the rank of the last value in each, and
 * the value it stands for (as vl_hist_percentile gives it: the bucket's highest, capped at max). */
typedef struct {
  uint64_t *cum;
  double *value;
  int n;
  uint64_t total;
} cumtab_t;

static void cumtab_build(cumtab_t *t, const vl_hist_t *h) {
  t->cum = vl_xcalloc((size_t)h->counts_len + 1, sizeof(uint64_t));
  t->value = vl_xcalloc((size_t)h->counts_len + 1, sizeof(double));
  t->n = 0;
  uint64_t run = 0;
  int64_t max = vl_hist_max(h);
  for (int i = 0; i < h->counts_len; i++) {
    if (!h->counts[i])
      continue;
    run += h->counts[i];
    int64_t v = vl_hist_bucket_high(h, i);
    t->cum[t->n] = run;
    t->value[t->n++] = (double)(v < max ? v : max);
  }
  t->total = run;
}

/* The value of the r-th smallest value (1-based). */
static double cumtab_at(const cumtab_t *t, uint64_t r) {
  int lo = 0, hi = t->n - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->cum[mid] >= r)
      hi = mid;
    else
      lo = mid + 1;
  }
  return t->value[lo];
}

/* One bootstrap replicate of the p-th percentile: the k-th of n values resampled is Q(U), U the
 * k-th of n uniforms, a Beta(k, n + 1 - k) draw. */
static double resampled_pct(const cumtab_t *t, double p, vl_rng_t *rng) {
  double n = (double)t->total;
  double k = ceil(p / 100 * n);
  k = k < 1 ? 1 : k > n ? n : k;
  double g1 = vl_rng_gamma(rng, k), g2 = vl_rng_gamma(rng, n + 1 - k);
  double u = g1 / (g1 + g2);
  double r = ceil(u * n);
  r = r < 1 ? 1 : r > n ? n : r;
  return cumtab_at(t, (uint64_t)r);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* The q-quantile (0..1) of n sorted values, interpolated. */
static double quantile(const double *v, int n, double q) {
  double at = q * (n - 1);
  int i = (int)floor(at);
  if (i >= n - 1)
    return v[n - 1];
  return v[i] + (at - i) * (v[i + 1] - v[i]);
}

void vl_compare_pct_interval(const vl_hist_t *a, const vl_hist_t *b, double p, double level,
                             int reps, uint64_t seed, double *lo, double *hi) {
  *lo = *hi = NAN;
  if (!a->total || !b->total || reps < 2)
    return;
  cumtab_t ta, tb;
  cumtab_build(&ta, a);
  cumtab_build(&tb, b);
  vl_rng_t rng;
  vl_rng_init(&rng, seed, 0x636d70);
  double *d = vl_xcalloc((size_t)reps, sizeof(double));
  for (int i = 0; i < reps; i++)
    d[i] = resampled_pct(&tb, p, &rng) - resampled_pct(&ta, p, &rng);
  qsort(d, (size_t)reps, sizeof(double), cmp_double);
  *lo = quantile(d, reps, (1 - level) / 2);
  *hi = quantile(d, reps, 1 - (1 - level) / 2);
  free(d);
  free(ta.cum);
  free(ta.value);
  free(tb.cum);
  free(tb.value);
}

void vl_compare_slope_interval(double lo_a, double hi_a, double level_a, double lo_b, double hi_b,
                               double level_b, double level, double *lo, double *hi) {
  double se_a = (hi_a - lo_a) / (2 * vl_compare_z(level_a));
  double se_b = (hi_b - lo_b) / (2 * vl_compare_z(level_b));
  double d = (hi_b + lo_b) / 2 - (hi_a + lo_a) / 2;
  double half = vl_compare_z(level) * sqrt(se_a * se_a + se_b * se_b);
  *lo = d - half;
  *hi = d + half;
}

void vl_compare_prop_interval(double k_a, double n_a, double k_b, double n_b, double level,
                              double *lo, double *hi) {
  double pa = k_a / n_a, pb = k_b / n_b;
  double half = vl_compare_z(level) * sqrt(pa * (1 - pa) / n_a + pb * (1 - pb) / n_b);
  *lo = pb - pa - half;
  *hi = pb - pa + half;
}

/* Reading the summaries. */

static const cJSON *get(const cJSON *o, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(o, key);
}

static double num(const cJSON *o, const char *key) {
  const cJSON *v = get(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *key) {
  const cJSON *v = get(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

typedef struct {
  vl_compare_fig_t *v;
  size_t n, cap;
} figs_t;

static vl_compare_fig_t *add(figs_t *f, const char *group, const char *unit, double a, double b,
                             int lower_better) {
  if (f->n == f->cap)
    f->v = vl_xrealloc(f->v, (f->cap = f->cap ? 2 * f->cap : 32) * sizeof(*f->v));
  vl_compare_fig_t *g = &f->v[f->n++];
  memset(g, 0, sizeof(*g));
  g->group = group;
  snprintf(g->unit, sizeof(g->unit), "%s", unit);
  g->a = a;
  g->b = b;
  g->diff = b - a;
  g->lo = g->hi = NAN;
  g->lower_better = lower_better;
  return g;
}

/* A figure higher-or-lower-is-better with a relative materiality and no interval. */
static void plain(figs_t *f, const char *name, const char *group, const char *unit, double a,
                  double b, int lower_better, const vl_compare_opts_t *o) {
  if (!isfinite(a) || !isfinite(b))
    return;
  vl_compare_fig_t *g = add(f, group, unit, a, b, lower_better);
  snprintf(g->name, sizeof(g->name), "%s", name);
  g->material = o->min_change * fabs(a);
}

/* The histogram key of the summary's "histograms", read into h (initialised); 0 or -1. */
static int hist_of(const cJSON *sum, const char *key, vl_hist_t *h) {
  const cJSON *hs = get(sum, "histograms"), *layout = get(hs, "layout");
  double highest = num(layout, "highest"), sig = num(layout, "sigdigits");
  if (!isfinite(highest) || !isfinite(sig) || vl_hist_init(h, (int64_t)highest, (int)sig) != 0)
    return -1;
  if (vl_stats_hist_add_json(h, get(hs, key)) != 0 || !h->total) {
    vl_hist_free(h);
    return -1;
  }
  return 0;
}

static void latency(figs_t *f, const cJSON *a, const cJSON *b, const vl_compare_opts_t *o) {
  static const struct {
    const char *key, *name;
  } metrics[] = {{"e2e", "e2e"}, {"ttft", "ttft"}, {"tpot", "tpot"}, {"itl", "itl"}};
  static const double pcts[] = {50, 90, 99};
  for (size_t m = 0; m < VL_ARRAY_SIZE(metrics); m++) {
    vl_hist_t ha, hb;
    if (hist_of(a, metrics[m].key, &ha) != 0)
      continue;
    if (hist_of(b, metrics[m].key, &hb) != 0) {
      vl_hist_free(&ha);
      continue;
    }
    for (size_t p = 0; p < VL_ARRAY_SIZE(pcts); p++) {
      double va = (double)vl_hist_percentile(&ha, pcts[p]) / 1e3;
      double vb = (double)vl_hist_percentile(&hb, pcts[p]) / 1e3;
      vl_compare_fig_t *g = add(f, "latency", "ms", va, vb, 1);
      snprintf(g->name, sizeof(g->name), "%s_p%.0f", metrics[m].name, pcts[p]);
      g->material = o->min_change * fabs(va);
      vl_compare_pct_interval(&ha, &hb, pcts[p], o->level, o->reps,
                              o->seed + m * 100 + (uint64_t)pcts[p], &g->lo, &g->hi);
      g->lo /= 1e3;
      g->hi /= 1e3;
    }
    vl_hist_free(&ha);
    vl_hist_free(&hb);
  }
}

/* Error rates: of the requests completed, those that failed, overall and by class. */
static void errors(figs_t *f, const cJSON *a, const cJSON *b, const vl_compare_opts_t *o) {
  double na = num(get(a, "requests"), "completed"), nb = num(get(b, "requests"), "completed");
  if (!(na > 0) || !(nb > 0))
    return;
  double ka = num(get(a, "requests"), "failed"), kb = num(get(b, "requests"), "failed");
  if (!isfinite(ka) || !isfinite(kb))
    return;
  vl_compare_fig_t *g = add(f, "errors", "%", 100 * ka / na, 100 * kb / nb, 1);
  snprintf(g->name, sizeof(g->name), "error_rate");
  g->material = 100 * o->min_error_change;
  vl_compare_prop_interval(ka, na, kb, nb, o->level, &g->lo, &g->hi);
  g->lo *= 100;
  g->hi *= 100;
  const cJSON *ea = get(a, "errors"), *eb = get(b, "errors"), *e;
  cJSON_ArrayForEach(e, ea) {
    double ca = cJSON_IsNumber(e) ? e->valuedouble : NAN, cb = num(eb, e->string);
    if (!isfinite(ca) || !isfinite(cb) || (ca == 0 && cb == 0))
      continue;
    g = add(f, "errors", "%", 100 * ca / na, 100 * cb / nb, 1);
    snprintf(g->name, sizeof(g->name), "errors.%s", e->string);
    g->material = 100 * o->min_error_change;
    vl_compare_prop_interval(ca, na, cb, nb, o->level, &g->lo, &g->hi);
    g->lo *= 100;
    g->hi *= 100;
  }
}

static const cJSON *series_named(const cJSON *sum, const char *name) {
  const cJSON *s;
  cJSON_ArrayForEach(s, get(get(sum, "memory_analysis"), "series")) {
    const char *n = str(s, "series");
    if (n && strcmp(n, name) == 0)
      return s;
  }
  return NULL;
}

/* A fit's slope per 1000 and its interval; 0, or -1 when it has none. */
static int fit_of(const cJSON *fit, double *slope, double *lo, double *hi) {
  const cJSON *ci = get(fit, "ci");
  const cJSON *l = cJSON_GetArrayItem(ci, 0), *h = cJSON_GetArrayItem(ci, 1);
  *slope = num(fit, "slope_per_1000");
  if (!isfinite(*slope) || !cJSON_IsNumber(l) || !cJSON_IsNumber(h))
    return -1;
  *lo = l->valuedouble;
  *hi = h->valuedouble;
  return 0;
}

static void slope(figs_t *f, const char *group, const char *series, const cJSON *sa,
                  const cJSON *sb, const cJSON *fa, const cJSON *fb, const vl_compare_opts_t *o) {
  double va, la, ha, vb, lb, hb;
  if (fit_of(fa, &va, &la, &ha) != 0 || fit_of(fb, &vb, &lb, &hb) != 0)
    return;
  const char *unit = str(sa, "unit"), *x = str(sa, "x");
  char u[48];
  snprintf(u, sizeof(u), "%s/1k %s", unit ? unit : "MB", x ? x : "requests");
  vl_compare_fig_t *g = add(f, group, u, va, vb, 1);
  snprintf(g->name, sizeof(g->name), "%s:%s", group, series);
  g->material = o->min_slope_change;
  double lva = num(get(sa, "thresholds"), "level"), lvb = num(get(sb, "thresholds"), "level");
  vl_compare_slope_interval(la, ha, isfinite(lva) ? lva : 0.95, lb, hb, isfinite(lvb) ? lvb : 0.95,
                            o->level, &g->lo, &g->hi);
  /* The interval is centred on the fits' own centres; the change is the slopes'. */
  double shift = g->diff - (g->lo + g->hi) / 2;
  g->lo += shift;
  g->hi += shift;
}

static void memory(figs_t *f, const cJSON *a, const cJSON *b, const vl_compare_opts_t *o) {
  const cJSON *sa;
  cJSON_ArrayForEach(sa, get(get(a, "memory_analysis"), "series")) {
    const char *name = str(sa, "series");
    const cJSON *sb = name ? series_named(b, name) : NULL;
    if (!sb)
      continue;
    slope(f, "slope", name, sa, sb, get(sa, "ols"), get(sb, "ols"), o);
    slope(f, "floor", name, sa, sb, get(get(sa, "floor"), "fit"), get(get(sb, "floor"), "fit"), o);
    const char *ma = str(sa, "mechanism"), *mb = str(sb, "mechanism");
    if (ma && mb) {
      vl_compare_fig_t *g = add(f, "mechanism", "", NAN, NAN, -1);
      snprintf(g->name, sizeof(g->name), "mechanism:%s", name);
      snprintf(g->text_a, sizeof(g->text_a), "%s", ma);
      snprintf(g->text_b, sizeof(g->text_b), "%s", mb);
      g->word = strcmp(ma, mb) == 0 ? VL_COMPARE_SAME : VL_COMPARE_CHANGED;
    }
  }
}

vl_compare_fig_t *vl_compare_runs(const cJSON *a, const cJSON *b, const vl_compare_opts_t *o,
                                  size_t *n) {
  figs_t f = {0};
  plain(&f, "achieved_rate", "rate", "req/s", num(get(a, "rate"), "achieved"),
        num(get(b, "rate"), "achieved"), 0, o);
  plain(&f, "request_throughput", "rate", "req/s", num(a, "request_throughput"),
        num(b, "request_throughput"), 0, o);
  plain(&f, "output_throughput", "rate", "tok/s", num(a, "output_throughput"),
        num(b, "output_throughput"), 0, o);
  plain(&f, "goodput", "rate", "req/s", num(a, "request_goodput"), num(b, "request_goodput"), 0, o);
  latency(&f, a, b, o);
  errors(&f, a, b, o);
  memory(&f, a, b, o);
  for (size_t i = 0; i < f.n; i++)
    if (f.v[i].lower_better >= 0)
      f.v[i].word =
          vl_compare_judge(f.v[i].diff, f.v[i].lo, f.v[i].hi, f.v[i].material, f.v[i].lower_better);
  *n = f.n;
  return f.v;
}
