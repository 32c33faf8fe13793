#include "vlmload/transport.h"
#include "vlmload/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One per socket curl opens, alive from curl's first interest in the socket until curl closes it
 * (CURLOPT_CLOSESOCKETFUNCTION), so a kept-alive connection keeps its poll handle from one request
 * to the next: no allocation and no epoll registration per request. Freed in the poll handle's
 * close callback, never before. */
typedef struct sock_s {
  uv_poll_t poll;
  curl_socket_t fd;
  vl_transport_t *t;
  int events;                 /* what the poll handle watches now */
  int wanted;                 /* curl wants events on this socket (not CURL_POLL_REMOVE) */
  int served;                 /* a transfer on it has ended: the connection is being reused */
  int unread;                 /* it became readable while idle: unasked bytes, or the peer's end */
  int error_rounds;           /* poll errors in a row, each passed to curl to read (on_poll) */
  vl_transfer_t *x;           /* the transfer running on it since it was reused
                                 (vl_transport_stale), until that transfer ends; else NULL */
  uint64_t idle_ns;           /* when its last transfer ended (uv_hrtime) */
  int port;                   /* local port, 0 until looked up (see reused_sock) */
  struct sock_s *prev, *next; /* in t->socks, while the poll handle is open */
  struct sock_s *port_next;   /* in t->by_port[port] once its port is known, else in t->unported */
} sock_t;

/* Poll errors in a row on one socket that curl is left to meet by reading: 64 reads of up to
 * 16 KiB each take in what a server sent before it reset the connection. */
#define SOCK_ERROR_ROUNDS 64

static void on_sock_closed(uv_handle_t *h);

static void link_sock(vl_transport_t *t, sock_t *s) {
  s->prev = NULL;
  s->next = t->socks;
  if (t->socks)
    t->socks->prev = s;
  t->socks = s;
}

static void unlink_sock(sock_t *s) {
  vl_transport_t *t = s->t;
  if (s->prev)
    s->prev->next = s->next;
  else
    t->socks = s->next;
  if (s->next)
    s->next->prev = s->prev;
  s->prev = s->next = NULL;
}

/* Forgets the socket: closes its poll handle (which takes it out of epoll at once). */
static void close_sock(sock_t *s) {
  vl_transport_t *t = s->t;
  if (s->fd >= 0 && (size_t)s->fd < t->by_fd_len && t->by_fd[s->fd] == s)
    t->by_fd[s->fd] = NULL;
  sock_t **pp = s->port ? (t->by_port ? &t->by_port[s->port] : NULL) : &t->unported;
  while (pp && *pp && *pp != s)
    pp = &(*pp)->port_next;
  if (pp && *pp)
    *pp = s->port_next;
  unlink_sock(s);
  if (s->x && s->x->stale_sock == s)
    s->x->stale_sock = NULL;
  s->x = NULL;
  uv_close((uv_handle_t *)&s->poll, on_sock_closed);
}

/* libcurl 7.88 closes a socket whose connect had not completed (refused, or its transfer removed
 * while connecting) with close() alone: no CURL_POLL_REMOVE, no CURLOPT_CLOSESOCKETFUNCTION. Its
 * poll handle would stay, watching a descriptor that is gone: libuv aborts when it next registers
 * it (EBADF), and a new socket given the same number would find the old handle, registered for a
 * file that no longer exists, and never be polled. Both are caught here: a socket curl opens whose
 * number still has a handle (on_open_socket), and a transfer's last socket found closed once the
 * transfer is out of the multi handle (forget_closed). */
static void forget_closed(vl_transport_t *t, vl_transfer_t *x) {
  int fd = x->open_fd;
  x->open_fd = -1;
  if (fd < 0 || (size_t)fd >= t->by_fd_len || !t->by_fd[fd])
    return;
  if (fcntl(fd, F_GETFD) == -1 && errno == EBADF)
    close_sock(t->by_fd[fd]);
}

