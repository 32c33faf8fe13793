/* The lengths' part of the summary (--input-tokens, --output-tokens): the prompt tokens meant
 * against those the server reported in usage, the chat template's and the images' share of them,
 * and the max_tokens sent. Keys are SGLang's bench_serving's where it has one
 * (total_input_text_tokens, total_input_vision_tokens, total_input_tokens). */
#ifndef VLMLOAD_LENSUM_H
#define VLMLOAD_LENSUM_H

#include "vlmload/config.h"
#include "vlmload/stats.h"

#include <stdio.h>

struct cJSON;

/* The figures both summaries show, from the counters. A figure with nothing to count is NaN. */
typedef struct vl_lensum_s {
  double mean_intended;    /* the prompts' text tokens, per request */
  double mean_reported;    /* usage.prompt_tokens, per request that gave it */
  double template_tokens;  /* text-only requests: reported less intended (the chat template) */
  double vision_total;     /* image requests: reported less intended less the template */
  double vision_per_image; /* vision_total over their images */
  double mean_max_tokens;  /* the max_tokens the requests sent */
  double text_excess_pct;  /* text-only requests: reported less intended, in per cent of intended
                              (an estimate's measured error, the template included) */
} vl_lensum_t;

void vl_lensum_figures(const vl_lengths_stats_t *l, vl_lensum_t *out);

/* Whether the run has lengths to report (either option given). */
int vl_lensum_any(const vl_config_t *c);

/* The summary's "lengths" object. Caller owns it. */
struct cJSON *vl_lensum_json(const vl_config_t *c, const vl_lengths_stats_t *l);

/* The text summary's "lengths" line(s), values from column `values`. */
void vl_lensum_print(FILE *f, const vl_config_t *c, const vl_lengths_stats_t *l, int values);

#endif
