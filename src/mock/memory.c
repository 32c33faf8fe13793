/* The mock's memory model, held for real: the bytes it reports are allocated and touched, so a
 * monitor reading the process's resident set (VmRSS in /proc) sees them.
 *
 * Three pools, each in anonymous mappings of its own (never the malloc heap, so the model does not
 * mix with the server's working memory and a release reaches the kernel at once):
 *  - leaked: --leak-kb-per-image per decoded image, touched and never released;
 *  - cached: --cache-kb-per-image per decoded image, touched, and unmapped as a whole by a flush
 *    or a cache reset;
 *  - noise: one region resized on every model request (chat or /generate) to a size drawn
 *    uniformly from [0, 2 * --memory-noise-kb] KiB (pages beyond the new size are given back with
 *    MADV_DONTNEED, pages within it touched).
 * --cache-cap-mb caps the cached pool: past the cap the oldest entries are evicted for the new, so
 * the pool holds the cap and the growth beyond is counted as evicted, never held.
 * Two more kinds, for a monitor that tells memory apart by kind:
 *  - shm: --shm-kb-per-image per decoded image in a file of /dev/shm (opened and unlinked at start,
 *    so it shows as "/dev/shm/vlmmock-PID (deleted)" in /proc/PID/maps), mapped shared and written
 *    page by page: it is resident as shared memory (RssShmem), never released;
 *  - step: --step-mb-at-first-image, claimed and touched once, by the first model request that
 *    carries an image (as a CUDA context opened by the first image), in an anonymous mapping, held
 *    until exit.
 * The arena threads (arena.c) hold a fourth kind, in glibc's arenas.
 * Leaked and cached bytes are bump-allocated in chunks of CHUNK bytes reserved with MAP_NORESERVE;
 * only touched pages become resident. Every page is written once as it is claimed, and huge pages
 * are refused (MADV_NOHUGEPAGE), so residency grows by exactly the pages claimed. The pools are
 * counted in bytes; resident memory is their page-rounded size, at most one page more per pool.
 *
 * The figure reported as vlmmock_memory_bytes is base + leaked + cached + noise, where base is the
 * process's resident size once the server is listening, less the pools' pages at that moment
 * (--memory-base-mb, allocated and touched before, is part of it). The server's own working memory
 * (connections, request bodies, decoded pixels) comes on top in the real resident size and is not
 * in the figure.
 *
 * The pools together never exceed --memory-limit-mb: growth past it is not held, only counted
 * (unheld), and said once on stderr, so a long run levels off instead of exhausting the host.
 *
 * Threads: the pools belong to a thread of their own, which claims, touches and releases pages, so
 * no HTTP thread ever waits on a page fault (a request asks for work and goes on). Requests
 * that arrive while it works are served together in its next batch, with one noise draw for the
 * batch (the draw of its last request). A reading, a flush and the baseline wait until the work
 * asked for before them is done, so they see every request processed so far; the wait is at most
 * one batch. Everything else is ordered by one mutex. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHUNK (64ull << 20)

/* A reservation that a pool claims bytes from, front to back. */
typedef struct chunk_s {
  struct chunk_s *next;
  uint8_t *p;
  uint64_t size; /* reserved */
  uint64_t used; /* claimed and touched */
} chunk_t;

typedef struct {
  chunk_t *head; /* the chunk claimed from; older ones follow */
  uint64_t bytes;
} pool_t;

/* The worker's own: the pools and the noise region, touched by no other thread once it runs. */
static pool_t weights, leaked, cached;    /* weights: --memory-base-mb, held until exit */
static pool_t step;                       /* --step-mb-at-first-image, held until exit */
static uint8_t *shm_p;                    /* the /dev/shm file's mapping, NULL without --shm */
static uint64_t shm_size, shm_bytes;      /* reserved (the file's size), claimed and touched */
static uint64_t cache_cap, evicted_bytes; /* cache_cap: --cache-cap-mb in bytes, 0 for none */
static uint8_t *noise_p;                  /* reserved for the largest noise, NULL without noise */
static uint64_t noise_cap, noise_bytes, unheld_bytes, limit_bytes;
static bool warned;
static size_t page;

