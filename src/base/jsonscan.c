#include "vlmload/jsonscan.h"
#include "vlmload/common.h"

#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

/* Where the scanner is. S_NUMBER's sub tracks the number grammar; S_STRING's the escapes. */
enum {
  S_VALUE,          /* a value must come */
  S_VALUE_OR_CLOSE, /* just after '[' */
  S_KEY_OR_CLOSE,   /* just after '{' */
  S_KEY,            /* after ',' in an object */
  S_COLON,          /* after a member name */
  S_AFTER,          /* after a value inside a container: ',' or the closing bracket */
  S_END,            /* the top-level value is whole: only white space may follow */
  S_STRING,
  S_NUMBER,
  S_LITERAL,
};

enum { STR_PLAIN, STR_ESC, STR_HEX, STR_LOW_BACKSLASH, STR_LOW_U };

/* After '-': a digit must come; after a leading 0; in the integer digits; after '.': a digit must
 * come; in the fraction; after 'e': a sign or digit; after its sign: a digit; in the exponent. */
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

void vl_jsonscan_init(vl_jsonscan_t *s, size_t cap_max, vl_jsonscan_value_cb on_value,
                      vl_jsonscan_end_cb on_end, void *ud) {
  memset(s, 0, sizeof(*s));
  s->cap_max = cap_max;
  s->on_value = on_value;
  s->on_end = on_end;
  s->ud = ud;
  vl_jsonscan_reset(s);
}

void vl_jsonscan_free(vl_jsonscan_t *s) {
  free(s->cap);
  s->cap = NULL;
  s->cap_sz = 0;
}

void vl_jsonscan_reset(vl_jsonscan_t *s) {
  s->cap_len = 0;
  s->cap_trunc = 0;
  s->want = VL_JSONSCAN_SKIP;
  s->measured = 0;
  s->depth = 0;
  s->state = S_VALUE;
  s->sub = 0;
  s->in_key = 0;
  s->hex = s->hi = 0;
  s->nhex = 0;
  s->lit = NULL;
  s->lit_pos = 0;
  s->error = 0;
}

