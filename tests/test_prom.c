/* The Prometheus text format parser and the metric selectors: a document using every feature of
 * the format, malformed lines reported with their line numbers, every truncation and many random
 * mutations of a valid document parsed from exact-size heap copies (so that a read past the end
 * is caught under AddressSanitizer), and selector parsing and matching. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/prom.h"

typedef struct {
  char name[64];
  char canon[256];
  char first_label[32], first_value[64];
  size_t n_labels;
  double value;
  int has_ts;
  int64_t ts;
  vl_prom_type_t type;
  size_t line;
} got_t;

typedef struct {
  got_t v[64];
  int n;
  int stop_at; /* return VL_ECANCEL on this sample (1-based); 0: never */
} sink_t;

static int on_sample(const vl_prom_sample_t *s, void *ud) {
  sink_t *k = ud;
  if (k->n < 64) {
    got_t *g = &k->v[k->n];
    snprintf(g->name, sizeof(g->name), "%s", s->name);
    snprintf(g->canon, sizeof(g->canon), "%s", s->labels_canon);
    if (s->n_labels) {
      snprintf(g->first_label, sizeof(g->first_label), "%s", s->labels[0].name);
      snprintf(g->first_value, sizeof(g->first_value), "%s", s->labels[0].value);
    }
    g->n_labels = s->n_labels;
    g->value = s->value;
    g->has_ts = s->has_ts;
    g->ts = s->ts_ms;
    g->type = s->type;
    g->line = s->line;
  }
  k->n++;
  return k->stop_at && k->n == k->stop_at ? VL_ECANCEL : 0;
}

static int on_count(const vl_prom_sample_t *s, void *ud) {
  (*(int *)ud)++;
  /* Touch every string, so that a bad pointer shows under the sanitizers. */
  volatile size_t n = strlen(s->name) + strlen(s->labels_canon);
  for (size_t i = 0; i < s->n_labels; i++)
    n += strlen(s->labels[i].name) + strlen(s->labels[i].value);
  (void)n;
  return 0;
}

/* Parses from an exact-size heap copy: no terminator, no slack. */
static int parse_exact(const char *doc, size_t len, vl_prom_sample_cb cb, void *ud, char *err,
                       size_t errlen) {
  char *copy = malloc(len ? len : 1);
  ASSERT(copy != NULL);
  memcpy(copy, doc, len);
  int rc = vl_prom_parse(copy, len, cb, ud, err, errlen);
  free(copy);
  return rc;
}

static const char good_doc[] =
    "# HELP sglang:token_usage The token usage.\n"
    "# TYPE sglang:token_usage gauge\n"
    "sglang:token_usage{model_name=\"Qwen/Qwen2.5-VL-7B\",engine_type=\"unified\"} 0.25\n"
    "\n"
    "# A comment that says nothing\r\n"
    "#TYPE http_requests counter\n"
    "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\r\n"
    "http_requests_total{code=\"400\",method=\"post\",} 3 1395066363000\n"
    "   \t \n"
    "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find "
    "file:\\n\\\"FILE.TXT\\\"\"} 1.458255915e9\n"
    "metric_without_timestamp_and_labels 12.47\n"
    "something_weird{problem=\"division by zero\"} +Inf -3982045\n"
    "neg_inf -Inf\n"
    "not_a_number NaN\n"
    "# TYPE rpc_duration_seconds summary\n"
    "rpc_duration_seconds{quantile=\"0.5\"} 4773\n"
    "rpc_duration_seconds_sum 1.7560473e+07\n"
    "rpc_duration_seconds_count 2693\n"
    "rpc_duration_seconds_bucket 1\n"
    "  spaced { a = \"1\" , b=\"\" }   -0.5e-3   \t\n"
    "utf8{v=\"h\xc3\xa9llo \xe2\x82\xac\"} .5\n"
    "tiny 1E+2\n"
    "last_line_without_newline 7";

