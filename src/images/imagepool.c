#include "vlmload/imagepool.h"
#include "vlmload/base64.h"
#include "codec.h"
#include "vlmload/common.h"
#include "pixels.h"
#include "vlmload/rng.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RNG_STREAM_SIZES  0x1a6e0001u /* per image: its size */
#define RNG_STREAM_RENDER 0x1a6e0002u /* per image: its content seed */
#define IN_FLIGHT         16          /* work items queued at once */

const char *vl_imagepool_skip_name(vl_imagepool_skip_t why) {
  static const char *const names[VL_SKIP__COUNT] = {
      [VL_SKIP_UNREADABLE] = "unreadable", [VL_SKIP_EMPTY] = "empty",
      [VL_SKIP_NOT_IMAGE] = "not_image",   [VL_SKIP_CORRUPT] = "corrupt",
      [VL_SKIP_TOO_BIG] = "too_big",       [VL_SKIP_LOOP] = "loop",
      [VL_SKIP_OTHER] = "other",
  };
  return (unsigned)why < VL_SKIP__COUNT ? names[why] : "unknown";
}

const char *vl_imagepool_uri_prefix(vl_image_fmt_t fmt) {
  return fmt == VL_IMG_PNG ? VL_IMAGE_URI_PREFIX_PNG : VL_IMAGE_URI_PREFIX_JPEG;
}

size_t vl_imagepool_uri_len(vl_image_fmt_t fmt, size_t n) {
  return strlen(vl_imagepool_uri_prefix(fmt)) + vl_base64_encoded_len(n);
}

size_t vl_imagepool_uri_write(char *dst, vl_image_fmt_t fmt, const uint8_t *bytes, size_t n) {
  const char *prefix = vl_imagepool_uri_prefix(fmt);
  size_t k = strlen(prefix);
  memcpy(dst, prefix, k);
  k += vl_base64_encode(dst + k, bytes, n);
  dst[k] = '\0';
  return k;
}

/* --- the build ------------------------------------------------------------------------------ */

typedef struct build_s build_t;

/* One image to make: a synthetic one, or a corpus entry. Work callbacks write only their own
 * item; the loop thread reads it after the work is done. */
typedef struct {
  uv_work_t req;
  build_t *b;
  size_t index;
  /* synthetic */
  int w, h, channels;
  vl_image_fmt_t fmt;
  int interlace, progressive;
  uint64_t render_seed;
  /* corpus */
  char *path;
  int skip; /* a vl_imagepool_skip_t, or -1 */
  char msg[200];
  /* result */
  int rc; /* fatal error: fails the whole build */
  int done;
  vl_imagepool_image_t img;
} item_t;

struct build_s {
  const vl_imagepool_opts_t *o;
  uv_loop_t *loop;
  item_t *items;
  size_t n_items, cap_items;
  size_t next;      /* next item to queue */
  size_t in_flight; /* queued, not yet done */
  size_t completed; /* done */
  size_t usable;    /* done with an image */
  size_t want;      /* corpus: images wanted (0: all) */
  int fatal;        /* first fatal error */
  char fatal_msg[200];
  vl_imagespec_res_t res;
  int have_res;
  /* corpus walk */
  struct {
    dev_t dev;
    ino_t ino;
  } * dirs;
  size_t n_dirs, cap_dirs;
};

static void fmt_msg(char *dst, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, n, fmt, ap);
  va_end(ap);
}

/* Fills img's URI, hash and metadata from encoded bytes and the pixels they hold. Takes raw's
 * buffer when keep_raw, else leaves raw alone. */
static int finish_image(item_t *it, const uint8_t *bytes, size_t n, vl_image_fmt_t fmt,
                        vl_raw_t *raw, int quality) {
  vl_imagepool_image_t *img = &it->img;
  size_t len = vl_imagepool_uri_len(fmt, n);
  char *uri = malloc(len + 1);
  if (!uri)
    return VL_ENOMEM;
  vl_imagepool_uri_write(uri, fmt, bytes, n);
  img->uri = uri;
  img->uri_len = len;
  img->bytes = n;
  img->fmt = fmt;
  img->w = raw->w;
  img->h = raw->h;
  img->channels = raw->channels;
  img->quality = quality;
  img->pixel_hash = vl_image_hash(raw);
  if (it->b->o->keep_raw) {
    img->raw = *raw;
    memset(raw, 0, sizeof(*raw));
  }
  return 0;
}

