/* The option table: one row per option, in --help order, and the functions of the rows whose
 * values are more than their type parses (lists, URLs, shards, image specs) or whose JSON is more
 * than their field. Everything else about an option is served by its row's type in config.c. */
#include "config_internal.h"
#include "vlmload/body.h"
#include "vlmload/common.h"
#include "vlmload/profile.h"
#include "vlmload/units.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The first --url replaces the default; later ones add servers. */
static int parse_url(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  const char *why = check_url(arg);
  if (why)
    return vl__config_bad(x, arg, why);
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
  return 0;
}

/* The target: the first URL, every URL, and this process's shard. */
static void json_url(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "url", c->url);
  cJSON *urls = cJSON_AddArrayToObject(o, "urls");
  for (int i = 0; i < c->n_urls; i++)
    cJSON_AddItemToArray(urls, cJSON_CreateString(c->urls[i]));
  cJSON *shard = cJSON_AddObjectToObject(o, "shard");
  cJSON_AddNumberToObject(shard, "index", (double)c->shard_i);
  cJSON_AddNumberToObject(shard, "count", (double)c->shard_n);
}

static int parse_shard(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  const char *slash = strchr(arg, '/');
  char left[32];
  uint64_t i, n;
  if (!slash || (size_t)(slash - arg) >= sizeof(left) || vl_units_count(slash + 1, &n) || n == 0 ||
      n > 100000)
    return vl__config_bad(x, arg, "want I/N or auto/N with 1 <= N <= 100000");
  memcpy(left, arg, (size_t)(slash - arg));
  left[slash - arg] = '\0';
  if (strcmp(left, "auto") == 0) {
    const char *env = getenv("JOB_COMPLETION_INDEX");
    if (!env || vl_units_count(env, &i))
      return vl__config_bad(x, arg,
                            "auto needs JOB_COMPLETION_INDEX set to a number (Kubernetes Indexed "
                            "Jobs set it)");
  } else if (vl_units_count(left, &i)) {
    return vl__config_bad(x, arg, "want I/N or auto/N");
  }
  if (i >= n)
    return vl__config_bad(x, arg, "the shard index must be below N");
  c->shard_i = i;
  c->shard_n = n;
  return 0;
}

static int parse_endpoint(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (arg[0] != '/' || strpbrk(arg, " \t\r\n"))
    return vl__config_bad(x, arg, "a path starting with '/', without spaces");
  vl__config_set_str(&c->endpoint, arg);
  c->endpoint_given = 1;
  return 0;
}

static int parse_model(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (!*arg)
    return vl__config_bad(x, NULL, "empty model name");
  vl__config_set_str(&c->model, arg);
  return 0;
}

static int parse_api_key(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (!*arg || strpbrk(arg, "\r\n"))
    return vl__config_bad(x, NULL, "empty or multi-line key");
  vl__config_set_str(&c->api_key, arg);
  return 0;
}

/* Masked: whether a key is set, never the key. */
static void json_api_key(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "api_key", c->api_key ? "***" : "");
}

static int parse_header(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  const char *colon = strchr(arg, ':');
  /* Not echoed: header values carry credentials as often as the API key does. */
  if (!colon || colon == arg || strpbrk(arg, "\r\n"))
    return vl__config_bad(x, NULL, "want 'Name: value' on one line");
  c->headers = vl_xrealloc(c->headers, sizeof(char *) * (size_t)(c->n_headers + 1));
  c->headers[c->n_headers++] = vl_xstrdup(arg);
  return 0;
}

static void json_headers(const vl_config_t *c, cJSON *o) {
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
}

static int parse_cacert(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  /* Checked here: a typo must not turn into a TLS failure on every request. */
  if (access(arg, R_OK) != 0)
    return vl__config_bad(x, arg, strerror(errno));
  vl__config_set_str(&c->cacert, arg);
  return 0;
}

static int parse_server(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_profile_by_name(arg, &c->server) != 0)
    return vl__config_bad(x, arg, "want sglang, vllm, openai or auto");
  return 0;
}

static void json_server(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "server", vl_profile_name(c->server));
}

static int parse_flush_every(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  uint64_t u;
  c->flush_every_n = c->flush_every_us = 0;
  if (vl_units_count(arg, &u) == 0) {
    if (u == 0)
      return vl__config_bad(x, arg, "must be more than 0");
    c->flush_every_n = u;
  } else if (vl_units_duration(arg, &u) == 0 && u >= 1000) {
    c->flush_every_us = u;
  } else {
    return vl__config_bad(x, arg, "want a request count (50) or a duration of at least 1ms (30s)");
  }
  return 0;
}

