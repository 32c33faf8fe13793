/* The run: admission by the schedule and the free slots, phases one after another, pauses for
 * drained flushes, memory sampling ticks, and stopping (requests, duration, signals, errors,
 * failing fast) with every output written. */
#include "runner_internal.h"
#include "vlmload/counters.h"
#include "vlmload/common.h"
#include "vlmload/runner.h"
#include "vlmload/text.h"
#include "vlmload/trace.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const stop_names[] = {"none",  "requests",  "duration",   "signal",
                                         "error", "fail_fast", "server_gone"};

/* An output file stopped taking writes (the report said which and why): what the run measures
 * from here would be lost, so it stops admitting, and ends with status 1. */
void vl__runner_output_failed(vl_runner_t *r) {
  r->fatal = 1;
  vl__runner_begin_stop(r, STOP_ERROR);
}

vl_snapshot_t vl__runner_snapshot(const vl_runner_t *r) {
  vl_snapshot_t s;
  s.now_ns = uv_hrtime();
  s.t0_ns = r->t0_ns;
  s.wall0_ms = r->wall0_ms;
  s.in_flight = r->in_flight;
  s.mon = r->has_mon ? &r->mon : NULL;
  s.target_rate = r->closed_loop ? 0 : r->cfg->rate;
  s.phase = !r->admitting                          ? "stopping"
            : vl__runner_paused(r)                 ? "flush"
            : r->stats.total.sent < r->cfg->warmup ? "warmup"
            : r->cfg->phase_name                   ? r->cfg->phase_name
                                                   : "measure";
  return s;
}

/* A drained flush is due: admission stops; the flush goes out once nothing is in flight. */
static void on_flush_pause(vl_flush_t *f) {
  vl_runner_t *r = f->data;
  vl_ticker_stop(&r->pace);
}

static void on_flush_done(vl_flush_t *f, const vl_flush_record_t *rec, uint64_t paused_ns) {
  vl_runner_t *r = f->data;
  r->stats.flushes++;
  r->stats.flush_skipped = f->skipped;
  vl_snapshot_t snap = vl__runner_snapshot(r);
  if (vl_report_flush(r->rep, rec, &snap) != 0)
    vl__runner_output_failed(r);
  if (paused_ns) {
    /* Resume; arrivals not yet taken move back by the pause, so the rate holds outside it. */
    r->stats.paused_ns += paused_ns;
    r->stats.flush_pauses++;
    r->phase_paused_ns += paused_ns;
    if (!r->closed_loop)
      vl_pace_shift(&r->sched, paused_ns);
  }
  if (r->admitting)
    vl__runner_admit(r);
  else
    vl__runner_maybe_finish(r);
}

static void flush_load(const vl_flush_t *f, uint64_t *sent, uint64_t *finished, int *in_flight) {
  const vl_runner_t *r = f->data;
  *sent = r->stats.total.sent;
  *finished = r->stats.total.completed;
  *in_flight = r->in_flight;
}

static const vl_flush_hooks_t flush_hooks = {on_flush_pause, on_flush_done, flush_load};

/* A profiling call ended: an event in the request log, said when it failed; the run may end once
 * none runs. */
static void on_srvprof(vl_srvprof_t *p, const vl_srvprof_call_t *call) {
  vl_runner_t *r = p->data;
  if (vl_report_event(r->rep, vl_srvprof_call_json(call, r->t0_ns)) != 0)
    vl__runner_output_failed(r);
  if (!call->ok) {
    char line[300];
    snprintf(line, sizeof(line), "--server-profile-at %llu: %s answered %ld: %s",
             (unsigned long long)call->at_requests, call->route, call->status, call->answer);
    vl_report_say(r->rep, line);
  }
  if (!p->busy && !r->admitting)
    vl__runner_maybe_finish(r);
}

static void on_pace(vl_ticker_t *t) {
  vl__runner_admit(vl_container_of(t, vl_runner_t, pace));
}

/* Whether request id is this shard's: shards take every shard_n-th request of the shared stream. */
static int mine(const vl_runner_t *r, uint64_t id) {
  return r->cfg->shard_n <= 1 || id % r->cfg->shard_n == r->cfg->shard_i;
}

/* When the current phase stops admitting: its start plus --duration, plus the time admission
 * was paused for drained flushes, so a phase sends its planned requests whatever the pauses. */
static uint64_t phase_deadline(const vl_runner_t *r) {
  if (!r->cfg->duration_us)
    return UINT64_MAX;
  return r->phase_t0_ns + r->cfg->duration_us * 1000 + r->phase_paused_ns;
}

static int count_reached(const vl_runner_t *r) {
  if (r->has_conv) /* --turns: the requests are the conversations' turns */
    return vl__converse_count_reached(r);
  return r->cfg->requests && r->next_id - r->phase_first_id >= r->cfg->requests;
}

/* Whether a request can start now: a slot is free and the phase's limit is not reached. */
static int have_slot(const vl_runner_t *r) {
  return r->free_slots && r->in_flight < r->cap;
}

static void start_phase(vl_runner_t *r, int i);
static void probe_next(vl_runner_t *r);

/* Admission of the current phase's schedule ends at until_ns: every arrival of this shard that
 * came due by then and was not taken counts as an arrival never sent, and one that waited for a
 * slot and is still waiting no longer counts as delayed (it was not sent). Arrivals past
 * --requests are no arrivals; the loop is bounded by them and by the schedule's time. */
