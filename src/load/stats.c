#include "vlmload/stats.h"
#include "vlmload/common.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* One hour in microseconds: the longest latency kept exactly; longer ones are clamped. */
#define HIGHEST_US VL_STATS_HIGHEST_US
#define SIGDIGITS  VL_STATS_SIGDIGITS

int vl_stats_init(vl_stats_t *s) {
  memset(s, 0, sizeof(*s));
  vl_hist_t *all[] = {
      &s->e2e,      &s->e2e_sent,      &s->ttft,      &s->tpot,           &s->ttfc,
      &s->itl,      &s->send_lag,      &s->iv_e2e,    &s->srv_e2e,        &s->srv_e2e_rest,
      &s->srv_ttft, &s->srv_ttft_rest, &s->probe.e2e, &s->probe.e2e_sent, &s->probe.ttft};
  for (size_t i = 0; i < VL_ARRAY_SIZE(all); i++) {
    int rc = vl_hist_init(all[i], HIGHEST_US, SIGDIGITS);
    if (rc) {
      vl_stats_free(s);
      return rc;
    }
  }
  return 0;
}

int vl_stats_init_urls(vl_stats_t *s, int n) {
  free(s->per_url);
  s->per_url = calloc((size_t)(n > 0 ? n : 1), sizeof(vl_counts_t));
  s->n_urls = n;
  return s->per_url ? 0 : VL_ENOMEM;
}

int vl_stats_init_pool(vl_stats_t *s, size_t n) {
  free(s->per_pool);
  free(s->per_pool_raw);
  s->per_pool = calloc(n ? n : 1, sizeof(uint64_t));
  s->per_pool_raw = calloc(n ? n : 1, sizeof(uint64_t));
  s->n_pool = n;
  return s->per_pool && s->per_pool_raw ? 0 : VL_ENOMEM;
}

void vl_stats_images(vl_stats_t *s, int n, uint64_t bytes, uint64_t pixels) {
  if (n == 0) {
    s->text_only++;
    return;
  }
  s->with_images++;
  s->images_sent += (uint64_t)n;
  s->image_bytes += bytes;
  s->image_pixels += pixels;
}

void vl_stats_free(vl_stats_t *s) {
  free(s->per_pool);
  free(s->per_pool_raw);
  s->per_pool = NULL;
  s->per_pool_raw = NULL;
  free(s->per_url);
  s->per_url = NULL;
  vl_hist_t *all[] = {
      &s->e2e,      &s->e2e_sent,      &s->ttft,      &s->tpot,           &s->ttfc,
      &s->itl,      &s->send_lag,      &s->iv_e2e,    &s->srv_e2e,        &s->srv_e2e_rest,
      &s->srv_ttft, &s->srv_ttft_rest, &s->probe.e2e, &s->probe.e2e_sent, &s->probe.ttft};
  for (size_t i = 0; i < VL_ARRAY_SIZE(all); i++)
    vl_hist_free(all[i]);
}

void vl_stats_sent(vl_stats_t *s, uint64_t intended_ns, uint64_t sent_ns, uint64_t bytes,
                   int measured) {
  s->total.sent++;
  s->iv.sent++;
  s->total.bytes_sent += bytes;
  s->iv.bytes_sent += bytes;
  if (!s->first_send_ns)
    s->first_send_ns = sent_ns;
  s->last_send_ns = sent_ns;
  s->paused_ns_before_last_send = s->paused_ns;
  if (measured) {
    if (!s->measure_start_ns)
      s->measure_start_ns = sent_ns;
    vl_hist_record(&s->send_lag, (int64_t)(sent_ns - intended_ns) / 1000);
  }
}

static void count_done(vl_counts_t *c, const vl_outcome_t *o) {
  if (o->closed) {
    c->cancelled++; /* an outcome of its own: neither ok nor failed */
    return;
  }
  c->completed++;
  if (o->err == VL_ERR_NONE)
    c->ok++;
  else
    c->failed++;
  c->errors[o->err]++;
  if (o->err != VL_ERR_NONE)
    return; /* a failed request's tokens are not the server's output */
  if (o->prompt_tokens > 0)
    c->prompt_tokens += (uint64_t)o->prompt_tokens;
  if (o->completion_tokens > 0)
    c->completion_tokens += (uint64_t)o->completion_tokens;
}

