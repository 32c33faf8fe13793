/* The HTTP side: routes, and the life of one model request (chat, or SGLang's native /generate;
 * the two differ only in how the body is parsed and the reply rendered).
 *
 * A model request moves through phases, all driven by MHD calling the access handler:
 *   RECV   the body arrives in pieces and is appended to req.body (413 past --max-body);
 *   WORK   (bodies over INLINE_BODY_MAX) the connection is suspended while the decode pool parses
 *          the body and decodes its images; the pool resumes it;
 *   WAIT   the reply is planned and due at a known instant; until then the connection is
 *          suspended on the timer; when due the response is queued (or, for the reset fault, the
 *          handler returns MHD_NO and MHD closes the socket);
 *   STALL  the stall faults: suspended until the client closes the socket or the server stops;
 *   SENT   the response is queued; a streamed one is produced by sse_read, which suspends the
 *          connection between tokens (slow_read likewise between the bytes of the slowloris
 *          fault; huge_read makes the huge fault's 64 MiB as they are sent).
 * Admission (when the body is complete) takes the request's seq and fault and counts it in flight;
 * MHD's completion callback ends it. Small bodies are parsed right on the HTTP thread. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INLINE_BODY_MAX (64u * 1024)
#define SSE_BLOCK       (16u * 1024)

typedef enum {
  R_CHAT,
  R_GENERATE,
  R_MODELS,
  R_HEALTH,
  R_FLUSH,
  R_SERVER_INFO,
  R_RESET_PREFIX,
  R_RESET_MM,
  R_VERSION,
  R_METRICS,
  R_STATS,
  R_NOT_FOUND,
  R_BAD_METHOD,
} route_t;

#define M_GET  1u
#define M_POST 2u
#define P_SGL  (1u << VL__PROFILE_SGLANG)
#define P_VLLM (1u << VL__PROFILE_VLLM)
#define P_ALL  7u

/* clang-format off */
static const struct {
  const char *path;
  route_t route;
  unsigned methods, profiles;
  const char *allow;
} routes[] = {
    {"/v1/chat/completions", R_CHAT,         M_POST,         P_ALL,  "POST"},
    {"/generate",            R_GENERATE,     M_POST,         P_SGL,  "POST"},
    {"/v1/models",           R_MODELS,       M_GET,          P_ALL,  "GET"},
    {"/health",              R_HEALTH,       M_GET,          P_ALL,  "GET"},
    {"/health_generate",     R_HEALTH,       M_GET,          P_ALL,  "GET"},
    {"/flush_cache",         R_FLUSH,        M_GET | M_POST, P_SGL,  "GET, POST"},
    {"/get_server_info",     R_SERVER_INFO,  M_GET,          P_SGL,  "GET"},
    {"/reset_prefix_cache",  R_RESET_PREFIX, M_POST,         P_VLLM, "POST"},
    {"/reset_mm_cache",      R_RESET_MM,     M_POST,         P_VLLM, "POST"},
    {"/version",             R_VERSION,      M_GET,          P_VLLM, "GET"},
    {"/metrics",             R_METRICS,      M_GET,          P_ALL,  "GET"},
    {"/mock/stats",          R_STATS,        M_GET,          P_ALL,  "GET"},
};
/* clang-format on */

typedef enum { PH_RECV, PH_WORK, PH_WAIT, PH_STALL, PH_SENT } phase_t;

typedef enum {
  PLAN_ERROR,
  PLAN_JSON,
  PLAN_TRUNCATED,
  PLAN_SSE,
  PLAN_RESET,
  PLAN_STALL,
  PLAN_RESET_AFTER_HEADERS,
  PLAN_HUGE,
  PLAN_SLOW,
} plan_t;

typedef struct {
  vl__timer_node_t timer; /* timer.conn is this request's connection */
  vl__work_item_t work;
  atomic_int refs; /* the request itself, plus one per callback response reading it */
  route_t route;
  const char *allow; /* for 405 */
  phase_t phase;
  bool admitted, too_big;
  bool finished;           /* the reply's last byte is queued: no longer busy for a flush */
  char *body;              /* chat only; freed once parsed */
  size_t len, cap, expect; /* expect: the Content-Length, used to size body at once */
  /* admission */
  uint64_t seq, t_body_ns, in_flight_at, completed_before;
  int64_t wall_ms;
  vl__fault_t fault;
  /* the planned reply, due at due_ns */
  plan_t plan;
  unsigned status;
  uint64_t due_ns;
  char *payload; /* JSON body for ERROR, JSON, TRUNCATED; the whole reply for SLOW; the text
                    before the filler for HUGE */
  size_t payload_len;
  const char *huge_tail; /* HUGE: the text after the filler (static) */
  size_t huge_tail_len;
  bool stream_reply;      /* the request asked for a stream: the content type of a fault's reply */
  vl__chat_reply_t reply; /* what the reply says (its strings: id below, the configuration's) */
  /* streaming */
  vl__chat_sse_t sse;
  char *event;      /* /generate: the token event being sent, made by vl__gen_event */
  size_t event_cap; /* its capacity */
  uint64_t base_ns; /* headers; token k is due at base + ttft + k * itl */
  uint64_t ntok, tok_sent, tok_limit;
  bool truncate_stream, malformed_stream, sse_done;
  const char *seg; /* the event being copied out */
  size_t seg_len, seg_off;
  char id[48];
} req_t;

static struct MHD_Daemon *daemon_;
static atomic_bool listening;
static char start_error[256];

