/* Writes the bundled image corpus: a few small images of every kind the corpus loader must
 * handle (sizes from 16x16 to 1280x720; gray, RGB, RGBA, palette, gray+alpha and 16-bit PNG;
 * Adam7; baseline, progressive, grayscale and Exif-rotated JPEG; names that lie about the format
 * or have no extension; nested directories). Deterministic: the same libpng and libjpeg-turbo give
 * the same bytes.
 *
 *   vlmload-mkcorpus DIR     (the repository's copy: build/vlmload-mkcorpus corpus/)
 */
#include "../src/images/codec.h"
#include "vlmload/common.h"
#include "vlmload/image.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *out_dir;
static size_t total_bytes;
static int files;

static void die(const char *what, int rc) {
  fprintf(stderr, "vlmload-mkcorpus: %s: %s\n", what, vl_strerror(rc));
  exit(1);
}

/* mkdir -p for the directories of a path under out_dir. */
static void make_dirs(const char *rel) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", out_dir, rel);
  for (char *p = path + strlen(out_dir) + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      die(path, -errno);
    *p = '/';
  }
}

static void put(const char *rel, const void *p, size_t n, const char *what) {
  make_dirs(rel);
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", out_dir, rel);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
    die(path, VL_EIO);
  printf("%-40s %8zu  %s\n", rel, n, what);
  total_bytes += n;
  files++;
}

static void render(vl_raw_t *r, int w, int h, int ch, vl_image_content_t kind, uint64_t seed) {
  int rc = vl_image_raw_alloc(r, w, h, ch);
  if (!rc)
    rc = vl_image_render(r, kind, seed);
  if (rc)
    die("render", rc);
}

/* An image written by the module's own encoder. */
static void encoded(const char *rel, int w, int h, int ch, vl_image_content_t kind, uint64_t seed,
                    vl_codec_opts_t o, const char *what) {
  vl_raw_t r = {0};
  vl_image_buf_t b = {0};
  render(&r, w, h, ch, kind, seed);
  int rc = vl_codec_encode(NULL, &r, &o, &b);
  if (rc)
    die(rel, rc);
  put(rel, b.p, b.n, what);
  vl_image_buf_free(&b);
  vl_image_raw_free(&r);
}

/* A JPEG with an APP1 Exif segment right after SOI whose IFD0 holds Orientation = o. */
static void exif_rotated(const char *rel, int o) {
  vl_raw_t r = {0};
  vl_image_buf_t b = {0};
  render(&r, 640, 480, 3, VL_CONTENT_PHOTO, 104);
  vl_codec_opts_t eo = {.fmt = VL_IMG_JPEG, .quality = 80};
  int rc = vl_codec_encode(NULL, &r, &eo, &b);
  if (rc)
    die(rel, rc);
  const uint8_t app1[] = {
      0xff, 0xe1, 0, 34, 'E', 'x', 'i', 'f', 0, 0, /* APP1, length, Exif header */
      'M',  'M',  0, 42, 0,   0,   0,   8,         /* TIFF header, big-endian, IFD0 at 8 */
      0,    1,                                     /* one entry */
      0x01, 0x12, 0, 3,  0,   0,   0,   1,   0, (uint8_t)o, 0, 0, /* Orientation, SHORT, 1, o */
      0,    0,    0, 0,                                           /* no next IFD */
  };
  size_t n = b.n + sizeof(app1);
  uint8_t *p = vl_xmalloc(n);
  memcpy(p, b.p, 2);
  memcpy(p + 2, app1, sizeof(app1));
  memcpy(p + 2 + sizeof(app1), b.p + 2, b.n - 2);
  char what[96];
  snprintf(what, sizeof(what), "JPEG 640x480 stored, Exif orientation %d (shown 480x640)", o);
  put(rel, p, n, what);
  free(p);
  vl_image_buf_free(&b);
  vl_image_raw_free(&r);
}

