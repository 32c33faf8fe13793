/* `vlmload merge`: combines the --histograms records of several shards into one summary (and,
 * optionally, one timeline) by adding counters and histogram counts, so percentiles come from the
 * merged counts and are exact, never averages of percentiles. */
#ifndef VLMLOAD_MERGE_H
#define VLMLOAD_MERGE_H

#include <stdio.h>

/* argv[0] is "merge". Returns the process exit status (0, 1 on a bad input file, 2 on bad usage).
 */
int vl_merge_main(int argc, char **argv);

/* Writes the text `vlmload merge --help` prints to f, in the shape of vl_analyzecli_usage's. */
void vl_merge_usage(FILE *f);

#endif
