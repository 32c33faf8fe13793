#include "vlmload/common.h"
#include "vlmload/sse.h"

#include "task.h"

/* Collects dispatched events, their data put together from the pieces handed on. */
typedef struct {
  char *data[32];
  size_t len[32];
  int n;
  int stop_at;    /* return non-zero from the stop_at-th event (1-based); 0: never */
  char cur[4096]; /* the current event's data so far */
  size_t cur_len;
  int pieces;            /* pieces handed on, in all */
  const char *from, *to; /* the bytes being fed: every piece but a joining "\n" points inside */
} sink_t;

static int on_data(void *ud, size_t off, const char *p, size_t n) {
  sink_t *k = ud;
  ASSERT(n > 0);
  ASSERT(off == 0 || off == k->cur_len); /* off 0: a new event, the last one's data dropped */
  ASSERT((n == 1 && *p == '\n') || !k->from || (p >= k->from && p + n <= k->to));
  ASSERT(off + n <= sizeof(k->cur));
  memcpy(k->cur + off, p, n);
  k->cur_len = off + n;
  k->pieces++;
  return 0;
}

static int on_event(void *ud, size_t len) {
  sink_t *k = ud;
  ASSERT(len > 0);
  ASSERT_UINT_EQ(len, k->cur_len);
  ASSERT(k->n < (int)VL_ARRAY_SIZE(k->data));
  k->data[k->n] = vl_xmalloc(len + 1);
  memcpy(k->data[k->n], k->cur, len);
  k->data[k->n][len] = '\0';
  k->len[k->n] = len;
  k->n++;
  k->cur_len = 0;
  return k->n == k->stop_at ? 7 : 0;
}

static void sink_clear(sink_t *k) {
  for (int i = 0; i < k->n; i++)
    free(k->data[i]);
  k->n = 0;
  k->cur_len = 0;
}

static void init(vl_sse_t *p, sink_t *k) {
  vl_sse_init(p, on_data, on_event, k);
}

/* Feeds n bytes at s, checking that the pieces point into them. */
static int feed(vl_sse_t *p, sink_t *k, const char *s, size_t n) {
  k->from = s;
  k->to = s + n;
  int rc = vl_sse_feed(p, s, n);
  k->from = k->to = NULL;
  return rc;
}

/* The reference stream: comments, ignored fields, CRLF, CR and LF endings (mixed within events),
 * "data:" with and without the space, multi-line data, an empty data line, a field name without a
 * colon, near-miss field names, an event with no data, one whose only data is empty (not
 * dispatched), a long event and the closing [DONE]. */
static const char *const ref_parts[] = {
    ": this is a comment\r\n",
    "retry: 1000\n",
    "data: {\"a\":1}\n",
    "\n",
    "event: message\r\n",
    "id: 7\r\n",
    "data:no-space\r\n",
    "data:  two spaces\r\n",
    "data\r\n",
    "data: last\r\n",
    "\r\n",
    "data: cr line one\r",
    "data: line two\r",
    "\r",
    "event: nodata\n",
    "id: 9\n",
    "retry\n",
    "\n",
    ":\n",
    "data\n",
    "\n",
    "data:\n",
    "data:\n",
    "\n",
    "dat: x\n",
    "datax: y\n",
    "data : z\n",
    "Data: q\n",
    "data: a:b \xc3\xa9\n",
    "\n",
    "data: crcrlf\r\r\n",
    "data: lf then crlf\n\r\n",
    "data: ",
    NULL, /* the long event's value */
    "\n\n",
    "data: [DONE]\r\n\r\n",
};

static const char *const ref_events[] = {
    "{\"a\":1}",
    "no-space\n two spaces\n\nlast",
    "cr line one\nline two",
    /* "data\n\n" alone: its data is empty, so WHATWG dispatches nothing. */
    "\n",
    "a:b \xc3\xa9",
    "crcrlf",
    "lf then crlf",
    NULL, /* the long event */
    "[DONE]",
};

enum { LONG_LEN = 1500 };
static char long_value[LONG_LEN + 1];
static char ref[4096];
static size_t ref_len;

static void build_ref(void) {
  for (int i = 0; i < LONG_LEN; i++)
    long_value[i] = (char)('a' + i % 26);
  long_value[LONG_LEN] = '\0';
  ref_len = 0;
  for (size_t i = 0; i < VL_ARRAY_SIZE(ref_parts); i++) {
    const char *s = ref_parts[i] ? ref_parts[i] : long_value;
    size_t n = strlen(s);
    ASSERT(ref_len + n < sizeof(ref));
    memcpy(ref + ref_len, s, n);
    ref_len += n;
  }
}

