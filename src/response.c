#include "vlmload/response.h"
#include "vlmload/common.h"
#include "vlmload/json.h"
#include "vlmload/transport.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Longest single SSE event accepted (a chunk is normally a few hundred bytes). */
#define SSE_MAX_EVENT (1u << 20)
/* Bytes of a non-2xx body read for its error message; the rest is dropped. */
#define ERROR_BODY_MAX (64u << 10)
/* Largest value of a whole body kept to parse ("usage", "meta_info", "error"). */
#define SCAN_CAPTURE_MAX (64u << 10)

static const char *const errclass_names[VL_ERR__COUNT] = {
    [VL_ERR_NONE] = "none",
    [VL_ERR_CONNECT] = "connect",
    [VL_ERR_CONNECT_TIMEOUT] = "connect_timeout",
    [VL_ERR_TIMEOUT] = "timeout",
    [VL_ERR_HTTP_4XX] = "http_4xx",
    [VL_ERR_HTTP_429] = "http_429",
    [VL_ERR_HTTP_5XX] = "http_5xx",
    [VL_ERR_HTTP_OTHER] = "http_other",
    [VL_ERR_MALFORMED] = "malformed",
    [VL_ERR_STREAM] = "stream_error",
    [VL_ERR_TRUNCATED] = "truncated",
    [VL_ERR_TRANSPORT] = "transport",
    [VL_ERR_OVERSIZE] = "oversize",
    [VL_ERR_CANCELLED] = "cancelled",
};

const char *vl_errclass_name(vl_errclass_t c) {
  return c >= 0 && c < VL_ERR__COUNT ? errclass_names[c] : "unknown";
}

/* A token count as the server sent it: a number from 0 to 2^53, else -1 (unknown). Converting a
 * double out of int64_t's range (1e60, NaN) would be undefined. */
static int64_t token_count(const cJSON *n) {
  double v = n->valuedouble;
  return v >= 0 && v <= 9007199254740992.0 ? (int64_t)v : -1;
}

static void read_usage(vl_response_t *r, const cJSON *usage) {
  if (!cJSON_IsObject(usage))
    return;
  const cJSON *pt = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens");
  const cJSON *ct = cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens");
  if (cJSON_IsNumber(pt))
    r->prompt_tokens = token_count(pt);
  if (cJSON_IsNumber(ct))
    r->completion_tokens = token_count(ct);
}

/* Keeps s as the reply's error message unless one is kept already: at most VL_RESPONSE_MSG_MAX - 1
 * bytes, cut on a character boundary, control bytes as spaces and bytes that are not UTF-8 as '?',
 * so that it prints on one line and as valid JSON. */
static void keep_message(vl_response_t *r, const char *s) {
  if (r->error_msg[0] || !s)
    return;
  size_t o = 0;
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    size_t n = *p < 0x80             ? 1
               : (*p & 0xe0) == 0xc0 ? 2
               : (*p & 0xf0) == 0xe0 ? 3
               : (*p & 0xf8) == 0xf0 ? 4
                                     : 0;
    for (size_t i = 1; i < n; i++)
      if ((p[i] & 0xc0) != 0x80)
        n = 0; /* a NUL ends the loop here too */
    if (o + (n ? n : 1) >= VL_RESPONSE_MSG_MAX)
      break;
    if (n == 0) {
      r->error_msg[o++] = '?';
      p++;
      continue;
    }
    if (n == 1 && (*p < 0x20 || *p == 0x7f))
      r->error_msg[o] = ' ';
    else
      memcpy(r->error_msg + o, p, n);
    o += n;
    p += n;
  }
  r->error_msg[o] = '\0';
  if (o == 0)
    memcpy(r->error_msg, "?", 2); /* an empty message still says one was sent */
}

/* The message of an "error" value: itself when a string, else its "message" member. */
static void error_message(vl_response_t *r, const cJSON *e) {
  if (cJSON_IsObject(e))
    e = cJSON_GetObjectItemCaseSensitive(e, "message");
  if (cJSON_IsString(e))
    keep_message(r, e->valuestring);
}

