#include "vlmload/csvin.h"
#include "vlmload/common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct vl_csv_s {
  char *src;     /* the file's name, for messages */
  char *text;    /* every cell, NUL-terminated, back to back */
  size_t *cells; /* offsets into text, row by row, the header first */
  size_t *lines; /* line on which each row starts, the header first */
  size_t ncols, nrows;
};

static int is_blank(char c) {
  return c == ' ' || c == '\t';
}

/* Growth of the cell and row arrays. */
typedef struct {
  size_t *cells, ncells, capcells;
  size_t *lines, nlines, caplines;
} grow_t;

static void push_cell(grow_t *g, size_t off) {
  if (g->ncells == g->capcells) {
    g->capcells = g->capcells ? 2 * g->capcells : 256;
    g->cells = vl_xrealloc(g->cells, g->capcells * sizeof(size_t));
  }
  g->cells[g->ncells++] = off;
}

static void push_line(grow_t *g, size_t line) {
  if (g->nlines == g->caplines) {
    g->caplines = g->caplines ? 2 * g->caplines : 64;
    g->lines = vl_xrealloc(g->lines, g->caplines * sizeof(size_t));
  }
  g->lines[g->nlines++] = line;
}

int vl_csv_parse(vl_csv_t **out, const char *name, const char *in, size_t len, char *err,
                 size_t errlen) {
  vl_csv_t *c = vl_xcalloc(1, sizeof(*c));
  grow_t g = {0};
  c->src = vl_xstrdup(name ? name : "(csv)");
  /* Cell text never exceeds the input, plus one terminator per cell (at most one per byte). */
  c->text = vl_xmalloc(2 * len + 2);
  size_t o = 0, line = 1, p = 0;
  if (len >= 3 && memcmp(in, "\xEF\xBB\xBF", 3) == 0)
    p = 3;
  while (p < len) {
    /* An empty or blank line is skipped. */
    size_t q = p;
    while (q < len && is_blank(in[q]))
      q++;
    if (q == len) {
      p = q;
      break;
    }
    if (in[q] == '\n' || in[q] == '\r') {
      p = q + (in[q] == '\r' && q + 1 < len && in[q + 1] == '\n' ? 2 : 1);
      line++;
      continue;
    }
    size_t row_line = line, fields = 0;
    for (;;) {
      while (p < len && is_blank(in[p]))
        p++;
      size_t start = o;
      if (p < len && in[p] == '"') {
        size_t open_line = line;
        p++;
        for (;;) {
          if (p >= len) {
            vl_set_err(err, errlen, "%s:%zu: a quoted field is not closed", c->src, open_line);
            goto fail;
          }
          char ch = in[p];
          if (ch == '"') {
            if (p + 1 < len && in[p + 1] == '"') {
              c->text[o++] = '"';
              p += 2;
              continue;
            }
            p++;
            break;
          }
          if (ch == '\n' || (ch == '\r' && !(p + 1 < len && in[p + 1] == '\n')))
            line++;
          c->text[o++] = ch;
          p++;
        }
        while (p < len && is_blank(in[p]))
          p++;
        if (p < len && in[p] != ',' && in[p] != '\n' && in[p] != '\r') {
          vl_set_err(err, errlen, "%s:%zu: text after the closing quote of a field", c->src, line);
          goto fail;
        }
      } else {
        while (p < len && in[p] != ',' && in[p] != '\n' && in[p] != '\r') {
          if (in[p] == '"') {
            vl_set_err(err, errlen, "%s:%zu: a quote inside an unquoted field", c->src, line);
            goto fail;
          }
          c->text[o++] = in[p++];
        }
        while (o > start && is_blank(c->text[o - 1]))
          o--;
      }
      c->text[o++] = '\0';
      push_cell(&g, start);
      fields++;
      if (p < len && in[p] == ',') {
        p++;
        continue;
      }
      if (p < len) {
        p += in[p] == '\r' && p + 1 < len && in[p + 1] == '\n' ? 2 : 1;
        line++;
      }
      break;
    }
    if (g.nlines == 0) {
      c->ncols = fields;
    } else if (fields != c->ncols) {
      vl_set_err(err, errlen, "%s:%zu: %zu fields, the header has %zu", c->src, row_line, fields,
                 c->ncols);
      goto fail;
    }
    push_line(&g, row_line);
  }
  if (g.nlines == 0) {
    vl_set_err(err, errlen, "%s: empty, no header line", c->src);
    goto fail;
  }
  c->cells = g.cells;
  c->lines = g.lines;
  c->nrows = g.nlines - 1;
  *out = c;
  return 0;

fail:
  free(g.cells);
  free(g.lines);
  free(c->text);
  free(c->src);
  free(c);
  return VL_EINVAL;
}

