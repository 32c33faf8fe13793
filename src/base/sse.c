#include "vlmload/sse.h"
#include "vlmload/common.h"

#include <string.h>

/* The only field that matters is "data", so a line is classified as its bytes arrive, whichever
 * chunk they come in: p->field counts the bytes of "data:" matched so far (0..5), becomes
 * FIELD_VALUE once the optional space after the colon is settled, and FIELD_SKIP as soon as a byte
 * shows the line is something else (a comment, another field). A line that ends at exactly "data"
 * (field 4) is a data line with an empty value. */
enum { FIELD_VALUE = 6, FIELD_SKIP = 7 };

void vl_sse_init(vl_sse_t *p, vl_sse_data_cb on_data, vl_sse_event_cb on_event, void *ud) {
  memset(p, 0, sizeof(*p));
  p->on_data = on_data;
  p->on_event = on_event;
  p->ud = ud;
}

void vl_sse_reset(vl_sse_t *p) {
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

/* Hands n bytes of the event's data on. */
static int data(vl_sse_t *p, const char *s, size_t n) {
  if (n == 0)
    return 0;
  size_t off = p->data_len;
  p->data_len += n;
  return p->on_data ? p->on_data(p->ud, off, s, n) : 0;
}

/* A data line starts: the lines of one event are joined by '\n'. */
static int begin_data(vl_sse_t *p) {
  int rc = p->has_data ? data(p, "\n", 1) : 0;
  p->has_data = 1;
  return rc;
}

/* Takes n bytes of the current line (no line terminator among them). */
static int line_bytes(vl_sse_t *p, const char *s, size_t n) {
  if (n == 0)
    return 0;
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
  return p->field == FIELD_VALUE ? data(p, s, n) : 0;
}

/* The current line ended: a blank one dispatches the event, if it has data. */
static int line_end(vl_sse_t *p) {
  int blank = !p->in_line, field = p->field;
  p->in_line = 0;
  p->field = 0;
  if (!blank) {
    p->in_event = 1;
    return field == 4 ? begin_data(p) : 0;
  }
  p->in_event = 0;
  size_t n = p->data_len;
  p->data_len = 0;
  p->has_data = 0;
  /* WHATWG: an event whose data buffer is empty is not dispatched. */
  return n && p->on_event ? p->on_event(p->ud, n) : 0;
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