static void check_events(const sink_t *k, int n) {
  ASSERT_INT_EQ(k->n, n);
  for (int i = 0; i < n; i++) {
    const char *want = ref_events[i] ? ref_events[i] : long_value;
    ASSERT_UINT_EQ(k->len[i], strlen(want));
    ASSERT_MEM_EQ(k->data[i], want, k->len[i]);
  }
}

static const int ref_count = (int)VL_ARRAY_SIZE(ref_events);

/* Feeds the reference stream cut at the given ascending offsets and checks every event. */
static void feed_cuts(vl_sse_t *p, sink_t *k, const size_t *cuts, size_t ncuts) {
  size_t at = 0;
  for (size_t i = 0; i <= ncuts; i++) {
    size_t to = i < ncuts ? cuts[i] : ref_len;
    ASSERT_INT_EQ(feed(p, k, ref + at, to - at), 0);
    at = to;
  }
  check_events(k, ref_count);
  ASSERT_INT_EQ(vl_sse_pending(p), 0);
  sink_clear(k);
  vl_sse_reset(p);
}

TEST_IMPL(sse_whole) {
  build_ref();
  sink_t k = {0};
  vl_sse_t p;
  init(&p, &k);
  feed_cuts(&p, &k, NULL, 0);
}

TEST_IMPL(sse_split_everywhere) {
  build_ref();
  sink_t k = {0};
  vl_sse_t p;
  init(&p, &k);
  for (size_t i = 0; i <= ref_len; i++)
    feed_cuts(&p, &k, &i, 1);
}

/* Three chunks, cut at every pair of offsets in the first part of the stream, where the
 * line-ending variety is. */
TEST_IMPL(sse_split_pairs) {
  build_ref();
  sink_t k = {0};
  vl_sse_t p;
  init(&p, &k);
  size_t upto = (size_t)(strstr(ref, long_value) - ref) + 1;
  for (size_t i = 0; i <= upto; i++) {
    for (size_t j = i; j <= upto; j++) {
      size_t cuts[2] = {i, j};
      feed_cuts(&p, &k, cuts, 2);
    }
  }
}

TEST_IMPL(sse_byte_at_a_time) {
  build_ref();
  sink_t k = {0};
  vl_sse_t p;
  init(&p, &k);
  for (size_t i = 0; i < ref_len; i++)
    ASSERT_INT_EQ(vl_sse_feed(&p, ref + i, 1), 0);
  check_events(&k, ref_count);
  ASSERT_INT_EQ(vl_sse_pending(&p), 0);
  sink_clear(&k);
}

TEST_IMPL(sse_random_chunks) {
  build_ref();
  sink_t k = {0};
  vl_sse_t p;
  init(&p, &k);
  uint64_t seed = 1234;
  size_t cuts[4096];
  for (int round = 0; round < 2000; round++) {
    size_t n = 0, at = 0, max_chunk = 1 + task_rand(&seed) % 64;
    while (n < VL_ARRAY_SIZE(cuts)) {
      at += task_rand(&seed) % (max_chunk + 1); /* zero-length chunks included */
      if (at >= ref_len)
        break;
      cuts[n++] = at;
    }
    feed_cuts(&p, &k, cuts, n);
  }
}

static int feed_all(vl_sse_t *p, const char *s, int bytewise) {
  size_t n = strlen(s);
  if (!bytewise)
    return vl_sse_feed(p, s, n);
  for (size_t i = 0; i < n; i++) {
    int rc = vl_sse_feed(p, s + i, 1);
    if (rc)
      return rc;
  }
  return 0;
}

/* Counts what an event of any size hands on, without keeping it. */
typedef struct {
  size_t bytes, events, last_len, pieces;
  unsigned char sum, event_sum; /* of the data bytes, to check their order is kept */
  const char *from, *to;
  int stop_data; /* return non-zero from the piece that passes this many bytes; 0: never */
} count_t;

static int count_data(void *ud, size_t off, const char *p, size_t n) {
  count_t *c = ud;
  ASSERT_UINT_EQ(off, c->bytes);
  ASSERT((n == 1 && *p == '\n') || (p >= c->from && p + n <= c->to));
  for (size_t i = 0; i < n; i++)
    c->sum = (unsigned char)(c->sum * 31 + (unsigned char)p[i]);
  c->bytes += n;
  c->pieces++;
  return c->stop_data && c->bytes > (size_t)c->stop_data ? 5 : 0;
}

