/* The trace reader: Mooncake's JSONL and the CSV read right, rows sorted stably by time, the
 * format told by extension or content, every kind of bad row refused with its line; and the
 * trace's schedule in the pacer (absolute times, the speed, a shift, nothing after the last). */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/config.h"
#include "vlmload/lengths.h"
#include "vlmload/pace.h"
#include "vlmload/plan.h"
#include "vlmload/prompts.h"
#include "vlmload/trace.h"

#include <stdlib.h>
#include <unistd.h>

static void parse_ok(vl_trace_t *t, const char *name, const char *text) {
  char err[256] = "";
  int rc = vl_trace_parse(t, name, text, strlen(text), err, sizeof(err));
  if (rc)
    fprintf(stderr, "unexpected error: %s\n", err);
  ASSERT_INT_EQ(rc, 0);
}

/* Parses text that must fail; returns the one-line message. */
static const char *parse_bad(const char *name, const char *text) {
  static char err[256];
  vl_trace_t t;
  err[0] = '\0';
  ASSERT_INT_EQ(vl_trace_parse(&t, name, text, strlen(text), err, sizeof(err)), VL_EINVAL);
  ASSERT(t.rows == NULL && t.n == 0);
  ASSERT(strchr(err, '\n') == NULL);
  return err;
}

TEST_IMPL(trace_jsonl) {
  vl_trace_t t;
  /* Mooncake's own first lines (FAST25-release), a session_id as AIPerf's converters add one, a
   * blank line, and vlmload's images key. */
  parse_ok(&t, "m.jsonl",
           "{\"timestamp\": 0, \"input_length\": 6755, \"output_length\": 500, \"hash_ids\": [0, "
           "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}\n"
           "{\"timestamp\": 0, \"input_length\": 7319, \"output_length\": 490, \"hash_ids\": [0, "
           "14, 15]}\r\n"
           "\n"
           "  {\"timestamp\": 3052, \"input_length\": 7234, \"output_length\": 794, \"hash_ids\": "
           "[], \"session_id\": \"conv_0\", \"images\": 2}\n"
           "{\"timestamp\": 3052.5, \"input_length\": 0, \"output_length\": 1}");
  ASSERT_INT_EQ(t.format, VL_TRACE_JSONL);
  ASSERT_UINT_EQ(t.n, 4);
  ASSERT_INT_EQ(t.rows[0].input_tokens, 6755);
  ASSERT_INT_EQ(t.rows[0].output_tokens, 500);
  ASSERT_UINT_EQ(t.rows[0].n_hash, 14);
  ASSERT_UINT_EQ(t.hashes[t.rows[0].hash + 13], 13);
  ASSERT_UINT_EQ(t.rows[1].n_hash, 3);
  ASSERT_UINT_EQ(t.hashes[t.rows[1].hash], 0);
  ASSERT_UINT_EQ(t.hashes[t.rows[1].hash + 2], 15);
  ASSERT_UINT_EQ(t.rows[2].n_hash, 0);
  ASSERT_UINT_EQ(t.rows[0].line, 1);
  ASSERT_UINT_EQ(t.rows[2].line, 4);
  ASSERT_UINT_EQ(t.rows[3].line, 5);
  ASSERT_INT_EQ(t.rows[2].images, 2);
  ASSERT_INT_EQ(t.rows[3].images, 0);
  ASSERT_INT_EQ(t.has_images, 1);
  ASSERT_INT_EQ(t.images_lo, 2);
  ASSERT_INT_EQ(t.images_hi, 2);
  ASSERT_EQ(t.at_ms[0], 0.0);
  ASSERT_EQ(t.at_ms[2], 3052.0);
  ASSERT_EQ(t.at_ms[3], 3052.5);
  ASSERT_EQ(t.span_ms, 3052.5);
  ASSERT_UINT_EQ(t.n_hashes, 17);
  ASSERT_UINT_EQ(t.out_of_order, 0);
  ASSERT_UINT_EQ(vl_trace_shared_prefix_rows(&t), 1); /* row 2 starts with row 1's block 0 */
  ASSERT_INT_EQ(t.input_lo, 0);
  ASSERT_INT_EQ(t.output_hi, 794);
  ASSERT_STR_EQ(t.path, "m.jsonl");
  vl_trace_free(&t);

  /* Without an images key anywhere, the trace says nothing of images. */
  parse_ok(&t, "x.jsonl", "{\"timestamp\":5,\"input_length\":1,\"output_length\":2}\n");
  ASSERT_INT_EQ(t.has_images, 0);
  ASSERT_EQ(t.at_ms[0], 0.0); /* offsets from the first row, whatever the origin */
  vl_trace_free(&t);
}

