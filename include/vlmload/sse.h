/* Incremental parser for text/event-stream (the WHATWG server-sent events format).
 *
 * Bytes are fed in chunks of any size, split anywhere (inside a line, inside "\r\n"). Lines end in
 * "\n", "\r\n" or "\r"; lines beginning with ':' are comments; a "data" field's value (after one
 * optional space) is appended to the event's data, joined by '\n' when an event has several data
 * lines; other fields are ignored. A blank line dispatches the event if its data is not empty
 * ("data:", "data: " or a bare "data" line alone dispatch nothing, as in WHATWG's parser).
 *
 * Nothing is held: an event's data is handed on as it arrives, in pieces that point into the bytes
 * fed (or at a static "\n" joining two data lines), and the event is dispatched at its blank line
 * with its length. The parser is this struct alone, so an event of any size costs no memory here;
 * bounding the stream is the caller's business. Which pieces come depends on how the stream is
 * split, but their bytes in order, and the events, do not.
 *
 * Callbacks may call vl_sse_reset() but not vl_sse_feed() on the same parser. After vl_sse_feed()
 * returns non-zero, the rest of that chunk is dropped; call vl_sse_reset() before feeding the
 * parser another stream.
 */
#ifndef VLMLOAD_SSE_H
#define VLMLOAD_SSE_H

#include <stddef.h>

/* Bytes of the current event's data: p[0..n) (n > 0, valid during the call only) follows the off
 * bytes handed on before, so off == 0 begins a new event. Return 0 to go on; any other value stops
 * the feed, which then returns that value. */
typedef int (*vl_sse_data_cb)(void *ud, size_t off, const char *p, size_t n);
/* The event whose data came in len bytes (len > 0) is dispatched. Return as for the data. */
typedef int (*vl_sse_event_cb)(void *ud, size_t len);

typedef struct vl_sse_s {
  vl_sse_data_cb on_data;
  vl_sse_event_cb on_event;
  void *ud;
  size_t data_len; /* bytes of the event's data handed on so far */
  int has_data;    /* the event has at least one data line */
  int last_cr;     /* the previous byte was '\r' (a following '\n' belongs to it) */
  int in_line;     /* bytes of an unfinished line have been seen */
  int in_event;    /* a non-blank line has been seen since the last blank line */
  int field;       /* the current line's field: bytes of "data:" matched so far (0..5), or past
                      the optional space of a data line, or a line that is not data (see sse.c) */
} vl_sse_t;

void vl_sse_init(vl_sse_t *p, vl_sse_data_cb on_data, vl_sse_event_cb on_event, void *ud);
/* Forgets any partial state, for reuse on a new stream. */
void vl_sse_reset(vl_sse_t *p);

/* Feeds n bytes, handing on the data and dispatching every event they complete, in order. Returns
 * 0 or a callback's non-zero return value. */
int vl_sse_feed(vl_sse_t *p, const char *bytes, size_t n);

/* Returns 1 when the stream ended inside an event (bytes seen since the last dispatch or blank
 * line), 0 when it ended on an event boundary. */
int vl_sse_pending(const vl_sse_t *p);

#endif
