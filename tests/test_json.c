/* The reply parser's arena: trees that fit and trees that spill to malloc read the same as
 * cJSON's own, one parse after another, and cJSON's allocator is its own again between parses. */
#include "vlmload/common.h"
#include "vlmload/json.h"

#include "task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reply with n choices, each with its own text: about 120 bytes of tree per choice. */
static char *reply(int n, size_t *len) {
  size_t cap = 64 + (size_t)n * 96, at = 0;
  char *s = vl_xmalloc(cap);
  at += (size_t)snprintf(s + at, cap - at, "{\"choices\":[");
  for (int i = 0; i < n; i++)
    at += (size_t)snprintf(s + at, cap - at, "%s{\"index\":%d,\"text\":\"choice %d\"}",
                           i ? "," : "", i, i);
  at += (size_t)snprintf(s + at, cap - at, "],\"usage\":{\"completion_tokens\":%d}}", n);
  *len = at;
  return s;
}

static void check(int n) {
  size_t len;
  char *s = reply(n, &len);
  cJSON *root = vl_json_parse(s, len);
  ASSERT(cJSON_IsObject(root));
  const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
  ASSERT_INT_EQ(cJSON_GetArraySize(choices), n);
  char want[32];
  snprintf(want, sizeof(want), "choice %d", n - 1);
  ASSERT_STR_EQ(cJSON_GetArrayItem(choices, n - 1)->child->next->valuestring, want);
  const cJSON *usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
  ASSERT_INT_EQ(cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens")->valueint, n);
  vl_json_free(root);
  free(s);
}

TEST_IMPL(json_small_and_spilled) {
  for (int round = 0; round < 3; round++) {
    check(3);    /* fits in the arena */
    check(4000); /* about 500 KiB of tree: spills to malloc, freed by vl_json_free */
  }
  ASSERT(vl_json_parse("{\"a\":", 5) == NULL);
  vl_json_free(NULL);
  /* Outside vl_json_parse, cJSON allocates with malloc: a tree made now outlives the next parse. */
  cJSON *kept = cJSON_CreateString("kept");
  check(10);
  ASSERT_STR_EQ(kept->valuestring, "kept");
  cJSON_Delete(kept);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(json_small_and_spilled),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
