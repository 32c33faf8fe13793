/* The server's own words in an error body that is not JSON, read as the body arrives and never
 * held.
 *
 * A plain-text body gives its first line that holds more than white space (aiohttp's
 * "404: Not Found"). A body whose first byte past white space is '<' is read as HTML: its text
 * outside tags, comments, scripts and styles, white space runs as one space, the entities &amp;
 * &lt; &gt; &quot; &apos; &nbsp; and &#N; / &#xH; decoded, up to the end of the first element that
 * ends a line (a title, a heading, a paragraph, a <br>...) that held text. A page's <title> comes
 * before its body, so it is the page's words when it has one; else the first line of its text.
 *
 * The words are at most VL_ERRTEXT_MAX - 1 bytes, cut between UTF-8 characters, without white
 * space at either end; what follows them is not looked at. The bytes are as the server sent them
 * (control bytes and invalid UTF-8 included): escape them before they reach a terminal.
 */
#ifndef VLMLOAD_ERRTEXT_H
#define VLMLOAD_ERRTEXT_H

#include <stddef.h>

#define VL_ERRTEXT_MAX 256

typedef struct vl_errtext_s {
  char text[VL_ERRTEXT_MAX]; /* the words so far; NUL-terminated by vl_errtext_get */
  size_t len;
  int state; /* see errtext.c */
  int html;  /* -1 until the first byte past white space, then whether the body is HTML */
  int space; /* a white space run is pending between words */
  char tag[12];
  int tag_len;  /* bytes of the tag's name kept (lower case), past the '<' */
  int raw;      /* inside a script or style: text up to its closing tag is skipped */
  int dashes;   /* '-' bytes just seen in a comment */
  char ent[12]; /* an entity's bytes after '&' */
  int ent_len;
} vl_errtext_t;

/* Starts on a new body. */
void vl_errtext_reset(vl_errtext_t *t);

/* Takes the body's next n bytes. */
void vl_errtext_feed(vl_errtext_t *t, const char *p, size_t n);

/* The words found so far (the body may have ended anywhere): NUL-terminated, "" when none. Valid
 * until the next call on t. */
const char *vl_errtext_get(vl_errtext_t *t);

#endif
