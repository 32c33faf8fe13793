/* The Prometheus text parser on arbitrary exposition text, and metric selectors on an arbitrary
 * first line. Checked: the parse reads only the bytes given (an exact-size copy); every sample is
 * well formed; CRLF line ends give the same samples as LF; a parse that fails on line N delivered
 * exactly what parsing lines 1..N-1 alone delivers; a callback's stop value is returned; and a
 * selector that parses matches samples without trouble.
 *
 * Input: [flags][text]. Flag 1: the text's first line is a --monitor-prom argument, the rest the
 * exposition. Flags 2-7 (as a number 1-63): the callback stops the parse at that sample. */
#include "fuzz.h"

#include "vlmload/common.h"
#include "vlmload/prom.h"

#include <math.h>
#include <string.h>
#include <strings.h>

typedef struct {
  uint8_t *log; /* every sample serialised */
  size_t len, cap;
  size_t n, stop_at, last_line;
  const vl_prom_target_t *target;
} sink_t;

static void put(sink_t *k, const void *p, size_t n) {
  if (k->len + n > k->cap) {
    k->cap = (k->len + n) * 2;
    k->log = realloc(k->log, k->cap);
    FUZZ_CHECK(k->log != NULL);
  }
  memcpy(k->log + k->len, p, n);
  k->len += n;
}

static int on_sample(const vl_prom_sample_t *s, void *ud) {
  sink_t *k = ud;
  FUZZ_CHECK(s->name && s->name[0] != '\0');
  FUZZ_CHECK(s->labels_canon != NULL);
  FUZZ_CHECK(s->labels_canon[0] == '\0' ? s->n_labels == 0
                                        : s->labels_canon[0] == '{' && s->n_labels > 0);
  FUZZ_CHECK(s->n_labels <= VL_PROM_MAX_LABELS);
  FUZZ_CHECK(s->line >= 1 && s->line >= k->last_line);
  FUZZ_CHECK(s->type >= VL_PROM_UNTYPED && s->type <= VL_PROM_SUMMARY);
  k->last_line = s->line;
  put(k, s->name, strlen(s->name) + 1);
  put(k, s->labels_canon, strlen(s->labels_canon) + 1);
  for (size_t i = 0; i < s->n_labels; i++) {
    FUZZ_CHECK(s->labels[i].name[0] != '\0');
    for (size_t j = 0; j < i; j++)
      FUZZ_CHECK(strcmp(s->labels[i].name, s->labels[j].name) != 0);
    put(k, s->labels[i].name, strlen(s->labels[i].name) + 1);
    put(k, s->labels[i].value, strlen(s->labels[i].value) + 1);
  }
  double v = isnan(s->value) ? NAN : s->value; /* one NaN for comparisons */
  uint8_t type = (uint8_t)s->type, has_ts = (uint8_t)s->has_ts;
  put(k, &v, sizeof(v));
  put(k, &has_ts, 1);
  if (s->has_ts)
    put(k, &s->ts_ms, sizeof(s->ts_ms));
  put(k, &type, 1);
  put(k, &s->line, sizeof(s->line));
  if (k->target)
    (void)vl_prom_target_match(k->target, s);
  k->n++;
  return k->stop_at && k->n == k->stop_at ? VL_ECANCEL : 0;
}

/* Parses an exact-size heap copy of text. */
static int parse(const char *text, size_t n, sink_t *k, char *err, size_t errlen) {
  char *copy = malloc(n ? n : 1);
  FUZZ_CHECK(copy != NULL);
  memcpy(copy, text, n);
  int rc = vl_prom_parse(copy, n, on_sample, k, err, errlen);
  free(copy);
  FUZZ_CHECK(rc == 0 || rc == VL_EINVAL || rc == VL_ENOMEM || rc == VL_ECANCEL);
  FUZZ_CHECK(rc != VL_ECANCEL || (k->stop_at && k->n == k->stop_at));
  FUZZ_CHECK(rc != VL_EINVAL || strncmp(err, "line ", 5) == 0);
  return rc;
}

static void check_same(const sink_t *a, const sink_t *b) {
  FUZZ_CHECK(a->n == b->n && a->len == b->len);
  FUZZ_CHECK(a->len == 0 || memcmp(a->log, b->log, a->len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536)
    return 0;
  fuzz_in_t in = {data, size};
  unsigned flags = fuzz_u8(&in);
  const char *text = (const char *)in.p;
  size_t n = in.n;

  vl_prom_target_t target = {0};
  int have_target = 0;
  if (flags & 1) {
    const char *nl = memchr(text, '\n', n);
    size_t first = nl ? (size_t)(nl - text) : n;
    if (first <= 256) { /* a command-line argument; POSIX regcomp on long ones is slow */
      char *arg = fuzz_dup((const uint8_t *)text, first);
      char err[256];
      int rc = vl_prom_select_parse(arg, &target, err, sizeof(err));
      FUZZ_CHECK(rc == 0 || rc == VL_EINVAL);
      if (rc == 0) {
        FUZZ_CHECK(target.url && target.n_sels > 0);
        /* Schemes are case-insensitive (RFC 3986), as curl takes them. */
        FUZZ_CHECK(strncasecmp(target.url, "http://", 7) == 0 ||
                   strncasecmp(target.url, "https://", 8) == 0);
        have_target = 1;
      } else {
        FUZZ_CHECK(target.url == NULL && target.n_sels == 0 && err[0] != '\0');
      }
      free(arg);
    }
    text += nl ? first + 1 : first;
    n -= nl ? first + 1 : first;
  }

  char err[256];
  sink_t whole = {.stop_at = (flags >> 1) & 63, .target = have_target ? &target : NULL};
  int rc = parse(text, n, &whole, err, sizeof(err));

  /* CRLF line ends read as LF ones. */
  if (!memchr(text, '\r', n) && n < 32768) {
    char *crlf = malloc(2 * n + 1);
    FUZZ_CHECK(crlf != NULL);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
      if (text[i] == '\n')
        crlf[m++] = '\r';
      crlf[m++] = text[i];
    }
    sink_t k = {.stop_at = whole.stop_at};
    char err2[256];
    int rc2 = parse(crlf, m, &k, err2, sizeof(err2));
    FUZZ_CHECK(rc2 == rc);
    check_same(&whole, &k);
    if (rc == VL_EINVAL)
      FUZZ_CHECK(strcmp(err, err2) == 0);
    free(crlf);
    free(k.log);
  }

  /* A failure on line N: lines 1..N-1 alone parse, to the same samples. */
  if (rc == VL_EINVAL) {
    unsigned long line = strtoul(err + 5, NULL, 10);
    FUZZ_CHECK(line >= 1);
    size_t off = 0;
    for (unsigned long l = 1; l < line; l++) {
      const char *nl = memchr(text + off, '\n', n - off);
      FUZZ_CHECK(nl != NULL);
      off = (size_t)(nl - text) + 1;
    }
    sink_t k = {0};
    char err2[256];
    FUZZ_CHECK(parse(text, off, &k, err2, sizeof(err2)) == 0);
    check_same(&whole, &k);
    free(k.log);
  }

  free(whole.log);
  vl_prom_target_free(&target);
  return 0;
}
