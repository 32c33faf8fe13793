/* A request's end, one pass down: the slot gives its outcome, which the run records (the
 * statistics, the phase's figures, the request log) and hands to its watch (failing fast, the
 * server gone); the slot is freed, a conversation's turn goes back to its conversation, and the
 * run decides what comes next (failing fast, a flush, admission, the end). */
#include "runner_internal.h"
#include "vlmload/common.h"

#include <math.h>

/* A request of a phase (or of a --rate auto stage) ended: the phase's own figures. */
static void phase_done(vl_phase_result_t *ph, const vl_outcome_t *o) {
  vl_slo_count(&ph->slo, o->slo_met);
  if (o->err != VL_ERR_NONE) {
    ph->failed++;
    return;
  }
  double tpot;
  ph->ok++;
  vl_hist_record(&ph->e2e, (int64_t)(o->done_ns - o->intended_ns) / 1000);
  ph->e2e_sent_sum_s += (double)(o->done_ns - o->sent_ns) / 1e9;
  if (o->first_token_ns)
    vl_hist_record(&ph->ttft, (int64_t)(o->first_token_ns - o->sent_ns) / 1000);
  if (vl_stats_tpot_us(o, &tpot))
    vl_hist_record(&ph->tpot, llround(tpot));
  if (o->token_events > 1) {
    ph->itl_sum_ns += o->itl_sum_ns;
    ph->itl_gaps += o->token_events - 1;
  }
}

void vl__finish(vl_runner_t *r, vl_slot_t *s, CURLcode result, int cancelled) {
  vl_outcome_t o;
  vl__slot_outcome(s, result, cancelled, &o);
  if (*o.words)
    vl_stats_message(&r->stats, o.err, o.status, o.words);
  o.slo_met = vl_stats_slo(&r->top->slo, &o);
  /* Only a request that succeeded feeds the run's inter-token gaps. */
  if (o.err == VL_ERR_NONE && o.measured)
    vl_response_record_itl(&s->resp, &r->stats.itl);
  vl_stats_done(&r->stats, &o);
  if (r->has_srvprof && !r->probing)
    vl_srvprof_count(&r->srvprof, r->stats.total.completed);
  if (r->stats.turns)
    vl_turnstats_done(r->stats.turns, &o);
  if (r->results && o.err != VL_ERR_CANCELLED)
    phase_done(&r->results[s->phase], &o);
  vl_snapshot_t snap = vl__runner_snapshot(r);
  snap.in_flight = r->in_flight - 1;
  int lost = vl_report_request(r->rep, &o, &snap);
  vl__watch_outcome(r, &o);
  vl_conv_t *conv = s->conv;
  int cut = s->resp.content_cut;
  vl__slot_free(s);
  if (lost)
    vl__runner_output_failed(r);
  if (conv)
    vl__converse_turn_done(r, conv, o.err, cut);
}

void vl__finish_done(vl_transfer_t *x, CURLcode result) {
  vl_slot_t *s = vl_container_of(x, vl_slot_t, xfer);
  vl_runner_t *r = s->run;
  if (x->timed_out == VL_TRANSFER_CANCELLED) {
    /* Closed by --cancel before its reply finished: never sent again. */
    vl__finish(r, s, result, VL__CLOSED_BY_USER);
  } else if (vl__slot_resend(s, &result)) {
    r->stats.retried++;
    return; /* still in flight */
  } else {
    vl__finish(r, s, result, VL__CLOSED_NONE);
  }
  if (r->ff_stop) {
    /* Every request so far failed alike: more would fail the same way. */
    r->ff_stop = 0;
    vl_report_say(r->rep, r->ff_line);
    if (!r->admitting) /* every request was sent already: the rest are cancelled now */
      r->stop = STOP_FAILING;
    vl__runner_begin_stop(r, STOP_FAILING);
    vl__runner_cancel_all(r);
    if (r->has_flush)
      vl_flush_abort(&r->flush);
  }
  if (r->has_flush)
    vl_flush_finished(&r->flush);
  if (r->admitting && !vl__runner_paused(r))
    vl__runner_admit(r);
  else
    vl__runner_maybe_finish(r);
}
