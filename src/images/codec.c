#include "codec.h"
#include "vlmload/common.h"

#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <zlib.h>

/* --- codec contexts --------------------------------------------------------------------------- */

void vl_codec_init(vl_codec_t *c) {
  c->tjc = NULL;
  c->tjd = NULL;
}

void vl_codec_free(vl_codec_t *c) {
  if (c->tjc)
    tjDestroy(c->tjc);
  if (c->tjd)
    tjDestroy(c->tjd);
  c->tjc = c->tjd = NULL;
}

/* --- header parsing --------------------------------------------------------------------------- */

static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

vl_image_fmt_t vl_codec_detect(const uint8_t *p, size_t n) {
  if (n >= 8 && memcmp(p, png_sig, 8) == 0)
    return VL_IMG_PNG;
  if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
    return VL_IMG_JPEG;
  return VL_IMG_UNKNOWN;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t be16(const uint8_t *p) {
  return (uint16_t)(p[0] << 8 | p[1]);
}

/* IHDR, then the chunks before the first IDAT, for tRNS. */
static int probe_png(const uint8_t *p, size_t n, vl_codec_info_t *info) {
  if (n < 33 || be32(p + 8) != 13 || memcmp(p + 12, "IHDR", 4) != 0)
    return VL_EIMAGE;
  if (crc32(crc32(0, NULL, 0), p + 12, 17) != be32(p + 29))
    return VL_EIMAGE;
  uint32_t w = be32(p + 16), h = be32(p + 20);
  int depth = p[24], ctype = p[25], interlace = p[28];
  if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu || interlace > 1)
    return VL_EIMAGE;
  static const int ok_depths[7] = {[0] = 0x1f, [2] = 0x18, [3] = 0x0f, [4] = 0x18, [6] = 0x18};
  int bit = depth == 1    ? 0
            : depth == 2  ? 1
            : depth == 4  ? 2
            : depth == 8  ? 3
            : depth == 16 ? 4
                          : -1;
  if (ctype > 6 || bit < 0 || !(ok_depths[ctype] & (1 << bit)))
    return VL_EIMAGE;
  int trns = 0;
  for (size_t off = 33; off + 8 <= n;) {
    uint32_t len = be32(p + off);
    if (memcmp(p + off + 4, "IDAT", 4) == 0)
      break;
    if (memcmp(p + off + 4, "tRNS", 4) == 0)
      trns = 1;
    if (len > n - off - 8 || n - off - 8 - len < 4)
      break;
    off += 12 + (size_t)len;
  }
  info->fmt = VL_IMG_PNG;
  info->w = (int)VL_MIN(w, 0x7fffffffu);
  info->h = (int)VL_MIN(h, 0x7fffffffu);
  info->bit_depth = depth;
  info->color_type = ctype;
  info->interlaced = interlace;
  info->orientation = 1;
  if (ctype == 4 || ctype == 6 || trns)
    info->channels = 4;
  else
    info->channels = ctype == 0 ? 1 : 3;
  return 0;
}

/* The Orientation tag of IFD0 in an APP1 Exif payload; 1 when absent or malformed. */
static int exif_orientation(const uint8_t *p, size_t n) {
  if (n < 14 || memcmp(p, "Exif\0\0", 6) != 0)
    return 1;
  p += 6;
  n -= 6;
  int le;
  if (memcmp(p, "II*\0", 4) == 0)
    le = 1;
  else if (memcmp(p, "MM\0*", 4) == 0)
    le = 0;
  else
    return 1;
#define RD16(q) (le ? (uint16_t)((q)[0] | (q)[1] << 8) : be16(q))
#define RD32(q)                                                                                    \
  (le ? (uint32_t)(q)[0] | (uint32_t)(q)[1] << 8 | (uint32_t)(q)[2] << 16 | (uint32_t)(q)[3] << 24 \
      : be32(q))
  uint32_t ifd = RD32(p + 4);
  if (ifd > n || n - ifd < 2)
    return 1;
  unsigned count = RD16(p + ifd);
  for (unsigned i = 0; i < count; i++) {
    size_t e = ifd + 2 + (size_t)i * 12;
    if (e + 12 > n)
      return 1;
    if (RD16(p + e) == 0x0112 && RD16(p + e + 2) == 3) {
      unsigned v = RD16(p + e + 8);
      return v >= 1 && v <= 8 ? (int)v : 1;
    }
  }
#undef RD16
#undef RD32
  return 1;
}