/* The request's row in s->sizes by its largest image, or NULL past VL_STATS_SIZES sizes. */
static vl_sizestat_t *size_row(vl_stats_t *s, const vl_outcome_t *o) {
  int w = 0, h = 0;
  for (int k = 0; o->image_list && k < o->images; k++)
    if ((uint64_t)o->image_list[k].w * (uint64_t)o->image_list[k].h > (uint64_t)w * (uint64_t)h) {
      w = o->image_list[k].w;
      h = o->image_list[k].h;
    }
  for (int i = 0; i < s->n_sizes; i++)
    if (s->sizes[i].w == w && s->sizes[i].h == h)
      return &s->sizes[i];
  if (s->n_sizes == VL_STATS_SIZES)
    return NULL;
  vl_sizestat_t *r = &s->sizes[s->n_sizes++];
  r->w = w;
  r->h = h;
  return r;
}

static void count_size(vl_stats_t *s, const vl_outcome_t *o) {
  if (o->closed)
    return;
  if (o->images && !o->image_list)
    return; /* sizes unknown */
  vl_sizestat_t *r = size_row(s, o);
  if (!r) {
    s->sizes_other++;
    return;
  }
  r->completed++;
  if (o->err == VL_ERR_NONE)
    return;
  r->failed++;
  r->errors[o->err]++;
  if (!r->message[0] && o->error_message) {
    size_t n = VL_MIN(strcspn(o->error_message, "\r\n"), sizeof(r->message) - 1);
    memcpy(r->message, o->error_message, n);
    r->message[n] = '\0';
  }
}

void vl_stats_done(vl_stats_t *s, const vl_outcome_t *o) {
  count_done(&s->total, o);
  s->over_max_tokens += o->err == VL_ERR_NONE && o->over_max_tokens;
  count_size(s, o);
  count_done(&s->iv, o);
  if (o->measured)
    count_done(&s->measured_c, o);
  if (o->url >= 0 && o->url < s->n_urls) {
    count_done(&s->per_url[o->url], o);
    s->per_url[o->url].sent++;
  }
  if (o->err == VL_ERR_CANCELLED)
    return;
  if (o->measured && o->done_ns > s->measure_end_ns)
    s->measure_end_ns = o->done_ns;
  int64_t e2e_us = (int64_t)(o->done_ns - o->intended_ns) / 1000;
  vl_hist_record(&s->iv_e2e, e2e_us);
  s->iv_good += (o->slo_met & VL_SLO_ALL) != 0;
  if (!o->measured) {
    s->warmup++;
    return;
  }
  s->measured++;
  vl_slo_count(&s->slo, o->slo_met);
  if (o->err != VL_ERR_NONE)
    return;
  vl_lengths_stats_t *len = &s->len;
  if (o->max_tokens > 0) {
    len->limited++;
    len->max_tokens += (uint64_t)o->max_tokens;
  }
  if (o->input_tokens > 0) {
    len->requests++;
    len->intended += (uint64_t)o->input_tokens;
    if (o->prompt_tokens >= 0) {
      int64_t extra = o->prompt_tokens - o->input_tokens;
      len->reported_n++;
      len->reported += (uint64_t)o->prompt_tokens;
      len->reported_intended += (uint64_t)o->input_tokens;
      if (o->images) {
        len->image_n++;
        len->images += (uint64_t)o->images;
        len->image_extra += extra;
      } else {
        len->text_n++;
        len->text_intended += (uint64_t)o->input_tokens;
        len->text_extra += extra;
      }
    }
  }
  vl_hist_record(&s->e2e, e2e_us);
  vl_hist_record(&s->e2e_sent, (int64_t)(o->done_ns - o->sent_ns) / 1000);
  if (o->first_token_ns)
    vl_hist_record(&s->ttft, (int64_t)(o->first_token_ns - o->sent_ns) / 1000);
  if (o->first_content_ns)
    vl_hist_record(&s->ttfc, (int64_t)(o->first_content_ns - o->sent_ns) / 1000);
  double tpot;
  if (vl_stats_tpot_us(o, &tpot))
    vl_hist_record(&s->tpot, llround(tpot));
  /* The server's share, and the rest. */
  if (!isnan(o->srv.e2e_ms)) {
    double e2e = (double)(o->done_ns - o->sent_ns) / 1e3, srv = o->srv.e2e_ms * 1e3;
    vl_hist_record(&s->srv_e2e, llround(srv));
    vl_hist_record(&s->srv_e2e_rest, e2e > srv ? llround(e2e - srv) : 0);
  }
  if (!isnan(o->srv.prompt_ms) && o->first_token_ns) {
    double ttft = (double)(o->first_token_ns - o->sent_ns) / 1e3, srv = o->srv.prompt_ms * 1e3;
    vl_hist_record(&s->srv_ttft, llround(srv));
    vl_hist_record(&s->srv_ttft_rest, ttft > srv ? llround(ttft - srv) : 0);
  }
}

