/* What vlmload knows of each kind of server, in one place: its name on the command line, the
 * signals that tell it apart, the routes that flush its caches, what to say when they fail, and
 * the image placeholder its /generate text expects. Pure data and lookups: the exchanges that
 * read the signals are server.c's.
 */
#ifndef VLMLOAD_PROFILE_H
#define VLMLOAD_PROFILE_H

#include <stddef.h>

typedef enum {
  VL_SERVER_AUTO = 0, /* probe at start */
  VL_SERVER_SGLANG,
  VL_SERVER_VLLM,
  VL_SERVER_OPENAI,
  VL_SERVER_LLAMACPP, /* llama.cpp's llama-server */
} vl_server_kind_t;

/* What llama-server's GET /props says of it: the server's identity, kept for the summary. */
typedef struct vl_profile_props_s {
  int known;            /* GET /props answered with a JSON object */
  char build_info[128]; /* its build ("b10309-..."), shown (vl_text_shown); "" when absent */
  long total_slots;     /* requests it serves at once (-np); -1 when absent */
  long n_ctx;           /* default_generation_settings.n_ctx; -1 when absent */
  int vision;           /* modalities.vision: 1, 0, or -1 when absent */
} vl_profile_props_t;

/* The kind's name as --server takes it: "auto", "sglang", "vllm", "openai" or "llamacpp". */
const char *vl_profile_name(vl_server_kind_t kind);

/* The kind --server NAME means (exact, lower case). Returns 0, or -1 for no such name. */
int vl_profile_by_name(const char *name, vl_server_kind_t *kind);

/* The kind an owned_by of GET /v1/models names ("sglang", "vllm" or "llamacpp", any case), or
 * VL_SERVER_AUTO. */
vl_server_kind_t vl_profile_owned_by(const char *owned_by);

/* A route that only one kind of server answers with 200. */
typedef struct vl_profile_probe_s {
  const char *path;
  vl_server_kind_t kind;
} vl_profile_probe_t;

/* The routes to ask, in order, when /v1/models does not tell (SGLang's server info, vLLM's
 * /version, llama-server's /props); *n gets their number. Static storage. */
const vl_profile_probe_t *vl_profile_probes(size_t *n);

/* The routes that flush a kind's caches, called in order (NULL-terminated), or NULL for none.
 * Static storage. */
const char *const *vl_profile_flush_routes(vl_server_kind_t kind);

/* Why a kind has no flush route and what empties its caches instead, one sentence without a
 * final period, or NULL when nothing is known (the kind has routes, or is unknown). Static. */
const char *vl_profile_no_flush(vl_server_kind_t kind);

/* What to add when every flush failed on a kind ("" when nothing is known): vLLM serves its
 * reset routes only in dev mode. Starts with a space when not empty. */
const char *vl_profile_flush_hint(vl_server_kind_t kind);

/* The counters and gauges of a kind's /metrics page that tell of its caches and load, as metric
 * selectors (a counter NAME also matches the NAME_total a Prometheus client exposes): SGLang's
 * sglang:token_usage, cache_hit_rate, num_running_reqs, num_queue_reqs, cached_tokens; vLLM's
 * vllm:mm_cache_queries, mm_cache_hits, kv_cache_usage_perc, prefix_cache_queries,
 * prefix_cache_hits, num_requests_running, num_requests_waiting; for any other kind every
 * profile's, llama-server's llamacpp:* among them. NULL-terminated, static. */
const char *const *vl_profile_metrics(vl_server_kind_t kind);

/* Whether a flush route waits on the server's side until the server is idle when given
 * ?timeout=S (seconds): SGLang's /flush_cache does (without it, it answers 400 while busy). */
int vl_profile_flush_waits(const char *route);

/* The caches of a kind that its flush routes leave as they are, in words to put beside a
 * post-flush floor ("the VLM embedding cache ... are not cleared by /flush_cache"), or NULL when
 * none is known. Static storage. */
const char *vl_profile_flush_leaves(vl_server_kind_t kind);

/* The image placeholder SGLang's processor for a model expects in /generate text, found from the
 * model's name (case-insensitive substrings: qwen, llava, gemma-3, llama, pixtral); Qwen's for any
 * other name, or for NULL. Static storage. */
const char *vl_profile_image_token(const char *model);

#endif
