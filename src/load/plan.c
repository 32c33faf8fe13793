#include "vlmload/plan.h"
#include "vlmload/common.h"
#include "vlmload/rateauto.h"
#include "vlmload/rng.h"
#include "vlmload/trace.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The extra fields as one object, parsed once for every template: --extra-body's (checked at
 * parse), with ignore_eos set by --ignore-eos. NULL when there are none. */
static cJSON *extra_fields(const vl_config_t *cfg) {
  if (!cfg->extra_body && !cfg->ignore_eos && !cfg->no_prompt_cache)
    return NULL;
  cJSON *o = cfg->extra_body ? cJSON_Parse(cfg->extra_body) : cJSON_CreateObject();
  if (o && cfg->ignore_eos) {
    if (cJSON_GetObjectItemCaseSensitive(o, "ignore_eos"))
      cJSON_ReplaceItemInObjectCaseSensitive(o, "ignore_eos", cJSON_CreateTrue());
    else
      cJSON_AddBoolToObject(o, "ignore_eos", 1);
  }
  /* --no-prompt-cache: llama.cpp's per-request switch off its prompt cache. */
  if (o && cfg->no_prompt_cache) {
    if (cJSON_GetObjectItemCaseSensitive(o, "cache_prompt"))
      cJSON_ReplaceItemInObjectCaseSensitive(o, "cache_prompt", cJSON_CreateFalse());
    else
      cJSON_AddBoolToObject(o, "cache_prompt", 0);
  }
  return o;
}

static int build_templates(vl_plan_t *p, const vl_config_t *cfg, const char *model,
                           const vl_prompts_t *prompts, const cJSON *extra);

/* Trace replay: the blocks of a row its prompt reaches (ids past its input length are left out,
 * so a row's body never needs room for them). */
static int trace_blocks(const vl_trace_row_t *row) {
  uint32_t reach = (uint32_t)((row->input_tokens + VL_LENGTHS_BLOCK - 1) / VL_LENGTHS_BLOCK);
  return (int)VL_MIN(row->n_hash, reach);
}

int vl_plan_init(vl_plan_t *p, const vl_config_t *cfg, const char *model,
                 const vl_prompts_t *prompts, const vl_imagepool_t *pool) {
  memset(p, 0, sizeof(*p));
  p->cfg = cfg;
  p->prompts = prompts;
  p->pool = cfg->images_on && pool && pool->n ? pool : NULL;
  p->image_token = cfg->image_token ? cfg->image_token : vl_profile_image_token(model);
  /* Lengths: synthetic prompts and per-request max_tokens are holes in the templates. */
  p->lentext = prompts->synthetic;
  p->text_hole = cfg->input_tokens.set;
  p->max_tokens_hole = cfg->output_tokens.set;
  /* Trace replay (issue 16, item 7): each row's prompt length, prefix blocks and max_tokens. */
  if (cfg->trace) {
    p->text_hole = 1;
    p->max_tokens_hole = 1;
    for (size_t i = 0; i < cfg->trace->n; i++)
      p->max_blocks = VL_MAX(p->max_blocks, trace_blocks(&cfg->trace->rows[i]));
  }
  p->n_prompts = p->text_hole ? 1 : prompts->n;
  if (p->text_hole && !p->lentext)
    return VL_EINVAL;
  cJSON *extra = extra_fields(cfg);
  if ((cfg->extra_body || cfg->ignore_eos || cfg->no_prompt_cache) && !extra)
    return VL_ENOMEM;
  if (extra) {
    char *text = cJSON_PrintUnformatted(extra);
    p->extra = text ? vl_xstrdup(text) : NULL;
    cJSON_free(text);
  }
  int rc = build_templates(p, cfg, model, prompts, extra);
  cJSON_Delete(extra);
  return rc;
}