static void maybe_closed(vl_transport_t *t) {
  if (t->closing && t->sockets == 0 && t->timers_closed == 3 && t->close_cb) {
    vl_transport_close_cb cb = t->close_cb;
    t->close_cb = NULL;
    cb(t);
  }
}

static void on_sock_closed(uv_handle_t *h) {
  sock_t *s = vl_container_of((uv_poll_t *)h, sock_t, poll);
  vl_transport_t *t = s->t;
  free(s);
  t->sockets--;
  maybe_closed(t);
}

/* Deadlines: each list is kept soonest first. Transfers that share a time-out start in the order
 * of their deadlines, so an insertion stops at the tail at once. */
static void deadline_insert(vl_deadlines_t *l, vl_deadline_t *d, uint64_t at_ms) {
  vl_deadline_t *p = l->tail;
  while (p && p->at_ms > at_ms)
    p = p->prev;
  d->at_ms = at_ms;
  d->prev = p;
  d->next = p ? p->next : l->head;
  if (d->next)
    d->next->prev = d;
  else
    l->tail = d;
  if (p)
    p->next = d;
  else
    l->head = d;
  d->linked = 1;
}

static void deadline_unlink(vl_deadlines_t *l, vl_deadline_t *d) {
  if (!d->linked)
    return;
  if (d->prev)
    d->prev->next = d->next;
  else
    l->head = d->next;
  if (d->next)
    d->next->prev = d->prev;
  else
    l->tail = d->prev;
  d->prev = d->next = NULL;
  d->linked = 0;
}

static void on_deadline(uv_timer_t *h);

/* Arms the deadline timer for at_ms unless it fires by then already. */
static void deadline_arm(vl_transport_t *t, uint64_t at_ms) {
  if (t->deadline_armed_ms && t->deadline_armed_ms <= at_ms)
    return;
  uint64_t now = uv_now(t->loop);
  if (uv_timer_start(&t->deadline_timer, on_deadline, at_ms > now ? at_ms - now : 0, 0) == 0)
    t->deadline_armed_ms = at_ms;
}

static void forget_deadlines(vl_transport_t *t, vl_transfer_t *x) {
  deadline_unlink(&t->due, &x->due);
  deadline_unlink(&t->connecting, &x->connecting);
  deadline_unlink(&t->cancels, &x->cancel);
  /* Nothing left to time out: the timer must not hold the loop. */
  if (!t->due.head && !t->connecting.head && !t->cancels.head && t->deadline_armed_ms) {
    uv_timer_stop(&t->deadline_timer);
    t->deadline_armed_ms = 0;
  }
}

/* Times out every transfer whose deadline has come, then arms the timer for the next one. */
static void on_deadline(uv_timer_t *h) {
  vl_transport_t *t = vl_container_of(h, vl_transport_t, deadline_timer);
  t->deadline_armed_ms = 0;
  uint64_t now = uv_now(t->loop);
  for (;;) {
    vl_deadline_t *d = t->connecting.head;
    int why = VL_TRANSFER_CONNECT_TIMEOUT;
    if (!d || (t->due.head && t->due.head->at_ms < d->at_ms)) {
      d = t->due.head;
      why = VL_TRANSFER_TIMEOUT;
    }
    if (!d || (t->cancels.head && t->cancels.head->at_ms < d->at_ms)) {
      d = t->cancels.head;
      why = VL_TRANSFER_CANCELLED;
    }
    if (!d || d->at_ms > now)
      break;
    vl_transfer_t *x = d->x;
    forget_deadlines(t, x);
    if (x->stale_sock) {
      x->stale_sock->x = NULL;
      x->stale_sock = NULL;
    }
    if (x->linger_fd >= 0) { /* its connection's end no longer matters: it timed out */
      close(x->linger_fd);
      x->linger_fd = -1;
    }
    CURLMcode mc = curl_multi_remove_handle(t->multi, x->easy);
    if (mc != CURLM_OK)
      t->last_mcode = mc;
    forget_closed(t, x);
    t->added--;
    x->timed_out = why;
    if (why == VL_TRANSFER_CANCELLED) {
      x->done(x, CURLE_ABORTED_BY_CALLBACK);
      continue;
    }
    t->timed_out++;
    x->done(x, CURLE_OPERATION_TIMEDOUT); /* may add transfers: their deadlines are later */
  }
  if (t->connecting.head)
    deadline_arm(t, t->connecting.head->at_ms);
  if (t->due.head)
    deadline_arm(t, t->due.head->at_ms);
  if (t->cancels.head)
    deadline_arm(t, t->cancels.head->at_ms);
}

