#include "vlmload/image.h"
#include "vlmload/common.h"

#include <stdlib.h>
#include <string.h>

/* --- raw images and buffers ------------------------------------------------------------------- */

int vl_image_raw_alloc(vl_raw_t *r, int w, int h, int channels) {
  if (w < 1 || h < 1 || w > VL_IMAGE_MAX_SIDE || h > VL_IMAGE_MAX_SIDE)
    return VL_EINVAL;
  if (channels != 1 && channels != 3 && channels != 4)
    return VL_EINVAL;
  size_t need = (size_t)w * (size_t)h * (size_t)channels;
  uint8_t *p = r->px;
  if (!p || r->cap < need) {
    if (!(p = malloc(need)))
      return VL_ENOMEM;
  }
  vl_image_raw_adopt(r, p, need, w, h, channels);
  return 0;
}

void vl_image_raw_adopt(vl_raw_t *r, uint8_t *px, size_t cap, int w, int h, int channels) {
  if (px != r->px) {
    free(r->px);
    r->px = px;
    r->cap = cap;
  }
  r->w = w;
  r->h = h;
  r->channels = channels;
}

void vl_image_raw_free(vl_raw_t *r) {
  free(r->px);
  memset(r, 0, sizeof(*r));
}

int vl_image_buf_reserve(vl_image_buf_t *b, size_t cap) {
  if (b->cap >= cap)
    return 0;
  uint8_t *p = realloc(b->p, cap);
  if (!p)
    return VL_ENOMEM;
  b->p = p;
  b->cap = cap;
  return 0;
}

void vl_image_buf_free(vl_image_buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof(*b));
}

const char *vl_image_content_name(vl_image_content_t kind) {
  static const char *const names[] = {"photo", "noise", "gradient", "shapes", "mixed"};
  return (unsigned)kind < VL_ARRAY_SIZE(names) ? names[kind] : "unknown";
}

const char *vl_image_fmt_name(vl_image_fmt_t fmt) {
  switch (fmt) {
  case VL_IMG_PNG:
    return "png";
  case VL_IMG_JPEG:
    return "jpeg";
  case VL_IMG_MIXED:
    return "mixed";
  default:
    return "unknown";
  }
}

/* --- synthetic content ------------------------------------------------------------------------
 *
 * Every kind draws one RGB row at a time; rows are then packed into the image's channels (gray by
 * BT.601 luma, alpha from a per-image ramp). All arithmetic in the pixel loops is integer: the few
 * square roots (ellipse spans) are taken once per row and shape. */

static inline uint64_t mix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform integer in [lo, hi]; the tiny modulo bias does not matter for pictures. */
static inline int rnd(uint64_t *s, int lo, int hi) {
  return lo + (int)(mix64(s) % (uint64_t)(hi - lo + 1));
}

/* xorshift64*: the grain generator, cheaper than mix64 and plenty for pixels. */
static inline uint64_t xs64(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545f4914f6cdd1dull;
}