static void work_synthetic(uv_work_t *req) {
  item_t *it = vl_container_of(req, item_t, req);
  const vl_imagepool_opts_t *o = it->b->o;
  vl_raw_t raw = {0};
  vl_image_buf_t enc = {0};
  vl_codec_t codec = {0};
  int rc = vl_image_raw_alloc(&raw, it->w, it->h, it->channels);
  if (!rc)
    rc = vl_image_render(&raw, o->content, it->render_seed);
  vl_codec_opts_t eo = {.fmt = it->fmt,
                        .quality = o->quality,
                        .progressive = it->progressive,
                        .interlace = it->interlace,
                        .png_level = o->png_level};
  if (!rc)
    rc = vl_codec_encode(&codec, &raw, &eo, &enc);
  if (!rc)
    rc = finish_image(it, enc.p, enc.n, it->fmt, &raw,
                      it->fmt == VL_IMG_JPEG ? (o->quality ? o->quality : VL_IMAGE_JPEG_QUALITY)
                                             : 0);
  if (rc)
    fmt_msg(it->msg, sizeof(it->msg), "cannot make synthetic image %zu (%dx%d %s): %s", it->index,
            it->w, it->h, vl_image_fmt_name(it->fmt), vl_strerror(rc));
  it->rc = rc;
  vl_codec_free(&codec);
  vl_image_buf_free(&enc);
  vl_image_raw_free(&raw);
}

static void skip(item_t *it, vl_imagepool_skip_t why, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(it->msg, sizeof(it->msg), fmt, ap);
  va_end(ap);
  it->skip = (int)why;
}

/* Reads a whole file, refusing empty, oversized and non-image ones before reading them all. */
static int read_file(item_t *it, uint8_t **out, size_t *len) {
  const vl_imagepool_opts_t *o = it->b->o;
  uint64_t max_file = o->max_file ? o->max_file : VL_IMAGEPOOL_MAX_FILE;
  int fd = open(it->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    skip(it, VL_SKIP_UNREADABLE, "cannot open: %s", strerror(errno));
    return -1;
  }
  struct stat st;
  uint8_t *buf = NULL;
  if (fstat(fd, &st) != 0) {
    skip(it, VL_SKIP_UNREADABLE, "cannot stat: %s", strerror(errno));
    goto fail;
  }
  if (!S_ISREG(st.st_mode)) {
    skip(it, VL_SKIP_OTHER, "not a regular file");
    goto fail;
  }
  if (st.st_size == 0) {
    skip(it, VL_SKIP_EMPTY, "empty file");
    goto fail;
  }
  if ((uint64_t)st.st_size > max_file) {
    skip(it, VL_SKIP_TOO_BIG, "%lld bytes, over the %llu-byte file limit", (long long)st.st_size,
         (unsigned long long)max_file);
    goto fail;
  }
  size_t size = (size_t)st.st_size, got = 0;
  if (!(buf = malloc(size))) {
    it->rc = VL_ENOMEM;
    goto fail;
  }
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      skip(it, VL_SKIP_UNREADABLE, "read failed: %s", strerror(errno));
      goto fail;
    }
    if (r == 0)
      break; /* the file shrank: judge what is there */
    got += (size_t)r;
    if (got >= 16 && got - (size_t)r < 16 && vl_codec_detect(buf, got) == VL_IMG_UNKNOWN)
      break; /* not an image: no need to read the rest */
  }
  close(fd);
  if (got == 0) {
    free(buf);
    skip(it, VL_SKIP_EMPTY, "empty file");
    return -1;
  }
  *out = buf;
  *len = got;
  return 0;
fail:
  free(buf);
  close(fd);
  return -1;
}

