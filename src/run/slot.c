/* A request slot's life: its body from the plan, its easy handle's callbacks, the stale-reply check
 * before each send on a reused connection, sending again a request the server cannot have taken,
 * its outcome into the stats and the log, and failing fast while the first requests all fail
 * alike. */
#include "runner_internal.h"
#include "vlmload/common.h"
#include "vlmload/rng.h"
#include "vlmload/text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* CURLOPT_WRITEFUNCTION: reply bytes. Returning less than given aborts the transfer. */
static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  vl_slot_t *slot = ud;
  size_t len = size * n;
  if (!slot->resp.status) {
    curl_easy_getinfo(slot->xfer.easy, CURLINFO_RESPONSE_CODE, &slot->resp.status);
    if (slot->resp.stream) { /* only a stream asks whether its reply came as JSON instead */
      const char *ct = NULL;
      curl_easy_getinfo(slot->xfer.easy, CURLINFO_CONTENT_TYPE, &ct);
      slot->resp.json_ctype = ct && vl_response_ctype_json(ct);
    }
  }
  if (vl_response_write(&slot->resp, p, len, uv_hrtime()) != 0)
    return 0;
  /* --cancel after N tokens: closed at the loop's next turn, never from inside curl's callback. A
   * reply that ends in these same bytes ends first, and is what it was. */
  if (slot->cancel == CANCEL_TOKENS && slot->resp.token_events >= slot->cancel_after) {
    slot->cancel = CANCEL_ARMED;
    slot->cancel_at_ms = uv_now(&slot->run->loop);
    vl_transport_cancel_at(&slot->run->tr, &slot->xfer, slot->cancel_at_ms);
  }
  return len;
}

/* Times one request is sent again (see resend). It goes on a new connection, where none of the
 * reasons to send it again can arise (each needs a reused connection): a request is written at
 * most twice, and taken by the server at most once. */
#define RESENDS 1

/* CURLOPT_PREREQFUNCTION: curl is about to send the request on a connection. A second call for the
 * same request means curl found its kept-alive connection closed without a reply byte and would
 * send the request again on another one. Never behind vlmload's back: abort, and vl__slot_resend
 * decides (never_taken) whether the server took it: if not, it goes again, counted; if it did, it
 * is a transport failure.
 *
 * A reused connection that already holds bytes before anything is written carries a reply to no
 * request of ours: servers send 408 when they close an idle keep-alive connection. curl 7.88 only
 * drops a cached connection whose peer closed with nothing unread, so it would read that 408 as
 * this request's reply. Stop here, before a byte is written; vl__slot_resend sends the request
 * again on a new connection (curl closes this one, as the transfer ended before its reply). */
static int on_prereq(void *ud, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                     int conn_local_port) {
  vl_slot_t *slot = ud;
  if (++slot->attempts > 1)
    return CURL_PREREQFUNC_ABORT;
  vl_transport_connected(&slot->run->tr, &slot->xfer);
  slot->xfer.closed_unread = 0;
  if (slot->run->stale_check) {
    if (vl_transport_stale(&slot->run->tr, &slot->xfer, conn_local_port, conn_primary_port)) {
      slot->stale = 1;
      return CURL_PREREQFUNC_ABORT;
    }
  }
  return CURL_PREREQFUNC_OK;
}

/* CURLOPT_SEEKFUNCTION: curl rewinds a streamed body to send it again. How far it had read is
 * noted first, for never_taken. */
static int on_seek(void *ud, curl_off_t offset, int origin) {
  vl_slot_t *slot = ud;
  if (slot->body.cur == slot->body.n)
    slot->drained = 1;
  return vl_body_seek(&slot->body, offset, origin);
}

