/* Run configuration: one struct, defaults set in one place, parsed from argv.
 *
 * Every option is a row of one table in configtable.c; --help, getopt_long's option array and the
 * effective-configuration JSON are all produced from that table.
 */
#ifndef VLMLOAD_CONFIG_H
#define VLMLOAD_CONFIG_H

#include "vlmload/analyzespec.h"
#include "vlmload/cancel.h"
#include "vlmload/image.h"
#include "vlmload/imagespec.h"
#include "vlmload/lengths.h"
#include "vlmload/monitorspec.h"
#include "vlmload/pace.h"
#include "vlmload/profile.h"
#include "vlmload/slo.h"

#include <stdint.h>
#include <stdio.h>

struct cJSON;
struct vl_trace_s;

typedef enum {
  VL_ONFULL_QUEUE = 0, /* an arrival that finds every slot busy waits for one (keeps its time) */
  VL_ONFULL_DROP,      /* it is counted as dropped and never sent */
} vl_onfull_t;

typedef enum {
  VL_API_OPENAI = 0, /* OpenAI chat completions: messages with image_url parts */
  VL_API_NATIVE,     /* SGLang's /generate: text with image placeholders, image_data */
} vl_api_t;

typedef enum {
  VL_FLUSH_DRAIN = 0, /* stop admitting, wait for in-flight, flush, resume */
  VL_FLUSH_INLINE,    /* flush with requests in flight; refusals are counted */
} vl_flush_mode_t;

#define VL_MAX_FLUSH_ENDPOINTS 4
/* --server-profile-at: the most request counts it takes. */
#define VL_MAX_PROFILE_AT 64

/* --image-reuse: a repeat is drawn uniformly from the last this many unique images sent. */
#define VL_IMAGE_REUSE_WINDOW 32

enum { VL_PLACE_BEFORE = 0, VL_PLACE_AFTER, VL_PLACE_RANDOM };

/* What holds for the run as a whole, from its phases (a run without phases is its own one phase):
 * set once by vl_config_parse, in the run's configuration only. */
typedef struct vl_config_facts_s {
  int flushes;                      /* some phase flushes */
  int unique_images;                /* some phase sends unique images */
  const struct vl_config_s *images; /* the first phase that sends images: its options build the
                                     * run's one pool; NULL when none does */
} vl_config_facts_t;

