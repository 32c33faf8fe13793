/* The incremental JSON scanner: the verdict on texts cJSON accepts and on texts that are not JSON,
 * whole and fed a byte at a time; the values it captures and measures, by where they are; and a
 * large text scanned with a small capture buffer. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/jsonscan.h"

#include <cjson/cJSON.h>

static int scan(const char *text, size_t n, size_t piece) {
  vl_jsonscan_t s;
  vl_jsonscan_init(&s, 1024, NULL, NULL, NULL);
  for (size_t at = 0; at < n; at += piece)
    vl_jsonscan_feed(&s, text + at, VL_MIN(piece, n - at));
  int rc = vl_jsonscan_finish(&s);
  vl_jsonscan_free(&s);
  return rc;
}

TEST_IMPL(jsonscan_verdicts) {
  static const char *const good[] = {
      "{}",
      " [ ] ",
      "0",
      "-0.5e+10",
      "12E-3",
      "\"\"",
      "true",
      "false",
      "null",
      "{\"a\":[1,2,{\"b\":null}],\"c\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\"}\r\n",
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
      "{\"k\":-1}",
      "[1,-2,3.25,4e5]",
  };
  static const char *const bad[] = {
      "",
      " ",
      "{",
      "{\"a\":1} x", /* trailing garbage */
      "{\"a\":1}{}", /* two values */
      "{\"a\":1,}",  /* trailing comma */
      "[1,]",        /* trailing comma */
      "{\"a\"}",     /* no value */
      "{a:1}",       /* bare name */
      "[01]",        /* leading zero */
      "[1.]",        /* no fraction digit */
      "[-]",         /* sign alone */
      "[1e]",        /* no exponent digit */
      "[.5]",        /* no integer part */
      "[+1]",        /* plus sign */
      "\"a\nb\"",    /* raw control byte */
      "\"\\x\"",     /* unknown escape */
      "\"\\u12g4\"", /* bad hex */
      "\"\\ud800\"", /* lone high surrogate */
      "\"\\udc00\"", /* lone low surrogate */
      "\"\\ud800\\u0041\"",
      "[1}", /* mismatched bracket */
      "{\"a\":1]",
      "tru",
      "nul",
      "truex",
      "[true false]",
      "\"open",
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(good); i++) {
    size_t n = strlen(good[i]);
    ASSERT_INT_EQ(scan(good[i], n, n ? n : 1), 0);
    ASSERT_INT_EQ(scan(good[i], n, 1), 0);
    cJSON *t = cJSON_ParseWithLength(good[i], n);
    ASSERT(t != NULL); /* the same texts cJSON accepts */
    cJSON_Delete(t);
  }
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    size_t n = strlen(bad[i]);
    ASSERT_INT_EQ(scan(bad[i], n, n ? n : 1), VL_EJSON);
    ASSERT_INT_EQ(scan(bad[i], n, 1), VL_EJSON);
  }
  /* Nesting: cJSON's limit, and one past it. */
  char deep[2 * VL_JSONSCAN_DEPTH_MAX + 3];
  for (int extra = 0; extra <= 1; extra++) {
    int d = VL_JSONSCAN_DEPTH_MAX + extra;
    memset(deep, '[', (size_t)d);
    memset(deep + d, ']', (size_t)d);
    ASSERT_INT_EQ(scan(deep, 2 * (size_t)d, 7), extra ? VL_EJSON : 0);
  }
}

typedef struct {
  char got[8][128]; /* "path=value" of each value handed back */
  int n;
} sink_t;

/* Asks for choices[0].message.content (measured) and for "usage" and a key spelled with escapes
 * (captured). */
static vl_jsonscan_want_t on_value(void *ud, const vl_jsonscan_t *s, int depth, char c) {
  const char *k1 = vl_jsonscan_key(s, 1);
  if (depth == 1 && k1 && (strcmp(k1, "usage") == 0 || strcmp(k1, "n\xc3\xa9") == 0))
    return VL_JSONSCAN_CAPTURE;
  if (depth == 4 && k1 && strcmp(k1, "choices") == 0 && vl_jsonscan_index(s, 2) == 0 &&
      vl_jsonscan_key(s, 3) && strcmp(vl_jsonscan_key(s, 3), "message") == 0 &&
      vl_jsonscan_key(s, 4) && strcmp(vl_jsonscan_key(s, 4), "content") == 0)
    return VL_JSONSCAN_MEASURE;
  return VL_JSONSCAN_SKIP;
}