int vl__slot_setup(vl_runner_t *r, vl_slot_t *s) {
  const vl_config_t *c = r->cfg;
  s->run = r;
  /* A conversation's turn carries the turns before it; a prompt of runs needs more. */
  int segs = c->turns_hi ? vl_history_segs(c->turns_hi, r->pool ? c->images_hi : 0)
                         : VL_BODY_TEMPLATE_SEGS;
  if (vl_body_init(&s->body, VL_MAX(segs, r->body_cap)) != 0)
    return VL_ENOMEM;
  vl_response_init(&s->resp, c->max_response);
  s->resp.native = c->api == VL_API_NATIVE;
  s->xfer.easy = curl_easy_init();
  s->resp.easy = s->xfer.easy;
  s->resp.decodes = r->accept_encoding != NULL;
  s->postfields = NULL;
  s->postsize = -1;
  if (!s->xfer.easy)
    return VL_ENOMEM;
  CURL *e = s->xfer.easy;
  CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                                              \
  if (rc == CURLE_OK)                                                                              \
  rc = curl_easy_setopt(e, opt, val)
  SET(CURLOPT_URL, r->full_urls[0]);
  SET(CURLOPT_POST, 1L);
  SET(CURLOPT_READFUNCTION, vl_body_read);
  SET(CURLOPT_READDATA, &s->body);
  SET(CURLOPT_SEEKFUNCTION, on_seek);
  SET(CURLOPT_SEEKDATA, s);
  SET(CURLOPT_WRITEFUNCTION, on_write);
  SET(CURLOPT_WRITEDATA, s);
  SET(CURLOPT_HTTPHEADER, r->headers);
  SET(CURLOPT_PREREQFUNCTION, on_prereq);
  SET(CURLOPT_PREREQDATA, s);
  SET(CURLOPT_ERRORBUFFER, s->curl_err);
  if (r->accept_encoding)
    SET(CURLOPT_ACCEPT_ENCODING, r->accept_encoding);
  /* Load goes where --url says: never through a proxy from the environment (curl then also skips
   * looking the proxy variables up on every transfer), never after a redirect. */
  if (rc == CURLE_OK && vl_transport_policy(e, c->insecure, c->cacert) != 0)
    rc = CURLE_FAILED_INIT;
  SET(CURLOPT_TCP_NODELAY, 1L);
  SET(CURLOPT_HTTP_VERSION,
      c->http2 ? (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE : (long)CURL_HTTP_VERSION_1_1);
  if (c->http2)
    SET(CURLOPT_PIPEWAIT, 1L);
  /* curl keeps an upload and a download buffer per handle for the whole run. Large upload buffers
   * send large image bodies in fewer writes; with thousands of slots they would cost more memory
   * than the bodies themselves. Split a fixed budget between the slots. */
  long upload = (long)VL_MIN(VL_MAX(UPLOAD_BUDGET / (size_t)c->concurrency, (size_t)16384),
                             (size_t)(512 * 1024));
  SET(CURLOPT_UPLOAD_BUFFERSIZE, upload);
  long download =
      (long)VL_MIN(VL_MAX(DOWNLOAD_BUDGET / (size_t)c->concurrency, (size_t)1024), (size_t)16384);
  SET(CURLOPT_BUFFERSIZE, download);
#undef SET
  if (rc != CURLE_OK || vl_transport_prepare(&r->tr, &s->xfer) != 0)
    return VL_ECURL;
  /* The transport keeps the time-outs, far cheaper than curl's per-transfer ones. */
  vl_transport_timeouts(&s->xfer, c->timeout_us / 1000, c->connect_timeout_us / 1000);
  return 0;
}

/* The value of header line "Name: value" when its name is name (in any case), else NULL. */
static const char *header_value(const char *line, const char *name) {
  size_t n = strlen(name);
  if (strncasecmp(line, name, n) != 0 || line[n] != ':')
    return NULL;
  line += n + 1;
  while (*line == ' ' || *line == '\t')
    line++;
  return line;
}

int vl__slot_headers(vl_runner_t *r) {
  const vl_config_t *c = r->cfg;
  struct curl_slist *h = NULL, *t;
  const char *fixed[] = {
      "Content-Type: application/json",
      /* curl otherwise waits up to a second for "100 Continue" on every large body. */
      "Expect:",
      c->stream ? "Accept: text/event-stream" : "Accept: application/json",
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(fixed); i++) {
    if (!(t = curl_slist_append(h, fixed[i])))
      goto fail;
    h = t;
  }
  /* An Accept-Encoding the user gives is curl's to send, so that curl also decodes the replies
   * (sent as a plain header, a gzip reply would reach the parser compressed). */
  char **extra = vl_xcalloc((size_t)c->n_headers + 1, sizeof(char *));
  int n = 0;
  r->accept_encoding = c->compressed ? "" : NULL;
  for (int i = 0; i < c->n_headers; i++) {
    const char *v = header_value(c->headers[i], "Accept-Encoding");
    if (!v)
      extra[n++] = c->headers[i];
    else if (!c->compressed)
      r->accept_encoding = v;
  }
  h = vl_transport_headers(h, c->api_key, extra, n);
  free(extra);
  if (!h)
    return VL_ENOMEM;
  r->headers = h;
  return 0;

fail:
  curl_slist_free_all(h);
  return VL_ENOMEM;
}

/* Fills the request's body from its plan. With unique images, the images come from the producer
 * in the order requests leave instead of from the plan's pool indices; with --image-reuse, an
 * image the plan marks as a repeat is one of the last unique images sent instead (a fresh one
 * while none has been sent yet). */
static void plan_request(vl_runner_t *r, vl_slot_t *s) {
  vl_request_plan_t rp;
  vl_plan_t *plan = vl__runner_plan(r);
  vl_plan_draw(plan, s->conv ? vl__converse_plan_id(s->conv) : s->id, &rp);
  /* A conversation holds its turns' unique images until it ends: later turns resend them. */
  vl_uniq_img_t *held = s->conv && s->conv->uniq ? s->conv->uniq + s->conv->n_uniq : NULL;
  s->n_images = rp.n_images;
  s->n_uniq = 0;
  s->image_bytes = 0;
  s->image_pixels = 0;
  vl_seg_t segs[VL_MAX_IMAGES];
  for (int k = 0; k < rp.n_images; k++) {
    size_t idx = rp.image[k];
    int unique = 0; /* this image is distinct from every other */
    int repeat = 0; /* this image is one sent before, unique when first sent */
    if (r->has_uniq && r->cfg->unique_images) {
      if (!held && !s->uniq)
        s->uniq = vl_xcalloc(VL_MAX_IMAGES, sizeof(vl_uniq_img_t));
      vl_uniq_img_t *img = held ? &held[k] : &s->uniq[k];
      repeat = rp.reuse[k] >= 0 && vl_uniq_repeat(&r->uniq, rp.reuse[k], img) == 0;
      if (repeat)
        r->stats.images_repeated++;
      else if ((unique = vl_uniq_take(&r->uniq, img) == 0))
        r->stats.images_unique++;
      else
        r->stats.images_late++;
      segs[k] = vl_uniq_seg(img);
      idx = img->pool_index;
      s->image_info[k] = (vl_outcome_image_t){img->w, img->h, vl_image_fmt_name(img->fmt)};
      s->image_bytes += img->bytes;
      s->image_pixels += (uint64_t)img->w * (uint64_t)img->h;
      if (held)
        s->conv->n_uniq++;
      else
        s->n_uniq++;
    } else {
      segs[k] = vl_imagepool_seg(r->pool, idx);
      const vl_imagepool_image_t *pi = &r->pool->img[idx];
      s->image_info[k] = (vl_outcome_image_t){pi->w, pi->h, vl_image_fmt_name(pi->fmt)};
      s->image_bytes += r->pool->img[idx].bytes;
      s->image_pixels += (uint64_t)r->pool->img[idx].w * (uint64_t)r->pool->img[idx].h;
    }
    r->stats.per_pool[idx]++;
    if (!unique && !repeat)
      r->stats.per_pool_raw[idx]++;
  }
  s->input_tokens = rp.input_tokens;
  s->req_max_tokens = plan->max_tokens_hole ? rp.max_tokens : 0;
  if (s->conv)
    vl__converse_fill(r, s, &rp, segs);
  else
    vl_plan_fill(plan, &rp, segs, s->max_tokens, &s->body);
}

/* Starts the next request (conv NULL), or conv's next turn, whose place on the schedule is
 * intended_ns, in a free slot. Turns are numbered as they leave, apart from the arrivals. */
void vl__slot_start(vl_runner_t *r, uint64_t intended_ns, vl_conv_t *conv) {
  vl_slot_t *s = r->free_slots;
  r->free_slots = s->next_free;
  s->busy = 1;
  s->conv = conv;
  s->id = conv ? r->conv.next_req++ : r->next_id++;
  s->phase = r->phase;
  /* Several servers take requests in turn, by id, so shards agree on who gets which. */
  if (r->cfg->n_urls > 1) {
    int u = (int)(s->id % (uint64_t)r->cfg->n_urls);
    s->url = r->url_distinct[u];
    curl_easy_setopt(s->xfer.easy, CURLOPT_URL, r->full_urls[u]);
  }
  s->intended_ns = intended_ns;
  s->measured = s->id >= r->cfg->warmup;
  /* --cancel: whether this request is one a user closes, and when (not in a --rate auto probe,
   * whose stages measure the server alone). */
  s->cancel = CANCEL_NONE;
  if (!r->probing && vl_cancel_pick(&r->top->cancel, r->top->seed, s->id, &s->cancel_after)) {
    s->cancel = r->top->cancel.tokens ? CANCEL_TOKENS : CANCEL_ARMED;
    r->stats.cancel_planned++;
  }
  s->attempts = 0;
  s->drained = 0;
  s->retries = 0;
  if (s->fresh) {
    curl_easy_setopt(s->xfer.easy, CURLOPT_FRESH_CONNECT, 0L);
    s->fresh = 0;
  }

  plan_request(r, s);
  /* A body in one piece is handed to curl as is, which sends it with the headers in one write; a
   * body in pieces streams through the read callback. Neither copies it. */
  const char *fields = s->body.n == 1 ? s->body.seg[0].p : NULL;
  if (fields != s->postfields) {
    curl_easy_setopt(s->xfer.easy, CURLOPT_POSTFIELDS, fields);
    s->postfields = fields;
  }
  if ((curl_off_t)s->body.size != s->postsize) {
    curl_easy_setopt(s->xfer.easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->body.size);
    s->postsize = (curl_off_t)s->body.size;
  }

  s->sent_ns = uv_hrtime();
  vl_response_begin(&s->resp, r->cfg->stream, s->sent_ns);
  if (conv)
    vl__converse_listen(r, s);
  if (++r->in_flight > (int)r->stats.max_in_flight)
    r->stats.max_in_flight = (uint64_t)r->in_flight;
  vl_stats_sent(&r->stats, intended_ns, s->sent_ns, s->body.size, s->measured);
  vl_stats_images(&r->stats, s->n_images, s->image_bytes, s->image_pixels);
  if (r->results) {
    r->results[s->phase].sent++;
    r->results[s->phase].images += (uint64_t)s->n_images;
  }
  if (vl_transport_add(&r->tr, &s->xfer) != 0) {
    fprintf(stderr, "vlmload: cannot start a request: %s\n", curl_multi_strerror(r->tr.last_mcode));
    r->fatal = 1;
    /* It ends as a failed request so the log keeps one line per request sent. */
    vl__finish(r, s, CURLE_SEND_ERROR, VL__CLOSED_NONE);
    vl__runner_begin_stop(r, STOP_ERROR);
    return;
  }
  if (s->cancel == CANCEL_ARMED) {
    /* A delay from the send, on the loop's clock (milliseconds, rounded up). */
    s->cancel_at_ms = s->sent_ns / 1000000 + (s->cancel_after + 999) / 1000;
    vl_transport_cancel_at(&r->tr, &s->xfer, s->cancel_at_ms);
  }
  if (r->has_flush)
    vl_flush_sent(&r->flush);
}

/* The words a failure is known by: the server's own message, or curl's when no reply came. */
static const char *failure_words(const vl_slot_t *s, vl_errclass_t err, CURLcode result) {
  if (s->resp.error_msg[0])
    return s->resp.error_msg;
  if (err == VL_ERR_CONNECT || err == VL_ERR_CONNECT_TIMEOUT || err == VL_ERR_TIMEOUT ||
      err == VL_ERR_TRANSPORT)
    return result == CURLE_OK ? "" : curl_easy_strerror(result);
  return "";
}

void vl__slot_outcome(vl_slot_t *s, CURLcode result, int cancelled, vl_outcome_t *o) {
  vl_runner_t *r = s->run;
  long status = 0;
  curl_easy_getinfo(s->xfer.easy, CURLINFO_RESPONSE_CODE, &status);
  vl_errclass_t err = cancelled ? VL_ERR_CANCELLED : vl_response_finish(&s->resp, result, status);
  int closed = cancelled == VL__CLOSED_BY_USER;
  /* curl calls the pre-request callback once a connection is up (TLS included): a time-out
   * before any call is a time-out at the door, not a slow reply. */
  if (err == VL_ERR_TIMEOUT && s->attempts == 0)
    err = VL_ERR_CONNECT_TIMEOUT;
  const char *words = "", *detail = "";
  if (err != VL_ERR_NONE && err != VL_ERR_CANCELLED) {
    words = failure_words(s, err, result);
    detail = s->curl_err[0] && !s->resp.error_msg[0] ? s->curl_err : words;
  }
  *o = (vl_outcome_t){
      .id = s->id,
      .measured = s->measured,
      .probe = r->probing,
      .intended_ns = s->intended_ns,
      .sent_ns = s->sent_ns,
      .done_ns = uv_hrtime(),
      .first_token_ns = s->resp.t_first_token_ns,
      .first_content_ns = s->resp.t_first_content_ns,
      .status = status,
      .err = err,
      .token_events = s->resp.token_events,
      .itl_sum_ns = s->resp.itl_sum_ns,
      .prompt_tokens = s->resp.prompt_tokens,
      .completion_tokens = err == VL_ERR_NONE ? s->resp.completion_tokens : -1,
      .bytes_sent = s->body.size,
      .url = s->url,
      .images = s->n_images,
      .image_list = s->n_images ? s->image_info : NULL,
      .image_bytes = s->image_bytes,
      .retries = s->retries,
      .error_message = s->resp.error_msg[0] ? s->resp.error_msg : NULL,
      .words = words,
      .detail = detail,
      .conversation = s->conv ? s->conv->id : 0,
      .turn = s->conv ? s->conv->sent : 0,
      .input_tokens = s->input_tokens,
      .max_tokens = s->req_max_tokens,
      .closed = closed,
      .cancel_planned = s->cancel != CANCEL_NONE,
      .over_max_tokens =
          err == VL_ERR_NONE &&
          s->resp.completion_tokens > (s->req_max_tokens ? s->req_max_tokens : r->cfg->max_tokens),
      .srv = s->resp.srv,
  };
  /* A whole reply's time to first token is its end: only a stream has one of its own. */
  if (!r->cfg->stream && err == VL_ERR_NONE)
    o->first_token_ns = o->first_content_ns = 0;
  for (int k = 0; k < s->n_uniq; k++)
    vl_uniq_release(&r->uniq, &s->uniq[k]);
  s->n_uniq = 0;
}

void vl__slot_free(vl_slot_t *s) {
  vl_runner_t *r = s->run;
  s->busy = 0;
  s->conv = NULL;
  s->next_free = r->free_slots;
  r->free_slots = s;
  r->in_flight--;
}

/* Whether the last byte of the request may have been written on the connection that ended. */
static int sent_whole(vl_slot_t *s) {
  CURL *e = s->xfer.easy;
  long head = 0;
  curl_off_t body = 0;
  curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &head);
  if (head == 0)
    return 0; /* its first write failed: not a byte went out */
  if (s->attempts == 1) {
    curl_easy_getinfo(e, CURLINFO_SIZE_UPLOAD_T, &body);
    return body >= (curl_off_t)s->body.size;
  }
  /* curl zeroed that count for the send it meant to make again; a streamed body still tells
   * whether curl had read all of it. One handed over with the headers does not. */
  return s->postfields || s->drained || s->body.cur == s->body.n;
}

