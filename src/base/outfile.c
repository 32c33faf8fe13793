#include "vlmload/outfile.h"
#include "vlmload/common.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Puts the reason in why and returns -e. */
__attribute__((format(printf, 4, 5))) static int fail(int e, char *why, size_t whylen,
                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
  return -e;
}

/* The directory part of path ("." when it has none). Caller frees. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    return vl_xstrdup(".");
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  char *d = vl_xmalloc(n + 1);
  memcpy(d, path, n);
  d[n] = '\0';
  return d;
}

/* Why no file could be created beside path (errno e). A directory that exists and still answers
 * ENOENT is a file system that makes no files, /proc or /sys: say that rather than "No such file".
 */
static int create_failed(const char *path, int e, char *why, size_t whylen) {
  char *dir = dir_of(path);
  struct stat st;
  if (e == ENOENT && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
    fail(e, why, whylen, "cannot create a file in '%s': its file system takes no new files", dir);
  else
    fail(e, why, whylen, "cannot create a file in '%s': %s", dir, strerror(e));
  free(dir);
  return -e;
}

/* How path is written. */
typedef struct {
  int atomic; /* through a temporary file and a rename (a regular file, or nothing yet) */
  int exists;
  mode_t mode; /* permissions of the file there */
} how_t;

static int how_to_write(const char *path, how_t *h, char *why, size_t whylen) {
  struct stat st;
  memset(h, 0, sizeof(*h));
  if (lstat(path, &st) != 0) {
    if (errno != ENOENT)
      return fail(errno, why, whylen, "%s", strerror(errno));
    h->atomic = 1;
    return 0;
  }
  if (S_ISDIR(st.st_mode))
    return fail(EISDIR, why, whylen, "is a directory");
  h->exists = 1;
  h->atomic = S_ISREG(st.st_mode);
  h->mode = st.st_mode & 07777;
  return 0;
}

/* Creates a new file beside path, named after it, for writing; *tmp gets its name (caller frees).
 * Returns the descriptor, or -1 with errno set. */
static int make_temp(const char *path, char **tmp) {
  size_t n = strlen(path) + 48;
  char *t = vl_xmalloc(n);
  for (int i = 0; i < 100; i++) {
    snprintf(t, n, "%s.tmp%ld.%d", path, (long)getpid(), i);
    int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      *tmp = t;
      return fd;
    }
    if (errno != EEXIST)
      break;
  }
  int e = errno;
  free(t);
  errno = e;
  return -1;
}

int vl_outfile_check(const char *path, char *why, size_t whylen) {
  how_t h;
  int rc = how_to_write(path, &h, why, whylen);
  if (rc)
    return rc;
  struct stat st;
  if (!h.atomic && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return fail(EISDIR, why, whylen, "is a directory");
  /* The file's own permissions count even where a rename could replace it. */
  if (h.exists && faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0)
    return fail(errno, why, whylen, "%s", strerror(errno));
  if (!h.atomic)
    return 0;
  char *tmp;
  int fd = make_temp(path, &tmp);
  if (fd < 0)
    return create_failed(path, errno, why, whylen);
  close(fd);
  unlink(tmp);
  free(tmp);
  return 0;
}

/* SIGINT, SIGTERM and SIGHUP held back while a temporary file exists. */
static const int held[] = {SIGINT, SIGTERM, SIGHUP};
static volatile sig_atomic_t held_signal;

static void on_held(int sig) {
  held_signal = sig;
}

typedef struct {
  struct sigaction old[VL_ARRAY_SIZE(held)];
} hold_t;

static void hold_signals(hold_t *h) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_held;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  held_signal = 0;
  for (size_t i = 0; i < VL_ARRAY_SIZE(held); i++) {
    sigaction(held[i], NULL, &h->old[i]);
    if ((h->old[i].sa_flags & SA_SIGINFO) || h->old[i].sa_handler != SIG_IGN)
      sigaction(held[i], &sa, NULL);
  }
}

/* Puts the handlers back and delivers what came meanwhile to them. */
static void release_signals(hold_t *h) {
  for (size_t i = 0; i < VL_ARRAY_SIZE(held); i++)
    sigaction(held[i], &h->old[i], NULL);
  if (held_signal)
    raise(held_signal);
}

