/* The life of one model request (chat, or SGLang's native /generate; the two differ only in how
 * the body is parsed and the reply rendered), from its first byte to MHD's completion callback, and
 * the admission state that the flush check reads. server.c routes a request here and calls in at
 * each step of its access handler.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INLINE_BODY_MAX (64u * 1024)
#define SSE_BLOCK       (16u * 1024)

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
  vl__request_t *r = p;
  if (atomic_fetch_sub(&r->refs, 1) != 1)
    return;
  free(r->body);
  free(r->payload);
  vl__chat_sse_free(&r->sse);
  free(r->event);
  free(r);
}

vl__request_t *vl__request_new(struct MHD_Connection *conn, vl__route_t route, const char *allow) {
  vl__request_t *r = calloc(1, sizeof(*r));
  if (!r)
    return NULL;
  atomic_init(&r->refs, 1);
  r->timer.conn = conn;
  r->timer.peek_fd = -1;
  r->route = route;
  r->allow = allow;
  return r;
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

static void admit(vl__request_t *r) {
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
  snprintf(r->id, sizeof(r->id), "%s-mock-%llu",
           r->route == VL__ROUTE_GENERATE ? "generate" : "chatcmpl", (unsigned long long)r->seq);
}

/* The reply is produced in full (queued, or ended early): the request no longer keeps a flush
 * away. Idempotent. */
static void finish(vl__request_t *r) {
  if (!r->admitted || r->finished)
    return;
  pthread_mutex_lock(&admit_mu);
  r->finished = true;
  busy_requests--;
  finished++;
  pthread_mutex_unlock(&admit_mu);
}

/* Whether the admitted request r, ended with toe, ended because its client went away: it saw the
 * client's end of the stream while its reply was due (left), or its reply was not sent in full, the
 * server was not stopping, and the reply was not one the mock cuts itself (the reset and truncate
 * faults close or end it on purpose). */
static bool client_gone(const vl__request_t *r, enum MHD_RequestTerminationCode toe) {
  if (r->client_left)
    return true;
  if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK || toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ||
      vl__timer_stopping())
    return false;
  return r->plan != VL__PLAN_RESET && r->plan != VL__PLAN_RESET_AFTER_HEADERS &&
         r->plan != VL__PLAN_TRUNCATED && !r->truncate_stream;
}

/* The record of a request whose client went away: which one, when, and how far its reply had
 * got. It has no "route", so that readers of the requests received do not count it twice. */
static void record_cancel(const vl__request_t *r, enum MHD_RequestTerminationCode toe) {
  if (!vl__record_enabled())
    return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "event", "cancelled");
  cJSON_AddNullToObject(o, "route");
  cJSON_AddNumberToObject(o, "seq", (double)r->seq);
  cJSON_AddNumberToObject(o, "t_us", (double)(vl_now_ns() / 1000));
  cJSON_AddNumberToObject(o, "wall_ms", (double)vl_wall_ms());
  cJSON_AddNumberToObject(o, "since_body_ms", (double)(vl_now_ns() - r->t_body_ns) / 1e6);
  cJSON_AddNumberToObject(o, "tokens_sent", (double)r->tok_sent);
  cJSON_AddNumberToObject(o, "termination", (double)toe);
  cJSON_AddNumberToObject(o, "leaked_kb", vl__cfg->cancel_leak_kb);
  vl__record_write(o);
  cJSON_Delete(o);
}

void vl__request_end(vl__request_t *r, enum MHD_RequestTerminationCode toe) {
  finish(r);
  if (r->kv_held)
    atomic_fetch_sub(&vl__llama.kv_tokens, r->kv_held);
  if (r->admitted) {
    pthread_mutex_lock(&admit_mu);
    atomic_fetch_sub(&vl__stats.in_flight, 1);
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
      atomic_fetch_add(&vl__stats.completed, 1);
    pthread_mutex_unlock(&admit_mu);
    if (client_gone(r, toe)) {
      atomic_fetch_add(&vl__stats.cancelled, 1);
      vl__memory_cancel();
      record_cancel(r, toe);
    }
  }
  req_unref(r);
}

