/* A body's bytes in one NUL-terminated string (malloc'd), for tests that parse what would be sent;
 * its length must be the body's size. */
#ifndef VLMLOAD_TESTS_BODYTEXT_H
#define VLMLOAD_TESTS_BODYTEXT_H

#include "task.h"
#include "vlmload/body.h"

#include <stdlib.h>
#include <string.h>

static inline char *flatten(const vl_body_t *b) {
  char *s = malloc(b->size + 1);
  size_t off = 0;
  for (int i = 0; i < b->n; i++) {
    memcpy(s + off, b->seg[i].p, b->seg[i].n);
    off += b->seg[i].n;
  }
  ASSERT_UINT_EQ(off, b->size);
  s[off] = '\0';
  return s;
}

#endif
