/* The trace reader: Mooncake's JSONL or a CSV into rows in time order, every row checked. */
#include "vlmload/trace.h"
#include "vlmload/body.h"
#include "vlmload/common.h"
#include "vlmload/csvin.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Rows being read: grown while parsing, then sorted into the trace. */
typedef struct {
  vl_trace_row_t *rows;
  double *ts; /* each row's timestamp as written */
  size_t n, cap;
  uint64_t *hashes;
  size_t n_hashes, cap_hashes;
  int has_images;
} rows_t;

static void rows_free(rows_t *b) {
  free(b->rows);
  free(b->ts);
  free(b->hashes);
}

static vl_trace_row_t *rows_add(rows_t *b, double ts) {
  if (b->n == b->cap) {
    b->cap = b->cap ? b->cap * 2 : 256;
    b->rows = vl_xrealloc(b->rows, b->cap * sizeof(*b->rows));
    b->ts = vl_xrealloc(b->ts, b->cap * sizeof(*b->ts));
  }
  b->ts[b->n] = ts;
  vl_trace_row_t *r = &b->rows[b->n++];
  memset(r, 0, sizeof(*r));
  r->hash = b->n_hashes;
  return r;
}

static void hash_add(rows_t *b, uint64_t id) {
  if (b->n_hashes == b->cap_hashes) {
    b->cap_hashes = b->cap_hashes ? b->cap_hashes * 2 : 1024;
    b->hashes = vl_xrealloc(b->hashes, b->cap_hashes * sizeof(*b->hashes));
  }
  b->hashes[b->n_hashes++] = id;
}

static int say(char *err, size_t errlen, const char *name, size_t line, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  snprintf(err, errlen, "%s:%zu: %s", name, line, what);
  return VL_EINVAL;
}

/* A whole number in [lo, hi]. Returns 0, or -1 with *why set. */
static int whole(double v, double lo, double hi, const char **why) {
  if (!isfinite(v) || v != floor(v)) {
    *why = "is not a whole number";
    return -1;
  }
  if (v < lo) {
    *why = lo == 0 ? "is negative" : "is below 1";
    return -1;
  }
  if (v > hi) {
    *why = "is too large";
    return -1;
  }
  return 0;
}

/* Checks the three lengths and the image count of one row, however it was written. */
static int check_row(vl_trace_row_t *r, double ts, double in, double out, double images,
                     const char *const names[4], const char *name, size_t line, char *err,
                     size_t errlen) {
  const char *why = NULL;
  if (!isfinite(ts))
    return say(err, errlen, name, line, "%s is not a number", names[0]);
  if (ts < 0)
    return say(err, errlen, name, line, "%s %.17g is negative", names[0], ts);
  if (whole(in, 0, VL_TRACE_MAX_INPUT, &why) != 0)
    return say(err, errlen, name, line, "%s %.17g %s (0 to %d tokens)", names[1], in, why,
               VL_TRACE_MAX_INPUT);
  if (whole(out, 1, VL_TRACE_MAX_OUTPUT, &why) != 0)
    return say(err, errlen, name, line, "%s %.17g %s (1 to %d tokens)", names[2], out, why,
               VL_TRACE_MAX_OUTPUT);
  if (whole(images, 0, VL_MAX_IMAGES, &why) != 0)
    return say(err, errlen, name, line, "%s %.17g %s (0 to %d)", names[3], images, why,
               VL_MAX_IMAGES);
  r->input_tokens = (int)in;
  r->output_tokens = (int)out;
  r->images = (int)images;
  r->line = (uint32_t)line;
  return 0;
}

static const char *const jsonl_names[4] = {"\"timestamp\"", "\"input_length\"", "\"output_length\"",
                                           "\"images\""};

/* A number field of a row object: 0, or VL_EINVAL with err set (missing when required). */
static int json_number(const cJSON *o, const char *key, int required, double *v, const char *name,
                       size_t line, char *err, size_t errlen) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!f) {
    if (required)
      return say(err, errlen, name, line, "\"%s\" is missing", key);
    return 0;
  }
  if (!cJSON_IsNumber(f))
    return say(err, errlen, name, line, "\"%s\" is not a number", key);
  *v = f->valuedouble;
  return 0;
}

