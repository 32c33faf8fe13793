/* The transport's floor: what Debian's libcurl does on this machine with no work around it, so that
 * vlmload can be judged against the limit it is built on rather than against wrk.
 *
 *   vlmload-bench-floor --url URL [--mode text|sse|upload] [--loop uv|poll] [-c N] [-d S | -n N]
 *                       [--body-size BYTES | --image WxH] [--feed postfields|read] [...]
 *
 * Closed loop: N easy handles, each a POST of one fixed body built once at start, kept in flight;
 * a finished handle is removed from the multi handle and added back at once, until the duration
 * is over or the request count has been started. Nothing is parsed or timed per request beyond
 * the HTTP status (a transfer that is not a 200 counts as failed).
 *   text    a small fixed JSON chat request; the write callback discards the reply.
 *   sse     the same request with "stream":true; the write callback counts bytes and "data:"
 *           lines. tokens = data lines - --tail-events per finished stream (3: the mock ends
 *           each stream with finish_reason, usage and [DONE]).
 *   upload  a large body (default 1 MiB) that every handle sends from the one shared buffer,
 *           by CURLOPT_POSTFIELDS (default) or a read callback over it (--feed read).
 * Open loop (--rate R, uv loop only): arrivals on vlmload's own schedule (vl_pace, Poisson or
 * constant gaps, planned over the run's length as vlmload plans them) and ticker (vl_ticker); an
 * arrival takes a free handle, or waits for one (at most -c in flight); its send lag is the time
 * from its place on the schedule to curl_multi_add_handle, as vlmload counts it.
 * Two event loops: uv (default) is libuv + curl_multi_socket_action, one uv_poll per socket kept
 * across requests on a kept-alive connection, as vlmload's transport is wired (the fair floor for
 * its design); poll is a curl_multi_poll loop around curl_multi_perform.
 *
 * curl's buffers are sized as vlmload sizes them for the same connection count (upload: 32 MiB
 * split between the handles, 16 KiB to 512 KiB each; download: 4 MiB split, 1 KiB to 16 KiB),
 * unless --upload-buffer or --recv-buffer say otherwise; the same headers (Content-Type, an empty
 * Expect, Accept), no proxy, HTTP/1.1, TCP_NODELAY.
 *
 * Prints one JSON line to stdout: the figures (req_per_s, tokens_per_s, bytes, peak RSS, KiB per
 * in-flight transfer; with --rate achieved_rate and send_lag_p50/p99/max_ms) and the settings they
 * came from. per_inflight_kib is (peak RSS - the body buffer) / peak in flight, the way
 * bench/driver.py reads vlmload's (peak RSS - its image pool); per_inflight_over_base_kib leaves
 * out the RSS before the first handle existed too. cpu_s counts from the handles' set-up on.
 * Exit status: 0 every transfer succeeded, 1 some failed (the line is still printed), 2 bad usage.
 */
#include "vlmload/common.h"
#include "vlmload/imagepool.h"
#include "vlmload/imagespec.h"
#include "vlmload/pace.h"
#include "vlmload/ticker.h"

#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

enum { MODE_TEXT, MODE_SSE, MODE_UPLOAD };
enum { FEED_POSTFIELDS, FEED_READ };

typedef struct floor_s floor_t;

/* One easy handle and what its callbacks need; reused for every request it carries. */
typedef struct {
  CURL *easy;
  floor_t *f;
  size_t off; /* --feed read: bytes of the body handed to curl so far */
  int match;  /* sse: characters of "data:" matched at the start of a line; -1 inside a line */
} xfer_t;

/* uv loop: one per socket, from curl's first interest until curl closes it. Freed in the poll
 * handle's close callback. */
typedef struct {
  uv_poll_t poll;
  floor_t *f;
  int fd;
  int events; /* what the poll handle watches */
  int wanted; /* curl wants events (not CURL_POLL_REMOVE) */
} sock_t;

