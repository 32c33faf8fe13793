/* The request plan: the mix of text-only and image requests follows --image-ratio, image counts
 * and pool images are drawn uniformly from their ranges, placement follows --image-placement,
 * each request's body (parsed back as JSON) holds what its draw says, and every draw depends on
 * the seed and the request id only. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/config.h"
#include "vlmload/imagepool.h"
#include "vlmload/lengths.h"
#include "vlmload/plan.h"
#include "vlmload/prompts.h"

#include <cjson/cJSON.h>

#define MAXARGS 32
#define POOL    5
#define DRAWS   20000

/* Parses a space-separated command line that must be a valid run. */
static void parse(vl_config_t *c, const char *line) {
  char buf[512], *argv[MAXARGS] = {"vlmload"};
  int argc = 1;
  snprintf(buf, sizeof(buf), "%s", line);
  for (char *tok = strtok(buf, " "); tok && argc < MAXARGS - 1; tok = strtok(NULL, " "))
    argv[argc++] = tok;
  argv[argc] = NULL;
  ASSERT_INT_EQ(vl_config_parse(c, argc, argv, stdout, stderr), VL_CONFIG_RUN);
}

typedef struct {
  vl_config_t cfg;
  vl_prompts_t prompts;
  vl_imagepool_t pool;
  vl_plan_t plan;
} fixture_t;

/* Three known prompts (from a file), a synthetic pool of POOL small images, and a plan over them
 * for the command line. */
static void setup(fixture_t *f, const char *line) {
  memset(f, 0, sizeof(*f));
  parse(&f->cfg, line);
  char path[512], err[300];
  snprintf(path, sizeof(path), "%s/prompts.txt", task_tmpdir());
  FILE *pf = fopen(path, "w");
  ASSERT(pf);
  fputs("first prompt\nsecond prompt\n\nthird prompt\n", pf);
  ASSERT_INT_EQ(fclose(pf), 0);
  ASSERT_INT_EQ(vl_prompts_load(&f->prompts, path, err, sizeof(err)), 0);
  ASSERT_UINT_EQ(f->prompts.n, 3);
  vl_imagespec_res_t res;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&res, "16x16", err, sizeof(err)), 0);
  vl_imagepool_opts_t o = {.res = &res, .fmt = VL_IMG_PNG, .count = POOL, .seed = 1};
  ASSERT_INT_EQ(vl_imagepool_build(&f->pool, NULL, &o, err, sizeof(err)), 0);
  ASSERT_UINT_EQ(f->pool.n, POOL);
  ASSERT_INT_EQ(vl_plan_init(&f->plan, &f->cfg, "test-model", &f->prompts, &f->pool), 0);
}

static void teardown(fixture_t *f) {
  vl_plan_free(&f->plan);
  vl_imagepool_free(&f->pool);
  vl_prompts_free(&f->prompts);
  vl_config_free(&f->cfg);
}

/* A request's body as JSON: the template filled with the pool images the draw chose. */
static cJSON *body_json(const fixture_t *f, const vl_request_plan_t *rp) {
  vl_seg_t segs[VL_MAX_IMAGES];
  for (int k = 0; k < rp->n_images; k++)
    segs[k] = vl_imagepool_seg(&f->pool, rp->image[k]);
  vl_seg_t bseg[VL_BODY_TEMPLATE_SEGS];
  vl_body_t b = {.seg = bseg, .cap = VL_BODY_TEMPLATE_SEGS};
  vl_body_fill(&b, vl_plan_template(&f->plan, rp), segs);
  char *text = malloc(b.size + 1);
  size_t off = 0;
  for (int i = 0; i < b.n; i++) {
    memcpy(text + off, b.seg[i].p, b.seg[i].n);
    off += b.seg[i].n;
  }
  ASSERT_UINT_EQ(off, b.size);
  text[off] = '\0';
  cJSON *j = cJSON_Parse(text);
  free(text);
  ASSERT(j);
  return j;
}

