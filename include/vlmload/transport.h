/* libcurl's multi_socket interface driven by a libuv loop (the multi-uv.c wiring).
 *
 * One uv_poll_t per socket curl opens and one uv_timer_t for curl's timeouts. Each transfer
 * carries its own completion: its owner embeds a vl_transfer_t (the easy handle and a done
 * callback) and recovers itself in done with vl_container_of. Easy handles are owned by the
 * caller; the transport only adds them to the multi handle and, when one finishes, removes it
 * and calls its transfer's done. done may add the same or another transfer again at once.
 */
#ifndef VLMLOAD_TRANSPORT_H
#define VLMLOAD_TRANSPORT_H

#include <curl/curl.h>
#include <stdint.h>
#include <uv.h>

typedef struct vl_transport_s vl_transport_t;
typedef struct vl_transfer_s vl_transfer_t;

/* The transfer finished (result is CURLE_OK or why it failed); it is out of the multi handle. */
typedef void (*vl_transfer_done_cb)(vl_transfer_t *x, CURLcode result);
/* Every handle of the transport is closed; its memory may be freed. */
typedef void (*vl_transport_close_cb)(vl_transport_t *t);

/* One easy handle and who to tell when its transfer ends, embedded in the owner (a request slot,
 * the flush call, a scrape). vl_transport_prepare makes it the handle's CURLOPT_PRIVATE, through
 * which the transport finds it again: no owner sets that option itself. Both fields are the
 * owner's to set, before vl_transport_prepare; the struct must not move while the handle is in
 * use with the transport. */
/* A transfer's place in one of the transport's deadline lists (soonest first). */
typedef struct vl_deadline_s {
  uint64_t at_ms; /* on the loop's clock (uv_now) */
  struct vl_deadline_s *prev, *next;
  struct vl_transfer_s *x;
  int linked;
} vl_deadline_t;

typedef struct {
  vl_deadline_t *head, *tail;
} vl_deadlines_t;

/* Why the transport ended a transfer itself (vl_transfer_t.timed_out). */
enum { VL_TRANSFER_TIMEOUT = 1, VL_TRANSFER_CONNECT_TIMEOUT = 2, VL_TRANSFER_CANCELLED = 3 };

struct vl_transfer_s {
  CURL *easy;
  vl_transfer_done_cb done;
  /* The transport's own, set by vl_transport_prepare and vl_transport_timeouts. */
  uint64_t timeout_ms, connect_timeout_ms; /* 0: none */
  vl_deadline_t due, connecting, cancel;
  int timed_out; /* 0, or VL_TRANSFER_*: set before done when the transport timed it out */
  /* Set by the transport, cleared by the owner: the peer closed the reused connection the
   * transfer was sent on (vl_transport_stale) before it took what the transfer sent there: it
   * ended its stream before acknowledging those bytes, or it reset the connection after its end
   * of the stream, as a peer's kernel does for bytes that reach a socket closed unread. When the
   * end of the stream came after the bytes were acknowledged, the transport keeps the socket
   * open for VL_TRANSPORT_LINGER_RTTS round trips (at least VL_TRANSPORT_LINGER_MIN_MS) before
   * calling done, to see whether that reset follows: done then comes that much later. */
  int closed_unread;
  struct sock_s *stale_sock;         /* the reused connection it runs on (vl_transport_stale) */
  int linger_fd;                     /* the socket kept open to see that, or -1 */
  uint64_t linger_until_ms;          /* on the loop's clock */
  CURLcode linger_result;            /* curl's result, held until done */
  int linger_done;                   /* curl finished the transfer: done waits for the linger */
  struct vl_transfer_s *linger_next; /* in vl_transport_t.lingering */
  vl_transport_t *tr;                /* the transport it was prepared for */
  int open_fd; /* the socket curl last opened for it (CURLOPT_OPENSOCKETFUNCTION), or -1 */
};

#define VL_TRANSPORT_LINGER_RTTS   2
#define VL_TRANSPORT_LINGER_MIN_MS 20

struct vl_transport_s {
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer; /* curl's timeout */
  /* The transfers' own time-outs (vl_transport_timeouts): the whole transfer's and the
   * connection's, each list in deadline order, under one timer armed for the soonest. */
  uv_timer_t deadline_timer;
  vl_deadlines_t due, connecting;
  vl_deadlines_t cancels;     /* vl_transport_cancel_at, in deadline order */
  uint64_t deadline_armed_ms; /* when deadline_timer fires; 0 when it is not armed */
  long timed_out;             /* transfers the transport timed out */
  vl_transport_close_cb close_cb;
  void *data;            /* the owner's */
  int running;           /* transfers curl reports running */
  int added;             /* easy handles in the multi handle */
  int sockets;           /* socket contexts alive (poll handles not yet closed) */
  struct sock_s *socks;  /* socket contexts whose poll handle is open */
  struct sock_s **by_fd; /* socket context of each descriptor curl has open */
  size_t by_fd_len;
  struct sock_s **by_port; /* by local port (65536 lists), allocated on first lookup */
  struct sock_s *unported; /* sockets whose local port is not known yet */
  /* Transfers whose connection's end is being watched for a reset (closed_unread), soonest
   * first, under one timer. */
  vl_transfer_t *lingering;
  uv_timer_t linger_timer;
  int timers_closed;  /* of the three timers */
  int closing;        /* vl_transport_close was called */
  long socket_errors; /* poll errors, which curl meets by reading and writing */
  CURLMcode last_mcode;
};

