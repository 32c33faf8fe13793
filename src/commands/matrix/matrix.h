/* `vlmload matrix FILE.json`: a list of cells, each a load (vlmload options over shared
 * defaults) run against its own freshly started server, compared side by side on memory.
 *
 * For each cell in turn: the server is started (its command, with {port} a free loopback port, in
 * a session of its own), its health route polled until it answers 200, the load run as a child
 * vlmload (this program, with a --config file written for the cell) that monitors the server's
 * process tree, and the server stopped (SIGTERM to its process group, SIGKILL after a grace).
 * The cell's memory analysis is the child's own (its summary's memory_analysis). A cell that
 * fails (a server that never becomes ready or exits, a load that fails) is recorded as failed
 * and the next cell runs. The first SIGINT or SIGTERM stops the cell as a run stops (the load
 * waits --grace for its requests in flight; a second signal cancels them), stops the server, runs
 * no further cell and writes every output of what was measured.
 *
 * Outputs, in --output-dir: CELL/ (config.json, summary.json, timeline.csv, memory.png, output.txt
 * with the load's text summary, server.log, report.html with --report), matrix.json (cells[],
 * each {name, status, error, options, server, summary, series[]}, series[] as the summary's
 * memory_analysis.series), rss.png (every cell's resident set over requests completed, on the
 * same axes) and the comparison table on stdout.
 *
 * Exit status: 0 when every cell ran, 1 when a cell failed or an output could not be written,
 * 2 for bad usage or a bad file (said before any cell runs), 130 when interrupted.
 */
#ifndef VLMLOAD_MATRIX_H
#define VLMLOAD_MATRIX_H

#include <stdio.h>

/* `vlmload matrix FILE.json [options] [-- OPTION...]`: argv[0] is "matrix". Returns the exit
 * status (above). */
int vl_matrix_main(int argc, char **argv);

/* Writes the text `vlmload matrix --help` prints to f (the man page and completion use it). */
void vl_matrix_usage(FILE *f);

#endif
