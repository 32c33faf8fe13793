/* `vlmload merge`: combines the --histograms records of several shards into one summary (and,
 * optionally, one timeline) by adding counters and histogram counts, so percentiles come from the
 * merged counts and are exact, never averages of percentiles. */
#ifndef VLMLOAD_MERGE_H
#define VLMLOAD_MERGE_H

#include "vlmload/config.h"

#include <stdio.h>

struct cJSON;

/* What vl_merge_files writes from its inputs. Every path may be NULL (not written). */
typedef struct vl_merge_opts_s {
  const char *summary;    /* the JSON summary (the schema of --output) */
  const char *timeline;   /* one CSV row per wall-clock second across all inputs */
  const char *histograms; /* the merged run's --histograms record (it merges again as one input) */
  /* The configuration the summary states and is judged by (--max-*); NULL: the first input's,
   * with no thresholds. */
  const vl_config_t *cfg;
  const char *stop_reason;   /* the summary's; NULL: "merged" */
  int interrupted;           /* the runs were stopped by a signal */
  FILE *text;                /* the text summary (as a run prints it) goes here; NULL: none */
  const struct cJSON *extra; /* keys copied into the summary over its own, or NULL (not owned) */
  int list_inputs;           /* add "merged_from", the input paths */
  int crossed;               /* out: --max-* thresholds of cfg the merged run crossed */
} vl_merge_opts_t;

/* Merges the --histograms records at inputs[0..n) exactly (counters and histogram counts added)
 * and writes what o asks for. Returns 0, or 1 after saying on stderr what failed (a missing or
 * bad input, an output that could not be written). */
int vl_merge_files(const char *const *inputs, int n, vl_merge_opts_t *o);

/* argv[0] is "merge". Returns the process exit status (0, 1 on a bad input file, 2 on bad usage).
 */
int vl_merge_main(int argc, char **argv);

/* Writes the text `vlmload merge --help` prints to f, in the shape of vl_analyzecli_usage's. */
void vl_merge_usage(FILE *f);

#endif