/* A count as "flush_every", a time as "flush_every_s", or null. */
static void json_flush_every(const vl_config_t *c, cJSON *o) {
  if (c->flush_every_n)
    cJSON_AddNumberToObject(o, "flush_every", (double)c->flush_every_n);
  else if (c->flush_every_us)
    cJSON_AddNumberToObject(o, "flush_every_s", (double)c->flush_every_us / 1e6);
  else
    cJSON_AddNullToObject(o, "flush_every");
}

static int parse_flush_endpoint(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  for (int i = 0; i < VL_MAX_FLUSH_ENDPOINTS; i++) {
    free(c->flush_endpoints[i]);
    c->flush_endpoints[i] = NULL;
  }
  char *copy = vl_xstrdup(arg), *save = NULL;
  int n = 0;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (tok[0] != '/' || strpbrk(tok, " \t\r\n") || n == VL_MAX_FLUSH_ENDPOINTS) {
      free(copy);
      return vl__config_bad(x, arg, "want up to 4 paths starting with '/', separated by commas");
    }
    c->flush_endpoints[n++] = vl_xstrdup(tok);
  }
  free(copy);
  if (n == 0)
    return vl__config_bad(x, arg, "want a path starting with '/'");
  return 0;
}

static void json_flush_endpoints(const vl_config_t *c, cJSON *o) {
  cJSON *fe = cJSON_AddArrayToObject(o, "flush_endpoints");
  for (int i = 0; i < VL_MAX_FLUSH_ENDPOINTS && c->flush_endpoints[i]; i++)
    cJSON_AddItemToArray(fe, cJSON_CreateString(c->flush_endpoints[i]));
}

/* The method's names, in either case (the JSON writes them as its values say). */
static int parse_flush_method(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (strcmp(arg, "GET") == 0 || strcmp(arg, "get") == 0)
    c->flush_post = 0;
  else if (strcmp(arg, "POST") == 0 || strcmp(arg, "post") == 0)
    c->flush_post = 1;
  else
    return vl__config_bad(x, arg, "want GET or POST");
  return 0;
}

/* Whether requests carry images, and the corpus (null: synthetic). */
static void json_images(const vl_config_t *c, cJSON *o) {
  cJSON_AddBoolToObject(o, "enabled", c->images_on);
  if (c->images_dir)
    cJSON_AddStringToObject(o, "dir", c->images_dir);
  else
    cJSON_AddNullToObject(o, "dir");
}

static int parse_resolution(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char reason[160];
  if (vl_imagespec_res_parse(&c->res, arg, reason, sizeof(reason)))
    return vl__config_bad(x, arg, reason);
  c->res_given = 1;
  return 0;
}

/* Corpus files that no --resolution resizes are sent "as is". */
static void json_resolution(const vl_config_t *c, cJSON *o) {
  char res[1024];
  vl_imagespec_res_format(&c->res, res, sizeof(res));
  cJSON_AddStringToObject(o, "resolution", c->images_dir && !c->res_given ? "as is" : res);
}

static int parse_image_format(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_imagespec_format(arg, &c->image_fmt))
    return vl__config_bad(x, arg, "want png, jpeg or mixed");
  return 0;
}

static void json_image_format(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "format", vl_image_fmt_name(c->image_fmt));
}

static int parse_image_content(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_imagespec_content(arg, &c->image_content))
    return vl__config_bad(x, arg, "want photo-like, noise, gradient, shapes or mixed");
  return 0;
}

static void json_image_content(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "content", vl_image_content_name(c->image_content));
}

/* A ratio of 0 turns images off, any other turns them on. */
static int parse_image_ratio(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_units_double(arg, &c->image_ratio) || c->image_ratio > 1)
    return vl__config_bad(x, arg, "want a fraction between 0 and 1");
  c->images_on = c->image_ratio > 0;
  return 0;
}

static int parse_images_per_request(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char reason[160];
  if (vl_imagespec_count(arg, 1, VL_MAX_IMAGES, &c->images_lo, &c->images_hi, reason,
                         sizeof(reason)))
    return vl__config_bad(x, arg, reason);
  return 0;
}

static void json_images_per_request(const vl_config_t *c, cJSON *o) {
  cJSON_AddNumberToObject(o, "per_request_min", c->images_lo);
  cJSON_AddNumberToObject(o, "per_request_max", c->images_hi);
}

static int parse_image_token(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  /* Newlines and tabs may separate a placeholder from the text; no other control character
   * (U+0001 marks where images go in a request body). */
  for (const char *p = arg; *p; p++)
    if ((unsigned char)*p < 0x20 && *p != '\n' && *p != '\t')
      return vl__config_bad(x, NULL, "a control character other than a newline or a tab");
  if (!*arg)
    return vl__config_bad(x, NULL, "empty placeholder");
  vl__config_set_str(&c->image_token, arg);
  return 0;
}

