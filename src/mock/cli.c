/* Command line of vlmmock: one config struct, defaults in one place, an aligned option table, the
 * project's unit scanners, and a one-line error (exit status 2) for every bad value. */
#include "internal.h"

#include "vlmload/units.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const vl__fault_names[VL__FAULT_COUNT] = {
    [VL__FAULT_NONE] = "none",
    [VL__FAULT_HTTP500] = "http500",
    [VL__FAULT_HTTP503] = "http503",
    [VL__FAULT_HTTP429] = "http429",
    [VL__FAULT_HTTP400] = "http400",
    [VL__FAULT_MALFORMED] = "malformed",
    [VL__FAULT_TRUNCATE] = "truncate",
    [VL__FAULT_RESET] = "reset",
    [VL__FAULT_STALL] = "stall",
    [VL__FAULT_HTTP401] = "http401",
    [VL__FAULT_RESET_AFTER_HEADERS] = "reset_after_headers",
    [VL__FAULT_HUGE] = "huge",
    [VL__FAULT_SLOWLORIS] = "slowloris",
    [VL__FAULT_FLUSH400] = "flush400",
    [VL__FAULT_FLUSH500] = "flush500",
    [VL__FAULT_FLUSH_STALL] = "flush_stall",
};

const char *const vl__profile_names[VL__PROFILE__COUNT] = {"sglang", "vllm", "openai", "llamacpp"};

const vl__config_t *vl__cfg;

enum {
  OPT_HOST = 256,
  OPT_PORT,
  OPT_PORT_FILE,
  OPT_MODEL,
  OPT_IMAGE_TOKEN,
  OPT_PROFILE,
  OPT_LATENCY,
  OPT_LATENCY_PER_INFLIGHT,
  OPT_TTFT,
  OPT_ITL,
  OPT_TOKENS,
  OPT_RECORD,
  OPT_FAULT,
  OPT_MAX_PIXELS,
  OPT_MAX_BODY,
  OPT_HUGE_BYTES,
  OPT_LEAK,
  OPT_CACHE,
  OPT_NOISE,
  OPT_BASE,
  OPT_LIMIT,
  OPT_SEED,
  OPT_MAX_CONN,
  OPT_THREADS,
  OPT_MAX_RUNNING,
  OPT_DECODE_THREADS,
  OPT_TLS_CERT,
  OPT_TLS_KEY,
  OPT_VISION_TOKENS,
  OPT_NO_TOKENIZE,
  OPT_SHM,
  OPT_STEP,
  OPT_CACHE_CAP,
  OPT_ARENA_THREADS,
  OPT_ARENA_KB,
};

