/* --metrics-listen: the run's own figures on an HTTP endpoint in Prometheus's text format
 * (version 0.0.4), for Prometheus to scrape while the run goes.
 *
 * The event loop owns the run's state and never waits on a scrape. At each tick it renders the
 * figures into text (vl_metrics_publish) and swaps that text in under a mutex; the HTTP server
 * (libmicrohttpd, on a thread of its own) copies the latest text under the same mutex and sends
 * the copy. A scrape therefore sees the figures of the latest tick, at most one tick old, and
 * nothing of the run is read off the loop. The server outlives the loop: it answers while the
 * outputs are written and, with --metrics-linger, that long after the last publish, so the last
 * scrape sees the end.
 *
 * Latency histograms are vlmload's own (hist.h), not a second one: each of their buckets (0.1%
 * wide) is counted under the first le bound at or above the highest value it stands for, so the
 * le buckets are cumulative and exact at that resolution; _sum and _count are the exact sum and
 * count.
 */
#ifndef VLMLOAD_METRICS_H
#define VLMLOAD_METRICS_H

#include "vlmload/hist.h"
#include "vlmload/response.h"

#include <stddef.h>
#include <stdint.h>

typedef struct vl_metrics_s vl_metrics_t;

/* One memory series as the endpoint serves it: its name (rss_mb.server, prom.mock.METRIC...),
 * the process or target it reads (the part after the first dot), and its latest reading in
 * bytes. Borrowed for the call. */
typedef struct vl_metrics_mem_s {
  const char *series;
  double bytes;
} vl_metrics_mem_t;

/* The figures one publish serves. Counters are the run's so far; histograms hold microseconds
 * (VL_STATS_HIGHEST_US, 3 digits); every pointer is borrowed for the call, NULL for a histogram
 * not kept (it is then served empty). */
typedef struct vl_metrics_figures_s {
  const char *phase; /* "warmup", "measure", "flush", "stopping", "done" or a phase's name */
  double elapsed_s;  /* since the start of the schedule */
  uint64_t sent, ok, failed, dropped;
  uint64_t errors[VL_ERR__COUNT];
  int64_t in_flight;
  double target_rate;   /* arrivals per second asked for now; 0: a closed loop */
  double achieved_rate; /* requests sent per second over the latest interval */
  const vl_hist_t *e2e, *e2e_sent, *ttft, *itl, *tpot, *send_lag;
  uint64_t flushes;
  double paused_s; /* admission paused for drained flushes */
  uint64_t images, image_bytes;
  uint64_t prompt_tokens, completion_tokens;
  const vl_metrics_mem_t *mem; /* memory series with a reading */
  size_t n_mem;
} vl_metrics_figures_t;

/* Listens on addr ("ADDR:PORT", "[V6ADDR]:PORT"; port 0 picks a free one) and starts serving
 * GET /metrics (empty until the first publish). Returns 0, or VL_EINVAL (listen is malformed) or
 * VL_EIO (the address cannot be bound: in use, not this machine's) with a one-line reason in
 * err. */
int vl_metrics_start(vl_metrics_t **out, const char *addr, char *err, size_t errlen);

/* The port the endpoint listens on. */
unsigned vl_metrics_port(const vl_metrics_t *m);

/* Renders f and makes it what the next scrape gets. Call from one thread (the loop's). */
void vl_metrics_publish(vl_metrics_t *m, const vl_metrics_figures_t *f);

/* Scrapes answered so far. */
uint64_t vl_metrics_scrapes(vl_metrics_t *m);

/* Renders f into text (Prometheus's text format, newline-terminated); *len its length. The text
 * is the caller's to free. */
char *vl_metrics_render(const vl_metrics_figures_t *f, size_t *len);

/* Keeps answering for linger_us more (cut short by SIGINT or SIGTERM), then stops the server and
 * frees m. NULL is a no-op. */
void vl_metrics_stop(vl_metrics_t *m, uint64_t linger_us);

#endif
