/* Counters, the memory model's accounting (memory.c), and their two renderings: /mock/stats (JSON,
 * through cJSON) and /metrics (Prometheus text exposition format 0.0.4). Counters are atomics
 * updated on the request path; readers see each one exactly, not all of them at one instant. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vl__stats_t vl__stats;

#define LOAD(field) ((double)atomic_load(&vl__stats.field))

char *vl__stats_json(size_t *len) {
  vl__memory_t mem;
  vl__memory_read(&mem);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "profile", vl__profile_names[vl__cfg->profile]);
  cJSON_AddStringToObject(o, "model", vl__cfg->model);
  cJSON_AddNumberToObject(o, "uptime_s", (double)(vl_now_ns() - vl__stats.start_ns) / 1e9);
  cJSON_AddNumberToObject(o, "requests_total", LOAD(requests));
  cJSON_AddNumberToObject(o, "requests_completed_total", LOAD(completed));
  cJSON_AddNumberToObject(o, "bad_requests_total", LOAD(bad_requests));
  cJSON_AddNumberToObject(o, "requests_in_flight", LOAD(in_flight));
  cJSON_AddNumberToObject(o, "requests_in_flight_max", LOAD(in_flight_max));
  cJSON_AddNumberToObject(o, "images_total", LOAD(images));
  cJSON_AddNumberToObject(o, "image_bytes_total", LOAD(image_bytes));
  cJSON_AddNumberToObject(o, "image_pixels_total", LOAD(image_pixels));
  cJSON_AddNumberToObject(o, "prompt_tokens_total", LOAD(prompt_tokens));
  cJSON_AddNumberToObject(o, "completion_tokens_total", LOAD(completion_tokens));
  cJSON_AddNumberToObject(o, "flushes_total", LOAD(flushes));
  cJSON_AddNumberToObject(o, "flush_refused_total", LOAD(flush_refused));
  cJSON_AddNumberToObject(o, "reset_prefix_cache_total", LOAD(reset_prefix));
  cJSON_AddNumberToObject(o, "reset_mm_cache_total", LOAD(reset_mm));
  cJSON_AddNumberToObject(o, "tokenize_total", LOAD(tokenize_calls));
  cJSON *faults = cJSON_AddObjectToObject(o, "faults");
  for (int k = VL__FAULT_NONE + 1; k < VL__FAULT_COUNT; k++)
    cJSON_AddNumberToObject(faults, vl__fault_names[k], LOAD(faults[k]));
  cJSON_AddNumberToObject(o, "memory_bytes", (double)mem.total);
  cJSON_AddNumberToObject(o, "memory_base_bytes", (double)mem.base);
  cJSON_AddNumberToObject(o, "memory_leaked_bytes", (double)mem.leaked);
  cJSON_AddNumberToObject(o, "memory_cached_bytes", (double)mem.cached);
  cJSON_AddNumberToObject(o, "memory_noise_bytes", (double)mem.noise);
  cJSON_AddNumberToObject(o, "memory_unheld_bytes", (double)mem.unheld);
  cJSON_AddNumberToObject(o, "memory_resident_bytes", (double)mem.resident);
  cJSON *kinds = cJSON_AddObjectToObject(o, "memory");
  cJSON_AddNumberToObject(kinds, "base", (double)mem.base);
  cJSON_AddNumberToObject(kinds, "leaked", (double)mem.leaked);
  cJSON_AddNumberToObject(kinds, "cached", (double)mem.cached);
  cJSON_AddNumberToObject(kinds, "noise", (double)mem.noise);
  cJSON_AddNumberToObject(kinds, "shm", (double)mem.shm);
  cJSON_AddNumberToObject(kinds, "step", (double)mem.step);
  cJSON_AddNumberToObject(kinds, "arena", (double)mem.arena);
  cJSON_AddNumberToObject(kinds, "total", (double)mem.total);
  cJSON_AddNumberToObject(kinds, "unheld", (double)mem.unheld);
  cJSON_AddNumberToObject(kinds, "evicted", (double)mem.evicted);
  cJSON_AddNumberToObject(kinds, "resident", (double)mem.resident);
  cJSON_AddNumberToObject(kinds, "arena_threads", (double)vl__cfg->arena_threads);
  cJSON_AddNumberToObject(o, "memory_requests", (double)mem.requests);
  if (mem.step_at)
    cJSON_AddNumberToObject(o, "step_at_request", (double)mem.step_at);
  else
    cJSON_AddNullToObject(o, "step_at_request");
  cJSON_AddNumberToObject(o, "connections", LOAD(connections));
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (s)
    *len = strlen(s);
  return s;
}

/* A growable text buffer for the exposition format. */
typedef struct {
  char *p;
  size_t len, cap;
  bool oom;
} text_t;

__attribute__((format(printf, 2, 3))) static void put(text_t *t, const char *fmt, ...) {
  for (;;) {
    if (t->oom)
      return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = t->cap * 2 + (n > 0 ? (size_t)n : 0);
    char *grown = realloc(t->p, cap);
    if (!grown) {
      t->oom = true;
      return;
    }
    t->p = grown;
    t->cap = cap;
  }
}

