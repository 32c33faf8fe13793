/* Input and output lengths: the distributions, the synthetic text calibrated against a tokenizer
 * that is not one token per word (vlmmock's own), prompts and prefix blocks of exact token counts,
 * and bodies whose text and max_tokens holes are filled per request. */
#include "../src/mock/tokenizer.h"
#include "bodytext.h"
#include "task.h"
#include "vlmload/body.h"
#include "vlmload/common.h"
#include "vlmload/lengths.h"
#include "../src/outputs/lensum.h"

#include <cjson/cJSON.h>
#include <math.h>

TEST_IMPL(dist_parse) {
  vl_lengths_dist_t d;
  char err[160];
  ASSERT_INT_EQ(vl_lengths_dist_parse("300", &d, err, sizeof(err)), 0);
  ASSERT(d.set && d.mean == 300 && d.stddev == 0 && d.min == 1 && d.max == VL_LENGTHS_MAX);
  ASSERT_INT_EQ(vl_lengths_dist_parse("300:50:200:400", &d, err, sizeof(err)), 0);
  ASSERT(d.stddev == 50 && d.min == 200 && d.max == 400);
  char back[64];
  vl_lengths_dist_format(&d, back, sizeof(back));
  ASSERT_STR_EQ(back, "300:50:200:400");
  ASSERT_INT_EQ(vl_lengths_dist_parse("1k:100", &d, err, sizeof(err)), 0);
  ASSERT(d.mean == 1000 && d.stddev == 100);
  const char *bad[] = {"",           "x",      "300:",      "300:50:200",   "300:50:400:200", "0",
                       "300:50:1:2", "300:-1", "1:2:3:4:5", "300:50:0:400", "300::"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++)
    ASSERT_INT_EQ(vl_lengths_dist_parse(bad[i], &d, err, sizeof(err)), VL_EINVAL);
}

TEST_IMPL(dist_draw) {
  vl_lengths_dist_t d;
  char err[160];
  vl_rng_t r;
  ASSERT_INT_EQ(vl_lengths_dist_parse("300", &d, err, sizeof(err)), 0);
  vl_rng_init(&r, 1, 2);
  vl_rng_t before = r;
  ASSERT_INT_EQ(vl_lengths_dist_draw(&d, &r), 300);
  ASSERT_MEM_EQ(&before, &r, sizeof(r)); /* an exact length draws nothing */
  ASSERT_INT_EQ(vl_lengths_dist_parse("300:50:200:400", &d, err, sizeof(err)), 0);
  double sum = 0, sumsq = 0;
  int lo = 1 << 30, hi = 0, n = 20000;
  for (int i = 0; i < n; i++) {
    int v = vl_lengths_dist_draw(&d, &r);
    lo = VL_MIN(lo, v);
    hi = VL_MAX(hi, v);
    sum += v;
    sumsq += (double)v * v;
  }
  double mean = sum / n, sd = sqrt(sumsq / n - mean * mean);
  ASSERT(lo >= 200 && hi <= 400);
  ASSERT(lo == 200 && hi == 400); /* two standard deviations out: the clamps are reached */
  ASSERT_NEAR(mean, 300, 2);
  ASSERT(sd > 40 && sd < 50); /* clamped at 2 SD: a little under 50 */
  ASSERT_INT_EQ(vl_lengths_dist_max(&d), 400);
}

/* The mock's tokenizer as the server's /tokenize, counting calls. */
static int mock_count(void *ud, const char *text, int *count) {
  ++*(int *)ud;
  *count = (int)vl__tok_count(text, strlen(text), NULL, 0);
  return 0;
}

/* A tokenizer of one token per letter, none for a space. */
static int letter_count(void *ud, const char *text, int *count) {
  (void)ud;
  *count = 0;
  for (; *text; text++)
    *count += *text != ' ';
  return 0;
}

static int failing_count(void *ud, const char *text, int *count) {
  (void)ud;
  (void)text;
  (void)count;
  return VL_EIO;
}

TEST_IMPL(mock_tokenizer) {
  const char *s = "benchmark the 2024 results, again!";
  /* benc hmar k | the | 2024 | resu lts | , | agai n | ! */
  ASSERT_UINT_EQ(vl__tok_count(s, strlen(s), NULL, 0), 11);
  ASSERT_UINT_EQ(vl__tok_count("", 0, NULL, 0), 0);
  ASSERT_UINT_EQ(vl__tok_count("  \t\n", 4, NULL, 0), 0);
  ASSERT_UINT_EQ(vl__tok_count("\xc3\xa9t\xc3\xa9", 5, NULL, 0), 3); /* é t é */
  uint32_t a[4], b[4];
  ASSERT_UINT_EQ(vl__tok_count("word word", 9, a, 4), 2);
  ASSERT_UINT_EQ(a[0], a[1]);
  ASSERT_UINT_EQ(vl__tok_count("word", 4, b, 4), 1);
  ASSERT_UINT_EQ(a[0], b[0]);
}