static inline uint8_t clamp255(int v) {
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

#define MAX_SHAPES 40
#define GRID_MAX   33
#define GRAIN_TAB  65536 /* a power of two */

typedef enum { SH_RECT, SH_ELLIPSE, SH_POLY } shape_kind_t;

typedef struct {
  shape_kind_t kind;
  int y0, y1;    /* rows covered, [y0, y1) */
  double x0, x1; /* rectangle columns */
  double cx, cy, rx, ry;
  double px[4], py[4]; /* convex polygon, 3 or 4 vertices */
  int np;
  uint8_t rgb[3];
  int blend; /* 0: solid; 1: average with what is under it */
} shape_t;

/* A smooth field: a (gw+1) x (gh+1) lattice of colours, interpolated with smoothstep weights. */
typedef struct {
  int gw, gh;
  uint8_t lat[GRID_MAX + 1][GRID_MAX + 1][3];
  int seg[GRID_MAX + 1]; /* first column of each lattice cell; seg[gw] = width */
  uint8_t *wx;           /* per column: smoothstep weight towards the next lattice column, 0..255 */
  int amp;               /* contribution in 1/256 */
  int linear;            /* linear weights instead of smoothstep */
} field_t;

typedef struct {
  vl_image_content_t kind;
  int w, h;
  uint64_t grain; /* xorshift state for noise and grain */
  uint8_t corner[4][3];
  int n_shapes;
  shape_t shapes[MAX_SHAPES];
  field_t field[2];
  int8_t *grain_tab;  /* GRAIN_TAB + 3 * width offsets in [-amp, amp] */
  int alpha0, alpha1; /* alpha ramp, left to right */
  uint8_t smooth[256];
} render_t;

static void random_colour(uint64_t *s, uint8_t rgb[3]) {
  for (int c = 0; c < 3; c++)
    rgb[c] = (uint8_t)rnd(s, 0, 255);
}

static void make_shape(render_t *st, uint64_t *s, shape_t *sh) {
  int w = st->w, h = st->h;
  int maxdim = VL_MAX(w, h);
  random_colour(s, sh->rgb);
  sh->blend = 0;
  int k = rnd(s, 0, 9);
  if (k < 3) {
    sh->kind = SH_RECT;
    int rw = rnd(s, 1, VL_MAX(1, w / 2)), rh = rnd(s, 1, VL_MAX(1, h / 2));
    int x = rnd(s, -rw / 2, w - 1), y = rnd(s, -rh / 2, h - 1);
    sh->x0 = x;
    sh->x1 = x + rw;
    sh->y0 = y;
    sh->y1 = y + rh;
  } else if (k < 6) {
    sh->kind = SH_ELLIPSE;
    sh->rx = rnd(s, 1, VL_MAX(1, maxdim / 5));
    sh->ry = rnd(s, 1, VL_MAX(1, maxdim / 5));
    sh->cx = rnd(s, 0, w - 1) + 0.5;
    sh->cy = rnd(s, 0, h - 1) + 0.5;
    sh->y0 = (int)(sh->cy - sh->ry);
    sh->y1 = (int)(sh->cy + sh->ry) + 1;
  } else if (k < 8) {
    /* A triangle. */
    sh->kind = SH_POLY;
    sh->np = 3;
    double cx = rnd(s, 0, w - 1), cy = rnd(s, 0, h - 1);
    int r = VL_MAX(2, maxdim / 4);
    for (int i = 0; i < 3; i++) {
      sh->px[i] = cx + rnd(s, -r, r);
      sh->py[i] = cy + rnd(s, -r, r);
    }
    /* Order the vertices around the centroid is not needed: spans use min/max of crossings. */
  } else {
    /* A thick line: a rotated thin rectangle. */
    sh->kind = SH_POLY;
    sh->np = 4;
    double x0 = rnd(s, 0, w - 1), y0 = rnd(s, 0, h - 1);
    double x1 = rnd(s, 0, w - 1), y1 = rnd(s, 0, h - 1);
    double dx = x1 - x0, dy = y1 - y0;
    double len = dx * dx + dy * dy;
    double t = rnd(s, 1, VL_MAX(1, maxdim / 60)) * 0.5;
    double nx = 0, ny = t;
    if (len > 0) {
      /* One square root per shape, at set-up. */
      double inv = 1.0 / __builtin_sqrt(len);
      nx = -dy * inv * t;
      ny = dx * inv * t;
    }
    sh->px[0] = x0 + nx, sh->py[0] = y0 + ny;
    sh->px[1] = x1 + nx, sh->py[1] = y1 + ny;
    sh->px[2] = x1 - nx, sh->py[2] = y1 - ny;
    sh->px[3] = x0 - nx, sh->py[3] = y0 - ny;
  }
  if (sh->kind == SH_POLY) {
    double lo = sh->py[0], hi = sh->py[0];
    for (int i = 1; i < sh->np; i++) {
      lo = VL_MIN(lo, sh->py[i]);
      hi = VL_MAX(hi, sh->py[i]);
    }
    sh->y0 = (int)lo - 1;
    sh->y1 = (int)hi + 2;
  }
}

/* The columns [*a, *b) a shape covers on row y, clipped to the image; returns 0 when none. */
static int shape_span(const shape_t *sh, int y, int w, int *a, int *b) {
  if (y < sh->y0 || y >= sh->y1)
    return 0;
  double x0, x1, yc = y + 0.5;
  switch (sh->kind) {
  case SH_RECT:
    x0 = sh->x0;
    x1 = sh->x1;
    break;
  case SH_ELLIPSE: {
    double d = (yc - sh->cy) / sh->ry;
    double q = 1.0 - d * d;
    if (q <= 0)
      return 0;
    double half = sh->rx * __builtin_sqrt(q);
    x0 = sh->cx - half;
    x1 = sh->cx + half;
    break;
  }
  default: {
    x0 = 1e30;
    x1 = -1e30;
    for (int i = 0; i < sh->np; i++) {
      int j = (i + 1) % sh->np;
      double ya = sh->py[i], yb = sh->py[j];
      if ((yc < ya) == (yc < yb))
        continue;
      double x = sh->px[i] + (yc - ya) * (sh->px[j] - sh->px[i]) / (yb - ya);
      x0 = VL_MIN(x0, x);
      x1 = VL_MAX(x1, x);
    }
    if (x0 > x1)
      return 0;
    break;
  }
  }
  int ia = x0 < 0 ? 0 : x0 > w ? w : (int)(x0 + 0.5);
  int ib = x1 < 0 ? 0 : x1 > w ? w : (int)(x1 + 0.5);
  if (ib <= ia)
    return 0;
  *a = ia;
  *b = ib;
  return 1;
}

static void draw_shapes(const render_t *st, int y, uint8_t *row) {
  for (int i = 0; i < st->n_shapes; i++) {
    const shape_t *sh = &st->shapes[i];
    int a, b;
    if (!shape_span(sh, y, st->w, &a, &b))
      continue;
    uint8_t *p = row + (size_t)a * 3;
    if (sh->blend) {
      for (int x = a; x < b; x++, p += 3) {
        p[0] = (uint8_t)((p[0] + sh->rgb[0]) >> 1);
        p[1] = (uint8_t)((p[1] + sh->rgb[1]) >> 1);
        p[2] = (uint8_t)((p[2] + sh->rgb[2]) >> 1);
      }
    } else {
      for (int x = a; x < b; x++, p += 3) {
        p[0] = sh->rgb[0];
        p[1] = sh->rgb[1];
        p[2] = sh->rgb[2];
      }
    }
  }
}

/* Four-corner bilinear gradient: per row, the two edge colours; per pixel, a fixed-point step. */
static void draw_gradient(const render_t *st, int y, uint8_t *row) {
  int w = st->w, h = st->h;
  int fy = h > 1 ? (int)(((int64_t)y << 16) / (h - 1)) : 0;
  for (int c = 0; c < 3; c++) {
    int32_t l = (st->corner[0][c] << 16) + (st->corner[2][c] - st->corner[0][c]) * fy;
    int32_t r = (st->corner[1][c] << 16) + (st->corner[3][c] - st->corner[1][c]) * fy;
    int32_t step = w > 1 ? (int32_t)(((int64_t)r - l) / (w - 1)) : 0;
    int32_t v = l;
    uint8_t *p = row + c;
    for (int x = 0; x < w; x++, p += 3, v += step)
      *p = (uint8_t)(v >> 16);
  }
}

/* A field of `cells` lattice cells across. The coarse field carries colour with smoothstep
 * weights; the fine one (mono) varies brightness only, linearly, so it reads as texture rather
 * than as a grid of coloured tiles. */
static void field_init(render_t *st, field_t *f, uint64_t *s, int cells, int amp, int mono) {
  int w = st->w, h = st->h;
  f->gw = VL_MAX(1, VL_MIN(GRID_MAX, cells));
  f->gh = VL_MAX(1, VL_MIN(GRID_MAX, (int)((int64_t)cells * h / VL_MAX(w, 1))));
  f->amp = amp;
  f->linear = mono;
  for (int j = 0; j <= f->gh; j++)
    for (int i = 0; i <= f->gw; i++) {
      random_colour(s, f->lat[j][i]);
      if (mono)
        f->lat[j][i][1] = f->lat[j][i][2] = f->lat[j][i][0];
    }
  for (int i = 0; i <= f->gw; i++)
    f->seg[i] = w;
  for (int x = w - 1; x >= 0; x--) {
    /* Position on the lattice in 1/256 of a cell. */
    int64_t pos = (int64_t)x * f->gw * 256 / w;
    f->seg[pos >> 8] = x;
    f->wx[x] = f->linear ? (uint8_t)(pos & 255) : st->smooth[pos & 255];
  }
  /* A cell narrower than a pixel starts where the next one does. */
  for (int i = f->gw - 1; i >= 0; i--)
    if (f->seg[i] > f->seg[i + 1])
      f->seg[i] = f->seg[i + 1];
}

/* Adds (amp/256) x the field's colour, in 8.8 fixed point, into three planar accumulator rows.
 * Within one lattice cell the two end colours are constant, so the inner loop is a plain
 * multiply-add over contiguous memory that the compiler vectorises. */
static void field_row(const render_t *st, const field_t *f, int y, int32_t *acc) {
  int h = st->h, w = st->w;
  int64_t pos = (int64_t)y * f->gh * 256 / h;
  int cy = (int)(pos >> 8);
  int wy = f->linear ? (int)(pos & 255) : st->smooth[pos & 255];
  int32_t col[3][GRID_MAX + 1];
  for (int i = 0; i <= f->gw; i++)
    for (int c = 0; c < 3; c++)
      col[c][i] = (f->lat[cy][i][c] * (256 - wy) + f->lat[cy + 1][i][c] * wy) * f->amp >> 8;
  for (int c = 0; c < 3; c++) {
    for (int i = 0; i < f->gw; i++) {
      int32_t lo = col[c][i], d = col[c][i + 1] - lo;
      int32_t *restrict a = acc + (size_t)c * w;
      const uint8_t *restrict wx = f->wx;
      for (int k = f->seg[i]; k < f->seg[i + 1]; k++)
        a[k] += lo + ((d * wx[k]) >> 8);
    }
  }
}

static void draw_photo(const render_t *st, int y, uint8_t *row, int32_t *acc) {
  int w = st->w;
  memset(acc, 0, (size_t)w * 3 * sizeof(*acc));
  field_row(st, &st->field[0], y, acc);
  field_row(st, &st->field[1], y, acc);
  /* Interleave with grain: a row of the per-image grain table from a per-row offset. */
  uint64_t state = st->grain ^ ((uint64_t)(y + 1) * 0x9e3779b97f4a7c15ull);
  const int8_t *g = st->grain_tab + (xs64(&state) & (GRAIN_TAB - 1));
  const int32_t *r0 = acc, *r1 = acc + w, *r2 = acc + 2 * (size_t)w;
  for (int x = 0; x < w; x++) {
    uint8_t *p = row + (size_t)x * 3;
    p[0] = clamp255((r0[x] >> 8) + g[3 * x]);
    p[1] = clamp255((r1[x] >> 8) + g[3 * x + 1]);
    p[2] = clamp255((r2[x] >> 8) + g[3 * x + 2]);
  }
  draw_shapes(st, y, row);
}

static void draw_noise(const render_t *st, int y, uint8_t *row) {
  uint64_t state = st->grain ^ ((uint64_t)(y + 1) * 0x9e3779b97f4a7c15ull);
  size_t n = (size_t)st->w * 3, i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = xs64(&state);
    memcpy(row + i, &v, 8);
  }
  if (i < n) {
    uint64_t v = xs64(&state);
    memcpy(row + i, &v, n - i);
  }
}