/* Admission state: seq, in_flight and completed change together under this lock, so that a flush
 * sees a consistent in-flight count and the fault sequence has no gaps. busy_requests counts the
 * admitted requests whose reply is not yet queued in full and finished those whose reply is: a
 * server's scheduler is idle once it has produced the last token, before the client has read it, so
 * the flush check runs on busy_requests, not on in_flight (which ends with the connection's
 * request). */
static pthread_mutex_t admit_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t busy_requests;
static uint64_t finished;
static uint64_t fault_seq, flush_fault_seq;
static uint64_t fault_applied[VL__MAX_FAULTS];

/* ------------------------------------------------------------------ helpers */

static void req_unref(void *p) {
  req_t *r = p;
  if (atomic_fetch_sub(&r->refs, 1) != 1)
    return;
  free(r->body);
  free(r->payload);
  vl__chat_sse_free(&r->sse);
  free(r->event);
  free(r);
}

/* The routes that run the model: admitted, timed, faulted and recorded alike. */
static bool is_model(route_t route) {
  return route == R_CHAT || route == R_GENERATE;
}

static route_t lookup(const char *url, const char *method, const char **allow) {
  unsigned m = 0;
  if (strcmp(method, "POST") == 0)
    m = M_POST;
  else if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
    m = M_GET;
  for (size_t i = 0; i < VL_ARRAY_SIZE(routes); i++) {
    if (!(routes[i].profiles & (1u << vl__cfg->profile)) || strcmp(url, routes[i].path) != 0)
      continue;
    *allow = routes[i].allow;
    return (routes[i].methods & m) ? routes[i].route : R_BAD_METHOD;
  }
  return R_NOT_FOUND;
}

/* Queues body (taking ownership when owned) with the given status and content type. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, char *body, size_t len,
                               bool owned, const char *ctype, const char *hname, const char *hval) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(
      len, body ? body : (char *)"", owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
  if (!resp) {
    if (owned)
      free(body);
    return MHD_NO;
  }
  if (ctype)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  if (hname)
    MHD_add_response_header(resp, hname, hval);
  enum MHD_Result ret = MHD_queue_response(c, status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result respond_json(struct MHD_Connection *c, unsigned status, cJSON *obj) {
  char *s = cJSON_PrintUnformatted(obj);
  cJSON_Delete(obj);
  if (!s)
    return MHD_NO;
  return respond(c, status, s, strlen(s), true, "application/json", NULL, NULL);
}

static enum MHD_Result respond_error(struct MHD_Connection *c, unsigned status, const char *msg,
                                     const char *hname, const char *hval) {
  size_t len;
  char *s = vl__chat_error((int)status, msg, &len);
  if (!s)
    return MHD_NO;
  return respond(c, status, s, len, true, "application/json", hname, hval);
}

/* ------------------------------------------------------------------ admission */

/* The first fault of the group (chat or flush), in the order given, whose quota floor((k+1)*rate)
 * is not yet met. With one rule that is exactly "fault request k when floor((k+1)*rate) >
 * floor(k*rate)"; with several, a request taken by an earlier rule defers the later one's turn to
 * the next request. Chat requests and flush calls count in separate sequences. admit_mu held. */
static vl__fault_t pick_fault(uint64_t k, bool flush) {
  for (size_t i = 0; i < vl__cfg->nfaults; i++) {
    if (vl__fault_is_flush(vl__cfg->faults[i].kind) != flush)
      continue;
    uint64_t quota = (uint64_t)floor((double)(k + 1) * vl__cfg->faults[i].rate + 1e-9);
    if (fault_applied[i] < quota) {
      fault_applied[i]++;
      return vl__cfg->faults[i].kind;
    }
  }
  return VL__FAULT_NONE;
}

static void admit(req_t *r) {
  r->t_body_ns = vl_now_ns();
  r->wall_ms = vl_wall_ms();
  pthread_mutex_lock(&admit_mu);
  r->seq = atomic_fetch_add(&vl__stats.requests, 1);
  int64_t n = atomic_fetch_add(&vl__stats.in_flight, 1) + 1;
  busy_requests++;
  if ((uint64_t)n > atomic_load(&vl__stats.in_flight_max))
    atomic_store(&vl__stats.in_flight_max, (uint64_t)n);
  r->in_flight_at = (uint64_t)n;
  r->completed_before = atomic_load(&vl__stats.completed);
  if (!r->too_big)
    r->fault = pick_fault(fault_seq++, false);
  pthread_mutex_unlock(&admit_mu);
  if (r->fault != VL__FAULT_NONE)
    atomic_fetch_add(&vl__stats.faults[r->fault], 1);
  r->admitted = true;
  snprintf(r->id, sizeof(r->id), "%s-mock-%llu", r->route == R_GENERATE ? "generate" : "chatcmpl",
           (unsigned long long)r->seq);
}

/* The reply is produced in full (queued, or ended early): the request no longer keeps a flush
 * away. Idempotent. */
