/* Incremental parser for text/event-stream (the WHATWG server-sent events format).
 *
 * Bytes are fed in chunks of any size, split anywhere (inside a line, inside "\r\n"). Lines end in
 * "\n", "\r\n" or "\r"; lines beginning with ':' are comments; a "data" field's value (after one
 * optional space) is appended to the event's data, joined by '\n' when an event has several data
 * lines; other fields are ignored. A blank line dispatches the event if it has data.
 *
 * The parser owns one buffer, grown up to `max_event` bytes and then reused, so a stream of events
 * costs no allocation once warm. The data pointer given to the callback is valid only during it.
 */
#ifndef VLMLOAD_SSE_H
#define VLMLOAD_SSE_H

#include <stddef.h>

/* Called once per dispatched event. Return 0 to go on; any other value stops the feed, which then
 * returns that value. */
typedef int (*vl_sse_event_cb)(void *ud, const char *data, size_t len);

typedef struct vl_sse_s {
  vl_sse_event_cb cb;
  void *ud;
  char *buf;        /* the current line, then the event's data; owned */
  size_t len, cap;  /* bytes of the current line in buf, its capacity */
  size_t data_len;  /* bytes of event data kept at the front of buf */
  size_t max_event; /* limit on a line or an event's data */
  int has_data;     /* the event has at least one data line */
  int last_cr;      /* the previous byte was '\r' (a following '\n' belongs to it) */
  int in_line;      /* bytes of an unfinished line have been seen */
} vl_sse_t;

void vl_sse_init(vl_sse_t *p, size_t max_event, vl_sse_event_cb cb, void *ud);
void vl_sse_free(vl_sse_t *p);
/* Forgets any partial state, for reuse on a new stream. Keeps the buffer. */
void vl_sse_reset(vl_sse_t *p);

/* Feeds n bytes. Returns 0, VL_E2BIG when a line or an event exceeds max_event, VL_ENOMEM, or the
 * callback's non-zero return value. */
int vl_sse_feed(vl_sse_t *p, const char *bytes, size_t n);

/* Returns 1 when the stream ended inside an event (bytes seen since the last dispatch or blank
 * line), 0 when it ended on an event boundary. */
int vl_sse_pending(const vl_sse_t *p);

#endif