static void on_end(void *ud, const vl_jsonscan_t *s, int depth, const char *text, size_t len,
                   int truncated) {
  sink_t *k = ud;
  ASSERT(k->n < 8);
  if (text)
    snprintf(k->got[k->n++], 128, "%s=%.*s%s", vl_jsonscan_key(s, 1), (int)len, text,
             truncated ? "..." : "");
  else
    snprintf(k->got[k->n++], 128, "content=%zu", len);
}

TEST_IMPL(jsonscan_values) {
  static const char doc[] =
      "{\"id\":\"x\",\"choices\":[{\"message\":{\"content\":\"skip me\"}},"
      "{\"message\":{\"content\":\"no\"}}],"
      "\"choices\":[{\"index\":0,\"message\":{\"role\":\"a\",\"content\":"
      "\"a\\u00e9\\ud83d\\ude00\\n\\\"\",\"x\":{\"content\":\"deeper\"}}}],"
      "\"usage\" : {\"prompt_tokens\":12, \"completion_tokens\":3e0} ,"
      "\"usag\":{\"no\":1},\"n\\u00e9\":-12.5e-1,\"long_name_longer_than_thirty_one_bytes\":1}";
  for (size_t piece = 1; piece <= sizeof(doc); piece++) {
    sink_t k = {0};
    vl_jsonscan_t s;
    vl_jsonscan_init(&s, 64, on_value, on_end, &k);
    for (size_t at = 0; at < sizeof(doc) - 1; at += piece)
      ASSERT_INT_EQ(vl_jsonscan_feed(&s, doc + at, VL_MIN(piece, sizeof(doc) - 1 - at)), 0);
    ASSERT_INT_EQ(vl_jsonscan_finish(&s), 0);
    /* Both "choices" are offered (a duplicate name is the caller's to judge); only index 0's
     * message.content is: "skip me" (7) and then 1 + 2 + 4 + 1 + 1 bytes unescaped. */
    ASSERT_INT_EQ(k.n, 4);
    ASSERT_STR_EQ(k.got[0], "content=7");
    ASSERT_STR_EQ(k.got[1], "content=9");
    ASSERT_STR_EQ(k.got[2], "usage={\"prompt_tokens\":12, \"completion_tokens\":3e0}");
    ASSERT_STR_EQ(k.got[3], "n\xc3\xa9=-12.5e-1");
    vl_jsonscan_free(&s);
  }
}

/* A value longer than the capture buffer is handed back cut, and marked so. */
TEST_IMPL(jsonscan_capture_truncated) {
  sink_t k = {0};
  vl_jsonscan_t s;
  vl_jsonscan_init(&s, 8, on_value, on_end, &k);
  const char *doc = "{\"usage\":{\"prompt_tokens\":12}}";
  ASSERT_INT_EQ(vl_jsonscan_feed(&s, doc, strlen(doc)), 0);
  ASSERT_INT_EQ(vl_jsonscan_finish(&s), 0);
  ASSERT_INT_EQ(k.n, 1);
  ASSERT_STR_EQ(k.got[0], "usage={\"prompt...");
  vl_jsonscan_free(&s);
}

/* 64 MiB of content in 64 KiB pieces: measured exactly, with nothing held but the scanner. */
TEST_IMPL(jsonscan_large) {
  const size_t piece = 64 << 10, fill = (size_t)64 << 20;
  char *buf = vl_xmalloc(piece);
  memset(buf, 'x', piece);
  sink_t k = {0};
  vl_jsonscan_t s;
  vl_jsonscan_init(&s, 1024, on_value, on_end, &k);
  const char *head = "{\"choices\":[{\"message\":{\"content\":\"";
  const char *tail = "\"}}],\"usage\":{\"completion_tokens\":7}}";
  ASSERT_INT_EQ(vl_jsonscan_feed(&s, head, strlen(head)), 0);
  for (size_t at = 0; at < fill; at += piece)
    ASSERT_INT_EQ(vl_jsonscan_feed(&s, buf, piece), 0);
  ASSERT_INT_EQ(vl_jsonscan_feed(&s, tail, strlen(tail)), 0);
  ASSERT_INT_EQ(vl_jsonscan_finish(&s), 0);
  ASSERT_INT_EQ(k.n, 2);
  ASSERT_STR_EQ(k.got[0], "content=67108864");
  ASSERT_STR_EQ(k.got[1], "usage={\"completion_tokens\":7}");
  ASSERT(s.cap_sz <= 1024);
  vl_jsonscan_free(&s);
  free(buf);
}

