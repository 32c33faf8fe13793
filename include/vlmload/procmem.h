/* A process's memory from /proc (Linux): resident set (VmRSS), its peak (VmHWM) and the
 * proportional set size (Pss, from smaps_rollup, Linux 4.14 and later), all in bytes; finding
 * processes by command line; and trackers that follow one process across exits and restarts.
 *
 * Each read opens /proc/PID once and reads stat, status (and smaps_rollup) through that directory,
 * so the three describe the same process even if the PID is reused meanwhile. Files are read with
 * open/read into stack buffers: no stdio, no allocation. A read of stat and status costs a few
 * microseconds; smaps_rollup makes the kernel walk the whole address space of the process (up to
 * milliseconds for a large server), so PSS is read only when asked for.
 *
 * Accuracy: from Linux 6.2 the kernel keeps RSS in per-CPU counters. Until 6.16 VmRSS printed
 * their approximate total, which may be off by up to CPUs x max(32, 2 x CPUs) pages (128 MiB on a
 * 128-CPU host); VmHWM is still kept from that total. Pss is counted page by page and is exact:
 * prefer it (spec.pss) where a leak of a few MB matters on a large host.
 *
 * Nothing here is tied to a thread; a tracker must be used by one thread at a time.
 */
#ifndef VLMLOAD_PROCMEM_H
#define VLMLOAD_PROCMEM_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Flags for vl_procmem_read and the trackers. */
#define VL_PROCMEM_PSS 1u /* read smaps_rollup too */

typedef struct vl_procmem_s {
  uint64_t rss_bytes; /* VmRSS; 0 for a kernel thread */
  uint64_t hwm_bytes; /* VmHWM, the peak of VmRSS */
  uint64_t pss_bytes; /* Pss, when has_pss */
  /* The resident set by kind (RssAnon, RssFile, RssShmem of status, Linux 4.5 and later), when
   * has_kinds: anonymous memory (heap, stacks, private mappings), file-backed pages, and shared
   * memory (tmpfs, /dev/shm, memfd, SysV, shared anonymous); the three add up to VmRSS. */
  uint64_t anon_bytes, file_bytes, shmem_bytes;
  int has_kinds;
  int has_pss;         /* smaps_rollup was asked for and could be read */
  int pss_denied;      /* smaps_rollup was asked for and is missing or not readable */
  uint64_t start_time; /* field 22 of /proc/PID/stat: clock ticks from boot to the start */
} vl_procmem_t;

/* Reads pid's memory. expect_start, when nonzero, is the start time the process must have: a
 * process with another one has reused the PID. Returns 0, VL_ENOENT when there is no such process
 * (or it is a zombie, or expect_start differs) or VL_EIO when /proc reads malformed. */
int vl_procmem_read(pid_t pid, uint64_t expect_start, unsigned flags, vl_procmem_t *out);

/* Reads pid's start time alone. Returns 0 or VL_ENOENT. */
int vl_procmem_start_time(pid_t pid, uint64_t *start);

/* Finds the processes whose command line (arguments joined with spaces) matches the POSIX
 * extended regular expression re, leaving out the calling process, every process it descends from
 * (the shell, timeout, sudo or container entry point that started it: their command lines hold
 * its arguments) and every other process running its executable. Stores at most max PIDs in
 * pids; returns how many matched (which may exceed max) or VL_EINVAL for a bad expression (err
 * gets why). */
int vl_procmem_find(const char *re, pid_t *pids, int max, char *err, size_t errlen);

/* Same with a compiled expression (REG_EXTENDED | REG_NOSUB). */
int vl_procmem_find_re(const regex_t *re, pid_t *pids, int max);

/* pid's command line, arguments joined with spaces, cut to len - 1 bytes. Returns 0, or VL_ENOENT
 * when the process is gone (or a kernel thread: it has none). */
int vl_procmem_cmdline(pid_t pid, char *buf, size_t len);

/* A tracker follows one process.
 *
 * A fixed tracker watches one PID for the life of that process: once it exits (or the PID is
 * reused) the tracker reads missing for good. A matching tracker follows whatever process matches
 * its expression: when its process is gone it searches again, at once and then at most every
 * rescan_ns while none matches, and counts each new process found after the first as a restart.
 * A search leaves out what vl_procmem_find does. When several processes match, it follows the
 * oldest (earliest start, then lowest PID). */
#define VL_PROCMEM_FOUND 8 /* matches of a search a tracker lists */
typedef struct vl_procmem_track_s {
  unsigned flags;
  int fixed;
  int has_re;
  regex_t re;
  pid_t pid;           /* process followed, or last followed; 0 before the first */
  uint64_t start_time; /* its start time */
  int present;         /* pid is alive and is the process first seen under it */
  int ever;            /* a process was found at least once */
  uint64_t restarts;   /* processes found after the first */
  int matches;         /* processes the last search matched */
  pid_t
      found[VL_PROCMEM_FOUND]; /* the first n_found of them, the oldest (the one followed) first */
  int n_found;
  int pss_off;        /* smaps_rollup is not readable: stop asking */
  uint64_t rescan_ns; /* least time between searches while missing (default 1 s) */
  uint64_t last_scan_ns;
} vl_procmem_track_t;

/* Follows pid, which must exist now. Returns 0 or VL_ENOENT (err says so). */
int vl_procmem_track_pid(vl_procmem_track_t *t, pid_t pid, unsigned flags, char *err,
                         size_t errlen);

/* Follows the process matching re (POSIX extended), which need not exist yet. Returns 0 or
 * VL_EINVAL for a bad expression (err says why). */
int vl_procmem_track_match(vl_procmem_track_t *t, const char *re, unsigned flags, char *err,
                           size_t errlen);

/* Samples the process followed, searching again first when a matching tracker has lost it.
 * Returns 0 with *out filled, or VL_ENOENT while the process is missing. */
int vl_procmem_track_sample(vl_procmem_track_t *t, vl_procmem_t *out);

void vl_procmem_track_free(vl_procmem_track_t *t);

/* Process trees. */

/* A process as /proc/PID/stat shows it: its parent and start time. */
typedef struct vl_procmem_kin_s {
  pid_t pid, ppid;
  uint64_t start_time;
} vl_procmem_kin_t;

/* Lists every live process (zombies left out) under proc_root ("/proc", or a directory laid out
 * like it, for tests) into *list, growing it (*cap entries) with realloc. Returns how many. A
 * process that exits during the scan is left out; one that exists throughout is never missed. */
int vl_procmem_list(const char *proc_root, vl_procmem_kin_t **list, size_t *cap);

/* The descendants of root (children, their children, ...) in list, root left out, in the order
 * of a breadth-first walk. Stores at most max in out; returns how many there are. */
int vl_procmem_descendants(const vl_procmem_kin_t *list, int n, pid_t root, pid_t *out, int max);

/* The name of a process for a series: its comm (/proc/PID/comm, at most 15 bytes), or, when the
 * first word of its command line (up to a NUL or a space) or that word's last path component
 * begins with comm and is longer, that word: setproctitle("sglang::scheduler_TP0") shows whole
 * there. Bytes outside [A-Za-z0-9_.:+-] become '_'. Returns 0, or VL_ENOENT when the process is
 * gone. */
int vl_procmem_name(const char *proc_root, pid_t pid, char *buf, size_t len);

/* The naming rule of vl_procmem_name on given texts: comm (its newline optional) and the raw
 * command line (n bytes, NUL-separated). Writes "?" for an empty result. */
void vl_procmem_pick_name(const char *comm, const char *cmdline, size_t n, char *buf, size_t len);

#endif
