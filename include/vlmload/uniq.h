/* Unique images: every image handed out differs from every other in its decoded pixels.
 *
 * Servers cache multimodal inputs by a hash of the decoded image, so resending pool images
 * measures the cache, not the preprocessor. A vl_uniq_t keeps a queue of ready data URIs ahead of
 * demand: each is a pool image's pixels with a stamp (vl_pixels_stamp, n from a counter) written
 * in, re-encoded in the pool image's format on libuv's threadpool. The loop thread only moves
 * buffer indices; it never renders, stamps or encodes.
 *
 * Buffers: `capacity` URI buffers are allocated at init, each sized for the largest pool image
 * with room for the stamp, and reused: a buffer is ready, being produced, or out with a request
 * until vl_uniq_release. Nothing is allocated per image in steady state; a stamped image that
 * outgrows its buffer (rare: a JPEG corpus file first encoded at a much lower quality) grows it
 * once, on the worker, and `grown` counts that. Each worker (one encode in flight) owns a codec
 * context, a pixel buffer and an encode buffer, also allocated at init.
 *
 * Pool images are used round-robin, so the mix of sizes and formats is the pool's. Stamps are
 * first_stamp, first_stamp + 1, ...: give each run its own first_stamp (the lead's choice: from
 * the wall clock, or from the seed and a shard number) or a second run against the same server
 * resends the first run's images. Pool images need not keep their pixels: without raw pixels a
 * worker decodes the pool image's bytes each time, which costs a decode per image.
 *
 * Repeats (--image-reuse): with opts.keep > 0, each image vl_uniq_take hands out also stays in a
 * window of the last `keep` taken, by reference: its buffer is released only once the window has
 * moved past it and every request holding it (as a take or as a repeat) has released it. A
 * repeat (vl_uniq_repeat) hands out one image of the window again, the same URI bytes, so the
 * server's content-hash cache sees a hit. Nothing is copied.
 *
 * All functions run on the loop thread.
 */
#ifndef VLMLOAD_UNIQ_H
#define VLMLOAD_UNIQ_H

#include "vlmload/body.h"
#include "vlmload/image.h"
#include "vlmload/imagepool.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct vl_uniq_s vl_uniq_t;

/* An image handed out by vl_uniq_take. uri points into a buffer that stays valid and unchanged
 * until vl_uniq_release(img) (or, for a late image, for the pool's life). */
typedef struct vl_uniq_img_s {
  const char *uri; /* whole data URI, NUL-terminated */
  size_t uri_len;
  size_t bytes; /* encoded bytes */
  vl_image_fmt_t fmt;
  int w, h, channels;
  uint64_t stamp;    /* the n stamped into it; 0 for a late (pool) image */
  size_t pool_index; /* the pool image it was made from */
  int slot;          /* private: the buffer, or -1 for a late pool image */
} vl_uniq_img_t;

typedef struct vl_uniq_opts_s {
  int depth;    /* images to keep ready ahead of demand (0: 16) */
  int capacity; /* URI buffers in all: ready + in production + out with requests. Size it as depth
                 * + workers + the most images requests hold at once (concurrency x images per
                 * request); when every buffer is out, takes are late. 0: 4 x depth + workers. */
  int workers;  /* encodes queued or running at once, each with its own scratch (0: twice the
                 * threadpool size, $UV_THREADPOOL_SIZE or libuv's default of 4) */
  int quality;  /* JPEG quality (0: each pool image's own, or VL_IMAGE_JPEG_QUALITY) */
  int keep;     /* images the repeat window holds (0: none, vl_uniq_repeat always misses). The
                 * window's images hold buffers too: add keep to capacity. */
  uint64_t first_stamp;
  /* Called on the loop thread each time an image becomes ready; may call vl_uniq_take. */
  void (*on_ready)(vl_uniq_t *u, void *arg);
  void *arg;
} vl_uniq_opts_t;

typedef struct vl_uniq_worker_s vl_uniq_worker_t; /* private */
typedef struct vl_uniq_slot_s vl_uniq_slot_t;     /* private */

struct vl_uniq_s {
  /* Counters, read freely. */
  uint64_t produced; /* images made */
  uint64_t taken;    /* unique images handed out */
  uint64_t late;     /* takes that found nothing ready */
  uint64_t failed;   /* productions that failed (an encoder error); the buffer is reused */
  uint64_t grown;    /* buffers that had to grow */
  uint64_t repeated; /* images handed out again by vl_uniq_repeat */
  size_t bytes;      /* memory held: URI buffers and worker scratch */
  int ready;         /* images ready now */
  int working;       /* images in production now */
  int out;           /* images out with requests now, repeats included */
  int kept;          /* images in the repeat window now */

  /* Private. */
  uv_loop_t *loop;
  const vl_imagepool_t *pool;
  vl_uniq_opts_t o;
  vl_uniq_slot_t *slots;
  int *ready_q; /* ring of slot indices, capacity long */
  int ready_head;
  int *free_slots; /* stack of slot indices */
  int *window;     /* ring of slot indices, keep long: the repeat window */
  int window_head; /* the oldest */
  int n_free;
  vl_uniq_worker_t *workers;
  uint64_t next_stamp;
  size_t next_pool;
  size_t next_late;
  int closing;
  void (*close_cb)(vl_uniq_t *u);
};

/* Sets u up and starts production. The pool must outlive u. Returns 0, VL_EINVAL (empty pool, bad
 * options) or VL_ENOMEM. On failure nothing is left to free. */
int vl_uniq_init(vl_uniq_t *u, uv_loop_t *loop, const vl_imagepool_t *pool,
                 const vl_uniq_opts_t *o);

/* Hands out the oldest ready image: returns 0 and fills img; release it when the request that
 * sent it is done. When none is ready, counts it in `late`, returns VL_EAGAIN and fills img with a
 * pool image instead (the next one round-robin, slot -1), which the caller may send as the
 * fallback, knowing it is not unique; releasing it is a harmless no-op. It never waits. */
int vl_uniq_take(vl_uniq_t *u, vl_uniq_img_t *img);

/* Hands out again one of the images in the repeat window: the one at `pick` (0 <= pick < 1,
 * uniform) of the window's length, oldest first, and fills img with it; release it as any take.
 * Returns 0, or VL_EAGAIN, leaving img alone, when the window is empty (the caller takes a fresh
 * image instead). */
int vl_uniq_repeat(vl_uniq_t *u, double pick, vl_uniq_img_t *img);

/* Gives img back: its buffer is reused once nothing holds it (no request, not the repeat window).
 * img->uri must not be used afterwards. */
void vl_uniq_release(vl_uniq_t *u, const vl_uniq_img_t *img);

/* img as a body segment. */
static inline vl_seg_t vl_uniq_seg(const vl_uniq_img_t *img) {
  vl_seg_t s = {img->uri, img->uri_len};
  return s;
}

/* Stops production: cancels queued work, waits (through the loop) for the encodes running, then
 * frees every buffer and calls cb (which may be NULL) on the loop thread, from within
 * vl_uniq_close itself when nothing was running. Images still out become invalid at that point,
 * so release them first (or stop using them). The loop must keep running until cb. */
void vl_uniq_close(vl_uniq_t *u, void (*cb)(vl_uniq_t *u));

#endif