static int render_setup(render_t *st, vl_image_content_t kind, uint64_t seed, int w, int h) {
  uint64_t s = seed ^ 0x6a09e667f3bcc909ull;
  memset(st, 0, sizeof(*st));
  if (kind == VL_CONTENT_MIXED || (unsigned)kind > VL_CONTENT_MIXED)
    kind = (vl_image_content_t)(mix64(&s) % 4);
  st->kind = kind;
  st->w = w;
  st->h = h;
  st->grain = mix64(&s) | 1;
  for (int i = 0; i < 256; i++) {
    /* smoothstep, 3t^2 - 2t^3, in 1/256. */
    int t = i;
    st->smooth[i] = (uint8_t)((3 * t * t * 256 - 2 * t * t * t) / (256 * 256));
  }
  for (int i = 0; i < 4; i++)
    random_colour(&s, st->corner[i]);
  st->alpha0 = rnd(&s, 64, 255);
  st->alpha1 = rnd(&s, 64, 255);
  int area_scale = (int)VL_MIN(8, ((int64_t)w * h) / (256 * 256) + 1);
  switch (kind) {
  case VL_CONTENT_SHAPES:
    st->n_shapes = VL_MIN(MAX_SHAPES, rnd(&s, 6, 12) + 3 * area_scale);
    break;
  case VL_CONTENT_PHOTO: {
    st->n_shapes = rnd(&s, 2, 6);
    int amp = rnd(&s, 3, 8);
    size_t n = GRAIN_TAB + (size_t)w * 3;
    if (!(st->grain_tab = malloc(n)))
      return VL_ENOMEM;
    uint64_t g = st->grain;
    for (size_t i = 0; i < n; i++)
      st->grain_tab[i] = (int8_t)((int)((xs64(&g) >> 56) * (unsigned)(2 * amp + 1) >> 8) - amp);
    break;
  }
  default:
    break;
  }
  for (int i = 0; i < st->n_shapes; i++) {
    make_shape(st, &s, &st->shapes[i]);
    st->shapes[i].blend = kind == VL_CONTENT_PHOTO;
  }
  if (kind == VL_CONTENT_PHOTO) {
    if (!(st->field[0].wx = malloc((size_t)w * 2)))
      return VL_ENOMEM;
    st->field[1].wx = st->field[0].wx + w;
    /* A coarse field carries the colour; a finer one the texture. */
    field_init(st, &st->field[0], &s, rnd(&s, 2, 5), 208, 0);
    field_init(st, &st->field[1], &s, rnd(&s, 12, 24), 48, 1);
  }
  return 0;
}