/* Shared, under mu: work asked for, work done, and what is held as of the last batch. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static pthread_t worker;
static bool running, stopping;
static bool active; /* any of leak, cache or noise: else requests and flushes ask for nothing */
static uint64_t asked, done;           /* work tickets: asked by callers, done by the worker */
static uint64_t want_leak, want_cache; /* bytes asked for since the last batch */
static uint64_t want_shm, want_step;   /* bytes asked for since the last batch */
static uint64_t requests, step_at;     /* model requests seen; the one that made the step */
static uint64_t draws;                 /* noise draws asked for: one per request */
static bool want_release;              /* a flush since the last batch */
static vl__memory_t published;         /* at the end of each batch */
static uint64_t base_bytes;

/* splitmix64: the noise stream, one draw per model request, from --seed. */
static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Bytes rounded up to whole pages. */
static uint64_t pages(uint64_t bytes) {
  return (bytes + page - 1) / page * page;
}

/* Writes one byte in every page of [p, p + n): each becomes resident. */
static void touch(uint8_t *p, uint64_t n) {
  if (n == 0)
    return;
  uintptr_t first = (uintptr_t)p & ~(uintptr_t)(page - 1);
  for (uintptr_t a = first; a < (uintptr_t)p + n; a += page)
    *(volatile uint8_t *)(a < (uintptr_t)p ? (uintptr_t)p : a) = 1;
}

static void *reserve(uint64_t size) {
  void *p =
      mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  madvise(p, size, MADV_NOHUGEPAGE);
  return p;
}

/* Claims and touches n more bytes of pool. Returns false, claiming nothing, when no address space
 * is left. */
static bool claim(pool_t *pool, uint64_t n) {
  while (n > 0) {
    chunk_t *c = pool->head;
    if (!c || c->used == c->size) {
      uint64_t size = n > CHUNK ? pages(n) : CHUNK;
      c = malloc(sizeof(*c));
      uint8_t *p = c ? reserve(size) : NULL;
      if (!p) {
        free(c);
        return false;
      }
      *c = (chunk_t){pool->head, p, size, 0};
      pool->head = c;
    }
    uint64_t k = n < c->size - c->used ? n : c->size - c->used;
    touch(c->p + c->used, k);
    c->used += k;
    pool->bytes += k;
    n -= k;
  }
  return true;
}

/* Unmaps every chunk of pool: its pages go back to the kernel. */
static void release(pool_t *pool) {
  for (chunk_t *c = pool->head, *next; c; c = next) {
    next = c->next;
    munmap(c->p, c->size);
    free(c);
  }
  pool->head = NULL;
  pool->bytes = 0;
}

/* Holds n more bytes in pool unless that would pass the limit. Worker only. */
static void grow(pool_t *pool, uint64_t n) {
  if (n == 0)
    return;
  uint64_t held = leaked.bytes + cached.bytes + step.bytes + shm_bytes + noise_cap;
  if (held + n > limit_bytes || !claim(pool, n)) {
    unheld_bytes += n;
    if (!warned) {
      warned = true;
      fprintf(stderr,
              "vlmmock: warning: the memory model reached --memory-limit-mb %g; further growth "
              "is counted, not held\n",
              vl__cfg->memory_limit_mb);
    }
  }
}

/* Caps n more bytes of cache at cache_cap: what passes it evicts as much of the oldest, so only
 * the rest grows the pool. Worker only. */
static uint64_t capped(uint64_t n) {
  if (cache_cap == 0 || cached.bytes + n <= cache_cap)
    return n;
  uint64_t room = cached.bytes < cache_cap ? cache_cap - cached.bytes : 0;
  evicted_bytes += n - room;
  return room;
}

/* Writes n more bytes of the /dev/shm file; past its size or the limit, counts them unheld. Worker
 * only. */