static void count_unsent(vl_runner_t *r, uint64_t until_ns) {
  if (r->closed_loop || r->probing || r->has_conv)
    return;
  if (r->blocked_counted) {
    r->stats.delayed--;
    r->blocked_counted = 0;
  }
  /* An arrival at the deadline itself is past it, as admission has it. */
  uint64_t deadline = phase_deadline(r);
  while (vl_pace_next(&r->sched) <= until_ns && vl_pace_next(&r->sched) < deadline &&
         !count_reached(r)) {
    vl_pace_take(&r->sched);
    if (mine(r, r->next_id)) {
      r->stats.arrivals++;
      r->stats.unsent++;
    }
    r->next_id++;
  }
}

/* The current phase is over: the next one starts at once, or the run stops. A probe stage's end
 * waits for its requests to finish first. Returns whether admission goes on. */
static int end_phase(vl_runner_t *r, vl__stop_t why) {
  count_unsent(r, uv_hrtime());
  if (r->results) {
    r->results[r->phase].seconds = (double)(uv_hrtime() - r->phase_t0_ns) / 1e9;
    r->results[r->phase].paused_s = (double)r->phase_paused_ns / 1e9;
    if (r->has_mon)
      vl_counters_read(&r->mon, r->results[r->phase].ctr_end, VL_COUNTERS_MAX);
  }
  if (r->probing) {
    r->draining = 1;
    vl_ticker_stop(&r->pace);
    uv_timer_stop(&r->stop_timer);
    if (r->in_flight == 0)
      probe_next(r);
    return r->admitting && !r->draining;
  }
  if (r->phase + 1 < r->n_phases) {
    start_phase(r, r->phase + 1);
    return 1;
  }
  vl__runner_begin_stop(r, why);
  return 0;
}

void vl__runner_admit(vl_runner_t *r) {
  if (r->draining) {
    if (r->in_flight > 0 || !r->admitting)
      return;
    probe_next(r); /* the stage's last request finished */
  }
  while (r->admitting && !vl__runner_paused(r) && !r->draining) {
    const vl_config_t *c = r->cfg;
    uint64_t deadline = phase_deadline(r);
    /* Conversations (--turns): a turn that is due goes before any new arrival. */
    if (r->has_conv && vl__converse_due(r) && have_slot(r) && uv_hrtime() < deadline) {
      vl__converse_send_due(r);
      continue;
    }
    while (!mine(r, r->next_id)) {
      if (!r->closed_loop)
        vl_pace_take(&r->sched);
      if (r->has_conv)
        vl__converse_skip(r, r->next_id);
      r->next_id++;
    }
    if (count_reached(r)) {
      vl__stop_t why = STOP_REQUESTS;
      /* Conversations: their remaining turns are sent first; the last reply admits again. */
      if (r->has_conv && r->conv.live) {
        if (uv_hrtime() < deadline)
          return;
        why = STOP_DURATION;
      }
      if (end_phase(r, why))
        continue;
      return;
    }
    uint64_t now = uv_hrtime();
    if (r->closed_loop) {
      if (now >= deadline) {
        if (end_phase(r, STOP_DURATION))
          continue;
        return;
      }
      if (!have_slot(r) || (r->has_conv && !vl__converse_room(r)))
        return;
      r->stats.arrivals++;
      if (r->has_conv)
        vl__converse_start(r, now);
      else
        vl__slot_start(r, now, NULL);
      continue;
    }
    uint64_t t = vl_pace_next(&r->sched);
    if (t >= deadline) {
      /* The next arrival falls past --duration; stop when its time comes, not before. */
      if (now >= deadline) {
        if (end_phase(r, STOP_DURATION))
          continue;
        return;
      }
      t = deadline;
    }
    if (t > now) {
      if (vl_ticker_arm(&r->pace, t) != 0) {
        fprintf(stderr, "vlmload: cannot arm the arrival timer\n");
        r->fatal = 1;
        vl__runner_begin_stop(r, STOP_ERROR);
      }
      return;
    }
    if (!have_slot(r) || (r->has_conv && !vl__converse_room(r))) {
      if (now >= deadline) {
        /* Arrivals still waiting for a slot at the deadline are never sent. */
        if (end_phase(r, STOP_DURATION))
          continue;
        return;
      }
      if (c->on_full == VL_ONFULL_DROP) {
        vl_pace_take(&r->sched);
        r->stats.arrivals++;
        r->stats.dropped++;
        if (r->has_conv)
          vl__converse_skip(r, r->next_id); /* its turns count, as a dropped request does */
        r->next_id++;
        continue;
      }
      if (!r->blocked_counted) {
        r->stats.delayed++;
        r->blocked_counted = 1;
      }
      return; /* a completion calls vl__runner_admit() again */
    }
    r->blocked_counted = 0;
    r->stats.arrivals++;
    if (r->has_conv)
      vl__converse_start(r, vl_pace_take(&r->sched));
    else
      vl__slot_start(r, vl_pace_take(&r->sched), NULL);
  }
}

static void close_cb_noop(uv_handle_t *h) {}

static void on_transport_closed(vl_transport_t *t) {}