static void finish(req_t *r) {
  if (!r->admitted || r->finished)
    return;
  pthread_mutex_lock(&admit_mu);
  r->finished = true;
  busy_requests--;
  finished++;
  pthread_mutex_unlock(&admit_mu);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  req_t *r = *con_cls;
  if (!r)
    return;
  *con_cls = NULL;
  finish(r);
  if (r->admitted) {
    pthread_mutex_lock(&admit_mu);
    atomic_fetch_sub(&vl__stats.in_flight, 1);
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
      atomic_fetch_add(&vl__stats.completed, 1);
    pthread_mutex_unlock(&admit_mu);
  }
  req_unref(r);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  atomic_fetch_add(&vl__stats.connections, code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
}

/* ------------------------------------------------------------------ planning a chat reply */

static void record_chat(const req_t *r, const vl__chat_req_t *c, const char *error) {
  if (!vl__record_enabled())
    return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "seq", (double)r->seq);
  cJSON_AddStringToObject(o, "route",
                          r->route == R_GENERATE ? "/generate" : "/v1/chat/completions");
  cJSON_AddNumberToObject(o, "t_us", (double)(r->t_body_ns / 1000));
  cJSON_AddNumberToObject(o, "wall_ms", (double)r->wall_ms);
  cJSON_AddNumberToObject(o, "in_flight", (double)r->in_flight_at);
  cJSON_AddNumberToObject(o, "completed_before", (double)r->completed_before);
  cJSON_AddNumberToObject(o, "body_bytes", (double)r->len);
  cJSON_AddBoolToObject(o, "stream", c->stream);
  if (c->max_tokens >= 0)
    cJSON_AddNumberToObject(o, "max_tokens", (double)c->max_tokens);
  else
    cJSON_AddNullToObject(o, "max_tokens");
  if (c->model)
    cJSON_AddStringToObject(o, "model", c->model);
  else
    cJSON_AddNullToObject(o, "model");
  if (r->route == R_GENERATE) {
    cJSON_AddNumberToObject(o, "placeholders", c->placeholders);
  } else {
    cJSON_AddNumberToObject(o, "messages", c->messages);
    cJSON_AddNumberToObject(o, "text_parts", c->text_parts);
  }
  cJSON_AddNumberToObject(o, "prompt_chars", (double)c->prompt_chars);
  cJSON *imgs = cJSON_AddArrayToObject(o, "images");
  for (size_t i = 0; i < c->nimages; i++) {
    const vl__image_info_t *im = &c->images[i];
    char hash[17];
    snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)im->hash);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "fmt", im->fmt);
    cJSON_AddNumberToObject(j, "w", im->w);
    cJSON_AddNumberToObject(j, "h", im->h);
    cJSON_AddNumberToObject(j, "channels", im->channels);
    cJSON_AddNumberToObject(j, "bytes", (double)im->bytes);
    cJSON_AddStringToObject(j, "hash", hash);
    cJSON_AddItemToArray(imgs, j);
  }
  cJSON_AddNumberToObject(o, "tokens", (double)r->ntok);
  cJSON_AddNumberToObject(o, "status", r->status);
  if (r->fault != VL__FAULT_NONE)
    cJSON_AddStringToObject(o, "fault", vl__fault_names[r->fault]);
  if (error)
    cJSON_AddStringToObject(o, "error", error);
  vl__record_write(o);
  cJSON_Delete(o);
}

static void set_error(req_t *r, unsigned status, const char *msg) {
  r->plan = PLAN_ERROR;
  r->status = status;
  r->payload = vl__chat_error((int)status, msg, &r->payload_len);
}

/* The whole text of a streamed reply, for the slowloris fault: the events sse_read would send. */
static char *sse_whole(const vl__chat_sse_t *e, uint64_t ntok, size_t *len) {
  size_t n = (ntok ? e->first_len + (size_t)(ntok - 1) * e->token_len : 0) + e->tail_len;
  char *s = malloc(n + 1), *p = s;
  if (!s)
    return NULL;
  for (uint64_t k = 0; k < ntok; k++) {
    const char *ev = k ? e->token : e->first;
    size_t evlen = k ? e->token_len : e->first_len;
    memcpy(p, ev, evlen);
    p += evlen;
  }
  memcpy(p, e->tail, e->tail_len);
  s[n] = '\0';
  *len = n;
  return s;
}

/* Plans the huge fault: a --huge-bytes reply that parses if read whole, its content a run of 'x'.
 */
static void plan_huge(req_t *r) {
  static const char plain_tail[] = "\"},\"finish_reason\":\"stop\"}]}";
  static const char sse_tail[] = "\"}}]}\n\ndata: [DONE]\n\n";
  static const char gen_tail[] = "\",\"meta_info\":{\"finish_reason\":null}}";
  static const char gen_sse_tail[] =
      "\",\"meta_info\":{\"finish_reason\":null}}\n\ndata: [DONE]\n\n";
  char head[256];
  if (r->route == R_GENERATE) {
    r->plan = PLAN_HUGE;
    r->status = 200;
    r->payload = vl_xstrdup(r->stream_reply ? "data: {\"text\":\"" : "{\"text\":\"");
    r->payload_len = strlen(r->payload);
    r->huge_tail = r->stream_reply ? gen_sse_tail : gen_tail;
    r->huge_tail_len = r->stream_reply ? sizeof(gen_sse_tail) - 1 : sizeof(gen_tail) - 1;
    return;
  }
  int n = r->stream_reply
              ? snprintf(head, sizeof(head),
                         "data: {\"id\":\"%s\",\"object\":\"chat.completion.chunk\",\"choices\":"
                         "[{\"index\":0,\"delta\":{\"content\":\"",
                         r->id)
              : snprintf(head, sizeof(head),
                         "{\"id\":\"%s\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
                         "\"message\":{\"role\":\"assistant\",\"content\":\"",
                         r->id);
  r->plan = PLAN_HUGE;
  r->status = 200;
  r->payload = vl_xstrdup(head);
  r->payload_len = (size_t)n;
  r->huge_tail = r->stream_reply ? sse_tail : plain_tail;
  r->huge_tail_len = r->stream_reply ? sizeof(sse_tail) - 1 : sizeof(plain_tail) - 1;
}

/* Parses the admitted request and plans its reply: what to send and when. Runs on an HTTP thread
 * or a decode thread; either way nobody else touches r meanwhile. */