TEST_IMPL(trace_csv) {
  vl_trace_t t;
  parse_ok(&t, "t.csv",
           "timestamp_ms,input_tokens,output_tokens,images,note\n"
           "1000,100,10,1,a\n"
           "1250.5,200,20,0,b\n"
           "\n"
           "1300,300,30,3,\"c, d\"\n");
  ASSERT_INT_EQ(t.format, VL_TRACE_CSV);
  ASSERT_UINT_EQ(t.n, 3);
  ASSERT_EQ(t.at_ms[1], 250.5);
  ASSERT_EQ(t.at_ms[2], 300.0);
  ASSERT_INT_EQ(t.rows[2].input_tokens, 300);
  ASSERT_INT_EQ(t.rows[2].output_tokens, 30);
  ASSERT_INT_EQ(t.rows[2].images, 3);
  ASSERT_UINT_EQ(t.rows[2].line, 5);
  ASSERT_INT_EQ(t.has_images, 1);
  ASSERT_INT_EQ(t.images_lo, 1);
  ASSERT_INT_EQ(t.images_hi, 3);
  ASSERT_UINT_EQ(t.n_hashes, 0);
  vl_trace_free(&t);

  /* Without the images column, no counts; the columns in any order. */
  parse_ok(&t, "t.csv", "output_tokens,timestamp_ms,input_tokens\n7,0,9\n");
  ASSERT_INT_EQ(t.has_images, 0);
  ASSERT_INT_EQ(t.rows[0].output_tokens, 7);
  ASSERT_INT_EQ(t.rows[0].input_tokens, 9);
  vl_trace_free(&t);
}

TEST_IMPL(trace_sorted_stably) {
  vl_trace_t t;
  parse_ok(&t, "t.csv",
           "timestamp_ms,input_tokens,output_tokens\n"
           "300,1,1\n"
           "100,2,2\n"
           "300,3,3\n"
           "100,4,4\n"
           "200,5,5\n");
  ASSERT_UINT_EQ(t.out_of_order, 2);
  int want[] = {2, 4, 5, 1, 3};
  for (size_t i = 0; i < 5; i++)
    ASSERT_INT_EQ(t.rows[i].input_tokens, want[i]);
  double at[] = {0, 0, 100, 200, 200};
  for (size_t i = 0; i < 5; i++)
    ASSERT_EQ(t.at_ms[i], at[i]);
  ASSERT_UINT_EQ(t.rows[0].line, 3);
  vl_trace_free(&t);
}

TEST_IMPL(trace_format_detection) {
  vl_trace_t t;
  const char *json = "{\"timestamp\":0,\"input_length\":1,\"output_length\":2}\n";
  parse_ok(&t, "trace.txt", json); /* by content */
  ASSERT_INT_EQ(t.format, VL_TRACE_JSONL);
  vl_trace_free(&t);
  parse_ok(&t, "trace", "\xef\xbb\xbf\n  timestamp_ms,input_tokens,output_tokens\n0,1,2\n");
  ASSERT_INT_EQ(t.format, VL_TRACE_CSV);
  vl_trace_free(&t);
  parse_ok(&t, "t.ndjson", json);
  ASSERT_INT_EQ(t.format, VL_TRACE_JSONL);
  vl_trace_free(&t);
  /* The extension wins over the content. */
  const char *err = parse_bad("t.csv", json);
  ASSERT(strstr(err, "t.csv:") == err);
}

