/* The unit scanners on arbitrary text. Each must accept or refuse without touching *out on
 * refusal, stay within its documented range, and agree with the others and with plain arithmetic
 * where their languages overlap: digits alone, a suffix appended, a range of one number. */
#include "fuzz.h"

#include "vlmload/common.h"
#include "vlmload/units.h"

#include <math.h>
#include <string.h>

#define LIMIT   1000000000000000000ull
#define POISON  0x5a5a5a5a5a5a5a5aull
#define POISOND -12345.0

static int all_digits(const char *s) {
  if (!*s)
    return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9')
      return 0;
  return 1;
}

static void check_rc(int rc) {
  FUZZ_CHECK(rc == 0 || rc == VL_EINVAL || rc == VL_ERANGE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096)
    return 0;
  char *s = fuzz_dup(data, size); /* stops at the first NUL, as a C string does */

  uint64_t count = POISON, dur = POISON, secs = POISON, bytes = POISON, lo = POISON, hi = POISON;
  double d = POISOND;
  int rc_count = vl_units_count(s, &count);
  int rc_dur = vl_units_duration(s, &dur);
  int rc_secs = vl_units_seconds(s, &secs);
  int rc_bytes = vl_units_bytes(s, &bytes);
  int rc_range = vl_units_range(s, &lo, &hi);
  int rc_double = vl_units_double(s, &d);
  check_rc(rc_count);
  check_rc(rc_dur);
  check_rc(rc_secs);
  check_rc(rc_bytes);
  check_rc(rc_range);
  check_rc(rc_double);

  /* Refusal leaves the output alone; success stays in range. */
  FUZZ_CHECK(rc_count == 0 ? count <= LIMIT : count == POISON);
  FUZZ_CHECK(rc_dur == 0 ? dur <= LIMIT : dur == POISON);
  FUZZ_CHECK(rc_secs == 0 ? secs <= LIMIT : secs == POISON);
  /* Where a duration has its unit, seconds read it the same. */
  if (rc_dur == 0)
    FUZZ_CHECK(rc_secs == 0 && secs == dur);
  FUZZ_CHECK(rc_bytes == 0 ? bytes <= LIMIT : bytes == POISON);
  FUZZ_CHECK(rc_range == 0 ? lo <= hi && hi <= LIMIT : lo == POISON && hi == POISON);
  FUZZ_CHECK(rc_double == 0 ? isfinite(d) && d >= 0 : d == POISOND);

  /* A single number is a range of one. */
  if (!strchr(s, '-')) {
    FUZZ_CHECK(rc_range == rc_count);
    if (rc_count == 0)
      FUZZ_CHECK(lo == count && hi == count);
  }

  /* Plain digits: the integer itself (a count and a byte size), that many seconds where seconds
   * are the unit, no duration (its unit would be a guess) unless zero, and the same number as a
   * double. */
  size_t len = strlen(s);
  if (all_digits(s)) {
    size_t sig = len;
    const char *q = s;
    while (*q == '0' && sig > 1) {
      q++;
      sig--;
    }
    if (sig <= 19) { /* fits in 64 bits */
      unsigned long long v = strtoull(s, NULL, 10);
      FUZZ_CHECK(v == 0 ? rc_dur == 0 && dur == 0 : rc_dur == VL_EINVAL);
      if (v > LIMIT) {
        FUZZ_CHECK(rc_count == VL_ERANGE && rc_bytes == VL_ERANGE && rc_secs == VL_ERANGE);
      } else {
        FUZZ_CHECK(rc_count == 0 && count == v);
        FUZZ_CHECK(rc_bytes == 0 && bytes == v);
        if (v <= LIMIT / 1000000)
          FUZZ_CHECK(rc_secs == 0 && secs == v * 1000000);
        else
          FUZZ_CHECK(rc_secs == VL_ERANGE);
      }
      FUZZ_CHECK(rc_double == 0 && fabs(d - (double)v) <= (double)v * 1e-15);
    } else {
      FUZZ_CHECK(rc_count == VL_ERANGE);
    }
  }

  /* Counts and doubles agree wherever both accept (a count is exact, a double rounds). */
  if (rc_count == 0 && rc_double == 0)
    FUZZ_CHECK(fabs(d - (double)count) <= fmax(1.0, (double)count) * 1e-9);

  /* A count with "k" appended is a thousand times more, or too large. */
  if (rc_count == 0 && len > 0 && s[len - 1] >= '0' && s[len - 1] <= '9' && len < 4000) {
    char *k = malloc(len + 2);
    FUZZ_CHECK(k != NULL);
    memcpy(k, s, len);
    memcpy(k + len, "k", 2);
    uint64_t v = POISON;
    int rc = vl_units_count(k, &v);
    if (count <= LIMIT / 1000)
      FUZZ_CHECK(rc == 0 && v == count * 1000);
    else
      FUZZ_CHECK(rc == VL_ERANGE && v == POISON);
    /* With "s" appended, a duration of the seconds that seconds read it as. */
    memcpy(k + len, "s", 2);
    uint64_t with_s = POISON;
    if (vl_units_duration(k, &with_s) == 0)
      FUZZ_CHECK(rc_secs == 0 && with_s == secs);
    free(k);
  }
  free(s);
  return 0;
}