/* Whether the peer closed the connection before it took what was sent there: the reset a peer's
 * kernel sends for bytes that reach a closed socket has come (the error it leaves, EPIPE after the
 * peer's end of the stream, ECONNRESET before it, or, once that was read, the connection's state),
 * or the peer's end of the stream came while some of what was sent was unacknowledged (it was sent
 * before those bytes arrived; a peer that took them acknowledges them with its end at the
 * latest). */
static int closed_unread(curl_socket_t fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  struct tcp_info ti;
  socklen_t tlen = sizeof(ti);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && (err == EPIPE || err == ECONNRESET))
    return 1;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tlen) != 0)
    return 0;
  return ti.tcpi_state == TCP_CLOSE || (ti.tcpi_state == TCP_CLOSE_WAIT && ti.tcpi_unacked > 0);
}

/* Lingering transfers (on_close_socket): whether the reset came, then done. */
static void finish_linger(vl_transport_t *t, vl_transfer_t *x) {
  if (closed_unread(x->linger_fd))
    x->closed_unread = 1;
  close(x->linger_fd);
  x->linger_fd = -1;
  x->linger_done = 0;
  x->done(x, x->linger_result);
}

static void unlink_linger(vl_transport_t *t, vl_transfer_t *x) {
  vl_transfer_t **pp = &t->lingering;
  while (*pp && *pp != x)
    pp = &(*pp)->linger_next;
  if (*pp)
    *pp = x->linger_next;
  x->linger_next = NULL;
}

static void on_linger(uv_timer_t *h) {
  vl_transport_t *t = vl_container_of(h, vl_transport_t, linger_timer);
  uint64_t now = uv_now(t->loop);
  vl_transfer_t *x;
  while ((x = t->lingering) && (x->linger_until_ms <= now || closed_unread(x->linger_fd))) {
    t->lingering = x->linger_next;
    x->linger_next = NULL;
    finish_linger(t, x); /* may start transfers */
  }
  if (t->lingering)
    uv_timer_start(&t->linger_timer, on_linger,
                   t->lingering->linger_until_ms > now ? t->lingering->linger_until_ms - now : 0,
                   0);
}

/* curl finished x while its connection's end lingers: done waits for the linger (soonest first;
 * the list is short: a few connections end so at once). */
static void hold_done(vl_transport_t *t, vl_transfer_t *x, CURLcode result) {
  x->linger_result = result;
  x->linger_done = 1;
  if (x->linger_until_ms <= uv_now(t->loop) || closed_unread(x->linger_fd)) {
    finish_linger(t, x);
    return;
  }
  vl_transfer_t **pp = &t->lingering;
  while (*pp && (*pp)->linger_until_ms <= x->linger_until_ms)
    pp = &(*pp)->linger_next;
  x->linger_next = *pp;
  *pp = x;
  if (t->lingering == x)
    uv_timer_start(&t->linger_timer, on_linger, x->linger_until_ms - uv_now(t->loop), 0);
}

