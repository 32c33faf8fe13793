/* The image pool: synthetic pools are deterministic and hold what their metadata says; data URIs
 * decode (by coreutils' base64, as a reference) to the encoded bytes; a corpus directory loads
 * every good file whatever its name and skips every bad kind with one warning each. */
#include "task.h"
#include "vlmload/base64.h"
#include "../src/images/codec.h"
#include "vlmload/common.h"
#include "vlmload/imagepool.h"

#include <sys/stat.h>
#include <zlib.h>

/* --- helpers ---------------------------------------------------------------------------------- */

typedef struct {
  int n;
  char line[64][300];
  int why[64];
} warnings_t;

static const char *root_dir; /* stripped from warning paths */

static void collect(void *arg, vl_imagepool_skip_t why, const char *path, const char *msg) {
  warnings_t *w = arg;
  ASSERT(w->n < 64);
  size_t k = root_dir && strncmp(path, root_dir, strlen(root_dir)) == 0 ? strlen(root_dir) + 1 : 0;
  snprintf(w->line[w->n], sizeof(w->line[0]), "%s %s", vl_imagepool_skip_name(why), path + k);
  w->why[w->n++] = (int)why;
  (void)msg;
}

static int has_warning(const warnings_t *w, const char *line) {
  for (int i = 0; i < w->n; i++)
    if (strcmp(w->line[i], line) == 0)
      return 1;
  return 0;
}

static uint8_t *uri_bytes(const char *uri, size_t uri_len, size_t *n) {
  const char *comma = strchr(uri, ',');
  ASSERT(comma);
  size_t k = (size_t)(comma + 1 - uri);
  uint8_t *p = malloc((uri_len - k) / 4 * 3 + 1);
  long got = vl_base64_decode(p, uri + k, uri_len - k);
  ASSERT(got >= 0);
  *n = (size_t)got;
  return p;
}

/* Checks one pool image against its metadata: prefix matches content, decodes to w x h x
 * channels, PNG pixels hash to pixel_hash, kept pixels too. */
static void check_image(const vl_imagepool_image_t *img) {
  ASSERT_UINT_EQ(strlen(img->uri), img->uri_len);
  size_t n;
  uint8_t *p = uri_bytes(img->uri, img->uri_len, &n);
  ASSERT_UINT_EQ(n, img->bytes);
  ASSERT_INT_EQ(vl_codec_detect(p, n), img->fmt);
  const char *prefix =
      img->fmt == VL_IMG_PNG ? "data:image/png;base64," : "data:image/jpeg;base64,";
  ASSERT(strncmp(img->uri, prefix, strlen(prefix)) == 0);
  vl_raw_t d = {0};
  ASSERT_INT_EQ(vl_codec_decode(NULL, p, n, 0, &d), 0);
  ASSERT_INT_EQ(d.w, img->w);
  ASSERT_INT_EQ(d.h, img->h);
  ASSERT_INT_EQ(d.channels, img->channels);
  if (img->fmt == VL_IMG_PNG || img->quality == 0)
    ASSERT_UINT_EQ(vl_image_hash(&d), img->pixel_hash); /* lossless, or the file's own pixels */
  if (img->raw.px) {
    ASSERT_UINT_EQ(vl_image_hash(&img->raw), img->pixel_hash);
    ASSERT_INT_EQ(img->raw.w, img->w);
    ASSERT_INT_EQ(img->raw.channels, img->channels);
  }
  vl_image_raw_free(&d);
  free(p);
}

static void build_ok(vl_imagepool_t *pool, const vl_imagepool_opts_t *o) {
  char err[300] = "";
  int rc = vl_imagepool_build(pool, NULL, o, err, sizeof(err));
  if (rc)
    fprintf(stderr, "build: %s (%s)\n", err, vl_strerror(rc));
  ASSERT_INT_EQ(rc, 0);
  for (size_t i = 0; i < pool->n; i++)
    check_image(&pool->img[i]);
}

static void write_file(const char *dir, const char *name, const void *p, size_t n) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  ASSERT(f);
  if (n)
    ASSERT_UINT_EQ(fwrite(p, 1, n, f), n);
  ASSERT_INT_EQ(fclose(f), 0);
}

