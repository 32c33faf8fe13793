/* The llamacpp profile's own parts, as llama.cpp's llama-server has them: GET /props, GET /slots,
 * /metrics with llamacpp:* (only with --metrics; 501 otherwise, in llama-server's words), the
 * host prompt cache (--prompt-cache-kb-per-prompt per unique prompt, capped by --cache-ram, held
 * for real by the memory model and emptied by no route), and the counters they report. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vl__llama_stats_t vl__llama;

/* The prompts cached: their keys in an open-addressing set (0 marks a free place), and in order
 * of arrival, for the eviction of the oldest at the cap. Under mu. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *set, *fifo;
static size_t set_cap, fifo_cap, fifo_head, fifo_len;

static size_t find(uint64_t key) {
  size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull) & (set_cap - 1);
  while (set[i] && set[i] != key)
    i = (i + 1) & (set_cap - 1);
  return i;
}

static void set_remove(uint64_t key) {
  size_t i = find(key);
  if (!set[i])
    return;
  set[i] = 0;
  /* Re-insert the run after it, so that no lookup stops short. */
  for (size_t j = (i + 1) & (set_cap - 1); set[j]; j = (j + 1) & (set_cap - 1)) {
    uint64_t k = set[j];
    set[j] = 0;
    set[find(k)] = k;
  }
}

static void grow_set(void) {
  uint64_t *old = set;
  size_t n = set_cap;
  set_cap = set_cap ? set_cap * 2 : 1024;
  set = vl_xcalloc(set_cap, sizeof(*set));
  for (size_t i = 0; i < n; i++)
    if (old[i])
      set[find(old[i])] = old[i];
  free(old);
}

static void fifo_push(uint64_t key) {
  if (fifo_len == fifo_cap) {
    size_t cap = fifo_cap ? fifo_cap * 2 : 1024;
    uint64_t *q = vl_xcalloc(cap, sizeof(*q));
    for (size_t i = 0; i < fifo_len; i++)
      q[i] = fifo[(fifo_head + i) % fifo_cap];
    free(fifo);
    fifo = q;
    fifo_cap = cap;
    fifo_head = 0;
  }
  fifo[(fifo_head + fifo_len++) % fifo_cap] = key;
}

vl__llama_cache_t vl__llama_prompt(uint64_t key, bool cache_prompt) {
  const vl__config_t *cfg = vl__cfg;
  uint64_t per = (uint64_t)(cfg->prompt_cache_kb * 1024.0);
  uint64_t cap = (uint64_t)(cfg->cache_ram_mb * 1048576.0);
  if (!per || !cap)
    return VL__LLAMA_CACHE_OFF;
  if (!cache_prompt) {
    atomic_fetch_add(&vl__llama.cache_skipped, 1);
    return VL__LLAMA_CACHE_SKIPPED;
  }
  key |= 1; /* never 0, which marks a free place */
  pthread_mutex_lock(&mu);
  if (set_cap && set[find(key)] == key) {
    pthread_mutex_unlock(&mu);
    atomic_fetch_add(&vl__llama.cache_hits, 1);
    return VL__LLAMA_CACHE_HIT;
  }
  if (2 * (fifo_len + 1) > set_cap)
    grow_set();
  set[find(key)] = key;
  fifo_push(key);
  uint64_t grown = 0;
  /* Past the cap the oldest prompts go: the memory they held takes the new one's. */
  if ((uint64_t)fifo_len * per > cap) {
    uint64_t gone = fifo[fifo_head];
    fifo_head = (fifo_head + 1) % fifo_cap;
    fifo_len--;
    set_remove(gone);
    atomic_fetch_add(&vl__llama.cache_evicted, 1);
  } else {
    grown = per;
  }
  atomic_store(&vl__llama.cache_entries, fifo_len);
  pthread_mutex_unlock(&mu);
  atomic_fetch_add(&vl__llama.cache_misses, 1);
  vl__memory_prompt(grown);
  return VL__LLAMA_CACHE_MISS;
}