typedef struct vl_config_s {
  /* Target. */
  char *url;   /* base URL, no trailing slash: the first of urls */
  char **urls; /* every --url in order (a URL given twice gets twice the requests) */
  int n_urls;
  int url_given;             /* --url was given (the first one replaces the default) */
  uint64_t shard_i, shard_n; /* this process is shard i of n (0 of 1 alone) */
  int workers;               /* --workers: processes of the run, one core each (workers.h) */
  char *endpoint;            /* path of the request route */
  int endpoint_given;        /* --endpoint was given (else the API's own route) */
  vl_api_t api;              /* one per run: phases may not change it */
  char *model;               /* NULL: ask /v1/models */
  char *api_key;             /* secret: never printed */
  char **headers;            /* extra "K: V" headers */
  int n_headers;
  int http2;
  int compressed; /* --compressed: ask for every encoding curl decodes */
  int insecure;   /* https: no certificate or host name verification */
  char *cacert;   /* https: CA bundle (PEM) to verify with; NULL: the system's */
  vl_server_kind_t server;
  /* What the server says of itself (llama-server's GET /props), found at start; not an option. */
  vl_profile_props_t props;
  int health_check; /* wait for the server's health route before starting */
  int keep_going;   /* run on when nothing answers or the first requests all fail alike */
  int no_server_metrics; /* do not scrape the server's own counters (counters.h) */
  uint64_t health_timeout_us;
  /* Cache flushes. */
  uint64_t flush_every_n;  /* requests between flushes; 0 = not by count */
  uint64_t flush_every_us; /* time between flushes; 0 = not by time */
  vl_flush_mode_t flush_mode;
  char *flush_endpoints[VL_MAX_FLUSH_ENDPOINTS]; /* NULL-terminated; empty: the profile's */
  int flush_post;                                /* POST (1) or GET (0) */
  int flush_retries;                             /* drain mode: retries of a refused (400) flush */
  uint64_t flush_retry_delay_us;
  uint64_t flush_timeout_us;
  /* Request contents. */
  char *prompts_file;
  int max_tokens;
  double temperature;
  int stream;
  /* Extra request fields (issue 16): --extra-body's merged object as JSON text (NULL: none),
   * --ignore-eos, and --max-completion-tokens (the limit sent under that name). */
  char *extra_body;
  int ignore_eos;
  int max_completion_tokens;
  /* --no-prompt-cache: "cache_prompt": false in every chat body (llama.cpp's per-request switch
   * off its prompt cache). */
  int no_prompt_cache;
  /* Lengths (issue 16): --input-tokens, synthetic prompts of that many tokens each, and
   * --output-tokens, each request's max_tokens (set: given). */
  vl_lengths_dist_t input_tokens, output_tokens;
  /* Images. */
  int images_on;            /* requests may carry images */
  char *images_dir;         /* corpus; NULL: synthetic images */
  int res_given;            /* --resolution was given */
  vl_imagespec_res_t res;   /* synthetic sizes, or the sizes corpus images are resized to */
  vl_image_fmt_t image_fmt; /* VL_IMG_PNG, VL_IMG_JPEG or VL_IMG_MIXED */
  int jpeg_quality;
  vl_image_content_t image_content;
  uint64_t max_pixels;
  int pool_size; /* 0: the pool's default (synthetic) or every usable file (corpus) */
  int unique_images;
  double image_reuse; /* share of images that repeat an earlier one (implies unique_images) */
  double image_ratio; /* fraction of requests with images; negative until given */
  int images_lo, images_hi;
  int image_placement; /* VL_PLACE_* */
  char *image_token;   /* --api native: placeholder per image; NULL: chosen by model name */
  /* Load shape. */
  double rate;   /* arrivals per second; 0 = closed loop */
  int rate_auto; /* --rate auto: rate is 0 until the probe before the run sets it (rateauto.h) */
  vl_arrival_kind_t arrival;
  double arrival_cv;
  const char *arrival_name;
  int concurrency;
  vl_onfull_t on_full;
  /* Multi-turn conversations (--turns, issue 16): turns per conversation (turns_hi 0: none), the
   * think time's mean and process (constant, poisson, or gamma with think_cv), and the
   * conversations in progress at once (0: --concurrency). */
  int turns_lo, turns_hi;
  uint64_t think_us;
  vl_arrival_kind_t think_kind;
  double think_cv;
  int max_conversations;
  /* The load real users make: --cancel (requests closed before they finish, cancel.h), and
   * --probe-rate, an open-loop stream of short text-only requests beside the load, measured apart
   * (arrivals per second; 0: none; their process is --arrival's). */
  vl_cancel_spec_t cancel;
  double probe_rate;
  /* --server-profile-at: the request counts (completed requests, ascending) at which the
   * profile's profiling routes are called; n_profile_at 0: never. */
  uint64_t profile_at[VL_MAX_PROFILE_AT];
  int n_profile_at;
  uint64_t requests;    /* 0 = no count limit */
  uint64_t duration_us; /* 0 = no time limit */
  uint64_t warmup;
  uint64_t seed;
  uint64_t timeout_us;
  uint64_t connect_timeout_us;
  uint64_t grace_us;
  uint64_t max_response; /* bytes of a 2xx reply, streamed or not, before it is an error */
  /* Trace replay (issue 16): --trace's file, read and checked at parse time into `trace` (owned;
   * NULL without --trace), and --trace-speed. With a trace, arrival is VL_ARRIVAL_TRACE, rate the
   * trace's mean rate at that speed, and requests at most its rows. */
  char *trace_file;
  double trace_speed;
  struct vl_trace_s *trace;
  /* Pass/fail thresholds; negative = not set. */
  double max_error_rate; /* failed / finished requests, 0..1 */
  double max_p99_ms;     /* end-to-end p99 of the measured phase */
  /* Goodput: the --slo bounds (run-wide), and --min-goodput in requests/s (negative: not set). */
  vl_slo_t slo;
  double min_goodput;
  /* --percentiles of the latency table and the JSON; n_percentiles 0: the default 50,90,95,99. */
  double percentiles[VL_SLO_MAX_PERCENTILES];
  int n_percentiles;
  /* Outputs. */
  int quiet;
  int progress; /* -1 auto (stderr is a TTY), 0 off, 1 on */
  char *output;
  char *timeline;
  char *log_requests;
  char *histograms;           /* mergeable run record (counters and histograms) */
  char *metrics_listen;       /* --metrics-listen ADDR:PORT: the figures for Prometheus */
  uint64_t metrics_linger_us; /* --metrics-linger: how long the endpoint stays after the end */
  /* Memory. */
  vl_monitor_spec_t monitor;
  uint64_t sample_every_us; /* timeline rows and memory samples */
  char *samples;            /* every memory sample, one CSV row each */
  int timeline_jsonl;       /* timeline rows as JSON lines instead of CSV */
  int analyze;              /* leak analysis of the run's memory series at the end */
  char *plot;               /* PNG of memory over requests */
  char *gnuplot;            /* --gnuplot: the program --plot runs; NULL: gnuplot on PATH */
  char *report;             /* --report: a self-contained HTML page of the run (htmlreport.h) */
  int dry_run;              /* print the plan and exit */
  /* What growth the analysis counts as material (analyzespec.h: --min-growth as a fraction,
   * --min-growth-mb, --min-slope in MB per 1000 requests), and --fail-on: the verdicts, a mask of
   * (1u << vl_verdict_t), that fail the run with exit status 3 (0: none). */
  double min_growth_frac, min_growth_mb, min_slope;
  unsigned fail_on;
  char *expect_cap; /* --expect-cap: SERIES=SIZE,... the caches' caps the analysis judges by */
  /* Phases: run one after another, each a whole configuration of its own (the file's and the
   * command line's options with the phase's keys on top). Only the run's own outputs, servers and
   * connections come from the top level. */
  struct vl_config_s *phases;
  int n_phases;
  vl_config_facts_t run; /* the run's configuration only */
  char *phase_name;
  double ramp_to;      /* rate at the end of the phase, from --rate at its start; negative: none */
  char *sweep;         /* --sweep KEY=FROM:TO:STEP: one phase per value */
  char *dump_requests; /* write request bodies and a replay script to this directory, and exit */
} vl_config_t;

