/* Private interfaces of vlmmock, the mock VLM server, shared by its files and included by no one
 * else. mock.c documents the program as a whole (the threading design, the record file and the
 * /mock/stats object) and holds main, which starts and stops the modules below; no module depends
 * on mock.c.
 *
 * Modules: cli.c (configuration, and the vl__cfg it parses), server.c (routes, MHD's callbacks and
 * the routes that do not run the model), request.c (the life of one model request: admission,
 * planning, sending), timer.c (deadlines and MHD suspend/resume), work.c (the decode pool), chat.c
 * (chat request parsing and reply rendering), generate.c (the same for SGLang's native /generate),
 * image.c (data URI and pixel decoding), memory.c (the memory model, held for real), stats.c
 * (counters, /metrics), record.c (the JSONL record). Cross-file names carry the vl__ prefix. */
#ifndef VLMMOCK_INTERNAL_H
#define VLMMOCK_INTERNAL_H

#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tokenizer.h"
#include "vlmload/common.h"

/* ------------------------------------------------------------------ configuration (cli.c) */

typedef enum {
  VL__PROFILE_SGLANG,
  VL__PROFILE_VLLM,
  VL__PROFILE_OPENAI,
  VL__PROFILE_LLAMACPP,
  VL__PROFILE__COUNT
} vl__profile_t;

typedef enum {
  VL__FAULT_NONE = 0,
  VL__FAULT_HTTP500,
  VL__FAULT_HTTP503,
  VL__FAULT_HTTP429,
  VL__FAULT_HTTP400,
  VL__FAULT_MALFORMED,
  VL__FAULT_TRUNCATE,
  VL__FAULT_RESET,
  VL__FAULT_STALL,
  VL__FAULT_HTTP401,
  VL__FAULT_RESET_AFTER_HEADERS,
  VL__FAULT_HUGE,
  VL__FAULT_SLOWLORIS,
  /* Faults of the flush and cache-reset routes, drawn from their own sequence. */
  VL__FAULT_FLUSH400,
  VL__FAULT_FLUSH500,
  VL__FAULT_FLUSH_STALL,
  VL__FAULT_COUNT
} vl__fault_t;

static inline bool vl__fault_is_flush(vl__fault_t k) {
  return k >= VL__FAULT_FLUSH400 && k < VL__FAULT_COUNT;
}

/* The default size of the huge fault's body (--huge-bytes), produced by a content reader and never
 * held whole. */
#define VL__HUGE_BYTES (64ull << 20)
/* The slowloris fault sends one byte this often. */
#define VL__SLOWLORIS_NS 1000000000ull

#define VL__MAX_FAULTS 16

typedef struct {
  vl__fault_t kind;
  double rate; /* in [0, 1] */
} vl__fault_rule_t;

typedef struct {
  char host[INET6_ADDRSTRLEN + 2]; /* the bound address, printable */
  struct sockaddr_storage addr;
  socklen_t addrlen;
  bool ipv6;
  uint16_t port;
  const char *port_file; /* NULL: none */
  const char *record;    /* NULL: none */
  const char *model;
  const char *image_token; /* the image placeholder /generate text must hold once per image */
  vl__profile_t profile;
  uint64_t latency_us, ttft_us, itl_us;
  uint64_t latency_per_inflight_us; /* added to latency for each model request in flight */
  unsigned
      max_running; /* model requests served at once, the rest queued in arrival order; 0: all */
  uint64_t tokens;
  uint64_t vision_tokens; /* usage.prompt_tokens per image, beside the text's tokens */
  bool no_tokenize;       /* POST /tokenize answers 404, as a server without the route */
  vl__fault_rule_t faults[VL__MAX_FAULTS];
  size_t nfaults;
  uint64_t max_pixels, max_body;
  uint64_t huge_bytes; /* the huge fault's reply */
  double memory_base_mb, memory_limit_mb, leak_kb, cache_kb, noise_kb;
  double shm_kb;          /* held per decoded image in a mapped /dev/shm file, never released */
  double step_mb;         /* held once, from the first request that carries an image */
  double cache_cap_mb;    /* the cached pool's cap (oldest evicted past it); 0: no cap */
  unsigned arena_threads; /* threads that each malloc and free scratch per image; 0: none */
  double arena_kb;        /* the largest scratch one image asks of its thread */
  uint64_t seed;          /* of the memory noise */
  unsigned max_connections, threads, decode_threads;
  bool max_connections_given;
  bool verbose;
  char *tls_cert, *tls_key; /* PEM text; both NULL: plain http */
} vl__config_t;