/* Walks the markers up to the first frame header. */
static int probe_jpeg(const uint8_t *p, size_t n, vl_codec_info_t *info) {
  size_t off = 2;
  int orientation = 1;
  for (;;) {
    while (off < n && p[off] == 0xff && off + 1 < n && p[off + 1] == 0xff)
      off++; /* fill bytes */
    if (off + 4 > n || p[off] != 0xff)
      return VL_EIMAGE;
    int m = p[off + 1];
    if (m == 0xd8 || m == 0xd9 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {
      if (m == 0xd9)
        return VL_EIMAGE; /* EOI before any frame */
      off += 2;
      continue;
    }
    size_t len = be16(p + off + 2);
    if (len < 2 || off + 2 + len > n)
      return VL_EIMAGE;
    const uint8_t *seg = p + off + 4;
    size_t seglen = len - 2;
    if (m == 0xe1)
      orientation = VL_MAX(orientation, exif_orientation(seg, seglen));
    if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
      if (seglen < 6)
        return VL_EIMAGE;
      int h = be16(seg + 1), w = be16(seg + 3), comps = seg[5];
      if (w == 0 || h == 0 || (comps != 1 && comps != 3 && comps != 4))
        return VL_EIMAGE;
      info->fmt = VL_IMG_JPEG;
      info->w = w;
      info->h = h;
      info->bit_depth = seg[0];
      info->color_type = -1;
      info->interlaced = m == 0xc2 || m == 0xc6 || m == 0xca || m == 0xce;
      info->orientation = orientation;
      info->channels = comps == 1 ? 1 : comps == 3 ? 3 : 0; /* 0: CMYK, not decodable here */
      return 0;
    }
    if (m == 0xda)
      return VL_EIMAGE; /* scan data before a frame header */
    off += 2 + len;
  }
}

int vl_codec_probe(const uint8_t *p, size_t n, vl_codec_info_t *info) {
  if (!p || !info)
    return VL_EINVAL;
  memset(info, 0, sizeof(*info));
  switch (vl_codec_detect(p, n)) {
  case VL_IMG_PNG:
    return probe_png(p, n, info);
  case VL_IMG_JPEG:
    return probe_jpeg(p, n, info);
  default:
    return VL_EIMAGE;
  }
}

/* --- PNG -------------------------------------------------------------------------------------- */

typedef struct {
  const uint8_t *p;
  size_t n, off;
} memrd_t;

static void png_on_error(png_structp png, png_const_charp msg) {
  (void)msg;
  png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

static void png_on_read(png_structp png, png_bytep out, size_t len) {
  memrd_t *m = png_get_io_ptr(png);
  if (len > m->n - m->off)
    png_error(png, "truncated");
  memcpy(out, m->p + m->off, len);
  m->off += len;
}

static void png_on_write(png_structp png, png_bytep data, size_t len) {
  vl_image_buf_t *b = png_get_io_ptr(png);
  if (b->cap - b->n < len) {
    size_t cap = VL_MAX(b->cap * 2, b->n + len);
    if (vl_image_buf_reserve(b, cap) != 0)
      png_error(png, "out of memory");
  }
  memcpy(b->p + b->n, data, len);
  b->n += len;
}

static void png_on_flush(png_structp png) {
  (void)png;
}

/* State of one PNG call. Everything that changes after setjmp lives here, not in locals, so that
 * longjmp leaves it intact. */
typedef struct {
  png_structp png;
  png_infop info;
  memrd_t rd;
  uint8_t *px; /* pixels being written */
  int w, h, ch;
  int rc;
} pngjob_t;

static int png_decode(const uint8_t *p, size_t n, const vl_codec_info_t *hdr, vl_raw_t *out) {
  pngjob_t job = {.rd = {p, n, 0}};
  pngjob_t *j = &job;
  j->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, png_on_error, png_on_warning);
  if (!j->png)
    return VL_ENOMEM;
  j->info = png_create_info_struct(j->png);
  if (!j->info) {
    png_destroy_read_struct(&j->png, NULL, NULL);
    return VL_ENOMEM;
  }
  size_t need = (size_t)hdr->w * (size_t)hdr->h * (size_t)hdr->channels;
  j->px = out->px;
  if (!j->px || out->cap < need) {
    if (!(j->px = malloc(need))) {
      png_destroy_read_struct(&j->png, &j->info, NULL);
      return VL_ENOMEM;
    }
  }
  if (setjmp(png_jmpbuf(j->png))) {
    png_destroy_read_struct(&j->png, &j->info, NULL);
    if (j->px != out->px)
      free(j->px);
    return VL_EIMAGE;
  }
  /* Sizes were checked against the caller's limit from the header already. */
  png_set_user_limits(j->png, 0x7fffffff, 0x7fffffff);
  png_set_read_fn(j->png, &j->rd, png_on_read);
  png_read_info(j->png, j->info);
  png_uint_32 w, h;
  int depth, ctype, interlace;
  png_get_IHDR(j->png, j->info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
  if ((int)w != hdr->w || (int)h != hdr->h)
    png_error(j->png, "header mismatch");
  if (ctype == PNG_COLOR_TYPE_PALETTE)
    png_set_palette_to_rgb(j->png);
  if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8)
    png_set_expand_gray_1_2_4_to_8(j->png);
  if (png_get_valid(j->png, j->info, PNG_INFO_tRNS))
    png_set_tRNS_to_alpha(j->png);
  if (depth == 16)
    png_set_strip_16(j->png);
  if (hdr->channels == 4 && !(ctype & PNG_COLOR_MASK_COLOR))
    png_set_gray_to_rgb(j->png);
  int passes = png_set_interlace_handling(j->png);
  png_read_update_info(j->png, j->info);
  j->ch = png_get_channels(j->png, j->info);
  if (j->ch != hdr->channels || png_get_rowbytes(j->png, j->info) != (size_t)w * (size_t)j->ch)
    png_error(j->png, "unexpected layout");
  size_t stride = (size_t)w * (size_t)j->ch;
  for (int pass = 0; pass < passes; pass++)
    for (png_uint_32 y = 0; y < h; y++)
      png_read_row(j->png, j->px + y * stride, NULL);
  png_read_end(j->png, NULL);
  png_destroy_read_struct(&j->png, &j->info, NULL);
  vl_image_raw_adopt(out, j->px, need, hdr->w, hdr->h, hdr->channels);
  return 0;
}

