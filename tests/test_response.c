/* Reply handling: token timing and usage from an SSE stream fed in arbitrary chunks, the JSON of a
 * non-streamed reply, and the error class of every kind of outcome. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/response.h"

#include <math.h>

static const char stream[] =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"
    ": keep-alive\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\r\n\r\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" world\"}}]}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3}}\n\n"
    "data: [DONE]\n\n";

/* Feeds the stream cut at `cut`, with each event's bytes arriving 10 ms after the previous. */
static void feed_stream(vl_response_t *r, size_t cut, vl_hist_t *itl) {
  vl_response_begin(r, 1, 1000);
  r->status = 200;
  size_t n = sizeof(stream) - 1;
  uint64_t t = 1000000;
  size_t pos = 0;
  while (pos < n) {
    /* Deliver one event (up to and including its blank line) per time step, split at cut. */
    const char *end = strstr(stream + pos, "\n\n");
    const char *end2 = strstr(stream + pos, "\r\n\r\n");
    size_t evlen = end ? (size_t)(end - (stream + pos)) + 2 : n - pos;
    if (end2 && (!end || end2 < end))
      evlen = (size_t)(end2 - (stream + pos)) + 4;
    size_t a = cut < evlen ? cut : evlen;
    ASSERT_INT_EQ(vl_response_write(r, stream + pos, a, t), 0);
    ASSERT_INT_EQ(vl_response_write(r, stream + pos + a, evlen - a, t), 0);
    pos += evlen;
    t += 10000000;
  }
}

TEST_IMPL(response_stream) {
  vl_hist_t itl;
  ASSERT_INT_EQ(vl_hist_init(&itl, 3600000000ll, 3), 0);
  for (size_t cut = 0; cut < 80; cut++) {
    vl_response_t r;
    vl_response_init(&r, 1 << 20);
    vl_hist_reset(&itl);
    feed_stream(&r, cut, &itl);
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
    ASSERT_UINT_EQ(r.token_events, 3);
    /* The first content arrives with the second event, 10 ms after the first byte. */
    ASSERT_UINT_EQ(r.t_first_token_ns - r.t_first_byte_ns, 10000000);
    ASSERT_UINT_EQ(r.itl_sum_ns, 30000000); /* gaps 20 ms (comment event between) and 10 ms */
    ASSERT_UINT_EQ(itl.total, 0);           /* the gaps wait with the response */
    vl_response_record_itl(&r, &itl);
    ASSERT_UINT_EQ(itl.total, 2);
    ASSERT_INT_EQ(r.prompt_tokens, 12);
    ASSERT_INT_EQ(r.completion_tokens, 3);
    ASSERT_UINT_EQ(r.content_chars, 11);
    ASSERT(r.done);
    vl_response_free(&r);
  }
  vl_hist_free(&itl);
}

TEST_IMPL(response_stream_truncated) {
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  vl_response_begin(&r, 1, 0);
  r.status = 200;
  const char *part = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"cho";
  ASSERT_INT_EQ(vl_response_write(&r, part, strlen(part), 5), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_TRUNCATED);
  /* Without [DONE], even on an event boundary, the stream is cut short. */
  vl_response_begin(&r, 1, 0);
  r.status = 200;
  part = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
  ASSERT_INT_EQ(vl_response_write(&r, part, strlen(part), 5), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_TRUNCATED);
  /* A connection lost mid-stream is truncation too. */
  vl_response_begin(&r, 1, 0);
  r.status = 200;
  ASSERT_INT_EQ(vl_response_write(&r, part, strlen(part), 5), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_RECV_ERROR, 200), VL_ERR_TRUNCATED);
  vl_response_free(&r);
}

TEST_IMPL(response_stream_malformed_and_error) {
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  vl_response_begin(&r, 1, 0);
  r.status = 200;
  const char *s = "data: {not json}\n\ndata: [DONE]\n\n";
  ASSERT_INT_EQ(vl_response_write(&r, s, strlen(s), 5), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_MALFORMED);
  vl_response_begin(&r, 1, 0);
  r.status = 200;
  s = "data: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n";
  ASSERT_INT_EQ(vl_response_write(&r, s, strlen(s), 5), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_STREAM);
  vl_response_free(&r);
}

TEST_IMPL(response_json) {
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  vl_response_begin(&r, 0, 0);
  const char *ok = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"four\"}}],"
                   "\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}";
  /* Split anywhere: the body is parsed whole at the end. */
  ASSERT_INT_EQ(vl_response_write(&r, ok, 10, 1), 0);
  ASSERT_INT_EQ(vl_response_write(&r, ok + 10, strlen(ok) - 10, 2), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
  ASSERT_INT_EQ(r.prompt_tokens, 9);
  ASSERT_INT_EQ(r.completion_tokens, 1);
  ASSERT_UINT_EQ(r.content_chars, 4);

  const char *bad[] = {"", "{", "[]", "{\"choices\":[]}", "{\"choices\":[{\"message\":1}]}"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    vl_response_begin(&r, 0, 0);
    ASSERT_INT_EQ(vl_response_write(&r, bad[i], strlen(bad[i]), 1), 0);
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_MALFORMED);
  }
  vl_response_free(&r);
}

/* Token counts a server should never send (huge, negative, fractional, not numbers) read as unknown
 * or truncated, never as an undefined conversion. */