static void process(req_t *r) {
  const vl__config_t *cfg = vl__cfg;
  vl__chat_req_t c;
  memset(&c, 0, sizeof(c));
  c.max_tokens = -1;
  if (r->too_big) {
    c.status = 413;
    snprintf(c.error, sizeof(c.error), "request body is larger than %llu bytes",
             (unsigned long long)cfg->max_body);
  } else if (r->route == R_GENERATE) {
    vl__gen_parse(r->body, r->len, cfg->max_pixels, cfg->image_token, &c);
  } else {
    vl__chat_parse(r->body, r->len, cfg->max_pixels, &c);
  }
  free(r->body);
  r->body = NULL;

  uint64_t bytes = 0, pixels = 0;
  for (size_t i = 0; i < c.nimages; i++) {
    bytes += c.images[i].bytes;
    pixels += (uint64_t)c.images[i].w * c.images[i].h;
  }
  atomic_fetch_add(&vl__stats.images, c.nimages);
  atomic_fetch_add(&vl__stats.cached_images, c.nimages);
  vl__memory_request(c.nimages);
  atomic_fetch_add(&vl__stats.image_bytes, bytes);
  atomic_fetch_add(&vl__stats.image_pixels, pixels);

  bool capped = c.max_tokens >= 0 && (uint64_t)c.max_tokens < cfg->tokens;
  r->ntok = capped ? (uint64_t)c.max_tokens : cfg->tokens;
  vl__chat_reply_t reply = {r->id,   r->wall_ms / 1000,          cfg->model,
                            r->ntok, capped ? "length" : "stop", vl__chat_prompt_tokens(&c)};
  bool native = r->route == R_GENERATE;
  r->reply = reply;
  r->base_ns =
      r->t_body_ns + cfg->latency_us * 1000 + r->in_flight_at * cfg->latency_per_inflight_us * 1000;
  r->due_ns = r->base_ns;
  uint64_t reply_delay_ns =
      cfg->ttft_us * 1000 + (r->ntok ? (r->ntok - 1) * cfg->itl_us * 1000 : 0);
  const char *error = NULL;

  switch (r->fault) {
  case VL__FAULT_HTTP500:
    set_error(r, 500, "injected fault: http500");
    break;
  case VL__FAULT_HTTP503:
    set_error(r, 503, "injected fault: http503");
    break;
  case VL__FAULT_HTTP429:
    set_error(r, 429, "injected fault: http429");
    break;
  case VL__FAULT_HTTP400:
    set_error(r, 400, "injected fault: http400");
    break;
  case VL__FAULT_HTTP401:
    set_error(r, 401, "injected fault: http401 (invalid API key)");
    break;
  case VL__FAULT_RESET:
    r->plan = PLAN_RESET;
    break;
  case VL__FAULT_STALL:
    r->plan = PLAN_STALL;
    break;
  default:
    r->stream_reply = c.stream;
    if (c.status != 0 && r->fault == VL__FAULT_NONE) {
      set_error(r, (unsigned)c.status, c.error);
      error = c.error;
      r->ntok = 0;
      atomic_fetch_add(&vl__stats.bad_requests, 1);
    } else if (r->fault == VL__FAULT_RESET_AFTER_HEADERS) {
      r->plan = PLAN_RESET_AFTER_HEADERS;
      r->status = 200;
    } else if (r->fault == VL__FAULT_HUGE) {
      plan_huge(r);
    } else if (r->fault == VL__FAULT_SLOWLORIS) {
      r->plan = PLAN_SLOW;
      r->status = 200;
      if (c.stream && native) {
        r->payload = vl__gen_sse_whole(&reply, r->ntok, &r->payload_len);
      } else if (c.stream && vl__chat_sse_render(&reply, c.include_usage, &r->sse) == 0) {
        r->payload = sse_whole(&r->sse, r->ntok, &r->payload_len);
        vl__chat_sse_free(&r->sse);
      } else if (!c.stream) {
        r->payload = native ? vl__gen_completion(&reply, &r->payload_len)
                            : vl__chat_completion(&reply, &r->payload_len);
      }
      if (!r->payload)
        set_error(r, 500, "out of memory");
    } else if (c.stream) {
      r->plan = PLAN_SSE;
      r->status = 200;
      r->truncate_stream = r->fault == VL__FAULT_TRUNCATE;
      r->malformed_stream = r->fault == VL__FAULT_MALFORMED;
      r->tok_limit = r->truncate_stream ? (r->ntok + 1) / 2 : r->ntok;
      if ((native ? vl__gen_sse_render(&reply, &r->sse)
                  : vl__chat_sse_render(&reply, c.include_usage, &r->sse)) != 0)
        set_error(r, 500, "out of memory");
    } else {
      r->plan = r->fault == VL__FAULT_TRUNCATE ? PLAN_TRUNCATED : PLAN_JSON;
      r->status = 200;
      r->due_ns = r->base_ns + reply_delay_ns;
      r->payload = native ? vl__gen_completion(&reply, &r->payload_len)
                          : vl__chat_completion(&reply, &r->payload_len);
      if (!r->payload)
        set_error(r, 500, "out of memory");
      else if (r->fault == VL__FAULT_MALFORMED)
        r->payload_len /= 2; /* the object cut off half way: not JSON */
    }
    break;
  }
  if (r->plan == PLAN_ERROR && !r->payload)
    r->plan = PLAN_RESET; /* out of memory even for the error text */
  if (r->plan == PLAN_RESET || r->plan == PLAN_STALL)
    r->status = 0;
  if (r->plan != PLAN_JSON && r->plan != PLAN_TRUNCATED && r->plan != PLAN_SSE)
    r->ntok = 0;
  if (r->status == 200 && r->fault == VL__FAULT_NONE) {
    atomic_fetch_add(&vl__stats.prompt_tokens, reply.prompt_tokens);
    atomic_fetch_add(&vl__stats.completion_tokens, r->ntok);
  }
  record_chat(r, &c, error);
  vl__chat_req_free(&c);
  r->phase = PH_WAIT;
}

