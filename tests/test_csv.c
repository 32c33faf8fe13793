/* The CSV reader: quoting, missing values, strict numbers with the line of a bad one, timestamps in
 * every accepted form, and files. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/csvin.h"

#include <time.h>

static vl_csv_t *parse_ok(const char *text) {
  vl_csv_t *c = NULL;
  char err[256] = "";
  int rc = vl_csv_parse(&c, "t.csv", text, strlen(text), err, sizeof(err));
  if (rc)
    fprintf(stderr, "unexpected error: %s\n", err);
  ASSERT_INT_EQ(rc, 0);
  return c;
}

/* Parses text that must fail; returns the message. */
static const char *parse_bad(const char *text) {
  static char err[256];
  vl_csv_t *c = NULL;
  err[0] = '\0';
  ASSERT_INT_EQ(vl_csv_parse(&c, "t.csv", text, strlen(text), err, sizeof(err)), VL_EINVAL);
  ASSERT(c == NULL);
  return err;
}

TEST_IMPL(csv_basic) {
  vl_csv_t *c = parse_ok("wall_ms,completed_total,rss_mb.scheduler\n"
                         "1000,10,512.5\n"
                         "2000,25,513\n");
  ASSERT_UINT_EQ(vl_csv_nrows(c), 2);
  ASSERT_UINT_EQ(vl_csv_ncols(c), 3);
  ASSERT_STR_EQ(vl_csv_source(c), "t.csv");
  ASSERT_STR_EQ(vl_csv_colname(c, 2), "rss_mb.scheduler");
  ASSERT_INT_EQ(vl_csv_col(c, "completed_total"), 1);
  ASSERT_INT_EQ(vl_csv_col(c, "nope"), -1);
  ASSERT_STR_EQ(vl_csv_cell(c, 1, 2), "513");
  ASSERT_UINT_EQ(vl_csv_lineno(c, 0), 2);
  ASSERT_UINT_EQ(vl_csv_lineno(c, 1), 3);
  double v[2];
  char err[128];
  ASSERT_INT_EQ(vl_csv_numbers(c, 2, v, err, sizeof(err)), 0);
  ASSERT_EQ(v[0], 512.5);
  ASSERT_EQ(v[1], 513.0);
  vl_csv_free(c);
}

TEST_IMPL(csv_quoting) {
  /* RFC 4180: quoted commas, doubled quotes, a line break inside quotes; line numbers go on
   * counting the lines of the file. */
  vl_csv_t *c = parse_ok("name,\"odd, name\",v\r\n"
                         "\"a,b\",\"he said \"\"hi\"\"\",1\r\n"
                         "\"two\nlines\",\"\",2\r\n"
                         "  \"padded\"  ,x,3\r\n"
                         "plain,\"\"\"\",4");
  ASSERT_UINT_EQ(vl_csv_nrows(c), 4);
  ASSERT_STR_EQ(vl_csv_colname(c, 1), "odd, name");
  ASSERT_INT_EQ(vl_csv_col(c, "odd, name"), 1);
  ASSERT_STR_EQ(vl_csv_cell(c, 0, 0), "a,b");
  ASSERT_STR_EQ(vl_csv_cell(c, 0, 1), "he said \"hi\"");
  ASSERT_STR_EQ(vl_csv_cell(c, 1, 0), "two\nlines");
  ASSERT_STR_EQ(vl_csv_cell(c, 1, 1), "");
  ASSERT_STR_EQ(vl_csv_cell(c, 2, 0), "padded");
  ASSERT_STR_EQ(vl_csv_cell(c, 3, 1), "\"");
  ASSERT_UINT_EQ(vl_csv_lineno(c, 1), 3);
  ASSERT_UINT_EQ(vl_csv_lineno(c, 2), 5);
  ASSERT_UINT_EQ(vl_csv_lineno(c, 3), 6);
  vl_csv_free(c);
}

TEST_IMPL(csv_layout) {
  /* A byte-order mark, blanks around names and cells (nvidia-smi's ", "), empty lines, CR line
   * ends and no final newline. */
  vl_csv_t *c = parse_ok("\xEF\xBB\xBFtimestamp, memory.used [MiB]\n\n"
                         "2026/11/29 16:40:00.123, 1234\r"
                         "   \n"
                         "2026/11/29 16:40:01.123, 1240");
  ASSERT_UINT_EQ(vl_csv_nrows(c), 2);
  ASSERT_STR_EQ(vl_csv_colname(c, 0), "timestamp");
  ASSERT_STR_EQ(vl_csv_colname(c, 1), "memory.used [MiB]");
  ASSERT_STR_EQ(vl_csv_cell(c, 0, 1), "1234");
  ASSERT_UINT_EQ(vl_csv_lineno(c, 0), 3);
  ASSERT_UINT_EQ(vl_csv_lineno(c, 1), 5);
  vl_csv_free(c);
  /* A header alone: no rows. A trailing comma is one more (empty) field. */
  c = parse_ok("a,b\n");
  ASSERT_UINT_EQ(vl_csv_nrows(c), 0);
  vl_csv_free(c);
  c = parse_ok("a,b,\n1,2,\n");
  ASSERT_UINT_EQ(vl_csv_ncols(c), 3);
  ASSERT_STR_EQ(vl_csv_colname(c, 2), "");
  vl_csv_free(c);
}

