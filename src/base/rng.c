#include "vlmload/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

void vl_rng_init(vl_rng_t *r, uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ull);
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&x);
}

uint64_t vl_rng_next(vl_rng_t *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double vl_rng_double(vl_rng_t *r) {
  return (double)(vl_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t vl_rng_range(vl_rng_t *r, uint64_t lo, uint64_t hi) {
  uint64_t span = hi - lo + 1;
  if (span == 0) /* the whole 64-bit range */
    return vl_rng_next(r);
  /* Rejection sampling on the largest multiple of span. */
  uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t v;
  do {
    v = vl_rng_next(r);
  } while (v >= limit);
  return lo + v % span;
}

double vl_rng_exp(vl_rng_t *r) {
  return -log1p(-vl_rng_double(r));
}

/* Standard normal by the polar method; one of the pair is discarded to keep the state simple. */
static double normal(vl_rng_t *r) {
  double u, v, s;
  do {
    u = 2.0 * vl_rng_double(r) - 1.0;
    v = 2.0 * vl_rng_double(r) - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  return u * sqrt(-2.0 * log(s) / s);
}

double vl_rng_gamma(vl_rng_t *r, double shape) {
  if (shape < 1.0) {
    /* Boost: Gamma(a) = Gamma(a + 1) * U^(1/a). */
    double u = vl_rng_double(r);
    return vl_rng_gamma(r, shape + 1.0) * pow(u > 0 ? u : 0x1.0p-53, 1.0 / shape);
  }
  double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x = normal(r), v = 1.0 + c * x;
    if (v <= 0)
      continue;
    v = v * v * v;
    double u = vl_rng_double(r);
    if (u < 1.0 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
      return d * v;
  }
}
