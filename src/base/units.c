#include "vlmload/units.h"
#include "vlmload/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *name;
  uint64_t mult;
} unit_t;

/* The largest value the integer scanners return. */
#define INT_MAX_VALUE 1000000000000000000u

__extension__ typedef unsigned __int128 u128;

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* A number must start with a digit, or a '.' and a digit: no sign, no space, no "inf" or "nan"
 * (which strtod would take). Hexadecimal is refused here for strtod's sake. */
static int number_start(const char *s) {
  if (!is_digit(s[0]) && !(s[0] == '.' && is_digit(s[1])))
    return VL_EINVAL;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    return VL_EINVAL;
  return 0;
}

/* Matches the suffix exactly against a table; the empty suffix matches "". */
static int scan_suffix(const char *suffix, const unit_t *units, size_t n, uint64_t *mult) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(suffix, units[i].name) == 0) {
      *mult = units[i].mult;
      return 0;
    }
  }
  return VL_EINVAL;
}

/* A non-negative decimal number held exactly: mant * 10^exp10. Digits past the 19th significant
 * one are dropped; `inexact` says whether any of them was not zero. */
typedef struct {
  uint64_t mant;
  int exp10;
  int inexact;
} decimal_t;

/* Parses strtod's unsigned decimal form (digits, an optional '.' and digits, an optional exponent)
 * at the start of s, exactly, and points *end past it. */
static void scan_decimal(const char *s, decimal_t *d, const char **end) {
  decimal_t r = {0, 0, 0};
  int frac = 0;
  for (;; s++) {
    if (*s == '.' && !frac) {
      frac = 1;
      continue;
    }
    if (!is_digit(*s))
      break;
    unsigned digit = (unsigned)(*s - '0');
    if (r.mant <= (UINT64_MAX - 9) / 10) {
      r.mant = r.mant * 10 + digit;
      r.exp10 -= frac;
    } else {
      r.exp10 += !frac;
      r.inexact |= digit != 0;
    }
  }
  if ((*s == 'e' || *s == 'E') &&
      (is_digit(s[1]) || ((s[1] == '+' || s[1] == '-') && is_digit(s[2])))) {
    int neg = s[1] == '-';
    s += is_digit(s[1]) ? 1 : 2;
    int e = 0;
    for (; is_digit(*s); s++)
      e = e < 100000 ? e * 10 + (*s - '0') : e; /* past any range; stops overflow */
    r.exp10 += neg ? -e : e;
  }
  *d = r;
  *end = s;
}

/* mant * 10^exp10 * mult as an integer of at most INT_MAX_VALUE, exactly. A fraction is rounded
 * to nearest when `round` is set and refused otherwise. */
static int to_integer(const decimal_t *d, uint64_t mult, int round, uint64_t *out) {
  uint64_t m = d->mant;
  int e = d->exp10;
  if (m == 0) {
    *out = 0;
    return 0;
  }
  while (e < 0 && m % 10 == 0) {
    m /= 10;
    e++;
  }
  while (e < 0 && mult % 10 == 0) {
    mult /= 10;
    e++;
  }
  uint64_t v;
  int fraction = d->inexact;
  if (e >= 0) {
    for (; e > 0; e--) {
      if (m > INT_MAX_VALUE / 10)
        return VL_ERANGE;
      m *= 10;
    }
    if (m > INT_MAX_VALUE / mult)
      return VL_ERANGE;
    v = m * mult;
  } else {
    /* Divide by 10^-e, rounding to nearest. Once the divisor passes m * mult, and more powers of
     * ten remain, the quotient is below 0.1 and rounds to 0. */
    u128 num = (u128)m * mult, p = 1, q = 0;
    int k = -e;
    for (; k > 0 && p <= num; k--)
      p *= 10;
    if (k == 0)
      q = num / p + (2 * (num % p) >= p);
    fraction = 1;
    if (q > INT_MAX_VALUE)
      return VL_ERANGE;
    v = (uint64_t)q;
  }
  if (fraction && !round)
    return VL_EINVAL;
  *out = v;
  return 0;
}

static int scan_integer(const char *s, const unit_t *units, size_t n, int round, uint64_t *out) {
  decimal_t d;
  const char *end;
  uint64_t mult;
  int rc;
  if (!s)
    return VL_EINVAL;
  if ((rc = number_start(s)) != 0)
    return rc;
  scan_decimal(s, &d, &end);
  if ((rc = scan_suffix(end, units, n, &mult)) != 0)
    return rc;
  return to_integer(&d, mult, round, out);
}

