/* The monitor on a real loop against real peers: processes it samples (children of the test),
 * a fake NVML library, a Python http.server serving Prometheus pages over loopback, and shell
 * commands. Every test closes the monitor and the transport and asserts uv_loop_close() == 0. */
#include "task.h"
#include "children.h"
#include "vlmload/common.h"
#include "vlmload/memunit.h"
#include "vlmload/monitor.h"
#include "vlmload/nvml.h"
#include "vlmload/procmem.h"
#include "vlmload/smaps.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>

typedef struct {
  uv_loop_t loop;
  vl_transport_t tr;
  vl_monitor_t mon;
  vl_monitor_spec_t spec;
  uv_timer_t tick;
  int done, closed, tr_closed, ticks;
} ctx_t;

static void on_mon_done(vl_monitor_t *m) {
  ctx_t *c = m->data;
  c->done++;
}

static void on_mon_closed(vl_monitor_t *m) {
  ctx_t *c = m->data;
  c->closed++;
}

static void on_tr_closed(vl_transport_t *t) {
  ctx_t *c = t->data;
  c->tr_closed++;
}

/* Wakes the loop every 10 ms so that the waits below see their deadlines. */
static void on_tick(uv_timer_t *h) {
  ctx_t *c = h->data;
  c->ticks++;
}

static void setup(ctx_t *c) {
  memset(c, 0, sizeof(*c));
  ASSERT_INT_EQ(uv_loop_init(&c->loop), 0);
  ASSERT_INT_EQ(vl_transport_init(&c->tr, &c->loop, 0, 0), 0);
  c->tr.data = c;
  uv_timer_init(&c->loop, &c->tick);
  c->tick.data = c;
  uv_timer_start(&c->tick, on_tick, 10, 10);
  vl_monitor_spec_init(&c->spec);
}

static void start(ctx_t *c) {
  char err[256] = "";
  int rc = vl_monitor_init(&c->mon, &c->loop, &c->tr, &c->spec, on_mon_done, err, sizeof(err));
  if (rc)
    fprintf(stderr, "vl_monitor_init: %s\n", err);
  ASSERT_INT_EQ(rc, 0);
  c->mon.data = c;
}

/* Runs the loop until *flag reaches want, failing after ms. */
static void wait_for(ctx_t *c, int *flag, int want, int ms) {
  uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000u;
  while (*flag < want) {
    ASSERT(uv_hrtime() < end);
    uv_run(&c->loop, UV_RUN_ONCE);
  }
}

static void run_for(ctx_t *c, int ms) {
  uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000u;
  while (uv_hrtime() < end)
    uv_run(&c->loop, UV_RUN_ONCE);
}

/* One round, to its end. */
static void round_trip(ctx_t *c) {
  int want = c->done + 1;
  ASSERT_INT_EQ(vl_monitor_sample(&c->mon), 0);
  wait_for(c, &c->done, want, 15000);
}

static void teardown(ctx_t *c) {
  vl_monitor_close(&c->mon, on_mon_closed);
  ASSERT_INT_EQ(vl_monitor_sample(&c->mon), VL_ECANCEL);
  vl_transport_close(&c->tr, on_tr_closed);
  uv_close((uv_handle_t *)&c->tick, NULL);
  ASSERT_INT_EQ(uv_run(&c->loop, UV_RUN_DEFAULT), 0);
  ASSERT_INT_EQ(c->closed, 1);
  ASSERT_INT_EQ(c->tr_closed, 1);
  ASSERT_INT_EQ(uv_loop_close(&c->loop), 0);
  vl_monitor_free(&c->mon);
  vl_monitor_spec_free(&c->spec);
}

static const vl_monitor_series_t *ser(ctx_t *c, const char *name) {
  const vl_monitor_series_t *s = vl_monitor_find(&c->mon, name);
  if (!s) {
    fprintf(stderr, "no series %s; there are:", name);
    for (size_t i = 0; i < vl_monitor_count(&c->mon); i++)
      fprintf(stderr, " %s", vl_monitor_series(&c->mon, i)->name);
    fprintf(stderr, "\n");
  }
  ASSERT(s != NULL);
  return s;
}

/* A `sleep` argument unique to this test run. */
static void unique_arg(char *buf, size_t len) {
  snprintf(buf, len, "1000.%ld%ld", (long)getpid(), (long)(vl_now_ns() % 1000000));
}

/* Waits until a process with this exact command line shows in /proc (exec done). */
static void wait_exec(const char *cmdline_re) {
  pid_t p;
  char err[128];
  for (int i = 0; i < 500 && vl_procmem_find(cmdline_re, &p, 1, err, sizeof(err)) < 1; i++)
    sleep_ms(10);
}

/* Option values. */

