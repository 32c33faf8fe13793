/* The image decoder on arbitrary bytes (seeds: the repository's PNG and JPEG files, shrunk), with
 * a small pixel limit as the corpus loader uses it. A decode must agree with the header probe,
 * stay within the limit, give the same pixels when repeated into the reused buffer, and survive
 * the operations the image pool applies next: Exif orientation and a resize. */
#include "fuzz.h"

#include "../../src/images/codec.h"
#include "vlmload/common.h"
#include "vlmload/image.h"
#include "../../src/images/pixels.h"

#include <string.h>

#define MAX_PIXELS (512u * 512u)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact copy: libpng and TurboJPEG must not read past what they are given. */
  uint8_t *p = (uint8_t *)fuzz_dup(data, size);
  vl_codec_t codec;
  vl_codec_init(&codec);
  vl_raw_t raw = {0};
  vl_codec_info_t info;

  int probe = vl_codec_probe(p, size, &info);
  FUZZ_CHECK(probe == 0 || probe == VL_EIMAGE);
  vl_image_fmt_t fmt = vl_codec_detect(p, size);
  if (probe == 0) {
    FUZZ_CHECK(info.fmt == fmt && fmt != VL_IMG_UNKNOWN);
    FUZZ_CHECK(info.w > 0 && info.h > 0);
    FUZZ_CHECK(info.orientation >= 1 && info.orientation <= 8);
  }

  int rc = vl_codec_decode(&codec, p, size, MAX_PIXELS, &raw);
  FUZZ_CHECK(rc == 0 || rc == VL_EIMAGE || rc == VL_E2BIG || rc == VL_ENOMEM);
  if (probe != 0)
    FUZZ_CHECK(rc == probe);
  if (rc == VL_E2BIG)
    FUZZ_CHECK((uint64_t)info.w * (uint64_t)info.h > MAX_PIXELS || info.w > VL_IMAGE_MAX_SIDE ||
               info.h > VL_IMAGE_MAX_SIDE);
  if (rc != 0)
    FUZZ_CHECK(raw.px == NULL); /* nothing kept from a failed decode into an empty buffer */
  if (rc == 0) {
    FUZZ_CHECK(raw.w == info.w && raw.h == info.h && raw.channels == info.channels);
    FUZZ_CHECK((uint64_t)raw.w * (uint64_t)raw.h <= MAX_PIXELS);
    FUZZ_CHECK(raw.channels == 1 || raw.channels == 3 || raw.channels == 4);
    FUZZ_CHECK(raw.cap >= vl_image_raw_size(&raw));
    uint64_t hash = vl_image_hash(&raw);

    /* Again, into the buffer just filled (the pool's reuse path): the same pixels. */
    FUZZ_CHECK(vl_codec_decode(&codec, p, size, MAX_PIXELS, &raw) == 0);
    FUZZ_CHECK(vl_image_hash(&raw) == hash);

    int w = raw.w, h = raw.h;
    FUZZ_CHECK(vl_pixels_orient(&raw, info.orientation) == 0);
    if (info.orientation >= 5)
      FUZZ_CHECK(raw.w == h && raw.h == w);
    else
      FUZZ_CHECK(raw.w == w && raw.h == h);

    vl_raw_t small = {0};
    int tw = 1 + (int)(hash % 37), th = 1 + (int)((hash >> 8) % 29);
    FUZZ_CHECK(vl_pixels_resize(&raw, &small, tw, th) == 0);
    FUZZ_CHECK(small.w == tw && small.h == th && small.channels == raw.channels);
    vl_image_raw_free(&small);
  }
  vl_image_raw_free(&raw);
  vl_codec_free(&codec);
  free(p);
  return 0;
}
