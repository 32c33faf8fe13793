/* `vlmload compare RUN RUN...`: runs' figures against the first run's, each with the change, its
 * interval and a word (better, worse, same); see vlmload/compare.h for what is computed. A run is
 * a summary written by --output (its timeline found through the summary's own configuration), or
 * a matrix folder (DIR or DIR/matrix.json), whose cells are compared by name.
 *
 * Exit status: 0, 3 when a figure --fail-if-worse names got worse, 2 for bad usage or input (a
 * file that is not a run, runs of different kinds), 1 when an output could not be written.
 */
#ifndef VLMLOAD_COMPARECLI_H
#define VLMLOAD_COMPARECLI_H

#include <stdio.h>

/* argv[0] is "compare". Returns the exit status (above). */
int vl_comparecli_main(int argc, char **argv);

/* Writes the text `vlmload compare --help` prints to f. */
void vl_comparecli_usage(FILE *f);

#endif
