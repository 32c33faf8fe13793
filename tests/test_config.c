/* Command-line parsing: defaults, accepted values with units, and a one-line error naming the
 * option with exit status 2 for each bad command line. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/config.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>

#define MAXARGS 32

/* Parses a space-separated command line; returns the status and the error text in err. */
static int parse(vl_config_t *c, const char *line, char *err, size_t errlen) {
  char buf[512], *argv[MAXARGS] = {"vlmload"};
  int argc = 1;
  snprintf(buf, sizeof(buf), "%s", line);
  for (char *tok = strtok(buf, " "); tok && argc < MAXARGS - 1; tok = strtok(NULL, " "))
    argv[argc++] = tok;
  argv[argc] = NULL;
  char *outbuf = NULL, *errbuf = NULL;
  size_t outlen = 0, errsize = 0;
  FILE *out = open_memstream(&outbuf, &outlen), *ef = open_memstream(&errbuf, &errsize);
  int rc = vl_config_parse(c, argc, argv, out, ef);
  fclose(out);
  fclose(ef);
  snprintf(err, errlen, "%s", errbuf);
  free(outbuf);
  free(errbuf);
  return rc;
}

TEST_IMPL(config_defaults) {
  vl_config_t c;
  char err[512];
  unsetenv("OPENAI_API_KEY");
  ASSERT_INT_EQ(parse(&c, "", err, sizeof(err)), VL_CONFIG_RUN);
  ASSERT_STR_EQ(c.url, "http://127.0.0.1:30000");
  ASSERT_STR_EQ(c.endpoint, "/v1/chat/completions");
  ASSERT_INT_EQ(c.concurrency, 256);
  ASSERT_UINT_EQ(c.timeout_us, 600000000ull);
  ASSERT_UINT_EQ(c.grace_us, 30000000ull);
  ASSERT_UINT_EQ(c.duration_us, 30000000ull); /* neither --requests nor --duration */
  ASSERT(c.model == NULL);
  ASSERT(c.api_key == NULL);
  vl_config_free(&c);
}

TEST_IMPL(config_values) {
  vl_config_t c;
  char err[512];
  /* HOST:PORT is http's; a base under a route that does not repeat /v1 keeps it; durations of
   * several units add up. */
  ASSERT_INT_EQ(parse(&c,
                      "--url 127.0.0.1:8000 --url gw:1/v1 --endpoint /chat/completions "
                      "--duration 1h30m --timeout 2m30s --grace 0",
                      err, sizeof(err)),
                VL_CONFIG_RUN);
  ASSERT_STR_EQ(c.urls[0], "http://127.0.0.1:8000");
  ASSERT_STR_EQ(c.urls[1], "http://gw:1/v1");
  ASSERT_UINT_EQ(c.duration_us, 5400000000ull);
  ASSERT_UINT_EQ(c.timeout_us, 150000000ull);
  ASSERT_UINT_EQ(c.grace_us, 0);
  vl_config_free(&c);
  ASSERT_INT_EQ(parse(&c,
                      "--url http://[::1]:8000/ --rate 1.5k --requests 10k --duration 2m "
                      "--arrival gamma:2 --concurrency 2000 --timeout 250ms --stream",
                      err, sizeof(err)),
                VL_CONFIG_RUN);
  ASSERT_STR_EQ(c.url, "http://[::1]:8000");
  ASSERT_NEAR(c.rate, 1500, 1e-9);
  ASSERT_UINT_EQ(c.requests, 10000);
  ASSERT_UINT_EQ(c.duration_us, 120000000ull);
  ASSERT_INT_EQ(c.arrival, VL_ARRIVAL_GAMMA);
  ASSERT_NEAR(c.arrival_cv, 2, 1e-12);
  ASSERT_INT_EQ(c.concurrency, 2000);
  ASSERT_UINT_EQ(c.timeout_us, 250000);
  ASSERT_INT_EQ(c.stream, 1);
  vl_config_free(&c);
}

TEST_IMPL(config_secret_masked) {
  vl_config_t c;
  char err[512];
  ASSERT_INT_EQ(parse(&c, "--api-key sk-secret-123 --header X-Token:hidden-456", err, sizeof(err)),
                VL_CONFIG_RUN);
  cJSON *j = vl_config_json(&c);
  char *text = cJSON_PrintUnformatted(j);
  ASSERT(strstr(text, "sk-secret-123") == NULL);
  ASSERT(strstr(text, "hidden-456") == NULL);
  ASSERT(strstr(text, "X-Token") != NULL);
  free(text);
  cJSON_Delete(j);
  vl_config_free(&c);
}