TEST_IMPL(csv_errors) {
  ASSERT_STR_EQ(parse_bad(""), "t.csv: empty, no header line");
  ASSERT_STR_EQ(parse_bad("\n\n"), "t.csv: empty, no header line");
  ASSERT_STR_EQ(parse_bad("a,b\n1,2\n3\n"), "t.csv:3: 1 fields, the header has 2");
  ASSERT_STR_EQ(parse_bad("a,b\n1,2\n\n3,4,5\n"), "t.csv:4: 3 fields, the header has 2");
  ASSERT_STR_EQ(parse_bad("a,b\n1,\"open\n2,3\n"), "t.csv:2: a quoted field is not closed");
  ASSERT_STR_EQ(parse_bad("a,b\n1,\"x\"y\n"), "t.csv:2: text after the closing quote of a field");
  ASSERT_STR_EQ(parse_bad("a,b\n1,2\n3,x\"y\n"), "t.csv:3: a quote inside an unquoted field");
}

TEST_IMPL(csv_numbers_strict) {
  vl_csv_t *c = parse_ok("wall_ms,rss_mb\n"
                         "1000,512\n"
                         "2000,\n"
                         "3000,  -3.5e2 \n"
                         "4000,\"\"\n"
                         "5000,12x\n");
  double v[5];
  char err[256];
  int col = vl_csv_col(c, "rss_mb");
  ASSERT_INT_EQ(vl_csv_numbers(c, (size_t)col, v, err, sizeof(err)), VL_EINVAL);
  ASSERT_STR_EQ(err, "t.csv:6: column 'rss_mb': '12x' is not a number");
  ASSERT_EQ(v[0], 512.0);
  ASSERT(isnan(v[1]));
  ASSERT_EQ(v[2], -350.0);
  ASSERT(isnan(v[3]));
  vl_csv_free(c);

  double x = 0;
  const char *good[] = {"0", "-0", "+1", "1.", ".5", "1e3", "1E-3", "  42\t", "123456789012345"};
  const double want[] = {0, -0.0, 1, 1, 0.5, 1000, 0.001, 42, 123456789012345.0};
  for (size_t i = 0; i < VL_ARRAY_SIZE(good); i++) {
    ASSERT_INT_EQ(vl_csv_parse_number(good[i], &x), 0);
    ASSERT_EQ(x, want[i]);
  }
  const char *bad[] = {"0x10",
                       "inf",
                       "nan",
                       "-inf",
                       "1e",
                       "1e+",
                       "--1",
                       "1.2.3",
                       "1 2",
                       ".",
                       "-",
                       "e5",
                       "1,5",
                       "12MB",
                       "1e999",
                       "\xC2\xA0"
                       "1"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    x = 7;
    ASSERT_INT_EQ(vl_csv_parse_number(bad[i], &x), VL_EINVAL);
    ASSERT_EQ(x, 7.0);
  }
  ASSERT_INT_EQ(vl_csv_parse_number("", &x), VL_ENOENT);
  ASSERT_INT_EQ(vl_csv_parse_number("  ", &x), VL_ENOENT);
}

