#include "tokenizer.h"

/* The id of piece [p, p + n): FNV-1a 32, folded into a 32000-token vocabulary. */
static uint32_t piece_id(const char *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)p[i]) * 16777619u;
  return h % 32000u;
}

static int letter(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int digit(unsigned char c) {
  return c >= '0' && c <= '9';
}

uint64_t vl__tok_count(const char *s, size_t n, uint32_t *ids, size_t max) {
  uint64_t k = 0;
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    size_t len;
    if (letter(c)) {
      for (len = 1; len < 4 && i + len < n && letter((unsigned char)s[i + len]); len++)
        ;
    } else if (digit(c)) {
      for (len = 1; i + len < n && digit((unsigned char)s[i + len]); len++)
        ;
    } else if (c <= 0x20 || c == 0x7f) {
      i++;
      continue;
    } else if (c < 0x80) {
      len = 1;
    } else {
      for (len = 1; i + len < n && ((unsigned char)s[i + len] & 0xc0) == 0x80; len++)
        ;
    }
    if (ids && k < max)
      ids[k] = piece_id(s + i, len);
    k++;
    i += len;
  }
  return k;
}
