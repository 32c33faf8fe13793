/* A conversation's history: turn k's body, made of segments pointing at the templates, the image
 * URIs and the escaped replies, must parse back to the whole conversation in order; the escaping
 * must round-trip through a JSON parser; the buffer's bound must hold. */
#include "bodytext.h"
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/history.h"

#include <cjson/cJSON.h>

static void build(vl_template_t *t, const char *prompt, int n_images, int first, int mct) {
  vl_template_params_t p = {.model = "m",
                            .prompt = prompt,
                            .max_tokens = 9,
                            .stream = 1,
                            .n_images = n_images,
                            .images_first = first,
                            .max_completion_tokens = mct};
  ASSERT_INT_EQ(vl_template_build(t, &p), 0);
}

TEST_IMPL(history_escape) {
  const char raw[] = "a\"b\\c\n\t\x01\x1f é \r\b\f";
  char out[128];
  size_t n = vl_history_escape(out, raw, sizeof(raw) - 1);
  ASSERT_UINT_EQ(n, vl_history_escape(NULL, raw, sizeof(raw) - 1));
  out[n] = '\0';
  ASSERT_STR_EQ(out, "a\\\"b\\\\c\\n\\t\\u0001\\u001f é \\r\\b\\f");
  /* Parses back to the same bytes. */
  char json[160];
  snprintf(json, sizeof(json), "\"%s\"", out);
  cJSON *v = cJSON_Parse(json);
  ASSERT(cJSON_IsString(v));
  ASSERT_STR_EQ(v->valuestring, raw);
  cJSON_Delete(v);
}

TEST_IMPL(history_span) {
  for (int mct = 0; mct <= 1; mct++)
    for (int first = 0; first <= 1; first++)
      for (int imgs = 0; imgs <= 2; imgs++) {
        vl_template_t t;
        build(&t, "P \"messages\":[ ],\"max_tokens\":", imgs, first, mct);
        size_t off, end;
        ASSERT_INT_EQ(vl_history_span(&t, &off, &end), 0);
        ASSERT(strncmp(t.text + off, "{\"role\":\"user\",", 15) == 0);
        ASSERT(t.text[end] == ']' && t.text[end - 1] == '}');
        vl_template_free(&t);
      }
  vl_template_t n;
  vl_template_params_t p = {.prompt = "x", .max_tokens = 1, .native = 1};
  ASSERT_INT_EQ(vl_template_build(&n, &p), 0);
  size_t off, end;
  ASSERT_INT_EQ(vl_history_span(&n, &off, &end), VL_EINVAL);
  vl_template_free(&n);
}

/* Three turns, the second with two images: the third turn's body holds five messages, each
 * earlier reply exactly, each earlier image in place. */
