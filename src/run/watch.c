/* What the outcomes say of the server, watched through the run. At the start, failing fast:
 * FAIL_FAST_N failures alike before any success stop the run in the server's words. In the middle,
 * the server gone: a followed server process that exits (seen at the end of a monitor round), or
 * connections refused one after another once a request has succeeded, say so in one headline and
 * stop the run (--keep-going sends on); the run then ends with status 1, and the summary says when
 * and how many requests could not connect after it. */
#include "runner_internal.h"
#include "vlmload/common.h"
#include "vlmload/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What to do about a failure every first request met, by its kind. */
static const char *fail_advice(vl_errclass_t err, long status, const char *words) {
  int about_model = strstr(words, "model") || strstr(words, "Model");
  if (err == VL_ERR_CONNECT)
    return "start the server or fix --url";
  if (err == VL_ERR_CONNECT_TIMEOUT)
    return "the server does not accept connections in time: is it up, and is --url its port?";
  if (status == 401 || status == 403)
    return "give a key the server takes with --api-key (or $OPENAI_API_KEY)";
  if (about_model)
    return "name a model the server serves with --model (GET /v1/models lists them)";
  if (status == 404)
    return "the server has no such route: check --url and --endpoint (and --api)";
  if (status == 405)
    return "the route does not take POST: check --endpoint";
  return "the server refuses these requests as they are: check --endpoint, --api and --model";
}

/* Watches the first outcomes of a run: FAIL_FAST_N failures alike (the same class and status) of
 * the kinds a wrong target gives, before any success, stop the run with one line in the server's
 * words. Any success, or a failure of another kind, ends the watch. */
static void fail_fast(vl_runner_t *r, const vl_outcome_t *o) {
  vl_errclass_t err = o->err;
  long status = o->status;
  if (!r->ff_open)
    return;
  int door = err == VL_ERR_CONNECT || err == VL_ERR_CONNECT_TIMEOUT || err == VL_ERR_HTTP_4XX;
  if (!door || (r->ff_n && (err != r->ff_err || status != r->ff_status))) {
    r->ff_open = 0;
    return;
  }
  r->ff_err = err;
  r->ff_status = status;
  if (++r->ff_n < FAIL_FAST_N)
    return;
  r->ff_open = 0;
  r->ff_stop = 1;
  const char *words = o->detail;
  char shown[4 * 201], first[201];
  snprintf(first, sizeof(first), "%.*s", (int)strcspn(words, "\r\n"), words);
  vl_text_shown(shown, sizeof(shown), first);
  const char *url = r->full_urls[o->url < r->cfg->n_urls ? o->url : 0];
  if (status)
    snprintf(r->ff_line, sizeof(r->ff_line),
             "the first %d requests all failed: POST %s answered HTTP %ld%s%s%s; %s "
             "(--keep-going sends anyway)",
             FAIL_FAST_N, url, status, *shown ? ": \"" : "", shown, *shown ? "\"" : "",
             fail_advice(err, status, words));
  else
    snprintf(r->ff_line, sizeof(r->ff_line),
             "the first %d requests all failed: %s: %s; %s (--keep-going sends anyway)",
             FAIL_FAST_N, url, shown, fail_advice(err, status, words));
}

static double run_s(const vl_runner_t *r, uint64_t ns) {
  return ns > r->t0_ns ? (double)(ns - r->t0_ns) / 1e9 : 0;
}

static void say(vl_runner_t *r, const char *then) {
  char line[512], words[400];
  vl_summary_gone_words(&r->gone, words, sizeof(words));
  snprintf(line, sizeof(line), "%s%s", words, then);
  vl_report_say(r->rep, line);
}

/* How long the server may refuse every connection, none answered, before the run stops: a
 * supervisor's restart answers again within it (the run goes on, and says how long the server was
 * away); a server that is gone does not. */
#define GONE_STOP_NS (10 * (uint64_t)1000000000)

/* Stops the run, unless --keep-going, once the server has refused connections for GONE_STOP_NS
 * without answering. */
static void maybe_stop(vl_runner_t *r, uint64_t now) {
  if (r->top->keep_going || !r->admitting || r->gone.back_at_s >= 0 || now < r->gone_ns ||
      now - r->gone_ns < GONE_STOP_NS)
    return;
  say(r, "; stopping: nothing answered for 10 s (--keep-going sends anyway)");
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

void vl__watch_outcome(vl_runner_t *r, const vl_outcome_t *o) {
  vl_errclass_t err = o->err;
  uint64_t sent_ns = o->sent_ns;
  if (err == VL_ERR_CANCELLED)
    return;
  int door = err == VL_ERR_CONNECT || err == VL_ERR_CONNECT_TIMEOUT;
  if (err == VL_ERR_NONE) {
    r->ff_open = 0;
    r->refused = 0;
    /* The server answers again (a restart on the same port): said once. */
    if (r->gone.how && r->gone.back_at_s < 0 && sent_ns >= r->gone_ns) {
      r->gone.back_at_s = run_s(r, o->done_ns);
      say(r, "");
    }
    return;
  }
  fail_fast(r, o);
  /* Counted by when the connection failed: a connection the dying server never accepted, or a
   * request resent on a fresh one (it keeps its first send time), was sent before it went and
   * could not connect after it all the same. */
  if (r->gone.how && r->gone.back_at_s < 0 && door && o->done_ns >= r->gone_ns)
    r->gone.after++;
  /* Refusals before any success are failing fast's (the server was never there). */
  if (err != VL_ERR_CONNECT || r->ff_open || r->probing)
    return;
  if (r->refused++ == 0)
    r->refused_ns = sent_ns;
  if (r->refused < FAIL_FAST_N)
    return;
  if (!r->gone.how || r->gone.back_at_s >= 0) {
    /* The monitor's rounds may not have seen it yet: a followed process gone now is the cause. */
    if (r->gone.back_at_s >= 0)
      r->gone = (vl_gone_t){.how = NULL, .back_at_s = -1};
    look(r, 1);
    if (!r->gone.how) {
      r->gone.how = "refused";
      r->gone_ns = r->refused_ns;
      r->gone.at_s = run_s(r, r->refused_ns);
      r->gone.after = (uint64_t)r->refused;
      r->gone.url = r->top->url;
    }
    say(r, "");
  }
  maybe_stop(r, o->done_ns);
}

void vl__watch_round(vl_monitor_t *mon) {
  vl_runner_t *r = mon->data;
  if (r->final_round == 1) { /* the round under way at the end is over: the last one starts */
    r->final_round = vl_monitor_sample(mon) == 0 && mon->pending > 0 ? 3 : 2;
    if (r->final_round == 2)
      vl__runner_maybe_finish(r);
    return;
  }
  if (r->final_round == 3) { /* the round after the last request: the run may end */
    r->final_round = 2;
    vl__runner_maybe_finish(r);
    return;
  }
  if (look(r, 0) && r->admitting)
    say(r, "");
}

void vl__watch_free(vl_runner_t *r) {
  free(r->was_present);
  r->was_present = NULL;
}
