#include "vlmload/response.h"
#include "vlmload/common.h"
#include "vlmload/errtext.h"
#include "vlmload/json.h"
#include "vlmload/transport.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* A token count as the server wrote it (the scanner has checked its grammar): a number from 0 to
 * 2^53, else -1 (unknown). Converting a double out of int64_t's range (1e60, NaN) would be
 * undefined. */
static int64_t number_count(const char *text, size_t len) {
  if (len <= 15) { /* a count as servers write it: digits only, exact in a double */
    int64_t v = 0;
    size_t i = 0;
    while (i < len && text[i] >= '0' && text[i] <= '9')
      v = v * 10 + (text[i++] - '0');
    if (i == len)
      return v;
  }
  char buf[64];
  char *t = len < sizeof(buf) ? buf : vl_xstrndup(text, len); /* "8.000...0" is a count too */
  if (t == buf) {
    memcpy(buf, text, len);
    buf[len] = '\0';
  }
  double v = strtod(t, NULL);
  if (t != buf)
    free(t);
  return v >= 0 && v <= 9007199254740992.0 ? (int64_t)v : -1;
}

/* The server's timings (vl_srvtime_t): which one a member is. */
enum {
  SRV_NONE,
  SRV_PROMPT_N,
  SRV_PROMPT_MS,
  SRV_PREDICTED_N,
  SRV_PREDICTED_MS,
  SRV_CACHE_N,
  SRV_E2E
};

static void srv_clear(vl_srvtime_t *t) {
  t->prompt_ms = t->predicted_ms = t->e2e_ms = NAN;
  t->prompt_n = t->predicted_n = t->cache_n = -1;
}

/* Which timing the member at level 2 is: llama.cpp's timings.* (chat), SGLang's
 * meta_info.e2e_latency (native); SRV_NONE for any other. Level 1 is checked by the caller. */
static int srv_member(const vl_jsonscan_t *s, int native) {
  if (native)
    return VL_JSONSCAN_KEY_IS(s, 2, "e2e_latency") ? SRV_E2E : SRV_NONE;
  switch (s->lv[2].key_len) {
  case 7:
    return VL_JSONSCAN_KEY_IS(s, 2, "cache_n") ? SRV_CACHE_N : SRV_NONE;
  case 8:
    return VL_JSONSCAN_KEY_IS(s, 2, "prompt_n") ? SRV_PROMPT_N : SRV_NONE;
  case 9:
    return VL_JSONSCAN_KEY_IS(s, 2, "prompt_ms") ? SRV_PROMPT_MS : SRV_NONE;
  case 11:
    return VL_JSONSCAN_KEY_IS(s, 2, "predicted_n") ? SRV_PREDICTED_N : SRV_NONE;
  case 12:
    return VL_JSONSCAN_KEY_IS(s, 2, "predicted_ms") ? SRV_PREDICTED_MS : SRV_NONE;
  default:
    return SRV_NONE;
  }
}

/* Sets timing `which` of t from a number's text (the scanner has checked its grammar); a value
 * cut short, negative or not finite is left out. */
static void srv_set(vl_srvtime_t *t, int which, const char *text, size_t len, int truncated) {
  char buf[64];
  if (truncated || len >= sizeof(buf))
    return;
  memcpy(buf, text, len);
  buf[len] = '\0';
  double v = strtod(buf, NULL);
  if (!isfinite(v) || v < 0 || v > 1e15)
    return;
  switch (which) {
  case SRV_PROMPT_N:
    t->prompt_n = (int64_t)v;
    break;
  case SRV_PROMPT_MS:
    t->prompt_ms = v;
    break;
  case SRV_PREDICTED_N:
    t->predicted_n = (int64_t)v;
    break;
  case SRV_PREDICTED_MS:
    t->predicted_ms = v;
    break;
  case SRV_CACHE_N:
    t->cache_n = (int64_t)v;
    break;
  case SRV_E2E:
    t->e2e_ms = v * 1e3; /* SGLang gives seconds */
    break;
  }
}