static void check_multi_info(vl_transport_t *t) {
  CURLMsg *msg;
  int pending;
  while ((msg = curl_multi_info_read(t->multi, &pending)) != NULL) {
    if (msg->msg != CURLMSG_DONE)
      continue;
    CURL *easy = msg->easy_handle;
    CURLcode result = msg->data.result; /* msg is invalid once the handle is removed */
    CURLMcode mc = curl_multi_remove_handle(t->multi, easy);
    if (mc != CURLM_OK)
      t->last_mcode = mc;
    t->added--;
    vl_transfer_t *x = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
    forget_closed(t, x);
    forget_deadlines(t, x);
    if (x->stale_sock) {
      x->stale_sock->x = NULL;
      x->stale_sock = NULL;
    }
    if (x->linger_fd >= 0)
      hold_done(t, x, result);
    else
      x->done(x, result);
  }
}

static void socket_action(vl_transport_t *t, curl_socket_t fd, int flags) {
  CURLMcode mc = curl_multi_socket_action(t->multi, fd, flags, &t->running);
  if (mc != CURLM_OK)
    t->last_mcode = mc;
  check_multi_info(t);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  sock_t *s = vl_container_of(h, sock_t, poll);
  if (!s->wanted) {
    /* An idle kept-alive connection became readable: the server closed it or sent something
     * unasked, which vl_transport_stale then reports without a system call. Stop watching
     * (level-triggered, it would fire again at once). */
    uv_poll_stop(&s->poll);
    s->events = 0;
    /* Writable says nothing (a socket mostly is): a watch left from sending ended so. */
    if (status < 0 || (events & UV_READABLE))
      s->unread = 1;
    return;
  }
  int flags = 0;
  if (status < 0) {
    /* The socket has an error pending (a reset, say), and libuv stopped the handle. Let curl find
     * out what it is as its own poll would: by reading and writing, which gives it first what
     * arrived before the error (a reply the server sent as it reset the connection), a buffer at
     * a time, then the error itself. CURL_CSELECT_ERR alone fails the transfer unread, as a
     * send failure: that is left for a socket whose error outlasts SOCK_ERROR_ROUNDS reads. */
    s->t->socket_errors++;
    flags = ++s->error_rounds < SOCK_ERROR_ROUNDS ? CURL_CSELECT_IN | CURL_CSELECT_OUT
                                                  : CURL_CSELECT_ERR;
  } else {
    s->error_rounds = 0;
    if (events & UV_READABLE)
      flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
      flags |= CURL_CSELECT_OUT;
  }
  socket_action(s->t, s->fd, flags);
  /* A transfer still on the socket, its watch unchanged, hears of the error again while it remains
   * (poll reports it until a read or write takes it). s lives until its close callback. */
  if (status < 0 && (flags & CURL_CSELECT_IN) && s->wanted &&
      !uv_is_closing((uv_handle_t *)&s->poll) && !uv_is_active((uv_handle_t *)&s->poll))
    (void)uv_poll_start(&s->poll, s->events, on_poll);
}

static void on_timer(uv_timer_t *h) {
  vl_transport_t *t = vl_container_of(h, vl_transport_t, timer);
  socket_action(t, CURL_SOCKET_TIMEOUT, 0);
}

static sock_t *sock_for(vl_transport_t *t, curl_socket_t fd) {
  if (fd < 0)
    return NULL;
  if ((size_t)fd >= t->by_fd_len) {
    size_t n = t->by_fd_len ? t->by_fd_len : 1024;
    while (n <= (size_t)fd)
      n *= 2;
    struct sock_s **a = realloc(t->by_fd, n * sizeof(*a));
    if (!a)
      return NULL;
    for (size_t i = t->by_fd_len; i < n; i++)
      a[i] = NULL;
    t->by_fd = a;
    t->by_fd_len = n;
  }
  sock_t *s = t->by_fd[fd];
  if (s)
    return s;
  s = malloc(sizeof(*s));
  if (!s)
    return NULL;
  s->fd = fd;
  s->t = t;
  s->events = 0;
  s->wanted = 0;
  s->served = 0;
  s->unread = 0;
  s->error_rounds = 0;
  s->x = NULL;
  s->idle_ns = 0;
  s->port = 0;
  if (uv_poll_init_socket(t->loop, &s->poll, fd) != 0) {
    free(s);
    return NULL;
  }
  s->port_next = t->unported;
  t->unported = s;
  t->sockets++;
  link_sock(t, s);
  t->by_fd[fd] = s;
  return s;
}