/* Checks that the body of request rp holds its prompt's text and its images, in its order. */
static void check_body(const fixture_t *f, const vl_request_plan_t *rp) {
  cJSON *j = body_json(f, rp);
  const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
  const cJSON *content = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(msgs, 0), "content");
  const char *prompt = f->prompts.items[rp->prompt];
  if (rp->n_images == 0) {
    /* Text only: the content is the prompt itself or one text part. */
    if (cJSON_IsString(content)) {
      ASSERT_STR_EQ(content->valuestring, prompt);
    } else {
      ASSERT_INT_EQ(cJSON_GetArraySize(content), 1);
      ASSERT_STR_EQ(
          cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(content, 0), "text")->valuestring,
          prompt);
    }
    cJSON_Delete(j);
    return;
  }
  ASSERT_INT_EQ(cJSON_GetArraySize(content), rp->n_images + 1);
  int text_at = rp->images_first ? rp->n_images : 0, k = 0;
  for (int i = 0; i <= rp->n_images; i++) {
    const cJSON *part = cJSON_GetArrayItem(content, i);
    const char *type = cJSON_GetObjectItemCaseSensitive(part, "type")->valuestring;
    if (i == text_at) {
      ASSERT_STR_EQ(type, "text");
      ASSERT_STR_EQ(cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring, prompt);
      continue;
    }
    ASSERT_STR_EQ(type, "image_url");
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(part, "image_url"), "url");
    ASSERT_STR_EQ(url->valuestring, f->pool.img[rp->image[k]].uri);
    k++;
  }
  ASSERT_INT_EQ(k, rp->n_images);
  ASSERT_STR_EQ(cJSON_GetObjectItemCaseSensitive(j, "model")->valuestring, "test-model");
  cJSON_Delete(j);
}

TEST_IMPL(plan_mix) {
  /* 30% image requests of 1 to 4 images, placed at random. */
  fixture_t f;
  setup(&f, "--image-ratio 0.3 --images-per-request 1-4 --image-placement random --seed 7");
  uint64_t with = 0, first = 0, per_count[5] = {0}, per_image[POOL] = {0}, per_prompt[3] = {0};
  uint64_t images = 0;
  for (uint64_t id = 0; id < DRAWS; id++) {
    vl_request_plan_t rp;
    vl_plan_draw(&f.plan, id, &rp);
    ASSERT(rp.prompt < 3);
    per_prompt[rp.prompt]++;
    if (rp.n_images == 0) {
      ASSERT_INT_EQ(rp.images_first, 0);
      continue;
    }
    with++;
    ASSERT(rp.n_images >= 1 && rp.n_images <= 4);
    per_count[rp.n_images]++;
    first += (uint64_t)rp.images_first;
    for (int k = 0; k < rp.n_images; k++) {
      ASSERT(rp.image[k] < POOL);
      per_image[rp.image[k]]++;
      images++;
    }
  }
  /* Binomial(20000, 0.3): a standard deviation of 0.0032 in the fraction; 0.015 is 4.6 of them. */
  ASSERT_NEAR((double)with / DRAWS, 0.3, 0.015);
  /* Each count a quarter of the image requests (sd 0.0056 at 6000); before/after half each. */
  for (int n = 1; n <= 4; n++)
    ASSERT_NEAR((double)per_count[n] / (double)with, 0.25, 0.03);
  ASSERT_NEAR((double)first / (double)with, 0.5, 0.03);
  ASSERT_NEAR((double)images / (double)with, 2.5, 0.05); /* the mean of 1..4 */
  for (int i = 0; i < POOL; i++)
    ASSERT_NEAR((double)per_image[i] / (double)images, 1.0 / POOL, 0.02);
  for (int i = 0; i < 3; i++)
    ASSERT_NEAR((double)per_prompt[i] / DRAWS, 1.0 / 3, 0.02);
  /* Every body says what its draw says, for both placements and every count. */
  for (uint64_t id = 0; id < 300; id++) {
    vl_request_plan_t rp;
    vl_plan_draw(&f.plan, id, &rp);
    check_body(&f, &rp);
  }
  teardown(&f);
}

TEST_IMPL(plan_placement) {
  const char *lines[] = {"--image-ratio 1 --images-per-request 2 --image-placement before",
                         "--image-ratio 1 --images-per-request 2 --image-placement after",
                         "--image-ratio 1 --images-per-request 3"};
  const int want_first[] = {1, 0, 1}; /* before is the default */
  for (size_t i = 0; i < VL_ARRAY_SIZE(lines); i++) {
    fixture_t f;
    setup(&f, lines[i]);
    for (uint64_t id = 0; id < 200; id++) {
      vl_request_plan_t rp;
      vl_plan_draw(&f.plan, id, &rp);
      ASSERT_INT_EQ(rp.n_images, i == 2 ? 3 : 2); /* ratio 1: every request */
      ASSERT_INT_EQ(rp.images_first, want_first[i]);
      if (id < 20)
        check_body(&f, &rp);
    }
    teardown(&f);
  }
}

TEST_IMPL(plan_text_only) {
  /* No image option, or a ratio of 0: every request is text, whatever the pool. */
  const char *lines[] = {"--seed 3", "--image-ratio 0 --images-per-request 2"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(lines); i++) {
    fixture_t f;
    setup(&f, lines[i]);
    for (uint64_t id = 0; id < 1000; id++) {
      vl_request_plan_t rp;
      vl_plan_draw(&f.plan, id, &rp);
      ASSERT_INT_EQ(rp.n_images, 0);
      if (id < 20)
        check_body(&f, &rp);
    }
    teardown(&f);
  }
}