/* Everything is done: close every handle so uv_run returns. */
static void shutdown_loop(vl_runner_t *r) {
  if (r->closing)
    return;
  /* The monitor reads once more after the last request (not after Ctrl-C), so that the last
   * timeline row holds what the server counted of the whole load; vl__watch_round comes back. */
  if (r->has_mon && r->final_round == 0 && r->stop != STOP_SIGNAL) {
    r->ended_ns = uv_hrtime(); /* the run's duration leaves that round out */
    r->final_round = 1;        /* the rows go on meanwhile, at their cadence */
    if (r->mon.pending > 0)
      return; /* a round under way ends first, then the last one starts */
    if (vl_monitor_sample(&r->mon) == 0 && r->mon.pending > 0) {
      r->final_round = 3;
      return;
    }
  }
  r->closing = 1;
  vl_ticker_close(&r->pace, NULL);
  uv_close((uv_handle_t *)&r->tick_timer, close_cb_noop);
  uv_close((uv_handle_t *)&r->stop_timer, close_cb_noop);
  uv_close((uv_handle_t *)&r->sig_int, close_cb_noop);
  uv_close((uv_handle_t *)&r->sig_term, close_cb_noop);
  if (r->has_flush)
    vl_flush_close(&r->flush);
  if (r->has_conv)
    vl__converse_close(r);
  if (r->has_latprobe)
    vl__latprobe_close(r);
  if (r->has_uniq)
    vl_uniq_close(&r->uniq, NULL);
  if (r->has_mon)
    vl_monitor_close(&r->mon, NULL);
  vl_transport_close(&r->tr, on_transport_closed);
}

void vl__runner_maybe_finish(vl_runner_t *r) {
  if (!r->admitting && r->in_flight == 0 && !vl__runner_paused(r) &&
      !(r->has_flush && r->flush.busy) && !(r->has_srvprof && r->srvprof.busy) &&
      !(r->has_latprobe && r->lp.in_flight))
    shutdown_loop(r);
}

/* Aborts every request in flight, logging each as cancelled. */
void vl__runner_cancel_all(vl_runner_t *r) {
  if (r->has_srvprof)
    vl_srvprof_abort(&r->srvprof);
  if (r->has_latprobe)
    vl__latprobe_abort(r);
  for (int i = 0; i < r->n_slots; i++) {
    vl_slot_t *s = &r->slots[i];
    if (!s->busy)
      continue;
    vl_transport_remove(&r->tr, &s->xfer);
    vl__finish(r, s, CURLE_ABORTED_BY_CALLBACK, VL__CLOSED_BY_RUN);
  }
}

static void on_grace(uv_timer_t *h) {
  vl_runner_t *r = vl_container_of(h, vl_runner_t, stop_timer);
  vl__runner_cancel_all(r);
  vl__runner_maybe_finish(r);
}

/* Starts the grace period for the requests in flight, unless it runs already. */
static void start_grace(vl_runner_t *r) {
  if (r->grace)
    return;
  r->grace = 1;
  uv_timer_start(&r->stop_timer, on_grace, r->cfg->grace_us / 1000, 0);
}

void vl__runner_begin_stop(vl_runner_t *r, vl__stop_t why) {
  if (!r->admitting)
    return;
  uint64_t now = uv_hrtime();
  /* Stopped in the middle of a phase's schedule (a signal, an error): what came due is counted,
   * up to the start of a drained flush's pause (arrivals after it move back by the pause). */
  count_unsent(r, vl__runner_paused(r) ? r->flush.pause_ns : now);
  r->admitting = 0;
  r->stop = why;
  r->stop_ns = now;
  r->load_ns = r->stop_ns - r->t0_ns - r->stats.paused_ns;
  if (vl__runner_paused(r))
    r->load_ns -= r->stop_ns - r->flush.pause_ns;
  vl_ticker_stop(&r->pace);
  uv_timer_stop(&r->stop_timer);
  /* A drained flush not yet begun is dropped on Ctrl-C; one under way finishes. */
  if (r->has_flush)
    vl_flush_stop(&r->flush, why == STOP_SIGNAL);
  if (r->has_conv)
    vl__converse_stop(r);
  /* The end of --duration and a signal bound the run: what is still in flight has --grace to
   * finish, then is cancelled. A run stopped by --requests waits for its last replies (each
   * bounded by --timeout). */
  if ((why == STOP_SIGNAL || why == STOP_DURATION) && r->in_flight > 0) {
    start_grace(r);
    if (why == STOP_DURATION && !r->cfg->quiet) {
      char line[200];
      snprintf(line, sizeof(line),
               "--duration reached: %d in flight get --grace %gs, then are cancelled (Ctrl-C: now)",
               r->in_flight, (double)r->cfg->grace_us / 1e6);
      vl_report_say(r->rep, line);
    }
  }
  vl__runner_maybe_finish(r);
}

static void on_signal(uv_signal_t *h, int signum) {
  vl_runner_t *r = h->data;
  r->signals++;
  if (r->signals == 1) {
    if (r->cfg->progress && r->in_flight > 0)
      fprintf(stderr, "\nvlmload: stopping: waiting up to %.3gs for %d in flight (again to quit)\n",
              (double)r->cfg->grace_us / 1e6, r->in_flight);
    if (r->admitting) {
      vl__runner_begin_stop(r, STOP_SIGNAL);
    } else if (r->in_flight > 0) {
      /* Admission ended already (--requests, --duration): the last requests get the grace
       * period, if they do not have it yet. */
      start_grace(r);
    }
    return;
  }
  r->stop = STOP_SIGNAL;
  r->admitting = 0;
  vl__runner_cancel_all(r);
  if (r->has_flush)
    vl_flush_abort(&r->flush);
  vl__runner_maybe_finish(r);
}

