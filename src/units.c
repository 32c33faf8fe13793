#include "vlmload/units.h"
#include "vlmload/common.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *name;
  double mult;
} unit_t;

/* Parses a finite non-negative decimal number at the start of s and points *end past it. Rejects
 * signs, hexadecimal, "inf" and "nan" (which strtod would take). */
static int scan_number(const char *s, double *v, const char **end) {
  if (!isdigit((unsigned char)s[0]) && !(s[0] == '.' && isdigit((unsigned char)s[1])))
    return VL_EINVAL;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    return VL_EINVAL;
  char *e;
  errno = 0;
  double d = strtod(s, &e);
  if (errno == ERANGE || !isfinite(d))
    return VL_ERANGE;
  *v = d;
  *end = e;
  return 0;
}

/* Matches the suffix exactly against a table; the empty suffix matches "". */
static int scan_suffix(const char *suffix, const unit_t *units, size_t n, double *mult) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(suffix, units[i].name) == 0) {
      *mult = units[i].mult;
      return 0;
    }
  }
  return VL_EINVAL;
}

static int scan(const char *s, const unit_t *units, size_t n, double *out) {
  double v, mult;
  const char *end;
  int rc;
  if (!s || (rc = scan_number(s, &v, &end)) != 0)
    return s ? rc : VL_EINVAL;
  if ((rc = scan_suffix(end, units, n, &mult)) != 0)
    return rc;
  v *= mult;
  if (!isfinite(v))
    return VL_ERANGE;
  *out = v;
  return 0;
}

/* Converts to an integer, refusing fractions that do not round to one and values past max. */
static int to_integer(double v, double max, int allow_fraction, uint64_t *out) {
  if (v > max)
    return VL_ERANGE;
  double r = floor(v + 0.5);
  if (!allow_fraction && fabs(v - r) > 1e-9 * VL_MAX(1.0, v))
    return VL_EINVAL;
  *out = (uint64_t)r;
  return 0;
}

int vl_units_duration(const char *s, uint64_t *usec) {
  static const unit_t units[] = {{"", 1e6},  {"us", 1},     {"ms", 1e3},
                                 {"s", 1e6}, {"m", 60e6},   {"h", 3600e6}};
  double v;
  int rc = scan(s, units, VL_ARRAY_SIZE(units), &v);
  return rc ? rc : to_integer(v, 1e18, 1, usec);
}

int vl_units_count(const char *s, uint64_t *out) {
  static const unit_t units[] = {{"", 1}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}};
  double v;
  int rc = scan(s, units, VL_ARRAY_SIZE(units), &v);
  return rc ? rc : to_integer(v, 1e18, 0, out);
}

int vl_units_double(const char *s, double *out) {
  static const unit_t units[] = {{"", 1}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}};
  return scan(s, units, VL_ARRAY_SIZE(units), out);
}

int vl_units_bytes(const char *s, uint64_t *out) {
  static const unit_t units[] = {
      {"", 1},       {"B", 1},      {"k", 1e3},    {"K", 1e3},       {"KB", 1e3},
      {"kB", 1e3},   {"KiB", 1024}, {"M", 1e6},    {"MB", 1e6},      {"MiB", 1048576.0},
      {"G", 1e9},    {"GB", 1e9},   {"GiB", 1073741824.0},
  };
  double v;
  int rc = scan(s, units, VL_ARRAY_SIZE(units), &v);
  return rc ? rc : to_integer(v, 1e18, 1, out);
}

int vl_units_range(const char *s, uint64_t *lo, uint64_t *hi) {
  if (!s)
    return VL_EINVAL;
  const char *dash = strchr(s, '-');
  uint64_t a, b;
  int rc;
  if (!dash) {
    if ((rc = vl_units_count(s, &a)) != 0)
      return rc;
    *lo = *hi = a;
    return 0;
  }
  size_t n = (size_t)(dash - s);
  char left[64];
  if (n == 0 || n >= sizeof(left))
    return VL_EINVAL;
  memcpy(left, s, n);
  left[n] = '\0';
  if ((rc = vl_units_count(left, &a)) != 0 || (rc = vl_units_count(dash + 1, &b)) != 0)
    return rc;
  if (a > b)
    return VL_EINVAL;
  *lo = a;
  *hi = b;
  return 0;
}
