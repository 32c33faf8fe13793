#include "vlmload/base64.h"

static const char enc_table[64] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Alphabet characters map to 0..63; every other byte is left 0 (see dec()). */
static const uint8_t dec_table[256] = {
    ['A'] = 0,  ['B'] = 1,  ['C'] = 2,  ['D'] = 3,  ['E'] = 4,  ['F'] = 5,  ['G'] = 6,  ['H'] = 7,
    ['I'] = 8,  ['J'] = 9,  ['K'] = 10, ['L'] = 11, ['M'] = 12, ['N'] = 13, ['O'] = 14, ['P'] = 15,
    ['Q'] = 16, ['R'] = 17, ['S'] = 18, ['T'] = 19, ['U'] = 20, ['V'] = 21, ['W'] = 22, ['X'] = 23,
    ['Y'] = 24, ['Z'] = 25, ['a'] = 26, ['b'] = 27, ['c'] = 28, ['d'] = 29, ['e'] = 30, ['f'] = 31,
    ['g'] = 32, ['h'] = 33, ['i'] = 34, ['j'] = 35, ['k'] = 36, ['l'] = 37, ['m'] = 38, ['n'] = 39,
    ['o'] = 40, ['p'] = 41, ['q'] = 42, ['r'] = 43, ['s'] = 44, ['t'] = 45, ['u'] = 46, ['v'] = 47,
    ['w'] = 48, ['x'] = 49, ['y'] = 50, ['z'] = 51, ['0'] = 52, ['1'] = 53, ['2'] = 54, ['3'] = 55,
    ['4'] = 56, ['5'] = 57, ['6'] = 58, ['7'] = 59, ['8'] = 60, ['9'] = 61, ['+'] = 62, ['/'] = 63,
};

size_t vl_base64_encode(char *dst, const uint8_t *src, size_t n) {
  char *d = dst;
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
    d[0] = enc_table[v >> 18];
    d[1] = enc_table[(v >> 12) & 63];
    d[2] = enc_table[(v >> 6) & 63];
    d[3] = enc_table[v & 63];
    d += 4;
  }
  if (i < n) {
    uint32_t v = (uint32_t)src[i] << 16;
    if (i + 1 < n)
      v |= (uint32_t)src[i + 1] << 8;
    d[0] = enc_table[v >> 18];
    d[1] = enc_table[(v >> 12) & 63];
    d[2] = i + 1 < n ? enc_table[(v >> 6) & 63] : '=';
    d[3] = '=';
    d += 4;
  }
  return (size_t)(d - dst);
}

/* The table marks valid characters by value; anything unset is 0 and ambiguous with 'A', so a
 * second check on the character itself tells them apart. */
static int dec(unsigned char c) {
  uint8_t v = dec_table[c];
  if (v == 0 && c != 'A')
    return -1;
  return v;
}

long vl_base64_decode(uint8_t *dst, const char *src, size_t n) {
  if (n % 4)
    return -1;
  uint8_t *d = dst;
  for (size_t i = 0; i < n; i += 4) {
    int a = dec((unsigned char)src[i]), b = dec((unsigned char)src[i + 1]);
    if (a < 0 || b < 0)
      return -1;
    int last = i + 4 == n;
    if (last && src[i + 2] == '=') {
      if (src[i + 3] != '=' || (b & 15))
        return -1;
      *d++ = (uint8_t)(a << 2 | b >> 4);
      break;
    }
    int c = dec((unsigned char)src[i + 2]);
    if (c < 0)
      return -1;
    if (last && src[i + 3] == '=') {
      if (c & 3)
        return -1;
      *d++ = (uint8_t)(a << 2 | b >> 4);
      *d++ = (uint8_t)(b << 4 | c >> 2);
      break;
    }
    int e = dec((unsigned char)src[i + 3]);
    if (e < 0)
      return -1;
    uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)e;
    d[0] = (uint8_t)(v >> 16);
    d[1] = (uint8_t)(v >> 8);
    d[2] = (uint8_t)v;
    d += 3;
  }
  return (long)(d - dst);
}
