/* The HTML report rendered from a made-up summary, timeline and memory plot: server and user text
 * escaped wherever it lands, goodput keys shown when present (nested ones a row each), the charts
 * drawn from the timeline, gnuplot's SVG inlined without its XML prologue, no network reference;
 * the memory verdicts lead, the target and model head the page, only error classes that occurred
 * are listed, rows finer than a second add up into seconds, and a phase that comes back (one per
 * flush) is one row with its count. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/htmlreport.h"

#include <cjson/cJSON.h>

/* The page, rendered to a scratch file and read back whole (a NUL-terminated copy). */
static char *render(const vl_htmlreport_t *r) {
  FILE *f = tmpfile();
  ASSERT(f != NULL);
  ASSERT_INT_EQ(vl_htmlreport_render(r, f), 0);
  long len = ftell(f);
  ASSERT(len > 0);
  char *buf = malloc((size_t)len + 1);
  ASSERT(buf != NULL);
  rewind(f);
  ASSERT_UINT_EQ(fread(buf, 1, (size_t)len, f), (size_t)len);
  buf[len] = '\0';
  fclose(f);
  return buf;
}

static const char *SUMMARY =
    "{\"vlmload_version\":\"1.0\",\"model\":\"<script>alert(1)</script>\",\"stop_reason\":"
    "\"duration\",\"requests\":{\"sent\":120,\"ok\":100,\"failed\":20},"
    "\"request_throughput\":12.5,\"output_throughput\":1234.5678,"
    "\"request_goodput\":9.75,\"slo\":{\"ttft\":0.875,\"e2e\":0.5},"
    "\"latency_ms\":{\"count\":100,\"mean\":5.5,\"p50\":5,\"p99.9\":9.25,\"max\":10},"
    "\"ttft_ms\":{\"count\":0,\"mean\":null,\"p50\":null,\"p99.9\":null,\"max\":null},"
    "\"errors\":{\"http_5xx\":20,\"timeout\":0},"
    "\"memory_analysis\":{\"series\":[{\"series\":\"rss_mb.<s>\",\"verdict\":\"grows\","
    "\"reason\":\"r\"}]},"
    "\"error_messages\":[{\"class\":\"http_5xx\",\"status\":500,\"message\":\"<img src=x "
    "onerror=y> & 'q'\",\"count\":20}],"
    "\"phases\":[{\"name\":\"<p1>\",\"sent\":60,\"request_goodput\":4.5},"
    "{\"name\":\"p2\",\"sent\":60,\"request_goodput\":null}],"
    "\"config\":{\"model\":null,\"url\":\"http://h:1\",\"endpoint\":\"/v1/<c>\","
    "\"x\":\"a<b\"}}";

static const char *TIMELINE = "wall_ms,elapsed_s,phase,ok,rate_sent,rate_ok,e2e_p50_ms,e2e_p99_ms,"
                              "completion_tokens,request_goodput\n"
                              "1000,1.0,<warm>,10,10,10,5,9,100,8\n"
                              "2000,2.0,<warm>,0,10,0,0,0,0,0\n"
                              "3000,3.0,measure & more,12,12,12,6,11,120,9\n";

