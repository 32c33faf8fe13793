/* Raw images, synthetic content, PNG and JPEG codecs, resizing and stamping.
 *
 * A vl_raw_t holds 8-bit pixels with 1 (gray), 3 (RGB) or 4 (RGBA) channels, rows packed (stride
 * w * channels). Encoders take a raw image and write PNG or JPEG into a growable vl_image_buf_t;
 * decoders recognise the format by its magic bytes, never by a file name, read the header first and
 * refuse an image over a pixel limit before allocating anything for it.
 *
 * Thread safety: every function here may run on any thread (libuv's threadpool does most of the
 * work); a vl_image_codec_t belongs to one thread at a time. Nothing here keeps global state.
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

#define VL_IMAGE_MAX_SIDE          16384     /* largest width or height anything here accepts */
#define VL_IMAGE_MAX_PIXELS        50000000u /* default decode limit, w * h: 50 MP */
#define VL_IMAGE_JPEG_QUALITY      90        /* default JPEG quality */
#define VL_IMAGE_PNG_LEVEL         1         /* default zlib level, see vl_image_encopts_t */
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

/* A codec context: TurboJPEG handles, created on first use and kept for reuse. One thread at a
 * time. Zero-initialise it (or call vl_image_codec_init) and release it with vl_image_codec_free.
 */
typedef struct vl_image_codec_s {
  void *tjc; /* tjhandle for compression */
  void *tjd; /* tjhandle for decompression */
} vl_image_codec_t;

typedef struct vl_image_encopts_s {
  vl_image_fmt_t fmt; /* VL_IMG_PNG or VL_IMG_JPEG */
  /* JPEG quality 1..100; 0 means VL_IMAGE_JPEG_QUALITY. Colour is 4:2:0 subsampled (as cameras
   * write it); 1 channel is written as grayscale JPEG; the alpha of 4 channels is dropped. */
  int quality;
  int progressive; /* JPEG: progressive scans instead of baseline */
  int interlace;   /* PNG: Adam7 */
  /* PNG zlib level 1..9; 0 means VL_IMAGE_PNG_LEVEL. The default is 1 because encoding sits on the
   * unique-image path, where level 1 runs several times faster than zlib's 6 for a few percent more
   * bytes, and the bytes only cross a local network once. PNG colour type follows the channels:
   * gray, RGB or RGBA, 8 bits. */
  int png_level;
} vl_image_encopts_t;

/* Image header facts, read without decoding pixels. */
typedef struct vl_image_info_s {
  vl_image_fmt_t fmt;
  int w, h;
  int channels;    /* what vl_image_decode returns: 1, 3 or 4 */
  int bit_depth;   /* PNG: 1, 2, 4, 8 or 16; JPEG: 8 */
  int color_type;  /* PNG colour type (0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA); JPEG: -1 */
  int interlaced;  /* PNG Adam7, or a progressive JPEG */
  int orientation; /* JPEG Exif orientation 1..8 (1 when absent); PNG: 1 */
} vl_image_info_t;

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

/* Makes sure b can hold cap bytes (keeping its contents). Returns 0 or VL_ENOMEM. */
int vl_image_buf_reserve(vl_image_buf_t *b, size_t cap);
void vl_image_buf_free(vl_image_buf_t *b);

void vl_image_codec_init(vl_image_codec_t *c);
void vl_image_codec_free(vl_image_codec_t *c);

/* --- synthetic content ------------------------------------------------------------------------ */

/* Fills r (already allocated: its w, h and channels say what to draw) with content of the given
 * kind, a function of (kind, seed, w, h, channels) only. RGBA images get a varying alpha. Returns 0
 * or VL_ENOMEM (for a few rows of scratch). */
int vl_image_render(vl_raw_t *r, vl_image_content_t kind, uint64_t seed);

/* The name of a content kind ("photo", "noise", "gradient", "shapes", "mixed"). */
const char *vl_image_content_name(vl_image_content_t kind);
const char *vl_image_fmt_name(vl_image_fmt_t fmt); /* "png", "jpeg", "mixed", "unknown" */

