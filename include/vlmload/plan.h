/* What each request looks like: text or images, which prompt, how many images, where they go,
 * which pool images. Every choice for request `id` is drawn from a random stream of its own, so it
 * depends on the seed and the id only: the same seed gives the same requests, and shards that
 * split the ids agree with one process.
 *
 * The plan owns the body templates (one per prompt, and for image requests one per prompt, image
 * count and placement); bodies point into them, so the plan must outlive every request.
 */
#ifndef VLMLOAD_PLAN_H
#define VLMLOAD_PLAN_H

#include "vlmload/body.h"
#include "vlmload/config.h"
#include "vlmload/imagepool.h"
#include "vlmload/lengths.h"
#include "vlmload/prompts.h"

#include <stdint.h>
#include <stdio.h>

typedef struct vl_plan_s {
  const vl_config_t *cfg;
  const vl_prompts_t *prompts;
  const vl_imagepool_t *pool; /* NULL: text only */
  vl_template_t *text;        /* one per prompt */
  vl_template_t *image;       /* [prompt][count - images_lo][before, after] */
  const char *image_token;    /* --api native: the placeholder per image (static or cfg's) */
  int n_counts;
  char *extra; /* the fields --extra-body and --ignore-eos add, as JSON text; owned; NULL: none */
  /* Lengths (lengths.h). With a text hole every request's prompt is synthetic text of its own
   * input_tokens (the templates then stand for one prompt); with a max_tokens hole every request
   * sends its own max_tokens. Both are set by vl_plan_init from --input-tokens and
   * --output-tokens (a trace sets them too). max_blocks: the most prefix blocks a request
   * carries (0 without blocks), which sizes the bodies (vl_plan_body_cap). */
  const vl_lentext_t *lentext; /* prompts->synthetic; needed with a text hole */
  int text_hole, max_tokens_hole;
  size_t n_prompts; /* prompts the templates are made for: prompts->n, or 1 with a text hole */
  int max_blocks;
} vl_plan_t;

/* One request's choices. */
typedef struct vl_request_plan_s {
  size_t prompt;
  int n_images;                /* 0: text only */
  int images_first;            /* image parts before the text part */
  size_t image[VL_MAX_IMAGES]; /* pool indices */
  /* --image-reuse: per image, negative for a fresh unique image, else a repeat of an image sent
   * before, this in [0, 1) picking which (vl_uniq_repeat). All negative without --image-reuse. */
  double reuse[VL_MAX_IMAGES];
  /* Lengths, drawn after everything above (0 / NULL without them). A trace replay sets them
   * itself after vl_plan_draw, overriding the distributions.
   * input_tokens > 0 (needs the plan's text hole): the prompt is synthetic text of that many
   *   tokens, starting at word text_at of the text, or, with n_blocks > 0, made of the prefix
   *   blocks blocks[0..n_blocks) (vl_lentext_blocks; the array outlives the request).
   * max_tokens > 0 (needs the plan's max_tokens hole): this request's max_tokens. */
  int input_tokens;
  int max_tokens;
  uint64_t text_at;
  const uint64_t *blocks;
  int n_blocks;
} vl_request_plan_t;

/* Digits a max_tokens number takes, with room to spare; the buffer vl_plan_fill writes it to. */
#define VL_PLAN_NUMBER_MAX 16

/* Builds the templates. pool may be NULL (or unused when cfg asks for no images). Returns 0 or a
 * VL_E* code. */
int vl_plan_init(vl_plan_t *p, const vl_config_t *cfg, const char *model,
                 const vl_prompts_t *prompts, const vl_imagepool_t *pool);
void vl_plan_free(vl_plan_t *p);

/* Draws request id's choices. */
void vl_plan_draw(const vl_plan_t *p, uint64_t id, vl_request_plan_t *rp);

/* The template a request's body is made from. */
const vl_template_t *vl_plan_template(const vl_plan_t *p, const vl_request_plan_t *rp);

/* Segments a body of this plan can need: set up each slot's body with this many (the largest over
 * the phases' plans) once, at start. */
int vl_plan_body_cap(const vl_plan_t *p);

/* Fills b with request rp's body: its template, images[k] for its images, its synthetic prompt's
 * runs and its max_tokens, whose digits go to number (VL_PLAN_NUMBER_MAX bytes, owned by the
 * caller and kept until the transfer ends, as b's other segments). */
void vl_plan_fill(const vl_plan_t *p, const vl_request_plan_t *rp, const vl_seg_t *images,
                  char *number, vl_body_t *b);

/* Writes the first n request bodies to dir (request-000000.json ...) with replay.sh, a script that
 * sends them with curl to url + endpoint. The API key is never written: the script reads
 * $OPENAI_API_KEY. Returns 0 or VL_EIO with a one-line reason in err. */
int vl_plan_dump(const vl_plan_t *p, uint64_t n, const char *dir, char *err, size_t errlen);

/* Prints what a run would do: load shape, mix, images, pool, flushes, expected totals. */
void vl_plan_describe(const vl_plan_t *p, FILE *out);

#endif