/* PNG kinds the module's encoder does not write, through libpng's simplified writer. */
static void simplified(const char *rel, png_image *img, const void *buffer, const void *colormap,
                       const char *what) {
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(img, NULL, &size, 0, buffer, 0, colormap))
    die(img->message, VL_EIMAGE);
  void *mem = vl_xmalloc(size);
  if (!png_image_write_to_memory(img, mem, &size, 0, buffer, 0, colormap))
    die(img->message, VL_EIMAGE);
  put(rel, mem, size, what);
  free(mem);
  png_image_free(img);
}

static void palette(const char *rel, int w, int h, int alpha, uint64_t seed, const char *what) {
  vl_raw_t r = {0};
  render(&r, w, h, alpha ? 4 : 3, VL_CONTENT_SHAPES, seed);
  /* A 3-3-2 palette (with four alpha levels when transparent: 3-2-1-2) and each pixel's index. */
  uint8_t cmap[256 * 4];
  uint8_t *idx = vl_xmalloc((size_t)w * h);
  for (int i = 0; i < 256; i++) {
    uint8_t *e = cmap + i * (alpha ? 4 : 3);
    if (alpha) {
      e[0] = (uint8_t)((i >> 5) * 255 / 7), e[1] = (uint8_t)((i >> 3 & 3) * 255 / 3);
      e[2] = (uint8_t)((i >> 2 & 1) * 255), e[3] = (uint8_t)((i & 3) * 255 / 3);
    } else {
      e[0] = (uint8_t)((i >> 5) * 255 / 7), e[1] = (uint8_t)((i >> 2 & 7) * 255 / 7);
      e[2] = (uint8_t)((i & 3) * 255 / 3);
    }
  }
  for (size_t i = 0; i < (size_t)w * h; i++) {
    const uint8_t *p = r.px + i * (size_t)r.channels;
    idx[i] = alpha ? (uint8_t)((p[0] >> 5) << 5 | (p[1] >> 6) << 3 | (p[2] >> 7) << 2 | p[3] >> 6)
                   : (uint8_t)((p[0] >> 5) << 5 | (p[1] >> 5) << 2 | p[2] >> 6);
  }
  png_image img;
  memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  img.width = (png_uint_32)w;
  img.height = (png_uint_32)h;
  img.format = alpha ? PNG_FORMAT_RGBA_COLORMAP : PNG_FORMAT_RGB_COLORMAP;
  img.colormap_entries = 256;
  simplified(rel, &img, idx, cmap, what);
  free(idx);
  vl_image_raw_free(&r);
}

static void sixteen_bit(const char *rel, int w, int h, uint64_t seed, const char *what) {
  vl_raw_t r = {0};
  render(&r, w, h, 3, VL_CONTENT_GRADIENT, seed);
  uint16_t *px = vl_xmalloc(vl_image_raw_size(&r) * 2);
  for (size_t i = 0; i < vl_image_raw_size(&r); i++)
    px[i] = (uint16_t)(r.px[i] * 257 + (i % 7) * 13); /* low bytes that are not a copy */
  png_image img;
  memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  img.width = (png_uint_32)w;
  img.height = (png_uint_32)h;
  img.format = PNG_FORMAT_LINEAR_RGB;
  simplified(rel, &img, px, NULL, what);
  free(px);
  vl_image_raw_free(&r);
}

