/* Chat completions: validating a request body and rendering replies, all through cJSON. The
 * helpers that fill a vl__chat_req_t (fail, text and image accounting, limits) serve generate.c's
 * native requests too. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vl__chat_fail(vl__chat_req_t *c, const char *fmt, ...) {
  va_list ap;
  c->status = 400;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof(c->error), fmt, ap);
  va_end(ap);
}

uint64_t vl__chat_count_chars(const char *s, size_t n) {
  uint64_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += ((unsigned char)s[i] & 0xc0) != 0x80;
  return k;
}

void vl__chat_hash_text(vl__chat_req_t *c, const char *s, size_t n) {
  if (!c->hashed) {
    c->prompt_hash = c->prompt_head = VL__FNV_OFFSET;
    c->hashed = true;
  }
  c->prompt_hash = vl__image_fnv1a(c->prompt_hash, (const uint8_t *)s, n);
  size_t head = VL_MIN(n, VL__PROMPT_HEAD_BYTES - c->head_bytes);
  c->prompt_head = vl__image_fnv1a(c->prompt_head, (const uint8_t *)s, head);
  c->head_bytes += head;
}

static void add_text(vl__chat_req_t *c, const char *s) {
  vl__chat_hash_text(c, s, strlen(s));
  c->text_parts++;
  c->prompt_chars += vl__chat_count_chars(s, strlen(s));
  c->text_tokens += vl__tok_count(s, strlen(s), NULL, 0);
}

int vl__chat_add_image(vl__chat_req_t *c, const char *uri, uint64_t max_pixels, const char *where) {
  vl__image_info_t info;
  char err[160];
  memset(&info, 0, sizeof(info));
  if (vl__image_decode_uri(uri, strlen(uri), max_pixels, &info, err, sizeof(err)) != 0) {
    vl__chat_fail(c, "%s: %s", where, err);
    return -1;
  }
  if (c->nimages == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 4;
    c->images = vl_xrealloc(c->images, c->cap * sizeof(*c->images));
  }
  c->images[c->nimages++] = info;
  return 0;
}

/* Walks the content parts of message i. */
static int walk_parts(vl__chat_req_t *c, const cJSON *parts, uint64_t max_pixels, size_t i) {
  size_t j = 0;
  const cJSON *part;
  cJSON_ArrayForEach(part, parts) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
    if (!cJSON_IsString(type)) {
      vl__chat_fail(c, "messages[%zu].content[%zu]: a part needs a string \"type\"", i, j);
      return -1;
    }
    if (strcmp(type->valuestring, "text") == 0) {
      const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
      if (!cJSON_IsString(text)) {
        vl__chat_fail(c, "messages[%zu].content[%zu]: a text part needs a string \"text\"", i, j);
        return -1;
      }
      add_text(c, text->valuestring);
    } else if (strcmp(type->valuestring, "image_url") == 0) {
      const cJSON *iu = cJSON_GetObjectItemCaseSensitive(part, "image_url");
      const cJSON *url = cJSON_IsObject(iu) ? cJSON_GetObjectItemCaseSensitive(iu, "url") : iu;
      if (!cJSON_IsString(url)) {
        vl__chat_fail(c, "messages[%zu].content[%zu]: an image_url part needs image_url.url", i, j);
        return -1;
      }
      char where[64];
      snprintf(where, sizeof(where), "messages[%zu].content[%zu]", i, j);
      if (vl__chat_add_image(c, url->valuestring, max_pixels, where) != 0)
        return -1;
    } else {
      vl__chat_fail(c, "messages[%zu].content[%zu]: unsupported part type '%.40s'", i, j,
                    type->valuestring);
      return -1;
    }
    j++;
  }
  return 0;
}

int vl__chat_read_limit(vl__chat_req_t *c, const cJSON *root, const char *name, int64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
  *out = -1;
  if (!v || cJSON_IsNull(v))
    return 0;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e15 ||
      v->valuedouble != (double)(int64_t)v->valuedouble) {
    vl__chat_fail(c, "'%s' must be a non-negative integer", name);
    return -1;
  }
  *out = (int64_t)v->valuedouble;
  return 0;
}

