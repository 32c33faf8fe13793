/* The pure parts of --monitor-tree: a process's name from comm and cmdline, the descendants in a
 * process list, a fake /proc read by vl_procmem_list and vl_procmem_name, and the slots' names
 * (COMM, COMM#2, a free one taken again). */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/procmem.h"
#include "../src/memory/monitor/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

TEST_IMPL(tree_pick_name) {
  char b[64];
  /* setproctitle: comm cut at 15 bytes, the command line whole. */
  vl_procmem_pick_name("sglang::schedul\n", "sglang::scheduler_TP0\0\0\0", 24, b, sizeof(b));
  ASSERT_STR_EQ(b, "sglang::scheduler_TP0");
  /* Spaces after the title, as some setproctitle versions pad. */
  vl_procmem_pick_name("sglang::detoken", "sglang::detokenizer   ", 22, b, sizeof(b));
  ASSERT_STR_EQ(b, "sglang::detokenizer");
  /* A path whose last part begins with comm. */
  vl_procmem_pick_name("vlmmock-longnam", "/opt/bin/vlmmock-longname\0--port\0", 33, b, sizeof(b));
  ASSERT_STR_EQ(b, "vlmmock-longname");
  /* A command line that names something else: comm. */
  vl_procmem_pick_name("tree-worker\n", "/usr/bin/python3\0x.py\0", 22, b, sizeof(b));
  ASSERT_STR_EQ(b, "tree-worker");
  vl_procmem_pick_name("python3\n", "", 0, b, sizeof(b));
  ASSERT_STR_EQ(b, "python3");
  /* Bytes a column name cannot hold. */
  vl_procmem_pick_name("a b,c\"d/e\n", "", 0, b, sizeof(b));
  ASSERT_STR_EQ(b, "a_b_c_d_e");
  vl_procmem_pick_name("\n", "", 0, b, sizeof(b));
  ASSERT_STR_EQ(b, "?");
}

TEST_IMPL(tree_descendants) {
  vl_procmem_kin_t l[] = {{1, 0, 1},   {10, 1, 5}, {11, 10, 6}, {12, 10, 7},
                          {13, 11, 8}, {20, 1, 9}, {21, 20, 9}, {14, 13, 9}};
  pid_t out[8];
  int n = vl_procmem_descendants(l, 8, 10, out, 8);
  ASSERT_INT_EQ(n, 4);
  ASSERT_INT_EQ(out[0], 11);
  ASSERT_INT_EQ(out[1], 12);
  ASSERT_INT_EQ(out[2], 13);
  ASSERT_INT_EQ(out[3], 14);
  /* Past max: counted, not stored. */
  ASSERT_INT_EQ(vl_procmem_descendants(l, 8, 10, out, 2), 4);
  ASSERT_INT_EQ(vl_procmem_descendants(l, 8, 21, out, 8), 0);
  ASSERT_INT_EQ(vl_procmem_descendants(l, 8, 1, out, 8), 7);
}

static void put(const char *root, long pid, const char *file, const char *text, size_t n) {
  char p[512];
  snprintf(p, sizeof(p), "%s/%ld", root, pid);
  mkdir(p, 0700);
  snprintf(p, sizeof(p), "%s/%ld/%s", root, pid, file);
  FILE *f = fopen(p, "w");
  fwrite(text, 1, n, f);
  fclose(f);
}

#define STAT(pid, name, st, ppid, start)                                                           \
  "%d (" name ") " st " %d 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 100 10\n", pid, ppid, start

TEST_IMPL(tree_fake_proc) {
  char root[] = "/tmp/vlmload-fakeproc-XXXXXX";
  ASSERT(mkdtemp(root) != NULL);
  char s[256];
  int n = snprintf(s, sizeof(s), STAT(100, "srv (main)", "S", 1, 500));
  put(root, 100, "stat", s, (size_t)n);
  put(root, 100, "comm", "srv (main)\n", 11);
  n = snprintf(s, sizeof(s), STAT(101, "sglang::schedul", "R", 100, 600));
  put(root, 101, "stat", s, (size_t)n);
  put(root, 101, "comm", "sglang::schedul\n", 16);
  put(root, 101, "cmdline", "sglang::scheduler_TP1\0", 22);
  n = snprintf(s, sizeof(s), STAT(102, "dead", "Z", 100, 700)); /* a zombie: left out */
  put(root, 102, "stat", s, (size_t)n);
  n = snprintf(s, sizeof(s), STAT(103, "grand", "S", 101, 800));
  put(root, 103, "stat", s, (size_t)n);
  put(root, 0, "stat", "junk", 4); /* "0" is no process */
  char p[512];
  snprintf(p, sizeof(p), "%s/self", root);
  mkdir(p, 0700);
  vl_procmem_kin_t *kin = NULL;
  size_t cap = 0;
  int k = vl_procmem_list(root, &kin, &cap);
  ASSERT_INT_EQ(k, 3);
  pid_t out[8];
  ASSERT_INT_EQ(vl_procmem_descendants(kin, k, 100, out, 8), 2);
  for (int i = 0; i < k; i++) {
    if (kin[i].pid == 103) {
      ASSERT_INT_EQ(kin[i].ppid, 101);
      ASSERT(kin[i].start_time == 800);
    }
  }
  free(kin);
  char b[64];
  ASSERT_INT_EQ(vl_procmem_name(root, 101, b, sizeof(b)), 0);
  ASSERT_STR_EQ(b, "sglang::scheduler_TP1");
  ASSERT_INT_EQ(vl_procmem_name(root, 100, b, sizeof(b)), 0);
  ASSERT_STR_EQ(b, "srv__main_");
  ASSERT_INT_EQ(vl_procmem_name(root, 999, b, sizeof(b)), VL_ENOENT);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
  ASSERT_INT_EQ(system(cmd), 0);
}

TEST_IMPL(tree_slot_names) {
  vl__tree_t *t = calloc(1, sizeof(*t));
  int a = vl__tree_slot(t, "worker");
  t->slots[a].holder = 1;
  int b = vl__tree_slot(t, "worker");
  t->slots[b].holder = 2;
  int c = vl__tree_slot(t, "other");
  t->slots[c].holder = 3;
  ASSERT_STR_EQ(t->slots[a].name, "worker");
  ASSERT_STR_EQ(t->slots[b].name, "worker#2");
  ASSERT_STR_EQ(t->slots[c].name, "other");
  /* The first one exits: a new process of that name continues its series. */
  t->slots[a].holder = -1;
  ASSERT_INT_EQ(vl__tree_slot(t, "worker"), a);
  t->slots[a].holder = 4;
  int d = vl__tree_slot(t, "worker");
  ASSERT_STR_EQ(t->slots[d].name, "worker#3");
  t->slots[d].holder = 5;
  for (int i = t->n_slots; i < VL__TREE_MAX; i++)
    t->slots[vl__tree_slot(t, "x")].holder = 6;
  ASSERT_INT_EQ(vl__tree_slot(t, "y"), -1);
  free(t);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(tree_pick_name),
    TEST_ENTRY(tree_descendants),
    TEST_ENTRY(tree_fake_proc),
    TEST_ENTRY(tree_slot_names),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
