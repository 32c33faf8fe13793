/* Images against the real codecs: every generator path decodes back to what was encoded (PNG
 * exactly, JPEG within a PSNR bound), formats are found by content, every kind of bad input is
 * refused without allocating for it, and stamps keep images apart after JPEG at quality 50. */
#include "task.h"
#include "../src/images/codec.h"
#include "vlmload/common.h"
#include "vlmload/image.h"
#include "../src/images/pixels.h"

#include <png.h>
#include <zlib.h>

static const int channel_kinds[3] = {1, 3, 4};

static void make(vl_raw_t *r, int w, int h, int ch, vl_image_content_t kind, uint64_t seed) {
  memset(r, 0, sizeof(*r));
  ASSERT_INT_EQ(vl_image_raw_alloc(r, w, h, ch), 0);
  ASSERT_INT_EQ(vl_image_render(r, kind, seed), 0);
}

static void encode(const vl_raw_t *r, vl_image_fmt_t fmt, int quality, int flag,
                   vl_image_buf_t *out) {
  vl_codec_opts_t o = {.fmt = fmt, .quality = quality, .progressive = flag, .interlace = flag};
  ASSERT_INT_EQ(vl_codec_encode(NULL, r, &o, out), 0);
  ASSERT(out->n > 0 && out->n <= vl_codec_encode_bound(r->w, r->h, r->channels, fmt));
}

/* PSNR of b against a, comparing the colour channels they share (gray against RGB luma is not
 * needed: JPEG keeps the channel count except for alpha). */
static double psnr(const vl_raw_t *a, const vl_raw_t *b) {
  ASSERT_INT_EQ(a->w, b->w);
  ASSERT_INT_EQ(a->h, b->h);
  int ch = VL_MIN(a->channels, b->channels);
  double se = 0;
  size_t n = (size_t)a->w * a->h;
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < ch; c++) {
      double d = (double)a->px[i * a->channels + c] - b->px[i * b->channels + c];
      se += d * d;
    }
  double mse = se / ((double)n * ch);
  return mse == 0 ? 99 : 10 * log10(255.0 * 255.0 / mse);
}

TEST_IMPL(raw_alloc) {
  vl_raw_t r = {0};
  ASSERT_INT_EQ(vl_image_raw_alloc(&r, 0, 5, 3), VL_EINVAL);
  ASSERT_INT_EQ(vl_image_raw_alloc(&r, 5, 16385, 3), VL_EINVAL);
  ASSERT_INT_EQ(vl_image_raw_alloc(&r, 5, 5, 2), VL_EINVAL);
  ASSERT(r.px == NULL);
  ASSERT_INT_EQ(vl_image_raw_alloc(&r, 10, 10, 4), 0);
  uint8_t *p = r.px;
  ASSERT_INT_EQ(vl_image_raw_alloc(&r, 20, 5, 3), 0); /* 300 <= 400: reused */
  ASSERT(r.px == p);
  ASSERT_UINT_EQ(vl_image_raw_size(&r), 300);
  vl_image_raw_free(&r);
  ASSERT(r.px == NULL && r.cap == 0);
}

TEST_IMPL(hash_fnv1a) {
  /* FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c. */
  uint8_t a = 'a';
  vl_raw_t r = {.px = &a, .w = 1, .h = 1, .channels = 1};
  ASSERT_UINT_EQ(vl_image_hash(&r), 0xaf63dc4c8601ec8cull);
}

TEST_IMPL(render_deterministic) {
  for (int k = 0; k <= VL_CONTENT_MIXED; k++) {
    for (int c = 0; c < 3; c++) {
      vl_raw_t a, b, d;
      make(&a, 97, 61, channel_kinds[c], (vl_image_content_t)k, 42);
      make(&b, 97, 61, channel_kinds[c], (vl_image_content_t)k, 42);
      make(&d, 97, 61, channel_kinds[c], (vl_image_content_t)k, 43);
      ASSERT_MEM_EQ(a.px, b.px, vl_image_raw_size(&a));
      ASSERT(vl_image_hash(&a) != vl_image_hash(&d));
      /* Not flat: at least 8 distinct values in the first channel. */
      int seen[256] = {0}, distinct = 0;
      for (size_t i = 0; i < vl_image_raw_size(&a); i += (size_t)a.channels)
        distinct += !seen[a.px[i]]++;
      ASSERT(distinct >= 8);
      vl_image_raw_free(&a);
      vl_image_raw_free(&b);
      vl_image_raw_free(&d);
    }
  }
}

