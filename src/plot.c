#include "vlmload/plot.h"
#include "vlmload/common.h"
#include "vlmload/outfile.h"

#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- font -------------------------------------------------------------------------------------
 */

/* ASCII 32..126 in 5x8 cells: eight rows of five pixels, '#' lit, rows separated by a space.
 * Capitals and digits stand on row 6; row 7 holds the descenders of g, j, p, q and y. */
static const char *const glyphs[95] = {
    "..... ..... ..... ..... ..... ..... ..... .....", /*   */
    "..#.. ..#.. ..#.. ..#.. ..#.. ..... ..#.. .....", /* ! */
    ".#.#. .#.#. .#.#. ..... ..... ..... ..... .....", /* " */
    ".#.#. .#.#. ##### .#.#. ##### .#.#. .#.#. .....", /* # */
    "..#.. .#### #.#.. .###. ..#.# ####. ..#.. .....", /* $ */
    "##... ##..# ...#. ..#.. .#... #..## ...## .....", /* % */
    ".##.. #..#. #.#.. .#... #.#.# #..#. .##.# .....", /* & */
    "..#.. ..#.. ..... ..... ..... ..... ..... .....", /* ' */
    "...#. ..#.. .#... .#... .#... ..#.. ...#. .....", /* ( */
    ".#... ..#.. ...#. ...#. ...#. ..#.. .#... .....", /* ) */
    "..... ..#.. #.#.# .###. #.#.# ..#.. ..... .....", /* * */
    "..... ..#.. ..#.. ##### ..#.. ..#.. ..... .....", /* + */
    "..... ..... ..... ..... .##.. ..#.. .#... .....", /* , */
    "..... ..... ..... ##### ..... ..... ..... .....", /* - */
    "..... ..... ..... ..... ..... .##.. .##.. .....", /* . */
    "..... ....# ...#. ..#.. .#... #.... ..... .....", /* / */
    ".###. #...# #..## #.#.# ##..# #...# .###. .....", /* 0 */
    "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###. .....", /* 1 */
    ".###. #...# ....# ...#. ..#.. .#... ##### .....", /* 2 */
    "##### ...#. ..#.. ...#. ....# #...# .###. .....", /* 3 */
    "...#. ..##. .#.#. #..#. ##### ...#. ...#. .....", /* 4 */
    "##### #.... ####. ....# ....# #...# .###. .....", /* 5 */
    "..##. .#... #.... ####. #...# #...# .###. .....", /* 6 */
    "##### ....# ...#. ..#.. .#... .#... .#... .....", /* 7 */
    ".###. #...# #...# .###. #...# #...# .###. .....", /* 8 */
    ".###. #...# #...# .#### ....# ...#. .##.. .....", /* 9 */
    "..... .##.. .##.. ..... .##.. .##.. ..... .....", /* : */
    "..... .##.. .##.. ..... .##.. ..#.. .#... .....", /* ; */
    "...#. ..#.. .#... #.... .#... ..#.. ...#. .....", /* < */
    "..... ..... ##### ..... ##### ..... ..... .....", /* = */
    ".#... ..#.. ...#. ....# ...#. ..#.. .#... .....", /* > */
    ".###. #...# ....# ...#. ..#.. ..... ..#.. .....", /* ? */
    ".###. #...# ....# .##.# #.#.# #.#.# .###. .....", /* @ */
    ".###. #...# #...# ##### #...# #...# #...# .....", /* A */
    "####. #...# #...# ####. #...# #...# ####. .....", /* B */
    ".###. #...# #.... #.... #.... #...# .###. .....", /* C */
    "###.. #..#. #...# #...# #...# #..#. ###.. .....", /* D */
    "##### #.... #.... ####. #.... #.... ##### .....", /* E */
    "##### #.... #.... ####. #.... #.... #.... .....", /* F */
    ".###. #...# #.... #.### #...# #...# .#### .....", /* G */
    "#...# #...# #...# ##### #...# #...# #...# .....", /* H */
    ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###. .....", /* I */
    "..### ...#. ...#. ...#. ...#. #..#. .##.. .....", /* J */
    "#...# #..#. #.#.. ##... #.#.. #..#. #...# .....", /* K */
    "#.... #.... #.... #.... #.... #.... ##### .....", /* L */
    "#...# ##.## #.#.# #.#.# #...# #...# #...# .....", /* M */
    "#...# #...# ##..# #.#.# #..## #...# #...# .....", /* N */
    ".###. #...# #...# #...# #...# #...# .###. .....", /* O */
    "####. #...# #...# ####. #.... #.... #.... .....", /* P */
    ".###. #...# #...# #...# #.#.# #..#. .##.# .....", /* Q */
    "####. #...# #...# ####. #.#.. #..#. #...# .....", /* R */
    ".#### #.... #.... .###. ....# ....# ####. .....", /* S */
    "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#.. .....", /* T */
    "#...# #...# #...# #...# #...# #...# .###. .....", /* U */
    "#...# #...# #...# #...# #...# .#.#. ..#.. .....", /* V */
    "#...# #...# #...# #.#.# #.#.# #.#.# .#.#. .....", /* W */
    "#...# #...# .#.#. ..#.. .#.#. #...# #...# .....", /* X */
    "#...# #...# .#.#. ..#.. ..#.. ..#.. ..#.. .....", /* Y */
    "##### ....# ...#. ..#.. .#... #.... ##### .....", /* Z */
    ".###. .#... .#... .#... .#... .#... .###. .....", /* [ */
    "..... #.... .#... ..#.. ...#. ....# ..... .....", /* \ */
    ".###. ...#. ...#. ...#. ...#. ...#. .###. .....", /* ] */
    "..#.. .#.#. #...# ..... ..... ..... ..... .....", /* ^ */
    "..... ..... ..... ..... ..... ..... ##### .....", /* _ */
    ".#... ..#.. ...#. ..... ..... ..... ..... .....", /* ` */
    "..... ..... .###. ....# .#### #...# .#### .....", /* a */
    "#.... #.... #.##. ##..# #...# #...# ####. .....", /* b */
    "..... ..... .###. #.... #.... #...# .###. .....", /* c */
    "....# ....# .##.# #..## #...# #...# .#### .....", /* d */
    "..... ..... .###. #...# ##### #.... .###. .....", /* e */
    "..##. .#..# .#... ###.. .#... .#... .#... .....", /* f */
    "..... ..... .#### #...# #...# .#### ....# .###.", /* g */
    "#.... #.... #.##. ##..# #...# #...# #...# .....", /* h */
    "..#.. ..... .##.. ..#.. ..#.. ..#.. .###. .....", /* i */
    "...#. ..... ..##. ...#. ...#. ...#. #..#. .##..", /* j */
    "#.... #.... #..#. #.#.. ##... #.#.. #..#. .....", /* k */
    ".##.. ..#.. ..#.. ..#.. ..#.. ..#.. .###. .....", /* l */
    "..... ..... ##.#. #.#.# #.#.# #...# #...# .....", /* m */
    "..... ..... #.##. ##..# #...# #...# #...# .....", /* n */
    "..... ..... .###. #...# #...# #...# .###. .....", /* o */
    "..... ..... ####. #...# #...# ####. #.... #....", /* p */
    "..... ..... .##.# #..## #...# .#### ....# ....#", /* q */
    "..... ..... #.##. ##..# #.... #.... #.... .....", /* r */
    "..... ..... .###. #.... .###. ....# ####. .....", /* s */
    ".#... .#... ###.. .#... .#... .#..# ..##. .....", /* t */
    "..... ..... #...# #...# #...# #..## .##.# .....", /* u */
    "..... ..... #...# #...# #...# .#.#. ..#.. .....", /* v */
    "..... ..... #...# #...# #.#.# #.#.# .#.#. .....", /* w */
    "..... ..... #...# .#.#. ..#.. .#.#. #...# .....", /* x */
    "..... ..... #...# #...# #...# .#### ....# .###.", /* y */
    "..... ..... ##### ...#. ..#.. .#... ##### .....", /* z */
    "...#. ..#.. ..#.. .#... ..#.. ..#.. ...#. .....", /* { */
    "..#.. ..#.. ..#.. ..#.. ..#.. ..#.. ..#.. .....", /* | */
    ".#... ..#.. ..#.. ...#. ..#.. ..#.. .#... .....", /* } */
    "..... ..... .#... #.#.# ...#. ..... ..... .....", /* ~ */
};