TEST_IMPL(response_usage_out_of_range) {
  static const struct {
    const char *usage;
    int64_t prompt, completion;
  } cases[] = {
      {"{\"prompt_tokens\":1e60,\"completion_tokens\":-5}", -1, -1},
      {"{\"prompt_tokens\":9007199254740993e3,\"completion_tokens\":2.7}", -1, 2},
      {"{\"prompt_tokens\":\"7\",\"completion_tokens\":null}", -1, -1},
      {"{\"prompt_tokens\":9007199254740992,\"completion_tokens\":0}", 9007199254740992ll, 0},
      /* The first of a name counts, as cJSON's lookup takes it, usage objects too; nested counts
       * are not the usage's; a count may be written long. */
      {"{\"prompt_tokens\":4,\"prompt_tokens\":5,\"completion_tokens\":6}", 4, 6},
      {"{\"prompt_tokens_details\":{\"prompt_tokens\":1},\"prompt_tokens\":11}", 11, -1},
      {"{\"prompt_tokens\":3,\"completion_tokens\":9},\"usage\":{\"completion_tokens\":4}", 3, 9},
      {"{\"prompt_tokens\":8.000000000000000000000000000000000000000000000000000000000000000000001,"
       "\"completion_tokens\":-0}",
       8, 0},
      {"[8,1]", -1, -1},
  };
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  for (size_t i = 0; i < VL_ARRAY_SIZE(cases); i++) {
    char body[512];
    snprintf(body, sizeof(body), "{\"choices\":[{\"message\":{\"content\":\"x\"}}],\"usage\":%s}",
             cases[i].usage);
    vl_response_begin(&r, 0, 0);
    ASSERT_INT_EQ(vl_response_write(&r, body, strlen(body), 1), 0);
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
    ASSERT_INT_EQ(r.prompt_tokens, cases[i].prompt);
    ASSERT_INT_EQ(r.completion_tokens, cases[i].completion);
  }
  vl_response_free(&r);
}

TEST_IMPL(response_oversize) {
  vl_response_t r;
  vl_response_init(&r, 1024);
  vl_response_begin(&r, 0, 0);
  char junk[600];
  memset(junk, 'x', sizeof(junk));
  ASSERT_INT_EQ(vl_response_write(&r, junk, sizeof(junk), 1), 0);
  ASSERT_INT_EQ(vl_response_write(&r, junk, sizeof(junk), 1), VL_E2BIG);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_WRITE_ERROR, 200), VL_ERR_OVERSIZE);
  vl_response_free(&r);
}

/* A stream is read up to the limit, whatever the pieces: its [DONE] within the limit ends it, even
 * in a piece that goes past the limit; a stream that has not ended by the limit is oversize. */
TEST_IMPL(response_stream_limit) {
  size_t n = sizeof(stream) - 1;
  char body[sizeof(stream) + 300];
  memcpy(body, stream, n);
  memset(body + n, 'x', 300); /* past [DONE]: never read */
  for (int whole = 0; whole < 2; whole++) {
    vl_response_t r;
    vl_response_init(&r, n + 10);
    vl_response_begin(&r, 1, 0);
    r.status = 200;
    if (whole) {
      ASSERT_INT_EQ(vl_response_write(&r, body, n + 300, 1), 0);
    } else {
      ASSERT_INT_EQ(vl_response_write(&r, body, n - 20, 1), 0);
      ASSERT_INT_EQ(vl_response_write(&r, body + n - 20, 320, 2), 0);
    }
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
    ASSERT_UINT_EQ(r.token_events, 3);
    vl_response_free(&r);

    vl_response_init(&r, n - 8); /* [DONE]'s event does not fit */
    vl_response_begin(&r, 1, 0);
    r.status = 200;
    if (!whole)
      ASSERT_INT_EQ(vl_response_write(&r, body, n - 20, 1), 0);
    ASSERT_INT_EQ(vl_response_write(&r, body + (whole ? 0 : n - 20), whole ? n : 20, 2), VL_E2BIG);
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_WRITE_ERROR, 200), VL_ERR_OVERSIZE);
    vl_response_free(&r);
  }
}

TEST_IMPL(response_classes) {
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  struct {
    CURLcode cc;
    long status;
    int stream;
    vl_errclass_t want;
  } cases[] = {
      {CURLE_COULDNT_CONNECT, 0, 0, VL_ERR_CONNECT},
      {CURLE_COULDNT_RESOLVE_HOST, 0, 0, VL_ERR_CONNECT},
      {CURLE_OPERATION_TIMEDOUT, 0, 0, VL_ERR_TIMEOUT},
      {CURLE_OPERATION_TIMEDOUT, 200, 1, VL_ERR_TIMEOUT},
      {CURLE_GOT_NOTHING, 0, 0, VL_ERR_TRANSPORT},
      {CURLE_SEND_ERROR, 0, 0, VL_ERR_TRANSPORT},
      {CURLE_PARTIAL_FILE, 200, 0, VL_ERR_TRUNCATED},
      {CURLE_OK, 400, 0, VL_ERR_HTTP_4XX},
      {CURLE_OK, 404, 1, VL_ERR_HTTP_4XX},
      {CURLE_OK, 429, 0, VL_ERR_HTTP_429},
      {CURLE_OK, 500, 0, VL_ERR_HTTP_5XX},
      {CURLE_OK, 503, 1, VL_ERR_HTTP_5XX},
      {CURLE_OK, 302, 0, VL_ERR_HTTP_OTHER},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(cases); i++) {
    vl_response_begin(&r, cases[i].stream, 0);
    ASSERT_INT_EQ(vl_response_finish(&r, cases[i].cc, cases[i].status), cases[i].want);
  }
  for (int c = 0; c < VL_ERR__COUNT; c++)
    ASSERT(strcmp(vl_errclass_name((vl_errclass_t)c), "unknown") != 0);
  vl_response_free(&r);
}

/* SGLang's native stream: every event carries the text so far and the counts so far. The first
 * event's text is empty (a token held back), a repeated event brings nothing, and the counts come
 * from meta_info. */
