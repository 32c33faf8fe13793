/* The command line: vl_config_parse on an argv cut from the input, with its output and errors
 * going to memory streams. Every outcome is a run with a consistent configuration, a clean exit
 * after --help or --version, or exit status 2 with exactly one line naming the problem; parsing
 * the same command line twice gives the same result; and the API key (from the environment here)
 * never shows in anything printed or in the effective-configuration JSON.
 *
 * Input: arguments separated by '\n', then optionally a NUL and the text of a --config file: every
 * --config on the command line is pointed at that file (or at a missing one when there is none),
 * so that the parser reads nothing else from the file system. */
#include "fuzz.h"

#include "vlmload/common.h"
#include "vlmload/config.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ARGS 64
#define SECRET   "sk-fuzz-4d1f8a26e0c9"

static char cfg_path[96];

/* The --config file lives only for the call that reads it (removed at its end), in memory where
 * there is a tmpfs. */
static void setup_once(void) {
  if (cfg_path[0])
    return;
  struct stat st;
  const char *dir = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
  snprintf(cfg_path, sizeof(cfg_path), "%s/vlmload-fuzz-config-%ld.json", dir, (long)getpid());
  setenv("OPENAI_API_KEY", SECRET, 1);
  setenv("JOB_COMPLETION_INDEX", "2", 1);
}

typedef struct {
  int rc;
  char *out, *err, *json;
  size_t out_len, err_len;
} result_t;

static int count_char(const char *s, size_t n, char c) {
  int k = 0;
  for (size_t i = 0; i < n; i++)
    k += s[i] == c;
  return k;
}

/* Checks what holds between the fields of a configuration that parsed. */
static void check_config(const vl_config_t *c) {
  FUZZ_CHECK(c->n_urls >= 1 && c->url == c->urls[0]);
  FUZZ_CHECK(c->shard_n >= 1 && c->shard_i < c->shard_n);
  FUZZ_CHECK(c->endpoint && c->endpoint[0] == '/');
  FUZZ_CHECK(c->concurrency >= 1);
  FUZZ_CHECK(c->requests || c->duration_us);
  FUZZ_CHECK(!c->requests || c->warmup < c->requests);
  FUZZ_CHECK(c->connect_timeout_us <= c->timeout_us);
  FUZZ_CHECK(c->image_ratio >= 0 && c->image_ratio <= 1);
  FUZZ_CHECK(!c->images_on || c->image_ratio > 0);
  FUZZ_CHECK(c->images_lo >= 1 && c->images_lo <= c->images_hi);
  FUZZ_CHECK(c->rate == 0 || c->rate >= 1e-3);
  FUZZ_CHECK(c->max_response >= 1024);
  FUZZ_CHECK(c->jpeg_quality >= 1 && c->jpeg_quality <= 100);
  FUZZ_CHECK(!c->quiet || c->progress == 0);
  FUZZ_CHECK(c->api_key != NULL); /* from the environment, unless given */
}

static void parse(int argc, char **argv, result_t *r) {
  vl_config_t c;
  FILE *out = open_memstream(&r->out, &r->out_len);
  FILE *err = open_memstream(&r->err, &r->err_len);
  FUZZ_CHECK(out && err);
  r->rc = vl_config_parse(&c, argc, argv, out, err);
  fclose(out);
  fclose(err);
  r->json = NULL;
  FUZZ_CHECK(r->rc == VL_CONFIG_RUN || r->rc == 0 || r->rc == 2);
  if (r->rc == VL_CONFIG_RUN) {
    check_config(&c);
    cJSON *j = vl_config_json(&c);
    FUZZ_CHECK(j != NULL);
    r->json = cJSON_PrintUnformatted(j);
    FUZZ_CHECK(r->json != NULL);
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(j, "api_key");
    FUZZ_CHECK(cJSON_IsString(key) && strcmp(key->valuestring, "***") == 0);
    cJSON_Delete(j);
  }
  vl_config_free(&c);
}