int vl_stats_tpot_us(const vl_outcome_t *o, double *us) {
  if (o->err != VL_ERR_NONE || !o->first_token_ns || o->completion_tokens < 2 ||
      o->done_ns < o->first_token_ns)
    return 0;
  *us = (double)(o->done_ns - o->first_token_ns) / 1e3 / (double)(o->completion_tokens - 1);
  return 1;
}

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Whether a and b are the same text but for their numbers: every run of digits in one stands
 * where a run of digits, of any length, stands in the other. */
static int same_but_numbers(const char *a, const char *b) {
  while (*a && *b) {
    if (is_digit(*a) && is_digit(*b)) {
      while (is_digit(*a))
        a++;
      while (is_digit(*b))
        b++;
    } else if (*a++ != *b++) {
      return 0;
    }
  }
  return *a == *b;
}

void vl_stats_message(vl_stats_t *s, vl_errclass_t err, long status, const char *text) {
  char line[VL_STATS_MESSAGE_MAX];
  size_t n = strcspn(text, "\r\n");
  n = VL_MIN(n, sizeof(line) - 1);
  memcpy(line, text, n);
  line[n] = '\0';
  for (int i = 0; i < s->n_messages; i++) {
    vl_errmsg_t *m = &s->messages[i];
    if (m->err == err && m->status == status && same_but_numbers(m->text, line)) {
      m->count++;
      m->numbers_vary |= strcmp(m->text, line) != 0;
      return;
    }
  }
  if (s->n_messages == VL_STATS_MESSAGES) {
    s->messages_other++;
    return;
  }
  vl_errmsg_t *m = &s->messages[s->n_messages++];
  m->err = err;
  m->status = status;
  memcpy(m->text, line, n + 1);
  m->count = 1;
  m->numbers_vary = 0;
}

void vl_stats_interval_reset(vl_stats_t *s) {
  memset(&s->iv, 0, sizeof(s->iv));
  s->iv_good = 0;
  vl_hist_reset(&s->iv_e2e);
}

cJSON *vl_stats_hist_json(const vl_hist_t *h) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "total", (double)h->total);
  cJSON_AddNumberToObject(o, "sum", h->sum);
  if (isfinite(h->sumsq))
    cJSON_AddNumberToObject(o, "sumsq", h->sumsq);
  cJSON_AddNumberToObject(o, "min", (double)vl_hist_min(h));
  cJSON_AddNumberToObject(o, "max", (double)vl_hist_max(h));
  cJSON_AddNumberToObject(o, "clamped", (double)h->clamped);
  cJSON *counts = cJSON_AddArrayToObject(o, "counts");
  for (int i = 0; i < h->counts_len; i++) {
    if (!h->counts[i])
      continue;
    cJSON *pair = cJSON_CreateArray();
    cJSON_AddItemToArray(pair, cJSON_CreateNumber(i));
    cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)h->counts[i]));
    cJSON_AddItemToArray(counts, pair);
  }
  return o;
}

static int num(const cJSON *o, const char *name, double *v) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
  if (!cJSON_IsNumber(it))
    return VL_EJSON;
  *v = it->valuedouble;
  return 0;
}