TEST_IMPL(config_help_version) {
  vl_config_t c;
  char err[512];
  ASSERT_INT_EQ(parse(&c, "--help", err, sizeof(err)), 0);
  vl_config_free(&c);
  ASSERT_INT_EQ(parse(&c, "--version", err, sizeof(err)), 0);
  vl_config_free(&c);
}

TEST_IMPL(config_rejects) {
  static const struct {
    const char *line;
    const char *names; /* the text the error must contain */
  } bad[] = {
      {"--rate -1", "--rate"},
      {"--rate abc", "--rate"},
      {"--rate 1e400", "--rate"},
      {"--rate 0.0001", "--rate"},
      {"--concurrency 0", "--concurrency"},
      {"--concurrency -5", "--concurrency"},
      {"--concurrency 1.5", "--concurrency"},
      {"--duration 5x", "--duration"},
      {"--duration -1s", "--duration"},
      {"--requests 0", "--requests"},
      {"--requests ten", "--requests"},
      {"--warmup 10 --requests 5", "--warmup"},
      {"--timeout 0", "--timeout"},
      {"--timeout 1s --connect-timeout 2s", "--connect-timeout"},
      {"--grace 5x", "--grace"},
      {"--url ftp://host", "--url"},
      {"--url not:a-url", "--url"},
      {"--url http://h:1/v1", "drop '/v1' and give --url http://h:1"},
      {"--url h:1/v1/chat/completions", "drop '/v1/chat/completions' and give --url http://h:1"},
      {"--api native --url http://h:1/generate", "drop '/generate'"},
      {"--timeout 500", "--timeout '500': a duration needs its unit"},
      {"--duration 1h1h", "--duration"},
      {"--url http://h:1/?q=1", "--url"},
      {"--endpoint v1/chat", "--endpoint"},
      {"--arrival weibull", "--arrival"},
      {"--arrival gamma:0", "--arrival"},
      {"--rate 0 --arrival constant", "--arrival"},
      {"--on-full wait", "--on-full"},
      {"--header NoColon", "--header"},
      {"--max-tokens 0", "--max-tokens"},
      {"--temperature -0.5", "--temperature"},
      {"--max-response 10", "--max-response"},
      {"--bogus", "--bogus"},
      {"--rate", "--rate"},
      {"stray", "stray"},
      {"--api grpc", "--api"},
      {"--api native --server vllm", "--api"},
      {"--api native --server openai", "--api"},
      {"--image-token ", "--image-token"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    vl_config_t c;
    char err[512];
    int rc = parse(&c, bad[i].line, err, sizeof(err));
    if (rc != 2 || !strstr(err, bad[i].names) || strchr(err, '\n') != err + strlen(err) - 1) {
      fprintf(stderr, "command line '%s': status %d, error '%s'\n", bad[i].line, rc, err);
      ASSERT(0);
    }
    vl_config_free(&c);
  }
}

/* Writes text to a temporary file and returns its path (static storage). */
static const char *temp_json(const char *text) {
  static char path[600];
  snprintf(path, sizeof(path), "%s/vlmload-config-XXXXXX", task_tmpdir());
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  ASSERT(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  close(fd);
  return path;
}

TEST_IMPL(config_file) {
  vl_config_t c;
  char err[512], line[256];
  const char *p = temp_json("{\"rate\": 25, \"stream\": true, \"header\": [\"A: 1\", \"B: 2\"],"
                            " \"arrival\": \"constant\", \"requests\": \"10k\", \"quiet\": false}");
  /* The command line wins over the file, wherever --config stands. */
  snprintf(line, sizeof(line), "--rate 30 --config %s", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), VL_CONFIG_RUN);
  ASSERT_NEAR(c.rate, 30, 0);
  ASSERT_INT_EQ(c.stream, 1);
  ASSERT_INT_EQ(c.n_headers, 2);
  ASSERT_INT_EQ(c.arrival, VL_ARRIVAL_CONSTANT);
  ASSERT_UINT_EQ(c.requests, 10000);
  ASSERT_INT_EQ(c.quiet, 0);
  vl_config_free(&c);
  unlink(p);

  const char *bad[][2] = {
      {"{\"rate\": -1}", "rate"},
      {"{\"bogus\": 1}", "bogus"},
      {"[1, 2]", "not a JSON object"},
      {"{\"stream\": 1}", "true or false"},
      {"{\"rate\": {\"x\": 1}}", "rate"},
      {"{not json", "not JSON: line 1, column 2"},
      {"{\"rate\": 5,\n \"x\": 1,}", "not JSON: line 2, column 9"},
      {"{\"rate\": 5} {\"rate\": 6}", "not JSON: line 1, column 13"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad); i++) {
    p = temp_json(bad[i][0]);
    snprintf(line, sizeof(line), "--config %s", p);
    ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), 2);
    if (!strstr(err, bad[i][1])) {
      fprintf(stderr, "file %s: error '%s'\n", bad[i][0], err);
      ASSERT(0);
    }
    vl_config_free(&c);
    unlink(p);
  }
  ASSERT_INT_EQ(parse(&c, "--config /nonexistent/x.json", err, sizeof(err)), 2);
  ASSERT(strstr(err, "--config") != NULL);
  vl_config_free(&c);
}

