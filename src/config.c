#include "vlmload/config.h"
#include "vlmload/body.h"
#include "vlmload/common.h"
#include "vlmload/profile.h"
#include "vlmload/text.h"
#include "vlmload/units.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <uv.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
  OPT_URL = 256,
  OPT_ENDPOINT,
  OPT_API,
  OPT_SHARD,
  OPT_MODEL,
  OPT_API_KEY,
  OPT_HEADER,
  OPT_HTTP2,
  OPT_INSECURE,
  OPT_COMPRESSED,
  OPT_CACERT,
  OPT_SERVER,
  OPT_HEALTH_CHECK,
  OPT_KEEP_GOING,
  OPT_HEALTH_TIMEOUT,
  OPT_FLUSH_EVERY,
  OPT_FLUSH_MODE,
  OPT_FLUSH_ENDPOINT,
  OPT_FLUSH_METHOD,
  OPT_FLUSH_RETRIES,
  OPT_FLUSH_TIMEOUT,
  OPT_IMAGES,
  OPT_RESOLUTION,
  OPT_IMAGE_FORMAT,
  OPT_JPEG_QUALITY,
  OPT_IMAGE_CONTENT,
  OPT_MAX_PIXELS,
  OPT_POOL_SIZE,
  OPT_UNIQUE_IMAGES,
  OPT_IMAGE_RATIO,
  OPT_IMAGES_PER_REQUEST,
  OPT_IMAGE_PLACEMENT,
  OPT_IMAGE_TOKEN,
  OPT_PROMPTS,
  OPT_MAX_TOKENS,
  OPT_TEMPERATURE,
  OPT_STREAM,
  OPT_RATE,
  OPT_ARRIVAL,
  OPT_CONCURRENCY,
  OPT_ON_FULL,
  OPT_REQUESTS,
  OPT_DURATION,
  OPT_WARMUP,
  OPT_SEED,
  OPT_TIMEOUT,
  OPT_CONNECT_TIMEOUT,
  OPT_GRACE,
  OPT_MAX_RESPONSE,
  OPT_MAX_ERROR_RATE,
  OPT_MAX_P99_MS,
  OPT_OUTPUT,
  OPT_TIMELINE,
  OPT_LOG_REQUESTS,
  OPT_HISTOGRAMS,
  OPT_SAMPLE_EVERY,
  OPT_MONITOR_PID,
  OPT_MONITOR_PID_MATCH,
  OPT_MONITOR_GPU,
  OPT_MONITOR_PSS,
  OPT_MONITOR_PROM,
  OPT_MONITOR_CMD,
  OPT_SAMPLES,
  OPT_TIMELINE_FORMAT,
  OPT_ANALYZE,
  OPT_PLOT,
  OPT_GNUPLOT,
  OPT_DRY_RUN,
  OPT_SWEEP,
  OPT_DUMP_REQUESTS,
  OPT_QUIET,
  OPT_PROGRESS,
  OPT_NO_PROGRESS,
  OPT_CONFIG,
  OPT_HELP,
  OPT_VERSION,
};

/* What an option's value is, beyond its text (optflags). */
enum {
  OPTF_LIST = 1, /* repeatable: each value adds to a list, which the command line replaces whole
                  * when it gives the option (a --config file's list is then not used) */
  OPTF_PATH = 2, /* a file or directory: relative in a --config file, it is the file's folder's */
  OPTF_PROGRAM = 4, /* a program: a path as OPTF_PATH when it holds a '/', else looked up in PATH */
};

typedef struct {
  const char *name;
  int id;
  int has_arg;
  const char *metavar; /* NULL for flags */
  const char *help;    /* default stated in the text */
  const char *section; /* starts a new section of --help when set */
} optdef_t;