/* Sets up the multi handle and the timer on loop. max_connections caps the connections kept open
 * (0 = curl's default). http2 turns on multiplexing. Returns 0, VL_ECURL or VL_EUV. */
int vl_transport_init(vl_transport_t *t, uv_loop_t *loop, long max_connections, int http2);

/* Sets the options the transport needs on x->easy before its first transfer: curl's sockets are
 * opened and closed through the transport, and x is the handle's CURLOPT_PRIVATE. The transport
 * must outlive the handle's connections, that is, until vl_transport_close. Returns 0 or
 * VL_ECURL. */
int vl_transport_prepare(vl_transport_t *t, vl_transfer_t *x);

/* The HTTP policy of every handle that talks to a server: no signals, no proxy from the
 * environment, http and https only, redirects answered as they are and never followed (so
 * neither the body nor the Authorization header ever travels to a host the user did not name),
 * and on https the certificate and host name verified, against cacert (PEM) when not NULL,
 * unless insecure. Returns 0 or VL_ECURL. */
int vl_transport_policy(CURL *easy, int insecure, const char *cacert);

/* Appends "Authorization: Bearer api_key" (when api_key is set) and the n "Name: value" lines of
 * extra to list. The key's text is wiped from the stack copy it passes through. Returns the
 * longer list, or NULL when memory ran out (list is then freed). */
struct curl_slist *vl_transport_headers(struct curl_slist *list, const char *api_key,
                                        char *const *extra, int n);

/* Whether result means a TLS connection could not be set up (handshake, certificate, CA file). */
int vl_transport_tls_failed(CURLcode result);

/* Whether the kept-alive connection transfer x is about to be sent on again (found by the ports
 * CURLOPT_PREREQFUNCTION reports) holds bytes, the end of the stream or an error (a reset) that
 * nobody read. Before a request is written on a reused HTTP/1.1 connection, nothing may: what
 * waits there answers no request of this transfer (a 408 a server sent when it closed the idle
 * connection), or says the connection is gone. A new or unknown connection holds nothing.
 * The connection is noted as x's, for x->closed_unread. Plain
 * sockets only: on TLS the bytes may be the session's own records.
 *
 * An idle connection stays watched for reading, so what arrived while the loop waited is known
 * without a system call; the socket itself is asked (a MSG_PEEK) only when the connection has been
 * idle for at least VL_TRANSPORT_PEEK_IDLE_NS, which spares the call on the connections a busy
 * run reuses at once, where no server's idle time-out can have struck. */
int vl_transport_stale(vl_transport_t *t, vl_transfer_t *x, int local_port, int remote_port);

#define VL_TRANSPORT_PEEK_IDLE_NS 1000000 /* 1 ms */

/* Gives x's transfers a time-out of their own, kept by the transport instead of curl: timeout_ms
 * for the whole transfer, connect_timeout_ms until vl_transport_connected (0: none). When one
 * passes, the transfer is taken out of the multi handle, x->timed_out says which, and x->done is
 * called with CURLE_OPERATION_TIMEDOUT, as curl's CURLOPT_TIMEOUT_MS and CURLOPT_CONNECTTIMEOUT_MS
 * would. Both count from vl_transport_add, on the loop's clock, to the millisecond.
 *
 * curl keeps its time-outs in a splay tree that it splays at every socket action: with 64
 * transfers in flight, a time-out on each costs some 2,000 instructions a request, as much as the
 * rest of vlmload's own work. Here all transfers of a run share their time-outs, so deadlines come
 * in the order transfers start: each list is a queue, an insertion and a removal cost a few
 * pointer moves, and the timer is re-armed about once per time-out span, not once a request. */
void vl_transport_timeouts(vl_transfer_t *x, uint64_t timeout_ms, uint64_t connect_timeout_ms);

/* Closes x's transfer at at_ms (the loop's clock, uv_now; now or earlier: at the loop's next
 * turn), as a user closing a page does: the easy handle is taken out of the multi handle, which
 * closes a connection whose transfer had not finished (an HTTP/2 stream is reset), x->timed_out
 * is VL_TRANSFER_CANCELLED and x->done is called with CURLE_ABORTED_BY_CALLBACK. A transfer that
 * ends first forgets it. x must be in the transport (vl_transport_add); a later call moves the
 * time. */
void vl_transport_cancel_at(vl_transport_t *t, vl_transfer_t *x, uint64_t at_ms);

/* The transfer's connection is up (called from its CURLOPT_PREREQFUNCTION): its connection
 * time-out no longer applies. */
void vl_transport_connected(vl_transport_t *t, vl_transfer_t *x);

/* Starts a transfer prepared by vl_transport_prepare; x->done is called once when it ends.
 * Returns 0 or VL_ECURL. */
int vl_transport_add(vl_transport_t *t, vl_transfer_t *x);

/* Aborts a transfer that is running; its done is not called. Returns 0 or VL_ECURL. */
int vl_transport_remove(vl_transport_t *t, vl_transfer_t *x);

/* Closes the timer and every socket's poll handle; close_cb runs once they are all closed. Every
 * easy handle must have been removed first. After close_cb, curl_multi_cleanup has run. */
void vl_transport_close(vl_transport_t *t, vl_transport_close_cb close_cb);

#endif