#define GLYPH_W 5
#define GLYPH_H 8
#define ADVANCE 6 /* glyph width plus one column of space */

static const char *glyph(unsigned char ch) {
  if (ch < 32 || ch > 126)
    ch = '?';
  return glyphs[ch - 32];
}

/* ---- canvas -----------------------------------------------------------------------------------
 */

typedef struct {
  uint8_t r, g, b;
} rgb_t;

typedef struct {
  uint8_t *px;
  int w, h;
  int cx0, cy0, cx1, cy1; /* drawing is clipped to [cx0, cx1) x [cy0, cy1) */
} canvas_t;

static const rgb_t WHITE = {255, 255, 255}, INK = {34, 34, 34}, AXIS = {90, 90, 90},
                   GRID = {232, 232, 232}, FLUSH = {150, 150, 150}, SHADE = {236, 236, 236};

/* Tableau 10: distinct hues that stay apart for the colour-blind too. */
static const rgb_t PALETTE[] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                                {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127},
                                {188, 189, 34},  {23, 190, 207}};

static rgb_t darker(rgb_t c) {
  return (rgb_t){(uint8_t)(c.r * 0.7), (uint8_t)(c.g * 0.7), (uint8_t)(c.b * 0.7)};
}

static void clip_all(canvas_t *c) {
  c->cx0 = c->cy0 = 0;
  c->cx1 = c->w;
  c->cy1 = c->h;
}