static int same(const vl_request_plan_t *a, const vl_request_plan_t *b) {
  if (a->prompt != b->prompt || a->n_images != b->n_images || a->images_first != b->images_first)
    return 0;
  for (int k = 0; k < a->n_images; k++)
    if (a->image[k] != b->image[k])
      return 0;
  return 1;
}

TEST_IMPL(plan_seeded) {
  /* The same seed gives the same requests, in any order of drawing (shards draw every n-th id);
   * another seed gives others. */
  const char *opts = "--image-ratio 0.5 --images-per-request 1-3 --image-placement random";
  char line[256];
  fixture_t a, b, c;
  snprintf(line, sizeof(line), "%s --seed 11", opts);
  setup(&a, line);
  setup(&b, line);
  snprintf(line, sizeof(line), "%s --seed 12", opts);
  setup(&c, line);
  int differ = 0;
  for (uint64_t i = 0; i < 2000; i++) {
    uint64_t id = 1999 - i; /* b draws backwards */
    vl_request_plan_t ra, rb, rc;
    vl_plan_draw(&a.plan, i, &ra);
    vl_plan_draw(&b.plan, id, &rb);
    vl_request_plan_t again;
    vl_plan_draw(&a.plan, id, &again);
    ASSERT(same(&rb, &again));
    vl_plan_draw(&c.plan, i, &rc);
    differ += !same(&ra, &rc);
  }
  /* Two independent draws agree on everything rarely (same prompt and, half the time, the same
   * mix): most of them differ. */
  ASSERT(differ > 1000);
  /* Neighbouring ids are independent: no run of equal draws. */
  int equal_next = 0;
  vl_request_plan_t prev;
  vl_plan_draw(&a.plan, 0, &prev);
  for (uint64_t id = 1; id < 2000; id++) {
    vl_request_plan_t rp;
    vl_plan_draw(&a.plan, id, &rp);
    equal_next += same(&prev, &rp);
    prev = rp;
  }
  ASSERT(equal_next < 400);
  teardown(&a);
  teardown(&b);
  teardown(&c);
}

/* Lengths: a plan over the synthetic text (estimated counts, so each word's tokens are known
 * here too), for the command line. */
static void setup_lengths(fixture_t *f, vl_lentext_t *lt, const char *line) {
  memset(f, 0, sizeof(*f));
  parse(&f->cfg, line);
  char err[300];
  ASSERT_INT_EQ(vl_prompts_load(&f->prompts, NULL, err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_lentext_build(lt, NULL, 4 * VL_LENGTHS_BLOCK), 0);
  f->prompts.synthetic = lt;
  vl_imagespec_res_t res;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&res, "16x16", err, sizeof(err)), 0);
  vl_imagepool_opts_t o = {.res = &res, .fmt = VL_IMG_PNG, .count = POOL, .seed = 1};
  ASSERT_INT_EQ(vl_imagepool_build(&f->pool, NULL, &o, err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_plan_init(&f->plan, &f->cfg, "test-model", &f->prompts, &f->pool), 0);
}

/* Tokens of text by the estimate the text was built with: the sum over its words. */
static int estimated_tokens(const char *text) {
  int n = 0;
  char word[64];
  for (const char *p = text; *p;) {
    while (*p == ' ')
      p++;
    size_t len = strcspn(p, " ");
    if (!len)
      break;
    ASSERT(len < sizeof(word));
    memcpy(word, p, len);
    word[len] = '\0';
    n += vl_lentext_estimate(word);
    p += len;
  }
  return n;
}

/* A request's body with its lengths: the prompt text and the max_tokens it sends. */
static cJSON *lengths_body(const fixture_t *f, const vl_request_plan_t *rp, const char **text,
                           int *max_tokens) {
  vl_seg_t segs[VL_MAX_IMAGES];
  for (int k = 0; k < rp->n_images; k++)
    segs[k] = vl_imagepool_seg(&f->pool, rp->image[k]);
  vl_body_t b;
  char number[VL_PLAN_NUMBER_MAX];
  ASSERT_INT_EQ(vl_body_init(&b, vl_plan_body_cap(&f->plan)), 0);
  vl_plan_fill(&f->plan, rp, segs, number, &b);
  char *s = malloc(b.size + 1);
  size_t off = 0;
  for (int i = 0; i < b.n; i++) {
    memcpy(s + off, b.seg[i].p, b.seg[i].n);
    off += b.seg[i].n;
  }
  s[off] = '\0';
  vl_body_free(&b);
  cJSON *j = cJSON_Parse(s);
  free(s);
  ASSERT(j);
  const cJSON *content = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "messages"), 0), "content");
  if (cJSON_IsArray(content)) {
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
      if (strcmp(cJSON_GetObjectItemCaseSensitive(part, "type")->valuestring, "text") == 0)
        content = cJSON_GetObjectItemCaseSensitive(part, "text");
    }
  }
  *text = content->valuestring;
  *max_tokens = cJSON_GetObjectItemCaseSensitive(j, "max_tokens")->valueint;
  return j;
}

