/* The functions of the option rows whose values are more than their type parses (lists, URLs,
 * shards, image specs, monitor targets) or whose JSON is more than their field. */
#include "config_internal.h"
#include "vlmload/analyzespec.h"
#include "vlmload/body.h"
#include "vlmload/common.h"
#include "vlmload/history.h"
#include "vlmload/profile.h"
#include "vlmload/slo.h"
#include "vlmload/units.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <sched.h>
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

/* The first --url replaces the default; later ones add servers. A URL without a scheme
 * (127.0.0.1:8000) is http's, as curl reads it. */
int vl__opt_parse_url(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char *url;
  if (*arg && !strstr(arg, "://")) {
    size_t n = strlen(arg) + 8;
    url = vl_xmalloc(n);
    snprintf(url, n, "http://%s", arg);
  } else {
    url = vl_xstrdup(arg);
  }
  const char *why = check_url(url);
  if (why) {
    free(url);
    return vl__config_bad(x, arg, why);
  }
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
void vl__opt_json_url(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "url", c->url);
  cJSON *urls = cJSON_AddArrayToObject(o, "urls");
  for (int i = 0; i < c->n_urls; i++)
    cJSON_AddItemToArray(urls, cJSON_CreateString(c->urls[i]));
  cJSON *shard = cJSON_AddObjectToObject(o, "shard");
  cJSON_AddNumberToObject(shard, "index", (double)c->shard_i);
  cJSON_AddNumberToObject(shard, "count", (double)c->shard_n);
}

int vl__opt_parse_shard(vl_config_t *c, vl__optctx_t *x, const char *arg) {
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

/* --workers: a count, or auto for the cores this process may run on (workers.c pins to them). */
int vl__opt_parse_workers(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  uint64_t n;
  if (strcmp(arg, "auto") == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    n = sched_getaffinity(0, sizeof(set), &set) == 0 ? (uint64_t)CPU_COUNT(&set) : 1;
  } else if (vl_units_count(arg, &n) || n == 0 || n > CPU_SETSIZE) {
    return vl__config_bad(x, arg, "want a number of processes from 1 to 1024, or auto");
  }
  c->workers = (int)VL_MAX(n, 1);
  return 0;
}

int vl__opt_parse_endpoint(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (arg[0] != '/' || strpbrk(arg, " \t\r\n"))
    return vl__config_bad(x, arg, "a path starting with '/', without spaces");
  vl__config_set_str(&c->endpoint, arg);
  c->endpoint_given = 1;
  return 0;
}

/* --extra-body: one JSON object; a repeat merges into the earlier ones, its keys winning. */
int vl__opt_parse_extra_body(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  const char *end = NULL;
  cJSON *add = cJSON_ParseWithOpts(arg, &end, 1);
  if (!add) {
    const char *at = cJSON_GetErrorPtr();
    char why[96];
    size_t off = at && at >= arg && at <= arg + strlen(arg) ? (size_t)(at - arg) : strlen(arg);
    snprintf(why, sizeof(why), "not valid JSON: error at byte offset %zu (of %zu bytes)", off,
             strlen(arg));
    return vl__config_bad(x, arg, why);
  }
  if (!cJSON_IsObject(add)) {
    cJSON_Delete(add);
    return vl__config_bad(x, arg, "want a JSON object ({\"key\": value, ...})");
  }
  cJSON *all = c->extra_body ? cJSON_Parse(c->extra_body) : cJSON_CreateObject();
  if (!all) {
    cJSON_Delete(add);
    return vl__config_bad(x, NULL, "out of memory");
  }
  while (add->child) {
    cJSON *e = cJSON_DetachItemViaPointer(add, add->child);
    cJSON *old = cJSON_GetObjectItemCaseSensitive(all, e->string);
    if (old)
      cJSON_ReplaceItemViaPointer(all, old, e); /* in the earlier key's place */
    else
      cJSON_AddItemToObject(all, e->string, e);
  }
  cJSON_Delete(add);
  char *text = cJSON_PrintUnformatted(all);
  cJSON_Delete(all);
  if (!text)
    return vl__config_bad(x, NULL, "out of memory");
  vl__config_set_str(&c->extra_body, text);
  cJSON_free(text);
  return 0;
}

/* The merged object as an object, not as the text it is kept in. */
void vl__opt_json_extra_body(const vl_config_t *c, cJSON *o) {
  cJSON *v = c->extra_body ? cJSON_Parse(c->extra_body) : NULL;
  if (v)
    cJSON_AddItemToObject(o, "extra_body", v);
}

int vl__opt_parse_model(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (!*arg)
    return vl__config_bad(x, NULL, "empty model name");
  vl__config_set_str(&c->model, arg);
  return 0;
}

int vl__opt_parse_api_key(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (!*arg || strpbrk(arg, "\r\n"))
    return vl__config_bad(x, NULL, "empty or multi-line key");
  vl__config_set_str(&c->api_key, arg);
  return 0;
}

/* Masked: whether a key is set, never the key. */
void vl__opt_json_api_key(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "api_key", c->api_key ? "***" : "");
}

