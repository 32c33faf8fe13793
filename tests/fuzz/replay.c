/* Replays inputs through a fuzz target's entry function, without libFuzzer: every regular file
 * under each directory given (recursively), or each file given. A broken invariant or a sanitizer
 * report aborts, failing the test. A directory that does not exist is skipped (a target may have
 * no regressions yet); one that holds no input at all across the arguments is an error, so that a
 * misspelt path cannot pass unnoticed. */
#include "fuzz.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

static size_t replayed;

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: %s: cannot open\n", path);
    return -1;
  }
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0, n;
  uint8_t chunk[65536];
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    if (len + n > cap) {
      cap = (len + n) * 2;
      uint8_t *grown = realloc(buf, cap);
      if (!grown)
        abort();
      buf = grown;
    }
    memcpy(buf + len, chunk, n);
    len += n;
  }
  fclose(f);
  /* An exact-size copy, so that reads past the input land outside the allocation. */
  uint8_t *exact = malloc(len ? len : 1);
  if (!exact)
    abort();
  if (len)
    memcpy(exact, buf, len);
  free(buf);
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  replayed++;
  return 0;
}

static int replay_path(const char *path, int depth) {
  struct stat st;
  if (stat(path, &st) != 0)
    return 0;
  if (S_ISREG(st.st_mode))
    return replay_file(path);
  if (!S_ISDIR(st.st_mode) || depth > 8)
    return 0;
  struct dirent **names;
  int n = scandir(path, &names, NULL, alphasort);
  if (n < 0)
    return -1;
  int rc = 0;
  for (int i = 0; i < n; i++) {
    const char *name = names[i]->d_name;
    if (rc == 0 && name[0] != '.') {
      size_t len = strlen(path) + strlen(name) + 2;
      char *sub = malloc(len);
      if (!sub)
        abort();
      snprintf(sub, len, "%s/%s", path, name);
      rc = replay_path(sub, depth + 1);
      free(sub);
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (replay_path(argv[i], 0) != 0)
      return 1;
  if (replayed == 0) {
    fprintf(stderr, "replay: no input found\n");
    return 1;
  }
  fprintf(stderr, "replay: %zu inputs, no failure\n", replayed);
  return 0;
}