static void blend(canvas_t *c, int x, int y, rgb_t col, double a) {
  if (x < c->cx0 || y < c->cy0 || x >= c->cx1 || y >= c->cy1 || !(a > 0))
    return;
  if (a > 1)
    a = 1;
  uint8_t *p = c->px + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
  p[0] = (uint8_t)lround(p[0] + (col.r - p[0]) * a);
  p[1] = (uint8_t)lround(p[1] + (col.g - p[1]) * a);
  p[2] = (uint8_t)lround(p[2] + (col.b - p[2]) * a);
}

static void fill_rect(canvas_t *c, int x0, int y0, int x1, int y1, rgb_t col, double a) {
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++)
      blend(c, x, y, col, a);
}

/* Clamps a coordinate to a range that converts to int safely. */
static int to_px(double v) {
  if (v < -1e6)
    return -1000000;
  if (v > 1e6)
    return 1000000;
  return (int)floor(v);
}

/* An anti-aliased segment of width w: each pixel is covered by how far its centre lies within
 * w / 2 of the segment. */
static void segment(canvas_t *c, double ax, double ay, double bx, double by, double w, rgb_t col,
                    double alpha) {
  if (!isfinite(ax) || !isfinite(ay) || !isfinite(bx) || !isfinite(by))
    return;
  double hw = w / 2;
  int x0 = VL_MAX(to_px(fmin(ax, bx) - hw - 1), c->cx0);
  int x1 = VL_MIN(to_px(fmax(ax, bx) + hw + 2), c->cx1);
  int y0 = VL_MAX(to_px(fmin(ay, by) - hw - 1), c->cy0);
  int y1 = VL_MIN(to_px(fmax(ay, by) + hw + 2), c->cy1);
  double dx = bx - ax, dy = by - ay, len2 = dx * dx + dy * dy;
  for (int y = y0; y < y1; y++) {
    for (int x = x0; x < x1; x++) {
      double px = x + 0.5, py = y + 0.5;
      double t = len2 > 0 ? ((px - ax) * dx + (py - ay) * dy) / len2 : 0;
      t = t < 0 ? 0 : t > 1 ? 1 : t;
      double ex = ax + t * dx - px, ey = ay + t * dy - py;
      double cov = hw + 0.5 - sqrt(ex * ex + ey * ey);
      if (cov > 0)
        blend(c, x, y, col, alpha * (cov > 1 ? 1 : cov));
    }
  }
}

/* A dashed segment: `on` pixels drawn, `off` skipped, starting at phase 0. */
static void dashed(canvas_t *c, double ax, double ay, double bx, double by, double w, double on,
                   double off, rgb_t col, double alpha) {
  if (!isfinite(ax) || !isfinite(ay) || !isfinite(bx) || !isfinite(by))
    return;
  double len = hypot(bx - ax, by - ay);
  if (len > 1e5)
    return; /* callers clip lines to the panel first */
  for (double s = 0; s < len; s += on + off) {
    double e = fmin(s + on, len);
    double t0 = s / len, t1 = e / len;
    segment(c, ax + t0 * (bx - ax), ay + t0 * (by - ay), ax + t1 * (bx - ax), ay + t1 * (by - ay),
            w, col, alpha);
  }
}

static void disc(canvas_t *c, double cx, double cy, double r, rgb_t col, double alpha) {
  for (int y = to_px(cy - r - 1); y <= to_px(cy + r + 1); y++) {
    for (int x = to_px(cx - r - 1); x <= to_px(cx + r + 1); x++) {
      double cov = r + 0.5 - hypot(x + 0.5 - cx, y + 0.5 - cy);
      if (cov > 0)
        blend(c, x, y, col, alpha * (cov > 1 ? 1 : cov));
    }
  }
}

/* A white disc with a coloured rim. */
static void ring(canvas_t *c, double cx, double cy, double r, double w, rgb_t col) {
  disc(c, cx, cy, r, WHITE, 1);
  for (int y = to_px(cy - r - w); y <= to_px(cy + r + w); y++) {
    for (int x = to_px(cx - r - w); x <= to_px(cx + r + w); x++) {
      double d = fabs(hypot(x + 0.5 - cx, y + 0.5 - cy) - r);
      double cov = w / 2 + 0.5 - d;
      if (cov > 0)
        blend(c, x, y, col, cov > 1 ? 1 : cov);
    }
  }
}

static int text_width(const char *s, int scale) {
  size_t n = strlen(s);
  return n ? (int)(n * ADVANCE - 1) * scale : 0;
}

/* Text with its top-left corner at (x, y). */
static void text(canvas_t *c, int x, int y, const char *s, int scale, rgb_t col) {
  for (; *s; s++, x += ADVANCE * scale) {
    const char *g = glyph((unsigned char)*s);
    for (int r = 0; r < GLYPH_H; r++)
      for (int k = 0; k < GLYPH_W; k++)
        if (g[r * (GLYPH_W + 1) + k] == '#')
          fill_rect(c, x + k * scale, y + r * scale, x + (k + 1) * scale, y + (r + 1) * scale, col,
                    1);
  }
}