static void on_duration(uv_timer_t *h) {
  vl_runner_t *r = vl_container_of(h, vl_runner_t, stop_timer);
  /* libuv's timer counts milliseconds and may fire a little early: in the open loop,
   * vl__runner_admit() sends what is due before the deadline and stops at the deadline itself. */
  if (vl__runner_paused(r) || !r->admitting)
    return; /* resuming after the flush looks at the deadline again */
  uint64_t now = uv_hrtime(), deadline = phase_deadline(r);
  if (now < deadline) {
    uv_timer_start(&r->stop_timer, on_duration, (deadline - now) / 1000000 + 1, 0);
    return;
  }
  if (r->closed_loop && !end_phase(r, STOP_DURATION))
    return;
  vl__runner_admit(r);
}

static void on_tick(uv_timer_t *h) {
  vl_runner_t *r = vl_container_of(h, vl_runner_t, tick_timer);
  vl_snapshot_t snap = vl__runner_snapshot(r);
  if (vl_report_tick(r->rep, &r->stats, &snap) != 0)
    vl__runner_output_failed(r);
  vl_stats_interval_reset(&r->stats);
  /* The next row shows what this round reads; rounds never block the loop. The round after the
   * last request is the last one. */
  if (r->has_mon && !r->final_round)
    vl_monitor_sample(&r->mon);
}

/* Reads every memory series once before the load starts, so the timeline's columns are known and
 * its first row has values (for at most 5 s). */
static void first_sample(vl_runner_t *r) {
  if (r->has_mon) {
    uint64_t until = uv_hrtime() + 5000000000ull;
    vl_monitor_sample(&r->mon);
    while (r->mon.pending > 0 && uv_hrtime() < until)
      uv_run(&r->loop, UV_RUN_ONCE);
    /* What the first round found wrong is said now, not discovered at the end. */
    vl_monitor_say_start(&r->mon, stderr);
    vl_settings_read_monitored(&r->settings, &r->mon, vl_profile_name(r->cfg->server));
  }
  vl_report_columns(r->rep, r->has_mon ? &r->mon : NULL);
}

static char *join_url(const char *base, const char *path) {
  size_t n = strlen(base) + strlen(path) + 1;
  char *u = vl_xmalloc(n);
  snprintf(u, n, "%s%s", base, path);
  return u;
}

/* Starts the unique-image producer: enough buffers for the images requests in flight hold plus a
 * queue ahead of them, within a memory budget (past it, takes are late and counted). */
static int start_uniq(vl_runner_t *r) {
  const vl_config_t *c = r->cfg;
  vl_uniq_opts_t o = {0};
  /* Half a second of images ahead of the schedule, within reason; with --rate auto the rate is
   * not known yet, so as many as reason allows. */
  double rate = c->rate_auto ? 10e6 : c->rate;
  o.depth = (int)VL_MIN(VL_MAX(rate * c->images_hi / 2, 32.0), 512.0);
  size_t per = r->pool->max_bytes / 3 * 4 + 256;
  /* With --image-reuse in some phase, the repeat window holds buffers of its own. */
  for (int i = 0; i < (r->top->n_phases ? r->top->n_phases : 1); i++)
    if ((r->top->n_phases ? &r->top->phases[i] : r->top)->image_reuse > 0)
      o.keep = VL_IMAGE_REUSE_WINDOW;
  size_t want = (size_t)o.depth + 16 + (size_t)o.keep + (size_t)r->n_slots * (size_t)c->images_hi;
  /* Conversations hold their turns' images until they end. */
  if (r->has_conv)
    want += (size_t)r->conv.n * (size_t)c->turns_hi * (size_t)c->images_hi;
  size_t budget = VL_MAX((size_t)(UNIQ_BUDGET / per), (size_t)o.depth + 32 + (size_t)o.keep);
  o.capacity = (int)VL_MIN(want, budget);
  o.quality = c->jpeg_quality;
  /* Stamps differ between runs (wall clock) and between shards (high bits). */
  o.first_stamp = ((uint64_t)vl_wall_ms() << 20) ^ (c->shard_i << 56);
  int rc = vl_uniq_init(&r->uniq, &r->loop, r->pool, &o);
  if (rc == 0)
    r->has_uniq = 1;
  return rc;
}

/* Lets the producer fill its queue before the schedule starts (for at most 10 s), so the first
 * requests do not find it empty. */
static void prefill_uniq(vl_runner_t *r) {
  uint64_t until = uv_hrtime() + 10000000000ull;
  int want = VL_MIN(r->uniq.o.depth, r->uniq.o.capacity);
  while (r->uniq.ready < want && uv_hrtime() < until)
    uv_run(&r->loop, UV_RUN_ONCE);
}

/* The configuration of phase i: the run's own when it has no phases. */
static const vl_config_t *phase_cfg(const vl_runner_t *r, int i) {
  return r->top->n_phases ? &r->top->phases[i] : r->top;
}

