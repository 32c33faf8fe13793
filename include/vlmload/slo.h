/* Service-level objectives (--slo) and the percentiles the summary reports (--percentiles).
 *
 * A request meets the SLOs when it succeeded and each bound given holds, as vLLM's `vllm bench
 * serve --goodput` judges it: TTFT (first token minus send), TPOT (see vl_stats_tpot_us) and
 * end-to-end latency from the send ("e2el"). A successful request that has no TTFT (not streamed,
 * or no token came) or no TPOT (fewer than two completion tokens) counts both as 0 there, so it
 * meets those two bounds here too. Judging is a few comparisons; nothing allocates.
 */
#ifndef VLMLOAD_SLO_H
#define VLMLOAD_SLO_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;

/* The bounds in microseconds; 0: not given. */
typedef struct vl_slo_s {
  uint64_t ttft_us, tpot_us, e2e_us;
} vl_slo_t;

/* Bits of a judgement: which bounds a request met (a bound not given is met), and all of them. */
enum { VL_SLO_TTFT = 1, VL_SLO_TPOT = 2, VL_SLO_E2E = 4, VL_SLO_ALL = 8 };
/* The number of bits above, the index of each in a vl_slo_met_t: ttft, tpot, e2e, all. */
#define VL_SLO_N 4

/* Requests judged and how many met each bound (index as the bits: ttft, tpot, e2e, all). */
typedef struct vl_slo_met_s {
  uint64_t judged;
  uint64_t met[VL_SLO_N];
} vl_slo_met_t;

/* Parses "ttft=500ms,tpot=50ms,e2e=10s" (any non-empty subset, each at most once; "e2el" is
 * "e2e"; durations as vl_units_duration reads them, above 0) into *out. Returns 0, or -1 with
 * why (n bytes) naming the bad part; *out is then unchanged. */
int vl_slo_parse(const char *spec, vl_slo_t *out, char *why, size_t n);

/* Whether any bound is given. */
int vl_slo_any(const vl_slo_t *slo);

/* The spec again, canonical ("ttft=500ms,e2e=10s"), into out (n bytes); "" when none. */
void vl_slo_format(const vl_slo_t *slo, char *out, size_t n);

/* Counts a judgement (the bits vl_stats_slo returned) into m. */
void vl_slo_count(vl_slo_met_t *m, unsigned bits);

/* The summary's "slo" object: each bound given in milliseconds ("ttft_ms", "tpot_ms",
 * "e2el_ms"), "judged", "met" (the share of judged requests meeting each bound given) and
 * "met_all"; shares are null when none was judged. Caller owns it. */
struct cJSON *vl_slo_json(const vl_slo_t *slo, const vl_slo_met_t *m);

/* Percentiles: at most VL_SLO_MAX_PERCENTILES, each above 0 and at most 100 (vLLM's
 * --metric-percentiles); the default list is what the summary always had. */
#define VL_SLO_MAX_PERCENTILES 5 /* what the text table's width holds */
/* Parses "50,90,95,99,99.9" into out (count to *n). Returns 0, or -1 with why naming the bad
 * part; out and *n are then unchanged. */
int vl_slo_parse_percentiles(const char *spec, double *out, int *n, char *why, size_t wn);

/* A percentile as vLLM names it: "99", "99.9" (an integer without a fraction). */
void vl_slo_pct_name(double p, char *out, size_t n);

#endif
