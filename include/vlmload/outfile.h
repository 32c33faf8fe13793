/* Output files: how vlmload writes what it is asked to, in one place.
 *
 * Files written whole at the end (the JSON summary, the histograms, the analysis, the plot) go
 * through vl_outfile_write. A path that names a regular file, or nothing yet, is written to a
 * temporary file beside it that is then renamed over it, so a reader never sees half a file and
 * a failed write leaves the old one. Any other path (a character device such as /dev/null, a FIFO,
 * a socket, a symbolic link such as /dev/stdout) is opened and written in place: a rename would
 * replace the device node, the FIFO or the link itself. The path itself is looked at (lstat): a
 * link is written through, never replaced.
 *
 * Files written as the run goes (the timeline, the request log, the samples) are opened by the
 * caller; vl_outfile_probe finds one that opens but takes no byte (a full disk, /dev/full).
 *
 * Reasons are short texts without the path ("Permission denied"); callers put the flag and the path
 * in front.
 */
#ifndef VLMLOAD_OUTFILE_H
#define VLMLOAD_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

/* Writes the content of an output file to f. Returns 0, or a negative VL_E* code with why set (or
 * left empty for vl_strerror's text); a write error f records (ferror) fails the write too. */
typedef int (*vl_outfile_fill_cb)(FILE *f, void *arg, char *why, size_t whylen);

/* Whether vl_outfile_write(path) can succeed later, asked before a run so that a bad path is an
 * error at once. Nothing is left behind: for a regular or absent path, a temporary file is made
 * beside it and removed; any other path is not even opened (opening a FIFO would hand its reader
 * an end of file), only access(2) is asked. Returns 0, or a negative errno code with why set. */
int vl_outfile_check(const char *path, char *why, size_t whylen);

/* Writes path whole with fill, as the header says. Opening a FIFO waits for its reader. While the
 * temporary file exists, SIGINT, SIGTERM and SIGHUP are held back and delivered once it is renamed
 * or removed, so no signal leaves it behind. Returns 0 or a negative VL_E* code with why set. */
int vl_outfile_write(const char *path, vl_outfile_fill_cb fill, void *arg, char *why,
                     size_t whylen);

/* vl_outfile_write of text followed by a newline. */
int vl_outfile_write_text(const char *path, const char *text, char *why, size_t whylen);

/* Tries one byte on a stream just opened for writing, before anything was written to it, to find
 * a file that opens but cannot be written. A regular file gets a byte that is truncated away; a
 * character device a newline (a blank line on a terminal, nothing on /dev/null, ENOSPC on
 * /dev/full); a FIFO, pipe or socket is left alone (a byte would reach its reader). Returns 0, or
 * a negative errno code with why set. */
int vl_outfile_probe(FILE *f, char *why, size_t whylen);

/* A scratch file for reading and writing in $TMPDIR (or /tmp when unset or empty), unlinked as soon
 * as it is made, so that no exit, not even SIGKILL, leaves it behind. Returns NULL with why set. */
FILE *vl_outfile_scratch(const char *prefix, char *why, size_t whylen);

#endif
