/* The server's own settings from /proc/PID/cmdline and /proc/PID/environ (settings.h). */
#include "vlmload/settings.h"
#include "vlmload/common.h"
#include "vlmload/monitor.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB 1048576.0
#define GIB 1073741824.0

/* What one server knows of one setting. */
typedef struct {
  const char *server;
  const char *name;  /* the long flag, or NULL for a variable alone */
  const char *alias; /* a short flag, or NULL */
  const char *env;   /* the variable, or NULL */
  int boolean;       /* a flag without a value: present means "true" */
  const char *def;   /* the default, or NULL to record it only when given */
  double unit;       /* bytes in one unit of the value; 0 when it is not a size */
  const char *means;
} known_t;

/* clang-format off */
static const known_t known[] = {
    {"llamacpp", "--cache-ram", "-cram", "LLAMA_ARG_CACHE_RAM", 0, "8192", MIB,
     "host prompt cache cap (0: off)"},
    {"llamacpp", "--ctx-size", "-c", "LLAMA_ARG_CTX_SIZE", 0, "0", 0,
     "context size in tokens (0: the model's)"},
    {"llamacpp", "--parallel", "-np", "LLAMA_ARG_N_PARALLEL", 0, NULL, 0,
     "slots decoded in parallel"},
    {"vllm", "--mm-processor-cache-gb", NULL, NULL, 0, "4", GIB,
     "multimodal processor cache cap, per API and engine process"},
    {"vllm", "--gpu-memory-utilization", NULL, NULL, 0, "0.9", 0,
     "share of GPU memory taken for weights, activations and KV cache"},
    {"vllm", "--max-num-seqs", NULL, NULL, 0, NULL, 0, "requests in a batch at most"},
    {"sglang", "--mem-fraction-static", NULL, NULL, 0, NULL, 0,
     "share of GPU memory for weights and KV cache"},
    {"sglang", "--disable-radix-cache", NULL, NULL, 1, "false", 0, "prefix (radix) cache off"},
    {"sglang", NULL, NULL, "SGLANG_VLM_CACHE_SIZE_MB", 0, "100", MIB,
     "VLM embedding cache cap (not cleared by /flush_cache)"},
    {"sglang", NULL, NULL, "SGLANG_MM_FEATURE_CACHE_MB", 0, "1024", MIB,
     "multimodal feature pool cap (not cleared by /flush_cache)"},
};
/* clang-format on */

/* The next NUL-ended string of a list at *off, or NULL at its end. */
static const char *next(const char *buf, size_t len, size_t *off) {
  if (!buf || *off >= len)
    return NULL;
  const char *s = buf + *off;
  size_t n = strnlen(s, len - *off);
  *off += n + 1;
  return s;
}

/* Whether a command-line argument names a server; NULL when none. */
static const char *kind_of(const char *argv, size_t len) {
  size_t off = 0;
  for (const char *a; (a = next(argv, len, &off));) {
    const char *base = strrchr(a, '/') ? strrchr(a, '/') + 1 : a;
    if (strncmp(base, "llama-server", 12) == 0)
      return "llamacpp";
    if (strstr(a, "sglang"))
      return "sglang";
    if (strstr(a, "vllm"))
      return "vllm";
  }
  return NULL;
}

/* Whether arg spells flag (a long one also with '_' for '-'), alone or as "flag=value"; *value
 * gets what follows '=' or NULL. */
static int is_flag(const char *arg, const char *flag, const char **value) {
  size_t i = 0;
  int longf = flag[0] == '-' && flag[1] == '-';
  for (; flag[i]; i++) {
    char c = arg[i];
    if (longf && i > 1 && c == '_')
      c = '-';
    if (c != flag[i])
      return 0;
  }
  if (arg[i] != '\0' && arg[i] != '=')
    return 0;
  *value = arg[i] == '=' ? arg + i + 1 : NULL;
  return 1;
}

static void add(vl_settings_t *s, const char *process, int pid, const known_t *k, const char *value,
                const char *source) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 16;
    s->v = vl_xrealloc(s->v, s->cap * sizeof(*s->v));
  }
  vl_setting_t *e = &s->v[s->n++];
  memset(e, 0, sizeof(*e));
  snprintf(e->process, sizeof(e->process), "%s", process);
  e->pid = pid;
  e->server = k->server;
  e->name = k->name ? k->name : k->env;
  snprintf(e->value, sizeof(e->value), "%s", value);
  e->source = source;
  e->means = k->means;
  e->bytes = -1;
  char *end;
  double v = strtod(e->value, &end);
  if (k->unit > 0 && end != e->value && *end == '\0' && v >= 0)
    e->bytes = v * k->unit;
}