/* Text turned a quarter left, read from bottom to top, its baseline's start at (x, y): the glyphs'
 * tops face x. */
static void text_up(canvas_t *c, int x, int y, const char *s, int scale, rgb_t col) {
  for (; *s; s++, y -= ADVANCE * scale) {
    const char *g = glyph((unsigned char)*s);
    for (int r = 0; r < GLYPH_H; r++)
      for (int k = 0; k < GLYPH_W; k++)
        if (g[r * (GLYPH_W + 1) + k] == '#')
          fill_rect(c, x + r * scale, y - (k + 1) * scale, x + (r + 1) * scale, y - k * scale, col,
                    1);
  }
}

/* ---- axes -------------------------------------------------------------------------------------
 */

typedef struct {
  int x0, y0, x1, y1; /* pixel rectangle of the data area */
  double xmin, xmax, ymin, ymax;
} panel_t;

static double px_x(const panel_t *p, double x) {
  return p->x0 + (x - p->xmin) / (p->xmax - p->xmin) * (p->x1 - p->x0);
}

static double px_y(const panel_t *p, double y) {
  return p->y1 - (y - p->ymin) / (p->ymax - p->ymin) * (p->y1 - p->y0);
}

static void clip_panel(canvas_t *c, const panel_t *p) {
  c->cx0 = p->x0;
  c->cy0 = p->y0;
  c->cx1 = p->x1 + 1;
  c->cy1 = p->y1 + 1;
}

