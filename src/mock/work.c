/* The decode pool: a FIFO of work items served by a few threads, so that parsing a large body and
 * decoding its images never holds up the HTTP threads (each of which serves thousands of
 * connections). Items come from suspended connections; each item resumes its own connection. */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_t *threads;
static unsigned nthreads;
static bool stopping;
static vl__work_item_t *head, *tail;

static void *work_main(void *arg) {
  pthread_mutex_lock(&mu);
  for (;;) {
    vl__work_item_t *it = head;
    if (!it) {
      if (stopping)
        break;
      pthread_cond_wait(&cv, &mu);
      continue;
    }
    head = it->next;
    if (!head)
      tail = NULL;
    bool cancelled = stopping;
    pthread_mutex_unlock(&mu);
    it->run(it, cancelled);
    pthread_mutex_lock(&mu);
  }
  pthread_mutex_unlock(&mu);
  return arg;
}

int vl__work_start(unsigned n) {
  if (n == 0)
    return 0;
  threads = vl_xcalloc(n, sizeof(*threads));
  for (; nthreads < n; nthreads++) {
    int rc = pthread_create(&threads[nthreads], NULL, work_main, NULL);
    if (rc != 0) {
      vl__work_stop();
      return -rc;
    }
  }
  return 0;
}

bool vl__work_submit(vl__work_item_t *item) {
  pthread_mutex_lock(&mu);
  bool ok = nthreads > 0 && !stopping;
  if (ok) {
    item->next = NULL;
    if (tail)
      tail->next = item;
    else
      head = item;
    tail = item;
    pthread_cond_signal(&cv);
  }
  pthread_mutex_unlock(&mu);
  return ok;
}

void vl__work_stop(void) {
  pthread_mutex_lock(&mu);
  stopping = true;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (unsigned i = 0; i < nthreads; i++)
    pthread_join(threads[i], NULL);
  free(threads);
  threads = NULL;
  nthreads = 0;
}
