#include "vlmload/body.h"
#include "vlmload/common.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cJSON escapes U+0001 as the six characters below; prompts may not hold control characters, so
 * the sequence marks image URIs and nothing else. */
#define MARK     "\x01"
#define MARK_ESC "\\u0001"
/* The text and max_tokens holes, marked the same way (lengths.h). */
#define MARK_TEXT "\x02"
#define MARK_MAX  "\x03"

static cJSON *image_part(void) {
  cJSON *part = cJSON_CreateObject();
  cJSON_AddStringToObject(part, "type", "image_url");
  cJSON *url = cJSON_AddObjectToObject(part, "image_url");
  cJSON_AddStringToObject(url, "url", MARK);
  return part;
}

/* OpenAI's chat completion: one user message, its content the prompt alone or a list of parts. */
static int chat_root(cJSON *root, const vl_template_params_t *p) {
  cJSON_AddStringToObject(root, "model", p->model);
  cJSON *messages = cJSON_AddArrayToObject(root, "messages");
  cJSON *msg = cJSON_CreateObject();
  cJSON_AddItemToArray(messages, msg);
  cJSON_AddStringToObject(msg, "role", "user");
  const char *prompt = p->text_hole ? MARK_TEXT : p->prompt;
  if (p->n_images == 0) {
    cJSON_AddStringToObject(msg, "content", prompt);
  } else {
    cJSON *content = cJSON_AddArrayToObject(msg, "content");
    cJSON *textpart = cJSON_CreateObject();
    cJSON_AddStringToObject(textpart, "type", "text");
    cJSON_AddStringToObject(textpart, "text", prompt);
    if (!p->images_first)
      cJSON_AddItemToArray(content, textpart);
    for (int i = 0; i < p->n_images; i++)
      cJSON_AddItemToArray(content, image_part());
    if (p->images_first)
      cJSON_AddItemToArray(content, textpart);
  }
  const char *limit = p->max_completion_tokens ? "max_completion_tokens" : "max_tokens";
  if (p->max_tokens_hole)
    cJSON_AddStringToObject(root, limit, MARK_MAX);
  else
    cJSON_AddNumberToObject(root, limit, p->max_tokens);
  cJSON_AddNumberToObject(root, "temperature", p->temperature);
  if (p->stream) {
    cJSON_AddBoolToObject(root, "stream", 1);
    cJSON *so = cJSON_AddObjectToObject(root, "stream_options");
    cJSON_AddBoolToObject(so, "include_usage", 1);
  }
  const cJSON *e;
  cJSON_ArrayForEach(e, p->extra) cJSON_AddItemToObject(root, e->string, cJSON_Duplicate(e, 1));
  return 0;
}

/* SGLang's SamplingParams (python/sglang/srt/sampling/sampling_params.py), and min_tokens. */
static const char *const sampling_keys[] = {"max_new_tokens",
                                            "min_new_tokens",
                                            "min_tokens",
                                            "stop",
                                            "stop_token_ids",
                                            "stop_regex",
                                            "temperature",
                                            "top_p",
                                            "top_k",
                                            "min_p",
                                            "frequency_penalty",
                                            "presence_penalty",
                                            "repetition_penalty",
                                            "ignore_eos",
                                            "skip_special_tokens",
                                            "spaces_between_special_tokens",
                                            "no_stop_trim",
                                            "n",
                                            "json_schema",
                                            "regex",
                                            "ebnf",
                                            "structural_tag",
                                            "custom_params",
                                            "stream_interval",
                                            "logit_bias",
                                            "sampling_seed",
                                            NULL};

int vl_template_sampling_key(const char *key) {
  for (int i = 0; sampling_keys[i]; i++)
    if (strcmp(key, sampling_keys[i]) == 0)
      return 1;
  return 0;
}

typedef struct {
  const char *key, *option;
} reserved_t;

static const reserved_t chat_reserved[] = {
    {"model", "--model"},
    {"messages", "--prompts and the image options"},
    {"max_tokens", "--max-tokens"},
    {"max_completion_tokens", "--max-tokens with --max-completion-tokens"},
    {"temperature", "--temperature"},
    {"stream", "--stream"},
    {"stream_options", "--stream"},
    {NULL, NULL}};

/* Native: top-level keys, then those inside sampling_params (named as such). */
static const reserved_t native_reserved[] = {{"text", "--prompts"},
                                             {"input_ids", "--prompts"},
                                             {"image_data", "the image options"},
                                             {"stream", "--stream"},
                                             {NULL, NULL}};
static const reserved_t native_sampling_reserved[] = {
    {"sampling_params.max_new_tokens", "--max-tokens"},
    {"sampling_params.temperature", "--temperature"},
    {NULL, NULL}};

static const char *find_reserved(const reserved_t *r, const char *key, size_t skip,
                                 const char **option) {
  for (; r->key; r++)
    if (strcmp(r->key + skip, key) == 0) {
      *option = r->option;
      return r->key;
    }
  return NULL;
}