static uint8_t *read_path(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  ASSERT(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *p = malloc((size_t)len + 1);
  *n = fread(p, 1, (size_t)len, f);
  fclose(f);
  return p;
}

static void encoded(int w, int h, int ch, vl_image_fmt_t fmt, uint64_t seed, vl_image_buf_t *out) {
  vl_raw_t r = {0};
  ASSERT_INT_EQ(vl_image_raw_alloc(&r, w, h, ch), 0);
  ASSERT_INT_EQ(vl_image_render(&r, VL_CONTENT_SHAPES, seed), 0);
  vl_codec_opts_t o = {.fmt = fmt, .quality = 85};
  ASSERT_INT_EQ(vl_codec_encode(NULL, &r, &o, out), 0);
  vl_image_raw_free(&r);
}

static char *temp_dir(void) {
  size_t n = strlen(task_tmpdir()) + 32;
  char *d = vl_xmalloc(n);
  snprintf(d, n, "%s/vl-test-pool-XXXXXX", task_tmpdir());
  ASSERT(mkdtemp(d));
  return d;
}

static void remove_tree(char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
  ASSERT_INT_EQ(system(cmd), 0);
  free(dir);
}

/* Decodes a data URI's base64 with coreutils' `base64 -d` (via temporary files). */
static uint8_t *reference_decode(const char *uri, size_t *n) {
  char *dir = temp_dir();
  const char *comma = strchr(uri, ',');
  write_file(dir, "b64", comma + 1, strlen(comma + 1));
  char cmd[600], out[512];
  snprintf(cmd, sizeof(cmd), "base64 -d '%s/b64' > '%s/bin'", dir, dir);
  ASSERT_INT_EQ(system(cmd), 0);
  snprintf(out, sizeof(out), "%s/bin", dir);
  uint8_t *p = read_path(out, n);
  remove_tree(dir);
  return p;
}

/* --- synthetic pools -------------------------------------------------------------------------- */

TEST_IMPL(synthetic_default) {
  vl_imagepool_opts_t o = {.seed = 1};
  vl_imagepool_t pool;
  build_ok(&pool, &o);
  ASSERT_UINT_EQ(pool.n, VL_IMAGEPOOL_DEFAULT_COUNT);
  vl_imagespec_res_t def;
  vl_imagespec_res_default(&def);
  size_t uri = 0;
  for (size_t i = 0; i < pool.n; i++) {
    const vl_imagepool_image_t *img = &pool.img[i];
    ASSERT_INT_EQ(img->fmt, VL_IMG_JPEG);
    ASSERT_INT_EQ(img->channels, 3);
    ASSERT_INT_EQ(img->quality, VL_IMAGE_JPEG_QUALITY);
    ASSERT_STR_EQ(img->origin, "synthetic");
    ASSERT(img->raw.px == NULL);
    int found = 0;
    for (int e = 0; e < def.n; e++)
      found |= def.e[e].w_lo == img->w && def.e[e].h_lo == img->h;
    ASSERT(found);
    uri += img->uri_len + 1;
  }
  ASSERT_UINT_EQ(pool.uri_bytes, uri);
  ASSERT(pool.total_bytes >= uri);
  ASSERT_INT_EQ(pool.max_w, 1920);
  vl_imagepool_free(&pool);
  ASSERT(pool.img == NULL && pool.n == 0);
}

TEST_IMPL(synthetic_mixed) {
  vl_imagespec_res_t res;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&res, "64x48-200x160", NULL, 0), 0);
  vl_imagepool_opts_t o = {
      .res = &res, .fmt = VL_IMG_MIXED, .count = 24, .seed = 3, .keep_raw = 1, .quality = 92};
  vl_imagepool_t pool;
  build_ok(&pool, &o);
  ASSERT_UINT_EQ(pool.n, 24);
  int png[5] = {0}, jpeg[5] = {0};
  for (size_t i = 0; i < pool.n; i++) {
    const vl_imagepool_image_t *img = &pool.img[i];
    ASSERT(img->w >= 64 && img->w <= 200 && img->h >= 48 && img->h <= 160);
    if (img->fmt == VL_IMG_PNG)
      png[img->channels]++;
    else
      jpeg[img->channels]++;
    if (img->fmt == VL_IMG_JPEG) {
      /* The JPEG holds the kept pixels within a PSNR bound. */
      size_t n;
      uint8_t *p = uri_bytes(img->uri, img->uri_len, &n);
      vl_raw_t d = {0};
      ASSERT_INT_EQ(vl_codec_decode(NULL, p, n, 0, &d), 0);
      double se = 0;
      for (size_t k = 0; k < vl_image_raw_size(&d); k++) {
        double e = (double)d.px[k] - img->raw.px[k];
        se += e * e;
      }
      double mse = se / (double)vl_image_raw_size(&d);
      ASSERT(mse == 0 || 10 * log10(255.0 * 255 / mse) > 28);
      ASSERT_INT_EQ(img->quality, 92);
      vl_image_raw_free(&d);
      free(p);
    }
  }
  /* Every PNG colour type and both JPEG kinds appear. */
  ASSERT(png[1] > 0 && png[3] > 0 && png[4] > 0);
  ASSERT(jpeg[1] > 0 && jpeg[3] > 0);
  ASSERT_INT_EQ(png[1] + png[3] + png[4], 12);
  vl_imagepool_free(&pool);
}