/* The configuration, defined here in cli.c and set by vl__cli_parse to the config it filled. main
 * may still adjust that config (the connection limit, to fit the open-file limit) before any thread
 * starts; it is read-only afterwards. */
extern const vl__config_t *vl__cfg;

extern const char *const vl__fault_names[VL__FAULT_COUNT];
extern const char *const vl__profile_names[VL__PROFILE__COUNT];

/* Parses argv into cfg (defaults first) and, on success, points vl__cfg at it. Returns 0 to run, 1
 * when --help or --version printed their text, 2 after printing a one-line error for a bad
 * argument. */
int vl__cli_parse(int argc, char **argv, vl__config_t *cfg);

/* ------------------------------------------------------------------ timer (timer.c) */

/* A connection waiting for a deadline. Embedded in the request; the timer thread only reads
 * due_ns and peek_fd and writes peer_gone. */
typedef struct {
  uint64_t due_ns;             /* CLOCK_MONOTONIC */
  struct MHD_Connection *conn; /* resumed when due */
  int peek_fd;                 /* >= 0: a stalled connection, re-checked every second */
  atomic_bool peer_gone;       /* set before resuming when the client closed a stalled one */
} vl__timer_node_t;

/* After serving a batch of deadlines the timer sleeps at least this long, so deadlines that fall
 * close together are served by one wake-up: a deadline is met late by at most this much (plus the
 * scheduler's latency), never early. */
#define VL__TIMER_SLACK_NS 200000ull

/* How often a stalled connection's socket is checked for the client having left. */
#define VL__STALL_CHECK_NS 1000000000ull

int vl__timer_start(void);
/* Suspends node->conn and resumes it at node->due_ns = due_ns (with peek_fd >= 0: once the client
 * has gone). Call only from the access handler or content reader of that connection. Returns false,
 * suspending nothing, once shutdown has begun: the caller must then end the request. */
bool vl__timer_suspend_until(vl__timer_node_t *node, uint64_t due_ns);
/* Suspends node->conn with no deadline (for a hand-off to the decode pool); same rules as above. */
bool vl__timer_suspend(vl__timer_node_t *node);
/* Resumes node->conn, suspended by vl__timer_suspend, at due_ns (now if already due or shutting
 * down). Any thread. */
void vl__timer_resume_at(vl__timer_node_t *node, uint64_t due_ns);
/* True once vl__timer_stop has begun. */
bool vl__timer_stopping(void);
/* Resumes every waiting connection, refuses further suspensions, joins the thread. */
void vl__timer_stop(void);

/* ------------------------------------------------------------------ decode pool (work.c) */

typedef struct vl__work_item_s {
  struct vl__work_item_s *next;
  /* Runs on a pool thread; cancelled is true when the pool is stopping and the item was never
   * started. The item must not be touched after run returns. */
  void (*run)(struct vl__work_item_s *item, bool cancelled);
} vl__work_item_t;

int vl__work_start(unsigned threads);
/* Queues item; false when there is no pool or it is stopping (then run it yourself). */
bool vl__work_submit(vl__work_item_t *item);
/* Runs queued items as cancelled, waits for running ones, joins the threads. */
void vl__work_stop(void);

