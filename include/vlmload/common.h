/* Shared definitions: error codes, time, container_of.
 *
 * Every vlmload function that can fail returns 0 on success or a negative VL_E* code. Errors coming
 * from errno, libcurl (CURLcode, CURLMcode) and libuv are translated in one place, src/common.c,
 * and vl_strerror() names any of them.
 */
#ifndef VLMLOAD_COMMON_H
#define VLMLOAD_COMMON_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define VL_EINVAL  (-EINVAL)
#define VL_ENOMEM  (-ENOMEM)
#define VL_ERANGE  (-ERANGE)
#define VL_EIO     (-EIO)
#define VL_ENOENT  (-ENOENT)
#define VL_E2BIG   (-E2BIG)
#define VL_ECANCEL (-ECANCELED)
#define VL_EAGAIN  (-EAGAIN)
/* Codes past the errno range: one per foreign library. */
#define VL_ECURL   (-4001) /* a CURLcode or CURLMcode other than OK */
#define VL_EUV     (-4002) /* a libuv call failed */
#define VL_EJSON   (-4003) /* malformed JSON */
#define VL_EIMAGE  (-4004) /* an image failed to encode or decode */
#define VL_ETLS    (-4005) /* no TLS session: handshake failed or the certificate was refused */
#define VL_ENOCONN (-4006) /* nothing answered: connection refused, host unknown or unreachable */

#define VL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define VL_MIN(a, b)     ((a) < (b) ? (a) : (b))
#define VL_MAX(a, b)     ((a) > (b) ? (a) : (b))

/* Recovers the address of the struct that embeds `ptr` as its member `member`. */
#define vl_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Returns a static, human-readable text for a VL_E* code (or a negated errno). */
const char *vl_strerror(int err);

/* Formats a reason into err as one line (line breaks become spaces); nothing when err is NULL or
 * errlen 0. */
__attribute__((format(printf, 3, 4))) void vl_set_err(char *err, size_t errlen, const char *fmt,
                                                      ...);

/* Monotonic time in nanoseconds (CLOCK_MONOTONIC). */
uint64_t vl_now_ns(void);

/* Wall-clock time in milliseconds since the Unix epoch (CLOCK_REALTIME). */
int64_t vl_wall_ms(void);

/* Allocation that never returns NULL: prints one line and aborts when memory is exhausted. Used for
 * start-up structures only; the hot path allocates nothing. */
/* The cores this process may run on, in order, into cores[0..cap). Returns how many (at least
 * one: core 0 when the set cannot be read). */
int vl_cpu_list(int *cores, int cap);

void *vl_xmalloc(size_t n);
void *vl_xcalloc(size_t n, size_t size);
void *vl_xrealloc(void *p, size_t n);
char *vl_xstrdup(const char *s);
/* The first n bytes of s (which need not be NUL-terminated there), NUL-terminated. */
char *vl_xstrndup(const char *s, size_t n);
/* A new string formatted as printf would. */
__attribute__((format(printf, 1, 2))) char *vl_xfmt(const char *fmt, ...);

#endif