int vl_stats_hist_add_json(vl_hist_t *h, const cJSON *o) {
  double total, sum, sumsq, mn, mx, clamped;
  const cJSON *counts = cJSON_GetObjectItemCaseSensitive(o, "counts");
  if (num(o, "total", &total) || num(o, "sum", &sum) || num(o, "min", &mn) || num(o, "max", &mx) ||
      num(o, "clamped", &clamped) || !cJSON_IsArray(counts))
    return VL_EJSON;
  uint64_t seen = 0;
  const cJSON *pair;
  /* Check everything before changing h, so a bad file leaves it as it was. */
  cJSON_ArrayForEach(pair, counts) {
    const cJSON *i = cJSON_GetArrayItem(pair, 0), *c = cJSON_GetArrayItem(pair, 1);
    if (!cJSON_IsNumber(i) || !cJSON_IsNumber(c) || i->valuedouble < 0 ||
        i->valuedouble >= h->counts_len || c->valuedouble < 0)
      return VL_EJSON;
    seen += (uint64_t)c->valuedouble;
  }
  if (seen != (uint64_t)total)
    return VL_EJSON;
  if (num(o, "sumsq", &sumsq))
    sumsq = NAN;
  cJSON_ArrayForEach(pair, counts) {
    h->counts[(int)cJSON_GetArrayItem(pair, 0)->valuedouble] +=
        (uint64_t)cJSON_GetArrayItem(pair, 1)->valuedouble;
  }
  if (total > 0) {
    if (h->total == 0 || (int64_t)mn < h->min)
      h->min = (int64_t)mn;
    if (h->total == 0 || (int64_t)mx > h->max)
      h->max = (int64_t)mx;
  }
  h->total += (uint64_t)total;
  h->sum += sum;
  h->sumsq += sumsq;
  h->clamped += (uint64_t)clamped;
  return 0;
}

/* The counters of --histograms, in the order they are written: a request count's (vl_counts_t,
 * also per server and past the warm-up), and the run's (vl_stats_t). A file lacking an optional
 * one (an older vlmload's) adds nothing for it. */
typedef struct {
  const char *name;
  size_t offset; /* of its uint64_t */
  int optional;
} field_t;

static const field_t count_fields[] = {
    {"sent", offsetof(vl_counts_t, sent), 0},
    {"completed", offsetof(vl_counts_t, completed), 0},
    {"ok", offsetof(vl_counts_t, ok), 0},
    {"failed", offsetof(vl_counts_t, failed), 0},
    {"prompt_tokens", offsetof(vl_counts_t, prompt_tokens), 0},
    {"completion_tokens", offsetof(vl_counts_t, completion_tokens), 0},
    {"bytes_sent", offsetof(vl_counts_t, bytes_sent), 0},
};

