/* What the files of `vlmload matrix` share; not a public header. One concern in several files,
 * which call each other.
 *
 * matrix.c runs the command (vl_matrix_main: its options, --cells, --dry-run, the output folder)
 * and holds the helpers every part uses; each concern has a file of its own:
 *   file.c          the file's format and its checks, and each cell's configuration (config.json
 *                   and the child vlmload's argv);
 *   server.c        a cell's server: started, its health route polled, stopped;
 *   cell.c          the cells' schedule: --parallel, the loads, their ends, signals;
 *   out.c     the outputs: the table, matrix.json, the chart of resident sets, the page.
 * Everything runs on the matrix's loop thread.
 */
#ifndef VLMLOAD_MATRIX_INTERNAL_H
#define VLMLOAD_MATRIX_INTERNAL_H

#include "matrix.h"
#include "vlmload/plot.h"
#include "vlmload/series.h"
#include "vlmload/csvin.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#define VL__MATRIX_PROG       "vlmload matrix"
#define VL__MATRIX_TREE_LABEL "server" /* --monitor-tree server=PID: rss_mb.server */
#define VL__MATRIX_REPEAT_MAX 100      /* a cell's "repeat": at most this many runs */

/* VL__MATRIX_READY: the server answers, and the load waits for the servers started with it, so that
 * loads side by side begin together rather than one probing its server while the others start. */
typedef enum {
  VL__MATRIX_PENDING,
  VL__MATRIX_STARTING,
  VL__MATRIX_READY,
  VL__MATRIX_LOADING,
  VL__MATRIX_STOPPING,
  VL__MATRIX_DONE
} vl__matrix_stage_t;

typedef struct vl__matrix_s vl__matrix_t;

/* The server a cell starts, as the file gives it. */
typedef struct {
  const cJSON *command; /* array of strings, borrowed from the file */
  const cJSON *args;    /* strings added after the command, borrowed, or NULL */
  const char *health;
  uint64_t ready_us, stop_us;
  int port; /* fixed, or 0: a free one */
  int monitor;
} vl__matrix_server_t;

typedef struct {
  vl__matrix_t *m;
  int index;
  const char *name;   /* borrowed from the file, or own_name for a repeat */
  const char *base;   /* the file's name of the cell, borrowed: the same for each of its repeats */
  int rep, reps;      /* "repeat": N: this is run rep of reps (1..N); 0 and 0 without it */
  char own_name[80];  /* a repeat's name: BASE/runK, also its folder under DIR */
  const cJSON *given; /* the cell's own options, borrowed */
  int has_server;
  vl__matrix_server_t srv;
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
  vl__matrix_stage_t stage;
  const char *status; /* "ok", "failed", "interrupted", "not run" */
  char error[4096];
  char health_err[2600];
  cJSON *summary; /* the child's, owned */
} vl__matrix_cell_t;

struct vl__matrix_s {
  uv_loop_t loop;
  uv_signal_t sig_int, sig_term;
  cJSON *file;
  const char *file_path;
  char file_dir[PATH_MAX]; /* FILE.json's folder, absolute */
  const char *out_dir;
  const char *url;     /* --url: no servers */
  char url_http[2048]; /* --url HOST:PORT, read as http://HOST:PORT */
  const char *report;  /* --report */
  const char *only;    /* --cells: a comma-separated list of names, or NULL: every cell */
  char *gnuplot;       /* found, or NULL: no plots */
  int quiet, gpu, dry_run;
  char **extra; /* after "--" */
  int n_extra;
  char exe[PATH_MAX], vlmmock[PATH_MAX];
  vl__matrix_cell_t *cells;
  int n;
  int parallel; /* cells run at once */
  int next;     /* the next cell to start */
  int running;  /* cells started and not finished */
  int closed;   /* the loop's handles are closing */
  int signals;
};

/* Helpers (matrix.c). */