cJSON *vl__chat_parse_object(const char *body, size_t len, vl__chat_req_t *c) {
  cJSON *root = cJSON_ParseWithLength(body, len);
  c->max_tokens = -1;
  if (!root) {
    vl__chat_fail(c, "request body is not valid JSON");
  } else if (!cJSON_IsObject(root)) {
    vl__chat_fail(c, "request body must be a JSON object");
    cJSON_Delete(root);
    root = NULL;
  }
  return root;
}

void vl__chat_parse(const char *body, size_t len, uint64_t max_pixels, vl__chat_req_t *c) {
  cJSON *root = vl__chat_parse_object(body, len, c);
  if (!root)
    return;
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  if (cJSON_IsString(model))
    c->model = vl_xstrdup(model->valuestring);
  c->stream = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "stream"));
  const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
  c->include_usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(so, "include_usage"));
  const cJSON *cp = cJSON_GetObjectItemCaseSensitive(root, "cache_prompt");
  c->cache_prompt = cJSON_IsBool(cp) ? cJSON_IsTrue(cp) : -1;
  int64_t a, b;
  if (vl__chat_read_limit(c, root, "max_tokens", &a) != 0 ||
      vl__chat_read_limit(c, root, "max_completion_tokens", &b) != 0)
    goto done;
  c->max_tokens = a < 0 ? b : b < 0 ? a : VL_MIN(a, b);
  static const char *const known[] = {"model",  "messages",       "max_tokens", "temperature",
                                      "stream", "stream_options", NULL};
  c->extra = vl__chat_extra(root, known);

  const cJSON *messages = cJSON_GetObjectItemCaseSensitive(root, "messages");
  if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0) {
    vl__chat_fail(c, "'messages' is required and must be a non-empty array");
    goto done;
  }
  size_t i = 0;
  const cJSON *msg;
  c->roles = cJSON_CreateArray();
  c->assistant = cJSON_CreateArray();
  cJSON_ArrayForEach(msg, messages) {
    c->messages++;
    if (!cJSON_IsObject(msg)) {
      vl__chat_fail(c, "messages[%zu] must be an object", i);
      goto done;
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    /* For the record: each message's role, and what the assistant messages said. */
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
    cJSON_AddItemToArray(c->roles, cJSON_IsString(role) ? cJSON_CreateString(role->valuestring)
                                                        : cJSON_CreateNull());
    if (cJSON_IsString(role) && strcmp(role->valuestring, "assistant") == 0)
      cJSON_AddItemToArray(c->assistant, cJSON_IsString(content)
                                             ? cJSON_CreateString(content->valuestring)
                                             : cJSON_CreateNull());
    if (cJSON_IsString(content)) {
      add_text(c, content->valuestring);
    } else if (cJSON_IsArray(content)) {
      if (walk_parts(c, content, max_pixels, i) != 0)
        goto done;
    } else if (content && !cJSON_IsNull(content)) {
      vl__chat_fail(c, "messages[%zu].content must be a string or a list of parts", i);
      goto done;
    }
    i++;
  }
done:
  cJSON_Delete(root);
}

cJSON *vl__chat_extra(const cJSON *obj, const char *const *known) {
  cJSON *out = NULL;
  const cJSON *e;
  cJSON_ArrayForEach(e, obj) {
    int k = 0;
    while (known[k] && strcmp(known[k], e->string) != 0)
      k++;
    if (known[k])
      continue;
    if (!out)
      out = cJSON_CreateObject();
    cJSON_AddItemToObject(out, e->string, cJSON_Duplicate(e, 1));
  }
  return out;
}

void vl__chat_req_free(vl__chat_req_t *c) {
  free(c->model);
  free(c->images);
  cJSON_Delete(c->extra);
  cJSON_Delete(c->sampling_extra);
  cJSON_Delete(c->roles);
  cJSON_Delete(c->assistant);
  memset(c, 0, sizeof(*c));
}

uint64_t vl__chat_prompt_tokens(const vl__chat_req_t *c) {
  return c->text_tokens + vl__cfg->vision_tokens * (uint64_t)c->nimages;
}

