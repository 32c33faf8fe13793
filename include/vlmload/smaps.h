/* A process's memory by kind, from /proc/PID/smaps: one pass over its mappings, each counted in
 * the kind its name and permissions say. All figures in bytes.
 *
 * Kinds (a mapping's path is the sixth field of its header line; "" for an anonymous one):
 *   heap    "[heap]" (the main arena, brk) and glibc's other arenas' heaps (below): Rss;
 *   anon    every other anonymous mapping: "", "[stack]", "[anon:NAME]": Rss;
 *   shmem   shared memory: "/dev/shm/...", "/memfd:...", "/SYSV...", "/dev/zero" (a shared
 *           anonymous mapping), "[anon_shmem:NAME]": Rss;
 *   file    every other path (libraries, models, mapped data): Rss;
 *   device  "/dev/nvidia...", "/dev/dri/...", "/dev/kfd", "/dmabuf:...": Size, the bytes mapped,
 *           because the kernel counts no resident page in most device mappings (VM_PFNMAP), so
 *           their Rss reads 0 however much they map; their Rss is kept apart (device_rss);
 *   other   the kernel's own ("[vdso]", "[vvar]", "[vsyscall]", "anon_inode:...").
 *
 * An arena heap. glibc (malloc/arena.c) makes each arena other than the main one from heaps of
 * HEAP_MAX_SIZE (64 MiB on 64-bit hosts) reserved PROT_NONE on a HEAP_MAX_SIZE boundary; the part
 * in use is made read-write, so the reservation shows as an anonymous rw-p mapping that starts on
 * the boundary followed at once by an anonymous ---p mapping (the rest) that ends on one. That
 * pair is the rule; contiguous heaps of one arena merge into one rw-p part spanning several
 * boundaries, each counted as a heap. What the rule misses: a heap grown to its whole 64 MiB
 * with no heap right after it (it has no ---p rest), counted as anon. What it could take wrongly:
 * another rw-p mapping on a 64 MiB boundary followed by a PROT_NONE mapping ending on one, which
 * nothing else in glibc or the kernel makes. `arenas` counts the heaps (the main arena, [heap],
 * not among them); a thread that mallocs gets an arena of its own up to glibc's limit of 8 per
 * core, so the count rises with threads.
 *
 * The parser is fed the text in pieces of any size and keeps no allocation: a line longer than
 * its buffer is cut (the cut path still tells the kind by its start).
 */
#ifndef VLMLOAD_SMAPS_H
#define VLMLOAD_SMAPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define VL_SMAPS_HEAP_MAX (64ull << 20) /* glibc's HEAP_MAX_SIZE on 64-bit hosts */

typedef struct vl_smaps_s {
  uint64_t heap;       /* Rss of [heap] and the arena heaps */
  uint64_t arena;      /* Rss of the arena heaps alone (part of heap) */
  uint64_t anon;       /* Rss of the other anonymous mappings */
  uint64_t shmem;      /* Rss of shared memory */
  uint64_t file;       /* Rss of file-backed mappings */
  uint64_t device;     /* Size of device mappings */
  uint64_t device_rss; /* Rss of device mappings */
  uint64_t other;      /* Rss of the kernel's own mappings */
  unsigned arenas;     /* arena heaps */
  unsigned mappings;   /* mappings read */
} vl_smaps_t;

/* The state of one pass: the mapping being read and an anonymous rw-p one on a heap boundary
 * waiting to see whether a ---p rest follows it. */
typedef struct vl_smaps_parser_s {
  vl_smaps_t out;
  char line[512];
  size_t len; /* bytes of the line so far (at most sizeof(line) - 1 kept) */
  int have;   /* a mapping is being read */
  uint64_t start, end, rss;
  int kind; /* of the mapping being read */
  int rw, none, anon;
  int pending; /* a candidate heap waits for the next header */
  uint64_t p_start, p_end, p_rss;
} vl_smaps_parser_t;

void vl_smaps_begin(vl_smaps_parser_t *p);
/* Feeds the next n bytes of the text. */
void vl_smaps_feed(vl_smaps_parser_t *p, const char *buf, size_t n);
/* Ends the pass (a last line without a newline counts) and gives the totals. */
void vl_smaps_end(vl_smaps_parser_t *p, vl_smaps_t *out);

/* Reads /proc/PID/smaps. expect_start, when nonzero, is the start time the process must have (as
 * vl_procmem_t.start_time). The kernel walks the whole address space: this costs time in
 * proportion to the mappings (bench/smaps-cost.c measures it); call it off the loop thread.
 * Returns 0, VL_ENOENT when the process is gone (or another holds its PID), or VL_EIO when smaps
 * cannot be read (another user's process). */
int vl_smaps_read(pid_t pid, uint64_t expect_start, vl_smaps_t *out);

#endif