/* The one list of options. --help prints it in this order. */
static const optdef_t optdefs[] = {
    {"url", OPT_URL, 1, "URL",
     "server base URL (default http://127.0.0.1:30000); repeat for several servers, taken in "
     "turn (a URL given twice gets twice the share)",
     "Target"},
    {"endpoint", OPT_ENDPOINT, 1, "PATH",
     "request route (default /v1/chat/completions; /generate with --api native)", NULL},
    {"api", OPT_API, 1, "API",
     "openai (default): OpenAI chat completions | native: SGLang's /generate, the prompt text "
     "with the model's image placeholders and the images in image_data (implies --server sglang)",
     NULL},
    {"model", OPT_MODEL, 1, "NAME", "model name (default: first id from GET /v1/models)", NULL},
    {"api-key", OPT_API_KEY, 1, "KEY", "bearer token (default $OPENAI_API_KEY; never printed)",
     NULL},
    {"header", OPT_HEADER, 1, "'K: V'",
     "extra request header (repeatable); an Accept-Encoding header's replies are decoded", NULL},
    {"compressed", OPT_COMPRESSED, 0, NULL,
     "ask for compressed replies (every encoding curl decodes: gzip, deflate, br, zstd) and "
     "decode them",
     NULL},
    {"http2", OPT_HTTP2, 0, NULL, "speak HTTP/2 (h2c prior knowledge on http://)", NULL},
    {"cacert", OPT_CACERT, 1, "FILE",
     "https: trust the CA certificates in FILE (PEM) instead of the system's", NULL},
    {"insecure", OPT_INSECURE, 0, NULL,
     "https: do not verify the server's certificate or name (verification is on by default)", NULL},
    {"server", OPT_SERVER, 1, "KIND",
     "sglang | vllm | openai | auto: the flush routes to use (default auto, with --flush-every: "
     "the owned_by of GET /v1/models, then GET /get_server_info or /server_info for SGLang, then "
     "GET /version for vLLM)",
     NULL},
    {"health-check", OPT_HEALTH_CHECK, 0, NULL,
     "wait until the server answers its health route before starting", NULL},
    {"health-timeout", OPT_HEALTH_TIMEOUT, 1, "DUR",
     "give up waiting for health after DUR (default 5m)", NULL},
    {"keep-going", OPT_KEEP_GOING, 0, NULL,
     "run even when nothing answers at start or the first requests all fail the same way (by "
     "default the run stops within seconds, quoting the server's answer)",
     NULL},
    {"flush-every", OPT_FLUSH_EVERY, 1, "N|DUR",
     "flush the server's caches after every N requests, or every DUR (30s)", "Cache flushes"},
    {"flush-mode", OPT_FLUSH_MODE, 1, "MODE",
     "drain (default): stop admitting, wait for every request in flight, flush, resume, with the "
     "schedule moved back by the pause | inline: flush while requests run; refusals are counted",
     NULL},
    {"flush-endpoint", OPT_FLUSH_ENDPOINT, 1, "PATH[,PATH]",
     "flush route(s), called in order (default: sglang /flush_cache; vllm /reset_prefix_cache,"
     "/reset_mm_cache)",
     NULL},
    {"flush-method", OPT_FLUSH_METHOD, 1, "METHOD", "GET or POST (default POST)", NULL},
    {"flush-retries", OPT_FLUSH_RETRIES, 1, "N",
     "drain mode: retries of a flush the server refuses as busy (HTTP 400), 200 ms apart "
     "(default 10)",
     NULL},
    {"flush-timeout", OPT_FLUSH_TIMEOUT, 1, "DUR", "timeout of one flush call (default 60s)", NULL},
    {"prompts", OPT_PROMPTS, 1, "FILE", "prompts, one per line (default: a built-in varied set)",
     "Requests"},
    {"max-tokens", OPT_MAX_TOKENS, 1, "N", "max_tokens of each request (default 128)", NULL},
    {"temperature", OPT_TEMPERATURE, 1, "F", "sampling temperature (default 0)", NULL},
    {"stream", OPT_STREAM, 0, NULL, "stream replies (SSE); gives TTFT and inter-token latency",
     NULL},
    {"images", OPT_IMAGES, 1, "DIR",
     "send images from this directory: every PNG and JPEG under it, found by content (a file also "
     "works); without it, images are synthetic",
     "Images"},
    {"resolution", OPT_RESOLUTION, 1, "SPEC",
     "image sizes: 640x480,1280x720 | weighted 1280x720:3,4k:1 | range 224x224-2048x2048; named "
     "360p 720p 1080p 1440p 4k (default: 11 sizes from 224x224 to 1920x1080; with --images, "
     "resize the files to these sizes)",
     NULL},
    {"image-format", OPT_IMAGE_FORMAT, 1, "FMT", "png | jpeg | mixed (default mixed)", NULL},
    {"jpeg-quality", OPT_JPEG_QUALITY, 1, "Q", "JPEG quality 1-100 (default 90)", NULL},
    {"image-content", OPT_IMAGE_CONTENT, 1, "KIND",
     "synthetic content: photo-like | noise | gradient | shapes | mixed (default mixed)", NULL},
    {"max-pixels", OPT_MAX_PIXELS, 1, "N",
     "skip corpus images larger than N pixels (decompression bombs; default 100M)", NULL},
    {"pool-size", OPT_POOL_SIZE, 1, "N",
     "images in the pool: synthetic ones made (default 32), or the most corpus files used (default "
     "all)",
     NULL},
    {"unique-images", OPT_UNIQUE_IMAGES, 0, NULL,
     "make every image sent differ in its decoded pixels (servers cache images by content): pool "
     "images stamped and re-encoded ahead of the schedule on worker threads",
     NULL},
    {"image-ratio", OPT_IMAGE_RATIO, 1, "F",
     "fraction of requests that carry images (default 1 when any image option is given, else 0)",
     NULL},
    {"images-per-request", OPT_IMAGES_PER_REQUEST, 1, "N|A-B",
     "images in an image request, or a uniform range (default 1; at most 16)", NULL},
    {"image-placement", OPT_IMAGE_PLACEMENT, 1, "WHERE",
     "image parts before or after the text part: before | after | random (default before)", NULL},
    {"image-token", OPT_IMAGE_TOKEN, 1, "TEXT",
     "--api native: the placeholder put in the prompt text once per image (default by model name: "
     "Qwen <|vision_start|><|image_pad|><|vision_end|>, LLaVA <image>, Gemma 3 <start_of_image>, "
     "Llama <|image|>, Pixtral [IMG]; any other model Qwen's)",
     NULL},
    {"rate", OPT_RATE, 1, "R",
     "arrivals per second, open loop (default 10); 0 = closed loop as fast as --concurrency allows",
     "Load"},
    {"arrival", OPT_ARRIVAL, 1, "KIND", "constant | poisson | gamma:CV (default poisson)", NULL},
    {"concurrency", OPT_CONCURRENCY, 1, "N", "most requests in flight (default 256)", NULL},
    {"on-full", OPT_ON_FULL, 1, "MODE",
     "an arrival finding all N busy: queue (wait, keep its time; default) | drop", NULL},
    {"requests", OPT_REQUESTS, 1, "N", "stop after N arrivals (10k, 1M accepted)", NULL},
    {"duration", OPT_DURATION, 1, "DUR",
     "stop admitting after DUR (ms s m h; default 30s when --requests is not given)", NULL},
    {"warmup", OPT_WARMUP, 1, "N", "first N requests left out of the statistics (default 0)", NULL},
    {"seed", OPT_SEED, 1, "N", "seed of every random choice; same seed, same stream (default 1)",
     NULL},
    {"timeout", OPT_TIMEOUT, 1, "DUR", "whole-request timeout (default 600s)", NULL},
    {"connect-timeout", OPT_CONNECT_TIMEOUT, 1, "DUR", "connection timeout (default 10s)", NULL},
    {"grace", OPT_GRACE, 1, "DUR", "after Ctrl-C, wait this long for in-flight (default 5s)", NULL},
    {"max-response", OPT_MAX_RESPONSE, 1, "SIZE",
     "largest 2xx reply accepted, streamed or not, in bytes (default 16MiB); larger is an error",
     NULL},
    {"shard", OPT_SHARD, 1, "I/N",
     "be shard I of N processes (auto/N: I from $JOB_COMPLETION_INDEX): take every N-th request of "
     "the one stream all shards share, so together they send exactly what one process would (a "
     "drained --flush-every needs one process; shards flush only with --flush-mode inline)",
     NULL},
    {"monitor-pid", OPT_MONITOR_PID, 1, "[NAME=]PID",
     "sample this process's memory (VmRSS, VmHWM) into the timeline (repeatable)", "Memory"},
    {"monitor-pid-match", OPT_MONITOR_PID_MATCH, 1, "[NAME=]REGEX",
     "the same for the process whose command line matches REGEX, followed across restarts "
     "(repeatable)",
     NULL},
    {"monitor-gpu", OPT_MONITOR_GPU, 0, NULL,
     "GPU memory per device and per monitored process, through NVML (loaded at run time)", NULL},
    {"monitor-pss", OPT_MONITOR_PSS, 0, NULL, "also read PSS of monitored processes", NULL},
    {"monitor-prom", OPT_MONITOR_PROM, 1, "[NAME=]URL[#M,..]",
     "scrape a Prometheus endpoint (SGLang /metrics, vLLM /metrics) for these metrics (default: "
     "a known set) (repeatable)",
     NULL},
    {"monitor-cmd", OPT_MONITOR_CMD, 1, "[NAME=]CMD",
     "run CMD each sample; the first number it prints is the value (repeatable)", NULL},
    {"sample-every", OPT_SAMPLE_EVERY, 1, "DUR",
     "timeline rows and memory samples (default 1s); with --flush-every, at least 3 per flush "
     "window show a sawtooth (a warning at start says when there are fewer)",
     NULL},
    {"analyze", OPT_ANALYZE, 0, NULL,
     "at the end, fit every memory series against requests completed: slope in MB per 1000 "
     "requests with a 95% interval, the post-flush floor, a verdict (grows, sawtooth-returns, "
     "levels-off, flat, inconclusive; peak for a high-water mark)",
     NULL},
    {"plot", OPT_PLOT, 1, "FILE.png",
     "draw memory over requests, flushes and fits to FILE.png with gnuplot (checked for at start)",
     NULL},
    {"gnuplot", OPT_GNUPLOT, 1, "PATH",
     "the gnuplot that --plot runs (default: gnuplot on PATH; Debian: apt-get install "
     "gnuplot-nox)",
     NULL},
    {"max-error-rate", OPT_MAX_ERROR_RATE, 1, "F",
     "fail the run (exit status 3) when more than this fraction of requests failed (0.01 = 1%)",
     "Thresholds"},
    {"max-p99-ms", OPT_MAX_P99_MS, 1, "MS",
     "fail the run (exit status 3) when the end-to-end p99 exceeds MS milliseconds", NULL},
    {"output", OPT_OUTPUT, 1, "FILE", "write the JSON summary to FILE", "Outputs"},
    {"timeline", OPT_TIMELINE, 1, "FILE", "write a per-second CSV timeline to FILE", NULL},
    {"log-requests", OPT_LOG_REQUESTS, 1, "FILE", "write one JSON line per request to FILE", NULL},
    {"samples", OPT_SAMPLES, 1, "FILE",
     "write every memory sample as a CSV row (wall_ms, elapsed_s, series, value, unit)", NULL},
    {"timeline-format", OPT_TIMELINE_FORMAT, 1, "FMT", "csv (default) or jsonl", NULL},
    {"histograms", OPT_HISTOGRAMS, 1, "FILE",
     "write counters and latency histograms (whole run and per second) that 'vlmload merge' "
     "combines exactly across shards",
     NULL},
    {"quiet", OPT_QUIET, 0, NULL, "no progress line and no text summary", NULL},
    {"progress", OPT_PROGRESS, 0, NULL, "live progress line even when stderr is not a TTY", NULL},
    {"no-progress", OPT_NO_PROGRESS, 0, NULL, "no live progress line", NULL},
    {"sweep", OPT_SWEEP, 1, "KEY=A:B:S",
     "one stage per value of rate or concurrency from A to B in steps of S, each for --duration "
     "or --requests, and a table of throughput and latency per stage with the knee marked",
     NULL},
    {"dry-run", OPT_DRY_RUN, 0, NULL,
     "print the plan (rates, mix, image sizes, the pool and its memory, expected totals) and exit "
     "without sending anything",
     NULL},
    {"dump-requests", OPT_DUMP_REQUESTS, 1, "DIR",
     "write the first --requests request bodies to DIR with a curl script that replays them (for a "
     "bug report), and exit",
     NULL},
    {"config", OPT_CONFIG, 1, "FILE",
     "read options from a JSON object keyed by option name ({\"rate\": 50, \"stream\": true, "
     "\"header\": [\"A: 1\"]}); the command line overrides the file, and a repeatable option "
     "given there (--url, --header, --monitor-*) replaces the file's list; relative paths in the "
     "file are taken from its folder; no output may be the file itself",
     "Other"},
    {"help", OPT_HELP, 0, NULL, "this text", NULL},
    {"version", OPT_VERSION, 0, NULL, "version and library versions", NULL},
};

/* The options whose values are more than text: lists, and paths that a --config file's folder
 * anchors. An option not named here is neither. */
static const struct {
  int id;
  unsigned flags;
} optflags[] = {
    {OPT_URL, OPTF_LIST},          {OPT_HEADER, OPTF_LIST},
    {OPT_MONITOR_PID, OPTF_LIST},  {OPT_MONITOR_PID_MATCH, OPTF_LIST},
    {OPT_MONITOR_PROM, OPTF_LIST}, {OPT_MONITOR_CMD, OPTF_LIST},
    {OPT_CACERT, OPTF_PATH},       {OPT_PROMPTS, OPTF_PATH},
    {OPT_IMAGES, OPTF_PATH},       {OPT_OUTPUT, OPTF_PATH},
    {OPT_TIMELINE, OPTF_PATH},     {OPT_LOG_REQUESTS, OPTF_PATH},
    {OPT_SAMPLES, OPTF_PATH},      {OPT_HISTOGRAMS, OPTF_PATH},
    {OPT_PLOT, OPTF_PATH},         {OPT_DUMP_REQUESTS, OPTF_PATH},
    {OPT_GNUPLOT, OPTF_PROGRAM},
};

/* The options that take one of a fixed set of values, as their help texts say, for the shell
 * completion. The docs test checks that each value parses. */
static const struct {
  int id;
  const char *values;
} optvalues[] = {
    {OPT_API, "openai native"},
    {OPT_SERVER, "auto sglang vllm openai"},
    {OPT_FLUSH_MODE, "drain inline"},
    {OPT_FLUSH_METHOD, "GET POST"},
    {OPT_IMAGE_FORMAT, "png jpeg mixed"},
    {OPT_IMAGE_CONTENT, "photo-like noise gradient shapes mixed"},
    {OPT_IMAGE_PLACEMENT, "before after random"},
    {OPT_ARRIVAL, "constant poisson gamma:"},
    {OPT_ON_FULL, "queue drop"},
    {OPT_TIMELINE_FORMAT, "csv jsonl"},
};

static unsigned flags_of(int id) {
  for (size_t i = 0; i < VL_ARRAY_SIZE(optflags); i++)
    if (optflags[i].id == id)
      return optflags[i].flags;
  return 0;
}

