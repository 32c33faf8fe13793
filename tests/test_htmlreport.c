/* The HTML report rendered from a made-up summary, timeline and memory plot: server and user text
 * escaped wherever it lands, goodput keys shown when present (nested ones a row each), the charts
 * drawn from the timeline, gnuplot's SVG inlined without its XML prologue, no network reference. */
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
    "\"error_messages\":[{\"class\":\"http_5xx\",\"status\":500,\"message\":\"<img src=x "
    "onerror=y> & 'q'\",\"count\":20}],"
    "\"phases\":[{\"name\":\"<p1>\",\"sent\":60,\"request_goodput\":4.5},"
    "{\"name\":\"p2\",\"sent\":60,\"request_goodput\":null}],"
    "\"config\":{\"model\":\"a<b\",\"url\":\"http://h/\"}}";

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
  ASSERT(strstr(html, "<td>&lt;warm&gt;</td>") != NULL);
  ASSERT(strstr(html, "<td>measure &amp; more</td><td class=num>2</td>") != NULL);
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

int main(int argc, char **argv) {
  static const task_entry_t tests[] = {TEST_ENTRY(html_escapes_and_sections)};
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
