/* Reply handling: a body, streamed or not, under an arbitrary HTTP status and transfer result,
 * goes through vl_response_write in pieces and vl_response_finish as the runner drives them. The
 * class must be a valid one and must not depend on how the body was split; a response reused
 * after vl_response_begin must give the same outcome as the first time. Nothing of a reply is
 * held: the scanner keeps at most a 64 KiB value, whatever the size of the body or its events.
 *
 * Input: [flags][status: 2 bytes][result][limit][number of cuts][cuts, 2 bytes each][body]; flags:
 * 1 stream, 2 an ITL histogram, 8 status mod 600, 16 SGLang's native reply shape. */
#include "fuzz.h"

#include "vlmload/common.h"
#include "vlmload/hist.h"
#include "vlmload/response.h"

#include <string.h>

typedef struct {
  vl_errclass_t cls;
  int done, malformed, stream_error, oversize;
  uint32_t token_events, events;
  int64_t prompt_tokens, completion_tokens;
  uint64_t content_chars;
} outcome_t;

/* Drives one request as runner.c does: status read at the first byte, pieces until a write
 * refuses (curl then ends the transfer with CURLE_WRITE_ERROR), then the classification. */
static outcome_t drive(vl_response_t *r, int stream, vl_hist_t *itl, long status, CURLcode result,
                       const char *body, size_t n, const size_t *cuts, size_t ncuts) {
  uint64_t t = 1000000;
  vl_response_begin(r, stream, t);
  size_t at = 0;
  for (size_t i = 0; i <= ncuts; i++) {
    size_t end = i < ncuts ? cuts[i] : n;
    if (end == at)
      continue; /* curl never calls the write callback with nothing */
    if (!r->status)
      r->status = status;
    char *piece = malloc(end - at);
    FUZZ_CHECK(piece != NULL);
    memcpy(piece, body + at, end - at);
    t += 1000 + end;
    int rc = vl_response_write(r, piece, end - at, t);
    free(piece);
    FUZZ_CHECK(rc == 0 || rc == VL_E2BIG || rc == VL_ENOMEM);
    if (rc != 0) {
      result = CURLE_WRITE_ERROR;
      break;
    }
    at = end;
  }
  outcome_t o;
  o.cls = vl_response_finish(r, result, status);
  if (itl && o.cls == VL_ERR_NONE)
    vl_response_record_itl(r, itl);
  o.done = r->done;
  o.malformed = r->malformed;
  o.stream_error = r->stream_error;
  o.oversize = r->oversize;
  o.token_events = r->token_events;
  o.events = r->events;
  FUZZ_CHECK(r->scan.cap_sz <= (64u << 10));
  o.prompt_tokens = r->prompt_tokens;
  o.completion_tokens = r->completion_tokens;
  o.content_chars = r->content_chars;
  return o;
}

static void check_same(const outcome_t *a, const outcome_t *b) {
  FUZZ_CHECK(a->cls == b->cls);
  FUZZ_CHECK(a->oversize == b->oversize);
  if (a->cls == VL_ERR_OVERSIZE)
    return; /* refused at the piece that went past the limit: what the pieces before it held was
             * read, so the events seen depend on the cuts; the class alone is the outcome */
  FUZZ_CHECK(a->done == b->done);
  FUZZ_CHECK(a->malformed == b->malformed);
  FUZZ_CHECK(a->stream_error == b->stream_error);
  FUZZ_CHECK(a->token_events == b->token_events);
  FUZZ_CHECK(a->events == b->events);
  FUZZ_CHECK(a->prompt_tokens == b->prompt_tokens);
  FUZZ_CHECK(a->completion_tokens == b->completion_tokens);
  FUZZ_CHECK(a->content_chars == b->content_chars);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const size_t limits[] = {1024, 1500, 4096, 65536, 16u << 20};
  static const CURLcode results[] = {CURLE_OK,
                                     CURLE_OK,
                                     CURLE_OK,
                                     CURLE_OPERATION_TIMEDOUT,
                                     CURLE_COULDNT_CONNECT,
                                     CURLE_WRITE_ERROR,
                                     CURLE_PARTIAL_FILE,
                                     CURLE_RECV_ERROR,
                                     CURLE_GOT_NOTHING,
                                     CURLE_SEND_ERROR,
                                     CURLE_ABORTED_BY_CALLBACK,
                                     CURLE_COULDNT_RESOLVE_HOST};
  fuzz_in_t in = {data, size};
  unsigned flags = fuzz_u8(&in);
  long status = (long)fuzz_u16(&in);
  if (flags & 8)
    status %= 600; /* mostly plausible statuses */
  unsigned rbyte = fuzz_u8(&in);
  CURLcode result =
      rbyte < 0x80 ? results[rbyte % VL_ARRAY_SIZE(results)] : (CURLcode)(rbyte % CURL_LAST);
  size_t max = limits[fuzz_u8(&in) % VL_ARRAY_SIZE(limits)];
  size_t ncuts = fuzz_u8(&in) % 8;
  size_t cuts[8];
  for (size_t i = 0; i < ncuts; i++)
    cuts[i] = fuzz_u16(&in);
  const char *body = (const char *)in.p;
  size_t n = in.n;
  for (size_t i = 0; i < ncuts; i++)
    cuts[i] = n ? cuts[i] % (n + 1) : 0;
  for (size_t i = 1; i < ncuts; i++)
    for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
      size_t t = cuts[j];
      cuts[j] = cuts[j - 1];
      cuts[j - 1] = t;
    }
  int stream = flags & 1;
  vl_hist_t itl, *h = NULL;
  if (flags & 2) {
    FUZZ_CHECK(vl_hist_init(&itl, 100000, 2) == 0); /* small: it is made for every input */
    h = &itl;
  }

  vl_response_t r;
  vl_response_init(&r, max);
  r.native = (flags & 16) != 0;
  outcome_t split = drive(&r, stream, h, status, result, body, n, cuts, ncuts);
  /* The same slot reused for the same reply, fed whole. */
  outcome_t whole = drive(&r, stream, h, status, result, body, n, NULL, 0);
  check_same(&split, &whole);

  FUZZ_CHECK(split.cls >= VL_ERR_NONE && split.cls < VL_ERR__COUNT);
  FUZZ_CHECK(strcmp(vl_errclass_name(split.cls), "unknown") != 0);
  FUZZ_CHECK(split.cls != VL_ERR_CANCELLED); /* only the runner decides that */
  if (split.cls == VL_ERR_NONE) {
    FUZZ_CHECK(result == CURLE_OK && status >= 200 && status < 300);
    if (stream)
      FUZZ_CHECK(split.done && split.completion_tokens >= 0 && split.events > 0);
  }
  if (result == CURLE_OK && status >= 200 && status < 300 && n > max && !stream)
    FUZZ_CHECK(split.cls == VL_ERR_OVERSIZE);
  /* Only a request that succeeded feeds the ITL histogram. */
  if (h)
    FUZZ_CHECK(h->total == (split.cls == VL_ERR_NONE
                                ? 2 * (uint64_t)(split.token_events ? split.token_events - 1 : 0)
                                : 0));

  vl_response_free(&r);
  if (h)
    vl_hist_free(&itl);
  return 0;
}
