/* `vlmload matrix`: cells run one after another, each against its own server (matrix.h). */
#include "vlmload/matrix.h"
#include "vlmload/child.h"
#include "vlmload/common.h"
#include "vlmload/config.h"
#include "vlmload/csvin.h"
#include "vlmload/htmlreport.h"
#include "vlmload/json.h"
#include "vlmload/nvml.h"
#include "vlmload/outfile.h"
#include "vlmload/plot.h"
#include "vlmload/rateauto.h"
#include "vlmload/series.h"
#include "vlmload/server.h"
#include "vlmload/text.h"
#include "vlmload/units.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define PROG             "vlmload matrix"
#define TICK_MS          100               /* health polls and the stop's checks */
#define HEALTH_POLL_MS   1000              /* one health request's bound */
#define DEFAULT_READY_US (60ull * 1000000) /* a server's time to become ready */
#define DEFAULT_STOP_US  (10ull * 1000000) /* SIGTERM to SIGKILL */
#define TREE_LABEL       "server"          /* --monitor-tree server=PID: rss_mb.server */

static const char usage[] =
    "Usage: vlmload matrix FILE.json [--output-dir DIR] [--url URL] [--report FILE.html]\n"
    "                      [--gnuplot PATH] [--parallel N] [--cells NAME,...] [--quiet]\n"
    "                      [--dry-run] [-- OPTION...]\n"
    "\n"
    "Run a list of cells, one after another (or --parallel), and compare their memory. Each\n"
    "cell is a vlmload run (its options over the file's shared defaults) against a server\n"
    "started fresh for it: the server starts, its health route is polled until it answers 200,\n"
    "the load runs with the server's process tree sampled (--monitor-tree, and --monitor-gpu\n"
    "where NVML finds a GPU), the server is stopped (SIGTERM to its process group, SIGKILL after\n"
    "stop_timeout), and the run's memory analysis (--analyze) is kept. A cell that fails (the\n"
    "server never ready, a crash) is reported failed and the next one runs. Ctrl-C stops the\n"
    "running cells, their servers and the matrix, and writes what was measured.\n"
    "\n"
    "  --output-dir DIR      where the outputs go (default matrix-YYYYMMDD-HHMMSS): DIR/CELL/\n"
    "                        (config.json, summary.json, timeline.csv, memory.png, output.txt,\n"
    "                        server.log), DIR/matrix.json, DIR/rss.png (every cell's resident\n"
    "                        set over requests completed)\n"
    "  --url URL             start no server: every cell loads URL\n"
    "  --report FILE.html    one HTML page of the matrix (the table, the resident sets), and\n"
    "                        each cell's own report in DIR/CELL/report.html\n"
    "  --gnuplot PATH        the gnuplot that draws the plots (default: gnuplot on PATH)\n"
    "  --parallel N          run N cells at once, each with its own server (default 1: one\n"
    "                        after another; cells side by side share the machine's cores, and\n"
    "                        their loads start together once the servers started with them\n"
    "                        answer)\n"
    "  --cells NAME,...      run only these of the file's cells (in the file's order), e.g.\n"
    "                        to run one again on its own\n"
    "  --quiet               no lines about each cell's progress\n"
    "  --dry-run             check every cell's options and print what would run; run nothing\n"
    "  -- OPTION...          vlmload options given to every cell after its own (they win)\n"
    "  -h, --help            this help\n"
    "\n"
    "File: a JSON object with these keys (an example below).\n"
    "  defaults        vlmload options (keys as in --config) shared by every cell\n"
    "  server          the server every cell starts; a cell's own server keys replace its\n"
    "                  keys (null: none)\n"
    "  cells           a list, each with a name (letters, digits, . _ -; its folder), options\n"
    "                  over the defaults, and optionally its own server\n"
    "\n"
    "Server: an object with these keys.\n"
    "  command         argv, no shell; a program named by a relative path is FILE.json's\n"
    "                  folder's\n"
    "  health          the route polled until it answers 200 (default /health)\n"
    "  ready_timeout   how long to wait for it (default 60s)\n"
    "  stop_timeout    SIGTERM to SIGKILL (default 10s)\n"
    "  port            a fixed port (default: a free loopback port, given as {port})\n"
    "  monitor         false: the load does not sample the server's process tree\n"
    "\n"
    "Placeholders: in the command, in the options' strings and in the options after --:\n"
    "{port}, {url} (the cell's, http://127.0.0.1:{port}), {cell} (the cell's output folder),\n"
    "{vlmmock} and {vlmload} (the programs beside this one). Relative paths in options are\n"
    "FILE.json's folder's.\n"
    "\n"
    "Table: one row per cell and memory series: the verdict, the slope in MB per 1000 requests\n"
    "with its 95% interval (OLS), the post-flush floor's slope, the achieved rate and the\n"
    "end-to-end p50.\n"
    "\n"
    "Exit status: 0 every cell ran, 130 interrupted, 1 a cell failed or an output could not be\n"
    "written (interrupted or not), 2 bad usage or file (said before any cell runs).\n"
    "\n"
    "Examples:\n"
    "  {\n"
    "    \"defaults\": {\"rate\": 200, \"duration\": \"30s\", \"resolution\": \"64x64\"},\n"
    "    \"server\": {\"command\": [\"{vlmmock}\", \"--port\", \"{port}\"],\n"
    "               \"health\": \"/health\", \"ready_timeout\": \"60s\"},\n"
    "    \"cells\": [\n"
    "      {\"name\": \"text\", \"options\": {\"image-ratio\": 0}},\n"
    "      {\"name\": \"leak\", \"options\": {\"image-ratio\": 1},\n"
    "       \"server\": {\"command\": [\"{vlmmock}\", \"--port\", \"{port}\",\n"
    "                             \"--leak-kb-per-image\", \"64\"]}}\n"
    "    ]\n"
    "  }\n"
    "  vlmload matrix tools/scenarios/leak-matrix.json -- --duration 5s\n";

void vl_matrix_usage(FILE *f) {
  fputs(usage, f);
}

/* ST_READY: the server answers, and the load waits for the servers started with it, so that loads
 * side by side begin together rather than one probing its server while the others start. */
typedef enum { ST_PENDING, ST_STARTING, ST_READY, ST_LOADING, ST_STOPPING, ST_DONE } stage_t;

typedef struct matrix_s matrix_t;

/* The server a cell starts, as the file gives it. */
typedef struct {
  const cJSON *command; /* array of strings, borrowed from the file */
  const char *health;
  uint64_t ready_us, stop_us;
  int port; /* fixed, or 0: a free one */
  int monitor;
} server_spec_t;

typedef struct {
  matrix_t *m;
  int index;
  const char *name;   /* borrowed from the file */
  const cJSON *given; /* the cell's own options, borrowed */
  int has_server;
  server_spec_t srv;
  cJSON *options;     /* merged and substituted, as written to config.json; owned */
  char **srv_argv;    /* the command substituted; owned */
  char **load_argv;   /* the child vlmload's; owned */
  char dir[PATH_MAX]; /* DIR/CELL */
  char url[2048];
  int port;
  uv_process_t srv_proc, load_proc;
  uv_timer_t timer; /* health polls, then the stop's checks */
  int srv_running, load_running, srv_started, load_started, killed;
  int group_gone; /* the server's process group was seen empty: its id is not ours any more */
  int64_t srv_status, load_status;
  int srv_signal, load_signal;
  uint64_t t0_ns, deadline_ns;
  int64_t start_ms, end_ms; /* wall clock: the cell started (its server, else its load), ended */
  double ready_s, load_s;
  const char *stopped; /* how the server ended: "SIGTERM", "SIGKILL", "exited" */
  stage_t stage;
  const char *status; /* "ok", "failed", "interrupted", "not run" */
  char error[4096];
  char health_err[2600];
  cJSON *summary; /* the child's, owned */
} cell_t;