int vl_csv_load(vl_csv_t **out, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    vl_set_err(err, errlen, "%s: %s", path, strerror(errno));
    return VL_EIO;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = vl_xmalloc(cap);
  for (;;) {
    if (len == cap) {
      cap *= 2;
      buf = vl_xrealloc(buf, cap);
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0)
      break;
  }
  int failed = ferror(f);
  int e = errno;
  fclose(f);
  if (failed) {
    vl_set_err(err, errlen, "%s: %s", path, strerror(e));
    free(buf);
    return VL_EIO;
  }
  int rc = vl_csv_parse(out, path, buf, len, err, errlen);
  free(buf);
  return rc;
}

void vl_csv_free(vl_csv_t *c) {
  if (!c)
    return;
  free(c->cells);
  free(c->lines);
  free(c->text);
  free(c->src);
  free(c);
}

const char *vl_csv_source(const vl_csv_t *c) {
  return c->src;
}

size_t vl_csv_nrows(const vl_csv_t *c) {
  return c->nrows;
}

size_t vl_csv_ncols(const vl_csv_t *c) {
  return c->ncols;
}

const char *vl_csv_colname(const vl_csv_t *c, size_t col) {
  return c->text + c->cells[col];
}

int vl_csv_col(const vl_csv_t *c, const char *name) {
  for (size_t i = 0; i < c->ncols; i++)
    if (strcmp(vl_csv_colname(c, i), name) == 0)
      return (int)i;
  return -1;
}

const char *vl_csv_cell(const vl_csv_t *c, size_t row, size_t col) {
  return c->text + c->cells[(row + 1) * c->ncols + col];
}

size_t vl_csv_drop_rows(vl_csv_t *c, const char *col, const char *value) {
  int k = vl_csv_col(c, col);
  if (k < 0)
    return 0;
  size_t kept = 0;
  for (size_t r = 0; r < c->nrows; r++) {
    if (strcmp(vl_csv_cell(c, r, (size_t)k), value) == 0)
      continue;
    if (kept != r) {
      memmove(&c->cells[(kept + 1) * c->ncols], &c->cells[(r + 1) * c->ncols],
              c->ncols * sizeof(size_t));
      c->lines[kept + 1] = c->lines[r + 1];
    }
    kept++;
  }
  size_t dropped = c->nrows - kept;
  c->nrows = kept;
  return dropped;
}

size_t vl_csv_lineno(const vl_csv_t *c, size_t row) {
  return c->lines[row + 1];
}

int vl_csv_parse_number(const char *s, double *out) {
  while (is_blank(*s))
    s++;
  const char *p = s;
  if (*p == '+' || *p == '-')
    p++;
  size_t digits = 0;
  while (*p >= '0' && *p <= '9')
    p++, digits++;
  if (*p == '.') {
    p++;
    while (*p >= '0' && *p <= '9')
      p++, digits++;
  }
  if (digits && (*p == 'e' || *p == 'E')) {
    p++;
    if (*p == '+' || *p == '-')
      p++;
    size_t ed = 0;
    while (*p >= '0' && *p <= '9')
      p++, ed++;
    if (!ed)
      return VL_EINVAL;
  }
  const char *end = p;
  while (is_blank(*p))
    p++;
  if (*p)
    return VL_EINVAL;
  if (!digits)
    return end == s ? VL_ENOENT : VL_EINVAL;
  char *stop;
  errno = 0;
  double v = strtod(s, &stop);
  if (stop != end || !isfinite(v))
    return VL_EINVAL;
  *out = v;
  return 0;
}

/* Reads 1 to maxd digits at *p. Returns -1 when there are none. */
static int read_int(const char **p, int maxd) {
  int v = 0, n = 0;
  while (n < maxd && **p >= '0' && **p <= '9') {
    v = v * 10 + (**p - '0');
    (*p)++;
    n++;
  }
  return n ? v : -1;
}

/* Days from 1970-01-01 to the given proleptic Gregorian date. */
static int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m) {
  static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : dm[m - 1];
}