/* The tokens of a prompt's segments, by the mock's tokenizer. */
static uint64_t seg_tokens(const vl_seg_t *seg, int n) {
  uint64_t k = 0;
  for (int i = 0; i < n; i++)
    k += vl__tok_count(seg[i].p, seg[i].n, NULL, 0);
  return k;
}

TEST_IMPL(calibrate_exact) {
  int words[VL_LENTEXT_WORDS], calls = 0, made = 0;
  ASSERT_INT_EQ(vl_lentext_calibrate(mock_count, &calls, words, &made), 0);
  /* The mock is not one token a word: its one-token groups are found, group by group. */
  ASSERT_INT_EQ(made, 2 + VL_LENTEXT_WORDS / VL_LENTEXT_GROUP);
  ASSERT_INT_EQ(calls, made);
  int kept = 0, longer = 0;
  for (int i = 0; i < VL_LENTEXT_WORDS; i++) {
    const char *w = vl_lentext_word(i);
    ASSERT(words[i] == 0 || words[i] == (int)((strlen(w) + 3) / 4));
    kept += words[i] > 0;
    longer += strlen(w) > 4;
  }
  ASSERT(kept >= 16 && longer > 16); /* the estimate alone would count the long words wrong */
  ASSERT_INT_EQ(vl_lentext_calibrate(failing_count, NULL, words, &calls), VL_EIO);
  /* A tokenizer of one token a letter has no one-token group: every word is asked alone. */
  made = 0;
  ASSERT_INT_EQ(vl_lentext_calibrate(letter_count, NULL, words, &made), 0);
  ASSERT_INT_EQ(made, 2 + VL_LENTEXT_WORDS / VL_LENTEXT_GROUP + VL_LENTEXT_WORDS);
  for (int i = 0; i < VL_LENTEXT_WORDS; i++)
    ASSERT_INT_EQ(words[i], (int)strlen(vl_lentext_word(i)));
  vl_lentext_t lt;
  ASSERT_INT_EQ(vl_lentext_build(&lt, words, 100), 0);
  ASSERT(lt.fill < 0); /* no one-token word: prompts may fall short */
  vl_seg_t ls[2];
  int ln = vl_lentext_prompt(&lt, 5, 100, ls);
  ASSERT_INT_EQ(ln, 1);
  size_t letters = 0;
  for (size_t i = 0; i < ls[0].n; i++)
    letters += ls[0].p[i] != ' ';
  ASSERT(letters <= 100 && letters > 100 - 12);
  vl_lentext_free(&lt);
  ASSERT_INT_EQ(words[0] = 1, 1);
  ASSERT_INT_EQ(vl_lentext_calibrate(mock_count, &calls, words, &made), 0);

  vl_lentext_t t;
  ASSERT_INT_EQ(vl_lentext_build(&t, words, 5000), 0);
  ASSERT(t.exact && t.fill >= 0);
  for (size_t i = 0; t.text[i]; i++)
    ASSERT(t.text[i] == ' ' || (t.text[i] >= 'a' && t.text[i] <= 'z'));
  int ns[] = {1, 2, 3, 7, 100, 300, 511, 512, 4999, 5000};
  for (size_t k = 0; k < VL_ARRAY_SIZE(ns); k++)
    for (uint64_t at = 0; at < 3 * VL_LENTEXT_SPREAD; at += 9973) {
      vl_seg_t seg[2];
      int n = vl_lentext_prompt(&t, at, ns[k], seg);
      ASSERT(n >= 1 && n <= 2);
      ASSERT_UINT_EQ(seg_tokens(seg, n), (uint64_t)ns[k]);
      ASSERT(seg[0].p[0] == ' ');
    }
  /* Different starts, different texts. */
  vl_seg_t a[2], b[2];
  vl_lentext_prompt(&t, 10, 300, a);
  vl_lentext_prompt(&t, 11, 300, b);
  ASSERT(a[0].p != b[0].p);
  vl_lentext_free(&t);
}