static int build_templates(vl_plan_t *p, const vl_config_t *cfg, const char *model,
                           const vl_prompts_t *prompts, const cJSON *extra) {
  int native = cfg->api == VL_API_NATIVE;
  p->text = vl_xcalloc(p->n_prompts, sizeof(vl_template_t));
  for (size_t i = 0; i < p->n_prompts; i++) {
    vl_template_params_t tp = {
        .model = model,
        .prompt = prompts->items[i],
        .text_hole = p->text_hole,
        .max_tokens_hole = p->max_tokens_hole,
        .max_tokens = cfg->max_tokens,
        .temperature = cfg->temperature,
        .stream = cfg->stream,
        .native = native,
        .max_completion_tokens = cfg->max_completion_tokens,
        .extra = extra,
    };
    int rc = vl_template_build(&p->text[i], &tp);
    if (rc)
      return rc;
  }
  if (!p->pool)
    return 0;
  p->n_counts = cfg->images_hi - cfg->images_lo + 1;
  size_t n = p->n_prompts * (size_t)p->n_counts * 2;
  p->image = vl_xcalloc(n, sizeof(vl_template_t));
  for (size_t i = 0; i < n; i++) {
    vl_template_params_t tp = {
        .model = model,
        .prompt = prompts->items[i / ((size_t)p->n_counts * 2)],
        .text_hole = p->text_hole,
        .max_tokens_hole = p->max_tokens_hole,
        .max_tokens = cfg->max_tokens,
        .temperature = cfg->temperature,
        .stream = cfg->stream,
        .n_images = cfg->images_lo + (int)(i / 2 % (size_t)p->n_counts),
        .images_first = i % 2 == 0,
        .native = native,
        .image_token = p->image_token,
        .max_completion_tokens = cfg->max_completion_tokens,
        .extra = extra,
    };
    int rc = vl_template_build(&p->image[i], &tp);
    if (rc)
      return rc;
  }
  return 0;
}

void vl_plan_free(vl_plan_t *p) {
  if (p->text)
    for (size_t i = 0; i < p->n_prompts; i++)
      vl_template_free(&p->text[i]);
  free(p->text);
  if (p->image)
    for (size_t i = 0; i < p->n_prompts * (size_t)p->n_counts * 2; i++)
      vl_template_free(&p->image[i]);
  free(p->image);
  free(p->extra);
  memset(p, 0, sizeof(*p));
}

void vl_plan_draw(const vl_plan_t *p, uint64_t id, vl_request_plan_t *rp) {
  const vl_config_t *c = p->cfg;
  vl_rng_t rng;
  vl_rng_init(&rng, c->seed, 0x1000 + id);
  rp->prompt = vl_rng_range(&rng, 0, p->prompts->n - 1);
  rp->n_images = 0;
  rp->images_first = 0;
  if (p->pool) {
    if (c->trace && c->trace->has_images) {
      /* Trace replay (issue 16, item 7): the row says how many images its request carries. */
      rp->n_images = c->trace->rows[id % c->trace->n].images;
    } else if (vl_rng_double(&rng) < c->image_ratio) {
      rp->n_images = (int)vl_rng_range(&rng, (uint64_t)c->images_lo, (uint64_t)c->images_hi);
    }
  }
  if (rp->n_images) {
    rp->images_first = c->image_placement == VL_PLACE_BEFORE ||
                       (c->image_placement == VL_PLACE_RANDOM && (vl_rng_next(&rng) & 1));
    for (int k = 0; k < rp->n_images; k++)
      rp->image[k] = vl_rng_range(&rng, 0, p->pool->n - 1);
    /* Repeats draw last, so a run without them draws what it always did. */
    for (int k = 0; k < rp->n_images; k++) {
      rp->reuse[k] = -1;
      if (c->image_reuse > 0 && vl_rng_double(&rng) < c->image_reuse)
        rp->reuse[k] = vl_rng_double(&rng);
    }
  }
  /* Lengths draw after everything else, for the same reason. */
  rp->input_tokens = 0;
  rp->max_tokens = 0;
  rp->text_at = 0;
  rp->blocks = NULL;
  rp->n_blocks = 0;
  if (p->text_hole)
    rp->prompt = 0;
  if (c->input_tokens.set) {
    rp->input_tokens = vl_lengths_dist_draw(&c->input_tokens, &rng);
    rp->text_at = vl_rng_range(&rng, 0, VL_LENTEXT_SPREAD - 1);
  }
  if (c->output_tokens.set)
    rp->max_tokens = vl_lengths_dist_draw(&c->output_tokens, &rng);
  /* Trace replay (issue 16, item 7): the row's lengths and prefix blocks; a row without hash ids
   * starts its text at a word of its own. */
  if (c->trace) {
    const vl_trace_row_t *row = &c->trace->rows[id % c->trace->n];
    rp->input_tokens = row->input_tokens;
    rp->max_tokens = row->output_tokens;
    rp->n_blocks = trace_blocks(row);
    rp->blocks = rp->n_blocks ? &c->trace->hashes[row->hash] : NULL;
    if (!rp->n_blocks)
      rp->text_at = vl_rng_range(&rng, 0, VL_LENTEXT_SPREAD - 1);
  }
}