/* A phase's limit on requests in flight, for this shard. */
static int phase_cap(const vl_config_t *c) {
  return (int)(((uint64_t)c->concurrency + c->shard_n - 1) / c->shard_n);
}

static uint64_t planned_arrivals(const vl_config_t *c);

/* Starts phase i (or probe stage i) with configuration c. */
static void begin_phase(vl_runner_t *r, int i, const vl_config_t *c) {
  uint64_t now = uv_hrtime();
  r->phase = i;
  r->cfg = c;
  r->phase_t0_ns = now;
  r->phase_first_id = r->next_id;
  r->phase_paused_ns = 0;
  r->cap = VL_MIN(phase_cap(c), r->n_slots);
  r->closed_loop = c->rate == 0;
  r->blocked_counted = 0;
  vl_ticker_stop(&r->pace);
  if (!r->closed_loop) {
    /* Each phase draws its gaps from a stream of its own. */
    vl_pace_init(&r->sched, c->arrival, c->rate, c->arrival_cv,
                 c->seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull), now, planned_arrivals(c));
    if (c->ramp_to >= 0) {
      double secs = c->duration_us ? (double)c->duration_us / 1e6
                                   : (double)c->requests / ((c->rate + c->ramp_to) / 2);
      vl_pace_ramp(&r->sched, c->ramp_to, secs);
    }
    /* Trace replay (issue 16, item 7): row k is due at this start plus its offset / speed. */
    if (c->trace)
      vl_pace_trace(&r->sched, c->trace->at_ms, c->trace->n, c->trace_speed);
  }
  uv_timer_stop(&r->stop_timer);
  if (c->duration_us)
    uv_timer_start(&r->stop_timer, on_duration, c->duration_us / 1000, 0);
  if (r->has_flush)
    vl_flush_phase(&r->flush, c);
  if (r->results) {
    vl_phase_result_t *ph = &r->results[i];
    ph->name = c->phase_name;
    ph->target_rate = c->rate / (double)c->shard_n;
    ph->ramp_to = c->ramp_to;
    ph->max_concurrency = c->concurrency;
    /* The server's counters as the phase begins: its change is counted from here. */
    ph->n_ctr = r->has_mon ? vl_counters_read(&r->mon, ph->ctr_start, VL_COUNTERS_MAX) : 0;
    vl_snapshot_t snap = vl__runner_snapshot(r);
    int lost = vl_report_phase(r->rep, i, c->phase_name, &snap);
    if (!c->quiet && c->progress && !r->probing)
      fprintf(stderr, "\nvlmload: phase %d of %d: %s\n", i + 1, r->n_phases, c->phase_name);
    if (lost)
      vl__runner_output_failed(r);
  }
}

static void start_phase(vl_runner_t *r, int i) {
  begin_phase(r, i, phase_cfg(r, i));
}

/* The number of arrivals a run is planned for: --requests, or what --duration holds at --rate,
 * whichever is smaller. Poisson arrivals are spread over exactly that many (see pace.h). */
static uint64_t planned_arrivals(const vl_config_t *c) {
  uint64_t by_time = c->duration_us ? (uint64_t)llround(c->rate * (double)c->duration_us / 1e6) : 0;
  uint64_t by_count = c->requests;
  /* --turns: an arrival is a conversation, of (turns_lo + turns_hi) / 2 requests on average. */
  if (c->turns_hi && by_count)
    by_count = (uint64_t)ceil((double)by_count * 2 / (c->turns_lo + c->turns_hi));
  if (by_count && by_time)
    return VL_MIN(by_count, by_time);
  return by_count ? by_count : by_time;
}

/* The run's statistics, empty: counters for each server and pool image. */
static int init_stats(vl_runner_t *r) {
  int rc;
  if ((rc = vl_stats_init(&r->stats)) != 0)
    return rc;
  if ((rc = vl_stats_init_urls(&r->stats, vl_config_distinct_urls(r->top))) != 0)
    return rc;
  if (r->pool && (rc = vl_stats_init_pool(&r->stats, r->pool->n)) != 0)
    return rc;
  r->stats.len.exact = r->prompts->synthetic && r->prompts->synthetic->exact;
  return 0;
}