TEST_IMPL(render_sizes) {
  /* Degenerate and odd sizes must not crash or leave bytes unwritten (ASan/valgrind would see). */
  static const int sizes[][2] = {{1, 1}, {1, 300}, {300, 1}, {2, 2}, {3, 1000}, {1023, 7}};
  for (size_t i = 0; i < VL_ARRAY_SIZE(sizes); i++)
    for (int k = 0; k <= VL_CONTENT_MIXED; k++) {
      vl_raw_t r;
      make(&r, sizes[i][0], sizes[i][1], 3, (vl_image_content_t)k, i);
      vl_image_hash(&r);
      vl_image_raw_free(&r);
    }
}

TEST_IMPL(png_roundtrip) {
  static const int sizes[][2] = {{1, 1}, {17, 5}, {64, 48}, {301, 203}};
  for (size_t s = 0; s < VL_ARRAY_SIZE(sizes); s++)
    for (int k = 0; k <= VL_CONTENT_MIXED; k++)
      for (int c = 0; c < 3; c++)
        for (int interlace = 0; interlace <= 1; interlace++) {
          int ch = channel_kinds[c];
          vl_raw_t r, d = {0};
          vl_image_buf_t b = {0};
          make(&r, sizes[s][0], sizes[s][1], ch, (vl_image_content_t)k, s * 31 + (size_t)k);
          encode(&r, VL_IMG_PNG, 0, interlace, &b);
          vl_codec_info_t info;
          ASSERT_INT_EQ(vl_codec_probe(b.p, b.n, &info), 0);
          ASSERT_INT_EQ(info.fmt, VL_IMG_PNG);
          ASSERT_INT_EQ(info.w, r.w);
          ASSERT_INT_EQ(info.h, r.h);
          ASSERT_INT_EQ(info.bit_depth, 8);
          ASSERT_INT_EQ(info.color_type, ch == 1 ? 0 : ch == 3 ? 2 : 6);
          ASSERT_INT_EQ(info.interlaced, interlace);
          ASSERT_INT_EQ(info.channels, ch);
          ASSERT_INT_EQ(vl_codec_decode(NULL, b.p, b.n, 0, &d), 0);
          ASSERT_INT_EQ(d.w, r.w);
          ASSERT_INT_EQ(d.h, r.h);
          ASSERT_INT_EQ(d.channels, ch);
          ASSERT_MEM_EQ(d.px, r.px, vl_image_raw_size(&r));
          ASSERT_UINT_EQ(vl_image_hash(&d), vl_image_hash(&r));
          vl_image_raw_free(&r);
          vl_image_raw_free(&d);
          vl_image_buf_free(&b);
        }
}

TEST_IMPL(png_levels) {
  vl_raw_t r, d = {0};
  make(&r, 200, 150, 3, VL_CONTENT_SHAPES, 5);
  size_t prev = 0;
  for (int level = 1; level <= 9; level += 8) {
    vl_image_buf_t b = {0};
    vl_codec_opts_t o = {.fmt = VL_IMG_PNG, .png_level = level};
    ASSERT_INT_EQ(vl_codec_encode(NULL, &r, &o, &b), 0);
    ASSERT_INT_EQ(vl_codec_decode(NULL, b.p, b.n, 0, &d), 0);
    ASSERT_MEM_EQ(d.px, r.px, vl_image_raw_size(&r));
    if (prev)
      ASSERT(b.n < prev); /* level 9 with every filter beats level 1 on shapes */
    prev = b.n;
    vl_image_buf_free(&b);
  }
  vl_image_raw_free(&r);
  vl_image_raw_free(&d);
}