/* --api native: SGLang's route by default, an explicit --endpoint kept, the server profile
 * SGLang's; a phase cannot change the API. */
TEST_IMPL(config_api_native) {
  vl_config_t c;
  char err[512], line[256];
  ASSERT_INT_EQ(parse(&c, "--api native", err, sizeof(err)), VL_CONFIG_RUN);
  ASSERT_INT_EQ(c.api, VL_API_NATIVE);
  ASSERT_STR_EQ(c.endpoint, "/generate");
  ASSERT_INT_EQ(c.server, VL_SERVER_SGLANG);
  ASSERT(c.image_token == NULL);
  cJSON *j = vl_config_json(&c);
  ASSERT_STR_EQ(cJSON_GetObjectItem(j, "api")->valuestring, "native");
  cJSON_Delete(j);
  vl_config_free(&c);
  ASSERT_INT_EQ(parse(&c, "--endpoint /v2/gen --api native --server sglang --image-token <image>",
                      err, sizeof(err)),
                VL_CONFIG_RUN);
  ASSERT_STR_EQ(c.endpoint, "/v2/gen");
  ASSERT_STR_EQ(c.image_token, "<image>");
  vl_config_free(&c);
  ASSERT_INT_EQ(parse(&c, "--api openai", err, sizeof(err)), VL_CONFIG_RUN);
  ASSERT_STR_EQ(c.endpoint, "/v1/chat/completions");
  ASSERT_INT_EQ(c.server, VL_SERVER_AUTO);
  vl_config_free(&c);

  const char *p = temp_json("{\"phases\": [{\"rate\": 5}, {\"api\": \"native\"}]}");
  snprintf(line, sizeof(line), "--requests 10 --config %s", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), 2);
  ASSERT(strstr(err, "--api (in phase 2)") != NULL);
  vl_config_free(&c);
  unlink(p);
}

/* The --config file is found as getopt_long finds every option: an unambiguous abbreviation names
 * it, with or without '=', and another option's value that reads "--config" does not. */
TEST_IMPL(config_file_abbreviated) {
  vl_config_t c;
  char err[512], line[700];
  const char *p = temp_json("{\"rate\": 25, \"stream\": true}");
  const char *forms[] = {"--conf %s", "--conf=%s", "--confi %s", "--config=%s",
                         "--rate 30 --conf %s"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(forms); i++) {
    snprintf(line, sizeof(line), forms[i], p);
    ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), VL_CONFIG_RUN);
    ASSERT_INT_EQ(c.stream, 1);
    ASSERT_NEAR(c.rate, i == 4 ? 30 : 25, 0);
    vl_config_free(&c);
  }
  /* The value of --model, not a --config: no file is read, and --rate is an option. */
  ASSERT_INT_EQ(parse(&c, "--model --config --rate 5", err, sizeof(err)), VL_CONFIG_RUN);
  ASSERT_STR_EQ(c.model, "--config");
  ASSERT_NEAR(c.rate, 5, 0);
  ASSERT_INT_EQ(c.stream, 0);
  vl_config_free(&c);
  /* After "--" nothing is an option. */
  snprintf(line, sizeof(line), "-- --conf %s", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), 2);
  ASSERT(strstr(err, "unexpected argument") != NULL);
  vl_config_free(&c);
  /* An abbreviation of several options names none of them. */
  snprintf(line, sizeof(line), "--co %s", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), 2);
  ASSERT(strstr(err, "--co: ambiguous") != NULL);
  vl_config_free(&c);
  /* A file that cannot be read is named the same way whatever the spelling. */
  ASSERT_INT_EQ(parse(&c, "--conf /nonexistent/x.json", err, sizeof(err)), 2);
  ASSERT(strstr(err, "--config '/nonexistent/x.json'") != NULL);
  vl_config_free(&c);
  unlink(p);
}

