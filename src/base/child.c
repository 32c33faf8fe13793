/* Child processes in sessions of their own (child.h). */
#include "vlmload/child.h"

#include <errno.h>
#include <signal.h>

int vl_child_spawn(uv_loop_t *loop, uv_process_t *proc, const vl_child_opts_t *o) {
  uv_stdio_container_t stdio[4];
  const int fds[3] = {o->in_fd, o->out_fd, o->err_fd};
  for (int i = 0; i < 3; i++) {
    stdio[i].flags = UV_INHERIT_FD;
    stdio[i].data.fd = fds[i] >= 0 ? fds[i] : i;
  }
  if (o->report) {
    stdio[3].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[3].data.stream = (uv_stream_t *)o->report;
  }
  uv_process_options_t po = {.exit_cb = o->exit_cb,
                             .file = o->file,
                             .args = o->args,
                             .flags = UV_PROCESS_DETACHED, /* setsid(): its own group */
                             .stdio_count = o->report ? 4 : 3,
                             .stdio = stdio};
  int rc = uv_spawn(loop, proc, &po);
  if (rc != 0)
    uv_close((uv_handle_t *)proc, NULL);
  return rc;
}

int vl_child_signal_group(const uv_process_t *proc, int signum) {
  if (proc->pid <= 0)
    return UV_ESRCH;
  return kill(-proc->pid, signum) == 0 ? 0 : uv_translate_sys_error(errno);
}

int vl_child_self(char *path, size_t len) {
  size_t n = len;
  return uv_exepath(path, &n);
}