static void work_corpus(uv_work_t *req) {
  item_t *it = vl_container_of(req, item_t, req);
  build_t *b = it->b;
  const vl_imagepool_opts_t *o = b->o;
  uint64_t max_pixels = o->max_pixels ? o->max_pixels : VL_IMAGE_MAX_PIXELS;
  uint8_t *data = NULL;
  size_t n = 0;
  vl_raw_t raw = {0}, sized = {0};
  vl_image_buf_t enc = {0};
  vl_codec_t codec = {0};
  vl_codec_info_t info;
  int rc;

  if (read_file(it, &data, &n) != 0)
    goto done;
  vl_image_fmt_t fmt = vl_codec_detect(data, n);
  if (fmt == VL_IMG_UNKNOWN) {
    skip(it, VL_SKIP_NOT_IMAGE, "not a PNG or JPEG file");
    goto done;
  }
  if (vl_codec_probe(data, n, &info) != 0) {
    skip(it, VL_SKIP_CORRUPT, "malformed or truncated %s header", vl_image_fmt_name(fmt));
    goto done;
  }
  if (info.w > VL_IMAGE_MAX_SIDE || info.h > VL_IMAGE_MAX_SIDE ||
      (uint64_t)info.w * (uint64_t)info.h > max_pixels) {
    skip(it, VL_SKIP_TOO_BIG, "%dx%d is over the limit of %llu pixels and %d per side", info.w,
         info.h, (unsigned long long)max_pixels, VL_IMAGE_MAX_SIDE);
    goto done;
  }
  rc = vl_codec_decode(&codec, data, n, max_pixels, &raw);
  if (rc == VL_ENOMEM) {
    it->rc = rc;
    goto done;
  }
  if (rc == VL_E2BIG) {
    skip(it, VL_SKIP_TOO_BIG, "%dx%d is over the pixel limit", info.w, info.h);
    goto done;
  }
  if (rc) {
    skip(it, VL_SKIP_CORRUPT, "%s does not decode: corrupt or truncated", vl_image_fmt_name(fmt));
    goto done;
  }
  if (!b->have_res) {
    it->rc = finish_image(it, data, n, fmt, &raw, 0);
    goto done;
  }
  /* Resize and re-encode: the size comes from the file's place in the walk, so it is the same
   * every run with the same seed. */
  vl_rng_t rng;
  vl_rng_init(&rng, o->seed ^ it->index, RNG_STREAM_SIZES);
  int w, h;
  vl_imagespec_res_sample(&b->res, &rng, &w, &h);
  if (info.orientation != 1 && (rc = vl_pixels_orient(&raw, info.orientation)) != 0) {
    it->rc = rc;
    goto done;
  }
  if ((rc = vl_pixels_resize(&raw, &sized, w, h)) != 0) {
    it->rc = rc;
    goto done;
  }
  vl_image_fmt_t ofmt = o->fmt == VL_IMG_PNG || o->fmt == VL_IMG_JPEG ? o->fmt : fmt;
  vl_codec_opts_t eo = {.fmt = ofmt, .quality = o->quality, .png_level = o->png_level};
  if ((rc = vl_codec_encode(&codec, &sized, &eo, &enc)) != 0) {
    it->rc = rc;
    fmt_msg(it->msg, sizeof(it->msg), "cannot re-encode %s: %s", it->path, vl_strerror(rc));
    goto done;
  }
  /* A JPEG holds no alpha: record the pixels it actually carries. */
  if (ofmt == VL_IMG_JPEG && sized.channels == 4) {
    for (size_t i = 0, np = (size_t)sized.w * sized.h; i < np; i++)
      memmove(sized.px + i * 3, sized.px + i * 4, 3);
    sized.channels = 3;
  }
  it->rc =
      finish_image(it, enc.p, enc.n, ofmt, &sized,
                   ofmt == VL_IMG_JPEG ? (o->quality ? o->quality : VL_IMAGE_JPEG_QUALITY) : 0);
done:
  if (it->rc && !it->msg[0])
    fmt_msg(it->msg, sizeof(it->msg), "%s: %s", it->path, vl_strerror(it->rc));
  free(data);
  vl_codec_free(&codec);
  vl_image_buf_free(&enc);
  vl_image_raw_free(&raw);
  vl_image_raw_free(&sized);
}

static void pump(build_t *b);

static void after_work(uv_work_t *req, int status) {
  item_t *it = vl_container_of(req, item_t, req);
  build_t *b = it->b;
  b->in_flight--;
  b->completed++;
  it->done = 1;
  if (status != 0 && !it->rc)
    it->rc = VL_EUV;
  if (it->rc && !b->fatal) {
    b->fatal = it->rc;
    snprintf(b->fatal_msg, sizeof(b->fatal_msg), "%s", it->msg[0] ? it->msg : vl_strerror(it->rc));
  }
  if (it->img.uri)
    b->usable++;
  if (b->o->progress)
    b->o->progress(b->o->progress_arg, b->completed, b->n_items);
  pump(b);
}

