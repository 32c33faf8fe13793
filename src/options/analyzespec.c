/* The analysis's options: the verdicts' names and the parsers of the materiality options and
 * --fail-on (analyzespec.h), shared by the run's option table and `vlmload analyze`. */
#include "vlmload/analyzespec.h"
#include "vlmload/common.h"
#include "vlmload/units.h"

#include <stdio.h>
#include <stdint.h>
#include <string.h>

static const char *const names[VL_VERDICT_N] = {
    [VL_VERDICT_INSUFFICIENT] = "insufficient-data",
    [VL_VERDICT_FLAT] = "flat",
    [VL_VERDICT_SAWTOOTH] = "sawtooth-returns",
    [VL_VERDICT_GROWS] = "grows",
    [VL_VERDICT_INCONCLUSIVE] = "inconclusive",
    [VL_VERDICT_LEVELS_OFF] = "levels-off",
    [VL_VERDICT_PEAK] = "peak",
    [VL_VERDICT_NOT_MEMORY] = "not-memory",
    [VL_VERDICT_ENDED_EARLY] = "ended-early",
};

/* The order --help and errors list them in: the growth verdicts first. */
static const vl_verdict_t listed[VL_VERDICT_N] = {
    VL_VERDICT_GROWS,      VL_VERDICT_LEVELS_OFF,   VL_VERDICT_SAWTOOTH,
    VL_VERDICT_FLAT,       VL_VERDICT_INCONCLUSIVE, VL_VERDICT_PEAK,
    VL_VERDICT_NOT_MEMORY, VL_VERDICT_ENDED_EARLY,  VL_VERDICT_INSUFFICIENT,
};

const char *vl_analyze_verdict_name(vl_verdict_t v) {
  return (unsigned)v < VL_VERDICT_N ? names[v] : names[VL_VERDICT_INSUFFICIENT];
}

int vl_analyze_spec_min_growth(const char *arg, double *frac, const char **why) {
  char buf[64];
  double v;
  int len = snprintf(buf, sizeof(buf), "%s", arg);
  if (len > 0 && (size_t)len < sizeof(buf) && buf[len - 1] == '%')
    buf[len - 1] = '\0';
  if ((size_t)len >= sizeof(buf) || vl_units_double(buf, &v) != 0 || v > 100) {
    *why = "want a percentage from 0 to 100, such as 1 or 0.5%";
    return -1;
  }
  *frac = v / 100;
  return 0;
}

int vl_analyze_spec_min_growth_mb(const char *arg, double *mb, const char **why) {
  double v;
  if (vl_units_double(arg, &v) != 0 || v > 1e9) {
    *why = "want MB over the run, such as 4 or 0.5 (0: no absolute floor)";
    return -1;
  }
  *mb = v;
  return 0;
}

int vl_analyze_spec_min_slope(const char *arg, double *slope, const char **why) {
  double v;
  if (vl_units_double(arg, &v) != 0 || v > 1e9) {
    *why = "want MB per 1000 requests, such as 1 or 0.25 (0: off)";
    return -1;
  }
  *slope = v;
  return 0;
}

/* The verdicts, as errors list them. */
static void list_all(char *out, size_t n) {
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < VL_VERDICT_N && len < n; i++)
    len += (size_t)snprintf(out + len, n - len, "%s%s", i ? ", " : "", names[listed[i]]);
}

int vl_analyze_spec_fail_on(const char *arg, unsigned *mask, char *why, size_t n) {
  char all[160];
  list_all(all, sizeof(all));
  unsigned m = 0;
  const char *p = arg;
  for (;;) {
    size_t len = strcspn(p, ",");
    int found = -1;
    for (int v = 0; v < VL_VERDICT_N && found < 0; v++)
      if (len == strlen(names[v]) && strncmp(p, names[v], len) == 0)
        found = v;
    if (found < 0) {
      if (len == 0)
        snprintf(why, n, "want verdicts separated by commas: %s", all);
      else
        snprintf(why, n, "'%.*s' is not a verdict; want some of %s, separated by commas",
                 (int)(len > 40 ? 40 : len), p, all);
      return -1;
    }
    m |= 1u << found;
    if (!p[len])
      break;
    p += len + 1;
  }
  *mask = m;
  return 0;
}

int vl_analyze_spec_cap(const char *arg, char *target, size_t n, double *bytes, const char **end,
                        const char **why) {
  const char *stop = strchr(arg, ',');
  if (!stop)
    stop = arg + strlen(arg);
  *end = stop;
  const char *eq = memchr(arg, '=', (size_t)(stop - arg));
  if (!eq || eq == arg || (size_t)(eq - arg) >= n) {
    *why = "want SERIES=SIZE, separated by commas (rss_mb.server=8GiB, or a process's label: "
           "server=8192MiB)";
    return VL_EINVAL;
  }
  char size[64];
  uint64_t b;
  if ((size_t)(stop - eq - 1) >= sizeof(size)) {
    *why = "want a size above 0 after '=' (512MiB, 8GiB, 1073741824)";
    return VL_EINVAL;
  }
  snprintf(size, sizeof(size), "%.*s", (int)(stop - eq - 1), eq + 1);
  if (vl_units_bytes(size, &b) != 0 || b == 0) {
    *why = "want a size above 0 after '=' (512MiB, 8GiB, 1073741824)";
    return VL_EINVAL;
  }
  snprintf(target, n, "%.*s", (int)(eq - arg), arg);
  *bytes = (double)b;
  return 0;
}