static const char examples[] =
    "Examples:\n"
    "  vlmload --url http://127.0.0.1:30000 --rate 50 --images corpus/ --flush-every 50 \\\n"
    "          --duration 30m --monitor-pid-match 'server=sglang.launch_server' \\\n"
    "          --monitor-pid-match 'scheduler=sglang::scheduler' --monitor-gpu \\\n"
    "          --sample-every 200ms --timeline timeline.csv --analyze --plot memory.png\n"
    "      the memory experiment: image requests at 50/s, SGLang's cache flushed (with\n"
    "      nothing in flight) after every 50; the server (whose tokenizer runs the image\n"
    "      processor) and the scheduler followed in RAM and GPU memory, and a verdict at the\n"
    "      end (grows, sawtooth-returns, levels-off, flat) with its picture\n"
    "  vlmload --sweep rate=10:100:10 --duration 1m --stream --output sweep.json\n"
    "      a sweep: ten stages of a minute each at 10, 20, ... 100 req/s, each stage's\n"
    "      latency, TTFT and achieved rate in the summary\n"
    "  vlmload --url http://127.0.0.1:30000 --rate 50 --duration 2m\n"
    "      50 requests/s, Poisson arrivals, for two minutes\n"
    "  vlmload --rate 0 --concurrency 64 --requests 10k --output s.json\n"
    "      closed loop: 64 requests always in flight, 10,000 in all, JSON summary to s.json\n"
    "  vlmload --rate 20 --stream --max-tokens 256 --timeline t.csv --log-requests r.jsonl\n"
    "      streaming replies: TTFT and inter-token latency; a per-second timeline to join\n"
    "      with a memory monitor, and one line per request\n"
    "  vlmload --server sglang --api native --images corpus/ --flush-every 50 --stream\n"
    "      SGLang's native /generate: the prompt text with the model's image placeholders,\n"
    "      the images in image_data; SGLang's cache flushed after every 50 requests\n"
    "\n"
    "Latency is measured from each request's intended start (its place on the arrival\n"
    "schedule) and from its actual send; their difference is the send lag. Ctrl-C stops\n"
    "admission, waits --grace for requests in flight, and writes every output; a second\n"
    "Ctrl-C stops at once.\n"
    "\n"
    "Subcommands:\n"
    "  vlmload analyze TIMELINE.csv [--external MONITOR.csv] [--plot memory.png]\n"
    "      leak verdicts from a run's timeline (vlmload analyze --help)\n"
    "  vlmload merge OUT.json SHARD.json... [--timeline OUT.csv]\n"
    "      combine the --histograms files of shards exactly (vlmload merge --help)\n"
    "\n"
    "Exit status: 0 run completed, 1 run failed (no request succeeded, or a fatal error),\n"
    "2 bad command line, 3 a --max-* threshold was crossed, 130 interrupted.\n";