TEST_IMPL(csv_times) {
  double ms;
  /* ISO 8601 in UTC, with a fraction, with offsets. */
  ASSERT_INT_EQ(vl_csv_parse_time("2026-11-29T16:40:00.123Z", &ms), 0);
  ASSERT_EQ(ms, 1795970400123.0);
  ASSERT_INT_EQ(vl_csv_parse_time("2026-11-29T16:40:00Z", &ms), 0);
  ASSERT_EQ(ms, 1795970400000.0);
  ASSERT_INT_EQ(vl_csv_parse_time("2026-11-29t16:40z", &ms), 0);
  ASSERT_EQ(ms, 1795970400000.0);
  ASSERT_INT_EQ(vl_csv_parse_time("2026-11-29T18:40:00.123+02:00", &ms), 0);
  ASSERT_EQ(ms, 1795970400123.0);
  ASSERT_INT_EQ(vl_csv_parse_time("2026-11-29T11:40:00-0500", &ms), 0);
  ASSERT_EQ(ms, 1795970400000.0);
  ASSERT_INT_EQ(vl_csv_parse_time("2026-11-29 21:40:00 +05", &ms), 0);
  ASSERT_EQ(ms, 1795970400000.0);
  ASSERT_INT_EQ(vl_csv_parse_time("2024-02-29", &ms), 0); /* leap day, local midnight */
  ASSERT_INT_EQ(vl_csv_parse_time("2024-02-29T00:00Z", &ms), 0);
  ASSERT_EQ(ms, 1709164800000.0);
  ASSERT_INT_EQ(vl_csv_parse_time("1999-12-31T23:59:59Z", &ms), 0);
  ASSERT_EQ(ms, 946684799000.0);
  /* Epoch seconds (with a fraction) and epoch milliseconds. */
  ASSERT_INT_EQ(vl_csv_parse_time("1795970400.123", &ms), 0);
  ASSERT_NEAR(ms, 1795970400123.0, 1e-3);
  ASSERT_INT_EQ(vl_csv_parse_time("1795970400123", &ms), 0);
  ASSERT_EQ(ms, 1795970400123.0);
  ASSERT_INT_EQ(vl_csv_parse_time(" 1795970400 ", &ms), 0);
  ASSERT_EQ(ms, 1795970400000.0);
  /* Zone-less times are local: UTC, then two hours east of it. */
  setenv("TZ", "UTC0", 1);
  tzset();
  ASSERT_INT_EQ(vl_csv_parse_time("2026-11-29 16:40:00", &ms), 0);
  ASSERT_EQ(ms, 1795970400000.0);
  ASSERT_INT_EQ(vl_csv_parse_time("2026/11/29 16:40:00.123", &ms), 0); /* nvidia-smi */
  ASSERT_EQ(ms, 1795970400123.0);
  setenv("TZ", "XXX-2", 1);
  tzset();
  ASSERT_INT_EQ(vl_csv_parse_time("2026-11-29 18:40:00.5", &ms), 0);
  ASSERT_EQ(ms, 1795970400500.0);
  /* Wrong. */
  const char *bad[] = {"2026-13-01",
                       "2026-02-29",
                       "2026-11-31",
                       "2026-11-29T24:00",
                       "2026-11-29T16:60",
                       "2026-11-29T16",
                       "2026-11-29T16:40:00.",
                       "2026-11-29T16:40Zx",
                       "2026-11-29T16:40+25",
                       "yesterday",
                       "26-11-29",
                       "2026-11/29",
                       "-5",
                       "2026-11-29T16:40:00 Z junk"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    ms = 7;
    if (vl_csv_parse_time(bad[i], &ms) != VL_EINVAL) {
      fprintf(stderr, "accepted '%s'\n", bad[i]);
      ASSERT(0);
    }
    ASSERT_EQ(ms, 7.0);
  }
  ASSERT_INT_EQ(vl_csv_parse_time("", &ms), VL_ENOENT);

  /* A column of them, with a bad one reported by line. */
  vl_csv_t *c = parse_ok("timestamp,v\n2026-11-29T16:40:00Z,1\n,2\n2026-11-29T16:40:61Z,3\n");
  double t[3];
  char err[256];
  ASSERT_INT_EQ(vl_csv_times(c, 0, t, err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "t.csv:4: column 'timestamp': '2026-11-29T16:40:61Z' is not a timestamp") ==
         err);
  ASSERT_EQ(t[0], 1795970400000.0);
  ASSERT(isnan(t[1]));
  vl_csv_free(c);
}

TEST_IMPL(csv_files) {
  char dir[300];
  snprintf(dir, sizeof(dir), "%s/vlcsv.XXXXXX", task_tmpdir());
  ASSERT(mkdtemp(dir) != NULL);
  char path[600];
  snprintf(path, sizeof(path), "%s/monitor.csv", dir);
  /* Bigger than the reader's first buffer, to cross its growth. */
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fputs("timestamp,gpu0_used_mb\n", f);
  for (int i = 0; i < 10000; i++)
    fprintf(f, "%d.25,%d\n", 1795970400 + i, 1000 + i % 7);
  fclose(f);
  vl_csv_t *c = NULL;
  char err[256];
  ASSERT_INT_EQ(vl_csv_load(&c, path, err, sizeof(err)), 0);
  ASSERT_UINT_EQ(vl_csv_nrows(c), 10000);
  ASSERT_STR_EQ(vl_csv_source(c), path);
  double *t = malloc(10000 * sizeof(double));
  ASSERT_INT_EQ(vl_csv_times(c, 0, t, err, sizeof(err)), 0);
  ASSERT_EQ(t[9999], (1795970400.0 + 9999) * 1000 + 250);
  free(t);
  vl_csv_free(c);
  unlink(path);

  char missing[400];
  snprintf(missing, sizeof(missing), "%s/none.csv", dir);
  c = NULL;
  ASSERT_INT_EQ(vl_csv_load(&c, missing, err, sizeof(err)), VL_EIO);
  ASSERT(c == NULL);
  ASSERT(strstr(err, missing) == err && strstr(err, "No such file") != NULL);
  rmdir(dir);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {
      TEST_ENTRY(csv_basic),  TEST_ENTRY(csv_quoting),        TEST_ENTRY(csv_layout),
      TEST_ENTRY(csv_errors), TEST_ENTRY(csv_numbers_strict), TEST_ENTRY(csv_times),
      TEST_ENTRY(csv_files),
  };
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
