/* Request bodies as lists of segments, and the JSON templates they are made from.
 *
 * A template is a request body serialised once with cJSON, cut where each image's data URI goes:
 * an OpenAI chat-completions body (image_url parts beside the text part), or SGLang's native
 * /generate body (the text with one placeholder per image, the URIs in image_data). A request's
 * body points at the template's pieces and at image data URIs in the pool; curl pulls the bytes
 * through vl_body_read, so no request body is ever copied or concatenated. Everything a body points
 * at must outlive the transfer; nothing is owned by the body.
 */
#ifndef VLMLOAD_BODY_H
#define VLMLOAD_BODY_H

#include <stddef.h>
#include <stdint.h>

#define VL_MAX_IMAGES 16 /* images one request can carry */
/* Segments of a body made from one template: its pieces and the image URIs between them. A body
 * that needs more (text made of several runs) is set up with a larger capacity. */
#define VL_BODY_TEMPLATE_SEGS (2 * VL_MAX_IMAGES + 1)
/* Lengths (lengths.h): a template's text hole and max_tokens hole add a piece each and the
 * number's segment; the prompt's runs that fill the text hole come on top. */
#define VL_BODY_HOLE_SEGS 3
/* Holes a template can have: its images, the text and max_tokens. */
#define VL_TEMPLATE_HOLES  (VL_MAX_IMAGES + 2)
#define VL_HOLE_TEXT       (-1)
#define VL_HOLE_MAX_TOKENS (-2)

typedef struct vl_seg_s {
  const char *p;
  size_t n;
} vl_seg_t;

typedef struct vl_body_s {
  vl_seg_t *seg; /* cap segments: vl_body_init's, or the caller's own array */
  int cap;
  int n;         /* segments in use */
  int cur;       /* segment being read */
  size_t off;    /* offset in seg[cur] */
  uint64_t size; /* sum of segment sizes */
} vl_body_t;

struct cJSON;

typedef struct vl_template_params_s {
  const char *model; /* chat only: native bodies name no model */
  const char *prompt;
  int max_tokens; /* max_tokens, or sampling_params.max_new_tokens */
  double temperature;
  int stream;                /* adds "stream": true (chat: and stream_options.include_usage) */
  int n_images;              /* images, 0..VL_MAX_IMAGES */
  int images_first;          /* images (parts, or placeholders) before the text */
  int native;                /* SGLang's /generate body instead of a chat completion */
  const char *image_token;   /* native: the placeholder written into the text once per image */
  int max_completion_tokens; /* chat: the limit is sent as max_completion_tokens, not max_tokens */
  /* --extra-body: a JSON object whose keys are added after vlmload's own, or NULL. Native: a
   * sampling field (vl_template_sampling_key) goes into sampling_params, as do the keys of an
   * object given as "sampling_params"; min_tokens is sent as min_new_tokens. */
  const struct cJSON *extra;
  /* Lengths (lengths.h): the prompt is a hole each request fills with its own text runs (prompt
   * is then unused), and max_tokens (or max_completion_tokens, or max_new_tokens) a hole each
   * request fills with its own number. */
  int text_hole;
  int max_tokens_hole;
} vl_template_params_t;

typedef struct vl_template_s {
  char *text; /* the serialised JSON with the holes cut out; owned */
  int n_images;
  int n_holes; /* the images, and the text and max_tokens holes when asked for, in body order */
  int hole[VL_TEMPLATE_HOLES]; /* what fills hole i: image index (>= 0), VL_HOLE_TEXT (the
                                  prompt's text inside its quotes) or VL_HOLE_MAX_TOKENS (a number,
                                  no quotes) */
  size_t piece_off[VL_TEMPLATE_HOLES + 1];
  size_t piece_len[VL_TEMPLATE_HOLES + 1];
} vl_template_t;

/* Builds a template. Native bodies are {"text", "image_data" (one URI as a string, several as a
 * list, absent with none), "sampling_params": {"max_new_tokens", "temperature"}, "stream"}.
 * Returns 0, VL_EINVAL (bad parameters, a prompt holding a control character, a native image
 * request without a placeholder, one holding U+0001, or extra holding a reserved key) or
 * VL_ENOMEM. */
int vl_template_build(vl_template_t *t, const vl_template_params_t *p);

/* Whether key is one of SGLang's SamplingParams fields (or min_tokens, its chat spelling), which a
 * native body carries in sampling_params. */
int vl_template_sampling_key(const char *key);

/* The first key of extra that vlmload sets itself in a body of that API ("max_tokens",
 * "sampling_params.temperature"), with the option that sets it in *option; NULL when none. Such a
 * key is refused rather than overridden: the measurement depends on those fields. */
const char *vl_template_reserved(const struct cJSON *extra, int native, const char **option);
void vl_template_free(vl_template_t *t);

/* Gives b room for cap segments, allocated once (a request's body is refilled, never regrown).
 * Returns 0 or VL_ENOMEM. */
int vl_body_init(vl_body_t *b, int cap);
void vl_body_free(vl_body_t *b);

/* Sets body to the template's pieces with images[i] (a whole data URI, no quotes) in place of
 * image i. images may be NULL when the template has none. b must have room for
 * 2 * t->n_images + 1 segments. The template must have no text or max_tokens hole. */
void vl_body_fill(vl_body_t *b, const vl_template_t *t, const vl_seg_t *images);

/* What fills a template's holes beyond its images. text writes the prompt's runs (JSON string
 * content, no quotes, nothing to escape) straight into the body's segments, at most room of them,
 * and returns how many it wrote; max_tokens is the number's digits. Both point at memory that
 * outlives the transfer. */
typedef struct vl_body_parts_s {
  const vl_seg_t *images;
  int (*text)(void *ud, vl_seg_t *out, int room);
  void *text_ud;
  vl_seg_t max_tokens;
} vl_body_parts_t;

/* vl_body_fill for a template with any holes: b must have room for every piece and hole, the
 * text's runs included (VL_BODY_TEMPLATE_SEGS + VL_BODY_HOLE_SEGS + the runs at most). */
void vl_body_fill_parts(vl_body_t *b, const vl_template_t *t, const vl_body_parts_t *parts);

/* Rewinds to the first byte. */
void vl_body_rewind(vl_body_t *b);

/* CURLOPT_READFUNCTION with the body as userdata. */
size_t vl_body_read(char *dst, size_t size, size_t nitems, void *userdata);
/* CURLOPT_SEEKFUNCTION with the body as userdata: lets curl resend a body on a fresh connection
 * after a kept-alive one turned out dead. Returns a CURL_SEEKFUNC_* value. */
int vl_body_seek(void *userdata, int64_t offset, int origin);

#endif
