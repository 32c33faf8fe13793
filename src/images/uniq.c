#include "vlmload/uniq.h"
#include "vlmload/base64.h"
#include "codec.h"
#include "vlmload/common.h"
#include "pixels.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_DEPTH   16
#define DEFAULT_THREADS 4 /* libuv's default threadpool size */

/* A URI buffer and the image it holds. */
struct vl_uniq_slot_s {
  char *buf;
  size_t cap;
  int refs; /* holders while out: requests, and the repeat window */
  vl_uniq_img_t img;
};

/* One encode in flight: the threadpool request and the scratch it works in. While busy, the work
 * callback owns everything here and the slot it was given; the loop thread touches neither. */
struct vl_uniq_worker_s {
  uv_work_t req;
  vl_uniq_t *u;
  int busy;
  int slot;
  uint64_t stamp;
  size_t pool_index;
  size_t cached; /* the pool image whose pixels `raw` holds, or SIZE_MAX */
  int rc;
  size_t grew; /* bytes the slot buffer grew by */
  vl_codec_t codec;
  vl_raw_t raw;
  vl_image_buf_t enc;
  vl_image_buf_t bin; /* a pool image's bytes, for pools without pixels */
};

/* Two per threadpool thread: a thread that finishes finds the next encode already queued instead
 * of idling until the loop thread gets to run and queue one. */
static int default_workers(void) {
  const char *s = getenv("UV_THREADPOOL_SIZE");
  if (s && *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end == '\0' && v >= 1)
      return 2 * (int)VL_MIN(v, 1024);
  }
  return 2 * DEFAULT_THREADS;
}

/* Runs on the threadpool. */
static void produce(uv_work_t *req) {
  vl_uniq_worker_t *w = vl_container_of(req, vl_uniq_worker_t, req);
  vl_uniq_t *u = w->u;
  const vl_imagepool_image_t *pi = &u->pool->img[w->pool_index];
  vl_uniq_slot_t *s = &u->slots[w->slot];
  int rc = 0;
  w->grew = 0;
  /* The stamp rewrites its whole band and nothing else, so pixels left from the same pool image
   * need no fresh copy. */
  if (w->cached != w->pool_index) {
    w->cached = SIZE_MAX;
    if (pi->raw.px) {
      rc = vl_image_raw_alloc(&w->raw, pi->raw.w, pi->raw.h, pi->raw.channels);
      if (!rc)
        memcpy(w->raw.px, pi->raw.px, vl_image_raw_size(&pi->raw));
    } else {
      size_t k = strlen(vl_imagepool_uri_prefix(pi->fmt));
      size_t n64 = pi->uri_len - k;
      rc = vl_image_buf_reserve(&w->bin, n64 / 4 * 3);
      long n = rc ? -1 : vl_base64_decode(w->bin.p, pi->uri + k, n64);
      if (!rc && n < 0)
        rc = VL_EIMAGE;
      if (!rc)
        rc = vl_codec_decode(&w->codec, w->bin.p, (size_t)n,
                             (uint64_t)VL_IMAGE_MAX_SIDE * VL_IMAGE_MAX_SIDE, &w->raw);
    }
    if (rc)
      goto done;
    w->cached = w->pool_index;
  }
  vl_pixels_stamp(&w->raw, w->stamp);
  vl_codec_opts_t eo = {.fmt = pi->fmt, .quality = u->o.quality ? u->o.quality : pi->quality};
  if ((rc = vl_codec_encode(&w->codec, &w->raw, &eo, &w->enc)) != 0)
    goto done;
  size_t need = vl_imagepool_uri_len(pi->fmt, w->enc.n) + 1;
  if (need > s->cap) {
    char *p = realloc(s->buf, need);
    if (!p) {
      rc = VL_ENOMEM;
      goto done;
    }
    w->grew = need - s->cap;
    s->buf = p;
    s->cap = need;
  }
  s->img.uri = s->buf;
  s->img.uri_len = vl_imagepool_uri_write(s->buf, pi->fmt, w->enc.p, w->enc.n);
  s->img.bytes = w->enc.n;
  s->img.fmt = pi->fmt;
  s->img.w = w->raw.w;
  s->img.h = w->raw.h;
  s->img.channels = w->raw.channels;
  s->img.stamp = w->stamp;
  s->img.pool_index = w->pool_index;
  s->img.slot = w->slot;
done:
  w->rc = rc;
}

static void produced(uv_work_t *req, int status);

/* Drops one holder of a slot that is out; the last gives the buffer back. */
static void unref(vl_uniq_t *u, int slot) {
  if (--u->slots[slot].refs == 0)
    u->free_slots[u->n_free++] = slot;
}