/* ------------------------------------------------------------------ images (image.c) */

typedef struct {
  const char *fmt;   /* "png" or "jpeg" (static) */
  uint32_t w, h;     /* pixels */
  uint32_t channels; /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA; 8 bits each */
  uint64_t bytes;    /* encoded size */
  uint64_t hash;     /* FNV-1a 64 of the decoded rows, tightly packed */
} vl__image_info_t;

/* Decodes a data URI "data:image/png|jpeg|jpg;base64,..." of len bytes to pixels and fills info.
 * Returns 0, or VL_EINVAL / VL_EIMAGE / VL_E2BIG with a one-line reason in err. */
int vl__image_decode_uri(const char *uri, size_t len, uint64_t max_pixels, vl__image_info_t *info,
                         char *err, size_t errlen);

/* FNV-1a 64 over n bytes, continuing from h (start with VL__FNV_OFFSET). */
#define VL__FNV_OFFSET 0xcbf29ce484222325ull
uint64_t vl__image_fnv1a(uint64_t h, const uint8_t *p, size_t n);

/* ------------------------------------------------------------------ chat (chat.c) */

/* A parsed request, chat or native (/generate). */
typedef struct {
  int status;      /* 0 when the request is valid, else the HTTP status to answer */
  char error[256]; /* the reason, when status != 0 */
  bool stream, include_usage;
  int64_t max_tokens; /* chat: the smaller of max_tokens and max_completion_tokens; native:
                         sampling_params.max_new_tokens; -1 when absent */
  char *model;        /* the request's "model", NULL when absent; owned */
  uint32_t messages, text_parts;
  uint32_t placeholders;    /* native: image placeholders in the text */
  uint64_t prompt_chars;    /* Unicode code points of all text (native: placeholders left out) */
  uint64_t text_tokens;     /* the same text's tokens by the mock's tokenizer (tokenizer.h) */
  vl__image_info_t *images; /* owned, nimages entries */
  size_t nimages, cap;
  /* The fields a body carried beyond those vlmload always sends (chat: model, messages,
   * max_tokens, temperature, stream, stream_options; native: text, image_data, sampling_params,
   * stream), and native sampling_params' beyond max_new_tokens and temperature: copies for the
   * record, owned; NULL when none. */
  struct cJSON *extra, *sampling_extra;
  /* Chat: each message's role (null when not a string), and the content of each assistant
   * message (null when not a string), in order: for the record; owned, NULL before parsing. */
  struct cJSON *roles, *assistant;
  /* For trace replay's test (issue 16): FNV-1a 64 of the text's bytes (chat: its text parts in
   * order; native: the text), all of them and the first VL__PROMPT_HEAD_BYTES. Set once hashed. */
  bool hashed;
  uint64_t prompt_hash, prompt_head;
  size_t head_bytes;
} vl__chat_req_t;

/* Bytes of a request's text that "prompt_head" in the record hashes. */
#define VL__PROMPT_HEAD_BYTES 256

/* Adds n bytes of a request's text to its prompt hashes (in the order the text comes). */
void vl__chat_hash_text(vl__chat_req_t *c, const char *s, size_t n);

/* Parses and validates a chat request body and decodes every image in it. Always fills out (which
 * must be zeroed) as far as it got; out->status tells the verdict. */
void vl__chat_parse(const char *body, size_t len, uint64_t max_pixels, vl__chat_req_t *out);
void vl__chat_req_free(vl__chat_req_t *c);

/* For parsers of request bodies: marks c invalid (400) with a formatted reason. */
__attribute__((format(printf, 2, 3))) void vl__chat_fail(vl__chat_req_t *c, const char *fmt, ...);
/* Code points among the n bytes of UTF-8 at s. */
uint64_t vl__chat_count_chars(const char *s, size_t n);
/* Decodes a data URI into c's next image; on failure marks c invalid, naming where, and returns
 * -1. */
