#include "lensum.h"
#include "vlmload/text.h"

#include <cjson/cJSON.h>
#include <math.h>

void vl_lensum_figures(const vl_lengths_stats_t *l, vl_lensum_t *out) {
  out->mean_intended = l->requests ? (double)l->intended / (double)l->requests : NAN;
  out->mean_reported = l->reported_n ? (double)l->reported / (double)l->reported_n : NAN;
  out->template_tokens = l->text_n ? (double)l->text_extra / (double)l->text_n : NAN;
  /* Without text-only requests to show the template's share, it is taken as none. */
  double tmpl = isfinite(out->template_tokens) ? out->template_tokens : 0;
  out->vision_total = l->image_n ? (double)l->image_extra - tmpl * (double)l->image_n : NAN;
  out->vision_per_image = l->images ? out->vision_total / (double)l->images : NAN;
  out->mean_max_tokens = l->limited ? (double)l->max_tokens / (double)l->limited : NAN;
  /* What the server counted beyond the tokens meant, on text-only prompts: the measured error of
   * an estimate (the chat template's tokens included). */
  out->text_excess_pct =
      l->text_intended ? 100.0 * (double)l->text_extra / (double)l->text_intended : NAN;
}

int vl_lensum_any(const vl_config_t *c) {
  return c->input_tokens.set || c->output_tokens.set || c->trace; /* a trace: lengths per row */
}

static void add(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

cJSON *vl_lensum_json(const vl_config_t *c, const vl_lengths_stats_t *l) {
  vl_lensum_t f;
  char spec[96];
  vl_lensum_figures(l, &f);
  cJSON *o = cJSON_CreateObject();
  if (c->input_tokens.set) {
    vl_lengths_dist_format(&c->input_tokens, spec, sizeof(spec));
    cJSON_AddStringToObject(o, "input_tokens", spec);
    cJSON_AddStringToObject(o, "tokenizer", l->exact ? "server" : "estimate");
  }
  if (c->output_tokens.set) {
    vl_lengths_dist_format(&c->output_tokens, spec, sizeof(spec));
    cJSON_AddStringToObject(o, "output_tokens", spec);
  }
  if (c->trace) { /* trace replay (issue 16, item 7): the rows' lengths */
    cJSON_AddStringToObject(o, "input_tokens", "trace");
    cJSON_AddStringToObject(o, "tokenizer", l->exact ? "server" : "estimate");
    cJSON_AddStringToObject(o, "output_tokens", "trace");
  }
  cJSON_AddNumberToObject(o, "completed", (double)l->requests);
  cJSON_AddNumberToObject(o, "total_input_text_tokens", (double)l->intended);
  add(o, "mean_input_text_tokens", f.mean_intended);
  cJSON_AddNumberToObject(o, "reported", (double)l->reported_n);
  cJSON_AddNumberToObject(o, "total_prompt_tokens_reported", (double)l->reported);
  add(o, "mean_prompt_tokens_reported", f.mean_reported);
  add(o, "prompt_tokens_reported_over_intended",
      l->reported_intended ? (double)l->reported / (double)l->reported_intended : NAN);
  add(o, "template_tokens", f.template_tokens);
  add(o, "total_input_vision_tokens", f.vision_total);
  add(o, "vision_tokens_per_image", f.vision_per_image);
  add(o, "total_input_tokens",
      (double)l->intended + (isfinite(f.vision_total) ? f.vision_total : 0));
  add(o, "mean_max_tokens", f.mean_max_tokens);
  add(o, "text_prompt_tokens_excess_pct", f.text_excess_pct);
  return o;
}

void vl_lensum_print(FILE *f, const vl_config_t *c, const vl_lengths_stats_t *l, int values) {
  vl_lensum_t s;
  vl_text_wrap_t w;
  char head[32], spec[96];
  vl_lensum_figures(l, &s);
  snprintf(head, sizeof(head), "  %-*s", values - 2, "lengths");
  vl_text_wrap_start(&w, f, VL_TEXT_COLUMNS, values, head);
  if (c->input_tokens.set) {
    vl_lengths_dist_format(&c->input_tokens, spec, sizeof(spec));
    vl_text_wrap_add(&w, "", "input %s (%s)", spec, l->exact ? "server's tokenizer" : "estimated");
    if (isfinite(s.mean_intended))
      vl_text_wrap_add(&w, ": ", "mean %.1f text tokens", s.mean_intended);
    if (isfinite(s.mean_reported))
      vl_text_wrap_add(&w, ", ", "server reported %.1f prompt tokens", s.mean_reported);
    if (isfinite(s.template_tokens))
      vl_text_wrap_add(&w, ", ", "template %.1f", s.template_tokens);
    if (isfinite(s.vision_per_image))
      vl_text_wrap_add(&w, ", ", "vision %.1f per image", s.vision_per_image);
    if (!l->exact && isfinite(s.text_excess_pct))
      vl_text_wrap_add(&w, "; ",
                       "the estimate measured: the server counted %+.1f%% on text-only "
                       "prompts (its chat template included)",
                       s.text_excess_pct);
  }
  if (c->trace) { /* trace replay (issue 16, item 7): the rows' lengths */
    vl_text_wrap_add(&w, "", "input from the trace (%s)",
                     l->exact ? "server's tokenizer" : "estimated");
    if (isfinite(s.mean_intended))
      vl_text_wrap_add(&w, ": ", "mean %.1f text tokens", s.mean_intended);
    if (isfinite(s.mean_reported))
      vl_text_wrap_add(&w, ", ", "server reported %.1f prompt tokens", s.mean_reported);
    if (isfinite(s.mean_max_tokens))
      vl_text_wrap_add(&w, "; ", "output max_tokens from the trace: mean %.1f", s.mean_max_tokens);
  }
  if (c->output_tokens.set) {
    vl_lengths_dist_format(&c->output_tokens, spec, sizeof(spec));
    vl_text_wrap_add(&w, c->input_tokens.set ? "; " : "", "output max_tokens %s", spec);
    if (isfinite(s.mean_max_tokens))
      vl_text_wrap_add(&w, ": ", "mean %.1f", s.mean_max_tokens);
  }
  vl_text_wrap_end(&w);
}
