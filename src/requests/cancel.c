/* Client cancellations: the choice of the requests closed early and of when (cancel.h). */
#include "vlmload/cancel.h"
#include "vlmload/common.h"
#include "vlmload/rng.h"
#include "vlmload/units.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The random stream the delays are drawn from, apart from every other. */
#define CANCEL_STREAM 0x63616e63656cull

/* Parses one bound of AFTER: a duration, or with tokens a count of token events. */
static int bound(const char *s, int tokens, uint64_t *out) {
  if (tokens)
    return vl_units_count(s, out) == 0 && *out >= 1 && *out <= 1000000 ? 0 : -1;
  return vl_units_duration(s, out) == 0 ? 0 : -1;
}

static int after_parse(const char *a, vl_cancel_spec_t *s, char *err, size_t errlen) {
  char buf[128];
  size_t n = strlen(a);
  if (n == 0 || n >= sizeof(buf))
    goto bad;
  memcpy(buf, a, n + 1);
  s->tokens = n > 3 && strcmp(buf + n - 3, "tok") == 0;
  if (s->tokens)
    buf[n - 3] = '\0';
  char *dash = strchr(buf, '-');
  if (dash) {
    *dash = '\0';
    char *lo = buf;
    size_t ln = strlen(lo);
    /* "4tok-32tok" as well as "4-32tok". */
    if (s->tokens && ln > 3 && strcmp(lo + ln - 3, "tok") == 0)
      lo[ln - 3] = '\0';
    if (bound(lo, s->tokens, &s->lo) || bound(dash + 1, s->tokens, &s->hi) || s->lo > s->hi)
      goto bad;
  } else {
    if (bound(buf, s->tokens, &s->lo))
      goto bad;
    s->hi = s->lo;
  }
  return 0;

bad:
  snprintf(err, errlen,
           "AFTER '%s' is not a delay (500ms), a range of delays (100ms-2s), a count of streamed "
           "tokens (8tok) or a range of them (4-32tok)",
           a);
  return VL_EINVAL;
}

int vl_cancel_parse(const char *arg, vl_cancel_spec_t *s, char *err, size_t errlen) {
  char share[64];
  const char *colon = strchr(arg, ':');
  size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
  double f;
  memset(s, 0, sizeof(*s));
  if (n == 0 || n >= sizeof(share))
    goto bad_share;
  memcpy(share, arg, n);
  share[n] = '\0';
  if (vl_units_double(share, &f) || f > 1)
    goto bad_share;
  s->share = f;
  return after_parse(colon ? colon + 1 : VL_CANCEL_DEFAULT_AFTER, s, err, errlen);

bad_share:
  snprintf(err, errlen, "want F[:AFTER], F the share of requests to close, from 0 to 1");
  return VL_EINVAL;
}

/* One bound as the option writes it: a duration in its largest whole unit. */
static void bound_format(uint64_t v, int tokens, char *buf, size_t n) {
  if (tokens)
    snprintf(buf, n, "%llu", (unsigned long long)v);
  else if (v % 1000000 == 0)
    snprintf(buf, n, "%llus", (unsigned long long)(v / 1000000));
  else if (v % 1000 == 0)
    snprintf(buf, n, "%llums", (unsigned long long)(v / 1000));
  else
    snprintf(buf, n, "%lluus", (unsigned long long)v);
}

void vl_cancel_after_format(const vl_cancel_spec_t *s, char *buf, size_t n) {
  char lo[32], hi[32];
  bound_format(s->lo, s->tokens, lo, sizeof(lo));
  bound_format(s->hi, s->tokens, hi, sizeof(hi));
  if (s->lo == s->hi)
    snprintf(buf, n, "%s%s", lo, s->tokens ? "tok" : "");
  else
    snprintf(buf, n, "%s-%s%s", lo, hi, s->tokens ? "tok" : "");
}

int vl_cancel_pick(const vl_cancel_spec_t *s, uint64_t seed, uint64_t id, uint64_t *after) {
  if (s->share <= 0)
    return 0;
  /* The same rule as the mock's faults: exactly floor(n * share) of the first n. */
  if (floor((double)(id + 1) * s->share + 1e-9) <= floor((double)id * s->share + 1e-9))
    return 0;
  vl_rng_t rng;
  vl_rng_init(&rng, seed ^ CANCEL_STREAM, id);
  *after = s->lo == s->hi ? s->lo : vl_rng_range(&rng, s->lo, s->hi);
  return 1;
}