char *vl__chat_print(cJSON *obj, size_t *len) {
  char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
  cJSON_Delete(obj);
  if (s && len)
    *len = strlen(s);
  return s;
}

static cJSON *usage_object(const vl__chat_reply_t *r) {
  cJSON *u = cJSON_CreateObject();
  cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->prompt_tokens);
  cJSON_AddNumberToObject(u, "completion_tokens", (double)r->tokens);
  cJSON_AddNumberToObject(u, "total_tokens", (double)(r->prompt_tokens + r->tokens));
  return u;
}

/* llama-server's "timings" object, added to o when the reply has one. */
static void add_timings(cJSON *o, const vl__chat_reply_t *r) {
  if (!r->timings)
    return;
  const vl__timings_t *t = r->timings;
  cJSON *j = cJSON_AddObjectToObject(o, "timings");
  cJSON_AddNumberToObject(j, "cache_n", (double)t->cache_n);
  cJSON_AddNumberToObject(j, "prompt_n", (double)t->prompt_n);
  cJSON_AddNumberToObject(j, "prompt_ms", t->prompt_ms);
  cJSON_AddNumberToObject(j, "prompt_per_token_ms", t->prompt_n ? t->prompt_ms / t->prompt_n : 0);
  cJSON_AddNumberToObject(j, "predicted_n", (double)t->predicted_n);
  cJSON_AddNumberToObject(j, "predicted_ms", t->predicted_ms);
  cJSON_AddNumberToObject(j, "predicted_per_token_ms",
                          t->predicted_n ? t->predicted_ms / t->predicted_n : 0);
}

/* The fields every completion object and chunk starts with. */
static cJSON *reply_head(const vl__chat_reply_t *r, const char *object) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", r->id);
  cJSON_AddStringToObject(o, "object", object);
  cJSON_AddNumberToObject(o, "created", (double)r->created);
  cJSON_AddStringToObject(o, "model", r->model);
  return o;
}

/* Every later token of a chat reply. */
static const char tok[] = "tok ";

int vl__chat_first_token(const vl__chat_reply_t *r, char *buf, size_t cap) {
  return snprintf(buf, cap, "%s \"q\" \\ \xc3\xa9\n ", r->id);
}

char *vl__chat_content(const vl__chat_reply_t *r) {
  char first[96];
  size_t f = r->tokens ? (size_t)vl__chat_first_token(r, first, sizeof(first)) : 0;
  size_t n = f + (r->tokens ? (size_t)(r->tokens - 1) * (sizeof(tok) - 1) : 0);
  char *content = malloc(n + 1);
  if (!content)
    return NULL;
  memcpy(content, first, f);
  for (size_t i = 1; i < r->tokens; i++)
    memcpy(content + f + (i - 1) * (sizeof(tok) - 1), tok, sizeof(tok) - 1);
  content[n] = '\0';
  return content;
}

char *vl__chat_completion(const vl__chat_reply_t *r, size_t *len) {
  char *content = vl__chat_content(r);
  if (!content)
    return NULL;

  cJSON *o = reply_head(r, "chat.completion");
  cJSON *choices = cJSON_AddArrayToObject(o, "choices");
  cJSON *choice = cJSON_CreateObject();
  cJSON_AddItemToArray(choices, choice);
  cJSON_AddNumberToObject(choice, "index", 0);
  cJSON *message = cJSON_AddObjectToObject(choice, "message");
  cJSON_AddStringToObject(message, "role", "assistant");
  cJSON_AddStringToObject(message, "content", content);
  cJSON_AddNullToObject(choice, "logprobs");
  cJSON_AddStringToObject(choice, "finish_reason", r->finish);
  cJSON_AddItemToObject(o, "usage", usage_object(r));
  add_timings(o, r);
  free(content);
  return vl__chat_print(o, len);
}

static const char *error_type(int status) {
  switch (status) {
  case 404:
    return "not_found_error";
  case 429:
    return "rate_limit_error";
  case 500:
    return "server_error";
  case 503:
    return "service_unavailable_error";
  default:
    return "invalid_request_error";
  }
}