struct floor_s {
  /* settings */
  int mode, loop_kind, feed;
  const char *url;
  long conns;
  double duration;
  uint64_t requests; /* 0: run for duration */
  long upload_buf, recv_buf;
  long tail_events;
  /* the body */
  char *body;
  size_t body_len;
  /* transport */
  CURLM *multi;
  struct curl_slist *headers;
  xfer_t *x;
  uv_loop_t loop;
  uv_timer_t curl_timer, stop_timer;
  sock_t **by_fd;
  size_t by_fd_len;
  /* counters */
  uint64_t started, done, ok, failed, in_flight, peak_in_flight;
  uint64_t bytes_recv, events;
  uint64_t t0, t_last;
  int stopping;
  CURLMcode last_mc;
  /* open loop (--rate): arrivals on vlmload's own schedule and ticker, handles from a free list,
   * each arrival's lag from its intended time kept (in us) for the percentiles */
  double rate;
  vl_arrival_kind_t arrival;
  vl_pace_t pace;
  vl_ticker_t ticker;
  int ticker_open;
  uint64_t deadline;
  xfer_t **free_x;
  size_t n_free;
  uint32_t *lag_us;
  size_t n_lag, lag_cap;
  uint64_t first_send, last_send;
};

/* ---- callbacks shared by both loops -------------------------------------------------------- */

static size_t on_discard(char *p, size_t size, size_t n, void *arg) {
  (void)p;
  xfer_t *x = arg;
  x->f->bytes_recv += size * n;
  return size * n;
}

/* Counts lines that begin "data:"; a line may be split across calls. */
static size_t on_sse(char *p, size_t size, size_t n, void *arg) {
  static const char key[] = "data:";
  xfer_t *x = arg;
  size_t len = size * n;
  const char *s = p, *end = p + len;
  int m = x->match;
  x->f->bytes_recv += len;
  while (s < end) {
    if (m < 0) {
      const char *nl = memchr(s, '\n', (size_t)(end - s));
      if (!nl)
        break;
      s = nl + 1;
      m = 0;
    } else if (*s == key[m]) {
      s++;
      if (++m == (int)sizeof(key) - 1) {
        x->f->events++;
        m = -1;
      }
    } else {
      m = *s == '\n' ? 0 : -1;
      s += m == 0;
    }
  }
  x->match = m;
  return len;
}

static size_t on_read(char *dst, size_t size, size_t n, void *arg) {
  xfer_t *x = arg;
  size_t left = x->f->body_len - x->off, want = size * n;
  if (want > left)
    want = left;
  memcpy(dst, x->f->body + x->off, want);
  x->off += want;
  return want;
}

static int on_seek(void *arg, curl_off_t offset, int origin) {
  xfer_t *x = arg;
  if (origin != SEEK_SET || offset < 0 || (size_t)offset > x->f->body_len)
    return CURL_SEEKFUNC_CANTSEEK;
  x->off = (size_t)offset;
  return CURL_SEEKFUNC_OK;
}

static void start_xfer(floor_t *f, xfer_t *x) {
  x->off = 0;
  x->match = 0;
  CURLMcode mc = curl_multi_add_handle(f->multi, x->easy);
  if (mc != CURLM_OK) {
    f->last_mc = mc;
    f->failed++;
    return;
  }
  f->started++;
  if (++f->in_flight > f->peak_in_flight)
    f->peak_in_flight = f->in_flight;
}

/* Whether another request may start: neither the count nor the duration is used up. */
static int more(floor_t *f) {
  return !f->stopping && (!f->requests || f->started < f->requests);
}

static void admit(floor_t *f);

/* Takes every finished transfer off the multi handle and starts the next on the same handle. */
static void reap(floor_t *f) {
  CURLMsg *msg;
  int pending;
  while ((msg = curl_multi_info_read(f->multi, &pending)) != NULL) {
    if (msg->msg != CURLMSG_DONE)
      continue;
    CURL *easy = msg->easy_handle;
    CURLcode result = msg->data.result; /* msg is invalid once the handle is removed */
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(f->multi, easy);
    f->in_flight--;
    f->done++;
    if (result == CURLE_OK && status == 200)
      f->ok++;
    else
      f->failed++;
    xfer_t *x = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
    if (f->rate > 0)
      f->free_x[f->n_free++] = x;
    else if (more(f))
      start_xfer(f, x);
  }
  if (f->rate > 0 && f->n_free && more(f))
    admit(f);
  if (f->in_flight == 0)
    f->t_last = uv_hrtime();
}

/* ---- uv loop: curl_multi_socket_action, as curl's docs/examples/multi-uv.c ------------------ */

