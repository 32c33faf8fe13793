/* Units of memory as series names and programs' output state them: which values are memory, and
 * in what unit. One rule serves the monitor, which names its series and converts what a command
 * prints, and the analysis, which reads the series back from a timeline by their names, so that
 * the two agree on every column.
 *
 * k, M, G and T are powers of 1024 in every spelling (kB, KiB, K, MB, MiB...), as the kernel's
 * "kB" and vlmload's MB (1048576 bytes) are.
 */
#ifndef VLMLOAD_MEMUNIT_H
#define VLMLOAD_MEMUNIT_H

#include <stddef.h>

#define VL_MEMUNIT_MB 1048576.0

/* vl_memunit_series: the name states nothing; the caller assumes MB. */
#define VL_MEMUNIT_UNSTATED (-1.0)

/* Bytes in one unit named by the n bytes at w, a word a program prints after a number: "B",
 * "bytes", "kB", "KiB", "Ki", "K", the same with M, G and T, "kilobytes", "mebibytes"...; ASCII
 * letters in any case. 0 when w names no unit of memory. */
double vl_memunit_word(const char *w, size_t n);

/* What a series' name says of its values. Words are runs of ASCII letters and digits, compared in
 * any case; text inside {...} (a metric's labels) is left out.
 *   > 0: memory, in units of that many bytes: the first word that names a unit: "bytes" (or
 *        any word ending in it, as "memorybytes"), "kb", "kib", "kbytes", "kilobytes",
 *        "kibibytes", and the same with m, g and t ("mb", "mib", "megabytes", ...);
 *   0:   not memory. A Prometheus series (prom.METRIC, prom.LABEL.METRIC, with {labels} and a ~N
 *        suffix allowed) is memory only when its metric's name states a unit: a gauge of
 *        requests, tokens or a ratio is not, nor a counter or a histogram's or summary's part
 *        (the metric's last word total, count, sum, bucket or created). Any other name that
 *        states no unit is not memory when it speaks of a share: a word that begins with "perc" or
 *        "pct", ends with "pct", or begins or ends with "ratio" (not "duration"); the
 *        monitor's count of arena heaps (arenas.LABEL) is not memory either;
 *   VL_MEMUNIT_UNSTATED: the name states nothing. */
double vl_memunit_series(const char *name);

/* "bytes", "kB", "MB", "GB" or "TB" for 1, 2^10, 2^20, 2^30 or 2^40 bytes; "" for anything else. */
const char *vl_memunit_label(double bytes);

#endif