bool vl__request_busy(void) {
  pthread_mutex_lock(&admit_mu);
  bool busy = busy_requests > 0;
  pthread_mutex_unlock(&admit_mu);
  return busy;
}

void vl__request_flush(bool refuse_busy, atomic_uint_fast64_t *counter, vl__flush_check_t *out) {
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
  out->fault = fault;
  out->in_flight = in_flight;
  out->completed = completed;
  out->refused = refused;
}

/* ------------------------------------------------------------------ planning a chat reply */

static void record_chat(const vl__request_t *r, const vl__chat_req_t *c, const char *error) {
  if (!vl__record_enabled())
    return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "seq", (double)r->seq);
  cJSON_AddStringToObject(o, "route",
                          r->route == VL__ROUTE_GENERATE ? "/generate" : "/v1/chat/completions");
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
  if (r->route == VL__ROUTE_GENERATE) {
    cJSON_AddNumberToObject(o, "placeholders", c->placeholders);
  } else {
    cJSON_AddNumberToObject(o, "messages", c->messages);
    cJSON_AddNumberToObject(o, "text_parts", c->text_parts);
    /* Conversations: the roles in order and the assistant messages' contents received, and the
     * content this reply sends (a whole reply, no fault), which a later turn must carry back. */
    cJSON_AddItemToObject(o, "roles",
                          c->roles ? cJSON_Duplicate(c->roles, 1) : cJSON_CreateArray());
    cJSON_AddItemToObject(o, "assistant",
                          c->assistant ? cJSON_Duplicate(c->assistant, 1) : cJSON_CreateArray());
    char *reply = r->status == 200 && r->fault == VL__FAULT_NONE &&
                          (r->plan == VL__PLAN_JSON || r->plan == VL__PLAN_SSE)
                      ? vl__chat_content(&r->reply)
                      : NULL;
    if (reply)
      cJSON_AddStringToObject(o, "reply", reply);
    else
      cJSON_AddNullToObject(o, "reply");
    free(reply);
  }
  cJSON_AddNumberToObject(o, "prompt_chars", (double)c->prompt_chars);
  cJSON_AddNumberToObject(o, "text_tokens", (double)c->text_tokens);
  cJSON_AddItemToObject(o, "extra", c->extra ? cJSON_Duplicate(c->extra, 1) : cJSON_CreateObject());
  if (r->route == VL__ROUTE_GENERATE)
    cJSON_AddItemToObject(o, "sampling_extra",
                          c->sampling_extra ? cJSON_Duplicate(c->sampling_extra, 1)
                                            : cJSON_CreateObject());
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
  /* The text's hashes, which tell prompts sharing a prefix (trace replay, issue 16). */
  char ph[17];
  snprintf(ph, sizeof(ph), "%016llx", (unsigned long long)c->prompt_hash);
  cJSON_AddStringToObject(o, "prompt_hash", ph);
  snprintf(ph, sizeof(ph), "%016llx", (unsigned long long)c->prompt_head);
  cJSON_AddStringToObject(o, "prompt_head", ph);
  cJSON_AddNumberToObject(o, "tokens", (double)r->ntok);
  /* llama.cpp's per-request switch, and what the llamacpp profile's prompt cache and timings
   * made of the request. */
  if (c->cache_prompt >= 0)
    cJSON_AddBoolToObject(o, "cache_prompt", c->cache_prompt);
  else
    cJSON_AddNullToObject(o, "cache_prompt");
  if (r->reply.timings) {
    cJSON_AddStringToObject(o, "prompt_cache", vl__llama_cache_name(r->cache_use));
    cJSON *t = cJSON_AddObjectToObject(o, "timings");
    cJSON_AddNumberToObject(t, "prompt_ms", r->timings.prompt_ms);
    cJSON_AddNumberToObject(t, "predicted_ms", r->timings.predicted_ms);
    cJSON_AddNumberToObject(t, "prompt_n", (double)r->timings.prompt_n);
    cJSON_AddNumberToObject(t, "predicted_n", (double)r->timings.predicted_n);
    cJSON_AddNumberToObject(t, "cache_n", (double)r->timings.cache_n);
  }
  cJSON_AddNumberToObject(o, "status", r->status);
  if (r->fault != VL__FAULT_NONE)
    cJSON_AddStringToObject(o, "fault", vl__fault_names[r->fault]);
  if (error)
    cJSON_AddStringToObject(o, "error", error);
  vl__record_write(o);
  cJSON_Delete(o);
}

