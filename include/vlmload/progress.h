/* The live progress line drawn on a terminal once a second.
 *
 * The line never wraps: it is cut to the terminal's width by dropping whole fields, the least
 * important first, and never by cutting one. Every figure carries its label or unit ("45.0 req/s",
 * "p50 35.1ms"), so a line read alone is understood.
 */
#ifndef VLMLOAD_PROGRESS_H
#define VLMLOAD_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* What one line shows. A latency below 0 was not measured (nothing completed, or not streamed);
 * a memory figure below 0 has no reading; their fields are left out. */
typedef struct vl_progress_s {
  double elapsed_s;
  const char *phase; /* "warmup", "measure", "flush", "stopping" or a phase's name */
  double rate;       /* requests sent per second over the last interval */
  uint64_t sent, ok, failed, dropped;
  int in_flight;
  double p50_ms, p99_ms; /* end-to-end latency of the run so far */
  double ttft_p50_ms;    /* streamed runs */
  double rss_mb, gpu_mb; /* the first monitored process's, when a monitor follows one */
  int flushes_on;        /* the run flushes the server's caches */
  uint64_t flushes;
  int flushing; /* a drained flush is under way */
} vl_progress_t;

/* The columns of the terminal on descriptor fd (TIOCGWINSZ), read at each call so a resize is
 * followed; 80 when the descriptor is not a terminal or does not say. */
int vl_progress_columns(int fd);

/* Writes the line for p into out (cap bytes, NUL-terminated) in at most width - 1 columns (the
 * last column is left free: writing it makes some terminals wrap at once). Returns its length. */
size_t vl_progress_format(char *out, size_t cap, int width, const vl_progress_t *p);

#endif
