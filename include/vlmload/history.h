/* A conversation's history (--turns): the earlier user turns with their images and the server's
 * replies, kept so that turn k's body can be made of segments pointing at them, never a copy.
 *
 * A user turn is kept as its template (the plan's, which outlives the run) and its image URIs
 * (the pool's, or unique images the conversation holds until it ends): its message is the span of
 * the template's text between "messages":[ and the ] that closes the list. A reply is kept as
 * the content the server sent (the streamed deltas one after another, or the message's content),
 * JSON-escaped once as it arrives, in one buffer of fixed capacity allocated with the history.
 *
 * Turn k's body is the template head of turn k up to its message list, then for each earlier turn
 * its user message and {"role":"assistant","content":"<reply>"}, then turn k's own message and the
 * rest of its template: vl_history_segs(max_turns, max_images) segments at most. Chat completions
 * only: a native /generate template has no message list.
 */
#ifndef VLMLOAD_HISTORY_H
#define VLMLOAD_HISTORY_H

#include "vlmload/body.h"

#include <stddef.h>

#define VL_TURNS_MAX 64 /* turns one conversation can have (--turns) */

typedef struct vl_history_turn_s {
  const vl_template_t *t;      /* the user turn's template; not owned */
  size_t msg_off, msg_end;     /* its user message: t->text[msg_off, msg_end) */
  int n_images;                /* its images, in the history's image array */
  size_t reply_off, reply_len; /* the reply to it, escaped, in buf */
} vl_history_turn_t;

typedef struct vl_history_s {
  int max_turns, max_images;
  int n;                   /* user turns held; the last one's reply may still be coming */
  vl_history_turn_t *turn; /* max_turns of them */
  vl_seg_t *image;         /* turn i's images at image[i * max_images]; not owned */
  char *buf;               /* the replies, escaped; owned, cap bytes */
  size_t len, cap;
  int over; /* a reply did not fit: nothing more is kept, and the history is not the server's */
} vl_history_t;

/* The most segments a body made from a history can need. */
static inline int vl_history_segs(int max_turns, int max_images) {
  return 2 + max_turns * (2 * max_images + 4);
}

/* Allocates a history of max_turns turns of at most max_images images each, keeping cap bytes of
 * escaped replies in all. Returns 0, VL_EINVAL or VL_ENOMEM (nothing left to free). */
int vl_history_init(vl_history_t *h, int max_turns, int max_images, size_t cap);
void vl_history_free(vl_history_t *h);
/* Empties h for a new conversation; keeps its memory. */
void vl_history_clear(vl_history_t *h);

/* Finds the user message in a chat template: *off after "messages":[, *end at the ] closing the
 * list. Returns 0, or VL_EINVAL when t is no chat completion body with one message. */
int vl_history_span(const vl_template_t *t, size_t *off, size_t *end);

/* Appends the next user turn: template t (with t->n_images images, at most max_images) and the
 * URIs of its images (copied as segments; the bytes must live until the history is cleared).
 * Returns 0, VL_E2BIG (max_turns turns held already) or VL_EINVAL (not a chat template). */
int vl_history_user(vl_history_t *h, const vl_template_t *t, const vl_seg_t *images);

/* Appends n bytes of the reply to the last user turn (content as the server meant it, UTF-8 not
 * escaped), JSON-escaped. Returns 0, or VL_E2BIG when they do not fit: then none of them is kept
 * and h->over is set (the conversation cannot go on truthfully). */
int vl_history_reply(vl_history_t *h, const char *s, size_t n);

/* Sets b to the body of the last user turn with every earlier turn and its reply before it. b must
 * have room for vl_history_segs(max_turns, max_images) segments; h must hold a turn. */
void vl_history_fill(const vl_history_t *h, vl_body_t *b);

/* JSON-escapes the n bytes at s into dst (a string's inside, without quotes): \" \\ \b \f \n \r
 * \t, \u00XX for the other control characters, every other byte as it is. Returns the length;
 * dst NULL only measures. */
size_t vl_history_escape(char *dst, const char *s, size_t n);

#endif