/* Starts productions while fewer than depth images are ready or coming, a buffer is free and a
 * worker is idle. */
static void refill(vl_uniq_t *u) {
  while (!u->closing && u->ready + u->working < u->o.depth && u->n_free > 0) {
    /* An idle worker, preferably one that holds this pool image's pixels already. */
    size_t pool_index = u->next_pool % u->pool->n;
    vl_uniq_worker_t *w = NULL;
    for (int i = 0; i < u->o.workers; i++) {
      vl_uniq_worker_t *c = &u->workers[i];
      if (c->busy)
        continue;
      if (!w || c->cached == pool_index)
        w = c;
      if (c->cached == pool_index)
        break;
    }
    if (!w)
      return;
    u->next_pool++;
    w->slot = u->free_slots[--u->n_free];
    w->stamp = u->next_stamp++;
    w->pool_index = pool_index;
    w->busy = 1;
    u->working++;
    if (uv_queue_work(u->loop, &w->req, produce, produced) != 0) {
      w->busy = 0;
      u->working--;
      u->free_slots[u->n_free++] = w->slot;
      u->failed++;
      return;
    }
  }
}

static void free_all(vl_uniq_t *u) {
  if (u->slots)
    for (int i = 0; i < u->o.capacity; i++)
      free(u->slots[i].buf);
  if (u->workers) {
    for (int i = 0; i < u->o.workers; i++) {
      vl_uniq_worker_t *w = &u->workers[i];
      vl_codec_free(&w->codec);
      vl_image_raw_free(&w->raw);
      vl_image_buf_free(&w->enc);
      vl_image_buf_free(&w->bin);
    }
  }
  free(u->slots);
  free(u->workers);
  free(u->ready_q);
  free(u->free_slots);
  free(u->window);
  u->window = NULL;
  u->kept = 0;
  u->slots = NULL;
  u->workers = NULL;
  u->ready_q = u->free_slots = NULL;
  u->bytes = 0;
  u->ready = u->out = 0;
}

static void finish_close(vl_uniq_t *u) {
  void (*cb)(vl_uniq_t *) = u->close_cb;
  free_all(u);
  if (cb)
    cb(u);
}

/* Back on the loop thread. */
static void produced(uv_work_t *req, int status) {
  vl_uniq_worker_t *w = vl_container_of(req, vl_uniq_worker_t, req);
  vl_uniq_t *u = w->u;
  w->busy = 0;
  u->working--;
  u->bytes += w->grew;
  if (w->grew)
    u->grown++;
  int ok = status == 0 && w->rc == 0;
  if (ok) {
    u->ready_q[(u->ready_head + u->ready) % u->o.capacity] = w->slot;
    u->ready++;
    u->produced++;
  } else {
    u->free_slots[u->n_free++] = w->slot;
    if (status != UV_ECANCELED)
      u->failed++;
  }
  if (u->closing) {
    if (u->working == 0)
      finish_close(u);
    return;
  }
  /* After a failure, wait for the next take or release to try again rather than spin. */
  if (!ok)
    return;
  refill(u);
  if (u->o.on_ready)
    u->o.on_ready(u, u->o.arg);
}

