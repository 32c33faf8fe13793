/* The monitor's commands: one `/bin/sh -c CMD` per --monitor-cmd and round, in a process group of
 * its own, read for the first number it prints. */
#include "internal.h"
#include "vlmload/common.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct vl_monitor_run_s {
  vl_monitor_t *mon;
  const char *label, *cmd;
  size_t ser;
  uv_process_t proc;
  uv_pipe_t out;
  uv_timer_t timer;
  int running; /* from the spawn until both handles are closed */
  int handles; /* of proc and out, still to close */
  int exited, eof, finished, timed_out;
  int64_t exit_status;
  int term_signal;
  char buf[4096];
  size_t len;
  char sink[4096]; /* output past buf, read and dropped so the command never blocks */
  uint64_t ok, failed, skipped, timeouts;
  char last_error[160];
} run_t;

/* The first number in the output: optional sign, digits with an optional fraction, optional
 * exponent, not glued to a word before it (the 0 of "gpu0" is not one). */
static int first_number(const char *s, size_t n, double *out) {
  for (size_t i = 0; i < n; i++) {
    size_t j = i;
    if (s[j] == '+' || s[j] == '-')
      j++;
    int digit = j < n && s[j] >= '0' && s[j] <= '9';
    int dotdigit = j + 1 < n && s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9';
    if (!digit && !dotdigit)
      continue;
    if (i > 0) {
      char b = s[i - 1];
      if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b == '_' ||
          b == '.')
        continue;
    }
    while (j < n && s[j] >= '0' && s[j] <= '9')
      j++;
    if (j < n && s[j] == '.') {
      j++;
      while (j < n && s[j] >= '0' && s[j] <= '9')
        j++;
    }
    if (j < n && (s[j] == 'e' || s[j] == 'E')) {
      size_t k = j + 1;
      if (k < n && (s[k] == '+' || s[k] == '-'))
        k++;
      if (k < n && s[k] >= '0' && s[k] <= '9') {
        while (k < n && s[k] >= '0' && s[k] <= '9')
          k++;
        j = k;
      }
    }
    char tmp[128];
    size_t len = VL_MIN(j - i, sizeof(tmp) - 1);
    memcpy(tmp, s + i, len);
    tmp[len] = '\0';
    *out = strtod(tmp, NULL);
    return 0;
  }
  return -1;
}

static void run_closed(uv_handle_t *h) {
  run_t *r = h->data;
  vl_monitor_t *mon = r->mon;
  if (--r->handles > 0)
    return;
  r->running = 0;
  if (mon->closing) {
    mon->to_close--;
    vl__monitor_maybe_closed(mon);
  } else {
    vl__monitor_part_done(mon);
  }
}

static void run_finish(run_t *r) {
  if (r->finished || !r->exited || !r->eof)
    return;
  r->finished = 1;
  uv_timer_stop(&r->timer);
  vl_monitor_t *mon = r->mon;
  if (mon->closing)
    return;
  int64_t t = vl_wall_ms();
  double v = 0;
  int ok = 0;
  if (r->timed_out) {
    snprintf(r->last_error, sizeof(r->last_error), "still running after %llu ms: killed",
             (unsigned long long)mon->spec->cmd_timeout_ms);
  } else if (r->term_signal) {
    snprintf(r->last_error, sizeof(r->last_error), "killed by signal %d", r->term_signal);
  } else if (r->exit_status != 0) {
    snprintf(r->last_error, sizeof(r->last_error), "exit status %lld", (long long)r->exit_status);
  } else if (first_number(r->buf, r->len, &v) != 0) {
    snprintf(r->last_error, sizeof(r->last_error), "printed no number");
  } else {
    ok = 1;
    r->last_error[0] = '\0';
  }
  if (ok)
    r->ok++;
  else
    r->failed++;
  vl__monitor_set_value(mon->series[r->ser], v, ok, t);
}

static void close_pipe(run_t *r) {
  if (r->eof)
    return;
  r->eof = 1;
  uv_close((uv_handle_t *)&r->out, run_closed);
}

static void on_run_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  run_t *r = h->data;
  if (r->len < sizeof(r->buf))
    *buf = uv_buf_init(r->buf + r->len, (unsigned)(sizeof(r->buf) - r->len));
  else
    *buf = uv_buf_init(r->sink, sizeof(r->sink));
}

static void on_run_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  run_t *r = st->data;
  if (nread > 0) {
    if (buf->base == r->buf + r->len)
      r->len += (size_t)nread;
    return;
  }
  if (nread == 0)
    return;
  close_pipe(r); /* end of output, or a read error: nothing more will come */
  run_finish(r);
}

static void on_run_exit(uv_process_t *p, int64_t exit_status, int term_signal) {
  run_t *r = p->data;
  r->exited = 1;
  r->exit_status = exit_status;
  r->term_signal = term_signal;
  uv_close((uv_handle_t *)&r->proc, run_closed);
  run_finish(r);
}