const vl_template_t *vl_plan_template(const vl_plan_t *p, const vl_request_plan_t *rp) {
  if (rp->n_images == 0)
    return &p->text[rp->prompt];
  size_t count = (size_t)(rp->n_images - p->cfg->images_lo);
  return &p->image[(rp->prompt * (size_t)p->n_counts + count) * 2 + !rp->images_first];
}

int vl_plan_body_cap(const vl_plan_t *p) {
  int cap = VL_BODY_TEMPLATE_SEGS;
  if (p->text_hole || p->max_tokens_hole)
    cap += VL_BODY_HOLE_SEGS;
  if (p->text_hole)
    cap += VL_LENTEXT_SEGS(p->max_blocks);
  return cap;
}

/* The text hole's runs (vl_body_parts_t.text): the request's prompt, or its blocks. */
static int text_runs(void *ud, vl_seg_t *out, int room) {
  const vl_plan_t *p = ((const void *const *)ud)[0];
  const vl_request_plan_t *rp = ((const void *const *)ud)[1];
  if (rp->input_tokens <= 0)
    return 0;
  if (rp->n_blocks > 0)
    return vl_lentext_blocks(p->lentext, rp->blocks, rp->n_blocks, rp->input_tokens, out, room);
  return room >= 2 ? vl_lentext_prompt(p->lentext, rp->text_at, rp->input_tokens, out) : 0;
}

void vl_plan_fill(const vl_plan_t *p, const vl_request_plan_t *rp, const vl_seg_t *images,
                  char *number, vl_body_t *b) {
  const vl_template_t *t = vl_plan_template(p, rp);
  const void *ud[2] = {p, rp};
  vl_body_parts_t parts = {.images = images, .text = text_runs, .text_ud = (void *)ud};
  if (p->max_tokens_hole) {
    int n = snprintf(number, VL_PLAN_NUMBER_MAX, "%d",
                     rp->max_tokens > 0 ? rp->max_tokens : p->cfg->max_tokens);
    parts.max_tokens = (vl_seg_t){number, (size_t)n};
  }
  vl_body_fill_parts(b, t, &parts);
}