static int png_encode(const vl_raw_t *r, const vl_codec_opts_t *o, vl_image_buf_t *out) {
  pngjob_t job = {0};
  pngjob_t *j = &job;
  j->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, png_on_error, png_on_warning);
  if (!j->png)
    return VL_ENOMEM;
  j->info = png_create_info_struct(j->png);
  if (!j->info) {
    png_destroy_write_struct(&j->png, NULL);
    return VL_ENOMEM;
  }
  j->rc = VL_EIMAGE;
  if (setjmp(png_jmpbuf(j->png))) {
    png_destroy_write_struct(&j->png, &j->info);
    return j->rc;
  }
  out->n = 0;
  png_set_write_fn(j->png, out, png_on_write, png_on_flush);
  int ctype = r->channels == 1   ? PNG_COLOR_TYPE_GRAY
              : r->channels == 3 ? PNG_COLOR_TYPE_RGB
                                 : PNG_COLOR_TYPE_RGB_ALPHA;
  png_set_IHDR(j->png, j->info, (png_uint_32)r->w, (png_uint_32)r->h, 8, ctype,
               o->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  int level = o->png_level > 0 ? VL_MIN(o->png_level, 9) : VL_IMAGE_PNG_LEVEL;
  png_set_compression_level(j->png, level);
  /* At the fast levels the adaptive filter search costs more than it saves: the Sub filter alone
   * takes most of the redundancy out of gradients and photographs, and run-length matching of its
   * output was both faster (up to 2x on noise) and smaller (up to 25%) than zlib's default
   * strategy on every synthetic content kind at 1024x1024. */
  if (level <= 3) {
    png_set_filter(j->png, 0, PNG_FILTER_SUB);
    png_set_compression_strategy(j->png, Z_RLE);
  } else {
    png_set_filter(j->png, 0, PNG_ALL_FILTERS);
  }
  png_write_info(j->png, j->info);
  int passes = png_set_interlace_handling(j->png);
  size_t stride = (size_t)r->w * (size_t)r->channels;
  for (int pass = 0; pass < passes; pass++)
    for (int y = 0; y < r->h; y++)
      png_write_row(j->png, r->px + (size_t)y * stride);
  png_write_end(j->png, NULL);
  png_destroy_write_struct(&j->png, &j->info);
  return 0;
}

/* --- JPEG ------------------------------------------------------------------------------------- */

static int jpeg_subsamp(int channels) {
  return channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
}

static int jpeg_encode(vl_codec_t *c, const vl_raw_t *r, const vl_codec_opts_t *o,
                       vl_image_buf_t *out) {
  if (!c->tjc && !(c->tjc = tjInitCompress()))
    return VL_ENOMEM;
  int sub = jpeg_subsamp(r->channels);
  unsigned long bound = tjBufSize(r->w, r->h, sub);
  if (bound == (unsigned long)-1)
    return VL_EINVAL;
  int rc = vl_image_buf_reserve(out, bound);
  if (rc)
    return rc;
  int pf = r->channels == 1 ? TJPF_GRAY : r->channels == 3 ? TJPF_RGB : TJPF_RGBA;
  int q = o->quality > 0 ? VL_MIN(o->quality, 100) : VL_IMAGE_JPEG_QUALITY;
  int flags = TJFLAG_NOREALLOC | (o->progressive ? TJFLAG_PROGRESSIVE : 0);
  unsigned char *dst = out->p;
  unsigned long size = out->cap;
  if (tjCompress2(c->tjc, r->px, r->w, r->w * r->channels, r->h, pf, &dst, &size, sub, q, flags) !=
      0)
    return VL_EIMAGE;
  out->n = size;
  return 0;
}

