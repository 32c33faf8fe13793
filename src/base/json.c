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
  char why[128];
  cJSON *o = vl_json_read_file(path, why, sizeof(why));
  if (o || strncmp(why, "not JSON", 8) == 0)
    errno = 0;
  return o;
}

static int blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* "line L, column C" of byte offset end in text, both from 1, the column in UTF-8 characters. */
static void where(const char *text, size_t end, char *buf, size_t buflen) {
  unsigned long line = 1, col = 1;
  for (size_t i = 0; i < end; i++) {
    if (text[i] == '\n') {
      line++;
      col = 1;
    } else if (((unsigned char)text[i] & 0xc0) != 0x80) { /* not a continuation byte */
      col++;
    }
  }
  snprintf(buf, buflen, "line %lu, column %lu", line, col);
}

cJSON *vl_json_parse_text(const char *text, size_t len, char *why, size_t whylen) {
  const char *stop = NULL;
  cJSON *o = cJSON_ParseWithLengthOpts(text, len, &stop, 0);
  size_t end;
  if (o) {
    /* cJSON stops at the end of the value; anything but white space after it is not JSON. */
    end = stop && stop >= text && stop <= text + len ? (size_t)(stop - text) : len;
    while (end < len && blank(text[end]))
      end++;
    if (end == len)
      return o;
    cJSON_Delete(o);
  } else {
    const char *at = cJSON_GetErrorPtr();
    end = at && at >= text && at <= text + len ? (size_t)(at - text) : len;
    /* cJSON points one past a key that does not start with '"' (an unquoted key, a comma
     * before '}'): the error is that character, where a key was due (after '{' or ','). */
    if (end > 0 && !blank(text[end - 1]) && text[end - 1] != '"') {
      size_t q = end - 1;
      while (q > 0 && blank(text[q - 1]))
        q--;
      if (q > 0 && (text[q - 1] == '{' || text[q - 1] == ','))
        end--;
    }
  }
  char at[64];
  where(text, end, at, sizeof(at));
  snprintf(why, whylen, "not JSON: %s", at);
  return NULL;
}

cJSON *vl_json_read_file(const char *path, char *why, size_t whylen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(why, whylen, "%s", strerror(errno));
    return NULL;
  }
  char *text = NULL, chunk[1 << 16];
  size_t len = 0, n;
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    text = vl_xrealloc(text, len + n);
    memcpy(text + len, chunk, n);
    len += n;
  }
  int bad = ferror(f);
  fclose(f);
  cJSON *o = NULL;
  if (bad)
    snprintf(why, whylen, "cannot read it");
  else
    o = vl_json_parse_text(text ? text : "", len, why, whylen);
  free(text);
  return o;
}
