/* `vlmload matrix`: a cell's server, started in a session of its own, its health route polled
 * until it answers 200, stopped by SIGTERM to its process group and SIGKILL after a grace. */
#include "internal.h"
#include "vlmload/child.h"
#include "vlmload/common.h"
#include "vlmload/config.h"
#include "vlmload/server.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#define TICK_MS        100  /* health polls and the stop's checks */
#define HEALTH_POLL_MS 1000 /* one health request's bound */

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
static int free_port(const vl__matrix_t *m) {
  for (int tries = 0; tries < 16; tries++) {
    int port = bind_port(), taken = 0;
    for (int i = 0; i < m->n; i++)
      taken |= m->cells[i].port == port && m->cells[i].stage != VL__MATRIX_DONE &&
               m->cells[i].stage != VL__MATRIX_PENDING;
    if (!taken)
      return port;
  }
  return 0;
}

int vl__matrixserver_alive(vl__matrix_cell_t *c) {
  if (!c->srv_started || c->group_gone || c->srv_proc.pid <= 0)
    return 0;
  if (kill(-c->srv_proc.pid, 0) == 0)
    return 1;
  c->group_gone = 1;
  return 0;
}

void vl__matrixserver_signal(vl__matrix_cell_t *c, int signum) {
  if (vl__matrixserver_alive(c))
    vl_child_signal_group(&c->srv_proc, signum);
}

static void on_tick(uv_timer_t *t);

static void tick_start(vl__matrix_cell_t *c) {
  uv_timer_start(&c->timer, on_tick, TICK_MS, TICK_MS);
}

/* SIGTERM to the server's group, and SIGKILL at the deadline (on_tick); the cell finishes once
 * the group is gone, at once when nothing of it is left. */
void vl__matrixserver_stop(vl__matrix_cell_t *c) {
  c->stage = VL__MATRIX_STOPPING;
  c->deadline_ns = uv_hrtime() + c->srv.stop_us * 1000;
  if (!c->srv_running && !vl__matrixserver_alive(c)) {
    vl__matrixcell_finish(c);
    return;
  }
  if (!c->stopped)
    c->stopped = c->srv_running ? "SIGTERM" : "exited";
  vl__matrixserver_signal(c, SIGTERM);
  tick_start(c);
}

static void on_server_exit(uv_process_t *proc, int64_t status, int sig) {
  vl__matrix_cell_t *c = proc->data;
  char how[64];
  c->srv_running = 0;
  c->srv_status = status;
  c->srv_signal = sig;
  uv_close((uv_handle_t *)proc, NULL);
  vl__matrix_describe_exit(how, sizeof(how), status, sig);
  switch (c->stage) {
  case VL__MATRIX_STARTING:
  case VL__MATRIX_READY:
    if (!c->m->signals)
      vl__matrix_fail(c, "the server exited (%s) before %s; its output is in %s/server.log", how,
                      c->stage == VL__MATRIX_READY ? "its load started" : "it was ready", c->name);
    c->stopped = "exited";
    vl__matrixcell_finish(c); /* which kills what is left of its group */
    vl__matrixcell_release_ready(c->m);
    break;
  case VL__MATRIX_LOADING:
    vl__matrix_fail(c, "the server exited during the load (%s); its output is in %s/server.log",
                    how, c->name);
    c->stopped = "exited";
    /* What is left of it, now, while its group id is still its own. */
    vl__matrixserver_signal(c, SIGKILL);
    if (c->load_running) /* the load stops and writes what it measured */
      uv_process_kill(&c->load_proc, SIGINT);
    break;
  case VL__MATRIX_STOPPING:
    if (!vl__matrixserver_alive(c))
      vl__matrixcell_finish(c);
    break;
  default:
    break;
  }
}