/* Says one line on stderr, "vlmload matrix: " first. */
void vl__matrix_say(const char *fmt, ...);
/* Says one line about cell c on stderr, unless --quiet. */
void vl__matrix_note(vl__matrix_t *m, const vl__matrix_cell_t *c, const char *fmt, ...);
/* Marks c failed with why; the first reason stands. */
void vl__matrix_fail(vl__matrix_cell_t *c, const char *fmt, ...);
/* argv lists: NULL-terminated, every string owned. Appends a copy of s to *v, *n long. */
void vl__matrix_argv_push(char ***v, int *n, const char *s);
void vl__matrix_argv_free(char **v);
/* DIR/CELL/file into buf. */
void vl__matrix_cell_path(const vl__matrix_cell_t *c, char *buf, size_t len, const char *file);
/* "exit status N" or "killed by signal N" into buf. */
void vl__matrix_describe_exit(char *buf, size_t len, int64_t status, int sig);

/* The file (file.c). */

/* Reads the file's cells into m. Returns 0 or 2 after saying why. */
int vl__matrixfile_read(vl__matrix_t *m);
/* s with {port}, {url}, {cell}, {vlmmock} and {vlmload} replaced; a new string. */
char *vl__matrixfile_subst(const vl__matrix_cell_t *c, const char *s);
/* The cell's options (defaults, then its own), substituted and rebased, written to
 * DIR/CELL/config.json; and the child's argv, with pid as the server's (0: none). Returns 0, or
 * VL_EIO with why. */
int vl__matrixfile_prepare(vl__matrix_cell_t *c, long pid, char *why, size_t whylen);
/* Parses every cell's configuration as its child will, before any runs. Returns 0 or 2. */
int vl__matrixfile_check(vl__matrix_t *m);

/* The servers (server.c). */

/* Starts c's server and polls its health route; the cell goes on to VL__MATRIX_READY (and
 * vl__matrixcell_release_ready), or finishes failed. */
void vl__matrixserver_start(vl__matrix_cell_t *c);
/* SIGTERM to the server's group, and SIGKILL after its stop_timeout; the cell finishes once the
 * group is gone, at once when nothing of it is left. */
void vl__matrixserver_stop(vl__matrix_cell_t *c);
/* Whether anything is left of the server's process group (its id stays taken while it has a
 * member). Once seen empty it is never signalled again: the id may then go to another process. */
int vl__matrixserver_alive(vl__matrix_cell_t *c);
/* signum to the server's process group, while it is alive. */
void vl__matrixserver_signal(vl__matrix_cell_t *c, int signum);

/* The schedule (cell.c). */

/* Starts cells while fewer than --parallel run; once none runs and none is left to start (or a
 * signal came), closes the loop's handles. */
void vl__matrixcell_next(vl__matrix_t *m);
/* Ends c: kills what is left of its server's group, reads its summary, settles its status and
 * starts the next cell. */
void vl__matrixcell_finish(vl__matrix_cell_t *c);
/* Starts the loads of the cells whose servers are ready, once no other server is starting. */
void vl__matrixcell_release_ready(vl__matrix_t *m);
/* SIGINT and SIGTERM: the running cells stop, no further cell starts. */
void vl__matrixcell_on_signal(uv_signal_t *h, int signum);

/* The outputs (out.c). */

/* The plot of every cell's resident set; each set read is kept in sets for the call. */
typedef struct {
  vl_series_set_t *sets;
  vl_csv_t **tables;
  vl_plot_line_t *lines;
  size_t n_lines;
  int n;
} vl__matrix_rss_t;

/* Reads every cell's timeline for the chart of resident sets; rss_free releases it. */
void vl__matrixout_rss_read(const vl__matrix_t *m, vl__matrix_rss_t *r);
void vl__matrixout_rss_free(vl__matrix_rss_t *r);
/* DIR/matrix.json. Returns 0 or 1 after saying why. */
int vl__matrixout_json(const vl__matrix_t *m);
/* DIR/rss.png, or without gnuplot DIR/rss.gp (its script, data included). Returns 0 or 1. */
int vl__matrixout_rss(const vl__matrix_t *m, const vl__matrix_rss_t *r);
/* --report: the table and the resident sets on one page. Returns 0 or 1. */
int vl__matrixout_report(const vl__matrix_t *m, const vl__matrix_rss_t *r);
/* The comparison table, on f. */
void vl__matrixout_table(const vl__matrix_t *m, FILE *f);

#endif
