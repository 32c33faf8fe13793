#include "vlmload/flush.h"
#include "vlmload/common.h"
#include "vlmload/profile.h"
#include "vlmload/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  vl_flush_t *f = ud;
  size_t len = size * n, room = sizeof(f->buf) - 1 - f->len;
  memcpy(f->buf + f->len, p, VL_MIN(len, room));
  f->len += VL_MIN(len, room);
  return len;
}

/* The URL of the current step: the waiting form in drain mode where the route has one. */
static const char *step_url(const vl_flush_t *f) {
  return f->mode == VL_FLUSH_DRAIN && f->wait_urls[f->step] ? f->wait_urls[f->step]
                                                            : f->urls[f->step];
}

static int call(vl_flush_t *f) {
  f->len = 0;
  int waits = step_url(f) != f->urls[f->step];
  curl_easy_setopt(f->xfer.easy, CURLOPT_URL, step_url(f));
  /* The server may take the whole timeout to answer 400: its answer must still come back. */
  curl_easy_setopt(f->xfer.easy, CURLOPT_TIMEOUT_MS, (long)(f->timeout_ms + (waits ? 2000 : 0)));
  if (waits)
    f->cur.timeout_s = (double)f->timeout_ms / 1e3;
  f->call_t0_ns = uv_hrtime();
  if (f->post) {
    curl_easy_setopt(f->xfer.easy, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(f->xfer.easy, CURLOPT_POSTFIELDSIZE, 0L);
  } else {
    curl_easy_setopt(f->xfer.easy, CURLOPT_HTTPGET, 1L);
  }
  f->cur.attempts++;
  int rc = vl_transport_add(f->tr, &f->xfer);
  f->in_transfer = rc == 0;
  return rc;
}

int vl_flush_choose_routes(vl_config_t *cfg, char *err, size_t errlen) {
  if (!cfg->run.flushes || cfg->flush_endpoints[0])
    return 0;
  const char *const *routes = vl_profile_flush_routes(cfg->server);
  const char *none = vl_profile_no_flush(cfg->server);
  if (!routes && none) {
    snprintf(err, errlen, "--flush-every: %s", none);
    return VL_EINVAL;
  }
  if (!routes) {
    snprintf(err, errlen,
             "--flush-every: --server %s has no flush route; name one with --flush-endpoint or "
             "choose --server sglang|vllm",
             vl_profile_name(cfg->server));
    return VL_EINVAL;
  }
  for (int i = 0; routes[i] && i < VL_MAX_FLUSH_ENDPOINTS; i++)
    cfg->flush_endpoints[i] = vl_xstrdup(routes[i]);
  return 0;
}

void vl_flush_describe(const vl_config_t *cfg, char *out, size_t outlen) {
  const char *mode = cfg->flush_mode == VL_FLUSH_DRAIN ? "drained" : "inline";
  if (cfg->flush_every_n)
    snprintf(out, outlen, "%s flush every %llu requests", mode,
             (unsigned long long)cfg->flush_every_n);
  else
    snprintf(out, outlen, "%s flush every %.6gs", mode, (double)cfg->flush_every_us / 1e6);
}

static void on_every(uv_timer_t *h);

static void on_transfer_done(vl_transfer_t *x, CURLcode result);

int vl_flush_init(vl_flush_t *f, uv_loop_t *loop, vl_transport_t *tr, const vl_config_t *cfg,
                  const vl_flush_hooks_t *hooks) {
  const char *const *paths = (const char *const *)cfg->flush_endpoints;
  memset(f, 0, sizeof(*f));
  f->tr = tr;
  f->hooks = hooks;
  f->post = cfg->flush_post;
  f->max_retries = cfg->flush_retries;
  f->stopped = 1;
  f->retry_delay_ms = cfg->flush_retry_delay_us / 1000;
  while (f->n_paths < VL_MAX_FLUSH_ENDPOINTS && paths[f->n_paths])
    f->n_paths++;
  /* Every server is flushed, each through every route in order. */
  f->timeout_ms = cfg->flush_timeout_us / 1000;
  f->urls = vl_xcalloc((size_t)(cfg->n_urls * f->n_paths) + 1, sizeof(char *));
  f->wait_urls = vl_xcalloc((size_t)(cfg->n_urls * f->n_paths) + 1, sizeof(char *));
  f->paths = vl_xcalloc((size_t)(cfg->n_urls * f->n_paths) + 1, sizeof(char *));
  for (int u = 0; u < cfg->n_urls; u++) {
    int seen = 0;
    for (int v = 0; v < u && !seen; v++)
      seen = strcmp(cfg->urls[u], cfg->urls[v]) == 0;
    for (int i = 0; i < f->n_paths && !seen; i++) {
      size_t n = strlen(cfg->urls[u]) + strlen(paths[i]) + 1;
      f->urls[f->n_urls] = vl_xmalloc(n);
      snprintf(f->urls[f->n_urls], n, "%s%s", cfg->urls[u], paths[i]);
      if (vl_profile_flush_waits(paths[i]))
        f->wait_urls[f->n_urls] =
            vl_xfmt("%s?timeout=%.6g", f->urls[f->n_urls], (double)f->timeout_ms / 1e3);
      f->paths[f->n_urls++] = paths[i];
    }
  }
  if (f->n_urls == 0)
    return VL_EINVAL;
  f->headers = vl_transport_headers(f->headers, cfg->api_key, cfg->headers, cfg->n_headers);
  f->xfer.easy = curl_easy_init();
  f->xfer.done = on_transfer_done;
  if (!f->xfer.easy || (!f->headers && (cfg->api_key || cfg->n_headers)))
    return VL_ENOMEM;
  if (vl_transport_policy(f->xfer.easy, cfg->insecure, cfg->cacert) != 0)
    return VL_ECURL;
  curl_easy_setopt(f->xfer.easy, CURLOPT_HTTPHEADER, f->headers);
  curl_easy_setopt(f->xfer.easy, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(f->xfer.easy, CURLOPT_WRITEDATA, f);
  vl_transport_prepare(tr, &f->xfer);
  uv_timer_init(loop, &f->retry_timer);
  uv_timer_init(loop, &f->every_timer);
  return 0;
}

static void on_done(vl_flush_t *f, CURLcode result);

/* Starts a flush; rec carries what the cadence knows (requests, in flight, drain). */
static void start(vl_flush_t *f, const vl_flush_record_t *rec) {
  f->busy = 1;
  f->cur = *rec;
  f->cur.n = f->count + 1;
  f->cur.start_ns = uv_hrtime();
  f->cur.wall_ms = vl_wall_ms();
  f->cur.attempts = 0;
  f->cur.timeout_s = -1;
  f->cur.server_wait_ms = -1;
  f->step = 0;
  f->retries = 0;
  if (call(f) != 0) {
    f->cur.status = 0;
    on_done(f, CURLE_FAILED_INIT);
  }
}

/* Inline: a flush goes out now, unless the previous one still runs. */
static void flush_inline(vl_flush_t *f) {
  if (f->busy) {
    f->skipped++;
    return;
  }
  vl_flush_record_t rec = {0};
  f->hooks->load(f, &rec.requests_sent, &rec.requests_done, &rec.in_flight);
  start(f, &rec);
}

/* Drained: a flush is due; it goes out once nothing is in flight (maybe_drained). */
static void maybe_drained(vl_flush_t *f);
static void pause_for_flush(vl_flush_t *f) {
  if (f->paused)
    return;
  f->paused = 1;
  f->pause_ns = uv_hrtime();
  f->hooks->pause(f);
  maybe_drained(f);
}

static void maybe_drained(vl_flush_t *f) {
  if (!f->paused || f->busy)
    return;
  vl_flush_record_t rec = {.drained = 1};
  f->hooks->load(f, &rec.requests_sent, &rec.requests_done, &rec.in_flight);
  if (rec.in_flight > 0)
    return;
  rec.drain_ms = (double)(uv_hrtime() - f->pause_ns) / 1e6;
  start(f, &rec);
}

static void on_every(uv_timer_t *h) {
  vl_flush_t *f = vl_container_of(h, vl_flush_t, every_timer);
  if (f->mode == VL_FLUSH_INLINE)
    flush_inline(f);
  else
    pause_for_flush(f);
}

void vl_flush_phase(vl_flush_t *f, const vl_config_t *phase) {
  f->stopped = 0;
  f->every_n = phase->flush_every_n;
  f->mode = phase->flush_mode;
  f->retry_on_busy = f->mode == VL_FLUSH_DRAIN;
  f->sent_since = f->done_since = 0;
  uv_timer_stop(&f->every_timer);
  if (phase->flush_every_us)
    uv_timer_start(&f->every_timer, on_every, phase->flush_every_us / 1000,
                   phase->flush_every_us / 1000);
}

void vl_flush_sent(vl_flush_t *f) {
  if (!f->stopped && f->mode == VL_FLUSH_DRAIN && f->every_n && ++f->sent_since >= f->every_n)
    pause_for_flush(f);
}

void vl_flush_finished(vl_flush_t *f) {
  if (f->mode == VL_FLUSH_DRAIN)
    maybe_drained(f);
  else if (f->every_n && ++f->done_since >= f->every_n) {
    f->done_since = 0;
    flush_inline(f);
  }
}

void vl_flush_now(vl_flush_t *f) {
  if (f->stopped)
    return;
  if (f->mode == VL_FLUSH_INLINE)
    flush_inline(f);
  else
    pause_for_flush(f);
}

void vl_flush_stop(vl_flush_t *f, int drop) {
  f->stopped = 1;
  uv_timer_stop(&f->every_timer);
  if (drop && f->paused && !f->busy)
    f->paused = 0;
}

/* Keeps the start of the answer as the server's text is shown anywhere: line breaks and tabs as
 * spaces, any other control character or byte that is not UTF-8 as \xHH, cut between characters.
 * It goes to the JSON outputs, which must stay UTF-8. */
static void keep_answer(vl_flush_t *f) {
  char text[sizeof(f->buf)];
  size_t n = VL_MIN(f->len, sizeof(text) - 1);
  for (size_t i = 0; i < n; i++)
    text[i] = f->buf[i] == '\n' || f->buf[i] == '\r' || f->buf[i] == '\t' ? ' ' : f->buf[i];
  text[n] = '\0';
  size_t j = vl_text_shown(f->cur.answer, sizeof(f->cur.answer), text);
  while (j > 0 && f->cur.answer[j - 1] == ' ')
    j--;
  f->cur.answer[j] = '\0';
}

static void finish(vl_flush_t *f) {
  f->cur.call_ms = (double)(uv_hrtime() - f->cur.start_ns) / 1e6;
  f->busy = 0;
  f->count++;
  if (f->cur.ok)
    f->ok++;
  else if (f->cur.refused)
    f->refused++;
  else
    f->failed++;
  if (f->n_recs == f->cap_recs) {
    f->cap_recs = f->cap_recs ? f->cap_recs * 2 : 64;
    f->recs = vl_xrealloc(f->recs, f->cap_recs * sizeof(*f->recs));
  }
  f->recs[f->n_recs++] = f->cur;
  uint64_t paused_ns = 0;
  if (f->paused) {
    paused_ns = uv_hrtime() - f->pause_ns;
    f->paused = 0;
    f->sent_since = 0;
  }
  f->hooks->done(f, &f->cur, paused_ns);
}

static void on_retry(uv_timer_t *h) {
  vl_flush_t *f = vl_container_of(h, vl_flush_t, retry_timer);
  if (call(f) != 0)
    on_done(f, CURLE_FAILED_INIT);
}

static void on_done(vl_flush_t *f, CURLcode result) {
  long status = 0;
  f->in_transfer = 0;
  if (result == CURLE_OK)
    curl_easy_getinfo(f->xfer.easy, CURLINFO_RESPONSE_CODE, &status);
  f->cur.status = status;
  if (step_url(f) != f->urls[f->step] && result == CURLE_OK)
    f->cur.server_wait_ms = (double)(uv_hrtime() - f->call_t0_ns) / 1e6;
  keep_answer(f);
  if (status >= 200 && status < 300) {
    if (++f->step < f->n_urls) {
      f->retries = 0;
      if (call(f) != 0)
        on_done(f, CURLE_FAILED_INIT);
      return;
    }
    f->cur.ok = 1;
    finish(f);
    return;
  }
  if (status == 400 && f->retry_on_busy && f->retries < f->max_retries) {
    f->retries++;
    f->retries_total++;
    uv_timer_start(&f->retry_timer, on_retry, f->retry_delay_ms, 0);
    return;
  }
  if (status == 400)
    f->cur.refused = 1;
  if (status == 404 && !f->warned_404) {
    f->warned_404 = 1;
    fprintf(stderr, "\nvlmload: warning: %s answered 404%s\n", f->paths[f->step],
            strstr(f->paths[f->step], "reset_") ? ": vLLM serves its reset routes only when "
                                                  "started with VLLM_SERVER_DEV_MODE=1"
                                                : "; check --flush-endpoint and --server");
  }
  if (result != CURLE_OK)
    snprintf(f->cur.answer, sizeof(f->cur.answer), "%s", curl_easy_strerror(result));
  finish(f);
}

/* The transport ended the call under way. */
static void on_transfer_done(vl_transfer_t *x, CURLcode result) {
  on_done(vl_container_of(x, vl_flush_t, xfer), result);
}

void vl_flush_abort(vl_flush_t *f) {
  f->paused = 0;
  if (!f->busy)
    return;
  uv_timer_stop(&f->retry_timer);
  if (f->in_transfer)
    vl_transport_remove(f->tr, &f->xfer);
  f->in_transfer = 0;
  f->busy = 0;
}

void vl_flush_close(vl_flush_t *f) {
  uv_close((uv_handle_t *)&f->retry_timer, NULL);
  uv_close((uv_handle_t *)&f->every_timer, NULL);
}

void vl_flush_free(vl_flush_t *f) {
  if (f->xfer.easy)
    curl_easy_cleanup(f->xfer.easy);
  f->xfer.easy = NULL;
  curl_slist_free_all(f->headers);
  for (int i = 0; i < f->n_urls; i++) {
    free(f->urls[i]);
    free(f->wait_urls[i]);
  }
  free(f->urls);
  free(f->wait_urls);
  f->wait_urls = NULL;
  free(f->paths);
  f->urls = NULL;
  f->paths = NULL;
  free(f->recs);
  f->recs = NULL;
}
