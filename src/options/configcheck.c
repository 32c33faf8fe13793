/* The checks between options, the warnings about a configuration that will not measure what it
 * is meant to, and the suggestions for a mistyped option name. */
#include "config_internal.h"
#include "vlmload/body.h"
#include "vlmload/common.h"
#include "vlmload/profile.h"
#include "vlmload/text.h"
#include "vlmload/trace.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* "I/N" of this shard, in static storage. */
static const char *shard_text(const vl_config_t *c) {
  static char text[48];
  snprintf(text, sizeof(text), "%llu/%llu", (unsigned long long)c->shard_i,
           (unsigned long long)c->shard_n);
  return text;
}

/* Trace replay (issue 16, item 7): reads the trace once, here, so a bad row stops the run before
 * anything starts, and makes the run the trace's: its arrivals (VL_ARRIVAL_TRACE, the rate its
 * mean), its rows' count as --requests (a smaller --requests takes the first rows), each row's
 * images when it gives them. What a trace decides is refused from the options that would decide
 * it otherwise. Returns VL_CONFIG_RUN or the exit status. */
static int check_trace(vl_config_t *c, const vl__optset_t *given, FILE *err) {
  vl__optctx_t x = {err, NULL, NULL};
  if (!c->trace_file) {
    if (vl__config_given(given, "trace-speed")) {
      x.name = "trace-speed";
      return vl__config_bad(&x, NULL, "scales a --trace's timestamps; give --trace FILE");
    }
    return VL_CONFIG_RUN;
  }
  static const struct {
    const char *name, *why;
  } refused[] = {
      {"rate", "the trace's timestamps set the arrivals; scale them with --trace-speed"},
      {"arrival", "the trace's timestamps set the arrivals; scale them with --trace-speed"},
      {"sweep", "a trace is one schedule, not stages; replay it at another --trace-speed instead"},
      {"max-tokens", "each trace row gives its own (its output length)"},
      {"output-tokens", "each trace row gives its own (its output length)"},
      {"input-tokens", "each trace row gives its own (its input length)"},
      {"prompts", "each row's prompt is synthetic text of its input length, from its hash_ids' "
                  "blocks"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(refused); i++)
    if (vl__config_given(given, refused[i].name)) {
      char why[200];
      snprintf(why, sizeof(why), "with --trace: %s", refused[i].why);
      x.name = refused[i].name;
      return vl__config_bad(&x, NULL, why);
    }
  if (!(c->trace_speed > 0)) {
    x.name = "trace-speed";
    return vl__config_bad(&x, NULL, "must be above 0");
  }
  if (!c->trace) {
    char why[512];
    vl_trace_t *t = vl_xcalloc(1, sizeof(*t));
    if (vl_trace_load(t, c->trace_file, why, sizeof(why)) != 0) {
      free(t);
      vl__config_say(err, "--trace: %s", why);
      return 2;
    }
    c->trace = t;
  }
  const vl_trace_t *t = c->trace;
  if (t->has_images) {
    const char *opts[] = {"images-per-request", "image-ratio"};
    for (size_t i = 0; i < VL_ARRAY_SIZE(opts); i++)
      if (vl__config_given(given, opts[i])) {
        x.name = opts[i];
        return vl__config_bad(&x, NULL, "the --trace gives each row's images");
      }
    c->images_on = t->images_hi > 0;
    c->image_ratio = t->images_hi > 0 ? 1 : 0;
    if (t->images_hi > 0) {
      c->images_lo = t->images_lo;
      c->images_hi = t->images_hi;
    }
  }
  c->arrival = VL_ARRIVAL_TRACE;
  c->arrival_name = "trace";
  double secs = t->span_ms / 1e3 / c->trace_speed;
  c->rate = t->n > 1 && secs > 0 ? (double)(t->n - 1) / secs : (double)t->n;
  c->rate = VL_MIN(VL_MAX(c->rate, 1e-9), 10e6);
  if (!c->requests || c->requests > t->n)
    c->requests = t->n;
  return VL_CONFIG_RUN;
}

/* --url is the server's base: the route (--endpoint) is added to it. A URL that ends in the route
 * itself, in another server route, or in /v1 that the route repeats, would send to
 * /v1/v1/chat/completions and meet a 404 on every request: refused with the URL to give. Returns
 * 0, or 2 after one line on err. */
static int check_base_urls(const vl_config_t *c, FILE *err) {
  const char *routes[] = {c->endpoint, "/v1/chat/completions", "/v1/completions", "/generate"};
  for (int i = 0; i < c->n_urls; i++) {
    const char *url = c->urls[i], *host = strstr(url, "://");
    const char *path = host ? strchr(host + 3, '/') : NULL;
    if (!path)
      continue;
    size_t len = strlen(path);
    const char *drop = NULL;
    for (size_t k = 0; k < VL_ARRAY_SIZE(routes) && !drop; k++) {
      size_t n = strlen(routes[k]);
      if (n > 1 && len >= n && strcmp(path + len - n, routes[k]) == 0)
        drop = routes[k];
    }
    if (!drop && len >= 3 && strcmp(path + len - 3, "/v1") == 0 &&
        strncmp(c->endpoint, "/v1/", 4) == 0)
      drop = "/v1";
    if (!drop)
      continue;
    char *base = vl_xstrdup(url);
    base[strlen(url) - strlen(drop)] = '\0';
    vl__config_say(err,
                   "--url '%s': a base URL, to which vlmload adds the route %s (--endpoint): drop "
                   "'%s' and give --url %s",
                   url, c->endpoint, drop, base);
    free(base);
    return 2;
  }
  return 0;
}

int vl__config_cross_check(vl_config_t *c, const vl__optset_t *given, FILE *err) {
  vl__optctx_t x = {err, NULL, NULL};
  if (c->rate_auto) {
    /* --rate auto: this process probes the server alone, with requests of its own, first. */
    const char *with = NULL, *why = NULL;
    if (c->sweep) {
      with = "--sweep";
      why = "a sweep steps the rate itself and marks the knee; drop one of them";
    } else if (c->trace_file) {
      with = "--trace";
      why = "a trace's timestamps set the arrivals; scale them with --trace-speed";
    } else if (c->turns_hi) {
      with = "--turns";
      why = "the probe sends single requests, not conversations; find the rate without --turns "
            "and give it as --rate R";
    } else if (c->shard_n > 1) {
      with = "--shard";
      why = "each shard would probe the server alone while the others load it; find the rate in "
            "one process and give every shard --rate R";
    } else if (c->workers > 1) {
      with = "--workers";
      why = "the workers are separate processes that would each probe alone; find the rate with "
            "--workers 1 and give --rate R";
    }
    if (with) {
      vl__config_say(err, "--rate auto with %s: %s", with, why);
      return 2;
    }
  }
  if (c->rate == 0 && !c->rate_auto && vl__config_given(given, "arrival")) {
    x.name = "arrival";
    return vl__config_bad(&x, NULL, "an arrival process needs an open loop (--rate > 0)");
  }
  if (c->rate > 0 && c->rate < 1e-3) {
    x.name = "rate";
    return vl__config_bad(&x, NULL, "below 0.001 per second; use --rate 0 for a closed loop");
  }
  int trc = check_trace(c, given, err);
  if (trc != VL_CONFIG_RUN)
    return trc;
  if (c->api == VL_API_NATIVE) {
    /* /generate is SGLang's own route: other servers do not have it. */
    if (c->server == VL_SERVER_VLLM || c->server == VL_SERVER_OPENAI) {
      char why[160];
      snprintf(why, sizeof(why),
               "SGLang's /generate; --server %s has no such route (use --server sglang, or --api "
               "openai)",
               vl_profile_name(c->server));
      x.name = "api";
      return vl__config_bad(&x, "native", why);
    }
    c->server = VL_SERVER_SGLANG;
    if (!c->endpoint_given)
      vl__config_set_str(&c->endpoint, "/generate");
  }
  char npc[400];
  if (c->no_prompt_cache && vl_config_no_prompt_cache_refused(c, npc, sizeof(npc))) {
    vl__config_say(err, "%s", npc);
    return 2;
  }
  if (check_base_urls(c, err) != 0)
    return 2;
  /* A drained flush waits for this process's requests only: with shards, the others' would still
   * run, and the server would be flushed busy. One flush across processes needs a coordinator
   * that vlmload does not have, so the combination is refused rather than half done. */
  if (c->shard_n > 1 && c->flush_mode == VL_FLUSH_DRAIN &&
      (c->flush_every_n || c->flush_every_us)) {
    vl__config_say(
        err,
        "--flush-every with --shard %s: a drained flush needs an idle server, but the other shards "
        "keep sending while this one drains; run one process without --shard (one drives a "
        "server to saturation), or add --flush-mode inline to flush while requests run (busy "
        "refusals are counted)",
        shard_text(c));
    return 2;
  }
  /* --workers: what one process must do alone, and what makes no sense with several. */
  if (c->workers > 1) {
    int cores[CPU_SETSIZE], n_cores = vl_cpu_list(cores, CPU_SETSIZE);
    const char *alone = c->analyze   ? "--analyze"
                        : c->fail_on ? "--fail-on"
                        : c->plot    ? "--plot"
                        : c->report  ? "--report"
                                     : NULL;
    x.name = "workers";
    if (c->shard_n > 1)
      return vl__config_bad(&x, NULL,
                            "with --shard: --workers already runs its workers as shards of one "
                            "stream; give each machine --shard and run one process there, or drop "
                            "--shard");
    if (c->flush_every_n || c->flush_every_us) {
      fprintf(err,
              "vlmload: --flush-every with --workers %d: a flush needs the whole stream idle (or "
              "one sender, inline), and the workers are separate processes that cannot drain "
              "together; run it with --workers 1 (one process drives a server to saturation)\n",
              c->workers);
      return 2;
    }
    if (alone) {
      fprintf(err,
              "vlmload: %s with --workers %d: it reads the run's own timeline with its memory "
              "columns, which the merged timeline does not have; run it with --workers 1\n",
              alone, c->workers);
      return 2;
    }
    if (c->timeline_jsonl)
      return vl__config_bad(&x, NULL,
                            "the merged timeline is CSV only; drop --timeline-format jsonl");
    if (c->workers > n_cores) {
      char why[160];
      snprintf(why, sizeof(why),
               "more than the %d core%s this process may run on (one worker per core); use "
               "--workers auto",
               n_cores, n_cores == 1 ? "" : "s");
      return vl__config_bad(&x, NULL, why);
    }
    if (c->requests && c->requests < (uint64_t)c->workers)
      return vl__config_bad(&x, NULL, "more workers than --requests: some would send nothing");
  }
  if (c->max_completion_tokens && c->api == VL_API_NATIVE) {
    x.name = "max-completion-tokens";
    return vl__config_bad(&x, NULL,
                          "chat completions only: SGLang's /generate takes "
                          "sampling_params.max_new_tokens (from --max-tokens)");
  }
  /* Lengths: synthetic prompts replace the prompts, which would be silently unsent. */
  if (c->input_tokens.set && c->prompts_file) {
    x.name = "input-tokens";
    return vl__config_bad(&x, NULL,
                          "the prompts are synthetic text of that many tokens: drop --prompts");
  }
  if (c->extra_body) {
    cJSON *extra = cJSON_Parse(c->extra_body);
    const char *option = NULL, *key = vl_template_reserved(extra, c->api == VL_API_NATIVE, &option);
    char why[200];
    if (key)
      snprintf(why, sizeof(why), "\"%s\" is a field vlmload sets itself; set it with %s", key,
               option);
    cJSON_Delete(extra);
    if (key) {
      x.name = "extra-body";
      return vl__config_bad(&x, NULL, why);
    }
  }
  /* The load real users make. */
  if (c->cancel.share > 0 && c->cancel.tokens && !c->stream) {
    x.name = "cancel";
    return vl__config_bad(&x, NULL,
                          "AFTER in tokens counts a stream's tokens: add --stream, or give a "
                          "delay (500ms)");
  }
  if ((c->probe_rate > 0 || c->n_profile_at || c->cancel.share > 0) &&
      (c->shard_n > 1 || c->workers > 1)) {
    x.name = c->probe_rate > 0 ? "probe-rate" : c->n_profile_at ? "server-profile-at" : "cancel";
    return vl__config_bad(&x, NULL,
                          "not with --shard or --workers yet: one process runs it (the merge "
                          "does not add its figures up)");
  }
  /* Conversations: the chat API's message list carries them; their history is bounded. */
  if (!c->turns_hi &&
      (vl__config_given(given, "think-time") || vl__config_given(given, "max-conversations"))) {
    x.name = vl__config_given(given, "think-time") ? "think-time" : "max-conversations";
    return vl__config_bad(&x, NULL, "needs --turns (conversations)");
  }
  if (c->turns_hi && c->api == VL_API_NATIVE) {
    x.name = "turns";
    return vl__config_bad(&x, NULL,
                          "chat completions only: SGLang's /generate takes one text, with no "
                          "message list to carry a conversation's turns (use --api openai)");
  }
  if (c->turns_hi && (c->input_tokens.set || c->output_tokens.set || c->trace_file)) {
    x.name = c->trace_file ? "trace" : c->input_tokens.set ? "input-tokens" : "output-tokens";
    return vl__config_bad(&x, NULL,
                          "not with --turns yet: a conversation's turns are built from the prompts "
                          "and --max-tokens (use --prompts and --max-tokens for its turns)");
  }
  if (c->turns_hi && c->dump_requests) {
    x.name = "dump-requests";
    return vl__config_bad(&x, NULL,
                          "not with --turns: a later turn carries the server's replies, unknown "
                          "before the run");
  }
  if (c->turns_hi) {
    uint64_t convs = (uint64_t)(c->max_conversations ? c->max_conversations : c->concurrency);
    uint64_t bytes = convs * (uint64_t)(c->turns_hi - 1) * vl_config_reply_room(c);
    if (bytes > VL_CONFIG_HISTORY_BUDGET) {
      char why[240];
      snprintf(why, sizeof(why),
               "the histories would take %.0f MiB (%llu conversations x %d replies x %llu bytes "
               "for each, from --max-tokens); at most %llu MiB: lower --max-conversations, "
               "--concurrency, --turns or --max-tokens",
               (double)bytes / 1048576.0, (unsigned long long)convs, c->turns_hi - 1,
               (unsigned long long)vl_config_reply_room(c),
               (unsigned long long)(VL_CONFIG_HISTORY_BUDGET >> 20));
      x.name = "turns";
      return vl__config_bad(&x, NULL, why);
    }
  }
  if (c->min_goodput >= 0 && !vl_slo_any(&c->slo)) {
    x.name = "min-goodput";
    return vl__config_bad(&x, NULL, "needs --slo (goodput counts the requests meeting it)");
  }
  if (c->requests && c->warmup >= c->requests) {
    x.name = "warmup";
    return vl__config_bad(&x, NULL, "must be smaller than --requests");
  }
  if (c->connect_timeout_us > c->timeout_us) {
    if (vl__config_given(given, "connect-timeout")) {
      x.name = "connect-timeout";
      return vl__config_bad(&x, NULL, "longer than --timeout");
    }
    c->connect_timeout_us = c->timeout_us;
  }
  if (c->image_ratio == 0)
    c->images_on = 0;
  else if (c->images_on && c->image_ratio < 0)
    c->image_ratio = 1;
  if (!c->images_on)
    c->image_ratio = 0;
  if ((c->analyze || c->plot || c->fail_on) && vl_monitor_spec_empty(&c->monitor)) {
    x.name = c->analyze ? "analyze" : c->plot ? "plot" : "fail-on";
    return vl__config_bad(&x, NULL,
                          "nothing to sample: add --monitor-pid PID, --monitor-pid-match REGEX, "
                          "--monitor-gpu, --monitor-prom URL or --monitor-cmd CMD");
  }
  if ((c->analyze || c->plot || c->report || c->fail_on) && c->timeline_jsonl) {
    x.name = c->analyze ? "analyze" : c->plot ? "plot" : c->fail_on ? "fail-on" : "report";
    return vl__config_bad(&x, NULL, "reads a CSV timeline; drop --timeline-format jsonl");
  }
  if (c->dump_requests && !c->requests) {
    x.name = "dump-requests";
    return vl__config_bad(&x, NULL, "needs --requests N (how many bodies to write)");
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

/* Whether a name at distance d from s is near enough to be what s meant: at most 2 edits, and
 * at most one for every 3 characters of s. */
static int near_enough(const char *s, int d) {
  return d <= 2 && (size_t)d * 3 <= strlen(s) + 2;
}

const vl__option_t *vl__config_nearest(const char *name) {
  const vl__option_t *best = NULL;
  int best_d = 99;
  for (size_t i = 0; i < vl__config_n_options; i++) {
    int d = distance(name, vl__config_options[i].name);
    if (d < best_d) {
      best_d = d;
      best = &vl__config_options[i];
    }
  }
  return best && near_enough(name, best_d) ? best : NULL;
}

const char *vl_config_nearest_word(const char *s, const char *const *words) {
  const char *best = NULL;
  int best_d = 99;
  for (; *words; words++) {
    int d = distance(s, *words);
    if (d < best_d) {
      best_d = d;
      best = *words;
    }
  }
  return best && near_enough(s, best_d) ? best : NULL;
}

/* Says why "--name" (the text before any '=' of the argument given) is not an option: an
 * abbreviation of several (listed), an option that takes no value given one, or a name near a real
 * one. Only the name is shown otherwise: what follows '=' in a mistyped --api-key=... is a
 * secret. */
void vl__config_say_bad_option(FILE *err, const char *name, const char *given) {
  int has_value = strchr(given, '=') != NULL;
  const char *bare = strncmp(name, "--", 2) == 0 ? name + 2 : name + (name[0] == '-');
  size_t len = strlen(bare);
  char list[512];
  size_t used = 0;
  int n = 0;
  const vl__option_t *exact = NULL;
  for (size_t i = 0; i < vl__config_n_options && len; i++) {
    if (strncmp(vl__config_options[i].name, bare, len) != 0)
      continue;
    if (strlen(vl__config_options[i].name) == len)
      exact = &vl__config_options[i];
    if (used < sizeof(list))
      used += (size_t)snprintf(list + used, sizeof(list) - used, "%s--%s", n ? ", " : "",
                               vl__config_options[i].name);
    n++;
  }
  if (used >= sizeof(list))
    snprintf(list + sizeof(list) - 5, 5, "...");
  if (has_value && (exact || n == 1)) {
    const vl__option_t *o = exact;
    for (size_t i = 0; !o && i < vl__config_n_options; i++)
      if (strncmp(vl__config_options[i].name, bare, len) == 0)
        o = &vl__config_options[i];
    /* Shown whole: an option without a value carries no secret after its '='. */
    vl__config_say(err, "%s: --%s takes no value; give it alone (see --help)", given, o->name);
    return;
  }
  if (n > 1 && !exact) {
    vl__config_say(err, "%s: ambiguous abbreviation of %s (see --help)", name, list);
    return;
  }
  const vl__option_t *near = len ? vl__config_nearest(bare) : NULL;
  if (near)
    vl__config_say(err, "%s: unknown option; did you mean --%s? (see --help)", name, near->name);
  else
    vl__config_say(err, "%s: unknown option (see --help)", name);
}

/* An output that is the --config file itself would overwrite the file while the run reads it:
 * refused. Outputs are the top level's only. Returns 0 or the exit status. */
int vl__config_check_outputs(const vl_config_t *c, const char *path, FILE *err) {
  const struct {
    const char *name, *value;
  } outs[] = {
      {"output", c->output},   {"timeline", c->timeline},     {"log-requests", c->log_requests},
      {"samples", c->samples}, {"histograms", c->histograms}, {"plot", c->plot},
      {"report", c->report}};
  struct stat conf, st;
  /* A regular file only: /dev/stdin and /dev/stdout may well be one terminal. */
  if (!path || stat(path, &conf) != 0 || !S_ISREG(conf.st_mode))
    return 0;
  for (size_t i = 0; i < VL_ARRAY_SIZE(outs); i++) {
    if (outs[i].value && stat(outs[i].value, &st) == 0 && st.st_dev == conf.st_dev &&
        st.st_ino == conf.st_ino) {
      vl__config_say(
          err,
          "--%s '%s': is the --config file '%s', which the run would overwrite; name another "
          "file",
          outs[i].name, outs[i].value, path);
      return 2;
    }
  }
  return 0;
}

/* The memory samples a flush window holds under c's cadence, rate and --sample-every: one line on
 * err when there are fewer than 3, since a sawtooth (memory that climbs between flushes and comes
 * back) cannot show in fewer. Said only where memory is recorded. Returns whether it warned. */
static int warn_sampling(const vl_config_t *c, const vl_config_t *run, FILE *err) {
  const vl_monitor_spec_t *m = &run->monitor;
  int recorded = run->timeline || run->analyze || run->plot || run->samples || m->n_pids ||
                 m->n_matches || m->n_trees || m->n_proms || m->n_cmds || m->gpu;
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
  vl__config_fmt_us(now, sizeof(now), every);
  uint64_t ms = (uint64_t)floor(window_us / 3000);
  const char *where = c == run ? "" : " (in ";
  char msg[512];
  if (ms >= 10) {
    vl__config_fmt_us(want, sizeof(want), ms * 1000);
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

/* How long a run of one load lasts, in seconds: --duration, or sooner its --requests at its rate
 * (a ramp's mean); negative when unknown (a closed loop of --requests). */
static double load_seconds(const vl_config_t *c) {
  double t = c->duration_us ? (double)c->duration_us / 1e6 : -1;
  double rate = c->ramp_to >= 0 ? (c->rate + c->ramp_to) / 2 : c->rate;
  if (c->requests && rate > 0 && !c->rate_auto) {
    double r = (double)c->requests / rate;
    t = t < 0 ? r : VL_MIN(t, r);
  }
  return t;
}

/* The memory samples the whole run takes at --sample-every: one line on err when fewer than
 * VL_CONFIG_MIN_SAMPLES, too few for a trend. Said only where memory is sampled and the run's
 * length is known. */
static void warn_samples(const vl_config_t *c, FILE *err) {
  if (vl_monitor_spec_empty(&c->monitor))
    return;
  double secs = c->n_phases ? 0 : load_seconds(c);
  for (int i = 0; i < c->n_phases && secs >= 0; i++) {
    double t = load_seconds(&c->phases[i]);
    secs = t < 0 ? -1 : secs + t;
  }
  uint64_t every = c->sample_every_us;
  double n = floor(secs * 1e6 / (double)every);
  if (secs < 0 || n >= VL_CONFIG_MIN_SAMPLES)
    return;
  char now[32], want[32], len[32], msg[400];
  vl__config_fmt_us(now, sizeof(now), every);
  vl__config_fmt_us(len, sizeof(len), (uint64_t)(secs * 1e6));
  uint64_t ms = (uint64_t)floor(secs * 1e3 / VL_CONFIG_MIN_SAMPLES);
  int n_written = snprintf(msg, sizeof(msg),
                           "--sample-every %s takes %.0f memory sample%s in this run of about %s: "
                           "a memory trend needs %d or more; ",
                           now, n, n == 1 ? "" : "s", len, VL_CONFIG_MIN_SAMPLES);
  if (ms >= 10) {
    vl__config_fmt_us(want, sizeof(want), ms * 1000);
    snprintf(msg + n_written, sizeof(msg) - (size_t)n_written, "use --sample-every %s or less",
             want);
  } else {
    snprintf(msg + n_written, sizeof(msg) - (size_t)n_written,
             "even the fastest (10ms) needs a run of %dms or more", VL_CONFIG_MIN_SAMPLES * 10);
  }
  vl_text_wrap_t w;
  vl_text_wrap_start(&w, err, VL_TEXT_COLUMNS, 2, "vlmload: warning: ");
  vl_text_wrap_words(&w, msg);
  vl_text_wrap_end(&w);
}

void vl_config_warn(const vl_config_t *c, FILE *err) {
  int warned = c->n_phases ? 0 : warn_sampling(c, c, err);
  for (int i = 0; i < c->n_phases && !warned; i++)
    warned = warn_sampling(&c->phases[i], c, err);
  warn_samples(c, err);
}

int vl_config_no_prompt_cache_refused(const vl_config_t *c, char *why, size_t n) {
  if (c->server != VL_SERVER_SGLANG && c->server != VL_SERVER_VLLM)
    return 0;
  snprintf(why, n,
           "--no-prompt-cache: it sends llama.cpp's \"cache_prompt\": false, a switch %s does "
           "not have; %s",
           c->api == VL_API_NATIVE         ? "SGLang's /generate (--api native)"
           : c->server == VL_SERVER_SGLANG ? "SGLang"
                                           : "vLLM",
           c->server == VL_SERVER_SGLANG
               ? "empty its caches with --flush-every (/flush_cache)"
               : "empty its caches with --flush-every (its reset routes, with "
                 "VLLM_SERVER_DEV_MODE=1)");
  return 1;
}