/* The name a native body gives a field of sampling_params. */
static const char *native_sampling_name(const char *key) {
  if (strcmp(key, "min_tokens") == 0)
    return "min_new_tokens";
  if (strcmp(key, "max_tokens") == 0 || strcmp(key, "max_completion_tokens") == 0)
    return "max_new_tokens";
  return key;
}

const char *vl_template_reserved(const cJSON *extra, int native, const char **option) {
  const cJSON *e;
  const char *hit;
  size_t skip = strlen("sampling_params.");
  cJSON_ArrayForEach(e, extra) {
    if (!native) {
      if ((hit = find_reserved(chat_reserved, e->string, 0, option)))
        return hit;
      continue;
    }
    if ((hit = find_reserved(native_reserved, e->string, 0, option)))
      return hit;
    if (strcmp(e->string, "sampling_params") == 0) {
      const cJSON *s;
      if (!cJSON_IsObject(e)) {
        *option = "an object of sampling fields";
        return "sampling_params";
      }
      cJSON_ArrayForEach(s, e) {
        if ((hit = find_reserved(native_sampling_reserved, native_sampling_name(s->string), skip,
                                 option)))
          return hit;
      }
    } else if (vl_template_sampling_key(native_sampling_name(e->string))) {
      if ((hit = find_reserved(native_sampling_reserved, native_sampling_name(e->string), skip,
                               option)))
        return hit;
    }
  }
  return NULL;
}

/* Adds extra's keys to a native body: sampling fields into sp, the rest at the top. */
static void native_extra(cJSON *root, cJSON *sp, const cJSON *extra) {
  const cJSON *e;
  cJSON_ArrayForEach(e, extra) {
    if (strcmp(e->string, "sampling_params") == 0 && cJSON_IsObject(e)) {
      const cJSON *s;
      cJSON_ArrayForEach(s, e) {
        cJSON_DeleteItemFromObjectCaseSensitive(sp, native_sampling_name(s->string));
        cJSON_AddItemToObject(sp, native_sampling_name(s->string), cJSON_Duplicate(s, 1));
      }
    } else if (vl_template_sampling_key(e->string)) {
      cJSON_DeleteItemFromObjectCaseSensitive(sp, native_sampling_name(e->string));
      cJSON_AddItemToObject(sp, native_sampling_name(e->string), cJSON_Duplicate(e, 1));
    } else {
      cJSON_AddItemToObject(root, e->string, cJSON_Duplicate(e, 1));
    }
  }
}

/* SGLang's GenerateReqInput: the model's placeholders stand where the images go in the text, and
 * image_data carries the images in the same order. Returns 0 or VL_ENOMEM. */
static int native_root(cJSON *root, const vl_template_params_t *p) {
  const char *prompt = p->text_hole ? MARK_TEXT : p->prompt;
  size_t tok = p->n_images ? strlen(p->image_token) : 0, len = strlen(prompt);
  char *text = malloc(tok * (size_t)p->n_images + len + 1), *q = text;
  if (!text)
    return VL_ENOMEM;
  if (!p->images_first) {
    memcpy(q, prompt, len);
    q += len;
  }
  for (int i = 0; i < p->n_images; i++, q += tok)
    memcpy(q, p->image_token, tok);
  if (p->images_first) {
    memcpy(q, prompt, len);
    q += len;
  }
  *q = '\0';
  cJSON_AddStringToObject(root, "text", text);
  free(text);
  if (p->n_images == 1) {
    cJSON_AddStringToObject(root, "image_data", MARK);
  } else if (p->n_images > 1) {
    cJSON *list = cJSON_AddArrayToObject(root, "image_data");
    for (int i = 0; i < p->n_images; i++)
      cJSON_AddItemToArray(list, cJSON_CreateString(MARK));
  }
  cJSON *sp = cJSON_AddObjectToObject(root, "sampling_params");
  if (p->max_tokens_hole)
    cJSON_AddStringToObject(sp, "max_new_tokens", MARK_MAX);
  else
    cJSON_AddNumberToObject(sp, "max_new_tokens", p->max_tokens);
  cJSON_AddNumberToObject(sp, "temperature", p->temperature);
  if (p->stream)
    cJSON_AddBoolToObject(root, "stream", 1);
  native_extra(root, sp, p->extra);
  return 0;
}

