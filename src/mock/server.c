/* The HTTP side: the route table, MHD's callbacks (the access handler, request completion,
 * connection notices), the routes that do not run the model (the model list, health, SGLang's
 * /flush_cache and /get_server_info, vLLM's cache resets and /version, /metrics, /mock/stats), and
 * the daemon's start and stop. The access handler routes each request and, for a model request
 * (chat, or SGLang's native /generate), calls request.c at each step of its life: body pieces,
 * body complete, a planned reply due, completion. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define M_GET   1u
#define M_POST  2u
#define P_SGL   (1u << VL__PROFILE_SGLANG)
#define P_VLLM  (1u << VL__PROFILE_VLLM)
#define P_LLAMA (1u << VL__PROFILE_LLAMACPP)
#define P_ALL   ((1u << VL__PROFILE__COUNT) - 1)

/* clang-format off */
static const struct {
  const char *path;
  vl__route_t route;
  unsigned methods, profiles;
  const char *allow;
} routes[] = {
    {"/v1/chat/completions", VL__ROUTE_CHAT,         M_POST,         P_ALL,  "POST"},
    {"/generate",            VL__ROUTE_GENERATE,     M_POST,         P_SGL,  "POST"},
    {"/v1/models",           VL__ROUTE_MODELS,       M_GET,          P_ALL,  "GET"},
    {"/health",              VL__ROUTE_HEALTH,       M_GET,          P_ALL,  "GET"},
    {"/health_generate",     VL__ROUTE_HEALTH,       M_GET,          P_ALL,  "GET"},
    {"/flush_cache",         VL__ROUTE_FLUSH,        M_GET | M_POST, P_SGL,  "GET, POST"},
    {"/get_server_info",     VL__ROUTE_SERVER_INFO,  M_GET,          P_SGL,  "GET"},
    {"/reset_prefix_cache",  VL__ROUTE_RESET_PREFIX, M_POST,         P_VLLM, "POST"},
    {"/reset_mm_cache",      VL__ROUTE_RESET_MM,     M_POST,         P_VLLM, "POST"},
    {"/reset_encoder_cache", VL__ROUTE_RESET_ENCODER, M_POST,        P_VLLM, "POST"},
    {"/version",             VL__ROUTE_VERSION,      M_GET,          P_VLLM, "GET"},
    {"/metrics",             VL__ROUTE_METRICS,      M_GET,          P_ALL,  "GET"},
    {"/mock/stats",          VL__ROUTE_STATS,        M_GET,          P_ALL,  "GET"},
    {"/tokenize",            VL__ROUTE_TOKENIZE,     M_POST,         P_ALL,  "POST"},
    {"/props",               VL__ROUTE_PROPS,        M_GET,          P_LLAMA, "GET"},
    {"/slots",               VL__ROUTE_SLOTS,        M_GET,          P_LLAMA, "GET"},
    {"/start_profile",       VL__ROUTE_START_PROFILE, M_GET | M_POST, P_SGL | P_VLLM, "GET, POST"},
    {"/stop_profile",        VL__ROUTE_STOP_PROFILE,  M_GET | M_POST, P_SGL | P_VLLM, "GET, POST"},
};
/* clang-format on */

/* How often a flush waiting for idle (?timeout=S) looks again. */
#define FLUSH_POLL_NS 2000000ull

static struct MHD_Daemon *daemon_;
/* A flush with ?timeout is waiting for idle: another flush is refused meanwhile. */
static atomic_bool flush_waiting_any;
static atomic_bool listening;
static char start_error[256];

/* ------------------------------------------------------------------ helpers */

/* The routes that run the model: admitted, timed, faulted and recorded alike. */
static bool is_model(vl__route_t route) {
  return route == VL__ROUTE_CHAT || route == VL__ROUTE_GENERATE;
}

static vl__route_t lookup(const char *url, const char *method, const char **allow) {
  unsigned m = 0;
  if (strcmp(method, "POST") == 0)
    m = M_POST;
  else if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
    m = M_GET;
  for (size_t i = 0; i < VL_ARRAY_SIZE(routes); i++) {
    if (!(routes[i].profiles & (1u << vl__cfg->profile)) || strcmp(url, routes[i].path) != 0)
      continue;
    *allow = routes[i].allow;
    return (routes[i].methods & m) ? routes[i].route : VL__ROUTE_BAD_METHOD;
  }
  return VL__ROUTE_NOT_FOUND;
}

