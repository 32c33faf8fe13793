/* The image pool: every image a run sends, encoded once and kept as one complete data URI.
 *
 * A pool is built either synthetically (sizes from a resolution spec, content rendered from the
 * seed, encoded as PNG, JPEG or a mix) or from a corpus directory (walked recursively, each file
 * recognised by content, validated by decoding it fully, used as is or resized and re-encoded).
 * The work runs on libuv's threadpool; vl_imagepool_build runs the given loop until it is done.
 *
 * Each image's URI ("data:image/png;base64,..." or "data:image/jpeg;base64,...", the prefix
 * matching the bytes) is one contiguous, NUL-terminated string, so a request body points at it as
 * one segment and never copies it.
 *
 * Ownership: the caller owns the vl_imagepool_t and frees it with vl_imagepool_free. Everything in
 * it (URIs, origins, raw pixels) is owned by the pool, read-only after the build, and valid until
 * that free, which must come after every request and every vl_uniq_t that points into the pool is
 * done. No reference counts: the pool outlives the run. Reading it from several threads is safe.
 */
#ifndef VLMLOAD_IMAGEPOOL_H
#define VLMLOAD_IMAGEPOOL_H

#include "vlmload/body.h"
#include "vlmload/image.h"
#include "vlmload/imagespec.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#define VL_IMAGEPOOL_DEFAULT_COUNT 32 /* synthetic images when none is asked for */
#define VL_IMAGEPOOL_MAX_FILE      ((uint64_t)256 << 20) /* default: larger files are skipped */
#define VL_IMAGEPOOL_MAX_DEPTH     64 /* directory nesting the corpus walk follows */

/* Why a corpus entry was skipped. */
typedef enum vl_imagepool_skip_e {
  VL_SKIP_UNREADABLE = 0, /* open, read or opendir failed (permissions, I/O) */
  VL_SKIP_EMPTY,          /* zero bytes */
  VL_SKIP_NOT_IMAGE,      /* neither PNG nor JPEG by its first bytes */
  VL_SKIP_CORRUPT,        /* a PNG or JPEG that does not decode fully: corrupt or truncated */
  VL_SKIP_TOO_BIG,        /* over max_pixels, a side over VL_IMAGE_MAX_SIDE, or over max_file */
  VL_SKIP_LOOP,           /* a symlink loop, or a directory reached twice */
  VL_SKIP_OTHER,          /* not a regular file or directory, a dangling link, too deep */
  VL_SKIP__COUNT
} vl_imagepool_skip_t;

const char *vl_imagepool_skip_name(vl_imagepool_skip_t why); /* "unreadable", "empty", ... */

/* Called on the loop thread, once per skipped entry, in path order, after the files are read. */
typedef void (*vl_imagepool_warn_cb)(void *arg, vl_imagepool_skip_t why, const char *path,
                                     const char *msg);
/* Called on the loop thread after each image is done: done of total, where total counts every
 * corpus entry (a cap may end the build before done reaches it). */
typedef void (*vl_imagepool_progress_cb)(void *arg, size_t done, size_t total);

typedef struct vl_imagepool_opts_s {
  /* A directory (walked recursively; entries whose names start with '.' are ignored) or one
   * file. NULL builds a synthetic pool. */
  const char *corpus;
  /* Synthetic: the sizes to draw (NULL: VL_IMAGESPEC_RES_DEFAULT). Corpus: when given, each image
   * is resized to a size drawn from it (aspect not kept), after its Exif orientation is applied,
   * and re-encoded; when NULL, files are used byte for byte. */
  const vl_imagespec_res_t *res;
  /* Synthetic: VL_IMG_JPEG (also for 0), VL_IMG_PNG or VL_IMG_MIXED (alternating formats; PNG
   * cycles through RGB, RGBA and gray, every third JPEG is grayscale, some PNGs are Adam7 and some
   * JPEGs progressive). Corpus with res: PNG or JPEG force that format; 0 or MIXED keep each
   * file's own. */
  vl_image_fmt_t fmt;
  int quality;                /* JPEG quality for what is encoded here; 0: VL_IMAGE_JPEG_QUALITY */
  int png_level;              /* zlib level for PNGs encoded here; 0: VL_IMAGE_PNG_LEVEL */
  vl_image_content_t content; /* synthetic content (0: photo-like) */
  uint64_t seed;              /* same seed, same options: byte-identical pool */
  size_t count;               /* synthetic: images (0: 32); corpus: at most this many (0: all) */
  uint64_t max_pixels;        /* corpus: decode limit w * h (0: VL_IMAGE_MAX_PIXELS) */
  uint64_t max_file;          /* corpus: larger files are skipped (0: VL_IMAGEPOOL_MAX_FILE) */
  int keep_raw;               /* keep each image's pixels in vl_imagepool_image_t.raw (vl_uniq) */
  vl_imagepool_progress_cb progress;
  void *progress_arg;
  vl_imagepool_warn_cb warn; /* NULL: one line each to stderr, "vlmload: skipping PATH: why" */
  void *warn_arg;
} vl_imagepool_opts_t;

