/* The smaps parser on a fixed text: every kind counted where smaps.h says, glibc's arena heaps
 * told from other anonymous mappings by their 64 MiB reservation, the same totals whatever pieces
 * the text comes in; and one read of this process's own smaps, which must see a mapping it makes.
 */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/smaps.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KB 1024ull

/* Each mapping with only the fields the parser needs and a few it must skip. Arena heaps: the one
 * at 7f0a2c000000 (on a 64 MiB boundary, 2 MiB rw-p then its ---p rest to 7f0a30000000), and two
 * merged ones at 7f0a38000000 (64 MiB + 1 MiB rw-p, the rest to 7f0a40000000). Not heaps: a rw-p
 * at 7f0a50000000 followed by a ---p that does not end on a boundary, a whole 64 MiB rw-p alone
 * at 7f0a60000000, and a rw-p off the boundary followed by ---p. */
static const char *const text =
    "55d1c0a00000-55d1c0a20000 r--p 00000000 08:01 1234                       /usr/bin/python3.11\n"
    "Size:                128 kB\n"
    "Rss:                 100 kB\n"
    "Pss:                 100 kB\n"
    "VmFlags: rd mr mw me dw sd\n"
    "55d1c1000000-55d1c3000000 rw-p 00000000 00:00 0                          [heap]\n"
    "Size:              32768 kB\n"
    "Rss:               30000 kB\n"
    "Anonymous:         30000 kB\n"
    "VmFlags: rd wr mr mw me ac sd\n"
    "7f0a2c000000-7f0a2c200000 rw-p 00000000 00:00 0 \n"
    "Size:               2048 kB\n"
    "Rss:                2000 kB\n"
    "VmFlags: rd wr mr mw me nr sd\n"
    "7f0a2c200000-7f0a30000000 ---p 00000000 00:00 0 \n"
    "Size:              63488 kB\n"
    "Rss:                   0 kB\n"
    "VmFlags: mr mw me nr sd\n"
    "7f0a38000000-7f0a3c100000 rw-p 00000000 00:00 0 \n"
    "Size:              66560 kB\n"
    "Rss:               66000 kB\n"
    "7f0a3c100000-7f0a40000000 ---p 00000000 00:00 0 \n"
    "Size:              64512 kB\n"
    "Rss:                   0 kB\n"
    "7f0a50000000-7f0a50100000 rw-p 00000000 00:00 0 \n"
    "Size:               1024 kB\n"
    "Rss:                1000 kB\n"
    "7f0a50100000-7f0a50101000 ---p 00000000 00:00 0 \n"
    "Size:                  4 kB\n"
    "Rss:                   0 kB\n"
    "7f0a60000000-7f0a64000000 rw-p 00000000 00:00 0 \n"
    "Size:              65536 kB\n"
    "Rss:               65536 kB\n"
    "7f0a64001000-7f0a64100000 rw-p 00000000 00:00 0 \n"
    "Size:               1020 kB\n"
    "Rss:                 800 kB\n"
    "7f0a64100000-7f0a68000000 ---p 00000000 00:00 0 \n"
    "Size:              64512 kB\n"
    "Rss:                   0 kB\n"
    "7f0a70000000-7f0a70800000 rw-s 00000000 00:1a 99                         /dev/shm/pool "
    "(deleted)\n"
    "Size:               8192 kB\n"
    "Rss:                4096 kB\n"
    "7f0a71000000-7f0a71100000 rw-s 00000000 00:01 77                         /memfd:cuda-ipc "
    "(deleted)\n"
    "Size:               1024 kB\n"
    "Rss:                 512 kB\n"
    "7f0a72000000-7f0a72010000 rw-s 00000000 00:01 5                          /SYSV00000000 "
    "(deleted)\n"
    "Size:                 64 kB\n"
    "Rss:                  64 kB\n"
    "7f0a73000000-7f0a73010000 rw-s 00000000 00:01 6                          /dev/zero (deleted)\n"
    "Size:                 64 kB\n"
    "Rss:                  32 kB\n"
    "7f0a80000000-7f0aa0000000 rw-s 00000000 00:05 501                        /dev/nvidia0\n"
    "Size:             524288 kB\n"
    "Rss:                   0 kB\n"
    "7f0aa0000000-7f0aa0001000 rw-s 00000000 00:05 502                        /dev/nvidiactl\n"
    "Size:                  4 kB\n"
    "Rss:                   4 kB\n"
    "7f0aa1000000-7f0aa1100000 rw-s 10000000 00:05 600                        /dev/dri/renderD128\n"
    "Size:               1024 kB\n"
    "Rss:                   0 kB\n"
    "7f0ab0000000-7f0ab4000000 r--p 00000000 08:01 4321                       /models/weights with "
    "space.safetensors\n"
    "Size:              65536 kB\n"
    "Rss:               60000 kB\n"
    "7ffd1000000-7ffd1021000 rw-p 00000000 00:00 0                          [stack]\n"
    "Size:                132 kB\n"
    "Rss:                  40 kB\n"
    "7ffd1100000-7ffd1104000 r--p 00000000 00:00 0                          [vvar]\n"
    "Size:                 16 kB\n"
    "Rss:                   0 kB\n"
    "7ffd1104000-7ffd1106000 r-xp 00000000 00:00 0                          [vdso]\n"
    "Size:                  8 kB\n"
    "Rss:                   8 kB\n"
    "7ffd1200000-7ffd1201000 rw-p 00000000 00:00 0                          [anon:scratch]\n"
    "Size:                  4 kB\n"
    "Rss:                   4 kB"; /* no newline at the end */

