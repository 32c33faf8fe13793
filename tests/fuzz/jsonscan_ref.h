/* The incremental JSON scanner as it stood before it skipped bytes in bulk (src/jsonscan.c, names
 * renamed ref_jsonscan_*), kept only as the reference that fuzz_jsonscan_diff holds the shipped
 * scanner to: the same values offered where the same keys and indices stand, the same values
 * handed back, the same verdict at the same piece. Not part of any shipped build.
 */
#ifndef VLMLOAD_TESTS_FUZZ_JSONSCAN_REF_H
#define VLMLOAD_TESTS_FUZZ_JSONSCAN_REF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define REF_JSONSCAN_DEPTH_MAX 1000 /* cJSON's CJSON_NESTING_LIMIT */
#define REF_JSONSCAN_LEVELS    4    /* levels whose member names and indices are tracked */
#define REF_JSONSCAN_KEY_MAX   31   /* bytes of a member name kept; longer ones match nothing */

typedef enum {
  REF_JSONSCAN_SKIP = 0,
  REF_JSONSCAN_CAPTURE,
  REF_JSONSCAN_MEASURE
} ref_jsonscan_want_t;

typedef struct ref_jsonscan_s ref_jsonscan_t;

/* A value begins at depth (0: the top-level value, 1: a member or element of it, ...); c is its
 * first byte: '{', '[', '"', 't', 'f', 'n', '-' or a digit. MEASURE is taken for strings only. */
typedef ref_jsonscan_want_t (*ref_jsonscan_value_cb)(void *ud, const ref_jsonscan_t *s, int depth,
                                                     char c);
/* A value asked for has ended. CAPTURE: text holds its first len bytes (truncated: it was longer
 * than cap_max, and len == cap_max), valid during the call only. MEASURE: text is NULL and len the
 * string's unescaped length in bytes. */
typedef void (*ref_jsonscan_end_cb)(void *ud, const ref_jsonscan_t *s, int depth, const char *text,
                                    size_t len, int truncated);

struct ref_jsonscan_s {
  ref_jsonscan_value_cb on_value;
  ref_jsonscan_end_cb on_end;
  void *ud;
  char *cap;              /* the capture buffer; owned, NULL until first needed */
  size_t cap_len, cap_sz; /* bytes held, capacity */
  size_t cap_max;
  int cap_trunc;
  int want, want_depth; /* the value captured or measured (want 0: none) and its depth */
  uint64_t measured;
  int depth;                                              /* containers open */
  uint8_t is_array[(REF_JSONSCAN_DEPTH_MAX + 1 + 7) / 8]; /* bit d: the container at depth d */
  struct {
    char key[REF_JSONSCAN_KEY_MAX + 1]; /* NUL-terminated */
    int key_len;                        /* -1: too long */
    long index;                         /* element index in an array, -1 in an object */
  } lv[REF_JSONSCAN_LEVELS + 1];
  int state, sub;   /* see jsonscan.c */
  int in_key;       /* the string being read is a member name */
  uint32_t hex, hi; /* \u digits so far; a pending high surrogate */
  int nhex;
  const char *lit; /* the literal being matched, and how far */
  int lit_pos;
  int error;
};

/* Prepares a scanner that keeps at most cap_max bytes of a captured value. */
void ref_jsonscan_init(ref_jsonscan_t *s, size_t cap_max, ref_jsonscan_value_cb on_value,
                       ref_jsonscan_end_cb on_end, void *ud);
void ref_jsonscan_free(ref_jsonscan_t *s);
/* Starts a new text; keeps the capture buffer. */
void ref_jsonscan_reset(ref_jsonscan_t *s);

/* Takes n more bytes. Returns 0, or VL_EJSON once the text is not JSON (it stays so: later bytes
 * are ignored), or VL_ENOMEM. */
int ref_jsonscan_feed(ref_jsonscan_t *s, const char *p, size_t n);
/* The text has ended. Returns 0 when it was one whole JSON value, else VL_EJSON. */
int ref_jsonscan_finish(ref_jsonscan_t *s);

/* Name of the member at level (1..depth of the value offered), or NULL when that level is an array
 * element, is deeper than REF_JSONSCAN_LEVELS, or its name is longer than REF_JSONSCAN_KEY_MAX.
 * Inline, as the next two: a reply asks for them at every value. */
static inline const char *ref_jsonscan_key(const ref_jsonscan_t *s, int level) {
  if (level < 1 || level > REF_JSONSCAN_LEVELS || level > s->depth)
    return NULL;
  if (s->lv[level].index >= 0 || s->lv[level].key_len < 0)
    return NULL;
  return s->lv[level].key;
}

/* Whether the member at level is named name (n bytes); REF_JSONSCAN_KEY_IS takes a literal. */
static inline int ref_jsonscan_key_eq(const ref_jsonscan_t *s, int level, const char *name,
                                      size_t n) {
  const char *k = ref_jsonscan_key(s, level);
  return k && (size_t)s->lv[level].key_len == n && memcmp(k, name, n) == 0;
}
#define REF_JSONSCAN_KEY_IS(s, level, lit) ref_jsonscan_key_eq((s), (level), (lit), sizeof(lit) - 1)

/* Index of the array element at level, or -1 when it is an object member (or too deep). */
static inline long ref_jsonscan_index(const ref_jsonscan_t *s, int level) {
  if (level < 1 || level > REF_JSONSCAN_LEVELS || level > s->depth)
    return -1;
  return s->lv[level].index;
}

#endif