static void grow_shm(uint64_t n) {
  if (n == 0)
    return;
  uint64_t held = leaked.bytes + cached.bytes + step.bytes + shm_bytes + noise_cap;
  if (held + n > limit_bytes || shm_bytes + n > shm_size) {
    unheld_bytes += n;
    return;
  }
  touch(shm_p + shm_bytes, n);
  shm_bytes += n;
}

/* Opens, unlinks and maps the /dev/shm file, of size bytes (sparse: no page is used until it is
 * written). Returns 0 or VL_ENOMEM after saying why. */
static int open_shm(uint64_t size) {
  char name[64];
  snprintf(name, sizeof(name), "/vlmmock-%ld", (long)getpid());
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    fprintf(stderr, "vlmmock: --shm-kb-per-image: cannot create /dev/shm%s: %s\n", name,
            strerror(errno));
    return VL_ENOMEM;
  }
  shm_unlink(name);
  void *p = MAP_FAILED;
  if (ftruncate(fd, (off_t)size) == 0)
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    fprintf(stderr, "vlmmock: --shm-kb-per-image: cannot map %llu MiB of /dev/shm: %s\n",
            (unsigned long long)(size >> 20), strerror(err));
    return VL_ENOMEM;
  }
  shm_p = p;
  shm_size = size;
  return 0;
}

/* Resizes the noise region to draw number k. Worker only (or before it starts). */
static void redraw_noise(uint64_t k) {
  if (!noise_p)
    return;
  uint64_t r = splitmix64(splitmix64(vl__cfg->seed) + k);
  uint64_t size = (uint64_t)((double)(r >> 11) / 9007199254740992.0 * (double)noise_cap);
  uint64_t keep = pages(size), had = pages(noise_bytes);
  if (keep < had)
    madvise(noise_p + keep, had - keep, MADV_DONTNEED);
  else
    touch(noise_p + noise_bytes, size > noise_bytes ? size - noise_bytes : 0);
  noise_bytes = size;
}

/* The resident set from /proc/self/statm (the same pages as VmRSS), or 0. */
static uint64_t resident(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, pages = 0;
  if (f) {
    if (fscanf(f, "%llu %llu", &size, &pages) != 2)
      pages = 0;
    fclose(f);
  }
  return (uint64_t)pages * page;
}

/* Publishes what is held. Under mu. */
static void publish(void) {
  published.leaked = leaked.bytes;
  published.cached = cached.bytes;
  published.noise = noise_bytes;
  published.shm = shm_bytes;
  published.step = step.bytes;
  published.unheld = unheld_bytes;
  published.evicted = evicted_bytes;
}