int vl__chat_add_image(vl__chat_req_t *c, const char *uri, uint64_t max_pixels, const char *where);
struct cJSON;
/* Parses a request body that must be a JSON object. Returns the tree (the caller deletes it), or
 * NULL with c failed ("not valid JSON", "must be a JSON object"). Sets c->max_tokens to -1. */
struct cJSON *vl__chat_parse_object(const char *body, size_t len, vl__chat_req_t *c);
/* Reads obj's optional non-negative integer field name into *out (-1 when absent or null); marks
 * c invalid and returns -1 for any other value. */
int vl__chat_read_limit(vl__chat_req_t *c, const struct cJSON *obj, const char *name, int64_t *out);
/* A copy of obj's fields whose names are not in known (NULL-terminated); NULL when none. */
struct cJSON *vl__chat_extra(const struct cJSON *obj, const char *const *known);
/* Prints obj (which it deletes) unformatted, length in *len; NULL when obj is NULL or printing
 * fails. */
char *vl__chat_print(struct cJSON *obj, size_t *len);

/* Deterministic prompt token count: ceil(chars / 4) + 256 per image. */
uint64_t vl__chat_prompt_tokens(const vl__chat_req_t *c);

typedef struct {
  const char *id; /* "chatcmpl-mock-<seq>" */
  int64_t created;
  const char *model;
  uint64_t tokens;
  const char *finish; /* "stop" or "length" */
  uint64_t prompt_tokens;
} vl__chat_reply_t;

/* A chat reply's content: its first token is the reply's id with a quote, a backslash, a
 * non-ASCII letter and a newline ("chatcmpl-mock-7 \"q\" \\ é\n "), so that every reply differs
 * and a client must escape it to send it back; every later token is "tok ". The first token into
 * buf (its length returned), or the whole content (malloc'd, NULL when out of memory). */
int vl__chat_first_token(const vl__chat_reply_t *r, char *buf, size_t cap);
char *vl__chat_content(const vl__chat_reply_t *r);

/* Each returns a malloc'd NUL-terminated text (length in *len), or NULL when out of memory. */
char *vl__chat_completion(const vl__chat_reply_t *r, size_t *len);
/* An OpenAI-style error object: {"error":{"message","type","param","code"}}. */
char *vl__chat_error(int status, const char *message, size_t *len);

/* The SSE events of a streamed reply, rendered once and replayed per token. */
typedef struct {
  char *first; /* first token: delta with role and content */
  char *token; /* every later token */
  char *bad;   /* a "data:" line whose payload is not JSON (the malformed fault) */
  char *tail;  /* finish_reason chunk, usage chunk if asked, "data: [DONE]" */
  size_t first_len, token_len, bad_len, tail_len;
} vl__chat_sse_t;

int vl__chat_sse_render(const vl__chat_reply_t *r, bool include_usage, vl__chat_sse_t *out);
void vl__chat_sse_free(vl__chat_sse_t *s);

/* ------------------------------------------------------------------ native (generate.c) */

/* SGLang's /generate: {"text", "image_data" (a data URI, or a list of them), "sampling_params":
 * {"max_new_tokens", ...}, "stream"}. Parses and validates like vl__chat_parse, decoding every
 * image; the text must hold image_token exactly once per image. */
void vl__gen_parse(const char *body, size_t len, uint64_t max_pixels, const char *image_token,
                   vl__chat_req_t *out);

/* The whole reply: {"text", "meta_info": {"id", "finish_reason", "prompt_tokens",
 * "completion_tokens", "cached_tokens"}}; malloc'd, length in *len, NULL when out of memory. */
char *vl__gen_completion(const vl__chat_reply_t *r, size_t *len);

/* Streamed event k (1 to r->tokens) as SGLang sends it, "data: {...}\n\n": the text of the first
 * k tokens and the counts so far, finish_reason set on the last. Written into *buf (grown as
 * needed, owned by the caller, reused from event to event). Returns its length, 0 when out of
 * memory. */
