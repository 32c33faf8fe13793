/* Body templates and the segment reader: the JSON cJSON builds, cut and refilled with image URIs,
 * must parse back to the intended request, and curl's read and seek callbacks must reproduce the
 * exact bytes for any buffer size. */
#include "bodytext.h"
#include "task.h"
#include "vlmload/body.h"
#include "vlmload/common.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>

TEST_IMPL(template_text_only) {
  vl_template_t t;
  vl_template_params_t p = {.model = "m\"odel",
                            .prompt = "Say \"hi\" \\ now",
                            .max_tokens = 7,
                            .temperature = 0.5,
                            .stream = 1};
  ASSERT_INT_EQ(vl_template_build(&t, &p), 0);
  vl_seg_t bseg[VL_BODY_TEMPLATE_SEGS];
  vl_body_t b = {.seg = bseg, .cap = VL_BODY_TEMPLATE_SEGS};
  vl_body_fill(&b, &t, NULL);
  ASSERT_INT_EQ(b.n, 1);
  char *s = flatten(&b);
  cJSON *root = cJSON_Parse(s);
  ASSERT(root);
  ASSERT_STR_EQ(cJSON_GetObjectItem(root, "model")->valuestring, "m\"odel");
  cJSON *msg = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "messages"), 0);
  ASSERT_STR_EQ(cJSON_GetObjectItem(msg, "role")->valuestring, "user");
  ASSERT_STR_EQ(cJSON_GetObjectItem(msg, "content")->valuestring, "Say \"hi\" \\ now");
  ASSERT_INT_EQ(cJSON_GetObjectItem(root, "max_tokens")->valueint, 7);
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(root, "stream")));
  ASSERT(cJSON_IsTrue(
      cJSON_GetObjectItem(cJSON_GetObjectItem(root, "stream_options"), "include_usage")));
  cJSON_Delete(root);
  free(s);
  vl_template_free(&t);
}

TEST_IMPL(template_images) {
  for (int first = 0; first <= 1; first++) {
    vl_template_t t;
    vl_template_params_t p = {.model = "m",
                              .prompt = "Describe.",
                              .max_tokens = 16,
                              .n_images = 3,
                              .images_first = first};
    ASSERT_INT_EQ(vl_template_build(&t, &p), 0);
    ASSERT_INT_EQ(t.n_images, 3);
    vl_seg_t img[3] = {{"data:image/png;base64,AAAA", 26},
                       {"data:image/jpeg;base64,/9j/", 27},
                       {"data:image/png;base64,iVBO", 26}};
    vl_seg_t bseg[VL_BODY_TEMPLATE_SEGS];
    vl_body_t b = {.seg = bseg, .cap = VL_BODY_TEMPLATE_SEGS};
    vl_body_fill(&b, &t, img);
    ASSERT_INT_EQ(b.n, 7);
    char *s = flatten(&b);
    cJSON *root = cJSON_Parse(s);
    ASSERT(root);
    cJSON *content = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(root, "messages"), 0), "content");
    ASSERT_INT_EQ(cJSON_GetArraySize(content), 4);
    int text_at = first ? 3 : 0;
    ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(content, text_at), "type")->valuestring,
                  "text");
    for (int i = 0, k = 0; i < 4; i++) {
      if (i == text_at)
        continue;
      cJSON *part = cJSON_GetArrayItem(content, i);
      ASSERT_STR_EQ(cJSON_GetObjectItem(part, "type")->valuestring, "image_url");
      const char *url =
          cJSON_GetObjectItem(cJSON_GetObjectItem(part, "image_url"), "url")->valuestring;
      ASSERT(strlen(url) == img[k].n && memcmp(url, img[k].p, img[k].n) == 0);
      k++;
    }
    cJSON_Delete(root);
    free(s);
    vl_template_free(&t);
  }
}

/* SGLang's /generate body: placeholders in the text where the images go, one URI as a string or
 * several as a list, the sampling parameters in their own object, no model. */