static const char native_stream[] =
    "data: {\"text\":\"\",\"meta_info\":{\"id\":\"a\",\"finish_reason\":null,"
    "\"prompt_tokens\":40,\"completion_tokens\":1}}\n\n"
    "data: {\"text\":\"Hel\",\"meta_info\":{\"prompt_tokens\":40,\"completion_tokens\":2}}\n\n"
    "data: {\"text\":\"Hel\",\"meta_info\":{\"prompt_tokens\":40,\"completion_tokens\":2}}\n\n"
    "data: {\"text\":\"Hello\",\"meta_info\":{\"prompt_tokens\":40,\"completion_tokens\":3}}\n\n"
    "data: {\"text\":\"Hello world\",\"meta_info\":{\"finish_reason\":{\"type\":\"length\","
    "\"length\":4},\"prompt_tokens\":40,\"completion_tokens\":4}}\n\n"
    "data: [DONE]\n\n";

TEST_IMPL(response_native_stream) {
  vl_hist_t itl;
  ASSERT_INT_EQ(vl_hist_init(&itl, 3600000000ll, 3), 0);
  for (size_t cut = 0; cut < 120; cut += 7) {
    vl_response_t r;
    vl_response_init(&r, 1 << 20);
    r.native = 1;
    vl_hist_reset(&itl);
    vl_response_begin(&r, 1, 1000);
    r.status = 200;
    /* One event per 10 ms, each split at cut. */
    uint64_t t = 1000000;
    for (const char *ev = native_stream; *ev; t += 10000000) {
      size_t len = (size_t)(strstr(ev, "\n\n") + 2 - ev), a = cut < len ? cut : len;
      ASSERT_INT_EQ(vl_response_write(&r, ev, a, t), 0);
      ASSERT_INT_EQ(vl_response_write(&r, ev + a, len - a, t), 0);
      ev += len;
    }
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
    ASSERT_UINT_EQ(r.token_events, 3);
    ASSERT_UINT_EQ(r.t_first_token_ns - r.t_first_byte_ns, 10000000); /* the second event */
    ASSERT_UINT_EQ(r.itl_sum_ns, 30000000); /* 20 ms over the repeat, then 10 ms */
    vl_response_record_itl(&r, &itl);
    ASSERT_UINT_EQ(itl.total, 2);
    ASSERT_INT_EQ(r.prompt_tokens, 40);
    ASSERT_INT_EQ(r.completion_tokens, 4);
    ASSERT_UINT_EQ(r.content_chars, 11);
    vl_response_free(&r);
  }
  vl_hist_free(&itl);
}

/* Incremental native streams (--incremental-streaming-output) carry only the new text. */
TEST_IMPL(response_native_stream_incremental) {
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  r.native = 1;
  vl_response_begin(&r, 1, 0);
  r.status = 200;
  const char *s = "data: {\"text\":\"a\",\"meta_info\":{\"completion_tokens\":1}}\n\n"
                  "data: {\"text\":\"b\",\"meta_info\":{\"completion_tokens\":2}}\n\n"
                  "data: {\"text\":\"c\"}\n\n"
                  "data: [DONE]\n\n";
  ASSERT_INT_EQ(vl_response_write(&r, s, strlen(s), 5), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
  /* The last event says no count: its count did not move past the previous one. */
  ASSERT_UINT_EQ(r.token_events, 2);
  ASSERT_INT_EQ(r.completion_tokens, 2);
  /* Without any count, tokens are the events with text. */
  vl_response_begin(&r, 1, 0);
  r.status = 200;
  s = "data: {\"text\":\"a\"}\n\ndata: {\"text\":\"ab\"}\n\ndata: [DONE]\n\n";
  ASSERT_INT_EQ(vl_response_write(&r, s, strlen(s), 5), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
  ASSERT_UINT_EQ(r.token_events, 2);
  ASSERT_INT_EQ(r.completion_tokens, 2);
  vl_response_free(&r);
}

/* Native streams fail in the same classes as chat streams. */
TEST_IMPL(response_native_stream_errors) {
  static const struct {
    const char *body;
    vl_errclass_t want;
  } cases[] = {
      {"data: {\"text\":\"a\",\"meta_info\":{\"completion_tokens\":1}}\n\n", VL_ERR_TRUNCATED},
      {"data: {\"text\":\"a\",\"meta_info\":{\"completion_tokens\":1}}\n\ndata: {\"te",
       VL_ERR_TRUNCATED},
      {"data: {\"text\":\"a\",\"meta_\n\ndata: [DONE]\n\n", VL_ERR_MALFORMED},
      {"data: {\"error\":{\"message\":\"bad image\"}}\n\ndata: [DONE]\n\n", VL_ERR_STREAM},
  };
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  r.native = 1;
  for (size_t i = 0; i < VL_ARRAY_SIZE(cases); i++) {
    vl_response_begin(&r, 1, 0);
    r.status = 200;
    ASSERT_INT_EQ(vl_response_write(&r, cases[i].body, strlen(cases[i].body), 5), 0);
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), cases[i].want);
  }
  vl_response_free(&r);
}

TEST_IMPL(response_native_json) {
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  r.native = 1;
  vl_response_begin(&r, 0, 0);
  const char *ok = "{\"text\":\"four\",\"output_ids\":[1,2],\"meta_info\":{\"id\":\"x\","
                   "\"finish_reason\":{\"type\":\"stop\",\"matched\":2},\"prompt_tokens\":300,"
                   "\"completion_tokens\":2,\"cached_tokens\":0}}";
  ASSERT_INT_EQ(vl_response_write(&r, ok, 9, 1), 0);
  ASSERT_INT_EQ(vl_response_write(&r, ok + 9, strlen(ok) - 9, 2), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
  ASSERT_INT_EQ(r.prompt_tokens, 300);
  ASSERT_INT_EQ(r.completion_tokens, 2);
  ASSERT_UINT_EQ(r.content_chars, 4);
  /* A chat completion is not a native reply, nor a list of them. */
  const char *bad[] = {"", "[{\"text\":\"a\"}]", "{\"text\":1}",
                       "{\"choices\":[{\"message\":{\"content\":\"x\"}}]}"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    vl_response_begin(&r, 0, 0);
    ASSERT_INT_EQ(vl_response_write(&r, bad[i], strlen(bad[i]), 1), 0);
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_MALFORMED);
  }
  vl_response_begin(&r, 0, 0);
  const char *err = "{\"error\":{\"message\":\"x\"}}";
  ASSERT_INT_EQ(vl_response_write(&r, err, strlen(err), 1), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_STREAM);
  vl_response_free(&r);
}

