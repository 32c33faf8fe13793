/* The summary of a run: the JSON object --output holds (also the one `vlmload merge` writes from
 * shards' counters), the text summary printed at the end, the memory and process tables, the
 * --max-* thresholds and the knee of a sweep.
 *
 * Everything here reads finished figures and writes nothing but what it is asked to: the JSON
 * functions return new objects the caller owns; the print functions write to the FILE given.
 * Latencies are in milliseconds; a figure that was not measured is null in JSON and "-" in text.
 */
#ifndef VLMLOAD_SUMMARY_H
#define VLMLOAD_SUMMARY_H

#include "vlmload/config.h"
#include "vlmload/flush.h"
#include "vlmload/imagepool.h"
#include "vlmload/stats.h"
#include "vlmload/uniq.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cJSON;
struct vl_monitor_s;
struct vl_rateauto_s;

/* The server gone in the middle of a run: a followed server process that exited, or connections
 * refused one after another once requests had succeeded (runner's watch). */
typedef struct vl_gone_s {
  const char *how;   /* "exited" or "refused" */
  int pid;           /* the process that exited; 0: refusals alone */
  const char *label; /* its target's label, or NULL */
  double at_s;       /* seconds into the run */
  uint64_t after;    /* requests that then could not connect */
  double back_at_s;  /* when a request succeeded again (a restart); negative: never */
  const char *url;   /* the server's URL */
} vl_gone_t;

/* Facts about the finished run for the summary. */
typedef struct vl_run_meta_s {
  const char *model;
  const char *stop_reason; /* "requests", "duration", "signal", "error" */
  int interrupted;
  long socket_errors;
  uint64_t duration_ns; /* t0 to the last completion */
  uint64_t load_ns;     /* t0 to the end of admission, less the pauses for drained flushes in it */
  int processes;        /* processes whose figures were added (merge, --workers); 0 or 1: one */
  const vl_flush_t *flush;            /* NULL when no flushes were asked for */
  const struct vl_srvprof_s *srvprof; /* --server-profile-at's calls; NULL without */
  const vl_imagepool_t *pool;         /* NULL for text only */
  const vl_uniq_t *uniq;              /* NULL unless --unique-images */
  vl_phase_result_t *phases;          /* NULL for a run of one phase */
  const struct vl_monitor_s *mon;     /* memory series, or NULL */
  int n_phases;
  const struct vl_rateauto_s *rate_auto; /* --rate auto: the probe before the run; NULL without */
  const vl_gone_t *gone;                 /* the server gone during the run, or NULL */
  const struct vl_settings_s *settings;  /* the server processes' own settings, or NULL */
} vl_run_meta_t;

/* The line that says the server went (gone), without a newline, into out. */
void vl_summary_gone_words(const vl_gone_t *g, char *out, size_t n);

/* The first, last, lowest and highest sample of one memory series. */
typedef struct vl_summary_mem_s {
  uint64_t n; /* samples seen */
  double first, last, min, max;
} vl_summary_mem_t;

/* Counts sample v into m. */
void vl_summary_mem_add(vl_summary_mem_t *m, double v);

/* The JSON summary of a run (what --output holds, less "memory", "processes", "memory_analysis"
 * and "thresholds", which the caller adds). Caller owns the result. */
struct cJSON *vl_summary_json(const vl_config_t *c, const vl_stats_t *s, const vl_run_meta_t *m);

/* One flush as JSON, as the request log and the summary's "flushes.events" hold it; elapsed_s
 * (seconds from the start of the schedule to the flush) is left out when NaN. Caller owns it. */
struct cJSON *vl_summary_flush_json(const vl_flush_record_t *f, double elapsed_s);

/* The text summary of a run to f: counts, rates, flushes, images, tokens, the latency table, the
 * table of stages and the errors. */
void vl_summary_print(FILE *f, const vl_config_t *c, const vl_stats_t *s, const vl_run_meta_t *m);

/* The memory series (mem[i] of series i of mon, n of them) and the processes followed, as JSON
 * arrays (caller owns them) and as text to f. c gives the --monitor-pid-match expressions. */
struct cJSON *vl_summary_memory_json(const vl_summary_mem_t *mem, size_t n,
                                     const struct vl_monitor_s *mon);
struct cJSON *vl_summary_processes_json(const vl_config_t *c, const struct vl_monitor_s *mon);
void vl_summary_print_memory(FILE *f, const vl_config_t *c, const vl_summary_mem_t *mem, size_t n,
                             const struct vl_monitor_s *mon);

/* The server's counters (counters.h) among the series: their first and last samples and change
 * over the run, as the summary's server.counters (caller owns it) and as a table on f; with
 * --image-reuse the table is followed by the share of images the server counted as cache hits
 * (vllm:mm_cache_hits over vllm:mm_cache_queries) beside the share vlmload sent again. */
struct cJSON *vl_summary_counters_json(const vl_summary_mem_t *mem, size_t n,
                                       const struct vl_monitor_s *mon);
void vl_summary_print_counters(FILE *f, const vl_stats_t *s, const vl_summary_mem_t *mem, size_t n,
                               const struct vl_monitor_s *mon);
/* The change over the run of the server's multimodal cache hits and lookups (vLLM's
 * mm_cache_hits and mm_cache_queries); NaN for one it does not count. */
void vl_summary_hit_share(const vl_summary_mem_t *mem, size_t n, const struct vl_monitor_s *mon,
                          double *hits, double *queries);

/* Checks the --max-* thresholds of c against s: each one crossed is said on stdout (unless
 * c->quiet), and when o is not NULL a "thresholds" array is added to it. Returns the number
 * crossed. */
int vl_summary_thresholds(const vl_config_t *c, const vl_stats_t *s, struct cJSON *o);

#endif