struct matrix_s {
  uv_loop_t loop;
  uv_signal_t sig_int, sig_term;
  cJSON *file;
  const char *file_path;
  char file_dir[PATH_MAX]; /* FILE.json's folder, absolute */
  const char *out_dir;
  const char *url;    /* --url: no servers */
  const char *report; /* --report */
  const char *only;   /* --cells: a comma-separated list of names, or NULL: every cell */
  char *gnuplot;      /* found, or NULL: no plots */
  int quiet, gpu, dry_run;
  char **extra; /* after "--" */
  int n_extra;
  char exe[PATH_MAX], vlmmock[PATH_MAX];
  cell_t *cells;
  int n;
  int parallel; /* cells run at once */
  int next;     /* the next cell to start */
  int running;  /* cells started and not finished */
  int closed;   /* the loop's handles are closing */
  int signals;
};

static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(PROG ": ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static void note(matrix_t *m, const cell_t *c, const char *fmt, ...) {
  if (m->quiet)
    return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, PROG ": [%d/%d] %s: ", c->index + 1, m->n, c->name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static void fail(cell_t *c, const char *fmt, ...) {
  if (c->error[0]) /* the first reason stands */
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof(c->error), fmt, ap);
  va_end(ap);
  c->status = "failed";
}

/* argv lists: NULL-terminated, every string owned. */
static void argv_push(char ***v, int *n, const char *s) {
  *v = vl_xrealloc(*v, (size_t)(*n + 2) * sizeof(char *));
  (*v)[(*n)++] = vl_xstrdup(s);
  (*v)[*n] = NULL;
}

static void argv_free(char **v) {
  for (char **p = v; p && *p; p++)
    free(*p);
  free(v);
}

/* s with {port}, {url}, {cell}, {vlmmock} and {vlmload} replaced; a new string. */
static char *subst(const cell_t *c, const char *s) {
  char port[16];
  snprintf(port, sizeof(port), "%d", c->port);
  const struct {
    const char *key, *val;
  } keys[] = {{"{port}", port},
              {"{url}", c->url},
              {"{cell}", c->dir},
              {"{vlmmock}", c->m->vlmmock},
              {"{vlmload}", c->m->exe}};
  size_t cap = strlen(s) + 1, len = 0;
  char *out = vl_xmalloc(cap);
  while (*s) {
    size_t k = 0;
    for (; k < VL_ARRAY_SIZE(keys); k++)
      if (strncmp(s, keys[k].key, strlen(keys[k].key)) == 0)
        break;
    const char *piece = k < VL_ARRAY_SIZE(keys) ? keys[k].val : s;
    size_t n = k < VL_ARRAY_SIZE(keys) ? strlen(piece) : 1;
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      out = vl_xrealloc(out, cap);
    }
    memcpy(out + len, piece, n);
    len += n;
    s += k < VL_ARRAY_SIZE(keys) ? strlen(keys[k].key) : 1;
  }
  out[len] = '\0';
  return out;
}

static void subst_tree(const cell_t *c, cJSON *item) {
  for (; item; item = item->next) {
    if (cJSON_IsString(item)) {
      char *v = subst(c, item->valuestring);
      cJSON_SetValuestring(item, v);
      free(v);
    } else if (cJSON_IsArray(item) || cJSON_IsObject(item)) {
      subst_tree(c, item->child);
    }
  }
}

/* Options the matrix sets for every cell itself: the file may not give them. */
static const char *const reserved[] = {"output", "timeline", "plot", "report", "analyze"};

static int parse_duration(const cJSON *v, uint64_t *us) {
  if (cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 1e7) {
    *us = (uint64_t)(v->valuedouble * 1e6);
    return 0;
  }
  return cJSON_IsString(v) ? vl_units_duration(v->valuestring, us) : VL_EINVAL;
}

/* Reads a server object (where names it in errors) over base (the shared server's, or NULL for
 * the defaults). Returns 0 or 2 after saying why. */
static int read_server(const cJSON *o, const char *where, const server_spec_t *base,
                       server_spec_t *s) {
  if (base && base->command) {
    *s = *base;
  } else {
    memset(s, 0, sizeof(*s));
    s->health = "/health";
    s->ready_us = DEFAULT_READY_US;
    s->stop_us = DEFAULT_STOP_US;
    s->monitor = 1;
  }
  if (!cJSON_IsObject(o)) {
    say("%s: \"server\" must be an object (or null for none)", where);
    return 2;
  }
  for (const cJSON *k = o->child; k; k = k->next) {
    if (strcmp(k->string, "command") == 0) {
      const cJSON *a;
      int ok = cJSON_IsArray(k) && cJSON_GetArraySize(k) > 0;
      cJSON_ArrayForEach(a, k) ok = ok && cJSON_IsString(a) && a->valuestring[0];
      if (!ok) {
        say("%s: server \"command\" must be a list of strings, the program first", where);
        return 2;
      }
      s->command = k;
    } else if (strcmp(k->string, "health") == 0) {
      if (!cJSON_IsString(k) || k->valuestring[0] != '/') {
        say("%s: server \"health\" must be a route starting with / (as \"/health\")", where);
        return 2;
      }
      s->health = k->valuestring;
    } else if (strcmp(k->string, "ready_timeout") == 0 || strcmp(k->string, "stop_timeout") == 0) {
      uint64_t *dst = k->string[1] == 'e' ? &s->ready_us : &s->stop_us;
      if (parse_duration(k, dst) != 0 || *dst == 0) {
        say("%s: server \"%s\" must be a duration (as \"60s\", or a number of seconds)", where,
            k->string);
        return 2;
      }
    } else if (strcmp(k->string, "port") == 0) {
      if (!cJSON_IsNumber(k) || k->valuedouble < 1 || k->valuedouble > 65535 ||
          k->valuedouble != floor(k->valuedouble)) {
        say("%s: server \"port\" must be a port number (1 to 65535)", where);
        return 2;
      }
      s->port = k->valueint;
    } else if (strcmp(k->string, "monitor") == 0) {
      if (!cJSON_IsBool(k)) {
        say("%s: server \"monitor\" must be true or false", where);
        return 2;
      }
      s->monitor = cJSON_IsTrue(k);
    } else {
      say("%s: server: unknown key \"%s\" (want command, health, ready_timeout, stop_timeout, "
          "port, monitor)",
          where, k->string);
      return 2;
    }
  }
  if (!s->command) {
    say("%s: server: no \"command\" (the server's argv, as [\"{vlmmock}\", \"--port\", "
        "\"{port}\"])",
        where);
    return 2;
  }
  int has_port = 0;
  const cJSON *a;
  cJSON_ArrayForEach(a, s->command) has_port |= strstr(a->valuestring, "{port}") != NULL;
  if (!has_port && !s->port) {
    say("%s: server \"command\" has no {port}: give the server the port the matrix picks, or "
        "name a fixed one with \"port\"",
        where);
    return 2;
  }
  return 0;
}

static int valid_name(const char *s) {
  if (!*s || strlen(s) > 64 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
    return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '.' || *s == '_' || *s == '-'))
      return 0;
  return 1;
}