TEST_IMPL(jpeg_roundtrip) {
  vl_codec_t codec;
  vl_codec_init(&codec);
  for (int k = 0; k <= VL_CONTENT_SHAPES; k++)
    for (int c = 0; c < 3; c++)
      for (int prog = 0; prog <= 1; prog++) {
        int ch = channel_kinds[c];
        vl_raw_t r, d = {0};
        vl_image_buf_t b = {0};
        make(&r, 160, 120, ch, (vl_image_content_t)k, (uint64_t)k * 7 + (uint64_t)c);
        encode(&r, VL_IMG_JPEG, 90, prog, &b);
        vl_codec_info_t info;
        ASSERT_INT_EQ(vl_codec_probe(b.p, b.n, &info), 0);
        ASSERT_INT_EQ(info.fmt, VL_IMG_JPEG);
        ASSERT_INT_EQ(info.w, 160);
        ASSERT_INT_EQ(info.h, 120);
        ASSERT_INT_EQ(info.interlaced, prog);
        ASSERT_INT_EQ(info.orientation, 1);
        ASSERT_INT_EQ(info.channels, ch == 1 ? 1 : 3);
        ASSERT_INT_EQ(vl_codec_decode(&codec, b.p, b.n, 0, &d), 0);
        ASSERT_INT_EQ(d.w, 160);
        ASSERT_INT_EQ(d.h, 120);
        ASSERT_INT_EQ(d.channels, ch == 1 ? 1 : 3); /* alpha dropped */
        double q = psnr(&r, &d);
        if (getenv("VL_TEST_VERBOSE"))
          fprintf(stderr, "kind %d ch %d prog %d: %.1f dB\n", k, ch, prog, q);
        /* Noise is JPEG's worst case, and 4:2:0 halves its colour resolution (sharp colour edges
         * in shapes suffer from that too); everything else is image-like. */
        if (k == VL_CONTENT_NOISE)
          ASSERT(q > (ch == 1 ? 30 : 11));
        else
          ASSERT(q > (ch == 1 ? 35 : 27));
        vl_image_raw_free(&r);
        vl_image_raw_free(&d);
        vl_image_buf_free(&b);
      }
  vl_codec_free(&codec);
}

TEST_IMPL(jpeg_quality) {
  vl_raw_t r;
  make(&r, 256, 256, 3, VL_CONTENT_PHOTO, 9);
  size_t prev = 0;
  for (int q = 30; q <= 95; q += 65) {
    vl_image_buf_t b = {0};
    vl_raw_t d = {0};
    encode(&r, VL_IMG_JPEG, q, 0, &b);
    ASSERT(b.n > prev);
    prev = b.n;
    ASSERT_INT_EQ(vl_codec_decode(NULL, b.p, b.n, 0, &d), 0);
    ASSERT(psnr(&r, &d) > (q > 50 ? 33 : 26));
    vl_image_buf_free(&b);
    vl_image_raw_free(&d);
  }
  vl_image_raw_free(&r);
}

/* Writes bytes to a file and reads them back: detection must not care about the name. */
static uint8_t *via_file(const char *name, const uint8_t *p, size_t n, size_t *out_n) {
  char path[768];
  snprintf(path, sizeof(path), "%s/vl-test-image-%s", task_tmpdir(), name);
  FILE *f = fopen(path, "wb");
  ASSERT(f);
  ASSERT_UINT_EQ(fwrite(p, 1, n, f), n);
  fclose(f);
  f = fopen(path, "rb");
  uint8_t *buf = malloc(n + 1);
  *out_n = fread(buf, 1, n + 1, f);
  fclose(f);
  unlink(path);
  return buf;
}

TEST_IMPL(detect_by_content) {
  vl_raw_t r;
  make(&r, 40, 30, 3, VL_CONTENT_GRADIENT, 1);
  vl_image_buf_t png = {0}, jpg = {0};
  encode(&r, VL_IMG_PNG, 0, 0, &png);
  encode(&r, VL_IMG_JPEG, 80, 0, &jpg);
  size_t n;
  uint8_t *a = via_file("photo.jpg", png.p, png.n, &n);
  ASSERT_INT_EQ(vl_codec_detect(a, n), VL_IMG_PNG);
  vl_raw_t d = {0};
  ASSERT_INT_EQ(vl_codec_decode(NULL, a, n, 0, &d), 0);
  ASSERT_MEM_EQ(d.px, r.px, vl_image_raw_size(&r));
  free(a);
  a = via_file("scan.png", jpg.p, jpg.n, &n);
  ASSERT_INT_EQ(vl_codec_detect(a, n), VL_IMG_JPEG);
  ASSERT_INT_EQ(vl_codec_decode(NULL, a, n, 0, &d), 0);
  ASSERT_INT_EQ(d.channels, 3);
  free(a);
  a = via_file("noext", jpg.p, jpg.n, &n);
  ASSERT_INT_EQ(vl_codec_detect(a, n), VL_IMG_JPEG);
  free(a);
  const char *text = "\x89PNG is how a PNG starts, but this is text\n";
  ASSERT_INT_EQ(vl_codec_detect((const uint8_t *)text, strlen(text)), VL_IMG_UNKNOWN);
  ASSERT_INT_EQ(vl_codec_detect(png.p, 7), VL_IMG_UNKNOWN);
  ASSERT_INT_EQ(vl_codec_detect(jpg.p, 2), VL_IMG_UNKNOWN);
  vl_image_raw_free(&r);
  vl_image_raw_free(&d);
  vl_image_buf_free(&png);
  vl_image_buf_free(&jpg);
}

