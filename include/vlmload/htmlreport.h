/* --report FILE.html: one self-contained HTML page of a run, built from what the run already
 * wrote: the JSON summary, the timeline and the memory analysis.
 *
 * The page needs no network: its styles are inline, its charts inline SVG, and it has no scripts,
 * links or images. Sections: the summary (requests, errors by class, throughputs, goodput and SLO
 * shares when the summary has them), the latency percentiles (one row per latency the summary
 * has, one column per figure it gives), throughput and latency per timeline row (drawn here as
 * SVG), the phases, the memory plot (gnuplot's SVG, inlined) with the verdict of each series,
 * and the effective configuration. Every text that comes from the server, the user or a file
 * (model ids, error messages, phase and series names, the configuration) is HTML-escaped.
 */
#ifndef VLMLOAD_HTMLREPORT_H
#define VLMLOAD_HTMLREPORT_H

#include "vlmload/csvin.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

/* What the error says when the memory plot needs gnuplot and it cannot be found. */
#define VL_HTMLREPORT_NO_GNUPLOT                                                                   \
  "--report needs gnuplot for its memory plot (apt-get install gnuplot-nox): not found on PATH"

typedef struct vl_htmlreport_s {
  const cJSON *summary;     /* the JSON summary (summary.h), or NULL (vlmload analyze) */
  const cJSON *analysis;    /* the memory analysis (analyzecli.h), or NULL: the summary's own */
  const vl_csv_t *timeline; /* the run's timeline (timeline.h columns), or NULL */
  const char *memory_svg;   /* the memory plot, an SVG document as gnuplot writes it, or NULL */
  const char *source;       /* what the page is of (a file name), or NULL */
} vl_htmlreport_t;

/* Writes the page to f. Returns 0, or VL_EIO when f records a write error. */
int vl_htmlreport_render(const vl_htmlreport_t *r, FILE *f);

/* Writes the page at path as every output is written (outfile.h). Returns 0 or VL_EIO with why
 * set (the reason, without the path). */
int vl_htmlreport_write(const vl_htmlreport_t *r, const char *path, char *why, size_t whylen);

/* Writes s to f with & < > " ' as entities; NULL writes nothing. */
void vl_htmlreport_escape(FILE *f, const char *s);

#endif