/* Prints text from column `indent` on, breaking lines at spaces before column `width`. */
static void print_wrapped(FILE *out, const char *text, int indent, int width) {
  int col = indent;
  const char *p = text;
  while (*p) {
    const char *sp = strchr(p, ' ');
    int word = sp ? (int)(sp - p) : (int)strlen(p);
    if (col > indent && col + 1 + word > width) {
      fprintf(out, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', out);
      col++;
    }
    fwrite(p, 1, (size_t)word, out);
    col += word;
    p += word;
    while (*p == ' ')
      p++;
  }
  fputc('\n', out);
}

int vl_config_option_doc(size_t i, vl_option_doc_t *doc) {
  if (i >= VL_ARRAY_SIZE(optdefs))
    return -1;
  doc->name = optdefs[i].name;
  doc->metavar = optdefs[i].metavar;
  doc->help = optdefs[i].help;
  doc->section = optdefs[i].section;
  doc->values = NULL;
  for (size_t j = 0; j < VL_ARRAY_SIZE(optvalues); j++)
    if (optvalues[j].id == optdefs[i].id)
      doc->values = optvalues[j].values;
  return 0;
}

const char *vl_config_examples(void) {
  return examples;
}

void vl_config_usage(FILE *out) {
  fprintf(out, "Usage: vlmload [OPTION]...\n"
               "Drive a vision-language model server (OpenAI chat completions, or SGLang's native\n"
               "/generate) with controlled load.\n");
  for (size_t i = 0; i < VL_ARRAY_SIZE(optdefs); i++) {
    const optdef_t *o = &optdefs[i];
    if (o->section)
      fprintf(out, "\n%s:\n", o->section);
    char left[64];
    snprintf(left, sizeof(left), "--%s%s%s", o->name, o->metavar ? " " : "",
             o->metavar ? o->metavar : "");
    if (strlen(left) > 24)
      fprintf(out, "  %s\n  %-24s ", left, "");
    else
      fprintf(out, "  %-24s ", left);
    print_wrapped(out, o->help, 27, 99);
  }
  fprintf(out, "\n%s", examples);
}

static void print_version(FILE *out) {
  curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
  fprintf(out, "vlmload %s\nlibcurl %s, libuv %s, cJSON %s\n", VL_VERSION, cv->version,
          uv_version_string(), cJSON_Version());
}

void vl_config_defaults(vl_config_t *c) {
  memset(c, 0, sizeof(*c));
  c->url = vl_xstrdup("http://127.0.0.1:30000");
  c->urls = vl_xmalloc(sizeof(char *));
  c->urls[0] = c->url;
  c->n_urls = 1;
  c->shard_n = 1;
  c->endpoint = vl_xstrdup("/v1/chat/completions");
  c->max_tokens = 128;
  c->temperature = 0;
  c->rate = 10;
  c->arrival = VL_ARRIVAL_POISSON;
  c->arrival_cv = 1;
  c->arrival_name = "poisson";
  c->concurrency = 256;
  c->on_full = VL_ONFULL_QUEUE;
  c->seed = 1;
  c->timeout_us = 600ull * 1000000;
  c->connect_timeout_us = 10ull * 1000000;
  c->grace_us = 5ull * 1000000;
  c->max_response = 16ull << 20;
  c->ramp_to = -1;
  vl_monitor_spec_init(&c->monitor);
  c->sample_every_us = 1000000;
  c->max_error_rate = -1;
  c->max_p99_ms = -1;
  c->progress = -1;
  vl_imagespec_res_default(&c->res);
  c->image_fmt = VL_IMG_MIXED;
  c->jpeg_quality = VL_IMAGE_JPEG_QUALITY;
  c->image_content = VL_CONTENT_MIXED;
  c->max_pixels = 100000000;
  c->image_ratio = -1;
  c->images_lo = c->images_hi = 1;
  c->image_placement = VL_PLACE_BEFORE;
  c->server = VL_SERVER_AUTO;
  c->health_timeout_us = 300ull * 1000000;
  c->flush_mode = VL_FLUSH_DRAIN;
  c->flush_post = 1;
  c->flush_retries = 10;
  c->flush_retry_delay_us = 200000;
  c->flush_timeout_us = 60ull * 1000000;
}

void vl_config_free(vl_config_t *c) {
  for (int i = 0; i < c->n_urls; i++)
    free(c->urls[i]);
  free(c->urls);
  free(c->endpoint);
  free(c->image_token);
  free(c->model);
  free(c->api_key);
  for (int i = 0; i < c->n_headers; i++)
    free(c->headers[i]);
  free(c->headers);
  free(c->prompts_file);
  free(c->cacert);
  free(c->images_dir);
  free(c->output);
  free(c->timeline);
  free(c->log_requests);
  free(c->histograms);
  free(c->dump_requests);
  vl_monitor_spec_free(&c->monitor);
  free(c->samples);
  free(c->plot);
  free(c->gnuplot);
  free(c->sweep);
  free(c->phase_name);
  for (int i = 0; i < c->n_phases; i++)
    vl_config_free(&c->phases[i]);
  free(c->phases);
  for (int i = 0; i < VL_MAX_FLUSH_ENDPOINTS; i++)
    free(c->flush_endpoints[i]);
  memset(c, 0, sizeof(*c));
}

static void set_str(char **dst, const char *v) {
  free(*dst);
  *dst = vl_xstrdup(v);
}

/* Checks a base URL with curl's own parser: http or https, a host, no query or fragment. */
static const char *check_url(const char *s) {
  CURLU *u = curl_url();
  const char *why = NULL;
  char *scheme = NULL, *host = NULL, *query = NULL, *frag = NULL;
  if (!u)
    return "out of memory";
  if (curl_url_set(u, CURLUPART_URL, s, 0) != CURLUE_OK)
    why = "not a URL (want http://HOST[:PORT])";
  else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
           (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
    why = "scheme must be http or https";
  else if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host)
    why = "no host";
  else if (curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_OK ||
           curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK)
    why = "a base URL takes no query or fragment";
  curl_free(scheme);
  curl_free(host);
  curl_free(query);
  curl_free(frag);
  curl_url_cleanup(u);
  return why;
}

typedef struct {
  FILE *err;
  const char *name;
} ctx_t;

/* Prints "vlmload: " and fmt, whose %s arguments are all user text, shown as vl_text_fput_shown
 * does, so that no value (a newline in a --config string, say) can split the one line an error
 * is. */
static void say(FILE *f, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("vlmload: ", f);
  for (const char *p = fmt; *p; p++) {
    if (p[0] == '%' && p[1] == 's') {
      vl_text_fput_shown(f, va_arg(ap, const char *));
      p++;
    } else {
      fputc(*p, f);
    }
  }
  va_end(ap);
  fputc('\n', f);
}

static int bad(ctx_t *x, const char *arg, const char *why) {
  if (arg)
    say(x->err, "--%s '%s': %s", x->name, arg, why);
  else
    say(x->err, "--%s: %s", x->name, why);
  return 2;
}

static int get_int(ctx_t *x, const char *arg, uint64_t min, uint64_t max, uint64_t *out) {
  uint64_t v;
  int rc = vl_units_count(arg, &v);
  if (rc)
    return bad(x, arg, rc == VL_ERANGE ? "too large" : "want a whole number (10k, 1M accepted)");
  if (v < min || v > max) {
    char why[96];
    snprintf(why, sizeof(why), "must be between %llu and %llu", (unsigned long long)min,
             (unsigned long long)max);
    return bad(x, arg, why);
  }
  *out = v;
  return 0;
}

static int get_duration(ctx_t *x, const char *arg, int allow_zero, uint64_t *out) {
  uint64_t v;
  if (vl_units_duration(arg, &v))
    return bad(x, arg, "want a duration such as 500ms, 30s, 2m, 1h");
  if (!allow_zero && v == 0)
    return bad(x, arg, "must be more than 0");
  *out = v;
  return 0;
}

static int get_double(ctx_t *x, const char *arg, double max, double *out) {
  double v;
  if (vl_units_double(arg, &v))
    return bad(x, arg, "want a non-negative number");
  if (v > max)
    return bad(x, arg, "too large");
  *out = v;
  return 0;
}

/* The first --url replaces the default; later ones add servers. */
static void add_url(vl_config_t *c, const char *arg) {
  char *url = vl_xstrdup(arg);
  for (size_t n = strlen(url); n > 0 && url[n - 1] == '/'; n--)
    url[n - 1] = '\0';
  if (!c->url_given) {
    free(c->urls[0]);
    c->urls[0] = url;
    c->url_given = 1;
  } else {
    c->urls = vl_xrealloc(c->urls, sizeof(char *) * (size_t)(c->n_urls + 1));
    c->urls[c->n_urls++] = url;
  }
  c->url = c->urls[0];
}

/* Applies one option. Returns 0, or the exit status to leave with. */
static int apply(vl_config_t *c, ctx_t *x, int id, const char *arg, FILE *out) {
  uint64_t u;
  int rc = 0;
  const char *why;
  switch (id) {
  case OPT_URL:
    if ((why = check_url(arg)) != NULL)
      return bad(x, arg, why);
    add_url(c, arg);
    break;
  case OPT_SHARD: {
    const char *slash = strchr(arg, '/');
    char left[32];
    uint64_t i, n;
    if (!slash || (size_t)(slash - arg) >= sizeof(left) || vl_units_count(slash + 1, &n) ||
        n == 0 || n > 100000)
      return bad(x, arg, "want I/N or auto/N with 1 <= N <= 100000");
    memcpy(left, arg, (size_t)(slash - arg));
    left[slash - arg] = '\0';
    if (strcmp(left, "auto") == 0) {
      const char *env = getenv("JOB_COMPLETION_INDEX");
      if (!env || vl_units_count(env, &i))
        return bad(x, arg,
                   "auto needs JOB_COMPLETION_INDEX set to a number (Kubernetes Indexed "
                   "Jobs set it)");
    } else if (vl_units_count(left, &i)) {
      return bad(x, arg, "want I/N or auto/N");
    }
    if (i >= n)
      return bad(x, arg, "the shard index must be below N");
    c->shard_i = i;
    c->shard_n = n;
    break;
  }
  case OPT_ENDPOINT:
    if (arg[0] != '/' || strpbrk(arg, " \t\r\n"))
      return bad(x, arg, "a path starting with '/', without spaces");
    set_str(&c->endpoint, arg);
    c->endpoint_given = 1;
    break;
  case OPT_API:
    if (strcmp(arg, "openai") == 0)
      c->api = VL_API_OPENAI;
    else if (strcmp(arg, "native") == 0)
      c->api = VL_API_NATIVE;
    else
      return bad(x, arg, "want openai or native");
    break;
  case OPT_MODEL:
    if (!*arg)
      return bad(x, NULL, "empty model name");
    set_str(&c->model, arg);
    break;
  case OPT_API_KEY:
    if (!*arg || strpbrk(arg, "\r\n"))
      return bad(x, NULL, "empty or multi-line key");
    set_str(&c->api_key, arg);
    break;
  case OPT_HEADER: {
    const char *colon = strchr(arg, ':');
    /* Not echoed: header values carry credentials as often as the API key does. */
    if (!colon || colon == arg || strpbrk(arg, "\r\n"))
      return bad(x, NULL, "want 'Name: value' on one line");
    c->headers = vl_xrealloc(c->headers, sizeof(char *) * (size_t)(c->n_headers + 1));
    c->headers[c->n_headers++] = vl_xstrdup(arg);
    break;
  }
  case OPT_HTTP2:
    c->http2 = 1;
    break;
  case OPT_INSECURE:
    c->insecure = 1;
    break;
  case OPT_COMPRESSED:
    c->compressed = 1;
    break;
  case OPT_CACERT:
    /* Checked here: a typo must not turn into a TLS failure on every request. */
    if (access(arg, R_OK) != 0)
      return bad(x, arg, strerror(errno));
    set_str(&c->cacert, arg);
    break;
  case OPT_SERVER:
    if (vl_profile_by_name(arg, &c->server) != 0)
      return bad(x, arg, "want sglang, vllm, openai or auto");
    break;
  case OPT_HEALTH_CHECK:
    c->health_check = 1;
    break;
  case OPT_KEEP_GOING:
    c->keep_going = 1;
    break;
  case OPT_HEALTH_TIMEOUT:
    rc = get_duration(x, arg, 0, &c->health_timeout_us);
    break;
  case OPT_FLUSH_EVERY:
    c->flush_every_n = c->flush_every_us = 0;
    if (vl_units_count(arg, &u) == 0) {
      if (u == 0)
        return bad(x, arg, "must be more than 0");
      c->flush_every_n = u;
    } else if (vl_units_duration(arg, &u) == 0 && u >= 1000) {
      c->flush_every_us = u;
    } else {
      return bad(x, arg, "want a request count (50) or a duration of at least 1ms (30s)");
    }
    break;
  case OPT_FLUSH_MODE:
    if (strcmp(arg, "drain") == 0)
      c->flush_mode = VL_FLUSH_DRAIN;
    else if (strcmp(arg, "inline") == 0)
      c->flush_mode = VL_FLUSH_INLINE;
    else
      return bad(x, arg, "want drain or inline");
    break;
  case OPT_FLUSH_ENDPOINT: {
    for (int i = 0; i < VL_MAX_FLUSH_ENDPOINTS; i++) {
      free(c->flush_endpoints[i]);
      c->flush_endpoints[i] = NULL;
    }
    char *copy = vl_xstrdup(arg), *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      if (tok[0] != '/' || strpbrk(tok, " \t\r\n") || n == VL_MAX_FLUSH_ENDPOINTS) {
        free(copy);
        return bad(x, arg, "want up to 4 paths starting with '/', separated by commas");
      }
      c->flush_endpoints[n++] = vl_xstrdup(tok);
    }
    free(copy);
    if (n == 0)
      return bad(x, arg, "want a path starting with '/'");
    break;
  }
  case OPT_FLUSH_METHOD:
    if (strcmp(arg, "GET") == 0 || strcmp(arg, "get") == 0)
      c->flush_post = 0;
    else if (strcmp(arg, "POST") == 0 || strcmp(arg, "post") == 0)
      c->flush_post = 1;
    else
      return bad(x, arg, "want GET or POST");
    break;
  case OPT_FLUSH_RETRIES:
    if ((rc = get_int(x, arg, 0, 10000, &u)) == 0)
      c->flush_retries = (int)u;
    break;
  case OPT_FLUSH_TIMEOUT:
    rc = get_duration(x, arg, 0, &c->flush_timeout_us);
    break;
  case OPT_IMAGES:
    set_str(&c->images_dir, arg);
    c->images_on = 1;
    break;
  case OPT_RESOLUTION: {
    char reason[160];
    if (vl_imagespec_res_parse(&c->res, arg, reason, sizeof(reason)))
      return bad(x, arg, reason);
    c->res_given = c->images_on = 1;
    break;
  }
  case OPT_IMAGE_FORMAT:
    if (vl_imagespec_format(arg, &c->image_fmt))
      return bad(x, arg, "want png, jpeg or mixed");
    c->images_on = 1;
    break;
  case OPT_JPEG_QUALITY:
    if ((rc = get_int(x, arg, 1, 100, &u)) == 0)
      c->jpeg_quality = (int)u;
    break;
  case OPT_IMAGE_CONTENT:
    if (vl_imagespec_content(arg, &c->image_content))
      return bad(x, arg, "want photo-like, noise, gradient, shapes or mixed");
    c->images_on = 1;
    break;
  case OPT_MAX_PIXELS:
    rc = get_int(x, arg, 1, 1ull << 40, &c->max_pixels);
    break;
  case OPT_POOL_SIZE:
    if ((rc = get_int(x, arg, 1, 1000000, &u)) == 0)
      c->pool_size = (int)u;
    c->images_on = 1;
    break;
  case OPT_UNIQUE_IMAGES:
    c->unique_images = c->images_on = 1;
    break;
  case OPT_IMAGE_RATIO:
    if (vl_units_double(arg, &c->image_ratio) || c->image_ratio > 1)
      return bad(x, arg, "want a fraction between 0 and 1");
    c->images_on = c->image_ratio > 0;
    break;
  case OPT_IMAGES_PER_REQUEST: {
    char reason[160];
    if (vl_imagespec_count(arg, 1, VL_MAX_IMAGES, &c->images_lo, &c->images_hi, reason,
                           sizeof(reason)))
      return bad(x, arg, reason);
    c->images_on = 1;
    break;
  }
  case OPT_IMAGE_PLACEMENT:
    if (strcmp(arg, "before") == 0)
      c->image_placement = VL_PLACE_BEFORE;
    else if (strcmp(arg, "after") == 0)
      c->image_placement = VL_PLACE_AFTER;
    else if (strcmp(arg, "random") == 0)
      c->image_placement = VL_PLACE_RANDOM;
    else
      return bad(x, arg, "want before, after or random");
    break;
  case OPT_IMAGE_TOKEN:
    /* Newlines and tabs may separate a placeholder from the text; no other control character
     * (U+0001 marks where images go in a request body). */
    for (const char *p = arg; *p; p++)
      if ((unsigned char)*p < 0x20 && *p != '\n' && *p != '\t')
        return bad(x, NULL, "a control character other than a newline or a tab");
    if (!*arg)
      return bad(x, NULL, "empty placeholder");
    set_str(&c->image_token, arg);
    break;
  case OPT_PROMPTS:
    set_str(&c->prompts_file, arg);
    break;
  case OPT_MAX_TOKENS:
    if ((rc = get_int(x, arg, 1, 1000000, &u)) == 0)
      c->max_tokens = (int)u;
    break;
  case OPT_TEMPERATURE:
    rc = get_double(x, arg, 10, &c->temperature);
    break;
  case OPT_STREAM:
    c->stream = 1;
    break;
  case OPT_RATE:
    rc = get_double(x, arg, 10e6, &c->rate);
    break;
  case OPT_ARRIVAL:
    if (vl_pace_parse(arg, &c->arrival, &c->arrival_cv))
      return bad(x, arg, "want constant, poisson or gamma:CV with 0 < CV <= 100");
    c->arrival_name = c->arrival == VL_ARRIVAL_CONSTANT  ? "constant"
                      : c->arrival == VL_ARRIVAL_POISSON ? "poisson"
                                                         : "gamma";
    break;
  case OPT_CONCURRENCY:
    if ((rc = get_int(x, arg, 1, 1000000, &u)) == 0)
      c->concurrency = (int)u;
    break;
  case OPT_ON_FULL:
    if (strcmp(arg, "queue") == 0)
      c->on_full = VL_ONFULL_QUEUE;
    else if (strcmp(arg, "drop") == 0)
      c->on_full = VL_ONFULL_DROP;
    else
      return bad(x, arg, "want queue or drop");
    break;
  case OPT_REQUESTS:
    rc = get_int(x, arg, 1, UINT64_MAX / 2, &c->requests);
    break;
  case OPT_DURATION:
    rc = get_duration(x, arg, 0, &c->duration_us);
    break;
  case OPT_WARMUP:
    rc = get_int(x, arg, 0, UINT64_MAX / 2, &c->warmup);
    break;
  case OPT_SEED:
    rc = get_int(x, arg, 0, UINT64_MAX / 2, &c->seed);
    break;
  case OPT_TIMEOUT:
    rc = get_duration(x, arg, 0, &c->timeout_us);
    break;
  case OPT_CONNECT_TIMEOUT:
    rc = get_duration(x, arg, 0, &c->connect_timeout_us);
    break;
  case OPT_GRACE:
    rc = get_duration(x, arg, 1, &c->grace_us);
    break;
  case OPT_MAX_RESPONSE:
    if (vl_units_bytes(arg, &c->max_response) || c->max_response < 1024)
      return bad(x, arg, "want a size of at least 1KiB, such as 16MiB");
    break;
  case OPT_MAX_ERROR_RATE:
    if (vl_units_double(arg, &c->max_error_rate) || c->max_error_rate > 1)
      return bad(x, arg, "want a fraction between 0 and 1");
    break;
  case OPT_MAX_P99_MS:
    rc = get_double(x, arg, 1e9, &c->max_p99_ms);
    break;
  case OPT_OUTPUT:
    set_str(&c->output, arg);
    break;
  case OPT_TIMELINE:
    set_str(&c->timeline, arg);
    break;
  case OPT_LOG_REQUESTS:
    set_str(&c->log_requests, arg);
    break;
  case OPT_SWEEP:
    set_str(&c->sweep, arg);
    break;
  case OPT_DRY_RUN:
    c->dry_run = 1;
    break;
  case OPT_DUMP_REQUESTS:
    set_str(&c->dump_requests, arg);
    break;
  case OPT_MONITOR_PID:
  case OPT_MONITOR_PID_MATCH:
  case OPT_MONITOR_PROM:
  case OPT_MONITOR_CMD: {
    char reason[200];
    int (*add)(vl_monitor_spec_t *, const char *, char *, size_t) =
        id == OPT_MONITOR_PID         ? vl_monitor_spec_add_pid
        : id == OPT_MONITOR_PID_MATCH ? vl_monitor_spec_add_match
        : id == OPT_MONITOR_PROM      ? vl_monitor_spec_add_prom
                                      : vl_monitor_spec_add_cmd;
    if (add(&c->monitor, arg, reason, sizeof(reason))) {
      say(x->err, "%s", reason); /* the reason names the option and its value */
      return 2;
    }
    /* Checked now, before any load: a mistyped PID must not cost a run. */
    pid_t pid = id == OPT_MONITOR_PID ? c->monitor.pids[c->monitor.n_pids - 1].pid : 0;
    if (pid && kill(pid, 0) != 0 && errno == ESRCH) {
      say(x->err,
          "--monitor-pid %s: no process %s is running (pgrep -f finds one by its command line; "
          "--monitor-pid-match follows one across restarts)",
          arg, arg + (strchr(arg, '=') ? strchr(arg, '=') - arg + 1 : 0));
      return 2;
    }
    break;
  }
  case OPT_MONITOR_GPU:
    c->monitor.gpu = 1;
    break;
  case OPT_MONITOR_PSS:
    c->monitor.pss = 1;
    break;
  case OPT_SAMPLE_EVERY:
    if ((rc = get_duration(x, arg, 0, &c->sample_every_us)) == 0 && c->sample_every_us < 10000)
      return bad(x, arg, "at least 10ms");
    break;
  case OPT_SAMPLES:
    set_str(&c->samples, arg);
    break;
  case OPT_TIMELINE_FORMAT:
    if (strcmp(arg, "csv") == 0)
      c->timeline_jsonl = 0;
    else if (strcmp(arg, "jsonl") == 0)
      c->timeline_jsonl = 1;
    else
      return bad(x, arg, "want csv or jsonl");
    break;
  case OPT_ANALYZE:
    c->analyze = 1;
    break;
  case OPT_PLOT:
    set_str(&c->plot, arg);
    break;
  case OPT_GNUPLOT:
    set_str(&c->gnuplot, arg);
    break;
  case OPT_HISTOGRAMS:
    set_str(&c->histograms, arg);
    break;
  case OPT_QUIET:
    c->quiet = 1;
    break;
  case OPT_PROGRESS:
    c->progress = 1;
    break;
  case OPT_NO_PROGRESS:
    c->progress = 0;
    break;
  case OPT_HELP:
    vl_config_usage(out);
    return 0;
  case OPT_VERSION:
    print_version(out);
    return 0;
  default:
    return 2;
  }
  return rc;
}

