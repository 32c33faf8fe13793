/* Incremental parser for text/event-stream (the WHATWG server-sent events format).
 *
 * Bytes are fed in chunks of any size, split anywhere (inside a line, inside "\r\n"). Lines end in
 * "\n", "\r\n" or "\r"; lines beginning with ':' are comments; a "data" field's value (after one
 * optional space) is appended to the event's data, joined by '\n' when an event has several data
 * lines; other fields are ignored. A blank line dispatches the event if its data is not empty
 * ("data:", "data: " or a bare "data" line alone dispatch nothing, as in WHATWG's parser).
 *
 * Lines are scanned in place and never copied whole: only the values of data lines are copied,
 * once, into the event's data. The parser owns that one buffer, allocated on first use, grown up to
 * `max_event` + 1 bytes and then reused, so a stream of events costs no allocation once warm.
 *
 * The data pointer given to the callback is NUL-terminated (data[len] == '\0') and valid only
 * during the call. The callback may call vl_sse_reset() but not vl_sse_feed() or vl_sse_free() on
 * the same parser. After vl_sse_feed() returns non-zero, the rest of that chunk is dropped; call
 * vl_sse_reset() before feeding the parser another stream.
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
  char *buf;        /* the event's data; owned, NULL until first needed */
  size_t len, cap;  /* bytes of the current line seen so far; capacity of buf */
  size_t data_len;  /* bytes of event data in buf */
  size_t max_event; /* limit on a line or an event's data (the '\n' joining data lines included) */
  int has_data;     /* the event has at least one data line */
  int last_cr;      /* the previous byte was '\r' (a following '\n' belongs to it) */
  int in_line;      /* bytes of an unfinished line have been seen */
  int in_event;     /* a non-blank line has been seen since the last blank line */
  int field;        /* the current line's field: bytes of "data:" matched so far (0..5), or past
                       the optional space of a data line, or a line that is not data (see sse.c) */
} vl_sse_t;

void vl_sse_init(vl_sse_t *p, size_t max_event, vl_sse_event_cb cb, void *ud);
void vl_sse_free(vl_sse_t *p);
/* Forgets any partial state, for reuse on a new stream. Keeps the buffer. */
void vl_sse_reset(vl_sse_t *p);

/* Feeds n bytes, dispatching every event they complete, in order. Returns 0, VL_E2BIG when a line
 * or an event's data exceeds max_event bytes, VL_ENOMEM, or the callback's non-zero return value.
 * Which events are dispatched, and any error, do not depend on how the stream is split. */
int vl_sse_feed(vl_sse_t *p, const char *bytes, size_t n);

/* Returns 1 when the stream ended inside an event (bytes seen since the last dispatch or blank
 * line), 0 when it ended on an event boundary. */
int vl_sse_pending(const vl_sse_t *p);

#endif
