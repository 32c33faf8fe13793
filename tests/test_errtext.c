/* The words of an error body that is not JSON: a plain body's first line, a page's title or first
 * line of text, read in pieces of any size, bounded, cut between characters. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/errtext.h"

/* The words of body fed whole, then cut at every offset (two pieces) and byte by byte: the same
 * each way. */
static void check(const char *body, const char *want) {
  size_t n = strlen(body);
  vl_errtext_t t;
  for (size_t cut = 0; cut <= n + 1; cut++) {
    vl_errtext_reset(&t);
    if (cut <= n) {
      vl_errtext_feed(&t, body, cut);
      vl_errtext_feed(&t, body + cut, n - cut);
    } else {
      for (size_t i = 0; i < n; i++)
        vl_errtext_feed(&t, body + i, 1);
    }
    const char *got = vl_errtext_get(&t);
    if (strcmp(got, want) != 0)
      fprintf(stderr, "body \"%s\" cut %zu: \"%s\"\n", body, cut, got);
    ASSERT_STR_EQ(got, want);
  }
}

TEST_IMPL(errtext_plain) {
  check("404: Not Found", "404: Not Found");
  check("\n\r\n \t Bad   request\t\r\nsecond", "Bad request");
  check("only\rcarriage return", "only");
  check("", "");
  check(" \n\t\r\n", "");
  check("a & b <c>", "a & b <c>"); /* plain text: no tags, no entities */
}

TEST_IMPL(errtext_html) {
  check("<title>T</title><h1>H</h1>", "T");
  check("<html><body><h1>Not <b>here</b></h1>more</body>", "Not here");
  check("<html><body>no block end at all", "no block end at all");
  check("<p>a<br/>b</p>", "a");
  check("<!-- <title>no</title> --><title>yes</title>", "yes");
  check("<!---->x<p>", "x");
  check("<style>p { x: '<title>' }</style><script>if (a<b && c>d) {}</script><p>ok</p>", "ok");
  check("<script>a</scrip></script>z<br>", "z");
  check("<TITLE  lang=en>Up&amp;down &lt;&gt;&quot;&apos;&nbsp;&#65;&#x42;&#x1F600;</TITLE>",
        "Up&down <>\"' AB\xf0\x9f\x98\x80");
  check("<p>&#0; &#xD800; &#99999999999; &bogus; &amp &#x;</p>",
        "\xef\xbf\xbd \xef\xbf\xbd \xef\xbf\xbd &bogus; &amp &#x;");
  check("<html>\n<body>\n</body>\n</html>", "");
  check("  <h1>\n  Spread\n  over\n  lines\n  </h1>", "Spread over lines");
}

/* At most VL_ERRTEXT_MAX - 1 bytes; a character the bound cuts is left out whole. */
TEST_IMPL(errtext_bound) {
  char body[1200];
  size_t n = 0;
  body[n++] = 'x';
  while (n + 3 < sizeof(body)) {
    memcpy(body + n, "\xe2\x82\xac", 3); /* the euro sign, 3 bytes */
    n += 3;
  }
  body[n] = '\0';
  vl_errtext_t t;
  vl_errtext_reset(&t);
  vl_errtext_feed(&t, body, n);
  const char *got = vl_errtext_get(&t);
  ASSERT_UINT_EQ(strlen(got), 1 + 3 * ((VL_ERRTEXT_MAX - 2) / 3));
  ASSERT_MEM_EQ(got, body, strlen(got));
  /* A body that ends inside a character. */
  vl_errtext_reset(&t);
  vl_errtext_feed(&t, "ab\xe2\x82", 4);
  ASSERT_STR_EQ(vl_errtext_get(&t), "ab");
  /* Bytes past the words are not read: a reset starts afresh. */
  vl_errtext_reset(&t);
  vl_errtext_feed(&t, "first\nsecond", 12);
  vl_errtext_feed(&t, "third", 5);
  ASSERT_STR_EQ(vl_errtext_get(&t), "first");
  vl_errtext_reset(&t);
  vl_errtext_feed(&t, "<title>again</title>", 20);
  ASSERT_STR_EQ(vl_errtext_get(&t), "again");
}

static const task_entry_t tests[] = {
    TEST_ENTRY(errtext_plain),
    TEST_ENTRY(errtext_html),
    TEST_ENTRY(errtext_bound),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
