#include "vlmload/runner.h"
#include "vlmload/body.h"
#include "vlmload/common.h"
#include "vlmload/flush.h"
#include "vlmload/imagepool.h"
#include "vlmload/monitor.h"
#include "vlmload/pace.h"
#include "vlmload/plan.h"
#include "vlmload/response.h"
#include "vlmload/rng.h"
#include "vlmload/stats.h"
#include "vlmload/text.h"
#include "vlmload/ticker.h"
#include "vlmload/transport.h"
#include "vlmload/uniq.h"

#include <curl/curl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

typedef struct vl_runner_s vl_runner_t;

/* Memory the unique-image buffers may take. */
#define UNIQ_BUDGET ((size_t)1 << 30)

/* Memory shared by all slots' curl download buffers (replies are small: JSON or SSE chunks). */
#define DOWNLOAD_BUDGET ((size_t)4 << 20)

/* Memory shared by all slots' curl upload buffers. */
#define UPLOAD_BUDGET ((size_t)32 << 20)

/* A request slot: one easy handle and everything one request in flight needs, allocated once and
 * reused for every request the slot carries. */
typedef struct vl_slot_s {
  vl_transfer_t xfer; /* its easy handle; done is on_done */
  vl_runner_t *run;
  uint64_t id;
  uint64_t intended_ns, sent_ns;
  int measured;
  int busy;
  int attempts; /* times curl was about to send this request (CURLOPT_PREREQFUNCTION) */
  int stale;    /* the attempt was stopped: its connection held a reply to nothing it sent */
  int retries;  /* of this request, on fresh connections after such stops */
  int fresh;    /* CURLOPT_FRESH_CONNECT is set on the handle */
  char curl_err[CURL_ERROR_SIZE]; /* CURLOPT_ERRORBUFFER: why a transfer failed, in curl's words */
  int url;                        /* index of its server among the distinct URLs */
  int phase;                      /* the phase that sent it */
  int n_images;                   /* images the request carries */
  int n_uniq;                     /* of those, unique images to give back when it finishes */
  uint64_t image_bytes;
  vl_uniq_img_t *uniq; /* VL_MAX_IMAGES of them, with --unique-images only */
  vl_body_t body;
  vl_response_t resp;
  struct vl_slot_s *next_free;
} vl_slot_t;

typedef enum {
  STOP_NONE = 0,
  STOP_REQUESTS,
  STOP_DURATION,
  STOP_SIGNAL,
  STOP_ERROR,
  STOP_FAILING
} stop_t;

static const char *const stop_names[] = {"none",   "requests", "duration",
                                         "signal", "error",    "fail_fast"};

/* Failures alike, with none succeeding, that stop a run: a server that is not there, a route or
 * model it does not have, a key it refuses, fails every request the same way from the first. */
#define FAIL_FAST_N 5

struct vl_runner_s {
  const vl_config_t *cfg;
  const vl_prompts_t *prompts;
  vl_report_t *rep;
  uv_loop_t loop;
  vl_transport_t tr;
  vl_ticker_t pace;      /* next arrival */
  uv_timer_t tick_timer; /* one timeline row per second */
  uv_timer_t stop_timer; /* --duration, then --grace */
  uv_signal_t sig_int, sig_term;
  vl_slot_t *slots;
  int n_slots;
  vl_slot_t *free_slots;
  int in_flight;
  vl_pace_t sched;
  int closed_loop;
  const vl_config_t *top; /* the run's configuration; cfg is the current phase's */
  vl_plan_t *plans;       /* one per phase */
  int n_phases, phase;
  uint64_t phase_t0_ns;     /* start of the current phase's schedule */
  uint64_t phase_first_id;  /* its first request id */
  uint64_t phase_paused_ns; /* its admission paused for drained flushes so far */
  int cap;                  /* its limit on requests in flight */
  vl_phase_result_t *results;
  const vl_imagepool_t *pool; /* NULL: text only */
  vl_uniq_t uniq;
  int has_uniq;
  struct curl_slist *headers;
  const char *accept_encoding; /* CURLOPT_ACCEPT_ENCODING: NULL, "" (all) or the user's list */
  int stale_check;   /* plain HTTP/1.1: look for stale replies before each send on a reused
                        connection */
  char **full_urls;  /* cfg->urls[i] + endpoint */
  int *url_distinct; /* index of urls[i] among the distinct URLs */
  vl_stats_t stats;
  uint64_t t0_ns;
  int64_t wall0_ms;
  uint64_t next_id;
  int admitting;       /* new requests may start */
  int blocked_counted; /* the arrival now due was already counted as delayed */
  stop_t stop;
  int signals;
  int closing;
  int fatal;
  uint64_t stop_ns; /* when admission stopped */
  uint64_t load_ns; /* t0 to stop_ns, less the pauses for drained flushes before it */
  vl_monitor_t mon;
  int has_mon;
  /* Cache flushes. */
  int has_flush;
  vl_flush_t flush;
  /* Failing fast (not with --keep-going): until a request succeeds, how the first ones failed. */
  int ff_open;          /* still watching: nothing succeeded and every failure was alike */
  int ff_n;             /* failures alike so far */
  int ff_stop;          /* the run is to stop once the current completion is handled */
  vl_errclass_t ff_err; /* their class and status */
  long ff_status;
  char ff_line[1400]; /* what the user is told */
};

static void admit(vl_runner_t *r);
static void cancel_all(vl_runner_t *r);
static void begin_stop(vl_runner_t *r, stop_t why);
static void maybe_finish(vl_runner_t *r);

/* Whether admission is paused for a drained flush. */
static int paused(const vl_runner_t *r) {
  return r->has_flush && vl_flush_paused(&r->flush);
}

/* An output file stopped taking writes (the report said which and why): what the run measures
 * from here would be lost, so it stops admitting, and ends with status 1. */