TEST_IMPL(synthetic_seeded) {
  vl_imagespec_res_t res;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&res, "32x32-96x96", NULL, 0), 0);
  for (int f = 0; f < 3; f++) {
    vl_image_fmt_t fmts[3] = {VL_IMG_PNG, VL_IMG_JPEG, VL_IMG_MIXED};
    vl_imagepool_opts_t o = {
        .res = &res, .fmt = fmts[f], .count = 10, .seed = 77, .content = VL_CONTENT_MIXED};
    vl_imagepool_t a, b, c;
    build_ok(&a, &o);
    build_ok(&b, &o);
    o.seed = 78;
    build_ok(&c, &o);
    int differ = 0;
    for (size_t i = 0; i < a.n; i++) {
      ASSERT_UINT_EQ(a.img[i].uri_len, b.img[i].uri_len);
      ASSERT_MEM_EQ(a.img[i].uri, b.img[i].uri, a.img[i].uri_len);
      ASSERT_UINT_EQ(a.img[i].pixel_hash, b.img[i].pixel_hash);
      differ += a.img[i].pixel_hash != c.img[i].pixel_hash;
    }
    ASSERT_INT_EQ(differ, 10);
    vl_imagepool_free(&a);
    vl_imagepool_free(&b);
    vl_imagepool_free(&c);
  }
}

TEST_IMPL(uri_reference_decoder) {
  vl_imagespec_res_t res;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&res, "1x1,2x1,3x3,50x40", NULL, 0), 0);
  vl_imagepool_opts_t o = {.res = &res, .fmt = VL_IMG_MIXED, .count = 8, .seed = 5};
  vl_imagepool_t pool;
  build_ok(&pool, &o);
  for (size_t i = 0; i < pool.n; i++) {
    size_t n, m;
    uint8_t *ref = reference_decode(pool.img[i].uri, &n);
    uint8_t *ours = uri_bytes(pool.img[i].uri, pool.img[i].uri_len, &m);
    ASSERT_UINT_EQ(n, pool.img[i].bytes);
    ASSERT_UINT_EQ(m, n);
    ASSERT_MEM_EQ(ref, ours, n);
    free(ref);
    free(ours);
  }
  vl_imagepool_free(&pool);
}

typedef struct {
  size_t calls, last_done, total;
  int monotone;
} progress_t;

static void on_progress(void *arg, size_t done, size_t total) {
  progress_t *p = arg;
  p->calls++;
  p->monotone &= done == p->last_done + 1;
  p->last_done = done;
  p->total = total;
}