static int is_ws(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_array_at(const vl_jsonscan_t *s, int d) {
  return (s->is_array[d / 8] >> (d % 8)) & 1;
}

static int capture(vl_jsonscan_t *s, const char *p, size_t n) {
  size_t room = s->cap_max - s->cap_len;
  if (n > room) {
    s->cap_trunc = 1;
    n = room;
  }
  if (n == 0)
    return 0;
  if (s->cap_len + n > s->cap_sz) {
    size_t sz = s->cap_sz ? s->cap_sz : 256;
    while (sz < s->cap_len + n)
      sz *= 2;
    sz = VL_MIN(sz, s->cap_max);
    char *b = realloc(s->cap, sz);
    if (!b)
      return VL_ENOMEM;
    s->cap = b;
    s->cap_sz = sz;
  }
  memcpy(s->cap + s->cap_len, p, n);
  s->cap_len += n;
  return 0;
}

/* Bytes of a member name, appended to its level's name (past VL_JSONSCAN_KEY_MAX: too long). */
static void key_text(vl_jsonscan_t *s, const char *p, size_t n) {
  if (s->depth > VL_JSONSCAN_LEVELS)
    return;
  int *len = &s->lv[s->depth].key_len;
  if (*len >= 0 && n <= (size_t)(VL_JSONSCAN_KEY_MAX - *len)) {
    memcpy(s->lv[s->depth].key + *len, p, n);
    *len += (int)n;
    s->lv[s->depth].key[*len] = '\0';
  } else {
    *len = -1;
  }
}

/* Bytes of a string's unescaped text: counted when measured, appended to a member name. */
static inline void text(vl_jsonscan_t *s, const char *p, size_t n) {
  if (s->want == VL_JSONSCAN_MEASURE)
    s->measured += n;
  if (s->in_key)
    key_text(s, p, n);
}

static void code_point(vl_jsonscan_t *s, uint32_t cp) {
  char u[4];
  size_t n;
  if (cp < 0x80) {
    u[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    u[0] = (char)(0xc0 | (cp >> 6));
    u[1] = (char)(0x80 | (cp & 0x3f));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xe0 | (cp >> 12));
    u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    u[2] = (char)(0x80 | (cp & 0x3f));
    n = 3;
  } else {
    u[0] = (char)(0xf0 | (cp >> 18));
    u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    u[3] = (char)(0x80 | (cp & 0x3f));
    n = 4;
  }
  text(s, u, n);
}

/* A value starts with byte c at p; *from becomes p when it is to be captured. */
static inline void value_begin(vl_jsonscan_t *s, char c, const char *p, const char **from) {
  if (s->want != VL_JSONSCAN_SKIP || !s->on_value)
    return;
  vl_jsonscan_want_t w = s->on_value(s->ud, s, s->depth, c);
  if (w == VL_JSONSCAN_CAPTURE) {
    s->want = w;
    s->want_depth = s->depth;
    s->cap_len = 0;
    s->cap_trunc = 0;
    *from = p;
  } else if (w == VL_JSONSCAN_MEASURE && c == '"') {
    s->want = w;
    s->want_depth = s->depth;
    s->measured = 0;
  }
}

static int open_container(vl_jsonscan_t *s, int array) {
  if (s->depth >= VL_JSONSCAN_DEPTH_MAX)
    return VL_EJSON;
  int d = ++s->depth;
  if (array)
    s->is_array[d / 8] |= (uint8_t)(1u << (d % 8));
  else
    s->is_array[d / 8] &= (uint8_t) ~(1u << (d % 8));
  if (d <= VL_JSONSCAN_LEVELS) {
    s->lv[d].index = array ? 0 : -1;
    s->lv[d].key_len = 0;
    s->lv[d].key[0] = '\0';
  }
  return 0;
}

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Whether c continues the number (else the number has ended, or is broken). */
static int number_takes(const vl_jsonscan_t *s, char c) {
  switch (s->sub) {
  case N_MINUS:
    return is_digit(c);
  case N_ZERO:
    return c == '.' || c == 'e' || c == 'E';
  case N_INT:
    return is_digit(c) || c == '.' || c == 'e' || c == 'E';
  case N_DOT:
    return is_digit(c);
  case N_FRAC:
    return is_digit(c) || c == 'e' || c == 'E';
  case N_E:
    return is_digit(c) || c == '+' || c == '-';
  case N_ESIGN:
    return is_digit(c);
  default:
    return is_digit(c);
  }
}

static void number_step(vl_jsonscan_t *s, char c) {
  switch (s->sub) {
  case N_MINUS:
    s->sub = c == '0' ? N_ZERO : N_INT;
    break;
  case N_ZERO:
  case N_INT:
    s->sub = c == '.' ? N_DOT : (c == 'e' || c == 'E') ? N_E : N_INT;
    break;
  case N_DOT:
  case N_FRAC:
    s->sub = (c == 'e' || c == 'E') ? N_E : N_FRAC;
    break;
  case N_E:
    s->sub = is_digit(c) ? N_EXP : N_ESIGN;
    break;
  default:
    s->sub = N_EXP;
    break;
  }
}

static int number_complete(const vl_jsonscan_t *s) {
  return s->sub == N_ZERO || s->sub == N_INT || s->sub == N_FRAC || s->sub == N_EXP;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* c follows a backslash in a string, where only 'u' (four hex digits to come) may stand. */
static int begin_hex(vl_jsonscan_t *s, char c) {
  if (c != 'u')
    return VL_EJSON;
  s->sub = STR_HEX;
  s->hex = 0;
  s->nhex = 0;
  return 0;
}

/* One byte of an escape in a string (the plain bytes, the quote and the backslash that begins an
 * escape are read by the caller). */
static int escape_byte(vl_jsonscan_t *s, char c) {
  switch (s->sub) {
  case STR_ESC: {
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *q = c ? strchr(from, c) : NULL;
    if (q) {
      text(s, to + (q - from), 1);
      s->sub = STR_PLAIN;
      return 0;
    }
    return begin_hex(s, c);
  }
  case STR_HEX: {
    int v = hexval(c);
    if (v < 0)
      return VL_EJSON;
    s->hex = s->hex * 16 + (uint32_t)v;
    if (++s->nhex < 4)
      return 0;
    uint32_t cp = s->hex;
    s->sub = STR_PLAIN;
    if (s->hi) {
      if (cp < 0xdc00 || cp > 0xdfff)
        return VL_EJSON;
      code_point(s, 0x10000 + ((s->hi - 0xd800) << 10) + (cp - 0xdc00));
      s->hi = 0;
    } else if (cp >= 0xd800 && cp <= 0xdbff) {
      s->hi = cp;
      s->sub = STR_LOW_BACKSLASH;
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      return VL_EJSON;
    } else {
      code_point(s, cp);
    }
    return 0;
  }
  case STR_LOW_BACKSLASH:
    if (c != '\\')
      return VL_EJSON;
    s->sub = STR_LOW_U;
    return 0;
  default: /* STR_LOW_U */
    return begin_hex(s, c);
  }
}

/* The bytes that end a plain run in a string: the quote, the backslash and the control bytes. */
/* clang-format off */
static const uint8_t run_stop[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    ['"'] = 1, ['\\'] = 1,
};
/* clang-format on */

/* The bytes of a word (little-endian byte order) that are 0, as the top bit of each such byte
 * and of some bytes above the first (the first set bit is exact). */
static inline uint64_t zero_bytes(uint64_t w) {
  return (w - 0x0101010101010101u) & ~w & 0x8080808080808080u;
}

/* The end of the run of plain string bytes at p (no quote, backslash or control byte): sixteen
 * bytes a step with SSE2 while sixteen remain, then eight a step (little-endian machines), then
 * byte by byte; each path stops at the same byte. */
static inline const char *plain_run(const char *p, const char *end) {
#if defined(__SSE2__) && defined(__GNUC__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  const __m128i control = _mm_set1_epi8(0x1f);
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    /* min(v, 0x1f) == v: the unsigned byte is at most 0x1f */
    __m128i stop =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmpeq_epi8(_mm_min_epu8(v, control), v));
    unsigned m = (unsigned)_mm_movemask_epi8(stop);
    if (m)
      return p + __builtin_ctz(m);
    p += 16;
  }
#endif
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  while (end - p >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t stop = zero_bytes(w ^ 0x2222222222222222u) | zero_bytes(w ^ 0x5c5c5c5c5c5c5c5cu) |
                    ((w - 0x2020202020202020u) & ~w & 0x8080808080808080u);
    if (stop) /* the lowest flag is exact: borrows run only upwards */
      return p + (__builtin_ctzll(stop) >> 3);
    p += 8;
  }
#endif
  while (p < end && !run_stop[(unsigned char)*p])
    p++;
  return p;
}