int vl__opt_parse_header(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  const char *colon = strchr(arg, ':');
  /* Not echoed: header values carry credentials as often as the API key does. */
  if (!colon || colon == arg || strpbrk(arg, "\r\n"))
    return vl__config_bad(x, NULL, "want 'Name: value' on one line");
  c->headers = vl_xrealloc(c->headers, sizeof(char *) * (size_t)(c->n_headers + 1));
  c->headers[c->n_headers++] = vl_xstrdup(arg);
  return 0;
}

void vl__opt_json_headers(const vl_config_t *c, cJSON *o) {
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

int vl__opt_parse_cacert(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  /* Checked here: a typo must not turn into a TLS failure on every request. */
  if (access(arg, R_OK) != 0)
    return vl__config_bad(x, arg, strerror(errno));
  vl__config_set_str(&c->cacert, arg);
  return 0;
}

int vl__opt_parse_server(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_profile_by_name(arg, &c->server) != 0)
    return vl__config_bad(x, arg, "want sglang, vllm, llamacpp, openai or auto");
  return 0;
}

void vl__opt_json_server(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "server", vl_profile_name(c->server));
  if (!c->props.known)
    return;
  /* What llama-server said of itself in GET /props: beside its kind, not an option. */
  cJSON *p = cJSON_AddObjectToObject(o, "server_props");
  if (c->props.build_info[0])
    cJSON_AddStringToObject(p, "build_info", c->props.build_info);
  else
    cJSON_AddNullToObject(p, "build_info");
  if (c->props.total_slots >= 0)
    cJSON_AddNumberToObject(p, "total_slots", (double)c->props.total_slots);
  else
    cJSON_AddNullToObject(p, "total_slots");
  if (c->props.n_ctx >= 0)
    cJSON_AddNumberToObject(p, "n_ctx", (double)c->props.n_ctx);
  else
    cJSON_AddNullToObject(p, "n_ctx");
  if (c->props.vision >= 0)
    cJSON_AddBoolToObject(p, "vision", c->props.vision);
  else
    cJSON_AddNullToObject(p, "vision");
}

int vl__opt_parse_flush_every(vl_config_t *c, vl__optctx_t *x, const char *arg) {
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
void vl__opt_json_flush_every(const vl_config_t *c, cJSON *o) {
  if (c->flush_every_n)
    cJSON_AddNumberToObject(o, "flush_every", (double)c->flush_every_n);
  else if (c->flush_every_us)
    cJSON_AddNumberToObject(o, "flush_every_s", (double)c->flush_every_us / 1e6);
  else
    cJSON_AddNullToObject(o, "flush_every");
}

int vl__opt_parse_flush_endpoint(vl_config_t *c, vl__optctx_t *x, const char *arg) {
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

void vl__opt_json_flush_endpoints(const vl_config_t *c, cJSON *o) {
  cJSON *fe = cJSON_AddArrayToObject(o, "flush_endpoints");
  for (int i = 0; i < VL_MAX_FLUSH_ENDPOINTS && c->flush_endpoints[i]; i++)
    cJSON_AddItemToArray(fe, cJSON_CreateString(c->flush_endpoints[i]));
}

/* The method's names, in either case (the JSON writes them as its values say). */
int vl__opt_parse_flush_method(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (strcmp(arg, "GET") == 0 || strcmp(arg, "get") == 0)
    c->flush_post = 0;
  else if (strcmp(arg, "POST") == 0 || strcmp(arg, "post") == 0)
    c->flush_post = 1;
  else
    return vl__config_bad(x, arg, "want GET or POST");
  return 0;
}

/* Whether requests carry images, and the corpus (null: synthetic). */
void vl__opt_json_images(const vl_config_t *c, cJSON *o) {
  cJSON_AddBoolToObject(o, "enabled", c->images_on);
  if (c->images_dir)
    cJSON_AddStringToObject(o, "dir", c->images_dir);
  else
    cJSON_AddNullToObject(o, "dir");
}

int vl__opt_parse_resolution(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char reason[160];
  if (vl_imagespec_res_parse(&c->res, arg, reason, sizeof(reason)))
    return vl__config_bad(x, arg, reason);
  c->res_given = 1;
  return 0;
}

/* Corpus files that no --resolution resizes are sent "as is". */
void vl__opt_json_resolution(const vl_config_t *c, cJSON *o) {
  char res[1024];
  vl_imagespec_res_format(&c->res, res, sizeof(res));
  cJSON_AddStringToObject(o, "resolution", c->images_dir && !c->res_given ? "as is" : res);
}

int vl__opt_parse_image_format(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_imagespec_format(arg, &c->image_fmt))
    return vl__config_bad(x, arg, "want png, jpeg or mixed");
  return 0;
}

void vl__opt_json_image_format(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "format", vl_image_fmt_name(c->image_fmt));
}