static const field_t run_fields[] = {
    {"arrivals", offsetof(vl_stats_t, arrivals), 0},
    {"dropped", offsetof(vl_stats_t, dropped), 0},
    {"delayed", offsetof(vl_stats_t, delayed), 0},
    {"unsent", offsetof(vl_stats_t, unsent), 1},
    /* Of one process; summed over processes that ran at once, an upper bound. */
    {"max_in_flight", offsetof(vl_stats_t, max_in_flight), 1},
    {"retried", offsetof(vl_stats_t, retried), 1},
    {"warmup", offsetof(vl_stats_t, warmup), 0},
    {"measured", offsetof(vl_stats_t, measured), 0},
    {"flushes", offsetof(vl_stats_t, flushes), 0},
    /* Requests sent with and without images, and those images (files of an older vlmload lack
     * them). */
    {"text_only", offsetof(vl_stats_t, text_only), 1},
    {"with_images", offsetof(vl_stats_t, with_images), 1},
    {"images_sent", offsetof(vl_stats_t, images_sent), 1},
    {"image_bytes", offsetof(vl_stats_t, image_bytes), 1},
    {"image_pixels", offsetof(vl_stats_t, image_pixels), 1},
    {"images_unique", offsetof(vl_stats_t, images_unique), 1},
    {"images_late", offsetof(vl_stats_t, images_late), 1},
    {"images_repeated", offsetof(vl_stats_t, images_repeated), 1},
    /* --slo: the requests past the warm-up judged, and those meeting ttft, tpot, e2e and all. */
    {"slo_judged", offsetof(vl_stats_t, slo.judged), 1},
    {"slo_met_ttft", offsetof(vl_stats_t, slo.met[0]), 1},
    {"slo_met_tpot", offsetof(vl_stats_t, slo.met[1]), 1},
    {"slo_met_e2e", offsetof(vl_stats_t, slo.met[2]), 1},
    {"slo_met_all", offsetof(vl_stats_t, slo.met[3]), 1},
    /* Lengths (vl_lengths_stats_t); the signed sums and the tokenizer travel beside them. */
    {"len_requests", offsetof(vl_stats_t, len.requests), 1},
    {"len_intended", offsetof(vl_stats_t, len.intended), 1},
    {"len_limited", offsetof(vl_stats_t, len.limited), 1},
    {"len_max_tokens", offsetof(vl_stats_t, len.max_tokens), 1},
    {"len_reported_n", offsetof(vl_stats_t, len.reported_n), 1},
    {"len_reported", offsetof(vl_stats_t, len.reported), 1},
    {"len_reported_intended", offsetof(vl_stats_t, len.reported_intended), 1},
    {"len_text_n", offsetof(vl_stats_t, len.text_n), 1},
    {"len_text_intended", offsetof(vl_stats_t, len.text_intended), 1},
    {"len_image_n", offsetof(vl_stats_t, len.image_n), 1},
    {"len_images", offsetof(vl_stats_t, len.images), 1},
};

/* Adds the fields o holds to the struct at base; or, with base NULL, only checks that o holds
 * every field that is not optional. Returns 0 or VL_EJSON (a field missing, nothing added). */
static int fields_add(void *base, const field_t *fields, size_t n, const cJSON *o) {
  double v;
  for (size_t i = 0; i < n; i++) {
    int missing = num(o, fields[i].name, &v) != 0;
    if (!base && missing && !fields[i].optional)
      return VL_EJSON;
    if (base && !missing)
      *(uint64_t *)((char *)base + fields[i].offset) += (uint64_t)v;
  }
  return 0;
}

static void fields_json(cJSON *o, const void *base, const field_t *fields, size_t n) {
  for (size_t i = 0; i < n; i++)
    cJSON_AddNumberToObject(o, fields[i].name,
                            (double)*(const uint64_t *)((const char *)base + fields[i].offset));
}

static cJSON *counts_json(const vl_counts_t *c) {
  cJSON *o = cJSON_CreateObject();
  fields_json(o, c, count_fields, VL_ARRAY_SIZE(count_fields));
  cJSON *e = cJSON_AddObjectToObject(o, "errors");
  for (int i = 1; i < VL_ERR__COUNT; i++)
    cJSON_AddNumberToObject(e, vl_errclass_name((vl_errclass_t)i), (double)c->errors[i]);
  return o;
}

static int counts_add(vl_counts_t *c, const cJSON *o) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "errors");
  if (fields_add(NULL, count_fields, VL_ARRAY_SIZE(count_fields), o) || !cJSON_IsObject(e))
    return VL_EJSON;
  fields_add(c, count_fields, VL_ARRAY_SIZE(count_fields), o);
  for (int i = 1; i < VL_ERR__COUNT; i++) {
    double n;
    if (num(e, vl_errclass_name((vl_errclass_t)i), &n) == 0)
      c->errors[i] += (uint64_t)n;
  }
  return 0;
}

