/* Conversations in a run (--turns): each arrival on the schedule starts one; its turns go one
 * after another, the next one a think time after the previous reply (a timer each, nothing
 * blocks), and conversations interleave. A turn that is due waits for a free slot as a queued
 * arrival does, keeping its intended start; due turns go before new arrivals. A conversation in
 * its think time holds no request slot: --concurrency caps the turns in flight, and
 * --max-conversations (default --concurrency) the conversations in progress.
 *
 * Counting: a turn is a request (--requests, --warmup, every figure). --requests N stops new
 * conversations once the turns of those started (and dropped, and other shards') reach N, the last
 * one shortened to fit, and the run ends when they are done. --duration and Ctrl-C stop admission:
 * turns in flight finish (or are cancelled after --grace), and every conversation not finished is
 * counted as cut.
 *
 * Everything is allocated at the start: a conversation's history holds the replies of at most
 * --turns - 1 turns of vl_config_reply_room bytes each; a reply that does not fit ends its
 * conversation (too_long), with one warning. */
#include "runner_internal.h"
#include "vlmload/common.h"
#include "vlmload/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seeds of the conversations' own random streams, apart from every other stream of the run. */
#define TURNS_STREAM 0x7475726e73ull /* "turns" */
#define THINK_STREAM 0x7468696e6bull /* "think" */

static int draw_turns(const vl_config_t *c, uint64_t id) {
  if (c->turns_lo == c->turns_hi)
    return c->turns_lo;
  vl_rng_t rng;
  vl_rng_init(&rng, c->seed ^ TURNS_STREAM, id);
  return (int)vl_rng_range(&rng, (uint64_t)c->turns_lo, (uint64_t)c->turns_hi);
}

/* The think time after turn `turn` (1-based) of conversation id, in nanoseconds. */
static uint64_t draw_think_ns(const vl_config_t *c, uint64_t id, int turn) {
  if (!c->think_us || c->think_kind == VL_ARRIVAL_CONSTANT)
    return c->think_us * 1000;
  vl_rng_t rng;
  vl_rng_init(&rng, c->seed ^ THINK_STREAM, id * VL_TURNS_MAX + (uint64_t)turn);
  double x = c->think_kind == VL_ARRIVAL_POISSON
                 ? vl_rng_exp(&rng)
                 : vl_rng_gamma(&rng, 1 / (c->think_cv * c->think_cv)) * c->think_cv * c->think_cv;
  return (uint64_t)llround((double)c->think_us * 1000 * x);
}

/* The turns the arrival id brings, within what --requests leaves. */
static int turns_of(const vl_runner_t *r, uint64_t id) {
  const vl_config_t *c = r->cfg;
  uint64_t n = (uint64_t)draw_turns(c, id);
  if (c->requests && r->conv.committed + n > c->requests)
    n = c->requests > r->conv.committed ? c->requests - r->conv.committed : 0;
  return (int)n;
}

int vl__converse_init(vl_runner_t *r) {
  const vl_config_t *c = r->cfg;
  vl__convs_t *v = &r->conv;
  uint64_t n = (uint64_t)(c->max_conversations ? c->max_conversations : c->concurrency);
  v->n = (int)((n + c->shard_n - 1) / c->shard_n);
  v->max_images = r->pool ? c->images_hi : 0;
  v->reply_room = (size_t)vl_config_reply_room(c) * (size_t)(c->turns_hi - 1);
  int rc = vl_turnstats_init(&v->stats, c->turns_hi);
  if (rc)
    return rc;
  r->stats.turns = &v->stats;
  v->all = calloc((size_t)v->n, sizeof(vl_conv_t));
  if (!v->all)
    return VL_ENOMEM;
  r->has_conv = 1;
  int uniq = r->pool && c->unique_images;
  for (int i = v->n - 1; i >= 0; i--) {
    vl_conv_t *cv = &v->all[i];
    cv->run = r;
    if ((rc = vl_history_init(&cv->h, c->turns_hi, v->max_images, v->reply_room)) != 0)
      return rc;
    if (uniq && !(cv->uniq = calloc((size_t)(c->turns_hi * v->max_images), sizeof(*cv->uniq))))
      return VL_ENOMEM;
    uv_timer_init(&r->loop, &cv->think);
    cv->next = v->free_list;
    v->free_list = cv;
  }
  return 0;
}

void vl__converse_free(vl_runner_t *r) {
  vl__convs_t *v = &r->conv;
  for (int i = 0; v->all && i < v->n; i++) {
    vl_history_free(&v->all[i].h);
    free(v->all[i].uniq);
  }
  free(v->all);
  vl_turnstats_free(&v->stats);
  r->stats.turns = NULL;
  memset(v, 0, sizeof(*v));
}

static void close_noop(uv_handle_t *h) {
  (void)h;
}

void vl__converse_close(vl_runner_t *r) {
  for (int i = 0; i < r->conv.n; i++)
    uv_close((uv_handle_t *)&r->conv.all[i].think, close_noop);
}

int vl__converse_room(const vl_runner_t *r) {
  return r->conv.free_list != NULL;
}

void vl__converse_skip(vl_runner_t *r, uint64_t id) {
  r->conv.committed += (uint64_t)turns_of(r, id);
}

int vl__converse_count_reached(const vl_runner_t *r) {
  return r->cfg->requests && r->conv.committed >= r->cfg->requests;
}