int vl__opt_parse_image_content(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_imagespec_content(arg, &c->image_content))
    return vl__config_bad(x, arg, "want photo-like, noise, gradient, shapes or mixed");
  return 0;
}

void vl__opt_json_image_content(const vl_config_t *c, cJSON *o) {
  cJSON_AddStringToObject(o, "content", vl_image_content_name(c->image_content));
}

/* A ratio of 0 turns images off, any other turns them on. */
int vl__opt_parse_image_ratio(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_units_double(arg, &c->image_ratio) || c->image_ratio > 1)
    return vl__config_bad(x, arg, "want a fraction between 0 and 1");
  c->images_on = c->image_ratio > 0;
  return 0;
}

/* Repeats need fresh images to repeat and to fill the rest: --image-reuse implies
 * --unique-images. */
int vl__opt_parse_image_reuse(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_units_double(arg, &c->image_reuse) || c->image_reuse > 1)
    return vl__config_bad(x, arg, "want a fraction between 0 and 1");
  c->unique_images = 1;
  return 0;
}

int vl__opt_parse_images_per_request(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char reason[160];
  if (vl_imagespec_count(arg, 1, VL_MAX_IMAGES, &c->images_lo, &c->images_hi, reason,
                         sizeof(reason)))
    return vl__config_bad(x, arg, reason);
  return 0;
}

void vl__opt_json_images_per_request(const vl_config_t *c, cJSON *o) {
  cJSON_AddNumberToObject(o, "per_request_min", c->images_lo);
  cJSON_AddNumberToObject(o, "per_request_max", c->images_hi);
}