/* A step of 1, 2 or 5 times a power of ten that cuts `range` into about `target` parts. */
static double nice_step(double range, double target) {
  double raw = range / (target < 1 ? 1 : target);
  double mag = pow(10, floor(log10(raw)));
  double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

/* How one axis writes its tick labels: one suffix for all ("k" for thousands, "M" for millions)
 * when the largest tick is that big, and just enough decimals for the step. */
typedef struct {
  double div;
  const char *suffix;
  int decimals;
} tickfmt_t;

static tickfmt_t tick_format(double lo, double hi, double step) {
  double big = fmax(fabs(lo), fabs(hi));
  tickfmt_t f = {1, "", 0};
  if (step >= 1e5 && big >= 1e7) {
    f.div = 1e6;
    f.suffix = "M";
  } else if (step >= 100 && big >= 1e4) {
    f.div = 1e3;
    f.suffix = "k";
  }
  double s = step / f.div;
  f.decimals = s >= 1 ? 0 : (int)ceil(-log10(s) - 1e-9);
  return f;
}

static void tick_label(char *buf, size_t len, double v, double step, const tickfmt_t *f) {
  if (fabs(v) < step * 1e-6)
    snprintf(buf, len, "0");
  else
    snprintf(buf, len, "%.*f%s", f->decimals, v / f->div, f->suffix);
}

/* Widens [lo, hi] by frac of its width on each side, or around a single value. */
static void pad_range(double *lo, double *hi, double frac) {
  if (!(*hi > *lo)) {
    double d = fabs(*lo) > 0 ? fabs(*lo) * 0.05 : 1;
    *lo -= d;
    *hi += d;
    return;
  }
  double d = (*hi - *lo) * frac;
  *lo -= d;
  *hi += d;
}

static void draw_axes(canvas_t *c, const panel_t *p, const char *xlabel, const char *ylabel,
                      int scale) {
  char buf[48];
  clip_all(c);
  double xs = nice_step(p->xmax - p->xmin, (p->x1 - p->x0) / 110.0);
  double ys = nice_step(p->ymax - p->ymin, (p->y1 - p->y0) / 60.0);
  tickfmt_t xf = tick_format(p->xmin, p->xmax, xs), yf = tick_format(p->ymin, p->ymax, ys);
  int lh = GLYPH_H * scale;
  for (double v = ceil(p->xmin / xs - 1e-9) * xs; v <= p->xmax + xs * 1e-9; v += xs) {
    int x = (int)lround(px_x(p, v));
    fill_rect(c, x, p->y0, x + 1, p->y1, GRID, 1);
    fill_rect(c, x, p->y1, x + 1, p->y1 + 6, AXIS, 1);
    tick_label(buf, sizeof(buf), v, xs, &xf);
    text(c, x - text_width(buf, scale) / 2, p->y1 + 10, buf, scale, INK);
  }
  int widest = 0;
  for (double v = ceil(p->ymin / ys - 1e-9) * ys; v <= p->ymax + ys * 1e-9; v += ys) {
    int y = (int)lround(px_y(p, v));
    fill_rect(c, p->x0, y, p->x1, y + 1, GRID, 1);
    fill_rect(c, p->x0 - 6, y, p->x0, y + 1, AXIS, 1);
    tick_label(buf, sizeof(buf), v, ys, &yf);
    int w = text_width(buf, scale);
    widest = VL_MAX(widest, w);
    text(c, p->x0 - 10 - w, y - lh / 2, buf, scale, INK);
  }
  fill_rect(c, p->x0, p->y0, p->x1 + 1, p->y0 + 1, AXIS, 1);
  fill_rect(c, p->x0, p->y1, p->x1 + 1, p->y1 + 1, AXIS, 1);
  fill_rect(c, p->x0, p->y0, p->x0 + 1, p->y1 + 1, AXIS, 1);
  fill_rect(c, p->x1, p->y0, p->x1 + 1, p->y1 + 1, AXIS, 1);
  if (xlabel)
    text(c, (p->x0 + p->x1 - text_width(xlabel, scale)) / 2, p->y1 + 14 + lh, xlabel, scale, INK);
  if (ylabel) {
    /* Smaller type when the label is longer than the axis. */
    int s = scale;
    while (s > 1 && text_width(ylabel, s) > p->y1 - p->y0)
      s--;
    int x = p->x0 - 10 - widest - 8 - GLYPH_H * s;
    text_up(c, VL_MAX(x, 4), (p->y0 + p->y1 + text_width(ylabel, s)) / 2, ylabel, s, INK);
  }
}

/* A range that starts near 0 (within a tenth of its end) starts at 0. */
static void anchor_zero(double *lo, double hi) {
  if (*lo > 0 && *lo < 0.1 * hi)
    *lo = 0;
}

/* ---- legend -----------------------------------------------------------------------------------
 */

typedef enum { KEY_LINE, KEY_DASH, KEY_DOT, KEY_RING, KEY_VDASH } key_kind_t;

typedef struct {
  key_kind_t kind;
  rgb_t col;
  char label[160];
  int x, y; /* place relative to the legend's top-left, set by legend_layout */
} legend_key_t;

#define SWATCH 28

/* Places keys in rows no wider than `width`. Returns the legend's height and sets *used to the
 * widest row. */
static int legend_layout(legend_key_t *keys, size_t n, int scale, int width, int *used) {
  int x = 0, y = 0, lh = (GLYPH_H + 5) * scale, gap = 12 * scale;
  *used = 0;
  for (size_t i = 0; i < n; i++) {
    int w = SWATCH + 6 + text_width(keys[i].label, scale);
    if (x > 0 && x + w > width) {
      x = 0;
      y += lh;
    }
    keys[i].x = x;
    keys[i].y = y;
    *used = VL_MAX(*used, x + w);
    x += w + gap;
  }
  return n ? y + lh - 5 * scale : 0;
}

static void draw_legend(canvas_t *c, const legend_key_t *keys, size_t n, int scale, int x0,
                        int y0) {
  clip_all(c);
  for (size_t i = 0; i < n; i++) {
    const legend_key_t *k = &keys[i];
    int tx = x0 + k->x, ty = y0 + k->y;
    double cy = ty + (GLYPH_H - 2) * scale / 2.0;
    double ax = tx + 1, bx = tx + SWATCH - 1;
    switch (k->kind) {
    case KEY_LINE:
      segment(c, ax, cy, bx, cy, 3, k->col, 1);
      break;
    case KEY_DASH:
      dashed(c, ax, cy, bx, cy, 2.2, 8, 4, k->col, 1);
      break;
    case KEY_DOT:
      dashed(c, ax, cy, bx, cy, 1.8, 2, 4, k->col, 1);
      break;
    case KEY_RING:
      ring(c, (ax + bx) / 2, cy, 3.5, 1.8, k->col);
      break;
    case KEY_VDASH:
      dashed(c, (ax + bx) / 2, ty - 2, (ax + bx) / 2, ty + GLYPH_H * scale, 1.2, 3, 2, k->col, 1);
      break;
    }
    text(c, tx + SWATCH + 6, ty, k->label, scale, INK);
  }
}

/* ---- panels -----------------------------------------------------------------------------------
 */

/* Draws a polyline through (x[i], y[i] - base), broken at missing values. */
static void polyline(canvas_t *c, const panel_t *p, const double *x, const double *y, size_t n,
                     double base, double w, rgb_t col) {
  int have = 0;
  double px = 0, py = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i]) || !isfinite(y[i])) {
      have = 0;
      continue;
    }
    double X = px_x(p, x[i]), Y = px_y(p, y[i] - base);
    if (have)
      segment(c, px, py, X, Y, w, col, 1);
    else if (i + 1 >= n || !isfinite(y[i + 1]))
      disc(c, X, Y, w, col, 1); /* a lone sample */
    px = X;
    py = Y;
    have = 1;
  }
}

/* The value each line is shown relative to: 0 for absolute plots, else its first sample after the
 * warm-up (or its first sample). */