static int jpeg_decode(vl_codec_t *c, const uint8_t *p, size_t n, const vl_codec_info_t *hdr,
                       vl_raw_t *out) {
  if (!c->tjd && !(c->tjd = tjInitDecompress()))
    return VL_ENOMEM;
  if (hdr->channels == 0 || hdr->bit_depth != 8)
    return VL_EIMAGE; /* CMYK or 12-bit */
  int w, h, sub, cs;
  if (tjDecompressHeader3(c->tjd, p, n, &w, &h, &sub, &cs) != 0)
    return VL_EIMAGE;
  if (w != hdr->w || h != hdr->h || cs == TJCS_CMYK || cs == TJCS_YCCK)
    return VL_EIMAGE;
  int ch = cs == TJCS_GRAY ? 1 : 3;
  size_t need = (size_t)w * (size_t)h * (size_t)ch;
  uint8_t *px = out->px;
  if (!px || out->cap < need) {
    if (!(px = malloc(need)))
      return VL_ENOMEM;
  }
  /* Any warning (a premature end of data, corrupt entropy data) fails the call: the corpus loader
   * wants images that decode fully. TJFLAG_LIMITSCANS refuses progressive scan bombs. */
  if (tjDecompress2(c->tjd, p, n, px, w, w * ch, h, ch == 1 ? TJPF_GRAY : TJPF_RGB,
                    TJFLAG_LIMITSCANS | TJFLAG_STOPONWARNING) != 0) {
    if (px != out->px)
      free(px);
    return VL_EIMAGE;
  }
  vl_image_raw_adopt(out, px, need, w, h, ch);
  return 0;
}

/* --- codec entry points ----------------------------------------------------------------------- */

int vl_codec_encode(vl_codec_t *codec, const vl_raw_t *r, const vl_codec_opts_t *o,
                    vl_image_buf_t *out) {
  if (!r || !r->px || !o || !out || r->w < 1 || r->h < 1 || r->w > VL_IMAGE_MAX_SIDE ||
      r->h > VL_IMAGE_MAX_SIDE || (r->channels != 1 && r->channels != 3 && r->channels != 4))
    return VL_EINVAL;
  if (o->fmt == VL_IMG_PNG)
    return png_encode(r, o, out);
  if (o->fmt != VL_IMG_JPEG)
    return VL_EINVAL;
  vl_codec_t tmp = {0};
  int rc = jpeg_encode(codec ? codec : &tmp, r, o, out);
  vl_codec_free(&tmp);
  return rc;
}

size_t vl_codec_encode_bound(int w, int h, int channels, vl_image_fmt_t fmt) {
  if (fmt == VL_IMG_JPEG)
    return tjBufSize(w, h, jpeg_subsamp(channels));
  /* Filter bytes per row, with room for Adam7's extra short rows; zlib's bound; 12 bytes of
   * framing per 8 KiB IDAT chunk; signature, IHDR and IEND. */
  size_t raw = (size_t)h * ((size_t)w * (size_t)channels + 1) + 16 * ((size_t)h + 8);
  return compressBound((uLong)raw) + (raw / 8192 + 2) * 12 + 1024;
}

int vl_codec_decode(vl_codec_t *codec, const uint8_t *p, size_t n, uint64_t max_pixels,
                    vl_raw_t *out) {
  if (!p || !out)
    return VL_EINVAL;
  vl_codec_info_t hdr;
  int rc = vl_codec_probe(p, n, &hdr);
  if (rc)
    return rc;
  if (!max_pixels)
    max_pixels = VL_IMAGE_MAX_PIXELS;
  if (hdr.w > VL_IMAGE_MAX_SIDE || hdr.h > VL_IMAGE_MAX_SIDE ||
      (uint64_t)hdr.w * (uint64_t)hdr.h > max_pixels)
    return VL_E2BIG;
  if (hdr.fmt == VL_IMG_PNG)
    return png_decode(p, n, &hdr, out);
  vl_codec_t tmp = {0};
  rc = jpeg_decode(codec ? codec : &tmp, p, n, &hdr, out);
  vl_codec_free(&tmp);
  return rc;
}