static void expect_bad(const uint8_t *p, size_t n, int want) {
  vl_raw_t d = {0};
  int rc = vl_codec_decode(NULL, p, n, 0, &d);
  if (rc != want)
    fprintf(stderr, "decode of %zu bytes: %d (%s), wanted %d\n", n, rc, vl_strerror(rc), want);
  ASSERT_INT_EQ(rc, want);
  ASSERT(d.px == NULL); /* nothing handed out on failure */
}

TEST_IMPL(decode_truncated_and_corrupt) {
  vl_raw_t r;
  make(&r, 120, 90, 3, VL_CONTENT_PHOTO, 3);
  for (int f = 0; f < 4; f++) {
    vl_image_buf_t b = {0};
    vl_image_fmt_t fmt = f < 2 ? VL_IMG_PNG : VL_IMG_JPEG;
    encode(&r, fmt, 85, f % 2, &b);
    /* Truncations: inside the signature, inside the header, early, middle, late, last byte. */
    size_t cuts[] = {0, 1, 5, 20, 40, b.n / 4, b.n / 2, b.n * 3 / 4, b.n - 20, b.n - 1};
    for (size_t i = 0; i < VL_ARRAY_SIZE(cuts); i++)
      expect_bad(b.p, cuts[i], VL_EIMAGE);
    /* Corruption in the middle of the compressed data: for PNG any change (CRC, Adler-32); JPEG
     * has no checksum, so a marker where entropy data should be. */
    uint8_t *c = malloc(b.n);
    memcpy(c, b.p, b.n);
    for (size_t i = b.n / 2; i < b.n / 2 + 64; i++)
      c[i] = fmt == VL_IMG_PNG ? c[i] ^ 0x5a : i % 2 ? 0xd9 : 0xff;
    expect_bad(c, b.n, VL_EIMAGE);
    /* A broken header field (PNG: IHDR CRC; JPEG: frame header length). */
    memcpy(c, b.p, b.n);
    if (fmt == VL_IMG_PNG)
      c[16] ^= 1;
    else
      c[2] = 0; /* no marker after SOI */
    expect_bad(c, b.n, VL_EIMAGE);
    free(c);
    vl_image_buf_free(&b);
  }
  const char *text = "hello, not an image\n";
  expect_bad((const uint8_t *)text, strlen(text), VL_EIMAGE);
  expect_bad((const uint8_t *)"", 0, VL_EIMAGE);
  vl_image_raw_free(&r);
}

/* A PNG with a valid IHDR declaring w x h, an empty IDAT and IEND: a decompression bomb's
 * header, with no data at all behind it. */
static size_t bomb_png(uint8_t *p, uint32_t w, uint32_t h) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  size_t n = 0;
  memcpy(p, sig, 8);
  n = 8;
  uint8_t ihdr[17] = {'I',
                      'H',
                      'D',
                      'R',
                      (uint8_t)(w >> 24),
                      (uint8_t)(w >> 16),
                      (uint8_t)(w >> 8),
                      (uint8_t)w,
                      (uint8_t)(h >> 24),
                      (uint8_t)(h >> 16),
                      (uint8_t)(h >> 8),
                      (uint8_t)h,
                      8,
                      2,
                      0,
                      0,
                      0};
  const uint8_t *chunks[3] = {ihdr, (const uint8_t *)"IDAT", (const uint8_t *)"IEND"};
  const uint32_t lens[3] = {13, 0, 0};
  for (int i = 0; i < 3; i++) {
    uint32_t len = lens[i];
    p[n++] = (uint8_t)(len >> 24), p[n++] = (uint8_t)(len >> 16), p[n++] = (uint8_t)(len >> 8),
    p[n++] = (uint8_t)len;
    memcpy(p + n, chunks[i], 4 + len);
    uint32_t crc = (uint32_t)crc32(0, p + n, 4 + len);
    n += 4 + len;
    p[n++] = (uint8_t)(crc >> 24), p[n++] = (uint8_t)(crc >> 16), p[n++] = (uint8_t)(crc >> 8),
    p[n++] = (uint8_t)crc;
  }
  return n;
}

