/* Unit-aware scanners for command-line values. Each parses the whole string or fails: leading or
 * trailing junk, signs where none belong, overflow, NaN and infinity are rejected with VL_EINVAL
 * (VL_ERANGE on overflow). On failure *out is left untouched.
 *
 * The integer scanners compute in exact decimal, never through a double, and return at most 10^18.
 * Durations and byte sizes round a fraction of a microsecond or a byte to nearest; counts refuse
 * any fraction ("1.5", "1000000.0001"). */
#ifndef VLMLOAD_UNITS_H
#define VLMLOAD_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* A number and its unit: "250ms", "30s", "2m", "1h", "1.5s", "500us"; or several, each unit at
 * most once and largest first: "1h30m", "2m30s", "1m30.5s" (each part rounded to the
 * microsecond, then added). A bare number is refused (VL_EINVAL), since its unit would be a
 * guess; only a bare zero ("0") is taken. Result in microseconds. */
int vl_units_duration(const char *s, uint64_t *usec);

/* As vl_units_duration, and a bare number is seconds: for the values whose unit their name says
 * (vlmmock's options, documented so). */
int vl_units_seconds(const char *s, uint64_t *usec);

/* Whether s is one number and nothing after it (digits, a fraction, an exponent): no unit. */
int vl_units_bare(const char *s);

/* Why vl_units_duration refused s, in words for the error line of the option that was given s:
 * a bare number "needs its unit" (and which forms work), a value out of range is too long, and
 * anything else is not a duration. */
void vl_units_duration_why(const char *s, char *buf, size_t len);

/* Non-negative integer with an optional decimal suffix: "100", "10k", "2M", "1G" (k = 1000). */
int vl_units_count(const char *s, uint64_t *out);

/* Finite, non-negative number with an optional suffix k or M: "50", "0.5", "1.5k". */
int vl_units_double(const char *s, double *out);

/* Byte size: "512", "64k"/"64KB" (1000), "64KiB" (1024), "1M", "1MiB", "2G", "2GiB". */
int vl_units_bytes(const char *s, uint64_t *out);

/* An integer "N" or an inclusive range "A-B" with A <= B, both counts as in vl_units_count. */
int vl_units_range(const char *s, uint64_t *lo, uint64_t *hi);

#endif