static void uv_action(floor_t *f, curl_socket_t fd, int flags) {
  int running;
  CURLMcode mc = curl_multi_socket_action(f->multi, fd, flags, &running);
  if (mc != CURLM_OK)
    f->last_mc = mc;
  reap(f);
  if (f->in_flight == 0 && !more(f))
    uv_stop(&f->loop);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  sock_t *s = vl_container_of(h, sock_t, poll);
  if (!s->wanted) {
    /* An idle kept-alive connection became readable (closed by the server): stop watching it;
     * curl finds out when it next tries to reuse it. */
    uv_poll_stop(h);
    s->events = 0;
    return;
  }
  int flags = 0;
  if (status < 0)
    flags = CURL_CSELECT_ERR;
  else {
    if (events & UV_READABLE)
      flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
      flags |= CURL_CSELECT_OUT;
  }
  uv_action(s->f, s->fd, flags);
}

static void on_curl_timeout(uv_timer_t *t) {
  floor_t *f = t->data;
  uv_action(f, CURL_SOCKET_TIMEOUT, 0);
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *arg) {
  (void)multi;
  floor_t *f = arg;
  if (timeout_ms < 0)
    return uv_timer_stop(&f->curl_timer) ? -1 : 0;
  return uv_timer_start(&f->curl_timer, on_curl_timeout, (uint64_t)timeout_ms, 0) ? -1 : 0;
}

/* The socket's entry, made on first use; NULL when out of memory. */
static sock_t *sock_for(floor_t *f, curl_socket_t fd) {
  if ((size_t)fd >= f->by_fd_len) {
    size_t n = f->by_fd_len ? f->by_fd_len : 1024;
    while (n <= (size_t)fd)
      n *= 2;
    sock_t **g = realloc(f->by_fd, n * sizeof(*g));
    if (!g)
      return NULL;
    memset(g + f->by_fd_len, 0, (n - f->by_fd_len) * sizeof(*g));
    f->by_fd = g;
    f->by_fd_len = n;
  }
  sock_t *s = f->by_fd[fd];
  if (s)
    return s;
  if (!(s = calloc(1, sizeof(*s))))
    return NULL;
  if (uv_poll_init_socket(&f->loop, &s->poll, fd) != 0) {
    free(s);
    return NULL;
  }
  s->f = f;
  s->fd = fd;
  f->by_fd[fd] = s;
  return s;
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *arg, void *socketp) {
  (void)easy;
  (void)socketp;
  floor_t *f = arg;
  if (what == CURL_POLL_REMOVE) {
    /* Back to curl's connection cache: keep the watch as it is, the next request on the
     * connection most likely wants the same events. */
    if ((size_t)fd < f->by_fd_len && f->by_fd[fd])
      f->by_fd[fd]->wanted = 0;
    return 0;
  }
  sock_t *s = sock_for(f, fd);
  if (!s)
    return -1;
  int events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
    events |= UV_READABLE;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
    events |= UV_WRITABLE;
  s->wanted = 1;
  if (events != s->events || !uv_is_active((uv_handle_t *)&s->poll)) {
    if (uv_poll_start(&s->poll, events, on_poll) != 0)
      return -1;
    s->events = events;
  }
  return 0;
}

static void on_sock_closed(uv_handle_t *h) {
  free(h);
}

/* The poll handle goes before the descriptor, so epoll never holds a closed one. */
static int on_close_socket(void *arg, curl_socket_t fd) {
  floor_t *f = arg;
  if ((size_t)fd < f->by_fd_len && f->by_fd[fd]) {
    uv_close((uv_handle_t *)&f->by_fd[fd]->poll, on_sock_closed);
    f->by_fd[fd] = NULL;
  }
  return close(fd);
}

/* Open loop: starts every arrival that is due while a handle is free, then arms the ticker for
 * the next; a handle coming free calls it again. Arrivals past the duration are not sent. */