TEST_IMPL(decode_bomb_refused_before_allocating) {
  uint8_t p[128];
  size_t n = bomb_png(p, 100000, 100000);
  vl_codec_info_t info;
  ASSERT_INT_EQ(vl_codec_probe(p, n, &info), 0);
  ASSERT_INT_EQ(info.w, 100000);
  ASSERT_INT_EQ(info.h, 100000);
  /* 30 GB of pixels: refused from the header, out->px never set. */
  expect_bad(p, n, VL_E2BIG);
  /* Within the side limit but over a small pixel budget. */
  n = bomb_png(p, 4000, 4000);
  vl_raw_t d = {0};
  ASSERT_INT_EQ(vl_codec_decode(NULL, p, n, 1000000, &d), VL_E2BIG);
  ASSERT(d.px == NULL);
  /* Allowed by the budget, then found to have no data. */
  n = bomb_png(p, 64, 64);
  ASSERT_INT_EQ(vl_codec_decode(NULL, p, n, 0, &d), VL_EIMAGE);

  /* A JPEG whose frame header claims 60000 x 60000. */
  vl_raw_t r;
  make(&r, 32, 32, 3, VL_CONTENT_GRADIENT, 1);
  vl_image_buf_t b = {0};
  encode(&r, VL_IMG_JPEG, 80, 0, &b);
  size_t i = 2;
  while (!(b.p[i] == 0xff && b.p[i + 1] == 0xc0))
    i += 2 + ((size_t)b.p[i + 2] << 8 | b.p[i + 3]);
  b.p[i + 5] = 0xea, b.p[i + 6] = 0x60; /* height 60000 */
  b.p[i + 7] = 0xea, b.p[i + 8] = 0x60; /* width 60000 */
  ASSERT_INT_EQ(vl_codec_probe(b.p, b.n, &info), 0);
  ASSERT_INT_EQ(info.w, 60000);
  expect_bad(b.p, b.n, VL_E2BIG);
  vl_image_buf_free(&b);
  vl_image_raw_free(&r);
}

/* PNG kinds our encoder does not write, through libpng's simplified writer: palette (with and
 * without transparency), 16-bit, gray+alpha. The decoder converts each to 8-bit 1, 3 or 4
 * channels. */
TEST_IMPL(png_foreign_kinds) {
  enum { W = 37, H = 23 };
  uint8_t px8[W * H * 4];
  uint16_t px16[W * H * 4];
  uint8_t cmap[16 * 4];
  uint64_t seed = 7;
  for (int i = 0; i < 16 * 4; i++)
    cmap[i] = (uint8_t)task_rand(&seed);
  for (int i = 0; i < W * H * 4; i++) {
    px8[i] = (uint8_t)task_rand(&seed);
    px16[i] = (uint16_t)task_rand(&seed);
  }
  struct {
    uint32_t format;
    int channels; /* after decoding */
    int color_type;
  } kinds[] = {
      {PNG_FORMAT_RGB_COLORMAP, 3, 3}, {PNG_FORMAT_RGBA_COLORMAP, 4, 3},
      {PNG_FORMAT_LINEAR_RGB, 3, 2},   {PNG_FORMAT_LINEAR_RGB_ALPHA, 4, 6},
      {PNG_FORMAT_GA, 4, 4},           {PNG_FORMAT_LINEAR_Y, 1, 0},
  };
  for (size_t k = 0; k < VL_ARRAY_SIZE(kinds); k++) {
    png_image img;
    memset(&img, 0, sizeof(img));
    img.version = PNG_IMAGE_VERSION;
    img.width = W;
    img.height = H;
    img.format = kinds[k].format;
    const void *buffer = px8;
    const void *colormap = NULL;
    uint8_t idx[W * H];
    if (img.format & PNG_FORMAT_FLAG_COLORMAP) {
      img.colormap_entries = 16;
      for (int i = 0; i < W * H; i++)
        idx[i] = px8[i] & 15;
      buffer = idx;
      colormap = cmap;
    } else if (img.format & PNG_FORMAT_FLAG_LINEAR) {
      buffer = px16;
    }
    png_alloc_size_t size = 0;
    ASSERT(png_image_write_to_memory(&img, NULL, &size, 0, buffer, 0, colormap));
    uint8_t *mem = malloc(size);
    ASSERT(png_image_write_to_memory(&img, mem, &size, 0, buffer, 0, colormap));
    vl_codec_info_t info;
    ASSERT_INT_EQ(vl_codec_probe(mem, size, &info), 0);
    ASSERT_INT_EQ(info.color_type, kinds[k].color_type);
    ASSERT_INT_EQ(info.channels, kinds[k].channels);
    if (img.format & PNG_FORMAT_FLAG_LINEAR)
      ASSERT_INT_EQ(info.bit_depth, 16);
    vl_raw_t d = {0};
    ASSERT_INT_EQ(vl_codec_decode(NULL, mem, size, 0, &d), 0);
    ASSERT_INT_EQ(d.w, W);
    ASSERT_INT_EQ(d.h, H);
    ASSERT_INT_EQ(d.channels, kinds[k].channels);
    if (img.format & PNG_FORMAT_FLAG_COLORMAP) {
      /* Each pixel is its palette entry. */
      int alpha = kinds[k].channels == 4;
      for (int i = 0; i < W * H; i++)
        for (int c = 0; c < d.channels; c++)
          ASSERT_INT_EQ(d.px[i * d.channels + c], cmap[idx[i] * (alpha ? 4 : 3) + c]);
    }
    vl_image_raw_free(&d);
    free(mem);
  }
}

