/* Pixel operations on raw images (image.h): resizing, Exif orientation and the stamp that makes
 * each unique image's pixels differ.
 *
 * Thread safety: every function here may run on any thread. Nothing here keeps global state.
 */
#ifndef VLMLOAD_PIXELS_H
#define VLMLOAD_PIXELS_H

#include "vlmload/image.h"

#include <stdint.h>

/* Resizes src into dst (allocated here via vl_image_raw_alloc to w x h, src's channels): separable
 * triangle filter widened by the scale factor, so bilinear when enlarging and an area average
 * when shrinking (no aliasing). Fixed-point, no per-pixel libm. Returns 0, VL_EINVAL or VL_ENOMEM.
 */
int vl_pixels_resize(const vl_raw_t *src, vl_raw_t *dst, int w, int h);

/* Applies an Exif orientation (1..8) in place, so that the pixels look as a viewer shows them; 5..8
 * swap w and h. Returns 0, VL_EINVAL or VL_ENOMEM. */
int vl_pixels_orient(vl_raw_t *r, int orientation);

/* Writes the 64 bits of n into r as a band of black and white blocks along the top edge, so that
 * different n give different pixels. Blocks are the largest of 16, 8, 4, 2 or 1 pixels whose band
 * (up to 64 blocks to a row) fits the height, aligned to the JPEG block grid: 224x224 gets 16x16
 * blocks in an 80-row band, 1024 wide one 16-row band; with blocks of 8 and more, distinct n stay
 * distinct after JPEG at quality 50 (tested on 224x224). Smaller blocks are exact in PNG and a best
 * effort in JPEG; images of fewer than 64 pixels carry as many bits as they have pixels. Alpha in
 * the band is set opaque. Everything outside the band is left alone, and the band depends on n
 * only, so restamping a buffer overwrites the previous stamp entirely. */
void vl_pixels_stamp(vl_raw_t *r, uint64_t n);

/* Height in rows of the band vl_pixels_stamp writes on a w x h image. */
int vl_pixels_stamp_rows(int w, int h);

#endif