/* Requests by image size (s->sizes), for a merge to add up. */
static cJSON *sizes_json(const vl_stats_t *s) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; i < s->n_sizes; i++) {
    const vl_sizestat_t *r = &s->sizes[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "w", r->w);
    cJSON_AddNumberToObject(o, "h", r->h);
    cJSON_AddNumberToObject(o, "completed", (double)r->completed);
    cJSON_AddNumberToObject(o, "failed", (double)r->failed);
    cJSON *e = cJSON_AddObjectToObject(o, "errors");
    for (int k = 1; k < VL_ERR__COUNT; k++)
      if (r->errors[k])
        cJSON_AddNumberToObject(e, vl_errclass_name((vl_errclass_t)k), (double)r->errors[k]);
    cJSON_AddStringToObject(o, "message", r->message);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

/* Adds rows of sizes_json to s; rows of sizes past the first VL_STATS_SIZES to sizes_other. */
static int sizes_add(vl_stats_t *s, const cJSON *arr) {
  const cJSON *o;
  cJSON_ArrayForEach(o, arr) {
    double w, h, completed, failed;
    if (num(o, "w", &w) || num(o, "h", &h) || num(o, "completed", &completed) ||
        num(o, "failed", &failed))
      return VL_EJSON;
    vl_sizestat_t *r = NULL;
    for (int i = 0; i < s->n_sizes && !r; i++)
      if (s->sizes[i].w == (int)w && s->sizes[i].h == (int)h)
        r = &s->sizes[i];
    if (!r && s->n_sizes == VL_STATS_SIZES) {
      s->sizes_other += (uint64_t)completed;
      continue;
    }
    if (!r) {
      r = &s->sizes[s->n_sizes++];
      r->w = (int)w;
      r->h = (int)h;
    }
    r->completed += (uint64_t)completed;
    r->failed += (uint64_t)failed;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "errors");
    for (int k = 1; k < VL_ERR__COUNT; k++) {
      double n;
      if (num(e, vl_errclass_name((vl_errclass_t)k), &n) == 0)
        r->errors[k] += (uint64_t)n;
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "message");
    if (!r->message[0] && cJSON_IsString(m))
      snprintf(r->message, sizeof(r->message), "%s", m->valuestring);
  }
  return 0;
}

cJSON *vl_stats_counters_json(const vl_stats_t *s) {
  cJSON *o = counts_json(&s->total);
  fields_json(o, s, run_fields, VL_ARRAY_SIZE(run_fields));
  cJSON *urls = cJSON_AddArrayToObject(o, "servers");
  for (int i = 0; i < s->n_urls; i++)
    cJSON_AddItemToArray(urls, counts_json(&s->per_url[i]));
  cJSON_AddItemToObject(o, "past_warmup", counts_json(&s->measured_c));
  cJSON_AddNumberToObject(o, "len_text_extra", (double)s->len.text_extra);
  cJSON_AddNumberToObject(o, "len_image_extra", (double)s->len.image_extra);
  cJSON_AddBoolToObject(o, "len_exact", s->len.exact);
  cJSON_AddItemToObject(o, "sizes", sizes_json(s));
  cJSON_AddNumberToObject(o, "sizes_other", (double)s->sizes_other);
  return o;
}

int vl_stats_counters_add_json(vl_stats_t *s, const cJSON *o) {
  if (fields_add(NULL, run_fields, VL_ARRAY_SIZE(run_fields), o) || counts_add(&s->total, o))
    return VL_EJSON;
  fields_add(s, run_fields, VL_ARRAY_SIZE(run_fields), o);
  /* Files of an older vlmload lack it; their requests then count as measured only in total. */
  const cJSON *past = cJSON_GetObjectItemCaseSensitive(o, "past_warmup");
  if (past && counts_add(&s->measured_c, past))
    return VL_EJSON;
  double v;
  if (num(o, "len_text_extra", &v) == 0)
    s->len.text_extra += (int64_t)v;
  if (num(o, "len_image_extra", &v) == 0)
    s->len.image_extra += (int64_t)v;
  /* Shards share the text and the server: one counted in its tokenizer, all were. */
  s->len.exact |= cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "len_exact"));
  /* Requests by image size: files of an older vlmload lack them. */
  if (sizes_add(s, cJSON_GetObjectItemCaseSensitive(o, "sizes")) != 0)
    return VL_EJSON;
  if (num(o, "sizes_other", &v) == 0)
    s->sizes_other += (uint64_t)v;
  const cJSON *urls = cJSON_GetObjectItemCaseSensitive(o, "servers");
  int i = 0;
  const cJSON *u;
  cJSON_ArrayForEach(u, urls) {
    if (i < s->n_urls && counts_add(&s->per_url[i], u))
      return VL_EJSON;
    i++;
  }
  return 0;
}