TEST_IMPL(resize) {
  /* A constant stays constant (unity gain), in every direction and channel count. */
  static const int to[][2] = {{1, 1}, {7, 3}, {50, 50}, {333, 17}, {640, 480}};
  for (int c = 0; c < 3; c++) {
    vl_raw_t r = {0};
    ASSERT_INT_EQ(vl_image_raw_alloc(&r, 101, 77, channel_kinds[c]), 0);
    for (size_t i = 0; i < vl_image_raw_size(&r); i++)
      r.px[i] = (uint8_t)(37 + i % (size_t)channel_kinds[c] * 50);
    for (size_t t = 0; t < VL_ARRAY_SIZE(to); t++) {
      vl_raw_t d = {0};
      ASSERT_INT_EQ(vl_pixels_resize(&r, &d, to[t][0], to[t][1]), 0);
      ASSERT_INT_EQ(d.w, to[t][0]);
      ASSERT_INT_EQ(d.h, to[t][1]);
      ASSERT_INT_EQ(d.channels, channel_kinds[c]);
      for (size_t i = 0; i < vl_image_raw_size(&d); i++)
        ASSERT_INT_EQ(d.px[i], 37 + i % (size_t)channel_kinds[c] * 50);
      vl_image_raw_free(&d);
    }
    vl_image_raw_free(&r);
  }
  /* A horizontal ramp stays a monotone ramp with the same mean, up and down. */
  vl_raw_t r = {0};
  ASSERT_INT_EQ(vl_image_raw_alloc(&r, 256, 4, 1), 0);
  for (int y = 0; y < 4; y++)
    for (int x = 0; x < 256; x++)
      r.px[y * 256 + x] = (uint8_t)x;
  static const int widths[] = {2, 37, 100, 255, 256, 257, 1000};
  for (size_t t = 0; t < VL_ARRAY_SIZE(widths); t++) {
    vl_raw_t d = {0};
    ASSERT_INT_EQ(vl_pixels_resize(&r, &d, widths[t], 9), 0);
    double sum = 0;
    for (int x = 0; x < d.w; x++) {
      sum += d.px[x];
      if (x)
        ASSERT(d.px[x] >= d.px[x - 1]);
      for (int y = 1; y < d.h; y++)
        ASSERT_INT_EQ(d.px[y * d.w + x], d.px[x]);
    }
    ASSERT_NEAR(sum / d.w, 127.5, 1.5);
    if (widths[t] == 256)
      ASSERT_MEM_EQ(d.px, r.px, 256);
    vl_image_raw_free(&d);
  }
  /* Shrinking averages: a 1-pixel checkerboard shrunk 4x is flat grey. */
  for (int y = 0; y < 4; y++)
    for (int x = 0; x < 256; x++)
      r.px[y * 256 + x] = (uint8_t)((x + y) % 2 ? 255 : 0);
  vl_raw_t d = {0};
  ASSERT_INT_EQ(vl_pixels_resize(&r, &d, 64, 1), 0);
  for (int x = 1; x < 63; x++)
    ASSERT_NEAR(d.px[x], 127.5, 1);
  vl_image_raw_free(&d);
  vl_image_raw_free(&r);
}