int vl__opt_parse_image_token(vl_config_t *c, vl__optctx_t *x, const char *arg) {
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

/* --rate: a number of arrivals per second, or auto (the probe before the run finds it). */
int vl__opt_parse_rate(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (strcmp(arg, "auto") == 0) {
    c->rate_auto = 1;
    c->rate = 0;
    return 0;
  }
  double v;
  if (vl_units_double(arg, &v) || v > 10e6)
    return vl__config_bad(x, arg,
                          "want arrivals per second (0 to 10M; 0: closed loop) or auto (a rate "
                          "the server sustains, found first)");
  c->rate_auto = 0;
  c->rate = v;
  return 0;
}

/* "auto" for --rate auto (the summary's rate_auto says what the probe chose), else the number. */
void vl__opt_json_rate(const vl_config_t *c, cJSON *o) {
  if (c->rate_auto)
    cJSON_AddStringToObject(o, "rate", "auto");
  else
    cJSON_AddNumberToObject(o, "rate", c->rate);
}

int vl__opt_parse_arrival(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  if (vl_pace_parse(arg, &c->arrival, &c->arrival_cv))
    return vl__config_bad(x, arg, "want constant, poisson or gamma:CV with 0 < CV <= 100");
  c->arrival_name = c->arrival == VL_ARRIVAL_CONSTANT  ? "constant"
                    : c->arrival == VL_ARRIVAL_POISSON ? "poisson"
                                                       : "gamma";
  return 0;
}

/* The process's name ("closed" for a closed loop), and a gamma process's CV. */
void vl__opt_json_arrival(const vl_config_t *c, cJSON *o) {
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
  int tree = add == vl_monitor_spec_add_tree;
  pid_t pid = add == vl_monitor_spec_add_pid ? c->monitor.pids[c->monitor.n_pids - 1].pid
              : tree                         ? c->monitor.trees[c->monitor.n_trees - 1].pid
                                             : 0;
  if (pid && kill(pid, 0) != 0 && errno == ESRCH) {
    vl__config_say(x->err,
                   "%s %s: no process %s is running (pgrep -f finds one by its command "
                   "line; --monitor-pid-match follows one across restarts)",
                   tree ? "--monitor-tree" : "--monitor-pid", arg,
                   arg + (strchr(arg, '=') ? strchr(arg, '=') - arg + 1 : 0));
    return 2;
  }
  return 0;
}

int vl__opt_parse_monitor_pid(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return add_monitor(c, x, arg, vl_monitor_spec_add_pid);
}

int vl__opt_parse_monitor_match(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return add_monitor(c, x, arg, vl_monitor_spec_add_match);
}

int vl__opt_parse_monitor_tree(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return add_monitor(c, x, arg, vl_monitor_spec_add_tree);
}

int vl__opt_parse_monitor_prom(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return add_monitor(c, x, arg, vl_monitor_spec_add_prom);
}

int vl__opt_parse_monitor_cmd(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return add_monitor(c, x, arg, vl_monitor_spec_add_cmd);
}

int vl__opt_parse_no_progress(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  (void)x, (void)arg;
  c->progress = 0;
  return 0;
}

/* Goodput: --slo and --percentiles (see slo.h). */
/* The analysis's options (analyzespec.h): parsed by the functions vlmload analyze parses them
 * with. */
int vl__opt_parse_min_growth(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  const char *why;
  if (vl_analyze_spec_min_growth(arg, &c->min_growth_frac, &why))
    return vl__config_bad(x, arg, why);
  return 0;
}

int vl__opt_parse_min_growth_mb(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  const char *why;
  if (vl_analyze_spec_min_growth_mb(arg, &c->min_growth_mb, &why))
    return vl__config_bad(x, arg, why);
  return 0;
}

int vl__opt_parse_expect_cap(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  const char *why, *end;
  char target[256];
  double bytes;
  for (const char *p = arg;; p = end + 1) {
    if (vl_analyze_spec_cap(p, target, sizeof(target), &bytes, &end, &why))
      return vl__config_bad(x, arg, why);
    if (!*end)
      break;
  }
  vl__config_set_str(&c->expect_cap, arg);
  return 0;
}

int vl__opt_parse_min_slope(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  const char *why;
  if (vl_analyze_spec_min_slope(arg, &c->min_slope, &why))
    return vl__config_bad(x, arg, why);
  return 0;
}

int vl__opt_parse_fail_on(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char why[256];
  if (vl_analyze_spec_fail_on(arg, &c->fail_on, why, sizeof(why)))
    return vl__config_bad(x, arg, why);
  return 0;
}

void vl__opt_json_fail_on(const vl_config_t *c, cJSON *o) {
  cJSON *a = cJSON_AddArrayToObject(o, "fail_on");
  for (int v = 0; v < VL_VERDICT_N; v++)
    if (c->fail_on & (1u << v))
      cJSON_AddItemToArray(a, cJSON_CreateString(vl_analyze_verdict_name((vl_verdict_t)v)));
}

int vl__opt_parse_slo(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char why[160];
  if (vl_slo_parse(arg, &c->slo, why, sizeof(why)))
    return vl__config_bad(x, arg, why);
  return 0;
}

void vl__opt_json_slo(const vl_config_t *c, cJSON *o) {
  char spec[128];
  vl_slo_format(&c->slo, spec, sizeof(spec));
  if (spec[0])
    cJSON_AddStringToObject(o, "slo", spec);
}

/* --input-tokens and --output-tokens (lengths.h). */
static int parse_lengths(vl_lengths_dist_t *d, vl__optctx_t *x, const char *arg) {
  char why[160];
  if (vl_lengths_dist_parse(arg, d, why, sizeof(why)))
    return vl__config_bad(x, arg, why);
  return 0;
}

static void json_lengths(const vl_lengths_dist_t *d, const char *key, cJSON *o) {
  char spec[96];
  if (!d->set)
    return;
  vl_lengths_dist_format(d, spec, sizeof(spec));
  cJSON_AddStringToObject(o, key, spec);
}

int vl__opt_parse_input_tokens(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return parse_lengths(&c->input_tokens, x, arg);
}

void vl__opt_json_input_tokens(const vl_config_t *c, cJSON *o) {
  json_lengths(&c->input_tokens, "input_tokens", o);
}

int vl__opt_parse_output_tokens(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  return parse_lengths(&c->output_tokens, x, arg);
}

void vl__opt_json_output_tokens(const vl_config_t *c, cJSON *o) {
  json_lengths(&c->output_tokens, "output_tokens", o);
}

int vl__opt_parse_percentiles(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char why[160];
  if (vl_slo_parse_percentiles(arg, c->percentiles, &c->n_percentiles, why, sizeof(why)))
    return vl__config_bad(x, arg, why);
  return 0;
}

void vl__opt_json_percentiles(const vl_config_t *c, cJSON *o) {
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

int vl__opt_parse_help(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  (void)c, (void)arg;
  vl_config_usage(x->out);
  return 0;
}

int vl__opt_parse_version(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  (void)c, (void)arg;
  vl__config_version(x->out);
  return 0;
}

/* ------------------------------------------------------------------ conversations (--turns) */

int vl__opt_parse_turns(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char reason[160];
  if (vl_imagespec_count(arg, 1, VL_TURNS_MAX, &c->turns_lo, &c->turns_hi, reason, sizeof(reason)))
    return vl__config_bad(x, arg, reason);
  return 0;
}

/* As given ("3" or "2-5"), so that a --config file takes it back; null without conversations. */
void vl__opt_json_turns(const vl_config_t *c, cJSON *o) {
  char text[32];
  if (!c->turns_hi) {
    cJSON_AddNullToObject(o, "turns");
    return;
  }
  if (c->turns_lo == c->turns_hi)
    snprintf(text, sizeof(text), "%d", c->turns_lo);
  else
    snprintf(text, sizeof(text), "%d-%d", c->turns_lo, c->turns_hi);
  cJSON_AddStringToObject(o, "turns", text);
}

/* DUR, or DUR:KIND with KIND as --arrival takes it. */
int vl__opt_parse_think_time(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  static const char why[] = "want DUR (constant), DUR:poisson or DUR:gamma:CV, such as 2s:poisson";
  char dur[64];
  const char *colon = strchr(arg, ':');
  size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
  if (n >= sizeof(dur))
    return vl__config_bad(x, arg, why);
  memcpy(dur, arg, n);
  dur[n] = '\0';
  c->think_kind = VL_ARRIVAL_CONSTANT;
  c->think_cv = 0;
  if (vl_units_duration(dur, &c->think_us) != 0) {
    char unit[128];
    vl_units_duration_why(dur, unit, sizeof(unit));
    return vl__config_bad(x, arg, vl_units_bare(dur) ? unit : why);
  }
  if (colon && vl_pace_parse(colon + 1, &c->think_kind, &c->think_cv))
    return vl__config_bad(x, arg, why);
  return 0;
}

void vl__opt_json_think_time(const vl_config_t *c, cJSON *o) {
  cJSON_AddNumberToObject(o, "think_time_s", (double)c->think_us / 1e6);
  cJSON_AddStringToObject(o, "think_time_process",
                          c->think_kind == VL_ARRIVAL_CONSTANT  ? "constant"
                          : c->think_kind == VL_ARRIVAL_POISSON ? "poisson"
                                                                : "gamma");
  if (c->think_kind == VL_ARRIVAL_GAMMA)
    cJSON_AddNumberToObject(o, "think_time_cv", c->think_cv);
}

int vl__opt_parse_cancel(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  char why[256];
  if (vl_cancel_parse(arg, &c->cancel, why, sizeof(why)))
    return vl__config_bad(x, arg, why);
  return 0;
}

void vl__opt_json_cancel(const vl_config_t *c, cJSON *o) {
  char after[64];
  cJSON *v = cJSON_AddObjectToObject(o, "cancel");
  cJSON_AddNumberToObject(v, "share", c->cancel.share);
  vl_cancel_after_format(&c->cancel, after, sizeof(after));
  cJSON_AddStringToObject(v, "after", c->cancel.share > 0 ? after : "");
}

int vl__opt_parse_server_profile_at(vl_config_t *c, vl__optctx_t *x, const char *arg) {
  static const char why[] = "want request counts in ascending order, such as 100,1000";
  char buf[32];
  const char *p = arg;
  c->n_profile_at = 0;
  for (;;) {
    size_t n = strcspn(p, ",");
    uint64_t v;
    if (n == 0 || n >= sizeof(buf))
      return vl__config_bad(x, arg, why);
    memcpy(buf, p, n);
    buf[n] = '\0';
    if (vl_units_count(buf, &v) || v == 0 ||
        (c->n_profile_at && v <= c->profile_at[c->n_profile_at - 1]))
      return vl__config_bad(x, arg, why);
    if (c->n_profile_at == VL_MAX_PROFILE_AT)
      return vl__config_bad(x, arg, "at most 64 request counts");
    c->profile_at[c->n_profile_at++] = v;
    if (!p[n])
      return 0;
    p += n + 1;
  }
}

void vl__opt_json_server_profile_at(const vl_config_t *c, cJSON *o) {
  cJSON *a = cJSON_AddArrayToObject(o, "server_profile_at");
  for (int i = 0; i < c->n_profile_at; i++)
    cJSON_AddItemToArray(a, cJSON_CreateNumber((double)c->profile_at[i]));
}