TEST_IMPL(monitor_spec_parse) {
  vl_monitor_spec_t s;
  char err[256];
  vl_monitor_spec_init(&s);
  ASSERT_INT_EQ(vl_monitor_spec_empty(&s), 1);
  ASSERT_UINT_EQ(s.prom_timeout_ms, 2000);
  ASSERT_UINT_EQ(s.cmd_timeout_ms, 10000);
  ASSERT_UINT_EQ(s.rescan_ms, 1000);

  ASSERT_INT_EQ(vl_monitor_spec_add_pid(&s, "scheduler=1234", err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_pid(&s, "5678", err, sizeof(err)), 0);
  ASSERT_STR_EQ(s.pids[0].label, "scheduler");
  ASSERT_INT_EQ(s.pids[0].pid, 1234);
  ASSERT_STR_EQ(s.pids[1].label, "5678");
  static const struct {
    const char *arg, *why;
  } bad_pid[] = {
      {"abc", "--monitor-pid abc: \"abc\" is not a process ID (want [LABEL=]PID)"},
      {"x=", "--monitor-pid x=: \"\" is not a process ID"},
      {"0", "\"0\" is not a process ID"},
      {"-5", "\"-5\" is not a process ID"},
      {"12a", "\"12a\" is not a process ID"},
      {"99999999999", "\"99999999999\" is not a process ID"},
      {"bad label=12", "\"bad label=12\" is not a process ID"},
      {"scheduler=99", "--monitor-pid scheduler=99: label \"scheduler\" is already used"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(bad_pid); i++) {
    ASSERT_INT_EQ(vl_monitor_spec_add_pid(&s, bad_pid[i].arg, err, sizeof(err)), VL_EINVAL);
    if (!strstr(err, bad_pid[i].why))
      fprintf(stderr, "%s -> %s\n", bad_pid[i].arg, err);
    ASSERT(strstr(err, bad_pid[i].why) != NULL);
  }
  ASSERT_INT_EQ(s.n_pids, 2);

  ASSERT_INT_EQ(vl_monitor_spec_add_match(&s, "tok=sglang::tokenizer", err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_match(&s, "sglang::scheduler", err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_match(&s, "sglang[:]+scheduler", err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_match(&s, "^.*$", err, sizeof(err)), 0);
  ASSERT_STR_EQ(s.matches[0].label, "tok");
  ASSERT_STR_EQ(s.matches[0].regex, "sglang::tokenizer");
  ASSERT_STR_EQ(s.matches[1].label, "sglang_scheduler");
  ASSERT_STR_EQ(s.matches[1].regex, "sglang::scheduler");
  ASSERT_STR_EQ(s.matches[2].label, "sglang_scheduler_2"); /* made-up labels never collide */
  ASSERT_STR_EQ(s.matches[3].label, "match4");
  ASSERT_INT_EQ(vl_monitor_spec_add_match(&s, "tok=other", err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "label \"tok\" is already used") != NULL);
  ASSERT_INT_EQ(vl_monitor_spec_add_match(&s, "scheduler=x", err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "label \"scheduler\" is already used") != NULL); /* shared with pids */
  ASSERT_INT_EQ(vl_monitor_spec_add_match(&s, "x=a(b", err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "--monitor-pid-match x=a(b: bad regular expression: ") == err);
  ASSERT_INT_EQ(vl_monitor_spec_add_match(&s, "x=", err, sizeof(err)), VL_EINVAL);
  ASSERT_STR_EQ(err, "--monitor-pid-match x=: empty regular expression");

  ASSERT_INT_EQ(vl_monitor_spec_add_prom(&s, "http://127.0.0.1:30000", err, sizeof(err)), 0);
  ASSERT(s.proms[0].label == NULL);
  ASSERT_STR_EQ(s.proms[0].target->url, "http://127.0.0.1:30000/metrics");
  ASSERT_INT_EQ(s.proms[0].target->defaults, 1);
  ASSERT_INT_EQ(
      vl_monitor_spec_add_prom(&s, "dec=https://h:1/m#sglang:token_usage", err, sizeof(err)), 0);
  ASSERT_STR_EQ(s.proms[1].label, "dec");
  ASSERT_STR_EQ(s.proms[1].target->url, "https://h:1/m");
  ASSERT_UINT_EQ(s.proms[1].target->n_sels, 1);
  ASSERT_INT_EQ(vl_monitor_spec_add_prom(&s, "dec=http://h", err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "label \"dec\" is already used") != NULL);
  ASSERT_INT_EQ(vl_monitor_spec_add_prom(&s, "h:1/metrics", err, sizeof(err)), VL_EINVAL);
  ASSERT_STR_EQ(err,
                "--monitor-prom h:1/metrics: \"h:1/metrics\" is not an http:// or https:// URL");
  ASSERT_INT_EQ(vl_monitor_spec_add_prom(&s, "http://h#a{b=c}", err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "--monitor-prom http://h#a{b=c}: selector a: ") == err);

  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&s, "echo 1", err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&s, "gpu=nvidia-smi --query", err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&s, "X=1 env", err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&s, "  echo 4", err, sizeof(err)), 0);
  ASSERT_STR_EQ(s.cmds[0].label, "1");
  ASSERT_STR_EQ(s.cmds[0].cmd, "echo 1");
  ASSERT_STR_EQ(s.cmds[1].label, "gpu");
  ASSERT_STR_EQ(s.cmds[1].cmd, "nvidia-smi --query");
  ASSERT_STR_EQ(s.cmds[2].label, "X"); /* documented: label a command that starts with NAME= */
  ASSERT_STR_EQ(s.cmds[2].cmd, "1 env");
  ASSERT_STR_EQ(s.cmds[3].label, "4");
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&s, "gpu=true", err, sizeof(err)), VL_EINVAL);
  ASSERT(strstr(err, "label \"gpu\" is already used") != NULL);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&s, "x=  ", err, sizeof(err)), VL_EINVAL);
  ASSERT_STR_EQ(err, "--monitor-cmd x=  : empty command");
  ASSERT_INT_EQ(vl_monitor_spec_empty(&s), 0);
  vl_monitor_spec_free(&s);
  ASSERT_INT_EQ(vl_monitor_spec_empty(&s), 1);
  ASSERT_UINT_EQ(s.prom_timeout_ms, 2000);
}

/* Processes: a fixed PID that exits, and a matched one that is killed and started again. */
TEST_IMPL(monitor_proc) {
  ctx_t c;
  setup(&c);
  char arg[64], re[96], opt[128], err[256];
  unique_arg(arg, sizeof(arg));
  snprintf(re, sizeof(re), "^sleep %s$", arg);
  pid_t fixed = spawn_sleep("60");
  pid_t matched = spawn_sleep(arg);
  wait_exec(re);
  snprintf(opt, sizeof(opt), "sched=%ld", (long)fixed);
  ASSERT_INT_EQ(vl_monitor_spec_add_pid(&c.spec, opt, err, sizeof(err)), 0);
  snprintf(opt, sizeof(opt), "srv=%s", re);
  ASSERT_INT_EQ(vl_monitor_spec_add_match(&c.spec, opt, err, sizeof(err)), 0);
  c.spec.pss = 1;
  c.spec.rescan_ms = 0;
  start(&c);
  /* Each round's from status, then the anatomy's from smaps. */
  static const char *names[] = {"rss_mb.sched",  "hwm_mb.sched",    "pss_mb.sched", "anon_mb.sched",
                                "file_mb.sched", "shmem_mb.sched",  "rss_mb.srv",   "hwm_mb.srv",
                                "pss_mb.srv",    "anon_mb.srv",     "file_mb.srv",  "shmem_mb.srv",
                                "heap_mb.sched", "device_mb.sched", "arenas.sched", "heap_mb.srv",
                                "device_mb.srv", "arenas.srv"};
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), VL_ARRAY_SIZE(names));
  for (size_t i = 0; i < VL_ARRAY_SIZE(names); i++) {
    const vl_monitor_series_t *s = vl_monitor_series(&c.mon, i);
    ASSERT_STR_EQ(s->name, names[i]);
    ASSERT_STR_EQ(s->unit, strncmp(names[i], "arenas.", 7) == 0 ? "" : "MB");
    ASSERT_INT_EQ(s->kind, VL_MONITOR_PROC);
    ASSERT_INT_EQ(s->valid, 0);
    ASSERT(s->t_wall_ms == 0);
  }
  int64_t t0 = vl_wall_ms();
  round_trip(&c);
  for (size_t i = 0; i < 12; i++) {
    const vl_monitor_series_t *s = vl_monitor_series(&c.mon, i);
    ASSERT_INT_EQ(s->valid, 1);
    /* A sleep maps no shared memory. */
    if (strncmp(names[i], "shmem_mb.", 9) == 0)
      ASSERT(s->value >= 0 && s->value < 64);
    else
      ASSERT(s->value > 0 && s->value < 64);
    ASSERT(s->t_wall_ms >= t0 && s->t_wall_ms <= vl_wall_ms());
  }
  /* The kinds add up to the resident set of the same read. */
  for (size_t i = 0; i < 12; i += 6)
    ASSERT_NEAR(vl_monitor_series(&c.mon, i + 3)->value + vl_monitor_series(&c.mon, i + 4)->value +
                    vl_monitor_series(&c.mon, i + 5)->value,
                vl_monitor_series(&c.mon, i)->value, 1e-9);
  vl_monitor_proc_info_t in;
  ASSERT_INT_EQ(vl_monitor_proc_info(&c.mon, 0, &in), 0);
  ASSERT_STR_EQ(in.label, "sched");
  ASSERT_INT_EQ(in.fixed, 1);
  ASSERT_INT_EQ(in.pid, fixed);
  ASSERT_INT_EQ(in.present, 1);
  ASSERT_INT_EQ(vl_monitor_proc_info(&c.mon, 1, &in), 0);
  ASSERT_STR_EQ(in.label, "srv");
  ASSERT_INT_EQ(in.fixed, 0);
  ASSERT_INT_EQ(in.pid, matched);
  ASSERT_INT_EQ(in.matches, 1);
  ASSERT_INT_EQ(vl_monitor_proc_info(&c.mon, 2, &in), VL_ERANGE);

  /* Both exit: both read missing. */
  kill_reap(fixed);
  kill_reap(matched);
  round_trip(&c);
  for (size_t i = 0; i < 6; i++)
    ASSERT_INT_EQ(vl_monitor_series(&c.mon, i)->valid, 0);
  ASSERT_INT_EQ(vl_monitor_proc_info(&c.mon, 1, &in), 0);
  ASSERT_INT_EQ(in.present, 0);
  ASSERT_UINT_EQ(in.restarts, 0);

  /* The matched one comes back under a new PID: followed, one restart. */
  pid_t again = spawn_sleep(arg);
  wait_exec(re);
  round_trip(&c);
  ASSERT_INT_EQ(ser(&c, "rss_mb.srv")->valid, 1);
  ASSERT_INT_EQ(ser(&c, "rss_mb.sched")->valid, 0); /* a fixed PID stays missing */
  ASSERT_INT_EQ(vl_monitor_proc_info(&c.mon, 1, &in), 0);
  ASSERT_INT_EQ(in.present, 1);
  ASSERT_INT_EQ(in.pid, again);
  ASSERT_UINT_EQ(in.restarts, 1);
  kill_reap(again);
  teardown(&c);
}