/* Outcome of parsing: run, or exit at once with a status (after --help or --version, or an error
 * already printed). */
enum { VL_CONFIG_RUN = -1 };

/* Sets every default. */
void vl_config_defaults(vl_config_t *c);

/* Parses argv into c (defaults first). Prints --help/--version to out, and a one-line error naming
 * the option to err. Returns VL_CONFIG_RUN to go on, or the exit status to leave with (0 after
 * --help/--version, 2 for bad input). */
int vl_config_parse(vl_config_t *c, int argc, char **argv, FILE *out, FILE *err);

/* The fewest memory samples a whole run should take for a trend (vl_config_warn). */
#define VL_CONFIG_MIN_SAMPLES 20

/* Warnings about a configuration that parses but will not measure what it is meant to (fewer
 * than 3 memory samples between flushes; fewer than VL_CONFIG_MIN_SAMPLES in the whole run), one
 * line each on err. Parsing itself says nothing on success. */
void vl_config_warn(const vl_config_t *c, FILE *err);

/* Frees what parse allocated. */
void vl_config_free(vl_config_t *c);

/* Whether --no-prompt-cache is refused for c's server: a kind known to have no such switch (SGLang,
 * vLLM). When it is, why (one line, no final newline) goes to why. */
int vl_config_no_prompt_cache_refused(const vl_config_t *c, char *why, size_t n);

/* A --config object (or a phase of one) written out to be read from another folder: every
 * relative path it gives to an option that takes a path (a program only when named by a path),
 * at the top and in "phases", is joined to dir, so that it names what it named when the object
 * was read from dir. Unknown keys and other values are left as they are. */
void vl_config_rebase_paths(struct cJSON *obj, const char *dir);

/* Checks each key of obj as a --config file's: an option of that name, and a value it takes;
 * where names obj in the error ("'m.json' cell 'a'"). Nothing between options is checked (a
 * full parse does that). Returns 0, or 2 after one line on err. */
int vl_config_check_keys(const struct cJSON *obj, const char *where, FILE *err);

/* The effective options as a JSON object, the API key masked. Caller owns the result. */
struct cJSON *vl_config_json(const vl_config_t *c);

/* "openai" or "native". */
const char *vl_config_api_name(vl_api_t a);

/* One row of the option table, for generated documentation (man page, completion, README). */
typedef struct vl_option_doc_s {
  const char *name;    /* without the leading dashes */
  const char *metavar; /* NULL for a flag */
  const char *help;
  const char *section; /* set on the first option of a section */
  const char *values;  /* the fixed set of values it takes, space-separated (a value ending in ':'
                          is a prefix, as gamma:CV), or NULL */
} vl_option_doc_t;

/* Fills doc with row i of the option table. Returns 0, or -1 past the last row. */
int vl_config_option_doc(size_t i, vl_option_doc_t *doc);

/* The worked examples and notes printed at the end of --help. */
const char *vl_config_examples(void);

/* Number of distinct URLs in urls, and the index in that distinct list of urls[i]. */
int vl_config_distinct_urls(const vl_config_t *c);
int vl_config_url_index(const vl_config_t *c, int i);

/* Prints the help text. */
void vl_config_usage(FILE *out);

/* The word of words (NULL-terminated) nearest to s, as a mistyped option name is judged (a few
 * letters added, dropped, changed or swapped), or NULL when none is near enough to be what s
 * meant. */
const char *vl_config_nearest_word(const char *s, const char *const *words);

/* --turns: the bytes of history kept for one reply (its content JSON-escaped): 16 per token of
 * --max-tokens and 256 more, at most --max-response. A reply whose content is longer ends its
 * conversation (counted as too long). The histories of all conversations together may take at most
 * VL_CONFIG_HISTORY_BUDGET. */
#define VL_CONFIG_REPLY_BYTES_PER_TOKEN 16
#define VL_CONFIG_HISTORY_BUDGET        ((uint64_t)1 << 30)
static inline uint64_t vl_config_reply_room(const vl_config_t *c) {
  uint64_t room = (uint64_t)c->max_tokens * VL_CONFIG_REPLY_BYTES_PER_TOKEN + 256;
  return room < c->max_response ? room : c->max_response;
}

#endif
