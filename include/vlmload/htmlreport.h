/* --report FILE.html: one self-contained HTML page of a run, built from what the run already
 * wrote: the JSON summary, the timeline and the memory analysis.
 *
 * The page needs no network: its styles are inline, its charts inline SVG, and it has no scripts,
 * links or images. Under its title, the target URL and the model; then, verdict first: the memory
 * verdict of each series and the memory plot (gnuplot's SVG, inlined); the summary (requests,
 * the error classes that occurred, requests by image size when sizes failed apart, throughputs,
 * goodput and SLO shares when the summary has them); the latency percentiles (one row per latency
 * the summary has, one column per figure it gives); requests and tokens per second of the run,
 * the timeline's rows added up into whole seconds, and latency per timeline row (drawn here as
 * SVG, each line's figures also in its data-x and data-y attributes); the phases, one row per
 * phase with the times it came back (a flush's: once per flush); and the effective
 * configuration. Every text that comes from the server, the user or a file (model ids, error
 * messages, phase and series names, the configuration) is HTML-escaped.
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

/* One cell of a table: its text (NULL: empty), and a link it is the anchor of (a path relative to
 * the page, written percent-encoded; NULL: none). */
typedef struct vl_htmlreport_cell_s {
  const char *text;
  const char *href;
} vl_htmlreport_cell_t;

/* A <table id=ID> with a row of ncols headings and nrows rows of ncols cells (cells[row * ncols +
 * col]); every text escaped. */
void vl_htmlreport_table(FILE *f, const char *id, const char *const *head, size_t ncols,
                         const vl_htmlreport_cell_t *cells, size_t nrows);

/* The path of the existing file target relative to the folder of page (whose folder exists), for
 * a link from one to the other ("cell/report.html", "../out/cell/report.html"). Returns 0, or -1
 * when either cannot be resolved or out (n bytes) is too small. */
int vl_htmlreport_relative(const char *page, const char *target, char *out, size_t n);

#endif
