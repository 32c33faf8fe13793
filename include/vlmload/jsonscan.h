/* Incremental JSON scanner: checks a JSON text (RFC 8259) fed in pieces of any size, without
 * holding it, and hands the caller only the values it asks for.
 *
 * cJSON parses a whole text in memory, so a 200 MB reply would need 200 MB (and its tree). The
 * scanner instead walks the text byte by byte: strings with their escapes (\uXXXX, surrogate pairs
 * as cJSON requires them), numbers by the RFC's grammar, the three literals, nesting up to cJSON's
 * limit (VL_JSONSCAN_DEPTH_MAX), and nothing but white space after the value. Its memory is this
 * struct plus one capture buffer of at most `cap_max` bytes.
 *
 * At the first byte of every value the scanner calls on_value, which sees where the value is (the
 * member names and array indices of its first VL_JSONSCAN_LEVELS levels, through vl_jsonscan_key
 * and vl_jsonscan_index) and answers SKIP, CAPTURE (keep the value's exact text, to parse it with
 * cJSON) or MEASURE (a string: count its bytes once unescaped, UTF-8). on_end then receives what
 * was asked for when the value ends. While one value is captured or measured, values inside it are
 * not offered. Callbacks may read the scanner but not feed it.
 */
#ifndef VLMLOAD_JSONSCAN_H
#define VLMLOAD_JSONSCAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VL_JSONSCAN_DEPTH_MAX 1000 /* cJSON's CJSON_NESTING_LIMIT */
#define VL_JSONSCAN_LEVELS    4    /* levels whose member names and indices are tracked */
#define VL_JSONSCAN_KEY_MAX   31   /* bytes of a member name kept; longer ones match nothing */

typedef enum { VL_JSONSCAN_SKIP = 0, VL_JSONSCAN_CAPTURE, VL_JSONSCAN_MEASURE } vl_jsonscan_want_t;

typedef struct vl_jsonscan_s vl_jsonscan_t;

/* A value begins at depth (0: the top-level value, 1: a member or element of it, ...); c is its
 * first byte: '{', '[', '"', 't', 'f', 'n', '-' or a digit. MEASURE is taken for strings only. */
typedef vl_jsonscan_want_t (*vl_jsonscan_value_cb)(void *ud, const vl_jsonscan_t *s, int depth,
                                                   char c);
/* A value asked for has ended. CAPTURE: text holds its first len bytes (truncated: it was longer
 * than cap_max, and len == cap_max), valid during the call only. MEASURE: text is NULL and len the
 * string's unescaped length in bytes. */
typedef void (*vl_jsonscan_end_cb)(void *ud, const vl_jsonscan_t *s, int depth, const char *text,
                                   size_t len, int truncated);

struct vl_jsonscan_s {
  vl_jsonscan_value_cb on_value;
  vl_jsonscan_end_cb on_end;
  void *ud;
  char *cap;              /* the capture buffer; owned, NULL until first needed */
  size_t cap_len, cap_sz; /* bytes held, capacity */
  size_t cap_max;
  int cap_trunc;
  int want, want_depth; /* the value captured or measured (want 0: none) and its depth */
  uint64_t measured;
  int depth;                                             /* containers open */
  uint8_t is_array[(VL_JSONSCAN_DEPTH_MAX + 1 + 7) / 8]; /* bit d: the container at depth d */
  struct {
    char key[VL_JSONSCAN_KEY_MAX + 1]; /* NUL-terminated */
    int key_len;                       /* -1: too long */
    long index;                        /* element index in an array, -1 in an object */
  } lv[VL_JSONSCAN_LEVELS + 1];
  int state, sub;   /* see jsonscan.c */
  int in_key;       /* the string being read is a member name */
  uint32_t hex, hi; /* \u digits so far; a pending high surrogate */
  int nhex;
  const char *lit; /* the literal being matched, and how far */
  int lit_pos;
  int error;
};

/* Prepares a scanner that keeps at most cap_max bytes of a captured value. */
void vl_jsonscan_init(vl_jsonscan_t *s, size_t cap_max, vl_jsonscan_value_cb on_value,
                      vl_jsonscan_end_cb on_end, void *ud);
void vl_jsonscan_free(vl_jsonscan_t *s);
/* Starts a new text; keeps the capture buffer. */
void vl_jsonscan_reset(vl_jsonscan_t *s);

/* Takes n more bytes. Returns 0, or VL_EJSON once the text is not JSON (it stays so: later bytes
 * are ignored), or VL_ENOMEM. */
int vl_jsonscan_feed(vl_jsonscan_t *s, const char *p, size_t n);
/* The text has ended. Returns 0 when it was one whole JSON value, else VL_EJSON. */
int vl_jsonscan_finish(vl_jsonscan_t *s);

/* Name of the member at level (1..depth of the value offered), or NULL when that level is an array
 * element, is deeper than VL_JSONSCAN_LEVELS, or its name is longer than VL_JSONSCAN_KEY_MAX.
 * Inline, as the next two: a reply asks for them at every value. */
static inline const char *vl_jsonscan_key(const vl_jsonscan_t *s, int level) {
  if (level < 1 || level > VL_JSONSCAN_LEVELS || level > s->depth)
    return NULL;
  if (s->lv[level].index >= 0 || s->lv[level].key_len < 0)
    return NULL;
  return s->lv[level].key;
}

/* Whether the member at level is named name (n bytes); VL_JSONSCAN_KEY_IS takes a literal. */
static inline int vl_jsonscan_key_eq(const vl_jsonscan_t *s, int level, const char *name,
                                     size_t n) {
  if (level < 1 || level > VL_JSONSCAN_LEVELS || level > s->depth || s->lv[level].index >= 0)
    return 0;
  /* the length first: most names asked about are not the one at hand */
  int len = s->lv[level].key_len;
  return len >= 0 && (size_t)len == n && memcmp(s->lv[level].key, name, n) == 0;
}
#define VL_JSONSCAN_KEY_IS(s, level, lit) vl_jsonscan_key_eq((s), (level), (lit), sizeof(lit) - 1)

/* Index of the array element at level, or -1 when it is an object member (or too deep). */
static inline long vl_jsonscan_index(const vl_jsonscan_t *s, int level) {
  if (level < 1 || level > VL_JSONSCAN_LEVELS || level > s->depth)
    return -1;
  return s->lv[level].index;
}

#endif