int vl_plan_dump(const vl_plan_t *p, uint64_t n, const char *dir, char *err, size_t errlen) {
  const vl_config_t *c = p->cfg;
  char path[4096];
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "--dump-requests '%s': %s", dir, strerror(errno));
    return VL_EIO;
  }
  snprintf(path, sizeof(path), "%s/replay.sh", dir);
  FILE *script = fopen(path, "w");
  if (!script) {
    snprintf(err, errlen, "--dump-requests '%s': %s", path, strerror(errno));
    return VL_EIO;
  }
  fprintf(script,
          "#!/bin/sh\n"
          "# Sends the request bodies beside this script, in order, as vlmload would.\n"
          "# Usage: sh replay.sh [BASE_URL]   (default %s); $OPENAI_API_KEY is sent if set.\n"
          "set -e\n"
          "cd \"$(dirname \"$0\")\"\n"
          "url=\"${1:-%s}%s\"\n"
          "auth=\"\"\n"
          "[ -n \"${OPENAI_API_KEY:-}\" ] && auth=\"Authorization: Bearer $OPENAI_API_KEY\"\n",
          c->url, c->url, c->endpoint);
  int rc = 0;
  for (uint64_t id = 0; id < n && !rc; id++) {
    vl_request_plan_t rp;
    vl_plan_draw(p, id, &rp);
    vl_seg_t segs[VL_MAX_IMAGES];
    for (int k = 0; k < rp.n_images; k++)
      segs[k] = vl_imagepool_seg(p->pool, rp.image[k]);
    vl_body_t body;
    char number[VL_PLAN_NUMBER_MAX];
    if (vl_body_init(&body, vl_plan_body_cap(p)) != 0) {
      snprintf(err, errlen, "--dump-requests: out of memory");
      rc = VL_ENOMEM;
      break;
    }
    vl_plan_fill(p, &rp, segs, number, &body);
    snprintf(path, sizeof(path), "%s/request-%06llu.json", dir, (unsigned long long)id);
    FILE *f = fopen(path, "w");
    for (int i = 0; f && i < body.n; i++)
      if (fwrite(body.seg[i].p, 1, body.seg[i].n, f) != body.seg[i].n)
        break;
    vl_body_free(&body);
    if (!f || fclose(f) != 0) {
      snprintf(err, errlen, "--dump-requests '%s': %s", path, strerror(errno));
      rc = VL_EIO;
      break;
    }
    fprintf(script,
            "curl -sS -H 'Content-Type: application/json' ${auth:+-H \"$auth\"}%s "
            "--data-binary @request-%06llu.json \"$url\"; echo\n",
            c->stream ? " -N" : "", (unsigned long long)id);
  }
  if (fclose(script) != 0 && !rc) {
    snprintf(err, errlen, "--dump-requests '%s': write failed", dir);
    rc = VL_EIO;
  }
  return rc;
}

/* What a configuration (a run's, or one phase's) is expected to send and for how long: requests
 * at its mean rate within --duration, or --requests, whichever ends first. *secs is 0 when the
 * time depends on the server (a closed loop stopped by a count). */
static void expect(const vl_config_t *c, double *requests, double *secs) {
  double mean = c->ramp_to >= 0 ? (c->rate + c->ramp_to) / 2 : c->rate;
  double by_time = (double)c->duration_us / 1e6;
  *requests = c->requests ? (double)c->requests : 0;
  *secs = by_time;
  if (mean > 0) {
    if (c->duration_us && (!c->requests || mean * by_time < *requests))
      *requests = mean * by_time;
    else if (c->requests)
      *secs = (double)c->requests / mean;
  } else if (c->requests && c->duration_us) {
    *secs = by_time; /* at most */
  } else if (c->requests) {
    *secs = 0;
  }
}

/* The load of c in words: "50 req/s poisson, at most 256 in flight", "5 to 200 req/s ...",
 * "closed loop, 64 in flight"; without the cap when it is `cap` (said once elsewhere). */
static void load_words(const vl_config_t *c, char *buf, size_t cap, int known_cap) {
  char limit[48] = "";
  const char *per = c->turns_hi ? "conversations/s" : "req/s"; /* --turns: arrivals start them */
  if (c->concurrency != known_cap)
    snprintf(limit, sizeof(limit), ", at most %d in flight", c->concurrency);
  if (c->trace)
    snprintf(buf, cap, "the trace's timestamps at %.6gx (mean %.4g req/s)%s", c->trace_speed,
             c->rate, limit);
  else if (c->rate_auto)
    snprintf(buf, cap, "--rate auto: 70%% of the knee a probe finds at start, %s%s",
             c->arrival_name, limit);
  else if (c->rate <= 0)
    snprintf(buf, cap, "closed loop, %d in flight", c->concurrency);
  else if (c->ramp_to >= 0)
    snprintf(buf, cap, "%.6g to %.6g %s %s%s", c->rate, c->ramp_to, per, c->arrival_name, limit);
  else
    snprintf(buf, cap, "%.6g %s %s%s", c->rate, per, c->arrival_name, limit);
}

