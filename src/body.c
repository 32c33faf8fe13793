#include "vlmload/body.h"
#include "vlmload/common.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cJSON escapes U+0001 as the six characters below; prompts may not hold control characters, so
 * the sequence marks image URIs and nothing else. */
#define MARK     "\x01"
#define MARK_ESC "\\u0001"

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
  if (p->n_images == 0) {
    cJSON_AddStringToObject(msg, "content", p->prompt);
  } else {
    cJSON *content = cJSON_AddArrayToObject(msg, "content");
    cJSON *textpart = cJSON_CreateObject();
    cJSON_AddStringToObject(textpart, "type", "text");
    cJSON_AddStringToObject(textpart, "text", p->prompt);
    if (!p->images_first)
      cJSON_AddItemToArray(content, textpart);
    for (int i = 0; i < p->n_images; i++)
      cJSON_AddItemToArray(content, image_part());
    if (p->images_first)
      cJSON_AddItemToArray(content, textpart);
  }
  cJSON_AddNumberToObject(root, "max_tokens", p->max_tokens);
  cJSON_AddNumberToObject(root, "temperature", p->temperature);
  if (p->stream) {
    cJSON_AddBoolToObject(root, "stream", 1);
    cJSON *so = cJSON_AddObjectToObject(root, "stream_options");
    cJSON_AddBoolToObject(so, "include_usage", 1);
  }
  return 0;
}

/* SGLang's GenerateReqInput: the model's placeholders stand where the images go in the text, and
 * image_data carries the images in the same order. Returns 0 or VL_ENOMEM. */
static int native_root(cJSON *root, const vl_template_params_t *p) {
  size_t tok = p->n_images ? strlen(p->image_token) : 0, len = strlen(p->prompt);
  char *text = malloc(tok * (size_t)p->n_images + len + 1), *q = text;
  if (!text)
    return VL_ENOMEM;
  if (!p->images_first) {
    memcpy(q, p->prompt, len);
    q += len;
  }
  for (int i = 0; i < p->n_images; i++, q += tok)
    memcpy(q, p->image_token, tok);
  if (p->images_first) {
    memcpy(q, p->prompt, len);
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
  cJSON_AddNumberToObject(sp, "max_new_tokens", p->max_tokens);
  cJSON_AddNumberToObject(sp, "temperature", p->temperature);
  if (p->stream)
    cJSON_AddBoolToObject(root, "stream", 1);
  return 0;
}

int vl_template_build(vl_template_t *t, const vl_template_params_t *p) {
  memset(t, 0, sizeof(*t));
  if (p->n_images < 0 || p->n_images > VL_MAX_IMAGES || !p->prompt || (!p->native && !p->model) ||
      (p->native && p->n_images && (!p->image_token || !*p->image_token)))
    return VL_EINVAL;
  for (const char *c = p->prompt; *c; c++)
    if ((unsigned char)*c < 0x20 && *c != '\t')
      return VL_EINVAL;
  if (p->native && p->n_images && strchr(p->image_token, MARK[0]))
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

  /* Cut at each marker; the quotes around it stay in the neighbouring pieces. */
  size_t off = 0;
  int found = 0;
  for (;;) {
    char *m = strstr(text + off, MARK_ESC);
    if (!m)
      break;
    if (found == p->n_images) {
      rc = VL_EINVAL;
      goto fail;
    }
    t->piece_off[found] = off;
    t->piece_len[found] = (size_t)(m - (text + off));
    off = (size_t)(m - text) + strlen(MARK_ESC);
    found++;
  }
  if (found != p->n_images) {
    rc = VL_EINVAL;
    goto fail;
  }
  t->piece_off[found] = off;
  t->piece_len[found] = strlen(text + off);
  t->n_images = found;
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

void vl_body_fill(vl_body_t *b, const vl_template_t *t, const vl_seg_t *images) {
  int n = 0;
  uint64_t size = 0;
  for (int i = 0; i <= t->n_images; i++) {
    b->seg[n].p = t->text + t->piece_off[i];
    b->seg[n].n = t->piece_len[i];
    size += b->seg[n++].n;
    if (i < t->n_images) {
      b->seg[n] = images[i];
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