/* A PID that does not exist fails init with a reason, leaving nothing on the loop. */
TEST_IMPL(monitor_proc_no_such_pid) {
  ctx_t c;
  setup(&c);
  pid_t gone = spawn_sleep("60");
  kill_reap(gone);
  char opt[64], err[256];
  snprintf(opt, sizeof(opt), "x=%ld", (long)gone);
  ASSERT_INT_EQ(vl_monitor_spec_add_pid(&c.spec, opt, err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_init(&c.mon, &c.loop, &c.tr, &c.spec, NULL, err, sizeof(err)),
                VL_ENOENT);
  char want[96];
  snprintf(want, sizeof(want), "--monitor-pid x=%ld: no process %ld", (long)gone, (long)gone);
  ASSERT_STR_EQ(err, want);
  vl_transport_close(&c.tr, NULL);
  uv_close((uv_handle_t *)&c.tick, NULL);
  ASSERT_INT_EQ(uv_run(&c.loop, UV_RUN_DEFAULT), 0);
  ASSERT_INT_EQ(uv_loop_close(&c.loop), 0);
  vl_monitor_spec_free(&c.spec);
}

/* GPU series from a fake NVML: per device, and per monitored process summed over devices. */
TEST_IMPL(monitor_gpu_fake) {
  ctx_t c;
  setup(&c);
  pid_t tok = spawn_sleep("60");
  char procs[128], opt[64], err[256];
  snprintf(procs, sizeof(procs), "0:%ld:300,1:%ld:200,1:99999:50", (long)tok, (long)tok);
  ASSERT_INT_EQ(setenv(VL_NVML_ENV, FAKE_NVML_V3, 1), 0);
  ASSERT_INT_EQ(setenv("FAKE_NVML_PROCS", procs, 1), 0);
  snprintf(opt, sizeof(opt), "tok=%ld", (long)tok);
  ASSERT_INT_EQ(vl_monitor_spec_add_pid(&c.spec, opt, err, sizeof(err)), 0);
  c.spec.gpu = 1;
  c.spec.anatomy_us = 0; /* no smaps reads: no heap_mb, device_mb, arenas */
  start(&c);
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), 8);
  ASSERT_STR_EQ(vl_monitor_series(&c.mon, 5)->name, "gpu0_used_mb");
  ASSERT_STR_EQ(vl_monitor_series(&c.mon, 6)->name, "gpu1_used_mb");
  ASSERT_STR_EQ(vl_monitor_series(&c.mon, 7)->name, "gpu_mb.tok");
  round_trip(&c);
  const vl_monitor_series_t *g0 = ser(&c, "gpu0_used_mb"), *g1 = ser(&c, "gpu1_used_mb");
  ASSERT_INT_EQ(g0->kind, VL_MONITOR_GPU);
  ASSERT_INT_EQ(g0->valid, 1);
  ASSERT_EQ(g0->value, 1024.0 + 300.0);
  ASSERT_EQ(g1->value, 2048.0 + 250.0);
  ASSERT_INT_EQ(ser(&c, "gpu_mb.tok")->valid, 1);
  ASSERT_EQ(ser(&c, "gpu_mb.tok")->value, 500.0);
  kill_reap(tok);
  round_trip(&c);
  ASSERT_INT_EQ(ser(&c, "gpu_mb.tok")->valid, 0); /* its process is gone */
  ASSERT_INT_EQ(ser(&c, "gpu0_used_mb")->valid, 1);
  teardown(&c);
}

/* --monitor-gpu on a machine without NVML: init fails with the one-line reason. */
TEST_IMPL(monitor_gpu_absent) {
  ctx_t c;
  setup(&c);
  ASSERT_INT_EQ(setenv(VL_NVML_ENV, "/nonexistent/libnvidia-ml.so.1", 1), 0);
  c.spec.gpu = 1;
  char err[256];
  ASSERT_INT_EQ(vl_monitor_init(&c.mon, &c.loop, &c.tr, &c.spec, NULL, err, sizeof(err)),
                VL_ENOENT);
  ASSERT(strstr(err, "--monitor-gpu: NVML not available: /nonexistent/libnvidia-ml.so.1") == err);
  ASSERT(strchr(err, '\n') == NULL);
  vl_transport_close(&c.tr, NULL);
  uv_close((uv_handle_t *)&c.tick, NULL);
  ASSERT_INT_EQ(uv_run(&c.loop, UV_RUN_DEFAULT), 0);
  ASSERT_INT_EQ(uv_loop_close(&c.loop), 0);
}

/* Commands: a number, a failure, no number, a number among words, and a slow one skipped. */
TEST_IMPL(monitor_cmd) {
  ctx_t c;
  setup(&c);
  static const char *cmds[] = {"echo 42.5",
                               "fail=echo 9; exit 3",
                               "nonum=echo hello",
                               "words=echo 'gpu0: 1234 MiB used'",
                               "slow=sleep 0.6; echo -7e2",
                               "sig=kill -9 $$"};
  char err[256];
  for (size_t i = 0; i < VL_ARRAY_SIZE(cmds); i++)
    ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, cmds[i], err, sizeof(err)), 0);
  start(&c);
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), 6);
  ASSERT_STR_EQ(vl_monitor_series(&c.mon, 0)->name, "cmd.1");
  ASSERT_STR_EQ(vl_monitor_series(&c.mon, 4)->name, "cmd.slow");
  ASSERT_INT_EQ(vl_monitor_series(&c.mon, 0)->kind, VL_MONITOR_CMD);
  ASSERT_STR_EQ(vl_monitor_series(&c.mon, 0)->unit, "MB"); /* nothing stated: MB */
  ASSERT_INT_EQ(vl_monitor_sample(&c.mon), 0);
  run_for(&c, 300); /* the quick ones are over, the slow one runs */
  ASSERT_INT_EQ(c.done, 0);
  ASSERT_INT_EQ(vl_monitor_sample(&c.mon), 0);
  wait_for(&c, &c.done, 1, 5000);
  const vl_monitor_series_t *s = ser(&c, "cmd.1");
  ASSERT_INT_EQ(s->valid, 1);
  ASSERT_EQ(s->value, 42.5);
  ASSERT_INT_EQ(ser(&c, "cmd.fail")->valid, 0);
  ASSERT_INT_EQ(ser(&c, "cmd.nonum")->valid, 0);
  ASSERT_INT_EQ(ser(&c, "cmd.words")->valid, 1);
  ASSERT_EQ(ser(&c, "cmd.words")->value, 1234.0); /* MiB is MB */
  ASSERT_INT_EQ(ser(&c, "cmd.slow")->valid, 1);
  ASSERT_EQ(ser(&c, "cmd.slow")->value, -700.0);
  ASSERT_INT_EQ(ser(&c, "cmd.sig")->valid, 0);
  vl_monitor_part_info_t in;
  ASSERT_INT_EQ(vl_monitor_cmd_info(&c.mon, 0, &in), 0);
  ASSERT_STR_EQ(in.label, "1");
  ASSERT_UINT_EQ(in.ok, 2);
  ASSERT_UINT_EQ(in.skipped, 0);
  ASSERT_INT_EQ(vl_monitor_cmd_info(&c.mon, 1, &in), 0);
  ASSERT_UINT_EQ(in.failed, 2);
  ASSERT_STR_EQ(in.last_error, "exit status 3");
  ASSERT_INT_EQ(vl_monitor_cmd_info(&c.mon, 2, &in), 0);
  ASSERT_STR_EQ(in.last_error, "printed no number");
  ASSERT_INT_EQ(vl_monitor_cmd_info(&c.mon, 4, &in), 0);
  ASSERT_UINT_EQ(in.ok, 1);
  ASSERT_UINT_EQ(in.skipped, 1);
  ASSERT_INT_EQ(vl_monitor_cmd_info(&c.mon, 5, &in), 0);
  ASSERT_STR_EQ(in.last_error, "killed by signal 9");
  ASSERT_INT_EQ(vl_monitor_cmd_info(&c.mon, 6, &in), VL_ERANGE);
  teardown(&c);
}

