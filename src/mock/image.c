/* Image decoding: data URI -> base64 -> bytes -> pixels -> hash.
 *
 * The format is taken from the bytes (PNG or JPEG magic) and must agree with the declared media
 * type. Pixels are 8 bits per channel, rows tightly packed: PNG keeps its own channels (gray,
 * gray+alpha, RGB or RGBA, palettes expanded, 16-bit reduced by libpng's simplified API); JPEG
 * decodes to gray when the file is grayscale and to RGB otherwise, with TurboJPEG's default
 * (accurate upsampling, integer DCT) settings, stopping on any warning so that a truncated file is
 * refused rather than half-decoded. The hash is FNV-1a 64 over those rows. */
#include "internal.h"

#include "vlmload/base64.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <turbojpeg.h>

static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
static const uint8_t jpeg_magic[3] = {0xff, 0xd8, 0xff};

typedef enum { FMT_PNG, FMT_JPEG, FMT_OTHER } fmt_t;

uint64_t vl__image_fnv1a(uint64_t h, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static fmt_t sniff(const uint8_t *p, size_t n) {
  if (n >= sizeof(png_magic) && memcmp(p, png_magic, sizeof(png_magic)) == 0)
    return FMT_PNG;
  if (n >= sizeof(jpeg_magic) && memcmp(p, jpeg_magic, sizeof(jpeg_magic)) == 0)
    return FMT_JPEG;
  return FMT_OTHER;
}

static int too_big(uint32_t w, uint32_t h, uint64_t max_pixels, char *err, size_t errlen) {
  if ((uint64_t)w * h <= max_pixels)
    return 0;
  snprintf(err, errlen, "image is %ux%u, more than the %llu pixels allowed", w, h,
           (unsigned long long)max_pixels);
  return VL_E2BIG;
}

static int decode_png(const uint8_t *p, size_t n, uint64_t max_pixels, vl__image_info_t *info,
                      char *err, size_t errlen) {
  png_image img;
  memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, p, n)) {
    snprintf(err, errlen, "PNG: %s", img.message);
    png_image_free(&img);
    return VL_EIMAGE;
  }
  int rc = too_big(img.width, img.height, max_pixels, err, errlen);
  if (rc != 0) {
    png_image_free(&img);
    return rc;
  }
  img.format &= PNG_FORMAT_FLAG_ALPHA | PNG_FORMAT_FLAG_COLOR;
  uint32_t channels = PNG_IMAGE_SAMPLE_CHANNELS(img.format);
  size_t stride = (size_t)img.width * channels;
  size_t size = stride * img.height;
  uint8_t *pixels = malloc(size > 0 ? size : 1);
  if (!pixels) {
    png_image_free(&img);
    snprintf(err, errlen, "out of memory decoding a %ux%u PNG", img.width, img.height);
    return VL_ENOMEM;
  }
  if (!png_image_finish_read(&img, NULL, pixels, (png_int_32)stride, NULL)) {
    snprintf(err, errlen, "PNG: %s", img.message);
    png_image_free(&img);
    free(pixels);
    return VL_EIMAGE;
  }
  info->fmt = "png";
  info->w = img.width;
  info->h = img.height;
  info->channels = channels;
  info->hash = vl__image_fnv1a(VL__FNV_OFFSET, pixels, stride * img.height);
  free(pixels);
  png_image_free(&img);
  return 0;
}