/* Feeds body whole as a 2xx reply of the given kind and returns the class. */
static vl_errclass_t whole(vl_response_t *r, int streamed, long status, const char *body) {
  vl_response_begin(r, streamed, 0);
  r->status = status;
  ASSERT_INT_EQ(vl_response_write(r, body, strlen(body), 5), 0);
  return vl_response_finish(r, CURLE_OK, status);
}

/* WHATWG: empty data dispatches nothing; [DONE] with white space ends the stream; nothing after
 * it counts. */
TEST_IMPL(response_sse_edges) {
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  ASSERT_INT_EQ(whole(&r, 1, 200,
                      "data:\n\ndata: \n\ndata\n\n"
                      "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
                      "data: [DONE] \t\n\n"
                      "data: {\"choices\":[],\"usage\":{\"completion_tokens\":26}}\n\n"
                      "data: {\"cho"),
                VL_ERR_NONE);
  ASSERT_INT_EQ(r.completion_tokens, 1);
  ASSERT_UINT_EQ(r.token_events, 1);
  /* A JSON body to a streamed request: malformed, or an error when it holds one. */
  ASSERT_INT_EQ(whole(&r, 1, 200, "{\"choices\":[{\"message\":{\"content\":\"a\"}}]}"),
                VL_ERR_MALFORMED);
  ASSERT_INT_EQ(whole(&r, 1, 200, "{\"error\":{\"message\":\"no\"}}"), VL_ERR_STREAM);
  ASSERT_STR_EQ(r.error_msg, "no");
  vl_response_begin(&r, 1, 0);
  r.status = 200;
  r.json_ctype = 1;
  ASSERT_INT_EQ(vl_response_write(&r, " {}", 3, 5), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_MALFORMED);
  /* Bytes after a whole JSON value, in a body or in an event. */
  ASSERT_INT_EQ(whole(&r, 0, 200, "{\"choices\":[{\"message\":{\"content\":\"a\"}}]} x"),
                VL_ERR_MALFORMED);
  ASSERT_INT_EQ(whole(&r, 1, 200, "data: {\"choices\":[]} x\n\ndata: [DONE]\n\n"),
                VL_ERR_MALFORMED);
  /* Tool calls with null content, whole and streamed. */
  ASSERT_INT_EQ(
      whole(&r, 0, 200,
            "{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"c\"}]}}],"
            "\"usage\":{\"completion_tokens\":7}}"),
      VL_ERR_NONE);
  ASSERT_INT_EQ(r.completion_tokens, 7);
  ASSERT_INT_EQ(whole(&r, 0, 200, "{\"choices\":[{\"message\":{\"content\":null}}]}"),
                VL_ERR_MALFORMED);
  ASSERT_INT_EQ(whole(&r, 1, 200,
                      "data: {\"choices\":[{\"delta\":{\"content\":null,\"tool_calls\":[{}]}}]}\n\n"
                      "data: [DONE]\n\n"),
                VL_ERR_NONE);
  ASSERT_UINT_EQ(r.token_events, 1);
  vl_response_free(&r);
}

/* The status decides: a large error body is read for its message and dropped, never oversize. */
TEST_IMPL(response_status_first) {
  vl_response_t r;
  vl_response_init(&r, 4096);
  for (int streamed = 0; streamed <= 1; streamed++) {
    vl_response_begin(&r, streamed, 0);
    r.status = 503;
    const char *head = "{\"error\":{\"message\":\"busy\",\"pad\":\"";
    ASSERT_INT_EQ(vl_response_write(&r, head, strlen(head), 1), 0);
    char pad[8192];
    memset(pad, 'p', sizeof(pad));
    for (int i = 0; i < 2560; i++) /* 20 MiB */
      ASSERT_INT_EQ(vl_response_write(&r, pad, sizeof(pad), 2), 0);
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 503), VL_ERR_HTTP_5XX);
    ASSERT_STR_EQ(r.error_msg, "busy");
  }
  long other[] = {999, 600, 99, 302, 101};
  for (size_t i = 0; i < VL_ARRAY_SIZE(other); i++) {
    vl_response_begin(&r, 0, 0);
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, other[i]), VL_ERR_HTTP_OTHER);
  }
  /* A reset in the middle of a 500's body is still the 500. */
  vl_response_begin(&r, 1, 0);
  r.status = 500;
  ASSERT_INT_EQ(vl_response_write(&r, "{\"err", 5, 1), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_RECV_ERROR, 500), VL_ERR_HTTP_5XX);
  /* A stream past the limit, in many small events. */
  vl_response_begin(&r, 1, 0);
  r.status = 200;
  const char *ev = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
  int rc = 0;
  for (int i = 0; i < 200 && rc == 0; i++)
    rc = vl_response_write(&r, ev, strlen(ev), 1);
  ASSERT_INT_EQ(rc, VL_E2BIG);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_WRITE_ERROR, 200), VL_ERR_OVERSIZE);
  vl_response_free(&r);
}

/* Reasoning is tokens and the first token; the first content token is timed on its own. An error
 * event keeps its message; "error": null is none. */