static void baselines(const vl_plot_t *pl, int delta, double *base) {
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_plot_line_t *ln = &pl->lines[l];
    base[l] = 0;
    if (!delta)
      continue;
    if (ln->an && isfinite(ln->an->y_first)) {
      base[l] = ln->an->y_first;
      continue;
    }
    double first = NAN, after = NAN;
    for (size_t i = 0; i < ln->n && isnan(after); i++) {
      if (!isfinite(ln->y[i]) || !isfinite(ln->x[i]))
        continue;
      if (isnan(first))
        first = ln->y[i];
      if (ln->x[i] >= pl->warmup_x)
        after = ln->y[i];
    }
    base[l] = isfinite(after) ? after : isfinite(first) ? first : 0;
  }
}

/* Whether the series lie so far apart that a shared absolute axis would flatten the one that moves
 * most: the span of all of them over four times the widest single span. */
static int wants_delta(const vl_plot_t *pl) {
  if (pl->n_lines < 2)
    return 0;
  double lo = INFINITY, hi = -INFINITY, widest = 0;
  for (size_t l = 0; l < pl->n_lines; l++) {
    double a = INFINITY, b = -INFINITY;
    for (size_t i = 0; i < pl->lines[l].n; i++) {
      double v = pl->lines[l].y[i];
      if (isfinite(v) && isfinite(pl->lines[l].x[i])) {
        a = fmin(a, v);
        b = fmax(b, v);
      }
    }
    if (a > b)
      continue;
    lo = fmin(lo, a);
    hi = fmax(hi, b);
    widest = fmax(widest, b - a);
  }
  return hi > lo && hi - lo > 4 * widest;
}

/* The ends of a fitted line (slope per 1000 x) between xa and xb. */
static void fit_ends(const vl_fit_t *f, double xa, double xb, double *ya, double *yb) {
  *ya = f->intercept + f->slope / 1000 * xa;
  *yb = f->intercept + f->slope / 1000 * xb;
}

static int has_data(const vl_plot_line_t *ln) {
  for (size_t i = 0; i < ln->n; i++)
    if (isfinite(ln->x[i]) && isfinite(ln->y[i]))
      return 1;
  return 0;
}

static int analysed(const vl_analysis_t *an) {
  return an && an->verdict != VL_VERDICT_INSUFFICIENT;
}

/* Legend keys of the main panel: one per series, then what the marks mean. Returns the count. */
static size_t main_keys(const vl_plot_t *pl, int delta, const double *base, legend_key_t *keys) {
  size_t nk = 0;
  int any_fit = 0, any_floor = 0, any_trend = 0;
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_plot_line_t *ln = &pl->lines[l];
    const vl_analysis_t *an = ln->an;
    legend_key_t *k = &keys[nk++];
    k->kind = KEY_LINE;
    k->col = PALETTE[l % VL_ARRAY_SIZE(PALETTE)];
    char what[96] = "", from[48] = "";
    if (analysed(an)) {
      int floor = strcmp(an->basis, "floor") == 0;
      const vl_fit_t *f = floor ? &an->floor : &an->ols;
      snprintf(what, sizeof(what), ": %s, %s%+.3g %s/1k %s", vl_analyze_verdict_name(an->verdict),
               floor ? "floor " : "", f->slope, an->unit, an->x_name);
      any_fit |= isfinite(an->ols.slope);
      any_floor |= an->n_windows > 0;
      any_trend |= an->n_windows >= 3 && isfinite(an->floor.slope);
    } else if (an) {
      snprintf(what, sizeof(what), ": %s", vl_analyze_verdict_name(an->verdict));
    }
    if (delta && has_data(ln))
      snprintf(from, sizeof(from), " (from %.5g)", base[l]);
    snprintf(k->label, sizeof(k->label), "%s%s%s", ln->name ? ln->name : "", what, from);
  }
  if (any_fit)
    keys[nk++] = (legend_key_t){KEY_DASH, AXIS, "OLS fit", 0, 0};
  if (any_floor)
    keys[nk++] = (legend_key_t){KEY_RING, AXIS, "post-flush floor", 0, 0};
  if (any_trend)
    keys[nk++] = (legend_key_t){KEY_DOT, AXIS, "floor trend", 0, 0};
  if (pl->n_flush)
    keys[nk++] = (legend_key_t){KEY_VDASH, FLUSH, "flush", 0, 0};
  return nk;
}

