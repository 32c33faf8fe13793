/* The mechanism of a series' change: a leak, a cache a flush returns, a cache held at its cap, a
 * one-time step, a warm-up that fills and holds, none, or unknown; where it is (the anatomy kind
 * and the process), the evidence for it, and the runs that would decide what one run cannot. */
#include "internal.h"
#include "vlmload/common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const names[VL_MECH_N] = {"unknown",      "none", "leak",   "cache",
                                             "capped-cache", "step", "warm-up"};

const char *vl_analyze_mechanism_name(vl_mechanism_t m) {
  return (unsigned)m < VL_MECH_N ? names[m] : "?";
}

static void say(vl_analysis_t *a, const char *fmt, ...) {
  if (a->n_evidence == VL_ARRAY_SIZE(a->evidence))
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->evidence[a->n_evidence++], sizeof(a->evidence[0]), fmt, ap);
  va_end(ap);
}

static void try_run(vl_analysis_t *a, const char *fmt, ...) {
  if (a->n_experiments == VL_ARRAY_SIZE(a->experiments))
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->experiments[a->n_experiments++], sizeof(a->experiments[0]), fmt, ap);
  va_end(ap);
}

/* The anatomy kinds, in the order a tie goes: the finer kinds before the resident anonymous
 * memory that holds the heap. */
static const struct {
  const char *prefix, *kind;
} kinds[] = {{"heap_mb.", "heap"},  {"shmem_mb.", "shmem"},    {"device_mb.", "device"},
             {"file_mb.", "file"},  {"anon_mb.", "anon"},      {"rss_mb.", "rss"},
             {"pss_mb.", "pss"},    {"hwm_mb.", "hwm"},        {"gpu_mb.", "gpu"},
             {"arenas.", "arenas"}, {"prom.", "server metric"}};
#define N_ANATOMY 5 /* the first kinds: parts of a process's resident set */

/* The kind of a series (index into kinds, or -1) and its process label into proc. */
static int kind_of(const char *name, char *proc, size_t n) {
  *proc = '\0';
  for (size_t k = 0; k < VL_ARRAY_SIZE(kinds); k++) {
    size_t l = strlen(kinds[k].prefix);
    if (strncmp(name, kinds[k].prefix, l) == 0) {
      snprintf(proc, n, "%s", name + l);
      return (int)k;
    }
  }
  return -1;
}

/* "120 requests", with the analysis's work axis. */
static const char *xs(const vl_analysis_t *a) {
  return a->x_name ? a->x_name : "requests";
}

static int material(const vl_analysis_t *a, const vl_fit_t *f) {
  return f->lo > 0 && vl__analyze_verdict_material(a, f->slope, a->x_last - a->x_first);
}

static void say_jumps(vl_analysis_t *a) {
  for (size_t j = 0; j < a->n_jumps; j++) {
    const vl_jump_t *jp = &a->jumps[j];
    char at[64] = "", after[96] = "";
    if (a->t0_ms > 0 && isfinite(jp->t_ms))
      snprintf(at, sizeof(at), ", %.1f s into the run", (jp->t_ms - a->t0_ms) / 1000);
    if (jp->after)
      snprintf(after, sizeof(after), ", just after %s", jp->after);
    say(a, "a step of %+.4g %s at %.0f %s%s%s%s", jp->size, a->unit, jp->x, xs(a), at, after,
        jp->x < a->x_first ? " (in the warm-up)" : "");
  }
  if (!a->n_jumps || !isfinite(a->rest.slope))
    return;
  if (material(a, &a->rest))
    say(a, "then %+.4g %s per 1000 %s (95%% CI %+.4g to %+.4g) with the steps taken out",
        a->rest.slope, a->unit, xs(a), a->rest.lo, a->rest.hi);
  else
    say(a, "then flat: %+.4g %s per 1000 %s with the steps taken out, %+.4g %s over the run",
        a->rest.slope, a->unit, xs(a), a->rest_growth, a->unit);
}