/* CURLMOPT_SOCKETFUNCTION: start, change or stop watching a socket. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
  vl_transport_t *t = userp;
  if (what == CURL_POLL_REMOVE) {
    sock_t *s = fd >= 0 && (size_t)fd < t->by_fd_len ? t->by_fd[fd] : NULL;
    /* The connection goes back to curl's cache. Keep its poll handle as it is: the next request
     * on it most likely wants the same events, and then nothing changes in epoll. */
    if (s) {
      s->wanted = 0;
      s->served = 1;
      s->idle_ns = uv_hrtime();
    }
    return 0;
  }
  sock_t *s = sock_for(t, fd);
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

/* CURLOPT_CLOSESOCKETFUNCTION: curl is done with a socket. Its poll handle goes first, so epoll
 * never holds a closed descriptor that a new socket could reuse.
 *
 * curl closing a reused connection while the transfer sent there has had no reply byte ends that
 * transfer unanswered; the transport notes whether the peer closed the connection before it took
 * the request (vl_transfer_t.closed_unread). When that is not plain yet, the reset it would cause
 * may still be on its way: the descriptor stays open, and the transfer's done waits, for
 * VL_TRANSPORT_LINGER_RTTS round trips (at least VL_TRANSPORT_LINGER_MIN_MS; finish_linger). */
static int on_close_socket(void *clientp, curl_socket_t fd) {
  vl_transport_t *t = clientp;
  sock_t *s = fd >= 0 && (size_t)fd < t->by_fd_len ? t->by_fd[fd] : NULL;
  if (!s)
    return close(fd);
  vl_transfer_t *x = s->x;
  long head = 1, sent = 0;
  int linger = 0;
  /* Only when a request went out on it and no reply came: a stale connection found before a byte
   * was written needs no verdict. */
  if (x && x->linger_fd < 0 &&
      curl_easy_getinfo(x->easy, CURLINFO_HEADER_SIZE, &head) == CURLE_OK && head == 0 &&
      curl_easy_getinfo(x->easy, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK && sent > 0) {
    struct tcp_info ti;
    socklen_t tlen = sizeof(ti);
    if (closed_unread(fd)) {
      x->closed_unread = 1;
    } else {
      uint64_t rtt_us = getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tlen) == 0 ? ti.tcpi_rtt : 0;
      uint64_t wait_ms = (uint64_t)VL_TRANSPORT_LINGER_RTTS * rtt_us / 1000 + 1;
      x->linger_fd = fd;
      /* The loop's clock counts whole milliseconds, its reading rounded down: one more keeps the
       * wait at least this long. */
      x->linger_until_ms = uv_now(t->loop) + VL_MAX(wait_ms, VL_TRANSPORT_LINGER_MIN_MS) + 1;
      linger = 1;
    }
  }
  close_sock(s);
  return linger ? 0 : close(fd);
}

/* CURLOPT_OPENSOCKETFUNCTION: the socket curl asks for, as curl would open it. */
static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose,
                                    struct curl_sockaddr *addr) {
  vl_transfer_t *x = clientp;
  vl_transport_t *t = x->tr;
  (void)purpose;
  curl_socket_t fd = socket(addr->family, addr->socktype, addr->protocol);
  if (fd == CURL_SOCKET_BAD)
    return fd;
  if ((size_t)fd < t->by_fd_len && t->by_fd[fd])
    close_sock(t->by_fd[fd]); /* its number came back: the socket it watched was closed unsaid */
  x->open_fd = fd;
  return fd;
}

