/* Parsers for the image options: resolutions, formats, content kinds and per-request counts.
 *
 * A resolution spec is a comma-separated list of entries, each a size or a range of sizes with an
 * optional integer weight:
 *
 *   640x480,1280x720,1920x1080        equally likely
 *   1280x720:3,3840x2160:1            weighted (3 in 4 are 720p)
 *   224x224-2048x2048                 width and height drawn independently and uniformly
 *   720p,1080p:2,256x256-512x512:1    named sizes and ranges mix freely
 *
 * A size is WxH (1..VL_IMAGE_MAX_SIDE each) or a 16:9 name: 360p 640x360, 480p 854x480,
 * 720p 1280x720, 1080p 1920x1080, 1440p 2560x1440, 4k 3840x2160. Blanks around entries are
 * allowed. Weights are whole numbers 1..1000000.
 */
#ifndef VLMLOAD_IMAGESPEC_H
#define VLMLOAD_IMAGESPEC_H

#include "vlmload/image.h"
#include "vlmload/rng.h"

#include <stddef.h>
#include <stdint.h>

#define VL_IMAGESPEC_MAX_ENTRIES 64
#define VL_IMAGESPEC_MAX_WEIGHT  1000000

/* The default spec: the native sizes of common vision encoders (CLIP 224 and 336, SigLIP 384,
 * InternVL tiles 448, 512) beside what people actually send (VGA and SVGA photos, XGA, a square
 * megapixel, 720p and 1080p screenshots and video frames), equally weighted. It spans 50k to 2M
 * pixels, so resizers and patch counts vary request to request. */
#define VL_IMAGESPEC_RES_DEFAULT                                                                   \
  "224x224,336x336,384x384,448x448,512x512,640x480,800x600,1024x768,1024x1024,1280x720,1920x1080"

typedef struct vl_imagespec_entry_s {
  int w_lo, w_hi; /* equal for a single size */
  int h_lo, h_hi;
  uint32_t weight;
} vl_imagespec_entry_t;

typedef struct vl_imagespec_res_s {
  int n;
  vl_imagespec_entry_t e[VL_IMAGESPEC_MAX_ENTRIES];
  uint64_t total_weight;
} vl_imagespec_res_t;

/* Parses a resolution spec. Returns 0, or VL_EINVAL with a one-line reason in why (when why is not
 * NULL), such as `entry 2 "0x480": width must be 1..16384`. spec is only written on success. */
int vl_imagespec_res_parse(vl_imagespec_res_t *spec, const char *s, char *why, size_t whylen);

/* Sets spec to VL_IMAGESPEC_RES_DEFAULT. */
void vl_imagespec_res_default(vl_imagespec_res_t *spec);

/* Draws one size: an entry by weight, then width and height uniformly from its ranges. */
void vl_imagespec_res_sample(const vl_imagespec_res_t *spec, vl_rng_t *rng, int *w, int *h);

/* The largest width, height and w * h any draw can produce (for sizing buffers). */
void vl_imagespec_res_max(const vl_imagespec_res_t *spec, int *w, int *h, uint64_t *pixels);

/* Writes the spec in canonical form ("640x480:1,1280x720-1920x1080:3"); returns what snprintf
 * would. */
int vl_imagespec_res_format(const vl_imagespec_res_t *spec, char *buf, size_t n);

/* "png", "jpeg" (or "jpg") and "mixed", case-insensitive. Returns 0 or VL_EINVAL. */
int vl_imagespec_format(const char *s, vl_image_fmt_t *fmt);

/* "photo" (or "photo-like"), "noise", "gradient", "shapes", "mixed". Returns 0 or VL_EINVAL. */
int vl_imagespec_content(const char *s, vl_image_content_t *kind);

/* A count "N" or range "A-B" (as vl_units_range), each between min and max. Returns 0, or
 * VL_EINVAL / VL_ERANGE with a reason in why. */
int vl_imagespec_count(const char *s, int min, int max, int *lo, int *hi, char *why, size_t whylen);

#endif