TEST_IMPL(response_reasoning_and_errors) {
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  vl_response_begin(&r, 1, 0);
  r.status = 200;
  const char *ev[] = {"data: {\"choices\":[{\"delta\":{\"reasoning\":\"hm\"}}]}\n\n",
                      "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"m\"}}]}\n\n",
                      "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n",
                      "data: [DONE]\n\n"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(ev); i++)
    ASSERT_INT_EQ(vl_response_write(&r, ev[i], strlen(ev[i]), 1000 * (i + 1)), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
  ASSERT_UINT_EQ(r.token_events, 3);
  ASSERT_UINT_EQ(r.t_first_token_ns, 1000);
  ASSERT_UINT_EQ(r.t_first_content_ns, 3000);
  ASSERT_INT_EQ(r.completion_tokens, 3);
  ASSERT_INT_EQ(whole(&r, 1, 200,
                      "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
                      "data: {\"error\":{\"message\":\"engine\\u00e9 \\u0007died\"}}\n\n"
                      "data: [DONE]\n\n"),
                VL_ERR_STREAM);
  ASSERT_STR_EQ(r.error_msg, "engine\xc3\xa9  died");
  ASSERT_INT_EQ(whole(&r, 0, 200, "{\"error\":\"plain\"}"), VL_ERR_STREAM);
  ASSERT_STR_EQ(r.error_msg, "plain");
  ASSERT_INT_EQ(
      whole(&r, 0, 200, "{\"error\":null,\"choices\":[{\"message\":{\"content\":\"a\"}}]}"),
      VL_ERR_NONE);
  ASSERT_STR_EQ(r.error_msg, "");
  vl_response_free(&r);
}

/* Each event is read as cJSON would read it: the first member of a name counts, an empty
 * tool_calls brings no token, an event that is no JSON object counts nothing of what it held (its
 * error's message included), and a null error is none. */
TEST_IMPL(response_stream_event_members) {
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  ASSERT_INT_EQ(
      whole(&r, 1, 200,
            "data: {\"choices\":[{\"delta\":{\"content\":\"ab\",\"content\":\"xyz\"}}],"
            "\"choices\":[{\"delta\":{\"content\":\"12345\"}}]}\n\n"
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[ ]}}]}\n\n"
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"t\"}]}}]}\n\n"
            "data: {\"choices\":[{\"delta\":{\"reasoning\":\"r\",\"reasoning_content\":\"rc\"}},"
            "{\"delta\":{\"content\":\"other choice\"}}]}\n\n"
            "data: {\"error\":null,\"choices\":[{\"delta\":{\"content\":null}}]}\n\n"
            "data: [1,2]\n\n"
            "data: {\"error\":\"hidden\",\"choices\":[{\"delta\":{\"content\":\"q\"}}]\n\n"
            "data: {\"choices\":[],\"usage\":{\"completion_tokens\":7,\"completion_tokens\":9},"
            "\"usage\":{\"completion_tokens\":11,\"prompt_tokens\":5}}\n\n"
            "data: [DONE]\n\n"),
      VL_ERR_MALFORMED);
  ASSERT_UINT_EQ(r.token_events, 3); /* "ab", the tool call, the reasoning */
  ASSERT_UINT_EQ(r.content_chars, 2 + 1 + 2);
  ASSERT_INT_EQ(r.completion_tokens, 7);
  ASSERT_INT_EQ(r.prompt_tokens, -1);
  ASSERT_INT_EQ(r.stream_error, 0);
  ASSERT_STR_EQ(r.error_msg, "");
  ASSERT_INT_EQ(whole(&r, 1, 200,
                      "data: {\"error\":{\"code\":1,\"message\":\"first\",\"message\":\"second\"},"
                      "\"error\":\"later\"}\n\n"
                      "data: [DONE]\n\n"),
                VL_ERR_STREAM);
  ASSERT_STR_EQ(r.error_msg, "first");
  vl_response_free(&r);
}

/* Conversations keep a reply's content: the streamed deltas in order (not reasoning), or a whole
 * reply's message content unescaped; a whole content longer than the capture is cut. */
typedef struct {
  char text[256];
  size_t len;
  int calls;
} sink_t;

static void sink(void *ud, const char *s, size_t n) {
  sink_t *k = ud;
  ASSERT(k->len + n < sizeof(k->text));
  memcpy(k->text + k->len, s, n);
  k->len += n;
  k->text[k->len] = '\0';
  k->calls++;
}