size_t vl__gen_event(const vl__chat_reply_t *r, uint64_t k, char **buf, size_t *cap);

/* The fixed parts of a native stream in the shape vl__chat_sse_render gives: tail is "data:
 * [DONE]" alone (finish_reason rides on the last token's event) and bad is the first event cut
 * inside its JSON; first and token stay NULL, the tokens being made by vl__gen_event. */
int vl__gen_sse_render(const vl__chat_reply_t *r, vl__chat_sse_t *out);

/* Every event of a native stream of ntok tokens and the tail, as one text (the slowloris fault);
 * malloc'd, length in *len, NULL when out of memory. */
char *vl__gen_sse_whole(const vl__chat_reply_t *r, uint64_t ntok, size_t *len);

/* ------------------------------------------------------------------ counters (stats.c) */

typedef struct {
  atomic_uint_fast64_t requests;     /* model requests admitted (body received or refused 413) */
  atomic_uint_fast64_t completed;    /* model requests whose reply was fully sent */
  atomic_uint_fast64_t bad_requests; /* model requests answered 4xx for their content */
  atomic_int_fast64_t in_flight;     /* admitted model requests not yet ended */
  atomic_uint_fast64_t in_flight_max;
  atomic_uint_fast64_t images, image_bytes, image_pixels;
  atomic_uint_fast64_t prompt_tokens, completion_tokens;
  atomic_uint_fast64_t flushes, flush_refused, reset_prefix, reset_mm;
  atomic_uint_fast64_t tokenize_calls; /* POST /tokenize answered */
  atomic_uint_fast64_t cached_images;  /* images since the last flush or reset */
  atomic_int_fast64_t connections;
  atomic_uint_fast64_t faults[VL__FAULT_COUNT];
  uint64_t start_ns;
} vl__stats_t;

extern vl__stats_t vl__stats;

/* /mock/stats and /metrics bodies: malloc'd, length in *len, NULL when out of memory. */
char *vl__stats_json(size_t *len);
char *vl__stats_prometheus(size_t *len);

/* ------------------------------------------------------------------ memory model (memory.c) */

/* The model's accounting, in bytes. memory.c says how each part is held. */
typedef struct {
  uint64_t base;     /* the process's resident size when the model started */
  uint64_t leaked;   /* held for ever */
  uint64_t cached;   /* held until the next flush or cache reset */
  uint64_t noise;    /* the noise region's current size */
  uint64_t shm;      /* held for ever in the /dev/shm file (resident as shared memory) */
  uint64_t step;     /* the one-time step, held from the first image on */
  uint64_t arena;    /* the arena threads' scratch: the sum of each thread's largest */
  uint64_t total;    /* base + leaked + cached + noise + shm + step + arena: the figure reported */
  uint64_t unheld;   /* growth not held because of --memory-limit-mb */
  uint64_t evicted;  /* cache growth evicted at --cache-cap-mb (never held) */
  uint64_t resident; /* the process's resident size at this reading (VmRSS) */
  uint64_t requests; /* model requests the model has processed */
  uint64_t step_at;  /* the model request (1-based, in that count) that made the step; 0: none */
} vl__memory_t;

/* Allocates and touches --memory-base-mb and the first noise, and starts the thread that holds the
 * model. Call once, before any request can arrive. Returns 0, or VL_ENOMEM after saying why on
 * stderr. */
int vl__memory_start(void);
/* Finishes the work asked for and stops the thread; what is held stays held. */
void vl__memory_stop(void);
/* Measures the base: the resident size now less the pools' pages. Call once, when the server's
 * threads have started; until then the base reads 0. */
void vl__memory_baseline(void);
/* One model request (chat or /generate) processed with `images` decoded images: asks for the
 * leaked and cached pools to grow and the noise to be redrawn, and returns without waiting. Any
 * thread. */
