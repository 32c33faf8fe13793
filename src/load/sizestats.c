#include "vlmload/sizestats.h"
#include "vlmload/common.h"
#include "vlmload/text.h"

#include <stdlib.h>
#include <string.h>

/* The order rows are shown in: the largest share failed first, then the most requests, then the
 * most pixels. */
static int by_failing(const void *a, const void *b) {
  const vl_sizestat_t *x = *(const vl_sizestat_t *const *)a, *y = *(const vl_sizestat_t *const *)b;
  double fx = x->completed ? (double)x->failed / (double)x->completed : 0;
  double fy = y->completed ? (double)y->failed / (double)y->completed : 0;
  if (fx != fy)
    return fx > fy ? -1 : 1;
  if (x->completed != y->completed)
    return x->completed > y->completed ? -1 : 1;
  uint64_t px = (uint64_t)x->w * (uint64_t)x->h, py = (uint64_t)y->w * (uint64_t)y->h;
  return (px < py) - (px > py);
}

/* The rows of s in that order, as a new array of s->n_sizes pointers. */
static const vl_sizestat_t **ordered(const vl_stats_t *s) {
  const vl_sizestat_t **rows = vl_xcalloc((size_t)s->n_sizes + 1, sizeof(*rows));
  for (int i = 0; i < s->n_sizes; i++)
    rows[i] = &s->sizes[i];
  qsort(rows, (size_t)s->n_sizes, sizeof(*rows), by_failing);
  return rows;
}

static void size_name(const vl_sizestat_t *r, char *out, size_t n) {
  if (r->w || r->h)
    snprintf(out, n, "%dx%d", r->w, r->h);
  else
    snprintf(out, n, "text-only");
}

cJSON *vl_sizestats_json(const vl_stats_t *s) {
  cJSON *arr = cJSON_CreateArray();
  const vl_sizestat_t **rows = ordered(s);
  for (int i = 0; i < s->n_sizes; i++) {
    const vl_sizestat_t *r = rows[i];
    char name[32];
    size_name(r, name, sizeof(name));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "size", name);
    cJSON_AddNumberToObject(o, "width", r->w);
    cJSON_AddNumberToObject(o, "height", r->h);
    cJSON_AddNumberToObject(o, "completed", (double)r->completed);
    cJSON_AddNumberToObject(o, "ok", (double)(r->completed - r->failed));
    cJSON_AddNumberToObject(o, "failed", (double)r->failed);
    cJSON *e = cJSON_AddObjectToObject(o, "errors");
    for (int k = 1; k < VL_ERR__COUNT; k++)
      if (r->errors[k])
        cJSON_AddNumberToObject(e, vl_errclass_name((vl_errclass_t)k), (double)r->errors[k]);
    if (r->message[0]) {
      /* Cut between characters and with control bytes escaped: valid UTF-8 whatever came. */
      char shown[4 * VL_STATS_MESSAGE_MAX];
      vl_text_shown(shown, sizeof(shown), r->message);
      cJSON_AddStringToObject(o, "message", shown);
    } else {
      cJSON_AddNullToObject(o, "message");
    }
    cJSON_AddItemToArray(arr, o);
  }
  if (s->sizes_other) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "size", "other");
    cJSON_AddNumberToObject(o, "completed", (double)s->sizes_other);
    cJSON_AddItemToArray(arr, o);
  }
  free(rows);
  return arr;
}

int vl_sizestats_worth_printing(const vl_stats_t *s) {
  return s->total.failed > 0 && s->n_sizes + (s->sizes_other > 0) > 1;
}

/* The column where the summary's values start (summary.c's VALUES). */
#define VALUES 13

void vl_sizestats_print(FILE *f, const vl_stats_t *s) {
  vl_text_wrap_t w;
  vl_text_wrap_start(&w, f, VL_TEXT_COLUMNS, VALUES, "  by size    ");
  const vl_sizestat_t **rows = ordered(s);
  for (int i = 0; i < s->n_sizes; i++) {
    const vl_sizestat_t *r = rows[i];
    char name[32], classes[256] = "";
    size_name(r, name, sizeof(name));
    size_t n = 0;
    for (int k = 1; k < VL_ERR__COUNT && n < sizeof(classes); k++)
      if (r->errors[k])
        n += (size_t)snprintf(classes + n, sizeof(classes) - n, "%s%s %llu", n ? ", " : " (",
                              vl_errclass_name((vl_errclass_t)k), (unsigned long long)r->errors[k]);
    if (n && n < sizeof(classes) - 1)
      strcat(classes, ")");
    vl_text_wrap_add(&w, i ? ", " : "", "%s failed %llu of %llu%s", name,
                     (unsigned long long)r->failed, (unsigned long long)r->completed, classes);
  }
  if (s->sizes_other)
    vl_text_wrap_add(&w, ", ", "other sizes %llu (not counted apart)",
                     (unsigned long long)s->sizes_other);
  vl_text_wrap_end(&w);
  free(rows);
}