/* Reads the file's cells into m. Returns 0 or 2 after saying why. */
static int read_file(matrix_t *m) {
  const char *path = m->file_path;
  errno = 0;
  m->file = vl_json_load_file(path);
  if (!m->file) {
    say("'%s': %s", path, errno ? strerror(errno) : "not JSON");
    return 2;
  }
  if (!cJSON_IsObject(m->file)) {
    say("'%s': not a JSON object (want defaults, server and cells; see --help)", path);
    return 2;
  }
  const cJSON *defaults = NULL, *server = NULL, *cells = NULL;
  int has_server = 0;
  for (const cJSON *k = m->file->child; k; k = k->next) {
    if (strcmp(k->string, "defaults") == 0) {
      defaults = k;
    } else if (strcmp(k->string, "server") == 0) {
      server = k;
      has_server = 1;
    } else if (strcmp(k->string, "cells") == 0) {
      cells = k;
    } else {
      say("'%s': unknown key \"%s\" (want defaults, server, cells)", path, k->string);
      return 2;
    }
  }
  if (defaults && !cJSON_IsObject(defaults)) {
    say("'%s': \"defaults\" must be an object of vlmload options", path);
    return 2;
  }
  if (!cJSON_IsArray(cells) || cJSON_GetArraySize(cells) == 0) {
    say("'%s': \"cells\" must be a list of at least one cell (see --help)", path);
    return 2;
  }
  server_spec_t shared = {0};
  char where[512];
  snprintf(where, sizeof(where), "'%s'", path);
  if (has_server && !cJSON_IsNull(server) && read_server(server, where, NULL, &shared) != 0)
    return 2;
  has_server = has_server && !cJSON_IsNull(server);
  m->n = cJSON_GetArraySize(cells);
  m->cells = vl_xcalloc((size_t)m->n, sizeof(cell_t));
  const cJSON *cj;
  int i = 0;
  cJSON_ArrayForEach(cj, cells) {
    cell_t *c = &m->cells[i];
    c->m = m;
    c->index = i++;
    c->status = "not run";
    snprintf(where, sizeof(where), "'%s': cell %d", path, c->index + 1);
    if (!cJSON_IsObject(cj)) {
      say("%s: must be an object with a name and options", where);
      return 2;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cj, "name");
    if (!cJSON_IsString(name) || !valid_name(name->valuestring)) {
      say("%s: \"name\" must be 1 to 64 letters, digits, '.', '_' or '-' (it names the cell's "
          "folder)",
          where);
      return 2;
    }
    c->name = name->valuestring;
    for (int k = 0; k < c->index; k++)
      if (strcmp(m->cells[k].name, c->name) == 0) {
        say("%s: the name \"%s\" is cell %d's already", where, c->name, k + 1);
        return 2;
      }
    snprintf(where, sizeof(where), "'%s': cell '%s'", path, c->name);
    c->has_server = has_server;
    c->srv = shared;
    for (const cJSON *k = cj->child; k; k = k->next) {
      if (strcmp(k->string, "name") == 0)
        continue;
      if (strcmp(k->string, "options") == 0) {
        if (!cJSON_IsObject(k)) {
          say("%s: \"options\" must be an object of vlmload options", where);
          return 2;
        }
        c->given = k;
      } else if (strcmp(k->string, "server") == 0) {
        c->has_server = !cJSON_IsNull(k);
        if (c->has_server && read_server(k, where, &shared, &c->srv) != 0)
          return 2;
      } else {
        say("%s: unknown key \"%s\" (want name, options, server)", where, k->string);
        return 2;
      }
    }
    const cJSON *objs[2] = {defaults, c->given};
    for (int o = 0; o < 2; o++)
      for (size_t r = 0; r < VL_ARRAY_SIZE(reserved); r++)
        if (cJSON_GetObjectItemCaseSensitive(objs[o], reserved[r])) {
          say("%s: \"%s\" is the matrix's to set (each cell writes into DIR/CELL/); drop it",
              o ? where : path, reserved[r]);
          return 2;
        }
    if (c->has_server && !m->url)
      for (int o = 0; o < 2; o++)
        if (cJSON_GetObjectItemCaseSensitive(objs[o], "url")) {
          say("%s: \"url\" beside a server: the cell loads the server it starts "
              "(http://127.0.0.1:{port}); drop one",
              o ? where : path);
          return 2;
        }
    if (m->url)
      c->has_server = 0;
  }
  return 0;
}

/* A loopback port free now (bound and closed again), or 0. */
static int bind_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  int port = 0;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

/* A free loopback port that no running cell has picked, or 0. */
static int free_port(const matrix_t *m) {
  for (int tries = 0; tries < 16; tries++) {
    int port = bind_port(), taken = 0;
    for (int i = 0; i < m->n; i++)
      taken |= m->cells[i].port == port && m->cells[i].stage != ST_DONE &&
               m->cells[i].stage != ST_PENDING;
    if (!taken)
      return port;
  }
  return 0;
}

static void cell_path(const cell_t *c, char *buf, size_t len, const char *file) {
  snprintf(buf, len, "%s/%s", c->dir, file);
}

/* The cell's options (defaults, then its own), substituted and rebased, written to
 * DIR/CELL/config.json; and the child's argv, with pid as the server's (0: none). Returns 0, or
 * VL_EIO with why. */
static int prepare(cell_t *c, long pid, char *why, size_t whylen) {
  matrix_t *m = c->m;
  const cJSON *defaults = cJSON_GetObjectItemCaseSensitive(m->file, "defaults");
  cJSON_Delete(c->options);
  c->options = defaults ? cJSON_Duplicate(defaults, 1) : cJSON_CreateObject();
  for (const cJSON *k = c->given ? c->given->child : NULL; k; k = k->next) {
    cJSON_DeleteItemFromObjectCaseSensitive(c->options, k->string);
    cJSON_AddItemToObject(c->options, k->string, cJSON_Duplicate(k, 1));
  }
  subst_tree(c, c->options->child);
  vl_config_rebase_paths(c->options, m->file_dir);
  char path[PATH_MAX + 64];
  cell_path(c, path, sizeof(path), "config.json");
  char *text = cJSON_Print(c->options);
  int rc = vl_outfile_write_text(path, text, why, whylen);
  free(text);
  if (rc != 0)
    return VL_EIO;

  argv_free(c->load_argv);
  c->load_argv = NULL;
  int n = 0;
  argv_push(&c->load_argv, &n, m->exe);
  argv_push(&c->load_argv, &n, "--config");
  argv_push(&c->load_argv, &n, path);
  const char *outs[][2] = {{"--output", "summary.json"}, {"--timeline", "timeline.csv"}};
  for (size_t i = 0; i < VL_ARRAY_SIZE(outs); i++) {
    cell_path(c, path, sizeof(path), outs[i][1]);
    argv_push(&c->load_argv, &n, outs[i][0]);
    argv_push(&c->load_argv, &n, path);
  }
  argv_push(&c->load_argv, &n, "--analyze");
  if (m->gnuplot) {
    cell_path(c, path, sizeof(path), "memory.png");
    argv_push(&c->load_argv, &n, "--plot");
    argv_push(&c->load_argv, &n, path);
    argv_push(&c->load_argv, &n, "--gnuplot");
    argv_push(&c->load_argv, &n, m->gnuplot);
    if (m->report) {
      cell_path(c, path, sizeof(path), "report.html");
      argv_push(&c->load_argv, &n, "--report");
      argv_push(&c->load_argv, &n, path);
    }
  }
  if (c->has_server || m->url) {
    argv_push(&c->load_argv, &n, "--url");
    argv_push(&c->load_argv, &n, c->url);
  }
  if (c->has_server && c->srv.monitor && pid > 0 &&
      !cJSON_GetObjectItemCaseSensitive(c->options, "monitor-tree")) {
    char tree[64];
    snprintf(tree, sizeof(tree), TREE_LABEL "=%ld", pid);
    argv_push(&c->load_argv, &n, "--monitor-tree");
    argv_push(&c->load_argv, &n, tree);
    if (m->gpu)
      argv_push(&c->load_argv, &n, "--monitor-gpu");
  }
  for (int i = 0; i < m->n_extra; i++) {
    char *v = subst(c, m->extra[i]);
    argv_push(&c->load_argv, &n, v);
    free(v);
  }
  return 0;
}

/* Parses every cell's configuration as its child will, before any runs. Returns 0 or 2. */
static int check_cells(matrix_t *m) {
  for (int i = 0; i < m->n; i++) {
    cell_t *c = &m->cells[i];
    char why[512];
    c->port = c->srv.port ? c->srv.port : 1;
    if (c->has_server)
      snprintf(c->url, sizeof(c->url), "http://127.0.0.1:%d", c->port);
    else if (m->url)
      snprintf(c->url, sizeof(c->url), "%s", m->url);
    if (prepare(c, (long)getpid(), why, sizeof(why)) != 0) {
      say("%s/config.json: %s", c->dir, why);
      return 2;
    }
    int argc = 0;
    while (c->load_argv[argc])
      argc++;
    char *buf = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&buf, &len);
    FILE *out = fopen("/dev/null", "w");
    vl_config_t cfg;
    int rc = vl_config_parse(&cfg, argc, c->load_argv, out ? out : err, err);
    vl_config_free(&cfg);
    if (out)
      fclose(out);
    fclose(err);
    if (rc != VL_CONFIG_RUN) {
      char *line = buf;
      if (strncmp(line, "vlmload: ", 9) == 0)
        line += 9;
      line[strcspn(line, "\n")] = '\0';
      say("cell '%s': %s", c->name, rc == 0 ? "its options ask for help, not a run" : line);
      free(buf);
      return 2;
    }
    free(buf);
  }
  return 0;
}

