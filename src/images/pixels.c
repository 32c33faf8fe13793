#include "pixels.h"
#include "vlmload/common.h"

#include <stdlib.h>
#include <string.h>

static inline uint8_t clamp255(int v) {
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* --- resize ----------------------------------------------------------------------------------- */

#define WBITS 14 /* fixed-point filter weights */

typedef struct {
  int *start; /* first source index per output index */
  int *count; /* taps per output index */
  int32_t *w; /* taps, `stride` per output index */
  int stride;
} taps_t;

/* Triangle filter of radius max(1, in/out) source pixels around each output pixel's centre,
 * weights normalised to 1 << WBITS. */
static int taps_build(taps_t *t, int in, int out) {
  double scale = (double)in / out;
  double support = scale > 1 ? scale : 1;
  t->stride = (int)support * 2 + 3;
  t->start = malloc(sizeof(int) * (size_t)out);
  t->count = malloc(sizeof(int) * (size_t)out);
  t->w = malloc(sizeof(int32_t) * (size_t)out * (size_t)t->stride);
  double *tmp = malloc(sizeof(double) * (size_t)t->stride);
  if (!t->start || !t->count || !t->w || !tmp) {
    free(tmp);
    return VL_ENOMEM;
  }
  for (int i = 0; i < out; i++) {
    double centre = (i + 0.5) * scale;
    int lo = (int)(centre - support), hi = (int)(centre + support) + 1;
    if (lo < 0)
      lo = 0;
    if (hi > in)
      hi = in;
    if (hi - lo > t->stride)
      hi = lo + t->stride;
    double sum = 0;
    for (int j = lo; j < hi; j++) {
      double d = (j + 0.5 - centre) / support;
      double v = 1.0 - (d < 0 ? -d : d);
      tmp[j - lo] = v > 0 ? v : 0;
      sum += tmp[j - lo];
    }
    int32_t *wt = t->w + (size_t)i * t->stride;
    int32_t total = 0, best = 0;
    for (int j = 0; j < hi - lo; j++) {
      wt[j] = sum > 0 ? (int32_t)(tmp[j] / sum * (1 << WBITS) + 0.5) : 0;
      total += wt[j];
      if (wt[j] > wt[best])
        best = j;
    }
    if (sum <= 0) {
      /* Cannot happen for in >= 1, but keep the row well defined. */
      wt[0] = 1 << WBITS;
      hi = lo + 1;
      total = 1 << WBITS;
      best = 0;
    }
    wt[best] += (1 << WBITS) - total; /* exact unity gain */
    t->start[i] = lo;
    t->count[i] = hi - lo;
  }
  free(tmp);
  return 0;
}

static void taps_free(taps_t *t) {
  free(t->start);
  free(t->count);
  free(t->w);
}

int vl_pixels_resize(const vl_raw_t *src, vl_raw_t *dst, int w, int h) {
  if (!src || !src->px || !dst || src == dst)
    return VL_EINVAL;
  int ch = src->channels;
  int rc = vl_image_raw_alloc(dst, w, h, ch);
  if (rc)
    return rc;
  int sw = src->w, sh = src->h;
  taps_t tx = {0}, ty = {0};
  uint8_t *mid = malloc((size_t)sh * w * ch); /* horizontal pass: sh rows of w pixels */
  int32_t *acc = malloc(sizeof(int32_t) * (size_t)w * ch);
  if (!mid || !acc || taps_build(&tx, sw, w) || taps_build(&ty, sh, h)) {
    rc = VL_ENOMEM;
    goto done;
  }
  const int32_t half = 1 << (WBITS - 1);
  for (int y = 0; y < sh; y++) {
    const uint8_t *in = src->px + (size_t)y * sw * ch;
    uint8_t *o = mid + (size_t)y * w * ch;
    if (sw == w) {
      memcpy(o, in, (size_t)w * ch);
      continue;
    }
    for (int x = 0; x < w; x++) {
      const int32_t *wt = tx.w + (size_t)x * tx.stride;
      const uint8_t *p = in + (size_t)tx.start[x] * ch;
      int n = tx.count[x];
      for (int c = 0; c < ch; c++) {
        int32_t s = half;
        for (int k = 0; k < n; k++)
          s += wt[k] * p[k * ch + c];
        o[(size_t)x * ch + c] = clamp255(s >> WBITS);
      }
    }
  }
  size_t rowlen = (size_t)w * ch;
  for (int y = 0; y < h; y++) {
    uint8_t *o = dst->px + (size_t)y * rowlen;
    if (sh == h) {
      memcpy(o, mid + (size_t)y * rowlen, rowlen);
      continue;
    }
    const int32_t *wt = ty.w + (size_t)y * ty.stride;
    for (size_t i = 0; i < rowlen; i++)
      acc[i] = half;
    for (int k = 0; k < ty.count[y]; k++) {
      const uint8_t *row = mid + (size_t)(ty.start[y] + k) * rowlen;
      int32_t wk = wt[k];
      for (size_t i = 0; i < rowlen; i++)
        acc[i] += wk * row[i];
    }
    for (size_t i = 0; i < rowlen; i++)
      o[i] = clamp255(acc[i] >> WBITS);
  }
done:
  taps_free(&tx);
  taps_free(&ty);
  free(acc);
  free(mid);
  return rc;
}

/* --- orientation ------------------------------------------------------------------------------ */

int vl_pixels_orient(vl_raw_t *r, int o) {
  if (!r || !r->px || o < 1 || o > 8)
    return VL_EINVAL;
  if (o == 1)
    return 0;
  int w = r->w, h = r->h, ch = r->channels;
  int ow = o >= 5 ? h : w, oh = o >= 5 ? w : h;
  uint8_t *px = malloc(vl_image_raw_size(r));
  if (!px)
    return VL_ENOMEM;
  for (int y = 0; y < oh; y++) {
    uint8_t *d = px + (size_t)y * ow * ch;
    for (int x = 0; x < ow; x++, d += ch) {
      int sx, sy;
      switch (o) {
      case 2:
        sx = w - 1 - x, sy = y;
        break;
      case 3:
        sx = w - 1 - x, sy = h - 1 - y;
        break;
      case 4:
        sx = x, sy = h - 1 - y;
        break;
      case 5:
        sx = y, sy = x;
        break;
      case 6:
        sx = y, sy = h - 1 - x;
        break;
      case 7:
        sx = w - 1 - y, sy = h - 1 - x;
        break;
      default:
        sx = w - 1 - y, sy = x;
        break;
      }
      memcpy(d, r->px + ((size_t)sy * w + sx) * ch, (size_t)ch);
    }
  }
  vl_image_raw_adopt(r, px, (size_t)w * h * ch, ow, oh, ch);
  return 0;
}

/* --- stamp ------------------------------------------------------------------------------------ */

/* The band layout: blocks of b x b pixels, `cols` to a row, `rows` rows, holding `bits` bits. */
static void stamp_layout(int w, int h, int *b, int *cols, int *rows, int *bits) {
  for (int s = 16; s >= 1; s /= 2) {
    int c = VL_MIN(64, w / s);
    if (c < 1)
      continue;
    int r = (64 + c - 1) / c;
    if (r * s <= h) {
      *b = s;
      *cols = c;
      *rows = r;
      *bits = 64;
      return;
    }
  }
  /* Fewer pixels than bits: one bit per pixel, as many as fit. */
  *b = 1;
  *cols = w;
  *rows = h;
  *bits = w * h;
}

int vl_pixels_stamp_rows(int w, int h) {
  int b, cols, rows, bits;
  stamp_layout(w, h, &b, &cols, &rows, &bits);
  return b * rows;
}

void vl_pixels_stamp(vl_raw_t *r, uint64_t n) {
  int b, cols, rows, bits;
  stamp_layout(r->w, r->h, &b, &cols, &rows, &bits);
  int ch = r->channels;
  size_t stride = (size_t)r->w * ch;
  for (int by = 0; by < rows; by++) {
    for (int y = by * b; y < (by + 1) * b; y++) {
      uint8_t *row = r->px + (size_t)y * stride;
      for (int bx = 0; bx < cols; bx++) {
        int i = by * cols + bx;
        /* Blocks past the last bit (the tail of the last band row) are black. */
        uint8_t v = i < bits && i < 64 && (n >> i & 1) ? 255 : 0;
        uint8_t *p = row + (size_t)bx * b * ch;
        if (ch == 4) {
          for (int k = 0; k < b; k++, p += 4) {
            p[0] = p[1] = p[2] = v;
            p[3] = 255;
          }
        } else {
          memset(p, v, (size_t)b * ch);
        }
      }
    }
  }
}
