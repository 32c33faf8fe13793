/* Raw images and synthetic content: the pixel buffer every image module works on, the growable
 * byte buffer encoders write into, the formats and content kinds with their names, the renderer of
 * synthetic pictures and the pixel hash. The codecs (PNG and JPEG, encode, probe and decode) are in
 * codec.h; resizing, Exif orientation and stamping in pixels.h.
 *
 * A vl_raw_t holds 8-bit pixels with 1 (gray), 3 (RGB) or 4 (RGBA) channels, rows packed (stride
 * w * channels).
 *
 * Thread safety: every function here may run on any thread (libuv's threadpool does most of the
 * work). Nothing here keeps global state.
 */
#ifndef VLMLOAD_IMAGE_H
#define VLMLOAD_IMAGE_H

#include <stddef.h>
#include <stdint.h>

typedef enum vl_image_fmt_e {
  VL_IMG_UNKNOWN = 0,
  VL_IMG_PNG,
  VL_IMG_JPEG,
  VL_IMG_MIXED, /* a request for a per-image choice (pool options only), never an actual format */
} vl_image_fmt_t;

/* Synthetic content. Photo-like (the default, 0) is smooth low-frequency colour with a few hard
 * edges and mild grain, the size class of a camera picture; noise is the worst case for encoded
 * size; gradients and shapes look like screenshots and diagrams to a resizer. Mixed picks one of
 * the four per image (from the render seed). */
typedef enum vl_image_content_e {
  VL_CONTENT_PHOTO = 0,
  VL_CONTENT_NOISE,
  VL_CONTENT_GRADIENT,
  VL_CONTENT_SHAPES,
  VL_CONTENT_MIXED,
} vl_image_content_t;

/* Limits and defaults of the image modules. */
#define VL_IMAGE_MAX_SIDE          16384     /* largest width or height anything here accepts */
#define VL_IMAGE_MAX_PIXELS        50000000u /* default decode limit, w * h: 50 MP */
#define VL_IMAGE_JPEG_QUALITY      90        /* default JPEG quality */
#define VL_IMAGE_PNG_LEVEL         1         /* default zlib level, see vl_codec_opts_t */
#define VL_IMAGE_URI_PREFIX_PNG    "data:image/png;base64,"
#define VL_IMAGE_URI_PREFIX_JPEG   "data:image/jpeg;base64,"
#define VL_IMAGE_URI_PREFIX_MAXLEN 23 /* strlen of the longer one */

typedef struct vl_raw_s {
  uint8_t *px;  /* w * h * channels bytes, owned by whoever allocated it (see vl_image_raw_*) */
  int w, h;     /* 1 .. VL_IMAGE_MAX_SIDE */
  int channels; /* 1, 3 or 4 */
  size_t cap;   /* bytes px can hold; decoders reuse px when it is large enough */
} vl_raw_t;

/* A growable byte buffer. p is malloc'd and owned by the buffer; n bytes are in use. */
typedef struct vl_image_buf_s {
  uint8_t *p;
  size_t n, cap;
} vl_image_buf_t;

/* --- raw images ------------------------------------------------------------------------------- */

/* Sets r to w x h x channels and makes px hold it, reusing px when r->cap suffices (r must be
 * zeroed or previously allocated here). Returns 0, VL_EINVAL (bad size or channels) or VL_ENOMEM;
 * on failure r keeps its old buffer. */
int vl_image_raw_alloc(vl_raw_t *r, int w, int h, int channels);
/* Frees px and zeroes r. */
void vl_image_raw_free(vl_raw_t *r);
static inline size_t vl_image_raw_size(const vl_raw_t *r) {
  return (size_t)r->w * (size_t)r->h * (size_t)r->channels;
}
/* Sets r to w x h x channels held in px: when px is not r->px already, r's old buffer is freed and
 * px (malloc'd, cap bytes, at least w * h * channels) becomes r's; when it is, r->cap stays. For
 * code that fills a buffer of its own before it commits it to r, so that r keeps its old one on a
 * failure. Sizes are not checked. */
void vl_image_raw_adopt(vl_raw_t *r, uint8_t *px, size_t cap, int w, int h, int channels);

/* FNV-1a 64 over the w * h * channels pixel bytes, rows in order. */
uint64_t vl_image_hash(const vl_raw_t *r);

/* Makes sure b can hold cap bytes (keeping its contents). Returns 0 or VL_ENOMEM. */
int vl_image_buf_reserve(vl_image_buf_t *b, size_t cap);
void vl_image_buf_free(vl_image_buf_t *b);

/* --- synthetic content ------------------------------------------------------------------------ */

/* Fills r (already allocated: its w, h and channels say what to draw) with content of the given
 * kind, a function of (kind, seed, w, h, channels) only. RGBA images get a varying alpha. Returns 0
 * or VL_ENOMEM (for a few rows of scratch). */
int vl_image_render(vl_raw_t *r, vl_image_content_t kind, uint64_t seed);

/* The name of a content kind ("photo", "noise", "gradient", "shapes", "mixed"). */
const char *vl_image_content_name(vl_image_content_t kind);
const char *vl_image_fmt_name(vl_image_fmt_t fmt); /* "png", "jpeg", "mixed", "unknown" */

#endif