/* Units from series names and from the words programs print after a number. */
TEST_IMPL(monitor_units_from_names) {
  static const struct {
    const char *name;
    double bytes; /* vl_memunit_series */
  } names[] = {
      {"rss_mb.scheduler", 1048576},
      {"hwm_mb.tree/tree-worker#2", 1048576},
      {"gpu0_used_mb", 1048576},
      {"cmd.rss_kb", 1024},
      {"cmd.RSS_KiB", 1024},
      {"cmd.vram_gb", 1073741824},
      {"cmd.x_tib", 1099511627776.0},
      {"cmd.heap_megabytes", 1048576},
      {"cmd.memorybytes", 1},
      {"memory.used [MiB]", 1048576}, /* nvidia-smi's CSV header */
      {"cmd.rss", VL_MEMUNIT_UNSTATED},
      {"cmd.answer", VL_MEMUNIT_UNSTATED},
      {"cmd.gpu_kbps", VL_MEMUNIT_UNSTATED}, /* a word, not a part of one */
      {"cmd.hit_ratio", 0},
      {"kv_cache_usage_perc", 0},
      {"cmd.util_pct", 0},
      {"cmd.request_duration", VL_MEMUNIT_UNSTATED}, /* "ratio" inside a word is no share */
      {"prom.process_resident_memory_bytes", 1},
      {"prom.vlmmock_memory_bytes", 1},
      {"prom.dec.vlmmock_memory_bytes", 1},
      {"prom.my.label.x_bytes{a=b.c}", 1},
      {"prom.x_bytes~2", 1},
      {"prom.node_memory_MemFree_bytes", 1},
      {"prom.sglang:num_running_reqs", 0},
      {"prom.sglang:token_usage", 0},
      {"prom.llamacpp:requests_processing", 0},
      {"prom.vllm:kv_cache_usage_perc", 0},
      {"prom.gpu_mb.requests", 0},        /* the label's words are not the metric's */
      {"prom.req{device=gpu_mb}", 0},     /* nor are the labels' */
      {"prom.net_sent_bytes_total", 0},   /* a counter of bytes is no memory held */
      {"prom.request_size_bytes_sum", 0}, /* nor a histogram's parts */
      {"prom.request_size_bytes_bucket{le=1}", 0},
      {"prom.cache_size_mb", 1048576},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(names); i++) {
    double b = vl_memunit_series(names[i].name);
    if (b != names[i].bytes)
      fprintf(stderr, "%s: %g, not %g\n", names[i].name, b, names[i].bytes);
    ASSERT_EQ(b, names[i].bytes);
  }
  static const struct {
    const char *word;
    double bytes;
  } words[] = {{"kB", 1024},
               {"KiB", 1024},
               {"K", 1024},
               {"Ki", 1024},
               {"MB", 1048576},
               {"MiB", 1048576},
               {"m", 1048576},
               {"Gi", 1073741824},
               {"GB", 1073741824},
               {"B", 1},
               {"bytes", 1},
               {"byte", 1},
               {"kilobytes", 1024},
               {"TiB", 1099511627776.0},
               {"MHz", 0},
               {"ms", 0},
               {"s", 0},
               {"used", 0},
               {"", 0},
               {"kB2", 0}};
  for (size_t i = 0; i < VL_ARRAY_SIZE(words); i++) {
    double b = vl_memunit_word(words[i].word, strlen(words[i].word));
    if (b != words[i].bytes)
      fprintf(stderr, "%s: %g, not %g\n", words[i].word, b, words[i].bytes);
    ASSERT_EQ(b, words[i].bytes);
  }
  ASSERT_STR_EQ(vl_memunit_label(1), "bytes");
  ASSERT_STR_EQ(vl_memunit_label(1024), "kB");
  ASSERT_STR_EQ(vl_memunit_label(1048576), "MB");
  ASSERT_STR_EQ(vl_memunit_label(3), "");
}

/* Commands' units: the word after the number, else the name's, else MB; a real process's VmRSS
 * read through the kernel's "kB" agrees with /proc read directly. */
TEST_IMPL(monitor_cmd_units) {
  ctx_t c;
  setup(&c);
  char arg[64], re[96], cmd[160], err[256];
  unique_arg(arg, sizeof(arg));
  snprintf(re, sizeof(re), "^sleep %s$", arg);
  pid_t p = spawn_sleep(arg);
  wait_exec(re);
  sleep_ms(300); /* past the exec, sleep's pages are all in: its VmRSS holds still */
  snprintf(cmd, sizeof(cmd), "rss=grep VmRSS /proc/%ld/status", (long)p);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, cmd, err, sizeof(err)), 0);
  snprintf(cmd, sizeof(cmd), "rss_kb=awk '/VmRSS/ {print $2}' /proc/%ld/status", (long)p);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, cmd, err, sizeof(err)), 0);
  static const char *cmds[] = {"two=echo 'total: 2GiB'",  "free=echo 1.5Gi",
                               "one=echo 1048576 B",      "glued=echo 512kB",
                               "hz=echo 3 MHz",           "hit_ratio=echo 0.5 MB",
                               "vram_gb=echo '0.25 MiB'", "bare=echo 42"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(cmds); i++)
    ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, cmds[i], err, sizeof(err)), 0);
  start(&c);
  ASSERT_STR_EQ(ser(&c, "cmd.rss")->unit, "MB");
  ASSERT_STR_EQ(ser(&c, "cmd.rss_kb")->unit, "kB");
  ASSERT_EQ(ser(&c, "cmd.rss_kb")->mb, 1.0 / 1024);
  ASSERT_STR_EQ(ser(&c, "cmd.hit_ratio")->unit, "");
  ASSERT_EQ(ser(&c, "cmd.hit_ratio")->mb, 0.0);
  round_trip(&c);
  vl_procmem_t m;
  ASSERT_INT_EQ(vl_procmem_read(p, 0, 0, &m), 0);
  double mb = (double)m.rss_bytes / 1048576;
  ASSERT(mb > 0);
  ASSERT_EQ(ser(&c, "cmd.rss")->value, mb); /* a sleeping process's VmRSS holds still */
  ASSERT_EQ(ser(&c, "cmd.rss_kb")->value, mb * 1024);
  ASSERT_EQ(ser(&c, "cmd.two")->value, 2048.0);
  ASSERT_EQ(ser(&c, "cmd.free")->value, 1536.0);
  ASSERT_EQ(ser(&c, "cmd.one")->value, 1.0);
  ASSERT_EQ(ser(&c, "cmd.glued")->value, 0.5);
  ASSERT_EQ(ser(&c, "cmd.hz")->value, 3.0);
  ASSERT_EQ(ser(&c, "cmd.hit_ratio")->value, 0.5);
  ASSERT_EQ(ser(&c, "cmd.vram_gb")->value, 0.25 / 1024);
  ASSERT_EQ(ser(&c, "cmd.bare")->value, 42.0);
  static const struct {
    vl_monitor_unit_from_t from;
    const char *read, *text;
  } want[] = {{VL_MONITOR_UNIT_OUTPUT, "kB", NULL},
              {VL_MONITOR_UNIT_NAME, "", NULL},
              {VL_MONITOR_UNIT_OUTPUT, "GB", "2GiB"},
              {VL_MONITOR_UNIT_OUTPUT, "GB", "1.5Gi"},
              {VL_MONITOR_UNIT_OUTPUT, "bytes", "1048576 B"},
              {VL_MONITOR_UNIT_OUTPUT, "kB", "512kB"},
              {VL_MONITOR_UNIT_ASSUMED, "", "3"},
              {VL_MONITOR_UNIT_NOT_MEMORY, "", "0.5 MB"},
              {VL_MONITOR_UNIT_OUTPUT, "MB", "0.25 MiB"},
              {VL_MONITOR_UNIT_ASSUMED, "", "42"}};
  for (int i = 0; i < (int)VL_ARRAY_SIZE(want); i++) {
    vl_monitor_part_info_t in;
    ASSERT_INT_EQ(vl_monitor_cmd_info(&c.mon, i, &in), 0);
    if (in.unit_from != want[i].from)
      fprintf(stderr, "%s: unit from %d\n", in.label, (int)in.unit_from);
    ASSERT_INT_EQ(in.unit_from, want[i].from);
    ASSERT_STR_EQ(in.read_unit, want[i].read);
    if (want[i].text)
      ASSERT_STR_EQ(in.first_text, want[i].text);
  }
  kill_reap(p);
  teardown(&c);
}