static void work_run(vl__work_item_t *item, bool cancelled) {
  req_t *r = vl_container_of(item, req_t, work);
  if (cancelled) {
    r->plan = PLAN_RESET;
    r->phase = PH_WAIT;
    r->due_ns = 0;
  } else {
    process(r);
  }
  vl__timer_resume_at(&r->timer, r->due_ns);
}

/* ------------------------------------------------------------------ sending a chat reply */

/* The non-streaming truncate fault: MHD announced payload_len bytes; give half, then fail, which
 * makes MHD close the connection. */
static ssize_t truncated_read(void *cls, uint64_t pos, char *buf, size_t max) {
  req_t *r = cls;
  size_t half = r->payload_len / 2;
  if (pos >= half)
    return MHD_CONTENT_READER_END_WITH_ERROR;
  size_t n = VL_MIN(max, half - (size_t)pos);
  memcpy(buf, r->payload + pos, n);
  return (ssize_t)n;
}

/* The reset_after_headers fault: called once the headers are out; ending with an error makes MHD
 * close the connection before any body byte. */
static ssize_t reset_read(void *cls, uint64_t pos, char *buf, size_t max) {
  return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The huge fault: --huge-bytes made as they are asked for, the head (payload), a run of 'x' and
 * the tail, so that the reply costs MHD's send buffer and nothing more. */
static ssize_t huge_read(void *cls, uint64_t pos, char *buf, size_t max) {
  req_t *r = cls;
  const uint64_t total = vl__cfg->huge_bytes;
  const uint64_t head = r->payload_len, fill_end = total - r->huge_tail_len;
  size_t n = 0;
  if (vl__timer_stopping())
    return MHD_CONTENT_READER_END_WITH_ERROR;
  while (n < max && pos < total) {
    size_t k;
    if (pos < head) {
      k = (size_t)VL_MIN(max - n, head - pos);
      memcpy(buf + n, r->payload + pos, k);
    } else if (pos < fill_end) {
      k = (size_t)VL_MIN(max - n, fill_end - pos);
      memset(buf + n, 'x', k);
    } else {
      k = (size_t)VL_MIN(max - n, total - pos);
      memcpy(buf + n, r->huge_tail + (pos - fill_end), k);
    }
    n += k;
    pos += k;
  }
  return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

/* The slowloris fault: byte k of the reply at base + k * VL__SLOWLORIS_NS; between bytes the
 * connection is suspended on the timer, as between the tokens of a stream. */
static ssize_t slow_read(void *cls, uint64_t pos, char *buf, size_t max) {
  req_t *r = cls;
  if (vl__timer_stopping())
    return MHD_CONTENT_READER_END_WITH_ERROR;
  if (pos >= r->payload_len)
    return MHD_CONTENT_READER_END_OF_STREAM;
  uint64_t due = r->base_ns + pos * VL__SLOWLORIS_NS;
  if (due > vl_now_ns())
    return vl__timer_suspend_until(&r->timer, due) ? 0 : MHD_CONTENT_READER_END_WITH_ERROR;
  buf[0] = r->payload[pos];
  return 1;
}

/* When the next event of the stream is due: token k at base + ttft + k * itl; the tail (or the
 * truncated end) together with the last token. */
static uint64_t next_event_ns(const req_t *r) {
  const vl__config_t *cfg = vl__cfg;
  uint64_t k = r->tok_sent < r->tok_limit ? r->tok_sent : r->tok_sent ? r->tok_sent - 1 : 0;
  return r->base_ns + cfg->ttft_us * 1000 + k * cfg->itl_us * 1000;
}

/* Points seg at the next event and advances the stream; sets sse_done after the last. A /generate
 * token event is made here, into r->event, which the previous event no longer needs: seg has been
 * copied out in full before this is called. */
static void next_event(req_t *r) {
  r->seg_off = 0;
  if (r->tok_sent < r->tok_limit) {
    if (r->route == R_GENERATE && !(r->tok_sent == 0 && r->malformed_stream)) {
      r->seg_len = vl__gen_event(&r->reply, r->tok_sent + 1, &r->event, &r->event_cap);
      r->seg = r->event;
      if (r->seg_len == 0) { /* out of memory: the stream ends here, short */
        r->sse_done = true;
        return;
      }
    } else if (r->tok_sent == 0) {
      r->seg = r->malformed_stream ? r->sse.bad : r->sse.first;
      r->seg_len = r->malformed_stream ? r->sse.bad_len : r->sse.first_len;
    } else {
      r->seg = r->sse.token;
      r->seg_len = r->sse.token_len;
    }
    r->tok_sent++;
    return;
  }
  r->sse_done = true;
  if (r->truncate_stream) {
    r->seg_len = 0; /* the stream ends here, without finish_reason or [DONE] */
    return;
  }
  r->seg = r->sse.tail;
  r->seg_len = r->sse.tail_len;
}

/* MHD's content reader for a streamed reply. Copies out due events; when none is due, suspends the
 * connection until the next one and returns 0 (legal with MHD_suspend_connection, which may be
 * called from a content reader). Everything is scheduled on absolute instants from base_ns, so
 * lateness in one token does not shift the next. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
  req_t *r = cls;
  size_t n = 0;
  if (vl__timer_stopping())
    return MHD_CONTENT_READER_END_WITH_ERROR;
  for (;;) {
    if (r->seg_off < r->seg_len) {
      size_t k = VL_MIN(max - n, r->seg_len - r->seg_off);
      memcpy(buf + n, r->seg + r->seg_off, k);
      n += k;
      r->seg_off += k;
      if (r->seg_off < r->seg_len)
        return (ssize_t)n; /* buf is full */
      continue;
    }
    if (r->sse_done) {
      finish(r);
      return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
    }
    uint64_t due = next_event_ns(r);
    if (due > vl_now_ns()) {
      if (n > 0)
        return (ssize_t)n; /* send what we have; the next call waits */
      if (!vl__timer_suspend_until(&r->timer, due))
        return MHD_CONTENT_READER_END_WITH_ERROR;
      return 0;
    }
    next_event(r);
  }
}