/* --max-running n: n places, each free from free_at[k] on (CLOCK_MONOTONIC ns). A request whose
 * body arrived at t takes the place that frees first, holds it for hold_ns from when it gets it,
 * and is told how long it waits for it: a first-come first-served queue of n servers, computed
 * as each request arrives. */
static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *free_at;

static uint64_t queue_wait(unsigned n, uint64_t t, uint64_t hold_ns) {
  pthread_mutex_lock(&queue_mu);
  if (!free_at)
    free_at = vl_xcalloc(n, sizeof(*free_at));
  unsigned k = 0;
  for (unsigned i = 1; i < n; i++)
    if (free_at[i] < free_at[k])
      k = i;
  uint64_t start = free_at[k] > t ? free_at[k] : t;
  free_at[k] = start + hold_ns;
  pthread_mutex_unlock(&queue_mu);
  return start - t;
}

static void set_error(vl__request_t *r, unsigned status, const char *msg) {
  r->plan = VL__PLAN_ERROR;
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
static void plan_huge(vl__request_t *r) {
  static const char plain_tail[] = "\"},\"finish_reason\":\"stop\"}]}";
  static const char sse_tail[] = "\"}}]}\n\ndata: [DONE]\n\n";
  static const char gen_tail[] = "\",\"meta_info\":{\"finish_reason\":null}}";
  static const char gen_sse_tail[] =
      "\",\"meta_info\":{\"finish_reason\":null}}\n\ndata: [DONE]\n\n";
  char head[256];
  if (r->route == VL__ROUTE_GENERATE) {
    r->plan = VL__PLAN_HUGE;
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
  r->plan = VL__PLAN_HUGE;
  r->status = 200;
  r->payload = vl_xstrdup(head);
  r->payload_len = (size_t)n;
  r->huge_tail = r->stream_reply ? sse_tail : plain_tail;
  r->huge_tail_len = r->stream_reply ? sizeof(sse_tail) - 1 : sizeof(plain_tail) - 1;
}

/* Parses the admitted request and plans its reply: what to send and when. Runs on an HTTP thread
 * or a decode thread; either way nobody else touches r meanwhile. */
static void process(vl__request_t *r) {
  const vl__config_t *cfg = vl__cfg;
  vl__chat_req_t c;
  memset(&c, 0, sizeof(c));
  c.max_tokens = -1;
  if (r->too_big) {
    c.status = 413;
    snprintf(c.error, sizeof(c.error), "request body is larger than %llu bytes",
             (unsigned long long)cfg->max_body);
  } else if (r->route == VL__ROUTE_GENERATE) {
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

  /* ignore_eos (top level, or native sampling_params): the model does not stop by itself, so the
   * reply runs to the limit, as a real server's does. */
  bool forced = c.max_tokens >= 0 &&
                (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c.extra, "ignore_eos")) ||
                 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c.sampling_extra, "ignore_eos")));
  bool capped = c.max_tokens >= 0 && ((uint64_t)c.max_tokens < cfg->tokens || forced);
  r->ntok = capped ? (uint64_t)c.max_tokens : cfg->tokens;
  vl__chat_reply_t reply = {r->id,   r->wall_ms / 1000,          cfg->model,
                            r->ntok, capped ? "length" : "stop", vl__chat_prompt_tokens(&c),
                            NULL};
  bool native = r->route == VL__ROUTE_GENERATE;
  r->reply = reply;
  r->base_ns =
      r->t_body_ns + cfg->latency_us * 1000 + r->in_flight_at * cfg->latency_per_inflight_us * 1000;
  r->due_ns = r->base_ns;
  uint64_t reply_delay_ns =
      cfg->ttft_us * 1000 + (r->ntok ? (r->ntok - 1) * cfg->itl_us * 1000 : 0);
  /* llama-server's timings: the prompt until the first token, the rest of the reply; a wait for
   * a place (--max-running) is in neither, as a slot's wait is not in llama-server's. */
  if (cfg->profile == VL__PROFILE_LLAMACPP && !native) {
    uint64_t key = c.prompt_hash;
    for (size_t i = 0; i < c.nimages; i++)
      key = vl__image_fnv1a(key, (const uint8_t *)&c.images[i].hash, sizeof(c.images[i].hash));
    r->cache_use = c.status == 0 && r->fault == VL__FAULT_NONE
                       ? vl__llama_prompt(key, c.cache_prompt != 0)
                       : VL__LLAMA_CACHE_OFF;
    uint64_t cache_n =
        r->cache_use == VL__LLAMA_CACHE_HIT && reply.prompt_tokens ? reply.prompt_tokens - 1 : 0;
    r->timings = (vl__timings_t){
        .prompt_ms = (double)(r->base_ns - r->t_body_ns + cfg->ttft_us * 1000) / 1e6,
        .predicted_ms = (double)(reply_delay_ns - cfg->ttft_us * 1000) / 1e6,
        .prompt_n = reply.prompt_tokens - cache_n,
        .predicted_n = r->ntok,
        .cache_n = cache_n,
    };
    reply.timings = r->reply.timings = &r->timings;
  }
  if (cfg->max_running) {
    r->base_ns +=
        queue_wait(cfg->max_running, r->t_body_ns, r->base_ns - r->t_body_ns + reply_delay_ns);
    r->due_ns = r->base_ns;
  }
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
    r->plan = VL__PLAN_RESET;
    break;
  case VL__FAULT_STALL:
    r->plan = VL__PLAN_STALL;
    break;
  default:
    r->stream_reply = c.stream;
    if (c.status != 0 && r->fault == VL__FAULT_NONE) {
      set_error(r, (unsigned)c.status, c.error);
      error = c.error;
      r->ntok = 0;
      atomic_fetch_add(&vl__stats.bad_requests, 1);
    } else if (r->fault == VL__FAULT_RESET_AFTER_HEADERS) {
      r->plan = VL__PLAN_RESET_AFTER_HEADERS;
      r->status = 200;
    } else if (r->fault == VL__FAULT_HUGE) {
      plan_huge(r);
    } else if (r->fault == VL__FAULT_SLOWLORIS) {
      r->plan = VL__PLAN_SLOW;
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
      r->plan = VL__PLAN_SSE;
      r->status = 200;
      r->truncate_stream = r->fault == VL__FAULT_TRUNCATE;
      r->malformed_stream = r->fault == VL__FAULT_MALFORMED;
      r->tok_limit = r->truncate_stream ? (r->ntok + 1) / 2 : r->ntok;
      if ((native ? vl__gen_sse_render(&reply, &r->sse)
                  : vl__chat_sse_render(&reply, c.include_usage, &r->sse)) != 0)
        set_error(r, 500, "out of memory");
    } else {
      r->plan = r->fault == VL__FAULT_TRUNCATE ? VL__PLAN_TRUNCATED : VL__PLAN_JSON;
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
  if (r->plan == VL__PLAN_ERROR && !r->payload)
    r->plan = VL__PLAN_RESET; /* out of memory even for the error text */
  if (r->plan == VL__PLAN_RESET || r->plan == VL__PLAN_STALL)
    r->status = 0;
  if (r->plan != VL__PLAN_JSON && r->plan != VL__PLAN_TRUNCATED && r->plan != VL__PLAN_SSE)
    r->ntok = 0;
  if (r->status == 200 && r->fault == VL__FAULT_NONE) {
    atomic_fetch_add(&vl__stats.prompt_tokens, reply.prompt_tokens);
    atomic_fetch_add(&vl__stats.completion_tokens, r->ntok);
    if (reply.timings) {
      atomic_fetch_add(&vl__llama.prompt_us, (uint64_t)(r->timings.prompt_ms * 1e3));
      atomic_fetch_add(&vl__llama.predicted_us, (uint64_t)(r->timings.predicted_ms * 1e3));
      atomic_fetch_add(&vl__llama.decodes, 1 + (r->ntok > 1 ? r->ntok - 1 : 0));
      r->kv_held = (int64_t)(reply.prompt_tokens + r->ntok);
      atomic_fetch_add(&vl__llama.kv_tokens, r->kv_held);
    }
    vl__cache_request(&c, reply.prompt_tokens);
  }
  record_chat(r, &c, error);
  vl__chat_req_free(&c);
  r->phase = VL__PHASE_WAIT;
}