static void admit(floor_t *f) {
  while (more(f)) {
    uint64_t t = vl_pace_next(&f->pace), now = uv_hrtime();
    if (t >= f->deadline) {
      f->stopping = 1;
      break;
    }
    if (t > now) {
      if (vl_ticker_arm(&f->ticker, t) != 0)
        f->stopping = 1;
      return;
    }
    if (!f->n_free)
      return;
    vl_pace_take(&f->pace);
    if (f->n_lag == f->lag_cap) {
      size_t cap = f->lag_cap ? f->lag_cap * 2 : 4096;
      uint32_t *g = realloc(f->lag_us, cap * sizeof(*g));
      if (!g) {
        f->stopping = 1;
        break;
      }
      f->lag_us = g;
      f->lag_cap = cap;
    }
    uint64_t lag = (now - t) / 1000;
    f->lag_us[f->n_lag++] = lag > UINT32_MAX ? UINT32_MAX : (uint32_t)lag;
    if (!f->first_send)
      f->first_send = now;
    f->last_send = now;
    start_xfer(f, f->free_x[--f->n_free]);
  }
  if (f->in_flight == 0)
    uv_stop(&f->loop);
}

static void on_tick(vl_ticker_t *t) {
  admit(t->data);
}

static void on_stop_timer(uv_timer_t *t) {
  floor_t *f = t->data;
  f->stopping = 1;
  if (f->in_flight == 0)
    uv_stop(&f->loop);
}

