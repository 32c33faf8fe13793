#include "vlmload/flush.h"
#include "vlmload/common.h"
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

static int call(vl_flush_t *f) {
  f->len = 0;
  curl_easy_setopt(f->easy, CURLOPT_URL, f->urls[f->step]);
  if (f->post) {
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDSIZE, 0L);
  } else {
    curl_easy_setopt(f->easy, CURLOPT_HTTPGET, 1L);
  }
  f->cur.attempts++;
  int rc = vl_transport_add(f->tr, f->easy);
  f->in_transfer = rc == 0;
  return rc;
}

int vl_flush_init(vl_flush_t *f, uv_loop_t *loop, vl_transport_t *tr, const vl_config_t *cfg,
                  const char *const *paths, int retry_on_busy, vl_flush_done_cb done_cb) {
  memset(f, 0, sizeof(*f));
  f->tr = tr;
  f->done_cb = done_cb;
  f->post = cfg->flush_post;
  f->max_retries = cfg->flush_retries;
  f->retry_on_busy = retry_on_busy;
  f->retry_delay_ms = cfg->flush_retry_delay_us / 1000;
  while (f->n_paths < VL_MAX_FLUSH_ENDPOINTS && paths[f->n_paths])
    f->n_paths++;
  /* Every server is flushed, each through every route in order. */
  f->urls = vl_xcalloc((size_t)(cfg->n_urls * f->n_paths) + 1, sizeof(char *));
  f->paths = vl_xcalloc((size_t)(cfg->n_urls * f->n_paths) + 1, sizeof(char *));
  for (int u = 0; u < cfg->n_urls; u++) {
    int seen = 0;
    for (int v = 0; v < u && !seen; v++)
      seen = strcmp(cfg->urls[u], cfg->urls[v]) == 0;
    for (int i = 0; i < f->n_paths && !seen; i++) {
      size_t n = strlen(cfg->urls[u]) + strlen(paths[i]) + 1;
      f->urls[f->n_urls] = vl_xmalloc(n);
      snprintf(f->urls[f->n_urls], n, "%s%s", cfg->urls[u], paths[i]);
      f->paths[f->n_urls++] = paths[i];
    }
  }
  if (f->n_urls == 0)
    return VL_EINVAL;
  f->headers = vl_transport_headers(f->headers, cfg->api_key, cfg->headers, cfg->n_headers);
  f->easy = curl_easy_init();
  if (!f->easy || (!f->headers && (cfg->api_key || cfg->n_headers)))
    return VL_ENOMEM;
  if (vl_transport_policy(f->easy, cfg->insecure, cfg->cacert) != 0)
    return VL_ECURL;
  curl_easy_setopt(f->easy, CURLOPT_HTTPHEADER, f->headers);
  curl_easy_setopt(f->easy, CURLOPT_TIMEOUT_MS, (long)(cfg->flush_timeout_us / 1000));
  curl_easy_setopt(f->easy, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(f->easy, CURLOPT_WRITEDATA, f);
  curl_easy_setopt(f->easy, CURLOPT_PRIVATE, f);
  vl_transport_prepare(tr, f->easy);
  uv_timer_init(loop, &f->retry_timer);
  return 0;
}

int vl_flush_start(vl_flush_t *f, const vl_flush_record_t *rec) {
  if (f->busy)
    return VL_EINVAL;
  f->busy = 1;
  f->cur = *rec;
  f->cur.n = f->count + 1;
  f->cur.start_ns = uv_hrtime();
  f->cur.wall_ms = vl_wall_ms();
  f->cur.attempts = 0;
  f->step = 0;
  f->retries = 0;
  if (call(f) != 0) {
    f->cur.status = 0;
    vl_flush_on_done(f, CURLE_FAILED_INIT);
  }
  return 0;
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
  f->done_cb(f, &f->cur);
}

static void on_retry(uv_timer_t *h) {
  vl_flush_t *f = vl_container_of(h, vl_flush_t, retry_timer);
  if (call(f) != 0)
    vl_flush_on_done(f, CURLE_FAILED_INIT);
}

void vl_flush_on_done(vl_flush_t *f, CURLcode result) {
  long status = 0;
  f->in_transfer = 0;
  if (result == CURLE_OK)
    curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &status);
  f->cur.status = status;
  keep_answer(f);
  if (status >= 200 && status < 300) {
    if (++f->step < f->n_urls) {
      f->retries = 0;
      if (call(f) != 0)
        vl_flush_on_done(f, CURLE_FAILED_INIT);
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

void vl_flush_abort(vl_flush_t *f) {
  if (!f->busy)
    return;
  uv_timer_stop(&f->retry_timer);
  if (f->in_transfer)
    vl_transport_remove(f->tr, f->easy);
  f->in_transfer = 0;
  f->busy = 0;
}

void vl_flush_close(vl_flush_t *f) {
  uv_close((uv_handle_t *)&f->retry_timer, NULL);
}

void vl_flush_free(vl_flush_t *f) {
  if (f->easy)
    curl_easy_cleanup(f->easy);
  f->easy = NULL;
  curl_slist_free_all(f->headers);
  for (int i = 0; i < f->n_urls; i++)
    free(f->urls[i]);
  free(f->urls);
  free(f->paths);
  f->urls = NULL;
  f->paths = NULL;
  free(f->recs);
  f->recs = NULL;
}