static void main_panel(canvas_t *c, const vl_plot_t *pl, const panel_t *frame, int delta,
                       const double *base, int scale) {
  /* Ranges over everything drawn. */
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_plot_line_t *ln = &pl->lines[l];
    for (size_t i = 0; i < ln->n; i++) {
      if (!isfinite(ln->x[i]) || !isfinite(ln->y[i]))
        continue;
      xmin = fmin(xmin, ln->x[i]);
      xmax = fmax(xmax, ln->x[i]);
      ymin = fmin(ymin, ln->y[i] - base[l]);
      ymax = fmax(ymax, ln->y[i] - base[l]);
    }
    const vl_analysis_t *an = ln->an;
    if (analysed(an) && isfinite(an->ols.slope)) {
      double ya, yb;
      fit_ends(&an->ols, an->x_first, an->x_last, &ya, &yb);
      ymin = fmin(ymin, fmin(ya, yb) - base[l]);
      ymax = fmax(ymax, fmax(ya, yb) - base[l]);
    }
  }
  if (!(xmax >= xmin)) {
    xmin = ymin = 0;
    xmax = ymax = 1;
  }
  anchor_zero(&xmin, xmax);
  if (!(xmax > xmin))
    pad_range(&xmin, &xmax, 0);
  pad_range(&ymin, &ymax, 0.06);

  panel_t p = *frame;
  p.xmin = xmin;
  p.xmax = xmax;
  p.ymin = ymin;
  p.ymax = ymax;
  const char *unit = pl->y_unit ? pl->y_unit : "MB";
  char ylabel[96];
  if (delta)
    snprintf(ylabel, sizeof(ylabel), "%s, change from first sample%s", unit,
             pl->warmup_x > xmin ? " after warm-up" : "");
  else
    snprintf(ylabel, sizeof(ylabel), "%s", unit);
  draw_axes(c, &p, pl->x_label ? pl->x_label : "requests completed", ylabel, scale);

  /* Warm-up shade and flush markers under the data. */
  clip_panel(c, &p);
  if (pl->warmup_x > xmin) {
    int wx = (int)lround(px_x(&p, fmin(pl->warmup_x, xmax)));
    fill_rect(c, p.x0 + 1, p.y0 + 1, wx, p.y1, SHADE, 1);
    for (int s = scale; s >= 1; s--) {
      if (wx - p.x0 > text_width("warm-up", s) + 8) {
        text(c, p.x0 + 5, p.y0 + 5, "warm-up", s, AXIS);
        break;
      }
    }
  }
  for (size_t i = 0; i < pl->n_flush; i++) {
    double v = pl->flush_x[i];
    if (!isfinite(v) || v < xmin || v > xmax)
      continue;
    double X = px_x(&p, v);
    dashed(c, X, p.y0, X, p.y1, 1.2, 5, 4, FLUSH, 1);
  }

  /* Series, then their fits and floors on top. */
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_plot_line_t *ln = &pl->lines[l];
    polyline(c, &p, ln->x, ln->y, ln->n, base[l], 1.6, PALETTE[l % VL_ARRAY_SIZE(PALETTE)]);
  }
  for (size_t l = 0; l < pl->n_lines; l++) {
    const vl_analysis_t *an = pl->lines[l].an;
    if (!analysed(an))
      continue;
    rgb_t col = darker(PALETTE[l % VL_ARRAY_SIZE(PALETTE)]);
    double ya, yb;
    if (isfinite(an->ols.slope)) {
      fit_ends(&an->ols, an->x_first, an->x_last, &ya, &yb);
      dashed(c, px_x(&p, an->x_first), px_y(&p, ya - base[l]), px_x(&p, an->x_last),
             px_y(&p, yb - base[l]), 2.2, 10, 6, col, 1);
    }
    if (an->n_windows >= 3 && isfinite(an->floor.slope)) {
      double xa = an->windows[0].x, xb = an->x_last;
      fit_ends(&an->floor, xa, xb, &ya, &yb);
      dashed(c, px_x(&p, xa), px_y(&p, ya - base[l]), px_x(&p, xb), px_y(&p, yb - base[l]), 1.8, 2,
             4, col, 1);
    }
    for (size_t w = 0; w < an->n_windows; w++)
      ring(c, px_x(&p, an->windows[w].x_min), px_y(&p, an->windows[w].floor - base[l]), 3.5, 1.8,
           col);
  }
}

static void latency_panel(canvas_t *c, const vl_plot_t *pl, const panel_t *frame, int scale) {
  double xmin = INFINITY, xmax = -INFINITY, ymax = 0;
  const double *ys[2] = {pl->lat_p50, pl->lat_p99};
  for (size_t i = 0; i < pl->n_lat; i++) {
    if (!isfinite(pl->lat_t[i]))
      continue;
    xmin = fmin(xmin, pl->lat_t[i]);
    xmax = fmax(xmax, pl->lat_t[i]);
    for (int k = 0; k < 2; k++)
      if (ys[k] && isfinite(ys[k][i]))
        ymax = fmax(ymax, ys[k][i]);
  }
  if (!(xmax >= xmin)) {
    xmin = 0;
    xmax = 1;
  }
  anchor_zero(&xmin, xmax);
  if (!(xmax > xmin))
    pad_range(&xmin, &xmax, 0);
  if (!(ymax > 0))
    ymax = 1;
  panel_t p = *frame;
  p.xmin = xmin;
  p.xmax = xmax;
  p.ymin = 0;
  p.ymax = ymax * 1.25; /* headroom for the legend */
  draw_axes(c, &p, "elapsed s", "latency ms", scale);
  clip_panel(c, &p);
  static const rgb_t cols[2] = {{31, 119, 180}, {214, 39, 40}};
  legend_key_t keys[2];
  size_t nk = 0;
  for (int k = 0; k < 2; k++) {
    if (!ys[k])
      continue;
    polyline(c, &p, pl->lat_t, ys[k], pl->n_lat, 0, 1.4, cols[k]);
    keys[nk++] = (legend_key_t){KEY_LINE, cols[k], "", 0, 0};
    snprintf(keys[nk - 1].label, sizeof(keys[nk - 1].label), "%s latency", k ? "p99" : "p50");
  }
  int used, lh = legend_layout(keys, nk, scale, p.x1 - p.x0, &used);
  fill_rect(c, p.x0 + 8, p.y0 + 6, p.x0 + 20 + used, p.y0 + 12 + lh, WHITE, 0.85);
  draw_legend(c, keys, nk, scale, p.x0 + 14, p.y0 + 9);
}

