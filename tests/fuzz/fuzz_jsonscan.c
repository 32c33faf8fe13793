/* The incremental JSON scanner against cJSON: a text the scanner accepts is one cJSON accepts too,
 * with nothing but white space after the value; the verdict, the values handed back and their
 * lengths do not depend on how the text is split; a top-level string's measured length is the
 * length cJSON decodes; and every value captured whole parses with cJSON.
 *
 * Input: [cut: 2 bytes][text]. Values at depth 0 and 1 are asked for: strings measured at depth
 * 0, everything captured at depth 1 (into a small buffer, so that long ones are cut). */
#include "fuzz.h"

#include "vlmload/common.h"
#include "vlmload/jsonscan.h"

#include <cjson/cJSON.h>
#include <string.h>

typedef struct {
  uint64_t values, sum; /* values handed back and the sum of their lengths */
  uint64_t top_len;     /* the measured top-level string */
  int top_seen;
} sink_t;

static vl_jsonscan_want_t on_value(void *ud, const vl_jsonscan_t *s, int depth, char c) {
  if (depth == 0)
    return c == '"' ? VL_JSONSCAN_MEASURE : VL_JSONSCAN_SKIP;
  return depth == 1 ? VL_JSONSCAN_CAPTURE : VL_JSONSCAN_SKIP;
}

static void on_end(void *ud, const vl_jsonscan_t *s, int depth, const char *text, size_t len,
                   int truncated) {
  sink_t *k = ud;
  k->values++;
  k->sum += len;
  if (!text) {
    FUZZ_CHECK(depth == 0);
    k->top_len = len;
    k->top_seen = 1;
    return;
  }
  FUZZ_CHECK(depth == 1 && len <= 64);
  if (!truncated) {
    cJSON *v = cJSON_ParseWithLength(text, len);
    FUZZ_CHECK(v != NULL);
    cJSON_Delete(v);
  }
}

static int run(const char *p, size_t n, size_t cut, sink_t *k) {
  memset(k, 0, sizeof(*k));
  vl_jsonscan_t s;
  vl_jsonscan_init(&s, 64, on_value, on_end, k);
  int rc = vl_jsonscan_feed(&s, p, cut);
  FUZZ_CHECK(rc == 0 || rc == VL_EJSON);
  rc = vl_jsonscan_feed(&s, p + cut, n - cut);
  FUZZ_CHECK(rc == 0 || rc == VL_EJSON);
  rc = vl_jsonscan_finish(&s);
  vl_jsonscan_free(&s);
  return rc;
}

static int has_nul_escape(const char *p, size_t n) {
  for (size_t i = 0; i + 6 <= n; i++)
    if (memcmp(p + i, "\\u0000", 6) == 0)
      return 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in_t in = {data, size};
  size_t cut = fuzz_u16(&in);
  const char *p = (const char *)in.p;
  size_t n = in.n;
  cut = n ? cut % (n + 1) : 0;
  sink_t a, b;
  int whole = run(p, n, n, &a), split = run(p, n, cut, &b);
  FUZZ_CHECK(whole == split);
  FUZZ_CHECK(a.values == b.values && a.sum == b.sum);
  if (whole != 0)
    return 0;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(p, n, &end, 0);
  FUZZ_CHECK(root != NULL);
  for (; end < p + n; end++)
    FUZZ_CHECK(*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r');
  if (a.top_seen && cJSON_IsString(root)) {
    /* cJSON's string ends at a decoded NUL (\u0000); the scanner counts every byte. */
    FUZZ_CHECK(a.top_len >= strlen(root->valuestring));
    if (!has_nul_escape(p, n))
      FUZZ_CHECK(a.top_len == strlen(root->valuestring));
  }
  cJSON_Delete(root);
  return 0;
}