static void say_attribution(vl_analysis_t *a) {
  const vl_attribution_t *at = &a->attr;
  if (!at->tried || at->why)
    return;
  const vl_attr_term_t *im = &at->images, *tx = &at->text;
  /* A term whose interval autocorrelation left unbounded says nothing. */
  if ((im->dropped || !isfinite(im->hi - im->lo)) && (tx->dropped || !isfinite(tx->hi - tx->lo)))
    return;
  char s[2][128] = {"", ""};
  if (!im->dropped)
    snprintf(s[0], sizeof(s[0]), "%+.4g %s per 1000 images (CI %+.4g to %+.4g)", im->value, a->unit,
             im->lo, im->hi);
  if (!tx->dropped)
    snprintf(s[1], sizeof(s[1]), "%+.4g %s per 1000 text-only requests (CI %+.4g to %+.4g)",
             tx->value, a->unit, tx->lo, tx->hi);
  const char *what = "";
  if (!im->dropped && im->lo > 0 && (tx->dropped || !(tx->lo > 0)))
    what = ": it grows with images";
  else if (!tx->dropped && tx->lo > 0 && (im->dropped || !(im->lo > 0)))
    what = ": it grows with text requests, not with images";
  say(a, "%s%s%s%s", s[0], *s[0] && *s[1] ? ", " : "", s[1], what);
}

static void say_cap(vl_analysis_t *a) {
  if (!a->cap_name)
    return;
  if (a->cap_near)
    say(a, "it levels off %+.4g %s above its lowest, near the cap %s (%.6g MB)",
        a->level_y - a->y_low, a->unit, a->cap_name, a->cap);
  else if (isfinite(a->cap_more_x))
    say(a,
        "at this slope it reaches the cap %s (%.6g MB) in about %.0f more %s; it then holds "
        "about %.6g MB",
        a->cap_name, a->cap, a->cap_more_x, xs(a), a->cap_then);
  else
    say(a, "the cap %s (%.6g MB) applies; it holds %+.4g %s above its lowest, not near it",
        a->cap_name, a->cap, a->y_last - a->y_low, a->unit);
}

/* The mechanism from the series' own figures. */
static void own(vl_analysis_t *a) {
  a->n_evidence = a->n_experiments = 0;
  a->mechanism = VL_MECH_UNKNOWN;
  double span = a->x_last - a->x_first;
  double jumped = 0;
  for (size_t j = 0; j < a->n_jumps; j++)
    jumped += a->jumps[j].size;
  switch (a->verdict) {
  case VL_VERDICT_INSUFFICIENT:
  case VL_VERDICT_NOT_MEMORY:
  case VL_VERDICT_ENDED_EARLY:
  case VL_VERDICT_PEAK:
    say(a, "no verdict on growth (%s)", vl_analyze_verdict_name(a->verdict));
    say_jumps(a);
    return;
  default:
    break;
  }
  if (a->verdict == VL_VERDICT_SAWTOOTH) {
    a->mechanism = VL_MECH_CACHE;
    say(a,
        "returned by each flush: it climbs %+.4g %s per window of %.0f %s, and the %s slope "
        "is %+.4g %s per 1000 %s",
        a->rise_mean, a->unit, a->window_span, xs(a),
        strcmp(a->basis, "floor") == 0 ? "post-flush floor" : "overall",
        strcmp(a->basis, "floor") == 0 ? a->floor.slope : a->ols.slope, a->unit, xs(a));
    say_jumps(a);
    say_attribution(a);
    say_cap(a);
    return;
  }
  /* Held at a cap it names: a cache, however fast it filled. */
  if (a->cap_near) {
    a->mechanism = VL_MECH_CAPPED;
    say_cap(a);
    say_jumps(a);
    say_attribution(a);
    return;
  }
  /* Steps that make most of its range, and nothing material besides. */
  if (a->n_jumps && jumped >= a->threshold && jumped >= (a->y_high - a->y_low) / 2 &&
      isfinite(a->rest.slope) && !material(a, &a->rest)) {
    a->mechanism = VL_MECH_STEP;
    say_jumps(a);
    say_cap(a);
    return;
  }
  switch (a->verdict) {
  case VL_VERDICT_GROWS:
    if (strcmp(a->basis, "floor") == 0) {
      a->mechanism = VL_MECH_LEAK;
      say(a,
          "a flush does not return it: the post-flush floor rises %+.4g %s per 1000 %s over %zu "
          "windows",
          a->floor.slope, a->unit, xs(a), a->n_windows);
    } else {
      say(a,
          "it grows %+.4g %s per 1000 %s, %+.4g %s over the run, with %zu post-flush windows: "
          "a cache that fills looks the same",
          strcmp(a->basis, "tail") == 0 ? a->tail.slope : a->ols.slope, a->unit, xs(a), a->growth,
          a->unit, a->n_windows);
      try_run(a, "flush during the run (--flush-every 50): a cache returns, a leak does not");
      try_run(a, "send the same images again (--image-reuse 1): a cache stops growing, a leak "
                 "does not");
      if (!a->cap_name)
        try_run(a, "run the server with its cache off (llama.cpp: --cache-ram 0): a cache is gone, "
                   "a leak is not");
    }
    break;
  case VL_VERDICT_LEVELS_OFF:
    if (a->cap_near) {
      a->mechanism = VL_MECH_CAPPED;
    } else {
      a->mechanism = VL_MECH_WARMUP;
      say(a, "it rises %+.4g %s and holds from about %.0f %s, no cap in sight", a->level_rise,
          a->unit, a->level_x, xs(a));
      if (!a->cap_name)
        try_run(a,
                "a cache vlmload knows no cap of levels off too: state its size "
                "(--expect-cap %s=SIZE), or send the same images again (--image-reuse 1): a "
                "cache holds at once, an allocator's pool does not care",
                a->name);
    }
    if (a->level_creeps)
      try_run(a, "run longer: it still creeps by %+.4g %s per 1000 %s", a->tail.slope, a->unit,
              xs(a));
    break;
  case VL_VERDICT_INCONCLUSIVE:
    say(a, "the samples cannot tell: %s", "its interval admits growth and its absence");
    if (isfinite(a->more_x))
      try_run(a, "run longer: about %.0f more %s", a->more_x, xs(a));
    else
      try_run(a, "run longer, or sample more often");
    break;
  case VL_VERDICT_FLAT:
    a->mechanism = VL_MECH_NONE;
    say(a, "no material growth: %+.4g %s over %.0f %s", a->growth, a->unit, span, xs(a));
    break;
  default:
    break;
  }
  say_jumps(a);
  if (a->verdict != VL_VERDICT_FLAT)
    say_attribution(a);
  say_cap(a);
}