TEST_IMPL(trace_bad_jsonl) {
  const char *ok = "{\"timestamp\":0,\"input_length\":5,\"output_length\":3}\n";
  char text[512];
  static const struct {
    const char *row, *want;
  } bad[] = {
      {"{\"timestamp\":1,\"input_length\":5}", "t.jsonl:3: \"output_length\" is missing"},
      {"{\"input_length\":5,\"output_length\":3}", "t.jsonl:3: \"timestamp\" is missing"},
      {"{\"timestamp\":1,\"output_length\":3}", "t.jsonl:3: \"input_length\" is missing"},
      {"{\"timestamp\":\"1\",\"input_length\":5,\"output_length\":3}",
       "t.jsonl:3: \"timestamp\" is not a number"},
      {"{\"timestamp\":-1,\"input_length\":5,\"output_length\":3}",
       "t.jsonl:3: \"timestamp\" -1 is negative"},
      {"{\"timestamp\":1,\"input_length\":5.5,\"output_length\":3}",
       "t.jsonl:3: \"input_length\" 5.5 is not a whole number"},
      {"{\"timestamp\":1,\"input_length\":-5,\"output_length\":3}",
       "t.jsonl:3: \"input_length\" -5 is negative"},
      {"{\"timestamp\":1,\"input_length\":5,\"output_length\":0}",
       "t.jsonl:3: \"output_length\" 0 is below 1"},
      {"{\"timestamp\":1,\"input_length\":5,\"output_length\":2000000}",
       "t.jsonl:3: \"output_length\" 2000000 is too large"},
      {"{\"timestamp\":1,\"input_length\":5,\"output_length\":3,\"images\":17}",
       "t.jsonl:3: \"images\" 17 is too large"},
      {"{\"timestamp\":1,\"input_length\":5,\"output_length\":3,\"images\":true}",
       "t.jsonl:3: \"images\" is not a number"},
      {"{\"timestamp\":1,\"input_length\":5,\"output_length\":3,\"hash_ids\":7}",
       "t.jsonl:3: \"hash_ids\" is not a list"},
      {"{\"timestamp\":1,\"input_length\":5,\"output_length\":3,\"hash_ids\":[1,2.5]}",
       "t.jsonl:3: \"hash_ids\" item 2 is not a whole number"},
      {"{\"timestamp\":1,\"input_length\":5,\"output_length\":3,\"hash_ids\":[\"a\"]}",
       "t.jsonl:3: \"hash_ids\" item 1 is not a whole number"},
      {"{\"timestamp\":1,\"input_length\":5,", "t.jsonl:3: not JSON"},
      {"[1, 2]", "t.jsonl:3: not a JSON object"},
      {"{\"timestamp\":1,\"input_length\":5,\"output_length\":3} x",
       "t.jsonl:3: text after the object (at column 52)"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    snprintf(text, sizeof(text), "%s\n%s\n%s", ok, bad[i].row, ok);
    const char *err = parse_bad("t.jsonl", text);
    if (strncmp(err, bad[i].want, strlen(bad[i].want)) != 0)
      fprintf(stderr, "row %zu: got '%s', want '%s...'\n", i, err, bad[i].want);
    ASSERT(strncmp(err, bad[i].want, strlen(bad[i].want)) == 0);
  }
  ASSERT(strstr(parse_bad("t.jsonl", "\n \n"), "t.jsonl: no rows") != NULL);
}

TEST_IMPL(trace_bad_csv) {
  static const struct {
    const char *text, *want;
  } bad[] = {
      {"timestamp_ms,input_tokens,output_tokens\n0,1,2\n5,x,2\n",
       "t.csv:3: input_tokens 'x' is not a number"},
      {"timestamp_ms,input_tokens,output_tokens\n0,1,2\n5,,2\n", "t.csv:3: input_tokens is empty"},
      {"timestamp_ms,input_tokens,output_tokens\n0,1,2\n-5,1,2\n",
       "t.csv:3: timestamp_ms -5 is negative"},
      {"timestamp_ms,input_tokens,output_tokens\n0,1,2\n5,1,0\n",
       "t.csv:3: output_tokens 0 is below 1"},
      {"timestamp_ms,input_tokens,output_tokens\n0,1,2\n5,1.5,2\n",
       "t.csv:3: input_tokens 1.5 is not a whole number"},
      {"timestamp_ms,input_tokens,output_tokens,images\n0,1,2,0\n5,1,2,20\n",
       "t.csv:3: images 20 is too large"},
      {"timestamp_ms,input_tokens,output_tokens\n0,1,2\n5,1\n", "t.csv:3:"}, /* csvin's words */
      {"timestamp_ms,input_tokens\n0,1\n", "t.csv:1: no column output_tokens"},
      {"timestamp_ms,input_tokens,output_tokens\n", "t.csv: no rows"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    const char *err = parse_bad("t.csv", bad[i].text);
    if (strncmp(err, bad[i].want, strlen(bad[i].want)) != 0)
      fprintf(stderr, "case %zu: got '%s', want '%s...'\n", i, err, bad[i].want);
    ASSERT(strncmp(err, bad[i].want, strlen(bad[i].want)) == 0);
  }
}

TEST_IMPL(trace_files) {
  char dir[] = "/tmp/vltraceXXXXXX", path[64], err[256];
  ASSERT(mkdtemp(dir) != NULL);
  snprintf(path, sizeof(path), "%s/t.jsonl", dir);
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  /* More than the reader's first buffer. */
  for (int i = 0; i < 5000; i++)
    fprintf(f,
            "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": 9, \"hash_ids\": "
            "[%d, %d]}\n",
            i * 3, 512 + i, i % 7, i);
  fclose(f);
  vl_trace_t t;
  ASSERT_INT_EQ(vl_trace_load(&t, path, err, sizeof(err)), 0);
  ASSERT_UINT_EQ(t.n, 5000);
  ASSERT_EQ(t.span_ms, 4999.0 * 3);
  ASSERT_UINT_EQ(vl_trace_shared_prefix_rows(&t), 5000 - 7);
  ASSERT_STR_EQ(t.path, path);
  vl_trace_free(&t);
  unlink(path);
  ASSERT_INT_EQ(vl_trace_load(&t, path, err, sizeof(err)), VL_EIO);
  ASSERT(strstr(err, path) == err && strstr(err, "No such file") != NULL);
  rmdir(dir);
}

TEST_IMPL(trace_schedule) {
  double at[] = {0, 0, 3.25, 100, 2500};
  vl_pace_t p;
  const uint64_t t0 = 5000000000ull;
  vl_pace_init(&p, VL_ARRIVAL_TRACE, 10, 0, 1, t0, 0);
  vl_pace_trace(&p, at, 5, 1);
  ASSERT_UINT_EQ(vl_pace_next(&p), t0);
  ASSERT_UINT_EQ(vl_pace_take(&p), t0);
  ASSERT_UINT_EQ(vl_pace_take(&p), t0);
  ASSERT_UINT_EQ(vl_pace_take(&p), t0 + 3250000);
  /* A drained flush's pause moves the rows not yet taken, and only those. */
  vl_pace_shift(&p, 7000000);
  ASSERT_UINT_EQ(vl_pace_take(&p), t0 + 100000000 + 7000000);
  ASSERT_UINT_EQ(vl_pace_take(&p), t0 + 2500000000ull + 7000000);
  ASSERT_UINT_EQ(vl_pace_next(&p), UINT64_MAX);
  vl_pace_shift(&p, 1);
  ASSERT_UINT_EQ(vl_pace_next(&p), UINT64_MAX);

  /* Twice as fast: every offset halved. */
  vl_pace_init(&p, VL_ARRIVAL_TRACE, 10, 0, 1, t0, 0);
  vl_pace_trace(&p, at, 5, 2);
  for (int i = 0; i < 5; i++)
    ASSERT_UINT_EQ(vl_pace_take(&p), t0 + (uint64_t)(at[i] * 1e6 / 2));

  vl_trace_t t = {.n = 5, .at_ms = at};
  ASSERT_UINT_EQ(vl_trace_due_ns(&t, 4, 0.5), 5000000000ull);
}

/* Parses a command line of vlmload's options (words split at spaces) into c; returns its status. */
static int parse_line(vl_config_t *c, char *line) {
  char *argv[32];
  int argc = 0;
  argv[argc++] = "vlmload";
  for (char *w = strtok(line, " "); w && argc < 31; w = strtok(NULL, " "))
    argv[argc++] = w;
  FILE *sink = fopen("/dev/null", "w");
  int rc = vl_config_parse(c, argc, argv, sink, sink);
  fclose(sink);
  return rc;
}

TEST_IMPL(trace_config_and_plan) {
  char dir[] = "/tmp/vltraceXXXXXX", path[64], line[256];
  ASSERT(mkdtemp(dir) != NULL);
  snprintf(path, sizeof(path), "%s/t.jsonl", dir);
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  /* Out of order; the third row's ids reach past its length (2 blocks of 600 tokens). */
  fputs(
      "{\"timestamp\": 2000, \"input_length\": 600, \"output_length\": 33, \"hash_ids\": [7, 8, 9, "
      "10, 11], \"images\": 2}\n"
      "{\"timestamp\": 1000, \"input_length\": 1024, \"output_length\": 11, \"hash_ids\": [7, 8]}\n"
      "{\"timestamp\": 1500, \"input_length\": 40, \"output_length\": 22, \"images\": 1}\n",
      f);
  fclose(f);

  vl_config_t c;
  snprintf(line, sizeof(line), "--trace %s --trace-speed 4", path);
  ASSERT_INT_EQ(parse_line(&c, line), VL_CONFIG_RUN);
  ASSERT(c.trace != NULL);
  ASSERT_UINT_EQ(c.trace->n, 3);
  ASSERT_INT_EQ(c.arrival, VL_ARRIVAL_TRACE);
  ASSERT_UINT_EQ(c.requests, 3);
  ASSERT_UINT_EQ(c.duration_us, 0);         /* the trace ends the run, not a default 30 s */
  ASSERT_NEAR(c.rate, 2 / (1.0 / 4), 1e-9); /* 2 gaps over 1 s at 4x */
  ASSERT_INT_EQ(c.images_on, 1);
  ASSERT_INT_EQ(c.images_lo, 1);
  ASSERT_INT_EQ(c.images_hi, 2);

  char err[256];
  vl_prompts_t prompts;
  vl_lentext_t lt;
  ASSERT_INT_EQ(vl_prompts_load(&prompts, NULL, err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_lentext_build(&lt, NULL, c.trace->input_hi), 0);
  prompts.synthetic = &lt;
  vl_plan_t plan;
  /* Without a pool: the rows' lengths and blocks alone. */
  ASSERT_INT_EQ(vl_plan_init(&plan, &c, "m", &prompts, NULL), 0);
  ASSERT_INT_EQ(plan.text_hole, 1);
  ASSERT_INT_EQ(plan.max_tokens_hole, 1);
  ASSERT_INT_EQ(plan.max_blocks, 2);
  vl_request_plan_t rp;
  vl_plan_draw(&plan, 0, &rp); /* request 0 is the earliest row */
  ASSERT_INT_EQ(rp.input_tokens, 1024);
  ASSERT_INT_EQ(rp.max_tokens, 11);
  ASSERT_INT_EQ(rp.n_blocks, 2);
  ASSERT(rp.blocks == &c.trace->hashes[c.trace->rows[0].hash]);
  ASSERT_UINT_EQ(rp.blocks[1], 8);
  ASSERT_INT_EQ(rp.n_images, 0);
  vl_plan_draw(&plan, 1, &rp);
  ASSERT_INT_EQ(rp.input_tokens, 40);
  ASSERT_INT_EQ(rp.max_tokens, 22);
  ASSERT_INT_EQ(rp.n_blocks, 0);
  ASSERT(rp.blocks == NULL);
  vl_plan_draw(&plan, 2, &rp);
  ASSERT_INT_EQ(rp.max_tokens, 33);
  ASSERT_INT_EQ(rp.n_blocks, 2); /* 600 tokens reach 2 of its 5 blocks */
  ASSERT_UINT_EQ(rp.blocks[0], 7);
  vl_plan_free(&plan);
  vl_lentext_free(&lt);
  vl_prompts_free(&prompts);
  vl_config_free(&c);

  /* What the trace decides is refused beside it; a bad row stops the parse. */
  const char *refused[] = {"--rate 5",           "--arrival constant",  "--max-tokens 9",
                           "--input-tokens 100", "--output-tokens 100", "--images-per-request 2",
                           "--image-ratio 0.5",  "--sweep rate=1:2:1",  "--trace-speed 0"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(refused); i++) {
    snprintf(line, sizeof(line), "--trace %s %s", path, refused[i]);
    ASSERT_INT_EQ(parse_line(&c, line), 2);
    vl_config_free(&c);
  }
  snprintf(line, sizeof(line), "--trace %s --prompts %s", path, path);
  ASSERT_INT_EQ(parse_line(&c, line), 2);
  vl_config_free(&c);
  snprintf(line, sizeof(line), "--trace-speed 2");
  ASSERT_INT_EQ(parse_line(&c, line), 2);
  vl_config_free(&c);
  f = fopen(path, "a");
  fputs("{\"timestamp\": 1, \"input_length\": 2}\n", f);
  fclose(f);
  snprintf(line, sizeof(line), "--trace %s", path);
  ASSERT_INT_EQ(parse_line(&c, line), 2);
  vl_config_free(&c);
  unlink(path);
  rmdir(dir);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(trace_jsonl),           TEST_ENTRY(trace_csv),
      TEST_ENTRY(trace_sorted_stably),   TEST_ENTRY(trace_format_detection),
      TEST_ENTRY(trace_bad_jsonl),       TEST_ENTRY(trace_bad_csv),
      TEST_ENTRY(trace_files),           TEST_ENTRY(trace_schedule),
      TEST_ENTRY(trace_config_and_plan),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
