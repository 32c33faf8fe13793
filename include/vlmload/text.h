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

/* Writes the NUL-terminated s to f in its shown form. */
void vl_text_fput_shown(FILE *f, const char *s);

/* Writes the shown form of s into dst (dstlen bytes, always NUL-terminated when dstlen > 0),
 * cut at a character boundary when it does not fit. Returns the length written. */
size_t vl_text_shown(char *dst, size_t dstlen, const char *s);

#endif
