/* SGLang's native /generate: validating a request body and rendering replies.
 *
 * A request is parsed into the same vl__chat_req_t as a chat request, so that request.c plans,
 * times, faults and records both alike. Replies are SGLang's shapes: {"text", "meta_info"} whole,
 * or a stream of such objects, each with the text so far and the counts so far (SGLang's default,
 * without --incremental-streaming-output), then "data: [DONE]". Stream events differ token by
 * token, so they are written as they are sent, into one buffer per request, with snprintf: every
 * string in them is the mock's own and needs no escaping. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char tok[] = "tok ";
#define TOK_LEN (sizeof(tok) - 1)

/* Counts the placeholders in text (non-overlapping) and the code points of everything else. */
static void scan_text(vl__chat_req_t *c, const char *text, const char *token) {
  size_t tlen = strlen(token);
  const char *p = text, *hit;
  vl__chat_hash_text(c, text, strlen(text));
  c->text_parts = 1;
  while ((hit = strstr(p, token)) != NULL) {
    c->prompt_chars += vl__chat_count_chars(p, (size_t)(hit - p));
    c->text_tokens += vl__tok_count(p, (size_t)(hit - p), NULL, 0);
    c->placeholders++;
    p = hit + tlen;
  }
  c->prompt_chars += vl__chat_count_chars(p, strlen(p));
  c->text_tokens += vl__tok_count(p, strlen(p), NULL, 0);
}

static int add_uri(vl__chat_req_t *c, const cJSON *uri, uint64_t max_pixels, int i) {
  char where[32];
  if (i < 0)
    snprintf(where, sizeof(where), "image_data");
  else
    snprintf(where, sizeof(where), "image_data[%d]", i);
  if (!cJSON_IsString(uri)) {
    vl__chat_fail(c, "%s: want a data URI string", where);
    return -1;
  }
  return vl__chat_add_image(c, uri->valuestring, max_pixels, where);
}

void vl__gen_parse(const char *body, size_t len, uint64_t max_pixels, const char *image_token,
                   vl__chat_req_t *c) {
  cJSON *root = vl__chat_parse_object(body, len, c);
  if (!root)
    return;
  c->stream = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "stream"));
  const cJSON *sp = cJSON_GetObjectItemCaseSensitive(root, "sampling_params");
  if (sp && !cJSON_IsNull(sp) && !cJSON_IsObject(sp)) {
    vl__chat_fail(c, "'sampling_params' must be an object");
    goto done;
  }
  if (cJSON_IsObject(sp) && vl__chat_read_limit(c, sp, "max_new_tokens", &c->max_tokens) != 0)
    goto done;
  static const char *const known[] = {"text", "image_data", "sampling_params", "stream", NULL};
  static const char *const known_sampling[] = {"max_new_tokens", "temperature", NULL};
  c->extra = vl__chat_extra(root, known);
  c->sampling_extra = vl__chat_extra(sp, known_sampling);
  const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text");
  if (!cJSON_IsString(text)) {
    vl__chat_fail(c, "'text' is required and must be a string (batches are not mocked)");
    goto done;
  }
  scan_text(c, text->valuestring, image_token);
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "image_data");
  if (cJSON_IsArray(data)) {
    int i = 0;
    const cJSON *uri;
    cJSON_ArrayForEach(uri, data) {
      if (add_uri(c, uri, max_pixels, i++) != 0)
        goto done;
    }
  } else if (data && !cJSON_IsNull(data) && add_uri(c, data, max_pixels, -1) != 0) {
    goto done;
  }
  if (c->placeholders != c->nimages)
    vl__chat_fail(c, "the text holds %u image placeholders (%.60s) for %zu images", c->placeholders,
                  image_token, c->nimages);
done:
  cJSON_Delete(root);
}

