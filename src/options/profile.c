#include "vlmload/profile.h"
#include "vlmload/common.h"
#include "vlmload/text.h"

#include <string.h>
#include <strings.h>

/* Indexed by vl_server_kind_t. */
static const char *const names[] = {"auto", "sglang", "vllm", "openai", "llamacpp"};

const char *vl_profile_name(vl_server_kind_t kind) {
  return (size_t)kind < VL_ARRAY_SIZE(names) ? names[kind] : names[VL_SERVER_AUTO];
}

int vl_profile_by_name(const char *name, vl_server_kind_t *kind) {
  for (size_t i = 0; i < VL_ARRAY_SIZE(names); i++)
    if (strcmp(name, names[i]) == 0) {
      *kind = (vl_server_kind_t)i;
      return 0;
    }
  return -1;
}

vl_server_kind_t vl_profile_owned_by(const char *owned_by) {
  if (strcasecmp(owned_by, "sglang") == 0)
    return VL_SERVER_SGLANG;
  if (strcasecmp(owned_by, "vllm") == 0)
    return VL_SERVER_VLLM;
  if (strcasecmp(owned_by, "llamacpp") == 0)
    return VL_SERVER_LLAMACPP;
  return VL_SERVER_AUTO;
}

const vl_profile_probe_t *vl_profile_probes(size_t *n) {
  static const vl_profile_probe_t probes[] = {
      {"/get_server_info", VL_SERVER_SGLANG},
      {"/server_info", VL_SERVER_SGLANG},
      {"/version", VL_SERVER_VLLM},
      {"/props", VL_SERVER_LLAMACPP},
  };
  *n = VL_ARRAY_SIZE(probes);
  return probes;
}

const char *const *vl_profile_flush_routes(vl_server_kind_t kind) {
  static const char *const sglang[] = {"/flush_cache", NULL};
  static const char *const vllm[] = {"/reset_prefix_cache", "/reset_mm_cache",
                                     "/reset_encoder_cache", NULL};
  switch (kind) {
  case VL_SERVER_SGLANG:
    return sglang;
  case VL_SERVER_VLLM:
    return vllm;
  default:
    return NULL;
  }
}

const char *vl_profile_no_flush(vl_server_kind_t kind) {
  if (kind != VL_SERVER_LLAMACPP)
    return NULL;
  return "llama.cpp has no route that empties its caches: its host prompt cache (llama-server "
         "--cache-ram MiB, default 8192) holds up to 8 GiB of attention state plus the image "
         "embeddings each entry keeps, and nothing but a restart returns it; send "
         "--no-prompt-cache "
         "(cache_prompt: false in every request) or start a fresh server per cell (vlmload matrix)";
}

const char *vl_profile_flush_hint(vl_server_kind_t kind) {
  return kind == VL_SERVER_VLLM ? " (vLLM serves its reset routes only with VLLM_SERVER_DEV_MODE=1)"
                                : "";
}

const char *const *vl_profile_metrics(vl_server_kind_t kind) {
  static const char *const sglang[] = {"sglang:token_usage",      "sglang:cache_hit_rate",
                                       "sglang:num_running_reqs", "sglang:num_queue_reqs",
                                       "sglang:cached_tokens",    NULL};
  static const char *const vllm[] = {"vllm:mm_cache_queries",     "vllm:mm_cache_hits",
                                     "vllm:kv_cache_usage_perc",  "vllm:prefix_cache_queries",
                                     "vllm:prefix_cache_hits",    "vllm:num_requests_running",
                                     "vllm:num_requests_waiting", NULL};
  /* Any other kind: every profile's, llama-server's among them (its page with --metrics). */
  static const char *const all[] = {"sglang:token_usage",
                                    "sglang:cache_hit_rate",
                                    "sglang:num_running_reqs",
                                    "sglang:num_queue_reqs",
                                    "sglang:cached_tokens",
                                    "vllm:mm_cache_queries",
                                    "vllm:mm_cache_hits",
                                    "vllm:kv_cache_usage_perc",
                                    "vllm:prefix_cache_queries",
                                    "vllm:prefix_cache_hits",
                                    "vllm:num_requests_running",
                                    "vllm:num_requests_waiting",
                                    "llamacpp:prompt_tokens_total",
                                    "llamacpp:prompt_seconds_total",
                                    "llamacpp:tokens_predicted_total",
                                    "llamacpp:n_decode_total",
                                    "llamacpp:requests_processing",
                                    "llamacpp:requests_deferred",
                                    "llamacpp:n_busy_slots_per_decode",
                                    "llamacpp:kv_cache_usage_ratio",
                                    "llamacpp:kv_cache_tokens",
                                    NULL};
  return kind == VL_SERVER_SGLANG ? sglang : kind == VL_SERVER_VLLM ? vllm : all;
}

int vl_profile_flush_waits(const char *route) {
  return strcmp(route, "/flush_cache") == 0;
}

const char *vl_profile_flush_leaves(vl_server_kind_t kind) {
  return kind == VL_SERVER_SGLANG ? "the VLM embedding cache (SGLANG_VLM_CACHE_SIZE_MB) and the "
                                    "multimodal feature pool (SGLANG_MM_FEATURE_CACHE_MB) are not "
                                    "cleared by /flush_cache"
                                  : NULL;
}

const char *vl_profile_image_token(const char *model) {
  static const char qwen[] = "<|vision_start|><|image_pad|><|vision_end|>";
  /* First match wins: "llava" before "llama", which also names Llama 3.2 Vision and Llama 4. */
  static const struct {
    const char *name, *token;
  } known[] = {
      {"qwen", qwen},
      {"llava", "<image>"},
      {"gemma-3", "<start_of_image>"},
      {"gemma3", "<start_of_image>"},
      {"llama", "<|image|>"},
      {"pixtral", "[IMG]"},
  };
  for (size_t i = 0; model && i < VL_ARRAY_SIZE(known); i++)
    if (vl_text_contains_ci(model, known[i].name))
      return known[i].token;
  return qwen;
}