/* "I/N" of this shard, in static storage. */
static const char *shard_text(const vl_config_t *c) {
  static char text[48];
  snprintf(text, sizeof(text), "%llu/%llu", (unsigned long long)c->shard_i,
           (unsigned long long)c->shard_n);
  return text;
}

/* Checks that hold between options. */
static int cross_check(vl_config_t *c, int arrival_set, int connect_timeout_set, FILE *err) {
  ctx_t x = {err, NULL};
  if (c->rate == 0 && arrival_set) {
    x.name = "arrival";
    return bad(&x, NULL, "an arrival process needs an open loop (--rate > 0)");
  }
  if (c->rate > 0 && c->rate < 1e-3) {
    x.name = "rate";
    return bad(&x, NULL, "below 0.001 per second; use --rate 0 for a closed loop");
  }
  if (c->api == VL_API_NATIVE) {
    /* /generate is SGLang's own route: other servers do not have it. */
    if (c->server == VL_SERVER_VLLM || c->server == VL_SERVER_OPENAI) {
      char why[160];
      snprintf(why, sizeof(why),
               "SGLang's /generate; --server %s has no such route (use --server sglang, or --api "
               "openai)",
               vl_profile_name(c->server));
      x.name = "api";
      return bad(&x, "native", why);
    }
    c->server = VL_SERVER_SGLANG;
    if (!c->endpoint_given)
      set_str(&c->endpoint, "/generate");
  }
  /* A drained flush waits for this process's requests only: with shards, the others' would still
   * run, and the server would be flushed busy. One flush across processes needs a coordinator
   * that vlmload does not have, so the combination is refused rather than half done. */
  if (c->shard_n > 1 && c->flush_mode == VL_FLUSH_DRAIN &&
      (c->flush_every_n || c->flush_every_us)) {
    say(err,
        "--flush-every with --shard %s: a drained flush needs an idle server, but the other shards "
        "keep sending while this one drains; run one process without --shard (one drives a "
        "server to saturation), or add --flush-mode inline to flush while requests run (busy "
        "refusals are counted)",
        shard_text(c));
    return 2;
  }
  if (c->requests && c->warmup >= c->requests) {
    x.name = "warmup";
    return bad(&x, NULL, "must be smaller than --requests");
  }
  if (c->connect_timeout_us > c->timeout_us) {
    if (connect_timeout_set) {
      x.name = "connect-timeout";
      return bad(&x, NULL, "longer than --timeout");
    }
    c->connect_timeout_us = c->timeout_us;
  }
  if (c->image_ratio == 0)
    c->images_on = 0;
  else if (c->images_on && c->image_ratio < 0)
    c->image_ratio = 1;
  if (!c->images_on)
    c->image_ratio = 0;
  if ((c->analyze || c->plot) && vl_monitor_spec_empty(&c->monitor)) {
    x.name = c->analyze ? "analyze" : "plot";
    return bad(&x, NULL,
               "nothing to sample: add --monitor-pid PID, --monitor-pid-match REGEX, "
               "--monitor-gpu, --monitor-prom URL or --monitor-cmd CMD");
  }
  if ((c->analyze || c->plot) && c->timeline_jsonl) {
    x.name = c->analyze ? "analyze" : "plot";
    return bad(&x, NULL, "reads a CSV timeline; drop --timeline-format jsonl");
  }
  if (c->dump_requests && !c->requests) {
    x.name = "dump-requests";
    return bad(&x, NULL, "needs --requests N (how many bodies to write)");
  }
  if (!c->requests && !c->duration_us)
    c->duration_us = 30ull * 1000000;
  if (!c->api_key) {
    const char *env = getenv("OPENAI_API_KEY");
    if (env && *env)
      c->api_key = vl_xstrdup(env);
  }
  if (c->quiet)
    c->progress = 0;
  return VL_CONFIG_RUN;
}

