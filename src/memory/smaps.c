/* A process's memory by kind from /proc/PID/smaps (smaps.h says how each mapping is counted). */
#include "vlmload/smaps.h"
#include "vlmload/common.h"
#include "vlmload/procmem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { K_ANON, K_HEAP, K_SHMEM, K_FILE, K_DEVICE, K_OTHER };

static int starts(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The kind of a mapping by its path ("" for an anonymous one). */
static int kind_of(const char *path) {
  if (!*path || starts(path, "[stack") || starts(path, "[anon:"))
    return K_ANON;
  if (strcmp(path, "[heap]") == 0)
    return K_HEAP;
  if (starts(path, "[anon_shmem:") || starts(path, "/dev/shm/") || starts(path, "/memfd:") ||
      starts(path, "/SYSV") || starts(path, "/dev/zero"))
    return K_SHMEM;
  if (starts(path, "/dev/nvidia") || starts(path, "/dev/dri/") || starts(path, "/dev/kfd") ||
      starts(path, "/dmabuf:"))
    return K_DEVICE;
  if (path[0] == '/')
    return K_FILE;
  return K_OTHER;
}

/* Counts a finished mapping of kind k, rss resident bytes and size mapped. */
static void count(vl_smaps_t *o, int k, uint64_t rss, uint64_t size) {
  switch (k) {
  case K_ANON:
    o->anon += rss;
    break;
  case K_HEAP:
    o->heap += rss;
    break;
  case K_SHMEM:
    o->shmem += rss;
    break;
  case K_FILE:
    o->file += rss;
    break;
  case K_DEVICE:
    o->device += size;
    o->device_rss += rss;
    break;
  default:
    o->other += rss;
    break;
  }
}

/* Settles the waiting candidate against the mapping that follows it (none at the end). */
static void settle(vl_smaps_parser_t *p, int next, uint64_t n_start, uint64_t n_end, int n_none,
                   int n_anon) {
  if (!p->pending)
    return;
  p->pending = 0;
  if (next && n_anon && n_none && n_start == p->p_end && n_end % VL_SMAPS_HEAP_MAX == 0) {
    p->out.heap += p->p_rss;
    p->out.arena += p->p_rss;
    p->out.arenas += (unsigned)((n_end - p->p_start) / VL_SMAPS_HEAP_MAX);
  } else {
    p->out.anon += p->p_rss;
  }
}

/* The mapping being read is complete: counted, or kept as a candidate heap. */
static void finish(vl_smaps_parser_t *p) {
  if (!p->have)
    return;
  p->have = 0;
  if (p->kind == K_ANON && p->anon && p->rw && p->start % VL_SMAPS_HEAP_MAX == 0) {
    p->pending = 1;
    p->p_start = p->start;
    p->p_end = p->end;
    p->p_rss = p->rss;
    return;
  }
  count(&p->out, p->kind, p->rss, p->end - p->start);
}

static uint64_t hex(const char **s) {
  uint64_t v = 0;
  for (;; (*s)++) {
    char c = **s;
    if (c >= '0' && c <= '9')
      v = v * 16 + (uint64_t)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = v * 16 + (uint64_t)(c - 'a' + 10);
    else
      return v;
  }
}

/* Skips one field and the spaces after it. */
static const char *next_field(const char *s) {
  while (*s && *s != ' ')
    s++;
  while (*s == ' ')
    s++;
  return s;
}

/* A header: "START-END PERMS OFFSET DEV INODE [PATH]". */
static void header(vl_smaps_parser_t *p, const char *s) {
  uint64_t start = hex(&s);
  if (*s != '-')
    return;
  s++;
  uint64_t end = hex(&s);
  while (*s == ' ')
    s++;
  const char *perms = s;
  const char *f = next_field(s); /* offset */
  f = next_field(f);             /* dev */
  f = next_field(f);             /* inode */
  uint64_t inode = 0;
  for (const char *q = f; *q >= '0' && *q <= '9'; q++)
    inode = inode * 10 + (uint64_t)(*q - '0');
  const char *path = next_field(f);
  finish(p);
  int anon = *path == '\0' && inode == 0;
  int none = strncmp(perms, "---", 3) == 0;
  settle(p, 1, start, end, none, anon);
  p->have = 1;
  p->start = start;
  p->end = end > start ? end : start;
  p->rss = 0;
  p->kind = kind_of(path);
  p->rw = perms[0] == 'r' && perms[1] == 'w' && perms[3] == 'p';
  p->none = none;
  p->anon = anon;
  p->out.mappings++;
}

static void line(vl_smaps_parser_t *p) {
  const char *s = p->line;
  char c = s[0];
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
    header(p, s);
    return;
  }
  if (p->have && strncmp(s, "Rss:", 4) == 0) {
    uint64_t kb = 0;
    for (s += 4; *s == ' ' || *s == '\t'; s++)
      ;
    for (; *s >= '0' && *s <= '9'; s++)
      kb = kb * 10 + (uint64_t)(*s - '0');
    p->rss = kb * 1024;
  }
}

void vl_smaps_begin(vl_smaps_parser_t *p) {
  memset(p, 0, sizeof(*p));
}

void vl_smaps_feed(vl_smaps_parser_t *p, const char *buf, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (buf[i] == '\n') {
      p->line[p->len] = '\0';
      line(p);
      p->len = 0;
    } else if (p->len < sizeof(p->line) - 1) {
      p->line[p->len++] = buf[i];
    }
  }
}

void vl_smaps_end(vl_smaps_parser_t *p, vl_smaps_t *out) {
  if (p->len > 0) {
    p->line[p->len] = '\0';
    line(p);
    p->len = 0;
  }
  finish(p);
  settle(p, 0, 0, 0, 0, 0);
  *out = p->out;
}

int vl_smaps_read(pid_t pid, uint64_t expect_start, vl_smaps_t *out) {
  char path[48], buf[65536];
  memset(out, 0, sizeof(*out));
  if (expect_start) {
    uint64_t start = 0;
    if (vl_procmem_start_time(pid, &start) != 0 || start != expect_start)
      return VL_ENOENT;
  }
  snprintf(path, sizeof(path), "/proc/%ld/smaps", (long)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT || errno == ESRCH ? VL_ENOENT : VL_EIO;
  vl_smaps_parser_t p;
  vl_smaps_begin(&p);
  int rc = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = errno == ESRCH ? VL_ENOENT : VL_EIO;
      break;
    }
    if (n == 0)
      break;
    vl_smaps_feed(&p, buf, (size_t)n);
  }
  close(fd);
  if (rc == 0 && p.out.mappings == 0)
    rc = VL_ENOENT; /* a zombie, or a kernel thread: no address space */
  if (rc == 0)
    vl_smaps_end(&p, out);
  return rc;
}