/* A command past its timeout is killed with everything it started, even a child that keeps its
 * output open after the shell exits. */
TEST_IMPL(monitor_cmd_timeout) {
  ctx_t c;
  setup(&c);
  char a1[48], a2[64], cmd[160], re[96], err[256];
  unique_arg(a1, sizeof(a1));
  snprintf(a2, sizeof(a2), "%s1", a1);
  snprintf(cmd, sizeof(cmd), "hang=sleep %s; echo 1", a1);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, cmd, err, sizeof(err)), 0);
  snprintf(cmd, sizeof(cmd), "bg=sleep %s & echo 5", a2);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, cmd, err, sizeof(err)), 0);
  c.spec.cmd_timeout_ms = 300;
  start(&c);
  uint64_t t0 = uv_hrtime();
  round_trip(&c);
  double ms = (double)(uv_hrtime() - t0) / 1e6;
  if (ms < 250 || ms >= 5000)
    fprintf(stderr, "round took %.0f ms\n", ms);
  ASSERT(ms >= 250 && ms < 5000);
  vl_monitor_part_info_t in;
  for (int i = 0; i < 2; i++) {
    ASSERT_INT_EQ(vl_monitor_cmd_info(&c.mon, i, &in), 0);
    ASSERT_UINT_EQ(in.timeouts, 1);
    ASSERT_UINT_EQ(in.failed, 1);
    ASSERT_STR_EQ(in.last_error, "still running after 300 ms: killed");
    ASSERT_INT_EQ(vl_monitor_series(&c.mon, (size_t)i)->valid, 0);
  }
  pid_t p;
  snprintf(re, sizeof(re), "^sleep %s1?$", a1);
  int left = 1;
  for (int i = 0; i < 100 && left; i++) {
    left = vl_procmem_find(re, &p, 1, err, sizeof(err));
    if (left)
      sleep_ms(10);
  }
  ASSERT_INT_EQ(left, 0);
  teardown(&c);
}

/* Closing while a command runs kills it; the loop then closes cleanly. */
TEST_IMPL(monitor_cmd_close_kills) {
  ctx_t c;
  setup(&c);
  char a[64], cmd[96], re[96], err[256];
  unique_arg(a, sizeof(a));
  snprintf(cmd, sizeof(cmd), "sleep %s", a);
  snprintf(re, sizeof(re), "^sleep %s$", a);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, cmd, err, sizeof(err)), 0);
  start(&c);
  ASSERT_INT_EQ(vl_monitor_sample(&c.mon), 0);
  wait_exec(re);
  pid_t p;
  ASSERT_INT_EQ(vl_procmem_find(re, &p, 1, err, sizeof(err)), 1);
  uint64_t t0 = uv_hrtime();
  teardown(&c);
  ASSERT((uv_hrtime() - t0) / 1000000 < 2000);
  ASSERT_INT_EQ(c.done, 0); /* no done_cb once closing */
  int left = 1;
  for (int i = 0; i < 100 && left; i++) {
    left = vl_procmem_find(re, &p, 1, err, sizeof(err));
    if (left)
      sleep_ms(10);
  }
  ASSERT_INT_EQ(left, 0);
}

/* The Prometheus server: python3 prom_server.py FILE, its port read from its first line. */
typedef struct {
  pid_t pid;
  int port;
  int stdin_fd, stdout_fd;
  char file[600];
} server_t;

static void write_file(const char *path, const char *text) {
  char tmp[640];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  ASSERT(f != NULL);
  ASSERT_INT_EQ(fputs(text, f) >= 0, 1);
  ASSERT_INT_EQ(fclose(f), 0);
  ASSERT_INT_EQ(rename(tmp, path), 0); /* the server never sees half a file */
}