static void render_free(render_t *st) {
  free(st->field[0].wx);
  free(st->grain_tab);
}

int vl_image_render(vl_raw_t *r, vl_image_content_t kind, uint64_t seed) {
  int w = r->w, h = r->h, ch = r->channels;
  render_t *st = malloc(sizeof(*st));
  if (!st)
    return VL_ENOMEM;
  int rc = render_setup(st, kind, seed, w, h);
  uint8_t *rowbuf = malloc((size_t)w * 3);
  int32_t *acc = malloc((size_t)w * 3 * sizeof(int32_t));
  if (rc || !rowbuf || !acc) {
    rc = VL_ENOMEM;
    goto done;
  }
  for (int y = 0; y < h; y++) {
    uint8_t *out = r->px + (size_t)y * w * ch;
    uint8_t *row = ch == 3 ? out : rowbuf;
    switch (st->kind) {
    case VL_CONTENT_NOISE:
      draw_noise(st, y, row);
      break;
    case VL_CONTENT_GRADIENT:
      draw_gradient(st, y, row);
      break;
    case VL_CONTENT_SHAPES:
      draw_gradient(st, y, row);
      draw_shapes(st, y, row);
      break;
    default:
      draw_photo(st, y, row, acc);
      break;
    }
    if (ch == 1) {
      for (int x = 0; x < w; x++) {
        const uint8_t *p = row + (size_t)x * 3;
        out[x] = (uint8_t)((77 * p[0] + 150 * p[1] + 29 * p[2] + 128) >> 8);
      }
    } else if (ch == 4) {
      int32_t a = st->alpha0 << 16;
      int32_t step = w > 1 ? (st->alpha1 - st->alpha0) * 65536 / (w - 1) : 0;
      for (int x = 0; x < w; x++, a += step) {
        memcpy(out + (size_t)x * 4, row + (size_t)x * 3, 3);
        out[(size_t)x * 4 + 3] = (uint8_t)(a >> 16);
      }
    }
  }
done:
  free(acc);
  free(rowbuf);
  render_free(st);
  free(st);
  return rc;
}

/* --- pixel hash ------------------------------------------------------------------------------- */

uint64_t vl_image_hash(const vl_raw_t *r) {
  uint64_t h = 0xcbf29ce484222325ull;
  const uint8_t *p = r->px;
  size_t n = vl_image_raw_size(r);
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