uint64_t vl__converse_plan_id(const vl_conv_t *cv) {
  return cv->id * VL_TURNS_MAX + (uint64_t)cv->sent;
}

void vl__converse_start(vl_runner_t *r, uint64_t intended_ns) {
  vl__convs_t *v = &r->conv;
  vl_conv_t *cv = v->free_list;
  v->free_list = cv->next;
  cv->next = NULL;
  cv->id = r->next_id++;
  cv->turns = turns_of(r, cv->id);
  v->committed += (uint64_t)cv->turns;
  cv->sent = 0;
  cv->n_uniq = 0;
  cv->live = 1;
  vl_history_clear(&cv->h);
  v->live++;
  v->stats.started++;
  vl__slot_start(r, intended_ns, cv);
}

void vl__converse_send_due(vl_runner_t *r) {
  vl__convs_t *v = &r->conv;
  vl_conv_t *cv = v->due;
  v->due = cv->next;
  if (!v->due)
    v->due_tail = NULL;
  cv->next = NULL;
  vl__slot_start(r, cv->due_ns, cv);
}

static void enqueue_due(vl__convs_t *v, vl_conv_t *cv) {
  cv->next = NULL;
  if (v->due_tail)
    v->due_tail->next = cv;
  else
    v->due = cv;
  v->due_tail = cv;
}

typedef enum { END_COMPLETED, END_FAILED, END_TOO_LONG, END_CUT } end_t;

static void end_conversation(vl_runner_t *r, vl_conv_t *cv, end_t how) {
  vl__convs_t *v = &r->conv;
  uint64_t *counter[] = {&v->stats.completed, &v->stats.failed, &v->stats.too_long, &v->stats.cut};
  (*counter[how])++;
  for (int k = 0; k < cv->n_uniq; k++)
    vl_uniq_release(&r->uniq, &cv->uniq[k]);
  cv->n_uniq = 0;
  uv_timer_stop(&cv->think);
  cv->live = 0;
  cv->in_flight = 0;
  v->live--;
  cv->next = v->free_list;
  v->free_list = cv;
}

static void on_think(uv_timer_t *t) {
  vl_conv_t *cv = vl_container_of(t, vl_conv_t, think);
  vl_runner_t *r = cv->run;
  uint64_t now = uv_hrtime();
  /* libuv's timer counts from the loop's cached time, in milliseconds: it may fire early. */
  if (now < cv->due_ns) {
    uv_timer_start(&cv->think, on_think, (cv->due_ns - now + 999999) / 1000000, 0);
    return;
  }
  enqueue_due(&r->conv, cv);
  vl__runner_admit(r);
}

void vl__converse_turn_done(vl_runner_t *r, vl_conv_t *cv, vl_errclass_t err, int cut) {
  cv->in_flight = 0;
  if (err == VL_ERR_CANCELLED) {
    end_conversation(r, cv, END_CUT);
  } else if (err != VL_ERR_NONE) {
    end_conversation(r, cv, END_FAILED);
  } else if (cut || cv->h.over) {
    if (!r->conv.told_long) {
      char line[240];
      snprintf(line, sizeof(line),
               "conversation %llu: the reply to turn %d is longer than the history keeps (%llu "
               "bytes a reply, from --max-tokens); such conversations end there, counted as too "
               "long",
               (unsigned long long)cv->id, cv->sent,
               (unsigned long long)vl_config_reply_room(r->cfg));
      vl_report_say(r->rep, line);
      r->conv.told_long = 1;
    }
    end_conversation(r, cv, END_TOO_LONG);
  } else if (cv->sent >= cv->turns) {
    end_conversation(r, cv, END_COMPLETED);
  } else if (!r->admitting) {
    end_conversation(r, cv, END_CUT);
  } else {
    uint64_t think = draw_think_ns(r->cfg, cv->id, cv->sent);
    cv->due_ns = uv_hrtime() + think;
    if (think == 0)
      enqueue_due(&r->conv, cv); /* the completion admits it */
    else
      uv_timer_start(&cv->think, on_think, (think + 999999) / 1000000, 0);
  }
}

void vl__converse_stop(vl_runner_t *r) {
  vl__convs_t *v = &r->conv;
  v->due = v->due_tail = NULL;
  for (int i = 0; i < v->n; i++)
    if (v->all[i].live && !v->all[i].in_flight)
      end_conversation(r, &v->all[i], END_CUT);
}

/* The response's content sink: the reply goes into the history as it arrives. */
static void keep_reply(void *ud, const char *s, size_t n) {
  vl_conv_t *cv = ud;
  (void)vl_history_reply(&cv->h, s, n);
}

void vl__converse_fill(vl_runner_t *r, vl_slot_t *s, const vl_request_plan_t *rp,
                       const vl_seg_t *images) {
  vl_conv_t *cv = s->conv;
  /* Cannot fail: the history has room for every turn, and --turns is refused with --api native. */
  (void)vl_history_user(&cv->h, vl_plan_template(vl__runner_plan(r), rp), images);
  vl_history_fill(&cv->h, &s->body);
  cv->sent++;
  cv->in_flight = 1;
}

void vl__converse_listen(vl_runner_t *r, vl_slot_t *s) {
  vl_conv_t *cv = s->conv;
  vl_turnstats_sent(&r->conv.stats, cv->sent);
  /* The last turn's reply is never sent again: it need not be kept. */
  if (cv->sent < cv->turns)
    vl_response_keep_content(&s->resp, keep_reply, cv, cv->h.cap - cv->h.len);
}