TEST_IMPL(prom_parse_document) {
  sink_t k = {0};
  char err[200];
  ASSERT_INT_EQ(parse_exact(good_doc, strlen(good_doc), on_sample, &k, err, sizeof(err)), 0);
  ASSERT_STR_EQ(err, "");
  ASSERT_INT_EQ(k.n, 16);
  got_t *g = k.v;
  ASSERT_STR_EQ(g[0].name, "sglang:token_usage");
  ASSERT_STR_EQ(g[0].canon, "{engine_type=\"unified\",model_name=\"Qwen/Qwen2.5-VL-7B\"}");
  ASSERT_STR_EQ(g[0].first_label, "model_name");
  ASSERT_EQ(g[0].value, 0.25);
  ASSERT_INT_EQ(g[0].type, VL_PROM_GAUGE);
  ASSERT_INT_EQ(g[0].has_ts, 0);
  ASSERT_UINT_EQ(g[0].line, 3);
  /* "#TYPE" without a space is a TYPE line too; the counter's samples carry _total. */
  ASSERT_STR_EQ(g[1].name, "http_requests_total");
  ASSERT_INT_EQ(g[1].type, VL_PROM_COUNTER);
  ASSERT_EQ(g[1].value, 1027.0);
  ASSERT_INT_EQ(g[1].has_ts, 1);
  ASSERT_INT_EQ(g[1].ts, 1395066363000);
  ASSERT_UINT_EQ(g[1].line, 7);
  /* Label order and a trailing comma do not change the canonical set. */
  ASSERT_STR_EQ(g[1].canon, "{code=\"200\",method=\"post\"}");
  ASSERT_STR_EQ(g[2].canon, "{code=\"400\",method=\"post\"}");
  ASSERT_STR_EQ(g[2].first_label, "code");
  /* Escapes: unescaped in values, escaped again in the canonical set. */
  ASSERT_STR_EQ(g[3].first_value, "C:\\DIR\\FILE.TXT");
  ASSERT_STR_EQ(g[3].canon,
                "{error=\"Cannot find file:\\n\\\"FILE.TXT\\\"\",path=\"C:\\\\DIR\\\\FILE.TXT\"}");
  ASSERT_EQ(g[3].value, 1.458255915e9);
  ASSERT_STR_EQ(g[4].name, "metric_without_timestamp_and_labels");
  ASSERT_STR_EQ(g[4].canon, "");
  ASSERT_UINT_EQ(g[4].n_labels, 0);
  ASSERT_INT_EQ(g[4].type, VL_PROM_UNTYPED);
  ASSERT(isinf(g[5].value) && g[5].value > 0);
  ASSERT_INT_EQ(g[5].ts, -3982045);
  ASSERT(isinf(g[6].value) && g[6].value < 0);
  ASSERT(isnan(g[7].value));
  ASSERT_INT_EQ(g[8].type, VL_PROM_SUMMARY);
  ASSERT_EQ(g[9].value, 1.7560473e+07);
  ASSERT_INT_EQ(g[9].type, VL_PROM_SUMMARY);
  ASSERT_INT_EQ(g[10].type, VL_PROM_SUMMARY);
  ASSERT_INT_EQ(g[11].type, VL_PROM_UNTYPED); /* _bucket belongs to histograms only */
  ASSERT_STR_EQ(g[12].name, "spaced");
  ASSERT_STR_EQ(g[12].canon, "{a=\"1\",b=\"\"}");
  ASSERT_EQ(g[12].value, -0.5e-3);
  ASSERT_STR_EQ(g[13].first_value, "h\xc3\xa9llo \xe2\x82\xac");
  ASSERT_EQ(g[13].value, 0.5);
  ASSERT_EQ(g[14].value, 100.0);
  ASSERT_STR_EQ(g[15].name, "last_line_without_newline");
  ASSERT_EQ(g[15].value, 7.0);
  ASSERT_UINT_EQ(g[15].line, 23);
}