TEST_IMPL(progress_and_caller_loop) {
  uv_loop_t loop;
  ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  progress_t pr = {.monotone = 1};
  vl_imagespec_res_t res;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&res, "64x64", NULL, 0), 0);
  vl_imagepool_opts_t o = {
      .res = &res, .count = 40, .progress = on_progress, .progress_arg = &pr, .keep_raw = 1};
  vl_imagepool_t pool;
  char err[200];
  ASSERT_INT_EQ(vl_imagepool_build(&pool, &loop, &o, err, sizeof(err)), 0);
  ASSERT_UINT_EQ(pr.calls, 40);
  ASSERT_UINT_EQ(pr.last_done, 40);
  ASSERT_UINT_EQ(pr.total, 40);
  ASSERT(pr.monotone);
  ASSERT_UINT_EQ(pool.max_raw, 64 * 64 * 3);
  ASSERT(pool.total_bytes >= pool.uri_bytes + 40 * 64 * 64 * 3);
  ASSERT_INT_EQ(uv_loop_close(&loop), 0);
  vl_imagepool_free(&pool);
}

TEST_IMPL(bad_options) {
  vl_imagepool_t pool;
  char err[200];
  vl_imagepool_opts_t o = {.quality = 101};
  ASSERT_INT_EQ(vl_imagepool_build(&pool, NULL, &o, err, sizeof(err)), VL_EINVAL);
  o = (vl_imagepool_opts_t){.png_level = 10};
  ASSERT_INT_EQ(vl_imagepool_build(&pool, NULL, &o, err, sizeof(err)), VL_EINVAL);
  o = (vl_imagepool_opts_t){.fmt = (vl_image_fmt_t)9};
  ASSERT_INT_EQ(vl_imagepool_build(&pool, NULL, &o, err, sizeof(err)), VL_EINVAL);
  vl_imagepool_free(&pool);
}

/* --- corpus pools ----------------------------------------------------------------------------- */

/* Writes a corpus holding every kind of bad entry beside three good images. */
static void bad_corpus(const char *dir, vl_image_buf_t *good_png, vl_image_buf_t *good_jpg,
                       vl_image_buf_t *good_gray) {
  char path[512], target[512];
  encoded(80, 60, 3, VL_IMG_PNG, 1, good_png);
  encoded(90, 70, 3, VL_IMG_JPEG, 2, good_jpg);
  encoded(30, 20, 1, VL_IMG_PNG, 3, good_gray);
  write_file(dir, "a-good.png", good_png->p, good_png->n);
  write_file(dir, "b-good.dat", good_jpg->p, good_jpg->n); /* a JPEG under another name */
  snprintf(path, sizeof(path), "%s/sub", dir);
  ASSERT_INT_EQ(mkdir(path, 0755), 0);
  write_file(path, "z-good.jpeg", good_gray->p, good_gray->n); /* a PNG named .jpeg */
  snprintf(target, sizeof(target), "%s/sub/up", dir);
  ASSERT_INT_EQ(symlink("..", target), 0); /* a loop back to the root */

  for (int f = 0; f < 2; f++) {
    const vl_image_buf_t *b = f ? good_jpg : good_png;
    const char *ext = f ? "jpg" : "png";
    /* PNG: scrambled bytes in IDAT (CRC and Adler-32 catch them). JPEG has no checksum, so
     * scrambled entropy data can decode to garbage unnoticed; damage the decoder can see instead:
     * end-of-image markers in the middle of the scan. */
    uint8_t *c = malloc(b->n);
    memcpy(c, b->p, b->n);
    for (size_t i = b->n / 2; i < b->n / 2 + 32; i++)
      c[i] = f ? (i % 2 ? 0xd9 : 0xff) : c[i] ^ 0xa5;
    snprintf(path, sizeof(path), "c-corrupt.%s", ext);
    write_file(dir, path, c, b->n);
    size_t cuts[3] = {30, b->n / 2, b->n - 1};
    for (int k = 0; k < 3; k++) {
      snprintf(path, sizeof(path), "d-trunc%d.%s", k, ext);
      write_file(dir, path, b->p, cuts[k]);
    }
    free(c);
  }
  write_file(dir, "e-empty.png", "", 0);
  const char *text = "just some text, not an image\n";
  write_file(dir, "f-text.jpg", text, strlen(text));
  /* A valid PNG header declaring 100000 x 100000. */
  static const uint8_t bomb[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0,   0, 0,    13,
                                 'I',  'H', 'D', 'R', 0,    1,    0x86, 0xa0, 0,   1, 0x86, 0xa0,
                                 8,    2,   0,   0,   0,    0,    0,    0,    0,   0, 0,    0,
                                 0,    'I', 'E', 'N', 'D',  0xae, 0x42, 0x60, 0x82};
  uint8_t bomb2[sizeof(bomb)];
  memcpy(bomb2, bomb, sizeof(bomb));
  uLong crc = crc32(0, bomb2 + 12, 17);
  bomb2[29] = (uint8_t)(crc >> 24), bomb2[30] = (uint8_t)(crc >> 16);
  bomb2[31] = (uint8_t)(crc >> 8), bomb2[32] = (uint8_t)crc;
  write_file(dir, "g-bomb.png", bomb2, sizeof(bomb2));
  snprintf(target, sizeof(target), "%s/h-self", dir);
  ASSERT_INT_EQ(symlink("h-self", target), 0); /* a link to itself */
  snprintf(target, sizeof(target), "%s/i-dangling", dir);
  ASSERT_INT_EQ(symlink("nowhere", target), 0);
  snprintf(target, sizeof(target), "%s/j-fifo", dir);
  ASSERT_INT_EQ(mkfifo(target, 0644), 0);
  write_file(dir, ".hidden.png", text, strlen(text)); /* ignored silently */
}