static int parse_arrival(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_pace_parse(arg, &c->arrival, &c->arrival_cv))
    return vl__config_bad(x, arg, "want constant, poisson or gamma:CV with 0 < CV <= 100");
  c->arrival_name = c->arrival == VL_ARRIVAL_CONSTANT  ? "constant"
                    : c->arrival == VL_ARRIVAL_POISSON ? "poisson"
                                                       : "gamma";
  return 0;
}

/* The process's name ("closed" for a closed loop), and a gamma process's CV. */
static void json_arrival(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "arrival", c->arrival_name);
  if (c->arrival == VL_ARRIVAL_GAMMA)
    cJSON_AddNumberToObject(o, "arrival_cv", c->arrival_cv);
}

/* Adds a monitor target with add; a --monitor-pid's process must be running now. */
static int add_monitor(vl_config_t *c, vl__optctx_t *x, const char *arg,
                       int (*add)(vl_monitor_spec_t *, const char *, char *, size_t)) {
  char reason[200];
  if (add(&c->monitor, arg, reason, sizeof(reason))) {
    vl__config_say(x->err, "%s", reason); /* the reason names the option and its value */
    return 2;
  }
  /* Checked now, before any load: a mistyped PID must not cost a run. */
  pid_t pid = add == vl_monitor_spec_add_pid ? c->monitor.pids[c->monitor.n_pids - 1].pid : 0;
  if (pid && kill(pid, 0) != 0 && errno == ESRCH) {
    vl__config_say(x->err,
                   "--monitor-pid %s: no process %s is running (pgrep -f finds one by its command "
                   "line; --monitor-pid-match follows one across restarts)",
                   arg, arg + (strchr(arg, '=') ? strchr(arg, '=') - arg + 1 : 0));
    return 2;
  }
  return 0;
}

static int parse_monitor_pid(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return add_monitor(c, x, arg, vl_monitor_spec_add_pid);
}

static int parse_monitor_match(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return add_monitor(c, x, arg, vl_monitor_spec_add_match);
}

static int parse_monitor_prom(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return add_monitor(c, x, arg, vl_monitor_spec_add_prom);
}

static int parse_monitor_cmd(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return add_monitor(c, x, arg, vl_monitor_spec_add_cmd);
}

static int parse_no_progress(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  (void)x, (void)arg;
  c->progress = 0;
  return 0;
}

/* Goodput: --slo and --percentiles (see slo.h). */
static int parse_slo(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char why[160];
  if (vl_slo_parse(arg, &c->slo, why, sizeof(why)))
    return vl__config_bad(x, arg, why);
  return 0;
}

static void json_slo(const vl_config_t *c, cJSON *o) {
  char spec[128];
  vl_slo_format(&c->slo, spec, sizeof(spec));
  if (spec[0])
    cJSON_AddStringToObject(o, "slo", spec);
}

static int parse_percentiles(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char why[160];
  if (vl_slo_parse_percentiles(arg, c->percentiles, &c->n_percentiles, why, sizeof(why)))
    return vl__config_bad(x, arg, why);
  return 0;
}

static void json_percentiles(const vl_config_t *c, cJSON *o) {
  if (!c->n_percentiles)
    return;
  /* As given ("50,99.9"), so that a --config file takes it back. */
  char list[VL_SLO_MAX_PERCENTILES * 24] = "", name[24];
  for (int i = 0; i < c->n_percentiles; i++) {
    vl_slo_pct_name(c->percentiles[i], name, sizeof(name));
    if (i)
      strcat(list, ",");
    strcat(list, name);
  }
  cJSON_AddStringToObject(o, "percentiles", list);
}

static int parse_help(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  (void)c, (void)arg;
  vl_config_usage(x->out);
  return 0;
}

static int parse_version(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  (void)c, (void)arg;
  vl__config_version(x->out);
  return 0;
}

/* A row's type and field; its bounds; its key in the effective JSON. */
#define FIELD(t, f)   .type = t, .off = offsetof(vl_config_t, f)
#define RANGE(lo, hi) .min = lo, .max = hi
#define JSON(key)     .json = key

/* The one list of options. --help prints it in this order; the effective JSON writes the rows
 * with a key in the same order. */
