#include "vlmload/response.h"
#include "vlmload/common.h"
#include "vlmload/json.h"
#include "vlmload/transport.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* Longest single SSE event accepted (a chunk is normally a few hundred bytes). */
#define SSE_MAX_EVENT (1u << 20)
/* Bytes of a non-2xx body kept for classification of a streamed request. */
#define ERROR_BODY_MAX (64u << 10)

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

/* Length of choices[0].<field>.content (or reasoning_content), or -1 when there is none. */
static long content_len(const cJSON *root, const char *field) {
  const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
  const cJSON *c0 = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
  const cJSON *m = c0 ? cJSON_GetObjectItemCaseSensitive(c0, field) : NULL;
  if (!cJSON_IsObject(m))
    return -1;
  long n = -1;
  const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
  if (cJSON_IsString(content))
    n = (long)strlen(content->valuestring);
  const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
  if (cJSON_IsString(reasoning))
    n = (n < 0 ? 0 : n) + (long)strlen(reasoning->valuestring);
  return n;
}

/* Length of a native reply's "text", or -1 when it is not a string. */
static long native_text_len(const cJSON *root) {
  const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text");
  return cJSON_IsString(text) ? (long)strlen(text->valuestring) : -1;
}

/* What the event callback needs during one feed: the response and the time the bytes came. */
typedef struct {
  vl_response_t *r;
  uint64_t now_ns;
} feed_t;

static int on_event(void *ud, const char *data, size_t len) {
  feed_t *f = ud;
  vl_response_t *r = f->r;
  if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
    r->done = 1;
    return 0;
  }
  cJSON *root = vl_json_parse(data, len);
  if (!cJSON_IsObject(root)) {
    r->malformed = 1;
    vl_json_free(root);
    return 0;
  }
  if (cJSON_GetObjectItemCaseSensitive(root, "error"))
    r->stream_error = 1;
  long n;
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
  } else {
    n = content_len(root, "delta");
    if (n > 0)
      r->content_chars += (uint64_t)n;
    read_usage(r, cJSON_GetObjectItemCaseSensitive(root, "usage"));
  }
  if (n > 0) {
    if (r->token_events == 0) {
      r->t_first_token_ns = f->now_ns;
    } else {
      uint64_t gap = f->now_ns - r->t_last_token_ns;
      r->itl_sum_ns += gap;
      if (r->itl)
        vl_hist_record(r->itl, (int64_t)(gap / 1000));
    }
    r->t_last_token_ns = f->now_ns;
    r->token_events++;
  }
  vl_json_free(root);
  return 0;
}

void vl_response_init(vl_response_t *r, size_t max) {
  memset(r, 0, sizeof(*r));
  r->max = max;
  vl_sse_init(&r->sse, SSE_MAX_EVENT, on_event, NULL);
}

void vl_response_free(vl_response_t *r) {
  vl_sse_free(&r->sse);
  free(r->buf);
  r->buf = NULL;
}

void vl_response_begin(vl_response_t *r, int stream, uint64_t t_send_ns, vl_hist_t *itl) {
  r->stream = stream;
  r->status = 0;
  r->len = 0;
  r->t_send_ns = t_send_ns;
  r->t_first_byte_ns = r->t_first_token_ns = r->t_last_token_ns = 0;
  r->token_events = 0;
  r->itl_sum_ns = 0;
  r->done = r->malformed = r->stream_error = r->oversize = 0;
  r->prompt_tokens = r->completion_tokens = -1;
  r->content_chars = 0;
  r->itl = itl;
  vl_sse_reset(&r->sse);
}

static int keep(vl_response_t *r, const char *p, size_t n, size_t max) {
  if (r->len + n > max) {
    r->oversize = 1;
    return VL_E2BIG;
  }
  if (r->len + n > r->cap) {
    size_t cap = r->cap ? r->cap : 1024;
    while (cap < r->len + n)
      cap *= 2;
    char *b = realloc(r->buf, cap);
    if (!b)
      return VL_ENOMEM;
    r->buf = b;
    r->cap = cap;
  }
  memcpy(r->buf + r->len, p, n);
  r->len += n;
  return 0;
}

static int is_2xx(long status) {
  return status >= 200 && status < 300;
}

int vl_response_write(vl_response_t *r, const char *p, size_t n, uint64_t now_ns) {
  if (!r->t_first_byte_ns)
    r->t_first_byte_ns = now_ns;
  if (r->stream && is_2xx(r->status)) {
    feed_t f = {r, now_ns};
    r->sse.ud = &f;
    int rc = vl_sse_feed(&r->sse, p, n);
    r->sse.ud = NULL;
    if (rc == VL_E2BIG)
      r->oversize = 1;
    return rc;
  }
  return keep(r, p, n, r->stream ? VL_MIN(r->max, ERROR_BODY_MAX) : r->max);
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

static vl_errclass_t finish_json(vl_response_t *r) {
  cJSON *root = vl_json_parse(r->buf ? r->buf : "", r->len);
  vl_errclass_t c = VL_ERR_NONE;
  if (!cJSON_IsObject(root)) {
    c = VL_ERR_MALFORMED;
  } else if (cJSON_GetObjectItemCaseSensitive(root, "error")) {
    c = VL_ERR_STREAM;
  } else if (r->native) {
    long n = native_text_len(root);
    if (n < 0) {
      c = VL_ERR_MALFORMED;
    } else {
      r->content_chars = (uint64_t)n;
      read_usage(r, cJSON_GetObjectItemCaseSensitive(root, "meta_info"));
    }
  } else {
    long n = content_len(root, "message");
    if (n < 0) {
      c = VL_ERR_MALFORMED;
    } else {
      r->content_chars = (uint64_t)n;
      read_usage(r, cJSON_GetObjectItemCaseSensitive(root, "usage"));
    }
  }
  vl_json_free(root);
  return c;
}

vl_errclass_t vl_response_finish(vl_response_t *r, CURLcode result, long status) {
  r->status = status;
  if (result != CURLE_OK)
    return classify_curl(r, result);
  if (status == 429)
    return VL_ERR_HTTP_429;
  if (status >= 400 && status < 500)
    return VL_ERR_HTTP_4XX;
  if (status >= 500)
    return VL_ERR_HTTP_5XX;
  if (!is_2xx(status))
    return VL_ERR_HTTP_OTHER;
  if (!r->stream)
    return finish_json(r);
  if (r->stream_error)
    return VL_ERR_STREAM;
  if (r->malformed)
    return VL_ERR_MALFORMED;
  if (!r->done || vl_sse_pending(&r->sse))
    return VL_ERR_TRUNCATED;
  if (r->completion_tokens < 0)
    r->completion_tokens = r->token_events;
  return VL_ERR_NONE;
}