static int init_runner(vl_runner_t *r) {
  const vl_config_t *c = r->cfg;
  int rc;
  if (uv_loop_init(&r->loop) != 0)
    return VL_EUV;
  if ((rc = init_stats(r)) != 0)
    return rc;
  if ((rc = vl__slot_headers(r)) != 0)
    return rc;
  r->stale_check = !c->http2;
  for (int i = 0; i < c->n_urls; i++)
    if (strncmp(c->urls[i], "http://", 7) != 0)
      r->stale_check = 0;
  r->full_urls = vl_xcalloc((size_t)c->n_urls, sizeof(char *));
  r->url_distinct = vl_xcalloc((size_t)c->n_urls, sizeof(int));
  for (int i = 0; i < c->n_urls; i++) {
    r->full_urls[i] = join_url(c->urls[i], c->endpoint);
    r->url_distinct[i] = vl_config_url_index(c, i);
  }
  /* Shards share the concurrency as they share the rate; slots enough for the largest phase. */
  r->n_slots = 0;
  for (int i = 0; i < r->n_phases; i++)
    r->n_slots = VL_MAX(r->n_slots, phase_cap(phase_cfg(r, i)));
  if ((rc = vl_transport_init(&r->tr, &r->loop, r->n_slots, c->http2)) != 0)
    return rc;
  r->tr.data = r;
  if (c->turns_hi && (rc = vl__converse_init(r)) != 0)
    return rc;
  r->slots = vl_xcalloc((size_t)r->n_slots, sizeof(vl_slot_t));
  for (int i = r->n_slots - 1; i >= 0; i--) {
    if ((rc = vl__slot_setup(r, &r->slots[i])) != 0)
      return rc;
    r->slots[i].xfer.done = vl__finish_done;
    r->slots[i].next_free = r->free_slots;
    r->free_slots = &r->slots[i];
  }
  if ((rc = vl_ticker_init(&r->loop, &r->pace, on_pace)) != 0)
    return VL_EUV;
  uv_timer_init(&r->loop, &r->tick_timer);
  uv_timer_init(&r->loop, &r->stop_timer);
  if (!vl_monitor_spec_empty(&c->monitor)) {
    char err[256];
    if ((rc = vl_monitor_init(&r->mon, &r->loop, &r->tr, &c->monitor, vl__watch_round, err,
                              sizeof(err))) != 0) {
      fprintf(stderr, "vlmload: %s\n", err);
      return rc;
    }
    r->mon.data = r;
    r->has_mon = 1;
  }
  if (c->run.flushes) {
    if ((rc = vl_flush_init(&r->flush, &r->loop, &r->tr, c, &flush_hooks)) != 0)
      return rc;
    r->flush.data = r;
    r->has_flush = 1;
  }
  if (c->n_profile_at) {
    if ((rc = vl_srvprof_init(&r->srvprof, &r->tr, c, on_srvprof)) != 0)
      return rc;
    r->srvprof.data = r;
    r->has_srvprof = 1;
  }
  if (r->pool && c->run.unique_images) {
    if ((rc = start_uniq(r)) != 0)
      return rc;
  }
  uv_signal_init(&r->loop, &r->sig_int);
  uv_signal_init(&r->loop, &r->sig_term);
  r->sig_int.data = r->sig_term.data = r;
  return 0;
}

static void free_runner(vl_runner_t *r) {
  for (int i = 0; i < r->n_slots; i++) {
    if (r->slots[i].xfer.easy)
      curl_easy_cleanup(r->slots[i].xfer.easy);
    vl_response_free(&r->slots[i].resp);
    vl_body_free(&r->slots[i].body);
    free(r->slots[i].uniq);
  }
  free(r->slots);
  vl__converse_free(r);
  if (r->plans)
    for (int i = 0; i < r->n_phases; i++)
      vl_plan_free(&r->plans[i]);
  free(r->plans);
  if (r->results)
    for (int i = 0; i < r->n_phases; i++) {
      vl_hist_free(&r->results[i].e2e);
      vl_hist_free(&r->results[i].ttft);
      vl_hist_free(&r->results[i].tpot);
    }
  free(r->results);
  if (r->top->rate_auto)
    vl_rateauto_free(&r->ra);
  curl_slist_free_all(r->headers);
  if (r->full_urls)
    for (int i = 0; i < r->cfg->n_urls; i++)
      free(r->full_urls[i]);
  free(r->full_urls);
  free(r->url_distinct);
  if (r->has_flush)
    vl_flush_free(&r->flush);
  if (r->has_srvprof)
    vl_srvprof_free(&r->srvprof);
  if (r->has_latprobe)
    vl__latprobe_free(r);
  if (r->has_mon)
    vl_monitor_free(&r->mon);
  vl_settings_free(&r->settings);
  vl__watch_free(r);
  vl_stats_free(&r->stats);
}

/* A flushed experiment whose flushes all failed measured something else than it meant to: says
 * which routes were called and what the last flush was answered. */
static void say_flushes_failed(const vl_runner_t *r) {
  const vl_flush_t *f = &r->flush;
  const vl_flush_record_t *last = &f->recs[f->n_recs - 1];
  char routes[512] = "", answer[260] = "";
  for (int i = 0; i < f->n_paths; i++)
    snprintf(routes + strlen(routes), sizeof(routes) - strlen(routes), "%s%s", i ? ", " : "",
             f->paths[i]);
  if (last->answer[0])
    snprintf(answer, sizeof(answer), ": \"%s\"", last->answer);
  char status[48];
  if (last->status)
    snprintf(status, sizeof(status), "HTTP %ld", last->status);
  else
    snprintf(status, sizeof(status), "no answer");
  fprintf(stderr,
          "vlmload: none of the %llu flushes succeeded (%s %s on %s; the last got %s%s): the "
          "caches were never flushed; check --server and --flush-endpoint%s\n",
          (unsigned long long)f->count, f->post ? "POST" : "GET", routes, r->cfg->url, status,
          answer, vl_profile_flush_hint(r->cfg->server));
}

/* ---- --rate auto: the probe before the run (rateauto.h) ------------------------------------ */

/* Starts probe stage r->ra.n: the closed loop of one request at a time (rate 0), or an open loop
 * at rate. A stage is the run's configuration with its own load: no warm-up, no flushes, no
 * ramp, and its timeline rows marked VL_RATEAUTO_PHASE. */