/* A mistyped option is answered with what was meant: the nearest name, the candidates of an
 * abbreviation, or that the option takes no value; never with a secret given after '='. */
TEST_IMPL(config_mistakes_teach) {
  vl_config_t c;
  char err[512];
  const struct {
    const char *line, *want;
  } cases[] = {
      {"--duraton 5s", "--duraton: unknown option; did you mean --duration?"},
      {"--requets 5", "--requets: unknown option; did you mean --requests?"},
      {"--concurency 5", "did you mean --concurrency?"},
      {"--strem", "did you mean --stream?"},
      {"--stream=true", "--stream=true: --stream takes no value; give it alone"},
      {"--str=yes", "--str=yes: --stream takes no value"},
      {"--re 5", "--re: ambiguous abbreviation of --resolution, --requests"},
      {"--xyzzy", "--xyzzy: unknown option (see --help)"},
      {"--api-kex=s3cret", "did you mean --api-key?"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(cases); i++) {
    ASSERT_INT_EQ(parse(&c, cases[i].line, err, sizeof(err)), 2);
    if (!strstr(err, cases[i].want)) {
      fprintf(stderr, "%s: got %s", cases[i].line, err);
      ASSERT(0);
    }
    ASSERT(strstr(err, "s3cret") == NULL);
    ASSERT(strchr(err, '\n') == err + strlen(err) - 1); /* one line */
    vl_config_free(&c);
  }
  /* A key of a --config file too. */
  char line[600];
  const char *p = temp_json("{\"rtae\": 25}");
  snprintf(line, sizeof(line), "--config %s", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), 2);
  ASSERT(strstr(err, "unknown option \"rtae\"; did you mean \"rate\"?") != NULL);
  vl_config_free(&c);
  unlink(p);
}

/* Writes text to dir/name (dir made first) and returns the path (static storage). */
static const char *write_at(const char *dir, const char *name, const char *text) {
  static char path[700];
  mkdir(dir, 0700);
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fputs(text, f);
  fclose(f);
  return path;
}

/* A list option given on the command line replaces the file's list; one the command line does not
 * give is the file's; repeats on the command line still add. */
TEST_IMPL(config_file_lists) {
  vl_config_t c;
  char err[512], line[2048];
  const char *p = temp_json("{\"url\": [\"http://a:1\", \"http://b:2\"], \"header\": [\"A: 1\"],"
                            " \"monitor-pid\": [\"x=1\", \"y=2\"], \"rate\": 5}");
  snprintf(line, sizeof(line), "--config %s", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), VL_CONFIG_RUN);
  ASSERT_INT_EQ(c.n_urls, 2);
  ASSERT_STR_EQ(c.urls[1], "http://b:2");
  ASSERT_INT_EQ(c.n_headers, 1);
  ASSERT_INT_EQ(c.monitor.n_pids, 2);
  vl_config_free(&c);

  snprintf(line, sizeof(line), "--url http://c:3 --config %s --monitor-pid z=3", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), VL_CONFIG_RUN);
  ASSERT_INT_EQ(c.n_urls, 1);
  ASSERT_STR_EQ(c.url, "http://c:3");
  ASSERT_STR_EQ(c.urls[0], "http://c:3");
  ASSERT_INT_EQ(c.n_headers, 1);
  ASSERT_STR_EQ(c.headers[0], "A: 1");
  ASSERT_INT_EQ(c.monitor.n_pids, 1);
  ASSERT_NEAR(c.rate, 5, 0);
  vl_config_free(&c);

  snprintf(line, sizeof(line), "--config %s --url http://c:3 --url http://d:4 --header B:2", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), VL_CONFIG_RUN);
  ASSERT_INT_EQ(c.n_urls, 2);
  ASSERT_STR_EQ(c.urls[0], "http://c:3");
  ASSERT_STR_EQ(c.urls[1], "http://d:4");
  ASSERT_INT_EQ(c.n_headers, 1);
  ASSERT_STR_EQ(c.headers[0], "B:2");
  vl_config_free(&c);
  unlink(p);
}

/* Relative paths in a file are the file's folder's, wherever the process runs; absolute ones, a
 * bare program name and the command line's own paths are as given. */