char *vl__chat_error(int status, const char *message, size_t *len) {
  cJSON *o = cJSON_CreateObject();
  cJSON *e = cJSON_AddObjectToObject(o, "error");
  cJSON_AddStringToObject(e, "message", message);
  cJSON_AddStringToObject(e, "type", error_type(status));
  cJSON_AddNullToObject(e, "param");
  cJSON_AddNumberToObject(e, "code", status);
  return vl__chat_print(o, len);
}

/* A chat.completion.chunk with one choice; delta may be NULL for an empty one. */
static cJSON *chunk(const vl__chat_reply_t *r, bool role, const char *content, const char *finish) {
  cJSON *o = reply_head(r, "chat.completion.chunk");
  cJSON *choices = cJSON_AddArrayToObject(o, "choices");
  cJSON *choice = cJSON_CreateObject();
  cJSON_AddItemToArray(choices, choice);
  cJSON_AddNumberToObject(choice, "index", 0);
  cJSON *delta = cJSON_AddObjectToObject(choice, "delta");
  if (role)
    cJSON_AddStringToObject(delta, "role", "assistant");
  if (content)
    cJSON_AddStringToObject(delta, "content", content);
  cJSON_AddNullToObject(choice, "logprobs");
  if (finish)
    cJSON_AddStringToObject(choice, "finish_reason", finish);
  else
    cJSON_AddNullToObject(choice, "finish_reason");
  return o;
}

/* "data: <json>\n\n" appended to *buf (growing it); false when out of memory. */
static bool append_event(char **buf, size_t *len, cJSON *obj) {
  size_t n;
  char *json = vl__chat_print(obj, &n);
  if (!json)
    return false;
  char *grown = realloc(*buf, *len + n + 9);
  if (!grown) {
    free(json);
    return false;
  }
  *buf = grown;
  memcpy(*buf + *len, "data: ", 6);
  memcpy(*buf + *len + 6, json, n);
  memcpy(*buf + *len + 6 + n, "\n\n", 3);
  *len += n + 8;
  free(json);
  return true;
}

int vl__chat_sse_render(const vl__chat_reply_t *r, bool include_usage, vl__chat_sse_t *s) {
  memset(s, 0, sizeof(*s));
  char first[96];
  vl__chat_first_token(r, first, sizeof(first));
  if (!append_event(&s->first, &s->first_len, chunk(r, true, first, NULL)) ||
      !append_event(&s->token, &s->token_len, chunk(r, false, tok, NULL)))
    goto fail;
  /* llama-server's timings ride on the last event before [DONE]. */
  cJSON *fin = chunk(r, false, NULL, r->finish);
  if (!include_usage)
    add_timings(fin, r);
  if (!append_event(&s->tail, &s->tail_len, fin))
    goto fail;
  if (include_usage) {
    cJSON *u = reply_head(r, "chat.completion.chunk");
    cJSON_AddArrayToObject(u, "choices");
    cJSON_AddItemToObject(u, "usage", usage_object(r));
    add_timings(u, r);
    if (!append_event(&s->tail, &s->tail_len, u))
      goto fail;
  }
  static const char done[] = "data: [DONE]\n\n";
  char *grown = realloc(s->tail, s->tail_len + sizeof(done));
  if (!grown)
    goto fail;
  s->tail = grown;
  memcpy(s->tail + s->tail_len, done, sizeof(done));
  s->tail_len += sizeof(done) - 1;
  /* The malformed fault: the first event cut off inside its JSON. */
  s->bad_len = s->first_len / 2;
  if (!(s->bad = malloc(s->bad_len + 3)))
    goto fail;
  memcpy(s->bad, s->first, s->bad_len);
  memcpy(s->bad + s->bad_len, "\n\n", 3);
  s->bad_len += 2;
  return 0;
fail:
  vl__chat_sse_free(s);
  return VL_ENOMEM;
}

void vl__chat_sse_free(vl__chat_sse_t *s) {
  free(s->first);
  free(s->token);
  free(s->bad);
  free(s->tail);
  memset(s, 0, sizeof(*s));
}