/* Runs fill on fd (taken over and closed). */
static int fill_fd(int fd, vl_outfile_fill_cb fill, void *arg, char *why, size_t whylen) {
  FILE *f = fdopen(fd, "w");
  if (!f) {
    int e = errno;
    close(fd);
    return fail(e, why, whylen, "%s", strerror(e));
  }
  why[0] = '\0';
  errno = 0;
  int rc = fill(f, arg, why, whylen);
  int e = !rc && ferror(f) ? (errno ? errno : EIO) : 0;
  if (fflush(f) != 0 && !rc && !e)
    e = errno;
  if (fclose(f) != 0 && !rc && !e)
    e = errno;
  if (rc)
    return why[0] ? rc : fail(-rc, why, whylen, "%s", vl_strerror(rc));
  if (e)
    return fail(e, why, whylen, "%s", strerror(e));
  return 0;
}

int vl_outfile_write(const char *path, vl_outfile_fill_cb fill, void *arg, char *why,
                     size_t whylen) {
  how_t h;
  int rc = how_to_write(path, &h, why, whylen);
  if (rc)
    return rc;
  if (!h.atomic) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
      return fail(errno, why, whylen, "%s", strerror(errno));
    return fill_fd(fd, fill, arg, why, whylen);
  }
  hold_t hold;
  hold_signals(&hold);
  char *tmp;
  int fd = make_temp(path, &tmp);
  if (fd < 0) {
    rc = create_failed(path, errno, why, whylen);
    release_signals(&hold);
    return rc;
  }
  /* A file replaced keeps its permissions (a summary kept private stays so). */
  if (h.exists)
    fchmod(fd, h.mode);
  rc = fill_fd(fd, fill, arg, why, whylen);
  if (rc == 0 && rename(tmp, path) != 0)
    rc = fail(errno, why, whylen, "%s", strerror(errno));
  if (rc)
    unlink(tmp);
  free(tmp);
  release_signals(&hold);
  return rc;
}

static int put_text(FILE *f, void *arg, char *why, size_t whylen) {
  const char *text = arg;
  if (!text)
    return fail(ENOMEM, why, whylen, "out of memory");
  fputs(text, f);
  fputc('\n', f);
  return 0;
}

int vl_outfile_write_text(const char *path, const char *text, char *why, size_t whylen) {
  return vl_outfile_write(path, put_text, (void *)text, why, whylen);
}

int vl_outfile_probe(FILE *f, char *why, size_t whylen) {
  int fd = fileno(f);
  struct stat st;
  if (fstat(fd, &st) != 0)
    return fail(errno, why, whylen, "%s", strerror(errno));
  if (S_ISREG(st.st_mode)) {
    /* At the start: a file that does not seek (in /proc) was just opened there too. */
    off_t at = lseek(fd, 0, SEEK_CUR);
    if (at < 0)
      at = 0;
    errno = ENOSPC; /* what a write of 0 bytes means */
    ssize_t n = pwrite(fd, "\n", 1, at);
    if (n < 0 && errno == ESPIPE)
      n = write(fd, "\n", 1);
    if (n != 1 || ftruncate(fd, at) != 0)
      return fail(errno, why, whylen, "%s", strerror(errno));
  } else if (S_ISCHR(st.st_mode) && !isatty(fd)) {
    /* /dev/full and its kind; a terminal never fills, and a blank line on it would show. */
    errno = ENOSPC;
    if (write(fd, "\n", 1) != 1)
      return fail(errno, why, whylen, "%s", strerror(errno));
  }
  return 0;
}

FILE *vl_outfile_scratch(const char *prefix, char *why, size_t whylen) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir)
    dir = "/tmp";
  size_t n = strlen(dir) + strlen(prefix) + 16;
  char *path = vl_xmalloc(n);
  snprintf(path, n, "%s/%s-XXXXXX", dir, prefix);
  FILE *f = NULL;
  int fd = mkostemp(path, O_CLOEXEC);
  if (fd < 0) {
    fail(errno, why, whylen, "cannot make a temporary file in '%s': %s", dir, strerror(errno));
  } else {
    unlink(path);
    if (!(f = fdopen(fd, "w+"))) {
      fail(errno, why, whylen, "%s", strerror(errno));
      close(fd);
    }
  }
  free(path);
  return f;
}