static void output_failed(vl_runner_t *r) {
  r->fatal = 1;
  begin_stop(r, STOP_ERROR);
}

static vl_snapshot_t snapshot(const vl_runner_t *r) {
  vl_snapshot_t s;
  s.now_ns = uv_hrtime();
  s.t0_ns = r->t0_ns;
  s.wall0_ms = r->wall0_ms;
  s.in_flight = r->in_flight;
  s.mon = r->has_mon ? &r->mon : NULL;
  s.phase = !r->admitting                          ? "stopping"
            : paused(r)                            ? "flush"
            : r->stats.total.sent < r->cfg->warmup ? "warmup"
            : r->cfg->phase_name                   ? r->cfg->phase_name
                                                   : "measure";
  return s;
}

/* CURLOPT_WRITEFUNCTION: reply bytes. Returning less than given aborts the transfer. */
static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  vl_slot_t *slot = ud;
  size_t len = size * n;
  if (!slot->resp.status) {
    curl_easy_getinfo(slot->xfer.easy, CURLINFO_RESPONSE_CODE, &slot->resp.status);
    const char *ct = NULL;
    curl_easy_getinfo(slot->xfer.easy, CURLINFO_CONTENT_TYPE, &ct);
    slot->resp.json_ctype = ct && vl_response_ctype_json(ct);
  }
  if (vl_response_write(&slot->resp, p, len, uv_hrtime()) != 0)
    return 0;
  return len;
}

/* Times one request is tried again after its kept-alive connection was found holding a stale
 * reply; the try after the last is counted as a transport failure. */
#define STALE_RETRIES 3

/* CURLOPT_PREREQFUNCTION: curl is about to send the request on a connection. A second call for the
 * same request means curl found its kept-alive connection closed without a reply and would send
 * the request again on a new one. A load tester must not send a request twice behind the user's
 * back, nor hide that the server dropped one: abort, and count it as a transport failure.
 *
 * A reused connection that already holds bytes before anything is written carries a reply to no
 * request of ours: servers send 408 when they close an idle keep-alive connection. curl 7.88 only
 * drops a cached connection whose peer closed with nothing unread, so it would read that 408 as
 * this request's reply. Stop here, before a byte is written; on_done sends the request again on a
 * new connection (curl closes this one, as the transfer ended before its reply). */
static int on_prereq(void *ud, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                     int conn_local_port) {
  vl_slot_t *slot = ud;
  if (++slot->attempts > 1)
    return CURL_PREREQFUNC_ABORT;
  if (slot->run->stale_check) {
    curl_socket_t fd = vl_transport_reused_fd(&slot->run->tr, conn_local_port, conn_primary_port);
    if (fd != CURL_SOCKET_BAD && vl_transport_unread(fd)) {
      slot->stale = 1;
      return CURL_PREREQFUNC_ABORT;
    }
  }
  return CURL_PREREQFUNC_OK;
}

static void on_done(vl_transfer_t *x, CURLcode result);

static int setup_slot(vl_runner_t *r, vl_slot_t *s) {
  const vl_config_t *c = r->cfg;
  s->run = r;
  vl_response_init(&s->resp, c->max_response);
  s->resp.native = c->api == VL_API_NATIVE;
  s->xfer.easy = curl_easy_init();
  s->xfer.done = on_done;
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
  SET(CURLOPT_SEEKFUNCTION, vl_body_seek);
  SET(CURLOPT_SEEKDATA, &s->body);
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
  SET(CURLOPT_TIMEOUT_MS, (long)(c->timeout_us / 1000));
  SET(CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_timeout_us / 1000));
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
  if (rc != CURLE_OK)
    return VL_ECURL;
  return vl_transport_prepare(&r->tr, &s->xfer);
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