enum MHD_Result vl__server_respond(struct MHD_Connection *c, unsigned status, char *body,
                                   size_t len, bool owned, const char *ctype, const char *hname,
                                   const char *hval) {
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
  return vl__server_respond(c, status, s, strlen(s), true, "application/json", NULL, NULL);
}

static enum MHD_Result respond_error(struct MHD_Connection *c, unsigned status, const char *msg,
                                     const char *hname, const char *hval) {
  size_t len;
  char *s = vl__chat_error((int)status, msg, &len);
  if (!s)
    return MHD_NO;
  return vl__server_respond(c, status, s, len, true, "application/json", hname, hval);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  vl__request_t *r = *con_cls;
  if (!r)
    return;
  *con_cls = NULL;
  if (r->flush_waiting) /* the client left, or the server stops, while it waited */
    atomic_store(&flush_waiting_any, false);
  vl__request_end(r, toe);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  atomic_fetch_add(&vl__stats.connections, code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
}

/* ------------------------------------------------------------------ the other routes */

/* A flush's wait for idle, for its record: the ?timeout it was given (negative: none), how long it
 * waited, and whether it was refused because another flush was waiting. */
typedef struct {
  double timeout_s, waited_ms;
  bool concurrent;
} flush_wait_t;

static const flush_wait_t no_wait = {-1, 0, false};

static void record_flush(const char *route, int64_t in_flight, uint64_t completed, unsigned status,
                         vl__fault_t fault, const flush_wait_t *w) {
  if (!vl__record_enabled())
    return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "route", route);
  cJSON_AddNumberToObject(o, "t_us", (double)(vl_now_ns() / 1000));
  cJSON_AddNumberToObject(o, "wall_ms", (double)vl_wall_ms());
  cJSON_AddNumberToObject(o, "in_flight", (double)in_flight);
  cJSON_AddNumberToObject(o, "completed_before", (double)completed);
  cJSON_AddNumberToObject(o, "status", status);
  if (w->timeout_s >= 0) {
    cJSON_AddNumberToObject(o, "timeout_s", w->timeout_s);
    cJSON_AddNumberToObject(o, "waited_ms", w->waited_ms);
  }
  if (w->concurrent)
    cJSON_AddBoolToObject(o, "concurrent", true);
  if (fault != VL__FAULT_NONE)
    cJSON_AddStringToObject(o, "fault", vl__fault_names[fault]);
  vl__record_write(o);
  cJSON_Delete(o);
}

/* SGLang's /flush_cache (refused while any model request is in flight) and vLLM's cache resets
 * (always done). Both release the simulated cache memory when they act. A flush fault replaces
 * the call: it neither flushes nor counts as a flush or a refusal. */
static enum MHD_Result cache_reset(vl__request_t *r, const char *route, bool refuse_busy,
                                   atomic_uint_fast64_t *counter, const flush_wait_t *w) {
  struct MHD_Connection *c = r->timer.conn;
  vl__flush_check_t chk;
  vl__request_flush(refuse_busy, counter, &chk);
  vl__fault_t fault = chk.fault;
  int64_t in_flight = chk.in_flight;
  uint64_t completed = chk.completed;
  bool refused = chk.refused;
  if (fault != VL__FAULT_NONE) {
    static const char f400[] = "Cache not flushed (injected fault: flush400).\n";
    unsigned fstatus = fault == VL__FAULT_FLUSH400 ? 400 : fault == VL__FAULT_FLUSH500 ? 500 : 0;
    record_flush(route, in_flight, completed, fstatus, fault, w);
    if (fault == VL__FAULT_FLUSH400)
      return vl__server_respond(c, 400, (char *)f400, sizeof(f400) - 1, false, "text/plain", NULL,
                                NULL);
    if (fault == VL__FAULT_FLUSH500)
      return respond_error(c, 500, "injected fault: flush500", NULL, NULL);
    return vl__request_stall(r);
  }
  unsigned status = refused ? 400 : 200;
  if (!refused) {
    /* What each route empties of the caches the counters see (cache.c): SGLang's flush and vLLM's
     * prefix reset the prefix cache, vLLM's multimodal reset its processor cache; SGLang's flush
     * leaves the multimodal embeddings, as SGLang's does. */
    if (r->route == VL__ROUTE_FLUSH || r->route == VL__ROUTE_RESET_PREFIX)
      vl__cache_reset_prefix();
    else if (r->route == VL__ROUTE_RESET_MM)
      vl__cache_reset_mm();
  }
  record_flush(route, in_flight, completed, status, VL__FAULT_NONE, w);
  if (!refuse_busy)
    return vl__server_respond(c, status, NULL, 0, false, NULL, NULL, NULL);
  static const char ok[] = "Cache flushed.\nPlease check backend logs for more details. (When "
                           "there are running or waiting requests, the operation will not be "
                           "performed.)\n";
  static const char busy[] = "Cache not flushed. Please check the server status: there are "
                             "running or waiting requests.\n";
  return refused ? vl__server_respond(c, 400, (char *)busy, sizeof(busy) - 1, false, "text/plain",
                                      NULL, NULL)
                 : vl__server_respond(c, 200, (char *)ok, sizeof(ok) - 1, false, "text/plain", NULL,
                                      NULL);
}