static int count_event(void *ud, size_t len) {
  count_t *c = ud;
  ASSERT_UINT_EQ(len, c->bytes);
  c->last_len = len;
  c->event_sum = c->sum;
  c->events++;
  c->bytes = 0;
  c->sum = 0;
  return 0;
}

/* An event of 8 MiB, over two data lines, fed in pieces of 64 KiB: handed on as it came, each
 * piece a range of the bytes fed (nothing copied or held), the event dispatched whole. */
TEST_IMPL(sse_event_of_any_size) {
  size_t half = 4u << 20, n = 2 * half + 64;
  char *s = vl_xmalloc(n), *want = vl_xmalloc(2 * half + 1);
  size_t len = 0;
  len += (size_t)sprintf(s + len, "data: ");
  for (size_t i = 0; i < half; i++)
    s[len++] = want[i] = (char)('a' + i % 23);
  len += (size_t)sprintf(s + len, "\r\ndata:");
  want[half] = '\n';
  for (size_t i = 0; i < half - 1; i++)
    s[len++] = want[half + 1 + i] = (char)('A' + i % 19);
  len += (size_t)sprintf(s + len, "\n\ndata: [DONE]\n\n");
  unsigned char sum = 0;
  for (size_t i = 0; i < 2 * half; i++)
    sum = (unsigned char)(sum * 31 + (unsigned char)want[i]);
  for (size_t step = 1000; step <= (64u << 10); step *= 64) {
    count_t c = {0};
    vl_sse_t p;
    vl_sse_init(&p, count_data, count_event, &c);
    for (size_t at = 0; at < len; at += step) {
      size_t k = VL_MIN(step, len - at);
      c.from = s + at;
      c.to = s + at + k;
      ASSERT_INT_EQ(vl_sse_feed(&p, s + at, k), 0);
    }
    ASSERT_UINT_EQ(c.events, 2);
    ASSERT_UINT_EQ(c.last_len, 6); /* [DONE] */
    ASSERT(c.pieces >= 2 * half / step);
    vl_sse_reset(&p);
    /* The big event alone: its sum, and its length at dispatch. */
    c = (count_t){0};
    c.from = s;
    c.to = s + len;
    size_t big_end = (size_t)(strstr(s + half, "\n\n") - s) + 2;
    ASSERT_INT_EQ(vl_sse_feed(&p, s, big_end), 0);
    ASSERT_UINT_EQ(c.events, 1);
    ASSERT_UINT_EQ(c.last_len, 2 * half);
    ASSERT_INT_EQ(c.event_sum, sum);
    ASSERT_INT_EQ(vl_sse_pending(&p), 0);
  }
  free(s);
  free(want);
}

/* A data callback's non-zero return ends the feed in the middle of an event. */
TEST_IMPL(sse_data_stop) {
  static const char in[] = "data: 0123456789\n\ndata: abcdefghij\n\n";
  for (int bytewise = 0; bytewise <= 1; bytewise++) {
    count_t c = {0};
    c.stop_data = 4;
    c.from = in;
    c.to = in + sizeof(in) - 1;
    vl_sse_t p;
    vl_sse_init(&p, count_data, count_event, &c);
    int rc = 0;
    for (size_t i = 0; i < sizeof(in) - 1 && rc == 0; i += bytewise ? 1 : sizeof(in))
      rc = vl_sse_feed(&p, in + i, bytewise ? 1 : sizeof(in) - 1);
    ASSERT_INT_EQ(rc, 5);
    ASSERT_UINT_EQ(c.events, 0);
    ASSERT(c.bytes == 5 || (!bytewise && c.bytes == 10));
    ASSERT_INT_EQ(vl_sse_pending(&p), 1);
    vl_sse_reset(&p);
    c = (count_t){0};
    c.from = in;
    c.to = in + sizeof(in) - 1;
    ASSERT_INT_EQ(vl_sse_feed(&p, in, sizeof(in) - 1), 0);
    ASSERT_UINT_EQ(c.events, 2);
  }
}