static int build_headers(vl_runner_t *r) {
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
 * in the order requests leave instead of from the plan's pool indices. */
static void plan_request(vl_runner_t *r, vl_slot_t *s) {
  vl_request_plan_t rp;
  vl_plan_t *plan = &r->plans[r->phase];
  vl_plan_draw(plan, s->id, &rp);
  s->n_images = rp.n_images;
  s->n_uniq = 0;
  s->image_bytes = 0;
  vl_seg_t segs[VL_MAX_IMAGES];
  for (int k = 0; k < rp.n_images; k++) {
    size_t idx = rp.image[k];
    if (r->has_uniq) {
      if (!s->uniq)
        s->uniq = vl_xcalloc(VL_MAX_IMAGES, sizeof(vl_uniq_img_t));
      if (vl_uniq_take(&r->uniq, &s->uniq[k]) != 0)
        r->stats.images_late++;
      segs[k] = vl_uniq_seg(&s->uniq[k]);
      idx = s->uniq[k].pool_index;
      s->image_bytes += s->uniq[k].bytes;
      s->n_uniq++;
    } else {
      segs[k] = vl_imagepool_seg(r->pool, idx);
      s->image_bytes += r->pool->img[idx].bytes;
    }
    r->stats.per_pool[idx]++;
  }
  vl_body_fill(&s->body, vl_plan_template(plan, &rp), segs);
}

/* Starts request `id`, whose place on the schedule is intended_ns, in a free slot. */
static void start_request(vl_runner_t *r, uint64_t intended_ns) {
  vl_slot_t *s = r->free_slots;
  r->free_slots = s->next_free;
  s->busy = 1;
  s->id = r->next_id++;
  s->phase = r->phase;
  /* Several servers take requests in turn, by id, so shards agree on who gets which. */
  if (r->cfg->n_urls > 1) {
    int u = (int)(s->id % (uint64_t)r->cfg->n_urls);
    s->url = r->url_distinct[u];
    curl_easy_setopt(s->xfer.easy, CURLOPT_URL, r->full_urls[u]);
  }
  s->intended_ns = intended_ns;
  s->measured = s->id >= r->cfg->warmup;
  s->attempts = 0;
  s->retries = 0;
  if (s->fresh) {
    curl_easy_setopt(s->xfer.easy, CURLOPT_FRESH_CONNECT, 0L);
    s->fresh = 0;
  }

  plan_request(r, s);
  /* A body in one piece is handed to curl as is, which sends it with the headers in one write; a
   * body in pieces streams through the read callback. Neither copies it. */
  curl_easy_setopt(s->xfer.easy, CURLOPT_POSTFIELDS, s->body.n == 1 ? s->body.seg[0].p : NULL);
  curl_easy_setopt(s->xfer.easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->body.size);

  s->sent_ns = uv_hrtime();
  vl_response_begin(&s->resp, r->cfg->stream, s->sent_ns);
  r->in_flight++;
  vl_stats_sent(&r->stats, intended_ns, s->sent_ns, s->body.size, s->measured);
  vl_stats_images(&r->stats, s->n_images, s->image_bytes);
  if (r->results) {
    r->results[s->phase].sent++;
    r->results[s->phase].images += (uint64_t)s->n_images;
  }
  if (vl_transport_add(&r->tr, &s->xfer) != 0) {
    fprintf(stderr, "vlmload: cannot start a request: %s\n", curl_multi_strerror(r->tr.last_mcode));
    r->fatal = 1;
    /* Account for it as a failed request so the log keeps one line per request sent. */
    vl_outcome_t o = {.id = s->id,
                      .measured = s->measured,
                      .intended_ns = intended_ns,
                      .sent_ns = s->sent_ns,
                      .done_ns = uv_hrtime(),
                      .err = VL_ERR_TRANSPORT,
                      .prompt_tokens = -1,
                      .completion_tokens = -1,
                      .bytes_sent = s->body.size};
    vl_stats_done(&r->stats, &o);
    vl_snapshot_t snap = snapshot(r);
    (void)vl_report_request(r->rep, &o, &snap); /* the run stops here anyway */
    s->busy = 0;
    s->next_free = r->free_slots;
    r->free_slots = s;
    r->in_flight--;
    begin_stop(r, STOP_ERROR);
    return;
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

/* What to do about a failure every first request met, by its kind. */
static const char *fail_advice(vl_errclass_t err, long status, const char *words) {
  int about_model = strstr(words, "model") || strstr(words, "Model");
  if (err == VL_ERR_CONNECT)
    return "start the server or fix --url";
  if (err == VL_ERR_CONNECT_TIMEOUT)
    return "the server does not accept connections in time: is it up, and is --url its port?";
  if (status == 401 || status == 403)
    return "give a key the server takes with --api-key (or $OPENAI_API_KEY)";
  if (about_model)
    return "name a model the server serves with --model (GET /v1/models lists them)";
  if (status == 404)
    return "the server has no such route: check --url and --endpoint (and --api)";
  if (status == 405)
    return "the route does not take POST: check --endpoint";
  return "the server refuses these requests as they are: check --endpoint, --api and --model";
}

/* Watches the first outcomes of a run: FAIL_FAST_N failures alike (the same class and status) of
 * the kinds a wrong target gives, before any success, stop the run with one line in the server's
 * words. Any success, or a failure of another kind, ends the watch. */
static void fail_fast(vl_runner_t *r, vl_slot_t *s, vl_errclass_t err, long status,
                      CURLcode result) {
  if (!r->ff_open || err == VL_ERR_CANCELLED)
    return;
  int door = err == VL_ERR_CONNECT || err == VL_ERR_CONNECT_TIMEOUT || err == VL_ERR_HTTP_4XX;
  if (!door || (r->ff_n && (err != r->ff_err || status != r->ff_status))) {
    r->ff_open = 0;
    return;
  }
  r->ff_err = err;
  r->ff_status = status;
  if (++r->ff_n < FAIL_FAST_N)
    return;
  r->ff_open = 0;
  r->ff_stop = 1;
  const char *words =
      s->curl_err[0] && !s->resp.error_msg[0] ? s->curl_err : failure_words(s, err, result);
  char shown[4 * 201], first[201];
  snprintf(first, sizeof(first), "%.*s", (int)strcspn(words, "\r\n"), words);
  vl_text_shown(shown, sizeof(shown), first);
  const char *url = r->full_urls[s->url < r->cfg->n_urls ? s->url : 0];
  if (status)
    snprintf(r->ff_line, sizeof(r->ff_line),
             "the first %d requests all failed: POST %s answered HTTP %ld%s%s%s; %s "
             "(--keep-going sends anyway)",
             FAIL_FAST_N, url, status, *shown ? ": \"" : "", shown, *shown ? "\"" : "",
             fail_advice(err, status, words));
  else
    snprintf(r->ff_line, sizeof(r->ff_line),
             "the first %d requests all failed: %s: %s; %s (--keep-going sends anyway)",
             FAIL_FAST_N, url, shown, fail_advice(err, status, words));
}

static void finish_slot(vl_runner_t *r, vl_slot_t *s, CURLcode result, int cancelled) {
  long status = 0;
  curl_easy_getinfo(s->xfer.easy, CURLINFO_RESPONSE_CODE, &status);
  vl_errclass_t err = cancelled ? VL_ERR_CANCELLED : vl_response_finish(&s->resp, result, status);
  /* curl calls the pre-request callback once a connection is up (TLS included): a time-out
   * before any call is a time-out at the door, not a slow reply. */
  if (err == VL_ERR_TIMEOUT && s->attempts == 0)
    err = VL_ERR_CONNECT_TIMEOUT;
  if (err != VL_ERR_NONE && err != VL_ERR_CANCELLED) {
    const char *words = failure_words(s, err, result);
    if (*words)
      vl_stats_message(&r->stats, err, status, words);
  }
  if (err == VL_ERR_NONE)
    r->ff_open = 0;
  else
    fail_fast(r, s, err, status, result);
  vl_outcome_t o = {
      .id = s->id,
      .measured = s->measured,
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
      .images = s->n_images,
      .image_bytes = s->image_bytes,
      .retries = s->retries,
      .error_message = s->resp.error_msg[0] ? s->resp.error_msg : NULL,
  };
  for (int k = 0; k < s->n_uniq; k++)
    vl_uniq_release(&r->uniq, &s->uniq[k]);
  s->n_uniq = 0;
  if (!r->cfg->stream && err == VL_ERR_NONE)
    o.first_token_ns = o.first_content_ns = 0;
  /* Only a request that succeeded feeds the run's inter-token gaps. */
  if (err == VL_ERR_NONE && s->measured)
    vl_response_record_itl(&s->resp, &r->stats.itl);
  o.url = s->url;
  vl_stats_done(&r->stats, &o);
  if (r->results && err != VL_ERR_CANCELLED) {
    vl_phase_result_t *ph = &r->results[s->phase];
    if (err == VL_ERR_NONE) {
      double tpot;
      ph->ok++;
      vl_hist_record(&ph->e2e, (int64_t)(o.done_ns - o.intended_ns) / 1000);
      ph->e2e_sent_sum_s += (double)(o.done_ns - o.sent_ns) / 1e9;
      if (o.first_token_ns)
        vl_hist_record(&ph->ttft, (int64_t)(o.first_token_ns - o.sent_ns) / 1000);
      if (vl_stats_tpot_us(&o, &tpot))
        vl_hist_record(&ph->tpot, llround(tpot));
      if (o.token_events > 1) {
        ph->itl_sum_ns += o.itl_sum_ns;
        ph->itl_gaps += o.token_events - 1;
      }
    } else {
      ph->failed++;
    }
  }
  vl_snapshot_t snap = snapshot(r);
  snap.in_flight = r->in_flight - 1;
  int lost = vl_report_request(r->rep, &o, &snap);
  s->busy = 0;
  s->next_free = r->free_slots;
  r->free_slots = s;
  r->in_flight--;
  if (lost)
    output_failed(r);
}

/* The request was stopped before a byte of it was written, on a connection holding a stale reply:
 * it goes again at once on a new connection, keeping its intended start (the retry's cost is part
 * of its latency) and its place in flight. Returns 0, or -1 when it is not retried (then it ends
 * as a transport failure: no reply that was its own came). */
static int retry_stale(vl_runner_t *r, vl_slot_t *s) {
  s->stale = 0;
  if (s->retries >= STALE_RETRIES)
    return -1;
  s->retries++;
  r->stats.retried++;
  s->attempts = 0;
  s->fresh = 1;
  curl_easy_setopt(s->xfer.easy, CURLOPT_FRESH_CONNECT, 1L);
  vl_body_rewind(&s->body);
  vl_response_begin(&s->resp, r->cfg->stream, s->sent_ns);
  return vl_transport_add(&r->tr, &s->xfer) == 0 ? 0 : -1;
}

static void on_done(vl_transfer_t *x, CURLcode result) {
  vl_slot_t *s = vl_container_of(x, vl_slot_t, xfer);
  vl_runner_t *r = s->run;
  if (s->stale && retry_stale(r, s) == 0)
    return; /* still in flight */
  finish_slot(r, s, result, 0);
  if (r->ff_stop) {
    /* Every request so far failed alike: more would fail the same way. */
    r->ff_stop = 0;
    vl_report_say(r->rep, r->ff_line);
    begin_stop(r, STOP_FAILING);
    cancel_all(r);
    if (r->has_flush)
      vl_flush_abort(&r->flush);
  }
  if (r->has_flush)
    vl_flush_finished(&r->flush);
  if (r->admitting && !paused(r))
    admit(r);
  else
    maybe_finish(r);
}

/* A drained flush is due: admission stops; the flush goes out once nothing is in flight. */
static void on_flush_pause(vl_flush_t *f) {
  vl_runner_t *r = f->data;
  vl_ticker_stop(&r->pace);
}

static void on_flush_done(vl_flush_t *f, const vl_flush_record_t *rec, uint64_t paused_ns) {
  vl_runner_t *r = f->data;
  r->stats.flushes++;
  r->stats.flush_skipped = f->skipped;
  vl_snapshot_t snap = snapshot(r);
  if (vl_report_flush(r->rep, rec, &snap) != 0)
    output_failed(r);
  if (paused_ns) {
    /* Resume; arrivals not yet taken move back by the pause, so the rate holds outside it. */
    r->stats.paused_ns += paused_ns;
    r->stats.flush_pauses++;
    r->phase_paused_ns += paused_ns;
    if (!r->closed_loop)
      vl_pace_shift(&r->sched, paused_ns);
  }
  if (r->admitting)
    admit(r);
  else
    maybe_finish(r);
}

static void flush_load(const vl_flush_t *f, uint64_t *sent, uint64_t *finished, int *in_flight) {
  const vl_runner_t *r = f->data;
  *sent = r->stats.total.sent;
  *finished = r->stats.total.completed;
  *in_flight = r->in_flight;
}

static const vl_flush_hooks_t flush_hooks = {on_flush_pause, on_flush_done, flush_load};

static void on_pace(vl_ticker_t *t) {
  admit(vl_container_of(t, vl_runner_t, pace));
}

/* Whether request id is this shard's: shards take every shard_n-th request of the shared stream. */
static int mine(const vl_runner_t *r, uint64_t id) {
  return r->cfg->shard_n <= 1 || id % r->cfg->shard_n == r->cfg->shard_i;
}

/* When the current phase stops admitting: its start plus --duration, plus the time admission
 * was paused for drained flushes, so a phase sends its planned requests whatever the pauses. */
static uint64_t phase_deadline(const vl_runner_t *r) {
  if (!r->cfg->duration_us)
    return UINT64_MAX;
  return r->phase_t0_ns + r->cfg->duration_us * 1000 + r->phase_paused_ns;
}

static int count_reached(const vl_runner_t *r) {
  return r->cfg->requests && r->next_id - r->phase_first_id >= r->cfg->requests;
}

/* Whether a request can start now: a slot is free and the phase's limit is not reached. */
static int have_slot(const vl_runner_t *r) {
  return r->free_slots && r->in_flight < r->cap;
}

static void start_phase(vl_runner_t *r, int i);

/* The current phase is over: the next one starts at once, or the run stops. Returns whether
 * admission goes on. */
static int end_phase(vl_runner_t *r, stop_t why) {
  if (r->results) {
    r->results[r->phase].seconds = (double)(uv_hrtime() - r->phase_t0_ns) / 1e9;
    r->results[r->phase].paused_s = (double)r->phase_paused_ns / 1e9;
  }
  if (r->phase + 1 < r->n_phases) {
    start_phase(r, r->phase + 1);
    return 1;
  }
  begin_stop(r, why);
  return 0;
}

static void admit(vl_runner_t *r) {
  while (r->admitting && !paused(r)) {
    const vl_config_t *c = r->cfg;
    uint64_t deadline = phase_deadline(r);
    while (!mine(r, r->next_id)) {
      if (!r->closed_loop)
        vl_pace_take(&r->sched);
      r->next_id++;
    }
    if (count_reached(r)) {
      if (end_phase(r, STOP_REQUESTS))
        continue;
      return;
    }
    uint64_t now = uv_hrtime();
    if (r->closed_loop) {
      if (now >= deadline) {
        if (end_phase(r, STOP_DURATION))
          continue;
        return;
      }
      if (!have_slot(r))
        return;
      r->stats.arrivals++;
      start_request(r, now);
      continue;
    }
    uint64_t t = vl_pace_next(&r->sched);
    if (t >= deadline) {
      /* The next arrival falls past --duration; stop when its time comes, not before. */
      if (now >= deadline) {
        if (end_phase(r, STOP_DURATION))
          continue;
        return;
      }
      t = deadline;
    }
    if (t > now) {
      if (vl_ticker_arm(&r->pace, t) != 0) {
        fprintf(stderr, "vlmload: cannot arm the arrival timer\n");
        r->fatal = 1;
        begin_stop(r, STOP_ERROR);
      }
      return;
    }
    if (!have_slot(r)) {
      if (now >= deadline) {
        /* Arrivals still waiting for a slot at the deadline are never sent. */
        if (end_phase(r, STOP_DURATION))
          continue;
        return;
      }
      if (c->on_full == VL_ONFULL_DROP) {
        vl_pace_take(&r->sched);
        r->stats.arrivals++;
        r->stats.dropped++;
        r->next_id++;
        continue;
      }
      if (!r->blocked_counted) {
        r->stats.delayed++;
        r->blocked_counted = 1;
      }
      return; /* a completion calls admit() again */
    }
    r->blocked_counted = 0;
    r->stats.arrivals++;
    start_request(r, vl_pace_take(&r->sched));
  }
}

static void close_cb_noop(uv_handle_t *h) {}

static void on_transport_closed(vl_transport_t *t) {}

/* Everything is done: close every handle so uv_run returns. */
static void shutdown_loop(vl_runner_t *r) {
  if (r->closing)
    return;
  r->closing = 1;
  vl_ticker_close(&r->pace, NULL);
  uv_close((uv_handle_t *)&r->tick_timer, close_cb_noop);
  uv_close((uv_handle_t *)&r->stop_timer, close_cb_noop);
  uv_close((uv_handle_t *)&r->sig_int, close_cb_noop);
  uv_close((uv_handle_t *)&r->sig_term, close_cb_noop);
  if (r->has_flush)
    vl_flush_close(&r->flush);
  if (r->has_uniq)
    vl_uniq_close(&r->uniq, NULL);
  if (r->has_mon)
    vl_monitor_close(&r->mon, NULL);
  vl_transport_close(&r->tr, on_transport_closed);
}

static void maybe_finish(vl_runner_t *r) {
  if (!r->admitting && r->in_flight == 0 && !paused(r) && !(r->has_flush && r->flush.busy))
    shutdown_loop(r);
}

/* Aborts every request in flight, logging each as cancelled. */
static void cancel_all(vl_runner_t *r) {
  for (int i = 0; i < r->n_slots; i++) {
    vl_slot_t *s = &r->slots[i];
    if (!s->busy)
      continue;
    vl_transport_remove(&r->tr, &s->xfer);
    finish_slot(r, s, CURLE_ABORTED_BY_CALLBACK, 1);
  }
}

static void on_grace(uv_timer_t *h) {
  vl_runner_t *r = vl_container_of(h, vl_runner_t, stop_timer);
  cancel_all(r);
  maybe_finish(r);
}

static void begin_stop(vl_runner_t *r, stop_t why) {
  if (!r->admitting)
    return;
  r->admitting = 0;
  r->stop = why;
  r->stop_ns = uv_hrtime();
  r->load_ns = r->stop_ns - r->t0_ns - r->stats.paused_ns;
  if (paused(r))
    r->load_ns -= r->stop_ns - r->flush.pause_ns;
  vl_ticker_stop(&r->pace);
  uv_timer_stop(&r->stop_timer);
  /* A drained flush not yet begun is dropped on Ctrl-C; one under way finishes. */
  if (r->has_flush)
    vl_flush_stop(&r->flush, why == STOP_SIGNAL);
  if (why == STOP_SIGNAL && r->in_flight > 0)
    uv_timer_start(&r->stop_timer, on_grace, r->cfg->grace_us / 1000, 0);
  maybe_finish(r);
}

static void on_signal(uv_signal_t *h, int signum) {
  vl_runner_t *r = h->data;
  r->signals++;
  if (r->signals == 1) {
    if (r->cfg->progress)
      fprintf(stderr, "\nvlmload: stopping: waiting up to %.1fs for %d in flight (again to quit)\n",
              (double)r->cfg->grace_us / 1e6, r->in_flight);
    begin_stop(r, STOP_SIGNAL);
    return;
  }
  r->stop = STOP_SIGNAL;
  r->admitting = 0;
  cancel_all(r);
  if (r->has_flush)
    vl_flush_abort(&r->flush);
  maybe_finish(r);
}

static void on_duration(uv_timer_t *h) {
  vl_runner_t *r = vl_container_of(h, vl_runner_t, stop_timer);
  /* libuv's timer counts milliseconds and may fire a little early: in the open loop, admit()
   * sends what is due before the deadline and stops at the deadline itself. */
  if (paused(r) || !r->admitting)
    return; /* resuming after the flush looks at the deadline again */
  uint64_t now = uv_hrtime(), deadline = phase_deadline(r);
  if (now < deadline) {
    uv_timer_start(&r->stop_timer, on_duration, (deadline - now) / 1000000 + 1, 0);
    return;
  }
  if (r->closed_loop && !end_phase(r, STOP_DURATION))
    return;
  admit(r);
}

static void on_tick(uv_timer_t *h) {
  vl_runner_t *r = vl_container_of(h, vl_runner_t, tick_timer);
  vl_snapshot_t snap = snapshot(r);
  if (vl_report_tick(r->rep, &r->stats, &snap) != 0)
    output_failed(r);
  vl_stats_interval_reset(&r->stats);
  /* The next row shows what this round reads; rounds never block the loop. */
  if (r->has_mon)
    vl_monitor_sample(&r->mon);
}

/* Reads every memory series once before the load starts, so the timeline's columns are known and
 * its first row has values (for at most 5 s). */
static void first_sample(vl_runner_t *r) {
  if (r->has_mon) {
    uint64_t until = uv_hrtime() + 5000000000ull;
    vl_monitor_sample(&r->mon);
    while (r->mon.pending > 0 && uv_hrtime() < until)
      uv_run(&r->loop, UV_RUN_ONCE);
    /* A --monitor-pid-match that finds nothing yet is said now, not discovered at the end. */
    const vl_monitor_spec_t *spec = &r->cfg->monitor;
    vl_monitor_proc_info_t info;
    for (int i = spec->n_pids; i < spec->n_pids + spec->n_matches; i++)
      if (vl_monitor_proc_info(&r->mon, i, &info) == 0 && !info.pid)
        fprintf(stderr,
                "vlmload: --monitor-pid-match '%s': no process matches yet; looking again every "
                "%.3gs (the summary says if none ever did)\n",
                spec->matches[i - spec->n_pids].regex, (double)spec->rescan_ms / 1e3);
  }
  vl_report_columns(r->rep, r->has_mon ? &r->mon : NULL);
}

static char *join_url(const char *base, const char *path) {
  size_t n = strlen(base) + strlen(path) + 1;
  char *u = vl_xmalloc(n);
  snprintf(u, n, "%s%s", base, path);
  return u;
}

/* Starts the unique-image producer: enough buffers for the images requests in flight hold plus a
 * queue ahead of them, within a memory budget (past it, takes are late and counted). */
static int start_uniq(vl_runner_t *r) {
  const vl_config_t *c = r->cfg;
  vl_uniq_opts_t o = {0};
  /* Half a second of images ahead of the schedule, within reason. */
  o.depth = (int)VL_MIN(VL_MAX(c->rate * c->images_hi / 2, 32.0), 512.0);
  size_t per = r->pool->max_bytes / 3 * 4 + 256;
  size_t want = (size_t)o.depth + 16 + (size_t)r->n_slots * (size_t)c->images_hi;
  size_t budget = VL_MAX((size_t)(UNIQ_BUDGET / per), (size_t)o.depth + 32);
  o.capacity = (int)VL_MIN(want, budget);
  o.quality = c->jpeg_quality;
  /* Stamps differ between runs (wall clock) and between shards (high bits). */
  o.first_stamp = ((uint64_t)vl_wall_ms() << 20) ^ (c->shard_i << 56);
  int rc = vl_uniq_init(&r->uniq, &r->loop, r->pool, &o);
  if (rc == 0)
    r->has_uniq = 1;
  return rc;
}

/* Lets the producer fill its queue before the schedule starts (for at most 10 s), so the first
 * requests do not find it empty. */
static void prefill_uniq(vl_runner_t *r) {
  uint64_t until = uv_hrtime() + 10000000000ull;
  int want = VL_MIN(r->uniq.o.depth, r->uniq.o.capacity);
  while (r->uniq.ready < want && uv_hrtime() < until)
    uv_run(&r->loop, UV_RUN_ONCE);
}

/* The configuration of phase i: the run's own when it has no phases. */
static const vl_config_t *phase_cfg(const vl_runner_t *r, int i) {
  return r->top->n_phases ? &r->top->phases[i] : r->top;
}

/* A phase's limit on requests in flight, for this shard. */
static int phase_cap(const vl_config_t *c) {
  return (int)(((uint64_t)c->concurrency + c->shard_n - 1) / c->shard_n);
}

static uint64_t planned_arrivals(const vl_config_t *c);

static void start_phase(vl_runner_t *r, int i) {
  const vl_config_t *c = phase_cfg(r, i);
  uint64_t now = uv_hrtime();
  r->phase = i;
  r->cfg = c;
  r->phase_t0_ns = now;
  r->phase_first_id = r->next_id;
  r->phase_paused_ns = 0;
  r->cap = VL_MIN(phase_cap(c), r->n_slots);
  r->closed_loop = c->rate == 0;
  r->blocked_counted = 0;
  vl_ticker_stop(&r->pace);
  if (!r->closed_loop) {
    /* Each phase draws its gaps from a stream of its own. */
    vl_pace_init(&r->sched, c->arrival, c->rate, c->arrival_cv,
                 c->seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull), now, planned_arrivals(c));
    if (c->ramp_to >= 0) {
      double secs = c->duration_us ? (double)c->duration_us / 1e6
                                   : (double)c->requests / ((c->rate + c->ramp_to) / 2);
      vl_pace_ramp(&r->sched, c->ramp_to, secs);
    }
  }
  uv_timer_stop(&r->stop_timer);
  if (c->duration_us)
    uv_timer_start(&r->stop_timer, on_duration, c->duration_us / 1000, 0);
  if (r->has_flush)
    vl_flush_phase(&r->flush, c);
  if (r->results) {
    vl_phase_result_t *ph = &r->results[i];
    ph->name = c->phase_name;
    ph->target_rate = c->rate / (double)c->shard_n;
    ph->ramp_to = c->ramp_to;
    ph->max_concurrency = c->concurrency;
    vl_snapshot_t snap = snapshot(r);
    int lost = vl_report_phase(r->rep, i, c->phase_name, &snap);
    if (!c->quiet && c->progress)
      fprintf(stderr, "\nvlmload: phase %d of %d: %s\n", i + 1, r->n_phases, c->phase_name);
    if (lost)
      output_failed(r);
  }
}

/* The number of arrivals a run is planned for: --requests, or what --duration holds at --rate,
 * whichever is smaller. Poisson arrivals are spread over exactly that many (see pace.h). */
static uint64_t planned_arrivals(const vl_config_t *c) {
  uint64_t by_time = c->duration_us ? (uint64_t)llround(c->rate * (double)c->duration_us / 1e6) : 0;
  if (c->requests && by_time)
    return VL_MIN(c->requests, by_time);
  return c->requests ? c->requests : by_time;
}

static int init_runner(vl_runner_t *r) {
  const vl_config_t *c = r->cfg;
  int rc;
  if (uv_loop_init(&r->loop) != 0)
    return VL_EUV;
  if ((rc = vl_stats_init(&r->stats)) != 0)
    return rc;
  if ((rc = build_headers(r)) != 0)
    return rc;
  r->stale_check = !c->http2;
  for (int i = 0; i < c->n_urls; i++)
    if (strncmp(c->urls[i], "http://", 7) != 0)
      r->stale_check = 0;
  r->full_urls = vl_xcalloc((size_t)c->n_urls, sizeof(char *));
  r->url_distinct = vl_xcalloc((size_t)c->n_urls, sizeof(int));
  for (int i = 0; i < c->n_urls; i++) {
    r->full_urls[i] = join_url(c->urls[i], c->endpoint);
    r->url_distinct[i] = vl_config_url_index(c, i);
  }
  if ((rc = vl_stats_init_urls(&r->stats, vl_config_distinct_urls(c))) != 0)
    return rc;
  if (r->pool && (rc = vl_stats_init_pool(&r->stats, r->pool->n)) != 0)
    return rc;
  /* Shards share the concurrency as they share the rate; slots enough for the largest phase. */
  r->n_slots = 0;
  for (int i = 0; i < r->n_phases; i++)
    r->n_slots = VL_MAX(r->n_slots, phase_cap(phase_cfg(r, i)));
  if ((rc = vl_transport_init(&r->tr, &r->loop, r->n_slots, c->http2)) != 0)
    return rc;
  r->tr.data = r;
  r->slots = vl_xcalloc((size_t)r->n_slots, sizeof(vl_slot_t));
  for (int i = r->n_slots - 1; i >= 0; i--) {
    if ((rc = setup_slot(r, &r->slots[i])) != 0)
      return rc;
    r->slots[i].next_free = r->free_slots;
    r->free_slots = &r->slots[i];
  }
  if ((rc = vl_ticker_init(&r->loop, &r->pace, on_pace)) != 0)
    return VL_EUV;
  uv_timer_init(&r->loop, &r->tick_timer);
  uv_timer_init(&r->loop, &r->stop_timer);
  if (!vl_monitor_spec_empty(&c->monitor)) {
    char err[256];
    if ((rc = vl_monitor_init(&r->mon, &r->loop, &r->tr, &c->monitor, NULL, err, sizeof(err))) !=
        0) {
      fprintf(stderr, "vlmload: %s\n", err);
      return rc;
    }
    r->mon.data = r;
    r->has_mon = 1;
  }
  if (c->run.flushes) {
    if ((rc = vl_flush_init(&r->flush, &r->loop, &r->tr, c, &flush_hooks)) != 0)
      return rc;
    r->flush.data = r;
    r->has_flush = 1;
  }
  if (r->pool && c->run.unique_images) {
    if ((rc = start_uniq(r)) != 0)
      return rc;
  }
  uv_signal_init(&r->loop, &r->sig_int);
  uv_signal_init(&r->loop, &r->sig_term);
  r->sig_int.data = r->sig_term.data = r;
  return 0;
}

static void free_runner(vl_runner_t *r) {
  for (int i = 0; i < r->n_slots; i++) {
    if (r->slots[i].xfer.easy)
      curl_easy_cleanup(r->slots[i].xfer.easy);
    vl_response_free(&r->slots[i].resp);
    free(r->slots[i].uniq);
  }
  free(r->slots);
  if (r->plans)
    for (int i = 0; i < r->n_phases; i++)
      vl_plan_free(&r->plans[i]);
  free(r->plans);
  if (r->results)
    for (int i = 0; i < r->n_phases; i++) {
      vl_hist_free(&r->results[i].e2e);
      vl_hist_free(&r->results[i].ttft);
      vl_hist_free(&r->results[i].tpot);
    }
  free(r->results);
  curl_slist_free_all(r->headers);
  if (r->full_urls)
    for (int i = 0; i < r->cfg->n_urls; i++)
      free(r->full_urls[i]);
  free(r->full_urls);
  free(r->url_distinct);
  if (r->has_flush)
    vl_flush_free(&r->flush);
  if (r->has_mon)
    vl_monitor_free(&r->mon);
  vl_stats_free(&r->stats);
}

/* A flushed experiment whose flushes all failed measured something else than it meant to: says
 * which routes were called and what the last flush was answered. */
static void say_flushes_failed(const vl_runner_t *r) {
  const vl_flush_t *f = &r->flush;
  const vl_flush_record_t *last = &f->recs[f->n_recs - 1];
  char routes[512] = "", answer[260] = "";
  for (int i = 0; i < f->n_paths; i++)
    snprintf(routes + strlen(routes), sizeof(routes) - strlen(routes), "%s%s", i ? ", " : "",
             f->paths[i]);
  if (last->answer[0])
    snprintf(answer, sizeof(answer), ": \"%s\"", last->answer);
  char status[48];
  if (last->status)
    snprintf(status, sizeof(status), "HTTP %ld", last->status);
  else
    snprintf(status, sizeof(status), "no answer");
  fprintf(stderr,
          "vlmload: none of the %llu flushes succeeded (%s %s on %s; the last got %s%s): the "
          "caches were never flushed; check --server and --flush-endpoint%s\n",
          (unsigned long long)f->count, f->post ? "POST" : "GET", routes, r->cfg->url, status,
          answer, vl_profile_flush_hint(r->cfg->server));
}

int vl_runner_run(const vl_config_t *cfg, const char *model, const vl_prompts_t *prompts,
                  const vl_imagepool_t *pool, vl_report_t *rep) {
  vl_runner_t run, *r = &run;
  memset(r, 0, sizeof(*r));
  r->pool = pool && pool->n ? pool : NULL;
  r->cfg = r->top = cfg;
  r->n_phases = cfg->n_phases ? cfg->n_phases : 1;
  r->prompts = prompts;
  r->rep = rep;
  int rc = init_runner(r);
  if (rc == 0) {
    r->plans = vl_xcalloc((size_t)r->n_phases, sizeof(vl_plan_t));
    for (int i = 0; i < r->n_phases && rc == 0; i++)
      rc = vl_plan_init(&r->plans[i], phase_cfg(r, i), model, prompts, r->pool);
  }
  if (rc == 0 && cfg->n_phases) {
    r->results = vl_xcalloc((size_t)r->n_phases, sizeof(vl_phase_result_t));
    for (int i = 0; i < r->n_phases && rc == 0; i++)
      if ((rc = vl_hist_init(&r->results[i].e2e, VL_STATS_HIGHEST_US, 2)) == 0 &&
          (rc = vl_hist_init(&r->results[i].ttft, VL_STATS_HIGHEST_US, 2)) == 0)
        rc = vl_hist_init(&r->results[i].tpot, VL_STATS_HIGHEST_US, 2);
  }
  if (rc) {
    fprintf(stderr, "vlmload: cannot set up the run: %s\n", vl_strerror(rc));
    free_runner(r);
    return 1;
  }

  if (r->has_uniq)
    prefill_uniq(r);
  first_sample(r);
  r->t0_ns = uv_hrtime();
  r->wall0_ms = vl_wall_ms();
  r->admitting = 1;
  r->ff_open = !cfg->keep_going;
  uv_signal_start(&r->sig_int, on_signal, SIGINT);
  uv_signal_start(&r->sig_term, on_signal, SIGTERM);
  uv_timer_start(&r->tick_timer, on_tick, cfg->sample_every_us / 1000, cfg->sample_every_us / 1000);
  start_phase(r, 0);
  admit(r);
  uv_run(&r->loop, UV_RUN_DEFAULT);

  vl_snapshot_t snap = snapshot(r);
  if (vl_report_tick(rep, &r->stats, &snap) != 0)
    r->fatal = 1;
  vl_run_meta_t meta = {
      .model = model,
      .stop_reason = stop_names[r->stop],
      .interrupted = r->stop == STOP_SIGNAL,
      .socket_errors = r->tr.socket_errors,
      .duration_ns = snap.now_ns - r->t0_ns,
      .load_ns = r->load_ns,
      .flush = r->has_flush ? &r->flush : NULL,
      .pool = r->pool,
      .uniq = r->has_uniq ? &r->uniq : NULL,
      .phases = r->results,
      .mon = r->has_mon ? &r->mon : NULL,
      .n_phases = r->results ? r->n_phases : 0,
  };
  if (r->results && r->admitting == 0 && r->results[r->phase].seconds == 0) {
    r->results[r->phase].seconds = (double)(r->stop_ns - r->phase_t0_ns) / 1e9;
    r->results[r->phase].paused_s = (double)r->phase_paused_ns / 1e9;
  }
  if (r->has_flush)
    r->stats.flush_skipped = r->flush.skipped;
  int wrc = vl_report_finish(rep, &r->stats, &snap, &meta);
  int lrc = uv_loop_close(&r->loop);
  if (lrc != 0)
    fprintf(stderr, "vlmload: internal error: event loop closed with handles open\n");

  int status = 0;
  if (r->fatal || wrc || lrc)
    status = 1;
  else if (r->stop == STOP_SIGNAL)
    status = 130;
  else if (r->stats.total.ok == 0)
    status = 1;
  else if (r->has_flush && r->flush.count && !r->flush.ok) {
    say_flushes_failed(r);
    status = 1;
  } else if (vl_report_thresholds_crossed(rep))
    status = 3;
  free_runner(r);
  return status;
}