static void server_start(server_t *s, const char *text) {
  snprintf(s->file, sizeof(s->file), "%s/metrics", task_tmpdir());
  write_file(s->file, text);
  int in[2], out[2];
  ASSERT_INT_EQ(pipe(in), 0);
  ASSERT_INT_EQ(pipe(out), 0);
  s->pid = fork();
  ASSERT(s->pid >= 0);
  if (s->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execl(PYTHON, PYTHON, PROM_SERVER, s->file, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  s->stdin_fd = in[1];
  s->stdout_fd = out[0];
  /* The port, up to its newline (which may come in a write of its own). */
  char line[32];
  size_t len = 0;
  while (len == 0 || line[len - 1] != '\n') {
    struct pollfd pfd = {out[0], POLLIN, 0};
    ASSERT_INT_EQ(poll(&pfd, 1, 20000), 1);
    ssize_t n = read(out[0], line + len, sizeof(line) - 1 - len);
    ASSERT(n > 0);
    len += (size_t)n;
    ASSERT(len < sizeof(line) - 1);
  }
  line[len] = '\0';
  s->port = (int)strtol(line, NULL, 10);
  ASSERT(s->port > 0 && s->port < 65536);
}

static void server_stop(server_t *s) {
  close(s->stdin_fd);
  close(s->stdout_fd);
  ASSERT_INT_EQ(waitpid(s->pid, NULL, 0), s->pid);
  unlink(s->file);
}

static void add_prom(ctx_t *c, const char *fmt, int port) {
  char arg[512], err[256];
  snprintf(arg, sizeof(arg), fmt, port);
  int rc = vl_monitor_spec_add_prom(&c->spec, arg, err, sizeof(err));
  if (rc)
    fprintf(stderr, "%s\n", err);
  ASSERT_INT_EQ(rc, 0);
}

/* Scrapes with the default selection: series fixed at the first scrape, later-missing ones read
 * missing, new ones are not added, and a malformed page fails the scrape. */
TEST_IMPL(monitor_prom_defaults) {
  server_t srv;
  server_start(&srv, "# HELP sglang:token_usage The token usage\n"
                     "# TYPE sglang:token_usage gauge\n"
                     "sglang:token_usage{model_name=\"qwen\"} 0.25\n"
                     "sglang:num_running_reqs{model_name=\"qwen\"} 3\n"
                     "vlmmock_memory_bytes 1.5e9\n"
                     "# TYPE process_resident_memory_bytes gauge\r\n"
                     "process_resident_memory_bytes 2.5e+08\r\n"
                     "unrelated_metric 1\n");
  ctx_t c;
  setup(&c);
  add_prom(&c, "http://127.0.0.1:%d", srv.port);
  start(&c);
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), 0);
  uint64_t gen = c.mon.generation;
  round_trip(&c);
  ASSERT(c.mon.generation > gen);
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), 4);
  ASSERT_STR_EQ(vl_monitor_series(&c.mon, 0)->name, "prom.sglang:token_usage");
  ASSERT_EQ(ser(&c, "prom.sglang:token_usage")->value, 0.25);
  ASSERT_INT_EQ(ser(&c, "prom.sglang:token_usage")->valid, 1);
  ASSERT_INT_EQ(ser(&c, "prom.sglang:token_usage")->kind, VL_MONITOR_PROM);
  ASSERT_EQ(ser(&c, "prom.sglang:num_running_reqs")->value, 3.0);
  ASSERT_EQ(ser(&c, "prom.vlmmock_memory_bytes")->value, 1.5e9);
  ASSERT_EQ(ser(&c, "prom.process_resident_memory_bytes")->value, 2.5e8);
  vl_monitor_part_info_t in;
  ASSERT_INT_EQ(vl_monitor_prom_info(&c.mon, 0, &in), 0);
  char url[96];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", srv.port);
  ASSERT_STR_EQ(in.label, url);
  ASSERT_UINT_EQ(in.ok, 1);
  ASSERT_INT_EQ(in.fixed, 1);
  ASSERT_UINT_EQ(in.n_series, 4);

  write_file(srv.file, "sglang:token_usage{model_name=\"qwen\"} 0.5\n"
                       "vllm:kv_cache_usage_perc 0.9\n"
                       "vlmmock_memory_bytes NaN\n"
                       "process_resident_memory_bytes 3e8\n");
  gen = c.mon.generation;
  round_trip(&c);
  ASSERT_UINT_EQ(c.mon.generation, gen);
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), 4);
  ASSERT_EQ(ser(&c, "prom.sglang:token_usage")->value, 0.5);
  ASSERT_INT_EQ(ser(&c, "prom.sglang:num_running_reqs")->valid, 0);
  ASSERT_INT_EQ(ser(&c, "prom.vlmmock_memory_bytes")->valid, 0); /* NaN: no reading */
  ASSERT_EQ(ser(&c, "prom.process_resident_memory_bytes")->value, 3e8);

  write_file(srv.file, "sglang:token_usage{model_name=\"qwen\"} 0.75\n"
                       "sglang:token_usage{model_name=\"qwen\" 1\n");
  round_trip(&c);
  ASSERT_INT_EQ(ser(&c, "prom.sglang:token_usage")->valid, 0);
  ASSERT_INT_EQ(vl_monitor_prom_info(&c.mon, 0, &in), 0);
  ASSERT_UINT_EQ(in.ok, 2);
  ASSERT_UINT_EQ(in.failed, 1);
  ASSERT_STR_EQ(in.last_error,
                "malformed metrics: line 2: expected ',' or '}' after the value of label "
                "\"model_name\"");
  teardown(&c);
  server_stop(&srv);
}

/* Selectors with label matchers; a metric with several label sets gets one series each, named
 * by its labels. */
TEST_IMPL(monitor_prom_selectors) {
  server_t srv;
  server_start(&srv, "req{code=\"200\",method=\"get\"} 5\n"
                     "req{method=\"post\",code=\"201\"} 6\n"
                     "req{code=\"500\"} 1\n"
                     "lat 0.125\n"
                     "path{p=\"/v1/chat completions,x\\\"y\"} 2\n"
                     "path{p=\"/other\"} 3\n"
                     "hits_total 10\n");
  ctx_t c;
  setup(&c);
  add_prom(&c, "http://127.0.0.1:%d/metrics#req{code=~\"2..\"},lat,path,hits", srv.port);
  start(&c);
  round_trip(&c);
  static const struct {
    const char *name;
    double v;
  } want[] = {
      {"prom.req{code=200;method=get}", 5},
      {"prom.req{code=201;method=post}", 6},
      {"prom.lat", 0.125},
      {"prom.path{p=/v1/chat_completions_x_y}", 2},
      {"prom.path{p=/other}", 3},
      {"prom.hits_total", 10},
  };
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), VL_ARRAY_SIZE(want));
  for (size_t i = 0; i < VL_ARRAY_SIZE(want); i++) {
    const vl_monitor_series_t *s = vl_monitor_series(&c.mon, i);
    ASSERT_STR_EQ(s->name, want[i].name);
    ASSERT_EQ(s->value, want[i].v);
    for (const char *p = s->name; *p; p++)
      ASSERT(*p != ',' && *p != '"' && *p != ' ' && *p != '\n');
  }
  /* The same label sets in another order are the same series. */
  write_file(srv.file, "req{method=\"post\",code=\"201\"} 7\n"
                       "req{method=\"get\",code=\"200\"} 8\n");
  round_trip(&c);
  ASSERT_EQ(ser(&c, "prom.req{code=200;method=get}")->value, 8.0);
  ASSERT_EQ(ser(&c, "prom.req{code=201;method=post}")->value, 7.0);
  ASSERT_INT_EQ(ser(&c, "prom.lat")->valid, 0);
  teardown(&c);
  server_stop(&srv);
}

/* Failed scrapes: an error status, an answer too large, a refused connection, a timeout; a
 * scrape still running at the next round is skipped. Several targets are told apart by number. */
TEST_IMPL(monitor_prom_failures) {
  server_t srv;
  server_start(&srv, "m 1\n");
  /* A port with nothing listening: bind one, then close it. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ASSERT_INT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  socklen_t sl = sizeof(sa);
  ASSERT_INT_EQ(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
  int dead = ntohs(sa.sin_port);
  close(fd);
  ctx_t c;
  setup(&c);
  add_prom(&c, "http://127.0.0.1:%d/status/503", srv.port);
  add_prom(&c, "http://127.0.0.1:%d/big", srv.port);
  add_prom(&c, "http://127.0.0.1:%d/metrics", dead);
  add_prom(&c, "http://127.0.0.1:%d/slow", srv.port);
  add_prom(&c, "http://127.0.0.1:%d/metrics#m", srv.port);
  add_prom(&c, "http://127.0.0.1:%d/llamacpp", srv.port);
  c.spec.prom_timeout_ms = 1500;
  start(&c);
  ASSERT_INT_EQ(vl_monitor_sample(&c.mon), 0);
  ASSERT_INT_EQ(vl_monitor_sample(&c.mon), 0); /* every scrape is still under way */
  wait_for(&c, &c.done, 1, 10000);
  /* The server's words (its status and message) or curl's, and what to do. */
  char refused[96];
  snprintf(refused, sizeof(refused), "127.0.0.1 port %d", dead);
  static const char *advice[] = {"",
                                 "is this a metrics page?",
                                 "is the server up, and is this its port?",
                                 "a server that is busy may answer late",
                                 "",
                                 "--metrics"};
  const char *why[] = {"HTTP 503: no",
                       "answer larger than 8 MiB",
                       refused,
                       "timed out after",
                       "",
                       "HTTP 501: This server does not support metrics endpoint. Start it with "
                       "`--metrics`"};
  for (int i = 0; i < 6; i++) {
    vl_monitor_part_info_t in;
    ASSERT_INT_EQ(vl_monitor_prom_info(&c.mon, i, &in), 0);
    ASSERT_UINT_EQ(in.skipped, 1);
    ASSERT_UINT_EQ(in.failed, i != 4);
    ASSERT_UINT_EQ(in.ok, i == 4);
    ASSERT_INT_EQ(in.fixed, i == 4);
    ASSERT_INT_EQ(in.last_failed, i != 4);
    if (!strstr(in.last_error, why[i]) || !strstr(in.advice, advice[i]))
      fprintf(stderr, "target %d: %s (%s)\n", i, in.last_error, in.advice);
    ASSERT(strstr(in.last_error, why[i]) != NULL);
    ASSERT(strstr(in.advice, advice[i]) != NULL);
  }
  ASSERT_INT_EQ(vl_monitor_prom_info(&c.mon, 6, NULL), VL_ERANGE);
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), 1);
  ASSERT_EQ(ser(&c, "prom.5.m")->value, 1.0);

  teardown(&c);
  server_stop(&srv);
}

