#include "vlmload/history.h"
#include "vlmload/common.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* The fixed pieces around a reply: the comma after the user message it answers, then the
 * assistant message, then the comma before the next user message. */
static const char reply_head[] = ",{\"role\":\"assistant\",\"content\":\"";
static const char reply_tail[] = "\"},";

int vl_history_init(vl_history_t *h, int max_turns, int max_images, size_t cap) {
  memset(h, 0, sizeof(*h));
  if (max_turns < 1 || max_turns > VL_TURNS_MAX || max_images < 0 || max_images > VL_MAX_IMAGES)
    return VL_EINVAL;
  h->turn = calloc((size_t)max_turns, sizeof(*h->turn));
  h->image = calloc((size_t)(max_turns * VL_MAX(max_images, 1)), sizeof(*h->image));
  h->buf = malloc(VL_MAX(cap, (size_t)1));
  if (!h->turn || !h->image || !h->buf) {
    vl_history_free(h);
    return VL_ENOMEM;
  }
  h->max_turns = max_turns;
  h->max_images = max_images;
  h->cap = cap;
  return 0;
}

void vl_history_free(vl_history_t *h) {
  free(h->turn);
  free(h->image);
  free(h->buf);
  memset(h, 0, sizeof(*h));
}

void vl_history_clear(vl_history_t *h) {
  h->n = 0;
  h->len = 0;
  h->over = 0;
}

/* The first occurrence of the n bytes of needle in [p, p + len), or NULL. */
static const char *find(const char *p, size_t len, const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; i + n <= len; i++)
    if (p[i] == needle[0] && memcmp(p + i, needle, n) == 0)
      return p + i;
  return NULL;
}

/* Inside a JSON string every quote is escaped, so a quote followed by a key name is a key: the
 * first "messages":[ is the list, and the first ],"max_tokens": (or max_completion_tokens) after
 * it closes it. */
int vl_history_span(const vl_template_t *t, size_t *off, size_t *end) {
  if (!t || !t->text)
    return VL_EINVAL;
  size_t len = strlen(t->text);
  const char *m = find(t->text, len, "\"messages\":[");
  if (!m)
    return VL_EINVAL;
  size_t o = (size_t)(m - t->text) + strlen("\"messages\":[");
  const char *e1 = find(t->text + o, len - o, "],\"max_tokens\":");
  const char *e2 = find(t->text + o, len - o, "],\"max_completion_tokens\":");
  const char *e = !e1 ? e2 : !e2 ? e1 : e1 < e2 ? e1 : e2;
  if (!e)
    return VL_EINVAL;
  /* The message lies within the pieces: it starts before the first image, ends after the last. */
  if (o > t->piece_off[0] + t->piece_len[0] || (size_t)(e - t->text) < t->piece_off[t->n_images])
    return VL_EINVAL;
  *off = o;
  *end = (size_t)(e - t->text);
  return 0;
}

int vl_history_user(vl_history_t *h, const vl_template_t *t, const vl_seg_t *images) {
  if (h->n == h->max_turns)
    return VL_E2BIG;
  if (t->n_images > h->max_images)
    return VL_EINVAL;
  vl_history_turn_t *u = &h->turn[h->n];
  if (vl_history_span(t, &u->msg_off, &u->msg_end) != 0)
    return VL_EINVAL;
  u->t = t;
  u->n_images = t->n_images;
  for (int k = 0; k < t->n_images; k++)
    h->image[h->n * h->max_images + k] = images[k];
  u->reply_off = h->len;
  u->reply_len = 0;
  h->n++;
  return 0;
}

size_t vl_history_escape(char *dst, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char e = 0;
    switch (c) {
    case '"':
      e = '"';
      break;
    case '\\':
      e = '\\';
      break;
    case '\b':
      e = 'b';
      break;
    case '\f':
      e = 'f';
      break;
    case '\n':
      e = 'n';
      break;
    case '\r':
      e = 'r';
      break;
    case '\t':
      e = 't';
      break;
    default:
      break;
    }
    if (e) {
      if (dst) {
        dst[o] = '\\';
        dst[o + 1] = e;
      }
      o += 2;
    } else if (c < 0x20) {
      if (dst)
        memcpy(dst + o, (char[6]){'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]}, 6);
      o += 6;
    } else {
      if (dst)
        dst[o] = (char)c;
      o++;
    }
  }
  return o;
}

int vl_history_reply(vl_history_t *h, const char *s, size_t n) {
  if (h->over || h->n == 0)
    return VL_E2BIG;
  size_t need = vl_history_escape(NULL, s, n);
  if (need > h->cap - h->len) {
    h->over = 1;
    return VL_E2BIG;
  }
  vl_history_escape(h->buf + h->len, s, n);
  h->len += need;
  h->turn[h->n - 1].reply_len += need;
  return 0;
}

static void add(vl_body_t *b, const char *p, size_t n) {
  assert(b->n < b->cap);
  b->seg[b->n].p = p;
  b->seg[b->n].n = n;
  b->n++;
  b->size += n;
}

/* The pieces of turn u's template from byte `from` to byte `to` of its text, with its images. */
static void add_pieces(vl_body_t *b, const vl_history_turn_t *u, const vl_seg_t *images,
                       size_t from, size_t to) {
  const vl_template_t *t = u->t;
  for (int i = 0; i <= t->n_images; i++) {
    size_t a = VL_MAX(t->piece_off[i], from);
    size_t z = VL_MIN(t->piece_off[i] + t->piece_len[i], to);
    add(b, t->text + a, z > a ? z - a : 0);
    if (i < t->n_images)
      add(b, images[i].p, images[i].n);
  }
}

void vl_history_fill(const vl_history_t *h, vl_body_t *b) {
  assert(h->n > 0 && b->cap >= vl_history_segs(h->max_turns, h->max_images));
  const vl_history_turn_t *last = &h->turn[h->n - 1];
  b->n = 0;
  b->size = 0;
  add(b, last->t->text, last->msg_off);
  for (int j = 0; j < h->n - 1; j++) {
    const vl_history_turn_t *u = &h->turn[j];
    add_pieces(b, u, &h->image[j * h->max_images], u->msg_off, u->msg_end);
    add(b, reply_head, sizeof(reply_head) - 1);
    add(b, h->buf + u->reply_off, u->reply_len);
    add(b, reply_tail, sizeof(reply_tail) - 1);
  }
  add_pieces(b, last, &h->image[(h->n - 1) * h->max_images], last->msg_off, (size_t)-1);
  vl_body_rewind(b);
}
