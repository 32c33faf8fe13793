/* Standard base64 (RFC 4648, alphabet "+/", '=' padding). */
#ifndef VLMLOAD_BASE64_H
#define VLMLOAD_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Bytes needed to encode n bytes, without a terminator. */
static inline size_t vl_base64_encoded_len(size_t n) {
  return (n + 2) / 3 * 4;
}

/* Encodes n bytes from src into dst, which holds vl_base64_encoded_len(n) bytes. Writes no
 * terminator. Returns the number of bytes written. */
size_t vl_base64_encode(char *dst, const uint8_t *src, size_t n);

/* Decodes n characters of base64 into dst, which holds at least n / 4 * 3 bytes. Accepts padded
 * input only (n a multiple of 4) and no whitespace. Returns the number of bytes written, or -1 for
 * malformed input. */
long vl_base64_decode(uint8_t *dst, const char *src, size_t n);

#endif