/* Every phase (or sweep stage) with its load, stop, expected requests and time, and the total. */
static void describe_phases(const vl_config_t *c, FILE *out) {
  double all_req = 0, all_secs = 0;
  int open_ended = 0, flushes = 0;
  for (int i = 0; i < c->n_phases; i++) {
    double r, t;
    expect(&c->phases[i], &r, &t);
    all_req += r;
    all_secs += t;
    open_ended |= t == 0;
    flushes |= c->phases[i].flush_mode == VL_FLUSH_DRAIN &&
               (c->phases[i].flush_every_n || c->phases[i].flush_every_us);
  }
  fprintf(out, "phases        %d, in turn (at most %d in flight unless said):\n", c->n_phases,
          c->phases[0].concurrency);
  for (int i = 0; i < c->n_phases; i++) {
    const vl_config_t *ph = &c->phases[i];
    char load[160], stop[96] = "";
    double r, t;
    expect(ph, &r, &t);
    load_words(ph, load, sizeof(load), c->phases[0].concurrency);
    if (ph->requests)
      snprintf(stop, sizeof(stop), "%llu requests%s", (unsigned long long)ph->requests,
               ph->duration_us ? " or " : "");
    if (ph->duration_us)
      snprintf(stop + strlen(stop), sizeof(stop) - strlen(stop), "%.6gs",
               (double)ph->duration_us / 1e6);
    fprintf(out, "  %2d %-14s %s, until %s", i + 1, ph->phase_name ? ph->phase_name : "", load,
            stop);
    if (r > 0)
      fprintf(out, ": about %.0f requests", r);
    if (t > 0 && (!ph->duration_us || t < (double)ph->duration_us / 1e6))
      fprintf(out, " in %.6gs", t);
    if (ph->flush_every_n)
      fprintf(out, ", flush every %llu", (unsigned long long)ph->flush_every_n);
    else if (ph->flush_every_us)
      fprintf(out, ", flush every %.6gs", (double)ph->flush_every_us / 1e6);
    fputc('\n', out);
  }
  fprintf(out, "expected      about %.0f requests", all_req);
  if (all_secs > 0)
    fprintf(out, " in %.6gs%s", all_secs, open_ended ? " plus the closed-loop phases" : "");
  else
    fprintf(out, ", for as long as the server takes to answer them");
  if (flushes)
    fprintf(out, ", plus the pauses of drained flushes");
  fputc('\n', out);
}

/* --turns: the conversations, their think time, what caps them, and how many to expect. */
static void describe_turns(const vl_config_t *c, FILE *out) {
  char turns[32], think[96];
  if (c->turns_lo == c->turns_hi)
    snprintf(turns, sizeof(turns), "%d turns", c->turns_lo);
  else
    snprintf(turns, sizeof(turns), "%d-%d turns (uniform)", c->turns_lo, c->turns_hi);
  if (!c->think_us)
    snprintf(think, sizeof(think), "no think time");
  else if (c->think_kind == VL_ARRIVAL_CONSTANT)
    snprintf(think, sizeof(think), "think time %.6gs", (double)c->think_us / 1e6);
  else if (c->think_kind == VL_ARRIVAL_POISSON)
    snprintf(think, sizeof(think), "think time exponential, mean %.6gs", (double)c->think_us / 1e6);
  else
    snprintf(think, sizeof(think), "think time gamma, mean %.6gs, CV %.3g",
             (double)c->think_us / 1e6, c->think_cv);
  fprintf(out,
          "turns         conversations of %s: turn k resends turns 1..k-1, their images and the "
          "replies\n",
          turns);
  fprintf(out, "conversations %s after each reply; at most %d at once, %d turns in flight\n", think,
          c->max_conversations ? c->max_conversations : c->concurrency, c->concurrency);
  double mean = (c->turns_lo + c->turns_hi) / 2.0;
  if (c->requests)
    fprintf(out, "expected      about %.0f conversations for %llu requests\n",
            ceil((double)c->requests / mean), (unsigned long long)c->requests);
  else if (c->rate > 0)
    fprintf(out,
            "expected      about %.0f conversations, up to %.0f requests (turns after --duration "
            "are not sent)\n",
            c->rate * (double)c->duration_us / 1e6, c->rate * (double)c->duration_us / 1e6 * mean);
  fprintf(out, "history       at most %llu bytes of replies per conversation (%llu a reply)\n",
          (unsigned long long)(vl_config_reply_room(c) * (uint64_t)(c->turns_hi - 1)),
          (unsigned long long)vl_config_reply_room(c));
}