TEST_IMPL(prom_parse_values) {
  static const struct {
    const char *text;
    double value;
  } ok[] = {
      {"m 0", 0},      {"m -0", 0},     {"m 42", 42},           {"m 1.", 1},
      {"m .25", 0.25}, {"m 1e3", 1000}, {"m 1E-3", 0.001},      {"m -2.5e+2", -250},
      {"m +7", 7},     {"m 00012", 12}, {"m 1.5e308", 1.5e308},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(ok); i++) {
    sink_t k = {0};
    ASSERT_INT_EQ(vl_prom_parse(ok[i].text, strlen(ok[i].text), on_sample, &k, NULL, 0), 0);
    ASSERT_INT_EQ(k.n, 1);
    ASSERT_EQ(k.v[0].value, ok[i].value);
  }
  static const char *inf[] = {"m +Inf", "m Inf", "m inf", "m +inf", "m Infinity", "m INF"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(inf); i++) {
    sink_t k = {0};
    ASSERT_INT_EQ(vl_prom_parse(inf[i], strlen(inf[i]), on_sample, &k, NULL, 0), 0);
    ASSERT(isinf(k.v[0].value) && k.v[0].value > 0);
  }
  static const char *nan_forms[] = {"m NaN", "m nan", "m NAN"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(nan_forms); i++) {
    sink_t k = {0};
    ASSERT_INT_EQ(vl_prom_parse(nan_forms[i], strlen(nan_forms[i]), on_sample, &k, NULL, 0), 0);
    ASSERT(isnan(k.v[0].value));
  }
  static const char *bad[] = {"m 1x",   "m e5",   "m 1e",  "m .",    "m +",   "m --1",
                              "m 0x10", "m +NaN", "m 1,5", "m ∞",    "m 1e+", "m 1.2.3",
                              "m Inff", "m nil",  "m _1",  "m 1_000"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    sink_t k = {0};
    char err[200];
    ASSERT_INT_EQ(vl_prom_parse(bad[i], strlen(bad[i]), on_sample, &k, err, sizeof(err)),
                  VL_EINVAL);
    ASSERT_INT_EQ(k.n, 0);
    ASSERT(strstr(err, "line 1: invalid value") == err);
  }
  /* Timestamps: int64 range, signs; no fractions. */
  static const struct {
    const char *text;
    int ok;
    int64_t ts;
  } ts[] = {
      {"m 1 9223372036854775807", 1, INT64_MAX},
      {"m 1 -9223372036854775808", 1, INT64_MIN},
      {"m 1 +5", 1, 5},
      {"m 1 9223372036854775808", 0, 0},
      {"m 1 1.5", 0, 0},
      {"m 1 12abc", 0, 0},
      {"m 1 -", 0, 0},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(ts); i++) {
    sink_t k = {0};
    char err[200];
    int rc = vl_prom_parse(ts[i].text, strlen(ts[i].text), on_sample, &k, err, sizeof(err));
    if (ts[i].ok) {
      ASSERT_INT_EQ(rc, 0);
      ASSERT_INT_EQ(k.v[0].ts, ts[i].ts);
    } else {
      ASSERT_INT_EQ(rc, VL_EINVAL);
      ASSERT(strstr(err, "invalid timestamp") != NULL);
    }
  }
}