/* --- codecs ----------------------------------------------------------------------------------- */

/* Encodes r into out (out->n set to the encoded length; out grows only when too small). codec may
 * be NULL (a temporary context is used). Returns 0, VL_EINVAL, VL_ENOMEM or VL_EIMAGE. */
int vl_image_encode(vl_image_codec_t *codec, const vl_raw_t *r, const vl_image_encopts_t *o,
                    vl_image_buf_t *out);

/* The largest output vl_image_encode can produce for this image, so that a caller can preallocate
 * (JPEG: TurboJPEG's bound; PNG: zlib's bound plus framing). */
size_t vl_image_encode_bound(int w, int h, int channels, vl_image_fmt_t fmt);

/* The format the bytes start with: PNG signature, JPEG SOI + marker; else VL_IMG_UNKNOWN. */
vl_image_fmt_t vl_image_detect(const uint8_t *p, size_t n);

/* Reads the header only. Returns 0, VL_EIMAGE (not a PNG/JPEG, or a malformed or truncated
 * header) or VL_EINVAL. */
int vl_image_probe(const uint8_t *p, size_t n, vl_image_info_t *info);

/* Decodes a whole PNG or JPEG, found by content, into out as 8-bit gray, RGB or RGBA: palette and
 * low-bit gray are expanded, 16 bits reduced to 8, gray+alpha and transparency chunks become RGBA,
 * CMYK JPEG is refused. The header is checked first: w * h > max_pixels (0 means
 * VL_IMAGE_MAX_PIXELS) or a side over VL_IMAGE_MAX_SIDE returns VL_E2BIG with out untouched and
 * nothing allocated for pixels. The whole stream must decode: truncation, structural damage, a
 * failed PNG CRC or Adler-32, and libjpeg's warnings (such as a premature end of data) return
 * VL_EIMAGE. JPEG carries no checksum, so scrambled entropy data that still decodes passes.
 * out->px is reused when out->cap suffices (its contents are then unspecified after a failure),
 * else reallocated; out must be zeroed or hold a buffer from here. Exif orientation is not applied
 * (see vl_image_orient). */
int vl_image_decode(vl_image_codec_t *codec, const uint8_t *p, size_t n, uint64_t max_pixels,
                    vl_raw_t *out);

/* --- pixel operations ------------------------------------------------------------------------- */

/* Resizes src into dst (allocated here via vl_image_raw_alloc to w x h, src's channels): separable
 * triangle filter widened by the scale factor, so bilinear when enlarging and an area average
 * when shrinking (no aliasing). Fixed-point, no per-pixel libm. Returns 0, VL_EINVAL or VL_ENOMEM.
 */
int vl_image_resize(const vl_raw_t *src, vl_raw_t *dst, int w, int h);

/* Applies an Exif orientation (1..8) in place, so that the pixels look as a viewer shows them; 5..8
 * swap w and h. Returns 0, VL_EINVAL or VL_ENOMEM. */
int vl_image_orient(vl_raw_t *r, int orientation);

/* Writes the 64 bits of n into r as a band of black and white blocks along the top edge, so that
 * different n give different pixels. Blocks are the largest of 16, 8, 4, 2 or 1 pixels whose band
 * (up to 64 blocks to a row) fits the height, aligned to the JPEG block grid: 224x224 gets 16x16
 * blocks in an 80-row band, 1024 wide one 16-row band; with blocks of 8 and more, distinct n stay
 * distinct after JPEG at quality 50 (tested on 224x224). Smaller blocks are exact in PNG and a best
 * effort in JPEG; images of fewer than 64 pixels carry as many bits as they have pixels. Alpha in
 * the band is set opaque. Everything outside the band is left alone, and the band depends on n
 * only, so restamping a buffer overwrites the previous stamp entirely. */
void vl_image_stamp(vl_raw_t *r, uint64_t n);

/* Height in rows of the band vl_image_stamp writes on a w x h image. */
int vl_image_stamp_rows(int w, int h);

/* FNV-1a 64 over the w * h * channels pixel bytes, rows in order. */
uint64_t vl_image_hash(const vl_raw_t *r);

#endif