/* Lengths over the sampled requests: their prompts' and max_tokens' spread. */
typedef struct {
  uint64_t in_sum, out_sum;
  int in_lo, in_hi, out_lo, out_hi;
} len_sample_t;

/* Counts rp's lengths into ls; returns its prompt's bytes (the text hole's runs). */
static uint64_t len_sample(const vl_plan_t *p, const vl_request_plan_t *rp, len_sample_t *ls) {
  uint64_t bytes = 0;
  if (rp->input_tokens > 0) {
    ls->in_sum += (uint64_t)rp->input_tokens;
    ls->in_lo = VL_MIN(ls->in_lo, rp->input_tokens);
    ls->in_hi = VL_MAX(ls->in_hi, rp->input_tokens);
    vl_seg_t seg[2];
    if (p->lentext && !rp->n_blocks) {
      int k = vl_lentext_prompt(p->lentext, rp->text_at, rp->input_tokens, seg);
      for (int i = 0; i < k; i++)
        bytes += seg[i].n;
    }
  }
  if (rp->max_tokens > 0) {
    ls->out_sum += (uint64_t)rp->max_tokens;
    ls->out_lo = VL_MIN(ls->out_lo, rp->max_tokens);
    ls->out_hi = VL_MAX(ls->out_hi, rp->max_tokens);
  }
  return bytes;
}

/* One length distribution, "LABEL MEAN:SD...: normal, sd ..., in [lo, hi]" or "exactly N", without
 * the line's end. */
static void describe_dist(FILE *out, const char *label, const vl_lengths_dist_t *d) {
  char spec[96];
  vl_lengths_dist_format(d, spec, sizeof(spec));
  fprintf(out, "%s %s: ", label, spec);
  if (d->stddev > 0)
    fprintf(out, "normal, sd %.6g, in [%d, %d]", d->stddev, d->min, d->max);
  else
    fprintf(out, "exactly %d", vl_lengths_dist_max(d));
}

/* What the sampled requests drew of one length. */
static void describe_drawn(FILE *out, uint64_t sum, int lo, int hi, uint64_t sample) {
  if (sum)
    fprintf(out, "              drawn: mean %.1f, %d to %d over %llu requests\n",
            (double)sum / (double)sample, lo, hi, (unsigned long long)sample);
}

/* --input-tokens and --output-tokens: the distributions, how prompts are counted, and what the
 * sampled requests drew. */
static void describe_lengths(const vl_plan_t *p, const len_sample_t *ls, uint64_t sample,
                             FILE *out) {
  const vl_config_t *c = p->cfg;
  if (c->input_tokens.set) {
    describe_dist(out, "input tokens ", &c->input_tokens);
    fprintf(out, ", synthetic text\n");
    describe_drawn(out, ls->in_sum, ls->in_lo, ls->in_hi, sample);
    fprintf(out, "tokenizer     %s\n",
            p->lentext && p->lentext->exact
                ? "the server's (POST /tokenize)"
                : "the server's through POST /tokenize at start, else an estimate (its error "
                  "measured from the server's usage)");
  }
  if (c->output_tokens.set) {
    describe_dist(out, "output tokens", &c->output_tokens);
    fprintf(out, ", as %s%s\n", c->max_completion_tokens ? "max_completion_tokens" : "max_tokens",
            c->ignore_eos ? " (ignore_eos: exact)" : "");
    describe_drawn(out, ls->out_sum, ls->out_lo, ls->out_hi, sample);
  }
}