/* CURLMOPT_TIMERFUNCTION: curl wants socket_action(TIMEOUT) in timeout_ms (-1: never). */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp) {
  vl_transport_t *t = userp;
  if (timeout_ms < 0)
    return uv_timer_stop(&t->timer) ? -1 : 0;
  /* A zero timeout still goes through the loop: curl forbids calling socket_action from here. */
  return uv_timer_start(&t->timer, on_timer, (uint64_t)timeout_ms, 0) ? -1 : 0;
}

int vl_transport_init(vl_transport_t *t, uv_loop_t *loop, long max_connections, int http2) {
  t->loop = loop;
  t->close_cb = NULL;
  t->running = t->added = t->sockets = t->closing = t->timers_closed = 0;
  t->socks = NULL;
  t->by_fd = NULL;
  t->by_fd_len = 0;
  t->by_port = NULL;
  t->unported = NULL;
  t->socket_errors = 0;
  t->last_mcode = CURLM_OK;
  t->due.head = t->due.tail = t->connecting.head = t->connecting.tail = NULL;
  t->cancels.head = t->cancels.tail = NULL;
  t->deadline_armed_ms = 0;
  t->timed_out = 0;
  t->lingering = NULL;
  if (uv_timer_init(loop, &t->timer) != 0)
    return VL_EUV;
  if (uv_timer_init(loop, &t->deadline_timer) != 0) {
    uv_close((uv_handle_t *)&t->timer, NULL);
    return VL_EUV;
  }
  if (uv_timer_init(loop, &t->linger_timer) != 0) {
    uv_close((uv_handle_t *)&t->timer, NULL);
    uv_close((uv_handle_t *)&t->deadline_timer, NULL);
    return VL_EUV;
  }
  t->multi = curl_multi_init();
  if (!t->multi)
    goto fail;
  if (curl_multi_setopt(t->multi, CURLMOPT_SOCKETFUNCTION, on_socket) != CURLM_OK ||
      curl_multi_setopt(t->multi, CURLMOPT_SOCKETDATA, t) != CURLM_OK ||
      curl_multi_setopt(t->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
      curl_multi_setopt(t->multi, CURLMOPT_TIMERDATA, t) != CURLM_OK ||
      curl_multi_setopt(t->multi, CURLMOPT_PIPELINING,
                        http2 ? CURLPIPE_MULTIPLEX : CURLPIPE_NOTHING) != CURLM_OK)
    goto fail;
  if (max_connections > 0 &&
      curl_multi_setopt(t->multi, CURLMOPT_MAXCONNECTS, max_connections) != CURLM_OK)
    goto fail;
  return 0;

fail:
  if (t->multi)
    curl_multi_cleanup(t->multi);
  t->multi = NULL;
  t->closing = 1;
  uv_close((uv_handle_t *)&t->timer, NULL);
  uv_close((uv_handle_t *)&t->deadline_timer, NULL);
  uv_close((uv_handle_t *)&t->linger_timer, NULL);
  return VL_ECURL;
}

int vl_transport_prepare(vl_transport_t *t, vl_transfer_t *x) {
  if (curl_easy_setopt(x->easy, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket) != CURLE_OK ||
      curl_easy_setopt(x->easy, CURLOPT_CLOSESOCKETDATA, t) != CURLE_OK ||
      curl_easy_setopt(x->easy, CURLOPT_OPENSOCKETFUNCTION, on_open_socket) != CURLE_OK ||
      curl_easy_setopt(x->easy, CURLOPT_OPENSOCKETDATA, x) != CURLE_OK ||
      curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x) != CURLE_OK)
    return VL_ECURL;
  x->timeout_ms = x->connect_timeout_ms = 0;
  x->due = (vl_deadline_t){.x = x};
  x->connecting = (vl_deadline_t){.x = x};
  x->cancel = (vl_deadline_t){.x = x};
  x->timed_out = 0;
  x->closed_unread = 0;
  x->stale_sock = NULL;
  x->linger_fd = -1;
  x->linger_done = 0;
  x->linger_next = NULL;
  x->tr = t;
  x->open_fd = -1;
  return 0;
}