/* A duration's units, in the order they are tried: where one unit's name begins another's ("m",
 * "ms"), the longer first. A compound duration gives each at most once, largest first
 * (dur_rank). */
static const unit_t dur_units[] = {
    {"h", 3600000000u}, {"ms", 1000}, {"m", 60000000}, {"s", 1000000}, {"us", 1},
};

/* The place of a unit in h > m > s > ms > us. */
static int dur_rank(const unit_t *u) {
  return u->mult == 3600000000u ? 0
         : u->mult == 60000000  ? 1
         : u->mult == 1000000   ? 2
         : u->mult == 1000      ? 3
                                : 4;
}

int vl_units_bare(const char *s) {
  decimal_t d;
  const char *end;
  return s && number_start(s) == 0 && (scan_decimal(s, &d, &end), *end == '\0');
}

int vl_units_duration(const char *s, uint64_t *usec) {
  decimal_t d;
  const char *end;
  uint64_t total = 0;
  int last = -1, rc;
  if (!s || !*s)
    return VL_EINVAL;
  if (vl_units_bare(s)) { /* no unit: only a zero says what it means */
    scan_decimal(s, &d, &end);
    if (d.mant != 0 || d.inexact)
      return VL_EINVAL;
    *usec = 0;
    return 0;
  }
  while (*s) {
    if ((rc = number_start(s)) != 0)
      return rc;
    scan_decimal(s, &d, &end);
    const unit_t *u = NULL;
    for (size_t i = 0; i < VL_ARRAY_SIZE(dur_units) && !u; i++)
      if (strncmp(end, dur_units[i].name, strlen(dur_units[i].name)) == 0)
        u = &dur_units[i];
    if (!u || dur_rank(u) <= last)
      return VL_EINVAL;
    last = dur_rank(u);
    uint64_t v;
    if ((rc = to_integer(&d, u->mult, 1, &v)) != 0)
      return rc;
    if (v > INT_MAX_VALUE - total)
      return VL_ERANGE;
    total += v;
    s = end + strlen(u->name);
  }
  *usec = total;
  return 0;
}

int vl_units_seconds(const char *s, uint64_t *usec) {
  static const unit_t seconds[] = {{"", 1000000}};
  if (vl_units_bare(s))
    return scan_integer(s, seconds, 1, 1, usec);
  return vl_units_duration(s, usec);
}

void vl_units_duration_why(const char *s, char *buf, size_t len) {
  uint64_t v;
  if (vl_units_bare(s))
    snprintf(buf, len, "a duration needs its unit: %sms? %ss? (as 100ms, 2s, 1m30s, 1h)", s, s);
  else if (vl_units_duration(s, &v) == VL_ERANGE)
    snprintf(buf, len, "too long a duration");
  else
    snprintf(buf, len,
             "want a duration: a number and its unit (us ms s m h), several largest "
             "first, as 100ms, 2s, 1m30s, 1h");
}

int vl_units_count(const char *s, uint64_t *out) {
  static const unit_t units[] = {
      {"", 1}, {"k", 1000}, {"K", 1000}, {"M", 1000000}, {"G", 1000000000}};
  return scan_integer(s, units, VL_ARRAY_SIZE(units), 0, out);
}

int vl_units_double(const char *s, double *out) {
  static const unit_t units[] = {{"", 1}, {"k", 1000}, {"K", 1000}, {"M", 1000000}};
  uint64_t mult;
  int rc;
  if (!s)
    return VL_EINVAL;
  if ((rc = number_start(s)) != 0)
    return rc;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno == ERANGE || !isfinite(v))
    return VL_ERANGE;
  if ((rc = scan_suffix(end, units, VL_ARRAY_SIZE(units), &mult)) != 0)
    return rc;
  v *= (double)mult;
  if (!isfinite(v))
    return VL_ERANGE;
  *out = v;
  return 0;
}

int vl_units_bytes(const char *s, uint64_t *out) {
  static const unit_t units[] = {
      {"", 1},           {"B", 1},           {"k", 1000},         {"K", 1000},     {"KB", 1000},
      {"kB", 1000},      {"KiB", 1024},      {"M", 1000000},      {"MB", 1000000}, {"MiB", 1048576},
      {"G", 1000000000}, {"GB", 1000000000}, {"GiB", 1073741824},
  };
  return scan_integer(s, units, VL_ARRAY_SIZE(units), 1, out);
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