TEST_IMPL(sse_pending) {
  static const struct {
    const char *in;
    int pending;
  } cases[] = {
      {"", 0},
      {"data: x", 1},
      {"data: x\n", 1},
      {"data: x\r", 1},
      {"data: x\n\n", 0},
      {"data: x\r\r", 0},
      {"data: x\r\n\r", 0},
      {"data: x\r\n\r\n", 0},
      {"data: x\n\nd", 1},
      {"data: x\n\n:", 1},
      {": keep-alive\n", 1},
      {": keep-alive\n\n", 0},
      {"event: a\n", 1},
      {"event: a\n\n", 0},
      {"\n\n\n", 0},
      {"data: [DONE]\n\n", 0},
  };
  sink_t k = {0};
  vl_sse_t p;
  init(&p, &k);
  for (int bytewise = 0; bytewise <= 1; bytewise++) {
    for (size_t i = 0; i < VL_ARRAY_SIZE(cases); i++) {
      ASSERT_INT_EQ(feed_all(&p, cases[i].in, bytewise), 0);
      if (vl_sse_pending(&p) != cases[i].pending)
        fprintf(stderr, "case \"%s\"\n", cases[i].in);
      ASSERT_INT_EQ(vl_sse_pending(&p), cases[i].pending);
      vl_sse_reset(&p);
      ASSERT_INT_EQ(vl_sse_pending(&p), 0);
      sink_clear(&k);
    }
  }
  /* The reference stream is mid-event everywhere but at its end and a few boundaries. */
  build_ref();
  ASSERT_INT_EQ(vl_sse_feed(&p, ref, 10), 0);
  ASSERT_INT_EQ(vl_sse_pending(&p), 1);
  ASSERT_INT_EQ(vl_sse_feed(&p, ref + 10, ref_len - 10), 0);
  ASSERT_INT_EQ(vl_sse_pending(&p), 0);
  ASSERT_INT_EQ(vl_sse_feed(&p, ref, ref_len - 3), 0);
  ASSERT_INT_EQ(vl_sse_pending(&p), 1);
  sink_clear(&k);
}

/* A callback's non-zero return ends the feed at that event; later events are not delivered. */
TEST_IMPL(sse_callback_stop) {
  build_ref();
  sink_t k = {0};
  vl_sse_t p;
  init(&p, &k);
  for (int stop = 1; stop <= ref_count; stop++) {
    k.stop_at = stop;
    ASSERT_INT_EQ(vl_sse_feed(&p, ref, ref_len), 7);
    check_events(&k, stop);
    sink_clear(&k);
    vl_sse_reset(&p);
  }
  /* Byte at a time: the feed that completes the event returns the value. */
  k.stop_at = 2;
  size_t i = 0;
  int rc = 0;
  for (; i < ref_len && rc == 0; i++)
    rc = vl_sse_feed(&p, ref + i, 1);
  ASSERT_INT_EQ(rc, 7);
  check_events(&k, 2);
  sink_clear(&k);
  /* After a reset the parser takes a new stream. */
  k.stop_at = 0;
  vl_sse_reset(&p);
  feed_cuts(&p, &k, NULL, 0);
}

TEST_IMPL(sse_reset) {
  sink_t k = {0};
  vl_sse_t p;
  init(&p, &k);
  ASSERT_INT_EQ(feed_all(&p, "data: stale\ndata: half", 0), 0);
  ASSERT_INT_EQ(vl_sse_pending(&p), 1);
  vl_sse_reset(&p);
  ASSERT_INT_EQ(vl_sse_pending(&p), 0);
  ASSERT_INT_EQ(feed_all(&p, "data: fresh\n\n", 0), 0);
  ASSERT_INT_EQ(k.n, 1);
  ASSERT_STR_EQ(k.data[0], "fresh");
  /* An event ended by '\r' but not yet by a blank line is dropped too. */
  ASSERT_INT_EQ(feed_all(&p, "data: a\r", 0), 0);
  vl_sse_reset(&p);
  ASSERT_INT_EQ(feed_all(&p, "data: b\n\n", 0), 0);
  ASSERT_INT_EQ(k.n, 2);
  ASSERT_STR_EQ(k.data[1], "b");
  sink_clear(&k);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(sse_whole),         TEST_ENTRY(sse_split_everywhere),
    TEST_ENTRY(sse_split_pairs),   TEST_ENTRY(sse_byte_at_a_time),
    TEST_ENTRY(sse_random_chunks), TEST_ENTRY(sse_event_of_any_size),
    TEST_ENTRY(sse_data_stop),     TEST_ENTRY(sse_pending),
    TEST_ENTRY(sse_callback_stop), TEST_ENTRY(sse_reset),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
