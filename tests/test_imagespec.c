/* Image option parsers: an accept/reject table for resolution specs, and sampling statistics
 * (weights honoured, ranges uniform and in bounds). */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/imagespec.h"

static void canon(const char *in, const char *want) {
  vl_imagespec_res_t s;
  char why[200] = "", out[512];
  int rc = vl_imagespec_res_parse(&s, in, why, sizeof(why));
  if (rc)
    fprintf(stderr, "\"%s\": %s\n", in, why);
  ASSERT_INT_EQ(rc, 0);
  vl_imagespec_res_format(&s, out, sizeof(out));
  ASSERT_STR_EQ(out, want);
}

TEST_IMPL(res_accept) {
  canon("640x480", "640x480:1");
  canon("640x480,1280x720,1920x1080", "640x480:1,1280x720:1,1920x1080:1");
  canon("1280x720:3,3840x2160:1", "1280x720:3,3840x2160:1");
  canon("224x224-2048x2048", "224x224-2048x2048:1");
  canon("360p,480p,720p,1080p,1440p,4k", "640x360:1,854x480:1,1280x720:1,1920x1080:1,2560x1440:1,"
                                         "3840x2160:1");
  canon("720P:2,4K", "1280x720:2,3840x2160:1");
  canon("720p-1080p:5", "1280x720-1920x1080:5");
  canon(" 640X480 , 1x1:1000000 ", "640x480:1,1x1:1000000");
  canon("16384x16384", "16384x16384:1");
  canon("100x100-100x100", "100x100:1");
  canon("1x1-16384x1", "1x1-16384x1:1");
}

static void reject(const char *in, const char *reason_part) {
  vl_imagespec_res_t s;
  s.n = -7;
  char why[200] = "";
  ASSERT_INT_EQ(vl_imagespec_res_parse(&s, in, why, sizeof(why)), VL_EINVAL);
  ASSERT_INT_EQ(s.n, -7); /* untouched */
  if (!strstr(why, reason_part))
    fprintf(stderr, "\"%s\": reason \"%s\" lacks \"%s\"\n", in, why, reason_part);
  ASSERT(strstr(why, reason_part));
}

TEST_IMPL(res_reject) {
  reject("", "empty entry");
  reject(",", "empty entry");
  reject("640x480,", "entry 2");
  reject("0x480", "width must be 1..16384");
  reject("640x0", "height must be 1..16384");
  reject("16385x100", "width must be 1..16384");
  reject("100x99999999", "expected WxH");
  reject("640*480", "expected WxH");
  reject("640x", "expected WxH");
  reject("x480", "expected WxH");
  reject("-640x480", "expected WxH");
  reject("+640x480", "expected WxH");
  reject("640x480p", "unexpected text");
  reject("640x480:0", "weight");
  reject("640x480:-1", "weight");
  reject("640x480:1.5", "weight");
  reject("640x480:1000001", "weight");
  reject("640x480:", "weight");
  reject("640x480:3x", "weight");
  reject("2048x2048-224x224", "smaller size to the larger");
  reject("224x2048-2048x224", "smaller size to the larger");
  reject("640x480-", "expected WxH");
  reject("8k", "expected WxH");
  reject("720 p", "expected WxH");
  reject("1e3x480", "expected WxH");
  /* 65 entries */
  char many[65 * 8 + 1] = "";
  for (int i = 0; i < 65; i++)
    strcat(many, i ? ",10x10" : "10x10");
  reject(many, "more than 64");
}

TEST_IMPL(res_default) {
  vl_imagespec_res_t s;
  vl_imagespec_res_default(&s);
  ASSERT_INT_EQ(s.n, 11);
  int w, h;
  uint64_t px;
  vl_imagespec_res_max(&s, &w, &h, &px);
  ASSERT_INT_EQ(w, 1920);
  ASSERT_INT_EQ(h, 1080);
  ASSERT_UINT_EQ(px, 1920u * 1080u);
  ASSERT_INT_EQ(s.e[0].w_lo, 224);
}

TEST_IMPL(res_sample_weights) {
  vl_imagespec_res_t s;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&s, "1280x720:3,3840x2160:1", NULL, 0), 0);
  vl_rng_t rng;
  vl_rng_init(&rng, 1, 2);
  enum { N = 200000 };
  int small = 0;
  for (int i = 0; i < N; i++) {
    int w, h;
    vl_imagespec_res_sample(&s, &rng, &w, &h);
    ASSERT((w == 1280 && h == 720) || (w == 3840 && h == 2160));
    small += w == 1280;
  }
  /* Binomial: sd = sqrt(N p (1-p)) ~ 194, so 0.75 +- 0.005 is over 5 sd. */
  ASSERT_NEAR((double)small / N, 0.75, 0.005);

  /* Three entries with weights 1:2:7. */
  ASSERT_INT_EQ(vl_imagespec_res_parse(&s, "10x10:1,20x20:2,30x30:7", NULL, 0), 0);
  int count[3] = {0};
  for (int i = 0; i < N; i++) {
    int w, h;
    vl_imagespec_res_sample(&s, &rng, &w, &h);
    count[w / 10 - 1]++;
  }
  ASSERT_NEAR((double)count[0] / N, 0.1, 0.004);
  ASSERT_NEAR((double)count[1] / N, 0.2, 0.005);
  ASSERT_NEAR((double)count[2] / N, 0.7, 0.006);
}