/* An event's timings over the reply's: each one it gave replaces the one before. */
static void srv_apply(vl_srvtime_t *t, const vl_srvtime_t *ev) {
  if (!isnan(ev->prompt_ms))
    t->prompt_ms = ev->prompt_ms;
  if (!isnan(ev->predicted_ms))
    t->predicted_ms = ev->predicted_ms;
  if (!isnan(ev->e2e_ms))
    t->e2e_ms = ev->e2e_ms;
  if (ev->prompt_n >= 0)
    t->prompt_n = ev->prompt_n;
  if (ev->predicted_n >= 0)
    t->predicted_n = ev->predicted_n;
  if (ev->cache_n >= 0)
    t->cache_n = ev->cache_n;
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

/* Keeps the JSON string text (len bytes with its quotes, the first bytes of a longer one when
 * truncated) as the reply's error message, unless one is kept. */
static void take_message(vl_response_t *r, const char *text, size_t len, int truncated) {
  if (truncated) {
    if (len > 1) {
      /* A message longer than the capture: its first bytes, unescaped well enough to be read. */
      char msg[VL_RESPONSE_MSG_MAX];
      size_t n = VL_MIN(len - 1, sizeof(msg) - 1);
      memcpy(msg, text + 1, n);
      msg[n] = '\0';
      keep_message(r, msg);
    }
    return;
  }
  cJSON *v = vl_json_parse(text, len);
  if (cJSON_IsString(v))
    keep_message(r, v->valuestring);
  vl_json_free(v);
}

/* The counts an event's usage (meta_info) object held. */
static void ev_usage(vl_response_t *r) {
  if (r->ev.prompt_tokens != -2)
    r->prompt_tokens = r->ev.prompt_tokens;
  if (r->ev.completion_tokens != -2)
    r->completion_tokens = r->ev.completion_tokens;
}

/* The scan of one event, in the whole-body scanner (idle while a stream is read). Chat events
 * are judged by: top-level "error" (not null: an error; its message the string itself or
 * error.message), choices[0].delta's "content", "reasoning_content" and "reasoning" strings and
 * non-empty "tool_calls", and "usage"; native ones by "error", "meta_info" and "text". The first
 * member of a name counts, as cJSON's lookup would take it. */
enum {
  EV_ERROR = 1 << 0,
  EV_USAGE = 1 << 1,
  EV_CHOICES = 1 << 2,
  EV_DELTA = 1 << 3,
  EV_CONTENT = 1 << 4,
  EV_RCONTENT = 1 << 5,
  EV_REASONING = 1 << 6,
  EV_TOOLS = 1 << 7,
  EV_PT = 1 << 8,
  EV_CT = 1 << 9,
  EV_TEXT = 1 << 10,
  EV_MESSAGE = 1 << 11,
  EV_SRV = 1 << 12, /* EV_SRV << SRV_*: that timing met */
  EV_TIMINGS = 1 << 20,
};

/* Whether the member at hand is the first of its name (bit), marking it met. */
static int ev_first(vl_response_t *r, unsigned bit) {
  int first = !(r->ev.seen & bit);
  r->ev.seen |= bit;
  return first;
}

/* A member that holds others: whether its members are to be read (it is the first of its name). */
static void ev_enter(vl_response_t *r, unsigned bit) {
  if (ev_first(r, bit))
    r->ev.active |= bit;
  else
    r->ev.active &= ~bit;
}

static vl_jsonscan_want_t ev_on_value(void *ud, const vl_jsonscan_t *s, int depth, char c) {
  vl_response_t *r = ud;
  int str = c == '"', num = c == '-' || (c >= '0' && c <= '9');
  if (depth == 0) {
    r->ev.not_object = c != '{';
    return VL_JSONSCAN_SKIP;
  }
  if (!vl_jsonscan_key(s, 1))
    return VL_JSONSCAN_SKIP;
  int usage = r->native ? VL_JSONSCAN_KEY_IS(s, 1, "meta_info") : VL_JSONSCAN_KEY_IS(s, 1, "usage");
  if (depth == 1) {
    if (VL_JSONSCAN_KEY_IS(s, 1, "error")) {
      ev_enter(r, EV_ERROR);
      if (!(r->ev.active & EV_ERROR) || c == 'n')
        return VL_JSONSCAN_SKIP;
      r->ev.error = 1;
      return str ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
    }
    if (usage)
      ev_enter(r, EV_USAGE);
    else if (!r->native && VL_JSONSCAN_KEY_IS(s, 1, "timings"))
      ev_enter(r, EV_TIMINGS);
    else if (!r->native && VL_JSONSCAN_KEY_IS(s, 1, "choices"))
      ev_enter(r, EV_CHOICES);
    else if (r->native && VL_JSONSCAN_KEY_IS(s, 1, "text") && ev_first(r, EV_TEXT) && str)
      return VL_JSONSCAN_MEASURE;
    return VL_JSONSCAN_SKIP;
  }
  if (depth == 2) {
    if (VL_JSONSCAN_KEY_IS(s, 1, "error") && (r->ev.active & EV_ERROR) &&
        VL_JSONSCAN_KEY_IS(s, 2, "message") && ev_first(r, EV_MESSAGE) && str)
      return VL_JSONSCAN_CAPTURE;
    int srv = (r->native ? usage && (r->ev.active & EV_USAGE)
                         : (r->ev.active & EV_TIMINGS) && VL_JSONSCAN_KEY_IS(s, 1, "timings"))
                  ? srv_member(s, r->native)
                  : SRV_NONE;
    if (srv != SRV_NONE)
      return num && ev_first(r, (unsigned)EV_SRV << srv) ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
    if (usage && (r->ev.active & EV_USAGE)) {
      unsigned bit = VL_JSONSCAN_KEY_IS(s, 2, "prompt_tokens")       ? EV_PT
                     : VL_JSONSCAN_KEY_IS(s, 2, "completion_tokens") ? EV_CT
                                                                     : 0;
      return bit && ev_first(r, bit) && num ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
    }
    return VL_JSONSCAN_SKIP;
  }
  if (r->native || !(r->ev.active & EV_CHOICES) || !VL_JSONSCAN_KEY_IS(s, 1, "choices") ||
      vl_jsonscan_index(s, 2) != 0 || !VL_JSONSCAN_KEY_IS(s, 3, "delta"))
    return VL_JSONSCAN_SKIP;
  if (depth == 3) {
    ev_enter(r, EV_DELTA);
    return VL_JSONSCAN_SKIP;
  }
  if (depth != 4 || !(r->ev.active & EV_DELTA))
    return VL_JSONSCAN_SKIP;
  if (VL_JSONSCAN_KEY_IS(s, 4, "content")) {
    if (!ev_first(r, EV_CONTENT) || !str)
      return VL_JSONSCAN_SKIP;
    /* A conversation keeps the text itself; else its length is all that counts. */
    return r->content_sink ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_MEASURE;
  }
  if (VL_JSONSCAN_KEY_IS(s, 4, "reasoning_content"))
    return ev_first(r, EV_RCONTENT) && str ? VL_JSONSCAN_MEASURE : VL_JSONSCAN_SKIP;
  if (VL_JSONSCAN_KEY_IS(s, 4, "reasoning"))
    return ev_first(r, EV_REASONING) && str ? VL_JSONSCAN_MEASURE : VL_JSONSCAN_SKIP;
  if (VL_JSONSCAN_KEY_IS(s, 4, "tool_calls"))
    return ev_first(r, EV_TOOLS) && c == '[' ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
  return VL_JSONSCAN_SKIP;
}

static void ev_on_end(void *ud, const vl_jsonscan_t *s, int depth, const char *text, size_t len,
                      int truncated) {
  vl_response_t *r = ud;
  if (!text) { /* a measured string */
    long n = (long)len;
    if (depth == 1)
      r->ev.text = n;
    else if (VL_JSONSCAN_KEY_IS(s, 4, "content"))
      r->ev.content = n;
    else if (VL_JSONSCAN_KEY_IS(s, 4, "reasoning_content"))
      r->ev.reasoning_content = n;
    else
      r->ev.reasoning = n;
    return;
  }
  if (text[0] == '[') { /* tool_calls: empty unless something but white space is inside */
    size_t i = 1;
    while (i < len && is_space(text[i]))
      i++;
    r->ev.tool_calls = truncated || (i < len && text[i] != ']');
    return;
  }
  if (depth ==
      4) { /* the delta's content, for the conversation: kept until the event proves whole */
    cJSON *v = truncated ? NULL : vl_json_parse(text, len);
    if (cJSON_IsString(v)) {
      size_t n = strlen(v->valuestring);
      if (n + 1 > r->ev_text_cap) {
        char *t = realloc(r->ev_text, n + 1);
        if (t) {
          r->ev_text = t;
          r->ev_text_cap = n + 1;
        }
      }
      if (n + 1 <= r->ev_text_cap) {
        memcpy(r->ev_text, v->valuestring, n + 1);
        r->ev.content_text = 1;
      }
      r->ev.content = (long)n;
    } else {
      r->ev.content = (long)len; /* longer than any capture: counted, not kept */
    }
    vl_json_free(v);
    return;
  }
  if (text[0] != '"' && depth == 2 &&
      (VL_JSONSCAN_KEY_IS(s, 1, "timings") || VL_JSONSCAN_KEY_IS(s, 2, "e2e_latency"))) {
    srv_set(&r->ev.srv, srv_member(s, r->native), text, len, truncated);
    return;
  }
  if (text[0] != '"') { /* a count */
    int64_t n = truncated ? -1 : number_count(text, len);
    if (VL_JSONSCAN_KEY_IS(s, 2, "prompt_tokens"))
      r->ev.prompt_tokens = n;
    else
      r->ev.completion_tokens = n;
    return;
  }
  if (!r->error_msg[0]) { /* the error's message, taken back if the event is no JSON object */
    take_message(r, text, len, truncated);
    r->ev.message_set = r->error_msg[0] != '\0';
  }
}

/* How far an event's data matches [DONE] with white space around it (r->ev_done): k (0..5)
 * bytes of "[DONE]" past leading white space, DONE_ALL past all six, DONE_NO at a byte that rules
 * it out (at once, for a chunk: its first byte is '{'). */
enum { DONE_ALL = 6, DONE_NO = 7 };

static void done_match(vl_response_t *r, const char *p, size_t n) {
  int st = r->ev_done;
  for (size_t i = 0; i < n && st != DONE_NO; i++) {
    char c = p[i];
    if (is_space(c))
      st = st == 0 || st == DONE_ALL ? st : DONE_NO;
    else
      st = st < DONE_ALL && c == "[DONE]"[st] ? st + 1 : DONE_NO;
  }
  r->ev_done = st;
}

/* Bytes of an event's data, scanned as they come: nothing of an event is held. */
static int on_data(void *ud, size_t off, const char *p, size_t n) {
  feed_t *f = ud;
  vl_response_t *r = f->r;
  if (r->done)
    return 0; /* nothing after [DONE] counts */
  if (off == 0) {
    memset(&r->ev, 0, sizeof(r->ev));
    r->ev.content = r->ev.reasoning_content = r->ev.reasoning = r->ev.text = -1;
    r->ev.prompt_tokens = r->ev.completion_tokens = -2;
    srv_clear(&r->ev.srv);
    r->scan.on_value = ev_on_value;
    r->scan.on_end = ev_on_end;
    vl_jsonscan_reset(&r->scan);
    r->ev_open = 1;
    r->ev_done = 0;
  }
  if (r->ev_done != DONE_NO)
    done_match(r, p, n);
  /* A byte that is not JSON is remembered by the scanner, which then reads no further. */
  return vl_jsonscan_feed(&r->scan, p, n) == VL_ENOMEM ? VL_ENOMEM : 0;
}

/* The event whose data was scanned is dispatched: it counts once it proves a JSON object. */
static int on_event(void *ud, size_t len) {
  feed_t *f = ud;
  vl_response_t *r = f->r;
  (void)len;
  if (r->done)
    return 0;
  r->ev_open = 0;
  if (r->ev_done == DONE_ALL) {
    r->done = 1;
    return 0;
  }
  if (vl_jsonscan_finish(&r->scan) != 0 || r->ev.not_object) {
    r->malformed = 1;
    if (r->ev.message_set)
      r->error_msg[0] = '\0';
    return 0;
  }
  r->events++;
  if (r->ev.error)
    r->stream_error = 1;
  srv_apply(&r->srv, &r->ev.srv);
  long n;
  int content = 0;
  if (r->native) {
    /* Counts so far ride on every event; an event with text whose count did not move (a repeat)
     * brings no token. */
    int64_t before = r->completion_tokens;
    ev_usage(r);
    n = r->ev.text;
    if (n > 0 && (uint64_t)n > r->content_chars)
      r->content_chars = (uint64_t)n;
    if (before >= 0 && r->completion_tokens <= before)
      n = 0;
    content = n > 0;
  } else {
    long lc = r->ev.content;
    content = lc > 0;
    if (content && r->content_sink && r->ev.content_text)
      r->content_sink(r->content_ud, r->ev_text, (size_t)lc);
    n = VL_MAX(lc, 0) + VL_MAX(r->ev.reasoning_content, 0) + VL_MAX(r->ev.reasoning, 0);
    r->content_chars += (uint64_t)n;
    if (r->ev.tool_calls)
      n++; /* a tool call's arguments are tokens too */
    ev_usage(r);
  }
  if (n > 0)
    token_event(r, f->now_ns, content);
  return 0;
}

/* The top-level members a reply is judged by. */
enum {
  TOP_OTHER,
  TOP_ERROR,
  TOP_USAGE,
  TOP_CHOICES,
  TOP_TEXT,
  TOP_MESSAGE,
  TOP_DETAIL,
  TOP_TIMINGS
};
/* Bits of r->seen past the TOP_* ones (1 << TOP_*): choices[0].message and its members. */
enum {
  MSG_MESSAGE = 1 << 8,
  MSG_CONTENT = 1 << 9,
  MSG_REASONING = 1 << 10,
  MSG_RCONTENT = 1 << 11,
  MSG_TOOLS = 1 << 12,
};

/* Whether the member at hand is the first of its name (bit), marking it met. */
static int first_seen(vl_response_t *r, unsigned bit) {
  int first = !(r->seen & bit);
  r->seen |= bit;
  return first;
}

static int top_member(const vl_jsonscan_t *s, int native) {
  const char *k = vl_jsonscan_key(s, 1);
  if (!k)
    return TOP_OTHER;
  switch (s->lv[1].key_len) {
  case 4:
    return native && memcmp(k, "text", 4) == 0 ? TOP_TEXT : TOP_OTHER;
  case 5:
    if (memcmp(k, "error", 5) == 0)
      return TOP_ERROR;
    return !native && memcmp(k, "usage", 5) == 0 ? TOP_USAGE : TOP_OTHER;
  case 6:
    return memcmp(k, "detail", 6) == 0 ? TOP_DETAIL : TOP_OTHER;
  case 7:
    if (memcmp(k, "message", 7) == 0)
      return TOP_MESSAGE;
    if (!native && memcmp(k, "timings", 7) == 0)
      return TOP_TIMINGS;
    return !native && memcmp(k, "choices", 7) == 0 ? TOP_CHOICES : TOP_OTHER;
  case 9:
    return native && memcmp(k, "meta_info", 9) == 0 ? TOP_USAGE : TOP_OTHER;
  default:
    return TOP_OTHER;
  }
}

/* The whole-body scan. A 2xx reply is judged by: top-level "error" (not null: an error; its
 * message kept, the string itself or error.message), "usage" (chat) or "meta_info" and "text"
 * (native), and choices[0].message: an object whose "content", "reasoning_content" or "reasoning"
 * is a string or that has "tool_calls". A non-2xx body gives only its message: "error" (a string or
 * an object's "message"), else a top-level "message" or "detail" string. The first member of a
 * name counts, as in an event: a later one is passed over.
 *
 * Every value is offered after the values that hold it, so the top-level member is named once, at
 * its own value (r->top), and choices[0].message once, at depth 3 (r->in_message). */
static vl_jsonscan_want_t on_value(void *ud, const vl_jsonscan_t *s, int depth, char c) {
  vl_response_t *r = ud;
  if (depth == 1) {
    int top = top_member(s, r->native);
    if (top != TOP_OTHER && !first_seen(r, 1u << top))
      top = TOP_OTHER;
    r->top = top;
    if (top == TOP_OTHER)
      return VL_JSONSCAN_SKIP;
    if (top == TOP_ERROR && c != 'n') {
      r->has_error = 1; /* an object is not held: its "message" is taken below */
      return c == '"' ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
    }
    if (r->status && !is_2xx(r->status))
      return c == '"' && (top == TOP_MESSAGE || top == TOP_DETAIL) ? VL_JSONSCAN_CAPTURE
                                                                   : VL_JSONSCAN_SKIP;
    return top == TOP_TEXT ? VL_JSONSCAN_MEASURE : VL_JSONSCAN_SKIP;
  }
  int top = r->top; /* the top-level member this value is inside (depth 0: none) */
  if (top == TOP_OTHER || depth < 1)
    return VL_JSONSCAN_SKIP;
  if (depth == 2 && (top == TOP_USAGE || top == TOP_TIMINGS)) {
    /* A count in the usage object, or one of the server's timings: its number is kept, never
     * the object. */
    if (!(c == '-' || (c >= '0' && c <= '9')) || (r->status && !is_2xx(r->status)))
      return VL_JSONSCAN_SKIP;
    int srv = top == TOP_TIMINGS || r->native ? srv_member(s, r->native) : SRV_NONE;
    if (srv != SRV_NONE) {
      int first = !(r->srv_seen & (1u << srv));
      r->srv_seen |= 1u << srv;
      return first ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
    }
    if (top == TOP_TIMINGS)
      return VL_JSONSCAN_SKIP;
    int bit = VL_JSONSCAN_KEY_IS(s, 2, "prompt_tokens")       ? 1
              : VL_JSONSCAN_KEY_IS(s, 2, "completion_tokens") ? 2
                                                              : 0;
    return bit && !(r->usage_seen & bit) ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
  }
  if (depth == 2 && top == TOP_ERROR)
    return c == '"' && VL_JSONSCAN_KEY_IS(s, 2, "message") ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
  if (top != TOP_CHOICES)
    return VL_JSONSCAN_SKIP;
  if (depth <= 3) {
    r->in_message = depth == 3 && vl_jsonscan_index(s, 2) == 0 &&
                    VL_JSONSCAN_KEY_IS(s, 3, "message") && first_seen(r, MSG_MESSAGE);
    if (r->in_message && c == '{')
      r->has_message = 1;
    return VL_JSONSCAN_SKIP;
  }
  if (depth != 4 || !r->in_message)
    return VL_JSONSCAN_SKIP;
  switch (s->lv[4].key_len) {
  case 7:
    if (!VL_JSONSCAN_KEY_IS(s, 4, "content") || !first_seen(r, MSG_CONTENT))
      return VL_JSONSCAN_SKIP;
    if (c == '"' && r->content_sink)
      return VL_JSONSCAN_CAPTURE; /* for the conversation; on_end measures it */
    return VL_JSONSCAN_MEASURE;
  case 9:
    return VL_JSONSCAN_KEY_IS(s, 4, "reasoning") && first_seen(r, MSG_REASONING)
               ? VL_JSONSCAN_MEASURE
               : VL_JSONSCAN_SKIP;
  case 10:
    if (VL_JSONSCAN_KEY_IS(s, 4, "tool_calls") && first_seen(r, MSG_TOOLS) && c == '[')
      r->has_tool_calls = 1;
    return VL_JSONSCAN_SKIP;
  case 17:
    return VL_JSONSCAN_KEY_IS(s, 4, "reasoning_content") && first_seen(r, MSG_RCONTENT)
               ? VL_JSONSCAN_MEASURE
               : VL_JSONSCAN_SKIP;
  default:
    return VL_JSONSCAN_SKIP;
  }
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
  if (text[0] != '"' && depth == 2 &&
      (VL_JSONSCAN_KEY_IS(s, 1, "timings") || VL_JSONSCAN_KEY_IS(s, 2, "e2e_latency"))) {
    srv_set(&r->srv, srv_member(s, r->native), text, len, truncated);
    return;
  }
  if (text[0] != '"') { /* a count in the usage object */
    int prompt = VL_JSONSCAN_KEY_IS(s, 2, "prompt_tokens");
    r->usage_seen |= prompt ? 1 : 2;
    int64_t n = truncated ? -1 : number_count(text, len);
    if (prompt)
      r->prompt_tokens = n;
    else
      r->completion_tokens = n;
    return;
  }
  /* A string is an error message ("error", "error.message", "message", "detail"). */
  take_message(r, text, len, truncated);
}

void vl_response_init(vl_response_t *r, size_t max) {
  memset(r, 0, sizeof(*r));
  r->max = max;
  vl_sse_init(&r->sse, on_data, on_event, NULL);
  vl_jsonscan_init(&r->scan, SCAN_CAPTURE_MAX, on_value, on_end, r);
}

void vl_response_free(vl_response_t *r) {
  vl_jsonscan_free(&r->scan);
  free(r->gaps_us);
  r->gaps_us = NULL;
  free(r->ev_text);
  r->ev_text = NULL;
  free(r->etext);
  r->etext = NULL;
  r->ev_text_cap = 0;
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
  r->events = 0;
  r->itl_sum_ns = 0;
  r->n_gaps = 0;
  r->done = r->malformed = r->stream_error = r->oversize = 0;
  r->ev_open = 0;
  r->prompt_tokens = r->completion_tokens = -1;
  r->content_chars = 0;
  r->error_msg[0] = '\0';
  r->has_message = r->has_text = r->has_tool_calls = r->has_error = 0;
  r->top = r->in_message = 0;
  r->usage_seen = 0;
  r->srv_seen = 0;
  srv_clear(&r->srv);
  r->seen = 0;
  r->content_len = -1;
  r->content_sink = NULL;
  r->content_ud = NULL;
  r->content_cut = 0;
  r->scan.cap_max = SCAN_CAPTURE_MAX;
  vl_sse_reset(&r->sse);
  r->scan.on_value = on_value; /* an event stream lends the scanner to its events */
  r->scan.on_end = on_end;
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
    size_t k = (size_t)VL_MIN(room, (uint64_t)n);
    if (r->bytes == 0) {
      if (!r->etext)
        r->etext = malloc(sizeof(*r->etext)); /* without it, no words: nothing else is lost */
      if (r->etext)
        vl_errtext_reset(r->etext);
    }
    r->bytes += n;
    if (r->etext)
      vl_errtext_feed(r->etext, p, k); /* the words, should the body prove no JSON */
    int rc = vl_jsonscan_feed(&r->scan, p, k);
    return rc == VL_ENOMEM ? rc : 0;
  }
  if (r->stream && r->bytes == 0 && n > 0 && (r->json_ctype || p[0] == '{' || p[0] == '['))
    r->body_json = 1; /* no event-stream line starts so; an SSE parse would call it truncated */
  if (r->stream && !r->body_json && r->done)
    return 0; /* past [DONE]: ignored, uncounted */
  uint64_t room = r->bytes < r->max ? r->max - r->bytes : 0;
  r->bytes += n;
  if (r->stream && !r->body_json) {
    /* Events are read up to the limit: a [DONE] within it ends the stream, whatever follows it in
     * the same piece, as it would have in a piece of its own. */
    feed_t f = {r, now_ns};
    r->sse.ud = &f;
    int rc = vl_sse_feed(&r->sse, p, (size_t)VL_MIN(room, (uint64_t)n));
    r->sse.ud = NULL;
    if (rc == 0 && n > room && !r->done)
      rc = VL_E2BIG;
    if (rc == VL_E2BIG)
      r->oversize = 1;
    return rc;
  }
  if (r->bytes > r->max) {
    r->oversize = 1;
    return VL_E2BIG;
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

/* A status that is not 2xx: its class, and the body's words when it was not JSON (its first
 * byte that is not JSON has been met) and gave no message. */
static vl_errclass_t http_failed(vl_response_t *r, long status) {
  if (!r->error_msg[0] && r->bytes > 0 && r->scan.error && r->etext) {
    const char *words = vl_errtext_get(r->etext);
    if (*words)
      keep_message(r, words);
  }
  return http_class(status);
}

/* Whether the reply's headers say its body cannot be read as sent: two Content-Length headers
 * that differ (curl 7.88 takes the last and reports a body shorter than it as cut short), or a
 * Content-Encoding that curl does not decode (none was asked for, so the bytes are compressed).
 * Read from curl's copy of the headers, only when a reply fell short. */
static int headers_broken(const vl_response_t *r) {
  struct curl_header *h;
  if (!r->easy)
    return 0;
  if (curl_easy_header(r->easy, "Content-Length", 0, CURLH_HEADER, -1, &h) == CURLHE_OK &&
      h->amount > 1) {
    size_t amount = h->amount;
    unsigned long long first = strtoull(h->value, NULL, 10);
    for (size_t i = 1; i < amount; i++)
      if (curl_easy_header(r->easy, "Content-Length", i, CURLH_HEADER, -1, &h) == CURLHE_OK &&
          strtoull(h->value, NULL, 10) != first)
        return 1;
  }
  return !r->decodes &&
         curl_easy_header(r->easy, "Content-Encoding", 0, CURLH_HEADER, -1, &h) == CURLHE_OK &&
         strcasecmp(h->value, "identity") != 0;
}

static vl_errclass_t classify(vl_response_t *r, CURLcode result, long status) {
  /* A final status that is not 2xx decides the class, whatever came after it. A 1xx with the
   * transfer failed is no final status: curl gave up before one came. */
  if (status >= 200 && !is_2xx(status))
    return http_failed(r, status);
  if (result != CURLE_OK)
    return classify_curl(r, result);
  if (!is_2xx(status))
    return http_failed(r, status);
  if (!r->stream || r->body_json)
    return finish_json(r);
  if (r->stream_error)
    return VL_ERR_STREAM;
  if (r->malformed)
    return VL_ERR_MALFORMED;
  if (!r->done)
    return VL_ERR_TRUNCATED;
  if (r->events == 0)
    return VL_ERR_MALFORMED; /* [DONE] with no chunk before it: an empty reply */
  if (r->completion_tokens < 0)
    r->completion_tokens = r->token_events;
  return VL_ERR_NONE;
}

vl_errclass_t vl_response_finish(vl_response_t *r, CURLcode result, long status) {
  r->status = status;
  if (r->ev_open) {
    /* An event the stream ended inside counts nothing, its error's message included. */
    if (r->ev.message_set)
      r->error_msg[0] = '\0';
    r->ev_open = 0;
  }
  vl_errclass_t c = classify(r, result, status);
  if (c == VL_ERR_TRUNCATED && headers_broken(r))
    c = VL_ERR_MALFORMED;
  if (isnan(r->srv.e2e_ms) && !isnan(r->srv.prompt_ms) && !isnan(r->srv.predicted_ms))
    r->srv.e2e_ms = r->srv.prompt_ms + r->srv.predicted_ms;
  return c;
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