/* A string's plain run ends at the first quote, backslash or control byte wherever it falls in the
 * eight bytes read at a time, and bytes past 0x7f stay plain; a member name is kept up to
 * VL_JSONSCAN_KEY_MAX bytes, whether it comes whole or in pieces. */
static vl_jsonscan_want_t measure_top(void *ud, const vl_jsonscan_t *s, int depth, char c) {
  if (depth == 1 && VL_JSONSCAN_KEY_IS(s, 1, "abcdefghijklmnopqrstuvwxyz01234"))
    return VL_JSONSCAN_CAPTURE;
  return depth == 0 && c == '"' ? VL_JSONSCAN_MEASURE : VL_JSONSCAN_SKIP;
}

static void measured_len(void *ud, const vl_jsonscan_t *s, int depth, const char *text, size_t len,
                         int truncated) {
  *(long *)ud = text ? -(long)len : (long)len;
}

TEST_IMPL(jsonscan_runs) {
  char doc[64];
  for (int off = 0; off < 20; off++) {
    for (int kind = 0; kind < 4; kind++) {
      int n = 0;
      doc[n++] = '"';
      for (int i = 0; i < off; i++)
        doc[n++] = i % 3 ? 'x' : (char)0xc3; /* some bytes past 0x7f */
      static const char *const stop[] = {"\"", "\\n\"", "\x01\"", "\x1f\""};
      n += snprintf(doc + n, sizeof(doc) - (size_t)n, "%s", stop[kind]);
      long got = -1;
      vl_jsonscan_t s;
      vl_jsonscan_init(&s, 64, measure_top, measured_len, &got);
      int rc = vl_jsonscan_feed(&s, doc, (size_t)n);
      if (rc == 0)
        rc = vl_jsonscan_finish(&s);
      vl_jsonscan_free(&s);
      if (kind >= 2) {
        ASSERT_INT_EQ(rc, VL_EJSON); /* a raw control byte */
      } else {
        ASSERT_INT_EQ(rc, 0);
        ASSERT_INT_EQ(got, off + kind);
      }
    }
  }
  /* Names of 31 bytes (kept) and 32 (too long, matching nothing), whole and a byte at a time. */
  static const char names[] = "{\"abcdefghijklmnopqrstuvwxyz012345\":1,"
                              "\"abcdefghijklmnopqrstuvwxyz01234\":[2]}";
  for (size_t piece = 1; piece <= sizeof(names); piece += sizeof(names) - 2) {
    long got = 0;
    vl_jsonscan_t s;
    vl_jsonscan_init(&s, 64, measure_top, measured_len, &got);
    for (size_t at = 0; at < sizeof(names) - 1; at += piece)
      ASSERT_INT_EQ(vl_jsonscan_feed(&s, names + at, VL_MIN(piece, sizeof(names) - 1 - at)), 0);
    ASSERT_INT_EQ(vl_jsonscan_finish(&s), 0);
    ASSERT_INT_EQ(got, -3); /* only "[2]" was captured */
    vl_jsonscan_free(&s);
  }
}

/* What the block tests see: the top-level string's measured length, the member name at depth 1
 * and the number captured there. */
typedef struct {
  long measured;
  char key[64];
  int key_null, key_eq; /* key_eq: the name is want (wn bytes), by vl_jsonscan_key_eq */
  char num[8];
  const char *want;
  size_t wn;
} seen_t;

static vl_jsonscan_want_t block_value(void *ud, const vl_jsonscan_t *s, int depth, char c) {
  seen_t *k = ud;
  if (depth == 0)
    return c == '"' ? VL_JSONSCAN_MEASURE : VL_JSONSCAN_SKIP;
  if (depth == 1 && c == '7') {
    const char *key = vl_jsonscan_key(s, 1);
    k->key_null = key == NULL;
    k->key_eq = vl_jsonscan_key_eq(s, 1, k->want, k->wn);
    snprintf(k->key, sizeof(k->key), "%s", key ? key : "");
    return VL_JSONSCAN_CAPTURE;
  }
  return VL_JSONSCAN_SKIP;
}

static void block_end(void *ud, const vl_jsonscan_t *s, int depth, const char *text, size_t len,
                      int truncated) {
  seen_t *k = ud;
  if (!text)
    k->measured = (long)len;
  else
    snprintf(k->num, sizeof(k->num), "%.*s", (int)len, text);
}