/* clang-format off */
static const struct option options[] = {
    {"host",               required_argument, NULL, OPT_HOST},
    {"port",               required_argument, NULL, OPT_PORT},
    {"port-file",          required_argument, NULL, OPT_PORT_FILE},
    {"model",              required_argument, NULL, OPT_MODEL},
    {"image-token",        required_argument, NULL, OPT_IMAGE_TOKEN},
    {"profile",            required_argument, NULL, OPT_PROFILE},
    {"latency",            required_argument, NULL, OPT_LATENCY},
    {"latency-per-inflight", required_argument, NULL, OPT_LATENCY_PER_INFLIGHT},
    {"ttft",               required_argument, NULL, OPT_TTFT},
    {"itl",                required_argument, NULL, OPT_ITL},
    {"tokens",             required_argument, NULL, OPT_TOKENS},
    {"record",             required_argument, NULL, OPT_RECORD},
    {"fault",              required_argument, NULL, OPT_FAULT},
    {"max-pixels",         required_argument, NULL, OPT_MAX_PIXELS},
    {"max-body",           required_argument, NULL, OPT_MAX_BODY},
    {"huge-bytes",         required_argument, NULL, OPT_HUGE_BYTES},
    {"leak-kb-per-image",  required_argument, NULL, OPT_LEAK},
    {"cache-kb-per-image", required_argument, NULL, OPT_CACHE},
    {"memory-noise-kb",    required_argument, NULL, OPT_NOISE},
    {"shm-kb-per-image",   required_argument, NULL, OPT_SHM},
    {"step-mb-at-first-image", required_argument, NULL, OPT_STEP},
    {"cache-cap-mb",       required_argument, NULL, OPT_CACHE_CAP},
    {"arena-threads",      required_argument, NULL, OPT_ARENA_THREADS},
    {"arena-kb",           required_argument, NULL, OPT_ARENA_KB},
    {"memory-base-mb",     required_argument, NULL, OPT_BASE},
    {"memory-limit-mb",    required_argument, NULL, OPT_LIMIT},
    {"seed",               required_argument, NULL, OPT_SEED},
    {"max-connections",    required_argument, NULL, OPT_MAX_CONN},
    {"threads",            required_argument, NULL, OPT_THREADS},
    {"max-running",        required_argument, NULL, OPT_MAX_RUNNING},
    {"decode-threads",     required_argument, NULL, OPT_DECODE_THREADS},
    {"tls-cert",           required_argument, NULL, OPT_TLS_CERT},
    {"tls-key",            required_argument, NULL, OPT_TLS_KEY},
    {"vision-tokens",      required_argument, NULL, OPT_VISION_TOKENS},
    {"no-tokenize",        no_argument,       NULL, OPT_NO_TOKENIZE},
    {"verbose",            no_argument,       NULL, 'v'},
    {"help",               no_argument,       NULL, 'h'},
    {"version",            no_argument,       NULL, 'V'},
    {NULL,                 0,                 NULL, 0},
};
/* clang-format on */