static void probe_stage(vl_runner_t *r, double rate) {
  vl_config_t *c = &r->ra_cfg;
  *c = *r->top; /* read only: what it points to stays the run's */
  int k = r->ra.n++;
  c->rate = rate;
  c->rate_auto = 0;
  c->ramp_to = -1;
  c->warmup = 0;
  c->flush_every_n = 0;
  c->flush_every_us = 0;
  c->phase_name = (char *)VL_RATEAUTO_PHASE;
  if (rate == 0) {
    c->concurrency = 1;
    c->requests = VL_RATEAUTO_FLOOR_REQUESTS;
    c->duration_us = (uint64_t)VL_RATEAUTO_FLOOR_S * 1000000;
  } else {
    c->requests = 0;
    c->duration_us = vl_rateauto_stage_us(&r->ra, rate);
  }
  r->draining = 0;
  r->results = r->ra.stage;
  begin_phase(r, k, c);
  if (!c->quiet && c->progress) {
    char line[160];
    if (rate == 0)
      snprintf(line, sizeof(line), "--rate auto: stage %d: one request at a time, for the floor",
               k + 1);
    else
      snprintf(line, sizeof(line), "--rate auto: stage %d: %.4g req/s for %.3gs", k + 1, rate,
               (double)c->duration_us / 1e6);
    vl_report_say(r->rep, line);
  }
}

/* The probe is over (done: the run's own load begins; else the run stopped during it): the
 * partial interval goes to the timeline as the probe's last row, and its requests leave the
 * statistics. */
static void probe_end(vl_runner_t *r) {
  uint64_t now = uv_hrtime();
  vl_snapshot_t snap = vl__runner_snapshot(r);
  if (vl_report_tick(r->rep, &r->stats, &snap) != 0)
    vl__runner_output_failed(r);
  if (r->results && r->ra.n && r->results[r->ra.n - 1].seconds == 0)
    r->results[r->ra.n - 1].seconds =
        (double)((r->stop_ns ? r->stop_ns : now) - r->phase_t0_ns) / 1e9;
  r->ra.seconds = (double)(now - r->ra_t0_ns) / 1e9;
  if (r->stats.n_messages) {
    const vl_errmsg_t *e = &r->stats.messages[0];
    r->ra.error_class = vl_errclass_name(e->err);
    r->ra.error_status = e->status;
    snprintf(r->ra.error_message, sizeof(r->ra.error_message), "%s", e->text);
  }
  r->probing = 0;
  r->draining = 0;
  r->results = NULL;
  vl_stats_free(&r->stats);
  memset(&r->stats, 0, sizeof(r->stats));
  if (init_stats(r) != 0) {
    fprintf(stderr, "vlmload: cannot set up the run: out of memory\n");
    r->fatal = 1;
    vl__runner_begin_stop(r, STOP_ERROR);
  }
}

/* A stage finished draining: the next one, or the run at the rate chosen. */
static void probe_next(vl_runner_t *r) {
  double rate = vl_rateauto_next(&r->ra);
  if (rate > 0) {
    probe_stage(r, rate);
    return;
  }
  probe_end(r);
  if (!r->admitting)
    return; /* an output failed, or the statistics could not be set up again */
  char words[300], line[400];
  vl_rateauto_words(&r->ra, words, sizeof(words));
  if (!(r->ra.chosen > 0)) {
    snprintf(line, sizeof(line), "--rate auto: %s; give --rate R", words);
    vl_report_say(r->rep, line);
    r->fatal = 1;
    vl__runner_begin_stop(r, STOP_ERROR);
    return;
  }
  if (!r->top->quiet) {
    snprintf(line, sizeof(line), "--rate auto: %s", words);
    vl_report_say(r->rep, line);
  }
  /* The run begins now, as it would at --rate CHOSEN: ids from 0, the clock from here. */
  r->rate_out->rate = r->ra.chosen;
  r->next_id = 0;
  r->t0_ns = r->srvprof.t0_ns = uv_hrtime();
  r->wall0_ms = vl_wall_ms();
  uint64_t every = r->top->sample_every_us / 1000;
  uv_timer_start(&r->tick_timer, on_tick, every, every);
  start_phase(r, 0);
  if (r->has_latprobe)
    vl__latprobe_start(r);
  /* The probe's requests left their images in the server's caches: a run that flushes empties
   * them before its first request, so that its memory starts from its own. */
  if (r->has_flush)
    vl_flush_now(&r->flush);
}