static void next_cell(matrix_t *m);

/* Whether anything is left of the server's process group (its id stays taken while it has a
 * member). Once seen empty it is never signalled again: the id may then go to another process. */
static int group_alive(cell_t *c) {
  if (!c->srv_started || c->group_gone || c->srv_proc.pid <= 0)
    return 0;
  if (kill(-c->srv_proc.pid, 0) == 0)
    return 1;
  c->group_gone = 1;
  return 0;
}

static void signal_group(cell_t *c, int signum) {
  if (group_alive(c))
    vl_child_signal_group(&c->srv_proc, signum);
}

static void describe_exit(char *buf, size_t len, int64_t status, int sig) {
  if (sig)
    snprintf(buf, len, "killed by signal %d", sig);
  else
    snprintf(buf, len, "exit status %lld", (long long)status);
}

static void load_summary(cell_t *c) {
  char path[PATH_MAX + 64];
  cell_path(c, path, sizeof(path), "summary.json");
  cJSON_Delete(c->summary);
  c->summary = vl_json_load_file(path);
}

static void finish_cell(cell_t *c) {
  matrix_t *m = c->m;
  uv_timer_stop(&c->timer);
  if (c->srv_started && c->srv_proc.pid > 0)
    signal_group(c, SIGKILL); /* anything of the server's still in its group */
  c->stage = ST_DONE;
  c->end_ms = vl_wall_ms();
  if (c->load_started)
    load_summary(c);
  char how[64];
  describe_exit(how, sizeof(how), c->load_status, c->load_signal);
  if (!c->error[0]) {
    if (!c->load_started)
      c->status = m->signals ? "interrupted" : "failed";
    else if (c->load_signal ||
             (c->load_status != 0 && c->load_status != 3 && c->load_status != 130))
      fail(c, "the load failed (%s; its messages are above, its text summary in %s/output.txt)",
           how, c->name);
    else if (c->load_status == 130 || m->signals)
      c->status = "interrupted";
    else if (!c->summary)
      fail(c, "the load wrote no summary (%s/summary.json)", c->name);
    else
      c->status = "ok";
  }
  if (c->error[0])
    note(m, c, "failed: %s", c->error);
  else
    note(m, c, "%s in %.1fs%s%s", c->status, c->load_s, c->stopped ? ", server stopped by " : "",
         c->stopped ? c->stopped : "");
  m->running--;
  next_cell(m);
}

static void on_tick(uv_timer_t *t);

static void tick_start(cell_t *c) {
  uv_timer_start(&c->timer, on_tick, TICK_MS, TICK_MS);
}

/* SIGTERM to the server's group, and SIGKILL at the deadline (on_tick); the cell finishes once
 * the group is gone, at once when nothing of it is left. */
static void stop_server(cell_t *c) {
  c->stage = ST_STOPPING;
  c->deadline_ns = uv_hrtime() + c->srv.stop_us * 1000;
  if (!c->srv_running && !group_alive(c)) {
    finish_cell(c);
    return;
  }
  if (!c->stopped)
    c->stopped = c->srv_running ? "SIGTERM" : "exited";
  signal_group(c, SIGTERM);
  tick_start(c);
}

static void on_load_exit(uv_process_t *proc, int64_t status, int sig) {
  cell_t *c = proc->data;
  c->load_running = 0;
  c->load_status = status;
  c->load_signal = sig;
  c->load_s = (double)(uv_hrtime() - c->t0_ns) / 1e9;
  uv_close((uv_handle_t *)proc, NULL);
  if (c->has_server && (c->srv_running || group_alive(c))) {
    stop_server(c);
  } else {
    finish_cell(c);
  }
}

static void start_load(cell_t *c) {
  matrix_t *m = c->m;
  char why[512], path[PATH_MAX + 64];
  uv_timer_stop(&c->timer);
  c->stage = ST_LOADING;
  if (prepare(c, c->srv_started ? (long)c->srv_proc.pid : 0, why, sizeof(why)) != 0) {
    fail(c, "%s/config.json: %s", c->dir, why);
    stop_server(c);
    return;
  }
  cell_path(c, path, sizeof(path), "output.txt");
  int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    fail(c, "%s: %s", path, strerror(errno));
    stop_server(c);
    return;
  }
  c->load_proc.data = c;
  vl_child_opts_t o = {.file = m->exe,
                       .args = c->load_argv,
                       .in_fd = -1,
                       .out_fd = out,
                       .err_fd = -1,
                       .exit_cb = on_load_exit};
  c->t0_ns = uv_hrtime();
  int rc = vl_child_spawn(&m->loop, &c->load_proc, &o);
  close(out);
  if (rc != 0) {
    fail(c, "cannot start the load (%s): %s", m->exe, uv_strerror(rc));
    stop_server(c);
    return;
  }
  c->load_started = c->load_running = 1;
  note(m, c, "load started%s%s", c->has_server ? " against " : "", c->has_server ? c->url : "");
}

/* Starts the loads of the cells whose servers are ready, once no other server is starting. */
static void release_ready(matrix_t *m) {
  for (int i = 0; i < m->n; i++)
    if (m->cells[i].stage == ST_STARTING)
      return;
  for (int i = 0; i < m->n; i++)
    if (m->cells[i].stage == ST_READY)
      start_load(&m->cells[i]);
}

static void on_server_exit(uv_process_t *proc, int64_t status, int sig) {
  cell_t *c = proc->data;
  char how[64];
  c->srv_running = 0;
  c->srv_status = status;
  c->srv_signal = sig;
  uv_close((uv_handle_t *)proc, NULL);
  describe_exit(how, sizeof(how), status, sig);
  switch (c->stage) {
  case ST_STARTING:
  case ST_READY:
    if (!c->m->signals)
      fail(c, "the server exited (%s) before %s; its output is in %s/server.log", how,
           c->stage == ST_READY ? "its load started" : "it was ready", c->name);
    c->stopped = "exited";
    finish_cell(c); /* which kills what is left of its group */
    release_ready(c->m);
    break;
  case ST_LOADING:
    fail(c, "the server exited during the load (%s); its output is in %s/server.log", how, c->name);
    c->stopped = "exited";
    signal_group(c, SIGKILL); /* what is left of it, now, while its group id is still its own */
    if (c->load_running)      /* the load stops and writes what it measured */
      uv_process_kill(&c->load_proc, SIGINT);
    break;
  case ST_STOPPING:
    if (!group_alive(c))
      finish_cell(c);
    break;
  default:
    break;
  }
}

static void on_tick(uv_timer_t *t) {
  cell_t *c = t->data;
  matrix_t *m = c->m;
  uint64_t now = uv_hrtime();
  if (c->stage == ST_STARTING && c->srv_running) {
    int rc = 0;
    vl_config_t probe; /* a plain GET of the cell's url */
    memset(&probe, 0, sizeof(probe));
    probe.url = c->url;
    long st = vl_server_status(&probe, c->srv.health, HEALTH_POLL_MS, &rc, c->health_err,
                               sizeof(c->health_err));
    if (st == 200) {
      c->ready_s = (double)(uv_hrtime() - c->t0_ns) / 1e9;
      note(m, c, "server ready in %.1fs", c->ready_s);
      c->stage = ST_READY;
      release_ready(m);
      return;
    }
    if (st)
      snprintf(c->health_err, sizeof(c->health_err), "GET %s%s answered HTTP %ld", c->url,
               c->srv.health, st);
    if (uv_hrtime() >= c->deadline_ns) {
      fail(c, "the server was not ready within %.6gs (%s); its output is in %s/server.log",
           (double)c->srv.ready_us / 1e6, c->health_err, c->name);
      stop_server(c);
      release_ready(m);
    }
  } else if (c->stage == ST_STOPPING) {
    if (!c->srv_running && !group_alive(c)) {
      finish_cell(c);
    } else if (now >= c->deadline_ns && !c->killed) {
      signal_group(c, SIGKILL);
      c->killed = 1;
      c->stopped = "SIGKILL";
      note(m, c, "the server did not stop within %.6gs of SIGTERM: killed",
           (double)c->srv.stop_us / 1e6);
    } else if (c->killed && !c->srv_running && now >= c->deadline_ns + 2000000000ull) {
      finish_cell(c); /* what is left of the group is not ours to wait for (zombies) */
    }
  }
}