TEST_IMPL(corpus_bad_files) {
  char *dir = temp_dir();
  vl_image_buf_t png = {0}, jpg = {0}, gray = {0};
  bad_corpus(dir, &png, &jpg, &gray);
  /* An unreadable file. Root reads anything, so as root the build runs with the effective uid of
   * nobody (this test is its own process); where that is not allowed, the case is skipped. */
  write_file(dir, "k-secret.png", png.p, png.n);
  char secret[512];
  snprintf(secret, sizeof(secret), "%s/k-secret.png", dir);
  ASSERT_INT_EQ(chmod(secret, 0), 0);
  ASSERT_INT_EQ(chmod(dir, 0755), 0);
  int was_root = geteuid() == 0, unreadable = 1;
  if (was_root && seteuid(65534) != 0) {
    fprintf(stderr, "root, and cannot drop to nobody: the unreadable-file case is skipped\n");
    unreadable = 0;
    ASSERT_INT_EQ(unlink(secret), 0);
  }
  warnings_t w = {0};
  root_dir = dir;
  vl_imagepool_opts_t o = {.corpus = dir, .warn = collect, .warn_arg = &w};
  vl_imagepool_t pool;
  build_ok(&pool, &o);
  if (was_root && unreadable)
    ASSERT_INT_EQ(seteuid(0), 0);
  /* The three good images, in path order, byte for byte. */
  ASSERT_UINT_EQ(pool.n, 3);
  const vl_image_buf_t *want[3] = {&png, &jpg, &gray};
  const char *names[3] = {"a-good.png", "b-good.dat", "sub/z-good.jpeg"};
  for (int i = 0; i < 3; i++) {
    ASSERT_UINT_EQ(pool.img[i].bytes, want[i]->n);
    size_t n;
    uint8_t *p = reference_decode(pool.img[i].uri, &n);
    ASSERT_UINT_EQ(n, want[i]->n);
    ASSERT_MEM_EQ(p, want[i]->p, n);
    free(p);
    ASSERT_INT_EQ(pool.img[i].quality, 0);
    char full[512];
    snprintf(full, sizeof(full), "%s/%s", dir, names[i]);
    ASSERT_STR_EQ(pool.img[i].origin, full);
  }
  ASSERT_INT_EQ(pool.img[0].fmt, VL_IMG_PNG);
  ASSERT_INT_EQ(pool.img[1].fmt, VL_IMG_JPEG);
  ASSERT_INT_EQ(pool.img[2].fmt, VL_IMG_PNG);
  ASSERT_INT_EQ(pool.img[2].channels, 1);
  /* One warning per bad entry, nothing for the hidden file. */
  static const char *expect[] = {
      "corrupt c-corrupt.jpg", "corrupt c-corrupt.png", "corrupt d-trunc0.jpg",
      "corrupt d-trunc0.png",  "corrupt d-trunc1.jpg",  "corrupt d-trunc1.png",
      "corrupt d-trunc2.jpg",  "corrupt d-trunc2.png",  "empty e-empty.png",
      "not_image f-text.jpg",  "too_big g-bomb.png",    "loop h-self",
      "other i-dangling",      "other j-fifo",          "loop sub/up",
  };
  for (int i = 0; i < w.n; i++)
    fprintf(stderr, "  warning: %s\n", w.line[i]);
  for (size_t i = 0; i < VL_ARRAY_SIZE(expect); i++) {
    if (!has_warning(&w, expect[i]))
      fprintf(stderr, "missing warning: %s\n", expect[i]);
    ASSERT(has_warning(&w, expect[i]));
  }
  if (unreadable)
    ASSERT(has_warning(&w, "unreadable k-secret.png"));
  ASSERT_INT_EQ(w.n, (int)VL_ARRAY_SIZE(expect) + unreadable);
  ASSERT_UINT_EQ(pool.skipped, (size_t)w.n);
  ASSERT_UINT_EQ(pool.skips[VL_SKIP_CORRUPT], 8);
  ASSERT_UINT_EQ(pool.skips[VL_SKIP_LOOP], 2);
  ASSERT_UINT_EQ(pool.entries, 3 + (size_t)w.n);
  vl_imagepool_free(&pool);

  /* A cap keeps the first images in path order. */
  w.n = 0;
  o.count = 2;
  build_ok(&pool, &o);
  ASSERT_UINT_EQ(pool.n, 2);
  ASSERT_UINT_EQ(pool.img[1].bytes, jpg.n);
  vl_imagepool_free(&pool);

  /* A lower pixel limit skips the larger images as too big. */
  w.n = 0;
  o.count = 0;
  o.max_pixels = 80 * 60 - 1;
  build_ok(&pool, &o);
  ASSERT_UINT_EQ(pool.n, 1);
  ASSERT(has_warning(&w, "too_big a-good.png"));
  ASSERT(has_warning(&w, "too_big b-good.dat"));
  vl_imagepool_free(&pool);

  remove_tree(dir);
  vl_image_buf_free(&png);
  vl_image_buf_free(&jpg);
  vl_image_buf_free(&gray);
}