TEST_IMPL(estimate_fallback) {
  vl_lentext_t t;
  ASSERT_INT_EQ(vl_lentext_build(&t, NULL, 1000), 0);
  ASSERT(!t.exact);
  /* By the estimate the prompt is exact; by the mock it is off, within the stated error. */
  double sum = 0;
  int n = 0;
  for (uint64_t at = 0; at < VL_LENTEXT_SPREAD; at += 997, n++) {
    vl_seg_t seg[2];
    int k = vl_lentext_prompt(&t, at, 300, seg);
    sum += (double)seg_tokens(seg, k);
  }
  double off = fabs(sum / n - 300) / 300 * 100;
  ASSERT(off > 2 && off < VL_LENTEXT_ESTIMATE_ERROR_PCT);
  vl_lentext_free(&t);
  ASSERT_INT_EQ(vl_lentext_build(&t, NULL, 0), VL_EINVAL);
}

TEST_IMPL(blocks_share_prefixes) {
  int words[VL_LENTEXT_WORDS], calls = 0;
  ASSERT_INT_EQ(vl_lentext_calibrate(mock_count, &calls, words, &(int){0}), 0);
  vl_lentext_t t;
  ASSERT_INT_EQ(vl_lentext_build(&t, words, 2 * VL_LENGTHS_BLOCK), 0);
  uint64_t x[] = {7, 8, 9}, y[] = {7, 8, 10};
  vl_seg_t sx[VL_LENTEXT_SEGS(3)], sy[VL_LENTEXT_SEGS(3)];
  int nx = vl_lentext_blocks(&t, x, 3, 1300, sx, VL_LENTEXT_SEGS(3));
  int ny = vl_lentext_blocks(&t, y, 3, 1100, sy, VL_LENTEXT_SEGS(3));
  ASSERT_UINT_EQ(seg_tokens(sx, nx), 1300);
  ASSERT_UINT_EQ(seg_tokens(sy, ny), 1100);
  /* The same leading blocks, the same text: byte for byte up to the third block. */
  char *fx = calloc(1, 1 << 16), *fy = calloc(1, 1 << 16);
  size_t ox = 0, oy = 0, shared = 0;
  for (int i = 0; i < nx; i++, ox += sx[i - 1].n)
    memcpy(fx + ox, sx[i].p, sx[i].n);
  for (int i = 0; i < ny; i++, oy += sy[i - 1].n)
    memcpy(fy + oy, sy[i].p, sy[i].n);
  while (shared < ox && shared < oy && fx[shared] == fy[shared])
    shared++;
  ASSERT(vl__tok_count(fx, shared, NULL, 0) >= 2 * VL_LENGTHS_BLOCK);
  ASSERT(vl__tok_count(fx, shared, NULL, 0) < 2 * VL_LENGTHS_BLOCK + 8);
  /* Fewer tokens than blocks: the blocks past them are left out. */
  int n1 = vl_lentext_blocks(&t, x, 3, 200, sx, VL_LENTEXT_SEGS(3));
  ASSERT(n1 <= 2);
  ASSERT_UINT_EQ(seg_tokens(sx, n1), 200);
  /* A last block longer than a block takes the rest. */
  int n2 = vl_lentext_blocks(&t, x, 1, 900, sx, VL_LENTEXT_SEGS(1));
  ASSERT_UINT_EQ(seg_tokens(sx, n2), 900);
  free(fx);
  free(fy);
  vl_lentext_free(&t);
}

/* The body filler's text callback: one prompt of the text. */
typedef struct {
  const vl_lentext_t *t;
  int n;
} prompt_ud_t;

static int fill_text(void *ud, vl_seg_t *out, int room) {
  const prompt_ud_t *p = ud;
  ASSERT(room >= 2);
  return vl_lentext_prompt(p->t, 42, p->n, out);
}