TEST_IMPL(orient) {
  /* A 3x2 image whose pixels are their own indices. */
  vl_raw_t r = {0};
  ASSERT_INT_EQ(vl_image_raw_alloc(&r, 3, 2, 1), 0);
  const uint8_t src[6] = {0, 1, 2, 3, 4, 5};
  /* What a viewer shows for each orientation. */
  static const uint8_t want[9][6] = {
      [1] = {0, 1, 2, 3, 4, 5}, [2] = {2, 1, 0, 5, 4, 3}, [3] = {5, 4, 3, 2, 1, 0},
      [4] = {3, 4, 5, 0, 1, 2}, [5] = {0, 3, 1, 4, 2, 5}, [6] = {3, 0, 4, 1, 5, 2},
      [7] = {5, 2, 4, 1, 3, 0}, [8] = {2, 5, 1, 4, 0, 3},
  };
  for (int o = 1; o <= 8; o++) {
    ASSERT_INT_EQ(vl_image_raw_alloc(&r, 3, 2, 1), 0);
    memcpy(r.px, src, 6);
    ASSERT_INT_EQ(vl_pixels_orient(&r, o), 0);
    ASSERT_INT_EQ(r.w, o >= 5 ? 2 : 3);
    ASSERT_INT_EQ(r.h, o >= 5 ? 3 : 2);
    ASSERT_MEM_EQ(r.px, want[o], 6);
  }
  ASSERT_INT_EQ(vl_pixels_orient(&r, 9), VL_EINVAL);
  vl_image_raw_free(&r);
}

/* A JPEG with an APP1 Exif segment (orientation o, byte order le) spliced in after SOI. */
static uint8_t *exif_jpeg(const vl_image_buf_t *b, int o, int le, size_t *n) {
  uint8_t app1[] = {0xff,
                    0xe1,
                    0,
                    34,
                    'E',
                    'x',
                    'i',
                    'f',
                    0,
                    0,
                    /* TIFF header */ 'M',
                    'M',
                    0,
                    42,
                    0,
                    0,
                    0,
                    8,
                    /* IFD0: one entry */ 0,
                    1,
                    /* tag 0x0112, SHORT, count 1, value */ 0x01,
                    0x12,
                    0,
                    3,
                    0,
                    0,
                    0,
                    1,
                    0,
                    (uint8_t)o,
                    0,
                    0,
                    /* next IFD */ 0,
                    0,
                    0,
                    0};
  if (le) {
    uint8_t t[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, (uint8_t)o, 0};
    memcpy(app1 + 10, t, sizeof(t));
  }
  *n = b->n + sizeof(app1);
  uint8_t *p = malloc(*n);
  memcpy(p, b->p, 2);
  memcpy(p + 2, app1, sizeof(app1));
  memcpy(p + 2 + sizeof(app1), b->p + 2, b->n - 2);
  return p;
}