TEST_IMPL(corpus_all_bad) {
  char *dir = temp_dir();
  write_file(dir, "notes.txt", "hello\n", 6);
  write_file(dir, "empty.png", "", 0);
  warnings_t w = {0};
  root_dir = dir;
  vl_imagepool_opts_t o = {.corpus = dir, .warn = collect, .warn_arg = &w};
  vl_imagepool_t pool;
  char err[300];
  ASSERT_INT_EQ(vl_imagepool_build(&pool, NULL, &o, err, sizeof(err)), VL_ENOENT);
  ASSERT(strstr(err, "no usable image"));
  ASSERT(strstr(err, dir));
  ASSERT_INT_EQ(w.n, 2);
  ASSERT(pool.n == 0 && pool.img == NULL);
  vl_imagepool_free(&pool);
  /* An empty directory, and none at all. */
  remove(strcat(strcpy(err, dir), "/notes.txt"));
  remove(strcat(strcpy(err, dir), "/empty.png"));
  ASSERT_INT_EQ(vl_imagepool_build(&pool, NULL, &o, err, sizeof(err)), VL_ENOENT);
  remove_tree(dir);
  o.corpus = "/nonexistent/vlmload-corpus";
  ASSERT_INT_EQ(vl_imagepool_build(&pool, NULL, &o, err, sizeof(err)), VL_ENOENT);
  ASSERT(strstr(err, "/nonexistent/vlmload-corpus"));
}

