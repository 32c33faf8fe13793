/* A small CSV reader: a whole file into memory, cells kept as text, columns found by name.
 *
 * Syntax is RFC 4180 with a few allowances for what monitors write: fields are separated by commas,
 * rows end in LF, CRLF or CR; a field that starts with a double quote (after optional blanks) runs
 * to the matching quote, with "" standing for one quote and line breaks allowed inside; a quote
 * inside an unquoted field is an error. The first row names the columns; names and unquoted cells
 * are stripped of surrounding blanks (spaces and tabs). Empty lines are skipped. Every row must
 * have as many fields as the header. A UTF-8 byte-order mark at the start is skipped.
 *
 * Errors are one line that names the place: "FILE:LINE: what is wrong".
 */
#ifndef VLMLOAD_CSVIN_H
#define VLMLOAD_CSVIN_H

#include <stddef.h>

typedef struct vl_csv_s vl_csv_t;

/* Reads and parses the file at path into *out (the caller frees it with vl_csv_free). Returns 0,
 * VL_EIO when the file cannot be read, VL_EINVAL when it is not valid CSV or has no header; err
 * gets the reason. */
int vl_csv_load(vl_csv_t **out, const char *path, char *err, size_t errlen);

/* Parses len bytes of text (copied); `name` stands for the file in messages. As vl_csv_load. */
int vl_csv_parse(vl_csv_t **out, const char *name, const char *text, size_t len, char *err,
                 size_t errlen);

void vl_csv_free(vl_csv_t *c);

/* The name given at load time (the path). */
const char *vl_csv_source(const vl_csv_t *c);
size_t vl_csv_nrows(const vl_csv_t *c); /* data rows, header excluded */
size_t vl_csv_ncols(const vl_csv_t *c);
const char *vl_csv_colname(const vl_csv_t *c, size_t col);

/* Index of the first column called `name` (exact match), or -1. */
int vl_csv_col(const vl_csv_t *c, const char *name);

/* Text of a cell: never NULL, "" when empty. Valid until vl_csv_free. */
const char *vl_csv_cell(const vl_csv_t *c, size_t row, size_t col);

/* Removes every data row whose cell in the column called col is value (the rows after move up;
 * cells of the rows removed are no longer valid). Returns how many; 0 without such a column. */
size_t vl_csv_drop_rows(vl_csv_t *c, const char *col, const char *value);

/* The line of the file on which data row `row` starts (1-based; the header is line 1 or later). */
size_t vl_csv_lineno(const vl_csv_t *c, size_t row);

/* Parses every cell of column col as a number into out[0..nrows-1]: an empty cell gives NAN.
 * Returns 0, or VL_EINVAL at the first cell that is not a number, with err naming file:line,
 * column and text. */
int vl_csv_numbers(const vl_csv_t *c, size_t col, double *out, char *err, size_t errlen);

/* As vl_csv_numbers, for timestamps (see vl_csv_parse_time), in ms since the Unix epoch. */
int vl_csv_times(const vl_csv_t *c, size_t col, double *out, char *err, size_t errlen);

/* A strict number: optional sign, digits with an optional fraction, optional exponent, surrounding
 * blanks allowed. No hex, inf, nan or thousands separators. Returns 0, VL_ENOENT for an empty (or
 * blank) string, VL_EINVAL otherwise. */
int vl_csv_parse_number(const char *s, double *out);

/* A timestamp into ms since the Unix epoch: a number at least 1e11 is epoch milliseconds, a smaller
 * one epoch seconds (a fraction allowed): 1e11 ms is 1973 and 1e11 s the year 5138, so every
 * plausible date is read right. Or a date "YYYY-MM-DD" (or with '/') optionally followed by 'T' or
 * a space and "HH:MM[:SS[.fff]]", then optionally 'Z' or an offset "+HH:MM", "+HHMM", "+HH". A
 * date without a zone is local time (the TZ environment variable). Returns 0, VL_ENOENT when
 * empty, VL_EINVAL otherwise. */
int vl_csv_parse_time(const char *s, double *ms);

#endif
