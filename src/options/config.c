/* The option table's types at work: applying a value, the defaults, freeing, the effective JSON,
 * --help and the rows for generated documentation. What a row does is in configtable.c. */
#include "config_internal.h"
#include "vlmload/common.h"
#include "vlmload/text.h"
#include "vlmload/trace.h"
#include "vlmload/units.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <uv.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* VL__OPTT_ENUM and VL__OPTT_INT fields that are C enums are stored through an int. */
_Static_assert(sizeof(vl_api_t) == sizeof(int) && sizeof(vl_server_kind_t) == sizeof(int) &&
                   sizeof(vl_flush_mode_t) == sizeof(int) && sizeof(vl_onfull_t) == sizeof(int) &&
                   sizeof(vl_image_fmt_t) == sizeof(int) &&
                   sizeof(vl_image_content_t) == sizeof(int),
               "an enum field is not an int");

const vl__option_t *vl__config_option(const char *name) {
  for (size_t i = 0; i < vl__config_n_options; i++)
    if (strcmp(vl__config_options[i].name, name) == 0)
      return &vl__config_options[i];
  return NULL;
}

int vl__config_given(const vl__optset_t *given, const char *name) {
  const vl__option_t *o = vl__config_option(name);
  return o && given->set[VL__OPTION_INDEX(o)];
}