TEST_IMPL(corpus_resized) {
  char *dir = temp_dir();
  vl_image_buf_t png = {0}, jpg = {0}, rgba = {0};
  encoded(200, 100, 3, VL_IMG_PNG, 1, &png);
  encoded(150, 120, 3, VL_IMG_JPEG, 2, &jpg);
  encoded(64, 64, 4, VL_IMG_PNG, 3, &rgba);
  write_file(dir, "1.png", png.p, png.n);
  write_file(dir, "2.jpg", jpg.p, jpg.n);
  write_file(dir, "3.png", rgba.p, rgba.n);
  vl_imagespec_res_t res;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&res, "48x32", NULL, 0), 0);
  /* Each keeps its format... */
  vl_imagepool_opts_t o = {.corpus = dir, .res = &res, .keep_raw = 1};
  vl_imagepool_t pool;
  build_ok(&pool, &o);
  ASSERT_UINT_EQ(pool.n, 3);
  for (size_t i = 0; i < 3; i++) {
    ASSERT_INT_EQ(pool.img[i].w, 48);
    ASSERT_INT_EQ(pool.img[i].h, 32);
  }
  ASSERT_INT_EQ(pool.img[0].fmt, VL_IMG_PNG);
  ASSERT_INT_EQ(pool.img[1].fmt, VL_IMG_JPEG);
  ASSERT_INT_EQ(pool.img[1].quality, VL_IMAGE_JPEG_QUALITY);
  ASSERT_INT_EQ(pool.img[2].channels, 4);
  vl_imagepool_free(&pool);
  /* ...or all become JPEG, RGBA losing its alpha. */
  o.fmt = VL_IMG_JPEG;
  build_ok(&pool, &o);
  for (size_t i = 0; i < 3; i++) {
    ASSERT_INT_EQ(pool.img[i].fmt, VL_IMG_JPEG);
    ASSERT_INT_EQ(pool.img[i].channels, 3);
  }
  vl_imagepool_free(&pool);
  /* A single file is a corpus of one. */
  char file[512];
  snprintf(file, sizeof(file), "%s/2.jpg", dir);
  o = (vl_imagepool_opts_t){.corpus = file};
  build_ok(&pool, &o);
  ASSERT_UINT_EQ(pool.n, 1);
  ASSERT_UINT_EQ(pool.img[0].bytes, jpg.n);
  vl_imagepool_free(&pool);
  remove_tree(dir);
  vl_image_buf_free(&png);
  vl_image_buf_free(&jpg);
  vl_image_buf_free(&rgba);
}

/* The repository's bundled corpus loads whole, every entry an image: nothing is skipped. */
TEST_IMPL(bundled_corpus) {
  warnings_t w = {0};
  root_dir = VL_CORPUS_DIR;
  vl_imagepool_opts_t o = {.corpus = VL_CORPUS_DIR, .warn = collect, .warn_arg = &w};
  vl_imagepool_t pool;
  build_ok(&pool, &o);
  for (int i = 0; i < w.n; i++)
    fprintf(stderr, "  warning: %s\n", w.line[i]);
  ASSERT_INT_EQ(w.n, 0);
  ASSERT_UINT_EQ(pool.skipped, 0);
  ASSERT_UINT_EQ(pool.n, pool.entries);
  ASSERT(pool.n >= 12);
  int png = 0, jpeg = 0, gray = 0, rgba = 0;
  size_t total = 0;
  for (size_t i = 0; i < pool.n; i++) {
    png += pool.img[i].fmt == VL_IMG_PNG;
    jpeg += pool.img[i].fmt == VL_IMG_JPEG;
    gray += pool.img[i].channels == 1;
    rgba += pool.img[i].channels == 4;
    total += pool.img[i].bytes;
  }
  ASSERT(png >= 4 && jpeg >= 4 && gray >= 2 && rgba >= 2);
  ASSERT(total < 1500000);
  vl_imagepool_free(&pool);
  /* Resized and re-encoded, every one of them. */
  vl_imagespec_res_t res;
  ASSERT_INT_EQ(vl_imagespec_res_parse(&res, "100x100-300x200", NULL, 0), 0);
  w.n = 0;
  o.res = &res;
  build_ok(&pool, &o);
  ASSERT_INT_EQ(w.n, 0);
  ASSERT_UINT_EQ(pool.n, pool.entries);
  vl_imagepool_free(&pool);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(synthetic_default),        TEST_ENTRY(synthetic_mixed),
      TEST_ENTRY(synthetic_seeded),         TEST_ENTRY(uri_reference_decoder),
      TEST_ENTRY(progress_and_caller_loop), TEST_ENTRY(bad_options),
      TEST_ENTRY(corpus_bad_files),         TEST_ENTRY(corpus_all_bad),
      TEST_ENTRY(corpus_resized),           TEST_ENTRY(bundled_corpus),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
