/* Caps: the sizes a cache may hold (a server's settings, --expect-cap), which series they apply to,
 * and whether a series levels off at one or how soon it reaches one. */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/analyzespec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MB (1024.0 * 1024.0)

void vl_analyze_caps_add(vl_analyze_caps_t *list, const char *name, const char *target,
                         double bytes) {
  list->cap = vl_xrealloc(list->cap, (list->n + 1) * sizeof(vl_analyze_cap_t));
  list->cap[list->n++] = (vl_analyze_cap_t){vl_xstrdup(name ? name : "cap"),
                                            target ? vl_xstrdup(target) : NULL, bytes};
}

void vl_analyze_caps_free(vl_analyze_caps_t *list) {
  for (size_t i = 0; i < list->n; i++) {
    free((char *)list->cap[i].name);
    free((char *)list->cap[i].target);
  }
  free(list->cap);
  list->cap = NULL;
  list->n = 0;
}

int vl_analyze_caps_parse(vl_analyze_caps_t *list, const char *arg, const char **why) {
  size_t had = list->n;
  for (const char *p = arg;;) {
    char target[256];
    double bytes;
    const char *end;
    if (vl_analyze_spec_cap(p, target, sizeof(target), &bytes, &end, why) != 0) {
      while (list->n > had) {
        list->n--;
        free((char *)list->cap[list->n].name);
        free((char *)list->cap[list->n].target);
      }
      return VL_EINVAL;
    }
    vl_analyze_caps_add(list, "--expect-cap", target, bytes);
    if (!*end)
      return 0;
    p = end + 1;
  }
}

/* Whether cap c applies to the series named name (in MB). */
static int applies(const vl_analyze_cap_t *c, const char *name) {
  if (!c->target)
    return 1;
  if (strcmp(c->target, name) == 0)
    return 1;
  /* A process's label, or a process in its tree ("server/vlmmock" is in server's). */
  const char *dot = strchr(name, '.');
  size_t n = strlen(c->target);
  return dot && strncmp(c->target, dot + 1, n) == 0 && (dot[1 + n] == '\0' || dot[1 + n] == '/');
}

void vl__analyze_caps_judge(vl_analysis_t *a, const vl_series_t *s) {
  a->cap_name = NULL;
  a->cap = a->cap_more_x = a->cap_then = NAN;
  a->cap_near = 0;
  if (!s->caps || strcmp(a->unit, "MB") != 0 || !isfinite(a->y_low))
    return;
  /* The cache's rise is counted from the lowest sample: what the process held before it filled. */
  double held =
      (a->verdict == VL_VERDICT_LEVELS_OFF && isfinite(a->level_y) ? a->level_y : a->y_last) -
      a->y_low;
  const vl_analyze_cap_t *best = NULL;
  double best_gap = INFINITY;
  for (size_t i = 0; i < s->n_caps; i++) {
    const vl_analyze_cap_t *c = &s->caps[i];
    if (!(c->bytes > 0) || !applies(c, a->name))
      continue;
    double gap = fabs(held - c->bytes / MB);
    if (gap < best_gap) {
      best_gap = gap;
      best = c;
    }
  }
  if (!best)
    return;
  a->cap_name = best->name;
  a->cap = best->bytes / MB;
  double tol = fmax(VL_ANALYZE_CAP_NEAR * a->cap, isfinite(a->threshold) ? a->threshold : 0);
  /* Held near it after a rise: one the levels-off fit found, or a fill quick enough to be a jump,
   * flat after it. */
  int held_still =
      a->verdict == VL_VERDICT_LEVELS_OFF || (a->n_jumps > 0 && a->verdict == VL_VERDICT_FLAT);
  if (held_still && fabs(held - a->cap) <= tol) {
    a->cap_near = 1;
    return;
  }
  /* Still growing towards it: how much more work at the basis slope reaches it. */
  const vl_fit_t *b = strcmp(a->basis, "floor") == 0  ? &a->floor
                      : strcmp(a->basis, "tail") == 0 ? &a->tail
                                                      : &a->ols;
  if (a->verdict == VL_VERDICT_LEVELS_OFF && a->level_creeps)
    b = &a->tail;
  if ((a->verdict == VL_VERDICT_GROWS || a->level_creeps) && b->slope > 0 && held < a->cap) {
    a->cap_more_x = (a->cap - held) / b->slope * 1000;
    a->cap_then = a->y_low + a->cap;
  }
}