static void usage(FILE *out) {
  fputs(
      "Usage: vlmmock [OPTIONS]\n"
      "\n"
      "A mock vision-language-model server that speaks the OpenAI chat API the way SGLang or\n"
      "vLLM do, and SGLang's native /generate. It decodes every image it is sent (PNG, JPEG data "
      "URIs), answers after the delays\n"
      "you give it, streams tokens on an exact schedule, implements SGLang's flush semantics,\n"
      "injects faults on request, and holds memory that grows by a known amount per image, so\n"
      "that a load generator's leak analysis can be checked against truth.\n"
      "\n"
      "Listening:\n"
      "  --host ADDR              address to bind (default 127.0.0.1; ::1 or any IP literal)\n"
      "  --port N                 TCP port (default 30000; 0 picks a free one)\n"
      "  --port-file FILE         once listening, write the port to FILE (atomically)\n"
      "  --max-connections N      concurrent connections (default 20000)\n"
      "  --threads N              HTTP threads (default: one per CPU)\n"
      "  --decode-threads N       threads that decode bodies over 64 KiB (default: one per CPU;\n"
      "                           0 decodes on the HTTP threads)\n"
      "  --tls-cert FILE          serve https with this PEM certificate (with --tls-key)\n"
      "  --tls-key FILE           the certificate's PEM private key\n"
      "\n"
      "Identity:\n"
      "  --model NAME             model id served (default mock-vlm)\n"
      "  --profile P              sglang (default), vllm, openai or llamacpp: which cache and\n"
      "                           metrics routes exist (sglang: also the native POST\n"
      "                           /generate; llamacpp: POST /tokenize takes {\"content\"} and\n"
      "                           answers {\"tokens\"}, /v1/models says owned_by llamacpp)\n"
      "  --image-token TEXT       the image placeholder /generate text holds once per image\n"
      "                           (default Qwen's <|vision_start|><|image_pad|><|vision_end|>)\n"
      "\n"
      "Timing (durations like 500us, 20ms, 1.5s, 2m; a bare number is seconds), counted from\n"
      "the moment the request body has been received:\n"
      "  --latency DUR            until the response headers (default 0)\n"
      "  --latency-per-inflight DUR  plus this for every request in flight, this one\n"
      "                           included: latency that grows with load (default 0)\n"
      "  --max-running N          serve at most N model requests at once; the others wait,\n"
      "                           in arrival order, for a place that each holds for its whole\n"
      "                           reply: a server of known capacity, N / (latency + ttft +\n"
      "                           (tokens-1)*itl) requests a second (default: no limit)\n"
      "  --ttft DUR               then until the first token (default 0)\n"
      "  --itl DUR                between tokens (default 0)\n"
      "  --tokens N               tokens per reply (default 16), fewer if the request's\n"
      "                           max_tokens, max_completion_tokens or (for /generate)\n"
      "                           sampling_params.max_new_tokens is smaller; a request\n"
      "                           with ignore_eos true gets exactly that limit\n"
      "  --vision-tokens N        prompt tokens each image adds to usage.prompt_tokens\n"
      "                           (default 256)\n"
      "  --no-tokenize            POST /tokenize answers 404, as a server without it\n"
      "  Tokens: usage.prompt_tokens is the text's tokens plus --vision-tokens per image, and\n"
      "  POST /tokenize {\"prompt\"} answers {\"count\", \"tokens\", \"max_model_len\"} by the\n"
      "  same tokenizer: a run of ASCII letters is cut into pieces of at most 4 letters, a\n"
      "  run of digits is one token, each other ASCII mark and each non-ASCII character one,\n"
      "  whitespace none (\"benchmark the 2024 results!\" is 8 tokens).\n"
      "  A plain reply is sent whole at latency+ttft+(N-1)*itl; a streamed one sends headers at\n"
      "  latency, token k at latency+ttft+k*itl, then finish_reason, usage and [DONE]\n"
      "  (/generate: each event carries the text so far and meta_info; the last token's event\n"
      "  has the finish_reason, then [DONE]).\n"
      "\n"
      "Limits:\n"
      "  --max-body BYTES         largest request body (default 256MiB; larger: 413)\n"
      "  --max-pixels N           largest image, width*height (default 100M; larger: 400)\n"
      "\n"
      "Faults:\n"
      "  --fault KIND:RATE        give KIND to exactly floor(n*RATE) of the first n chat and\n"
      "                           /generate requests (flush faults: of the first n flush or "
      "cache-reset\n"
      "                           calls), spread evenly; repeatable, checked in the order given,\n"
      "                           one per request; the rates of each group add up to at most 1.\n"
      "  Chat KIND:\n"
      "     http500 http503 http400  that status with an error JSON\n"
      "     http401                  401 with WWW-Authenticate: Bearer (a refused API key)\n"
      "     http429                  429 with Retry-After: 1\n"
      "     malformed                200 whose body (or first SSE event) is not JSON\n"
      "     truncate                 plain: Content-Length larger than the body, then close;\n"
      "                              stream: half the tokens, then the stream ends without [DONE]\n"
      "     reset                    close the connection without a response\n"
      "     reset_after_headers      send the 200 headers, then close without a body byte\n"
      "     stall                    never answer; hold the connection until the client leaves\n"
      "     huge                     a 200 of --huge-bytes (one JSON object, or one SSE event),\n"
      "                              made as it is sent\n"
      "  --huge-bytes SIZE        the huge fault's reply size (default 64MiB; 1KiB to 64GiB)\n"
      "     slowloris                the normal reply, one byte per second\n"
      "  Flush KIND (/flush_cache, /reset_prefix_cache, /reset_mm_cache):\n"
      "     flush400 flush500        that status (400 reads as SGLang's busy refusal)\n"
      "     flush_stall              never answer; hold the connection until the client leaves\n"
      "\n"
      "Memory model, held for real: the bytes are allocated and written, so the process's\n"
      "resident size (VmRSS) shows them; vlmmock_memory_bytes in /metrics (memory_bytes in\n"
      "/mock/stats) is base + leaked + cached + noise + shm + step + arena, where base is the\n"
      "resident size at start (/mock/stats \"memory\" gives each part):\n"
      "  --memory-base-mb M       MiB held from the start, like a model's weights (default 0)\n"
      "  --leak-kb-per-image K    KiB held per decoded image, never released (default 0)\n"
      "  --cache-kb-per-image C   KiB held per decoded image, returned to the system by a flush\n"
      "                           or a cache reset (default 0)\n"
      "  --memory-noise-kb N      a region resized on every model request to a uniform draw in\n"
      "                           0..2N KiB (default 0)\n"
      "  --cache-cap-mb C         the cache of --cache-kb-per-image holds at most C MiB: past it\n"
      "                           the oldest is evicted, and the held memory levels off\n"
      "                           (default 0: no cap)\n"
      "  --shm-kb-per-image K     KiB per decoded image written to a mapped /dev/shm file, never\n"
      "                           released: resident as shared memory (RssShmem) (default 0)\n"
      "  --step-mb-at-first-image M  MiB allocated and written once, by the first request that\n"
      "                           carries an image, then held, as a CUDA context the first\n"
      "                           image opens (default 0); /mock/stats step_at_request names\n"
      "                           that request\n"
      "  --arena-threads N        N threads (at most 64), each of which mallocs, writes and\n"
      "                           frees scratch for every Nth image, up to --arena-kb, in an\n"
      "                           arena of glibc's of its own, never trimmed: anonymous memory\n"
      "                           in arena mappings rises, then holds near N x --arena-kb\n"
      "                           (default 0)\n"
      "  --arena-kb K             the largest scratch of one image, KiB; each image draws its\n"
      "                           size uniformly in 0..K (default 4096)\n"
      "  --seed S                 seed of the noise draws (default 1)\n"
      "  --memory-limit-mb L      hold at most L MiB in all (default 4096); growth past it is\n"
      "                           counted in vlmmock_memory_unheld_bytes, not held\n"
      "\n"
      "Output:\n"
      "  --record FILE            one JSON line per chat or /generate request (when its body has\n"
      "                           arrived) and per flush or cache reset; readable while the\n"
      "                           server runs\n"
      "  -v, --verbose            log the HTTP library's errors to stderr\n"
      "  -h, --help               this text\n"
      "  -V, --version            the version\n"
      "\n"
      "Routes: POST /v1/chat/completions, GET /v1/models, GET /health, GET /health_generate,\n"
      "GET /metrics (Prometheus), GET /mock/stats (JSON counters); sglang: POST /generate,\n"
      "GET|POST /flush_cache (400 while requests are in flight), GET /get_server_info; vllm: POST "
      "/reset_prefix_cache,\n"
      "POST /reset_mm_cache, GET /version.\n"
      "\n"
      "Exit status: 0 after SIGINT or SIGTERM (a clean stop), 2 for a bad option or a --record or\n"
      "--port-file that cannot be written, 1 when it cannot start (e.g. the port is taken).\n"
      "\n"
      "Examples:\n"
      "  vlmmock --port 0 --port-file /tmp/mock.port --latency 50ms --ttft 200ms --itl 20ms\n"
      "  vlmmock --profile vllm --fault http503:0.05 --fault stall:0.01 --record mock.jsonl\n"
      "  vlmmock --leak-kb-per-image 64 --cache-kb-per-image 512 --memory-noise-kb 256\n",
      out);
}