/* The server's credentials go to the server's origin only. */
TEST_IMPL(monitor_prom_credentials) {
  server_t srv;
  server_start(&srv, "m 1\n");
  ctx_t c;
  setup(&c);
  char origin[64];
  snprintf(origin, sizeof(origin), "http://127.0.0.1:%d/v1", srv.port);
  char *headers[] = {"X-Extra: yes"};
  c.spec.server_url = origin;
  c.spec.api_key = "sk-test";
  c.spec.headers = headers;
  c.spec.n_headers = 1;
  add_prom(&c, "same=http://127.0.0.1:%d/auth#auth_seen", srv.port);
  add_prom(&c, "other=http://localhost:%d/auth#auth_seen", srv.port);
  add_prom(&c, "sel=http://127.0.0.1:%d/auth#auth_seen{value=\"none\"}", srv.port);
  start(&c);
  round_trip(&c);
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), 2);
  /* One sample each, so no label suffix; what was sent shows in the selector below. */
  ASSERT_EQ(ser(&c, "prom.same.auth_seen")->value, 1.0);
  ASSERT_EQ(ser(&c, "prom.other.auth_seen")->value, 1.0);
  vl_monitor_part_info_t in;
  ASSERT_INT_EQ(vl_monitor_prom_info(&c.mon, 2, &in), 0);
  ASSERT_UINT_EQ(in.ok, 1);
  ASSERT_UINT_EQ(in.n_series, 0); /* the origin's scrape carried the key */
  vl_monitor_close(&c.mon, on_mon_closed);
  vl_transport_close(&c.tr, on_tr_closed);
  uv_close((uv_handle_t *)&c.tick, NULL);
  ASSERT_INT_EQ(uv_run(&c.loop, UV_RUN_DEFAULT), 0);
  ASSERT_INT_EQ(uv_loop_close(&c.loop), 0);
  vl_monitor_free(&c.mon);
  vl_monitor_spec_free(&c.spec);

  /* Now check the labels themselves, one target per expectation. */
  setup(&c);
  c.spec.server_url = origin;
  c.spec.api_key = "sk-test";
  c.spec.headers = headers;
  c.spec.n_headers = 1;
  add_prom(&c, "same=http://127.0.0.1:%d/auth#auth_seen{value=\"Bearer sk-test\",extra=\"yes\"}",
           srv.port);
  add_prom(&c, "other=http://localhost:%d/auth#auth_seen{value=\"none\",extra=\"none\"}", srv.port);
  start(&c);
  round_trip(&c);
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), 2);
  ASSERT_EQ(ser(&c, "prom.same.auth_seen")->value, 1.0);
  ASSERT_EQ(ser(&c, "prom.other.auth_seen")->value, 1.0);
  teardown(&c);
  server_stop(&srv);
}

/* A prom series keeps the unit its metric's name states; one that states none is not memory. The
 * metrics named that the first good page lacks are listed. */
TEST_IMPL(monitor_prom_units) {
  server_t srv;
  server_start(&srv, "# TYPE llamacpp:requests_processing gauge\n"
                     "llamacpp:requests_processing 3\n"
                     "llamacpp:kv_cache_usage_ratio 0.25\n"
                     "# TYPE process_resident_memory_bytes gauge\n"
                     "process_resident_memory_bytes 2.5e+08\n"
                     "# TYPE net_sent_bytes counter\n"
                     "net_sent_bytes_total 7\n"
                     "cache_size_mb 12\n");
  ctx_t c;
  setup(&c);
  add_prom(&c,
           "http://127.0.0.1:%d/metrics#llamacpp:requests_processing,llamacpp:kv_cache_usage_"
           "ratio,process_resident_memory_bytes,net_sent_bytes,cache_size_mb,nosuch,other_one",
           srv.port);
  start(&c);
  round_trip(&c);
  static const struct {
    const char *name, *unit;
    double mb;
  } want[] = {{"prom.llamacpp:requests_processing", "", 0},
              {"prom.llamacpp:kv_cache_usage_ratio", "", 0},
              {"prom.process_resident_memory_bytes", "bytes", 1.0 / 1048576},
              {"prom.net_sent_bytes_total", "", 0},
              {"prom.cache_size_mb", "MB", 1}};
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), VL_ARRAY_SIZE(want));
  for (size_t i = 0; i < VL_ARRAY_SIZE(want); i++) {
    const vl_monitor_series_t *x = ser(&c, want[i].name);
    ASSERT_STR_EQ(x->unit, want[i].unit);
    ASSERT_EQ(x->mb, want[i].mb);
  }
  ASSERT_EQ(ser(&c, "prom.process_resident_memory_bytes")->value, 2.5e8); /* as the server says */
  vl_monitor_part_info_t in;
  ASSERT_INT_EQ(vl_monitor_prom_info(&c.mon, 0, &in), 0);
  ASSERT_STR_EQ(in.missing, "nosuch, other_one");
  ASSERT_UINT_EQ(in.page_metrics, 5);
  ASSERT_STR_EQ(in.page_some, "llamacpp:requests_processing, llamacpp:kv_cache_usage_ratio, "
                              "process_resident_memory_bytes, net_sent_bytes_total");
  ASSERT_INT_EQ(in.defaults, 0);
  teardown(&c);
  server_stop(&srv);
}

/* What the first round found wrong, said before the load in one line each: a failed scrape in
 * the server's words, metrics not on the page, the default set absent, a failed command, a unit
 * taken as MB, a match that finds nothing and one that finds several. */