/* meta_info after k tokens; the finish reason only with the last. Returns snprintf's count. */
static int meta_text(const vl__chat_reply_t *r, uint64_t k, char *out, size_t n) {
  char finish[64] = "null";
  if (k == r->tokens && strcmp(r->finish, "length") == 0)
    snprintf(finish, sizeof(finish), "{\"type\":\"length\",\"length\":%llu}",
             (unsigned long long)r->tokens);
  else if (k == r->tokens)
    snprintf(finish, sizeof(finish), "{\"type\":\"stop\",\"matched\":2}");
  return snprintf(out, n,
                  "{\"id\":\"%s\",\"finish_reason\":%s,\"prompt_tokens\":%llu,"
                  "\"completion_tokens\":%llu,\"cached_tokens\":0}",
                  r->id, finish, (unsigned long long)r->prompt_tokens, (unsigned long long)k);
}

/* Writes prefix, {"text":"<k tokens>","meta_info":META} and suffix into *buf, growing it. Returns
 * the length, or 0 when out of memory. */
static size_t render(const vl__chat_reply_t *r, uint64_t k, const char *prefix, const char *suffix,
                     char **buf, size_t *cap) {
  char meta[256];
  int m = meta_text(r, k, meta, sizeof(meta));
  if (m < 0 || (size_t)m >= sizeof(meta))
    return 0;
  size_t pre = strlen(prefix), suf = strlen(suffix);
  size_t need = pre + 9 + (size_t)k * TOK_LEN + 14 + (size_t)m + 1 + suf + 1;
  if (need > *cap) {
    char *grown = realloc(*buf, need);
    if (!grown)
      return 0;
    *buf = grown;
    *cap = need;
  }
  char *p = *buf;
  memcpy(p, prefix, pre);
  p += pre;
  memcpy(p, "{\"text\":\"", 9);
  p += 9;
  for (uint64_t i = 0; i < k; i++, p += TOK_LEN)
    memcpy(p, tok, TOK_LEN);
  memcpy(p, "\",\"meta_info\":", 14);
  p += 14;
  memcpy(p, meta, (size_t)m);
  p += m;
  *p++ = '}';
  memcpy(p, suffix, suf + 1);
  p += suf;
  return (size_t)(p - *buf);
}

char *vl__gen_completion(const vl__chat_reply_t *r, size_t *len) {
  char *buf = NULL;
  size_t cap = 0;
  *len = render(r, r->tokens, "", "", &buf, &cap);
  if (*len == 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

size_t vl__gen_event(const vl__chat_reply_t *r, uint64_t k, char **buf, size_t *cap) {
  return render(r, k, "data: ", "\n\n", buf, cap);
}

int vl__gen_sse_render(const vl__chat_reply_t *r, vl__chat_sse_t *s) {
  static const char done[] = "data: [DONE]\n\n";
  memset(s, 0, sizeof(*s));
  if (!(s->tail = malloc(sizeof(done))))
    goto fail;
  memcpy(s->tail, done, sizeof(done));
  s->tail_len = sizeof(done) - 1;
  /* The malformed fault: the first event cut off inside its JSON. */
  size_t cap = 0, n = vl__gen_event(r, 1, &s->bad, &cap);
  if (n == 0)
    goto fail;
  s->bad_len = n / 2;
  memcpy(s->bad + s->bad_len, "\n\n", 3);
  s->bad_len += 2;
  return 0;
fail:
  vl__chat_sse_free(s);
  return VL_ENOMEM;
}

char *vl__gen_sse_whole(const vl__chat_reply_t *r, uint64_t ntok, size_t *len) {
  static const char done[] = "data: [DONE]\n\n";
  char *out = NULL, *ev = NULL;
  size_t n = 0, evcap = 0;
  for (uint64_t k = 1; k <= ntok + 1; k++) {
    size_t m = k <= ntok ? vl__gen_event(r, k, &ev, &evcap) : sizeof(done) - 1;
    const char *src = k <= ntok ? ev : done;
    char *grown = m ? realloc(out, n + m + 1) : NULL;
    if (!grown) {
      free(out);
      free(ev);
      return NULL;
    }
    out = grown;
    memcpy(out + n, src, m);
    n += m;
  }
  free(ev);
  out[n] = '\0';
  *len = n;
  return out;
}
