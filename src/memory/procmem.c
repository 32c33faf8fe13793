#include "vlmload/procmem.h"
#include "vlmload/common.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads a whole small file under dirfd into buf (NUL-terminated, cut at cap - 1 bytes). Returns
 * the length or a negated errno. */
static ssize_t read_at(int dirfd, const char *name, char *buf, size_t cap) {
  int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t len = 0;
  while (len + 1 < cap) {
    ssize_t n = read(fd, buf + len, cap - 1 - len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int e = errno;
      close(fd);
      return -e;
    }
    if (n == 0)
      break;
    len += (size_t)n;
  }
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

static int open_pid_dir(pid_t pid) {
  char path[32];
  if (pid <= 0)
    return -ENOENT;
  snprintf(path, sizeof(path), "/proc/%ld", (long)pid);
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

/* A process that is gone reads as ENOENT or ESRCH, depending on where it went. */
static int gone(int neg_errno) {
  return neg_errno == -ENOENT || neg_errno == -ESRCH;
}

/* Parses the state (field 3), the parent (field 4, when ppid is not NULL) and the start time
 * (field 22) of a stat line. The command name (field 2) is in parentheses and may hold spaces and
 * parentheses itself, so fields count from the last ')'. */
static int parse_stat(const char *buf, char *state, pid_t *ppid, uint64_t *start) {
  const char *p = strrchr(buf, ')');
  if (!p)
    return VL_EIO;
  p++;
  for (int field = 3; field <= 22; field++) {
    while (*p == ' ')
      p++;
    if (*p == '\0')
      return VL_EIO;
    if (field == 3)
      *state = *p;
    if ((field == 4 && ppid) || field == 22) {
      uint64_t v = 0;
      if (*p < '0' || *p > '9')
        return VL_EIO;
      while (*p >= '0' && *p <= '9' && v < (1ull << 62))
        v = v * 10 + (uint64_t)(*p++ - '0');
      if (field == 22) {
        *start = v;
        return 0;
      }
      *ppid = (pid_t)v;
    }
    while (*p && *p != ' ')
      p++;
  }
  return VL_EIO;
}

static int read_stat(int dirfd, uint64_t *start) {
  char buf[1024];
  ssize_t n = read_at(dirfd, "stat", buf, sizeof(buf));
  if (n < 0)
    return gone((int)n) ? VL_ENOENT : (int)n;
  char state = 0;
  int rc = parse_stat(buf, &state, NULL, start);
  if (rc)
    return rc;
  if (state == 'Z' || state == 'X')
    return VL_ENOENT; /* exited, not yet reaped: it holds no memory */
  return 0;
}

/* Finds "key" at the start of a line and reads its value in kB, as bytes. Returns 0 or -1. */
static int field_kb(const char *buf, const char *key, uint64_t *out) {
  size_t kl = strlen(key);
  const char *p = buf;
  while (p) {
    if (strncmp(p, key, kl) == 0) {
      p += kl;
      while (*p == ' ' || *p == '\t')
        p++;
      if (*p < '0' || *p > '9')
        return -1;
      uint64_t v = 0;
      while (*p >= '0' && *p <= '9')
        v = v * 10 + (uint64_t)(*p++ - '0');
      *out = v * 1024;
      return 0;
    }
    p = strchr(p, '\n');
    if (p)
      p++;
  }
  return -1;
}

int vl_procmem_start_time(pid_t pid, uint64_t *start) {
  int dirfd = open_pid_dir(pid);
  if (dirfd < 0)
    return gone(dirfd) ? VL_ENOENT : dirfd;
  int rc = read_stat(dirfd, start);
  close(dirfd);
  return rc;
}

int vl_procmem_read(pid_t pid, uint64_t expect_start, unsigned flags, vl_procmem_t *out) {
  char buf[16384];
  memset(out, 0, sizeof(*out));
  int dirfd = open_pid_dir(pid);
  if (dirfd < 0)
    return gone(dirfd) ? VL_ENOENT : dirfd;
  int rc = read_stat(dirfd, &out->start_time);
  if (rc)
    goto done;
  if (expect_start && out->start_time != expect_start) {
    rc = VL_ENOENT; /* the PID now names another process */
    goto done;
  }
  ssize_t n = read_at(dirfd, "status", buf, sizeof(buf));
  if (n < 0) {
    rc = gone((int)n) ? VL_ENOENT : (int)n;
    goto done;
  }
  /* A kernel thread has no Vm* lines: no user memory. */
  field_kb(buf, "VmRSS:", &out->rss_bytes);
  field_kb(buf, "VmHWM:", &out->hwm_bytes);
  out->has_kinds = field_kb(buf, "RssAnon:", &out->anon_bytes) == 0 &&
                   field_kb(buf, "RssFile:", &out->file_bytes) == 0 &&
                   field_kb(buf, "RssShmem:", &out->shmem_bytes) == 0;
  if (flags & VL_PROCMEM_PSS) {
    n = read_at(dirfd, "smaps_rollup", buf, sizeof(buf));
    if (n >= 0 && field_kb(buf, "Pss:", &out->pss_bytes) == 0)
      out->has_pss = 1;
    else if (n == -ESRCH)
      rc = VL_ENOENT;
    else if (n < 0 && n != -EINTR && n != -EMFILE && n != -ENFILE)
      out->pss_denied = 1; /* ENOENT before Linux 4.14; EACCES for another user's process */
  }

done:
  close(dirfd);
  return rc;
}

/* The parent of pid, from its stat. Returns 0 or a VL_E* code. */
static int read_ppid(pid_t pid, pid_t *ppid) {
  char path[48], buf[1024];
  snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
  if (read_at(AT_FDCWD, path, buf, sizeof(buf)) <= 0)
    return VL_ENOENT;
  char state;
  uint64_t start;
  return parse_stat(buf, &state, ppid, &start);
}

#define MAX_ANCESTORS 64

/* What a search leaves out: this process, the processes it descends from (the shell, timeout,
 * sudo or container entry point that started it hold its arguments, a pattern among them, in
 * their command lines), and every other process of its executable (its --workers). */
typedef struct {
  pid_t self;
  pid_t up[MAX_ANCESTORS];
  int n_up;
  int has_exe;
  dev_t dev;
  ino_t ino;
} family_t;

static void family_init(family_t *f) {
  memset(f, 0, sizeof(*f));
  f->self = getpid();
  pid_t p = getppid();
  while (p > 0 && f->n_up < MAX_ANCESTORS) {
    int seen = 0;
    for (int i = 0; i < f->n_up && !seen; i++)
      seen = f->up[i] == p;
    if (seen)
      break;
    f->up[f->n_up++] = p;
    if (read_ppid(p, &p) != 0)
      break;
  }
  struct stat st;
  if (stat("/proc/self/exe", &st) == 0) {
    f->has_exe = 1;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
  }
}

static int family_of(const family_t *f, pid_t pid) {
  if (pid == f->self)
    return 1;
  for (int i = 0; i < f->n_up; i++)
    if (f->up[i] == pid)
      return 1;
  char path[48];
  struct stat st;
  snprintf(path, sizeof(path), "/proc/%ld/exe", (long)pid);
  return f->has_exe && stat(path, &st) == 0 && st.st_dev == f->dev && st.st_ino == f->ino;
}

/* Calls fn for each process whose command line matches re, vlmload's own family left out
 * (family_t). */
static int scan(const regex_t *re, void (*fn)(pid_t pid, void *ud), void *ud) {
  char buf[16384];
  DIR *d = opendir("/proc");
  if (!d)
    return 0;
  family_t fam;
  family_init(&fam);
  int matched = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *s = de->d_name;
    long pid = 0;
    while (*s >= '0' && *s <= '9' && pid < 1L << 40)
      pid = pid * 10 + (*s++ - '0');
    if (*s != '\0' || pid <= 0 || pid == (long)fam.self)
      continue;
    char path[48];
    snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
    ssize_t n = read_at(AT_FDCWD, path, buf, sizeof(buf));
    if (n <= 0)
      continue; /* gone, or a kernel thread */
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == '\0')
        buf[i] = ' ';
    }
    while (n > 0 && buf[n - 1] == ' ')
      n--;
    buf[n] = '\0';
    if (n == 0 || regexec(re, buf, 0, NULL, 0) != 0 || family_of(&fam, (pid_t)pid))
      continue;
    matched++;
    fn((pid_t)pid, ud);
  }
  closedir(d);
  return matched;
}