/* The value that began at `from` (or in an earlier piece) ended just before stop: its captured
 * or measured text goes to on_end. */
static int value_end_wanted(vl_jsonscan_t *s, const char *from, const char *stop) {
  int rc = 0;
  if (s->want == VL_JSONSCAN_CAPTURE)
    rc = capture(s, from, (size_t)(stop - from));
  if (rc == 0 && s->on_end) {
    if (s->want == VL_JSONSCAN_CAPTURE)
      s->on_end(s->ud, s, s->depth, s->cap, s->cap_len, s->cap_trunc);
    else
      s->on_end(s->ud, s, s->depth, NULL, (size_t)s->measured, 0);
  }
  s->want = VL_JSONSCAN_SKIP;
  return rc;
}

/* The scan jumps from token to token (a label per state, the state stored only when a piece ends
 * inside it), and takes a string's plain run, a number's digits and white space in inner loops; a
 * member name is copied as it is read. A captured value is not copied byte by byte: its bytes in
 * this piece begin at `from` and are appended once, when it ends or when the piece does. */
int vl_jsonscan_feed(vl_jsonscan_t *s, const char *p, size_t n) {
  if (s->error)
    return VL_EJSON;
  const char *end = p + n;
  const char *from = p; /* a value captured: where its bytes in this piece begin */
  int rc = VL_EJSON;
  char c;
/* The piece has ended in state st. */
#define NEED(st)                                                                                   \
  do {                                                                                             \
    if (p == end) {                                                                                \
      s->state = (st);                                                                             \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)
/* A value ended before stop. */
#define ENDED(stop)                                                                                \
  do {                                                                                             \
    if (s->want != VL_JSONSCAN_SKIP && s->want_depth == s->depth &&                                \
        (rc = value_end_wanted(s, from, (stop))) != 0)                                             \
      goto fail;                                                                                   \
    if (s->depth == 0)                                                                             \
      goto end_space;                                                                              \
    goto after;                                                                                    \
  } while (0)
  switch (s->state) {
  case S_VALUE:
    goto value;
  case S_VALUE_OR_CLOSE:
    goto value_or_close;
  case S_KEY_OR_CLOSE:
    goto key_or_close;
  case S_KEY:
    goto key;
  case S_COLON:
    goto colon;
  case S_AFTER:
    goto after;
  case S_END:
    goto end_space;
  case S_STRING:
    goto string;
  case S_NUMBER:
    goto number;
  default:
    goto literal;
  }

value_or_close: /* just after '[' */
  NEED(S_VALUE_OR_CLOSE);
  c = *p;
  if (c == ']')
    goto close;
  if (is_ws((unsigned char)c)) {
    p++;
    goto value_or_close;
  }
value: /* a value must come */
  NEED(S_VALUE);
  c = *p;
  switch (c) {
  case ' ':
  case '\t':
  case '\n':
  case '\r':
    p++;
    goto value;
  case '"':
    value_begin(s, c, p, &from);
    s->sub = STR_PLAIN;
    s->in_key = 0;
    p++;
    if (s->want == VL_JSONSCAN_SKIP || s->want_depth != s->depth) {
      /* Not itself asked for: a plain string whole in this piece is passed over at once. */
      const char *q = plain_run(p, end);
      if (q < end && *q == '"') {
        p = q + 1;
        if (s->depth == 0)
          goto end_space;
        goto after;
      }
    }
    goto string;
  case '{':
  case '[':
    value_begin(s, c, p, &from);
    if ((rc = open_container(s, c == '[')) != 0)
      goto fail;
    p++;
    if (c == '[')
      goto value_or_close;
    goto key_or_close;
  case 't':
  case 'f':
  case 'n':
    value_begin(s, c, p, &from);
    s->lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
    s->lit_pos = 1;
    p++;
    goto literal;
  default:
    if (c != '-' && !is_digit(c))
      goto fail;
    value_begin(s, c, p, &from);
    s->sub = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
    p++;
    goto number;
  }

string: /* in a string, past its opening quote */
  NEED(S_STRING);
  if (s->sub != STR_PLAIN) {
    if ((rc = escape_byte(s, *p)) != 0)
      goto fail;
    p++;
    goto string;
  }
  {
    const char *q = plain_run(p, end);
    size_t k = (size_t)(q - p);
    if (s->in_key && s->depth <= VL_JSONSCAN_LEVELS) {
      int len = s->lv[s->depth].key_len;
      char *key = s->lv[s->depth].key;
      if (len == 0 && k <= VL_JSONSCAN_KEY_MAX && end - p >= VL_JSONSCAN_KEY_MAX + 1) {
        /* the usual name, whole in this piece: one fixed-size copy, then its end */
        memcpy(key, p, VL_JSONSCAN_KEY_MAX + 1);
        key[k] = '\0';
        s->lv[s->depth].key_len = (int)k;
      } else {
        key_text(s, p, k);
      }
    } else if (s->want == VL_JSONSCAN_MEASURE) {
      s->measured += k;
    }
    p = q;
  }
  NEED(S_STRING);
  c = *p++;
  if (c == '\\') {
    s->sub = STR_ESC;
    goto string;
  }
  if (c != '"')
    goto fail; /* a raw control byte */
  if (s->in_key) {
    s->in_key = 0;
    goto colon;
  }
  ENDED(p);

colon: /* after a member name */
  NEED(S_COLON);
  c = *p++;
  if (c == ':')
    goto value;
  if (!is_ws((unsigned char)c))
    goto fail;
  goto colon;

key_or_close: /* just after '{' */
  NEED(S_KEY_OR_CLOSE);
  c = *p;
  if (c == '}')
    goto close;
  if (c == '"')
    goto key_begin;
  if (!is_ws((unsigned char)c))
    goto fail;
  p++;
  goto key_or_close;

key: /* after ',' in an object */
  NEED(S_KEY);
  c = *p;
  if (c == '"')
    goto key_begin;
  if (!is_ws((unsigned char)c))
    goto fail;
  p++;
  goto key;

key_begin: /* *p is a member name's opening quote */
  p++;
  {
    /* The usual name, plain and whole in this piece: copied at once (a fixed-size copy where the
     * piece holds that much), and then its colon. */
    const char *q = plain_run(p, end);
    size_t k = (size_t)(q - p);
    if (q < end && *q == '"') {
      if (s->depth <= VL_JSONSCAN_LEVELS) {
        char *key = s->lv[s->depth].key;
        if (k <= VL_JSONSCAN_KEY_MAX && end - p >= VL_JSONSCAN_KEY_MAX + 1) {
          memcpy(key, p, VL_JSONSCAN_KEY_MAX + 1);
          key[k] = '\0';
          s->lv[s->depth].key_len = (int)k;
        } else {
          s->lv[s->depth].key_len = 0;
          key_text(s, p, k);
        }
      }
      p = q + 1;
      if (p < end && *p == ':') {
        p++;
        goto value;
      }
      goto colon;
    }
  }
  if (s->depth <= VL_JSONSCAN_LEVELS) {
    s->lv[s->depth].key_len = 0;
    s->lv[s->depth].key[0] = '\0';
  }
  s->sub = STR_PLAIN;
  s->in_key = 1;
  goto string;

after: /* after a value inside a container: ',' or the closing bracket */
  NEED(S_AFTER);
  c = *p;
  if (c == ',') {
    int d = s->depth;
    p++;
    if (!is_array_at(s, d))
      goto key;
    if (d <= VL_JSONSCAN_LEVELS)
      s->lv[d].index++;
    goto value;
  }
  if (c == '}' || c == ']')
    goto close;
  if (!is_ws((unsigned char)c))
    goto fail;
  p++;
  goto after;

close: /* *p closes the container open at the current depth */
  if (s->depth == 0 || is_array_at(s, s->depth) != (*p == ']'))
    goto fail;
  s->depth--;
  p++;
  ENDED(p);

number: /* S_NUMBER's sub says where in the grammar */
  NEED(S_NUMBER);
  c = *p;
  if (is_digit(c) && s->sub != N_MINUS && s->sub != N_ZERO && s->sub != N_E) {
    /* N_INT, N_DOT, N_FRAC, N_ESIGN or N_EXP: a run of digits */
    s->sub = s->sub == N_DOT ? N_FRAC : s->sub == N_ESIGN ? N_EXP : s->sub;
    do
      p++;
    while (p < end && is_digit(*p));
    goto number;
  }
  if (number_takes(s, c)) {
    number_step(s, c);
    p++;
    goto number;
  }
  if (!number_complete(s))
    goto fail;
  ENDED(p); /* c is read again in the state that follows */

literal: /* S_LITERAL: lit[lit_pos] must come */
  NEED(S_LITERAL);
  if (*p != s->lit[s->lit_pos])
    goto fail;
  p++;
  if (s->lit[++s->lit_pos] != '\0')
    goto literal;
  ENDED(p);

end_space: /* the top-level value is whole: only white space may follow */
  NEED(S_END);
  if (!is_ws((unsigned char)*p))
    goto fail;
  p++;
  goto end_space;
#undef NEED
#undef ENDED

out:
  if (s->want == VL_JSONSCAN_CAPTURE && (rc = capture(s, from, (size_t)(end - from))) != 0)
    goto fail;
  return 0;
fail:
  s->error = 1;
  return rc != 0 ? rc : VL_EJSON;
}

int vl_jsonscan_finish(vl_jsonscan_t *s) {
  if (s->error)
    return VL_EJSON;
  if (s->state == S_NUMBER && s->depth == 0 && number_complete(s)) {
    if (s->want != VL_JSONSCAN_SKIP && value_end_wanted(s, NULL, NULL) != 0)
      return VL_EJSON;
    s->state = S_END;
  }
  return s->state == S_END ? 0 : VL_EJSON;
}