/* Reads a JSON configuration file; it must hold an object. Returns 0 or the exit status. */
static int load_json(const char *path, cJSON **root, FILE *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    say(err, "--config '%s': %s", path, strerror(errno));
    return 2;
  }
  char *text = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[65536];
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    if (len + n > (16u << 20)) {
      fclose(f);
      free(text);
      say(err, "--config '%s': larger than 16 MiB", path);
      return 2;
    }
    if (len + n > cap) {
      cap = (len + n) * 2;
      text = vl_xrealloc(text, cap);
    }
    memcpy(text + len, chunk, n);
    len += n;
  }
  fclose(f);
  *root = cJSON_ParseWithLength(text ? text : "", len);
  free(text);
  if (!cJSON_IsObject(*root)) {
    say(err, "--config '%s': not a JSON object", path);
    cJSON_Delete(*root);
    *root = NULL;
    return 2;
  }
  return 0;
}

typedef struct {
  int arrival_set, connect_set;
} seen_t;

/* Edit distance between a and b (insertions, deletions, substitutions, and swaps of two
 * neighbours, each 1), for names of at most 63 bytes; longer ones are far from everything. */
static int distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 63 || m > 63)
    return 99;
  int d[64][64];
  for (size_t i = 0; i <= n; i++)
    d[i][0] = (int)i;
  for (size_t j = 0; j <= m; j++)
    d[0][j] = (int)j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      v = VL_MIN(v, d[i - 1][j] + 1);
      v = VL_MIN(v, d[i][j - 1] + 1);
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        v = VL_MIN(v, d[i - 2][j - 2] + 1);
      d[i][j] = v;
    }
  return d[n][m];
}

/* The option whose name is nearest to name (no leading dashes), or NULL when none is near enough
 * to be what was meant: at most 2 edits, and fewer than a third of the name. */
static const optdef_t *nearest(const char *name) {
  const optdef_t *best = NULL;
  int best_d = 99;
  for (size_t i = 0; i < VL_ARRAY_SIZE(optdefs); i++) {
    int d = distance(name, optdefs[i].name);
    if (d < best_d) {
      best_d = d;
      best = &optdefs[i];
    }
  }
  size_t len = strlen(name);
  return best && best_d <= 2 && (size_t)best_d * 3 <= len + 2 ? best : NULL;
}

/* Says why "--name" (the text before any '=' of the argument given) is not an option: an
 * abbreviation of several (listed), an option that takes no value given one, or a name near a real
 * one. Only the name is shown otherwise: what follows '=' in a mistyped --api-key=... is a
 * secret. */
static void say_bad_option(FILE *err, const char *name, const char *given) {
  int has_value = strchr(given, '=') != NULL;
  const char *bare = strncmp(name, "--", 2) == 0 ? name + 2 : name + (name[0] == '-');
  size_t len = strlen(bare);
  char list[512];
  size_t used = 0;
  int n = 0;
  const optdef_t *exact = NULL;
  for (size_t i = 0; i < VL_ARRAY_SIZE(optdefs) && len; i++) {
    if (strncmp(optdefs[i].name, bare, len) != 0)
      continue;
    if (strlen(optdefs[i].name) == len)
      exact = &optdefs[i];
    if (used < sizeof(list))
      used += (size_t)snprintf(list + used, sizeof(list) - used, "%s--%s", n ? ", " : "",
                               optdefs[i].name);
    n++;
  }
  if (used >= sizeof(list))
    snprintf(list + sizeof(list) - 5, 5, "...");
  if (has_value && (exact || n == 1)) {
    const optdef_t *o = exact;
    for (size_t i = 0; !o && i < VL_ARRAY_SIZE(optdefs); i++)
      if (strncmp(optdefs[i].name, bare, len) == 0)
        o = &optdefs[i];
    /* Shown whole: an option without a value carries no secret after its '='. */
    say(err, "%s: --%s takes no value; give it alone (see --help)", given, o->name);
    return;
  }
  if (n > 1 && !exact) {
    say(err, "%s: ambiguous abbreviation of %s (see --help)", name, list);
    return;
  }
  const optdef_t *near = len ? nearest(bare) : NULL;
  if (near)
    say(err, "%s: unknown option; did you mean --%s? (see --help)", name, near->name);
  else
    say(err, "%s: unknown option (see --help)", name);
}

#define N_OPTS (OPT_VERSION + 1 - OPT_URL)

/* The command line's part in reading a --config file under it. */
typedef struct {
  const char *path;            /* the --config file (the last one given), or NULL */
  char *dir;                   /* its folder, which relative paths in it are taken from; NULL: . */
  unsigned char given[N_OPTS]; /* given[id - OPT_URL]: the command line gives option id */
} cmdline_t;

/* A path the file gives, as the process must open it: relative ones from the file's folder.
 * Returns v itself, or a string in *owned that the caller frees. */
static const char *from_file(const cmdline_t *cl, unsigned flags, const char *v, char **owned) {
  *owned = NULL;
  if (!cl->dir || !*v || v[0] == '/' || !(flags & (OPTF_PATH | OPTF_PROGRAM)) ||
      ((flags & OPTF_PROGRAM) && !strchr(v, '/')))
    return v;
  size_t n = strlen(cl->dir) + strlen(v) + 2;
  *owned = vl_xmalloc(n);
  snprintf(*owned, n, "%s%s%s", cl->dir, cl->dir[strlen(cl->dir) - 1] == '/' ? "" : "/", v);
  return *owned;
}

/* Applies every key of a JSON object from the --config file as the option of that name; where
 * names the object in errors. In a phase, "name" and "ramp_to" are the phase's own keys; "phases"
 * is skipped at the top. A list the command line gives is not taken from the file (the command
 * line's replaces it); relative paths are the file's folder's. Returns 0 or the exit status. */
static int apply_object(vl_config_t *c, const cJSON *obj, const char *where, int in_phase,
                        seen_t *seen, const cmdline_t *cl, FILE *out, FILE *err) {
  int rc = 0;
  char ctxname[320];
  for (const cJSON *item = obj->child; item && !rc; item = item->next) {
    if (!in_phase && strcmp(item->string, "phases") == 0)
      continue;
    snprintf(ctxname, sizeof(ctxname), "%s (in %s)", item->string, where);
    ctx_t x = {err, ctxname};
    if (in_phase && strcmp(item->string, "name") == 0) {
      if (!cJSON_IsString(item))
        return bad(&x, NULL, "want a string");
      set_str(&c->phase_name, item->valuestring);
      continue;
    }
    if (in_phase && strcmp(item->string, "ramp_to") == 0) {
      if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble > 10e6)
        return bad(&x, NULL, "want the rate at the end of the phase (a number >= 0)");
      c->ramp_to = item->valuedouble;
      continue;
    }
    const optdef_t *o = NULL;
    for (size_t i = 0; i < VL_ARRAY_SIZE(optdefs); i++)
      if (strcmp(optdefs[i].name, item->string) == 0)
        o = &optdefs[i];
    if (!o || o->id == OPT_CONFIG || o->id == OPT_HELP || o->id == OPT_VERSION) {
      const optdef_t *near = o ? NULL : nearest(item->string);
      if (near)
        say(err, "%s: unknown option \"%s\"; did you mean \"%s\"?", where, item->string,
            near->name);
      else
        say(err, "%s: unknown option \"%s\"", where, item->string);
      return 2;
    }
    snprintf(ctxname, sizeof(ctxname), "%s (in %s)", o->name, where);
    unsigned flags = flags_of(o->id);
    if ((flags & OPTF_LIST) && cl->given[o->id - OPT_URL])
      continue;
    seen->arrival_set |= o->id == OPT_ARRIVAL;
    seen->connect_set |= o->id == OPT_CONNECT_TIMEOUT;
    if (!o->has_arg) {
      if (!cJSON_IsBool(item))
        return bad(&x, NULL, "want true or false");
      if (cJSON_IsTrue(item))
        rc = apply(c, &x, o->id, NULL, out);
      continue;
    }
    const cJSON *one = cJSON_IsArray(item) ? item->child : item;
    for (; one && !rc; one = cJSON_IsArray(item) ? one->next : NULL) {
      char num[64];
      const char *v;
      char *owned = NULL;
      if (cJSON_IsString(one)) {
        v = from_file(cl, flags, one->valuestring, &owned);
      } else if (cJSON_IsNumber(one)) {
        snprintf(num, sizeof(num), "%.17g", one->valuedouble);
        v = num;
      } else {
        return bad(&x, NULL, "want a string or a number (or a list of them)");
      }
      rc = apply(c, &x, o->id, v, out);
      free(owned);
    }
  }
  return rc;
}

/* getopt_long's table, from optdefs: longopts has room for every option and the end mark. */
static void make_longopts(struct option *longopts) {
  for (size_t i = 0; i < VL_ARRAY_SIZE(optdefs); i++) {
    longopts[i].name = optdefs[i].name;
    longopts[i].has_arg = optdefs[i].has_arg ? required_argument : no_argument;
    longopts[i].flag = NULL;
    longopts[i].val = optdefs[i].id;
  }
  memset(&longopts[VL_ARRAY_SIZE(optdefs)], 0, sizeof(struct option));
}

/* Builds one configuration: defaults, then the file's keys, then the command line, then (for a
 * phase) the phase's keys. Returns VL_CONFIG_RUN or the exit status. */