static void start_cell(cell_t *c) {
  matrix_t *m = c->m;
  char path[PATH_MAX + 64];
  c->start_ms = vl_wall_ms();
  if (mkdir(c->dir, 0755) != 0 && errno != EEXIST) {
    fail(c, "cannot make %s: %s", c->dir, strerror(errno));
    finish_cell(c);
    return;
  }
  if (!c->has_server) {
    start_load(c);
    return;
  }
  c->port = c->srv.port ? c->srv.port : free_port(m);
  snprintf(c->url, sizeof(c->url), "http://127.0.0.1:%d", c->port);
  int n = 0;
  const cJSON *a;
  cJSON_ArrayForEach(a, c->srv.command) {
    char *v = subst(c, a->valuestring);
    if (n == 0 && v[0] != '/' && strchr(v, '/')) { /* a program named by a relative path */
      char full[2 * PATH_MAX];
      snprintf(full, sizeof(full), "%s/%s", m->file_dir, v);
      free(v);
      v = vl_xstrdup(full);
    }
    argv_push(&c->srv_argv, &n, v);
    free(v);
  }
  cell_path(c, path, sizeof(path), "server.log");
  int log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log < 0) {
    fail(c, "%s: %s", path, strerror(errno));
    if (null >= 0)
      close(null);
    finish_cell(c);
    return;
  }
  c->srv_proc.data = c;
  vl_child_opts_t o = {.file = c->srv_argv[0],
                       .args = c->srv_argv,
                       .in_fd = null,
                       .out_fd = log,
                       .err_fd = log,
                       .exit_cb = on_server_exit};
  c->t0_ns = uv_hrtime();
  int rc = vl_child_spawn(&m->loop, &c->srv_proc, &o);
  close(log);
  if (null >= 0)
    close(null);
  if (rc != 0) {
    fail(c, "cannot start the server '%s': %s", c->srv_argv[0], uv_strerror(rc));
    finish_cell(c);
    return;
  }
  c->srv_started = c->srv_running = 1;
  c->stage = ST_STARTING;
  c->deadline_ns = c->t0_ns + c->srv.ready_us * 1000;
  snprintf(c->health_err, sizeof(c->health_err), "no answer yet");
  const char *prog = strrchr(c->srv_argv[0], '/');
  note(m, c, "%s started (pid %d, port %d)", prog ? prog + 1 : c->srv_argv[0], c->srv_proc.pid,
       c->port);
  tick_start(c);
}

/* Starts cells while fewer than --parallel run; once none runs and none is left to start (or a
 * signal came), closes the loop's handles. A cell may finish inside start_cell (a server that
 * cannot start), which comes back here: the loop reads the counts afresh each time. */
static void next_cell(matrix_t *m) {
  while (m->running < m->parallel && m->next < m->n && !m->signals) {
    m->running++;
    start_cell(&m->cells[m->next++]);
  }
  if (m->running > 0 || m->closed)
    return;
  m->closed = 1;
  uv_signal_stop(&m->sig_int);
  uv_signal_stop(&m->sig_term);
  uv_close((uv_handle_t *)&m->sig_int, NULL);
  uv_close((uv_handle_t *)&m->sig_term, NULL);
  for (int i = 0; i < m->n; i++)
    uv_close((uv_handle_t *)&m->cells[i].timer, NULL);
}

/* A signal's part for one cell, by its stage. */
static void signal_cell(cell_t *c, int signum) {
  matrix_t *m = c->m;
  switch (c->stage) {
  case ST_STARTING:
  case ST_READY:
    c->status = "interrupted";
    stop_server(c);
    break;
  case ST_LOADING:
    if (c->load_running)
      uv_process_kill(&c->load_proc, signum);
    break;
  case ST_STOPPING:
    if (m->signals > 1 && !c->killed) {
      signal_group(c, SIGKILL);
      c->killed = 1;
      c->stopped = "SIGKILL";
    }
    break;
  default:
    break;
  }
}

static void on_signal(uv_signal_t *h, int signum) {
  matrix_t *m = h->data;
  if (++m->signals == 1)
    say("stopping: the running cell%s and %s server%s; no further cell runs (again to cancel "
        "the requests in flight)",
        m->running == 1 ? "" : "s", m->running == 1 ? "its" : "their", m->running == 1 ? "" : "s");
  for (int i = 0; i < m->n; i++)
    signal_cell(&m->cells[i], signum);
}

/* The outputs. */

static double num(const cJSON *o, const char *a, const char *b) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
  if (b)
    v = cJSON_GetObjectItemCaseSensitive(v, b);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const cJSON *series_of(const cell_t *c) {
  const cJSON *an = cJSON_GetObjectItemCaseSensitive(c->summary, "memory_analysis");
  return cJSON_GetObjectItemCaseSensitive(an, "series");
}

static cJSON *str_list(char **v) {
  cJSON *a = cJSON_CreateArray();
  for (char **p = v; p && *p; p++)
    cJSON_AddItemToArray(a, cJSON_CreateString(*p));
  return a;
}

static void add_num(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

static cJSON *cell_json(const cell_t *c) {
  cJSON *o = cJSON_CreateObject();
  char rel[512];
  cJSON_AddStringToObject(o, "name", c->name);
  cJSON_AddStringToObject(o, "status", c->status);
  if (c->error[0])
    cJSON_AddStringToObject(o, "error", c->error);
  else
    cJSON_AddNullToObject(o, "error");
  cJSON_AddStringToObject(o, "dir", c->name);
  add_num(o, "start_ms", c->start_ms ? (double)c->start_ms : NAN);
  add_num(o, "end_ms", c->end_ms ? (double)c->end_ms : NAN);
  cJSON_AddItemToObject(o, "options",
                        c->options ? cJSON_Duplicate(c->options, 1) : cJSON_CreateObject());
  cJSON_AddItemToObject(o, "load_command", str_list(c->load_started ? c->load_argv : NULL));
  if (c->has_server) {
    cJSON *s = cJSON_AddObjectToObject(o, "server");
    cJSON_AddItemToObject(s, "command", str_list(c->srv_argv));
    cJSON_AddStringToObject(s, "url", c->url);
    cJSON_AddNumberToObject(s, "port", c->port);
    if (c->srv_started)
      cJSON_AddNumberToObject(s, "pid", c->srv_proc.pid);
    else
      cJSON_AddNullToObject(s, "pid");
    cJSON_AddStringToObject(s, "health", c->srv.health);
    add_num(s, "ready_s", c->ready_s > 0 ? c->ready_s : NAN);
    if (c->stopped)
      cJSON_AddStringToObject(s, "stopped", c->stopped);
    else
      cJSON_AddNullToObject(s, "stopped");
    if (c->srv_started && !c->srv_running) {
      cJSON *e = cJSON_AddObjectToObject(s, "exit");
      cJSON_AddNumberToObject(e, "status", (double)c->srv_status);
      cJSON_AddNumberToObject(e, "signal", c->srv_signal);
    } else {
      cJSON_AddNullToObject(s, "exit");
    }
    snprintf(rel, sizeof(rel), "%s/server.log", c->name);
    cJSON_AddStringToObject(s, "log", rel);
  } else {
    cJSON_AddNullToObject(o, "server");
  }
  if (c->summary) {
    cJSON *s = cJSON_AddObjectToObject(o, "summary");
    snprintf(rel, sizeof(rel), "%s/summary.json", c->name);
    cJSON_AddStringToObject(s, "file", rel);
    cJSON_AddNumberToObject(s, "exit_status",
                            c->load_signal ? 128 + c->load_signal : (double)c->load_status);
    const char *keys[] = {"stop_reason", "interrupted", "duration_s",
                          "requests",    "rate",        "latency_ms"};
    for (size_t k = 0; k < VL_ARRAY_SIZE(keys); k++) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->summary, keys[k]);
      if (v)
        cJSON_AddItemToObject(s, keys[k], cJSON_Duplicate(v, 1));
    }
    add_num(s, "achieved_rate", num(c->summary, "rate", "achieved"));
    add_num(s, "e2e_p50_ms", num(c->summary, "latency_ms", "p50"));
  } else {
    cJSON_AddNullToObject(o, "summary");
  }
  const cJSON *series = series_of(c);
  cJSON_AddItemToObject(o, "series", series ? cJSON_Duplicate(series, 1) : cJSON_CreateArray());
  return o;
}