/* SGLang's /flush_cache. With ?timeout=S (seconds, > 0) it waits, the connection suspended and
 * looking again every FLUSH_POLL_NS, until no model request is busy or S has passed, then flushes
 * as without it (400 when still busy); one such flush waits at a time, and any flush that comes
 * meanwhile is refused (400) with a message. Called again by the access handler at each wake-up. */
static enum MHD_Result flush_cache(vl__request_t *r) {
  struct MHD_Connection *c = r->timer.conn;
  flush_wait_t w = no_wait;
  if (!r->flush_waiting) {
    const char *arg = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "timeout");
    char *end = NULL;
    double t = arg ? strtod(arg, &end) : 0;
    if (arg && (end == arg || *end || !(t >= 0) || t > 86400))
      return respond_error(c, 400, "timeout must be a number of seconds", NULL, NULL);
    bool expected = false;
    if (atomic_load(&flush_waiting_any) ||
        (t > 0 && !atomic_compare_exchange_strong(&flush_waiting_any, &expected, true))) {
      static const char other[] = "Cache not flushed: another flush is waiting for the server "
                                  "to be idle.\n";
      w.timeout_s = arg ? t : -1;
      w.concurrent = true;
      atomic_fetch_add(&vl__stats.flush_refused, 1);
      record_flush("/flush_cache", 0, 0, 400, VL__FAULT_NONE, &w);
      return vl__server_respond(c, 400, (char *)other, sizeof(other) - 1, false, "text/plain", NULL,
                                NULL);
    }
    if (arg && t == 0)
      w.timeout_s = 0;
    if (t > 0) {
      r->flush_waiting = true;
      r->flush_timeout_s = t;
      r->flush_t0_ns = vl_now_ns();
      r->flush_due_ns = r->flush_t0_ns + (uint64_t)(t * 1e9);
    }
  }
  if (r->flush_waiting) {
    uint64_t now = vl_now_ns();
    if (vl__request_busy() && now < r->flush_due_ns) {
      if (vl__timer_suspend_until(&r->timer, VL_MIN(now + FLUSH_POLL_NS, r->flush_due_ns)))
        return MHD_YES;
      r->flush_waiting = false;
      atomic_store(&flush_waiting_any, false);
      return MHD_NO; /* shutting down */
    }
    r->flush_waiting = false;
    atomic_store(&flush_waiting_any, false);
    w.timeout_s = r->flush_timeout_s;
    w.waited_ms = (double)(now - r->flush_t0_ns) / 1e6;
  }
  return cache_reset(r, "/flush_cache", true, &vl__stats.flushes, &w);
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

/* POST /tokenize as SGLang and vLLM serve it: {"model", "prompt"} to {"count", "tokens",
 * "max_model_len"}, by the mock's tokenizer (tokenizer.h); no special tokens are added. The
 * llamacpp profile serves llama-server's: {"content"} to {"tokens"}, and, as llama-server does,
 * an empty list for a body without "content". */
