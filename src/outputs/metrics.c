/* --metrics-listen: the run's figures for Prometheus (metrics.h). */
#include "vlmload/metrics.h"
#include "vlmload/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct vl_metrics_s {
  struct MHD_Daemon *daemon;
  unsigned port;
  pthread_mutex_t lock; /* guards text, len and scrapes */
  char *text;           /* the latest publish; owned */
  size_t len;
  uint64_t scrapes;
};

/* The le bounds of every latency histogram, in seconds: 1, 1.5, 2, 3, 5 and 7 of each decade from
 * 100 us to 1000 s, then up to an hour (the histograms' highest value). */
static const double le_bounds[] = {
    0.0001, 0.00015, 0.0002, 0.0003, 0.0005, 0.0007, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.007,
    0.01,   0.015,   0.02,   0.03,   0.05,   0.07,   0.1,   0.15,   0.2,   0.3,   0.5,   0.7,
    1,      1.5,     2,      3,      5,      7,      10,    15,     20,    30,    50,    70,
    100,    150,     200,    300,    500,    700,    1000,  1500,   2000,  3000,  3600};

/* A growing text buffer; out of memory aborts, as vl_xmalloc does. */
typedef struct {
  char *p;
  size_t len, cap;
} buf_t;

static void put(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf_t *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    b->cap = b->cap * 2 + (n > 0 ? (size_t)n : 0);
    b->p = vl_xrealloc(b->p, b->cap);
  }
}