static int write_json(const matrix_t *m) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "vlmload_version", VL_VERSION);
  cJSON_AddStringToObject(root, "file", m->file_path);
  cJSON_AddBoolToObject(root, "interrupted", m->signals > 0);
  cJSON *cells = cJSON_AddArrayToObject(root, "cells");
  for (int i = 0; i < m->n; i++)
    cJSON_AddItemToArray(cells, cell_json(&m->cells[i]));
  char *text = cJSON_Print(root), path[PATH_MAX + 64], why[256];
  snprintf(path, sizeof(path), "%s/matrix.json", m->out_dir);
  int rc = vl_outfile_write_text(path, text, why, sizeof(why));
  if (rc != 0)
    say("'%s': %s", path, why);
  free(text);
  cJSON_Delete(root);
  return rc ? 1 : 0;
}

/* A figure of the table: "-" when unknown. */
static void fig(char *buf, size_t len, const char *fmt, double v) {
  if (isfinite(v))
    snprintf(buf, len, fmt, v);
  else
    snprintf(buf, len, "-");
}

typedef struct {
  char cell[72], series[160], verdict[32], slope[96], floor[32], rate[24], p50[24];
} row_t;

static const cJSON *fit_of(const cJSON *s, const char *a, const char *b) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, a);
  return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

/* An OLS slope and its interval, which is symmetric about it: "+62.52 +/- 0.03", with the unit
 * when it is not MB. */
static void slope_text(char *buf, size_t len, const cJSON *fit, const char *unit) {
  double v = num(fit, "slope_per_1000", NULL);
  const cJSON *ci = cJSON_GetObjectItemCaseSensitive(fit, "ci");
  const cJSON *lo = cJSON_GetArrayItem(ci, 0), *hi = cJSON_GetArrayItem(ci, 1);
  if (!isfinite(v))
    snprintf(buf, len, "-");
  else if (cJSON_IsNumber(lo) && cJSON_IsNumber(hi))
    snprintf(buf, len, "%+.2f +/- %.2f", v, (hi->valuedouble - lo->valuedouble) / 2);
  else
    snprintf(buf, len, "%+.2f", v);
  if (isfinite(v) && unit && strcmp(unit, "MB") != 0) {
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, " %s", unit);
  }
}

/* The comparison table, on f. */
static void print_table(const matrix_t *m, FILE *f) {
  size_t cap = 16, n = 0;
  row_t *rows = vl_xcalloc(cap, sizeof(row_t));
  row_t head = {"cell", "series", "verdict", "MB/1000 req", "floor", "req/s", "p50 ms"};
  rows[n++] = head;
  for (int i = 0; i < m->n; i++) {
    const cell_t *c = &m->cells[i];
    const cJSON *series = series_of(c), *s;
    char rate[24], p50[24];
    fig(rate, sizeof(rate), "%.1f", num(c->summary, "rate", "achieved"));
    fig(p50, sizeof(p50), "%.2f", num(c->summary, "latency_ms", "p50"));
    int any = 0;
    cJSON_ArrayForEach(s, series) {
      if (n == cap)
        rows = vl_xrealloc(rows, (cap *= 2) * sizeof(row_t));
      row_t *r = &rows[n++];
      memset(r, 0, sizeof(*r));
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "series");
      const cJSON *verdict = cJSON_GetObjectItemCaseSensitive(s, "verdict");
      snprintf(r->cell, sizeof(r->cell), "%s", any ? "" : c->name);
      vl_text_shown(r->series, sizeof(r->series), cJSON_IsString(name) ? name->valuestring : "?");
      snprintf(r->verdict, sizeof(r->verdict), "%s",
               cJSON_IsString(verdict) ? verdict->valuestring : "-");
      const cJSON *unit = cJSON_GetObjectItemCaseSensitive(s, "unit");
      slope_text(r->slope, sizeof(r->slope), fit_of(s, "ols", NULL),
                 cJSON_IsString(unit) ? unit->valuestring : NULL);
      fig(r->floor, sizeof(r->floor), "%+.2f",
          num(fit_of(s, "floor", "fit"), "slope_per_1000", NULL));
      snprintf(r->rate, sizeof(r->rate), "%s", any ? "" : rate);
      snprintf(r->p50, sizeof(r->p50), "%s", any ? "" : p50);
      any = 1;
    }
    if (!any || strcmp(c->status, "ok") != 0) {
      if (n == cap)
        rows = vl_xrealloc(rows, (cap *= 2) * sizeof(row_t));
      row_t *r = &rows[n++];
      memset(r, 0, sizeof(*r));
      snprintf(r->cell, sizeof(r->cell), "%s", any ? "" : c->name);
      snprintf(r->series, sizeof(r->series), "%s",
               strcmp(c->status, "ok") == 0 ? "(no memory series)" : c->status);
      snprintf(r->rate, sizeof(r->rate), "%s", any ? "" : rate);
      snprintf(r->p50, sizeof(r->p50), "%s", any ? "" : p50);
    }
  }
  int w[7] = {0};
  for (size_t i = 0; i < n; i++) {
    const char *cols[7] = {rows[i].cell,  rows[i].series, rows[i].verdict, rows[i].slope,
                           rows[i].floor, rows[i].rate,   rows[i].p50};
    for (int k = 0; k < 7; k++)
      w[k] = VL_MAX(w[k], (int)strlen(cols[k]));
  }
  for (size_t i = 0; i < n; i++) {
    const row_t *r = &rows[i];
    char line[1024];
    int len = snprintf(line, sizeof(line), "%-*s  %-*s  %-*s  %*s  %*s  %*s  %*s", w[0], r->cell,
                       w[1], r->series, w[2], r->verdict, w[3], r->slope, w[4], r->floor, w[5],
                       r->rate, w[6], r->p50);
    len = VL_MIN(len, (int)sizeof(line) - 1);
    while (len > 0 && line[len - 1] == ' ')
      len--;
    fprintf(f, "%.*s\n", len, line);
  }
  for (int i = 0; i < m->n; i++)
    if (m->cells[i].error[0])
      fprintf(f, "%s: %s\n", m->cells[i].name, m->cells[i].error);
  fputs("MB/1000 req: the slope over requests completed after the warm-up (OLS), +/- its 95%\n"
        "interval; floor: the post-flush floor's slope, in the same unit\n",
        f);
  free(rows);
}

/* The series of a cell the chart of every cell draws: the server's tree, else the first
 * resident set, else none (-1). */
static int rss_series(const vl_series_set_t *set) {
  int first = -1;
  for (size_t k = 0; k < set->nser; k++) {
    const char *nm = set->ser[k].name;
    if (strcmp(nm, "rss_mb." TREE_LABEL) == 0)
      return (int)k;
    if (first < 0 && strncmp(nm, "rss_mb.", 7) == 0 && !strchr(nm, '/'))
      first = (int)k;
  }
  return first;
}

/* The plot of every cell's resident set; each set read is kept in sets for the call. */
typedef struct {
  vl_series_set_t *sets;
  vl_csv_t **tables;
  vl_plot_line_t *lines;
  size_t n_lines;
  int n;
} rss_t;

