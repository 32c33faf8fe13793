/* Arenas that fill with threads and then hold: --arena-threads N threads, each of which, for every
 * decoded image handed to it, mallocs scratch of a size drawn uniformly from [0, --arena-kb] KiB
 * (from --seed and the image's number), writes every page of it and frees it again, as an image
 * processor's worker does. glibc gives each thread an arena of its own (up to its limit of eight
 * per core), and the scratch is allocated in blocks below the mmap threshold, so it lives in that
 * arena's heap, an anonymous mapping of its own. M_TRIM_THRESHOLD is raised so that glibc never
 * gives a freed top back: each arena keeps its largest scratch resident, and the held memory rises
 * while larger draws still come, then holds at about N * --arena-kb.
 *
 * The figure reported is the sum over the threads of their largest scratch so far: the arenas'
 * payload, without glibc's headers (16 bytes per block) or the pages a block straddles.
 *
 * Images are handed out in turn (image i to thread i mod N). One mutex orders the hand-over and
 * the figures; a reading waits until every image handed before it is processed. */
#include "internal.h"

#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK       (32u << 10) /* a scratch block: well below glibc's 128 KiB mmap threshold */
#define MAX_THREADS 64

typedef struct {
  pthread_t thread;
  uint64_t pending; /* images handed, not yet processed */
  uint64_t next;    /* the number of the next image it processes (its draw) */
  uint64_t peak;    /* its largest scratch, bytes */
} worker_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static worker_t workers[MAX_THREADS];
static unsigned nworkers; /* started */
static uint64_t handed, pending;
static bool stopping;

/* splitmix64, as memory.c's noise. */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Mallocs size bytes of scratch in blocks, writes every page, frees it all. */
static void scratch(uint64_t size) {
  size_t n = (size_t)((size + BLOCK - 1) / BLOCK);
  void **blocks = n ? malloc(n * sizeof(*blocks)) : NULL;
  if (!blocks)
    return;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  for (size_t i = 0; i < n; i++) {
    blocks[i] = malloc(BLOCK);
    if (blocks[i])
      for (size_t b = 0; b < BLOCK; b += page)
        ((volatile char *)blocks[i])[b] = 1;
  }
  for (size_t i = n; i-- > 0;)
    free(blocks[i]);
  free(blocks);
}

static void *work_loop(void *arg) {
  worker_t *w = arg;
  uint64_t max = (uint64_t)(vl__cfg->arena_kb * 1024.0);
  pthread_mutex_lock(&mu);
  for (;;) {
    while (!stopping && w->pending == 0)
      pthread_cond_wait(&work_cv, &mu);
    if (w->pending == 0)
      break;
    uint64_t k = w->next++;
    pthread_mutex_unlock(&mu);
    uint64_t r = mix(mix(vl__cfg->seed ^ 0xa4e7a5ull) + k);
    uint64_t size = (uint64_t)((double)(r >> 11) / 9007199254740992.0 * (double)max);
    scratch(size);
    pthread_mutex_lock(&mu);
    if (size > w->peak)
      w->peak = size;
    w->pending--;
    pending--;
    pthread_cond_broadcast(&done_cv);
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

int vl__arena_start(void) {
  unsigned n = vl__cfg->arena_threads;
  if (n == 0)
    return 0;
  /* Freed tops stay in their arenas: the largest scratch so far is what each arena holds. */
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  for (unsigned i = 0; i < n && i < MAX_THREADS; i++) {
    int rc = pthread_create(&workers[i].thread, NULL, work_loop, &workers[i]);
    if (rc != 0) {
      fprintf(stderr, "vlmmock: cannot start arena thread %u: %s\n", i + 1, strerror(rc));
      vl__arena_stop();
      return VL_ENOMEM;
    }
    nworkers = i + 1;
  }
  return 0;
}

void vl__arena_images(uint64_t images) {
  if (nworkers == 0 || images == 0)
    return;
  pthread_mutex_lock(&mu);
  for (uint64_t i = 0; i < images; i++, handed++) {
    workers[handed % nworkers].pending++;
    pending++;
  }
  pthread_cond_broadcast(&work_cv);
  pthread_mutex_unlock(&mu);
}

uint64_t vl__arena_held(void) {
  uint64_t sum = 0;
  pthread_mutex_lock(&mu);
  while (pending > 0 && !stopping)
    pthread_cond_wait(&done_cv, &mu);
  for (unsigned i = 0; i < nworkers; i++)
    sum += workers[i].peak;
  pthread_mutex_unlock(&mu);
  return sum;
}

void vl__arena_stop(void) {
  pthread_mutex_lock(&mu);
  stopping = true;
  pthread_cond_broadcast(&work_cv);
  pthread_cond_broadcast(&done_cv);
  unsigned n = nworkers;
  pthread_mutex_unlock(&mu);
  for (unsigned i = 0; i < n; i++)
    pthread_join(workers[i].thread, NULL);
  pthread_mutex_lock(&mu);
  nworkers = 0;
  pthread_mutex_unlock(&mu);
}