static const char *ctype_of(const req_t *r) {
  return r->stream_reply ? "text/event-stream" : "application/json";
}

/* Queues a callback response that reads r, holding a reference for it. */
static enum MHD_Result respond_callback(req_t *r, uint64_t size, MHD_ContentReaderCallback read,
                                        const char *ctype) {
  atomic_fetch_add(&r->refs, 1);
  struct MHD_Response *resp =
      MHD_create_response_from_callback(size, SSE_BLOCK, read, r, req_unref);
  if (!resp) {
    req_unref(r);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  if (r->plan == PLAN_SSE || r->stream_reply)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  enum MHD_Result ret = MHD_queue_response(r->timer.conn, r->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* Holds the connection without answering until the client closes it (checked every
 * VL__STALL_CHECK_NS) or the server stops: the stall faults. */
static enum MHD_Result stall(req_t *r) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(r->timer.conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  r->phase = PH_STALL;
  r->timer.peek_fd = ci ? ci->connect_fd : -1;
  if (r->timer.peek_fd < 0)
    return MHD_NO;
  return vl__timer_suspend_until(&r->timer, vl_now_ns() + VL__STALL_CHECK_NS) ? MHD_YES : MHD_NO;
}

/* Acts on a planned reply: waits on the timer until it is due, then sends it. */
static enum MHD_Result act(req_t *r) {
  if (vl__timer_stopping())
    return MHD_NO;
  if (r->due_ns > vl_now_ns())
    return vl__timer_suspend_until(&r->timer, r->due_ns) ? MHD_YES : MHD_NO;
  enum MHD_Result ret = MHD_NO;
  struct MHD_Connection *c = r->timer.conn;
  switch (r->plan) {
  case PLAN_ERROR:
  case PLAN_JSON:
    ret = respond(c, r->status, r->payload, r->payload_len, true, "application/json",
                  r->status == 429   ? "Retry-After"
                  : r->status == 401 ? "WWW-Authenticate"
                                     : NULL,
                  r->status == 429 ? "1" : "Bearer");
    r->payload = NULL;
    finish(r);
    break;
  case PLAN_TRUNCATED:
    ret = respond_callback(r, r->payload_len, truncated_read, "application/json");
    break;
  case PLAN_SSE:
    ret = respond_callback(r, MHD_SIZE_UNKNOWN, sse_read, "text/event-stream");
    break;
  case PLAN_RESET_AFTER_HEADERS:
    /* A length the body never reaches: plain replies announce one, streams are chunked. */
    ret = respond_callback(r, r->stream_reply ? MHD_SIZE_UNKNOWN : 1024, reset_read, ctype_of(r));
    break;
  case PLAN_HUGE:
    ret = respond_callback(r, vl__cfg->huge_bytes, huge_read, ctype_of(r));
    break;
  case PLAN_SLOW:
    ret = respond_callback(r, r->payload_len, slow_read, ctype_of(r));
    break;
  case PLAN_RESET:
    return MHD_NO;
  case PLAN_STALL:
    return stall(r);
  }
  r->phase = PH_SENT;
  return ret;
}

/* ------------------------------------------------------------------ the other routes */

static void record_flush(const char *route, int64_t in_flight, uint64_t completed, unsigned status,
                         vl__fault_t fault) {
  if (!vl__record_enabled())
    return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "route", route);
  cJSON_AddNumberToObject(o, "t_us", (double)(vl_now_ns() / 1000));
  cJSON_AddNumberToObject(o, "wall_ms", (double)vl_wall_ms());
  cJSON_AddNumberToObject(o, "in_flight", (double)in_flight);
  cJSON_AddNumberToObject(o, "completed_before", (double)completed);
  cJSON_AddNumberToObject(o, "status", status);
  if (fault != VL__FAULT_NONE)
    cJSON_AddStringToObject(o, "fault", vl__fault_names[fault]);
  vl__record_write(o);
  cJSON_Delete(o);
}

/* SGLang's /flush_cache (refused while any model request is in flight) and vLLM's cache resets
 * (always done). Both release the simulated cache memory when they act. A flush fault replaces
 * the call: it neither flushes nor counts as a flush or a refusal. */
static enum MHD_Result cache_reset(req_t *r, const char *route, bool refuse_busy,
                                   atomic_uint_fast64_t *counter) {
  struct MHD_Connection *c = r->timer.conn;
  pthread_mutex_lock(&admit_mu);
  vl__fault_t fault = pick_fault(flush_fault_seq++, true);
  int64_t in_flight = busy_requests;
  uint64_t completed = finished;
  bool refused = fault == VL__FAULT_NONE && refuse_busy && in_flight > 0;
  if (fault != VL__FAULT_NONE) {
    atomic_fetch_add(&vl__stats.faults[fault], 1);
  } else if (refused) {
    atomic_fetch_add(&vl__stats.flush_refused, 1);
  } else {
    atomic_store(&vl__stats.cached_images, 0);
    vl__memory_flush();
    atomic_fetch_add(counter, 1);
  }
  pthread_mutex_unlock(&admit_mu);
  if (fault != VL__FAULT_NONE) {
    static const char f400[] = "Cache not flushed (injected fault: flush400).\n";
    unsigned fstatus = fault == VL__FAULT_FLUSH400 ? 400 : fault == VL__FAULT_FLUSH500 ? 500 : 0;
    record_flush(route, in_flight, completed, fstatus, fault);
    if (fault == VL__FAULT_FLUSH400)
      return respond(c, 400, (char *)f400, sizeof(f400) - 1, false, "text/plain", NULL, NULL);
    if (fault == VL__FAULT_FLUSH500)
      return respond_error(c, 500, "injected fault: flush500", NULL, NULL);
    return stall(r);
  }
  unsigned status = refused ? 400 : 200;
  record_flush(route, in_flight, completed, status, VL__FAULT_NONE);
  if (!refuse_busy)
    return respond(c, status, NULL, 0, false, NULL, NULL, NULL);
  static const char ok[] = "Cache flushed.\nPlease check backend logs for more details. (When "
                           "there are running or waiting requests, the operation will not be "
                           "performed.)\n";
  static const char busy[] = "Cache not flushed. Please check the server status: there are "
                             "running or waiting requests.\n";
  return refused ? respond(c, 400, (char *)busy, sizeof(busy) - 1, false, "text/plain", NULL, NULL)
                 : respond(c, 200, (char *)ok, sizeof(ok) - 1, false, "text/plain", NULL, NULL);
}

static cJSON *memory_usage(const vl__memory_t *mem) {
  const double gib = 1073741824.0;
  cJSON *m = cJSON_CreateObject();
  cJSON_AddNumberToObject(m, "weight", (double)mem->base / gib);
  cJSON_AddNumberToObject(m, "kvcache", (double)(mem->leaked + mem->cached) / gib);
  cJSON_AddNumberToObject(m, "token_capacity", 1000000);
  cJSON_AddNumberToObject(m, "graph", 0);
  cJSON_AddNumberToObject(m, "total_bytes", (double)mem->total);
  return m;
}

static enum MHD_Result serve_other(req_t *r) {
  struct MHD_Connection *c = r->timer.conn;
  size_t len;
  char *s;
  switch (r->route) {
  case R_MODELS: {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(data, m);
    cJSON_AddStringToObject(m, "id", vl__cfg->model);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)(vl_wall_ms() / 1000));
    cJSON_AddStringToObject(m, "owned_by", "vlmmock");
    cJSON_AddStringToObject(m, "root", vl__cfg->model);
    cJSON_AddNumberToObject(m, "max_model_len", 131072);
    return respond_json(c, 200, o);
  }
  case R_HEALTH:
    return respond(c, 200, NULL, 0, false, NULL, NULL, NULL);
  case R_FLUSH:
    return cache_reset(r, "/flush_cache", true, &vl__stats.flushes);
  case R_RESET_PREFIX:
    return cache_reset(r, "/reset_prefix_cache", false, &vl__stats.reset_prefix);
  case R_RESET_MM:
    return cache_reset(r, "/reset_mm_cache", false, &vl__stats.reset_mm);
  case R_SERVER_INFO: {
    vl__memory_t mem;
    vl__memory_read(&mem);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", "vlmmock-" VL_VERSION);
    cJSON_AddStringToObject(o, "model_path", vl__cfg->model);
    cJSON_AddStringToObject(o, "served_model_name", vl__cfg->model);
    cJSON_AddNumberToObject(o, "tp_size", 1);
    cJSON_AddItemToObject(o, "memory_usage", memory_usage(&mem));
    cJSON *states = cJSON_AddArrayToObject(o, "internal_states");
    cJSON *st = cJSON_CreateObject();
    cJSON_AddItemToArray(states, st);
    cJSON_AddItemToObject(st, "memory_usage", memory_usage(&mem));
    cJSON_AddNumberToObject(o, "mock_memory_bytes", (double)mem.total);
    return respond_json(c, 200, o);
  }
  case R_VERSION: {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", "vlmmock-" VL_VERSION);
    return respond_json(c, 200, o);
  }
  case R_METRICS:
    if (!(s = vl__stats_prometheus(&len)))
      return MHD_NO;
    return respond(c, 200, s, len, true, "text/plain; version=0.0.4; charset=utf-8", NULL, NULL);
  case R_STATS:
    if (!(s = vl__stats_json(&len)))
      return MHD_NO;
    return respond(c, 200, s, len, true, "application/json", NULL, NULL);
  case R_BAD_METHOD:
    return respond_error(c, 405, "method not allowed", MHD_HTTP_HEADER_ALLOW, r->allow);
  default:
    return respond_error(c, 404, "not found", NULL, NULL);
  }
}