static int parse_one(vl_config_t *c, int argc, char **argv, const cJSON *file, const cmdline_t *cl,
                     const cJSON *phase, const char *phase_where, FILE *out, FILE *err) {
  struct option longopts[VL_ARRAY_SIZE(optdefs) + 1];
  make_longopts(longopts);
  seen_t seen = {0, 0};
  int rc;

  vl_config_defaults(c);
  if (file && (rc = apply_object(c, file, cl->path, 0, &seen, cl, out, err)) != 0)
    return rc;
  opterr = 0;
  /* 0, not 1: glibc then forgets everything of an earlier scan, including its place inside a
   * cluster of short options ("-hV") in an argv that may be gone. */
  optind = 0;
  for (;;) {
    int longindex = -1;
    int id = getopt_long(argc, argv, ":hV", longopts, &longindex);
    if (id == -1)
      break;
    if (id == 'h')
      id = OPT_HELP;
    else if (id == 'V')
      id = OPT_VERSION;
    if (id == '?' || id == ':') {
      const char *opt = argv[optind - 1];
      if (id == ':')
        say(err, "%s: needs a value (see --help)", opt);
      else {
        /* The name only: what follows '=' in a mistyped --api-key=... is a secret. */
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)VL_MIN(strcspn(opt, "="), 100), opt);
        say_bad_option(err, name, opt);
      }
      return 2;
    }
    if (id == OPT_CONFIG)
      continue;
    ctx_t x = {err, longindex >= 0 ? optdefs[longindex].name : ""};
    seen.arrival_set |= id == OPT_ARRIVAL;
    seen.connect_set |= id == OPT_CONNECT_TIMEOUT;
    rc = apply(c, &x, id, optarg, out);
    if (id == OPT_HELP || id == OPT_VERSION)
      return 0;
    if (rc)
      return rc;
  }
  if (optind < argc) {
    say(err, "'%s': unexpected argument (options start with --; see --help)", argv[optind]);
    return 2;
  }
  if (phase && (rc = apply_object(c, phase, phase_where, 1, &seen, cl, out, err)) != 0)
    return rc;
  if (!seen.arrival_set)
    c->arrival_name = c->rate > 0 ? "poisson" : "closed";
  return cross_check(c, seen.arrival_set, seen.connect_set, err);
}

/* Turns --sweep KEY=FROM:TO:STEP into phases, one per value. Returns NULL after printing an
 * error. */
static cJSON *sweep_phases(const char *spec, FILE *err) {
  char key[32];
  double from, to, step;
  const char *eq = strchr(spec, '=');
  cJSON *phases = NULL;
  if (!eq || (size_t)(eq - spec) >= sizeof(key))
    goto bad;
  memcpy(key, spec, (size_t)(eq - spec));
  key[eq - spec] = '\0';
  char tail;
  /* Finite values only: an infinite step makes from + step * 0 NaN, which no bound stops. */
  if (sscanf(eq + 1, "%lf:%lf:%lf%c", &from, &to, &step, &tail) != 3 || !isfinite(step) ||
      !isfinite(to) || !(step > 0) || !(from >= 0) || !(to >= from) || (to - from) / step > 1000 ||
      (strcmp(key, "rate") != 0 && strcmp(key, "concurrency") != 0))
    goto bad;
  phases = cJSON_CreateArray();
  for (int i = 0; i <= 1000; i++) {
    double v = from + step * i;
    if (v > to + step * 1e-9)
      break;
    char name[64];
    snprintf(name, sizeof(name), "%s=%.6g", key, v);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "name", name);
    cJSON_AddNumberToObject(p, key, strcmp(key, "concurrency") == 0 ? VL_MAX(1.0, floor(v)) : v);
    cJSON_AddItemToArray(phases, p);
  }
  return phases;
bad:
  say(err, "--sweep '%s': want rate=FROM:TO:STEP or concurrency=FROM:TO:STEP (at most 1000 stages)",
      spec);
  return NULL;
}

/* What the command line gives: its --config file (the last one given), read before the other
 * options because they override it, and which options it gives. Found by the same getopt_long scan
 * as parse_one's, so it is the file parse_one would see: an unambiguous abbreviation (--conf) names
 * it, the value of another option (--model --config) does not, nor anything after "--". Errors are
 * left for parse_one to say. */
static void scan_cmdline(int argc, char **argv, cmdline_t *cl) {
  struct option longopts[VL_ARRAY_SIZE(optdefs) + 1];
  make_longopts(longopts);
  memset(cl, 0, sizeof(*cl));
  opterr = 0;
  optind = 0;
  for (;;) {
    int id = getopt_long(argc, argv, ":hV", longopts, NULL);
    if (id == -1)
      break;
    if (id == OPT_CONFIG)
      cl->path = optarg;
    if (id >= OPT_URL && id <= OPT_VERSION)
      cl->given[id - OPT_URL] = 1;
  }
  const char *slash = cl->path ? strrchr(cl->path, '/') : NULL;
  if (slash) {
    size_t n = slash == cl->path ? 1 : (size_t)(slash - cl->path);
    cl->dir = vl_xmalloc(n + 1);
    memcpy(cl->dir, cl->path, n);
    cl->dir[n] = '\0';
  }
}

/* An output that is the --config file itself would overwrite the file while the run reads it:
 * refused. Outputs are the top level's only. Returns 0 or the exit status. */
static int check_outputs(const vl_config_t *c, const char *path, FILE *err) {
  const struct {
    const char *name, *value;
  } outs[] = {
      {"output", c->output},   {"timeline", c->timeline},     {"log-requests", c->log_requests},
      {"samples", c->samples}, {"histograms", c->histograms}, {"plot", c->plot}};
  struct stat conf, st;
  /* A regular file only: /dev/stdin and /dev/stdout may well be one terminal. */
  if (!path || stat(path, &conf) != 0 || !S_ISREG(conf.st_mode))
    return 0;
  for (size_t i = 0; i < VL_ARRAY_SIZE(outs); i++) {
    if (outs[i].value && stat(outs[i].value, &st) == 0 && st.st_dev == conf.st_dev &&
        st.st_ino == conf.st_ino) {
      say(err,
          "--%s '%s': is the --config file '%s', which the run would overwrite; name another "
          "file",
          outs[i].name, outs[i].value, path);
      return 2;
    }
  }
  return 0;
}

/* A duration as an option takes it: whole seconds as "2s", else milliseconds. */
static void fmt_us(char *out, size_t n, uint64_t us) {
  if (us % 1000000 == 0)
    snprintf(out, n, "%llus", (unsigned long long)(us / 1000000));
  else
    snprintf(out, n, "%llums", (unsigned long long)(us / 1000));
}

/* The memory samples a flush window holds under c's cadence, rate and --sample-every: one line on
 * err when there are fewer than 3, since a sawtooth (memory that climbs between flushes and comes
 * back) cannot show in fewer. Said only where memory is recorded. Returns whether it warned. */
static int warn_sampling(const vl_config_t *c, const vl_config_t *run, FILE *err) {
  const vl_monitor_spec_t *m = &run->monitor;
  int recorded = run->timeline || run->analyze || run->plot || run->samples || m->n_pids ||
                 m->n_matches || m->n_proms || m->n_cmds || m->gpu;
  if (!recorded || !(c->flush_every_n || c->flush_every_us) || (c->flush_every_n && !(c->rate > 0)))
    return 0;
  double window_us =
      c->flush_every_n ? (double)c->flush_every_n / c->rate * 1e6 : (double)c->flush_every_us;
  uint64_t every = run->sample_every_us;
  double per = floor(window_us / (double)every);
  if (per >= 3)
    return 0;
  char cadence[96], now[32], want[32];
  if (c->flush_every_n)
    snprintf(cadence, sizeof(cadence), "--flush-every %llu at --rate %g flushes every %.3g s",
             (unsigned long long)c->flush_every_n, c->rate, window_us / 1e6);
  else
    snprintf(cadence, sizeof(cadence), "--flush-every %.3gs flushes every %.3g s", window_us / 1e6,
             window_us / 1e6);
  fmt_us(now, sizeof(now), every);
  uint64_t ms = (uint64_t)floor(window_us / 3000);
  const char *where = c == run ? "" : " (in ";
  char msg[512];
  if (ms >= 10) {
    fmt_us(want, sizeof(want), ms * 1000);
    snprintf(msg, sizeof(msg),
             "%s%s%s%s, and --sample-every %s takes %.0f memory sample%s between "
             "flushes: a sawtooth needs 3; use --sample-every %s or less",
             cadence, where,
             c == run        ? ""
             : c->phase_name ? c->phase_name
                             : "a phase",
             c == run ? "" : ")", now, per, per == 1 ? "" : "s", want);
  } else {
    /* Even the fastest sampling (10 ms) is too slow: the flushes must be further apart. */
    char fewer[48];
    if (c->flush_every_n)
      snprintf(fewer, sizeof(fewer), "--flush-every %.0f", ceil(0.03 * c->rate));
    else
      snprintf(fewer, sizeof(fewer), "--flush-every 30ms");
    snprintf(msg, sizeof(msg),
             "%s%s%s%s, and even --sample-every 10ms takes fewer than 3 memory "
             "samples between flushes, as a sawtooth needs: flush less often (%s or more)",
             cadence, where,
             c == run        ? ""
             : c->phase_name ? c->phase_name
                             : "a phase",
             c == run ? "" : ")", fewer);
  }
  /* Wrapped between words, as vlmload's own text is. */
  vl_text_wrap_t w;
  vl_text_wrap_start(&w, err, VL_TEXT_COLUMNS, 2, "vlmload: warning: ");
  vl_text_wrap_words(&w, msg);
  vl_text_wrap_end(&w);
  return 1;
}

/* The run-wide facts, from every phase. */
static void find_facts(vl_config_t *c) {
  int n = c->n_phases ? c->n_phases : 1;
  memset(&c->run, 0, sizeof(c->run));
  for (int i = 0; i < n; i++) {
    const vl_config_t *p = c->n_phases ? &c->phases[i] : c;
    c->run.flushes |= p->flush_every_n || p->flush_every_us;
    c->run.unique_images |= p->images_on && p->unique_images;
    if (p->images_on && !c->run.images)
      c->run.images = p;
  }
}