static int parse_jsonl_row(rows_t *b, const char *p, size_t len, const char *name, size_t line,
                           char *err, size_t errlen) {
  const char *end = NULL;
  cJSON *o = cJSON_ParseWithLengthOpts(p, len, &end, 0);
  if (!o)
    return say(err, errlen, name, line, "not JSON (at column %zu)",
               end && end >= p ? (size_t)(end - p) + 1 : (size_t)1);
  int rc = 0;
  /* What follows the object must be blank. */
  for (const char *q = end; q && q < p + len && rc == 0; q++)
    if (*q != ' ' && *q != '\t' && *q != '\r')
      rc = say(err, errlen, name, line, "text after the object (at column %zu)",
               (size_t)(q - p) + 1);
  if (rc == 0 && !cJSON_IsObject(o))
    rc = say(err, errlen, name, line, "not a JSON object");
  double ts = 0, in = 0, out = 0, images = 0;
  if (rc == 0)
    rc = json_number(o, "timestamp", 1, &ts, name, line, err, errlen);
  if (rc == 0)
    rc = json_number(o, "input_length", 1, &in, name, line, err, errlen);
  if (rc == 0)
    rc = json_number(o, "output_length", 1, &out, name, line, err, errlen);
  if (rc == 0)
    rc = json_number(o, "images", 0, &images, name, line, err, errlen);
  if (rc == 0 && cJSON_GetObjectItemCaseSensitive(o, "images"))
    b->has_images = 1;
  vl_trace_row_t *r = NULL;
  if (rc == 0) {
    r = rows_add(b, ts);
    rc = check_row(r, ts, in, out, images, jsonl_names, name, line, err, errlen);
  }
  const cJSON *ids = rc == 0 ? cJSON_GetObjectItemCaseSensitive(o, "hash_ids") : NULL;
  if (ids && !cJSON_IsArray(ids))
    rc = say(err, errlen, name, line, "\"hash_ids\" is not a list");
  const cJSON *id, *list = rc == 0 ? ids : NULL;
  int k = 0;
  cJSON_ArrayForEach(id, list) {
    const char *why = NULL;
    if (!cJSON_IsNumber(id) || whole(id->valuedouble, 0, 9007199254740992.0, &why) != 0) {
      rc = say(err, errlen, name, line, "\"hash_ids\" item %d is not a whole number of 0 or more",
               k + 1);
      break;
    }
    hash_add(b, (uint64_t)id->valuedouble);
    r->n_hash++;
    k++;
  }
  cJSON_Delete(o);
  return rc;
}