void vl__memory_request(uint64_t images);
/* A flush or cache reset: the cached pool goes back to the kernel; returns once it has. Any
 * thread. */
void vl__memory_flush(void);
/* A consistent reading of the accounting, every request processed so far included. Any thread. */
void vl__memory_read(vl__memory_t *m);

/* ------------------------------------------------------------------ arenas (arena.c) */

/* Starts --arena-threads threads (none when 0). Returns 0, or VL_ENOMEM after saying why. */
int vl__arena_start(void);
/* Hands `images` decoded images to the threads, one each in turn, without waiting. Any thread. */
void vl__arena_images(uint64_t images);
/* The scratch held by the threads' arenas, every image handed so far processed. Any thread. */
uint64_t vl__arena_held(void);
/* Finishes the images handed and stops the threads; their arenas stay as they are. */
void vl__arena_stop(void);

/* ------------------------------------------------------------------ record (record.c) */

struct cJSON;
/* Opens (truncating) the record file; 0 or a negative errno. */
int vl__record_open(const char *path);
bool vl__record_enabled(void);
/* Writes obj as one line with one write(2), under a lock, so that readers never see half a line. */
void vl__record_write(const struct cJSON *obj);
void vl__record_close(void);

/* ------------------------------------------------------------------ model requests (request.c) */

/* What server.c's route table maps a path and method to. */
typedef enum {
  VL__ROUTE_CHAT,
  VL__ROUTE_GENERATE,
  VL__ROUTE_MODELS,
  VL__ROUTE_HEALTH,
  VL__ROUTE_FLUSH,
  VL__ROUTE_SERVER_INFO,
  VL__ROUTE_RESET_PREFIX,
  VL__ROUTE_RESET_MM,
  VL__ROUTE_VERSION,
  VL__ROUTE_METRICS,
  VL__ROUTE_STATS,
  VL__ROUTE_TOKENIZE,
  VL__ROUTE_NOT_FOUND,
  VL__ROUTE_BAD_METHOD,
} vl__route_t;

/* Where a request stands; request.c describes the phases. server.c's access handler dispatches on
 * it. */
typedef enum {
  VL__PHASE_RECV,
  VL__PHASE_WORK,
  VL__PHASE_WAIT,
  VL__PHASE_STALL,
  VL__PHASE_SENT
} vl__phase_t;

/* The reply a model request was planned to get. */
typedef enum {
  VL__PLAN_ERROR,
  VL__PLAN_JSON,
  VL__PLAN_TRUNCATED,
  VL__PLAN_SSE,
  VL__PLAN_RESET,
  VL__PLAN_STALL,
  VL__PLAN_RESET_AFTER_HEADERS,
  VL__PLAN_HUGE,
  VL__PLAN_SLOW,
} vl__plan_t;

/* The state of one HTTP request, any route (the connection's con_cls); all but route, allow, phase,
 * expect and timer are a model request's. Made by vl__request_new with one reference, the
 * request's own, which vl__request_end drops; each callback response reading it holds another. */
