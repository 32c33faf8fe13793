/* The server's own settings that size its caches and memory, read from a server process's command
 * line and environment (/proc/PID/cmdline, /proc/PID/environ where readable), with the server's
 * default where the setting is absent:
 *   llamacpp  --cache-ram (-cram; MiB, default 8192: the host prompt cache cap), -c/--ctx-size
 *             (default 0: the model's), -np/--parallel; or their LLAMA_ARG_* variables;
 *   vllm      --mm-processor-cache-gb (GiB, default 4), --gpu-memory-utilization (default 0.9),
 *             --max-num-seqs;
 *   sglang    --mem-fraction-static, --disable-radix-cache (default false),
 *             SGLANG_VLM_CACHE_SIZE_MB (default 100), SGLANG_MM_FEATURE_CACHE_MB (default 1024).
 * A flag's last occurrence wins, as the servers' parsers take it; "--name=value" and, for long
 * flags, underscores for dashes are read alike. A flag with no default is recorded only when
 * given. Which server a process is comes from the run (--server) or from its command line
 * (llama-server, sglang, vllm in an argument).
 */
#ifndef VLMLOAD_SETTINGS_H
#define VLMLOAD_SETTINGS_H

#include <stddef.h>
#include <sys/types.h>

struct cJSON;

/* One setting of one process. */
typedef struct vl_setting_s {
  char process[64]; /* the monitor target's label */
  int pid;
  const char *server; /* "llamacpp", "vllm" or "sglang" (static) */
  const char *name;   /* the flag's long spelling or the variable (static) */
  char value[64];     /* as given, or the default; cut to fit */
  double bytes;       /* for a size: value in bytes; negative for anything else */
  const char *source; /* "flag", "env" or "default" (static) */
  const char *means;  /* what it caps or sets, in words (static) */
} vl_setting_t;

/* Every setting read, in order: by process, then as listed above. Owned. */
typedef struct vl_settings_s {
  vl_setting_t *v;
  size_t n, cap;
  int read; /* processes read */
} vl_settings_t;

/* Appends the settings of one process from its command line (argv: arguments each ended by a NUL,
 * argv_len bytes) and environment (env the same, or NULL when it could not be read). kind:
 * "llamacpp", "vllm" or "sglang", or NULL (or any other name) to tell from argv. Returns how many
 * were added; 0 when the server is not known. */
int vl_settings_parse(vl_settings_t *s, const char *process, int pid, const char *kind,
                      const char *argv, size_t argv_len, const char *env, size_t env_len);

/* The same from /proc/PID/cmdline and /proc/PID/environ. Returns how many were added, or VL_ENOENT
 * when the process is gone. */
int vl_settings_read(vl_settings_t *s, const char *process, pid_t pid, const char *kind);

/* Reads the settings of every process the monitor follows now (its --monitor-pid and
 * --monitor-pid-match targets, and the root of each --monitor-tree) not read before. Returns how
 * many settings were added. */
struct vl_monitor_s;
int vl_settings_read_monitored(vl_settings_t *s, const struct vl_monitor_s *mon, const char *kind);

/* Whether a setting of process pid was read. */
int vl_settings_has(const vl_settings_t *s, int pid);

/* The settings as the summary's server.settings: a list of {"process", "pid", "name", "value",
 * "bytes" (sizes only), "source", "means"}. Caller owns it. */
struct cJSON *vl_settings_json(const vl_settings_t *s);

void vl_settings_free(vl_settings_t *s);

#endif
