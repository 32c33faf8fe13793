/* The shipped JSON scanner against its reference (jsonscan_ref.c, the byte-by-byte scanner it
 * replaced): fed the same text in the same pieces, both offer the same values (depth, first byte,
 * and every member name and index a callback can read), hand back the same captured text and
 * measured lengths, and return the same code from every feed and from finish. Fed the text in other
 * pieces, or whole, the shipped scanner tells the same story. Each piece lies in a buffer of its
 * own, so that a read past its end is seen by ASan.
 *
 * Input: [policy: 1 byte][capture limit: 1 byte][split seed: 2 bytes][text]. The policy and the
 * values offered so far decide what is asked for: skipped, captured or measured. */
#include "fuzz.h"
#include "jsonscan_ref.h"

#include "vlmload/common.h"
#include "vlmload/jsonscan.h"

#include <string.h>

typedef struct {
  unsigned char *b;
  size_t len, cap;
} log_t;

typedef struct {
  log_t events; /* what the callbacks saw, the same whatever the pieces */
  log_t codes;  /* what each feed returned, the same for the same pieces */
  unsigned policy;
  uint64_t offered;
} sink_t;

static void put(log_t *l, const void *p, size_t n) {
  if (l->len + n > l->cap) {
    size_t cap = l->cap ? l->cap : 4096;
    while (cap < l->len + n)
      cap *= 2;
    l->b = realloc(l->b, cap);
    if (!l->b)
      abort();
    l->cap = cap;
  }
  memcpy(l->b + l->len, p, n);
  l->len += n;
}

static void put_int(log_t *l, long v) {
  put(l, &v, sizeof(v));
}

/* What is asked for at the offered-th value: a mix of the policy and where the value stands. */
static int choose(sink_t *k, int depth, char c) {
  uint64_t h = (k->offered++ + 1) * 0x9e3779b97f4a7c15u ^ (uint64_t)k->policy * 0xff51afd7u ^
               (uint64_t)(unsigned char)c << 8 ^ (uint64_t)depth << 16;
  h ^= h >> 29;
  switch (k->policy & 3) {
  case 0:
    return (int)(h % 3); /* anything, anywhere */
  case 1:
    return c == '"' ? 2 : (int)(h % 2); /* strings measured, the rest captured or skipped */
  case 2:
    return depth == (int)(k->policy >> 2 & 3) ? 1 : 0; /* one depth captured */
  default:
    return 0; /* offered, never asked for */
  }
}

/* The callbacks of one scanner type: T the type, W its answer's type, P its function prefix. */
#define SINK_CALLBACKS(T, W, P)                                                                    \
  static W P##value(void *ud, const T *s, int depth, char c) {                                     \
    sink_t *k = ud;                                                                                \
    put(&k->events, "V", 1);                                                                       \
    put_int(&k->events, depth);                                                                    \
    put_int(&k->events, (unsigned char)c);                                                         \
    put_int(&k->events, s->depth);                                                                 \
    for (int level = 0; level <= depth + 1 && level <= 6; level++) {                               \
      const char *key = P##key(s, level);                                                          \
      put_int(&k->events, key ? (long)strlen(key) : -1);                                           \
      if (key)                                                                                     \
        put(&k->events, key, strlen(key));                                                         \
      put_int(&k->events, P##index(s, level));                                                     \
    }                                                                                              \
    return (W)choose(k, depth, c);                                                                 \
  }                                                                                                \
  static void P##end(void *ud, const T *s, int depth, const char *text, size_t len,                \
                     int truncated) {                                                              \
    sink_t *k = ud;                                                                                \
    put(&k->events, text ? "C" : "M", 1);                                                          \
    put_int(&k->events, depth);                                                                    \
    put_int(&k->events, s->depth);                                                                 \
    put_int(&k->events, (long)len);                                                                \
    put_int(&k->events, truncated);                                                                \
    if (text)                                                                                      \
      put(&k->events, text, len);                                                                  \
  }

SINK_CALLBACKS(vl_jsonscan_t, vl_jsonscan_want_t, vl_jsonscan_)
SINK_CALLBACKS(ref_jsonscan_t, ref_jsonscan_want_t, ref_jsonscan_)

/* The lengths of the pieces: short ones (empty too) and now and then a long one. */
static size_t piece_len(uint32_t *x, size_t left) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  uint32_t r = *x;
  size_t n = (r & 7) == 0 ? (r >> 3) % 512 : (r >> 3) % 40;
  return VL_MIN(n, left);
}

/* Scans text in the pieces a seed gives (seed 0: whole), each copied into its own buffer. */
#define SCAN(T, P, kind)                                                                           \
  static int scan_##kind(const char *p, size_t n, size_t cap, uint32_t seed, sink_t *k) {          \
    T s;                                                                                           \
    P##init(&s, cap, P##value, P##end, k);                                                         \
    size_t at = 0;                                                                                 \
    do {                                                                                           \
      size_t m = seed ? piece_len(&seed, n - at) : n;                                              \
      char *b = malloc(m ? m : 1);                                                                 \
      if (!b)                                                                                      \
        abort();                                                                                   \
      memcpy(b, p + at, m);                                                                        \
      put_int(&k->codes, P##feed(&s, b, m));                                                       \
      free(b);                                                                                     \
      at += m;                                                                                     \
    } while (at < n);                                                                              \
    int rc = P##finish(&s);                                                                        \
    put_int(&k->events, rc);                                                                       \
    P##free(&s);                                                                                   \
    return rc;                                                                                     \
  }

SCAN(vl_jsonscan_t, vl_jsonscan_, new)
SCAN(ref_jsonscan_t, ref_jsonscan_, ref)

static void sink_init(sink_t *k, unsigned policy) {
  memset(k, 0, sizeof(*k));
  k->policy = policy;
}

static void sink_free(sink_t *k) {
  free(k->events.b);
  free(k->codes.b);
}

static int same(const log_t *a, const log_t *b) {
  return a->len == b->len && (a->len == 0 || memcmp(a->b, b->b, a->len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in_t in = {data, size};
  unsigned policy = fuzz_u8(&in);
  size_t cap = (size_t)fuzz_u8(&in) * 3;
  uint32_t seed = fuzz_u16(&in) + 1;
  const char *p = (const char *)in.p;
  size_t n = in.n;
  sink_t ref, split, other, whole;
  sink_init(&ref, policy);
  sink_init(&split, policy);
  sink_init(&other, policy);
  sink_init(&whole, policy);
  int rc = scan_ref(p, n, cap, seed, &ref);
  FUZZ_CHECK(scan_new(p, n, cap, seed, &split) == rc);
  FUZZ_CHECK(same(&ref.events, &split.events));
  FUZZ_CHECK(same(&ref.codes, &split.codes));
  FUZZ_CHECK(scan_new(p, n, cap, seed * 2654435761u | 1, &other) == rc);
  FUZZ_CHECK(same(&ref.events, &other.events));
  FUZZ_CHECK(scan_new(p, n, cap, 0, &whole) == rc);
  FUZZ_CHECK(same(&ref.events, &whole.events));
  sink_free(&ref);
  sink_free(&split);
  sink_free(&other);
  sink_free(&whole);
  return 0;
}