/* Whether the transfer that ended was on a reused connection that gave no reply byte before it
 * ended: the server closed it, or closed and reset it, as the request came. */
static int died_unanswered(vl_slot_t *s, CURLcode result) {
  CURL *e = s->xfer.easy;
  long connects = 0, head = 0;
  if (s->attempts > 1)
    return 1; /* curl asks to send again only after a reused connection gave no byte */
  if (s->attempts == 0)
    return 0; /* no connection was ever up */
  /* An end on the connection itself: a failure on the way to a new one happened after curl began
   * to send again, which zeroed the count sent_whole reads. */
  if (result != CURLE_SEND_ERROR && result != CURLE_RECV_ERROR && result != CURLE_GOT_NOTHING)
    return 0;
  curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects);
  curl_easy_getinfo(e, CURLINFO_HEADER_SIZE, &head);
  return connects == 0 && head == 0;
}

/* Whether the transfer that ended sent a request the server did not take as one, so that sending
 * it again cannot make the server see it twice. Either
 * - its connection was a reused one, and the reply was a 408: a server's idle time-out struck as
 *   the request came, and its 408 is the answer to no request (browsers send it again then); or
 * - its reused connection gave no reply byte before it ended, and either the request was not all
 *   written, or the server closed the connection before it took the request: its end of the
 *   stream came before it acknowledged the request, or a reset came, which a server's kernel sends
 *   for a request that reaches a socket closed unread (vl_transfer_t.closed_unread).
 * A request the server acknowledged on a reused connection that then ended by the server's end of
 * the stream alone, no reset following within a few round trips, is a failure: the server took it
 * and closed without a reply (the mock's reset fault). A server that aborts a request it took by
 * a reset sees that request twice, as a close that crossed it looks the same. */
