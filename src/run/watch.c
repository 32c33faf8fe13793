/* Watching the server during the run: a followed server process that exits (seen at the end of a
 * monitor round), and connections refused one after another once a request has succeeded. The
 * first says the server is gone; refusals in a row say so too when no monitor saw it, and stop
 * the run (--keep-going sends on). Either way the run ends with status 1 and one headline, and
 * the summary says when and how many requests could not connect after it. */
#include "runner_internal.h"
#include "vlmload/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double run_s(const vl_runner_t *r, uint64_t ns) {
  return ns > r->t0_ns ? (double)(ns - r->t0_ns) / 1e9 : 0;
}

static void say(vl_runner_t *r, const char *then) {
  char line[512], words[400];
  vl_summary_gone_words(&r->gone, words, sizeof(words));
  snprintf(line, sizeof(line), "%s%s", words, then);
  vl_report_say(r->rep, line);
}

/* Stops the run, unless --keep-going: nothing more can reach the server. */
static void stop(vl_runner_t *r) {
  if (r->top->keep_going || !r->admitting)
    return;
  say(r, "; stopping (--keep-going sends anyway)");
  vl__runner_begin_stop(r, STOP_GONE);
}

/* Target i's liveness at the latest round: its pid, label and whether it is alive; 0 when it has
 * none to follow (a process target not found yet). */
static int target(const vl_monitor_t *mon, int i, pid_t *pid, const char **label, int *alive) {
  const vl_monitor_spec_t *spec = mon->spec;
  if (i < spec->n_pids) {
    vl_monitor_proc_info_t info;
    if (vl_monitor_proc_info(mon, i, &info) != 0 || !info.pid)
      return 0;
    *pid = info.pid;
    *label = info.label;
    *alive = info.present;
    return 1;
  }
  vl_monitor_tree_info_t tree;
  if (vl_monitor_tree_info(mon, i - spec->n_pids, &tree) != 0 || !tree.pid)
    return 0;
  *pid = tree.pid;
  *label = tree.label;
  *alive = tree.present;
  return 1;
}

/* Target i's process (pid, label) is gone: the server exited, at the latest by now, and before
 * the refusals in a row that it explains. */
static void exited(vl_runner_t *r, pid_t pid, const char *label) {
  uint64_t at = uv_hrtime();
  if (r->refused > 0 && r->refused_ns < at)
    at = r->refused_ns;
  if (!r->gone.how) {
    r->gone_ns = at;
    r->gone.at_s = run_s(r, at);
    r->gone.after = (uint64_t)r->refused;
  }
  r->gone.how = "exited";
  r->gone.pid = (int)pid;
  r->gone.label = label;
  r->gone.url = r->top->url;
  vl_monitor_gone(&r->mon, label);
}

/* Looks at each --monitor-pid and --monitor-tree root: one that was alive at an earlier round and
 * is gone now (at the latest round, or, with now, in /proc right now) exited. Returns 1 when one
 * did. */
static int look(vl_runner_t *r, int now) {
  if (!r->has_mon || r->gone.pid)
    return 0;
  const vl_monitor_t *mon = &r->mon;
  const vl_monitor_spec_t *spec = mon->spec;
  /* A --monitor-pid or a --monitor-tree's root names one process for the run: one that was alive
   * and is gone cannot come back (a --monitor-pid-match finds the next one). */
  int n = spec->n_pids + spec->n_trees;
  if (!n)
    return 0;
  if (!r->was_present)
    r->was_present = vl_xcalloc((size_t)n, sizeof(int));
  for (int i = 0; i < n; i++) {
    pid_t pid;
    const char *label;
    int alive;
    vl_procmem_t pm;
    if (!target(mon, i, &pid, &label, &alive))
      continue;
    if (now && r->was_present[i])
      alive = vl_procmem_read(pid, 0, 0, &pm) != VL_ENOENT;
    if (alive) {
      r->was_present[i] = 1;
      continue;
    }
    if (r->was_present[i]) {
      exited(r, pid, label);
      return 1;
    }
  }
  return 0;
}

void vl__watch_outcome(vl_runner_t *r, vl_errclass_t err, uint64_t sent_ns, uint64_t done_ns) {
  int door = err == VL_ERR_CONNECT || err == VL_ERR_CONNECT_TIMEOUT;
  if (err == VL_ERR_NONE) {
    r->refused = 0;
    return;
  }
  if (r->gone.how && door && sent_ns >= r->gone_ns)
    r->gone.after++;
  /* Refusals before any success are failing fast's (the server was never there). */
  if (err != VL_ERR_CONNECT || r->ff_open || r->probing)
    return;
  if (r->refused++ == 0)
    r->refused_ns = sent_ns;
  if (r->refused < FAIL_FAST_N)
    return;
  /* The monitor's rounds may not have seen it yet: a followed process gone now is the cause. */
  look(r, 1);
  if (!r->gone.how) {
    r->gone.how = "refused";
    r->gone_ns = r->refused_ns;
    r->gone.at_s = run_s(r, r->refused_ns);
    r->gone.after = (uint64_t)r->refused;
    r->gone.url = r->top->url;
    if (r->top->keep_going)
      say(r, "");
  }
  stop(r);
}

void vl__watch_round(vl_monitor_t *mon) {
  vl_runner_t *r = mon->data;
  if (look(r, 0) && r->admitting)
    say(r, "");
}

void vl__watch_free(vl_runner_t *r) {
  free(r->was_present);
  r->was_present = NULL;
}