int vl_config_parse(vl_config_t *c, int argc, char **argv, FILE *out, FILE *err) {
  cmdline_t cl;
  scan_cmdline(argc, argv, &cl);
  const char *path = cl.path;
  cJSON *file = NULL;
  if (path) {
    int rc = load_json(path, &file, err);
    if (rc) {
      vl_config_defaults(c);
      free(cl.dir);
      return rc;
    }
  }
  int rc = parse_one(c, argc, argv, file, &cl, NULL, NULL, out, err);
  if (rc == VL_CONFIG_RUN)
    rc = check_outputs(c, path, err) ? 2 : rc;
  const cJSON *phases = file ? cJSON_GetObjectItemCaseSensitive(file, "phases") : NULL;
  cJSON *swept = NULL;
  if (rc == VL_CONFIG_RUN && c->sweep) {
    if (phases) {
      fprintf(err, "vlmload: --sweep: the configuration file already has phases\n");
      rc = 2;
    } else if (!(swept = sweep_phases(c->sweep, err))) {
      rc = 2;
    }
    phases = swept;
  }
  if (rc == VL_CONFIG_RUN && phases) {
    int n = cJSON_GetArraySize(phases);
    if (!cJSON_IsArray(phases) || n == 0 || n > 1000) {
      say(err, "--config '%s': \"phases\" must be a list of 1 to 1000 objects", path ? path : "");
      rc = 2;
    }
    c->phases = vl_xcalloc((size_t)VL_MAX(n, 1), sizeof(vl_config_t));
    for (int i = 0; i < n && rc == VL_CONFIG_RUN; i++) {
      const cJSON *ph = cJSON_GetArrayItem(phases, i);
      char where[256];
      snprintf(where, sizeof(where), "phase %d", i + 1);
      if (!cJSON_IsObject(ph)) {
        fprintf(err, "vlmload: %s: not a JSON object\n", where);
        rc = 2;
        break;
      }
      rc = parse_one(&c->phases[i], argc, argv, file, &cl, ph, where, out, err);
      c->n_phases = i + 1;
      if (rc == VL_CONFIG_RUN && c->phases[i].api != c->api) {
        say(err, "--api (in %s): the API is the run's, not a phase's; set it at the top level",
            where);
        rc = 2;
      }
      if (rc == VL_CONFIG_RUN && !c->phases[i].phase_name) {
        c->phases[i].phase_name = vl_xstrdup(where);
        for (char *p = c->phases[i].phase_name; *p; p++)
          if (*p == ' ')
            *p = '-';
      }
    }
  }
  cJSON_Delete(file);
  cJSON_Delete(swept);
  free(cl.dir);
  if (rc == VL_CONFIG_RUN)
    find_facts(c);
  return rc;
}

void vl_config_warn(const vl_config_t *c, FILE *err) {
  int warned = c->n_phases ? 0 : warn_sampling(c, c, err);
  for (int i = 0; i < c->n_phases && !warned; i++)
    warned = warn_sampling(&c->phases[i], c, err);
}

/* Whether urls[j] repeats an earlier entry. */
static int repeated(const vl_config_t *c, int j) {
  for (int m = 0; m < j; m++)
    if (strcmp(c->urls[m], c->urls[j]) == 0)
      return 1;
  return 0;
}

int vl_config_url_index(const vl_config_t *c, int i) {
  int k = 0;
  for (int j = 0; j < c->n_urls; j++) {
    if (repeated(c, j))
      continue;
    if (strcmp(c->urls[j], c->urls[i]) == 0)
      return k;
    k++;
  }
  return 0;
}

int vl_config_distinct_urls(const vl_config_t *c) {
  int k = 0;
  for (int j = 0; j < c->n_urls; j++)
    k += !repeated(c, j);
  return k;
}

const char *vl_config_api_name(vl_api_t a) {
  return a == VL_API_NATIVE ? "native" : "openai";
}

static void add_duration(cJSON *o, const char *name, uint64_t us) {
  cJSON_AddNumberToObject(o, name, (double)us / 1e6);
}

cJSON *vl_config_json(const vl_config_t *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "url", c->url);
  cJSON *urls = cJSON_AddArrayToObject(o, "urls");
  for (int i = 0; i < c->n_urls; i++)
    cJSON_AddItemToArray(urls, cJSON_CreateString(c->urls[i]));
  cJSON *shard = cJSON_AddObjectToObject(o, "shard");
  cJSON_AddNumberToObject(shard, "index", (double)c->shard_i);
  cJSON_AddNumberToObject(shard, "count", (double)c->shard_n);
  cJSON_AddStringToObject(o, "endpoint", c->endpoint);
  cJSON_AddStringToObject(o, "api", vl_config_api_name(c->api));
  if (c->model)
    cJSON_AddStringToObject(o, "model", c->model);
  else
    cJSON_AddNullToObject(o, "model");
  cJSON_AddStringToObject(o, "api_key", c->api_key ? "***" : "");
  cJSON *h = cJSON_AddArrayToObject(o, "headers");
  for (int i = 0; i < c->n_headers; i++) {
    /* Header values may carry credentials too: keep the name only. */
    const char *colon = strchr(c->headers[i], ':');
    char name[256];
    size_t n = VL_MIN((size_t)(colon - c->headers[i]), sizeof(name) - 1);
    memcpy(name, c->headers[i], n);
    snprintf(name + n, sizeof(name) - n, ": ***");
    cJSON_AddItemToArray(h, cJSON_CreateString(name));
  }
  cJSON_AddBoolToObject(o, "http2", c->http2);
  cJSON_AddBoolToObject(o, "insecure", c->insecure);
  cJSON_AddBoolToObject(o, "compressed", c->compressed);
  if (c->cacert)
    cJSON_AddStringToObject(o, "cacert", c->cacert);
  cJSON_AddStringToObject(o, "server", vl_profile_name(c->server));
  cJSON_AddBoolToObject(o, "health_check", c->health_check);
  cJSON_AddBoolToObject(o, "keep_going", c->keep_going);
  if (c->flush_every_n)
    cJSON_AddNumberToObject(o, "flush_every", (double)c->flush_every_n);
  else if (c->flush_every_us)
    add_duration(o, "flush_every_s", c->flush_every_us);
  else
    cJSON_AddNullToObject(o, "flush_every");
  cJSON_AddStringToObject(o, "flush_mode", c->flush_mode == VL_FLUSH_INLINE ? "inline" : "drain");
  cJSON *fe = cJSON_AddArrayToObject(o, "flush_endpoints");
  for (int i = 0; i < VL_MAX_FLUSH_ENDPOINTS && c->flush_endpoints[i]; i++)
    cJSON_AddItemToArray(fe, cJSON_CreateString(c->flush_endpoints[i]));
  cJSON_AddStringToObject(o, "flush_method", c->flush_post ? "POST" : "GET");
  cJSON_AddNumberToObject(o, "flush_retries", c->flush_retries);
  if (c->prompts_file)
    cJSON_AddStringToObject(o, "prompts", c->prompts_file);
  cJSON_AddNumberToObject(o, "max_tokens", c->max_tokens);
  cJSON_AddNumberToObject(o, "temperature", c->temperature);
  cJSON_AddBoolToObject(o, "stream", c->stream);
  cJSON *im = cJSON_AddObjectToObject(o, "images");
  cJSON_AddBoolToObject(im, "enabled", c->images_on);
  if (c->images_dir)
    cJSON_AddStringToObject(im, "dir", c->images_dir);
  else
    cJSON_AddNullToObject(im, "dir");
  char res[1024];
  vl_imagespec_res_format(&c->res, res, sizeof(res));
  cJSON_AddStringToObject(im, "resolution", c->images_dir && !c->res_given ? "as is" : res);
  cJSON_AddStringToObject(im, "format", vl_image_fmt_name(c->image_fmt));
  cJSON_AddNumberToObject(im, "jpeg_quality", c->jpeg_quality);
  cJSON_AddStringToObject(im, "content", vl_image_content_name(c->image_content));
  cJSON_AddNumberToObject(im, "max_pixels", (double)c->max_pixels);
  cJSON_AddNumberToObject(im, "pool_size", c->pool_size);
  cJSON_AddBoolToObject(im, "unique", c->unique_images);
  cJSON_AddNumberToObject(im, "ratio", c->image_ratio);
  cJSON_AddNumberToObject(im, "per_request_min", c->images_lo);
  cJSON_AddNumberToObject(im, "per_request_max", c->images_hi);
  static const char *const places[] = {"before", "after", "random"};
  cJSON_AddStringToObject(im, "placement", places[c->image_placement]);
  if (c->image_token)
    cJSON_AddStringToObject(im, "token", c->image_token);
  cJSON_AddNumberToObject(o, "rate", c->rate);
  cJSON_AddStringToObject(o, "arrival", c->arrival_name);
  if (c->arrival == VL_ARRIVAL_GAMMA)
    cJSON_AddNumberToObject(o, "arrival_cv", c->arrival_cv);
  cJSON_AddNumberToObject(o, "concurrency", c->concurrency);
  cJSON_AddStringToObject(o, "on_full", c->on_full == VL_ONFULL_DROP ? "drop" : "queue");
  cJSON_AddNumberToObject(o, "requests", (double)c->requests);
  add_duration(o, "duration_s", c->duration_us);
  cJSON_AddNumberToObject(o, "warmup", (double)c->warmup);
  cJSON_AddNumberToObject(o, "seed", (double)c->seed);
  add_duration(o, "timeout_s", c->timeout_us);
  add_duration(o, "connect_timeout_s", c->connect_timeout_us);
  add_duration(o, "grace_s", c->grace_us);
  cJSON_AddNumberToObject(o, "max_response", (double)c->max_response);
  if (c->max_error_rate >= 0)
    cJSON_AddNumberToObject(o, "max_error_rate", c->max_error_rate);
  if (c->max_p99_ms >= 0)
    cJSON_AddNumberToObject(o, "max_p99_ms", c->max_p99_ms);
  return o;
}