static int decode_jpeg(const uint8_t *p, size_t n, uint64_t max_pixels, vl__image_info_t *info,
                       char *err, size_t errlen) {
  uint8_t *pixels = NULL;
  int rc = VL_EIMAGE, w, h, subsamp, colorspace;
  tjhandle tj = tjInitDecompress();
  if (!tj) {
    snprintf(err, errlen, "JPEG: %s", tjGetErrorStr2(NULL));
    return VL_ENOMEM;
  }
  if (tjDecompressHeader3(tj, p, (unsigned long)n, &w, &h, &subsamp, &colorspace) != 0) {
    snprintf(err, errlen, "JPEG: %s", tjGetErrorStr2(tj));
    goto done;
  }
  if (w <= 0 || h <= 0) {
    snprintf(err, errlen, "JPEG: bad dimensions %dx%d", w, h);
    goto done;
  }
  if ((rc = too_big((uint32_t)w, (uint32_t)h, max_pixels, err, errlen)) != 0)
    goto done;
  int pf = colorspace == TJCS_GRAY ? TJPF_GRAY : TJPF_RGB;
  size_t stride = (size_t)w * (size_t)tjPixelSize[pf];
  if (!(pixels = malloc(stride * (size_t)h))) {
    snprintf(err, errlen, "out of memory decoding a %dx%d JPEG", w, h);
    rc = VL_ENOMEM;
    goto done;
  }
  if (tjDecompress2(tj, p, (unsigned long)n, pixels, w, (int)stride, h, pf,
                    TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) != 0) {
    snprintf(err, errlen, "JPEG: %s", tjGetErrorStr2(tj));
    rc = VL_EIMAGE;
    goto done;
  }
  info->fmt = "jpeg";
  info->w = (uint32_t)w;
  info->h = (uint32_t)h;
  info->channels = (uint32_t)tjPixelSize[pf];
  info->hash = vl__image_fnv1a(VL__FNV_OFFSET, pixels, stride * (size_t)h);
  rc = 0;
done:
  free(pixels);
  tjDestroy(tj);
  return rc;
}

int vl__image_decode_uri(const char *uri, size_t len, uint64_t max_pixels, vl__image_info_t *info,
                         char *err, size_t errlen) {
  static const char prefix[] = "data:";
  static const char b64[] = ";base64,";
  const char *end = uri + len;
  if (len < sizeof(prefix) - 1 || strncasecmp(uri, prefix, sizeof(prefix) - 1) != 0) {
    snprintf(err, errlen, "image_url must be a data URI (data:image/png;base64,...)");
    return VL_EINVAL;
  }
  const char *mime = uri + sizeof(prefix) - 1;
  const char *comma = memchr(mime, ',', (size_t)(end - mime));
  if (!comma || (size_t)(comma + 1 - mime) < sizeof(b64) - 1 ||
      strncasecmp(comma + 1 - (sizeof(b64) - 1), b64, sizeof(b64) - 1) != 0) {
    snprintf(err, errlen, "malformed data URI: expected data:<type>;base64,<data>");
    return VL_EINVAL;
  }
  size_t mime_len = (size_t)(comma + 1 - (sizeof(b64) - 1) - mime);
  fmt_t declared = FMT_OTHER;
  if (mime_len == 9 && strncasecmp(mime, "image/png", 9) == 0)
    declared = FMT_PNG;
  else if ((mime_len == 10 && strncasecmp(mime, "image/jpeg", 10) == 0) ||
           (mime_len == 9 && strncasecmp(mime, "image/jpg", 9) == 0))
    declared = FMT_JPEG;
  if (declared == FMT_OTHER) {
    snprintf(err, errlen, "unsupported image type '%.*s' (image/png, image/jpeg)",
             (int)VL_MIN(mime_len, 64), mime);
    return VL_EINVAL;
  }
  const char *data = comma + 1;
  size_t dlen = (size_t)(end - data);
  if (dlen == 0) {
    snprintf(err, errlen, "empty image data");
    return VL_EINVAL;
  }
  uint8_t *bytes = malloc(dlen / 4 * 3 + 1);
  if (!bytes) {
    snprintf(err, errlen, "out of memory decoding base64");
    return VL_ENOMEM;
  }
  long n = vl_base64_decode(bytes, data, dlen);
  int rc;
  if (n <= 0) {
    snprintf(err, errlen, "image data is not valid base64");
    rc = VL_EINVAL;
  } else {
    fmt_t actual = sniff(bytes, (size_t)n);
    if (actual == FMT_OTHER) {
      snprintf(err, errlen, "image data is neither PNG nor JPEG");
      rc = VL_EIMAGE;
    } else if (actual != declared) {
      snprintf(err, errlen, "declared %s but the data is %s",
               declared == FMT_PNG ? "image/png" : "image/jpeg",
               actual == FMT_PNG ? "PNG" : "JPEG");
      rc = VL_EIMAGE;
    } else {
      info->bytes = (uint64_t)n;
      rc = actual == FMT_PNG ? decode_png(bytes, (size_t)n, max_pixels, info, err, errlen)
                             : decode_jpeg(bytes, (size_t)n, max_pixels, info, err, errlen);
    }
  }
  free(bytes);
  return rc;
}