/* Queues items while there is room, no fatal error, and (with a cap) too few images so far. */
static void pump(build_t *b) {
  while (!b->fatal && b->in_flight < IN_FLIGHT && b->next < b->n_items) {
    if (b->want && b->usable >= b->want)
      return;
    item_t *it = &b->items[b->next++];
    if (it->skip >= 0) {
      /* Skipped by the walk: nothing to do on the threadpool. */
      it->done = 1;
      b->completed++;
      continue;
    }
    int rc = uv_queue_work(b->loop, &it->req, it->path ? work_corpus : work_synthetic, after_work);
    if (rc) {
      b->fatal = VL_EUV;
      snprintf(b->fatal_msg, sizeof(b->fatal_msg), "cannot queue work: %s", uv_strerror(rc));
      return;
    }
    b->in_flight++;
  }
}

/* --- corpus walk ------------------------------------------------------------------------------ */

static item_t *add_item(build_t *b) {
  if (b->n_items == b->cap_items) {
    b->cap_items = b->cap_items ? b->cap_items * 2 : 64;
    b->items = vl_xrealloc(b->items, b->cap_items * sizeof(item_t));
  }
  item_t *it = &b->items[b->n_items];
  memset(it, 0, sizeof(*it));
  it->index = b->n_items++;
  it->b = b;
  it->skip = -1;
  return it;
}

static void add_skip(build_t *b, const char *path, vl_imagepool_skip_t why, const char *fmt, ...) {
  item_t *it = add_item(b);
  it->path = vl_xstrdup(path);
  it->skip = (int)why;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(it->msg, sizeof(it->msg), fmt, ap);
  va_end(ap);
}

/* Remembers a directory; returns 1 when it was seen before. */
static int visit_dir(build_t *b, const struct stat *st) {
  for (size_t i = 0; i < b->n_dirs; i++)
    if (b->dirs[i].dev == st->st_dev && b->dirs[i].ino == st->st_ino)
      return 1;
  if (b->n_dirs == b->cap_dirs) {
    b->cap_dirs = b->cap_dirs ? b->cap_dirs * 2 : 16;
    b->dirs = vl_xrealloc(b->dirs, b->cap_dirs * sizeof(*b->dirs));
  }
  b->dirs[b->n_dirs].dev = st->st_dev;
  b->dirs[b->n_dirs].ino = st->st_ino;
  b->n_dirs++;
  return 0;
}

static int cmp_names(const void *a, const void *c) {
  return strcmp(*(char *const *)a, *(char *const *)c);
}

/* Walks dir (already known to be a directory, with stat st), adding an item per entry in name
 * order. Symbolic links are followed, but a directory already visited (a loop, or the same tree
 * reached twice) is not entered again. Only one directory is open at a time. */