TEST_IMPL(response_keep_content) {
  static const char reasoned[] =
      "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"a\\\"b\\n\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"\\u00e9c\"}}]}\n\n"
      "data: [DONE]\n\n";
  for (size_t cut = 1; cut < 40; cut++) {
    vl_response_t r;
    vl_response_init(&r, 1 << 20);
    sink_t k = {{0}, 0, 0};
    vl_response_begin(&r, 1, 1000);
    vl_response_keep_content(&r, sink, &k, 1000);
    r.status = 200;
    for (size_t pos = 0; pos < sizeof(reasoned) - 1; pos += cut)
      ASSERT_INT_EQ(
          vl_response_write(&r, reasoned + pos, VL_MIN(cut, sizeof(reasoned) - 1 - pos), 2000), 0);
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
    ASSERT_STR_EQ(k.text, "a\"b\n\xc3\xa9"
                          "c");
    ASSERT_INT_EQ(k.calls, 2);
    /* The next request keeps nothing unless asked again. */
    vl_response_begin(&r, 1, 3000);
    ASSERT(r.content_sink == NULL);
    vl_response_free(&r);
  }
  static const char whole[] =
      "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"reasoning\":\"x\","
      "\"content\":\"q \\\"\\\\ \\u00e9\"}}],\"usage\":{\"prompt_tokens\":3,"
      "\"completion_tokens\":2}}";
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  sink_t k = {{0}, 0, 0};
  vl_response_begin(&r, 0, 1000);
  vl_response_keep_content(&r, sink, &k, 100);
  r.status = 200;
  ASSERT_INT_EQ(vl_response_write(&r, whole, sizeof(whole) - 1, 2000), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
  ASSERT_STR_EQ(k.text, "q \"\\ \xc3\xa9");
  ASSERT_INT_EQ(r.completion_tokens, 2);
  ASSERT(!r.content_cut);
  ASSERT_UINT_EQ(r.content_chars, 1 + 7); /* reasoning and content, unescaped */
  /* A content past the capture (at least 64 KiB) is cut, not handed over in part. */
  size_t big = 100000;
  char *body = malloc(big + 64);
  int n = snprintf(body, 64, "{\"choices\":[{\"message\":{\"content\":\"");
  memset(body + n, 'x', big);
  memcpy(body + n + big, "\"}}]}", 6);
  vl_response_begin(&r, 0, 1000);
  k.len = 0;
  k.calls = 0;
  vl_response_keep_content(&r, sink, &k, 100);
  r.status = 200;
  ASSERT_INT_EQ(vl_response_write(&r, body, strlen(body), 2000), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
  ASSERT(r.content_cut);
  ASSERT_INT_EQ(k.calls, 0);
  free(body);
  vl_response_free(&r);
}

/* One rule for a name repeated in an object: the first member counts, in a whole reply as in a
 * stream's event, whichever member it is (usage, its counts, choices, the message and its content,
 * error). */
TEST_IMPL(response_duplicate_members_first) {
  static const char *const members = "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":8},"
                                     "\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":100}";
  char body[1024], event[1100];
  snprintf(body, sizeof(body),
           "{\"choices\":[{\"message\":{\"content\":\"ab\",\"content\":\"xyz\"}}],%s}", members);
  snprintf(event, sizeof(event),
           "data: {\"choices\":[{\"delta\":{\"content\":\"ab\",\"content\":\"xyz\"}}],%s}\n\n"
           "data: [DONE]\n\n",
           members);
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  ASSERT_INT_EQ(whole(&r, 0, 200, body), VL_ERR_NONE);
  ASSERT_INT_EQ(r.prompt_tokens, 5);
  ASSERT_INT_EQ(r.completion_tokens, 8);
  ASSERT_UINT_EQ(r.content_chars, 2);
  ASSERT_INT_EQ(whole(&r, 1, 200, event), VL_ERR_NONE);
  ASSERT_INT_EQ(r.prompt_tokens, 5);
  ASSERT_INT_EQ(r.completion_tokens, 8);
  ASSERT_UINT_EQ(r.content_chars, 2);
  /* A second choices or message is passed over, as is an error after a null one. */
  ASSERT_INT_EQ(whole(&r, 0, 200,
                      "{\"choices\":[{\"message\":{\"content\":\"abc\"},"
                      "\"message\":{\"content\":\"1234567\"}}],"
                      "\"choices\":[{\"message\":{\"content\":\"12345\"}}],"
                      "\"error\":null,\"error\":\"late\"}"),
                VL_ERR_NONE);
  ASSERT_UINT_EQ(r.content_chars, 3);
  ASSERT_STR_EQ(r.error_msg, "");
  ASSERT_INT_EQ(whole(&r, 1, 200,
                      "data: {\"choices\":[{\"delta\":{\"content\":\"abc\"}}],"
                      "\"error\":null,\"error\":\"late\"}\n\ndata: [DONE]\n\n"),
                VL_ERR_NONE);
  ASSERT_UINT_EQ(r.content_chars, 3);
  /* SGLang's native shape: the first text and meta_info. */
  r.native = 1;
  ASSERT_INT_EQ(
      whole(&r, 0, 200,
            "{\"text\":\"ab\",\"text\":\"abcdef\",\"meta_info\":{\"completion_tokens\":8},"
            "\"meta_info\":{\"completion_tokens\":100}}"),
      VL_ERR_NONE);
  ASSERT_INT_EQ(r.completion_tokens, 8);
  ASSERT_UINT_EQ(r.content_chars, 2);
  ASSERT_INT_EQ(
      whole(&r, 1, 200,
            "data: {\"text\":\"ab\",\"text\":\"abcdef\",\"meta_info\":{\"completion_tokens\":"
            "8},\"meta_info\":{\"completion_tokens\":100}}\n\ndata: [DONE]\n\n"),
      VL_ERR_NONE);
  ASSERT_INT_EQ(r.completion_tokens, 8);
  ASSERT_UINT_EQ(r.content_chars, 2);
  vl_response_free(&r);
}

/* An event is scanned as it arrives, never held: one of 24 MiB in a stream under a 32 MiB
 * --max-response is read whole, whatever the pieces, while the response's buffers stay small; the
 * limit still bounds the stream, events included. */
TEST_IMPL(response_large_event) {
  size_t big = 24u << 20;
  const char *head = "data: {\"choices\":[{\"delta\":{\"content\":\"";
  const char *tail = "\"}}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4000}}\r\n\r\n"
                     "data: [DONE]\n\n";
  size_t hl = strlen(head), tl = strlen(tail), n = hl + big + tl;
  char *body = malloc(n);
  ASSERT(body != NULL);
  memcpy(body, head, hl);
  for (size_t i = 0; i < big; i++)
    body[hl + i] = (char)('a' + i % 26);
  memcpy(body + hl + big, tail, tl);
  static const size_t steps[] = {16384, 1000003};
  for (size_t k = 0; k < VL_ARRAY_SIZE(steps); k++) {
    vl_response_t r;
    vl_response_init(&r, 32u << 20);
    vl_response_begin(&r, 1, 0);
    r.status = 200;
    for (size_t at = 0; at < n; at += steps[k])
      ASSERT_INT_EQ(vl_response_write(&r, body + at, VL_MIN(steps[k], n - at), 1 + at), 0);
    ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 200), VL_ERR_NONE);
    ASSERT_UINT_EQ(r.content_chars, big);
    ASSERT_UINT_EQ(r.token_events, 1);
    ASSERT_INT_EQ(r.completion_tokens, 4000);
    ASSERT(r.scan.cap_sz <= 64u << 10); /* a count or a message at most, never the event */
    ASSERT(r.ev_text_cap == 0);
    /* Under a limit below the event: oversize, still nothing held. */
    vl_response_t s;
    vl_response_init(&s, 16u << 20);
    vl_response_begin(&s, 1, 0);
    s.status = 200;
    int rc = 0;
    for (size_t at = 0; at < n && rc == 0; at += steps[k])
      rc = vl_response_write(&s, body + at, VL_MIN(steps[k], n - at), 1);
    ASSERT_INT_EQ(rc, VL_E2BIG);
    ASSERT_INT_EQ(vl_response_finish(&s, CURLE_WRITE_ERROR, 200), VL_ERR_OVERSIZE);
    ASSERT(s.scan.cap_sz <= 64u << 10);
    vl_response_free(&s);
    vl_response_free(&r);
  }
  free(body);
}