static enum MHD_Result tokenize(vl__request_t *r) {
  struct MHD_Connection *c = r->timer.conn;
  if (r->too_big)
    return respond_error(c, 413, "request body too large", NULL, NULL);
  int llama = vl__cfg->profile == VL__PROFILE_LLAMACPP;
  cJSON *root = r->body ? cJSON_ParseWithLength(r->body, r->len) : NULL;
  const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(root, llama ? "content" : "prompt");
  if ((!llama || prompt) && !cJSON_IsString(prompt)) {
    cJSON_Delete(root);
    return respond_error(
        c, 400, llama ? "'content' must be a string" : "'prompt' is required and must be a string",
        NULL, NULL);
  }
  const char *s = prompt ? prompt->valuestring : "";
  uint64_t n = vl__tok_count(s, strlen(s), NULL, 0);
  uint32_t *ids = calloc(n ? n : 1, sizeof(uint32_t));
  if (!ids) {
    cJSON_Delete(root);
    return MHD_NO;
  }
  vl__tok_count(s, strlen(s), ids, n);
  cJSON_Delete(root);
  cJSON *o = cJSON_CreateObject();
  if (!llama)
    cJSON_AddNumberToObject(o, "count", (double)n);
  cJSON *list = cJSON_AddArrayToObject(o, "tokens");
  for (uint64_t i = 0; i < n; i++)
    cJSON_AddItemToArray(list, cJSON_CreateNumber(ids[i]));
  free(ids);
  if (!llama)
    cJSON_AddNumberToObject(o, "max_model_len", 131072);
  atomic_fetch_add(&vl__stats.tokenize_calls, 1);
  return respond_json(c, 200, o);
}

/* SGLang's and vLLM's profiling routes: /start_profile (SGLang's body may name the activities,
 * {"activities": ["MEM"]} for a CUDA memory snapshot; vLLM's takes none) and /stop_profile. Both
 * answer 200 and are recorded: the route, when, the model requests completed before, and the
 * activities the body named (null: no body, or none named). A body that is not JSON is a 400, as
 * SGLang's request model refuses it. */
static enum MHD_Result profile_call(vl__request_t *r, bool start) {
  struct MHD_Connection *c = r->timer.conn;
  const char *route = start ? "/start_profile" : "/stop_profile";
  cJSON *root = NULL, *acts = NULL;
  unsigned status = 200;
  if (r->too_big)
    return respond_error(c, 413, "request body too large", NULL, NULL);
  if (start && r->body && r->len > 0) {
    root = cJSON_ParseWithLength(r->body, r->len);
    if (!cJSON_IsObject(root))
      status = 400;
    else
      acts = cJSON_GetObjectItemCaseSensitive(root, "activities");
  }
  if (vl__record_enabled()) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "route", route);
    cJSON_AddNumberToObject(o, "t_us", (double)(vl_now_ns() / 1000));
    cJSON_AddNumberToObject(o, "wall_ms", (double)vl_wall_ms());
    cJSON_AddNumberToObject(o, "completed_before", (double)atomic_load(&vl__stats.completed));
    cJSON_AddNumberToObject(o, "requests_before", (double)atomic_load(&vl__stats.requests));
    cJSON_AddItemToObject(o, "activities",
                          cJSON_IsArray(acts) ? cJSON_Duplicate(acts, 1) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "status", status);
    vl__record_write(o);
    cJSON_Delete(o);
  }
  cJSON_Delete(root);
  if (status != 200)
    return respond_error(c, status, "the body must be a JSON object", NULL, NULL);
  atomic_fetch_add(start ? &vl__stats.profile_starts : &vl__stats.profile_stops, 1);
  static const char started[] = "Start profiling.\n", stopped[] = "Stop profiling.\n";
  if (vl__cfg->profile == VL__PROFILE_VLLM)
    return vl__server_respond(c, 200, NULL, 0, false, NULL, NULL, NULL);
  return start ? vl__server_respond(c, 200, (char *)started, sizeof(started) - 1, false,
                                    "text/plain", NULL, NULL)
               : vl__server_respond(c, 200, (char *)stopped, sizeof(stopped) - 1, false,
                                    "text/plain", NULL, NULL);
}

