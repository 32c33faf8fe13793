/* The SSE parser: a stream fed whole, fed split at positions taken from the input, and fed again
 * after vl_sse_reset must hand on the same data and dispatch the same events and end with the same
 * result, whatever the split (sse.h promises it). Every piece of data must point into the bytes
 * fed (nothing copied), but a '\n' joining two data lines. A data callback that stops the feed
 * once the stream's data passes a count, and an event callback that stops it at an event, are
 * chosen by the input too.
 *
 * Input: [mode][data stop][event stop][split positions, 2 bytes each][stream]. */
#include "fuzz.h"

#include "vlmload/common.h"
#include "vlmload/sse.h"

#include <string.h>

typedef struct {
  uint8_t *log; /* every event as its length (8 bytes) then its data */
  size_t len, cap;
  size_t events, stop_at;
  uint8_t *cur; /* the current event's data so far */
  size_t cur_len, cur_cap;
  size_t data, stop_data;   /* data bytes handed on in all; stop past this many (0 never) */
  const uint8_t *from, *to; /* the piece being fed */
} sink_t;

static void append(uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n) {
  if (*len + n > *cap) {
    *cap = (*len + n) * 2;
    *buf = realloc(*buf, *cap);
    FUZZ_CHECK(*buf != NULL);
  }
  memcpy(*buf + *len, p, n);
  *len += n;
}

static int on_data(void *ud, size_t off, const char *p, size_t n) {
  sink_t *k = ud;
  const uint8_t *q = (const uint8_t *)p;
  FUZZ_CHECK(n > 0);
  FUZZ_CHECK((n == 1 && *p == '\n') || (q >= k->from && q + n <= k->to));
  FUZZ_CHECK(off == 0 || off == k->cur_len);
  k->cur_len = off;
  append(&k->cur, &k->cur_len, &k->cur_cap, p, n);
  k->data += n;
  return k->stop_data && k->data > k->stop_data ? 98 : 0;
}

static int on_event(void *ud, size_t len) {
  sink_t *k = ud;
  FUZZ_CHECK(len > 0 && len == k->cur_len);
  append(&k->log, &k->len, &k->cap, &len, sizeof(len));
  append(&k->log, &k->len, &k->cap, k->cur, len);
  k->cur_len = 0;
  k->events++;
  return k->events == k->stop_at ? 99 : 0;
}

typedef struct {
  int rc, pending;
  sink_t sink;
} outcome_t;

/* Feeds the stream in pieces ending at cuts[0..ncuts) (ascending) and then at n, stopping at the
 * first error as a caller must. */
static void feed(vl_sse_t *p, const char *s, size_t n, const size_t *cuts, size_t ncuts,
                 outcome_t *o) {
  size_t at = 0;
  o->rc = 0;
  for (size_t i = 0; i <= ncuts && o->rc == 0; i++) {
    size_t end = i < ncuts ? cuts[i] : n;
    /* A private copy of each piece: a read past it is a read past what the parser was given. */
    char *piece = malloc(end - at + 1);
    FUZZ_CHECK(piece != NULL);
    memcpy(piece, s + at, end - at);
    o->sink.from = (const uint8_t *)piece;
    o->sink.to = (const uint8_t *)piece + (end - at);
    o->rc = vl_sse_feed(p, piece, end - at);
    free(piece);
    at = end;
  }
  o->pending = vl_sse_pending(p);
}

static void check_same(const outcome_t *a, const outcome_t *b) {
  FUZZ_CHECK(a->rc == b->rc);
  FUZZ_CHECK(a->sink.events == b->sink.events);
  FUZZ_CHECK(a->sink.len == b->sink.len);
  FUZZ_CHECK(a->sink.len == 0 || memcmp(a->sink.log, b->sink.log, a->sink.len) == 0);
  if (a->rc == 0) {
    FUZZ_CHECK(a->pending == b->pending);
    FUZZ_CHECK(a->sink.data == b->sink.data); /* the data of an event left open too */
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const size_t stops[] = {1, 2, 5, 16, 64, 300, 4096, 0};
  fuzz_in_t in = {data, size};
  unsigned mode = fuzz_u8(&in);
  size_t stop_data = stops[fuzz_u8(&in) % VL_ARRAY_SIZE(stops)];
  size_t stop_at = fuzz_u8(&in) % 8; /* 0: the callback never stops the feed */
  size_t ncuts = mode % 4;
  size_t raw[3];
  for (size_t i = 0; i < ncuts; i++)
    raw[i] = fuzz_u16(&in);
  const char *s = (const char *)in.p;
  size_t n = in.n;

  size_t cuts[4096];
  if (mode & 4) {
    /* One byte at a time (bounded, for short streams). */
    ncuts = n < VL_ARRAY_SIZE(cuts) ? n : VL_ARRAY_SIZE(cuts);
    for (size_t i = 0; i < ncuts; i++)
      cuts[i] = i;
  } else {
    for (size_t i = 0; i < ncuts; i++)
      cuts[i] = n ? raw[i] % (n + 1) : 0;
    for (size_t i = 1; i < ncuts; i++) /* insertion sort of at most three */
      for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
        size_t t = cuts[j];
        cuts[j] = cuts[j - 1];
        cuts[j - 1] = t;
      }
  }

  outcome_t whole = {0}, split = {0}, again = {0};
  vl_sse_t a, b;
  whole.sink.stop_at = split.sink.stop_at = again.sink.stop_at = stop_at;
  whole.sink.stop_data = split.sink.stop_data = again.sink.stop_data = stop_data;
  vl_sse_init(&a, on_data, on_event, &whole.sink);
  vl_sse_init(&b, on_data, on_event, &split.sink);

  feed(&a, s, n, NULL, 0, &whole);
  feed(&b, s, n, cuts, ncuts, &split);
  check_same(&whole, &split);

  /* A reset parser must behave as a fresh one. */
  vl_sse_reset(&a);
  a.ud = &again.sink;
  feed(&a, s, n, NULL, 0, &again);
  check_same(&whole, &again);

  free(whole.sink.log);
  free(split.sink.log);
  free(again.sink.log);
  free(whole.sink.cur);
  free(split.sink.cur);
  free(again.sink.cur);
  return 0;
}
