/* --probe-rate: an open-loop stream of short text-only requests beside the load, measured apart
 * (the delay the load imposes on other users). Its own schedule (--arrival's process at the
 * probe rate, from a seed of its own), its own few transfers on the run's transport, and its own
 * figures (vl_stats_t.probe): never the load's slots, counts, --requests or figures. Probes start
 * with the run's own load (not during a --rate auto probe) and stop when admission ends; those in
 * flight then finish, and are counted. */
#include "runner_internal.h"
#include "vlmload/common.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Probes in flight at most: an arrival that finds them all busy is dropped and counted. */
#define LATPROBE_SLOTS 64
/* The tokens a probe asks for: short, so that its time is mostly the server's wait. */
#define LATPROBE_TOKENS 16
/* The prompt of every probe. */
#define LATPROBE_PROMPT "Say hello in one short sentence."
/* The probes' own random stream for their arrival gaps. */
#define LATPROBE_SEED 0x70726f6265ull

struct vl__latprobe_slot_s {
  vl_transfer_t xfer;
  vl_runner_t *run;
  vl_response_t resp;
  uint64_t id, intended_ns, sent_ns;
  int busy;
  char curl_err[CURL_ERROR_SIZE];
};

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  vl__latprobe_slot_t *s = ud;
  size_t len = size * n;
  if (!s->resp.status) {
    curl_easy_getinfo(s->xfer.easy, CURLINFO_RESPONSE_CODE, &s->resp.status);
    if (s->resp.stream) {
      const char *ct = NULL;
      curl_easy_getinfo(s->xfer.easy, CURLINFO_CONTENT_TYPE, &ct);
      s->resp.json_ctype = ct && vl_response_ctype_json(ct);
    }
  }
  return vl_response_write(&s->resp, p, len, uv_hrtime()) != 0 ? 0 : len;
}

/* A probe ended: its figures, its line in the request log; the run may end once none runs. */
static void on_done(vl_transfer_t *x, CURLcode result) {
  vl__latprobe_slot_t *s = vl_container_of(x, vl__latprobe_slot_t, xfer);
  vl_runner_t *r = s->run;
  vl__latprobe_t *lp = &r->lp;
  long status = 0;
  curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
  vl_errclass_t err = vl_response_finish(&s->resp, result, status);
  if (err == VL_ERR_TIMEOUT && x->timed_out == VL_TRANSFER_CONNECT_TIMEOUT)
    err = VL_ERR_CONNECT_TIMEOUT;
  uint64_t done_ns = uv_hrtime();
  vl_probe_stats_t *ps = &r->stats.probe;
  if (err == VL_ERR_NONE) {
    ps->ok++;
    vl_hist_record(&ps->e2e, (int64_t)(done_ns - s->intended_ns) / 1000);
    vl_hist_record(&ps->e2e_sent, (int64_t)(done_ns - s->sent_ns) / 1000);
    if (r->cfg->stream && s->resp.t_first_token_ns)
      vl_hist_record(&ps->ttft, (int64_t)(s->resp.t_first_token_ns - s->sent_ns) / 1000);
  } else {
    ps->failed++;
  }
  vl_outcome_t o = {
      .id = s->id,
      .latency_probe = 1,
      .intended_ns = s->intended_ns,
      .sent_ns = s->sent_ns,
      .done_ns = done_ns,
      .first_token_ns = r->cfg->stream && err == VL_ERR_NONE ? s->resp.t_first_token_ns : 0,
      .status = status,
      .err = err,
      .token_events = s->resp.token_events,
      .itl_sum_ns = s->resp.itl_sum_ns,
      .prompt_tokens = s->resp.prompt_tokens,
      .completion_tokens = err == VL_ERR_NONE ? s->resp.completion_tokens : -1,
      .bytes_sent = lp->body_len,
      .error_message = s->resp.error_msg[0] ? s->resp.error_msg : NULL,
      .words = "",
      .detail = "",
  };
  vl_snapshot_t snap = vl__runner_snapshot(r);
  s->busy = 0;
  lp->in_flight--;
  if (vl_report_request(r->rep, &o, &snap) != 0)
    vl__runner_output_failed(r);
  if (!r->admitting)
    vl__runner_maybe_finish(r);
}

static void send_probe(vl_runner_t *r, uint64_t intended_ns) {
  vl__latprobe_t *lp = &r->lp;
  vl__latprobe_slot_t *s = NULL;
  for (int i = 0; i < lp->n && !s; i++)
    if (!lp->slots[i].busy)
      s = &lp->slots[i];
  r->stats.probe.arrivals++;
  if (!s) {
    r->stats.probe.dropped++;
    return;
  }
  s->busy = 1;
  s->id = lp->next_id++;
  s->intended_ns = intended_ns;
  s->sent_ns = uv_hrtime();
  s->curl_err[0] = '\0';
  vl_response_begin(&s->resp, r->cfg->stream, s->sent_ns);
  if (vl_transport_add(&r->tr, &s->xfer) != 0) {
    s->busy = 0;
    r->stats.probe.failed++;
    return;
  }
  lp->in_flight++;
  r->stats.probe.sent++;
}

static void on_timer(uv_timer_t *h) {
  vl_runner_t *r = h->data;
  vl__latprobe_t *lp = &r->lp;
  if (!r->admitting || r->closing)
    return;
  uint64_t now = uv_hrtime();
  while (vl_pace_next(&lp->sched) <= now)
    send_probe(r, vl_pace_take(&lp->sched));
  uint64_t next = vl_pace_next(&lp->sched);
  uv_timer_start(&lp->timer, on_timer, (next - now + 999999) / 1000000, 0);
}

