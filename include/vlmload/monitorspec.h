/* What the memory monitor is asked to sample, as the command line gives it: process targets
 * (--monitor-pid, --monitor-pid-match), Prometheus targets (--monitor-prom), commands
 * (--monitor-cmd), process trees (--monitor-tree) and the settings they share. Plain data with its
 * parsers, free of the event loop and the HTTP client, so that the run's configuration can hold it;
 * the monitor (monitor.h) borrows it to do the sampling.
 */
#ifndef VLMLOAD_MONITORSPEC_H
#define VLMLOAD_MONITORSPEC_H

#include "vlmload/prom.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct vl_monitor_pid_s {
  char *label;
  pid_t pid;
} vl_monitor_pid_t;

typedef struct vl_monitor_match_s {
  char *label;
  char *regex;
} vl_monitor_match_t;

typedef struct vl_monitor_tree_s {
  char *label;
  pid_t pid; /* the root */
} vl_monitor_tree_t;

typedef struct vl_monitor_prom_s {
  char *label; /* NULL when none was given */
  vl_prom_target_t *target;
  int server; /* added by the run for the server's own counters (counters.h), not by an option */
} vl_monitor_prom_t;

typedef struct vl_monitor_cmd_s {
  char *label;
  char *cmd;
} vl_monitor_cmd_t;

/* What to monitor, as the command line gives it. vl_monitor_spec_init sets the defaults; the
 * vl_monitor_spec_add_* calls parse one option value each. The monitor borrows the spec: keep it
 * unchanged until vl_monitor_free. */
typedef struct vl_monitor_spec_s {
  vl_monitor_pid_t *pids; /* --monitor-pid [LABEL=]PID */
  int n_pids;
  vl_monitor_match_t *matches; /* --monitor-pid-match [LABEL=]REGEX */
  int n_matches;
  vl_monitor_tree_t *trees; /* --monitor-tree [LABEL=]PID */
  int n_trees;
  vl_monitor_prom_t *proms; /* --monitor-prom [LABEL=]URL[#SEL,...] */
  int n_proms;
  vl_monitor_cmd_t *cmds; /* --monitor-cmd [LABEL=]CMD */
  int n_cmds;
  int gpu;                  /* per-GPU used memory, and per-process for each process target */
  int pss;                  /* read PSS as well (costly for large processes) */
  uint64_t prom_timeout_ms; /* per scrape; default 2000 */
  uint64_t cmd_timeout_ms;  /* a command still running then is killed; default 10000 */
  uint64_t rescan_ms;       /* search for a missing --monitor-pid-match target at most this
                               often; default 1000 */
  uint64_t anatomy_us;      /* read each process target's smaps this often (heap_mb, device_mb,
                               arenas); 0: never; default 5 s */
  /* Credentials of the load's server, sent with a scrape only to that server's origin
   * (scheme, host and port of server_url). Borrowed; may be NULL. */
  const char *server_url;
  const char *api_key;
  char *const *headers; /* "K: V" */
  int n_headers;
  /* The TLS policy of every scrape (vl_transport_policy). cacert borrowed; may be NULL. */
  int insecure;
  const char *cacert;
} vl_monitor_spec_t;

void vl_monitor_spec_init(vl_monitor_spec_t *spec);

/* Each parses one option value into the spec. A label is [A-Za-z0-9_.-]+ followed by '=' and must
 * be unique among the process targets (pids, matches and trees), the prom targets and the commands.
 * A regex or command whose text starts like "word=" must be labeled to be read whole ("x=FOO=1
 * cmd"). Returns 0 or VL_EINVAL with a one-line reason in err. */
int vl_monitor_spec_add_pid(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen);
int vl_monitor_spec_add_match(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen);
/* A tree's label defaults to its root's command name now (vl_procmem_name, with bytes outside
 * the label's set as '_'), or its PID when that cannot be read; made unique with _2, _3... */
int vl_monitor_spec_add_tree(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen);
int vl_monitor_spec_add_prom(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen);
int vl_monitor_spec_add_cmd(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen);

/* True when the spec asks for nothing. */
int vl_monitor_spec_empty(const vl_monitor_spec_t *spec);

void vl_monitor_spec_free(vl_monitor_spec_t *spec);

#endif
