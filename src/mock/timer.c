/* The timer thread: resumes suspended MHD connections when their deadlines come.
 *
 * One binary min-heap of deadlines and one condition variable on CLOCK_MONOTONIC. A connection that
 * must wait (for --latency, for the next token, or forever when stalled) is suspended with
 * MHD_suspend_connection, which takes it out of MHD's epoll set, so a waiting connection costs no
 * CPU at all; the thread sleeps until the earliest deadline and calls MHD_resume_connection (which
 * is safe from any thread) for everything due. Deadlines within VL__TIMER_SLACK_NS of each other
 * are served by one wake-up, and the thread is signalled only when a new deadline becomes the
 * earliest.
 *
 * Stalled connections are re-armed every second: the thread peeks at the socket (MSG_PEEK, no
 * wait) and resumes the connection, with peer_gone set, once the client has closed it, since MHD
 * does not watch the sockets of suspended connections.
 *
 * Lock order: this module's mutex, then MHD's internal ones (MHD_suspend_connection is called with
 * the mutex held, so that a suspension and the shutdown flag cannot cross). */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static pthread_t thread;
static bool started;
static bool stopping;                        /* guarded by mu */
static atomic_bool stop_flag;                /* the same, for lock-free readers */
static uint64_t sleeping_until = UINT64_MAX; /* the deadline the thread waits for; guarded by mu */
static uint64_t not_before; /* no wake-up before this: groups close deadlines; guarded by mu */
static vl__timer_node_t **heap;
static size_t heap_len, heap_cap;

static void heap_push(vl__timer_node_t *n) {
  if (heap_len == heap_cap) {
    heap_cap = heap_cap ? heap_cap * 2 : 1024;
    heap = vl_xrealloc(heap, heap_cap * sizeof(*heap));
  }
  size_t i = heap_len++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (heap[parent]->due_ns <= n->due_ns)
      break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = n;
}

static vl__timer_node_t *heap_pop(void) {
  vl__timer_node_t *top = heap[0], *last = heap[--heap_len];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, m = l;
    if (l >= heap_len)
      break;
    if (l + 1 < heap_len && heap[l + 1]->due_ns < heap[l]->due_ns)
      m = l + 1;
    if (last->due_ns <= heap[m]->due_ns)
      break;
    heap[i] = heap[m];
    i = m;
  }
  if (heap_len > 0)
    heap[i] = last;
  return top;
}

/* Adds n (mu held) and wakes the thread if n is now the earliest deadline. */
static void arm_locked(vl__timer_node_t *n) {
  heap_push(n);
  if (heap[0] == n && VL_MAX(n->due_ns, not_before) < sleeping_until)
    pthread_cond_signal(&cv);
}

bool vl__timer_peer_alive(int fd) {
  char c;
  ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r > 0)
    return true;
  if (r == 0)
    return false;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/* Acts on a due node, without mu. A suspended connection cannot be closed by MHD, so node and its
 * socket stay valid until we resume it. */
static void fire(vl__timer_node_t *n) {
  if (n->peek_fd >= 0) {
    if (vl__timer_peer_alive(n->peek_fd)) {
      pthread_mutex_lock(&mu);
      if (!stopping) {
        n->due_ns = vl_now_ns() + VL__STALL_CHECK_NS;
        arm_locked(n);
        pthread_mutex_unlock(&mu);
        return;
      }
      pthread_mutex_unlock(&mu);
    } else {
      atomic_store(&n->peer_gone, true);
    }
  }
  MHD_resume_connection(n->conn);
}

static void *timer_main(void *arg) {
  vl__timer_node_t *batch[BATCH];
  pthread_mutex_lock(&mu);
  while (!stopping) {
    uint64_t now = vl_now_ns();
    size_t nb = 0;
    if (now >= not_before) {
      while (heap_len > 0 && nb < BATCH && heap[0]->due_ns <= now)
        batch[nb++] = heap_pop();
    }
    if (nb > 0) {
      if (nb < BATCH)
        not_before = now + VL__TIMER_SLACK_NS;
      pthread_mutex_unlock(&mu);
      for (size_t i = 0; i < nb; i++)
        fire(batch[i]);
      pthread_mutex_lock(&mu);
      continue;
    }
    if (heap_len == 0) {
      sleeping_until = UINT64_MAX;
      pthread_cond_wait(&cv, &mu);
    } else {
      sleeping_until = VL_MAX(heap[0]->due_ns, not_before);
      struct timespec ts = {(time_t)(sleeping_until / 1000000000u),
                            (long)(sleeping_until % 1000000000u)};
      pthread_cond_timedwait(&cv, &mu, &ts);
    }
    sleeping_until = 0; /* awake: nobody needs to signal */
  }
  /* MHD_stop_daemon must find no suspended connection: resume every waiter, early. */
  while (heap_len > 0)
    MHD_resume_connection(heap_pop()->conn);
  pthread_mutex_unlock(&mu);
  return arg;
}

int vl__timer_start(void) {
  pthread_condattr_t attr;
  int rc = pthread_condattr_init(&attr);
  if (rc == 0)
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (rc == 0)
    rc = pthread_cond_init(&cv, &attr);
  pthread_condattr_destroy(&attr);
  if (rc == 0)
    rc = pthread_create(&thread, NULL, timer_main, NULL);
  if (rc != 0)
    return -rc;
  started = true;
  return 0;
}

bool vl__timer_suspend_until(vl__timer_node_t *node, uint64_t due_ns) {
  pthread_mutex_lock(&mu);
  if (stopping) {
    pthread_mutex_unlock(&mu);
    return false;
  }
  MHD_suspend_connection(node->conn);
  node->due_ns = due_ns;
  arm_locked(node);
  pthread_mutex_unlock(&mu);
  return true;
}

bool vl__timer_suspend(vl__timer_node_t *node) {
  pthread_mutex_lock(&mu);
  bool ok = !stopping;
  if (ok)
    MHD_suspend_connection(node->conn);
  pthread_mutex_unlock(&mu);
  return ok;
}

void vl__timer_resume_at(vl__timer_node_t *node, uint64_t due_ns) {
  pthread_mutex_lock(&mu);
  if (!stopping && due_ns > vl_now_ns()) {
    node->due_ns = due_ns;
    arm_locked(node);
    pthread_mutex_unlock(&mu);
    return;
  }
  pthread_mutex_unlock(&mu);
  MHD_resume_connection(node->conn);
}

bool vl__timer_stopping(void) {
  return atomic_load_explicit(&stop_flag, memory_order_relaxed);
}

void vl__timer_stop(void) {
  pthread_mutex_lock(&mu);
  stopping = true;
  atomic_store(&stop_flag, true);
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
  if (started)
    pthread_join(thread, NULL);
  started = false;
  free(heap);
  heap = NULL;
  heap_len = heap_cap = 0;
}