static void head(buf_t *b, const char *name, const char *type, const char *help) {
  put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the text format escapes it: backslash, double quote and newline. */
static void put_label(buf_t *b, const char *v) {
  for (; *v; v++) {
    if (*v == '\\' || *v == '"')
      put(b, "\\%c", *v);
    else if (*v == '\n')
      put(b, "\\n");
    else
      put(b, "%c", *v);
  }
}

static void counter(buf_t *b, const char *name, const char *help, uint64_t v) {
  head(b, name, "counter", help);
  put(b, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(buf_t *b, const char *name, const char *help, double v) {
  head(b, name, "gauge", help);
  put(b, "%s %.17g\n", name, v);
}

/* A histogram of microseconds as a Prometheus histogram in seconds: each counter of h goes under
 * the first bound at or above the highest value it stands for; clamped values only under +Inf. */
static void histogram(buf_t *b, const char *name, const char *help, const vl_hist_t *h) {
  head(b, name, "histogram", help);
  size_t nb = VL_ARRAY_SIZE(le_bounds);
  uint64_t cum = 0;
  int i = 0;
  for (size_t j = 0; j < nb; j++) {
    if (h) {
      /* Integer microseconds: a counter is under the bound when its highest value is. Counters
       * are in the order of their values, so those under it end at one index. */
      int64_t bound_us = (int64_t)(le_bounds[j] * 1e6 + 0.5);
      int end = vl_hist_index(h, bound_us);
      if (vl_hist_bucket_high(h, end) <= bound_us || bound_us >= h->highest)
        end++;
      for (; i < end && i < h->counts_len; i++)
        cum += h->counts[i];
    }
    /* Values past the histogram's highest were recorded as it: they are only under +Inf. */
    uint64_t under = cum;
    if (h && (int64_t)(le_bounds[j] * 1e6 + 0.5) >= h->highest)
      under -= VL_MIN(h->clamped, cum);
    put(b, "%s_bucket{le=\"%g\"} %llu\n", name, le_bounds[j], (unsigned long long)under);
  }
  uint64_t total = h ? h->total : 0;
  put(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)total);
  put(b, "%s_sum %.17g\n", name, h ? h->sum / 1e6 : 0.0);
  put(b, "%s_count %llu\n", name, (unsigned long long)total);
}

char *vl_metrics_render(const vl_metrics_figures_t *f, size_t *len) {
  buf_t b = {vl_xmalloc(16384), 0, 16384};
  b.p[0] = '\0';
  head(&b, "vlmload_requests_sent_total", "counter", "Requests sent to the server.");
  put(&b, "vlmload_requests_sent_total %llu\n", (unsigned long long)f->sent);
  head(&b, "vlmload_requests_total", "counter",
       "Requests finished, by outcome: ok (a 2xx reply read whole) or failed.");
  put(&b, "vlmload_requests_total{outcome=\"ok\"} %llu\n", (unsigned long long)f->ok);
  put(&b, "vlmload_requests_total{outcome=\"failed\"} %llu\n", (unsigned long long)f->failed);
  head(&b, "vlmload_request_errors_total", "counter",
       "Failed requests, by error class (docs/outputs.md).");
  for (int c = 1; c < VL_ERR__COUNT; c++)
    put(&b, "vlmload_request_errors_total{class=\"%s\"} %llu\n", vl_errclass_name((vl_errclass_t)c),
        (unsigned long long)f->errors[c]);
  counter(&b, "vlmload_arrivals_dropped_total",
          "Arrivals not sent: every slot was busy (--on-full drop).", f->dropped);
  gauge(&b, "vlmload_requests_in_flight", "Requests in flight now.", (double)f->in_flight);
  gauge(&b, "vlmload_target_rate_requests_per_second",
        "Arrivals per second the schedule asks for now; 0 for a closed loop.", f->target_rate);
  gauge(&b, "vlmload_achieved_rate_requests_per_second",
        "Requests sent per second over the latest interval.", f->achieved_rate);
  histogram(&b, "vlmload_request_latency_seconds",
            "Latency of successful requests past the warm-up, from their intended start.", f->e2e);
  histogram(&b, "vlmload_request_latency_from_send_seconds",
            "Latency of successful requests past the warm-up, from their send (bench_serving's "
            "e2el).",
            f->e2e_sent);
  histogram(&b, "vlmload_time_to_first_token_seconds",
            "Time to the first token of streamed successful requests past the warm-up.", f->ttft);
  histogram(&b, "vlmload_inter_token_latency_seconds",
            "Gaps between token events of streamed successful requests past the warm-up.", f->itl);
  histogram(&b, "vlmload_time_per_output_token_seconds",
            "Time per output token of streamed successful requests past the warm-up.", f->tpot);
  histogram(&b, "vlmload_send_lag_seconds",
            "Actual send minus intended start of requests past the warm-up.", f->send_lag);
  counter(&b, "vlmload_flushes_total", "Cache flushes finished.", f->flushes);
  head(&b, "vlmload_flush_pause_seconds_total", "counter",
       "Time admission was paused for drained flushes.");
  put(&b, "vlmload_flush_pause_seconds_total %.17g\n", f->paused_s);
  counter(&b, "vlmload_images_sent_total", "Images sent in requests.", f->images);
  counter(&b, "vlmload_image_sent_bytes_total", "Encoded bytes of the images sent.",
          f->image_bytes);
  counter(&b, "vlmload_prompt_tokens_total",
          "Prompt tokens of successful requests past the warm-up, as their server declared.",
          f->prompt_tokens);
  counter(&b, "vlmload_completion_tokens_total",
          "Completion tokens of successful requests past the warm-up, as their server declared.",
          f->completion_tokens);
  gauge(&b, "vlmload_elapsed_seconds", "Seconds since the start of the schedule.", f->elapsed_s);
  head(&b, "vlmload_phase", "gauge", "The run's phase now: 1 for the phase named.");
  put(&b, "vlmload_phase{phase=\"");
  put_label(&b, f->phase && *f->phase ? f->phase : "none");
  put(&b, "\"} 1\n");
  head(&b, "vlmload_memory_bytes", "gauge",
       "Latest reading of each memory series vlmload samples (--monitor-*), in bytes.");
  for (size_t i = 0; i < f->n_mem; i++) {
    const char *s = f->mem[i].series, *dot = strchr(s, '.');
    put(&b, "vlmload_memory_bytes{series=\"");
    put_label(&b, s);
    put(&b, "\",process=\"");
    put_label(&b, dot ? dot + 1 : s);
    put(&b, "\"} %.17g\n", f->mem[i].bytes);
  }
  *len = b.len;
  return b.p;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_len, void **state) {
  vl_metrics_t *m = cls;
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
    return MHD_NO;
  int found = strcmp(url, "/metrics") == 0;
  char *copy;
  size_t len;
  if (found) {
    pthread_mutex_lock(&m->lock);
    len = m->len;
    copy = malloc(len + 1);
    if (copy) {
      memcpy(copy, m->text ? m->text : "", len);
      m->scrapes++;
    }
    pthread_mutex_unlock(&m->lock);
  } else {
    static const char nf[] = "not found: the metrics are at /metrics\n";
    len = sizeof(nf) - 1;
    copy = malloc(len + 1);
    if (copy)
      memcpy(copy, nf, len);
  }
  if (!copy)
    return MHD_NO;
  struct MHD_Response *r = MHD_create_response_from_buffer(len, copy, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(copy);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type",
                          found ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain");
  enum MHD_Result ret = MHD_queue_response(c, found ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND, r);
  MHD_destroy_response(r);
  return ret;
}

/* Splits "ADDR:PORT" or "[ADDR]:PORT" into host and port. Returns 0 or -1. */
static int split(const char *addr, char *host, size_t n, unsigned *port) {
  const char *colon = strrchr(addr, ':');
  if (!colon || colon == addr)
    return -1;
  const char *h = addr, *he = colon;
  if (*h == '[') {
    if (he[-1] != ']')
      return -1;
    h++;
    he--;
  }
  if (he <= h || (size_t)(he - h) >= n)
    return -1;
  memcpy(host, h, (size_t)(he - h));
  host[he - h] = '\0';
  char *end;
  errno = 0;
  unsigned long p = strtoul(colon + 1, &end, 10);
  if (!colon[1] || *end || errno || p > 65535 || colon[1] == '-' || colon[1] == '+')
    return -1;
  *port = (unsigned)p;
  return 0;
}

int vl_metrics_start(vl_metrics_t **out, const char *addr, char *err, size_t errlen) {
  *out = NULL;
  char host[256];
  unsigned port;
  if (split(addr, host, sizeof(host), &port) != 0) {
    snprintf(err, errlen,
             "--metrics-listen '%s': want ADDR:PORT (127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464)",
             addr);
    return VL_EINVAL;
  }
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  char ports[8];
  snprintf(ports, sizeof(ports), "%u", port);
  int gai = getaddrinfo(host, ports, &hints, &ai);
  if (gai != 0) {
    snprintf(err, errlen, "--metrics-listen '%s': unknown address '%s' (%s)", addr, host,
             gai_strerror(gai));
    return VL_EINVAL;
  }
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0)
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
    int e = errno;
    snprintf(err, errlen, "--metrics-listen '%s': cannot listen there: %s%s", addr, strerror(e),
             e == EADDRINUSE ? " (another program has that port: pick another)" : "");
    if (fd >= 0)
      close(fd);
    freeaddrinfo(ai);
    return VL_EIO;
  }
  freeaddrinfo(ai);
  struct sockaddr_storage sa;
  socklen_t salen = sizeof(sa);
  getsockname(fd, (struct sockaddr *)&sa, &salen);
  vl_metrics_t *m = vl_xcalloc(1, sizeof(*m));
  m->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                           : ((struct sockaddr_in *)&sa)->sin_port);
  pthread_mutex_init(&m->lock, NULL);
  m->daemon = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, on_request, m,
                               MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT,
                               (unsigned)10, MHD_OPTION_END);
  if (!m->daemon) {
    snprintf(err, errlen, "--metrics-listen '%s': the HTTP server did not start", addr);
    pthread_mutex_destroy(&m->lock);
    close(fd);
    free(m);
    return VL_EIO;
  }
  *out = m;
  return 0;
}

