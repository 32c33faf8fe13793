/* Shared by the fuzz targets (fuzz_*.c) and the replay driver (replay.c).
 *
 * Each target defines LLVMFuzzerTestOneInput, libFuzzer's entry point, as a plain function: under
 * -fsanitize=fuzzer libFuzzer calls it; in the ordinary build replay.c calls it once per file of
 * the target's seed corpus and regression inputs, so every crash ever found stays a unit test.
 *
 * An entry function must not keep state between calls that changes what a later call does: one
 * input alone reproduces any failure. FUZZ_CHECK states an invariant; a broken one aborts, which
 * libFuzzer reports as a crash and ctest as a failed test. */
#ifndef VLMLOAD_TESTS_FUZZ_H
#define VLMLOAD_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(expr)                                                                           \
  do {                                                                                             \
    if (!(expr)) {                                                                                 \
      fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #expr);                 \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* Reads parameters off the front of an input; past the end every read gives 0. */
typedef struct {
  const uint8_t *p;
  size_t n;
} fuzz_in_t;

static inline unsigned fuzz_u8(fuzz_in_t *in) {
  if (in->n == 0)
    return 0;
  in->n--;
  return *in->p++;
}

static inline unsigned fuzz_u16(fuzz_in_t *in) {
  unsigned hi = fuzz_u8(in);
  return hi << 8 | fuzz_u8(in);
}

/* A malloc'd copy of n bytes with a NUL after them, so that ASan sees any read past the input. */
static inline char *fuzz_dup(const uint8_t *p, size_t n) {
  char *s = malloc(n + 1);
  if (!s)
    abort();
  for (size_t i = 0; i < n; i++)
    s[i] = (char)p[i];
  s[n] = '\0';
  return s;
}

#endif
