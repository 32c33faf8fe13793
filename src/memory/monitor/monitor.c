/* The monitor's registry of series and its rounds; the parts that fill the series are in proc.c,
 * scrape.c and cmd.c (internal.h). */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/memunit.h"

#include <stdlib.h>
#include <string.h>

/* MB in one unit of a series' value: unit is "" (not memory) or a vl_memunit_label. */
static double unit_mb(const char *unit) {
  static const char *const labels[] = {"bytes", "kB", "MB", "GB", "TB"};
  double mb = 1.0 / VL_MEMUNIT_MB;
  for (size_t i = 0; i < VL_ARRAY_SIZE(labels); i++, mb *= 1024)
    if (strcmp(unit, labels[i]) == 0)
      return mb;
  return 0;
}

vl__monitor_ser_t *vl__monitor_add_series(vl_monitor_t *mon, char *name, const char *unit,
                                          vl_monitor_kind_t kind) {
  if (mon->n_series == mon->cap_series) {
    mon->cap_series = mon->cap_series ? mon->cap_series * 2 : 16;
    mon->series = vl_xrealloc(mon->series, mon->cap_series * sizeof(*mon->series));
  }
  vl__monitor_ser_t *s = vl_xcalloc(1, sizeof(*s));
  s->name = name;
  s->pub.name = name;
  s->pub.unit = unit;
  s->pub.mb = unit_mb(unit);
  s->pub.kind = kind;
  mon->series[mon->n_series++] = s;
  mon->generation++;
  return s;
}

const vl_monitor_series_t *vl_monitor_series(const vl_monitor_t *mon, size_t i) {
  return i < mon->n_series ? &mon->series[i]->pub : NULL;
}

const vl_monitor_series_t *vl_monitor_find(const vl_monitor_t *mon, const char *name) {
  for (size_t i = 0; i < mon->n_series; i++) {
    if (strcmp(mon->series[i]->name, name) == 0)
      return &mon->series[i]->pub;
  }
  return NULL;
}

void vl_monitor_gone(vl_monitor_t *mon, const char *label) {
  size_t n = strlen(label);
  int64_t now = vl_wall_ms();
  for (size_t i = 0; i < mon->n_series; i++) {
    vl__monitor_ser_t *s = mon->series[i];
    if (s->pub.kind != VL_MONITOR_PROC && s->pub.kind != VL_MONITOR_GPU)
      continue;
    const char *dot = strchr(s->name, '.');
    if (dot && strncmp(dot + 1, label, n) == 0 && (dot[1 + n] == '\0' || dot[1 + n] == '/'))
      vl__monitor_set_value(s, 0, 0, now);
  }
}

void vl__monitor_set_value(vl__monitor_ser_t *s, double v, int valid, int64_t t) {
  s->pub.value = valid ? v : 0;
  s->pub.valid = valid;
  s->pub.t_wall_ms = t;
}

void vl__monitor_part_done(vl_monitor_t *mon) {
  mon->pending--;
  if (mon->pending == 0 && !mon->closing && mon->done_cb)
    mon->done_cb(mon);
}

void vl__monitor_maybe_closed(vl_monitor_t *mon) {
  if (mon->closing && mon->to_close == 0 && mon->close_cb) {
    vl_monitor_close_cb cb = mon->close_cb;
    mon->close_cb = NULL;
    cb(mon);
  }
}

void vl__monitor_handle_closed(uv_handle_t *h) {
  vl_monitor_t *mon = h->data;
  mon->to_close--;
  vl__monitor_maybe_closed(mon);
}

static void monitor_free(vl_monitor_t *mon) {
  vl__monitor_proc_free(mon);
  vl__monitor_anat_free(mon);
  vl__monitor_scrape_free(mon);
  vl__monitor_cmd_free(mon);
  for (size_t i = 0; i < mon->n_series; i++) {
    vl__monitor_ser_t *s = mon->series[i];
    free(s->name);
    free(s->metric);
    free(s->canon);
    free(s);
  }
  free(mon->series);
  mon->series = NULL;
  mon->n_series = mon->cap_series = 0;
}

int vl_monitor_init(vl_monitor_t *mon, uv_loop_t *loop, vl_transport_t *tr,
                    const vl_monitor_spec_t *spec, vl_monitor_done_cb done_cb, char *err,
                    size_t errlen) {
  memset(mon, 0, sizeof(*mon));
  mon->loop = loop;
  mon->tr = tr;
  mon->spec = spec;
  mon->done_cb = done_cb;
  int rc = 0;
  if (spec->n_proms > 0 && !tr) {
    vl_set_err(err, errlen, "--monitor-prom needs the run's HTTP transport");
    return VL_EINVAL;
  }
  /* The proc and gpu series come first: the worker publishes the first series in order. */
  if (spec->n_pids + spec->n_matches + spec->n_trees > 0 || spec->gpu) {
    if ((rc = vl__monitor_proc_init(mon, err, errlen)) != 0)
      goto fail;
  }
  vl__monitor_anat_init(mon);
  if (spec->n_proms > 0 && (rc = vl__monitor_scrape_init(mon, err, errlen)) != 0)
    goto fail;
  if (spec->n_cmds > 0)
    vl__monitor_cmd_init(mon);
  /* Handles last: nothing above leaves one to close. */
  if (mon->worker && (rc = vl__monitor_proc_start(mon, err, errlen)) != 0)
    goto fail;
  vl__monitor_cmd_open(mon);
  return 0;

fail:
  monitor_free(mon);
  return rc;
}

int vl_monitor_sample(vl_monitor_t *mon) {
  if (mon->closing)
    return VL_ECANCEL;
  mon->rounds++;
  vl__monitor_proc_sample(mon);
  vl__monitor_anat_sample(mon);
  vl__monitor_scrape_sample(mon);
  vl__monitor_cmd_sample(mon);
  return 0;
}

void vl_monitor_close(vl_monitor_t *mon, vl_monitor_close_cb close_cb) {
  if (mon->closing)
    return;
  mon->closing = 1;
  mon->close_cb = close_cb;
  mon->to_close = 0;
  vl__monitor_proc_close(mon);
  vl__monitor_anat_close(mon);
  vl__monitor_scrape_close(mon);
  vl__monitor_cmd_close(mon);
  vl__monitor_maybe_closed(mon);
}

void vl_monitor_free(vl_monitor_t *mon) {
  monitor_free(mon);
}