static enum MHD_Result serve_other(vl__request_t *r) {
  struct MHD_Connection *c = r->timer.conn;
  size_t len;
  char *s;
  switch (r->route) {
  case VL__ROUTE_MODELS: {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(data, m);
    cJSON_AddStringToObject(m, "id", vl__cfg->model);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)(vl_wall_ms() / 1000));
    cJSON_AddStringToObject(m, "owned_by",
                            vl__cfg->profile == VL__PROFILE_LLAMACPP ? "llamacpp" : "vlmmock");
    cJSON_AddStringToObject(m, "root", vl__cfg->model);
    cJSON_AddNumberToObject(m, "max_model_len", 131072);
    return respond_json(c, 200, o);
  }
  case VL__ROUTE_HEALTH:
    /* --loading: 503 until the model is loaded, in llama-server's words. */
    if (vl_now_ns() - vl__stats.start_ns < vl__cfg->loading_us * 1000)
      return respond_error(c, 503, "Loading model", NULL, NULL);
    return vl__server_respond(c, 200, NULL, 0, false, NULL, NULL, NULL);
  case VL__ROUTE_PROPS:
    if (!(s = vl__llama_props(&len)))
      return MHD_NO;
    return vl__server_respond(c, 200, s, len, true, "application/json", NULL, NULL);
  case VL__ROUTE_SLOTS:
    if (!(s = vl__llama_slots(&len)))
      return MHD_NO;
    return vl__server_respond(c, 200, s, len, true, "application/json", NULL, NULL);
  case VL__ROUTE_FLUSH:
    return flush_cache(r);
  case VL__ROUTE_RESET_PREFIX:
    return cache_reset(r, "/reset_prefix_cache", false, &vl__stats.reset_prefix, &no_wait);
  case VL__ROUTE_RESET_MM:
    return cache_reset(r, "/reset_mm_cache", false, &vl__stats.reset_mm, &no_wait);
  case VL__ROUTE_RESET_ENCODER:
    return cache_reset(r, "/reset_encoder_cache", false, &vl__stats.reset_encoder, &no_wait);
  case VL__ROUTE_SERVER_INFO: {
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
  case VL__ROUTE_VERSION: {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", "vlmmock-" VL_VERSION);
    return respond_json(c, 200, o);
  }
  case VL__ROUTE_METRICS:
    if (vl__cfg->profile == VL__PROFILE_LLAMACPP) {
      /* llama-server serves its metrics only with --metrics, and then its own names alone. */
      if (!vl__cfg->metrics)
        return respond_error(c, 501, "This server does not support metrics endpoint.", NULL, NULL);
      if (!(s = vl__llama_metrics(&len)))
        return MHD_NO;
      return vl__server_respond(c, 200, s, len, true, "text/plain; version=0.0.4", NULL, NULL);
    }
    if (!(s = vl__stats_prometheus(&len)))
      return MHD_NO;
    return vl__server_respond(c, 200, s, len, true, "text/plain; version=0.0.4; charset=utf-8",
                              NULL, NULL);
  case VL__ROUTE_STATS:
    if (!(s = vl__stats_json(&len)))
      return MHD_NO;
    return vl__server_respond(c, 200, s, len, true, "application/json", NULL, NULL);
  case VL__ROUTE_TOKENIZE:
    if (vl__cfg->no_tokenize)
      return respond_error(c, 404, "not found", NULL, NULL);
    return tokenize(r);
  case VL__ROUTE_START_PROFILE:
    return profile_call(r, true);
  case VL__ROUTE_STOP_PROFILE:
    return profile_call(r, false);
  case VL__ROUTE_BAD_METHOD:
    return respond_error(c, 405, "method not allowed", MHD_HTTP_HEADER_ALLOW, r->allow);
  default:
    return respond_error(c, 404, "not found", NULL, NULL);
  }
}

/* ------------------------------------------------------------------ the access handler */

/* The body is complete: begin a model request, or serve another route. */
static enum MHD_Result body_complete(vl__request_t *r) {
  if (!is_model(r->route))
    return serve_other(r);
  return vl__request_begin(r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
  vl__request_t *r = *con_cls;
  if (!r) {
    const char *allow = NULL;
    vl__route_t route = lookup(url, method, &allow);
    if (!(r = vl__request_new(conn, route, allow)))
      return MHD_NO;
    *con_cls = r;
    if (is_model(r->route)) {
      const char *cl =
          MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
      uint64_t expect = cl ? strtoull(cl, NULL, 10) : 0;
      if (expect > vl__cfg->max_body) {
        /* Refused before the body is read: MHD then closes the connection after the reply. */
        return vl__request_refuse(r);
      }
      r->expect = (size_t)expect;
    }
    return MHD_YES;
  }
  if (*upload_size > 0) {
    if (is_model(r->route) || r->route == VL__ROUTE_TOKENIZE || r->route == VL__ROUTE_START_PROFILE)
      vl__request_append(r, upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  switch (r->phase) {
  case VL__PHASE_RECV:
    return body_complete(r);
  case VL__PHASE_WORK:
  case VL__PHASE_WAIT:
    return vl__request_act(r);
  case VL__PHASE_STALL:
    if (atomic_load(&r->timer.peer_gone) || vl__timer_stopping())
      return MHD_NO;
    return vl__timer_suspend_until(&r->timer, vl_now_ns() + VL__STALL_CHECK_NS) ? MHD_YES : MHD_NO;
  case VL__PHASE_SENT:
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
