#include "vlmload/sse.h"
#include "vlmload/common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The only field that matters is "data", so a line is classified as its bytes arrive, whichever
 * chunk they come in: p->field counts the bytes of "data:" matched so far (0..5), becomes
 * FIELD_VALUE once the optional space after the colon is settled, and FIELD_SKIP as soon as a byte
 * shows the line is something else (a comment, another field). A line that ends at exactly "data"
 * (field 4) is a data line with an empty value. */
enum { FIELD_VALUE = 6, FIELD_SKIP = 7 };

void vl_sse_init(vl_sse_t *p, size_t max_event, vl_sse_event_cb cb, void *ud) {
  memset(p, 0, sizeof(*p));
  p->cb = cb;
  p->ud = ud;
  p->max_event = max_event;
}

void vl_sse_free(vl_sse_t *p) {
  free(p->buf);
  p->buf = NULL;
  p->cap = 0;
  vl_sse_reset(p);
}

void vl_sse_reset(vl_sse_t *p) {
  p->len = 0;
  p->data_len = 0;
  p->has_data = 0;
  p->last_cr = 0;
  p->in_line = 0;
  p->in_event = 0;
  p->field = 0;
}

int vl_sse_pending(const vl_sse_t *p) {
  return p->in_line || p->in_event;
}

/* Makes room for `need` bytes; need never exceeds max_event + 1. */
static int grow(vl_sse_t *p, size_t need) {
  if (need <= p->cap)
    return 0;
  size_t limit = p->max_event < SIZE_MAX ? p->max_event + 1 : SIZE_MAX;
  size_t cap = p->cap ? p->cap * 2 : 256;
  cap = cap < need ? need : cap;
  cap = cap > limit ? limit : cap;
  char *b = realloc(p->buf, cap);
  if (!b)
    return VL_ENOMEM;
  p->buf = b;
  p->cap = cap;
  return 0;
}

/* Appends to the event's data, keeping room for the terminating NUL. */
static int append(vl_sse_t *p, const char *s, size_t n) {
  if (n > p->max_event - p->data_len)
    return VL_E2BIG;
  int rc = grow(p, p->data_len + n + 1);
  if (rc)
    return rc;
  memcpy(p->buf + p->data_len, s, n);
  p->data_len += n;
  return 0;
}

/* A data line starts: the lines of one event are joined by '\n'. */
static int begin_data(vl_sse_t *p) {
  int rc = p->has_data ? append(p, "\n", 1) : 0;
  p->has_data = 1;
  return rc;
}

/* Takes n bytes of the current line (no line terminator among them). */
static int line_bytes(vl_sse_t *p, const char *s, size_t n) {
  if (n == 0)
    return 0;
  if (n > p->max_event - p->len)
    return VL_E2BIG;
  p->len += n;
  p->in_line = 1;
  int rc;
  while (p->field < 5 && n > 0) {
    if (*s != "data:"[p->field]) {
      p->field = FIELD_SKIP;
      return 0;
    }
    s++;
    n--;
    if (++p->field == 5 && (rc = begin_data(p)) != 0)
      return rc;
  }
  if (p->field == 5 && n > 0) {
    if (*s == ' ') {
      s++;
      n--;
    }
    p->field = FIELD_VALUE;
  }
  return p->field == FIELD_VALUE ? append(p, s, n) : 0;
}

/* The current line ended: a blank one dispatches the event, if it has data. */
static int line_end(vl_sse_t *p) {
  int blank = p->len == 0, field = p->field;
  p->len = 0;
  p->in_line = 0;
  p->field = 0;
  if (!blank) {
    p->in_event = 1;
    return field == 4 ? begin_data(p) : 0;
  }
  p->in_event = 0;
  if (!p->has_data || p->data_len == 0) {
    /* WHATWG: an event whose data buffer is empty is not dispatched. */
    p->has_data = 0;
    p->data_len = 0;
    return 0;
  }
  int rc = grow(p, p->data_len + 1);
  if (rc)
    return rc;
  size_t n = p->data_len;
  p->buf[n] = '\0';
  p->data_len = 0;
  p->has_data = 0;
  return p->cb ? p->cb(p->ud, p->buf, n) : 0;
}

static const char *find(const char *s, const char *end, char c) {
  const char *q = memchr(s, c, (size_t)(end - s));
  return q ? q : end;
}

int vl_sse_feed(vl_sse_t *p, const char *bytes, size_t n) {
  if (n == 0)
    return 0;
  const char *s = bytes, *end = bytes + n;
  if (p->last_cr) {
    p->last_cr = 0;
    if (*s == '\n')
      s++;
  }
  /* The next '\r' and '\n' at or after s (end when there is none), each searched again only once
   * s has passed it: every byte is scanned at most once per terminator. */
  const char *cr = find(s, end, '\r'), *lf = find(s, end, '\n');
  int rc;
  while (s < end) {
    if (cr < s)
      cr = find(s, end, '\r');
    if (lf < s)
      lf = find(s, end, '\n');
    const char *e = cr < lf ? cr : lf;
    if ((rc = line_bytes(p, s, (size_t)(e - s))) != 0)
      return rc;
    if (e == end)
      break;
    s = e + 1;
    if (*e == '\r') {
      if (s == end)
        p->last_cr = 1;
      else if (*s == '\n')
        s++;
    }
    if ((rc = line_end(p)) != 0)
      return rc;
  }
  return 0;
}