/* Classes that say what happened: [DONE] with no chunk before it is an empty reply, malformed as
 * an empty whole reply is; JSON nested past cJSON's limit (1000 levels) is malformed. */
TEST_IMPL(response_empty_and_deep) {
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  ASSERT_INT_EQ(whole(&r, 1, 200, "data: [DONE]\n\n"), VL_ERR_MALFORMED);
  ASSERT_INT_EQ(whole(&r, 1, 200, ": keep-alive\n\ndata:\n\ndata: [DONE]\n\n"), VL_ERR_MALFORMED);
  r.native = 1;
  ASSERT_INT_EQ(whole(&r, 1, 200, "data: [DONE]\n\n"), VL_ERR_MALFORMED);
  r.native = 0;
  ASSERT_INT_EQ(whole(&r, 0, 200, "{\"choices\":[]}"), VL_ERR_MALFORMED);
  /* A chunk that brings no token is still a reply. */
  ASSERT_INT_EQ(whole(&r, 1, 200,
                      "data: {\"choices\":[],\"usage\":{\"completion_tokens\":0}}\n\n"
                      "data: [DONE]\n\n"),
                VL_ERR_NONE);
  ASSERT_INT_EQ(r.completion_tokens, 0);
  /* Nesting: 1000 levels are read; 1001 and 10,000 are not, whole or in an event. */
  static const int depths[] = {999, 1000, 1001, 10000};
  for (size_t i = 0; i < VL_ARRAY_SIZE(depths); i++) {
    int d = depths[i];
    size_t cap = 2 * (size_t)d + 256;
    char *deep = malloc(cap), *b = malloc(cap + 64), *e = malloc(cap + 64);
    ASSERT(deep && b && e);
    size_t n = 0;
    for (int k = 0; k < d - 1; k++) /* inside the object: d levels in all */
      deep[n++] = '[';
    for (int k = 0; k < d - 1; k++)
      deep[n++] = ']';
    deep[n] = '\0';
    snprintf(b, cap + 64, "{\"choices\":[{\"message\":{\"content\":\"x\"}}],\"deep\":%s}", deep);
    ASSERT_INT_EQ(whole(&r, 0, 200, b), d <= 1000 ? VL_ERR_NONE : VL_ERR_MALFORMED);
    snprintf(
        e, cap + 64,
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"deep\":%s}\n\ndata: [DONE]\n\n",
        deep);
    ASSERT_INT_EQ(whole(&r, 1, 200, e), d <= 1000 ? VL_ERR_NONE : VL_ERR_MALFORMED);
    free(deep);
    free(b);
    free(e);
  }
  vl_response_free(&r);
}

/* A non-2xx body that is not JSON is quoted by its first line of text, or an HTML page's title
 * (else its first line of text), at most VL_RESPONSE_MSG_MAX - 1 bytes; a JSON body by its
 * message, never by its text. */
TEST_IMPL(response_plain_error_words) {
  static const struct {
    long status;
    const char *body, *want;
  } cases[] = {
      {404, "404: Not Found", "404: Not Found"},
      {500, "\r\n  Internal Server Error \r\nmore detail\n", "Internal Server Error"},
      {502,
       "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
       "Gateway</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n",
       "502 Bad Gateway"},
      {503,
       "<!DOCTYPE html>\n<!-- a <title>comment</title> -->\n<HTML lang=\"en\"><HEAD>\n"
       "<meta charset=\"utf-8\"><style>body { color: red; }</style>\n<script>if (a<b) x();"
       "</script>\n<TITLE>\n  Service &amp; \n Unavailable &#8212; &#x41;&lt;b&gt; &bogus;\n"
       "</TITLE>",
       "Service & Unavailable \xe2\x80\x94 A<b> &bogus;"},
      {404, "<html><body><h1>Not <b>here</b></h1><p>Try later</p></body></html>", "Not here"},
      {429, "{\"error\":{\"message\":\"slow down\"}} trailing", "slow down"},
      {400, "{\"error\":{\"code\":400}}", ""},
      {400, "{}", ""},
      {500, "   \r\n\t\n", ""},
      {500, "<html><body></body></html>", ""},
  };
  vl_response_t r;
  vl_response_init(&r, 1 << 20);
  for (size_t i = 0; i < VL_ARRAY_SIZE(cases); i++) {
    size_t n = strlen(cases[i].body);
    for (size_t cut = 1; cut <= n; cut += cut < 8 ? 1 : 13) {
      vl_response_begin(&r, 0, 0);
      r.status = cases[i].status;
      for (size_t at = 0; at < n; at += cut)
        ASSERT_INT_EQ(vl_response_write(&r, cases[i].body + at, VL_MIN(cut, n - at), 1), 0);
      ASSERT(vl_response_finish(&r, CURLE_OK, cases[i].status) != VL_ERR_NONE);
      if (strcmp(r.error_msg, cases[i].want) != 0)
        fprintf(stderr, "case %zu cut %zu: \"%s\"\n", i, cut, r.error_msg);
      ASSERT_STR_EQ(r.error_msg, cases[i].want);
    }
  }
  /* A long line is cut between characters; control bytes are shown as spaces. */
  char line[2000];
  size_t n = 0;
  while (n < 1200) {
    memcpy(line + n, "\xc3\xa9t\xc3\xa9\x1b", 6);
    n += 6;
  }
  memcpy(line + n, "\nnext", 6);
  vl_response_begin(&r, 0, 0);
  r.status = 500;
  ASSERT_INT_EQ(vl_response_write(&r, line, strlen(line), 1), 0);
  ASSERT_INT_EQ(vl_response_finish(&r, CURLE_OK, 500), VL_ERR_HTTP_5XX);
  ASSERT(strlen(r.error_msg) <= VL_RESPONSE_MSG_MAX - 1);
  ASSERT(strlen(r.error_msg) >= VL_RESPONSE_MSG_MAX - 7);
  ASSERT_MEM_EQ(r.error_msg, "\xc3\xa9t\xc3\xa9 \xc3\xa9", 8);
  ASSERT(strchr(r.error_msg, '?') == NULL); /* no character cut in half */
  /* A 2xx body is never read for words. */
  ASSERT_INT_EQ(whole(&r, 0, 200, "Not JSON at all"), VL_ERR_MALFORMED);
  ASSERT_STR_EQ(r.error_msg, "");
  vl_response_free(&r);
}