/* The change of a series the `where` compares: its range over every sample. */
static double change_of(const vl_analysis_t *a) {
  return isfinite(a->y_high) ? a->y_high - a->y_low : 0;
}

void vl_analyze_mechanisms(vl_analysis_t *const *an, size_t n) {
  for (size_t i = 0; i < n; i++)
    own(an[i]);
  for (size_t i = 0; i < n; i++) {
    vl_analysis_t *a = an[i];
    char proc[64];
    int k = kind_of(a->name, proc, sizeof(proc));
    a->where_kind = k >= 0 ? kinds[k].kind : "series";
    snprintf(a->where_process, sizeof(a->where_process), "%s", proc);
    snprintf(a->where_series, sizeof(a->where_series), "%s", a->name);
    if (k < 0 || !*proc || a->mechanism == VL_MECH_NONE || a->mechanism == VL_MECH_UNKNOWN)
      continue;
    /* A process's whole: the part of it that moved most carries the change; a finer kind wins
     * over one within a quarter of it. */
    const vl_analysis_t *arenas = NULL, *best = NULL;
    double own_change = change_of(a), best_change = 0;
    for (size_t kk = 0; kk < VL_ARRAY_SIZE(kinds); kk++) {
      for (size_t j = 0; j < n; j++) {
        char p2[64];
        if (kind_of(an[j]->name, p2, sizeof(p2)) != (int)kk || strcmp(p2, proc) != 0)
          continue;
        if (strcmp(kinds[kk].kind, "arenas") == 0)
          arenas = an[j];
        double c = change_of(an[j]);
        if (kk < N_ANATOMY && k >= N_ANATOMY && c > 0 && c > best_change * 1.25) {
          best = an[j];
          best_change = c;
        }
      }
    }
    if (best && best_change >= own_change / 2) {
      char p2[64];
      a->where_kind = kinds[kind_of(best->name, p2, sizeof(p2))].kind;
      snprintf(a->where_series, sizeof(a->where_series), "%s", best->name);
      say(a, "the change is in %s: %+.4g MB of the %+.4g MB it moved", best->name, best_change,
          own_change);
    }
    /* Arenas that grew in number where the change is heap: an allocator's pools filling. */
    int heap = strcmp(a->where_kind, "heap") == 0 || strcmp(a->where_kind, "anon") == 0;
    if (arenas && heap && arenas->y_high - arenas->y_low >= 1 &&
        (a->mechanism == VL_MECH_WARMUP || a->mechanism == VL_MECH_STEP)) {
      a->mechanism = VL_MECH_WARMUP;
      a->where_kind = "heap";
      say(a,
          "malloc arenas of %s went from %.0f to %.0f: an allocator keeping freed memory for "
          "its threads",
          proc, arenas->y_start, arenas->y_high);
    }
  }
}