typedef struct vl__request_s {
  vl__timer_node_t timer; /* timer.conn is this request's connection */
  vl__work_item_t work;
  atomic_int refs; /* the request itself, plus one per callback response reading it */
  vl__route_t route;
  const char *allow; /* for 405 */
  vl__phase_t phase;
  bool admitted, too_big;
  bool finished;           /* the reply's last byte is queued: no longer busy for a flush */
  char *body;              /* chat only; freed once parsed */
  size_t len, cap, expect; /* expect: the Content-Length, used to size body at once */
  /* admission */
  uint64_t seq, t_body_ns, in_flight_at, completed_before;
  int64_t wall_ms;
  vl__fault_t fault;
  /* the planned reply, due at due_ns */
  vl__plan_t plan;
  unsigned status;
  uint64_t due_ns;
  char *payload; /* JSON body for ERROR, JSON, TRUNCATED; the whole reply for SLOW; the text
                    before the filler for HUGE */
  size_t payload_len;
  const char *huge_tail; /* HUGE: the text after the filler (static) */
  size_t huge_tail_len;
  bool stream_reply;      /* the request asked for a stream: the content type of a fault's reply */
  vl__chat_reply_t reply; /* what the reply says (its strings: id below, the configuration's) */
  /* streaming */
  vl__chat_sse_t sse;
  char *event;      /* /generate: the token event being sent, made by vl__gen_event */
  size_t event_cap; /* its capacity */
  uint64_t base_ns; /* headers; token k is due at base + ttft + k * itl */
  uint64_t ntok, tok_sent, tok_limit;
  bool truncate_stream, malformed_stream, sse_done;
  const char *seg; /* the event being copied out */
  size_t seg_len, seg_off;
  char id[48];
} vl__request_t;

/* A request of route (allow: the methods to name in a 405) on conn; NULL when out of memory. */
vl__request_t *vl__request_new(struct MHD_Connection *conn, vl__route_t route, const char *allow);
/* Appends one piece of a model request's body; past --max-body the body is dropped and the rest
 * discarded. */
void vl__request_append(vl__request_t *r, const char *data, size_t n);
/* The body of a model request is complete: admits it, then parses it and plans its reply (on the
 * decode pool for a large body, the connection suspended meanwhile) and acts on the plan. */
enum MHD_Result vl__request_begin(vl__request_t *r);
/* A model request whose Content-Length passes --max-body, refused before its body is read: admits
 * it and answers 413 (or the fault drawn for it). MHD then closes the connection. */
enum MHD_Result vl__request_refuse(vl__request_t *r);
/* Acts on a planned reply (phases WORK and WAIT): waits on the timer until it is due, then sends
 * it. */
enum MHD_Result vl__request_act(vl__request_t *r);
/* Holds the connection without answering until the client closes it (checked every
 * VL__STALL_CHECK_NS) or the server stops: the stall faults, of model requests and flushes. */
enum MHD_Result vl__request_stall(vl__request_t *r);
/* MHD's completion callback for r: the reply no longer keeps a flush away; an admitted request
 * leaves the in-flight count (and counts as completed when toe says it was sent in full). Drops
 * r's own reference: r may be freed. */
void vl__request_end(vl__request_t *r, enum MHD_RequestTerminationCode toe);

/* The verdict of vl__request_flush. */
typedef struct {
  vl__fault_t fault;  /* VL__FAULT_NONE, or the flush fault that replaces the call */
  int64_t in_flight;  /* model requests whose reply was not yet produced in full */
  uint64_t completed; /* model requests whose reply was */
  bool refused;       /* refused: a model request was busy */
} vl__flush_check_t;

/* The admission side of a flush or cache reset, under the admission lock so that no model request
 * is admitted meanwhile: draws the call's flush fault; without one, refuses when refuse_busy and a
 * model request is busy, else empties the cache (the memory model's cached pool and the
 * cached_images count) and counts the call in *counter. */
void vl__request_flush(bool refuse_busy, atomic_uint_fast64_t *counter, vl__flush_check_t *out);

/* ------------------------------------------------------------------ server (server.c) */

/* Queues body (taking ownership when owned) with the given status and content type, and the header
 * hname: hval when hname is not NULL. */
enum MHD_Result vl__server_respond(struct MHD_Connection *c, unsigned status, char *body,
                                   size_t len, bool owned, const char *ctype, const char *hname,
                                   const char *hval);

/* Starts the HTTP daemon on cfg's address; 0 or VL_EIO with a reason printed. */
int vl__server_start(void);
/* The bound port (useful with --port 0). */
uint16_t vl__server_port(void);
/* Stops accepting, ends every request (resuming suspended ones) and stops the daemon. */
void vl__server_stop(void);

#endif