int vl_csv_parse_time(const char *s, double *ms) {
  double v;
  int rc = vl_csv_parse_number(s, &v);
  if (rc == VL_ENOENT)
    return rc;
  if (rc == 0) {
    if (v < 0)
      return VL_EINVAL;
    *ms = v >= 1e11 ? v : v * 1000;
    return 0;
  }
  while (is_blank(*s))
    s++;
  const char *p = s;
  int Y = -1, M, D, h = 0, mi = 0, sec = 0;
  double frac = 0;
  if (p[0] >= '0' && p[0] <= '9' && p[1] >= '0' && p[1] <= '9' && p[2] >= '0' && p[2] <= '9' &&
      p[3] >= '0' && p[3] <= '9')
    Y = read_int(&p, 4);
  if (Y < 0 || (*p != '-' && *p != '/'))
    return VL_EINVAL;
  char dsep = *p++;
  if ((M = read_int(&p, 2)) < 1 || M > 12 || *p++ != dsep)
    return VL_EINVAL;
  if ((D = read_int(&p, 2)) < 1 || D > days_in_month(Y, M))
    return VL_EINVAL;
  if (*p == 'T' || *p == 't' || (*p == ' ' && p[1] >= '0' && p[1] <= '9')) {
    p++;
    if ((h = read_int(&p, 2)) < 0 || h > 23 || *p++ != ':')
      return VL_EINVAL;
    if ((mi = read_int(&p, 2)) < 0 || mi > 59)
      return VL_EINVAL;
    if (*p == ':') {
      p++;
      if ((sec = read_int(&p, 2)) < 0 || sec > 60)
        return VL_EINVAL;
      if (*p == '.' || *p == ',') {
        p++;
        double scale = 0.1;
        if (!(*p >= '0' && *p <= '9'))
          return VL_EINVAL;
        while (*p >= '0' && *p <= '9') {
          frac += (*p++ - '0') * scale;
          scale /= 10;
        }
      }
    }
  }
  if (*p == ' ' && (p[1] == 'Z' || p[1] == '+' || p[1] == '-'))
    p++;
  int zoned = 0;
  int64_t offset_min = 0;
  if (*p == 'Z' || *p == 'z') {
    zoned = 1;
    p++;
  } else if (*p == '+' || *p == '-') {
    int sign = *p++ == '-' ? -1 : 1;
    int oh = read_int(&p, 2), om = 0;
    if (oh < 0 || oh > 23)
      return VL_EINVAL;
    if (*p == ':')
      p++;
    if (*p >= '0' && *p <= '9' && ((om = read_int(&p, 2)) < 0 || om > 59))
      return VL_EINVAL;
    zoned = 1;
    offset_min = sign * (oh * 60 + om);
  }
  while (is_blank(*p))
    p++;
  if (*p)
    return VL_EINVAL;
  double secs;
  if (zoned) {
    secs = (double)(days_from_civil(Y, M, D) * 86400 + h * 3600 + mi * 60 + sec - offset_min * 60);
  } else {
    struct tm tm = {0};
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    if (t == (time_t)-1 && !(Y == 1969 && M == 12 && D == 31))
      return VL_EINVAL;
    secs = (double)t;
  }
  *ms = secs * 1000 + frac * 1000;
  return 0;
}

typedef int (*cell_parser_t)(const char *s, double *out);

static int parse_column(const vl_csv_t *c, size_t col, double *out, char *err, size_t errlen,
                        cell_parser_t parse, const char *what) {
  for (size_t r = 0; r < c->nrows; r++) {
    const char *s = vl_csv_cell(c, r, col);
    int rc = parse(s, &out[r]);
    if (rc == VL_ENOENT) {
      out[r] = NAN;
    } else if (rc) {
      vl_set_err(err, errlen, "%s:%zu: column '%s': '%.40s' is not %s", c->src, vl_csv_lineno(c, r),
                 vl_csv_colname(c, col), s, what);
      return VL_EINVAL;
    }
  }
  return 0;
}

int vl_csv_numbers(const vl_csv_t *c, size_t col, double *out, char *err, size_t errlen) {
  return parse_column(c, col, out, err, errlen, vl_csv_parse_number, "a number");
}

int vl_csv_times(const vl_csv_t *c, size_t col, double *out, char *err, size_t errlen) {
  return parse_column(c, col, out, err, errlen, vl_csv_parse_time,
                      "a timestamp (epoch s or ms, or ISO 8601)");
}
