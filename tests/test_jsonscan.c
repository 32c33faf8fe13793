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

static const task_entry_t tests[] = {
    TEST_ENTRY(jsonscan_verdicts),
    TEST_ENTRY(jsonscan_values),
    TEST_ENTRY(jsonscan_capture_truncated),
    TEST_ENTRY(jsonscan_large),
    TEST_ENTRY(jsonscan_runs),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