int vl_runner_run(vl_config_t *cfg, const char *model, const vl_prompts_t *prompts,
                  const vl_imagepool_t *pool, vl_report_t *rep) {
  vl_runner_t run, *r = &run;
  memset(r, 0, sizeof(*r));
  r->gone.back_at_s = -1;
  r->pool = pool && pool->n ? pool : NULL;
  r->cfg = r->top = cfg;
  r->rate_out = cfg;
  r->n_phases = cfg->n_phases ? cfg->n_phases : 1;
  r->prompts = prompts;
  r->rep = rep;
  /* The plans come first: they say how many segments the slots' bodies need. */
  int rc = 0;
  r->plans = vl_xcalloc((size_t)r->n_phases, sizeof(vl_plan_t));
  r->body_cap = VL_BODY_TEMPLATE_SEGS;
  for (int i = 0; i < r->n_phases && rc == 0; i++) {
    rc = vl_plan_init(&r->plans[i], phase_cfg(r, i), model, prompts, r->pool);
    r->body_cap = VL_MAX(r->body_cap, vl_plan_body_cap(&r->plans[i]));
  }
  if (rc == 0)
    rc = init_runner(r);
  if (rc == 0 && cfg->probe_rate > 0) {
    r->has_latprobe = 1;
    rc = vl__latprobe_init(r, model);
  }
  if (rc == 0 && cfg->rate_auto)
    rc = vl_rateauto_init(&r->ra);
  if (rc == 0 && cfg->n_phases) {
    r->results = vl_xcalloc((size_t)r->n_phases, sizeof(vl_phase_result_t));
    for (int i = 0; i < r->n_phases && rc == 0; i++)
      if ((rc = vl_hist_init(&r->results[i].e2e, VL_STATS_HIGHEST_US, 2)) == 0 &&
          (rc = vl_hist_init(&r->results[i].ttft, VL_STATS_HIGHEST_US, 2)) == 0)
        rc = vl_hist_init(&r->results[i].tpot, VL_STATS_HIGHEST_US, 2);
  }
  if (rc) {
    fprintf(stderr, "vlmload: cannot set up the run: %s\n", vl_strerror(rc));
    free_runner(r);
    return 1;
  }

  if (r->has_uniq)
    prefill_uniq(r);
  first_sample(r);
  r->t0_ns = r->srvprof.t0_ns = uv_hrtime();
  r->wall0_ms = vl_wall_ms();
  r->admitting = 1;
  r->ff_open = !cfg->keep_going;
  uv_signal_start(&r->sig_int, on_signal, SIGINT);
  uv_signal_start(&r->sig_term, on_signal, SIGTERM);
  uv_timer_start(&r->tick_timer, on_tick, cfg->sample_every_us / 1000, cfg->sample_every_us / 1000);
  if (cfg->rate_auto) {
    r->probing = 1;
    r->ra_t0_ns = r->t0_ns;
    r->next_id = VL_RATEAUTO_FIRST_ID;
    probe_stage(r, 0);
  } else {
    start_phase(r, 0);
    if (r->has_latprobe)
      vl__latprobe_start(r);
  }
  vl__runner_admit(r);
  uv_run(&r->loop, UV_RUN_DEFAULT);

  int in_probe = r->probing;
  if (in_probe) {
    /* Stopped during the probe (its last row written): none of the run's own load was sent. */
    probe_end(r);
    r->t0_ns = r->stop_ns = r->stop_ns ? r->stop_ns : uv_hrtime();
    r->load_ns = 0;
  }
  vl_snapshot_t snap = vl__runner_snapshot(r);
  if (!in_probe && vl_report_tick(rep, &r->stats, &snap) != 0)
    r->fatal = 1;
  vl_run_meta_t meta = {
      .model = model,
      .stop_reason = stop_names[r->stop],
      .interrupted = r->stop == STOP_SIGNAL,
      .socket_errors = r->tr.socket_errors,
      .duration_ns = (r->ended_ns ? r->ended_ns : snap.now_ns) - r->t0_ns,
      .load_ns = r->load_ns,
      .flush = r->has_flush ? &r->flush : NULL,
      .srvprof = r->has_srvprof ? &r->srvprof : NULL,
      .pool = r->pool,
      .uniq = r->has_uniq ? &r->uniq : NULL,
      .phases = r->results,
      .mon = r->has_mon ? &r->mon : NULL,
      .n_phases = r->results ? r->n_phases : 0,
      .rate_auto = cfg->rate_auto ? &r->ra : NULL,
      .gone = r->gone.how ? &r->gone : NULL,
      .settings = &r->settings,
  };
  /* A process found after the first round (--monitor-pid-match) has its settings read now; the
   * last phase's counters end with the round after the last request. */
  if (r->has_mon) {
    vl_settings_read_monitored(&r->settings, &r->mon, vl_profile_name(cfg->server));
    if (r->results)
      vl_counters_read(&r->mon, r->results[r->phase].ctr_end, VL_COUNTERS_MAX);
  }
  if (r->results && r->admitting == 0 && r->results[r->phase].seconds == 0) {
    r->results[r->phase].seconds = (double)(r->stop_ns - r->phase_t0_ns) / 1e9;
    r->results[r->phase].paused_s = (double)r->phase_paused_ns / 1e9;
  }
  if (r->has_flush)
    r->stats.flush_skipped = r->flush.skipped;
  int wrc = vl_report_finish(rep, &r->stats, &snap, &meta);
  int lrc = uv_loop_close(&r->loop);
  if (lrc != 0)
    fprintf(stderr, "vlmload: internal error: event loop closed with handles open\n");

  int status = 0;
  if (r->fatal || wrc || lrc || (r->gone.how && r->gone.back_at_s < 0))
    status = 1;
  else if (r->stop == STOP_SIGNAL)
    status = 130;
  else if (r->stats.total.ok == 0)
    status = 1;
  else if (r->has_flush && r->flush.count && !r->flush.ok) {
    say_flushes_failed(r);
    status = 1;
  } else if (vl_report_thresholds_crossed(rep))
    status = 3;
  free_runner(r);
  return status;
}