static int never_taken(vl_slot_t *s, CURLcode result) {
  long connects = 0, status = 0;
  if (s->attempts == 1) {
    curl_easy_getinfo(s->xfer.easy, CURLINFO_RESPONSE_CODE, &status);
    if (status == 408) {
      curl_easy_getinfo(s->xfer.easy, CURLINFO_NUM_CONNECTS, &connects);
      return connects == 0;
    }
  }
  return died_unanswered(s, result) && (s->xfer.closed_unread || !sent_whole(s));
}

/* The request goes again at once on a new connection, keeping its intended start (the first
 * try's cost is part of its latency) and its place in flight. Either it was stopped before a byte
 * of it was written, on a connection holding a stale reply, or the server never took it
 * (never_taken). Returns 0, or -1 when it is not sent again (then it ends as what the last try
 * gave). */
static int resend(vl_runner_t *r, vl_slot_t *s) {
  s->stale = 0;
  if (s->retries >= RESENDS)
    return -1;
  s->retries++;
  s->attempts = 0;
  s->drained = 0;
  s->curl_err[0] = '\0';
  s->fresh = 1;
  curl_easy_setopt(s->xfer.easy, CURLOPT_FRESH_CONNECT, 1L);
  vl_body_rewind(&s->body);
  vl_response_begin(&s->resp, r->cfg->stream, s->sent_ns);
  if (vl_transport_add(&r->tr, &s->xfer) != 0)
    return -1;
  /* A close due keeps its time: the user does not wait longer for a second try. */
  if (s->cancel == CANCEL_ARMED)
    vl_transport_cancel_at(&r->tr, &s->xfer, s->cancel_at_ms);
  return 0;
}