typedef struct {
  pid_t *pids;
  int max, n;
} find_ctx_t;

static void on_found(pid_t pid, void *ud) {
  find_ctx_t *c = ud;
  if (c->n < c->max)
    c->pids[c->n] = pid;
  c->n++;
}

int vl_procmem_find_re(const regex_t *re, pid_t *pids, int max) {
  find_ctx_t c = {pids, max, 0};
  scan(re, on_found, &c);
  return c.n;
}

int vl_procmem_cmdline(pid_t pid, char *buf, size_t len) {
  char path[48];
  if (len == 0)
    return VL_EINVAL;
  snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
  ssize_t n = read_at(AT_FDCWD, path, buf, len);
  if (n <= 0) {
    buf[0] = '\0';
    return VL_ENOENT;
  }
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] == '\0')
      buf[i] = ' ';
  while (n > 0 && buf[n - 1] == ' ')
    n--;
  buf[n] = '\0';
  return 0;
}

static int compile(regex_t *re, const char *expr, char *err, size_t errlen) {
  int rc = regcomp(re, expr, REG_EXTENDED | REG_NOSUB);
  if (rc == 0)
    return 0;
  char why[128];
  regerror(rc, re, why, sizeof(why));
  if (err && errlen)
    snprintf(err, errlen, "bad regular expression \"%s\": %s", expr, why);
  return VL_EINVAL;
}