static int run_uv(floor_t *f) {
  if (curl_multi_setopt(f->multi, CURLMOPT_SOCKETFUNCTION, on_socket) != CURLM_OK ||
      curl_multi_setopt(f->multi, CURLMOPT_SOCKETDATA, f) != CURLM_OK ||
      curl_multi_setopt(f->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
      curl_multi_setopt(f->multi, CURLMOPT_TIMERDATA, f) != CURLM_OK)
    return -1;
  for (long i = 0; i < f->conns; i++)
    if (curl_easy_setopt(f->x[i].easy, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket) != CURLE_OK ||
        curl_easy_setopt(f->x[i].easy, CURLOPT_CLOSESOCKETDATA, f) != CURLE_OK)
      return -1;
  f->curl_timer.data = f->stop_timer.data = f;
  f->t0 = uv_hrtime();
  if (f->rate > 0) {
    if (!(f->free_x = malloc((size_t)f->conns * sizeof(*f->free_x))) ||
        vl_ticker_init(&f->loop, &f->ticker, on_tick) != 0)
      return -1;
    f->ticker_open = 1;
    f->ticker.data = f;
    for (long i = 0; i < f->conns; i++)
      f->free_x[f->n_free++] = &f->x[f->conns - 1 - i];
    f->deadline = f->requests ? UINT64_MAX : f->t0 + (uint64_t)(f->duration * 1e9);
    /* As vlmload plans a Poisson run: that many arrivals spread over exactly the run's length. */
    uint64_t planned = f->requests ? f->requests : (uint64_t)(f->rate * f->duration + 0.5);
    vl_pace_init(&f->pace, f->arrival, f->rate, 0, 1, f->t0, planned);
    admit(f);
  } else {
    if (!f->requests)
      uv_timer_start(&f->stop_timer, on_stop_timer, (uint64_t)(f->duration * 1e3), 0);
    for (long i = 0; i < f->conns && more(f); i++)
      start_xfer(f, &f->x[i]);
  }
  if (f->in_flight || (f->rate > 0 && more(f)))
    uv_run(&f->loop, UV_RUN_DEFAULT);
  return 0;
}

/* ---- poll loop: curl_multi_perform + curl_multi_poll ----------------------------------------- */

static int run_poll(floor_t *f) {
  uint64_t end = 0;
  f->t0 = uv_hrtime();
  if (!f->requests)
    end = f->t0 + (uint64_t)(f->duration * 1e9);
  for (long i = 0; i < f->conns && more(f); i++)
    start_xfer(f, &f->x[i]);
  while (f->in_flight) {
    int running;
    CURLMcode mc = curl_multi_perform(f->multi, &running);
    if (mc != CURLM_OK) {
      f->last_mc = mc;
      return -1;
    }
    reap(f);
    if (!f->in_flight)
      break;
    if ((mc = curl_multi_poll(f->multi, NULL, 0, 1000, NULL)) != CURLM_OK) {
      f->last_mc = mc;
      return -1;
    }
    if (end && uv_hrtime() >= end)
      f->stopping = 1;
  }
  return 0;
}

/* ---- set-up, output ------------------------------------------------------------------------ */

static long resident_kib(void) {
  FILE *fp = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (fp) {
    if (fscanf(fp, "%ld %ld", &size, &res) != 2)
      res = 0;
    fclose(fp);
  }
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static long clamp(long v, long lo, long hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/* The request body, built once: a chat request whose content is the prompt, padded with 'x' to
 * pad_to bytes in all, or an image (data URI) and the prompt. */
static int make_body(floor_t *f, size_t pad_to, const char *uri, size_t uri_len, long max_tokens) {
  static const char prompt[] = "Describe this image in detail.";
  char tail[160];
  int tn = snprintf(tail, sizeof(tail), "}],\"max_tokens\":%ld,\"temperature\":0%s}", max_tokens,
                    f->mode == MODE_SSE ? ",\"stream\":true,\"stream_options\":{\"include_usage\":"
                                          "true}"
                                        : "");
  char head[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":";
  size_t fixed = strlen(head) + (size_t)tn;
  size_t cap = fixed + uri_len + sizeof(prompt) + pad_to + 128;
  if (!(f->body = malloc(cap)))
    return -1;
  char *p = f->body;
  p += sprintf(p, "%s", head);
  if (uri)
    p += sprintf(p,
                 "[{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s\"}},{\"type\":\"text\","
                 "\"text\":\"%s\"}]",
                 uri, prompt);
  else {
    p += sprintf(p, "\"%s", prompt);
    size_t now = (size_t)(p - f->body) + 1 + (size_t)tn;
    if (pad_to > now) {
      memset(p, 'x', pad_to - now);
      p += pad_to - now;
    }
    *p++ = '"';
  }
  p += sprintf(p, "%s", tail);
  f->body_len = (size_t)(p - f->body);
  return 0;
}

/* A synthetic noise JPEG of WxH as a data URI (the content vlmload's workload 4 sends). */
static char *make_image(const char *size, size_t *len) {
  vl_imagespec_res_t res;
  char why[200];
  if (vl_imagespec_res_parse(&res, size, why, sizeof(why)) != 0) {
    fprintf(stderr, "floor: --image %s: %s\n", size, why);
    return NULL;
  }
  vl_imagepool_opts_t po = {.res = &res, .count = 1, .seed = 1, .fmt = VL_IMG_JPEG};
  if (vl_imagespec_content("noise", &po.content) != 0)
    return NULL;
  uv_loop_t loop;
  uv_loop_init(&loop);
  vl_imagepool_t pool;
  char err[256];
  char *uri = NULL;
  if (vl_imagepool_build(&pool, &loop, &po, err, sizeof(err)) != 0)
    fprintf(stderr, "floor: --image: %s\n", err);
  else if ((uri = strdup(pool.img[0].uri)) != NULL)
    *len = pool.img[0].uri_len;
  vl_imagepool_free(&pool);
  uv_loop_close(&loop);
  return uri;
}

static int setup(floor_t *f) {
  if (!(f->multi = curl_multi_init()) || !(f->x = calloc((size_t)f->conns, sizeof(*f->x))))
    return -1;
  curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS, f->conns);
  const char *fixed[] = {
      "Content-Type: application/json",
      "Expect:", f->mode == MODE_SSE ? "Accept: text/event-stream" : "Accept: application/json"};
  for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
    struct curl_slist *t = curl_slist_append(f->headers, fixed[i]);
    if (!t)
      return -1;
    f->headers = t;
  }
  for (long i = 0; i < f->conns; i++) {
    xfer_t *x = &f->x[i];
    x->f = f;
    CURL *e = x->easy = curl_easy_init();
    if (!e)
      return -1;
    CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                                              \
  if (rc == CURLE_OK)                                                                              \
  rc = curl_easy_setopt(e, opt, val)
    SET(CURLOPT_URL, f->url);
    SET(CURLOPT_POST, 1L);
    if (f->feed == FEED_READ) {
      SET(CURLOPT_READFUNCTION, on_read);
      SET(CURLOPT_READDATA, x);
      SET(CURLOPT_SEEKFUNCTION, on_seek);
      SET(CURLOPT_SEEKDATA, x);
    } else
      SET(CURLOPT_POSTFIELDS, f->body);
    SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)f->body_len);
    SET(CURLOPT_WRITEFUNCTION, f->mode == MODE_SSE ? on_sse : on_discard);
    SET(CURLOPT_WRITEDATA, x);
    SET(CURLOPT_HTTPHEADER, f->headers);
    SET(CURLOPT_PRIVATE, x);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_NOPROXY, "*");
    SET(CURLOPT_TCP_NODELAY, 1L);
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    SET(CURLOPT_UPLOAD_BUFFERSIZE, f->upload_buf);
    SET(CURLOPT_BUFFERSIZE, f->recv_buf);
#undef SET
    if (rc != CURLE_OK) {
      fprintf(stderr, "floor: curl_easy_setopt: %s\n", curl_easy_strerror(rc));
      return -1;
    }
  }
  return 0;
}