/* Feeds body in pieces of `step` bytes (0: whole) as a 2xx reply and returns the class. */
static vl_errclass_t pieces(vl_response_t *r, int streamed, const char *body, size_t step) {
  vl_response_begin(r, streamed, 0);
  r->status = 200;
  size_t n = strlen(body), k = step ? step : n;
  for (size_t i = 0; i < n; i += k)
    ASSERT_INT_EQ(vl_response_write(r, body + i, VL_MIN(k, n - i), 5 + i), 0);
  return vl_response_finish(r, CURLE_OK, 200);
}

/* The server's own timings: llama.cpp's "timings" in a whole reply and in a stream's last event
 * (the last one given counts, its first member of a name), SGLang's meta_info.e2e_latency in
 * seconds, fed in pieces of every size; nothing where the reply gives none. */
TEST_IMPL(response_server_timings) {
  static const char whole_reply[] =
      "{\"choices\":[{\"message\":{\"content\":\"hi\"}}],\"usage\":{\"prompt_tokens\":3,"
      "\"completion_tokens\":1},\"timings\":{\"cache_n\":2,\"prompt_n\":1,\"prompt_ms\":150.5,"
      "\"prompt_per_token_ms\":150.5,\"predicted_n\":1,\"predicted_ms\":0,\"prompt_ms\":9}}";
  static const char streamed[] =
      "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"timings\":{\"prompt_n\":7,"
      "\"prompt_ms\":1}}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2},"
      "\"timings\":{\"prompt_n\":9,\"prompt_ms\":100.25,\"predicted_n\":2,"
      "\"predicted_ms\":35.5,\"cache_n\":0}}\n\n"
      "data: [DONE]\n\n";
  static const char native[] =
      "{\"text\":\"hi\",\"meta_info\":{\"prompt_tokens\":3,\"completion_tokens\":1,"
      "\"e2e_latency\":0.25}}";
  for (size_t step = 0; step < 40; step++) {
    vl_response_t r;
    vl_response_init(&r, 1 << 20);
    ASSERT_INT_EQ(pieces(&r, 0, whole_reply, step), VL_ERR_NONE);
    ASSERT(r.srv.prompt_ms == 150.5);
    ASSERT(r.srv.predicted_ms == 0);
    ASSERT(r.srv.e2e_ms == 150.5);
    ASSERT_INT_EQ(r.srv.prompt_n, 1);
    ASSERT_INT_EQ(r.srv.predicted_n, 1);
    ASSERT_INT_EQ(r.srv.cache_n, 2);
    ASSERT_INT_EQ(pieces(&r, 1, streamed, step), VL_ERR_NONE);
    ASSERT(r.srv.prompt_ms == 100.25);
    ASSERT(r.srv.predicted_ms == 35.5);
    ASSERT(r.srv.e2e_ms == 135.75);
    ASSERT_INT_EQ(r.srv.prompt_n, 9);
    ASSERT_INT_EQ(r.srv.predicted_n, 2);
    ASSERT_INT_EQ(r.srv.cache_n, 0);
    ASSERT_INT_EQ(r.completion_tokens, 2);
    ASSERT_INT_EQ(pieces(&r, 0, "{\"choices\":[{\"message\":{\"content\":\"x\"}}]}", step),
                  VL_ERR_NONE);
    ASSERT(isnan(r.srv.prompt_ms) && isnan(r.srv.e2e_ms));
    ASSERT_INT_EQ(r.srv.prompt_n, -1);
    r.native = 1;
    ASSERT_INT_EQ(pieces(&r, 0, native, step), VL_ERR_NONE);
    ASSERT(r.srv.e2e_ms == 250);
    ASSERT(isnan(r.srv.prompt_ms));
    vl_response_free(&r);
  }
}

static const task_entry_t tests[] = {
    TEST_ENTRY(response_server_timings),
    TEST_ENTRY(response_duplicate_members_first),
    TEST_ENTRY(response_large_event),
    TEST_ENTRY(response_empty_and_deep),
    TEST_ENTRY(response_plain_error_words),
    TEST_ENTRY(response_stream_event_members),
    TEST_ENTRY(response_keep_content),
    TEST_ENTRY(response_sse_edges),
    TEST_ENTRY(response_status_first),
    TEST_ENTRY(response_reasoning_and_errors),
    TEST_ENTRY(response_native_stream),
    TEST_ENTRY(response_native_stream_incremental),
    TEST_ENTRY(response_native_stream_errors),
    TEST_ENTRY(response_native_json),
    TEST_ENTRY(response_stream),
    TEST_ENTRY(response_stream_truncated),
    TEST_ENTRY(response_stream_malformed_and_error),
    TEST_ENTRY(response_json),
    TEST_ENTRY(response_usage_out_of_range),
    TEST_ENTRY(response_oversize),
    TEST_ENTRY(response_stream_limit),
    TEST_ENTRY(response_classes),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
