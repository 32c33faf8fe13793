#include "vlmload/imagespec.h"
#include "vlmload/common.h"
#include "vlmload/units.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct {
  const char *name;
  int w, h;
} named_t;

static const named_t named_sizes[] = {
    {"360p", 640, 360},    {"480p", 854, 480},    {"720p", 1280, 720},
    {"1080p", 1920, 1080}, {"1440p", 2560, 1440}, {"4k", 3840, 2160},
};

static void say(char *why, size_t whylen, const char *fmt, ...) {
  if (!why || !whylen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
}

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Digits only, no sign, at most 7 of them (so no overflow); *end past them. */
static int scan_uint(const char *s, const char **end, long *v) {
  long x = 0;
  int n = 0;
  while (is_digit(s[n])) {
    if (n == 7)
      return -1;
    x = x * 10 + (s[n] - '0');
    n++;
  }
  if (n == 0)
    return -1;
  *v = x;
  *end = s + n;
  return 0;
}

/* One size: "WxH" or a name. Sets *end past it. Returns 0 or VL_EINVAL with a reason. */
static int scan_size(const char *s, const char *stop, const char **end, int *w, int *h,
                     const char **reason) {
  for (size_t i = 0; i < VL_ARRAY_SIZE(named_sizes); i++) {
    size_t n = strlen(named_sizes[i].name);
    if ((size_t)(stop - s) >= n && strncasecmp(s, named_sizes[i].name, n) == 0 &&
        (s + n == stop || s[n] == '-' || s[n] == ':')) {
      *w = named_sizes[i].w;
      *h = named_sizes[i].h;
      *end = s + n;
      return 0;
    }
  }
  long a, b;
  const char *p;
  if (scan_uint(s, &p, &a) != 0 || (*p != 'x' && *p != 'X') || scan_uint(p + 1, &p, &b) != 0) {
    *reason = "expected WxH (such as 640x480) or 360p, 480p, 720p, 1080p, 1440p, 4k";
    return VL_EINVAL;
  }
  if (a < 1 || a > VL_IMAGE_MAX_SIDE) {
    *reason = "width must be 1..16384";
    return VL_EINVAL;
  }
  if (b < 1 || b > VL_IMAGE_MAX_SIDE) {
    *reason = "height must be 1..16384";
    return VL_EINVAL;
  }
  *w = (int)a;
  *h = (int)b;
  *end = p;
  return 0;
}

/* One entry, the text [s, stop) with blanks trimmed. */
static int scan_entry(const char *s, const char *stop, vl_imagespec_entry_t *e,
                      const char **reason) {
  const char *p;
  int rc;
  if (s == stop) {
    *reason = "empty entry";
    return VL_EINVAL;
  }
  if ((rc = scan_size(s, stop, &p, &e->w_lo, &e->h_lo, reason)) != 0)
    return rc;
  e->w_hi = e->w_lo;
  e->h_hi = e->h_lo;
  if (p < stop && *p == '-') {
    if ((rc = scan_size(p + 1, stop, &p, &e->w_hi, &e->h_hi, reason)) != 0)
      return rc;
    if (e->w_hi < e->w_lo || e->h_hi < e->h_lo) {
      *reason = "a range must go from the smaller size to the larger in both width and height";
      return VL_EINVAL;
    }
  }
  e->weight = 1;
  if (p < stop && *p == ':') {
    long wt;
    const char *q;
    if (scan_uint(p + 1, &q, &wt) != 0 || q != stop || wt < 1 || wt > VL_IMAGESPEC_MAX_WEIGHT) {
      *reason = "weight must be a whole number 1..1000000";
      return VL_EINVAL;
    }
    e->weight = (uint32_t)wt;
    p = q;
  }
  if (p != stop) {
    *reason = "unexpected text after the size";
    return VL_EINVAL;
  }
  return 0;
}

int vl_imagespec_res_parse(vl_imagespec_res_t *spec, const char *s, char *why, size_t whylen) {
  if (!spec || !s) {
    say(why, whylen, "no resolution given");
    return VL_EINVAL;
  }
  vl_imagespec_res_t r;
  memset(&r, 0, sizeof(r));
  const char *p = s;
  for (int idx = 1;; idx++) {
    const char *comma = strchr(p, ',');
    const char *stop = comma ? comma : p + strlen(p);
    const char *a = p, *b = stop;
    while (a < b && (*a == ' ' || *a == '\t'))
      a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
      b--;
    if (r.n == VL_IMAGESPEC_MAX_ENTRIES) {
      say(why, whylen, "more than %d entries", VL_IMAGESPEC_MAX_ENTRIES);
      return VL_EINVAL;
    }
    const char *reason = NULL;
    if (scan_entry(a, b, &r.e[r.n], &reason) != 0) {
      say(why, whylen, "entry %d \"%.*s\": %s", idx, (int)VL_MIN(b - a, 40), a, reason);
      return VL_EINVAL;
    }
    r.total_weight += r.e[r.n].weight;
    r.n++;
    if (!comma)
      break;
    p = comma + 1;
  }
  *spec = r;
  return 0;
}

void vl_imagespec_res_default(vl_imagespec_res_t *spec) {
  int rc = vl_imagespec_res_parse(spec, VL_IMAGESPEC_RES_DEFAULT, NULL, 0);
  (void)rc; /* the constant parses; test_imagespec checks it */
}

void vl_imagespec_res_sample(const vl_imagespec_res_t *spec, vl_rng_t *rng, int *w, int *h) {
  uint64_t pick = vl_rng_range(rng, 0, spec->total_weight - 1);
  int i = 0;
  while (i < spec->n - 1 && pick >= spec->e[i].weight) {
    pick -= spec->e[i].weight;
    i++;
  }
  const vl_imagespec_entry_t *e = &spec->e[i];
  *w = (int)vl_rng_range(rng, (uint64_t)e->w_lo, (uint64_t)e->w_hi);
  *h = (int)vl_rng_range(rng, (uint64_t)e->h_lo, (uint64_t)e->h_hi);
}

void vl_imagespec_res_max(const vl_imagespec_res_t *spec, int *w, int *h, uint64_t *pixels) {
  int mw = 0, mh = 0;
  uint64_t mp = 0;
  for (int i = 0; i < spec->n; i++) {
    const vl_imagespec_entry_t *e = &spec->e[i];
    mw = VL_MAX(mw, e->w_hi);
    mh = VL_MAX(mh, e->h_hi);
    mp = VL_MAX(mp, (uint64_t)e->w_hi * (uint64_t)e->h_hi);
  }
  if (w)
    *w = mw;
  if (h)
    *h = mh;
  if (pixels)
    *pixels = mp;
}

int vl_imagespec_res_format(const vl_imagespec_res_t *spec, char *buf, size_t n) {
  size_t off = 0;
  int total = 0;
  for (int i = 0; i < spec->n; i++) {
    const vl_imagespec_entry_t *e = &spec->e[i];
    char one[96];
    int k;
    if (e->w_lo == e->w_hi && e->h_lo == e->h_hi)
      k = snprintf(one, sizeof(one), "%s%dx%d:%u", i ? "," : "", e->w_lo, e->h_lo, e->weight);
    else
      k = snprintf(one, sizeof(one), "%s%dx%d-%dx%d:%u", i ? "," : "", e->w_lo, e->h_lo, e->w_hi,
                   e->h_hi, e->weight);
    total += k;
    if (n && off < n - 1) {
      size_t room = n - 1 - off, take = VL_MIN(room, (size_t)k);
      memcpy(buf + off, one, take);
      off += take;
    }
  }
  if (n)
    buf[off] = '\0';
  return total;
}

int vl_imagespec_format(const char *s, vl_image_fmt_t *fmt) {
  if (!s)
    return VL_EINVAL;
  if (strcasecmp(s, "png") == 0)
    *fmt = VL_IMG_PNG;
  else if (strcasecmp(s, "jpeg") == 0 || strcasecmp(s, "jpg") == 0)
    *fmt = VL_IMG_JPEG;
  else if (strcasecmp(s, "mixed") == 0)
    *fmt = VL_IMG_MIXED;
  else
    return VL_EINVAL;
  return 0;
}

int vl_imagespec_content(const char *s, vl_image_content_t *kind) {
  static const struct {
    const char *name;
    vl_image_content_t kind;
  } names[] = {{"photo", VL_CONTENT_PHOTO},   {"photo-like", VL_CONTENT_PHOTO},
               {"noise", VL_CONTENT_NOISE},   {"gradient", VL_CONTENT_GRADIENT},
               {"shapes", VL_CONTENT_SHAPES}, {"mixed", VL_CONTENT_MIXED}};
  if (!s)
    return VL_EINVAL;
  for (size_t i = 0; i < VL_ARRAY_SIZE(names); i++) {
    if (strcasecmp(s, names[i].name) == 0) {
      *kind = names[i].kind;
      return 0;
    }
  }
  return VL_EINVAL;
}

int vl_imagespec_count(const char *s, int min, int max, int *lo, int *hi, char *why,
                       size_t whylen) {
  uint64_t a, b;
  int rc = vl_units_range(s, &a, &b);
  if (rc) {
    say(why, whylen, "\"%s\": expected a count N or a range A-B with A <= B", s ? s : "");
    return rc;
  }
  if (a < (uint64_t)min || b > (uint64_t)max) {
    say(why, whylen, "\"%s\": counts must be %d..%d", s, min, max);
    return VL_ERANGE;
  }
  *lo = (int)a;
  *hi = (int)b;
  return 0;
}