static void gray_alpha(const char *rel, int w, int h, uint64_t seed, const char *what) {
  vl_raw_t r = {0};
  render(&r, w, h, 4, VL_CONTENT_SHAPES, seed);
  uint8_t *px = vl_xmalloc((size_t)w * h * 2);
  for (size_t i = 0; i < (size_t)w * h; i++) {
    const uint8_t *p = r.px + i * 4;
    px[i * 2] = (uint8_t)((77 * p[0] + 150 * p[1] + 29 * p[2] + 128) >> 8);
    px[i * 2 + 1] = p[3];
  }
  png_image img;
  memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  img.width = (png_uint_32)w;
  img.height = (png_uint_32)h;
  img.format = PNG_FORMAT_GA;
  simplified(rel, &img, px, NULL, what);
  free(px);
  vl_image_raw_free(&r);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
    die(out_dir, -errno);
  const vl_codec_opts_t png9 = {.fmt = VL_IMG_PNG, .png_level = 9};
  const vl_codec_opts_t png9i = {.fmt = VL_IMG_PNG, .png_level = 9, .interlace = 1};

  /* Camera-like JPEGs. */
  encoded("photos/street-1280x720.jpg", 1280, 720, 3, VL_CONTENT_PHOTO, 101,
          (vl_codec_opts_t){.fmt = VL_IMG_JPEG, .quality = 80}, "JPEG 1280x720 baseline q80");
  encoded("photos/progressive-800x600.jpg", 800, 600, 3, VL_CONTENT_PHOTO, 102,
          (vl_codec_opts_t){.fmt = VL_IMG_JPEG, .quality = 80, .progressive = 1},
          "JPEG 800x600 progressive q80");
  encoded("photos/gray-640x480.jpg", 640, 480, 1, VL_CONTENT_PHOTO, 103,
          (vl_codec_opts_t){.fmt = VL_IMG_JPEG, .quality = 85}, "JPEG 640x480 grayscale q85");
  exif_rotated("photos/portrait-exif6.jpg", 6);
  encoded("photos/tiny-16x16.jpg", 16, 16, 3, VL_CONTENT_SHAPES, 105,
          (vl_codec_opts_t){.fmt = VL_IMG_JPEG, .quality = 90}, "JPEG 16x16");

  /* Screenshot- and diagram-like PNGs. */
  encoded("screens/shapes-1024x768.png", 1024, 768, 3, VL_CONTENT_SHAPES, 201, png9,
          "PNG 1024x768 RGB");
  encoded("screens/gradient-512x512.png", 512, 512, 3, VL_CONTENT_GRADIENT, 202, png9,
          "PNG 512x512 RGB");
  encoded("screens/adam7-320x240.png", 320, 240, 3, VL_CONTENT_SHAPES, 203, png9i,
          "PNG 320x240 RGB, Adam7 interlaced");
  encoded("screens/rgba-256x256.png", 256, 256, 4, VL_CONTENT_SHAPES, 204, png9,
          "PNG 256x256 RGBA");
  encoded("screens/gray-300x200.png", 300, 200, 1, VL_CONTENT_SHAPES, 205, png9,
          "PNG 300x200 gray");
  palette("screens/palette-400x300.png", 400, 300, 0, 206, "PNG 400x300 palette (256 colours)");
  palette("screens/palette-alpha-96x64.png", 96, 64, 1, 207,
          "PNG 96x64 palette with transparency (tRNS)");
  sixteen_bit("screens/deep-16bit-200x150.png", 200, 150, 208, "PNG 200x150 RGB, 16 bits");
  gray_alpha("screens/gray-alpha-128x96.png", 128, 96, 209, "PNG 128x96 gray+alpha");
  encoded("screens/tiny-16x16.png", 16, 16, 1, VL_CONTENT_GRADIENT, 210, png9, "PNG 16x16 gray");

  /* Names that do not say what the file is: detection goes by content. */
  encoded("misc/scan.dat", 480, 360, 3, VL_CONTENT_PHOTO, 301,
          (vl_codec_opts_t){.fmt = VL_IMG_JPEG, .quality = 75}, "JPEG 480x360, named .dat");
  encoded("misc/snapshot.bin", 224, 224, 3, VL_CONTENT_SHAPES, 302, png9,
          "PNG 224x224 RGB, named .bin");
  encoded("misc/noise-224x224.jpeg", 224, 224, 3, VL_CONTENT_NOISE, 303,
          (vl_codec_opts_t){.fmt = VL_IMG_JPEG, .quality = 75}, "JPEG 224x224 noise q75");
  encoded("misc/nested/deeper/frame-0001", 336, 336, 3, VL_CONTENT_MIXED, 304,
          (vl_codec_opts_t){.fmt = VL_IMG_JPEG, .quality = 85},
          "JPEG 336x336, no extension, two directories down");
  printf("%d files, %zu bytes\n", files, total_bytes);
  return 0;
}