const char *vl__llama_cache_name(vl__llama_cache_t c) {
  static const char *const names[] = {"off", "skipped", "miss", "hit"};
  return names[c];
}

/* The slots llama-server would have: --max-running, else one. */
static unsigned slots(void) {
  return vl__cfg->max_running ? vl__cfg->max_running : 1;
}

char *vl__llama_props(size_t *len) {
  cJSON *o = cJSON_CreateObject();
  cJSON *g = cJSON_AddObjectToObject(o, "default_generation_settings");
  cJSON_AddNumberToObject(g, "n_ctx", 131072);
  cJSON_AddNumberToObject(g, "id", 0);
  cJSON_AddNumberToObject(o, "total_slots", slots());
  cJSON_AddStringToObject(o, "model_path", vl__cfg->model);
  cJSON *m = cJSON_AddObjectToObject(o, "modalities");
  cJSON_AddBoolToObject(m, "vision", 1);
  cJSON_AddBoolToObject(m, "audio", 0);
  cJSON_AddStringToObject(o, "build_info", "b0-vlmmock-" VL_VERSION);
  return vl__chat_print(o, len);
}

char *vl__llama_slots(size_t *len) {
  cJSON *a = cJSON_CreateArray();
  int64_t busy = atomic_load(&vl__stats.in_flight);
  for (unsigned i = 0; i < slots(); i++) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "id", i);
    cJSON_AddNumberToObject(s, "n_ctx", 131072);
    cJSON_AddBoolToObject(s, "is_processing", (int64_t)i < busy);
    cJSON_AddItemToArray(a, s);
  }
  return vl__chat_print(a, len);
}

/* One metric of llama-server's page. */
static int put(char *buf, size_t cap, size_t at, const char *name, const char *type,
               const char *help, double v) {
  int n = snprintf(buf + at, at < cap ? cap - at : 0,
                   "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %.17g\n", name, help,
                   name, type, name, v);
  return n < 0 ? 0 : n;
}

char *vl__llama_metrics(size_t *len) {
  double in_flight = (double)atomic_load(&vl__stats.in_flight);
  double cap = (double)slots();
  double processing = in_flight < cap ? in_flight : cap;
  double deferred = in_flight - processing;
  double prompt = (double)atomic_load(&vl__stats.prompt_tokens);
  double predicted = (double)atomic_load(&vl__stats.completion_tokens);
  double kv = (double)atomic_load(&vl__llama.kv_tokens);
  struct {
    const char *name, *type, *help;
    double v;
  } m[] = {
      {"prompt_tokens_total", "counter", "Number of prompt tokens processed.", prompt},
      {"prompt_seconds_total", "counter", "Prompt process time",
       (double)atomic_load(&vl__llama.prompt_us) / 1e6},
      {"tokens_predicted_total", "counter", "Number of generation tokens processed.", predicted},
      {"tokens_predicted_seconds_total", "counter", "Predict process time",
       (double)atomic_load(&vl__llama.predicted_us) / 1e6},
      {"n_decode_total", "counter", "Total number of llama_decode() calls",
       (double)atomic_load(&vl__llama.decodes)},
      {"n_busy_slots_per_decode", "counter", "Average number of busy slots per llama_decode() call",
       processing > 0 ? processing : 0},
      {"requests_processing", "gauge", "Number of requests processing.", processing},
      {"requests_deferred", "gauge", "Number of requests deferred.", deferred},
      {"kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.",
       kv / (131072.0 * cap) < 1 ? kv / (131072.0 * cap) : 1},
      {"kv_cache_tokens", "gauge", "KV-cache tokens.", kv},
  };
  size_t n = 0, size = 4096;
  char *buf = malloc(size);
  if (!buf)
    return NULL;
  for (size_t i = 0; i < VL_ARRAY_SIZE(m); i++)
    n += (size_t)put(buf, size, n, m[i].name, m[i].type, m[i].help, m[i].v);
  if (n >= size) {
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}