TEST_IMPL(body_holes) {
  int words[VL_LENTEXT_WORDS], calls = 0;
  ASSERT_INT_EQ(vl_lentext_calibrate(mock_count, &calls, words, &(int){0}), 0);
  vl_lentext_t lt;
  ASSERT_INT_EQ(vl_lentext_build(&lt, words, 1000), 0);
  prompt_ud_t pu = {&lt, 250};
  vl_seg_t img = {"data:image/png;base64,AAAA", 26};
  vl_seg_t imgs[2] = {img, img};
  for (int native = 0; native < 2; native++)
    for (int n_images = 0; n_images <= 2; n_images++)
      for (int mc = 0; mc < 2; mc++) {
        vl_template_t t;
        /* A model name with control characters, which cJSON escapes as the markers are. */
        vl_template_params_t p = {.model = "m\x07\x1b",
                                  .max_tokens = 5,
                                  .n_images = n_images,
                                  .images_first = n_images == 1,
                                  .native = native,
                                  .image_token = "<image>",
                                  .max_completion_tokens = mc && !native,
                                  .text_hole = 1,
                                  .max_tokens_hole = 1};
        ASSERT_INT_EQ(vl_template_build(&t, &p), 0);
        ASSERT_INT_EQ(t.n_holes, n_images + 2);
        vl_body_t b;
        ASSERT_INT_EQ(vl_body_init(&b, VL_BODY_TEMPLATE_SEGS + VL_BODY_HOLE_SEGS + 2), 0);
        vl_body_parts_t parts = {
            .images = imgs, .text = fill_text, .text_ud = &pu, .max_tokens = {"1234", 4}};
        vl_body_fill_parts(&b, &t, &parts);
        char *s = flatten(&b);
        cJSON *root = cJSON_Parse(s);
        ASSERT(root);
        const char *text;
        const cJSON *limit;
        if (native) {
          text = cJSON_GetObjectItem(root, "text")->valuestring;
          limit =
              cJSON_GetObjectItem(cJSON_GetObjectItem(root, "sampling_params"), "max_new_tokens");
        } else {
          cJSON *msg = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "messages"), 0);
          cJSON *content = cJSON_GetObjectItem(msg, "content");
          if (n_images) {
            cJSON *part = cJSON_GetArrayItem(content, n_images == 1 ? 1 : 0);
            ASSERT_STR_EQ(cJSON_GetObjectItem(part, "type")->valuestring, "text");
            content = cJSON_GetObjectItem(part, "text");
          }
          text = content->valuestring;
          limit = cJSON_GetObjectItem(root, mc ? "max_completion_tokens" : "max_tokens");
        }
        ASSERT(cJSON_IsNumber(limit));
        ASSERT_INT_EQ(limit->valueint, 1234);
        /* The image placeholders of a native text are "<image>": 4 mock tokens each. */
        ASSERT_UINT_EQ(vl__tok_count(text, strlen(text), NULL, 0),
                       250 + (native ? 4 * (uint64_t)n_images : 0));
        cJSON_Delete(root);
        free(s);
        vl_body_free(&b);
        vl_template_free(&t);
      }
  vl_lentext_free(&lt);
}

/* The summary's figures from the counters: the template from text-only requests, taken off the
 * image requests' surplus before it is shared among their images. */
TEST_IMPL(summary_figures) {
  vl_lengths_stats_t l = {.requests = 4,
                          .intended = 400,
                          .reported_n = 4,
                          .reported = 400 + 4 * 10 + 3 * 50,
                          .reported_intended = 400,
                          .text_n = 2,
                          .text_extra = 20,
                          .image_n = 2,
                          .images = 3,
                          .image_extra = 20 + 150,
                          .limited = 2,
                          .max_tokens = 30};
  vl_lensum_t f;
  vl_lensum_figures(&l, &f);
  ASSERT_NEAR(f.mean_intended, 100, 1e-9);
  ASSERT_NEAR(f.mean_reported, 147.5, 1e-9);
  ASSERT_NEAR(f.template_tokens, 10, 1e-9);
  ASSERT_NEAR(f.vision_total, 150, 1e-9);
  ASSERT_NEAR(f.vision_per_image, 50, 1e-9);
  ASSERT_NEAR(f.mean_max_tokens, 15, 1e-9);
  /* Nothing to count: NaN, which the JSON writes as null. */
  vl_lengths_stats_t none = {0};
  vl_lensum_figures(&none, &f);
  ASSERT(isnan(f.mean_intended) && isnan(f.template_tokens) && isnan(f.vision_per_image));
  /* No text-only requests: the template is taken as none. */
  l.text_n = 0;
  l.text_extra = 0;
  vl_lensum_figures(&l, &f);
  ASSERT_NEAR(f.vision_per_image, 170.0 / 3, 1e-9);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(summary_figures),       TEST_ENTRY(dist_parse),      TEST_ENTRY(dist_draw),
    TEST_ENTRY(mock_tokenizer),        TEST_ENTRY(calibrate_exact), TEST_ENTRY(estimate_fallback),
    TEST_ENTRY(blocks_share_prefixes), TEST_ENTRY(body_holes),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