int vl_plot_render(const vl_plot_t *pl, uint8_t **rgb, int *width, int *height) {
  int w = pl->width ? pl->width : VL_PLOT_WIDTH, h = pl->height ? pl->height : VL_PLOT_HEIGHT;
  if (w < 320 || h < 200 || w > 16384 || h > 16384)
    return VL_EINVAL;
  canvas_t c = {vl_xmalloc((size_t)w * (size_t)h * 3), w, h, 0, 0, w, h};
  memset(c.px, 255, (size_t)w * (size_t)h * 3);
  int scale = w >= 900 && h >= 500 ? 2 : 1;

  char title[160];
  if (pl->title)
    snprintf(title, sizeof(title), "%s", pl->title);
  else
    snprintf(title, sizeof(title), "Memory over %s",
             pl->x_label ? pl->x_label : "requests completed");
  text(&c, (w - text_width(title, scale)) / 2, 10, title, scale, INK);

  /* The legend goes between the title and the panel, in rows; smaller type when it would take
   * more than a fifth of the height. */
  int delta = pl->y_mode == VL_PLOT_Y_DELTA || (pl->y_mode == VL_PLOT_Y_AUTO && wants_delta(pl));
  double *base = vl_xcalloc(pl->n_lines + 1, sizeof(double));
  baselines(pl, delta, base);
  legend_key_t *keys = vl_xcalloc(pl->n_lines + 4, sizeof(legend_key_t));
  size_t nk = main_keys(pl, delta, base, keys);
  int left = 100, right = w - 24, used;
  int lscale = scale;
  int lh = legend_layout(keys, nk, lscale, right - left, &used);
  if (lscale > 1 && lh > h / 5)
    lh = legend_layout(keys, nk, --lscale, right - left, &used);
  int top = 14 + (GLYPH_H + 4) * scale;
  draw_legend(&c, keys, nk, lscale, left, top);
  top += lh + (lh ? 12 : 0);

  int foot = 2 * GLYPH_H * scale + 30; /* tick labels and axis label under a panel */
  int has_lat = pl->n_lat > 0 && pl->lat_t && (pl->lat_p50 || pl->lat_p99);
  int bottom = has_lat ? top + (int)((h - top) * 0.66) - foot : h - foot;
  panel_t frame = {left, top, right, bottom, 0, 1, 0, 1};
  main_panel(&c, pl, &frame, delta, base, scale);
  if (has_lat) {
    panel_t lat = {left, bottom + foot + 4, right, h - foot, 0, 1, 0, 1};
    latency_panel(&c, pl, &lat, scale);
  }
  free(keys);
  free(base);
  *rgb = c.px;
  *width = w;
  *height = h;
  return 0;
}

typedef struct {
  png_image img;
  const uint8_t *px;
} png_out_t;

/* Encodes the PNG to f (an outfile.h fill callback). */
static int put_png(FILE *f, void *arg, char *why, size_t whylen) {
  png_out_t *o = arg;
  if (png_image_write_to_stdio(&o->img, f, 0, o->px, 0, NULL))
    return 0;
  snprintf(why, whylen, "%s", o->img.message[0] ? o->img.message : "cannot write PNG");
  return VL_EIO;
}

int vl_plot_write(const vl_plot_t *pl, const char *path, char *err, size_t errlen) {
  uint8_t *px;
  int w, h;
  if (vl_plot_render(pl, &px, &w, &h) != 0) {
    snprintf(err, errlen, "plot size %dx%d out of range", pl->width, pl->height);
    return VL_EINVAL;
  }
  png_out_t o;
  memset(&o, 0, sizeof(o));
  o.img.version = PNG_IMAGE_VERSION;
  o.img.width = (png_uint_32)w;
  o.img.height = (png_uint_32)h;
  o.img.format = PNG_FORMAT_RGB;
  o.px = px;
  char why[384];
  int rc = 0;
  if (vl_outfile_write(path, put_png, &o, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "%s: %s", path, why);
    rc = VL_EIO;
  }
  png_image_free(&o.img);
  free(px);
  return rc;
}