int vl_procmem_find(const char *expr, pid_t *pids, int max, char *err, size_t errlen) {
  regex_t re;
  int rc = compile(&re, expr, err, errlen);
  if (rc)
    return rc;
  rc = vl_procmem_find_re(&re, pids, max);
  regfree(&re);
  return rc;
}

/* Trackers. */

static void track_init(vl_procmem_track_t *t, unsigned flags) {
  memset(t, 0, sizeof(*t));
  t->flags = flags;
  t->rescan_ns = 1000000000u;
}

int vl_procmem_track_pid(vl_procmem_track_t *t, pid_t pid, unsigned flags, char *err,
                         size_t errlen) {
  track_init(t, flags);
  t->fixed = 1;
  t->pid = pid;
  if (vl_procmem_start_time(pid, &t->start_time) != 0) {
    if (err && errlen)
      snprintf(err, errlen, "no process %ld", (long)pid);
    return VL_ENOENT;
  }
  t->present = t->ever = 1;
  t->matches = 1;
  return 0;
}

int vl_procmem_track_match(vl_procmem_track_t *t, const char *re, unsigned flags, char *err,
                           size_t errlen) {
  track_init(t, flags);
  int rc = compile(&t->re, re, err, errlen);
  if (rc)
    return rc;
  t->has_re = 1;
  return 0;
}

/* The matches of a search, the oldest first: at most VL_PROCMEM_FOUND kept, all counted. */
typedef struct {
  pid_t pid[VL_PROCMEM_FOUND];
  uint64_t start[VL_PROCMEM_FOUND];
  int kept, n;
} oldest_t;

static void on_candidate(pid_t pid, void *ud) {
  oldest_t *o = ud;
  uint64_t start;
  if (vl_procmem_start_time(pid, &start) != 0)
    return;
  o->n++;
  int i = o->kept;
  while (i > 0 && (start < o->start[i - 1] || (start == o->start[i - 1] && pid < o->pid[i - 1])))
    i--;
  if (i == VL_PROCMEM_FOUND)
    return;
  int last = VL_MIN(o->kept, VL_PROCMEM_FOUND - 1);
  memmove(o->pid + i + 1, o->pid + i, (size_t)(last - i) * sizeof(*o->pid));
  memmove(o->start + i + 1, o->start + i, (size_t)(last - i) * sizeof(*o->start));
  o->pid[i] = pid;
  o->start[i] = start;
  if (o->kept < VL_PROCMEM_FOUND)
    o->kept++;
}

static unsigned read_flags(const vl_procmem_track_t *t) {
  return t->pss_off ? t->flags & ~VL_PROCMEM_PSS : t->flags;
}

static int read_present(vl_procmem_track_t *t, vl_procmem_t *out) {
  int rc = vl_procmem_read(t->pid, t->start_time, read_flags(t), out);
  if (rc == 0 && out->pss_denied)
    t->pss_off = 1;
  return rc;
}

int vl_procmem_track_sample(vl_procmem_track_t *t, vl_procmem_t *out) {
  memset(out, 0, sizeof(*out));
  if (t->present) {
    int rc = read_present(t, out);
    if (rc != VL_ENOENT)
      return rc; /* 0, or a passing failure (descriptors exhausted): missing this time only */
    t->present = 0;
    t->last_scan_ns = 0; /* search again at once */
  }
  if (t->fixed)
    return VL_ENOENT;
  uint64_t now = vl_now_ns();
  if (t->last_scan_ns && now - t->last_scan_ns < t->rescan_ns)
    return VL_ENOENT;
  t->last_scan_ns = now;
  oldest_t o = {.kept = 0};
  scan(&t->re, on_candidate, &o);
  t->matches = o.n;
  t->n_found = o.kept;
  memcpy(t->found, o.pid, (size_t)o.kept * sizeof(*o.pid));
  if (o.kept == 0)
    return VL_ENOENT;
  if (t->ever && (o.pid[0] != t->pid || o.start[0] != t->start_time))
    t->restarts++;
  t->pid = o.pid[0];
  t->start_time = o.start[0];
  t->ever = t->present = 1;
  int rc = read_present(t, out);
  if (rc == VL_ENOENT)
    t->present = 0;
  return rc;
}