TEST_IMPL(template_native) {
  static const vl_seg_t img[2] = {{"data:image/png;base64,AAAA", 26},
                                  {"data:image/jpeg;base64,/9j/", 27}};
  for (int n = 0; n <= 2; n++)
    for (int first = 0; first <= 1; first++) {
      vl_template_t t;
      vl_template_params_t p = {.prompt = "What is \"this\"?",
                                .max_tokens = 9,
                                .temperature = 0.25,
                                .stream = first,
                                .n_images = n,
                                .images_first = first,
                                .native = 1,
                                .image_token = "<|vision_start|><|image_pad|><|vision_end|>"};
      ASSERT_INT_EQ(vl_template_build(&t, &p), 0);
      vl_seg_t bseg[VL_BODY_TEMPLATE_SEGS];
      vl_body_t b = {.seg = bseg, .cap = VL_BODY_TEMPLATE_SEGS};
      vl_body_fill(&b, &t, img);
      ASSERT_INT_EQ(b.n, 2 * n + 1);
      char *s = flatten(&b);
      cJSON *root = cJSON_Parse(s);
      ASSERT(root);
      ASSERT(cJSON_GetObjectItem(root, "model") == NULL);
      char want[256] = "";
      if (!first)
        strcat(want, p.prompt);
      for (int i = 0; i < n; i++)
        strcat(want, p.image_token);
      if (first)
        strcat(want, p.prompt);
      ASSERT_STR_EQ(cJSON_GetObjectItem(root, "text")->valuestring, want);
      cJSON *data = cJSON_GetObjectItem(root, "image_data");
      if (n == 0) {
        ASSERT(data == NULL);
      } else if (n == 1) {
        ASSERT(cJSON_IsString(data));
        ASSERT(strlen(data->valuestring) == img[0].n &&
               memcmp(data->valuestring, img[0].p, img[0].n) == 0);
      } else {
        ASSERT_INT_EQ(cJSON_GetArraySize(data), n);
        for (int i = 0; i < n; i++) {
          const char *u = cJSON_GetArrayItem(data, i)->valuestring;
          ASSERT(strlen(u) == img[i].n && memcmp(u, img[i].p, img[i].n) == 0);
        }
      }
      cJSON *sp = cJSON_GetObjectItem(root, "sampling_params");
      ASSERT_INT_EQ(cJSON_GetObjectItem(sp, "max_new_tokens")->valueint, 9);
      ASSERT_NEAR(cJSON_GetObjectItem(sp, "temperature")->valuedouble, 0.25, 0);
      ASSERT_INT_EQ(cJSON_IsTrue(cJSON_GetObjectItem(root, "stream")), first);
      ASSERT(cJSON_GetObjectItem(root, "stream_options") == NULL);
      cJSON_Delete(root);
      free(s);
      vl_template_free(&t);
    }
}

TEST_IMPL(template_rejects) {
  vl_template_t t;
  vl_template_params_t p = {.model = "m", .prompt = "bad\x01prompt", .max_tokens = 1};
  ASSERT_INT_EQ(vl_template_build(&t, &p), VL_EINVAL);
  p.prompt = "ok";
  p.n_images = VL_MAX_IMAGES + 1;
  ASSERT_INT_EQ(vl_template_build(&t, &p), VL_EINVAL);
  /* Native image requests need a placeholder, and one that cannot pass for an image's place. */
  vl_template_params_t n = {.prompt = "ok", .max_tokens = 1, .n_images = 1, .native = 1};
  ASSERT_INT_EQ(vl_template_build(&t, &n), VL_EINVAL);
  n.image_token = "";
  ASSERT_INT_EQ(vl_template_build(&t, &n), VL_EINVAL);
  n.image_token = "<\x01>";
  ASSERT_INT_EQ(vl_template_build(&t, &n), VL_EINVAL);
  n.image_token = "<image>\n";
  ASSERT_INT_EQ(vl_template_build(&t, &n), 0);
  vl_template_free(&t);
}

TEST_IMPL(body_read_any_size) {
  char big[5000];
  for (size_t i = 0; i < sizeof(big); i++)
    big[i] = (char)('a' + i % 26);
  vl_seg_t bseg[VL_BODY_TEMPLATE_SEGS];
  vl_body_t b = {.seg = bseg, .cap = VL_BODY_TEMPLATE_SEGS};
  vl_seg_t segs[] = {{"{\"x\":\"", 6}, {big, sizeof(big)}, {"", 0}, {"\"}", 2}};
  for (size_t i = 0; i < VL_ARRAY_SIZE(segs); i++) {
    b.seg[b.n++] = segs[i];
    b.size += segs[i].n;
  }
  char *want = flatten(&b);
  uint64_t rng = 5;
  for (size_t bufsize = 1; bufsize < 6000; bufsize += 1 + task_rand(&rng) % 97) {
    vl_body_rewind(&b);
    char *got = malloc(b.size + 1);
    size_t off = 0, n;
    char *chunk = malloc(bufsize);
    while ((n = vl_body_read(chunk, 1, bufsize, &b)) > 0) {
      ASSERT(n <= bufsize);
      memcpy(got + off, chunk, n);
      off += n;
    }
    ASSERT_UINT_EQ(off, b.size);
    ASSERT_MEM_EQ(got, want, b.size);
    free(chunk);
    free(got);
  }
  /* Seek to every offset and read the rest. */
  for (uint64_t at = 0; at <= b.size; at += 37) {
    ASSERT_INT_EQ(vl_body_seek(&b, (int64_t)at, SEEK_SET), CURL_SEEKFUNC_OK);
    char rest[6000];
    size_t n = vl_body_read(rest, 1, sizeof(rest), &b);
    ASSERT_UINT_EQ(n, b.size - at);
    ASSERT_MEM_EQ(rest, want + at, n);
  }
  ASSERT_INT_EQ(vl_body_seek(&b, (int64_t)b.size + 1, SEEK_SET), CURL_SEEKFUNC_CANTSEEK);
  ASSERT_INT_EQ(vl_body_seek(&b, 0, SEEK_CUR), CURL_SEEKFUNC_CANTSEEK);
  free(want);
}

