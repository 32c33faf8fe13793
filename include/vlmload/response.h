/* What came back for one request: timing of the first byte and of each token, token counts, and
 * the error class the outcome falls in.
 *
 * A vl_response_t lives in a request slot and is reused: its buffers grow once and stay, and none
 * holds a whole reply or a whole event. Every body goes through the incremental JSON scanner
 * (jsonscan.h) as it arrives, which checks its syntax and keeps only the small values a reply is
 * judged by: "usage", "meta_info", "error", "timings", and the lengths of the content strings. A
 * streaming reply (HTTP 2xx to a "stream": true request) first goes through the SSE parser, which
 * hands each event's data to the scanner piece by piece, so an event of any size costs no more than
 * a small one.
 * --max-response bounds a 2xx reply's total bytes, streamed or not; a non-2xx body is read for its
 * error message (its first ERROR_BODY_MAX bytes) and the rest dropped, never an error of its own:
 * the status decides the class.
 *
 * Where a JSON object repeats a member's name, the first one counts, as cJSON's lookup takes it,
 * in a whole reply as in an event.
 *
 * Two reply shapes are understood. OpenAI chat completions: choices[0].message (or delta in
 * chunks) with "content", "reasoning_content" (SGLang, DeepSeek) or "reasoning" (vLLM), or
 * "tool_calls", and "usage". SGLang's native /generate: {"text", "meta_info":
 * {"prompt_tokens", "completion_tokens", "finish_reason", ...}}, where each streamed event carries
 * the text so far (or, with the server's --incremental-streaming-output, the new text) and the
 * counts so far; an event carries tokens when its text is not empty and its completion_tokens, if
 * given, went past the previous event's. Both streams end with "data: [DONE]" (white space around
 * it allowed); whatever follows it is ignored.
 *
 * An error's message is the JSON body's, else, for a non-2xx body that is not JSON, its first line
 * of text or an HTML page's title (errtext.h).
 */
#ifndef VLMLOAD_RESPONSE_H
#define VLMLOAD_RESPONSE_H

#include "vlmload/hist.h"
#include "vlmload/jsonscan.h"
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
  VL_ERR_MALFORMED,       /* a 2xx whose body or a chunk is not the JSON expected, a stream
                             with no chunk, or a reply that cannot be read as sent (two
                             Content-Lengths that differ, an encoding not asked for) */
  VL_ERR_STREAM,          /* an error object sent inside a 2xx reply */
  VL_ERR_TRUNCATED,       /* the reply stopped before its end ([DONE], or Content-Length) */
  VL_ERR_TRANSPORT,       /* the connection failed with no reply (reset, empty reply, send error) */
  VL_ERR_OVERSIZE,        /* the reply exceeded --max-response */
  VL_ERR_CANCELLED,       /* stopped by vlmload (Ctrl-C past --grace) */
  VL_ERR__COUNT
} vl_errclass_t;

/* Stable snake_case name of a class, as used in every output. */
const char *vl_errclass_name(vl_errclass_t c);

/* Bytes of the first error message a reply carries that are kept (the rest is cut at a UTF-8
 * character boundary). */
#define VL_RESPONSE_MSG_MAX 256
/* Inter-token gaps kept per request; a longer stream's further gaps feed only itl_sum_ns. */
#define VL_RESPONSE_MAX_GAPS 65536

/* The server's own account of one request's time, where its reply gives one: llama.cpp's
 * "timings" object (prompt_n, prompt_ms, predicted_n, predicted_ms, cache_n; in a whole reply, or
 * in a stream's events, the last one given counting), SGLang's meta_info.e2e_latency (seconds, in
 * /generate replies). Milliseconds; NaN or -1 for what was not given. */
typedef struct vl_srvtime_s {
  double prompt_ms;    /* the prompt's processing: the server's share of the time to first token */
  double predicted_ms; /* the tokens generated after it */
  double e2e_ms;       /* the server's whole time: prompt_ms + predicted_ms, or e2e_latency */
  int64_t prompt_n, predicted_n, cache_n; /* tokens processed, generated, and taken from cache */
} vl_srvtime_t;

