/* The server's profiling routes at given request counts (srvprof.h). */
#include "vlmload/srvprof.h"
#include "vlmload/common.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define CALL_TIMEOUT_MS 600000L /* a snapshot of a large GPU's memory takes a while */

int vl_srvprof_routes(vl_server_kind_t kind, const char **start_body) {
  switch (kind) {
  case VL_SERVER_SGLANG:
    *start_body = "{\"activities\":[\"MEM\"]}";
    return 1;
  case VL_SERVER_VLLM:
    *start_body = NULL;
    return 1;
  default:
    *start_body = NULL;
    return 0;
  }
}

static size_t on_write(char *ptr, size_t size, size_t n, void *ud) {
  vl_srvprof_t *p = ud;
  size_t len = size * n;
  vl_srvprof_call_t *c = &p->calls[p->n_calls - 1];
  for (size_t i = 0; i < len && p->answer_len + 1 < sizeof(c->answer); i++) {
    unsigned char ch = (unsigned char)ptr[i];
    c->answer[p->answer_len++] = ch < 0x20 || ch == 0x7f ? ' ' : ch >= 0x80 ? '?' : (char)ch;
  }
  c->answer[p->answer_len] = '\0';
  return len;
}

static void send_call(vl_srvprof_t *p, int stop);

static void on_done(vl_transfer_t *x, CURLcode result) {
  vl_srvprof_t *p = vl_container_of(x, vl_srvprof_t, xfer);
  vl_srvprof_call_t *c = &p->calls[p->n_calls - 1];
  curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &c->status);
  c->ms = (double)(uv_hrtime() - c->start_ns) / 1e6;
  c->ok = result == CURLE_OK && c->status >= 200 && c->status < 300;
  if (result != CURLE_OK && !c->answer[0])
    snprintf(c->answer, sizeof(c->answer), "%.119s",
             p->curl_err[0] ? p->curl_err : curl_easy_strerror(result));
  int was = p->busy;
  p->busy = 0;
  if (p->on_call)
    p->on_call(p, c);
  /* The stop follows its start, answered or not: a profile left running would skew the run. */
  if (was == 1)
    send_call(p, 1);
  else
    vl_srvprof_count(p, p->completed);
}

static void send_call(vl_srvprof_t *p, int stop) {
  if (p->n_calls == (int)VL_ARRAY_SIZE(p->calls))
    return;
  vl_srvprof_call_t *c = &p->calls[p->n_calls++];
  memset(c, 0, sizeof(*c));
  c->route = stop ? "/stop_profile" : "/start_profile";
  c->at_requests = p->at[p->next - 1];
  c->completed = p->completed;
  c->wall_ms = (int64_t)vl_wall_ms();
  c->start_ns = uv_hrtime();
  p->answer_len = 0;
  p->curl_err[0] = '\0';
  const char *body = stop ? "{}" : (p->start_body ? p->start_body : "{}");
  curl_easy_setopt(p->xfer.easy, CURLOPT_URL, stop ? p->stop_url : p->start_url);
  curl_easy_setopt(p->xfer.easy, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(p->xfer.easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
  p->busy = stop ? 2 : 1;
  if (vl_transport_add(p->tr, &p->xfer) != 0) {
    p->busy = 0;
    snprintf(c->answer, sizeof(c->answer), "cannot start the call");
    if (p->on_call)
      p->on_call(p, c);
  }
}

void vl_srvprof_count(vl_srvprof_t *p, uint64_t completed) {
  p->completed = completed;
  if (p->busy || p->next >= p->n_at || completed < p->at[p->next])
    return;
  while (p->next < p->n_at && completed >= p->at[p->next])
    p->next++;
  send_call(p, 0);
}

void vl_srvprof_abort(vl_srvprof_t *p) {
  p->next = p->n_at;
  if (!p->busy)
    return;
  vl_transport_remove(p->tr, &p->xfer);
  p->busy = 0;
  vl_srvprof_call_t *c = &p->calls[p->n_calls - 1];
  c->ms = (double)(uv_hrtime() - c->start_ns) / 1e6;
  if (!c->answer[0])
    snprintf(c->answer, sizeof(c->answer), "not answered before the run ended");
  if (p->on_call)
    p->on_call(p, c);
}

static char *join(const char *base, const char *path) {
  size_t n = strlen(base);
  while (n && base[n - 1] == '/')
    n--;
  char *s = vl_xmalloc(n + strlen(path) + 1);
  memcpy(s, base, n);
  strcpy(s + n, path);
  return s;
}

int vl_srvprof_init(vl_srvprof_t *p, vl_transport_t *tr, const vl_config_t *cfg, vl_srvprof_cb cb) {
  memset(p, 0, sizeof(*p));
  p->tr = tr;
  p->at = cfg->profile_at;
  p->n_at = cfg->n_profile_at;
  p->on_call = cb;
  vl_srvprof_routes(cfg->server, &p->start_body);
  p->start_url = join(cfg->urls[0], "/start_profile");
  p->stop_url = join(cfg->urls[0], "/stop_profile");
  p->headers = curl_slist_append(NULL, "Content-Type: application/json");
  if (p->headers)
    p->headers = vl_transport_headers(p->headers, cfg->api_key, cfg->headers, cfg->n_headers);
  p->xfer.easy = curl_easy_init();
  p->xfer.done = on_done;
  if (!p->xfer.easy || !p->headers ||
      vl_transport_policy(p->xfer.easy, cfg->insecure, cfg->cacert) != 0)
    return VL_ECURL;
  curl_easy_setopt(p->xfer.easy, CURLOPT_HTTPHEADER, p->headers);
  curl_easy_setopt(p->xfer.easy, CURLOPT_TIMEOUT_MS, CALL_TIMEOUT_MS);
  curl_easy_setopt(p->xfer.easy, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(p->xfer.easy, CURLOPT_WRITEDATA, p);
  curl_easy_setopt(p->xfer.easy, CURLOPT_ERRORBUFFER, p->curl_err);
  return vl_transport_prepare(tr, &p->xfer);
}

void vl_srvprof_free(vl_srvprof_t *p) {
  if (p->xfer.easy)
    curl_easy_cleanup(p->xfer.easy);
  curl_slist_free_all(p->headers);
  free(p->start_url);
  free(p->stop_url);
  memset(p, 0, sizeof(*p));
}

cJSON *vl_srvprof_call_json(const vl_srvprof_call_t *c, uint64_t t0_ns) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "event", "server_profile");
  cJSON_AddStringToObject(o, "route", c->route);
  cJSON_AddNumberToObject(o, "at_requests", (double)c->at_requests);
  cJSON_AddNumberToObject(o, "completed", (double)c->completed);
  cJSON_AddNumberToObject(o, "wall_ms", (double)c->wall_ms);
  cJSON_AddNumberToObject(o, "elapsed_s",
                          c->start_ns > t0_ns ? (double)(c->start_ns - t0_ns) / 1e9 : 0);
  cJSON_AddNumberToObject(o, "ms", c->ms);
  cJSON_AddNumberToObject(o, "status", (double)c->status);
  cJSON_AddBoolToObject(o, "ok", c->ok);
  cJSON_AddStringToObject(o, "answer", c->answer);
  return o;
}

cJSON *vl_srvprof_json(const vl_srvprof_t *p) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < p->n_calls; i++)
    cJSON_AddItemToArray(a, vl_srvprof_call_json(&p->calls[i], p->t0_ns));
  return a;
}