/* The worker: takes all the work asked for, does it without the lock, publishes, repeats. */
static void *work_loop(void *arg) {
  uint64_t drawn = 0;
  (void)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (!stopping && done == asked)
      pthread_cond_wait(&work_cv, &mu);
    if (done == asked)
      break;
    uint64_t ticket = asked, leak = want_leak, cache = want_cache, k = draws;
    uint64_t shm = want_shm, once = want_step;
    bool rel = want_release;
    want_leak = want_cache = want_shm = want_step = 0;
    want_release = false;
    pthread_mutex_unlock(&mu);
    /* A flush dropped the cache asked for before it: what is asked now came after it. */
    if (rel)
      release(&cached);
    grow(&step, once);
    grow(&leaked, leak);
    grow(&cached, capped(cache));
    grow_shm(shm);
    if (k != drawn)
      redraw_noise(drawn = k);
    pthread_mutex_lock(&mu);
    publish();
    done = ticket;
    pthread_cond_broadcast(&done_cv);
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* Asks for work and returns its ticket. Under mu. */
static uint64_t ask(void) {
  asked++;
  pthread_cond_signal(&work_cv);
  return asked;
}

/* Waits until the work of ticket is done. Under mu. */
static void wait_done(uint64_t ticket) {
  while (running && done < ticket)
    pthread_cond_wait(&done_cv, &mu);
}

int vl__memory_start(void) {
  const vl__config_t *cfg = vl__cfg;
  page = (size_t)sysconf(_SC_PAGESIZE);
  uint64_t want = (uint64_t)(cfg->memory_base_mb * 1048576.0);
  if (want && !claim(&weights, want)) {
    fprintf(stderr, "vlmmock: --memory-base-mb: cannot map %g MiB\n", cfg->memory_base_mb);
    return VL_ENOMEM;
  }
  limit_bytes = (uint64_t)(cfg->memory_limit_mb * 1048576.0) - want;
  uint64_t cap = (uint64_t)(2 * cfg->noise_kb * 1024.0);
  noise_cap = cap < limit_bytes ? cap : limit_bytes;
  if (noise_cap && !(noise_p = reserve(pages(noise_cap)))) {
    fprintf(stderr, "vlmmock: --memory-noise-kb: cannot map %g KiB\n", 2 * cfg->noise_kb);
    return VL_ENOMEM;
  }
  redraw_noise(0);
  cache_cap = (uint64_t)(cfg->cache_cap_mb * 1048576.0);
  /* The file is as large as the limit allows (sparse until written), at most 64 GiB. */
  if (cfg->shm_kb > 0 && open_shm(limit_bytes < (64ull << 30) ? pages(limit_bytes) : 64ull << 30))
    return VL_ENOMEM;
  if (vl__arena_start() != 0)
    return VL_ENOMEM;
  active = cfg->leak_kb > 0 || cfg->cache_kb > 0 || noise_p || shm_p || cfg->step_mb > 0 ||
           cfg->arena_threads > 0;
  pthread_mutex_lock(&mu);
  publish();
  int rc = pthread_create(&worker, NULL, work_loop, NULL);
  running = rc == 0;
  pthread_mutex_unlock(&mu);
  if (rc != 0) {
    fprintf(stderr, "vlmmock: cannot start the memory thread: %s\n", strerror(rc));
    return VL_ENOMEM;
  }
  return 0;
}

void vl__memory_stop(void) {
  pthread_mutex_lock(&mu);
  if (!running) {
    pthread_mutex_unlock(&mu);
    return;
  }
  stopping = true;
  pthread_cond_signal(&work_cv);
  pthread_mutex_unlock(&mu);
  pthread_join(worker, NULL);
  vl__arena_stop();
  pthread_mutex_lock(&mu);
  running = false;
  pthread_cond_broadcast(&done_cv);
  pthread_mutex_unlock(&mu);
}

void vl__memory_baseline(void) {
  pthread_mutex_lock(&mu);
  wait_done(asked);
  uint64_t pools = pages(published.leaked) + pages(published.cached) + pages(published.noise) +
                   pages(published.shm) + pages(published.step);
  uint64_t rss = resident();
  base_bytes = rss > pools ? rss - pools : 0;
  pthread_mutex_unlock(&mu);
}

void vl__memory_request(uint64_t images) {
  const vl__config_t *cfg = vl__cfg;
  if (!active)
    return;
  pthread_mutex_lock(&mu);
  want_leak += (uint64_t)((double)images * cfg->leak_kb * 1024.0);
  want_cache += (uint64_t)((double)images * cfg->cache_kb * 1024.0);
  want_shm += (uint64_t)((double)images * cfg->shm_kb * 1024.0);
  requests++;
  if (images > 0 && step_at == 0 && cfg->step_mb > 0) {
    step_at = requests;
    want_step = (uint64_t)(cfg->step_mb * 1048576.0);
  }
  draws++;
  ask();
  pthread_mutex_unlock(&mu);
  vl__arena_images(images);
}

void vl__memory_flush(void) {
  if (!active)
    return;
  pthread_mutex_lock(&mu);
  want_cache = 0;
  want_release = true;
  wait_done(ask());
  pthread_mutex_unlock(&mu);
}

void vl__memory_read(vl__memory_t *m) {
  pthread_mutex_lock(&mu);
  wait_done(asked);
  *m = published;
  m->base = base_bytes;
  m->requests = requests;
  m->step_at = step_at;
  pthread_mutex_unlock(&mu);
  m->arena = vl__arena_held();
  m->total = m->base + m->leaked + m->cached + m->noise + m->shm + m->step + m->arena;
  m->resident = resident();
}