void vl__config_say(FILE *f, const char *fmt, ...) {
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

int vl__config_bad(vl__optctx_t *x, const char *arg, const char *why) {
  if (arg)
    vl__config_say(x->err, "--%s '%s': %s", x->name, arg, why);
  else
    vl__config_say(x->err, "--%s: %s", x->name, why);
  return 2;
}

void vl__config_set_str(char **dst, const char *v) {
  free(*dst);
  *dst = vl_xstrdup(v);
}

void vl__config_fmt_us(char *out, size_t n, uint64_t us) {
  if (us % 1000000 == 0)
    snprintf(out, n, "%llus", (unsigned long long)(us / 1000000));
  else
    snprintf(out, n, "%llums", (unsigned long long)(us / 1000));
}

/* The index of arg among the space-separated names, or -1. */
static int enum_index(const char *names, const char *arg) {
  size_t len = strlen(arg);
  int i = 0;
  for (const char *p = names; *p; i++) {
    size_t n = strcspn(p, " ");
    if (n == len && strncmp(p, arg, n) == 0)
      return i;
    p += n;
    p += *p == ' ';
  }
  return -1;
}

/* Name i of the space-separated names, into buf. */
static const char *enum_name(const char *names, int i, char *buf, size_t len) {
  const char *p = names;
  for (; i > 0 && *p; i--) {
    p += strcspn(p, " ");
    p += *p == ' ';
  }
  snprintf(buf, len, "%.*s", (int)strcspn(p, " "), p);
  return buf;
}

static int get_int(vl__optctx_t *x, const char *arg, uint64_t min, uint64_t max, uint64_t *out) {
  uint64_t v;
  int rc = vl_units_count(arg, &v);
  if (rc)
    return vl__config_bad(x, arg,
                          rc == VL_ERANGE ? "too large" : "want a whole number (10k, 1M accepted)");
  if (v < min || v > max) {
    char why[96];
    snprintf(why, sizeof(why), "must be between %llu and %llu", (unsigned long long)min,
             (unsigned long long)max);
    return vl__config_bad(x, arg, why);
  }
  *out = v;
  return 0;
}

/* Durations: 0 only where the least is 0, and no less than the least. */
static int get_duration(vl__optctx_t *x, const char *arg, uint64_t least, uint64_t *out) {
  uint64_t v;
  if (vl_units_duration(arg, &v)) {
    char why[128];
    vl_units_duration_why(arg, why, sizeof(why));
    return vl__config_bad(x, arg, why);
  }
  if (least && v == 0)
    return vl__config_bad(x, arg, "must be more than 0");
  if (v < least) {
    char why[48], text[32];
    vl__config_fmt_us(text, sizeof(text), least);
    snprintf(why, sizeof(why), "at least %s", text);
    return vl__config_bad(x, arg, why);
  }
  *out = v;
  return 0;
}

static int get_double(vl__optctx_t *x, const char *arg, double max, double *out) {
  double v;
  if (vl_units_double(arg, &v))
    return vl__config_bad(x, arg, "want a non-negative number");
  if (v > max)
    return vl__config_bad(x, arg, "too large");
  *out = v;
  return 0;
}

/* Applies arg to the row's field as its type says. */
static int apply_typed(vl_config_t *c, const vl__option_t *o, vl__optctx_t *x, const char *arg) {
  void *field = (char *)c + o->off;
  uint64_t u;
  int rc;
  switch (o->type) {
  case VL__OPTT_FLAG:
    *(int *)field = 1;
    return 0;
  case VL__OPTT_INT:
    if ((rc = get_int(x, arg, o->min, o->max, &u)) == 0)
      *(int *)field = (int)u;
    return rc;
  case VL__OPTT_COUNT:
    return get_int(x, arg, o->min, o->max, (uint64_t *)field);
  case VL__OPTT_DURATION:
    return get_duration(x, arg, o->min, (uint64_t *)field);
  case VL__OPTT_DOUBLE:
    return get_double(x, arg, o->dmax, (double *)field);
  case VL__OPTT_FRACTION:
    if (vl_units_double(arg, (double *)field) || *(double *)field > 1)
      return vl__config_bad(x, arg, "want a fraction between 0 and 1");
    return 0;
  case VL__OPTT_SIZE:
    if (vl_units_bytes(arg, (uint64_t *)field) || *(uint64_t *)field < o->min)
      return vl__config_bad(x, arg, o->why);
    return 0;
  case VL__OPTT_STRING:
    vl__config_set_str((char **)field, arg);
    return 0;
  case VL__OPTT_ENUM:
    if ((rc = enum_index(o->values, arg)) < 0)
      return vl__config_bad(x, arg, o->why);
    *(int *)field = rc;
    return 0;
  case VL__OPTT_NONE:
    break;
  }
  return 2;
}

int vl__config_apply(vl_config_t *c, const vl__option_t *o, vl__optctx_t *x, const char *arg) {
  int rc = o->parse ? o->parse(c, x, arg) : apply_typed(c, o, x, arg);
  if (rc == 0 && (o->flags & VL__OPTF_IMAGES))
    c->images_on = 1;
  return rc;
}

void vl_config_defaults(vl_config_t *c) {
  memset(c, 0, sizeof(*c));
  for (size_t i = 0; i < vl__config_n_options; i++) {
    const vl__option_t *o = &vl__config_options[i];
    void *field = (char *)c + o->off;
    switch (o->type) {
    case VL__OPTT_FLAG:
    case VL__OPTT_INT:
    case VL__OPTT_ENUM:
      *(int *)field = (int)o->def.i;
      break;
    case VL__OPTT_COUNT:
    case VL__OPTT_DURATION:
    case VL__OPTT_SIZE:
      *(uint64_t *)field = (uint64_t)o->def.i;
      break;
    case VL__OPTT_DOUBLE:
    case VL__OPTT_FRACTION:
      *(double *)field = o->def.d;
      break;
    case VL__OPTT_STRING:
      *(char **)field = o->def.s ? vl_xstrdup(o->def.s) : NULL;
      break;
    case VL__OPTT_NONE:
      break;
    }
  }
  /* What no row's field holds: the URL list, the shard, the arrival process, the image spec. */
  c->url = vl_xstrdup("http://127.0.0.1:30000");
  c->urls = vl_xmalloc(sizeof(char *));
  c->urls[0] = c->url;
  c->n_urls = 1;
  c->shard_n = 1;
  c->arrival = VL_ARRIVAL_POISSON;
  c->arrival_cv = 1;
  c->arrival_name = "poisson";
  c->ramp_to = -1;
  vl_monitor_spec_init(&c->monitor);
  vl_imagespec_res_default(&c->res);
  c->images_lo = c->images_hi = 1;
  c->flush_retry_delay_us = 200000;
}

void vl_config_free(vl_config_t *c) {
  for (size_t i = 0; i < vl__config_n_options; i++)
    if (vl__config_options[i].type == VL__OPTT_STRING)
      free(*(char **)((char *)c + vl__config_options[i].off));
  for (int i = 0; i < c->n_urls; i++)
    free(c->urls[i]);
  free(c->urls);
  for (int i = 0; i < c->n_headers; i++)
    free(c->headers[i]);
  free(c->headers);
  vl_monitor_spec_free(&c->monitor);
  if (c->trace) {
    vl_trace_free(c->trace);
    free(c->trace);
  }
  free(c->phase_name);
  for (int i = 0; i < c->n_phases; i++)
    vl_config_free(&c->phases[i]);
  free(c->phases);
  for (int i = 0; i < VL_MAX_FLUSH_ENDPOINTS; i++)
    free(c->flush_endpoints[i]);
  memset(c, 0, sizeof(*c));
}

/* Writes the row's field under key as its type says. */
static void json_typed(const vl_config_t *c, const vl__option_t *o, const char *key, cJSON *obj) {
  const void *field = (const char *)c + o->off;
  char name[64];
  double d;
  switch (o->type) {
  case VL__OPTT_FLAG:
    cJSON_AddBoolToObject(obj, key, *(const int *)field);
    break;
  case VL__OPTT_INT:
    cJSON_AddNumberToObject(obj, key, *(const int *)field);
    break;
  case VL__OPTT_COUNT:
  case VL__OPTT_SIZE:
    cJSON_AddNumberToObject(obj, key, (double)*(const uint64_t *)field);
    break;
  case VL__OPTT_DURATION:
    cJSON_AddNumberToObject(obj, key, (double)*(const uint64_t *)field / 1e6);
    break;
  case VL__OPTT_DOUBLE:
  case VL__OPTT_FRACTION:
    d = *(const double *)field;
    if (!(d < 0 && (o->flags & VL__OPTF_JSON_OMIT)))
      cJSON_AddNumberToObject(obj, key, d);
    break;
  case VL__OPTT_STRING:
    if (*(char *const *)field)
      cJSON_AddStringToObject(obj, key, *(char *const *)field);
    else if (o->flags & VL__OPTF_JSON_NULL)
      cJSON_AddNullToObject(obj, key);
    break;
  case VL__OPTT_ENUM:
    cJSON_AddStringToObject(obj, key,
                            enum_name(o->values, *(const int *)field, name, sizeof(name)));
    break;
  case VL__OPTT_NONE:
    break;
  }
}

cJSON *vl_config_json(const vl_config_t *c) {
  cJSON *o = cJSON_CreateObject();
  for (size_t i = 0; i < vl__config_n_options; i++) {
    const vl__option_t *row = &vl__config_options[i];
    if (!row->json)
      continue;
    /* "group.key": key in the object group, made where its first key goes. */
    const char *key = row->json, *dot = strchr(key, '.');
    cJSON *into = o;
    if (dot) {
      char group[32];
      snprintf(group, sizeof(group), "%.*s", (int)(dot - key), key);
      into = cJSON_GetObjectItemCaseSensitive(o, group);
      if (!into)
        into = cJSON_AddObjectToObject(o, group);
      key = dot + 1;
    }
    if (row->to_json)
      row->to_json(c, into);
    else
      json_typed(c, row, key, into);
  }
  return o;
}

int vl_config_option_doc(size_t i, vl_option_doc_t *doc) {
  if (i >= vl__config_n_options)
    return -1;
  const vl__option_t *o = &vl__config_options[i];
  doc->name = o->name;
  doc->metavar = o->metavar;
  doc->help = o->help;
  doc->section = o->section;
  doc->values = o->values;
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
    "  vlmload --rate auto --images corpus/ --flush-every 50 --duration 30m --analyze\n"
    "      a rate the server sustains: a short probe (a closed loop for the latency floor,\n"
    "      then doubling rates until one falls behind, bisected twice) finds the knee, and\n"
    "      the run goes at 70% of it; the probe's requests are in none of its figures\n"
    "  vlmload --url http://127.0.0.1:30000 --rate 50 --duration 2m\n"
    "      50 requests/s, Poisson arrivals, for two minutes\n"
    "  vlmload --rate 0 --concurrency 64 --requests 10k --output s.json\n"
    "      closed loop: 64 requests always in flight, 10,000 in all, JSON summary to s.json\n"
    "  vlmload --rate 20 --stream --max-tokens 256 --timeline t.csv --log-requests r.jsonl\n"
    "      streaming replies: TTFT and inter-token latency; a per-second timeline to join\n"
    "      with a memory monitor, and one line per request\n"
    "  vlmload --rate 50 --image-reuse 0.5 --duration 5m\n"
    "      half of the images repeat one of the last 32 unique images sent (hits on the\n"
    "      server's image cache), the rest are fresh; the summary gives the share repeated\n"
    "  vlmload --rate 20 --stream --slo ttft=500ms,tpot=50ms,e2e=10s --min-goodput 5 \\\n"
    "          --percentiles 50,90,99,99.9\n"
    "      goodput: requests/s meeting every SLO (vLLM's request_goodput) and the share\n"
    "      meeting each; exit 3 under 5/s; p99.9 in the latency table and the JSON\n"
    "  vlmload --server sglang --api native --images corpus/ --flush-every 50 --stream\n"
    "      SGLang's native /generate: the prompt text with the model's image placeholders,\n"
    "      the images in image_data; SGLang's cache flushed after every 50 requests\n"
    "  vlmload --rate 20 --stream --max-tokens 256 --ignore-eos --extra-body '{\"top_k\":20}'\n"
    "      extra fields merged into every request body; replies of exactly 256 tokens\n"
    "  vlmload --rate 20 --input-tokens 1000:200:500:2000 --output-tokens 200 --ignore-eos\n"
    "      synthetic prompts of 500 to 2000 tokens in the server's own tokenizer (asked\n"
    "      through POST /tokenize at start), replies of exactly 200 tokens\n"
    "  vlmload --trace tools/traces/sample.jsonl --trace-speed 2 --stream --output t.json\n"
    "      trace replay: each row sent at its timestamp (twice as fast), its output length as\n"
    "      max_tokens, its images; rows sharing leading hash_ids share a prompt prefix\n"
    "  vlmload --rate 20 --duration 5m --monitor-pid-match 'sglang' --report run.html\n"
    "      one self-contained HTML page: summary, percentiles, per-second charts, memory\n"
    "      plot and verdicts, configuration (no network needed to open it)\n"
    "  vlmload --workers auto --rate 0 --concurrency 256 --requests 100k --output s.json\n"
    "      every core: one worker process per core, each sending its share (as --shard\n"
    "      i/N), one progress line and one summary merged exactly from theirs\n"
    "  vlmload --rate 2 --turns 3 --think-time 2s:poisson --images corpus/ --stream\n"
    "      conversations of three turns, two starting a second: turn k resends the earlier\n"
    "      turns, their images and the server's replies; TTFT per turn shows the prefix cache\n"
    "\n"
    "Latency is measured from each request's intended start (its place on the arrival\n"
    "schedule) and from its actual send; their difference is the send lag. The end of\n"
    "--duration, Ctrl-C or SIGTERM stops admission, gives the requests in flight --grace\n"
    "(30s) before cancelling them, and writes every output; a second signal stops at once.\n"
    "\n"
    "Subcommands:\n"
    "  vlmload analyze TIMELINE.csv [--external MONITOR.csv] [--plot memory.png]\n"
    "          [--report run.html]\n"
    "      leak verdicts from a run's timeline (vlmload analyze --help)\n"
    "  vlmload compare BASELINE RUN... [--fail-if-worse FIGURES] [--report FILE.html]\n"
    "      runs' figures against the baseline's: the change, its interval, better, worse or\n"
    "      same (vlmload compare --help)\n"
    "  vlmload matrix FILE.json [--output-dir DIR] [--report FILE.html] [-- OPTION...]\n"
    "      a list of loads, each against its own freshly started server, compared side by\n"
    "      side on memory (vlmload matrix --help)\n"
    "  vlmload merge OUT.json SHARD.json... [--timeline OUT.csv]\n"
    "      combine the --histograms files of shards exactly (vlmload merge --help)\n"
    "\n"
    "Exit status: 0 run completed, 1 run failed (no request succeeded, or a fatal error),\n"
    "2 bad command line, 3 a --max-* or --min-goodput threshold was crossed or a memory series'\n"
    "verdict is one --fail-on names, 130 interrupted.\n";

const char *vl_config_examples(void) {
  return examples;
}

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

void vl_config_usage(FILE *out) {
  fprintf(out, "Usage: vlmload [OPTION]...\n"
               "   or: vlmload analyze|compare|matrix|merge ARG... (Subcommands, at the end)\n"
               "Drive a vision-language model server (OpenAI chat completions, or SGLang's native\n"
               "/generate) with controlled load.\n");
  for (size_t i = 0; i < vl__config_n_options; i++) {
    const vl__option_t *o = &vl__config_options[i];
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

void vl__config_version(FILE *out) {
  curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
  fprintf(out, "vlmload %s\nlibcurl %s, libuv %s, cJSON %s\n", VL_VERSION, cv->version,
          uv_version_string(), cJSON_Version());
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
