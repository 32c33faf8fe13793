/* What the leak analysis judges by, as a command line gives it: the verdicts, the options that
 * say what growth is material (--min-growth, --min-growth-mb, --min-slope) and the verdicts that
 * fail a run (--fail-on). Plain data with its parsers, free of the analysis itself, so that the
 * run's configuration can hold it and `vlmload analyze` parses the same options with the same
 * functions: each option means the same on both.
 */
#ifndef VLMLOAD_ANALYZESPEC_H
#define VLMLOAD_ANALYZESPEC_H

#include <stddef.h>

/* Defaults of the materiality options. Growth over the analysed run is material when it is at
 * least VL_ANALYZE_MIN_GROWTH_MB (series in MB only) and either at least
 * VL_ANALYZE_MIN_GROWTH_FRAC of the series' mean or at a slope of at least VL_ANALYZE_MIN_SLOPE MB
 * per 1000 requests.
 *
 * The absolute floor is what a process that holds its memory steady is still seen to move by over
 * a run. Its resident set moves with no allocation changing: transparent huge pages bring and
 * take anonymous memory 2 MiB at a time, and glibc keeps freed memory at the top of its heaps up
 * to its trim threshold (128 KiB, raised with the mmap threshold up to 64 MiB) before it gives any
 * back. And a post-flush floor is sampled at some random point of the cache's refill: the mock
 * server holding 512 KiB per image request, flushed every 50 requests at 50 requests/s and
 * sampled every 200 ms, has floors that scatter by 1.7 MB (standard deviation), and over 30 flush
 * windows the 95% interval of their slope admitted up to 5 MB of growth over the run in 16 runs
 * of a server that never leaked. 8 MB over a run is above all of these; 1% of the mean is not
 * (0.3 MB for that server). */
#define VL_ANALYZE_MIN_GROWTH_FRAC 0.01
#define VL_ANALYZE_MIN_GROWTH_MB   8.0
#define VL_ANALYZE_MIN_SLOPE       1.0

typedef enum {
  VL_VERDICT_INSUFFICIENT = 0, /* "insufficient-data" */
  VL_VERDICT_FLAT,             /* "flat" */
  VL_VERDICT_SAWTOOTH,         /* "sawtooth-returns" */
  VL_VERDICT_GROWS,            /* "grows" */
  VL_VERDICT_INCONCLUSIVE,     /* "inconclusive" */
  VL_VERDICT_LEVELS_OFF,       /* "levels-off" */
  VL_VERDICT_PEAK,             /* "peak" */
  VL_VERDICT_NOT_MEMORY,       /* "not-memory" */
  VL_VERDICT_ENDED_EARLY,      /* "ended-early": its samples stop before the run does */
} vl_verdict_t;

/* How many verdicts there are; a set of them is a mask of (1u << verdict). */
#define VL_VERDICT_N 9

/* "grows", "sawtooth-returns", "flat", "levels-off", "inconclusive", "peak", "not-memory",
 * "ended-early", "insufficient-data". */
const char *vl_analyze_verdict_name(vl_verdict_t v);

/* The option parsers. Each returns 0, or -1 with *why pointing at (static) words that say what is
 * wanted; the output is untouched then. */

/* --min-growth PCT: a percentage from 0 to 100 ("1", "0.5%"), as a fraction. */
int vl_analyze_spec_min_growth(const char *arg, double *frac, const char **why);
/* One cap of --expect-cap, SERIES=SIZE (SIZE as vl_units_bytes reads it, above 0), the item of
 * arg that ends at its first ',' or its end: target gets SERIES (at most n - 1 bytes), *bytes the
 * size, *end where the item ends. Returns 0, or VL_EINVAL with *why (static). */
int vl_analyze_spec_cap(const char *arg, char *target, size_t n, double *bytes, const char **end,
                        const char **why);

/* --min-growth-mb MB: MB over the run, 0 (no absolute floor) to 1e9. */
int vl_analyze_spec_min_growth_mb(const char *arg, double *mb, const char **why);
/* --min-slope MB: MB per 1000 requests (or images), 0 (off) to 1e9. */
int vl_analyze_spec_min_slope(const char *arg, double *slope, const char **why);

/* --fail-on LIST: verdict names separated by commas, into a mask of (1u << verdict). Returns 0,
 * or -1 with one line in why (the name that is not a verdict, and the verdicts). */
int vl_analyze_spec_fail_on(const char *arg, unsigned *mask, char *why, size_t n);

#endif