static void check(const vl_smaps_t *o) {
  ASSERT_UINT_EQ(o->mappings, 23);
  ASSERT_UINT_EQ(o->arenas, 3); /* one heap, and two merged */
  ASSERT_UINT_EQ(o->arena, (2000 + 66000) * KB);
  ASSERT_UINT_EQ(o->heap, (30000 + 2000 + 66000) * KB);
  /* The rw-p whose ---p does not end on a boundary, the lone 64 MiB, the off-boundary one, the
   * stack and the named anonymous mapping. */
  ASSERT_UINT_EQ(o->anon, (1000 + 65536 + 800 + 40 + 4) * KB);
  ASSERT_UINT_EQ(o->shmem, (4096 + 512 + 64 + 32) * KB);
  ASSERT_UINT_EQ(o->file, (100 + 60000) * KB);
  ASSERT_UINT_EQ(o->device, (524288 + 4 + 1024) * KB);
  ASSERT_UINT_EQ(o->device_rss, 4 * KB);
  ASSERT_UINT_EQ(o->other, 8 * KB);
}

TEST_IMPL(smaps_kinds) {
  vl_smaps_parser_t p;
  vl_smaps_t o;
  vl_smaps_begin(&p);
  vl_smaps_feed(&p, text, strlen(text));
  vl_smaps_end(&p, &o);
  check(&o);
}

TEST_IMPL(smaps_pieces) {
  /* Fed a byte at a time, then in pieces of 7: lines cut anywhere read the same. */
  size_t n = strlen(text);
  for (size_t step = 1; step <= 7; step += 6) {
    vl_smaps_parser_t p;
    vl_smaps_t o;
    vl_smaps_begin(&p);
    for (size_t i = 0; i < n; i += step)
      vl_smaps_feed(&p, text + i, i + step <= n ? step : n - i);
    vl_smaps_end(&p, &o);
    check(&o);
  }
}

TEST_IMPL(smaps_last_heap_at_the_end) {
  /* A candidate heap that is the last mapping has no rest after it: other anonymous memory. */
  static const char *const t = "7f0a2c000000-7f0a2c200000 rw-p 00000000 00:00 0 \n"
                               "Rss:                2000 kB\n";
  vl_smaps_parser_t p;
  vl_smaps_t o;
  vl_smaps_begin(&p);
  vl_smaps_feed(&p, t, strlen(t));
  vl_smaps_end(&p, &o);
  ASSERT_UINT_EQ(o.arenas, 0);
  ASSERT_UINT_EQ(o.anon, 2000 * KB);
  ASSERT_UINT_EQ(o.heap, 0);
}

TEST_IMPL(smaps_self) {
  /* 8 MiB of a shared memory file, written: this process's own smaps counts it as shmem. */
  vl_smaps_t before, after;
  ASSERT_INT_EQ(vl_smaps_read(getpid(), 0, &before), 0);
  ASSERT(before.mappings > 5);
  ASSERT(before.file > 0);
  char name[64];
  snprintf(name, sizeof(name), "/vlmload-test-smaps-%ld", (long)getpid());
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT(fd >= 0);
  shm_unlink(name);
  size_t size = 8u << 20;
  ASSERT_INT_EQ(ftruncate(fd, (off_t)size), 0);
  char *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT(m != MAP_FAILED);
  memset(m, 1, size);
  ASSERT_INT_EQ(vl_smaps_read(getpid(), 0, &after), 0);
  ASSERT(after.shmem >= before.shmem + size);
  ASSERT(after.shmem <= before.shmem + size + (1u << 20));
  munmap(m, size);
  /* No such process. */
  ASSERT_INT_EQ(vl_smaps_read(0x3ffffff0, 0, &after), VL_ENOENT);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(smaps_kinds),
    TEST_ENTRY(smaps_pieces),
    TEST_ENTRY(smaps_last_heap_at_the_end),
    TEST_ENTRY(smaps_self),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