int vl__slot_resend(vl_slot_t *s, CURLcode *result) {
  vl_runner_t *r = s->run;
  vl_transfer_t *x = &s->xfer;
  /* Timed out by the transport: said in the words curl would have used. */
  if (x->timed_out == VL_TRANSFER_CONNECT_TIMEOUT)
    snprintf(s->curl_err, sizeof(s->curl_err), "Connection timed out after %llu milliseconds",
             (unsigned long long)x->connect_timeout_ms);
  else if (x->timed_out)
    snprintf(s->curl_err, sizeof(s->curl_err),
             "Operation timed out after %llu milliseconds with %llu bytes received",
             (unsigned long long)x->timeout_ms, (unsigned long long)s->resp.bytes);
  if ((s->stale || (*result != CURLE_OPERATION_TIMEDOUT && never_taken(s, *result))) &&
      resend(r, s) == 0)
    return 1; /* still in flight */
  /* Said as what it was, not as curl's stopped second try or its give-up after five of them. */
  if (!s->stale && *result != CURLE_OPERATION_TIMEDOUT && died_unanswered(s, *result)) {
    *result = CURLE_GOT_NOTHING;
    s->curl_err[0] = '\0'; /* curl's words were of its second try, stopped by vlmload */
  }
  return 0;
}
