#include "vlmload/slo.h"
#include "vlmload/common.h"
#include "vlmload/units.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names a bound is given by, its field, and its key in the summary (vLLM's). */
static const struct {
  const char *name, *alias, *key;
  size_t off;
} bounds[] = {
    {"ttft", NULL, "ttft", offsetof(vl_slo_t, ttft_us)},
    {"tpot", NULL, "tpot", offsetof(vl_slo_t, tpot_us)},
    {"e2e", "e2el", "e2el", offsetof(vl_slo_t, e2e_us)},
};

#define FIELD_OF(slo, i) ((uint64_t *)((char *)(slo) + bounds[i].off))

int vl_slo_parse(const char *spec, vl_slo_t *out, char *why, size_t n) {
  vl_slo_t s = {0};
  char part[64];
  const char *p = spec;
  if (!*spec) {
    snprintf(why, n, "empty: want ttft=DUR,tpot=DUR,e2e=DUR (any of them)");
    return -1;
  }
  for (;;) {
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof(part)) {
      snprintf(why, n, "%s part %.*s: want NAME=DUR (ttft, tpot, e2e or e2el)",
               len ? "too long a" : "an empty", (int)VL_MIN(len, 40), p);
      return -1;
    }
    memcpy(part, p, len);
    part[len] = '\0';
    char *eq = strchr(part, '=');
    if (!eq) {
      snprintf(why, n, "'%s': want NAME=DUR (ttft, tpot, e2e or e2el)", part);
      return -1;
    }
    *eq = '\0';
    size_t i = 0;
    while (i < VL_ARRAY_SIZE(bounds) && strcmp(part, bounds[i].name) &&
           !(bounds[i].alias && strcmp(part, bounds[i].alias) == 0))
      i++;
    if (i == VL_ARRAY_SIZE(bounds)) {
      snprintf(why, n, "'%s': not an SLO (want ttft, tpot, e2e or e2el)", part);
      return -1;
    }
    uint64_t us;
    if (vl_units_duration(eq + 1, &us) || us == 0) {
      snprintf(why, n, "'%s=%s': want a duration above 0 (500ms, 2s)", part, eq + 1);
      return -1;
    }
    if (*FIELD_OF(&s, i)) {
      snprintf(why, n, "'%s' given twice", part);
      return -1;
    }
    *FIELD_OF(&s, i) = us;
    p += len;
    if (!*p)
      break;
    p++;
  }
  *out = s;
  return 0;
}

int vl_slo_any(const vl_slo_t *slo) {
  return slo->ttft_us || slo->tpot_us || slo->e2e_us;
}

void vl_slo_format(const vl_slo_t *slo, char *out, size_t n) {
  size_t k = 0;
  out[0] = '\0';
  for (size_t i = 0; i < VL_ARRAY_SIZE(bounds) && k < n; i++) {
    uint64_t us = *FIELD_OF(slo, i);
    if (!us)
      continue;
    const char *sep = k ? "," : "";
    int w;
    if (us % 1000000 == 0)
      w = snprintf(out + k, n - k, "%s%s=%llus", sep, bounds[i].name,
                   (unsigned long long)(us / 1000000));
    else if (us % 1000 == 0)
      w = snprintf(out + k, n - k, "%s%s=%llums", sep, bounds[i].name,
                   (unsigned long long)(us / 1000));
    else
      w = snprintf(out + k, n - k, "%s%s=%lluus", sep, bounds[i].name, (unsigned long long)us);
    if (w < 0)
      return;
    k += (size_t)w;
  }
}

void vl_slo_count(vl_slo_met_t *m, unsigned bits) {
  m->judged++;
  for (int i = 0; i < VL_SLO_N; i++)
    m->met[i] += (bits >> i) & 1u;
}

static double share(const vl_slo_met_t *m, int i) {
  return m->judged ? (double)m->met[i] / (double)m->judged : NAN;
}

static void add_num(cJSON *o, const char *name, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, name, v);
  else
    cJSON_AddNullToObject(o, name);
}

cJSON *vl_slo_json(const vl_slo_t *slo, const vl_slo_met_t *m) {
  cJSON *o = cJSON_CreateObject();
  char key[32];
  for (size_t i = 0; i < VL_ARRAY_SIZE(bounds); i++) {
    uint64_t us = *FIELD_OF(slo, i);
    if (!us)
      continue;
    snprintf(key, sizeof(key), "%s_ms", bounds[i].key);
    cJSON_AddNumberToObject(o, key, (double)us / 1e3);
  }
  cJSON_AddNumberToObject(o, "judged", (double)m->judged);
  cJSON *met = cJSON_AddObjectToObject(o, "met");
  for (size_t i = 0; i < VL_ARRAY_SIZE(bounds); i++)
    if (*FIELD_OF(slo, i))
      add_num(met, bounds[i].key, share(m, (int)i));
  add_num(o, "met_all", share(m, 3));
  return o;
}

int vl_slo_parse_percentiles(const char *spec, double *out, int *n, char *why, size_t wn) {
  double v[VL_SLO_MAX_PERCENTILES];
  int k = 0;
  char part[32];
  const char *p = spec;
  for (;;) {
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof(part)) {
      snprintf(why, wn, "%s: want numbers above 0 and at most 100, comma-separated",
               len ? "too long a number" : "an empty part");
      return -1;
    }
    memcpy(part, p, len);
    part[len] = '\0';
    char *end;
    double x = strtod(part, &end);
    if (*end || end == part || !(x > 0 && x <= 100)) {
      snprintf(why, wn, "'%s': want a percentile above 0 and at most 100", part);
      return -1;
    }
    if (k == VL_SLO_MAX_PERCENTILES) {
      snprintf(why, wn, "more than %d percentiles", VL_SLO_MAX_PERCENTILES);
      return -1;
    }
    for (int j = 0; j < k; j++)
      if (v[j] == x) {
        snprintf(why, wn, "'%s' given twice", part);
        return -1;
      }
    v[k++] = x;
    p += len;
    if (!*p)
      break;
    p++;
  }
  memcpy(out, v, (size_t)k * sizeof(double));
  *n = k;
  return 0;
}

void vl_slo_pct_name(double p, char *out, size_t n) {
  snprintf(out, n, "%.10g", p);
}