TEST_IMPL(history_body) {
  vl_template_t t[3];
  build(&t[0], "first", 0, 0, 0);
  build(&t[1], "second", 2, 1, 0);
  build(&t[2], "third", 1, 0, 0);
  vl_history_t h;
  ASSERT_INT_EQ(vl_history_init(&h, 3, 2, 256), 0);
  vl_seg_t body_segs[64];
  ASSERT(vl_history_segs(3, 2) <= 64);
  vl_body_t b = {.seg = body_segs, .cap = vl_history_segs(3, 2)};
  static const char u1[] = "data:image/png;base64,AAAA", u2[] = "data:image/png;base64,BBBB",
                    u3[] = "data:image/png;base64,CCCC";
  vl_seg_t im1[2] = {{u1, strlen(u1)}, {u2, strlen(u2)}}, im2[1] = {{u3, strlen(u3)}};

  ASSERT_INT_EQ(vl_history_user(&h, &t[0], NULL), 0);
  vl_history_fill(&h, &b);
  char *s = flatten(&b);
  cJSON *root = cJSON_Parse(s);
  ASSERT(root);
  ASSERT_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(root, "messages")), 1);
  cJSON_Delete(root);
  free(s);
  /* The reply arrives in deltas. */
  ASSERT_INT_EQ(vl_history_reply(&h, "r1 \"q\"", 6), 0);
  ASSERT_INT_EQ(vl_history_reply(&h, " \\ end\n", 7), 0);
  ASSERT_INT_EQ(vl_history_user(&h, &t[1], im1), 0);
  ASSERT_INT_EQ(vl_history_reply(&h, "r2", 2), 0);
  ASSERT_INT_EQ(vl_history_user(&h, &t[2], im2), 0);
  vl_history_fill(&h, &b);
  ASSERT(b.n <= b.cap);
  s = flatten(&b);
  root = cJSON_Parse(s);
  ASSERT(root);
  cJSON *msgs = cJSON_GetObjectItem(root, "messages");
  ASSERT_INT_EQ(cJSON_GetArraySize(msgs), 5);
  static const char *roles[] = {"user", "assistant", "user", "assistant", "user"};
  for (int i = 0; i < 5; i++)
    ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, i), "role")->valuestring, roles[i]);
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 0), "content")->valuestring, "first");
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 1), "content")->valuestring,
                "r1 \"q\" \\ end\n");
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 3), "content")->valuestring, "r2");
  cJSON *c2 = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 2), "content");
  ASSERT_INT_EQ(cJSON_GetArraySize(c2), 3);
  ASSERT_STR_EQ(
      cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(c2, 0), "image_url"), "url")
          ->valuestring,
      u1);
  ASSERT_STR_EQ(
      cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(c2, 1), "image_url"), "url")
          ->valuestring,
      u2);
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(c2, 2), "text")->valuestring, "second");
  cJSON *c3 = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 4), "content");
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(c3, 0), "text")->valuestring, "third");
  ASSERT_STR_EQ(
      cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(c3, 1), "image_url"), "url")
          ->valuestring,
      u3);
  ASSERT_INT_EQ(cJSON_GetObjectItem(root, "max_tokens")->valueint, 9);
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(root, "stream")));
  cJSON_Delete(root);
  free(s);
  /* The body reads back through curl's callback as the same bytes. */
  char *whole = flatten(&b), got[4096];
  size_t n = 0, k;
  vl_body_rewind(&b);
  while ((k = vl_body_read(got + n, 1, 7, &b)) > 0)
    n += k;
  ASSERT_UINT_EQ(n, b.size);
  ASSERT_MEM_EQ(got, whole, n);
  free(whole);
  /* No fourth turn. */
  ASSERT_INT_EQ(vl_history_user(&h, &t[0], NULL), VL_E2BIG);
  vl_history_free(&h);
  for (int i = 0; i < 3; i++)
    vl_template_free(&t[i]);
}

TEST_IMPL(history_bound) {
  vl_template_t t;
  build(&t, "p", 0, 0, 0);
  vl_history_t h;
  ASSERT_INT_EQ(vl_history_init(&h, 2, 0, 8), 0);
  ASSERT_INT_EQ(vl_history_user(&h, &t, NULL), 0);
  ASSERT_INT_EQ(vl_history_reply(&h, "1234", 4), 0);
  /* Escaped, "\"\"" is four bytes and "12345" five: the second does not fit. */
  ASSERT_INT_EQ(vl_history_reply(&h, "\"\"", 2), 0);
  ASSERT_INT_EQ(h.len, 8);
  ASSERT_INT_EQ(vl_history_reply(&h, "x", 1), VL_E2BIG);
  ASSERT(h.over);
  ASSERT_INT_EQ(h.turn[0].reply_len, 8);
  vl_history_clear(&h);
  ASSERT(!h.over && h.n == 0 && h.len == 0);
  vl_history_free(&h);
  vl_template_free(&t);
  ASSERT_INT_EQ(vl_history_init(&h, VL_TURNS_MAX + 1, 0, 8), VL_EINVAL);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(history_escape),
    TEST_ENTRY(history_span),
    TEST_ENTRY(history_body),
    TEST_ENTRY(history_bound),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