static void rss_read(const matrix_t *m, rss_t *r) {
  r->n = m->n;
  r->sets = vl_xcalloc((size_t)m->n, sizeof(vl_series_set_t));
  r->tables = vl_xcalloc((size_t)m->n, sizeof(vl_csv_t *));
  r->lines = vl_xcalloc((size_t)m->n, sizeof(vl_plot_line_t));
  for (int i = 0; i < m->n; i++) {
    const cell_t *c = &m->cells[i];
    char path[PATH_MAX + 64], err[512];
    if (!c->load_started)
      continue;
    cell_path(c, path, sizeof(path), "timeline.csv");
    vl_series_opts_t o;
    vl_series_opts_init(&o);
    if (vl_csv_load(&r->tables[i], path, err, sizeof(err)) != 0)
      continue;
    vl_csv_drop_rows(r->tables[i], "phase", VL_RATEAUTO_PHASE); /* the probe's rows, as analyze */
    if (vl_series_read(&r->sets[i], r->tables[i], NULL, &o, err, sizeof(err)) != 0)
      continue;
    int k = rss_series(&r->sets[i]);
    if (k < 0)
      continue;
    const vl_series_mem_t *s = &r->sets[i].ser[k];
    r->lines[r->n_lines++] = (vl_plot_line_t){.name = c->name, .x = s->x, .y = s->y, .n = s->n};
  }
}

static void rss_free(rss_t *r) {
  for (int i = 0; i < r->n; i++) {
    vl_series_free(&r->sets[i]);
    vl_csv_free(r->tables[i]);
  }
  free(r->sets);
  free(r->tables);
  free(r->lines);
}

static vl_plot_t rss_plot(const matrix_t *m, const rss_t *r) {
  return (vl_plot_t){.title = "Resident set of every cell",
                     .y_unit = "MB",
                     .lines = r->lines,
                     .n_lines = r->n_lines,
                     .y_mode = VL_PLOT_Y_ABS,
                     .gnuplot = m->gnuplot};
}

/* DIR/rss.png, or without gnuplot DIR/rss.gp (its script, data included). Returns 0 or 1. */
static int write_rss(const matrix_t *m, const rss_t *r) {
  char png[PATH_MAX + 64], err[512];
  snprintf(png, sizeof(png), "%s/rss.png", m->out_dir);
  if (r->n_lines == 0)
    return 0;
  vl_plot_t p = rss_plot(m, r);
  if (m->gnuplot) {
    if (vl_plot_write(&p, png, err, sizeof(err)) != 0) {
      say("%s: %s", png, err);
      return 1;
    }
    return 0;
  }
  char gp[PATH_MAX + 64];
  snprintf(gp, sizeof(gp), "%s/rss.gp", m->out_dir);
  FILE *f = fopen(gp, "w");
  int bad = !f || vl_plot_script(&p, "rss.png", f) != 0;
  if (f && fclose(f) != 0)
    bad = 1;
  if (bad) {
    say("'%s': %s", gp, strerror(errno));
    return 1;
  }
  return 0;
}

/* --report: the table and the resident sets on one page. Returns 0 or 1. */
static int write_report(const matrix_t *m, const rss_t *r) {
  char *svg = NULL, err[512];
  vl_plot_t p = rss_plot(m, r);
  if (r->n_lines && vl_plot_svg(&p, &svg, err, sizeof(err)) != 0)
    say("--report: the chart of resident sets: %s", err);
  char *table = NULL;
  size_t len = 0;
  FILE *t = open_memstream(&table, &len);
  print_table(m, t);
  fclose(t);
  char *page = NULL;
  FILE *f = open_memstream(&page, &len);
  fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>vlmload matrix: ", f);
  vl_htmlreport_escape(f, m->file_path);
  fputs("</title><style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;"
        "padding:1em}svg{max-width:100%;height:auto}</style></head><body>\n<h1>vlmload matrix: ",
        f);
  vl_htmlreport_escape(f, m->file_path);
  fprintf(f, "</h1>\n<p>%d cells%s; each cell's own report is CELL/report.html in ", m->n,
          m->signals ? ", interrupted" : "");
  vl_htmlreport_escape(f, m->out_dir);
  fputs(".</p>\n<pre>", f);
  vl_htmlreport_escape(f, table);
  fputs("</pre>\n", f);
  if (svg)
    fprintf(f, "<h2>Resident set of every cell</h2>\n%s\n", svg);
  fputs("</body></html>", f);
  fclose(f);
  char why[256];
  int rc = vl_outfile_write_text(m->report, page, why, sizeof(why));
  if (rc != 0)
    say("--report '%s': %s", m->report, why);
  free(page);
  free(table);
  free(svg);
  return rc ? 1 : 0;
}

static int mkdir_p(const char *dir) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof(buf), "%s", dir);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
      *p = '/';
    }
  return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int gpu_present(void) {
  vl_nvml_t n;
  char err[256];
  memset(&n, 0, sizeof(n));
  int yes = vl_nvml_open(&n, err, sizeof(err)) == 0 && vl_nvml_count(&n) > 0;
  vl_nvml_close(&n);
  return yes;
}

/* --dry-run: what each cell would run, as the file gives it (placeholders unreplaced). */
static void describe(const matrix_t *m, FILE *f) {
  const cJSON *defaults = cJSON_GetObjectItemCaseSensitive(m->file, "defaults");
  for (int i = 0; i < m->n; i++) {
    const cell_t *c = &m->cells[i];
    fprintf(f, "cell %d/%d %s\n", i + 1, m->n, c->name);
    if (c->has_server) {
      fputs("  server   ", f);
      const cJSON *a;
      cJSON_ArrayForEach(a, c->srv.command) {
        vl_text_fput_shown(f, a->valuestring);
        fputc(a->next ? ' ' : '\n', f);
      }
      fprintf(f,
              "           ready when GET %s answers 200 (within %.6gs); stopped by SIGTERM, "
              "SIGKILL after %.6gs\n",
              c->srv.health, (double)c->srv.ready_us / 1e6, (double)c->srv.stop_us / 1e6);
    } else {
      fprintf(f, "  server   none: the load goes to %s\n",
              m->url ? m->url : "the url of its options");
    }
    cJSON *merged = defaults ? cJSON_Duplicate(defaults, 1) : cJSON_CreateObject();
    for (const cJSON *k = c->given ? c->given->child : NULL; k; k = k->next) {
      cJSON_DeleteItemFromObjectCaseSensitive(merged, k->string);
      cJSON_AddItemToObject(merged, k->string, cJSON_Duplicate(k, 1));
    }
    char *text = cJSON_PrintUnformatted(merged);
    fputs("  options  ", f);
    vl_text_fput_shown(f, text);
    for (int k = 0; k < m->n_extra; k++) {
      fputc(' ', f);
      vl_text_fput_shown(f, m->extra[k]);
    }
    fprintf(f, "\n%s",
            c->has_server && c->srv.monitor ? "           its server's process tree "
                                              "sampled (--monitor-tree server=PID)\n"
                                            : "");
    free(text);
    cJSON_Delete(merged);
  }
}

/* Removes what check_cells wrote into a temporary --output-dir. */
static void remove_dir(const matrix_t *m) {
  char path[PATH_MAX + 64];
  for (int i = 0; i < m->n; i++) {
    cell_path(&m->cells[i], path, sizeof(path), "config.json");
    unlink(path);
    rmdir(m->cells[i].dir);
  }
  rmdir(m->out_dir);
}

/* --cells: keeps only the cells named, in the file's order. Returns 0, or 2 when a name is not a
 * cell of the file (said, with the names there are). */