int vl_template_build(vl_template_t *t, const vl_template_params_t *p) {
  memset(t, 0, sizeof(*t));
  if (p->n_images < 0 || p->n_images > VL_MAX_IMAGES || (!p->prompt && !p->text_hole) ||
      (!p->native && !p->model) ||
      (p->native && p->n_images && (!p->image_token || !*p->image_token)))
    return VL_EINVAL;
  for (const char *c = p->text_hole ? "" : p->prompt; *c; c++)
    if ((unsigned char)*c < 0x20 && *c != '\t')
      return VL_EINVAL;
  if (p->native && p->n_images && strpbrk(p->image_token, MARK MARK_TEXT MARK_MAX))
    return VL_EINVAL;
  const char *option;
  if (p->extra && (!cJSON_IsObject(p->extra) || vl_template_reserved(p->extra, p->native, &option)))
    return VL_EINVAL;

  int rc = VL_ENOMEM;
  cJSON *root = cJSON_CreateObject();
  char *text = NULL;
  if (!root)
    goto fail;
  if ((rc = p->native ? native_root(root, p) : chat_root(root, p)) != 0)
    goto fail;
  rc = VL_ENOMEM;
  text = cJSON_PrintUnformatted(root);
  if (!text)
    goto fail;

  /* Cut at each marker. The quotes around an image's or the text's stay in the neighbouring
   * pieces; max_tokens' go with the marker, the number having none. */
  size_t off = 0, seek = 0;
  int found = 0, images = 0, want = p->n_images + !!p->text_hole + !!p->max_tokens_hole;
  for (;;) {
    char *m = strstr(text + seek, "\\u000");
    if (!m)
      break;
    char kind = m[5];
    seek = (size_t)(m - text) + 6;
    if (kind < '1' || kind > '3')
      continue; /* another control character, escaped by cJSON */
    if (found == want) {
      rc = VL_EINVAL;
      goto fail;
    }
    int quoted = kind == '3';
    t->hole[found] = kind == '1' ? images++ : kind == '2' ? VL_HOLE_TEXT : VL_HOLE_MAX_TOKENS;
    t->piece_off[found] = off;
    t->piece_len[found] = (size_t)(m - (text + off)) - (size_t)quoted;
    off = seek = (size_t)(m - text) + strlen(MARK_ESC) + (size_t)quoted;
    found++;
  }
  if (found != want || images != p->n_images) {
    rc = VL_EINVAL;
    goto fail;
  }
  t->piece_off[found] = off;
  t->piece_len[found] = strlen(text + off);
  t->n_images = images;
  t->n_holes = found;
  t->text = text;
  cJSON_Delete(root);
  return 0;

fail:
  cJSON_free(text);
  cJSON_Delete(root);
  memset(t, 0, sizeof(*t));
  return rc;
}

void vl_template_free(vl_template_t *t) {
  cJSON_free(t->text);
  memset(t, 0, sizeof(*t));
}

int vl_body_init(vl_body_t *b, int cap) {
  memset(b, 0, sizeof(*b));
  b->seg = calloc((size_t)cap, sizeof(vl_seg_t));
  if (!b->seg)
    return VL_ENOMEM;
  b->cap = cap;
  return 0;
}

void vl_body_free(vl_body_t *b) {
  free(b->seg);
  memset(b, 0, sizeof(*b));
}

void vl_body_fill(vl_body_t *b, const vl_template_t *t, const vl_seg_t *images) {
  assert(t->n_holes == t->n_images);
  vl_body_parts_t parts = {.images = images};
  vl_body_fill_parts(b, t, &parts);
}

void vl_body_fill_parts(vl_body_t *b, const vl_template_t *t, const vl_body_parts_t *parts) {
  assert(2 * t->n_holes + 1 <= b->cap);
  int n = 0;
  uint64_t size = 0;
  for (int i = 0; i <= t->n_holes; i++) {
    b->seg[n].p = t->text + t->piece_off[i];
    b->seg[n].n = t->piece_len[i];
    size += b->seg[n++].n;
    if (i == t->n_holes)
      break;
    int h = t->hole[i];
    if (h == VL_HOLE_TEXT) {
      /* Room for the pieces and holes still to come. */
      int room = b->cap - n - 2 * (t->n_holes - i - 1) - 1;
      int k = parts->text(parts->text_ud, b->seg + n, room);
      assert(k >= 0 && k <= room);
      for (int j = 0; j < k; j++)
        size += b->seg[n + j].n;
      n += k;
    } else {
      b->seg[n] = h == VL_HOLE_MAX_TOKENS ? parts->max_tokens : parts->images[h];
      size += b->seg[n++].n;
    }
  }
  b->n = n;
  b->size = size;
  vl_body_rewind(b);
}

void vl_body_rewind(vl_body_t *b) {
  b->cur = 0;
  b->off = 0;
}

size_t vl_body_read(char *dst, size_t size, size_t nitems, void *userdata) {
  vl_body_t *b = userdata;
  size_t room = size * nitems, done = 0;
  while (room > 0 && b->cur < b->n) {
    const vl_seg_t *s = &b->seg[b->cur];
    size_t n = VL_MIN(room, s->n - b->off);
    memcpy(dst + done, s->p + b->off, n);
    done += n;
    room -= n;
    b->off += n;
    if (b->off == s->n) {
      b->cur++;
      b->off = 0;
    }
  }
  return done;
}

int vl_body_seek(void *userdata, int64_t offset, int origin) {
  vl_body_t *b = userdata;
  if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > b->size)
    return CURL_SEEKFUNC_CANTSEEK;
  b->cur = 0;
  b->off = 0;
  uint64_t left = (uint64_t)offset;
  while (b->cur < b->n && left >= b->seg[b->cur].n) {
    left -= b->seg[b->cur].n;
    b->cur++;
  }
  b->off = (size_t)left;
  return CURL_SEEKFUNC_OK;
}