typedef struct vl_response_s {
  int native;     /* replies are SGLang /generate's; set after init, kept across requests */
  int stream;     /* the request asked for a stream */
  long status;    /* HTTP status, set by the caller on the first body byte (0 unknown) */
  int json_ctype; /* a stream's reply has a Content-Type that names JSON; set by the caller */
  /* The transfer's handle, whose headers are read when a reply falls short (NULL: none), and
   * whether curl decodes a Content-Encoding (an Accept-Encoding was sent); set after init, kept
   * across requests. */
  CURL *easy;
  int decodes;
  vl_sse_t sse;
  vl_jsonscan_t scan;
  uint64_t bytes; /* body bytes received */
  size_t max;     /* --max-response */
  int body_json;  /* a streamed request got a JSON body instead of an event stream */
  uint64_t t_send_ns;
  uint64_t t_first_byte_ns, t_first_token_ns, t_last_token_ns;
  uint64_t t_first_content_ns; /* first token of "content" itself (not reasoning); 0 none */
  uint32_t token_events;       /* chunks carrying tokens (content, reasoning or tool calls) */
  uint64_t itl_sum_ns;         /* sum of gaps between token events */
  uint32_t *gaps_us;           /* this request's gaps (microseconds); owned, reused */
  uint32_t n_gaps, gaps_cap;
  int done;         /* saw "data: [DONE]" */
  uint32_t events;  /* chunks read whole as JSON objects */
  int malformed;    /* some chunk was not JSON */
  int stream_error; /* an error object was sent */
  int oversize;
  int64_t prompt_tokens, completion_tokens; /* -1 until the server says */
  vl_srvtime_t srv;                         /* the server's own timings; complete after finish */
  uint64_t content_chars; /* chat: bytes of content and reasoning; native: of the longest text */
  char error_msg[VL_RESPONSE_MSG_MAX]; /* the first error message the server sent; "" none */
  /* Conversations (--turns): where a chat reply's content goes as it arrives, each streamed
   * delta's or the whole message's, unescaped (set by vl_response_keep_content, NULL: nowhere).
   * content_cut: a whole reply's content was longer than could be kept, so the sink did not get
   * it. */
  void (*content_sink)(void *ud, const char *s, size_t n);
  void *content_ud;
  int content_cut;
  /* What the whole-body scan found (see response.c). */
  int has_message, has_text, has_tool_calls, has_error;
  int top, in_message; /* where the scan is: the top-level member, inside choices[0].message */
  /* The usage (meta_info) object being read: its counts taken so far, the first of each name
   * counting as cJSON's lookup would. */
  int usage_seen;
  unsigned srv_seen; /* the timings' members met, the first of each name counting */
  long content_len;
  /* The top-level members met (TOP_* bits), choices[0]'s "message" and its members (MSG_* bits):
   * the first of each name counts (see response.c). */
  unsigned seen;
  /* What the scan of one event found, applied once the event proved to be a JSON object. */
  struct {
    unsigned seen;   /* members met, the first of each name counting as cJSON's lookup */
    unsigned active; /* the member being read is the first of its name */
    int not_object;  /* the event is JSON, but no object */
    int error;       /* a top-level "error" that is not null */
    int message_set; /* error_msg was empty and holds this event's message */
    long content, reasoning_content, reasoning, text; /* string lengths; -1 none */
    int tool_calls;                                   /* a non-empty tool_calls array */
    int content_text;                         /* ev_text holds the content (for content_sink) */
    int64_t prompt_tokens, completion_tokens; /* -2: absent */
    vl_srvtime_t srv; /* its timings (NaN, -1: absent), applied over the reply's */
  } ev;
  /* The event being read: its data has begun and it is not yet dispatched; how far its data
   * matches [DONE] with white space around it (see response.c). */
  int ev_open, ev_done;
  char *ev_text; /* an event's content, unescaped, while a conversation keeps it; owned, reused */
  size_t ev_text_cap;
  /* A non-2xx body's first line or title, for a body that is not JSON; owned, allocated at the
   * first such body (NULL: none yet, or no memory), reused. */
  struct vl_errtext_s *etext;
} vl_response_t;

/* Prepares an empty response whose 2xx replies may be up to max bytes long. */
void vl_response_init(vl_response_t *r, size_t max);
void vl_response_free(vl_response_t *r);

/* Starts a new request on a reused response. */
void vl_response_begin(vl_response_t *r, int stream, uint64_t t_send_ns);

/* Sends the content of the reply to the request just begun to sink(ud, ...), in pieces as they
 * come (chat replies only; reasoning and tool calls are not content); sink NULL sends it nowhere.
 * A whole (not streamed) reply's content is kept to hand over if it is at most max bytes once
 * escaped. Call after vl_response_begin; it lasts for that request. */
void vl_response_keep_content(vl_response_t *r, void (*sink)(void *ud, const char *s, size_t n),
                              void *ud, size_t max);

/* Takes n body bytes received at now_ns. Returns 0, or VL_E2BIG once a 2xx reply is over the limit,
 * or VL_ENOMEM (the caller then aborts the transfer). */
int vl_response_write(vl_response_t *r, const char *p, size_t n, uint64_t now_ns);

/* Whether a Content-Type header's media type is JSON (application/json, or any type ending in
 * "+json"). */
int vl_response_ctype_json(const char *content_type);

/* Classifies the finished transfer. status is the final HTTP status (0 if none came). */
vl_errclass_t vl_response_finish(vl_response_t *r, CURLcode result, long status);

/* Records the request's inter-token gaps into h (microseconds). The runner calls it only for a
 * request that succeeded, so failed streams never feed the run's ITL. */
void vl_response_record_itl(const vl_response_t *r, vl_hist_t *h);

#endif