static int select_cells(matrix_t *m) {
  if (!m->only)
    return 0;
  char *keep = vl_xcalloc((size_t)m->n, 1);
  const char *p = m->only;
  int status = 0;
  while (status == 0) {
    size_t len = strcspn(p, ",");
    int found = -1;
    for (int i = 0; i < m->n && found < 0; i++)
      if (len && strlen(m->cells[i].name) == len && memcmp(m->cells[i].name, p, len) == 0)
        found = i;
    if (found < 0) {
      fprintf(stderr, PROG ": --cells: '%.*s' is not a cell of '%s'; its cells are:", (int)len, p,
              m->file_path);
      for (int i = 0; i < m->n; i++)
        fprintf(stderr, "%s %s", i ? "," : "", m->cells[i].name);
      fputc('\n', stderr);
      status = 2;
      break;
    }
    keep[found] = 1;
    if (!p[len])
      break;
    p += len + 1;
  }
  if (status == 0) {
    int n = 0;
    for (int i = 0; i < m->n; i++)
      if (keep[i]) {
        m->cells[n] = m->cells[i];
        m->cells[n].index = n;
        n++;
      }
    m->n = n;
  }
  free(keep);
  return status;
}

/* Parses the command line into m. Returns -1 to go on, or the exit status. */
static int parse_args(matrix_t *m, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char **dst = NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      vl_matrix_usage(stdout);
      return 0;
    } else if (strcmp(a, "--") == 0) {
      m->extra = argv + i + 1;
      m->n_extra = argc - i - 1;
      break;
    } else if (strcmp(a, "--quiet") == 0) {
      m->quiet = 1;
      continue;
    } else if (strcmp(a, "--dry-run") == 0) {
      m->dry_run = 1;
      continue;
    } else if (strcmp(a, "--output-dir") == 0) {
      dst = &m->out_dir;
    } else if (strcmp(a, "--url") == 0) {
      dst = &m->url;
    } else if (strcmp(a, "--report") == 0) {
      dst = &m->report;
    } else if (strcmp(a, "--cells") == 0) {
      dst = &m->only;
    } else if (strcmp(a, "--gnuplot") == 0) {
      dst = (const char **)&m->gnuplot;
    } else if (strcmp(a, "--parallel") == 0) {
      uint64_t v = 0;
      if (++i == argc || vl_units_count(argv[i], &v) != 0 || v < 1 || v > 64) {
        say("--parallel: want how many cells run at once, 1 to 64");
        return 2;
      }
      m->parallel = (int)v;
      continue;
    } else if (a[0] == '-' && a[1]) {
      say("%s: unknown option (see vlmload matrix --help; vlmload options for every cell go "
          "after --)",
          a);
      return 2;
    } else if (!m->file_path) {
      m->file_path = a;
      continue;
    } else {
      say("'%s': one FILE.json only (see --help)", a);
      return 2;
    }
    if (++i == argc || !argv[i][0]) {
      say("%s: needs a value (see --help)", a);
      return 2;
    }
    *dst = argv[i];
  }
  if (!m->file_path) {
    say("want FILE.json, the cells to run (see vlmload matrix --help)");
    return 2;
  }
  if (m->url && strncmp(m->url, "http://", 7) != 0 && strncmp(m->url, "https://", 8) != 0) {
    say("--url '%s': want http://HOST:PORT or https://HOST:PORT", m->url);
    return 2;
  }
  return -1;
}

int vl_matrix_main(int argc, char **argv) {
  matrix_t *m = vl_xcalloc(1, sizeof(*m));
  m->parallel = 1;
  const char *gnuplot_given = NULL;
  char default_dir[64];
  int status = parse_args(m, argc, argv), tmp_out = 0;
  gnuplot_given = m->gnuplot;
  m->gnuplot = NULL;
  if (status >= 0)
    goto done;
  status = 2;
  /* The folder of FILE.json, absolute: the children read their configurations elsewhere. */
  char resolved[PATH_MAX];
  if (!realpath(m->file_path, resolved)) {
    say("'%s': %s", m->file_path, strerror(errno));
    goto done;
  }
  snprintf(m->file_dir, sizeof(m->file_dir), "%.*s", (int)(strrchr(resolved, '/') - resolved),
           resolved);
  if (!m->file_dir[0])
    snprintf(m->file_dir, sizeof(m->file_dir), "/");
  if (vl_child_self(m->exe, sizeof(m->exe)) != 0) {
    say("cannot find this program to run the cells");
    goto done;
  }
  snprintf(m->vlmmock, sizeof(m->vlmmock), "%.*s/vlmmock", (int)(strrchr(m->exe, '/') - m->exe),
           m->exe);
  if (read_file(m) != 0 || select_cells(m) != 0)
    goto done;
  char tmp_dir[PATH_MAX];
  if (m->dry_run && !m->out_dir) { /* the configurations are checked, then removed */
    const char *t = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof(tmp_dir), "%s/vlmload-matrix-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp_dir)) {
      say("cannot make a directory in '%s': %s", t && *t ? t : "/tmp", strerror(errno));
      goto done;
    }
    m->out_dir = tmp_dir;
    tmp_out = 1;
  }
  if (!m->out_dir) {
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(default_dir, sizeof(default_dir), "matrix-%Y%m%d-%H%M%S", &tm);
    m->out_dir = default_dir;
  }
  if (mkdir_p(m->out_dir) != 0) {
    say("--output-dir '%s': %s", m->out_dir, strerror(errno));
    goto done;
  }
  for (int i = 0; i < m->n; i++) {
    cell_t *c = &m->cells[i];
    snprintf(c->dir, sizeof(c->dir), "%s/%s", m->out_dir, c->name);
    if (mkdir(c->dir, 0755) != 0 && errno != EEXIST) {
      say("'%s': %s", c->dir, strerror(errno));
      goto done;
    }
  }
  char why[512];
  if (vl_plot_find_gnuplot(gnuplot_given, &m->gnuplot, why, sizeof(why)) != 0 && !m->dry_run) {
    if (m->report || gnuplot_given) {
      say("%s", m->report && !gnuplot_given ? VL_HTMLREPORT_NO_GNUPLOT : why);
      goto done;
    }
    say("gnuplot not found (apt-get install gnuplot-nox): no plots drawn; %s/rss.gp draws the "
        "resident sets later (cd %s && gnuplot rss.gp), vlmload analyze CELL/timeline.csv --plot "
        "a cell's",
        m->out_dir, m->out_dir);
    m->gnuplot = NULL;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    say("cannot initialise libcurl");
    goto done;
  }
  if (check_cells(m) != 0)
    goto done;
  if (m->dry_run) {
    describe(m, stdout);
    status = 0;
    goto done;
  }
  m->gpu = gpu_present();
  signal(SIGPIPE, SIG_IGN);
  uv_loop_init(&m->loop);
  for (int i = 0; i < m->n; i++) {
    uv_timer_init(&m->loop, &m->cells[i].timer);
    m->cells[i].timer.data = &m->cells[i];
  }
  uv_signal_init(&m->loop, &m->sig_int);
  uv_signal_init(&m->loop, &m->sig_term);
  m->sig_int.data = m->sig_term.data = m;
  uv_signal_start(&m->sig_int, on_signal, SIGINT);
  uv_signal_start(&m->sig_term, on_signal, SIGTERM);
  next_cell(m);
  uv_run(&m->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&m->loop) != 0)
    say("internal error: event loop closed with handles open");

  status = 0;
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->cells[i].status, "failed") == 0)
      status = 1;
  rss_t rss = {0};
  rss_read(m, &rss);
  if (write_json(m) || write_rss(m, &rss) || (m->report && write_report(m, &rss)))
    status = 1;
  rss_free(&rss);
  print_table(m, stdout);
  fflush(stdout);
  if (!m->quiet)
    say("wrote %s/matrix.json%s%s%s%s", m->out_dir, m->gnuplot ? ", " : "",
        m->gnuplot ? m->out_dir : "", m->gnuplot ? "/rss.png" : "",
        m->report ? " and the report" : "");
  if (m->signals && status == 0)
    status = 130;
  curl_global_cleanup();
done:
  if (tmp_out)
    remove_dir(m);
  for (int i = 0; m->cells && i < m->n; i++) {
    cJSON_Delete(m->cells[i].options);
    cJSON_Delete(m->cells[i].summary);
    argv_free(m->cells[i].srv_argv);
    argv_free(m->cells[i].load_argv);
  }
  free(m->cells);
  free(m->gnuplot);
  cJSON_Delete(m->file);
  free(m);
  return status;
}
