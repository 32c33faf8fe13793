/* The monitor's commands: one `/bin/sh -c CMD` per --monitor-cmd and round, in a process group of
 * its own, read for the first number it prints. */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/memunit.h"
#include "vlmload/text.h"

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
  int last_failed;
  char last_error[160];
  double name_bytes; /* vl_memunit_series of its series' name */
  vl_monitor_unit_from_t unit_from;
  const char *read_unit; /* what its output named at the latest reading (static) */
  char first_text[48];   /* the number and unit of its first reading */
} run_t;

/* The first number in the output: optional sign, digits with an optional fraction, optional
 * exponent, not glued to a word before it (the 0 of "gpu0" is not one). *start and *end get the
 * index of its first byte and the one past it. */
static int first_number(const char *s, size_t n, double *out, size_t *start, size_t *end) {
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
    *start = i;
    *end = j;
    return 0;
  }
  return -1;
}

static int letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The unit of memory the word after a number names, in bytes ("190956 kB", "1234MiB"): letters
 * after at most blanks, not followed by a digit or '_'; 0 when there is none. *len gets the end
 * of the word, from s. */
static double unit_after(const char *s, size_t n, size_t *len) {
  size_t i = 0;
  while (i < n && (s[i] == ' ' || s[i] == '\t'))
    i++;
  size_t j = i;
  while (j < n && letter(s[j]))
    j++;
  *len = j;
  if (j == i || (j < n && ((s[j] >= '0' && s[j] <= '9') || s[j] == '_')))
    return 0;
  return vl_memunit_word(s + i, j - i);
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

/* v, the number at [start, end) in the output, in its series' unit: converted from the unit the
 * output names after it, or taken in the unit the series' name states, else as MB. */
static double in_unit(run_t *r, double v, size_t start, size_t end) {
  size_t wl;
  double said = unit_after(r->buf + end, r->len - end, &wl);
  if (!r->first_text[0]) {
    char raw[40];
    size_t rl = VL_MIN(end + (said > 0 ? wl : 0) - start, sizeof(raw) - 1);
    memcpy(raw, r->buf + start, rl);
    raw[rl] = '\0';
    vl_text_shown(r->first_text, sizeof(r->first_text), raw);
  }
  if (r->name_bytes == 0) {
    r->unit_from = VL_MONITOR_UNIT_NOT_MEMORY;
    return v;
  }
  double to = r->name_bytes > 0 ? r->name_bytes : VL_MEMUNIT_MB;
  if (said > 0) {
    r->unit_from = VL_MONITOR_UNIT_OUTPUT;
    r->read_unit = vl_memunit_label(said);
    return v * said / to;
  }
  r->unit_from = r->name_bytes > 0 ? VL_MONITOR_UNIT_NAME : VL_MONITOR_UNIT_ASSUMED;
  return v;
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
  size_t start = 0, end = 0;
  int ok = 0;
  if (r->timed_out) {
    snprintf(r->last_error, sizeof(r->last_error), "still running after %llu ms: killed",
             (unsigned long long)mon->spec->cmd_timeout_ms);
  } else if (r->term_signal) {
    snprintf(r->last_error, sizeof(r->last_error), "killed by signal %d", r->term_signal);
  } else if (r->exit_status != 0) {
    snprintf(r->last_error, sizeof(r->last_error), "exit status %lld", (long long)r->exit_status);
  } else if (first_number(r->buf, r->len, &v, &start, &end) != 0) {
    snprintf(r->last_error, sizeof(r->last_error), "printed no number");
  } else {
    ok = 1;
    v = in_unit(r, v, start, end);
  }
  if (ok)
    r->ok++;
  else
    r->failed++;
  r->last_failed = !ok;
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
    r->last_failed = 1;
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
    char *name = vl_xfmt("cmd.%s", r->label);
    r->name_bytes = vl_memunit_series(name);
    const char *unit = r->name_bytes == 0  ? ""
                       : r->name_bytes > 0 ? vl_memunit_label(r->name_bytes)
                                           : "MB";
    vl__monitor_add_series(mon, name, unit, VL_MONITOR_CMD);
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
  out->last_failed = r->last_failed;
  snprintf(out->last_error, sizeof(out->last_error), "%s", r->last_error);
  out->advice = "";
  out->missing = "";
  out->page_some = "";
  out->unit = mon->series[r->ser]->pub.unit;
  out->unit_from = r->unit_from;
  out->read_unit = r->read_unit ? r->read_unit : "";
  snprintf(out->first_text, sizeof(out->first_text), "%s", r->first_text);
  return 0;
}