TEST_IMPL(res_sample_range) {
  vl_imagespec_res_t s;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&s, "224x224-2048x2048", NULL, 0), 0);
  vl_rng_t rng;
  vl_rng_init(&rng, 7, 1);
  enum { N = 200000, BINS = 8 };
  int wbin[BINS] = {0}, hbin[BINS] = {0};
  int wmin = 1 << 30, wmax = 0, hmin = 1 << 30, hmax = 0;
  double sw = 0, sh = 0, swh = 0;
  for (int i = 0; i < N; i++) {
    int w, h;
    vl_imagespec_res_sample(&s, &rng, &w, &h);
    ASSERT(w >= 224 && w <= 2048 && h >= 224 && h <= 2048);
    wmin = VL_MIN(wmin, w), wmax = VL_MAX(wmax, w);
    hmin = VL_MIN(hmin, h), hmax = VL_MAX(hmax, h);
    wbin[(w - 224) * BINS / 1825]++;
    hbin[(h - 224) * BINS / 1825]++;
    sw += w, sh += h, swh += (double)w * h;
  }
  /* Both ends are reached, each bin holds about an eighth, and w and h are uncorrelated. */
  ASSERT_INT_EQ(wmin, 224);
  ASSERT_INT_EQ(wmax, 2048);
  ASSERT_INT_EQ(hmin, 224);
  ASSERT_INT_EQ(hmax, 2048);
  for (int b = 0; b < BINS; b++) {
    ASSERT_NEAR((double)wbin[b] / N, 1.0 / BINS, 0.004);
    ASSERT_NEAR((double)hbin[b] / N, 1.0 / BINS, 0.004);
  }
  double mw = sw / N, mh = sh / N;
  ASSERT_NEAR(mw, 1136, 5);
  ASSERT_NEAR(mh, 1136, 5);
  double var = (1825.0 * 1825.0 - 1) / 12;
  ASSERT_NEAR((swh / N - mw * mh) / var, 0, 0.01);
}

TEST_IMPL(res_sample_deterministic) {
  vl_imagespec_res_t s;
  vl_imagespec_res_default(&s);
  vl_rng_t a, b;
  vl_rng_init(&a, 5, 9);
  vl_rng_init(&b, 5, 9);
  for (int i = 0; i < 1000; i++) {
    int w1, h1, w2, h2;
    vl_imagespec_res_sample(&s, &a, &w1, &h1);
    vl_imagespec_res_sample(&s, &b, &w2, &h2);
    ASSERT(w1 == w2 && h1 == h2);
  }
}

TEST_IMPL(format_content_count) {
  vl_image_fmt_t f;
  ASSERT_INT_EQ(vl_imagespec_format("png", &f), 0);
  ASSERT_INT_EQ(f, VL_IMG_PNG);
  ASSERT_INT_EQ(vl_imagespec_format("JPG", &f), 0);
  ASSERT_INT_EQ(f, VL_IMG_JPEG);
  ASSERT_INT_EQ(vl_imagespec_format("jpeg", &f), 0);
  ASSERT_INT_EQ(f, VL_IMG_JPEG);
  ASSERT_INT_EQ(vl_imagespec_format("mixed", &f), 0);
  ASSERT_INT_EQ(f, VL_IMG_MIXED);
  ASSERT_INT_EQ(vl_imagespec_format("gif", &f), VL_EINVAL);
  ASSERT_INT_EQ(vl_imagespec_format("", &f), VL_EINVAL);
  ASSERT_INT_EQ(vl_imagespec_format(NULL, &f), VL_EINVAL);

  vl_image_content_t k;
  static const char *names[] = {"photo", "noise", "gradient", "shapes", "mixed"};
  for (int i = 0; i < 5; i++) {
    ASSERT_INT_EQ(vl_imagespec_content(names[i], &k), 0);
    ASSERT_INT_EQ(k, i);
    ASSERT_STR_EQ(vl_image_content_name(k), names[i]);
  }
  ASSERT_INT_EQ(vl_imagespec_content("photo-like", &k), 0);
  ASSERT_INT_EQ(k, VL_CONTENT_PHOTO);
  ASSERT_INT_EQ(vl_imagespec_content("stripes", &k), VL_EINVAL);

  int lo, hi;
  char why[200];
  ASSERT_INT_EQ(vl_imagespec_count("1", 0, 16, &lo, &hi, why, sizeof(why)), 0);
  ASSERT(lo == 1 && hi == 1);
  ASSERT_INT_EQ(vl_imagespec_count("2-4", 0, 16, &lo, &hi, why, sizeof(why)), 0);
  ASSERT(lo == 2 && hi == 4);
  ASSERT_INT_EQ(vl_imagespec_count("0-16", 0, 16, &lo, &hi, why, sizeof(why)), 0);
  ASSERT_INT_EQ(vl_imagespec_count("4-2", 0, 16, &lo, &hi, why, sizeof(why)), VL_EINVAL);
  ASSERT_INT_EQ(vl_imagespec_count("17", 0, 16, &lo, &hi, why, sizeof(why)), VL_ERANGE);
  ASSERT(strstr(why, "0..16"));
  ASSERT_INT_EQ(vl_imagespec_count("0", 1, 16, &lo, &hi, why, sizeof(why)), VL_ERANGE);
  ASSERT_INT_EQ(vl_imagespec_count("x", 0, 16, &lo, &hi, why, sizeof(why)), VL_EINVAL);
  ASSERT_INT_EQ(vl_imagespec_count("-3", 0, 16, &lo, &hi, why, sizeof(why)), VL_EINVAL);
  ASSERT_INT_EQ(vl_imagespec_count("1.5", 0, 16, &lo, &hi, why, sizeof(why)), VL_EINVAL);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(res_accept),           TEST_ENTRY(res_reject),
      TEST_ENTRY(res_default),          TEST_ENTRY(res_sample_weights),
      TEST_ENTRY(res_sample_range),     TEST_ENTRY(res_sample_deterministic),
      TEST_ENTRY(format_content_count),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