TEST_IMPL(exif_orientation) {
  vl_raw_t r;
  make(&r, 64, 32, 3, VL_CONTENT_SHAPES, 2);
  vl_image_buf_t b = {0};
  encode(&r, VL_IMG_JPEG, 90, 0, &b);
  for (int le = 0; le <= 1; le++)
    for (int o = 1; o <= 8; o++) {
      size_t n;
      uint8_t *p = exif_jpeg(&b, o, le, &n);
      vl_codec_info_t info;
      ASSERT_INT_EQ(vl_codec_probe(p, n, &info), 0);
      ASSERT_INT_EQ(info.orientation, o);
      vl_raw_t d = {0};
      ASSERT_INT_EQ(vl_codec_decode(NULL, p, n, 0, &d), 0); /* stored pixels, not rotated */
      ASSERT_INT_EQ(d.w, 64);
      vl_image_raw_free(&d);
      free(p);
    }
  vl_image_buf_free(&b);
  vl_image_raw_free(&r);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static void assert_distinct(uint64_t *h, size_t n) {
  qsort(h, n, sizeof(*h), cmp_u64);
  for (size_t i = 1; i < n; i++)
    ASSERT(h[i] != h[i - 1]);
}

TEST_IMPL(stamp_layout) {
  ASSERT_INT_EQ(vl_pixels_stamp_rows(224, 224), 80);   /* 14 blocks of 16 to a row, 5 rows */
  ASSERT_INT_EQ(vl_pixels_stamp_rows(1024, 1024), 16); /* 64 blocks of 16 in one row */
  ASSERT_INT_EQ(vl_pixels_stamp_rows(16, 16), 16);     /* 8x8 blocks of 2 */
  /* The stamp touches its band only. */
  vl_raw_t a, b;
  make(&a, 300, 200, 4, VL_CONTENT_PHOTO, 1);
  make(&b, 300, 200, 4, VL_CONTENT_PHOTO, 1);
  vl_pixels_stamp(&b, 0xdeadbeefcafef00dull);
  size_t band = (size_t)vl_pixels_stamp_rows(300, 200) * 300 * 4;
  ASSERT(memcmp(a.px, b.px, band) != 0);
  ASSERT_MEM_EQ(a.px + band, b.px + band, vl_image_raw_size(&a) - band);
  /* Restamping overwrites: stamping n after m equals stamping n alone. */
  vl_pixels_stamp(&a, 5);
  vl_pixels_stamp(&a, 0xdeadbeefcafef00dull);
  ASSERT_MEM_EQ(a.px, b.px, vl_image_raw_size(&a));
  vl_image_raw_free(&a);
  vl_image_raw_free(&b);
}

/* 1000 different n on a 224x224 image give 1000 different decoded images after JPEG q50. */
TEST_IMPL(stamp_survives_jpeg_q50) {
  enum { N = 1000 };
  uint64_t *h = malloc(N * sizeof(uint64_t));
  vl_codec_t codec = {0};
  vl_raw_t r, d = {0};
  vl_image_buf_t b = {0};
  make(&r, 224, 224, 3, VL_CONTENT_PHOTO, 11);
  uint64_t seed = 99;
  for (int i = 0; i < N; i++) {
    /* Counters and random values alike. */
    uint64_t n = i < N / 2 ? (uint64_t)i : task_rand(&seed);
    vl_pixels_stamp(&r, n);
    vl_codec_opts_t o = {.fmt = VL_IMG_JPEG, .quality = 50};
    ASSERT_INT_EQ(vl_codec_encode(&codec, &r, &o, &b), 0);
    ASSERT_INT_EQ(vl_codec_decode(&codec, b.p, b.n, 0, &d), 0);
    h[i] = vl_image_hash(&d);
  }
  assert_distinct(h, N);
  free(h);
  vl_codec_free(&codec);
  vl_image_buf_free(&b);
  vl_image_raw_free(&r);
  vl_image_raw_free(&d);
}

/* 1000 different n on a 1024x1024 PNG give 1000 different pixel hashes; PNG is lossless, so the
 * decoded pixels are the stamped ones (checked on a sample). */
TEST_IMPL(stamp_png_1024) {
  enum { N = 1000 };
  uint64_t *h = malloc(N * sizeof(uint64_t));
  vl_raw_t r, d = {0};
  vl_image_buf_t b = {0};
  make(&r, 1024, 1024, 3, VL_CONTENT_GRADIENT, 12);
  for (int i = 0; i < N; i++) {
    vl_pixels_stamp(&r, (uint64_t)i * 0x9e3779b97f4a7c15ull);
    h[i] = vl_image_hash(&r);
    if (i % 250 == 0) {
      encode(&r, VL_IMG_PNG, 0, 0, &b);
      ASSERT_INT_EQ(vl_codec_decode(NULL, b.p, b.n, 0, &d), 0);
      ASSERT_UINT_EQ(vl_image_hash(&d), h[i]);
    }
  }
  assert_distinct(h, N);
  free(h);
  vl_image_buf_free(&b);
  vl_image_raw_free(&r);
  vl_image_raw_free(&d);
}

/* Small images: every n in a run of 1000 still gives distinct PNG pixels. */
TEST_IMPL(stamp_small) {
  static const int sizes[][2] = {{16, 16}, {8, 8}, {64, 4}, {100, 1}};
  enum { N = 1000 };
  uint64_t *h = malloc(N * sizeof(uint64_t));
  for (size_t s = 0; s < VL_ARRAY_SIZE(sizes); s++) {
    vl_raw_t r;
    make(&r, sizes[s][0], sizes[s][1], 1, VL_CONTENT_NOISE, s);
    for (int i = 0; i < N; i++) {
      vl_pixels_stamp(&r, (uint64_t)i);
      h[i] = vl_image_hash(&r);
    }
    assert_distinct(h, N);
    vl_image_raw_free(&r);
  }
  free(h);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(raw_alloc),
      TEST_ENTRY(hash_fnv1a),
      TEST_ENTRY(render_deterministic),
      TEST_ENTRY(render_sizes),
      TEST_ENTRY(png_roundtrip),
      TEST_ENTRY(png_levels),
      TEST_ENTRY(jpeg_roundtrip),
      TEST_ENTRY(jpeg_quality),
      TEST_ENTRY(detect_by_content),
      TEST_ENTRY(decode_truncated_and_corrupt),
      TEST_ENTRY(decode_bomb_refused_before_allocating),
      TEST_ENTRY(png_foreign_kinds),
      TEST_ENTRY(resize),
      TEST_ENTRY(orient),
      TEST_ENTRY(exif_orientation),
      TEST_ENTRY(stamp_layout),
      TEST_ENTRY(stamp_survives_jpeg_q50),
      TEST_ENTRY(stamp_png_1024),
      TEST_ENTRY(stamp_small),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
