/* Text from outside shown on a terminal: control characters and bytes that are not UTF-8 as \xHH,
 * every other character as it is, cut only between characters. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/text.h"

#include <stdlib.h>

static char *shown_by_file(const char *s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  vl_text_fput_shown(f, s);
  fclose(f);
  return buf;
}

TEST_IMPL(text_utf8_valid) {
  ASSERT(vl_text_utf8_valid("", 0));
  ASSERT(vl_text_utf8_valid("plain", 5));
  ASSERT(vl_text_utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9)); /* é € 😀 */
  ASSERT(!vl_text_utf8_valid("\xc3", 1));                                /* cut in the middle */
  ASSERT(!vl_text_utf8_valid("\xe2\x82", 2));
  ASSERT(!vl_text_utf8_valid("\xff", 1));
  ASSERT(!vl_text_utf8_valid("\xc0\xaf", 2));         /* overlong '/' */
  ASSERT(!vl_text_utf8_valid("\xed\xa0\x80", 3));     /* a surrogate */
  ASSERT(!vl_text_utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
}

TEST_IMPL(text_shown) {
  static const char *const cases[][2] = {
      {"model-7b", "model-7b"},
      {"caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac"},
      {"a\x1b[31mred\x07", "a\\x1b[31mred\\x07"},
      {"line\nbreak\r\t", "line\\x0abreak\\x0d\\x09"},
      {"del\x7f", "del\\x7f"},
      {"csi\xc2\x9b"
       "2J",
       "csi\\xc2\\x9b2J"}, /* U+009B, a C1 control */
      {"bad\xff\xc3", "bad\\xff\\xc3"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(cases); i++) {
    char buf[128];
    vl_text_shown(buf, sizeof(buf), cases[i][0]);
    ASSERT_STR_EQ(buf, cases[i][1]);
    char *f = shown_by_file(cases[i][0]);
    ASSERT_STR_EQ(f, cases[i][1]);
    free(f);
  }
  /* Cut between characters: never half of an escape or of a multi-byte character. */
  char small[6];
  ASSERT_UINT_EQ(vl_text_shown(small, sizeof(small), "ab\xc3\xa9\xc3\xa9"), 4);
  ASSERT_STR_EQ(small, "ab\xc3\xa9");
  ASSERT_UINT_EQ(vl_text_shown(small, 5,
                               "a\x1b"
                               "b"),
                 1);
  ASSERT_STR_EQ(small, "a");
}

TEST_IMPL(text_contains_ci) {
  ASSERT_INT_EQ(vl_text_contains_ci("Qwen2.5-VL-7B", "qwen"), 1);
  ASSERT_INT_EQ(vl_text_contains_ci("rss_mb.MAX_memory", "max_memory"), 1);
  ASSERT_INT_EQ(vl_text_contains_ci("gpu0_used_mb", "bytes"), 0);
  ASSERT_INT_EQ(vl_text_contains_ci("ab", "abc"), 0); /* a needle longer than what is left */
  ASSERT_INT_EQ(vl_text_contains_ci("", "a"), 0);
  ASSERT_INT_EQ(vl_text_contains_ci("xyz", "Z"), 1); /* at the very end */
}

static const task_entry_t tests[] = {
    TEST_ENTRY(text_utf8_valid),
    TEST_ENTRY(text_shown),
    TEST_ENTRY(text_contains_ci),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