static void teardown(floor_t *f) {
  for (long i = 0; f->x && i < f->conns; i++) {
    if (f->x[i].easy)
      curl_multi_remove_handle(f->multi, f->x[i].easy);
    curl_easy_cleanup(f->x[i].easy);
  }
  if (f->multi)
    curl_multi_cleanup(f->multi); /* closes the cached connections: their poll handles close */
  if (f->loop_kind == 0) {
    uv_close((uv_handle_t *)&f->curl_timer, NULL);
    uv_close((uv_handle_t *)&f->stop_timer, NULL);
    if (f->ticker_open)
      vl_ticker_close(&f->ticker, NULL);
    /* A uv_stop made before the loop last ran ends the first of these at once. */
    for (int i = 0; i < 2 && uv_run(&f->loop, UV_RUN_DEFAULT) != 0; i++)
      ;
    if (uv_loop_close(&f->loop) != 0)
      fprintf(stderr, "floor: the loop still has handles\n");
  }
  curl_slist_free_all(f->headers);
  free(f->x);
  free(f->by_fd);
  free(f->body);
  free(f->free_x);
  free(f->lag_us);
}

/* A whole number in [lo, hi] from optarg; exits on junk. */
static long number(const char *name, const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    fprintf(stderr, "floor: --%s takes a whole number from %ld to %ld, not '%s'\n", name, lo, hi,
            s);
    exit(2);
  }
  return v;
}

static void usage(FILE *out) {
  fputs("usage: vlmload-bench-floor --url URL [options]\n"
        "  --mode text|sse|upload   what each transfer is (default text; see the header of\n"
        "                           bench/floor.c)\n"
        "  --loop uv|poll           libuv + multi_socket (default), or a curl_multi_poll loop\n"
        "  -c, --connections N      transfers kept in flight (default 64)\n"
        "  -d, --duration S         seconds to keep starting transfers (default 5)\n"
        "  -n, --requests N         start N transfers in all instead\n"
        "  --body-size BYTES        pad the prompt so the body has BYTES (upload default 1048576)\n"
        "  --image WxH              a synthetic noise JPEG of WxH in the body instead of padding\n"
        "  --feed postfields|read   how curl gets the shared body (default postfields)\n"
        "  --max-tokens N           the body's max_tokens (default 128; sse 256)\n"
        "  --tail-events K          data lines per stream that are not tokens (default 3)\n"
        "  --upload-buffer BYTES    CURLOPT_UPLOAD_BUFFERSIZE (default: as vlmload sizes it)\n"
        "  --recv-buffer BYTES      CURLOPT_BUFFERSIZE (default: as vlmload sizes it)\n"
        "  --rate R                 open loop (uv only): R arrivals a second on vlmload's own\n"
        "                           schedule and ticker, at most -c in flight; reports send lag\n"
        "  --arrival poisson|constant  the gaps between arrivals (default poisson)\n",
        out);
}