/* Scans doc (n bytes) in two pieces cut at cut, each piece in a buffer of its own size. */
static int block_scan(const char *doc, size_t n, size_t cut, seen_t *k, const char *want,
                      size_t wn) {
  memset(k, 0, sizeof(*k));
  k->measured = -1;
  k->want = want;
  k->wn = wn;
  vl_jsonscan_t s;
  vl_jsonscan_init(&s, 64, block_value, block_end, k);
  char *a = malloc(cut + 1), *b = malloc(n - cut + 1);
  memcpy(a, doc, cut);
  memcpy(b, doc + cut, n - cut);
  int rc = vl_jsonscan_feed(&s, a, cut);
  if (rc == 0)
    rc = vl_jsonscan_feed(&s, b, n - cut);
  if (rc == 0)
    rc = vl_jsonscan_finish(&s);
  free(a);
  free(b);
  vl_jsonscan_free(&s);
  return rc;
}

/* The bulk paths: a string's first stop byte at every offset of three 16-byte blocks, each kind of
 * stop (the closing quote, escapes, a surrogate pair, control bytes) and plain bytes at the edges
 * of the classes (0x20, 0x7f, 0x80, 0xff), in a string measured, a string passed over and a member
 * name, whole and cut at every byte: the same verdict, length, name and the value after it. */
TEST_IMPL(jsonscan_blocks) {
  static const struct {
    const char *in, *out; /* the stop as written and as unescaped; out NULL: not JSON */
  } stops[] = {
      {"", ""},         {"\\n", "\n"},           {"\\\"", "\""},
      {"\\\\", "\\"},   {"\\u00e9", "\xc3\xa9"}, {"\\ud83d\\ude00", "\xf0\x9f\x98\x80"},
      {"\x01", NULL},   {"\x1f", NULL},          {"\t", NULL},
      {" ", " "},       {"\x7f", "\x7f"},        {"\x80", "\x80"},
      {"\xff", "\xff"},
  };
  char body[128], want[128], doc[160];
  for (int off = 0; off < 48; off++) {
    for (size_t kind = 0; kind < VL_ARRAY_SIZE(stops); kind++) {
      int bn = 0, wn = 0;
      for (int i = 0; i < off; i++)
        body[bn++] = want[wn++] = i % 5 == 4 ? (char)0xc3 : (char)('a' + i % 26);
      bn += snprintf(body + bn, sizeof(body) - (size_t)bn, "%s", stops[kind].in);
      if (stops[kind].out)
        wn += snprintf(want + wn, sizeof(want) - (size_t)wn, "%s", stops[kind].out);
      memcpy(body + bn, "yz", 2);
      memcpy(want + wn, "yz", 3);
      bn += 2;
      wn += 2;
      const int ok = stops[kind].out != NULL;
      for (int form = 0; form < 3; form++) {
        static const char *const pre[] = {"\"", "[\"", "{\""}, *const post[] = {"\"", "\",7]",
                                                                                "\":7}"};
        size_t n = (size_t)snprintf(doc, sizeof(doc), "%s%.*s%s", pre[form], bn, body, post[form]);
        for (size_t cut = 0; cut <= n; cut++) {
          seen_t k;
          int rc = block_scan(doc, n, cut, &k, want, (size_t)wn);
          ASSERT_INT_EQ(rc, ok ? 0 : VL_EJSON);
          if (!ok)
            continue;
          if (form == 0)
            ASSERT_INT_EQ(k.measured, wn);
          else
            ASSERT_STR_EQ(k.num, "7");
          if (form == 2) {
            ASSERT_INT_EQ(k.key_null, wn > VL_JSONSCAN_KEY_MAX);
            ASSERT_INT_EQ(k.key_eq, wn <= VL_JSONSCAN_KEY_MAX);
            if (wn <= VL_JSONSCAN_KEY_MAX)
              ASSERT(memcmp(k.key, want, (size_t)wn + 1) == 0);
          }
        }
      }
    }
  }
}

static const task_entry_t tests[] = {
    TEST_ENTRY(jsonscan_verdicts),
    TEST_ENTRY(jsonscan_values),
    TEST_ENTRY(jsonscan_capture_truncated),
    TEST_ENTRY(jsonscan_large),
    TEST_ENTRY(jsonscan_runs),
    TEST_ENTRY(jsonscan_blocks),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
