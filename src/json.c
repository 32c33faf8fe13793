#include "vlmload/json.h"
#include "vlmload/common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <stdlib.h>

/* Large enough for any sane reply's tree; a larger one spills to malloc. */
#define ARENA_BYTES ((size_t)64 * 1024)

static _Alignas(16) char arena[ARENA_BYTES];
static size_t arena_used;
static size_t spilled; /* nodes of the current tree allocated with malloc */

static void *arena_alloc(size_t n) {
  size_t need = (n + 15) & ~(size_t)15;
  if (need >= n && need <= ARENA_BYTES - arena_used) {
    void *p = arena + arena_used;
    arena_used += need;
    return p;
  }
  spilled++;
  return malloc(n);
}

static int in_arena(const void *p) {
  uintptr_t a = (uintptr_t)p, lo = (uintptr_t)arena;
  return a >= lo && a < lo + ARENA_BYTES;
}

static void arena_free(void *p) {
  if (p && !in_arena(p))
    free(p);
}

cJSON *vl_json_parse(const char *text, size_t len) {
  cJSON_Hooks hooks = {arena_alloc, arena_free};
  arena_used = 0;
  spilled = 0;
  cJSON_InitHooks(&hooks);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  cJSON_InitHooks(NULL);
  /* cJSON stops at the end of the value; anything but white space after it is not JSON. */
  while (root && end < text + len) {
    char c = *end++;
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      vl_json_free(root);
      return NULL;
    }
  }
  return root;
}

void vl_json_free(cJSON *root) {
  if (root && spilled) {
    /* Free the spilled nodes; arena nodes are skipped by address. */
    cJSON_Hooks hooks = {arena_alloc, arena_free};
    cJSON_InitHooks(&hooks);
    cJSON_Delete(root);
    cJSON_InitHooks(NULL);
  }
  arena_used = 0;
  spilled = 0;
}

cJSON *vl_json_load_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *text = NULL, chunk[1 << 16];
  size_t len = 0, n;
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    text = vl_xrealloc(text, len + n);
    memcpy(text + len, chunk, n);
    len += n;
  }
  fclose(f);
  cJSON *o = cJSON_ParseWithLength(text ? text : "", len);
  free(text);
  errno = 0;
  return o;
}
