/* `vlmload analyze` and the engine it shares with --analyze: reads a run's memory series
 * (series.h), analyses each one (analyze.h), and writes the text report, a JSON report and a PNG
 * plot.
 */
#ifndef VLMLOAD_ANALYZECLI_H
#define VLMLOAD_ANALYZECLI_H

#include "vlmload/analyze.h"
#include "vlmload/csvin.h"
#include "vlmload/series.h"

#include <cjson/cJSON.h>
#include <stdio.h>

typedef struct vl_analyzecli_cfg_s {
  vl_series_opts_t read;       /* what to read: axis, warm-up, series, external time column */
  const char *plot;            /* PNG path, or NULL */
  int plot_width, plot_height; /* 0 = default */
  const char *gnuplot;         /* the program that draws it; NULL: gnuplot on PATH */
  const char *output;          /* JSON path, or NULL */
  char **svg;                  /* when set: gets the memory plot as SVG (caller frees), or NULL */
  FILE *text;                  /* the text report, or NULL for none */
  vl_analyze_opts_t opts;
  unsigned fail_on; /* --fail-on: verdicts, a mask of (1u << vl_verdict_t), that fail; 0: none */
  FILE *fail_text;  /* where a line per series that fails goes ("fail-on: NAME is VERDICT"), or
                       NULL for none */
  size_t *failed;   /* when set: gets how many series' verdicts are in fail_on */
  const vl_analyze_cap_t *caps; /* caps the mechanisms judge by (borrowed), or NULL */
  size_t n_caps;
} vl_analyzecli_cfg_t;

/* Defaults: requests axis, warm-up from the phase column, all series, no outputs, text and the
 * --fail-on lines to stdout, nothing fails. */
void vl_analyzecli_cfg_init(vl_analyzecli_cfg_t *cfg);

/* Analyses the timeline table (and the external one, or NULL): prints to cfg->text, writes
 * cfg->plot and cfg->output when set, draws *cfg->svg when cfg->svg is set, and when json is not
 * NULL hands back the report object (caller frees with cJSON_Delete). timeline_name and
 * external_name label the sources in the report (NULL: the tables' own names). Returns 0, VL_EINVAL
 * (bad input: missing column, bad number, unknown --series name, no series at all), VL_EIO (an
 * output cannot be written); err gets one line. */
int vl_analyzecli_run(const vl_csv_t *timeline, const vl_csv_t *external,
                      const vl_analyzecli_cfg_t *cfg, cJSON **json, char *err, size_t errlen);

/* `vlmload analyze TIMELINE.csv [options]`: argv[0] is the subcommand's name ("analyze"), options
 * follow. Prints --help to stdout and one-line errors to stderr. Returns the exit status: 0, 1 when
 * an input cannot be read or an output written, 2 for bad usage (--quiet with nothing else to
 * give: no --output, --plot, --report or --fail-on), 3 when a series' verdict is one --fail-on
 * names. */
int vl_analyzecli_main(int argc, char **argv);

/* Writes the text `vlmload analyze --help` prints to f: a Usage line, a description, one line per
 * option ("  --name ARG   meaning", continued on lines indented further) and the verdicts. The
 * man page and the shell completion are generated from it. */
void vl_analyzecli_usage(FILE *f);

#endif