int main(int argc, char **argv) {
  static const struct option opts[] = {
      {"url", required_argument, NULL, 'u'},
      {"mode", required_argument, NULL, 'm'},
      {"loop", required_argument, NULL, 'l'},
      {"connections", required_argument, NULL, 'c'},
      {"duration", required_argument, NULL, 'd'},
      {"requests", required_argument, NULL, 'n'},
      {"body-size", required_argument, NULL, 'b'},
      {"image", required_argument, NULL, 'i'},
      {"feed", required_argument, NULL, 'f'},
      {"max-tokens", required_argument, NULL, 't'},
      {"tail-events", required_argument, NULL, 'e'},
      {"upload-buffer", required_argument, NULL, 'U'},
      {"recv-buffer", required_argument, NULL, 'R'},
      {"rate", required_argument, NULL, 'r'},
      {"arrival", required_argument, NULL, 'a'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  floor_t f;
  memset(&f, 0, sizeof(f));
  f.conns = 64;
  f.duration = 5;
  f.tail_events = 3;
  long body_size = -1, max_tokens = -1;
  const char *image = NULL;
  int c, arrival_set = 0;
  while ((c = getopt_long(argc, argv, "c:d:n:h", opts, NULL)) != -1) {
    switch (c) {
    case 'u':
      f.url = optarg;
      break;
    case 'm':
      if (!strcmp(optarg, "text"))
        f.mode = MODE_TEXT;
      else if (!strcmp(optarg, "sse"))
        f.mode = MODE_SSE;
      else if (!strcmp(optarg, "upload"))
        f.mode = MODE_UPLOAD;
      else
        goto bad;
      break;
    case 'l':
      if (strcmp(optarg, "uv") && strcmp(optarg, "poll"))
        goto bad;
      f.loop_kind = !strcmp(optarg, "poll");
      break;
    case 'c':
      f.conns = number("connections", optarg, 1, 1000000);
      break;
    case 'd': {
      char *end;
      f.duration = strtod(optarg, &end);
      if (end == optarg || *end || !(f.duration > 0 && f.duration < 1e6))
        goto bad;
      break;
    }
    case 'n':
      f.requests = (uint64_t)number("requests", optarg, 1, 0x7fffffffffffffffL);
      break;
    case 'b':
      body_size = number("body-size", optarg, 0, 1L << 30);
      break;
    case 'i':
      image = optarg;
      break;
    case 'f':
      if (strcmp(optarg, "postfields") && strcmp(optarg, "read"))
        goto bad;
      f.feed = !strcmp(optarg, "read") ? FEED_READ : FEED_POSTFIELDS;
      break;
    case 't':
      max_tokens = number("max-tokens", optarg, 1, 1000000);
      break;
    case 'e':
      f.tail_events = number("tail-events", optarg, 0, 1000);
      break;
    case 'U':
      f.upload_buf = number("upload-buffer", optarg, 16384, 2 * 1024 * 1024);
      break;
    case 'R':
      f.recv_buf = number("recv-buffer", optarg, 1024, 10 * 1024 * 1024);
      break;
    case 'r': {
      char *end;
      f.rate = strtod(optarg, &end);
      if (end == optarg || *end || !(f.rate > 0 && f.rate < 1e8))
        goto bad;
      break;
    }
    case 'a':
      if (!strcmp(optarg, "poisson"))
        f.arrival = VL_ARRIVAL_POISSON;
      else if (!strcmp(optarg, "constant"))
        f.arrival = VL_ARRIVAL_CONSTANT;
      else
        goto bad;
      arrival_set = 1;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      goto bad;
    }
  }
  if (!f.url || optind != argc || (f.rate > 0 && f.loop_kind) || (arrival_set && !f.rate))
    goto bad;
  if (!arrival_set)
    f.arrival = VL_ARRIVAL_POISSON;
  if (!f.upload_buf)
    f.upload_buf = clamp((32L << 20) / f.conns, 16384, 512 * 1024);
  if (!f.recv_buf)
    f.recv_buf = clamp((4L << 20) / f.conns, 1024, 16384);
  if (body_size < 0)
    body_size = f.mode == MODE_UPLOAD ? 1048576 : 0;
  if (max_tokens < 0)
    max_tokens = f.mode == MODE_SSE ? 256 : 128;

  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  size_t uri_len = 0;
  char *uri = image ? make_image(image, &uri_len) : NULL;
  if (image && !uri)
    return 1;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return 1;
  if (f.loop_kind == 0) {
    uv_loop_init(&f.loop);
    uv_timer_init(&f.loop, &f.curl_timer);
    uv_timer_init(&f.loop, &f.stop_timer);
  }
  int rc = make_body(&f, (size_t)body_size, uri, uri_len, max_tokens);
  free(uri);
  long rss_base = resident_kib();
  struct rusage ru0, ru;
  getrusage(RUSAGE_SELF, &ru0);
  if (rc == 0)
    rc = setup(&f);
  if (rc == 0)
    rc = f.loop_kind ? run_poll(&f) : run_uv(&f);
  if (!f.t_last)
    f.t_last = uv_hrtime();
  double wall = (double)(f.t_last - f.t0) / 1e9;
  getrusage(RUSAGE_SELF, &ru);
  long peak = ru.ru_maxrss;
  /* From the handles' set-up on: the image, when there is one, was made before. */
  double cpu = (double)(ru.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru.ru_stime.tv_sec -
                        ru0.ru_stime.tv_sec) +
               (double)(ru.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru.ru_stime.tv_usec -
                        ru0.ru_stime.tv_usec) /
                   1e6;
  uint64_t tail = f.mode == MODE_SSE ? (uint64_t)f.tail_events * f.ok : 0;
  uint64_t tokens = f.events > tail ? f.events - tail : 0;
  double n_in = f.peak_in_flight ? (double)f.peak_in_flight : 1;
  static const char *modes[] = {"text", "sse", "upload"};
  unsigned long long sent = (unsigned long long)(f.done * f.body_len);
  printf("{\"client\":\"floor\",\"mode\":\"%s\",\"loop\":\"%s\",\"feed\":\"%s\",\"curl\":\"%s\","
         "\"libuv\":\"%s\",\"url\":\"%s\",\"connections\":%ld,",
         modes[f.mode], f.loop_kind ? "poll" : "uv", f.feed ? "read" : "postfields",
         curl_version_info(CURLVERSION_NOW)->version, uv_version_string(), f.url, f.conns);
  printf("\"requests\":%llu,\"ok\":%llu,\"failed\":%llu,\"duration_s\":%.3f,\"req_per_s\":%.1f,",
         (unsigned long long)f.done, (unsigned long long)f.ok, (unsigned long long)f.failed, wall,
         wall > 0 ? (double)f.ok / wall : 0);
  printf(
      "\"body_bytes\":%zu,\"bytes_sent\":%llu,\"sent_bytes_per_s\":%.0f,\"bytes_received\":%llu,",
      f.body_len, sent, wall > 0 ? (double)sent / wall : 0, (unsigned long long)f.bytes_recv);
  printf("\"events\":%llu,\"tokens\":%llu,\"tokens_per_s\":%.1f,\"cpu_s\":%.3f,"
         "\"cpu_us_per_request\":%.2f,",
         (unsigned long long)f.events, (unsigned long long)tokens,
         wall > 0 ? (double)tokens / wall : 0, cpu, f.done ? cpu * 1e6 / (double)f.done : 0);
  printf("\"upload_buffer\":%ld,\"recv_buffer\":%ld,\"peak_in_flight\":%llu,\"rss_base_kib\":%ld,"
         "\"peak_rss_kib\":%ld,\"per_inflight_kib\":%.2f,\"per_inflight_over_base_kib\":%.2f,",
         f.upload_buf, f.recv_buf, (unsigned long long)f.peak_in_flight, rss_base, peak,
         ((double)peak - (double)f.body_len / 1024) / n_in, (double)(peak - rss_base) / n_in);
  if (f.rate > 0 && f.n_lag) {
    qsort(f.lag_us, f.n_lag, sizeof(*f.lag_us), cmp_u32);
    double span = (double)(f.last_send - f.first_send) / 1e9;
    printf("\"rate\":%g,\"arrival\":\"%s\",\"achieved_rate\":%.2f,\"send_lag_p50_ms\":%.3f,"
           "\"send_lag_p99_ms\":%.3f,\"send_lag_max_ms\":%.3f,",
           f.rate, f.arrival == VL_ARRIVAL_POISSON ? "poisson" : "constant",
           span > 0 ? (double)(f.n_lag - 1) / span : 0, f.lag_us[(f.n_lag - 1) / 2] / 1e3,
           f.lag_us[(size_t)((double)(f.n_lag - 1) * 0.99)] / 1e3, f.lag_us[f.n_lag - 1] / 1e3);
  }
  if (f.last_mc)
    printf("\"error\":\"%s\"}\n", curl_multi_strerror(f.last_mc));
  else
    printf("\"error\":null}\n");
  fflush(stdout);
  teardown(&f);
  curl_global_cleanup();
  if (rc != 0)
    return 1;
  return f.failed || f.done == 0 ? 1 : 0;
bad:
  usage(stderr);
  return 2;
}