int vl_settings_parse(vl_settings_t *s, const char *process, int pid, const char *kind,
                      const char *argv, size_t argv_len, const char *env, size_t env_len) {
  if (!kind || (strcmp(kind, "llamacpp") && strcmp(kind, "vllm") && strcmp(kind, "sglang")))
    kind = kind_of(argv, argv_len);
  if (!kind)
    return 0;
  s->read++;
  int added = 0;
  for (size_t i = 0; i < VL_ARRAY_SIZE(known); i++) {
    const known_t *k = &known[i];
    if (strcmp(k->server, kind) != 0)
      continue;
    const char *value = NULL, *source = NULL;
    /* The flag's last occurrence wins; the first argument is the program. */
    size_t off = 0;
    next(argv, argv_len, &off);
    for (const char *a; (k->name || k->alias) && (a = next(argv, argv_len, &off));) {
      const char *v;
      if (!(k->name && is_flag(a, k->name, &v)) && !(k->alias && is_flag(a, k->alias, &v)))
        continue;
      if (k->boolean) {
        value = "true";
      } else if (v) {
        value = v;
      } else {
        size_t at = off;
        const char *n = next(argv, argv_len, &at);
        if (!n)
          continue;
        value = n;
        off = at;
      }
      source = "flag";
    }
    /* A variable counts when no flag was given (a flag wins over the environment). */
    off = 0;
    for (const char *e; !source && k->env && (e = next(env, env_len, &off));) {
      size_t n = strlen(k->env);
      if (strncmp(e, k->env, n) == 0 && e[n] == '=') {
        value = e + n + 1;
        source = "env";
      }
    }
    if (!source && k->def) {
      value = k->def;
      source = "default";
    }
    if (source) {
      add(s, process, pid, k, value, source);
      added++;
    }
  }
  return added;
}

/* Reads /proc/PID/NAME whole (at most 1 MiB) into a new buffer. Returns it with its length, or
 * NULL with errno set. */
static char *slurp(pid_t pid, const char *name, size_t *len) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  size_t cap = 65536, n = 0;
  char *buf = vl_xmalloc(cap);
  for (;;) {
    if (n == cap) {
      if (cap >= (1u << 20))
        break;
      buf = vl_xrealloc(buf, cap *= 2);
    }
    ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      int e = errno;
      close(fd);
      free(buf);
      errno = e;
      return NULL;
    }
    if (got == 0)
      break;
    n += (size_t)got;
  }
  close(fd);
  *len = n;
  return buf;
}

int vl_settings_read(vl_settings_t *s, const char *process, pid_t pid, const char *kind) {
  size_t alen = 0, elen = 0;
  char *argv = slurp(pid, "cmdline", &alen);
  if (!argv)
    return VL_ENOENT;
  char *env = slurp(pid, "environ", &elen); /* NULL: not ours to read */
  int n = vl_settings_parse(s, process, (int)pid, kind, argv, alen, env, elen);
  free(argv);
  free(env);
  return n;
}

int vl_settings_has(const vl_settings_t *s, int pid) {
  for (size_t i = 0; s && i < s->n; i++)
    if (s->v[i].pid == pid)
      return 1;
  return 0;
}

int vl_settings_read_monitored(vl_settings_t *s, const vl_monitor_t *mon, const char *kind) {
  int n = 0, got;
  vl_monitor_proc_info_t p;
  for (int i = 0; vl_monitor_proc_info(mon, i, &p) == 0; i++)
    if (p.pid && p.present && !vl_settings_has(s, p.pid) &&
        (got = vl_settings_read(s, p.label, p.pid, kind)) > 0)
      n += got;
  vl_monitor_tree_info_t t;
  for (int i = 0; vl_monitor_tree_info(mon, i, &t) == 0; i++)
    if (t.pid && t.present && !vl_settings_has(s, t.pid) &&
        (got = vl_settings_read(s, t.label, t.pid, kind)) > 0)
      n += got;
  return n;
}

cJSON *vl_settings_json(const vl_settings_t *s) {
  cJSON *arr = cJSON_CreateArray();
  for (size_t i = 0; s && i < s->n; i++) {
    const vl_setting_t *e = &s->v[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "process", e->process);
    cJSON_AddNumberToObject(o, "pid", e->pid);
    cJSON_AddStringToObject(o, "name", e->name);
    cJSON_AddStringToObject(o, "value", e->value);
    if (e->bytes >= 0)
      cJSON_AddNumberToObject(o, "bytes", e->bytes);
    cJSON_AddStringToObject(o, "source", e->source);
    cJSON_AddStringToObject(o, "means", e->means);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

void vl_settings_free(vl_settings_t *s) {
  free(s->v);
  memset(s, 0, sizeof(*s));
}