void vl_transport_timeouts(vl_transfer_t *x, uint64_t timeout_ms, uint64_t connect_timeout_ms) {
  x->timeout_ms = timeout_ms;
  x->connect_timeout_ms = connect_timeout_ms;
}

void vl_transport_cancel_at(vl_transport_t *t, vl_transfer_t *x, uint64_t at_ms) {
  deadline_unlink(&t->cancels, &x->cancel);
  deadline_insert(&t->cancels, &x->cancel, at_ms);
  deadline_arm(t, at_ms);
}

void vl_transport_connected(vl_transport_t *t, vl_transfer_t *x) {
  deadline_unlink(&t->connecting, &x->connecting);
}

int vl_transport_policy(CURL *easy, int insecure, const char *cacert) {
  CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                                              \
  if (rc == CURLE_OK)                                                                              \
  rc = curl_easy_setopt(easy, opt, val)
  SET(CURLOPT_NOSIGNAL, 1L);
  SET(CURLOPT_NOPROXY, "*");
  SET(CURLOPT_PROTOCOLS_STR, "http,https");
  SET(CURLOPT_FOLLOWLOCATION, 0L);
  SET(CURLOPT_SSL_VERIFYPEER, insecure ? 0L : 1L);
  SET(CURLOPT_SSL_VERIFYHOST, insecure ? 0L : 2L);
  if (cacert)
    SET(CURLOPT_CAINFO, cacert);
#undef SET
  return rc == CURLE_OK ? 0 : VL_ECURL;
}

struct curl_slist *vl_transport_headers(struct curl_slist *list, const char *api_key,
                                        char *const *extra, int n) {
  struct curl_slist *t;
  if (api_key) {
    char auth[4096];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", api_key);
    t = curl_slist_append(list, auth);
    memset(auth, 0, sizeof(auth));
    if (!t)
      goto fail;
    list = t;
  }
  for (int i = 0; i < n; i++) {
    if (!(t = curl_slist_append(list, extra[i])))
      goto fail;
    list = t;
  }
  return list;

fail:
  curl_slist_free_all(list);
  return NULL;
}

int vl_transport_tls_failed(CURLcode result) {
  switch (result) {
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_SSL_ENGINE_INITFAILED:
  case CURLE_USE_SSL_FAILED:
    return 1;
  default:
    return 0;
  }
}

int vl_transport_add(vl_transport_t *t, vl_transfer_t *x) {
  CURLMcode mc = curl_multi_add_handle(t->multi, x->easy);
  if (mc != CURLM_OK) {
    t->last_mcode = mc;
    return VL_ECURL;
  }
  t->added++;
  x->timed_out = 0;
  uint64_t now = uv_now(t->loop);
  if (x->connect_timeout_ms) {
    deadline_insert(&t->connecting, &x->connecting, now + x->connect_timeout_ms);
    deadline_arm(t, now + x->connect_timeout_ms);
  }
  if (x->timeout_ms) {
    deadline_insert(&t->due, &x->due, now + x->timeout_ms);
    deadline_arm(t, now + x->timeout_ms);
  }
  return 0;
}

int vl_transport_remove(vl_transport_t *t, vl_transfer_t *x) {
  if (x->stale_sock) {
    x->stale_sock->x = NULL;
    x->stale_sock = NULL;
  }
  if (x->linger_fd >= 0) {
    int held = x->linger_done;
    unlink_linger(t, x);
    close(x->linger_fd);
    x->linger_fd = -1;
    x->linger_done = 0;
    if (held)
      return 0; /* curl is done with it already */
  }
  forget_deadlines(t, x);
  CURLMcode mc = curl_multi_remove_handle(t->multi, x->easy);
  forget_closed(t, x);
  if (mc != CURLM_OK) {
    t->last_mcode = mc;
    return VL_ECURL;
  }
  t->added--;
  return 0;
}