TEST_IMPL(html_escapes_and_sections) {
  cJSON *sum = cJSON_Parse(SUMMARY);
  ASSERT(sum != NULL);
  vl_csv_t *tl = NULL;
  char err[256];
  ASSERT_INT_EQ(vl_csv_parse(&tl, "t.csv", TIMELINE, strlen(TIMELINE), err, sizeof(err)), 0);
  const char *svg = "<?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n<svg id=\"gp\"><g/></svg>\n";
  vl_htmlreport_t r = {.summary = sum, .timeline = tl, .memory_svg = svg, .source = "x<y.csv"};
  char *html = render(&r);

  /* Escaped everywhere: the model, the error message, the phases, the configuration, the title. */
  ASSERT(strstr(html, "<script") == NULL);
  ASSERT(strstr(html, "<img") == NULL);
  ASSERT(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;") != NULL);
  ASSERT(strstr(html, "&lt;img src=x onerror=y&gt; &amp; &#39;q&#39;") != NULL);
  ASSERT(strstr(html, "<tr><td>&lt;warm&gt;</td><td class=num>1</td><td class=num>0</td>"
                      "<td class=num>2</td></tr>") != NULL);
  ASSERT(strstr(html, "<tr><td>measure &amp; more</td><td class=num>1</td><td class=num>2</td>"
                      "<td class=num>1</td></tr>") != NULL);
  ASSERT(strstr(html, "&quot;a&lt;b&quot;") != NULL);
  ASSERT(strstr(html, "<title>vlmload report - x&lt;y.csv</title>") != NULL);
  /* Goodput and the SLO shares, nested members a row each. */
  ASSERT(strstr(html, "<th>request_goodput</th><td class=num>9.750</td>") != NULL);
  ASSERT(strstr(html, "<th>slo.ttft</th><td class=num>0.875</td>") != NULL);
  ASSERT(strstr(html, "<th>slo.e2e</th><td class=num>0.500</td>") != NULL);
  /* Each phase a row, with whatever figures the phases have. */
  ASSERT(strstr(html, "<tr><th>name</th><th>sent</th><th>request_goodput</th></tr>") != NULL);
  ASSERT(strstr(html, "<tr><td>&lt;p1&gt;</td><td class=num>60</td><td class=num>4.500</td>") !=
         NULL);
  ASSERT(strstr(html, "<tr><td>p2</td><td class=num>60</td><td>&ndash;</td></tr>") != NULL);
  /* The percentile columns the summary has; a latency with no samples has no row. */
  ASSERT(strstr(html, "<th>p99.9</th>") != NULL);
  ASSERT(strstr(html, "<th>end-to-end</th><td class=num>100</td><td class=num>5.500</td>"
                      "<td class=num>5</td><td class=num>9.250</td>") != NULL);
  ASSERT(strstr(html, "<th>TTFT</th>") == NULL);
  ASSERT(strstr(html, "<th>output throughput</th><td class=num>1234.57 tok/s</td>") != NULL);
  ASSERT(strstr(html, "<th>http_5xx</th><td class=num>20</td>") != NULL);
  /* Only the classes that occurred. */
  ASSERT(strstr(html, "<th>timeout</th>") == NULL);
  /* The target and the model the server named, under the title. */
  ASSERT(strstr(html, "<p class=target>target <b>http://h:1/v1/&lt;c&gt;</b> &middot; model "
                      "<b>&lt;script&gt;alert(1)&lt;/script&gt;</b> (detected)</p>") != NULL);
  /* The verdicts lead: memory, its verdicts before its plot, then the summary, the latency and
   * the seconds. */
  const char *mem = strstr(html, "<section id=memory>"),
             *sum_at = strstr(html, "<section id=summary>");
  const char *lat_at = strstr(html, "<section id=latency>"),
             *tl_at = strstr(html, "<section id=timeline>");
  const char *verdicts = strstr(html, "<table id=verdicts>"),
             *plot = strstr(html, "<div class=plot>");
  ASSERT(mem && sum_at && lat_at && tl_at && verdicts && plot);
  ASSERT(mem < verdicts && verdicts < plot && plot < sum_at && sum_at < lat_at && lat_at < tl_at);
  ASSERT(strstr(html, "<tr><td>rss_mb.&lt;s&gt;</td><td class=verdict>grows</td>") != NULL);
  /* Charts: requests (with the goodput column), tokens, latency; the row without a success
   * breaks the latency lines. */
  ASSERT(strstr(html, "<svg id=\"chart-throughput\"") != NULL);
  ASSERT(strstr(html, ">request_goodput</text>") != NULL);
  ASSERT(strstr(html, "<svg id=\"chart-tokens\"") != NULL);
  const char *lat = strstr(html, "<svg id=\"chart-latency\"");
  ASSERT(lat != NULL);
  size_t polys = 0, end = (size_t)(strstr(lat, "</svg>") - html), at = (size_t)(lat - html);
  for (; at < end; at++)
    polys += strncmp(html + at, "<polyline", 9) == 0;
  ASSERT_UINT_EQ(polys, 4);
  /* gnuplot's SVG from its <svg on. */
  ASSERT(strstr(html, "<?xml") == NULL);
  ASSERT(strstr(html, "<!DOCTYPE svg") == NULL);
  ASSERT(strstr(html, "<div class=plot>\n<svg id=\"gp\"><g/></svg>") != NULL);
  ASSERT(strstr(html, "href") == NULL);
  free(html);

  /* No summary (vlmload analyze): the page still renders, without the summary sections. */
  vl_htmlreport_t bare = {.timeline = tl};
  html = render(&bare);
  ASSERT(strstr(html, "<section id=summary>") == NULL);
  ASSERT(strstr(html, "<svg id=\"chart-latency\"") != NULL);
  ASSERT(strstr(html, "</html>") != NULL);
  free(html);
  vl_csv_free(tl);
  cJSON_Delete(sum);
}

/* The text between the first data-NAME=" after at and its closing quote, copied to out. */
static void data_of(const char *at, const char *name, char *out, size_t n) {
  char key[32];
  snprintf(key, sizeof(key), "data-%s=\"", name);
  const char *b = strstr(at, key);
  ASSERT(b != NULL);
  b += strlen(key);
  const char *e = strchr(b, '"');
  ASSERT(e != NULL && (size_t)(e - b) < n);
  memcpy(out, b, (size_t)(e - b));
  out[e - b] = '\0';
}

TEST_IMPL(html_per_second_from_finer_rows) {
  /* Rows of a quarter of a second, a little late each, for 3.1 s: each second's 4 rows add up
   * into one point; the last 0.1 s is too short to stand for a second. Flushes come and go. */
  char tl_text[4096];
  size_t len = (size_t)snprintf(tl_text, sizeof(tl_text),
                                "elapsed_s,phase,sent,ok,completion_tokens,"
                                "e2e_p50_ms,e2e_p99_ms\n");
  for (int i = 1; i <= 13; i++) {
    double t = i <= 12 ? 0.2502 * i : 3.1;
    const char *phase = i % 4 == 0 ? "flush" : "measure";
    len += (size_t)snprintf(tl_text + len, sizeof(tl_text) - len, "%.4f,%s,%d,%d,%d,5,9\n", t,
                            phase, i, i + 1, 10 * i);
  }
  vl_csv_t *tl = NULL;
  char err[256];
  ASSERT_INT_EQ(vl_csv_parse(&tl, "t.csv", tl_text, len, err, sizeof(err)), 0);
  vl_htmlreport_t r = {.timeline = tl};
  char *html = render(&r);
  const char *thr = strstr(html, "<svg id=\"chart-throughput\"");
  ASSERT(thr != NULL);
  const char *sent = strstr(thr, "data-name=\"sent requests/s\""),
             *ok = strstr(thr, "data-name=\"ok requests/s\"");
  ASSERT(sent != NULL && ok != NULL);
  char xs[256], ys[256];
  data_of(sent, "x", xs, sizeof(xs));
  data_of(sent, "y", ys, sizeof(ys));
  ASSERT_STR_EQ(xs, "1 2 3");
  ASSERT_STR_EQ(ys, "10 26 42"); /* 1+2+3+4, 5+6+7+8, 9+10+11+12 */
  data_of(ok, "y", ys, sizeof(ys));
  ASSERT_STR_EQ(ys, "14 30 46");
  /* Its points are the points drawn. */
  const char *pts = strstr(sent, "points=\"");
  ASSERT(pts != NULL);
  int spaces = 0;
  for (const char *q = pts + 8; *q != '"'; q++)
    spaces += *q == ' ';
  ASSERT_INT_EQ(spaces, 2);
  const char *tok = strstr(html, "data-name=\"completion tokens/s\"");
  ASSERT(tok != NULL);
  data_of(tok, "y", ys, sizeof(ys));
  ASSERT_STR_EQ(ys, "100 260 420");
  /* Latency stays per row: 13 of them. */
  const char *lat = strstr(html, "data-name=\"e2e p50\"");
  ASSERT(lat != NULL);
  data_of(lat, "x", xs, sizeof(xs));
  ASSERT(strncmp(xs, "0.2502 0.5004 ", 14) == 0);
  /* The flush came back three times: one row, its count, its time in all (3 rows of 0.2502 s). */
  ASSERT(strstr(html, "<tr><td>flush</td><td class=num>3</td><td class=num>0.751</td>"
                      "<td class=num>0.751</td></tr>") != NULL);
  ASSERT(strstr(html, "<tr><td>measure</td><td class=num>4</td><td class=num>0</td>") != NULL);
  free(html);
  vl_csv_free(tl);
}

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {TEST_ENTRY(html_escapes_and_sections),
                                       TEST_ENTRY(html_per_second_from_finer_rows)};
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
