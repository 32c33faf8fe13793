/* Client cancellations (--cancel F[:AFTER]): which requests a user closes before their reply
 * finishes, as one closing a browser tab does, and when.
 *
 * Exactly floor(n * F) of the first n requests are chosen, spread evenly (request id k is chosen
 * when floor((k + 1) * F) passes floor(k * F)), so counts are exact at any n. Each chosen request
 * is closed after a delay from its send, or after a number of streamed token events, drawn
 * uniformly from AFTER's range from a random stream of the seed and its id alone.
 *
 * AFTER is DUR (500ms), a uniform range DUR-DUR (100ms-2s), Ntok (8tok) or a range N-Mtok
 * (4-32tok); the default is VL_CANCEL_DEFAULT_AFTER.
 */
#ifndef VLMLOAD_CANCEL_H
#define VLMLOAD_CANCEL_H

#include <stddef.h>
#include <stdint.h>

#define VL_CANCEL_DEFAULT_AFTER "100ms-2s"

typedef struct vl_cancel_spec_s {
  double share;    /* 0 to 1; 0: no request is cancelled */
  int tokens;      /* lo and hi count token events (1: a stream's tokens) instead of microseconds */
  uint64_t lo, hi; /* inclusive bounds of the draw: microseconds, or token events (>= 1) */
} vl_cancel_spec_t;

/* Parses "F[:AFTER]" into s. Returns 0, or VL_EINVAL with a one-line reason (what is wanted) in
 * err. */
int vl_cancel_parse(const char *arg, vl_cancel_spec_t *s, char *err, size_t errlen);

/* AFTER as the option takes it back ("500ms", "100ms-2s", "8tok", "4-32tok"). */
void vl_cancel_after_format(const vl_cancel_spec_t *s, char *buf, size_t n);

/* Whether request id is one to close; then *after is its delay in microseconds or its token
 * events, drawn from seed and id. */
int vl_cancel_pick(const vl_cancel_spec_t *s, uint64_t seed, uint64_t id, uint64_t *after);

#endif