unsigned vl_metrics_port(const vl_metrics_t *m) {
  return m->port;
}

void vl_metrics_publish(vl_metrics_t *m, const vl_metrics_figures_t *f) {
  if (!m)
    return;
  size_t len;
  char *text = vl_metrics_render(f, &len), *old;
  pthread_mutex_lock(&m->lock);
  old = m->text;
  m->text = text;
  m->len = len;
  pthread_mutex_unlock(&m->lock);
  free(old);
}

uint64_t vl_metrics_scrapes(vl_metrics_t *m) {
  pthread_mutex_lock(&m->lock);
  uint64_t n = m->scrapes;
  pthread_mutex_unlock(&m->lock);
  return n;
}

static volatile sig_atomic_t linger_cut;

static void on_linger_signal(int sig) {
  linger_cut = 1;
}

void vl_metrics_stop(vl_metrics_t *m, uint64_t linger_us) {
  if (!m)
    return;
  if (linger_us) {
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_linger_signal;
    sigemptyset(&sa.sa_mask);
    linger_cut = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    uint64_t until = vl_now_ns() + linger_us * 1000;
    while (!linger_cut) {
      uint64_t now = vl_now_ns();
      if (now >= until)
        break;
      uint64_t left = VL_MIN(until - now, (uint64_t)100000000);
      struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
      nanosleep(&ts, NULL);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
  }
  MHD_stop_daemon(m->daemon); /* closes the listening socket too */
  pthread_mutex_destroy(&m->lock);
  free(m->text);
  free(m);
}
