/* What came back for one request: timing of the first byte and of each token, token counts, and
 * the error class the outcome falls in.
 *
 * A vl_response_t lives in a request slot and is reused: its buffers grow once and stay. Streaming
 * replies (HTTP 2xx to a "stream": true request) go through the SSE parser as they arrive; anything
 * else is kept, up to a limit, and parsed whole with cJSON when the transfer ends.
 *
 * Two reply shapes are understood. OpenAI chat completions: choices[0].message.content (or
 * delta.content in chunks) and "usage". SGLang's native /generate: {"text", "meta_info":
 * {"prompt_tokens", "completion_tokens", "finish_reason", ...}}, where each streamed event carries
 * the text so far (or, with the server's --incremental-streaming-output, the new text) and the
 * counts so far; an event carries tokens when its text is not empty and its completion_tokens, if
 * given, went past the previous event's. Both streams end with "data: [DONE]".
 */
#ifndef VLMLOAD_RESPONSE_H
#define VLMLOAD_RESPONSE_H

#include "vlmload/hist.h"
#include "vlmload/sse.h"

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  VL_ERR_NONE = 0,
  VL_ERR_CONNECT,         /* no connection could be made */
  VL_ERR_CONNECT_TIMEOUT, /* --connect-timeout or --timeout elapsed before a connection was
                             made: overload at the door (a full accept queue) */
  VL_ERR_TIMEOUT,         /* --timeout elapsed on a connection */
  VL_ERR_HTTP_4XX,        /* 4xx other than 429 */
  VL_ERR_HTTP_429,        /* rate limited */
  VL_ERR_HTTP_5XX,        /* 5xx */
  VL_ERR_HTTP_OTHER,      /* 1xx or 3xx as a final status */
  VL_ERR_MALFORMED,       /* a 2xx whose body or a chunk is not the JSON expected */
  VL_ERR_STREAM,          /* an error object sent inside a 2xx reply */
  VL_ERR_TRUNCATED,       /* the reply stopped before its end ([DONE], or Content-Length) */
  VL_ERR_TRANSPORT,       /* the connection failed with no reply (reset, empty reply, send error) */
  VL_ERR_OVERSIZE,        /* the reply exceeded --max-response */
  VL_ERR_CANCELLED,       /* stopped by vlmload (Ctrl-C past --grace) */
  VL_ERR__COUNT
} vl_errclass_t;

/* Stable snake_case name of a class, as used in every output. */
const char *vl_errclass_name(vl_errclass_t c);

typedef struct vl_response_s {
  int native;  /* replies are SGLang /generate's; set after init, kept across requests */
  int stream;  /* the request asked for a stream */
  long status; /* HTTP status, set by the caller on the first body byte (0 unknown) */
  vl_sse_t sse;
  char *buf;            /* non-streamed body; owned, reused */
  size_t len, cap, max; /* bytes held, capacity, limit */
  uint64_t t_send_ns;
  uint64_t t_first_byte_ns, t_first_token_ns, t_last_token_ns;
  uint32_t token_events; /* chunks carrying content */
  uint64_t itl_sum_ns;   /* sum of gaps between token events */
  int done;              /* saw "data: [DONE]" */
  int malformed;         /* some chunk was not JSON */
  int stream_error;      /* an error object was sent */
  int oversize;
  int64_t prompt_tokens, completion_tokens; /* -1 until the server says */
  uint64_t content_chars; /* chat: characters of content; native: of the longest text seen */
  vl_hist_t *itl;         /* inter-token gaps go here (microseconds); NULL: not recorded */
} vl_response_t;

/* Prepares an empty response whose non-streamed body may hold up to max bytes. */
void vl_response_init(vl_response_t *r, size_t max);
void vl_response_free(vl_response_t *r);

/* Starts a new request on a reused response. */
void vl_response_begin(vl_response_t *r, int stream, uint64_t t_send_ns, vl_hist_t *itl);

/* Takes n body bytes received at now_ns. Returns 0, or VL_E2BIG once the reply is over the limit
 * (the caller then aborts the transfer). */
int vl_response_write(vl_response_t *r, const char *p, size_t n, uint64_t now_ns);

/* Classifies the finished transfer. status is the final HTTP status (0 if none came). */
vl_errclass_t vl_response_finish(vl_response_t *r, CURLcode result, long status);

#endif