TEST_IMPL(config_file_paths) {
  vl_config_t c;
  char err[512], line[2048], dir[600], want[800];
  snprintf(dir, sizeof(dir), "%s/scen", task_tmpdir());
  write_at(dir, "ca.pem", "not checked here\n");
  const char *p =
      write_at(dir, "run.json",
               "{\"images\": \"imgs\", \"prompts\": \"p.txt\", \"output\": \"o.json\","
               " \"cacert\": \"ca.pem\", \"gnuplot\": \"gnuplot\", \"plot\": \"/abs/m.png\","
               " \"monitor-cmd\": \"c=echo 1\","
               " \"timeline\": \"../t.csv\", \"log-requests\": \"logs/r.jsonl\","
               " \"phases\": [{\"images\": \"more\"}]}");
  snprintf(line, sizeof(line), "--config %s", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), VL_CONFIG_RUN);
  snprintf(want, sizeof(want), "%s/imgs", dir);
  ASSERT_STR_EQ(c.images_dir, want);
  snprintf(want, sizeof(want), "%s/p.txt", dir);
  ASSERT_STR_EQ(c.prompts_file, want);
  snprintf(want, sizeof(want), "%s/o.json", dir);
  ASSERT_STR_EQ(c.output, want);
  snprintf(want, sizeof(want), "%s/ca.pem", dir);
  ASSERT_STR_EQ(c.cacert, want);
  snprintf(want, sizeof(want), "%s/../t.csv", dir);
  ASSERT_STR_EQ(c.timeline, want);
  snprintf(want, sizeof(want), "%s/logs/r.jsonl", dir);
  ASSERT_STR_EQ(c.log_requests, want);
  ASSERT_STR_EQ(c.gnuplot, "gnuplot");
  ASSERT_STR_EQ(c.plot, "/abs/m.png");
  ASSERT_INT_EQ(c.n_phases, 1);
  snprintf(want, sizeof(want), "%s/more", dir);
  ASSERT_STR_EQ(c.phases[0].images_dir, want);
  vl_config_free(&c);

  snprintf(line, sizeof(line), "--config %s --output here.json --images pics", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), VL_CONFIG_RUN);
  ASSERT_STR_EQ(c.output, "here.json");
  ASSERT_STR_EQ(c.images_dir, "pics");
  vl_config_free(&c);
}

/* An output that is the --config file itself is refused in one line, from the file or the command
 * line. */
TEST_IMPL(config_output_is_config) {
  vl_config_t c;
  char err[512], line[2048], dir[600];
  snprintf(dir, sizeof(dir), "%s/self", task_tmpdir());
  const char *p = write_at(dir, "exp.json", "{\"output\": \"exp.json\", \"rate\": 5}");
  snprintf(line, sizeof(line), "--config %s", p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), 2);
  ASSERT(strstr(err, "--output") && strstr(err, "is the --config file"));
  ASSERT(strchr(err, '\n') == err + strlen(err) - 1);
  vl_config_free(&c);
  p = write_at(dir, "exp.json", "{\"rate\": 5}");
  snprintf(line, sizeof(line), "--config %s --timeline %s", p, p);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), 2);
  ASSERT(strstr(err, "--timeline") && strstr(err, "is the --config file"));
  vl_config_free(&c);
  snprintf(line, sizeof(line), "--config %s --output %s/other.json", p, dir);
  ASSERT_INT_EQ(parse(&c, line, err, sizeof(err)), VL_CONFIG_RUN);
  vl_config_free(&c);
}

/* Each option is one row: a name given twice would parse, print and free twice (two rows of one
 * string field free it twice). */
TEST_IMPL(config_rows_unique) {
  vl_option_doc_t a, b;
  size_t n = 0;
  while (vl_config_option_doc(n, &a) == 0)
    n++;
  ASSERT(n > 70);
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++) {
      vl_config_option_doc(i, &a);
      vl_config_option_doc(j, &b);
      if (strcmp(a.name, b.name) == 0)
        fprintf(stderr, "option --%s has two rows\n", a.name);
      ASSERT(strcmp(a.name, b.name) != 0);
    }
}

static const task_entry_t tests[] = {
    TEST_ENTRY(config_rows_unique),      TEST_ENTRY(config_mistakes_teach),
    TEST_ENTRY(config_file_lists),       TEST_ENTRY(config_file_paths),
    TEST_ENTRY(config_output_is_config), TEST_ENTRY(config_api_native),
    TEST_ENTRY(config_file_abbreviated), TEST_ENTRY(config_file),
    TEST_ENTRY(config_defaults),         TEST_ENTRY(config_values),
    TEST_ENTRY(config_secret_masked),    TEST_ENTRY(config_help_version),
    TEST_ENTRY(config_rejects),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