/* The probe's body, the same for every probe: a short chat request (or SGLang's /generate text
 * with --api native). Returns it (owned), its length in *len. */
static char *probe_body(const vl_config_t *c, const char *model, size_t *len) {
  cJSON *o = cJSON_CreateObject();
  if (c->api == VL_API_NATIVE) {
    cJSON_AddStringToObject(o, "text", LATPROBE_PROMPT);
    cJSON *sp = cJSON_AddObjectToObject(o, "sampling_params");
    cJSON_AddNumberToObject(sp, "max_new_tokens", LATPROBE_TOKENS);
    cJSON_AddNumberToObject(sp, "temperature", c->temperature);
    cJSON_AddBoolToObject(o, "stream", c->stream);
  } else {
    cJSON_AddStringToObject(o, "model", model);
    cJSON *msgs = cJSON_AddArrayToObject(o, "messages");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", LATPROBE_PROMPT);
    cJSON_AddItemToArray(msgs, m);
    cJSON_AddNumberToObject(o, "max_tokens", LATPROBE_TOKENS);
    cJSON_AddNumberToObject(o, "temperature", c->temperature);
    cJSON_AddBoolToObject(o, "stream", c->stream);
    if (c->stream)
      cJSON_AddBoolToObject(cJSON_AddObjectToObject(o, "stream_options"), "include_usage", 1);
  }
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  *len = s ? strlen(s) : 0;
  return s;
}

int vl__latprobe_init(vl_runner_t *r, const char *model) {
  const vl_config_t *c = r->top;
  vl__latprobe_t *lp = &r->lp;
  memset(lp, 0, sizeof(*lp));
  if (!(lp->body = probe_body(c, model, &lp->body_len)))
    return VL_ENOMEM;
  lp->n = LATPROBE_SLOTS;
  lp->slots = vl_xcalloc((size_t)lp->n, sizeof(vl__latprobe_slot_t));
  for (int i = 0; i < lp->n; i++) {
    vl__latprobe_slot_t *s = &lp->slots[i];
    s->run = r;
    vl_response_init(&s->resp, c->max_response);
    s->resp.native = c->api == VL_API_NATIVE;
    if (!(s->xfer.easy = curl_easy_init()))
      return VL_ENOMEM;
    s->resp.easy = s->xfer.easy;
    s->resp.decodes = r->accept_encoding != NULL;
    s->xfer.done = on_done;
    CURL *e = s->xfer.easy;
    CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                                              \
  if (rc == CURLE_OK)                                                                              \
  rc = curl_easy_setopt(e, opt, val)
    SET(CURLOPT_URL, r->full_urls[0]);
    SET(CURLOPT_POSTFIELDS, lp->body);
    SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)lp->body_len);
    SET(CURLOPT_WRITEFUNCTION, on_write);
    SET(CURLOPT_WRITEDATA, s);
    SET(CURLOPT_HTTPHEADER, r->headers);
    SET(CURLOPT_ERRORBUFFER, s->curl_err);
    SET(CURLOPT_TCP_NODELAY, 1L);
    if (r->accept_encoding)
      SET(CURLOPT_ACCEPT_ENCODING, r->accept_encoding);
    SET(CURLOPT_HTTP_VERSION,
        c->http2 ? (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE : (long)CURL_HTTP_VERSION_1_1);
#undef SET
    if (rc != CURLE_OK || vl_transport_policy(e, c->insecure, c->cacert) != 0 ||
        vl_transport_prepare(&r->tr, &s->xfer) != 0)
      return VL_ECURL;
    vl_transport_timeouts(&s->xfer, c->timeout_us / 1000, c->connect_timeout_us / 1000);
  }
  if (uv_timer_init(&r->loop, &lp->timer) != 0)
    return VL_EUV;
  lp->timer.data = r;
  lp->timer_open = 1;
  return 0;
}

void vl__latprobe_start(vl_runner_t *r) {
  const vl_config_t *c = r->top;
  vl__latprobe_t *lp = &r->lp;
  vl_arrival_kind_t kind = c->arrival == VL_ARRIVAL_TRACE ? VL_ARRIVAL_POISSON : c->arrival;
  vl_pace_init(&lp->sched, kind, c->probe_rate, c->arrival_cv, c->seed ^ LATPROBE_SEED, uv_hrtime(),
               0);
  on_timer(&lp->timer);
}

void vl__latprobe_abort(vl_runner_t *r) {
  vl__latprobe_t *lp = &r->lp;
  uv_timer_stop(&lp->timer);
  for (int i = 0; i < lp->n; i++)
    if (lp->slots[i].busy) {
      vl_transport_remove(&r->tr, &lp->slots[i].xfer);
      lp->slots[i].busy = 0;
      lp->in_flight--;
      r->stats.probe.unfinished++;
    }
}

static void close_noop(uv_handle_t *h) {
  (void)h;
}

void vl__latprobe_close(vl_runner_t *r) {
  if (r->lp.timer_open)
    uv_close((uv_handle_t *)&r->lp.timer, close_noop);
  r->lp.timer_open = 0;
}

void vl__latprobe_free(vl_runner_t *r) {
  vl__latprobe_t *lp = &r->lp;
  for (int i = 0; lp->slots && i < lp->n; i++) {
    if (lp->slots[i].xfer.easy)
      curl_easy_cleanup(lp->slots[i].xfer.easy);
    vl_response_free(&lp->slots[i].resp);
  }
  free(lp->slots);
  cJSON_free(lp->body);
  memset(lp, 0, sizeof(*lp));
}