void vl_stats_lat(const vl_hist_t *h, vl_lat_t *out) {
  out->count = h->total;
  if (!h->total) {
    out->mean = out->std = out->p50 = out->p90 = out->p95 = out->p99 = out->max = out->min = NAN;
    return;
  }
  out->mean = vl_hist_mean(h) / 1e3;
  out->std = vl_hist_stddev(h) / 1e3;
  out->p50 = (double)vl_hist_percentile(h, 50) / 1e3;
  out->p90 = (double)vl_hist_percentile(h, 90) / 1e3;
  out->p95 = (double)vl_hist_percentile(h, 95) / 1e3;
  out->p99 = (double)vl_hist_percentile(h, 99) / 1e3;
  out->max = (double)h->max / 1e3;
  out->min = (double)h->min / 1e3;
}

void vl_stats_record_json(cJSON *o, const vl_stats_t *s) {
  cJSON_AddStringToObject(o, "format", "vlmload-histograms");
  cJSON_AddNumberToObject(o, "version", 1);
  cJSON_AddStringToObject(o, "vlmload_version", VL_VERSION);
  cJSON *layout = cJSON_AddObjectToObject(o, "layout");
  cJSON_AddStringToObject(layout, "unit", "us");
  cJSON_AddNumberToObject(layout, "highest", (double)s->e2e.highest);
  cJSON_AddNumberToObject(layout, "sigdigits", s->e2e.sigdigits);
  cJSON_AddItemToObject(o, "counters", vl_stats_counters_json(s));
  cJSON *metrics = cJSON_AddObjectToObject(o, "metrics");
  cJSON_AddItemToObject(metrics, "e2e", vl_stats_hist_json(&s->e2e));
  cJSON_AddItemToObject(metrics, "e2e_sent", vl_stats_hist_json(&s->e2e_sent));
  cJSON_AddItemToObject(metrics, "ttft", vl_stats_hist_json(&s->ttft));
  cJSON_AddItemToObject(metrics, "tpot", vl_stats_hist_json(&s->tpot));
  cJSON_AddItemToObject(metrics, "first_content", vl_stats_hist_json(&s->ttfc));
  cJSON_AddItemToObject(metrics, "itl", vl_stats_hist_json(&s->itl));
  cJSON_AddItemToObject(metrics, "send_lag", vl_stats_hist_json(&s->send_lag));
  if (s->srv_e2e.total || s->srv_ttft.total) {
    cJSON_AddItemToObject(metrics, "server_e2e", vl_stats_hist_json(&s->srv_e2e));
    cJSON_AddItemToObject(metrics, "server_e2e_rest", vl_stats_hist_json(&s->srv_e2e_rest));
    cJSON_AddItemToObject(metrics, "server_ttft", vl_stats_hist_json(&s->srv_ttft));
    cJSON_AddItemToObject(metrics, "server_ttft_rest", vl_stats_hist_json(&s->srv_ttft_rest));
  }
}

unsigned vl_stats_slo(const vl_slo_t *slo, const vl_outcome_t *o) {
  if (o->err != VL_ERR_NONE)
    return 0;
  unsigned bits = 0;
  /* vLLM counts a TTFT or TPOT it could not measure as 0, which meets any bound. */
  if (!slo->ttft_us || !o->first_token_ns || o->first_token_ns - o->sent_ns <= slo->ttft_us * 1000)
    bits |= VL_SLO_TTFT;
  double tpot;
  if (!slo->tpot_us || !vl_stats_tpot_us(o, &tpot) || tpot <= (double)slo->tpot_us)
    bits |= VL_SLO_TPOT;
  if (!slo->e2e_us || o->done_ns - o->sent_ns <= slo->e2e_us * 1000)
    bits |= VL_SLO_E2E;
  if (bits == (VL_SLO_TTFT | VL_SLO_TPOT | VL_SLO_E2E))
    bits |= VL_SLO_ALL;
  return bits;
}