const vl__option_t vl__config_options[] = {
    {.name = "url",
     .metavar = "URL",
     .help = "server base URL (default http://127.0.0.1:30000); repeat for several servers, taken "
             "in turn (a URL given twice gets twice the share)",
     .section = "Target",
     .flags = VL__OPTF_LIST,
     JSON("url"),
     .parse = parse_url,
     .to_json = json_url},
    {.name = "endpoint",
     .metavar = "PATH",
     .help = "request route (default /v1/chat/completions; /generate with --api native)",
     FIELD(VL__OPTT_STRING, endpoint),
     .def.s = "/v1/chat/completions",
     JSON("endpoint"),
     .parse = parse_endpoint},
    {.name = "api",
     .metavar = "API",
     .help = "openai (default): OpenAI chat completions | native: SGLang's /generate, the prompt "
             "text with the model's image placeholders and the images in image_data (implies "
             "--server sglang)",
     FIELD(VL__OPTT_ENUM, api),
     .values = "openai native",
     .why = "want openai or native",
     JSON("api")},
    {.name = "model",
     .metavar = "NAME",
     .help = "model name (default: first id from GET /v1/models)",
     .flags = VL__OPTF_JSON_NULL,
     FIELD(VL__OPTT_STRING, model),
     JSON("model"),
     .parse = parse_model},
    {.name = "api-key",
     .metavar = "KEY",
     .help = "bearer token (default $OPENAI_API_KEY; never printed)",
     FIELD(VL__OPTT_STRING, api_key),
     JSON("api_key"),
     .parse = parse_api_key,
     .to_json = json_api_key},
    {.name = "header",
     .metavar = "'K: V'",
     .help = "extra request header (repeatable); an Accept-Encoding header's replies are decoded",
     .flags = VL__OPTF_LIST,
     JSON("headers"),
     .parse = parse_header,
     .to_json = json_headers},
    {.name = "compressed",
     .help = "ask for compressed replies (every encoding curl decodes: gzip, deflate, br, zstd) "
             "and decode them",
     FIELD(VL__OPTT_FLAG, compressed),
     JSON("compressed")},
    {.name = "http2",
     .help = "speak HTTP/2 (h2c prior knowledge on http://)",
     FIELD(VL__OPTT_FLAG, http2),
     JSON("http2")},
    {.name = "cacert",
     .metavar = "FILE",
     .help = "https: trust the CA certificates in FILE (PEM) instead of the system's",
     .flags = VL__OPTF_PATH | VL__OPTF_JSON_OMIT,
     FIELD(VL__OPTT_STRING, cacert),
     JSON("cacert"),
     .parse = parse_cacert},
    {.name = "insecure",
     .help =
         "https: do not verify the server's certificate or name (verification is on by default)",
     FIELD(VL__OPTT_FLAG, insecure),
     JSON("insecure")},
    {.name = "server",
     .metavar = "KIND",
     .help = "sglang | vllm | openai | auto: the flush routes to use (default auto, with "
             "--flush-every: the owned_by of GET /v1/models, then GET /get_server_info or "
             "/server_info for SGLang, then GET /version for vLLM)",
     FIELD(VL__OPTT_INT, server),
     .values = "auto sglang vllm openai",
     JSON("server"),
     .parse = parse_server,
     .to_json = json_server},
    {.name = "health-check",
     .help = "wait until the server answers its health route before starting",
     FIELD(VL__OPTT_FLAG, health_check),
     JSON("health_check")},
    {.name = "health-timeout",
     .metavar = "DUR",
     .help = "give up waiting for health after DUR (default 5m)",
     FIELD(VL__OPTT_DURATION, health_timeout_us),
     .min = 1,
     .def.i = 300ll * 1000000},
    {.name = "keep-going",
     .help = "run even when nothing answers at start or the first requests all fail the same way "
             "(by default the run stops within seconds, quoting the server's answer)",
     FIELD(VL__OPTT_FLAG, keep_going),
     JSON("keep_going")},
    {.name = "flush-every",
     .metavar = "N|DUR",
     .help = "flush the server's caches after every N requests, or every DUR (30s)",
     .section = "Cache flushes",
     JSON("flush_every"),
     .parse = parse_flush_every,
     .to_json = json_flush_every},
    {.name = "flush-mode",
     .metavar = "MODE",
     .help = "drain (default): stop admitting, wait for every request in flight, flush, resume, "
             "with the schedule moved back by the pause | inline: flush while requests run; "
             "refusals are counted",
     FIELD(VL__OPTT_ENUM, flush_mode),
     .values = "drain inline",
     .why = "want drain or inline",
     JSON("flush_mode")},
    {.name = "flush-endpoint",
     .metavar = "PATH[,PATH]",
     .help = "flush route(s), called in order (default: sglang /flush_cache; vllm "
             "/reset_prefix_cache,/reset_mm_cache)",
     JSON("flush_endpoints"),
     .parse = parse_flush_endpoint,
     .to_json = json_flush_endpoints},
    {.name = "flush-method",
     .metavar = "METHOD",
     .help = "GET or POST (default POST)",
     FIELD(VL__OPTT_ENUM, flush_post),
     .def.i = 1,
     .values = "GET POST",
     JSON("flush_method"),
     .parse = parse_flush_method},
    {.name = "flush-retries",
     .metavar = "N",
     .help = "drain mode: retries of a flush the server refuses as busy (HTTP 400), 200 ms apart "
             "(default 10)",
     FIELD(VL__OPTT_INT, flush_retries),
     RANGE(0, 10000),
     .def.i = 10,
     JSON("flush_retries")},
    {.name = "flush-timeout",
     .metavar = "DUR",
     .help = "timeout of one flush call (default 60s)",
     FIELD(VL__OPTT_DURATION, flush_timeout_us),
     .min = 1,
     .def.i = 60ll * 1000000},
    {.name = "prompts",
     .metavar = "FILE",
     .help = "prompts, one per line (default: a built-in varied set)",
     .section = "Requests",
     .flags = VL__OPTF_PATH | VL__OPTF_JSON_OMIT,
     FIELD(VL__OPTT_STRING, prompts_file),
     JSON("prompts")},
    {.name = "max-tokens",
     .metavar = "N",
     .help = "max_tokens of each request (default 128)",
     FIELD(VL__OPTT_INT, max_tokens),
     RANGE(1, 1000000),
     .def.i = 128,
     JSON("max_tokens")},
    {.name = "temperature",
     .metavar = "F",
     .help = "sampling temperature (default 0)",
     FIELD(VL__OPTT_DOUBLE, temperature),
     .dmax = 10,
     JSON("temperature")},
    {.name = "stream",
     .help = "stream replies (SSE); gives TTFT and inter-token latency",
     FIELD(VL__OPTT_FLAG, stream),
     JSON("stream")},
    {.name = "images",
     .metavar = "DIR",
     .help = "send images from this directory: every PNG and JPEG under it, found by content (a "
             "file also works); without it, images are synthetic",
     .section = "Images",
     .flags = VL__OPTF_PATH | VL__OPTF_IMAGES,
     FIELD(VL__OPTT_STRING, images_dir),
     JSON("images.dir"),
     .to_json = json_images},
    {.name = "resolution",
     .metavar = "SPEC",
     .help = "image sizes: 640x480,1280x720 | weighted 1280x720:3,4k:1 | range 224x224-2048x2048; "
             "named 360p 720p 1080p 1440p 4k (default: 11 sizes from 224x224 to 1920x1080; with "
             "--images, resize the files to these sizes)",
     .flags = VL__OPTF_IMAGES,
     JSON("images.resolution"),
     .parse = parse_resolution,
     .to_json = json_resolution},
    {.name = "image-format",
     .metavar = "FMT",
     .help = "png | jpeg | mixed (default mixed)",
     .flags = VL__OPTF_IMAGES,
     FIELD(VL__OPTT_INT, image_fmt),
     .def.i = VL_IMG_MIXED,
     .values = "png jpeg mixed",
     JSON("images.format"),
     .parse = parse_image_format,
     .to_json = json_image_format},
    {.name = "jpeg-quality",
     .metavar = "Q",
     .help = "JPEG quality 1-100 (default 90)",
     FIELD(VL__OPTT_INT, jpeg_quality),
     RANGE(1, 100),
     .def.i = VL_IMAGE_JPEG_QUALITY,
     JSON("images.jpeg_quality")},
    {.name = "image-content",
     .metavar = "KIND",
     .help = "synthetic content: photo-like | noise | gradient | shapes | mixed (default mixed)",
     .flags = VL__OPTF_IMAGES,
     FIELD(VL__OPTT_INT, image_content),
     .def.i = VL_CONTENT_MIXED,
     .values = "photo-like noise gradient shapes mixed",
     JSON("images.content"),
     .parse = parse_image_content,
     .to_json = json_image_content},
    {.name = "max-pixels",
     .metavar = "N",
     .help = "skip corpus images larger than N pixels (decompression bombs; default 100M)",
     FIELD(VL__OPTT_COUNT, max_pixels),
     RANGE(1, 1ull << 40),
     .def.i = 100000000,
     JSON("images.max_pixels")},
    {.name = "pool-size",
     .metavar = "N",
     .help = "images in the pool: synthetic ones made (default 32), or the most corpus files used "
             "(default all)",
     .flags = VL__OPTF_IMAGES,
     FIELD(VL__OPTT_INT, pool_size),
     RANGE(1, 1000000),
     JSON("images.pool_size")},
    {.name = "unique-images",
     .help = "make every image sent differ in its decoded pixels (servers cache images by "
             "content): pool images stamped and re-encoded ahead of the schedule on worker threads",
     .flags = VL__OPTF_IMAGES,
     FIELD(VL__OPTT_FLAG, unique_images),
     JSON("images.unique")},
    {.name = "image-ratio",
     .metavar = "F",
     .help = "fraction of requests that carry images (default 1 when any image option is given, "
             "else 0)",
     FIELD(VL__OPTT_FRACTION, image_ratio),
     .def.d = -1,
     JSON("images.ratio"),
     .parse = parse_image_ratio},
    {.name = "images-per-request",
     .metavar = "N|A-B",
     .help = "images in an image request, or a uniform range (default 1; at most 16)",
     .flags = VL__OPTF_IMAGES,
     JSON("images.per_request"),
     .parse = parse_images_per_request,
     .to_json = json_images_per_request},
    {.name = "image-placement",
     .metavar = "WHERE",
     .help = "image parts before or after the text part: before | after | random (default before)",
     FIELD(VL__OPTT_ENUM, image_placement),
     .values = "before after random",
     .why = "want before, after or random",
     JSON("images.placement")},
    {.name = "image-token",
     .metavar = "TEXT",
     .help = "--api native: the placeholder put in the prompt text once per image (default by "
             "model name: Qwen <|vision_start|><|image_pad|><|vision_end|>, LLaVA <image>, Gemma 3 "
             "<start_of_image>, Llama <|image|>, Pixtral [IMG]; any other model Qwen's)",
     .flags = VL__OPTF_JSON_OMIT,
     FIELD(VL__OPTT_STRING, image_token),
     JSON("images.token"),
     .parse = parse_image_token},
    {.name = "rate",
     .metavar = "R",
     .help = "arrivals per second, open loop (default 10); 0 = closed loop as fast as "
             "--concurrency allows",
     .section = "Load",
     FIELD(VL__OPTT_DOUBLE, rate),
     .dmax = 10e6,
     .def.d = 10,
     JSON("rate")},
    {.name = "arrival",
     .metavar = "KIND",
     .help = "constant | poisson | gamma:CV (default poisson)",
     .values = "constant poisson gamma:",
     JSON("arrival"),
     .parse = parse_arrival,
     .to_json = json_arrival},
    {.name = "concurrency",
     .metavar = "N",
     .help = "most requests in flight (default 256)",
     FIELD(VL__OPTT_INT, concurrency),
     RANGE(1, 1000000),
     .def.i = 256,
     JSON("concurrency")},
    {.name = "on-full",
     .metavar = "MODE",
     .help = "an arrival finding all N busy: queue (wait, keep its time; default) | drop",
     FIELD(VL__OPTT_ENUM, on_full),
     .values = "queue drop",
     .why = "want queue or drop",
     JSON("on_full")},
    {.name = "requests",
     .metavar = "N",
     .help = "stop after N arrivals (10k, 1M accepted)",
     FIELD(VL__OPTT_COUNT, requests),
     RANGE(1, UINT64_MAX / 2),
     JSON("requests")},
    {.name = "duration",
     .metavar = "DUR",
     .help = "stop admitting after DUR (ms s m h; default 30s when --requests is not given)",
     FIELD(VL__OPTT_DURATION, duration_us),
     .min = 1,
     JSON("duration_s")},
    {.name = "warmup",
     .metavar = "N",
     .help = "first N requests left out of the statistics (default 0)",
     FIELD(VL__OPTT_COUNT, warmup),
     RANGE(0, UINT64_MAX / 2),
     JSON("warmup")},
    {.name = "seed",
     .metavar = "N",
     .help = "seed of every random choice; same seed, same stream (default 1)",
     FIELD(VL__OPTT_COUNT, seed),
     RANGE(0, UINT64_MAX / 2),
     .def.i = 1,
     JSON("seed")},
    {.name = "timeout",
     .metavar = "DUR",
     .help = "whole-request timeout (default 600s)",
     FIELD(VL__OPTT_DURATION, timeout_us),
     .min = 1,
     .def.i = 600ll * 1000000,
     JSON("timeout_s")},
    {.name = "connect-timeout",
     .metavar = "DUR",
     .help = "connection timeout (default 10s)",
     FIELD(VL__OPTT_DURATION, connect_timeout_us),
     .min = 1,
     .def.i = 10ll * 1000000,
     JSON("connect_timeout_s")},
    {.name = "grace",
     .metavar = "DUR",
     .help = "after Ctrl-C, wait this long for in-flight (default 5s)",
     FIELD(VL__OPTT_DURATION, grace_us),
     .def.i = 5ll * 1000000,
     JSON("grace_s")},
    {.name = "max-response",
     .metavar = "SIZE",
     .help = "largest 2xx reply accepted, streamed or not, in bytes (default 16MiB); larger is an "
             "error",
     FIELD(VL__OPTT_SIZE, max_response),
     .min = 1024,
     .def.i = 16ll << 20,
     .why = "want a size of at least 1KiB, such as 16MiB",
     JSON("max_response")},
    {.name = "shard",
     .metavar = "I/N",
     .help = "be shard I of N processes (auto/N: I from $JOB_COMPLETION_INDEX): take every N-th "
             "request of the one stream all shards share, so together they send exactly what one "
             "process would (a drained --flush-every needs one process; shards flush only with "
             "--flush-mode inline)",
     .parse = parse_shard},
    {.name = "monitor-pid",
     .metavar = "[NAME=]PID",
     .help = "sample this process's memory (VmRSS, VmHWM) into the timeline (repeatable)",
     .section = "Memory",
     .flags = VL__OPTF_LIST,
     .parse = parse_monitor_pid},
    {.name = "monitor-pid-match",
     .metavar = "[NAME=]REGEX",
     .help = "the same for the process whose command line matches REGEX, followed across restarts "
             "(repeatable)",
     .flags = VL__OPTF_LIST,
     .parse = parse_monitor_match},
    {.name = "monitor-gpu",
     .help = "GPU memory per device and per monitored process, through NVML (loaded at run time)",
     FIELD(VL__OPTT_FLAG, monitor.gpu)},
    {.name = "monitor-pss",
     .help = "also read PSS of monitored processes",
     FIELD(VL__OPTT_FLAG, monitor.pss)},
    {.name = "monitor-prom",
     .metavar = "[NAME=]URL[#M,..]",
     .help = "scrape a Prometheus endpoint (SGLang /metrics, vLLM /metrics) for these metrics "
             "(default: a known set) (repeatable)",
     .flags = VL__OPTF_LIST,
     .parse = parse_monitor_prom},
    {.name = "monitor-cmd",
     .metavar = "[NAME=]CMD",
     .help = "run CMD each sample; the first number it prints is the value (repeatable)",
     .flags = VL__OPTF_LIST,
     .parse = parse_monitor_cmd},
    {.name = "sample-every",
     .metavar = "DUR",
     .help = "timeline rows and memory samples (default 1s); with --flush-every, at least 3 per "
             "flush window show a sawtooth (a warning at start says when there are fewer)",
     FIELD(VL__OPTT_DURATION, sample_every_us),
     .min = 10000,
     .def.i = 1000000},
    {.name = "analyze",
     .help = "at the end, fit every memory series against requests completed: slope in MB per 1000 "
             "requests with a 95% interval, the post-flush floor, a verdict (grows, "
             "sawtooth-returns, levels-off, flat, inconclusive; peak for a high-water mark)",
     FIELD(VL__OPTT_FLAG, analyze)},
    {.name = "plot",
     .metavar = "FILE.png",
     .help = "draw memory over requests, flushes and fits to FILE.png with gnuplot (checked for at "
             "start)",
     .flags = VL__OPTF_PATH,
     FIELD(VL__OPTT_STRING, plot)},
    {.name = "gnuplot",
     .metavar = "PATH",
     .help = "the gnuplot that --plot runs (default: gnuplot on PATH; Debian: apt-get install "
             "gnuplot-nox)",
     .flags = VL__OPTF_PROGRAM,
     FIELD(VL__OPTT_STRING, gnuplot)},
    {.name = "max-error-rate",
     .metavar = "F",
     .help =
         "fail the run (exit status 3) when more than this fraction of requests failed (0.01 = 1%)",
     .section = "Thresholds",
     .flags = VL__OPTF_JSON_OMIT,
     FIELD(VL__OPTT_FRACTION, max_error_rate),
     .def.d = -1,
     JSON("max_error_rate")},
    {.name = "max-p99-ms",
     .metavar = "MS",
     .help = "fail the run (exit status 3) when the end-to-end p99 exceeds MS milliseconds",
     .flags = VL__OPTF_JSON_OMIT,
     FIELD(VL__OPTT_DOUBLE, max_p99_ms),
     .dmax = 1e9,
     .def.d = -1,
     JSON("max_p99_ms")},
    {.name = "slo",
     .metavar = "SPEC",
     .help = "service-level objectives, as vLLM's bench serve goodput: "
             "ttft=500ms,tpot=50ms,e2e=10s (any of "
             "them; e2el is e2e, from the send); a request meets them when it succeeded and each "
             "bound holds; one without a TTFT (no --stream) or a TPOT (under 2 completion tokens) "
             "meets those two, as vLLM counts them 0. Gives request_goodput and the share meeting "
             "each, per stage too, and a timeline column good",
     JSON("slo"),
     .parse = parse_slo,
     .to_json = json_slo},
    {.name = "min-goodput",
     .metavar = "R",
     .help = "fail the run (exit status 3) when under R requests/s met every --slo",
     .flags = VL__OPTF_JSON_OMIT,
     FIELD(VL__OPTT_DOUBLE, min_goodput),
     .dmax = 1e9,
     .def.d = -1,
     JSON("min_goodput")},
    {.name = "output",
     .metavar = "FILE",
     .help = "write the JSON summary to FILE",
     .section = "Outputs",
     .flags = VL__OPTF_PATH,
     FIELD(VL__OPTT_STRING, output)},
    {.name = "timeline",
     .metavar = "FILE",
     .help = "write a per-second CSV timeline to FILE",
     .flags = VL__OPTF_PATH,
     FIELD(VL__OPTT_STRING, timeline)},
    {.name = "log-requests",
     .metavar = "FILE",
     .help = "write one JSON line per request to FILE",
     .flags = VL__OPTF_PATH,
     FIELD(VL__OPTT_STRING, log_requests)},
    {.name = "samples",
     .metavar = "FILE",
     .help = "write every memory sample as a CSV row (wall_ms, elapsed_s, series, value, unit)",
     .flags = VL__OPTF_PATH,
     FIELD(VL__OPTT_STRING, samples)},
    {.name = "timeline-format",
     .metavar = "FMT",
     .help = "csv (default) or jsonl",
     FIELD(VL__OPTT_ENUM, timeline_jsonl),
     .values = "csv jsonl",
     .why = "want csv or jsonl"},
    {.name = "percentiles",
     .metavar = "LIST",
     .help = "latency percentiles of the text table and the JSON, as vLLM's bench serve picks them "
             "(default 50,90,95,99; at most 5, e.g. 50,90,99,99.9); the JSON adds vLLM's keys "
             "p99.9_ttft_ms, p50_e2el_ms, ... for each",
     JSON("percentiles"),
     .parse = parse_percentiles,
     .to_json = json_percentiles},
    {.name = "histograms",
     .metavar = "FILE",
     .help = "write counters and latency histograms (whole run and per second) that 'vlmload "
             "merge' combines exactly across shards",
     .flags = VL__OPTF_PATH,
     FIELD(VL__OPTT_STRING, histograms)},
    {.name = "quiet", .help = "no progress line and no text summary", FIELD(VL__OPTT_FLAG, quiet)},
    {.name = "progress",
     .help = "live progress line even when stderr is not a TTY",
     FIELD(VL__OPTT_FLAG, progress),
     .def.i = -1},
    {.name = "no-progress", .help = "no live progress line", .parse = parse_no_progress},
    {.name = "sweep",
     .metavar = "KEY=A:B:S",
     .help = "one stage per value of rate or concurrency from A to B in steps of S, each for "
             "--duration or --requests, and a table of throughput and latency per stage with the "
             "knee marked",
     FIELD(VL__OPTT_STRING, sweep)},
    {.name = "dry-run",
     .help = "print the plan (rates, mix, image sizes, the pool and its memory, expected totals) "
             "and exit without sending anything",
     FIELD(VL__OPTT_FLAG, dry_run)},
    {.name = "dump-requests",
     .metavar = "DIR",
     .help = "write the first --requests request bodies to DIR with a curl script that replays "
             "them (for a bug report), and exit",
     .flags = VL__OPTF_PATH,
     FIELD(VL__OPTT_STRING, dump_requests)},
    {.name = "config",
     .metavar = "FILE",
     .help =
         "read options from a JSON object keyed by option name ({\"rate\": 50, \"stream\": true, "
         "\"header\": [\"A: 1\"]}); the command line overrides the file, and a repeatable option "
         "given there (--url, --header, --monitor-*) replaces the file's list; relative paths in "
         "the file are taken from its folder; no output may be the file itself",
     .section = "Other",
     .flags = VL__OPTF_PATH | VL__OPTF_CMDLINE},
    {.name = "help",
     .help = "this text",
     .flags = VL__OPTF_CMDLINE | VL__OPTF_EXIT,
     .parse = parse_help},
    {.name = "version",
     .help = "version and library versions",
     .flags = VL__OPTF_CMDLINE | VL__OPTF_EXIT,
     .parse = parse_version},
};

const size_t vl__config_n_options = VL_ARRAY_SIZE(vl__config_options);

_Static_assert(VL_ARRAY_SIZE(vl__config_options) <= VL__MAX_OPTIONS,
               "more options than a vl__optset_t holds");