static void metric(text_t *t, const char *name, const char *type, const char *help, double v) {
  put(t, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

/* The model name as a Prometheus label value: backslash, quote and newline escaped. */
static void label_value(char *out, size_t cap, const char *s) {
  size_t n = 0;
  for (; *s && n + 3 < cap; s++) {
    if (*s == '\\' || *s == '"') {
      out[n++] = '\\';
      out[n++] = *s;
    } else if (*s == '\n') {
      out[n++] = '\\';
      out[n++] = 'n';
    } else {
      out[n++] = *s;
    }
  }
  out[n] = '\0';
}

char *vl__stats_prometheus(size_t *len) {
  text_t t = {malloc(4096), 0, 4096, false};
  if (!t.p)
    return NULL;
  vl__memory_t mem;
  vl__memory_read(&mem);
  metric(&t, "vlmmock_requests_total", "counter",
         "Chat requests received (body complete, or refused as too large).", LOAD(requests));
  metric(&t, "vlmmock_requests_completed_total", "counter",
         "Chat requests whose response was sent in full.", LOAD(completed));
  metric(&t, "vlmmock_bad_requests_total", "counter",
         "Chat requests refused for their content (400, 413).", LOAD(bad_requests));
  metric(&t, "vlmmock_requests_in_flight", "gauge", "Chat requests received and not yet ended.",
         LOAD(in_flight));
  metric(&t, "vlmmock_requests_in_flight_max", "gauge",
         "Highest vlmmock_requests_in_flight since start.", LOAD(in_flight_max));
  metric(&t, "vlmmock_images_total", "counter", "Images decoded.", LOAD(images));
  metric(&t, "vlmmock_image_bytes_total", "counter", "Encoded bytes of the images decoded.",
         LOAD(image_bytes));
  metric(&t, "vlmmock_image_pixels_total", "counter", "Pixels of the images decoded.",
         LOAD(image_pixels));
  metric(&t, "vlmmock_prompt_tokens_total", "counter", "Prompt tokens reported in usage.",
         LOAD(prompt_tokens));
  metric(&t, "vlmmock_completion_tokens_total", "counter",
         "Completion tokens planned for successful replies.", LOAD(completion_tokens));
  metric(&t, "vlmmock_flushes_total", "counter", "Cache flushes performed.", LOAD(flushes));
  metric(&t, "vlmmock_flush_refused_total", "counter",
         "Flushes refused because requests were in flight.", LOAD(flush_refused));
  metric(&t, "vlmmock_reset_prefix_cache_total", "counter", "Calls of /reset_prefix_cache.",
         LOAD(reset_prefix));
  metric(&t, "vlmmock_reset_mm_cache_total", "counter", "Calls of /reset_mm_cache.",
         LOAD(reset_mm));
  put(&t, "# HELP vlmmock_faults_total Faults injected, by kind.\n"
          "# TYPE vlmmock_faults_total counter\n");
  for (int k = VL__FAULT_NONE + 1; k < VL__FAULT_COUNT; k++)
    put(&t, "vlmmock_faults_total{kind=\"%s\"} %.17g\n", vl__fault_names[k], LOAD(faults[k]));
  metric(&t, "vlmmock_memory_bytes", "gauge",
         "Memory model: base + leaked + cached + noise, all held and touched.", (double)mem.total);
  metric(&t, "vlmmock_memory_base_bytes", "gauge", "Resident size when the memory model started.",
         (double)mem.base);
  metric(&t, "vlmmock_memory_leaked_bytes", "gauge", "Memory held and never released.",
         (double)mem.leaked);
  metric(&t, "vlmmock_memory_cached_bytes", "gauge", "Memory held until a flush or cache reset.",
         (double)mem.cached);
  metric(&t, "vlmmock_memory_noise_bytes", "gauge", "The noise region's current size.",
         (double)mem.noise);
  metric(&t, "vlmmock_memory_unheld_bytes", "gauge",
         "Growth the model did not hold because of --memory-limit-mb.", (double)mem.unheld);
  metric(&t, "vlmmock_memory_resident_bytes", "gauge",
         "The process's resident size (VmRSS) at this reading.", (double)mem.resident);
  metric(&t, "vlmmock_connections", "gauge", "Open client connections.", LOAD(connections));

  char model[600];
  label_value(model, sizeof(model), vl__cfg->model);
  double running = LOAD(in_flight);
  double usage = mem.total > 0 ? (double)mem.cached / (double)mem.total : 0;
  if (vl__cfg->profile == VL__PROFILE_SGLANG) {
    put(&t,
        "# HELP sglang:num_running_reqs The number of running requests.\n"
        "# TYPE sglang:num_running_reqs gauge\n"
        "sglang:num_running_reqs{model_name=\"%s\"} %.17g\n"
        "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.\n"
        "# TYPE sglang:num_queue_reqs gauge\n"
        "sglang:num_queue_reqs{model_name=\"%s\"} 0\n"
        "# HELP sglang:token_usage The token usage.\n"
        "# TYPE sglang:token_usage gauge\n"
        "sglang:token_usage{model_name=\"%s\"} %.17g\n",
        model, running, model, model, usage);
  } else if (vl__cfg->profile == VL__PROFILE_VLLM) {
    put(&t,
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{model_name=\"%s\"} %.17g\n"
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        "vllm:num_requests_waiting{model_name=\"%s\"} 0\n"
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        "vllm:kv_cache_usage_perc{model_name=\"%s\"} %.17g\n",
        model, running, model, model, usage);
  }
  if (t.oom) {
    free(t.p);
    return NULL;
  }
  *len = t.len;
  return t.p;
}
