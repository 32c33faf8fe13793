/* Child processes run on a libuv loop, shared by --workers (workers.h) and `vlmload matrix`
 * (matrix.h): each is started in a session of its own, so that it leads its own process group and
 * a terminal's Ctrl-C reaches only this process, which decides what to forward.
 */
#ifndef VLMLOAD_CHILD_H
#define VLMLOAD_CHILD_H

#include <stddef.h>
#include <uv.h>

typedef struct vl_child_opts_s {
  const char *file;          /* the program: a path, or a name looked up in PATH */
  char **args;               /* argv, args[0] included, NULL-terminated; borrowed for the call */
  int in_fd, out_fd, err_fd; /* descriptors for 0, 1 and 2 (inherited by the child); -1: this
                                process's own */
  uv_pipe_t *report;         /* when set: an initialised pipe, made the child's descriptor 3,
                                which the child writes and this process reads */
  uv_exit_cb exit_cb;        /* called once when the child has exited */
} vl_child_opts_t;

/* Starts o->file on loop into proc (whose data the caller sets). Returns 0, or a libuv error
 * (proc is then closed; o->report is the caller's to close). */
int vl_child_spawn(uv_loop_t *loop, uv_process_t *proc, const vl_child_opts_t *o);

/* Sends signum to the whole process group the child leads (its descendants included, unless they
 * left it). Returns 0 or a libuv error (UV_ESRCH: the group is gone). */
int vl_child_signal_group(const uv_process_t *proc, int signum);

/* This program's path (uv_exepath), to start copies of it. Returns 0 or a libuv error. */
int vl_child_self(char *path, size_t len);

#endif
