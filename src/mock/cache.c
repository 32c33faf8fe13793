/* The server's caches as its counters see them: a multimodal cache of images by the hash of their
 * pixels (vLLM's processor cache: vllm:mm_cache_queries and vllm:mm_cache_hits count images) and a
 * prefix cache of whole prompts, their text and images together (SGLang's radix cache, vLLM's
 * prefix cache: a prompt seen before is found whole, its prompt tokens all cached). Each is a set
 * of 64-bit keys under a lock of its own, grown by doubling; nothing is evicted until a reset. */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
  pthread_mutex_t mu;
  uint64_t *keys; /* open addressing; 0 marks a free place (a key of 0 is stored as 1) */
  size_t cap, n;
} keyset_t;

static keyset_t mm = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};
static keyset_t prefix = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

/* Places k in keys (cap a power of two); true when it was there already. */
static bool place(uint64_t *keys, size_t cap, uint64_t k) {
  for (size_t i = (size_t)(k * 0x9e3779b97f4a7c15ull) & (cap - 1);; i = (i + 1) & (cap - 1)) {
    if (keys[i] == k)
      return true;
    if (keys[i] == 0) {
      keys[i] = k;
      return false;
    }
  }
}

/* Looks k up and adds it when absent; true for a hit. Out of memory, the key is not kept (the next
 * lookup misses again). Lock held. */
static bool lookup_add(keyset_t *s, uint64_t k) {
  k = k ? k : 1;
  if ((s->n + 1) * 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 1024;
    uint64_t *keys = calloc(cap, sizeof(*keys));
    if (!keys)
      return false;
    for (size_t i = 0; i < s->cap; i++)
      if (s->keys[i])
        place(keys, cap, s->keys[i]);
    free(s->keys);
    s->keys = keys;
    s->cap = cap;
  }
  bool hit = place(s->keys, s->cap, k);
  s->n += !hit;
  return hit;
}

static void reset(keyset_t *s) {
  pthread_mutex_lock(&s->mu);
  free(s->keys);
  s->keys = NULL;
  s->cap = s->n = 0;
  pthread_mutex_unlock(&s->mu);
}

void vl__cache_request(const vl__chat_req_t *c, uint64_t prompt_tokens) {
  uint64_t key = c->hashed ? c->prompt_hash : VL__FNV_OFFSET, hits = 0;
  pthread_mutex_lock(&mm.mu);
  for (size_t i = 0; i < c->nimages; i++) {
    hits += lookup_add(&mm, c->images[i].hash);
    key = vl__image_fnv1a(key, (const uint8_t *)&c->images[i].hash, sizeof(c->images[i].hash));
  }
  pthread_mutex_unlock(&mm.mu);
  atomic_fetch_add(&vl__stats.mm_cache_queries, c->nimages);
  atomic_fetch_add(&vl__stats.mm_cache_hits, hits);
  pthread_mutex_lock(&prefix.mu);
  bool seen = lookup_add(&prefix, key);
  pthread_mutex_unlock(&prefix.mu);
  atomic_fetch_add(&vl__stats.prefix_cache_queries, prompt_tokens);
  if (seen)
    atomic_fetch_add(&vl__stats.prefix_cache_hits, prompt_tokens);
}

void vl__cache_reset_prefix(void) {
  reset(&prefix);
}

void vl__cache_reset_mm(void) {
  reset(&mm);
}