/* ------------------------------------------------------------------ the access handler */

/* Appends one piece of a chat body; past --max-body the body is dropped and the rest discarded. */
static void append_body(req_t *r, const char *data, size_t n) {
  if (r->too_big)
    return;
  if (r->len + n > vl__cfg->max_body) {
    r->too_big = true;
    free(r->body);
    r->body = NULL;
    r->cap = 0;
    return;
  }
  if (r->len + n > r->cap) {
    size_t cap = VL_MAX(r->len + n, VL_MIN(r->cap * 2, (size_t)vl__cfg->max_body));
    if (r->cap == 0 && r->expect >= r->len + n)
      cap = r->expect;
    char *grown = realloc(r->body, cap);
    if (!grown) { /* treated like a body too large to hold */
      r->too_big = true;
      free(r->body);
      r->body = NULL;
      r->cap = 0;
      return;
    }
    r->body = grown;
    r->cap = cap;
  }
  memcpy(r->body + r->len, data, n);
  r->len += n;
}

/* The body is complete: admit a model request and plan its reply, or serve another route. */
static enum MHD_Result body_complete(req_t *r) {
  if (!is_model(r->route))
    return serve_other(r);
  if (vl__timer_stopping())
    return MHD_NO;
  admit(r);
  if (r->len > INLINE_BODY_MAX && !r->too_big && vl__cfg->decode_threads > 0) {
    r->phase = PH_WORK;
    r->work.run = work_run;
    if (!vl__timer_suspend(&r->timer))
      return MHD_NO;
    if (!vl__work_submit(&r->work)) {
      process(r);
      vl__timer_resume_at(&r->timer, r->due_ns);
    }
    return MHD_YES; /* r now belongs to the pool until it resumes the connection */
  }
  process(r);
  return act(r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
  req_t *r = *con_cls;
  if (!r) {
    if (!(r = calloc(1, sizeof(*r))))
      return MHD_NO;
    atomic_init(&r->refs, 1);
    r->timer.conn = conn;
    r->timer.peek_fd = -1;
    r->route = lookup(url, method, &r->allow);
    *con_cls = r;
    if (is_model(r->route)) {
      const char *cl =
          MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
      uint64_t expect = cl ? strtoull(cl, NULL, 10) : 0;
      if (expect > vl__cfg->max_body) {
        /* Refused before the body is read: MHD then closes the connection after the reply. */
        r->too_big = true;
        admit(r);
        process(r);
        r->phase = PH_SENT;
        if (r->plan != PLAN_ERROR)
          return MHD_NO;
        enum MHD_Result ret = respond(conn, r->status, r->payload, r->payload_len, true,
                                      "application/json", NULL, NULL);
        r->payload = NULL;
        return ret;
      }
      r->expect = (size_t)expect;
    }
    return MHD_YES;
  }
  if (*upload_size > 0) {
    if (is_model(r->route))
      append_body(r, upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  switch (r->phase) {
  case PH_RECV:
    return body_complete(r);
  case PH_WORK:
  case PH_WAIT:
    return act(r);
  case PH_STALL:
    if (atomic_load(&r->timer.peer_gone) || vl__timer_stopping())
      return MHD_NO;
    return vl__timer_suspend_until(&r->timer, vl_now_ns() + VL__STALL_CHECK_NS) ? MHD_YES : MHD_NO;
  case PH_SENT:
    break;
  }
  return MHD_YES;
}

/* ------------------------------------------------------------------ daemon */

static void on_log(void *cls, const char *fmt, va_list ap) {
  if (!listening) {
    vsnprintf(start_error, sizeof(start_error), fmt, ap);
    start_error[strcspn(start_error, "\n")] = '\0';
  } else if (vl__cfg->verbose) {
    fputs("vlmmock: http: ", stderr);
    vfprintf(stderr, fmt, ap);
  }
}

int vl__server_start(void) {
  const vl__config_t *cfg = vl__cfg;
  struct sockaddr_storage sa = cfg->addr;
  if (cfg->ipv6)
    ((struct sockaddr_in6 *)&sa)->sin6_port = htons(cfg->port);
  else
    ((struct sockaddr_in *)&sa)->sin_port = htons(cfg->port);
  /* See mock.c for why: epoll worker threads, and waiting connections suspended rather than
   * holding a thread. */
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                   (cfg->ipv6 ? MHD_USE_IPv6 : 0) | (cfg->tls_cert ? MHD_USE_TLS : 0);
  if (cfg->tls_cert && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    fprintf(stderr, "vlmmock: --tls-cert: this libmicrohttpd was built without TLS\n");
    return VL_EIO;
  }
  /* The logger goes first so that it also hears about the options after it. */
  struct MHD_OptionItem opts[] = {
      {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_log, NULL},
      {MHD_OPTION_SOCK_ADDR, 0, &sa},
      {MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, NULL},
      {MHD_OPTION_LISTEN_BACKLOG_SIZE, VL_MIN(cfg->max_connections, 65535u), NULL},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, 32 * 1024, NULL},
      {MHD_OPTION_CONNECTION_MEMORY_INCREMENT, 4 * 1024, NULL},
      {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL},
      {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, NULL},
      {MHD_OPTION_END, 0, NULL}, /* the optional ones below take these places */
      {MHD_OPTION_END, 0, NULL},
      {MHD_OPTION_END, 0, NULL},
      {MHD_OPTION_END, 0, NULL},
  };
  size_t n = VL_ARRAY_SIZE(opts) - 4;
  if (cfg->tls_cert) {
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, cfg->tls_cert};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, cfg->tls_key};
  }
  if (cfg->threads > 1)
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, cfg->threads, NULL};
  daemon_ = MHD_start_daemon(flags, cfg->port, NULL, NULL, on_request, NULL, MHD_OPTION_ARRAY, opts,
                             MHD_OPTION_END);
  if (!daemon_) {
    fprintf(stderr, "vlmmock: cannot listen on %s%s%s:%u: %s\n", cfg->ipv6 ? "[" : "", cfg->host,
            cfg->ipv6 ? "]" : "", cfg->port,
            start_error[0] ? start_error : "the HTTP library refused to start");
    return VL_EIO;
  }
  listening = true;
  return 0;
}

uint16_t vl__server_port(void) {
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  return di ? di->port : 0;
}

void vl__server_stop(void) {
  if (!daemon_)
    return;
  MHD_socket ls = MHD_quiesce_daemon(daemon_);
  vl__work_stop();
  vl__timer_stop();
  MHD_stop_daemon(daemon_);
  daemon_ = NULL;
  if (ls != MHD_INVALID_SOCKET)
    close(ls);
}