static int bad(const char *flag, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "vlmmock: %s: ", flag);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 2;
}

/* Reads a PEM file whole into *out (NUL-terminated, kept for the process's life). */
static int read_pem(const char *flag, const char *path, char **out) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return bad(flag, "%s: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n < cap - 1 || cap > (1u << 20))
      break;
    char *more = realloc(buf, cap * 2);
    if (!more) {
      free(buf);
      buf = NULL;
    } else {
      buf = more;
      cap *= 2;
    }
  }
  int failed = ferror(f);
  fclose(f);
  if (!buf || failed || n == 0 || !strstr(buf, "-----BEGIN ")) {
    free(buf);
    return bad(flag, "%s: %s", path, !buf ? "out of memory" : failed ? "cannot read" : "not PEM");
  }
  buf[n] = '\0';
  free(*out);
  *out = buf;
  return 0;
}

static int parse_host(const char *s, vl__config_t *cfg) {
  char buf[INET6_ADDRSTRLEN + 2];
  size_t n = strlen(s);
  if (n >= sizeof(buf))
    return VL_EINVAL;
  if (strcmp(s, "localhost") == 0)
    s = "127.0.0.1";
  if (s[0] == '[' && n > 2 && s[n - 1] == ']') { /* accept [::1] as written in URLs */
    memcpy(buf, s + 1, n - 2);
    buf[n - 2] = '\0';
    s = buf;
  }
  memset(&cfg->addr, 0, sizeof(cfg->addr));
  struct sockaddr_in *v4 = (struct sockaddr_in *)&cfg->addr;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&cfg->addr;
  if (inet_pton(AF_INET, s, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    cfg->addrlen = sizeof(*v4);
    cfg->ipv6 = false;
  } else if (inet_pton(AF_INET6, s, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    cfg->addrlen = sizeof(*v6);
    cfg->ipv6 = true;
  } else {
    return VL_EINVAL;
  }
  snprintf(cfg->host, sizeof(cfg->host), "%s", s);
  return 0;
}

static int parse_fault(const char *s, vl__config_t *cfg) {
  const char *colon = strchr(s, ':');
  if (!colon)
    return bad("--fault", "'%s' is not KIND:RATE", s);
  size_t klen = (size_t)(colon - s);
  vl__fault_t kind = VL__FAULT_NONE;
  for (int k = VL__FAULT_NONE + 1; k < VL__FAULT_COUNT; k++) {
    if (strlen(vl__fault_names[k]) == klen && strncmp(s, vl__fault_names[k], klen) == 0)
      kind = (vl__fault_t)k;
  }
  if (kind == VL__FAULT_NONE)
    return bad("--fault",
               "unknown kind '%.*s' (http500 http503 http429 http400 http401 malformed "
               "truncate reset reset_after_headers stall huge slowloris flush400 flush500 "
               "flush_stall)",
               (int)klen, s);
  double rate;
  if (vl_units_double(colon + 1, &rate) != 0 || rate > 1.0)
    return bad("--fault", "rate '%s' is not a number between 0 and 1", colon + 1);
  if (cfg->nfaults == VL__MAX_FAULTS)
    return bad("--fault", "at most %d rules", VL__MAX_FAULTS);
  /* Chat and flush faults are drawn from separate sequences: each group's rates add up. */
  double sum = rate;
  for (size_t i = 0; i < cfg->nfaults; i++)
    if (vl__fault_is_flush(cfg->faults[i].kind) == vl__fault_is_flush(kind))
      sum += cfg->faults[i].rate;
  if (sum > 1.0 + 1e-9)
    return bad("--fault", "%s rates add up to %g, more than 1",
               vl__fault_is_flush(kind) ? "flush" : "chat", sum);
  cfg->faults[cfg->nfaults].kind = kind;
  cfg->faults[cfg->nfaults].rate = rate;
  cfg->nfaults++;
  return 0;
}

/* Parses a count in [lo, hi] into *out. */
static int parse_count(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  uint64_t v;
  if (vl_units_count(s, &v) != 0)
    return bad(flag, "'%s' is not a whole number", s);
  if (v < lo || v > hi)
    return bad(flag, "%s is out of range [%llu, %llu]", s, (unsigned long long)lo,
               (unsigned long long)hi);
  *out = v;
  return 0;
}

static int parse_duration(const char *flag, const char *s, uint64_t *out) {
  uint64_t v;
  if (vl_units_seconds(s, &v) != 0)
    return bad(flag, "'%s' is not a duration (e.g. 250ms, 1.5s)", s);
  if (v > 24ull * 3600 * 1000000)
    return bad(flag, "%s is longer than a day", s);
  *out = v;
  return 0;
}

static int parse_kb(const char *flag, const char *s, double max, double *out) {
  double v;
  if (vl_units_double(s, &v) != 0 || v > max)
    return bad(flag, "'%s' is not a number between 0 and %g", s, max);
  *out = v;
  return 0;
}

static unsigned online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

int vl__cli_parse(int argc, char **argv, vl__config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  parse_host("127.0.0.1", cfg);
  cfg->port = 30000;
  cfg->model = "mock-vlm";
  cfg->image_token = "<|vision_start|><|image_pad|><|vision_end|>";
  cfg->profile = VL__PROFILE_SGLANG;
  cfg->tokens = 16;
  cfg->vision_tokens = 256;
  cfg->max_pixels = 100000000ull;
  cfg->max_body = 256ull << 20;
  cfg->huge_bytes = VL__HUGE_BYTES;
  cfg->memory_limit_mb = 4096;
  cfg->arena_kb = 4096;
  cfg->seed = 1;
  cfg->max_connections = 20000;
  cfg->threads = online_cpus();
  cfg->decode_threads = online_cpus();

  uint64_t v;
  int c, rc = 0;
  opterr = 0;
  optind = 1;
  while (rc == 0 && (c = getopt_long(argc, argv, ":hvV", options, NULL)) != -1) {
    switch (c) {
    case OPT_HOST:
      if (parse_host(optarg, cfg) != 0)
        rc = bad("--host", "'%s' is not an IPv4 or IPv6 address", optarg);
      break;
    case OPT_PORT:
      if ((rc = parse_count("--port", optarg, 0, 65535, &v)) == 0)
        cfg->port = (uint16_t)v;
      break;
    case OPT_PORT_FILE:
      if (!*optarg)
        rc = bad("--port-file", "empty file name");
      cfg->port_file = optarg;
      break;
    case OPT_MODEL:
      if (!*optarg || strlen(optarg) > 256)
        rc = bad("--model", "name must have 1 to 256 characters");
      cfg->model = optarg;
      break;
    case OPT_IMAGE_TOKEN:
      if (!*optarg || strlen(optarg) > 256)
        rc = bad("--image-token", "want 1 to 256 characters");
      cfg->image_token = optarg;
      break;
    case OPT_PROFILE:
      rc = bad("--profile", "'%s' is not sglang, vllm, openai or llamacpp", optarg);
      for (int p = 0; p < VL__PROFILE__COUNT; p++) {
        if (strcmp(optarg, vl__profile_names[p]) == 0) {
          cfg->profile = (vl__profile_t)p;
          rc = 0;
        }
      }
      break;
    case OPT_LATENCY_PER_INFLIGHT:
      rc = parse_duration("--latency-per-inflight", optarg, &cfg->latency_per_inflight_us);
      break;
    case OPT_LATENCY:
      rc = parse_duration("--latency", optarg, &cfg->latency_us);
      break;
    case OPT_TTFT:
      rc = parse_duration("--ttft", optarg, &cfg->ttft_us);
      break;
    case OPT_ITL:
      rc = parse_duration("--itl", optarg, &cfg->itl_us);
      break;
    case OPT_TOKENS:
      rc = parse_count("--tokens", optarg, 0, 1000000, &cfg->tokens);
      break;
    case OPT_VISION_TOKENS:
      rc = parse_count("--vision-tokens", optarg, 0, 1000000, &cfg->vision_tokens);
      break;
    case OPT_NO_TOKENIZE:
      cfg->no_tokenize = true;
      break;
    case OPT_RECORD:
      if (!*optarg)
        rc = bad("--record", "empty file name");
      cfg->record = optarg;
      break;
    case OPT_FAULT:
      rc = parse_fault(optarg, cfg);
      break;
    case OPT_MAX_PIXELS:
      rc = parse_count("--max-pixels", optarg, 1, 1ull << 32, &cfg->max_pixels);
      break;
    case OPT_MAX_BODY:
      if (vl_units_bytes(optarg, &v) != 0 || v == 0 || v > (64ull << 30))
        rc = bad("--max-body", "'%s' is not a size between 1 and 64GiB (e.g. 512MiB)", optarg);
      else
        cfg->max_body = v;
      break;
    case OPT_HUGE_BYTES:
      if (vl_units_bytes(optarg, &v) != 0 || v < 1024 || v > (64ull << 30))
        rc = bad("--huge-bytes", "'%s' is not a size between 1KiB and 64GiB (e.g. 200MB)", optarg);
      else
        cfg->huge_bytes = v;
      break;
    case OPT_LEAK:
      rc = parse_kb("--leak-kb-per-image", optarg, 1e9, &cfg->leak_kb);
      break;
    case OPT_CACHE:
      rc = parse_kb("--cache-kb-per-image", optarg, 1e9, &cfg->cache_kb);
      break;
    case OPT_NOISE:
      rc = parse_kb("--memory-noise-kb", optarg, 1e9, &cfg->noise_kb);
      break;
    case OPT_SHM:
      rc = parse_kb("--shm-kb-per-image", optarg, 1e9, &cfg->shm_kb);
      break;
    case OPT_STEP:
      rc = parse_kb("--step-mb-at-first-image", optarg, 1e6, &cfg->step_mb);
      break;
    case OPT_CACHE_CAP:
      rc = parse_kb("--cache-cap-mb", optarg, 1e6, &cfg->cache_cap_mb);
      break;
    case OPT_ARENA_THREADS:
      if ((rc = parse_count("--arena-threads", optarg, 0, 64, &v)) == 0)
        cfg->arena_threads = (unsigned)v;
      break;
    case OPT_ARENA_KB:
      rc = parse_kb("--arena-kb", optarg, 1e6, &cfg->arena_kb);
      break;
    case OPT_BASE:
      rc = parse_kb("--memory-base-mb", optarg, 1e9, &cfg->memory_base_mb);
      break;
    case OPT_LIMIT:
      rc = parse_kb("--memory-limit-mb", optarg, 1e9, &cfg->memory_limit_mb);
      break;
    case OPT_SEED:
      rc = parse_count("--seed", optarg, 0, UINT64_MAX, &cfg->seed);
      break;
    case OPT_MAX_CONN:
      if ((rc = parse_count("--max-connections", optarg, 1, 1000000, &v)) == 0)
        cfg->max_connections = (unsigned)v;
      cfg->max_connections_given = true;
      break;
    case OPT_MAX_RUNNING:
      if ((rc = parse_count("--max-running", optarg, 1, 10000, &v)) == 0)
        cfg->max_running = (unsigned)v;
      break;
    case OPT_THREADS:
      if ((rc = parse_count("--threads", optarg, 1, 256, &v)) == 0)
        cfg->threads = (unsigned)v;
      break;
    case OPT_DECODE_THREADS:
      if ((rc = parse_count("--decode-threads", optarg, 0, 256, &v)) == 0)
        cfg->decode_threads = (unsigned)v;
      break;
    case OPT_TLS_CERT:
      rc = read_pem("--tls-cert", optarg, &cfg->tls_cert);
      break;
    case OPT_TLS_KEY:
      rc = read_pem("--tls-key", optarg, &cfg->tls_key);
      break;
    case 'v':
      cfg->verbose = true;
      break;
    case 'h':
      usage(stdout);
      return 1;
    case 'V':
      printf("vlmmock %s\n", VL_VERSION);
      return 1;
    case ':':
      rc = bad(argv[optind - 1], "needs a value");
      break;
    default:
      rc = bad(argv[optind - 1], "unknown option (see vlmmock --help)");
      break;
    }
  }
  if (rc == 0 && optind < argc)
    rc = bad(argv[optind], "unexpected argument (vlmmock takes options only)");
  if (rc == 0 && !cfg->tls_cert != !cfg->tls_key)
    rc = bad(cfg->tls_cert ? "--tls-cert" : "--tls-key", "needs %s as well",
             cfg->tls_cert ? "--tls-key" : "--tls-cert");
  if (rc == 0 && cfg->memory_base_mb > cfg->memory_limit_mb)
    rc = bad("--memory-base-mb", "%g is more than --memory-limit-mb %g", cfg->memory_base_mb,
             cfg->memory_limit_mb);
  if (rc == 0 && cfg->memory_base_mb + cfg->step_mb > cfg->memory_limit_mb)
    rc = bad("--step-mb-at-first-image",
             "%g with --memory-base-mb %g is more than "
             "--memory-limit-mb %g",
             cfg->step_mb, cfg->memory_base_mb, cfg->memory_limit_mb);
  if (rc == 0 && cfg->cache_cap_mb > 0 && cfg->cache_kb == 0)
    rc = bad("--cache-cap-mb", "caps the cache of --cache-kb-per-image; give that as well");
  if (rc == 0)
    vl__cfg = cfg;
  return rc;
}