typedef struct vl_imagepool_image_s {
  const char *uri; /* the whole data URI, NUL-terminated */
  size_t uri_len;  /* strlen(uri) */
  size_t bytes;    /* encoded image size (what the base64 decodes to) */
  vl_image_fmt_t fmt;
  int w, h;
  int channels;        /* of the pixels it decodes to (and was encoded from): 1, 3 or 4 */
  int quality;         /* JPEG quality it was encoded with; 0 when a corpus file is used as is */
  uint64_t pixel_hash; /* vl_image_hash of those pixels */
  const char *origin;  /* the corpus path, or "synthetic" */
  vl_raw_t raw;        /* the pixels, with opts.keep_raw; else px is NULL */
} vl_imagepool_image_t;

typedef struct vl_imagepool_s {
  vl_imagepool_image_t *img;
  size_t n;
  size_t total_bytes; /* all the pool holds: URIs, pixels, paths, metadata */
  size_t uri_bytes;   /* the URIs alone */
  size_t raw_bytes;   /* the decoded pixels kept (opts.keep_raw), part of total_bytes */
  size_t max_bytes;   /* the largest encoded image */
  size_t max_raw;     /* the largest w * h * channels */
  int max_w, max_h;
  /* Corpus builds: entries looked at (files, and directories or links that were skipped) and the
   * skips by reason. */
  size_t entries;
  size_t skipped;
  size_t skips[VL_SKIP__COUNT];
} vl_imagepool_t;

/* Builds a pool. loop is the loop to run the work on (NULL: a private one); the call runs it with
 * UV_RUN_ONCE until the build is done, so other handles on it keep being served, which also means
 * it must not be called from a callback of that loop. The corpus walk itself (directory reads and
 * stats) runs on the calling thread first; reading, decoding and encoding run on the threadpool.
 * Returns 0, or a negative code with a one-line message in err: VL_ENOENT when a corpus has no
 * usable image (or does not exist), VL_EINVAL for bad options, VL_ENOMEM, VL_EIMAGE when encoding
 * failed, VL_EUV. On failure pool is left empty (freeing it is harmless). */
int vl_imagepool_build(vl_imagepool_t *pool, uv_loop_t *loop, const vl_imagepool_opts_t *o,
                       char *err, size_t errlen);

/* The pool in one line for the user, without a newline: "32 images (15.2 MB) from SOURCE", what
 * of it is kept pixels when there are (they are what --unique-images adds), and the files skipped.
 * Writes at most n bytes, NUL included. */
void vl_imagepool_describe(const vl_imagepool_t *p, const char *source, char *out, size_t n);

/* Frees everything the pool holds and zeroes it. */
void vl_imagepool_free(vl_imagepool_t *pool);

/* Image i as a body segment. */
static inline vl_seg_t vl_imagepool_seg(const vl_imagepool_t *p, size_t i) {
  vl_seg_t s = {p->img[i].uri, p->img[i].uri_len};
  return s;
}

/* The data URI prefix for a format. */
const char *vl_imagepool_uri_prefix(vl_image_fmt_t fmt);

/* Writes prefix + base64(bytes) + NUL into dst, which holds vl_imagepool_uri_len(fmt, n) + 1
 * bytes; returns the length written (without the NUL). */
size_t vl_imagepool_uri_write(char *dst, vl_image_fmt_t fmt, const uint8_t *bytes, size_t n);
size_t vl_imagepool_uri_len(vl_image_fmt_t fmt, size_t n);

#endif
