/* Text that came from outside (a server's reply, a file, the command line) on its way to a
 * terminal or a one-line message.
 *
 * Such text is data: a control character in it (ESC, BEL, a newline, a C1 control such as CSI)
 * must not reach a terminal raw, and bytes that are not UTF-8 must not pass for characters. The
 * shown form writes every such byte as \xHH and every other character as it is, so the result is
 * printable UTF-8 on one line and tells the bytes apart.
 */
#ifndef VLMLOAD_TEXT_H
#define VLMLOAD_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Whether the n bytes at s are valid UTF-8 (no overlong forms, no surrogates, nothing past
 * U+10FFFF). */
int vl_text_utf8_valid(const char *s, size_t n);

/* Whether needle occurs in hay, ASCII letters compared in any case. */
int vl_text_contains_ci(const char *hay, const char *needle);

/* Writes the NUL-terminated s to f in its shown form. */
void vl_text_fput_shown(FILE *f, const char *s);

/* Writes the shown form of s into dst (dstlen bytes, always NUL-terminated when dstlen > 0),
 * cut at a character boundary when it does not fit. Returns the length written. */
size_t vl_text_shown(char *dst, size_t dstlen, const char *s);

/* A cell of a summary's table: a space and v in 9 columns with 2 decimals, or "-" where nothing
 * was measured (v not finite). */
void vl_text_cell(FILE *f, double v);

/* v with sig significant digits (1 to 15) in fixed notation, never an exponent: as printf's %g
 * would round it, trailing zeros dropped ("0.00012", "123457", "3.1"), at most 9 decimals (a value
 * under 5e-10 reads 0), a + before a positive value with plus, "-" when v is not finite. Writes at
 * most n bytes, NUL included; returns out. */
char *vl_text_num(char *out, size_t n, double v, int sig, int plus);

/* The widest line vlmload's own text (the banner, the summary) is wrapped to. */
#define VL_TEXT_COLUMNS 100

/* A line of fields written to a stream and wrapped at field boundaries: a field that would pass
 * the width starts a new line indented by `indent` spaces, after the separator's visible part
 * (", " leaves "," at the line's end). A field wider than a line on its own stands alone on one.
 * Columns are counted as UTF-8 characters. */
typedef struct vl_text_wrap_s {
  FILE *f;
  int width, indent, col;
  int fields; /* fields on the current line */
} vl_text_wrap_t;

/* Starts a line on f with head written as it is (a label, or ""). */
void vl_text_wrap_start(vl_text_wrap_t *w, FILE *f, int width, int indent, const char *head);

/* Adds one field, printf-formatted, after sep (ignored for a line's first field). */
void vl_text_wrap_add(vl_text_wrap_t *w, const char *sep, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds prefix followed by the shown form of s as one field. */
void vl_text_wrap_shown(vl_text_wrap_t *w, const char *sep, const char *prefix, const char *s);

/* Adds each space-separated word of text as a field (sentences wrapped between words). */
void vl_text_wrap_words(vl_text_wrap_t *w, const char *text);

/* Ends the line with a newline. */
void vl_text_wrap_end(vl_text_wrap_t *w);

#endif