static int parse_jsonl(rows_t *b, const char *name, const char *text, size_t len, char *err,
                       size_t errlen) {
  size_t line = 0;
  for (const char *p = text, *end = text + len; p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    line++;
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r'))
      i++;
    /* A UTF-8 byte-order mark before the first line is skipped. */
    if (line == 1 && n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
      i = 3;
    if (i < n) {
      int rc = parse_jsonl_row(b, p + i, n - i, name, line, err, errlen);
      if (rc)
        return rc;
    }
    p += n + (nl != NULL);
  }
  return 0;
}

static const char *const csv_names[4] = {"timestamp_ms", "input_tokens", "output_tokens", "images"};

static int parse_csv(rows_t *b, const char *name, const char *text, size_t len, char *err,
                     size_t errlen) {
  vl_csv_t *csv = NULL;
  int rc = vl_csv_parse(&csv, name, text, len, err, errlen);
  if (rc)
    return rc;
  int col[4];
  for (int k = 0; k < 4; k++) {
    col[k] = vl_csv_col(csv, csv_names[k]);
    if (col[k] < 0 && k < 3) {
      rc =
          say(err, errlen, name, vl_csv_nrows(csv) ? vl_csv_lineno(csv, 0) - 1 : 1,
              "no column %s (want timestamp_ms,input_tokens,output_tokens[,images])", csv_names[k]);
      vl_csv_free(csv);
      return rc;
    }
  }
  b->has_images = col[3] >= 0;
  for (size_t i = 0; i < vl_csv_nrows(csv) && rc == 0; i++) {
    size_t line = vl_csv_lineno(csv, i);
    double v[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4 && rc == 0; k++) {
      if (col[k] < 0)
        continue;
      const char *cell = vl_csv_cell(csv, i, (size_t)col[k]);
      int nrc = vl_csv_parse_number(cell, &v[k]);
      if (nrc == VL_ENOENT)
        rc = say(err, errlen, name, line, "%s is empty", csv_names[k]);
      else if (nrc)
        rc = say(err, errlen, name, line, "%s '%.40s' is not a number", csv_names[k], cell);
    }
    if (rc == 0)
      rc = check_row(rows_add(b, v[0]), v[0], v[1], v[2], v[3], csv_names, name, line, err, errlen);
  }
  vl_csv_free(csv);
  return rc;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static vl_trace_format_t format_of(const char *name, const char *text, size_t len) {
  if (ends_with(name, ".jsonl") || ends_with(name, ".ndjson") || ends_with(name, ".json"))
    return VL_TRACE_JSONL;
  if (ends_with(name, ".csv"))
    return VL_TRACE_CSV;
  size_t i = len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
  while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
    i++;
  return i < len && text[i] == '{' ? VL_TRACE_JSONL : VL_TRACE_CSV;
}

/* Sorting: by timestamp, then by file order, which makes qsort stable. */
typedef struct {
  double ts;
  size_t i;
} order_t;

static int by_time(const void *a, const void *b) {
  const order_t *x = a, *y = b;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* Moves the rows read into t in time order, with the offsets and the figures of the whole. */
static void finish(vl_trace_t *t, rows_t *b) {
  order_t *ord = vl_xmalloc(b->n * sizeof(*ord));
  for (size_t i = 0; i < b->n; i++) {
    ord[i].ts = b->ts[i];
    ord[i].i = i;
    if (i && b->ts[i] < b->ts[i - 1])
      t->out_of_order++;
  }
  qsort(ord, b->n, sizeof(*ord), by_time);
  t->n = b->n;
  t->rows = vl_xmalloc(b->n * sizeof(*t->rows));
  t->at_ms = vl_xmalloc(b->n * sizeof(*t->at_ms));
  double t0 = ord[0].ts, in_sum = 0, out_sum = 0;
  t->input_lo = t->output_lo = INT32_MAX;
  for (size_t i = 0; i < b->n; i++) {
    const vl_trace_row_t *r = &b->rows[ord[i].i];
    t->rows[i] = *r;
    t->at_ms[i] = ord[i].ts - t0;
    in_sum += r->input_tokens;
    out_sum += r->output_tokens;
    t->input_lo = VL_MIN(t->input_lo, r->input_tokens);
    t->input_hi = VL_MAX(t->input_hi, r->input_tokens);
    t->output_lo = VL_MIN(t->output_lo, r->output_tokens);
    t->output_hi = VL_MAX(t->output_hi, r->output_tokens);
    if (r->images && (!t->images_lo || r->images < t->images_lo))
      t->images_lo = r->images;
    t->images_hi = VL_MAX(t->images_hi, r->images);
  }
  free(ord);
  t->span_ms = t->at_ms[b->n - 1];
  t->input_mean = in_sum / (double)b->n;
  t->output_mean = out_sum / (double)b->n;
  t->has_images = b->has_images;
  t->hashes = b->hashes;
  t->n_hashes = b->n_hashes;
  b->hashes = NULL;
}

int vl_trace_parse(vl_trace_t *t, const char *name, const char *text, size_t len, char *err,
                   size_t errlen) {
  memset(t, 0, sizeof(*t));
  t->format = format_of(name, text, len);
  rows_t b = {0};
  int rc = t->format == VL_TRACE_JSONL ? parse_jsonl(&b, name, text, len, err, errlen)
                                       : parse_csv(&b, name, text, len, err, errlen);
  if (rc == 0 && b.n == 0) {
    snprintf(err, errlen, "%s: no rows (want %s)", name,
             t->format == VL_TRACE_JSONL
                 ? "one JSON object per line: timestamp, input_length, output_length"
                 : "a header timestamp_ms,input_tokens,output_tokens[,images] and rows");
    rc = VL_EINVAL;
  }
  if (rc == 0 && b.n > UINT32_MAX) {
    snprintf(err, errlen, "%s: more than %u rows", name, UINT32_MAX);
    rc = VL_EINVAL;
  }
  if (rc == 0) {
    finish(t, &b);
    t->path = vl_xstrdup(name);
  }
  rows_free(&b);
  if (rc)
    memset(t, 0, sizeof(*t));
  return rc;
}

int vl_trace_load(vl_trace_t *t, const char *path, char *err, size_t errlen) {
  memset(t, 0, sizeof(*t));
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return VL_EIO;
  }
  size_t cap = 1 << 16, len = 0;
  char *text = vl_xmalloc(cap);
  size_t got;
  while ((got = fread(text + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap)
      text = vl_xrealloc(text, cap *= 2);
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    snprintf(err, errlen, "%s: read error", path);
    free(text);
    return VL_EIO;
  }
  int rc = vl_trace_parse(t, path, text, len, err, errlen);
  free(text);
  return rc;
}

void vl_trace_free(vl_trace_t *t) {
  free(t->path);
  free(t->rows);
  free(t->at_ms);
  free(t->hashes);
  memset(t, 0, sizeof(*t));
}

const char *vl_trace_format_name(vl_trace_format_t f) {
  return f == VL_TRACE_JSONL ? "mooncake jsonl" : "csv";
}

uint64_t vl_trace_due_ns(const vl_trace_t *t, size_t i, double speed) {
  return (uint64_t)llround(t->at_ms[i] * 1e6 / speed);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

size_t vl_trace_shared_prefix_rows(const vl_trace_t *t) {
  /* Every row whose first id is not the first of its kind: the rows with ids less the distinct
   * first ids, counted over the first ids sorted. */
  uint64_t *first = vl_xmalloc((t->n ? t->n : 1) * sizeof(*first));
  size_t n = 0, shared = 0;
  for (size_t i = 0; i < t->n; i++)
    if (t->rows[i].n_hash)
      first[n++] = t->hashes[t->rows[i].hash];
  qsort(first, n, sizeof(*first), cmp_u64);
  for (size_t i = 1; i < n; i++)
    shared += first[i] == first[i - 1];
  free(first);
  return shared;
}

void vl_trace_describe(const vl_trace_t *t, double speed, FILE *out) {
  double span = t->span_ms / 1e3, replay = span / speed;
  int by_name = ends_with(t->path, ".csv") || ends_with(t->path, ".jsonl") ||
                ends_with(t->path, ".ndjson") || ends_with(t->path, ".json");
  fprintf(out, "trace         %s: %s (by %s), %zu row%s\n", t->path,
          vl_trace_format_name(t->format), by_name ? "extension" : "content", t->n,
          t->n == 1 ? "" : "s");
  fprintf(out, "trace time    %.6gs of timestamps, replayed at %.6gx in %.6gs\n", span, speed,
          replay);
  fprintf(out,
          "trace rows    input %d-%d tokens (mean %.0f), max_tokens %d-%d (mean %.0f) from each "
          "row\n",
          t->input_lo, t->input_hi, t->input_mean, t->output_lo, t->output_hi, t->output_mean);
  if (t->n_hashes)
    fprintf(out,
            "trace blocks  %zu hash ids of %d tokens; %zu rows start with a block seen before\n",
            t->n_hashes, VL_TRACE_BLOCK_TOKENS, vl_trace_shared_prefix_rows(t));
  if (t->has_images) {
    size_t with = 0;
    for (size_t i = 0; i < t->n; i++)
      with += t->rows[i].images > 0;
    fprintf(out, "trace images  as each row says: %zu rows with %d-%d images, %zu text only\n",
            with, t->images_lo, t->images_hi, t->n - with);
  }
  if (t->out_of_order)
    fprintf(out,
            "trace order   %zu row%s out of time order in the file, replayed sorted by "
            "timestamp (equal ones in file order)\n",
            t->out_of_order, t->out_of_order == 1 ? "" : "s");
}

cJSON *vl_trace_json(const vl_trace_t *t, double speed) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "file", t->path);
  cJSON_AddStringToObject(o, "format", vl_trace_format_name(t->format));
  cJSON_AddNumberToObject(o, "rows", (double)t->n);
  cJSON_AddNumberToObject(o, "speed", speed);
  cJSON_AddNumberToObject(o, "span_s", t->span_ms / 1e3);
  cJSON_AddNumberToObject(o, "replay_s", t->span_ms / 1e3 / speed);
  cJSON_AddNumberToObject(o, "rows_out_of_order", (double)t->out_of_order);
  cJSON_AddNumberToObject(o, "hash_ids", (double)t->n_hashes);
  cJSON_AddNumberToObject(o, "rows_sharing_prefix", (double)vl_trace_shared_prefix_rows(t));
  cJSON_AddBoolToObject(o, "images_per_row", t->has_images);
  return o;
}

void vl_trace_words(const vl_trace_t *t, double speed, char *buf, size_t cap) {
  snprintf(buf, cap, "%s (%s): %zu row%s over %.2fs at %.6gx", t->path,
           vl_trace_format_name(t->format), t->n, t->n == 1 ? "" : "s", t->span_ms / 1e3, speed);
}