static void on_timer_closed(uv_handle_t *h) {
  vl_transport_t *t = h->data;
  t->timers_closed++;
  maybe_closed(t);
}

void vl_transport_close(vl_transport_t *t, vl_transport_close_cb close_cb) {
  t->closing = 1;
  t->close_cb = close_cb;
  /* Cleanup closes every cached connection through on_close_socket, which closes its poll
   * handle; the last close callback (or the timer's) reports completion. */
  if (t->multi) {
    curl_multi_cleanup(t->multi);
    t->multi = NULL;
  }
  while (t->socks)
    close_sock(t->socks);
  free(t->by_fd);
  t->by_fd = NULL;
  t->by_fd_len = 0;
  free(t->by_port);
  t->by_port = NULL;
  t->unported = NULL;
  /* A transfer still lingering was removed by its owner, or its done was called: none is. */
  while (t->lingering) {
    vl_transfer_t *x = t->lingering;
    t->lingering = x->linger_next;
    close(x->linger_fd);
    x->linger_fd = -1;
  }
  t->timer.data = t->deadline_timer.data = t->linger_timer.data = t;
  uv_close((uv_handle_t *)&t->timer, on_timer_closed);
  uv_close((uv_handle_t *)&t->deadline_timer, on_timer_closed);
  uv_close((uv_handle_t *)&t->linger_timer, on_timer_closed);
}

/* The port of a socket's local end (peer 0) or remote end (peer 1), 0 when it has none (yet). */
static int sock_port(curl_socket_t fd, int peer) {
  struct sockaddr_storage sa;
  socklen_t len = sizeof(sa);
  if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&sa, &len) != 0)
    return 0;
  if (sa.ss_family == AF_INET)
    return ntohs(((struct sockaddr_in *)&sa)->sin_port);
  if (sa.ss_family == AF_INET6)
    return ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
  return 0;
}

static sock_t *reused_sock(vl_transport_t *t, int local, int remote) {
  if (local <= 0 || local > 65535)
    return NULL;
  if (!t->by_port && !(t->by_port = calloc(65536, sizeof(*t->by_port))))
    return NULL;
  /* Learn the ports of the sockets opened since the last lookup: each socket's once in its life,
   * or until it has one. */
  for (sock_t **pp = &t->unported; *pp;) {
    sock_t *s = *pp;
    if (!(s->port = sock_port(s->fd, 0))) {
      pp = &s->port_next;
      continue;
    }
    *pp = s->port_next;
    s->port_next = t->by_port[s->port];
    t->by_port[s->port] = s;
  }
  sock_t *hit = t->by_port[local];
  if (hit && hit->port_next) {
    /* Connections to different servers may share a local port: the remote port tells them
     * apart, and the first one is kept when even that is the same (two hosts, one port). */
    for (sock_t *s = hit; s; s = s->port_next)
      if (sock_port(s->fd, 1) == remote) {
        hit = s;
        break;
      }
  }
  return hit && hit->served ? hit : NULL;
}

int vl_transport_stale(vl_transport_t *t, vl_transfer_t *x, int local, int remote) {
  sock_t *s = reused_sock(t, local, remote);
  if (!s)
    return 0;
  if (x->stale_sock && x->stale_sock != s)
    x->stale_sock->x = NULL;
  /* One transfer per socket: one that held it before lets go, or the socket, once closed and
   * freed, would still be its stale_sock. */
  if (s->x && s->x != x && s->x->stale_sock == s)
    s->x->stale_sock = NULL;
  s->x = x;
  x->stale_sock = s;
  if (s->unread)
    return 1;
  if (uv_hrtime() - s->idle_ns < VL_TRANSPORT_PEEK_IDLE_NS)
    return 0;
  char c;
  ssize_t n = recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  /* Bytes, the end of the stream, or an error (the peer reset it): only EAGAIN is quiet. */
  return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}