static void walk(build_t *b, const char *dir, int depth) {
  DIR *d = opendir(dir);
  if (!d) {
    add_skip(b, dir, VL_SKIP_UNREADABLE, "cannot open directory: %s", strerror(errno));
    return;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  errno = 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue; /* ".", "..", and hidden entries */
    if (n == cap) {
      cap = cap ? cap * 2 : 32;
      names = vl_xrealloc(names, cap * sizeof(char *));
    }
    names[n++] = vl_xstrdup(e->d_name);
    errno = 0;
  }
  if (errno)
    add_skip(b, dir, VL_SKIP_UNREADABLE, "error reading the directory (walked in part): %s",
             strerror(errno));
  closedir(d);
  if (n)
    qsort(names, n, sizeof(char *), cmp_names);
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(dir) + strlen(names[i]) + 2;
    char *path = vl_xmalloc(len);
    snprintf(path, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", names[i]);
    struct stat lst, st;
    if (lstat(path, &lst) != 0) {
      add_skip(b, path, VL_SKIP_UNREADABLE, "cannot stat: %s", strerror(errno));
    } else if (stat(path, &st) != 0) {
      if (errno == ELOOP)
        add_skip(b, path, VL_SKIP_LOOP, "symbolic link loop");
      else
        add_skip(b, path, VL_SKIP_OTHER, "dangling symbolic link: %s", strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
      if (visit_dir(b, &st))
        add_skip(b, path, VL_SKIP_LOOP,
                 "directory already visited (a symbolic link loop or a second path to it)");
      else if (depth >= VL_IMAGEPOOL_MAX_DEPTH)
        add_skip(b, path, VL_SKIP_OTHER, "nested deeper than %d directories",
                 VL_IMAGEPOOL_MAX_DEPTH);
      else
        walk(b, path, depth + 1);
    } else if (S_ISREG(st.st_mode)) {
      item_t *it = add_item(b);
      it->path = path;
      path = NULL;
    } else {
      add_skip(b, path, VL_SKIP_OTHER, "not a regular file");
    }
    free(path);
    free(names[i]);
  }
  free(names);
}

/* --- synthetic plan --------------------------------------------------------------------------- */

static void plan_synthetic(build_t *b) {
  const vl_imagepool_opts_t *o = b->o;
  size_t count = o->count ? o->count : VL_IMAGEPOOL_DEFAULT_COUNT;
  for (size_t i = 0; i < count; i++) {
    item_t *it = add_item(b);
    vl_rng_t rng;
    vl_rng_init(&rng, o->seed ^ (i * 0x9e3779b97f4a7c15ull), RNG_STREAM_SIZES);
    vl_imagespec_res_sample(&b->res, &rng, &it->w, &it->h);
    vl_rng_init(&rng, o->seed ^ (i * 0x9e3779b97f4a7c15ull), RNG_STREAM_RENDER);
    it->render_seed = vl_rng_next(&rng);
    it->channels = 3;
    if (o->fmt == VL_IMG_MIXED) {
      /* A fixed rotation, so that every PNG colour type and both JPEG kinds appear in any pool of
       * a dozen images, whatever the seed. */
      size_t k = i / 2;
      if (i % 2 == 0) {
        static const int png_channels[3] = {3, 4, 1};
        it->fmt = VL_IMG_PNG;
        it->channels = png_channels[k % 3];
        it->interlace = k % 4 == 3;
      } else {
        it->fmt = VL_IMG_JPEG;
        it->channels = k % 3 == 2 ? 1 : 3;
        it->progressive = k % 4 == 1;
      }
    } else {
      it->fmt = o->fmt == VL_IMG_PNG ? VL_IMG_PNG : VL_IMG_JPEG;
    }
  }
}

/* --- entry points ----------------------------------------------------------------------------- */

static void free_image(vl_imagepool_image_t *img) {
  free((char *)img->uri);
  if (img->origin && strcmp(img->origin, "synthetic") != 0)
    free((char *)img->origin);
  vl_image_raw_free(&img->raw);
  memset(img, 0, sizeof(*img));
}

void vl_imagepool_free(vl_imagepool_t *pool) {
  if (!pool)
    return;
  for (size_t i = 0; i < pool->n; i++)
    free_image(&pool->img[i]);
  free(pool->img);
  memset(pool, 0, sizeof(*pool));
}

static void warn_default(void *arg, vl_imagepool_skip_t why, const char *path, const char *msg) {
  (void)arg;
  (void)why;
  fprintf(stderr, "vlmload: skipping %s: %s\n", path, msg);
}

int vl_imagepool_build(vl_imagepool_t *pool, uv_loop_t *loop, const vl_imagepool_opts_t *o,
                       char *err, size_t errlen) {
  char dummy[8];
  if (!err || !errlen) {
    err = dummy;
    errlen = sizeof(dummy);
  }
  err[0] = '\0';
  if (!pool || !o) {
    snprintf(err, errlen, "no pool or options");
    return VL_EINVAL;
  }
  memset(pool, 0, sizeof(*pool));
  if (o->fmt != VL_IMG_UNKNOWN && o->fmt != VL_IMG_PNG && o->fmt != VL_IMG_JPEG &&
      o->fmt != VL_IMG_MIXED) {
    snprintf(err, errlen, "unknown image format");
    return VL_EINVAL;
  }
  if (o->quality < 0 || o->quality > 100 || o->png_level < 0 || o->png_level > 9 ||
      (unsigned)o->content > VL_CONTENT_MIXED) {
    snprintf(err, errlen, "JPEG quality must be 1..100, PNG level 1..9");
    return VL_EINVAL;
  }
  build_t b;
  memset(&b, 0, sizeof(b));
  b.o = o;
  if (o->res) {
    if (o->res->n < 1 || o->res->total_weight < 1) {
      snprintf(err, errlen, "empty resolution spec");
      return VL_EINVAL;
    }
    b.res = *o->res;
    b.have_res = 1;
  } else {
    vl_imagespec_res_default(&b.res);
    b.have_res = !o->corpus;
  }

  int rc = 0;
  if (o->corpus) {
    struct stat st;
    if (stat(o->corpus, &st) != 0) {
      snprintf(err, errlen, "image corpus %s: %s", o->corpus, strerror(errno));
      return errno == ENOENT ? VL_ENOENT : -errno;
    }
    if (S_ISDIR(st.st_mode)) {
      visit_dir(&b, &st);
      walk(&b, o->corpus, 1);
    } else {
      add_item(&b)->path = vl_xstrdup(o->corpus);
    }
    b.want = o->count;
  } else {
    plan_synthetic(&b);
  }

  uv_loop_t own;
  if (!loop) {
    if ((rc = uv_loop_init(&own)) != 0) {
      snprintf(err, errlen, "cannot start an event loop: %s", uv_strerror(rc));
      rc = VL_EUV;
      goto out;
    }
    loop = &own;
  }
  b.loop = loop;
  pump(&b);
  while (b.in_flight > 0) {
    uv_run(loop, UV_RUN_ONCE);
    pump(&b);
  }
  if (loop == &own)
    uv_loop_close(&own);

  /* Collect in item order: the pool does not depend on which thread finished first. */
  vl_imagepool_warn_cb warn = o->warn ? o->warn : warn_default;
  size_t keep = b.want ? b.want : SIZE_MAX;
  pool->img = vl_xcalloc(b.n_items ? b.n_items : 1, sizeof(vl_imagepool_image_t));
  for (size_t i = 0; i < b.n_items; i++) {
    item_t *it = &b.items[i];
    if (!it->done)
      break;
    if (it->skip >= 0 && !b.fatal) {
      pool->skipped++;
      pool->skips[it->skip]++;
      warn(o->warn_arg, (vl_imagepool_skip_t)it->skip, it->path, it->msg);
    }
    pool->entries++;
    if (it->img.uri && pool->n < keep) {
      vl_imagepool_image_t *img = &pool->img[pool->n++];
      *img = it->img;
      img->origin = it->path ? it->path : "synthetic";
      it->path = NULL;
      memset(&it->img, 0, sizeof(it->img));
      pool->uri_bytes += img->uri_len + 1;
      pool->total_bytes += img->uri_len + 1 + img->raw.cap + sizeof(*img);
      pool->raw_bytes += img->raw.cap;
      if (img->origin && strcmp(img->origin, "synthetic") != 0)
        pool->total_bytes += strlen(img->origin) + 1;
      pool->max_bytes = VL_MAX(pool->max_bytes, img->bytes);
      pool->max_raw = VL_MAX(pool->max_raw, (size_t)img->w * img->h * img->channels);
      pool->max_w = VL_MAX(pool->max_w, img->w);
      pool->max_h = VL_MAX(pool->max_h, img->h);
      if (pool->n == keep)
        break;
    }
  }
  if (b.fatal) {
    snprintf(err, errlen, "%s", b.fatal_msg);
    rc = b.fatal;
  } else if (pool->n == 0) {
    if (o->corpus)
      snprintf(err, errlen,
               "no usable image in %s: %zu entries looked at, %zu skipped (PNG and JPEG files "
               "are recognised by content)",
               o->corpus, pool->entries, pool->skipped);
    else
      snprintf(err, errlen, "no images asked for");
    rc = VL_ENOENT;
  }

out:
  for (size_t i = 0; i < b.n_items; i++) {
    free(b.items[i].path);
    free_image(&b.items[i].img);
  }
  free(b.items);
  free(b.dirs);
  if (rc)
    vl_imagepool_free(pool);
  return rc;
}

void vl_imagepool_describe(const vl_imagepool_t *p, const char *source, char *out, size_t n) {
  int len = snprintf(out, n, "%zu image%s (%.1f MB", p->n, p->n == 1 ? "" : "s",
                     (double)p->total_bytes / 1e6);
  if (len >= 0 && (size_t)len < n && p->raw_bytes)
    len += snprintf(out + len, n - (size_t)len,
                    ", with %.1f MB of decoded pixels kept for --unique-images to stamp",
                    (double)p->raw_bytes / 1e6);
  if (len >= 0 && (size_t)len < n)
    len += snprintf(out + len, n - (size_t)len, ") from %s", source);
  if (len >= 0 && (size_t)len < n && p->skipped)
    snprintf(out + len, n - (size_t)len, ", %zu file%s skipped", p->skipped,
             p->skipped == 1 ? "" : "s");
}