TEST_IMPL(monitor_say_start) {
  server_t srv;
  server_start(&srv, "llamacpp:prompt_tokens_total 5\nllamacpp:requests_processing 0\n");
  ctx_t c;
  setup(&c);
  char arg[64], re[96], opt[160], err[256];
  unique_arg(arg, sizeof(arg));
  snprintf(re, sizeof(re), "^sleep %s$", arg);
  pid_t a = spawn_sleep(arg);
  wait_exec(re);
  sleep_ms(20); /* a start time of its own, in clock ticks */
  pid_t b = spawn_sleep(arg);
  for (int i = 0; i < 500; i++) {
    pid_t two[2];
    if (vl_procmem_find(re, two, 2, err, sizeof(err)) == 2)
      break;
    sleep_ms(10);
  }
  snprintf(opt, sizeof(opt), "two=%s", re);
  ASSERT_INT_EQ(vl_monitor_spec_add_match(&c.spec, opt, err, sizeof(err)), 0);
  ASSERT_INT_EQ(
      vl_monitor_spec_add_match(&c.spec, "none=^no-such-process-[0-9]{12}$", err, sizeof(err)), 0);
  add_prom(&c, "http://127.0.0.1:%d/llamacpp", srv.port);
  add_prom(&c, "http://127.0.0.1:%d/metrics#llamacpp:requests_processing,nosuch", srv.port);
  add_prom(&c, "http://127.0.0.1:%d/metrics", srv.port);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, "n=echo 42", err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, "k=echo 42 kB", err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, "bad=exit 3", err, sizeof(err)), 0);
  c.spec.rescan_ms = 0;
  start(&c);
  round_trip(&c);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  vl_monitor_say_start(&c.mon, f);
  fclose(f);
  char want[8][512];
  snprintf(want[0], sizeof(want[0]),
           "vlmload: --monitor-pid-match '%s': 2 processes match: %ld (sleep %s), %ld (sleep "
           "%s); following %ld, the oldest, alone (--monitor-tree PID follows a server's whole "
           "process tree)\n",
           re, (long)a, arg, (long)b, arg, (long)a);
  snprintf(want[1], sizeof(want[1]),
           "vlmload: --monitor-pid-match '^no-such-process-[0-9]{12}$': no process matches yet; "
           "looking again every 0s (the summary says if none ever did)\n");
  snprintf(want[2], sizeof(want[2]),
           "vlmload: --monitor-prom http://127.0.0.1:%d/llamacpp: HTTP 501: This server does not "
           "support metrics endpoint. Start it with `--metrics` (llama.cpp's llama-server serves "
           "/metrics only when started with --metrics); the run goes on and scrapes it at every "
           "sample\n",
           srv.port);
  snprintf(want[3], sizeof(want[3]),
           "vlmload: --monitor-prom http://127.0.0.1:%d/metrics: no sample of nosuch on its page "
           "(2 metrics there: llamacpp:prompt_tokens_total, llamacpp:requests_processing); not "
           "recorded\n",
           srv.port);
  snprintf(want[4], sizeof(want[4]),
           "vlmload: --monitor-prom http://127.0.0.1:%d/metrics: none of the default metrics is "
           "on its page (2 metrics there: llamacpp:prompt_tokens_total, "
           "llamacpp:requests_processing); name the ones to record after '#': URL#NAME,NAME\n",
           srv.port);
  snprintf(want[5], sizeof(want[5]),
           "vlmload: --monitor-cmd n: \"42\" names no unit; taken as MB (print one after the "
           "number, as kB or MiB, or end the name with one: n_kb=CMD)\n");
  snprintf(want[6], sizeof(want[6]),
           "vlmload: --monitor-cmd bad: exit status 3 at the first sample; the run goes on and "
           "runs it at every sample\n");
  char all[4096] = "";
  for (int i = 0; i < 7; i++)
    strcat(all, want[i]);
  if (strcmp(text, all) != 0)
    fprintf(stderr, "said:\n%s\nwanted:\n%s", text, all);
  ASSERT_STR_EQ(text, all);
  free(text);
  kill_reap(a);
  kill_reap(b);
  teardown(&c);
  server_stop(&srv);
}

/* Closing during a scrape removes it from the transport; the loop closes. */
TEST_IMPL(monitor_prom_close_mid_scrape) {
  server_t srv;
  server_start(&srv, "m 1\n");
  ctx_t c;
  setup(&c);
  add_prom(&c, "http://127.0.0.1:%d/slow", srv.port);
  start(&c);
  ASSERT_INT_EQ(vl_monitor_sample(&c.mon), 0);
  run_for(&c, 100);
  ASSERT_INT_EQ(c.tr.added, 1);
  teardown(&c);
  ASSERT_INT_EQ(c.done, 0);
  server_stop(&srv);
}

/* Everything at once, a few rounds, as the runner would drive it. */
TEST_IMPL(monitor_all_kinds) {
  server_t srv;
  server_start(&srv, "vlmmock_memory_bytes 123\n");
  ctx_t c;
  setup(&c);
  pid_t p = spawn_sleep("60");
  /* The anatomy reads at the first round: wait for sleep to have started and set up its heap,
   * which it then keeps (two reads alike), or the read may see the child before its exec. */
  wait_exec("^sleep 60$");
  vl_smaps_t s0 = {0}, s1 = {0};
  for (int i = 0; i < 250 && (s1.heap == 0 || s1.heap != s0.heap); i++) {
    s0 = s1;
    sleep_ms(20);
    if (vl_smaps_read(p, 0, &s1) != 0)
      s1.heap = 0;
  }
  char opt[64], err[256], procs[64];
  snprintf(opt, sizeof(opt), "w=%ld", (long)p);
  snprintf(procs, sizeof(procs), "0:%ld:64", (long)p);
  ASSERT_INT_EQ(setenv(VL_NVML_ENV, FAKE_NVML_V2, 1), 0);
  ASSERT_INT_EQ(setenv("FAKE_NVML_DEVICES", "1", 1), 0);
  ASSERT_INT_EQ(setenv("FAKE_NVML_PROCS", procs, 1), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_pid(&c.spec, opt, err, sizeof(err)), 0);
  ASSERT_INT_EQ(vl_monitor_spec_add_cmd(&c.spec, "echo 3", err, sizeof(err)), 0);
  add_prom(&c, "http://127.0.0.1:%d", srv.port);
  c.spec.gpu = 1;
  /* A proxy in the environment is not used: the scrape goes where its URL says. */
  ASSERT_INT_EQ(setenv("http_proxy", "http://127.0.0.1:9", 1), 0);
  start(&c);
  for (int i = 0; i < 5; i++)
    round_trip(&c);
  /* The anatomy's read runs on the threadpool, outside the rounds: wait for it. */
  uint64_t end = uv_hrtime() + 10000000000u;
  while (!ser(&c, "heap_mb.w")->valid) {
    ASSERT(uv_hrtime() < end);
    uv_run(&c.loop, UV_RUN_NOWAIT);
    sleep_ms(1);
  }
  static const char *names[] = {"rss_mb.w",  "hwm_mb.w",   "anon_mb.w",
                                "file_mb.w", "shmem_mb.w", "gpu0_used_mb",
                                "gpu_mb.w",  "heap_mb.w",  "device_mb.w",
                                "arenas.w",  "cmd.1",      "prom.vlmmock_memory_bytes"};
  ASSERT_UINT_EQ(vl_monitor_count(&c.mon), VL_ARRAY_SIZE(names));
  for (size_t i = 0; i < VL_ARRAY_SIZE(names); i++) {
    ASSERT_STR_EQ(vl_monitor_series(&c.mon, i)->name, names[i]);
    ASSERT_INT_EQ(vl_monitor_series(&c.mon, i)->valid, 1);
  }
  ASSERT_EQ(ser(&c, "gpu_mb.w")->value, 64.0);
  /* A sleep's heap stays as it was: the same as a read of its smaps now. */
  vl_smaps_t sm;
  ASSERT_INT_EQ(vl_smaps_read(p, 0, &sm), 0);
  ASSERT_EQ(ser(&c, "heap_mb.w")->value, (double)sm.heap / 1048576.0);
  ASSERT_EQ(ser(&c, "arenas.w")->value, 0.0);
  ASSERT_EQ(ser(&c, "device_mb.w")->value, 0.0);
  ASSERT_UINT_EQ(c.mon.rounds, 5);
  ASSERT_UINT_EQ(c.mon.proc_skipped, 0);
  kill_reap(p);
  teardown(&c);
  server_stop(&srv);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(monitor_spec_parse),
    TEST_ENTRY(monitor_proc),
    TEST_ENTRY(monitor_proc_no_such_pid),
    TEST_ENTRY(monitor_gpu_fake),
    TEST_ENTRY(monitor_gpu_absent),
    TEST_ENTRY(monitor_units_from_names),
    TEST_ENTRY(monitor_cmd),
    TEST_ENTRY(monitor_cmd_units),
    TEST_ENTRY(monitor_cmd_timeout),
    TEST_ENTRY(monitor_cmd_close_kills),
    TEST_ENTRY(monitor_prom_defaults),
    TEST_ENTRY(monitor_prom_selectors),
    TEST_ENTRY(monitor_prom_failures),
    TEST_ENTRY(monitor_prom_credentials),
    TEST_ENTRY(monitor_prom_units),
    TEST_ENTRY(monitor_say_start),
    TEST_ENTRY(monitor_prom_close_mid_scrape),
    TEST_ENTRY(monitor_all_kinds),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
