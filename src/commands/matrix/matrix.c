/* `vlmload matrix`: its command line, --cells, --dry-run and the run of the cells (matrix.h);
 * the parts are in file.c, server.c, cell.c and out.c
 * (internal.h). */
#include "internal.h"
#include "vlmload/child.h"
#include "vlmload/common.h"
#include "vlmload/htmlreport.h"
#include "vlmload/nvml.h"
#include "vlmload/plot.h"
#include "vlmload/text.h"
#include "vlmload/units.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

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
    "                  over the defaults, optionally its own server, and optionally\n"
    "                  \"repeat\": N (1 to 100): N runs, each with a fresh server, in\n"
    "                  CELL/run1 ... CELL/runN\n"
    "\n"
    "Server: an object with these keys.\n"
    "  command         argv, no shell; a program named by a relative path is FILE.json's\n"
    "                  folder's\n"
    "  args            arguments added after the command: a cell adds its own to the shared\n"
    "                  command with \"server\": {\"args\": [...]}\n"
    "  health          the route polled until it answers 200 (default /health)\n"
    "  ready_timeout   how long to wait for it (default 60s)\n"
    "  stop_timeout    SIGTERM to SIGKILL (default 10s)\n"
    "  port            a fixed port (default: a free loopback port, given as {port})\n"
    "  monitor         false: the load does not sample the server's process tree\n"
    "\n"
    "Placeholders: in the command, in the options' strings and in the options after --:\n"
    "{port}, {url} (the cell's, http://127.0.0.1:{port}), {cell} (the cell's output folder),\n"
    "{vlmmock} and {vlmload} (the programs beside this one), {env:NAME} (the environment's\n"
    "NAME) and {env:NAME:-DEFAULT} (DEFAULT when NAME is unset or empty): the variables a\n"
    "user sets, such as a server's path and model files. Relative paths in options are\n"
    "FILE.json's folder's.\n"
    "\n"
    "Table: one row per cell and memory series: the verdict, the slope in MB per 1000 requests\n"
    "with its 95% interval (OLS), the post-flush floor's slope, the achieved rate and the\n"
    "end-to-end p50. A repeated cell has a row per run, then one per series with the mean of\n"
    "each slope over its runs and their range (min..max), and how many runs gave the verdict;\n"
    "matrix.json's repeats[] adds the standard deviation.\n"
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
    "       \"server\": {\"args\": [\"--leak-kb-per-image\", \"64\"]}}\n"
    "    ]\n"
    "  }\n"
    "  vlmload matrix tools/scenarios/leak-matrix.json -- --duration 5s\n";

void vl_matrix_usage(FILE *f) {
  fputs(usage, f);
}

void vl__matrix_say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(VL__MATRIX_PROG ": ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void vl__matrix_note(vl__matrix_t *m, const vl__matrix_cell_t *c, const char *fmt, ...) {
  if (m->quiet)
    return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, VL__MATRIX_PROG ": [%d/%d] %s: ", c->index + 1, m->n, c->name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void vl__matrix_fail(vl__matrix_cell_t *c, const char *fmt, ...) {
  if (c->error[0]) /* the first reason stands */
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof(c->error), fmt, ap);
  va_end(ap);
  c->status = "failed";
}

/* argv lists: NULL-terminated, every string owned. */
void vl__matrix_argv_push(char ***v, int *n, const char *s) {
  *v = vl_xrealloc(*v, (size_t)(*n + 2) * sizeof(char *));
  (*v)[(*n)++] = vl_xstrdup(s);
  (*v)[*n] = NULL;
}

void vl__matrix_argv_free(char **v) {
  for (char **p = v; p && *p; p++)
    free(*p);
  free(v);
}

void vl__matrix_cell_path(const vl__matrix_cell_t *c, char *buf, size_t len, const char *file) {
  snprintf(buf, len, "%s/%s", c->dir, file);
}

