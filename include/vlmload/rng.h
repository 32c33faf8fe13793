/* Seeded pseudo-random numbers (xoshiro256**, seeded through splitmix64).
 *
 * Every random choice vlmload makes draws from a vl_rng_t derived from --seed, so the same seed
 * gives the same request stream. Independent streams (arrival gaps, request contents) come from
 * vl_rng_init() with distinct stream numbers, so changing how one is consumed leaves the others be.
 */
#ifndef VLMLOAD_RNG_H
#define VLMLOAD_RNG_H

#include <stdint.h>

typedef struct vl_rng_s {
  uint64_t s[4];
} vl_rng_t;

void vl_rng_init(vl_rng_t *r, uint64_t seed, uint64_t stream);
uint64_t vl_rng_next(vl_rng_t *r);
/* Uniform in [0, 1). */
double vl_rng_double(vl_rng_t *r);
/* Uniform integer in [lo, hi], inclusive; unbiased. */
uint64_t vl_rng_range(vl_rng_t *r, uint64_t lo, uint64_t hi);
/* Exponential with mean 1. */
double vl_rng_exp(vl_rng_t *r);
/* Gamma with the given shape and scale 1 (Marsaglia and Tsang). shape > 0. */
double vl_rng_gamma(vl_rng_t *r, double shape);

#endif
