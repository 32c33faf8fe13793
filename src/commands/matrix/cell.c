/* `vlmload matrix`: the cells' schedule. Up to --parallel cells run at once; a cell starts its
 * server (server.c), its load once every server started with it answers, and ends with a
 * status; the first signal stops the running cells and starts no further one. */
#include "internal.h"
#include "vlmload/child.h"
#include "vlmload/common.h"
#include "vlmload/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

static void load_summary(vl__matrix_cell_t *c) {
  char path[PATH_MAX + 64];
  vl__matrix_cell_path(c, path, sizeof(path), "summary.json");
  cJSON_Delete(c->summary);
  c->summary = vl_json_load_file(path);
}

void vl__matrixcell_finish(vl__matrix_cell_t *c) {
  vl__matrix_t *m = c->m;
  uv_timer_stop(&c->timer);
  if (c->srv_started && c->srv_proc.pid > 0)
    vl__matrixserver_signal(c, SIGKILL); /* anything of the server's still in its group */
  c->stage = VL__MATRIX_DONE;
  c->end_ms = vl_wall_ms();
  if (c->load_started)
    load_summary(c);
  char how[64];
  vl__matrix_describe_exit(how, sizeof(how), c->load_status, c->load_signal);
  if (!c->error[0]) {
    if (!c->load_started)
      c->status = m->signals ? "interrupted" : "failed";
    else if (c->load_signal ||
             (c->load_status != 0 && c->load_status != 3 && c->load_status != 130))
      vl__matrix_fail(
          c, "the load failed (%s; its messages are above, its text summary in %s/output.txt)", how,
          c->name);
    else if (c->load_status == 130 || m->signals)
      c->status = "interrupted";
    else if (!c->summary)
      vl__matrix_fail(c, "the load wrote no summary (%s/summary.json)", c->name);
    else
      c->status = "ok";
  }
  if (c->error[0])
    vl__matrix_note(m, c, "failed: %s", c->error);
  else
    vl__matrix_note(m, c, "%s in %.1fs%s%s", c->status, c->load_s,
                    c->stopped ? ", server stopped by " : "", c->stopped ? c->stopped : "");
  m->running--;
  vl__matrixcell_next(m);
}

static void on_load_exit(uv_process_t *proc, int64_t status, int sig) {
  vl__matrix_cell_t *c = proc->data;
  c->load_running = 0;
  c->load_status = status;
  c->load_signal = sig;
  c->load_s = (double)(uv_hrtime() - c->t0_ns) / 1e9;
  uv_close((uv_handle_t *)proc, NULL);
  if (c->has_server && (c->srv_running || vl__matrixserver_alive(c))) {
    vl__matrixserver_stop(c);
  } else {
    vl__matrixcell_finish(c);
  }
}

static void start_load(vl__matrix_cell_t *c) {
  vl__matrix_t *m = c->m;
  char why[512], path[PATH_MAX + 64];
  uv_timer_stop(&c->timer);
  c->stage = VL__MATRIX_LOADING;
  if (vl__matrixfile_prepare(c, c->srv_started ? (long)c->srv_proc.pid : 0, why, sizeof(why)) !=
      0) {
    vl__matrix_fail(c, "%s/config.json: %s", c->dir, why);
    vl__matrixserver_stop(c);
    return;
  }
  vl__matrix_cell_path(c, path, sizeof(path), "output.txt");
  int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    vl__matrix_fail(c, "%s: %s", path, strerror(errno));
    vl__matrixserver_stop(c);
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
    vl__matrix_fail(c, "cannot start the load (%s): %s", m->exe, uv_strerror(rc));
    vl__matrixserver_stop(c);
    return;
  }
  c->load_started = c->load_running = 1;
  vl__matrix_note(m, c, "load started%s%s", c->has_server ? " against " : "",
                  c->has_server ? c->url : "");
}

/* Starts the loads of the cells whose servers are ready, once no other server is starting. */
void vl__matrixcell_release_ready(vl__matrix_t *m) {
  for (int i = 0; i < m->n; i++)
    if (m->cells[i].stage == VL__MATRIX_STARTING)
      return;
  for (int i = 0; i < m->n; i++)
    if (m->cells[i].stage == VL__MATRIX_READY)
      start_load(&m->cells[i]);
}

/* Starts c: its folder, then its server, or its load when it has none. */
static void start_cell(vl__matrix_cell_t *c) {
  c->start_ms = vl_wall_ms();
  if (mkdir(c->dir, 0755) != 0 && errno != EEXIST) {
    vl__matrix_fail(c, "cannot make %s: %s", c->dir, strerror(errno));
    vl__matrixcell_finish(c);
    return;
  }
  if (!c->has_server) {
    start_load(c);
    return;
  }
  vl__matrixserver_start(c);
}

/* Starts cells while fewer than --parallel run; once none runs and none is left to start (or a
 * signal came), closes the loop's handles. A cell may finish inside start_cell (a server that
 * cannot start), which comes back here: the loop reads the counts afresh each time. */
void vl__matrixcell_next(vl__matrix_t *m) {
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
static void signal_cell(vl__matrix_cell_t *c, int signum) {
  vl__matrix_t *m = c->m;
  switch (c->stage) {
  case VL__MATRIX_STARTING:
  case VL__MATRIX_READY:
    c->status = "interrupted";
    vl__matrixserver_stop(c);
    break;
  case VL__MATRIX_LOADING:
    if (c->load_running)
      uv_process_kill(&c->load_proc, signum);
    break;
  case VL__MATRIX_STOPPING:
    if (m->signals > 1 && !c->killed) {
      vl__matrixserver_signal(c, SIGKILL);
      c->killed = 1;
      c->stopped = "SIGKILL";
    }
    break;
  default:
    break;
  }
}

void vl__matrixcell_on_signal(uv_signal_t *h, int signum) {
  vl__matrix_t *m = h->data;
  if (++m->signals == 1)
    vl__matrix_say(
        "stopping: the running cell%s and %s server%s; no further cell runs (again to cancel "
        "the requests in flight)",
        m->running == 1 ? "" : "s", m->running == 1 ? "its" : "their", m->running == 1 ? "" : "s");
  for (int i = 0; i < m->n; i++)
    signal_cell(&m->cells[i], signum);
}