static void work_run(vl__work_item_t *item, bool cancelled) {
  vl__request_t *r = vl_container_of(item, vl__request_t, work);
  if (cancelled) {
    r->plan = VL__PLAN_RESET;
    r->phase = VL__PHASE_WAIT;
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
  vl__request_t *r = cls;
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
  vl__request_t *r = cls;
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
  vl__request_t *r = cls;
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
static uint64_t next_event_ns(const vl__request_t *r) {
  const vl__config_t *cfg = vl__cfg;
  uint64_t k = r->tok_sent < r->tok_limit ? r->tok_sent : r->tok_sent ? r->tok_sent - 1 : 0;
  return r->base_ns + cfg->ttft_us * 1000 + k * cfg->itl_us * 1000;
}

/* Points seg at the next event and advances the stream; sets sse_done after the last. A /generate
 * token event is made here, into r->event, which the previous event no longer needs: seg has been
 * copied out in full before this is called. */
static void next_event(vl__request_t *r) {
  r->seg_off = 0;
  if (r->tok_sent < r->tok_limit) {
    if (r->route == VL__ROUTE_GENERATE && !(r->tok_sent == 0 && r->malformed_stream)) {
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
/* Whether the client closed r's connection (its end of the stream is waiting unread): a write
 * into such a socket still succeeds, so a reply due after the client left would otherwise count
 * as sent in full. Sets r->client_left. */
static bool left(vl__request_t *r) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(r->timer.conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!ci || vl__timer_peer_alive(ci->connect_fd))
    return false;
  r->client_left = true;
  return true;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
  vl__request_t *r = cls;
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
      r->waited = true;
      return 0;
    }
    /* Back from a wait: a client that closed meanwhile gets no more tokens. */
    if (r->waited && left(r))
      return MHD_CONTENT_READER_END_WITH_ERROR;
    r->waited = false;
    next_event(r);
  }
}

static const char *ctype_of(const vl__request_t *r) {
  return r->stream_reply ? "text/event-stream" : "application/json";
}

/* Queues a callback response that reads r, holding a reference for it. */
static enum MHD_Result respond_callback(vl__request_t *r, uint64_t size,
                                        MHD_ContentReaderCallback read, const char *ctype) {
  atomic_fetch_add(&r->refs, 1);
  struct MHD_Response *resp =
      MHD_create_response_from_callback(size, SSE_BLOCK, read, r, req_unref);
  if (!resp) {
    req_unref(r);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  if (r->plan == VL__PLAN_SSE || r->stream_reply)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  enum MHD_Result ret = MHD_queue_response(r->timer.conn, r->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* Holds the connection without answering until the client closes it (checked every
 * VL__STALL_CHECK_NS) or the server stops: the stall faults (a model request's or a flush's). */
enum MHD_Result vl__request_stall(vl__request_t *r) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(r->timer.conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  r->phase = VL__PHASE_STALL;
  r->timer.peek_fd = ci ? ci->connect_fd : -1;
  if (r->timer.peek_fd < 0)
    return MHD_NO;
  return vl__timer_suspend_until(&r->timer, vl_now_ns() + VL__STALL_CHECK_NS) ? MHD_YES : MHD_NO;
}

/* Acts on a planned reply: waits on the timer until it is due, then sends it. */
enum MHD_Result vl__request_act(vl__request_t *r) {
  if (vl__timer_stopping())
    return MHD_NO;
  if (r->due_ns > vl_now_ns())
    return vl__timer_suspend_until(&r->timer, r->due_ns) ? MHD_YES : MHD_NO;
  if (left(r))
    return MHD_NO; /* nobody to answer: MHD closes the connection */
  enum MHD_Result ret = MHD_NO;
  struct MHD_Connection *c = r->timer.conn;
  switch (r->plan) {
  case VL__PLAN_ERROR:
  case VL__PLAN_JSON:
    ret = vl__server_respond(c, r->status, r->payload, r->payload_len, true, "application/json",
                             r->status == 429   ? "Retry-After"
                             : r->status == 401 ? "WWW-Authenticate"
                                                : NULL,
                             r->status == 429 ? "1" : "Bearer");
    r->payload = NULL;
    finish(r);
    break;
  case VL__PLAN_TRUNCATED:
    ret = respond_callback(r, r->payload_len, truncated_read, "application/json");
    break;
  case VL__PLAN_SSE:
    ret = respond_callback(r, MHD_SIZE_UNKNOWN, sse_read, "text/event-stream");
    break;
  case VL__PLAN_RESET_AFTER_HEADERS:
    /* A length the body never reaches: plain replies announce one, streams are chunked. */
    ret = respond_callback(r, r->stream_reply ? MHD_SIZE_UNKNOWN : 1024, reset_read, ctype_of(r));
    break;
  case VL__PLAN_HUGE:
    ret = respond_callback(r, vl__cfg->huge_bytes, huge_read, ctype_of(r));
    break;
  case VL__PLAN_SLOW:
    ret = respond_callback(r, r->payload_len, slow_read, ctype_of(r));
    break;
  case VL__PLAN_RESET:
    return MHD_NO;
  case VL__PLAN_STALL:
    return vl__request_stall(r);
  }
  r->phase = VL__PHASE_SENT;
  return ret;
}

/* ------------------------------------------------------------------ the body, and admission */

/* Appends one piece of a chat body; past --max-body the body is dropped and the rest discarded. */
void vl__request_append(vl__request_t *r, const char *data, size_t n) {
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

enum MHD_Result vl__request_begin(vl__request_t *r) {
  if (vl__timer_stopping())
    return MHD_NO;
  admit(r);
  if (r->len > INLINE_BODY_MAX && !r->too_big && vl__cfg->decode_threads > 0) {
    r->phase = VL__PHASE_WORK;
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
  return vl__request_act(r);
}

enum MHD_Result vl__request_refuse(vl__request_t *r) {
  r->too_big = true;
  admit(r);
  process(r);
  r->phase = VL__PHASE_SENT;
  if (r->plan != VL__PLAN_ERROR)
    return MHD_NO;
  enum MHD_Result ret = vl__server_respond(r->timer.conn, r->status, r->payload, r->payload_len,
                                           true, "application/json", NULL, NULL);
  r->payload = NULL;
  return ret;
}