static void result_free(result_t *r) {
  free(r->out);
  free(r->err);
  free(r->json);
}

/* Copies the arguments (each its own allocation) with every --config pointed at cfg_path. */
static char **make_argv(char **args, int n) {
  char **argv = calloc((size_t)n + 2, sizeof(char *));
  FUZZ_CHECK(argv != NULL);
  argv[0] = strdup("vlmload");
  for (int i = 0; i < n; i++) {
    if (strncmp(args[i], "--config=", 9) == 0) {
      size_t len = 9 + strlen(cfg_path) + 1;
      argv[i + 1] = malloc(len);
      snprintf(argv[i + 1], len, "--config=%s", cfg_path);
    } else if (i > 0 && strcmp(args[i - 1], "--config") == 0) {
      argv[i + 1] = strdup(cfg_path);
    } else {
      argv[i + 1] = strdup(args[i]);
    }
    FUZZ_CHECK(argv[i + 1] != NULL);
  }
  return argv;
}

static void free_argv(char **argv, int n) {
  for (int i = 0; i < n + 1; i++)
    free(argv[i]);
  free(argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 16384)
    return 0;
  setup_once();
  const uint8_t *nul = memchr(data, 0, size);
  size_t args_len = nul ? (size_t)(nul - data) : size;
  if (nul) {
    FILE *f = fopen(cfg_path, "wb");
    FUZZ_CHECK(f != NULL);
    fwrite(nul + 1, 1, size - args_len - 1, f);
    FUZZ_CHECK(fclose(f) == 0);
  } else {
    unlink(cfg_path);
  }

  char *text = fuzz_dup(data, args_len);
  char *args[MAX_ARGS];
  int n = 0;
  for (char *p = text; n < MAX_ARGS;) {
    args[n++] = p;
    char *nl = strchr(p, '\n');
    if (!nl)
      break;
    *nl = '\0';
    p = nl + 1;
  }
  if (n == 1 && args[0][0] == '\0')
    n = 0;

  result_t first, second;
  char **argv = make_argv(args, n);
  parse(n + 1, argv, &first);
  free_argv(argv, n);
  argv = make_argv(args, n);
  parse(n + 1, argv, &second);
  free_argv(argv, n);

  /* Parsing is a function of the command line alone. */
  FUZZ_CHECK(first.rc == second.rc);
  FUZZ_CHECK(first.out_len == second.out_len && memcmp(first.out, second.out, first.out_len) == 0);
  FUZZ_CHECK(first.err_len == second.err_len && memcmp(first.err, second.err, first.err_len) == 0);
  FUZZ_CHECK((first.json == NULL) == (second.json == NULL));
  FUZZ_CHECK(!first.json || strcmp(first.json, second.json) == 0);

  if (first.rc == 2) {
    /* One line, naming vlmload. */
    FUZZ_CHECK(first.err_len > 9 && memcmp(first.err, "vlmload: ", 9) == 0);
    FUZZ_CHECK(first.err[first.err_len - 1] == '\n');
    FUZZ_CHECK(count_char(first.err, first.err_len, '\n') == 1);
    FUZZ_CHECK(first.out_len == 0);
  } else if (first.rc == 0) {
    FUZZ_CHECK(first.out_len > 0 && first.err_len == 0);
  } else {
    FUZZ_CHECK(first.out_len == 0 && first.err_len == 0);
  }

  /* The key never leaks (unless the input itself spells it out somewhere). */
  if (!memmem(data, size, SECRET, strlen(SECRET))) {
    FUZZ_CHECK(!memmem(first.out, first.out_len, SECRET, strlen(SECRET)));
    FUZZ_CHECK(!memmem(first.err, first.err_len, SECRET, strlen(SECRET)));
    FUZZ_CHECK(!first.json || !strstr(first.json, SECRET));
  }
  result_free(&first);
  result_free(&second);
  free(text);
  unlink(cfg_path);
  return 0;
}