void vl__matrix_describe_exit(char *buf, size_t len, int64_t status, int sig) {
  if (sig)
    snprintf(buf, len, "killed by signal %d", sig);
  else
    snprintf(buf, len, "exit status %lld", (long long)status);
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
static void describe(const vl__matrix_t *m, FILE *f) {
  const cJSON *defaults = cJSON_GetObjectItemCaseSensitive(m->file, "defaults");
  for (int i = 0; i < m->n; i++) {
    const vl__matrix_cell_t *c = &m->cells[i];
    fprintf(f, "cell %d/%d %s\n", i + 1, m->n, c->name);
    if (c->has_server) {
      fputs("  server   ", f);
      const cJSON *a;
      cJSON_ArrayForEach(a, c->srv.command) {
        vl_text_fput_shown(f, a->valuestring);
        fputc(a->next || cJSON_GetArraySize(c->srv.args) ? ' ' : '\n', f);
      }
      cJSON_ArrayForEach(a, c->srv.args) {
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

/* Removes what vl__matrixfile_check wrote into a temporary --output-dir. */
static void remove_dir(const vl__matrix_t *m) {
  char path[PATH_MAX + 64];
  for (int i = 0; i < m->n; i++) {
    vl__matrix_cell_path(&m->cells[i], path, sizeof(path), "config.json");
    unlink(path);
    rmdir(m->cells[i].dir);
  }
  rmdir(m->out_dir);
}

/* --cells: keeps only the cells named, in the file's order. Returns 0, or 2 when a name is not a
 * cell of the file (said, with the names there are). */
static int select_cells(vl__matrix_t *m) {
  if (!m->only)
    return 0;
  char *keep = vl_xcalloc((size_t)m->n, 1);
  const char *p = m->only;
  int status = 0;
  while (status == 0) {
    size_t len = strcspn(p, ",");
    int found = -1;
    for (int i = 0; i < m->n; i++) /* a repeated cell: each of its runs */
      if (len && strlen(m->cells[i].base) == len && memcmp(m->cells[i].base, p, len) == 0) {
        found = i;
        keep[i] = 1;
      }
    if (found < 0) {
      fprintf(stderr,
              VL__MATRIX_PROG ": --cells: '%.*s' is not a cell of '%s'; its cells are:", (int)len,
              p, m->file_path);
      for (int i = 0; i < m->n; i++)
        if (m->cells[i].rep <= 1)
          fprintf(stderr, "%s %s", i ? "," : "", m->cells[i].base);
      fputc('\n', stderr);
      status = 2;
      break;
    }
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
        if (m->cells[n].reps) /* its name lives in the struct */
          m->cells[n].name = m->cells[n].own_name;
        n++;
      }
    m->n = n;
  }
  free(keep);
  return status;
}

/* Parses the command line into m. Returns -1 to go on, or the exit status. */
static int parse_args(vl__matrix_t *m, int argc, char **argv) {
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
        vl__matrix_say("--parallel: want how many cells run at once, 1 to 64");
        return 2;
      }
      m->parallel = (int)v;
      continue;
    } else if (a[0] == '-' && a[1]) {
      vl__matrix_say(
          "%s: unknown option (see vlmload matrix --help; vlmload options for every cell go "
          "after --)",
          a);
      return 2;
    } else if (!m->file_path) {
      m->file_path = a;
      continue;
    } else {
      vl__matrix_say("'%s': one FILE.json only (see --help)", a);
      return 2;
    }
    if (++i == argc || !argv[i][0]) {
      vl__matrix_say("%s: needs a value (see --help)", a);
      return 2;
    }
    *dst = argv[i];
  }
  if (!m->file_path) {
    vl__matrix_say("want FILE.json, the cells to run (see vlmload matrix --help)");
    return 2;
  }
  if (m->url && !strstr(m->url, "://")) { /* as vlmload reads it */
    snprintf(m->url_http, sizeof(m->url_http), "http://%s", m->url);
    m->url = m->url_http;
  }
  if (m->url && strncmp(m->url, "http://", 7) != 0 && strncmp(m->url, "https://", 8) != 0) {
    vl__matrix_say("--url '%s': want http://HOST:PORT or https://HOST:PORT", m->url);
    return 2;
  }
  return -1;
}

int vl_matrix_main(int argc, char **argv) {
  vl__matrix_t *m = vl_xcalloc(1, sizeof(*m));
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
    vl__matrix_say("'%s': %s", m->file_path, strerror(errno));
    goto done;
  }
  snprintf(m->file_dir, sizeof(m->file_dir), "%.*s", (int)(strrchr(resolved, '/') - resolved),
           resolved);
  if (!m->file_dir[0])
    snprintf(m->file_dir, sizeof(m->file_dir), "/");
  if (vl_child_self(m->exe, sizeof(m->exe)) != 0) {
    vl__matrix_say("cannot find this program to run the cells");
    goto done;
  }
  snprintf(m->vlmmock, sizeof(m->vlmmock), "%.*s/vlmmock", (int)(strrchr(m->exe, '/') - m->exe),
           m->exe);
  if (vl__matrixfile_read(m) != 0 || select_cells(m) != 0)
    goto done;
  char tmp_dir[PATH_MAX];
  if (m->dry_run && !m->out_dir) { /* the configurations are checked, then removed */
    const char *t = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof(tmp_dir), "%s/vlmload-matrix-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp_dir)) {
      vl__matrix_say("cannot make a directory in '%s': %s", t && *t ? t : "/tmp", strerror(errno));
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
    vl__matrix_say("--output-dir '%s': %s", m->out_dir, strerror(errno));
    goto done;
  }
  for (int i = 0; i < m->n; i++) {
    vl__matrix_cell_t *c = &m->cells[i];
    snprintf(c->dir, sizeof(c->dir), "%s/%s", m->out_dir, c->name);
    if (mkdir_p(c->dir) != 0) { /* a repeat's folder is DIR/CELL/runK */
      vl__matrix_say("'%s': %s", c->dir, strerror(errno));
      goto done;
    }
  }
  char why[512];
  if (vl_plot_find_gnuplot(gnuplot_given, &m->gnuplot, why, sizeof(why)) != 0 && !m->dry_run) {
    if (m->report || gnuplot_given) {
      vl__matrix_say("%s", m->report && !gnuplot_given ? VL_HTMLREPORT_NO_GNUPLOT : why);
      goto done;
    }
    vl__matrix_say(
        "gnuplot not found (apt-get install gnuplot-nox): no plots drawn; %s/rss.gp draws the "
        "resident sets later (cd %s && gnuplot rss.gp), vlmload analyze CELL/timeline.csv --plot "
        "a cell's",
        m->out_dir, m->out_dir);
    m->gnuplot = NULL;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    vl__matrix_say("cannot initialise libcurl");
    goto done;
  }
  if (vl__matrixfile_check(m) != 0)
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
  uv_signal_start(&m->sig_int, vl__matrixcell_on_signal, SIGINT);
  uv_signal_start(&m->sig_term, vl__matrixcell_on_signal, SIGTERM);
  vl__matrixcell_next(m);
  uv_run(&m->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&m->loop) != 0)
    vl__matrix_say("internal error: event loop closed with handles open");

  status = 0;
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->cells[i].status, "failed") == 0)
      status = 1;
  vl__matrix_rss_t rss = {0};
  vl__matrixout_rss_read(m, &rss);
  if (vl__matrixout_json(m) || vl__matrixout_rss(m, &rss) ||
      (m->report && vl__matrixout_report(m, &rss)))
    status = 1;
  /* The chart is drawn only with a line in it: no cell that ran, no chart. */
  const char *chart = !rss.n_lines ? NULL : m->gnuplot ? "rss.png" : "rss.gp";
  vl__matrixout_rss_free(&rss);
  vl__matrixout_table(m, stdout);
  fflush(stdout);
  if (!m->quiet)
    vl__matrix_say("wrote %s/matrix.json%s%s%s%s%s", m->out_dir, chart ? ", " : "",
                   chart ? m->out_dir : "", chart ? "/" : "", chart ? chart : "",
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
    vl__matrix_argv_free(m->cells[i].srv_argv);
    vl__matrix_argv_free(m->cells[i].load_argv);
  }
  free(m->cells);
  free(m->gnuplot);
  cJSON_Delete(m->file);
  free(m);
  return status;
}
