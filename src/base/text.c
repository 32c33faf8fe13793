#include "vlmload/text.h"

#include "vlmload/common.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), with its code point in *cp; 0 when
 * the bytes there are not one. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp) {
  if (n == 0)
    return 0;
  if (s[0] < 0x80) {
    *cp = s[0];
    return 1;
  }
  size_t len;
  uint32_t v, min;
  if ((s[0] & 0xe0) == 0xc0) {
    len = 2, v = s[0] & 0x1f, min = 0x80;
  } else if ((s[0] & 0xf0) == 0xe0) {
    len = 3, v = s[0] & 0x0f, min = 0x800;
  } else if ((s[0] & 0xf8) == 0xf0) {
    len = 4, v = s[0] & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    v = (v << 6) | (s[i] & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
    return 0;
  *cp = v;
  return len;
}

int vl_text_utf8_valid(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  uint32_t cp;
  while (n > 0) {
    size_t k = utf8_seq(p, n, &cp);
    if (k == 0)
      return 0;
    p += k;
    n -= k;
  }
  return 1;
}

/* The shown form of the character at *s (advanced past it) into out (room for 16 bytes):
 * printable characters as they are, anything else as \xHH per byte. Returns its length. */
static size_t shown_char(const unsigned char **s, size_t n, char *out) {
  static const char hex[] = "0123456789abcdef";
  uint32_t cp = 0;
  size_t k = utf8_seq(*s, n, &cp);
  int control = k == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
  if (!control) {
    memcpy(out, *s, k);
    *s += k;
    return k;
  }
  size_t bytes = k ? k : 1, len = 0;
  for (size_t i = 0; i < bytes; i++) {
    unsigned char ch = (*s)[i];
    out[len++] = '\\';
    out[len++] = 'x';
    out[len++] = hex[ch >> 4];
    out[len++] = hex[ch & 15];
  }
  *s += bytes;
  return len;
}

void vl_text_fput_shown(FILE *f, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s);
  char one[16];
  while (*p) {
    const unsigned char *at = p;
    size_t len = shown_char(&p, n, one);
    n -= (size_t)(p - at);
    fwrite(one, 1, len, f);
  }
}

size_t vl_text_shown(char *dst, size_t dstlen, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s), j = 0;
  char one[16];
  if (dstlen == 0)
    return 0;
  while (*p) {
    const unsigned char *at = p;
    size_t len = shown_char(&p, n, one);
    if (j + len + 1 > dstlen)
      break;
    n -= (size_t)(p - at);
    memcpy(dst + j, one, len);
    j += len;
  }
  dst[j] = '\0';
  return j;
}

/* Columns that s takes: its UTF-8 characters (continuation bytes take none). */
static int columns(const char *s) {
  int n = 0;
  for (; *s; s++)
    n += ((unsigned char)*s & 0xc0) != 0x80;
  return n;
}

void vl_text_wrap_start(vl_text_wrap_t *w, FILE *f, int width, int indent, const char *head) {
  *w = (vl_text_wrap_t){f, width, indent, columns(head), 0};
  fputs(head, f);
}

static void wrap_put(vl_text_wrap_t *w, const char *sep, const char *text) {
  int len = columns(text);
  if (w->fields && w->col + columns(sep) + len > w->width) {
    size_t keep = strlen(sep);
    while (keep && sep[keep - 1] == ' ')
      keep--;
    fprintf(w->f, "%.*s\n%*s", (int)keep, sep, w->indent, "");
    w->col = w->indent;
    w->fields = 0;
  } else if (w->fields) {
    fputs(sep, w->f);
    w->col += columns(sep);
  }
  fputs(text, w->f);
  w->col += len;
  w->fields++;
}

void vl_text_wrap_add(vl_text_wrap_t *w, const char *sep, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n >= sizeof(buf)) {
    char *big = vl_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    wrap_put(w, sep, big);
    free(big);
    return;
  }
  wrap_put(w, sep, n >= 0 ? buf : "");
}

void vl_text_wrap_shown(vl_text_wrap_t *w, const char *sep, const char *prefix, const char *s) {
  size_t plen = strlen(prefix), n = plen + 4 * strlen(s) + 1;
  char *buf = vl_xmalloc(n);
  memcpy(buf, prefix, plen);
  vl_text_shown(buf + plen, n - plen, s);
  wrap_put(w, sep, buf);
  free(buf);
}

void vl_text_wrap_words(vl_text_wrap_t *w, const char *text) {
  while (*text == ' ')
    text++;
  while (*text) {
    size_t len = strcspn(text, " ");
    vl_text_wrap_add(w, " ", "%.*s", (int)len, text);
    text += len;
    while (*text == ' ')
      text++;
  }
}

void vl_text_wrap_end(vl_text_wrap_t *w) {
  fputc('\n', w->f);
  w->col = 0;
  w->fields = 0;
}

int vl_text_contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++)
    if (strncasecmp(hay, needle, n) == 0)
      return 1;
  return 0;
}

void vl_text_cell(FILE *f, double v) {
  if (isfinite(v))
    fprintf(f, " %9.2f", v);
  else
    fprintf(f, " %9s", "-");
}

char *vl_text_num(char *out, size_t n, double v, int sig, int plus) {
  if (!n)
    return out;
  if (!isfinite(v)) {
    snprintf(out, n, "-");
    return out;
  }
  sig = sig < 1 ? 1 : sig > 15 ? 15 : sig;
  /* The digits after the point that keep sig of them, from the exponent %e gives after its own
   * rounding (9.996 to 3 digits is 10.0: one before the point). */
  char e[32];
  snprintf(e, sizeof(e), "%.*e", sig - 1, v);
  int exp10 = atoi(strchr(e, 'e') + 1), decimals = sig - 1 - exp10;
  decimals = decimals < 0 ? 0 : decimals > 9 ? 9 : decimals;
  char buf[400];
  int len = snprintf(buf, sizeof(buf), plus ? "%+.*f" : "%.*f", decimals, v);
  if (len > 0 && (size_t)len < sizeof(buf) && strchr(buf, '.')) {
    while (buf[len - 1] == '0')
      buf[--len] = '\0';
    if (buf[len - 1] == '.')
      buf[--len] = '\0';
  }
  /* A value rounded to nothing keeps no sign of its own: "-0" reads as a negative. */
  if (strcmp(buf, "-0") == 0 || strcmp(buf, "+0") == 0)
    snprintf(buf, sizeof(buf), plus ? "+0" : "0");
  snprintf(out, n, "%s", buf);
  return out;
}