static void on_tick(uv_timer_t *t) {
  vl__matrix_cell_t *c = t->data;
  vl__matrix_t *m = c->m;
  uint64_t now = uv_hrtime();
  if (c->stage == VL__MATRIX_STARTING && c->srv_running) {
    int rc = 0;
    vl_config_t probe; /* a plain GET of the cell's url */
    memset(&probe, 0, sizeof(probe));
    probe.url = c->url;
    long st = vl_server_status(&probe, c->srv.health, HEALTH_POLL_MS, &rc, c->health_err,
                               sizeof(c->health_err));
    if (st == 200) {
      c->ready_s = (double)(uv_hrtime() - c->t0_ns) / 1e9;
      vl__matrix_note(m, c, "server ready in %.1fs", c->ready_s);
      c->stage = VL__MATRIX_READY;
      vl__matrixcell_release_ready(m);
      return;
    }
    if (st)
      snprintf(c->health_err, sizeof(c->health_err), "GET %s%s answered HTTP %ld", c->url,
               c->srv.health, st);
    if (uv_hrtime() >= c->deadline_ns) {
      vl__matrix_fail(c,
                      "the server was not ready within %.6gs (%s); its output is in %s/server.log",
                      (double)c->srv.ready_us / 1e6, c->health_err, c->name);
      vl__matrixserver_stop(c);
      vl__matrixcell_release_ready(m);
    }
  } else if (c->stage == VL__MATRIX_STOPPING) {
    if (!c->srv_running && !vl__matrixserver_alive(c)) {
      vl__matrixcell_finish(c);
    } else if (now >= c->deadline_ns && !c->killed) {
      vl__matrixserver_signal(c, SIGKILL);
      c->killed = 1;
      c->stopped = "SIGKILL";
      vl__matrix_note(m, c, "the server did not stop within %.6gs of SIGTERM: killed",
                      (double)c->srv.stop_us / 1e6);
    } else if (c->killed && !c->srv_running && now >= c->deadline_ns + 2000000000ull) {
      vl__matrixcell_finish(c); /* what is left of the group is not ours to wait for (zombies) */
    }
  }
}

void vl__matrixserver_start(vl__matrix_cell_t *c) {
  vl__matrix_t *m = c->m;
  char path[PATH_MAX + 64];
  c->port = c->srv.port ? c->srv.port : free_port(m);
  snprintf(c->url, sizeof(c->url), "http://127.0.0.1:%d", c->port);
  int n = 0;
  const cJSON *a;
  cJSON_ArrayForEach(a, c->srv.command) {
    char *v = vl__matrixfile_subst(c, a->valuestring);
    if (n == 0 && v[0] != '/' && strchr(v, '/')) { /* a program named by a relative path */
      char full[2 * PATH_MAX];
      snprintf(full, sizeof(full), "%s/%s", m->file_dir, v);
      free(v);
      v = vl_xstrdup(full);
    }
    vl__matrix_argv_push(&c->srv_argv, &n, v);
    free(v);
  }
  cJSON_ArrayForEach(a, c->srv.args) {
    char *v = vl__matrixfile_subst(c, a->valuestring);
    vl__matrix_argv_push(&c->srv_argv, &n, v);
    free(v);
  }
  vl__matrix_cell_path(c, path, sizeof(path), "server.log");
  int log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log < 0) {
    vl__matrix_fail(c, "%s: %s", path, strerror(errno));
    if (null >= 0)
      close(null);
    vl__matrixcell_finish(c);
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
    vl__matrix_fail(c, "cannot start the server '%s': %s", c->srv_argv[0], uv_strerror(rc));
    vl__matrixcell_finish(c);
    return;
  }
  c->srv_started = c->srv_running = 1;
  c->stage = VL__MATRIX_STARTING;
  c->deadline_ns = c->t0_ns + c->srv.ready_us * 1000;
  snprintf(c->health_err, sizeof(c->health_err), "no answer yet");
  const char *prog = strrchr(c->srv_argv[0], '/');
  vl__matrix_note(m, c, "%s started (pid %d, port %d)", prog ? prog + 1 : c->srv_argv[0],
                  c->srv_proc.pid, c->port);
  tick_start(c);
}