void vl_plan_describe(const vl_plan_t *p, FILE *out) {
  const vl_config_t *c = p->cfg;
  double secs = (double)c->duration_us / 1e6;
  double total = c->requests ? (double)c->requests : c->rate * secs;
  if (c->requests && c->duration_us && c->rate > 0)
    total = VL_MIN(total, c->rate * secs);
  fprintf(out, "target        %s%s (%d server%s)\n", c->url, c->endpoint, c->n_urls,
          c->n_urls > 1 ? "s" : "");
  if (c->api == VL_API_NATIVE)
    fprintf(out, "api           SGLang native /generate, image placeholder %s\n", p->image_token);
  else
    fprintf(out, "api           OpenAI chat completions\n");
  if (c->n_phases) {
    describe_phases(c, out);
    /* The mix below is counted over the first phase's planned requests. */
    expect(&c->phases[0], &total, &secs);
  } else {
    char load[160];
    load_words(c, load, sizeof(load), -1);
    fprintf(out, "load          %s (%s when full)\n", load,
            c->on_full == VL_ONFULL_DROP ? "drop" : "queue");
  }
  if (c->trace)
    vl_trace_describe(c->trace, c->trace_speed, out);
  if (c->shard_n > 1)
    fprintf(out, "shard         %llu of %llu: every %llu-th request\n",
            (unsigned long long)c->shard_i, (unsigned long long)c->shard_n,
            (unsigned long long)c->shard_n);
  if (!c->n_phases) {
    fprintf(out, "stop          ");
    if (c->requests)
      fprintf(out, "after %llu requests%s", (unsigned long long)c->requests,
              c->duration_us ? " or " : "");
    if (c->duration_us)
      fprintf(out, "after %.6gs", secs);
    fputc('\n', out);
    if (c->turns_hi)
      ; /* said with the turns */
    else if (total > 0)
      fprintf(out, "expected      %.0f requests (warm-up %llu)\n", total,
              (unsigned long long)c->warmup);
    else if (c->rate_auto)
      fprintf(out, "expected      as many requests as the rate found sends in %.6gs\n", secs);
    else
      fprintf(out, "expected      as many requests as the server answers in %.6gs\n", secs);
    if (c->rate_auto)
      fprintf(out,
              "probe         first: at most %d short stages of these requests (a closed loop, "
              "then doubling rates, bisected), in none of the run's figures\n",
              VL_RATEAUTO_MAX_STAGES);
  }
  char limit[32] = "per request";
  if (!p->max_tokens_hole)
    snprintf(limit, sizeof(limit), "%d", c->max_tokens);
  if (p->text_hole)
    fprintf(out, "requests      synthetic prompts, ");
  else
    fprintf(out, "requests      %zu prompts, ", p->prompts->n);
  fprintf(out, "%s %s, %s\n", c->max_completion_tokens ? "max_completion_tokens" : "max_tokens",
          limit, c->stream ? "streamed" : "not streamed");
  if (c->turns_hi)
    describe_turns(c, out);
  if (p->extra)
    fprintf(out, "extra fields  %s%s\n", p->extra,
            c->api == VL_API_NATIVE ? " (sampling fields in sampling_params)" : "");
  if (vl_slo_any(&c->slo)) {
    char spec[128];
    vl_slo_format(&c->slo, spec, sizeof(spec));
    fprintf(out, "slo           %s, goodput reported%s\n", spec,
            !c->stream && (c->slo.ttft_us || c->slo.tpot_us)
                ? "; not streamed: every request meets ttft and tpot"
                : "");
    if (c->min_goodput >= 0)
      fprintf(out, "threshold     goodput at least %.6g/s\n", c->min_goodput);
  }
  if (c->n_percentiles) {
    fprintf(out, "percentiles  ");
    for (int i = 0; i < c->n_percentiles; i++) {
      char name[24];
      vl_slo_pct_name(c->percentiles[i], name, sizeof(name));
      fprintf(out, " p%s", name);
    }
    fputc('\n', out);
  }

  /* The mix, counted over the planned requests (or a sample of 100000 ids). */
  uint64_t sample = total > 0 ? (uint64_t)VL_MIN(total, 100000.0) : 100000;
  uint64_t with_images = 0, images = 0, bytes = 0, body_bytes = 0, repeats = 0;
  len_sample_t ls = {.in_lo = INT_MAX, .out_lo = INT_MAX};
  for (uint64_t id = 0; id < sample; id++) {
    vl_request_plan_t rp;
    vl_plan_draw(p, id, &rp);
    const vl_template_t *t = vl_plan_template(p, &rp);
    for (int i = 0; i <= t->n_holes; i++)
      body_bytes += t->piece_len[i];
    body_bytes += len_sample(p, &rp, &ls);
    if (!rp.n_images)
      continue;
    with_images++;
    images += (uint64_t)rp.n_images;
    for (int k = 0; k < rp.n_images; k++) {
      repeats += rp.reuse[k] >= 0;
      bytes += p->pool->img[rp.image[k]].bytes;
      body_bytes += p->pool->img[rp.image[k]].uri_len;
    }
  }
  double scale = total > 0 ? total / (double)sample : 0;
  describe_lengths(p, &ls, sample, out);
  if (!p->pool) {
    fprintf(out, "images        none (text only)\n");
  } else {
    char count[32];
    if (c->images_lo == c->images_hi)
      snprintf(count, sizeof(count), "%d image%s", c->images_lo, c->images_lo == 1 ? "" : "s");
    else
      snprintf(count, sizeof(count), "%d-%d images", c->images_lo, c->images_hi);
    fprintf(out, "mix           %.1f%% of requests with %s (%s), %.1f%% text only\n",
            100.0 * (double)with_images / (double)sample, count,
            c->image_placement == VL_PLACE_BEFORE  ? "before the text"
            : c->image_placement == VL_PLACE_AFTER ? "after the text"
                                                   : "either side",
            100.0 * (double)(sample - with_images) / (double)sample);
    fprintf(out, "pool          %zu images from %s, %.1f MB in memory (largest %.2f MB)\n",
            p->pool->n, c->images_dir ? c->images_dir : "synthetic content",
            (double)p->pool->total_bytes / 1e6, (double)p->pool->max_bytes / 1e6);
    size_t png = 0;
    for (size_t i = 0; i < p->pool->n; i++)
      png += p->pool->img[i].fmt == VL_IMG_PNG;
    fprintf(out, "pool formats  png %zu, jpeg %zu; sizes", png, p->pool->n - png);
    for (size_t i = 0; i < p->pool->n && i < 8; i++)
      fprintf(out, " %dx%d", p->pool->img[i].w, p->pool->img[i].h);
    if (p->pool->n > 8)
      fprintf(out, " ...");
    fputc('\n', out);
    if (c->unique_images)
      fprintf(out, "unique        every image stamped and re-encoded on worker threads\n");
    if (c->image_reuse > 0 && images > 0)
      fprintf(out,
              "reuse         %.1f%% of images repeat one of the last %d unique images sent "
              "(%.0f repeats expected)\n",
              100.0 * (double)repeats / (double)images, VL_IMAGE_REUSE_WINDOW,
              (double)repeats * scale);
    if (total > 0)
      fprintf(out, "expected      %.0f images, %.1f MB of images\n", (double)images * scale,
              (double)bytes * scale / 1e6);
  }
  if (total > 0)
    fprintf(out, "expected      %.1f MB of request bodies\n", (double)body_bytes * scale / 1e6);
  if (c->flush_every_n || c->flush_every_us) {
    fprintf(out, "flushes       %s every ", c->flush_mode == VL_FLUSH_DRAIN ? "drained" : "inline");
    if (c->flush_every_n)
      fprintf(out, "%llu requests", (unsigned long long)c->flush_every_n);
    else
      fprintf(out, "%.6gs", (double)c->flush_every_us / 1e6);
    if (c->flush_every_n && total > 0)
      fprintf(out, " (%.0f flushes)", total / (double)c->flush_every_n);
    fputc('\n', out);
  }
  if (c->report)
    fprintf(out, "report        %s: an HTML page at the end%s\n", c->report,
            vl_monitor_spec_empty(&c->monitor) ? "" : ", the memory plot drawn by gnuplot");
}