void vl_procmem_track_free(vl_procmem_track_t *t) {
  if (t->has_re)
    regfree(&t->re);
  t->has_re = 0;
}

/* Process trees. */

int vl_procmem_list(const char *proc_root, vl_procmem_kin_t **list, size_t *cap) {
  DIR *d = opendir(proc_root);
  if (!d)
    return 0;
  int dfd = dirfd(d);
  int n = 0;
  char buf[1024];
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *s = de->d_name;
    long pid = 0;
    while (*s >= '0' && *s <= '9' && pid < 1L << 40)
      pid = pid * 10 + (*s++ - '0');
    if (*s != '\0' || pid <= 0)
      continue;
    char path[48];
    snprintf(path, sizeof(path), "%ld/stat", pid);
    if (read_at(dfd, path, buf, sizeof(buf)) <= 0)
      continue; /* gone meanwhile */
    char state = 0;
    pid_t ppid = 0;
    uint64_t start = 0;
    if (parse_stat(buf, &state, &ppid, &start) != 0 || state == 'Z' || state == 'X')
      continue;
    if ((size_t)n == *cap) {
      *cap = *cap ? *cap * 2 : 256;
      *list = vl_xrealloc(*list, *cap * sizeof(**list));
    }
    (*list)[n++] = (vl_procmem_kin_t){(pid_t)pid, ppid, start};
  }
  closedir(d);
  return n;
}

int vl_procmem_descendants(const vl_procmem_kin_t *list, int n, pid_t root, pid_t *out, int max) {
  /* A breadth-first walk over the list with a queue of at most n parents: the found processes
   * that did not fit in out are walked too, through the queue's own storage. */
  pid_t *queue = vl_xmalloc(((size_t)n + 1) * sizeof(*queue));
  int head = 0, tail = 0, found = 0;
  queue[tail++] = root;
  while (head < tail) {
    pid_t parent = queue[head++];
    for (int i = 0; i < n; i++) {
      if (list[i].ppid != parent || list[i].pid == root || list[i].pid == parent)
        continue;
      if (tail <= n)
        queue[tail++] = list[i].pid;
      if (found < max)
        out[found] = list[i].pid;
      found++;
    }
  }
  free(queue);
  return found;
}

static int name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '+' || c == '-';
}

void vl_procmem_pick_name(const char *comm, const char *cmdline, size_t n, char *buf, size_t len) {
  if (len == 0)
    return;
  size_t cl = strcspn(comm, "\n");
  const char *pick = comm;
  size_t pl = cl;
  /* The command line's first word, and that word's last path component. */
  size_t w = 0;
  while (w < n && cmdline[w] != '\0' && cmdline[w] != ' ')
    w++;
  const char *base = cmdline;
  for (size_t i = 0; i < w; i++) {
    if (cmdline[i] == '/')
      base = cmdline + i + 1;
  }
  size_t bl = w - (size_t)(base - cmdline);
  if (cl > 0 && w > cl && strncmp(cmdline, comm, cl) == 0) {
    pick = cmdline;
    pl = w;
  } else if (cl > 0 && bl > cl && strncmp(base, comm, cl) == 0) {
    pick = base;
    pl = bl;
  }
  size_t o = 0;
  for (size_t i = 0; i < pl && o + 1 < len; i++)
    buf[o++] = name_char(pick[i]) ? pick[i] : '_';
  if (o == 0 && len > 1)
    buf[o++] = '?';
  buf[o] = '\0';
}

int vl_procmem_name(const char *proc_root, pid_t pid, char *buf, size_t len) {
  char path[256], comm[64], cmdline[512];
  snprintf(path, sizeof(path), "%s/%ld/comm", proc_root, (long)pid);
  ssize_t n = read_at(AT_FDCWD, path, comm, sizeof(comm));
  if (n < 0)
    return VL_ENOENT;
  snprintf(path, sizeof(path), "%s/%ld/cmdline", proc_root, (long)pid);
  ssize_t m = read_at(AT_FDCWD, path, cmdline, sizeof(cmdline));
  vl_procmem_pick_name(comm, cmdline, m > 0 ? (size_t)m : 0, buf, len);
  return 0;
}