/* The body of one text-only template, as one string (the caller frees it). */
static char *build_text(const vl_template_params_t *p) {
  vl_template_t t;
  ASSERT_INT_EQ(vl_template_build(&t, p), 0);
  vl_seg_t bseg[VL_BODY_TEMPLATE_SEGS];
  vl_body_t b = {.seg = bseg, .cap = VL_BODY_TEMPLATE_SEGS};
  vl_body_fill(&b, &t, NULL);
  char *s = flatten(&b);
  vl_template_free(&t);
  return s;
}

/* Without extra fields a body is byte for byte what it always was; with them, the keys follow
 * vlmload's own, and max_completion_tokens replaces max_tokens. */
TEST_IMPL(template_extra_chat) {
  vl_template_params_t p = {.model = "m", .prompt = "hi", .max_tokens = 7, .stream = 1};
  char *plain = build_text(&p);
  ASSERT_STR_EQ(plain, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"max_tokens\":7,\"temperature\":0,\"stream\":true,"
                       "\"stream_options\":{\"include_usage\":true}}");
  cJSON *extra = cJSON_Parse("{\"top_k\":20,\"ignore_eos\":true,\"chat_template_kwargs\":"
                             "{\"enable_thinking\":false}}");
  p.extra = extra;
  p.max_completion_tokens = 1;
  char *s = build_text(&p);
  ASSERT_STR_EQ(s, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                   "\"max_completion_tokens\":7,\"temperature\":0,\"stream\":true,"
                   "\"stream_options\":{\"include_usage\":true},\"top_k\":20,\"ignore_eos\":true,"
                   "\"chat_template_kwargs\":{\"enable_thinking\":false}}");
  free(s);
  free(plain);
  cJSON_Delete(extra);
}

/* Native: sampling fields go into sampling_params (min_tokens as min_new_tokens), the others stay
 * at the top. */
TEST_IMPL(template_extra_native) {
  cJSON *extra = cJSON_Parse("{\"top_k\":5,\"min_tokens\":3,\"rid\":\"r\",\"sampling_params\":"
                             "{\"ignore_eos\":true}}");
  vl_template_params_t p = {.prompt = "hi", .max_tokens = 9, .native = 1, .extra = extra};
  char *s = build_text(&p);
  ASSERT_STR_EQ(s, "{\"text\":\"hi\",\"sampling_params\":{\"max_new_tokens\":9,\"temperature\":0,"
                   "\"top_k\":5,\"min_new_tokens\":3,\"ignore_eos\":true},\"rid\":\"r\"}");
  free(s);
  cJSON_Delete(extra);
}

/* A field vlmload sets itself is refused, naming the option that sets it. */
TEST_IMPL(template_extra_reserved) {
  static const struct {
    const char *json;
    int native;
    const char *key, *option;
  } cases[] = {
      {"{\"top_k\":1,\"max_tokens\":2}", 0, "max_tokens", "--max-tokens"},
      {"{\"stream\":false}", 0, "stream", "--stream"},
      {"{\"model\":\"x\"}", 0, "model", "--model"},
      {"{\"max_completion_tokens\":3}", 0, "max_completion_tokens", NULL},
      {"{\"temperature\":1}", 1, "sampling_params.temperature", "--temperature"},
      {"{\"max_tokens\":1}", 1, "sampling_params.max_new_tokens", "--max-tokens"},
      {"{\"sampling_params\":{\"max_new_tokens\":1}}", 1, "sampling_params.max_new_tokens", NULL},
      {"{\"sampling_params\":3}", 1, "sampling_params", NULL},
      {"{\"text\":\"x\"}", 1, "text", NULL},
      {"{\"top_k\":1,\"ignore_eos\":true}", 0, NULL, NULL},
      {"{\"top_k\":1,\"max_tokens\":1}", 1, "sampling_params.max_new_tokens", NULL},
      {"{\"top_k\":1,\"rid\":\"a\"}", 1, NULL, NULL},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(cases); i++) {
    cJSON *extra = cJSON_Parse(cases[i].json);
    ASSERT(extra);
    const char *option = NULL;
    const char *key = vl_template_reserved(extra, cases[i].native, &option);
    if (!cases[i].key) {
      ASSERT(key == NULL);
    } else {
      ASSERT(key != NULL);
      ASSERT_STR_EQ(key, cases[i].key);
      if (cases[i].option)
        ASSERT_STR_EQ(option, cases[i].option);
      vl_template_t t;
      vl_template_params_t p = {
          .model = "m", .prompt = "hi", .max_tokens = 1, .native = cases[i].native, .extra = extra};
      ASSERT_INT_EQ(vl_template_build(&t, &p), VL_EINVAL);
    }
    cJSON_Delete(extra);
  }
}

static const task_entry_t tests[] = {
    TEST_ENTRY(template_extra_chat),     TEST_ENTRY(template_extra_native),
    TEST_ENTRY(template_extra_reserved), TEST_ENTRY(template_text_only),
    TEST_ENTRY(template_images),         TEST_ENTRY(template_native),
    TEST_ENTRY(template_rejects),        TEST_ENTRY(body_read_any_size),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