/* Kills the command and everything it started (its own process group), and stops reading. Once
 * the shell has exited and its output has ended, the group may be gone and its number reused:
 * then nothing is killed. */
static void run_kill(run_t *r) {
  if (r->proc.pid > 0 && (!r->exited || !r->eof))
    uv_kill(-r->proc.pid, SIGKILL);
  close_pipe(r);
}

static void on_run_timeout(uv_timer_t *h) {
  run_t *r = h->data;
  r->timed_out = 1;
  r->timeouts++;
  run_kill(r);
  run_finish(r);
}

static void run_start(run_t *r) {
  vl_monitor_t *mon = r->mon;
  if (r->running) {
    r->skipped++;
    return;
  }
  r->running = 1;
  r->exited = r->eof = r->finished = r->timed_out = 0;
  r->exit_status = 0;
  r->term_signal = 0;
  r->len = 0;
  mon->pending++;
  uv_pipe_init(mon->loop, &r->out, 0);
  r->out.data = r;
  r->proc.data = r;
  char *args[] = {"/bin/sh", "-c", (char *)r->cmd, NULL};
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_IGNORE},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->out},
      {.flags = UV_IGNORE},
  };
  uv_process_options_t o = {.exit_cb = on_run_exit,
                            .file = "/bin/sh",
                            .args = args,
                            .flags = UV_PROCESS_DETACHED, /* its own process group, killed whole */
                            .stdio_count = 3,
                            .stdio = stdio};
  r->handles = 2;
  int rc = uv_spawn(mon->loop, &r->proc, &o);
  if (rc != 0) {
    /* Both handles were initialized and are closed as usual. */
    r->exited = 1;
    r->proc.pid = 0;
    close_pipe(r);
    uv_close((uv_handle_t *)&r->proc, run_closed);
    r->finished = 1;
    r->failed++;
    snprintf(r->last_error, sizeof(r->last_error), "cannot start /bin/sh: %s", uv_strerror(rc));
    vl__monitor_set_value(mon->series[r->ser], 0, 0, vl_wall_ms());
    return;
  }
  if (uv_read_start((uv_stream_t *)&r->out, on_run_alloc, on_run_read) != 0)
    close_pipe(r);
  uv_update_time(mon->loop); /* the timeout counts from the spawn, not the loop's last wake-up */
  uv_timer_start(&r->timer, on_run_timeout, mon->spec->cmd_timeout_ms, 0);
}

void vl__monitor_cmd_init(vl_monitor_t *mon) {
  const vl_monitor_spec_t *spec = mon->spec;
  mon->runs = vl_xcalloc((size_t)spec->n_cmds, sizeof(*mon->runs));
  for (int i = 0; i < spec->n_cmds; i++) {
    run_t *r = &mon->runs[i];
    r->mon = mon;
    r->label = spec->cmds[i].label;
    r->cmd = spec->cmds[i].cmd;
    vl__monitor_add_series(mon, vl_xfmt("cmd.%s", r->label), "", VL_MONITOR_CMD);
    r->ser = mon->n_series - 1;
  }
}

void vl__monitor_cmd_open(vl_monitor_t *mon) {
  for (int i = 0; i < mon->spec->n_cmds; i++) {
    run_t *r = &mon->runs[i];
    uv_timer_init(mon->loop, &r->timer);
    r->timer.data = r;
    mon->n_runs++;
  }
}

void vl__monitor_cmd_sample(vl_monitor_t *mon) {
  for (int i = 0; i < mon->n_runs; i++)
    run_start(&mon->runs[i]);
}

void vl__monitor_cmd_close(vl_monitor_t *mon) {
  for (int i = 0; i < mon->n_runs; i++) {
    run_t *r = &mon->runs[i];
    if (r->running) {
      mon->to_close++; /* run_closed counts it down once the command is reaped */
      run_kill(r);
    }
    uv_timer_stop(&r->timer);
    mon->to_close++;
    r->timer.data = mon;
    uv_close((uv_handle_t *)&r->timer, vl__monitor_handle_closed);
  }
}

void vl__monitor_cmd_free(vl_monitor_t *mon) {
  free(mon->runs);
  mon->runs = NULL;
  mon->n_runs = 0;
}

int vl_monitor_cmd_info(const vl_monitor_t *mon, int i, vl_monitor_part_info_t *out) {
  if (i < 0 || i >= mon->n_runs)
    return VL_ERANGE;
  const run_t *r = &mon->runs[i];
  memset(out, 0, sizeof(*out));
  out->label = r->label;
  out->ok = r->ok;
  out->failed = r->failed;
  out->skipped = r->skipped;
  out->timeouts = r->timeouts;
  out->n_series = 1;
  snprintf(out->last_error, sizeof(out->last_error), "%s", r->last_error);
  return 0;
}