int vl_uniq_init(vl_uniq_t *u, uv_loop_t *loop, const vl_imagepool_t *pool,
                 const vl_uniq_opts_t *opts) {
  if (!u || !loop || !pool || pool->n == 0)
    return VL_EINVAL;
  memset(u, 0, sizeof(*u));
  vl_uniq_opts_t o = opts ? *opts : (vl_uniq_opts_t){0};
  if (o.depth < 0 || o.capacity < 0 || o.keep < 0 || o.workers < 0 || o.quality < 0 ||
      o.quality > 100)
    return VL_EINVAL;
  if (!o.depth)
    o.depth = DEFAULT_DEPTH;
  if (!o.workers)
    o.workers = default_workers();
  if (!o.capacity)
    o.capacity = 4 * o.depth + o.workers;
  if (o.capacity < o.depth)
    return VL_EINVAL;
  u->loop = loop;
  u->pool = pool;
  u->o = o;
  u->next_stamp = o.first_stamp;

  /* Sizes: the largest pixels, encoder output and URI any pool image can need. A stamped image
   * may come out somewhat larger than the pool's copy (hard edges in the band, or a corpus JPEG
   * first written at a lower quality): leave a quarter and 16 KiB of room. */
  size_t max_enc = 0, max_uri = 0, max_bin = 0;
  for (size_t i = 0; i < pool->n; i++) {
    const vl_imagepool_image_t *pi = &pool->img[i];
    max_enc = VL_MAX(max_enc, vl_codec_encode_bound(pi->w, pi->h, pi->channels, pi->fmt));
    max_uri = VL_MAX(max_uri, vl_imagepool_uri_len(pi->fmt, pi->bytes + pi->bytes / 4 + 16384) + 1);
    if (!pi->raw.px)
      max_bin = VL_MAX(max_bin, pi->bytes);
  }
  u->slots = calloc((size_t)o.capacity, sizeof(vl_uniq_slot_t));
  u->ready_q = calloc((size_t)o.capacity, sizeof(int));
  u->free_slots = calloc((size_t)o.capacity, sizeof(int));
  u->workers = calloc((size_t)o.workers, sizeof(vl_uniq_worker_t));
  u->window = calloc((size_t)VL_MAX(o.keep, 1), sizeof(int));
  if (!u->slots || !u->ready_q || !u->free_slots || !u->workers || !u->window)
    goto fail;
  for (int i = 0; i < o.capacity; i++) {
    vl_uniq_slot_t *s = &u->slots[i];
    if (!(s->buf = malloc(max_uri)))
      goto fail;
    s->cap = max_uri;
    u->bytes += max_uri;
    u->free_slots[u->n_free++] = o.capacity - 1 - i;
  }
  for (int i = 0; i < o.workers; i++) {
    vl_uniq_worker_t *w = &u->workers[i];
    w->u = u;
    w->cached = SIZE_MAX;
    if (vl_image_raw_alloc(&w->raw, 1, 1, 1) != 0)
      goto fail;
    /* Make raw hold the largest image without reallocating later. */
    uint8_t *px = realloc(w->raw.px, pool->max_raw);
    if (!px)
      goto fail;
    w->raw.px = px;
    w->raw.cap = pool->max_raw;
    if (vl_image_buf_reserve(&w->enc, max_enc) != 0 ||
        (max_bin && vl_image_buf_reserve(&w->bin, max_bin + 3) != 0))
      goto fail;
    u->bytes += w->raw.cap + w->enc.cap + w->bin.cap;
  }
  refill(u);
  return 0;

fail:
  free_all(u);
  return VL_ENOMEM;
}

int vl_uniq_take(vl_uniq_t *u, vl_uniq_img_t *img) {
  if (u->ready == 0 || u->closing) {
    const vl_imagepool_image_t *pi = &u->pool->img[u->next_late++ % u->pool->n];
    u->late++;
    img->uri = pi->uri;
    img->uri_len = pi->uri_len;
    img->bytes = pi->bytes;
    img->fmt = pi->fmt;
    img->w = pi->w;
    img->h = pi->h;
    img->channels = pi->channels;
    img->stamp = 0;
    img->pool_index = (size_t)(pi - u->pool->img);
    img->slot = -1;
    refill(u);
    return VL_EAGAIN;
  }
  int slot = u->ready_q[u->ready_head];
  u->ready_head = (u->ready_head + 1) % u->o.capacity;
  u->ready--;
  u->out++;
  u->taken++;
  u->slots[slot].refs = 1;
  *img = u->slots[slot].img;
  if (u->o.keep > 0) {
    /* Into the window, the oldest out of it when full. */
    if (u->kept == u->o.keep) {
      unref(u, u->window[u->window_head]);
      u->window_head = (u->window_head + 1) % u->o.keep;
      u->kept--;
    }
    u->window[(u->window_head + u->kept) % u->o.keep] = slot;
    u->kept++;
    u->slots[slot].refs++;
  }
  refill(u);
  return 0;
}

int vl_uniq_repeat(vl_uniq_t *u, double pick, vl_uniq_img_t *img) {
  if (u->kept == 0 || u->closing)
    return VL_EAGAIN;
  int j = (int)(pick * u->kept);
  j = VL_MIN(VL_MAX(j, 0), u->kept - 1);
  int slot = u->window[(u->window_head + j) % u->o.keep];
  u->slots[slot].refs++;
  u->out++;
  u->repeated++;
  *img = u->slots[slot].img;
  return 0;
}

void vl_uniq_release(vl_uniq_t *u, const vl_uniq_img_t *img) {
  if (!img || img->slot < 0 || !u->slots)
    return;
  u->out--;
  unref(u, img->slot);
  refill(u);
}

void vl_uniq_close(vl_uniq_t *u, void (*cb)(vl_uniq_t *u)) {
  u->closing = 1;
  u->close_cb = cb;
  for (int i = 0; i < u->o.workers; i++)
    if (u->workers[i].busy)
      uv_cancel((uv_req_t *)&u->workers[i].req);
  if (u->working == 0)
    finish_close(u);
}