TEST_IMPL(prom_parse_errors) {
  static const struct {
    const char *text;
    size_t line;
    const char *why;
    int before; /* samples delivered before the error */
  } bad[] = {
      {"ok 1\nok 2\n}junk\n", 3, "invalid metric name", 2},
      {"ok 1\n\n\ntrailing junk here\n", 4, "invalid value \"junk\"", 1},
      {"ok 1\r\nok\r\n", 2, "missing value", 1},
      {"m{a=\"1\"", 1, "unterminated label set", 0},
      {"m{a=\"1", 1, "unterminated value of label \"a\"", 0},
      {"m{a=\"1\\", 1, "unterminated value of label \"a\"", 0},
      {"m{a=1} 1", 1, "expected '\"'", 0},
      {"m{a \"1\"} 1", 1, "expected '='", 0},
      {"m{1a=\"x\"} 1", 1, "invalid label name", 0},
      {"m{a:b=\"x\"} 1", 1, "expected '='", 0},
      {"m{a=\"x\" b=\"y\"} 1", 1, "expected ',' or '}'", 0},
      {"m{a=\"x\",a=\"y\"} 1", 1, "label \"a\" repeated", 0},
      {"m{a=\"\\t\"} 1", 1, "invalid escape \"\\t\"", 0},
      {"m{a=\"\xff\"} 1", 1, "invalid UTF-8", 0},
      {"m{a=\"\xc0\xaf\"} 1", 1, "invalid UTF-8", 0},     /* overlong */
      {"m{a=\"\xed\xa0\x80\"} 1", 1, "invalid UTF-8", 0}, /* surrogate */
      {"m{a=\"\xe2\x82\"} 1", 1, "invalid UTF-8", 0},     /* cut short */
      {"m 1 2 3", 1, "unexpected text after the timestamp", 0},
      {"m\t1\t2\tx", 1, "unexpected text after the timestamp", 0},
      {"9m 1", 1, "invalid metric name", 0},
      {"m-x 1", 1, "invalid value", 0},
      {"m\r1", 1, "invalid value", 0},
      {"# HELP\n", 1, "HELP line without a metric name", 0},
      {"# TYPE m\n", 1, "TYPE line without a type", 0},
      {"# TYPE m gauges\n", 1, "unknown metric type \"gauges\"", 0},
      {"# TYPE m gauge extra\n", 1, "unexpected text after the metric type", 0},
      {"# TYPE 1m gauge\n", 1, "invalid metric name \"1m\" in TYPE line", 0},
      {"a 1\nb 2\nc 3\nd 4\ne{x=\"\"} x\n", 5, "invalid value \"x\"", 4},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    sink_t k = {0};
    char err[200], want[64];
    int rc = parse_exact(bad[i].text, strlen(bad[i].text), on_sample, &k, err, sizeof(err));
    if (rc != VL_EINVAL || !strstr(err, bad[i].why))
      fprintf(stderr, "case %zu: rc %d, \"%s\"\n", i, rc, err);
    ASSERT_INT_EQ(rc, VL_EINVAL);
    snprintf(want, sizeof(want), "line %zu: ", bad[i].line);
    ASSERT(strncmp(err, want, strlen(want)) == 0);
    ASSERT(strstr(err, bad[i].why) != NULL);
    ASSERT_INT_EQ(k.n, bad[i].before);
    for (const char *c = err; *c; c++)
      ASSERT((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f); /* one printable line */
  }
  /* NUL bytes: in a label value rejected, in a comment ignored. */
  static const char nul_value[] = "m{a=\"x\0y\"} 1";
  char err[200];
  sink_t k = {0};
  ASSERT_INT_EQ(vl_prom_parse(nul_value, sizeof(nul_value) - 1, on_sample, &k, err, sizeof(err)),
                VL_EINVAL);
  ASSERT(strstr(err, "NUL byte") != NULL);
  static const char nul_comment[] = "# hello \0 world\nm 1";
  ASSERT_INT_EQ(
      vl_prom_parse(nul_comment, sizeof(nul_comment) - 1, on_sample, &k, err, sizeof(err)), 0);
  ASSERT_INT_EQ(k.n, 1);
  /* Empty input and input of blank lines only. */
  ASSERT_INT_EQ(vl_prom_parse("", 0, on_sample, &k, err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_prom_parse("\n\r\n \n", 5, on_sample, &k, err, sizeof(err)), 0);
  ASSERT_INT_EQ(k.n, 1);
  /* err may be NULL or tiny. */
  ASSERT_INT_EQ(vl_prom_parse("}", 1, on_sample, &k, NULL, 0), VL_EINVAL);
  char tiny[4];
  ASSERT_INT_EQ(vl_prom_parse("}", 1, on_sample, &k, tiny, sizeof(tiny)), VL_EINVAL);
  ASSERT_STR_EQ(tiny, "lin");
}

TEST_IMPL(prom_parse_labels_limit) {
  char line[8192];
  size_t n = 0;
  n += (size_t)snprintf(line + n, sizeof(line) - n, "m{");
  for (int i = 0; i < VL_PROM_MAX_LABELS; i++)
    n += (size_t)snprintf(line + n, sizeof(line) - n, "l%d=\"%d\",", i, i);
  n += (size_t)snprintf(line + n, sizeof(line) - n, "} 1");
  sink_t k = {0};
  ASSERT_INT_EQ(parse_exact(line, n, on_sample, &k, NULL, 0), 0);
  ASSERT_UINT_EQ(k.v[0].n_labels, VL_PROM_MAX_LABELS);
  n -= 3;
  n += (size_t)snprintf(line + n, sizeof(line) - n, "one_more=\"x\"} 1");
  char err[200];
  ASSERT_INT_EQ(parse_exact(line, n, on_sample, &k, err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "more than 64 labels") != NULL);
}

TEST_IMPL(prom_parse_stop) {
  sink_t k = {.stop_at = 3};
  ASSERT_INT_EQ(vl_prom_parse(good_doc, strlen(good_doc), on_sample, &k, NULL, 0), VL_ECANCEL);
  ASSERT_INT_EQ(k.n, 3);
}

/* Every prefix of a valid document parses or fails cleanly, from a buffer of exactly that size. */
TEST_IMPL(prom_parse_truncations) {
  size_t len = strlen(good_doc);
  int ok = 0;
  for (size_t n = 0; n <= len; n++) {
    int count = 0;
    char err[200];
    int rc = parse_exact(good_doc, n, on_count, &count, err, sizeof(err));
    ASSERT(rc == 0 || rc == VL_EINVAL);
    if (rc == VL_EINVAL)
      ASSERT(strncmp(err, "line ", 5) == 0);
    ok += rc == 0;
  }
  ASSERT(ok > 20); /* a cut at a line end, or one that leaves a shorter valid line */
}

/* Random byte changes, insertions and deletions of a valid document. */
TEST_IMPL(prom_parse_mutations) {
  static const char alphabet[] = "{}\"\\=, \t\n\r#:aZ_09.eE+-\xff\xc3\x00";
  uint64_t seed = 0x70726f6d;
  size_t len = strlen(good_doc);
  char *buf = malloc(len + 64);
  for (int iter = 0; iter < 20000; iter++) {
    size_t n = len;
    memcpy(buf, good_doc, len);
    int edits = 1 + (int)(task_rand(&seed) % 8);
    for (int e = 0; e < edits; e++) {
      size_t at = n ? task_rand(&seed) % n : 0;
      char c = alphabet[task_rand(&seed) % (sizeof(alphabet) - 1)];
      switch (task_rand(&seed) % 3) {
      case 0:
        if (n)
          buf[at] = c;
        break;
      case 1:
        if (n < len + 63) {
          memmove(buf + at + 1, buf + at, n - at);
          buf[at] = c;
          n++;
        }
        break;
      default:
        if (n) {
          memmove(buf + at, buf + at + 1, n - at - 1);
          n--;
        }
        break;
      }
    }
    int count = 0;
    int rc = parse_exact(buf, n, on_count, &count, NULL, 0);
    ASSERT(rc == 0 || rc == VL_EINVAL);
  }
  free(buf);
}

TEST_IMPL(prom_parse_long_lines) {
  /* A label value of 1 MB, and a line of 1 MB of junk: parsed, not truncated, no overflow. */
  size_t n = 1 << 20;
  char *doc = malloc(n + 32);
  size_t k = (size_t)sprintf(doc, "big{v=\"");
  memset(doc + k, 'x', n);
  k += n;
  k += (size_t)sprintf(doc + k, "\"} 5");
  int count = 0;
  ASSERT_INT_EQ(parse_exact(doc, k, on_count, &count, NULL, 0), 0);
  ASSERT_INT_EQ(count, 1);
  memset(doc, '{', n);
  ASSERT_INT_EQ(parse_exact(doc, n, on_count, &count, NULL, 0), VL_EINVAL);
  free(doc);
}

/* Selectors. */

TEST_IMPL(prom_select_parse) {
  vl_prom_target_t t;
  char err[200];
  ASSERT_INT_EQ(vl_prom_select_parse("http://127.0.0.1:30000/metrics", &t, err, sizeof(err)), 0);
  ASSERT_STR_EQ(t.url, "http://127.0.0.1:30000/metrics");
  ASSERT_INT_EQ(t.defaults, 1);
  size_t nd = 0;
  while (vl_prom_default_metrics[nd])
    nd++;
  ASSERT_UINT_EQ(t.n_sels, nd);
  ASSERT_STR_EQ(t.sels[0].name, "sglang:token_usage");
  vl_prom_target_free(&t);

  /* No path: /metrics. */
  ASSERT_INT_EQ(vl_prom_select_parse("http://host:8000", &t, err, sizeof(err)), 0);
  ASSERT_STR_EQ(t.url, "http://host:8000/metrics");
  vl_prom_target_free(&t);
  ASSERT_INT_EQ(vl_prom_select_parse("HTTPS://host?x=1#m", &t, err, sizeof(err)), 0);
  ASSERT_STR_EQ(t.url, "HTTPS://host/metrics?x=1");
  vl_prom_target_free(&t);
  ASSERT_INT_EQ(vl_prom_select_parse("http://h/custom/path", &t, err, sizeof(err)), 0);
  ASSERT_STR_EQ(t.url, "http://h/custom/path");
  vl_prom_target_free(&t);

  ASSERT_INT_EQ(vl_prom_select_parse(
                    "http://h:1/metrics#sglang:token_usage, vllm:x{a=\"1\",b!=\"two, three\","
                    "c=~\"ab|cd\",d!~\"x.*\"} ,plain{}",
                    &t, err, sizeof(err)),
                0);
  ASSERT_STR_EQ(t.url, "http://h:1/metrics");
  ASSERT_INT_EQ(t.defaults, 0);
  ASSERT_UINT_EQ(t.n_sels, 3);
  ASSERT_STR_EQ(t.sels[0].name, "sglang:token_usage");
  ASSERT_UINT_EQ(t.sels[0].n_matchers, 0);
  ASSERT_STR_EQ(t.sels[1].name, "vllm:x");
  ASSERT_UINT_EQ(t.sels[1].n_matchers, 4);
  ASSERT_STR_EQ(t.sels[1].matchers[1].value, "two, three");
  ASSERT_INT_EQ(t.sels[1].matchers[1].op, VL_PROM_NE);
  ASSERT_INT_EQ(t.sels[1].matchers[2].op, VL_PROM_RE);
  ASSERT_INT_EQ(t.sels[1].matchers[3].op, VL_PROM_NRE);
  ASSERT_STR_EQ(t.sels[2].name, "plain");
  vl_prom_target_free(&t);

  ASSERT_INT_EQ(vl_prom_select_parse("http://h#m{path=\"a\\\"b\\\\c\\n\"}", &t, err, sizeof(err)),
                0);
  ASSERT_STR_EQ(t.sels[0].matchers[0].value, "a\"b\\c\n");
  vl_prom_target_free(&t);

  static const struct {
    const char *arg, *why;
  } bad[] = {
      {"localhost:8000/metrics", "is not an http:// or https:// URL"},
      {"ftp://h/metrics", "is not an http:// or https:// URL"},
      {"http:///metrics", "has no host"},
      {"http://h/me trics", "space or control character"},
      {"http://h/metrics#", "empty metric list"},
      {"http://h/metrics#  ", "empty metric list"},
      {"http://h/metrics#a,,b", "empty metric selector"},
      {"http://h/metrics#a,", "empty metric selector"},
      {"http://h/metrics#9lives", "invalid metric name"},
      {"http://h/metrics#m{", "unterminated label matchers"},
      {"http://h/metrics#m{a}", "expected =, !=, =~ or !~ after label a"},
      {"http://h/metrics#m{a=x}", "must be in double quotes"},
      {"http://h/metrics#m{a=\"x}", "unterminated value of label a"},
      {"http://h/metrics#m{a=\"x\" b=\"y\"}", "expected ',' or '}' after label a"},
      {"http://h/metrics#m{a=\"\\q\"}", "invalid escape"},
      {"http://h/metrics#m{a=~\"(\"}", "bad regular expression for label a"},
      {"http://h/metrics#m n", "selectors are separated by ','"},
      {"http://h/metrics#m{9=\"x\"}", "invalid label name"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    err[0] = '\0';
    int rc = vl_prom_select_parse(bad[i].arg, &t, err, sizeof(err));
    if (rc != VL_EINVAL || !strstr(err, bad[i].why))
      fprintf(stderr, "case %s: rc %d, \"%s\"\n", bad[i].arg, rc, err);
    ASSERT_INT_EQ(rc, VL_EINVAL);
    ASSERT(strstr(err, bad[i].why) != NULL);
    ASSERT(t.url == NULL && t.sels == NULL);
  }
}

typedef struct {
  const vl_prom_target_t *t;
  char hits[16][64];
  int n;
} match_ctx_t;

static int on_match(const vl_prom_sample_t *s, void *ud) {
  match_ctx_t *c = ud;
  if (vl_prom_target_match(c->t, s) && c->n < 16)
    snprintf(c->hits[c->n++], 64, "%s%s", s->name, s->labels_canon);
  return 0;
}

TEST_IMPL(prom_select_match) {
  static const char doc[] = "a{x=\"1\"} 1\n"
                            "a{x=\"2\",y=\"z\"} 2\n"
                            "a 3\n"
                            "ab 4\n"
                            "c_total 5\n"
                            "c_created 6\n"
                            "d{path=\"/v1/chat\"} 7\n"
                            "d{path=\"/metrics\"} 8\n";
  static const struct {
    const char *sel;
    const char *hits;
  } cases[] = {
      {"a", "a{x=\"1\"} a{x=\"2\",y=\"z\"} a "},
      {"a{x=\"1\"}", "a{x=\"1\"} "},
      {"a{x!=\"1\"}", "a{x=\"2\",y=\"z\"} a "},
      {"a{y=\"\"}", "a{x=\"1\"} a "}, /* absent reads as empty */
      {"a{x=~\"[12]\"}", "a{x=\"1\"} a{x=\"2\",y=\"z\"} "},
      {"a{x=~\"1|\"}", "a{x=\"1\"} a "},
      {"a{x=~\"2\",y=\"z\"}", "a{x=\"2\",y=\"z\"} "},
      {"d{path=~\"/v1.*\"}", "d{path=\"/v1/chat\"} "},
      {"d{path!~\"/v1.*\"}", "d{path=\"/metrics\"} "},
      {"d{path=~\"v1\"}", ""}, /* anchored: whole value */
      {"c", "c_total "},       /* a counter by its family name */
      {"a,ab", "a{x=\"1\"} a{x=\"2\",y=\"z\"} a ab "},
      {"nope", ""},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(cases); i++) {
    char arg[128], err[200], got[512] = "";
    snprintf(arg, sizeof(arg), "http://h/m#%s", cases[i].sel);
    vl_prom_target_t t;
    ASSERT_INT_EQ(vl_prom_select_parse(arg, &t, err, sizeof(err)), 0);
    match_ctx_t c = {.t = &t};
    ASSERT_INT_EQ(vl_prom_parse(doc, strlen(doc), on_match, &c, err, sizeof(err)), 0);
    for (int k = 0; k < c.n; k++) {
      strcat(got, c.hits[k]);
      strcat(got, " ");
    }
    ASSERT_STR_EQ(got, cases[i].hits);
    vl_prom_target_free(&t);
  }
}

static const task_entry_t tests[] = {
    TEST_ENTRY(prom_parse_document),  TEST_ENTRY(prom_parse_values),
    TEST_ENTRY(prom_parse_errors),    TEST_ENTRY(prom_parse_labels_limit),
    TEST_ENTRY(prom_parse_stop),      TEST_ENTRY(prom_parse_truncations),
    TEST_ENTRY(prom_parse_mutations), TEST_ENTRY(prom_parse_long_lines),
    TEST_ENTRY(prom_select_parse),    TEST_ENTRY(prom_select_match),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