/* An "error" member that is there and not null. */
static int is_error(const cJSON *e) {
  return e && !cJSON_IsNull(e);
}

static long str_len(const cJSON *o, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsString(v) ? (long)strlen(v->valuestring) : -1;
}

/* Length of a native reply's "text", or -1 when it is not a string. */
static long native_text_len(const cJSON *root) {
  return str_len(root, "text");
}

static int is_2xx(long status) {
  return status >= 200 && status < 300;
}

/* What the event callback needs during one feed: the response and the time the bytes came. */
typedef struct {
  vl_response_t *r;
  uint64_t now_ns;
} feed_t;

static void token_event(vl_response_t *r, uint64_t now_ns, int content) {
  if (content && !r->t_first_content_ns)
    r->t_first_content_ns = now_ns;
  if (r->token_events == 0) {
    r->t_first_token_ns = now_ns;
  } else {
    uint64_t gap = now_ns - r->t_last_token_ns;
    r->itl_sum_ns += gap;
    if (r->n_gaps == r->gaps_cap && r->gaps_cap < VL_RESPONSE_MAX_GAPS) {
      uint32_t cap = r->gaps_cap ? r->gaps_cap * 2 : 256;
      uint32_t *g = realloc(r->gaps_us, cap * sizeof(*g));
      if (g) {
        r->gaps_us = g;
        r->gaps_cap = cap;
      }
    }
    if (r->n_gaps < r->gaps_cap) {
      uint64_t us = gap / 1000;
      r->gaps_us[r->n_gaps++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    }
  }
  r->t_last_token_ns = now_ns;
  r->token_events++;
}

static int is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int on_event(void *ud, const char *data, size_t len) {
  feed_t *f = ud;
  vl_response_t *r = f->r;
  if (r->done)
    return 0; /* nothing after [DONE] counts */
  size_t a = 0, b = len;
  while (a < b && is_space(data[a]))
    a++;
  while (b > a && is_space(data[b - 1]))
    b--;
  if (b - a == 6 && memcmp(data + a, "[DONE]", 6) == 0) {
    r->done = 1;
    return 0;
  }
  cJSON *root = vl_json_parse(data, len);
  if (!cJSON_IsObject(root)) {
    r->malformed = 1;
    vl_json_free(root);
    return 0;
  }
  const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
  if (is_error(err)) {
    r->stream_error = 1;
    error_message(r, err);
  }
  long n;
  int content = 0;
  if (r->native) {
    /* Counts so far ride on every event; an event with text whose count did not move (a repeat)
     * brings no token. */
    int64_t before = r->completion_tokens;
    read_usage(r, cJSON_GetObjectItemCaseSensitive(root, "meta_info"));
    n = native_text_len(root);
    if (n > 0 && (uint64_t)n > r->content_chars)
      r->content_chars = (uint64_t)n;
    if (before >= 0 && r->completion_tokens <= before)
      n = 0;
    content = n > 0;
  } else {
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    const cJSON *c0 = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
    const cJSON *d = c0 ? cJSON_GetObjectItemCaseSensitive(c0, "delta") : NULL;
    n = 0;
    if (cJSON_IsObject(d)) {
      long lc = str_len(d, "content"), lr = str_len(d, "reasoning_content"),
           lv = str_len(d, "reasoning");
      const cJSON *tc = cJSON_GetObjectItemCaseSensitive(d, "tool_calls");
      content = lc > 0;
      if (content && r->content_sink)
        r->content_sink(r->content_ud, cJSON_GetObjectItemCaseSensitive(d, "content")->valuestring,
                        (size_t)lc);
      n = VL_MAX(lc, 0) + VL_MAX(lr, 0) + VL_MAX(lv, 0);
      r->content_chars += (uint64_t)n;
      if (cJSON_IsArray(tc) && cJSON_GetArraySize(tc) > 0)
        n++; /* a tool call's arguments are tokens too */
    }
    read_usage(r, cJSON_GetObjectItemCaseSensitive(root, "usage"));
  }
  if (n > 0)
    token_event(r, f->now_ns, content);
  vl_json_free(root);
  return 0;
}

/* The whole-body scan. A 2xx reply is judged by: top-level "error" (not null: an error; its
 * message kept, the string itself or error.message), "usage" (chat) or "meta_info" and "text"
 * (native), and choices[0].message: an object whose "content", "reasoning_content" or "reasoning"
 * is a string or that has "tool_calls". A non-2xx body gives only its message: "error" (a string or
 * an object's "message"), else a top-level "message" or "detail" string. */
static vl_jsonscan_want_t on_value(void *ud, const vl_jsonscan_t *s, int depth, char c) {
  vl_response_t *r = ud;
  const char *k1 = depth >= 1 ? vl_jsonscan_key(s, 1) : NULL;
  if (!k1)
    return VL_JSONSCAN_SKIP;
  if (depth == 1) {
    if (strcmp(k1, "error") == 0 && c != 'n') {
      r->has_error = 1; /* an object is not held: its "message" is taken below */
      return c == '"' ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
    }
    if (r->status && !is_2xx(r->status))
      return c == '"' && (strcmp(k1, "message") == 0 || strcmp(k1, "detail") == 0)
                 ? VL_JSONSCAN_CAPTURE
                 : VL_JSONSCAN_SKIP;
    if (strcmp(k1, r->native ? "meta_info" : "usage") == 0)
      return VL_JSONSCAN_CAPTURE;
    if (r->native && strcmp(k1, "text") == 0)
      return VL_JSONSCAN_MEASURE;
    return VL_JSONSCAN_SKIP;
  }
  if (depth == 2 && strcmp(k1, "error") == 0) {
    const char *k2 = vl_jsonscan_key(s, 2);
    return c == '"' && k2 && strcmp(k2, "message") == 0 ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
  }
  if (r->native || strcmp(k1, "choices") != 0 || vl_jsonscan_index(s, 2) != 0)
    return VL_JSONSCAN_SKIP;
  const char *k3 = vl_jsonscan_key(s, 3);
  if (!k3 || strcmp(k3, "message") != 0)
    return VL_JSONSCAN_SKIP;
  if (depth == 3) {
    if (c == '{')
      r->has_message = 1;
    return VL_JSONSCAN_SKIP;
  }
  const char *k4 = depth == 4 ? vl_jsonscan_key(s, 4) : NULL;
  if (!k4)
    return VL_JSONSCAN_SKIP;
  if (strcmp(k4, "tool_calls") == 0 && c == '[')
    r->has_tool_calls = 1;
  if (strcmp(k4, "content") == 0 && c == '"' && r->content_sink)
    return VL_JSONSCAN_CAPTURE; /* for the conversation; on_end measures it */
  if (strcmp(k4, "content") == 0 || strcmp(k4, "reasoning_content") == 0 ||
      strcmp(k4, "reasoning") == 0)
    return VL_JSONSCAN_MEASURE;
  return VL_JSONSCAN_SKIP;
}

static void on_end(void *ud, const vl_jsonscan_t *s, int depth, const char *text, size_t len,
                   int truncated) {
  vl_response_t *r = ud;
  if (!text) { /* a measured string */
    if (depth == 1) {
      r->has_text = 1;
      r->content_len = (long)len;
    } else {
      r->content_len = (r->content_len < 0 ? 0 : r->content_len) + (long)len;
    }
    return;
  }
  if (depth == 4) { /* choices[0].message.content, captured for the conversation */
    cJSON *v = truncated ? NULL : vl_json_parse(text, len);
    if (cJSON_IsString(v)) {
      size_t n = strlen(v->valuestring);
      r->content_len = (r->content_len < 0 ? 0 : r->content_len) + (long)n;
      r->content_sink(r->content_ud, v->valuestring, n);
    } else {
      r->content_cut = 1;
      r->content_len = (r->content_len < 0 ? 0 : r->content_len) + (long)len;
    }
    vl_json_free(v);
    return;
  }
  if (truncated && text[0] == '"' && len > 1) {
    /* A message longer than the capture: its first bytes, unescaped well enough to be read. */
    char msg[VL_RESPONSE_MSG_MAX];
    size_t n = VL_MIN(len - 1, sizeof(msg) - 1);
    memcpy(msg, text + 1, n);
    msg[n] = '\0';
    keep_message(r, msg);
    return;
  }
  if (truncated)
    return; /* too long to be a usage object */
  /* A string is an error message ("error", "error.message", "message", "detail"); an object is
   * "usage" or "meta_info". */
  cJSON *v = vl_json_parse(text, len);
  if (cJSON_IsString(v))
    keep_message(r, v->valuestring);
  else
    read_usage(r, v);
  vl_json_free(v);
}

void vl_response_init(vl_response_t *r, size_t max) {
  memset(r, 0, sizeof(*r));
  r->max = max;
  vl_sse_init(&r->sse, SSE_MAX_EVENT, on_event, NULL);
  vl_jsonscan_init(&r->scan, SCAN_CAPTURE_MAX, on_value, on_end, r);
}

void vl_response_free(vl_response_t *r) {
  vl_sse_free(&r->sse);
  vl_jsonscan_free(&r->scan);
  free(r->gaps_us);
  r->gaps_us = NULL;
  r->gaps_cap = r->n_gaps = 0;
}

void vl_response_begin(vl_response_t *r, int stream, uint64_t t_send_ns) {
  r->stream = stream;
  r->status = 0;
  r->json_ctype = 0;
  r->bytes = 0;
  r->body_json = 0;
  r->t_send_ns = t_send_ns;
  r->t_first_byte_ns = r->t_first_token_ns = r->t_last_token_ns = r->t_first_content_ns = 0;
  r->token_events = 0;
  r->itl_sum_ns = 0;
  r->n_gaps = 0;
  r->done = r->malformed = r->stream_error = r->oversize = 0;
  r->prompt_tokens = r->completion_tokens = -1;
  r->content_chars = 0;
  r->error_msg[0] = '\0';
  r->has_message = r->has_text = r->has_tool_calls = r->has_error = 0;
  r->content_len = -1;
  r->content_sink = NULL;
  r->content_ud = NULL;
  r->content_cut = 0;
  r->scan.cap_max = SCAN_CAPTURE_MAX;
  vl_sse_reset(&r->sse);
  vl_jsonscan_reset(&r->scan);
}

void vl_response_keep_content(vl_response_t *r, void (*sink)(void *ud, const char *s, size_t n),
                              void *ud, size_t max) {
  r->content_sink = sink;
  r->content_ud = ud;
  /* The captured text is the server's escaping, which may take up to six bytes where ours takes
   * one (\u00e9 for an accented letter sent as UTF-8). */
  if (sink && max < SIZE_MAX / 6 - 2)
    r->scan.cap_max = VL_MAX((size_t)SCAN_CAPTURE_MAX, 6 * max + 2);
}

int vl_response_write(vl_response_t *r, const char *p, size_t n, uint64_t now_ns) {
  if (!r->t_first_byte_ns)
    r->t_first_byte_ns = now_ns;
  if (r->status && !is_2xx(r->status)) {
    /* Read for its message only; the status decides the class. */
    uint64_t room = r->bytes < ERROR_BODY_MAX ? ERROR_BODY_MAX - r->bytes : 0;
    r->bytes += n;
    int rc = vl_jsonscan_feed(&r->scan, p, (size_t)VL_MIN(room, (uint64_t)n));
    return rc == VL_ENOMEM ? rc : 0;
  }
  if (r->stream && r->bytes == 0 && n > 0 && (r->json_ctype || p[0] == '{' || p[0] == '['))
    r->body_json = 1; /* no event-stream line starts so; an SSE parse would call it truncated */
  if (r->stream && !r->body_json && r->done)
    return 0; /* past [DONE]: ignored, uncounted */
  r->bytes += n;
  if (r->bytes > r->max) {
    r->oversize = 1;
    return VL_E2BIG;
  }
  if (r->stream && !r->body_json) {
    feed_t f = {r, now_ns};
    r->sse.ud = &f;
    int rc = vl_sse_feed(&r->sse, p, n);
    r->sse.ud = NULL;
    if (rc == VL_E2BIG)
      r->oversize = 1;
    return rc;
  }
  int rc = vl_jsonscan_feed(&r->scan, p, n);
  return rc == VL_ENOMEM ? rc : 0; /* malformed: read on, judged at the end */
}

static vl_errclass_t classify_curl(vl_response_t *r, CURLcode result) {
  if (vl_transport_tls_failed(result))
    return VL_ERR_CONNECT; /* no TLS session, so no connection to send on */
  switch (result) {
  case CURLE_OPERATION_TIMEDOUT:
    return VL_ERR_TIMEOUT;
  case CURLE_COULDNT_CONNECT:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
    return VL_ERR_CONNECT;
  case CURLE_WRITE_ERROR:
    if (r->oversize)
      return VL_ERR_OVERSIZE;
    return VL_ERR_TRANSPORT;
  case CURLE_PARTIAL_FILE:
    return VL_ERR_TRUNCATED;
  case CURLE_BAD_CONTENT_ENCODING:
    return VL_ERR_MALFORMED; /* a compressed reply that does not decode */
  default:
    /* A connection that died after the reply began cut the reply short. */
    return r->t_first_byte_ns ? VL_ERR_TRUNCATED : VL_ERR_TRANSPORT;
  }
}

/* The class of a final status that is not 2xx; one outside 100-599 is no HTTP class. */
static vl_errclass_t http_class(long status) {
  if (status == 429)
    return VL_ERR_HTTP_429;
  if (status >= 400 && status < 500)
    return VL_ERR_HTTP_4XX;
  if (status >= 500 && status < 600)
    return VL_ERR_HTTP_5XX;
  return VL_ERR_HTTP_OTHER;
}

static vl_errclass_t finish_json(vl_response_t *r) {
  if (vl_jsonscan_finish(&r->scan) != 0)
    return VL_ERR_MALFORMED;
  if (r->has_error) {
    if (!r->error_msg[0])
      keep_message(r, "?");
    return VL_ERR_STREAM;
  }
  if (r->stream)
    return VL_ERR_MALFORMED; /* a whole JSON reply to a request for a stream */
  if (r->native ? !r->has_text : !r->has_message || (r->content_len < 0 && !r->has_tool_calls))
    return VL_ERR_MALFORMED;
  r->content_chars = r->content_len > 0 ? (uint64_t)r->content_len : 0;
  return VL_ERR_NONE;
}

vl_errclass_t vl_response_finish(vl_response_t *r, CURLcode result, long status) {
  r->status = status;
  /* A final status that is not 2xx decides the class, whatever came after it. A 1xx with the
   * transfer failed is no final status: curl gave up before one came. */
  if (status >= 200 && !is_2xx(status))
    return http_class(status);
  if (result != CURLE_OK)
    return classify_curl(r, result);
  if (!is_2xx(status))
    return http_class(status);
  if (!r->stream || r->body_json)
    return finish_json(r);
  if (r->stream_error)
    return VL_ERR_STREAM;
  if (r->malformed)
    return VL_ERR_MALFORMED;
  if (!r->done)
    return VL_ERR_TRUNCATED;
  if (r->completion_tokens < 0)
    r->completion_tokens = r->token_events;
  return VL_ERR_NONE;
}

int vl_response_ctype_json(const char *ct) {
  size_t n = strcspn(ct, ";");
  while (n > 0 && is_space(ct[n - 1]))
    n--;
  while (n > 0 && is_space(*ct))
    ct++, n--;
  return (n == 16 && strncasecmp(ct, "application/json", 16) == 0) ||
         (n > 5 && strncasecmp(ct + n - 5, "+json", 5) == 0);
}

void vl_response_record_itl(const vl_response_t *r, vl_hist_t *h) {
  for (uint32_t i = 0; i < r->n_gaps; i++)
    vl_hist_record(h, (int64_t)r->gaps_us[i]);
}
