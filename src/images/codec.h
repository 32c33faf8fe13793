/* PNG and JPEG codecs, through libpng and TurboJPEG.
 *
 * Encoders take a raw image (image.h) and write PNG or JPEG into a growable vl_image_buf_t;
 * decoders recognise the format by its magic bytes, never by a file name, read the header first and
 * refuse an image over a pixel limit before allocating anything for it.
 *
 * Thread safety: every function here may run on any thread (libuv's threadpool does most of the
 * work); a vl_codec_t belongs to one thread at a time. Nothing here keeps global state.
 */
#ifndef VLMLOAD_CODEC_H
#define VLMLOAD_CODEC_H

#include "vlmload/image.h"

#include <stddef.h>
#include <stdint.h>

/* A codec context: TurboJPEG handles, created on first use and kept for reuse. One thread at a
 * time. Zero-initialise it (or call vl_codec_init) and release it with vl_codec_free.
 */
typedef struct vl_codec_s {
  void *tjc; /* tjhandle for compression */
  void *tjd; /* tjhandle for decompression */
} vl_codec_t;

typedef struct vl_codec_opts_s {
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
} vl_codec_opts_t;

/* Image header facts, read without decoding pixels. */
typedef struct vl_codec_info_s {
  vl_image_fmt_t fmt;
  int w, h;
  int channels;    /* what vl_codec_decode returns: 1, 3 or 4 */
  int bit_depth;   /* PNG: 1, 2, 4, 8 or 16; JPEG: 8 */
  int color_type;  /* PNG colour type (0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA); JPEG: -1 */
  int interlaced;  /* PNG Adam7, or a progressive JPEG */
  int orientation; /* JPEG Exif orientation 1..8 (1 when absent); PNG: 1 */
} vl_codec_info_t;

void vl_codec_init(vl_codec_t *c);
void vl_codec_free(vl_codec_t *c);

/* Encodes r into out (out->n set to the encoded length; out grows only when too small). codec may
 * be NULL (a temporary context is used). Returns 0, VL_EINVAL, VL_ENOMEM or VL_EIMAGE. */
int vl_codec_encode(vl_codec_t *codec, const vl_raw_t *r, const vl_codec_opts_t *o,
                    vl_image_buf_t *out);

/* The largest output vl_codec_encode can produce for this image, so that a caller can preallocate
 * (JPEG: TurboJPEG's bound; PNG: zlib's bound plus framing). */
size_t vl_codec_encode_bound(int w, int h, int channels, vl_image_fmt_t fmt);

/* The format the bytes start with: PNG signature, JPEG SOI + marker; else VL_IMG_UNKNOWN. */
vl_image_fmt_t vl_codec_detect(const uint8_t *p, size_t n);

/* Reads the header only. Returns 0, VL_EIMAGE (not a PNG/JPEG, or a malformed or truncated
 * header) or VL_EINVAL. */
int vl_codec_probe(const uint8_t *p, size_t n, vl_codec_info_t *info);

/* Decodes a whole PNG or JPEG, found by content, into out as 8-bit gray, RGB or RGBA: palette and
 * low-bit gray are expanded, 16 bits reduced to 8, gray+alpha and transparency chunks become RGBA,
 * CMYK JPEG is refused. The header is checked first: w * h > max_pixels (0 means
 * VL_IMAGE_MAX_PIXELS) or a side over VL_IMAGE_MAX_SIDE returns VL_E2BIG with out untouched and
 * nothing allocated for pixels. The whole stream must decode: truncation, structural damage, a
 * failed PNG CRC or Adler-32, and libjpeg's warnings (such as a premature end of data) return
 * VL_EIMAGE. JPEG carries no checksum, so scrambled entropy data that still decodes passes.
 * out->px is reused when out->cap suffices (its contents are then unspecified after a failure),
 * else reallocated; out must be zeroed or hold a buffer from here. Exif orientation is not applied
 * (see vl_pixels_orient). */
int vl_codec_decode(vl_codec_t *codec, const uint8_t *p, size_t n, uint64_t max_pixels,
                    vl_raw_t *out);

#endif
