/* The transport on a real loop against a byte-level HTTP/1.1 server in the same loop, whose every
 * move happens between two turns of the loop: what a kept-alive connection's end tells of the
 * request sent on it. Every test closes the transport and asserts uv_loop_close() == 0. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* What the server does with the second request of its connection. */
enum { CLOSE_UNREAD, READ_THEN_CLOSE, READ_THEN_ABORT, ANSWER_408_UNREAD };

typedef struct {
  uv_loop_t loop;
  vl_transport_t tr;
  vl_transfer_t x;
  int attempts; /* pre-request calls of the transfer now running */
  int done, tr_closed;
  CURLcode result;
  /* The server: a listening socket, and the connection it serves (one at a time). */
  int lfd, cfd;
  uv_poll_t lpoll, cpoll;
  int cpoll_open;
  int mode;
  int requests; /* requests seen on the connection */
  char buf[4096];
  size_t have;
} ctx_t;

static const char REPLY[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            "Content-Length: 2\r\n\r\n{}";
static const char R408[] = "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n"
                           "Connection: close\r\n\r\n";
static const char BODY[] = "{\"model\":\"m\"}";

static void on_cpoll_closed(uv_handle_t *h) {
  ctx_t *c = h->data;
  c->cpoll_open = 0;
}

/* The connection's poll handle goes first, then the descriptor: a close with unread bytes resets
 * the connection, and close() sends that at once, right behind shutdown()'s end of stream. */
static void server_close(ctx_t *c) {
  uv_poll_stop(&c->cpoll);
  shutdown(c->cfd, SHUT_WR);
  close(c->cfd);
  c->cfd = -1;
  uv_close((uv_handle_t *)&c->cpoll, on_cpoll_closed);
}

/* An abortive close: a reset alone, as a server aborting a request it took sends. */
static void server_abort(ctx_t *c) {
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  ASSERT_INT_EQ(setsockopt(c->cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
  uv_poll_stop(&c->cpoll);
  close(c->cfd);
  c->cfd = -1;
  uv_close((uv_handle_t *)&c->cpoll, on_cpoll_closed);
}

/* Whether buf holds a whole request (its headers and BODY). */
static int whole(const ctx_t *c) {
  const char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
  return end && (size_t)(end + 4 - c->buf) + strlen(BODY) <= c->have;
}

static void on_conn(uv_poll_t *h, int status, int events) {
  ctx_t *c = h->data;
  if (c->requests == 1 && c->mode != READ_THEN_CLOSE && c->mode != READ_THEN_ABORT) {
    /* The next request has begun to arrive: close before reading a byte of it, with a 408 first
     * if so told (an idle time-out that struck as the request came). */
    if (c->mode == ANSWER_408_UNREAD)
      ASSERT_INT_EQ((int)send(c->cfd, R408, strlen(R408), 0), (int)strlen(R408));
    server_close(c);
    return;
  }
  ssize_t n = recv(c->cfd, c->buf + c->have, sizeof(c->buf) - c->have, 0);
  if (n <= 0) { /* a later connection curl closed unused */
    server_close(c);
    return;
  }
  c->have += (size_t)n;
  if (!whole(c))
    return;
  c->have = 0;
  if (++c->requests == 1)
    ASSERT_INT_EQ((int)send(c->cfd, REPLY, strlen(REPLY), 0), (int)strlen(REPLY));
  else if (c->mode == READ_THEN_ABORT)
    server_abort(c); /* read whole, then reset without a reply */
  else
    server_close(c); /* read whole, then closed without a reply */
}

static void on_accept(uv_poll_t *h, int status, int events) {
  ctx_t *c = h->data;
  int fd = accept(c->lfd, NULL, NULL);
  ASSERT(fd >= 0);
  if (c->cfd >= 0 || c->cpoll_open) {
    close(fd); /* curl's later connections: not served */
    return;
  }
  c->cfd = fd;
  c->requests = 0;
  ASSERT_INT_EQ(uv_poll_init(&c->loop, &c->cpoll, fd), 0);
  c->cpoll.data = c;
  c->cpoll_open = 1;
  ASSERT_INT_EQ(uv_poll_start(&c->cpoll, UV_READABLE, on_conn), 0);
}

/* As a request slot does: the connection is noted as the transfer's when reused, and curl's own
 * second try is stopped. */
static int on_prereq(void *ud, char *ip, char *local_ip, int port, int local_port) {
  ctx_t *c = ud;
  if (++c->attempts > 1)
    return CURL_PREREQFUNC_ABORT;
  c->x.closed_unread = 0;
  ASSERT_INT_EQ(vl_transport_stale(&c->tr, &c->x, local_port, port), 0);
  return CURL_PREREQFUNC_OK;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  return size * n;
}

static void on_done(vl_transfer_t *x, CURLcode result) {
  ctx_t *c = vl_container_of(x, ctx_t, x);
  c->result = result;
  c->done++;
}

static void on_tr_closed(vl_transport_t *t) {
  ctx_t *c = t->data;
  c->tr_closed++;
}

static void setup(ctx_t *c, int mode) {
  memset(c, 0, sizeof(*c));
  c->cfd = -1;
  c->mode = mode;
  ASSERT_INT_EQ(uv_loop_init(&c->loop), 0);
  ASSERT_INT_EQ(vl_transport_init(&c->tr, &c->loop, 0, 0), 0);
  c->tr.data = c;

  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  c->lfd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT(c->lfd >= 0);
  ASSERT_INT_EQ(bind(c->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  ASSERT_INT_EQ(listen(c->lfd, 16), 0);
  ASSERT_INT_EQ(getsockname(c->lfd, (struct sockaddr *)&sa, &len), 0);
  ASSERT_INT_EQ(uv_poll_init(&c->loop, &c->lpoll, c->lfd), 0);
  c->lpoll.data = c;
  ASSERT_INT_EQ(uv_poll_start(&c->lpoll, UV_READABLE, on_accept), 0);

  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/chat/completions", ntohs(sa.sin_port));
  c->x.easy = curl_easy_init();
  c->x.done = on_done;
  ASSERT(c->x.easy);
  CURL *e = c->x.easy;
  ASSERT_INT_EQ(curl_easy_setopt(e, CURLOPT_URL, url), CURLE_OK);
  ASSERT_INT_EQ(curl_easy_setopt(e, CURLOPT_POSTFIELDS, BODY), CURLE_OK);
  ASSERT_INT_EQ(curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write), CURLE_OK);
  ASSERT_INT_EQ(curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq), CURLE_OK);
  ASSERT_INT_EQ(curl_easy_setopt(e, CURLOPT_PREREQDATA, c), CURLE_OK);
  ASSERT_INT_EQ(vl_transport_policy(e, 0, NULL), 0);
  ASSERT_INT_EQ(vl_transport_prepare(&c->tr, &c->x), 0);
}

/* Sends one request on the handle and runs the loop until it ends. */
static CURLcode transfer(ctx_t *c) {
  int want = c->done + 1;
  c->attempts = 0;
  ASSERT_INT_EQ(vl_transport_add(&c->tr, &c->x), 0);
  uint64_t end = uv_hrtime() + 10 * (uint64_t)1000000000;
  while (c->done < want) {
    ASSERT(uv_hrtime() < end);
    uv_run(&c->loop, UV_RUN_ONCE);
  }
  return c->result;
}

static void teardown(ctx_t *c) {
  vl_transport_close(&c->tr, on_tr_closed);
  curl_easy_cleanup(c->x.easy);
  if (c->cfd >= 0)
    server_close(c);
  uv_close((uv_handle_t *)&c->lpoll, NULL);
  ASSERT_INT_EQ(uv_run(&c->loop, UV_RUN_DEFAULT), 0);
  close(c->lfd);
  ASSERT_INT_EQ(c->tr_closed, 1);
  ASSERT_INT_EQ(uv_loop_close(&c->loop), 0);
}

/* The server closes a kept-alive connection as the next request reaches it, unread: its end of
 * the stream, then its reset for the bytes it left unread. It never took the request. */
TEST_IMPL(transport_close_before_read) {
  ctx_t c;
  setup(&c, CLOSE_UNREAD);
  ASSERT_INT_EQ(transfer(&c), CURLE_OK);
  ASSERT_INT_EQ(c.x.closed_unread, 0);
  /* curl would send it again on a new connection: stopped, as a slot stops it. */
  ASSERT_INT_EQ(transfer(&c), CURLE_ABORTED_BY_CALLBACK);
  ASSERT_INT_EQ(c.attempts, 2);
  ASSERT_INT_EQ(c.x.closed_unread, 1);
  teardown(&c);
}

/* The server reads the next request whole, then closes without a reply, by the end of its stream,
 * having acknowledged the request: it took it. No reset follows, however long the transport
 * waits. */
TEST_IMPL(transport_read_then_close) {
  ctx_t c;
  setup(&c, READ_THEN_CLOSE);
  ASSERT_INT_EQ(transfer(&c), CURLE_OK);
  uint64_t t0 = uv_hrtime();
  ASSERT_INT_EQ(transfer(&c), CURLE_ABORTED_BY_CALLBACK);
  ASSERT_INT_EQ(c.attempts, 2);
  ASSERT_INT_EQ(c.x.closed_unread, 0);
  /* done waited for the reset that never came. */
  ASSERT(uv_hrtime() - t0 >= (uint64_t)VL_TRANSPORT_LINGER_MIN_MS * 1000000);
  teardown(&c);
}

/* The server reads the next request whole, then resets the connection: from the client, a reset
 * looks the same as the one a server's kernel sends for a request that reached a socket closed
 * unread, and is taken for that. */
TEST_IMPL(transport_read_then_abort) {
  ctx_t c;
  setup(&c, READ_THEN_ABORT);
  ASSERT_INT_EQ(transfer(&c), CURLE_OK);
  CURLcode rc = transfer(&c);
  ASSERT(rc == CURLE_ABORTED_BY_CALLBACK || rc == CURLE_RECV_ERROR);
  ASSERT_INT_EQ(c.x.closed_unread, 1);
  teardown(&c);
}

/* The server answers the next request with a 408 and closes the connection unread, which resets
 * it. The reset is a poll error; curl reads what came before it, as its own poll would let it. */
TEST_IMPL(transport_reply_before_reset) {
  ctx_t c;
  setup(&c, ANSWER_408_UNREAD);
  ASSERT_INT_EQ(transfer(&c), CURLE_OK);
  ASSERT_INT_EQ(transfer(&c), CURLE_OK);
  long status = 0;
  curl_easy_getinfo(c.x.easy, CURLINFO_RESPONSE_CODE, &status);
  ASSERT_INT_EQ(status, 408);
  ASSERT_INT_EQ(c.attempts, 1);
  ASSERT(c.tr.socket_errors > 0);
  teardown(&c);
}

/* A transfer removed while its connect is still under way: libcurl 7.88 closes that socket with
 * close() alone, telling neither the socket callback nor the close-socket one. The transport lets
 * go of its poll handle all the same (libuv would abort registering the closed descriptor, and a
 * new socket given its number would never be polled). The server here is a listening socket whose
 * queue two connections already fill, so that a third's handshake waits. */
TEST_IMPL(transport_removed_connecting) {
  ctx_t c;
  setup(&c, CLOSE_UNREAD);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  int full = socket(AF_INET, SOCK_STREAM, 0), fill[2];
  ASSERT(full >= 0);
  ASSERT_INT_EQ(bind(full, (struct sockaddr *)&sa, sizeof(sa)), 0);
  ASSERT_INT_EQ(listen(full, 0), 0);
  ASSERT_INT_EQ(getsockname(full, (struct sockaddr *)&sa, &len), 0);
  for (int i = 0; i < 2; i++) {
    fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT(fill[i] >= 0);
    (void)connect(fill[i], (struct sockaddr *)&sa, sizeof(sa));
  }
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/chat/completions", ntohs(sa.sin_port));
  ASSERT_INT_EQ(curl_easy_setopt(c.x.easy, CURLOPT_URL, url), CURLE_OK);
  c.attempts = 0;
  ASSERT_INT_EQ(vl_transport_add(&c.tr, &c.x), 0);
  uint64_t end = uv_hrtime() + 200 * (uint64_t)1000000;
  while (uv_hrtime() < end)
    uv_run(&c.loop, UV_RUN_NOWAIT);
  ASSERT_INT_EQ(c.attempts, 0); /* still connecting: no request went out */
  ASSERT_INT_EQ(c.tr.sockets, 1);
  ASSERT_INT_EQ(vl_transport_remove(&c.tr, &c.x), 0);
  for (int i = 0; i < 3; i++)
    uv_run(&c.loop, UV_RUN_NOWAIT);
  ASSERT_INT_EQ(c.tr.sockets, 0);
  ASSERT_INT_EQ(c.done, 0);
  teardown(&c);
  close(fill[0]);
  close(fill[1]);
  close(full);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(transport_close_before_read),  TEST_ENTRY(transport_read_then_close),
    TEST_ENTRY(transport_read_then_abort),    TEST_ENTRY(transport_reply_before_reset),
    TEST_ENTRY(transport_removed_connecting),
};

int main(int argc, char **argv) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
  curl_global_cleanup();
  return rc;
}