TEST_IMPL(plan_lengths) {
  fixture_t f, plain;
  vl_lentext_t lt;
  setup_lengths(&f, &lt,
                "--image-ratio 0.5 --input-tokens 300:50:200:400 --output-tokens 64:16:32:96 "
                "--seed 5");
  setup(&plain, "--image-ratio 0.5 --seed 5");
  int lo = 1 << 30, hi = 0, mlo = 1 << 30, mhi = 0, distinct = 0;
  const char *prev = NULL;
  for (uint64_t id = 0; id < 400; id++) {
    vl_request_plan_t rp, rq;
    vl_plan_draw(&f.plan, id, &rp);
    vl_plan_draw(&plain.plan, id, &rq);
    /* Lengths draw last: everything else is what a run without them draws. */
    ASSERT_INT_EQ(rp.n_images, rq.n_images);
    ASSERT_INT_EQ(rp.images_first, rq.images_first);
    for (int k = 0; k < rp.n_images; k++)
      ASSERT_UINT_EQ(rp.image[k], rq.image[k]);
    ASSERT_INT_EQ(rq.input_tokens, 0);
    ASSERT_INT_EQ(rq.max_tokens, 0);
    const char *text;
    int max_tokens;
    cJSON *j = lengths_body(&f, &rp, &text, &max_tokens);
    ASSERT_INT_EQ(estimated_tokens(text), rp.input_tokens);
    ASSERT_INT_EQ(max_tokens, rp.max_tokens);
    lo = VL_MIN(lo, rp.input_tokens);
    hi = VL_MAX(hi, rp.input_tokens);
    mlo = VL_MIN(mlo, rp.max_tokens);
    mhi = VL_MAX(mhi, rp.max_tokens);
    distinct += !prev || strncmp(prev, text, 40) != 0;
    free((void *)prev);
    prev = vl_xstrdup(text);
    cJSON_Delete(j);
  }
  free((void *)prev);
  ASSERT(lo >= 200 && hi <= 400 && hi - lo > 100);
  ASSERT(mlo >= 32 && mhi <= 96 && mhi - mlo > 30);
  ASSERT(distinct == 400); /* every prompt begins differently from the one before */
  teardown(&f);
  teardown(&plain);
  vl_lentext_free(&lt);
}

/* A trace sets a request's lengths and prefix blocks itself, over the distributions'. */
TEST_IMPL(plan_trace_override) {
  fixture_t f;
  vl_lentext_t lt;
  setup_lengths(&f, &lt, "--input-tokens 10 --output-tokens 10 --seed 5");
  f.plan.max_blocks = 3;
  static const uint64_t a[] = {1, 2, 3}, b[] = {1, 2, 4};
  vl_request_plan_t rp;
  vl_plan_draw(&f.plan, 0, &rp);
  rp.input_tokens = 1200;
  rp.max_tokens = 77;
  rp.blocks = a;
  rp.n_blocks = 3;
  const char *ta, *tb;
  int m;
  cJSON *ja = lengths_body(&f, &rp, &ta, &m);
  ASSERT_INT_EQ(m, 77);
  ASSERT_INT_EQ(estimated_tokens(ta), 1200);
  vl_plan_draw(&f.plan, 1, &rp);
  rp.input_tokens = 1100;
  rp.max_tokens = 5;
  rp.blocks = b;
  rp.n_blocks = 3;
  cJSON *jb = lengths_body(&f, &rp, &tb, &m);
  ASSERT_INT_EQ(estimated_tokens(tb), 1100);
  size_t shared = 0;
  while (ta[shared] && ta[shared] == tb[shared])
    shared++;
  char *prefix = vl_xstrdup(ta);
  prefix[shared] = '\0';
  ASSERT(estimated_tokens(prefix) >= 2 * VL_LENGTHS_BLOCK - 1);
  free(prefix);
  cJSON_Delete(ja);
  cJSON_Delete(jb);
  teardown(&f);
  vl_lentext_free(&lt);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(plan_lengths),   TEST_ENTRY(plan_trace_override), TEST_ENTRY(plan_mix),
    TEST_ENTRY(plan_placement), TEST_ENTRY(plan_text_only),      TEST_ENTRY(plan_seeded),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
