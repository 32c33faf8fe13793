/* What the monitor tells a person: the problems its first round found, said before the load, and
 * the prom targets' and commands' records for the summary (monitor.h). Built on the info calls
 * alone. */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/procmem.h"
#include "vlmload/text.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#define LISTED 3 /* matching processes named in a line */

/* A process for a line: its command line's shown form, cut to 40 columns. */
static void proc_text(pid_t pid, char *out, size_t len) {
  char cmd[256], shown[41];
  if (vl_procmem_cmdline(pid, cmd, sizeof(cmd)) != 0) {
    snprintf(out, len, "%ld (gone)", (long)pid);
    return;
  }
  char all[sizeof(cmd) * 4];
  size_t whole = vl_text_shown(all, sizeof(all), cmd);
  size_t cut = vl_text_shown(shown, sizeof(shown), cmd);
  snprintf(out, len, "%ld (%s%s)", (long)pid, shown, cut < whole ? "..." : "");
}

static void say_matches(const vl_monitor_t *mon, FILE *f) {
  const vl_monitor_spec_t *spec = mon->spec;
  vl_monitor_proc_info_t in;
  for (int i = spec->n_pids; i < spec->n_pids + spec->n_matches; i++) {
    if (vl_monitor_proc_info(mon, i, &in) != 0)
      continue;
    const char *re = spec->matches[i - spec->n_pids].regex;
    if (!in.pid) {
      fprintf(f,
              "vlmload: --monitor-pid-match '%s': no process matches yet; looking again every "
              "%.3gs (the summary says if none ever did)\n",
              re, (double)spec->rescan_ms / 1e3);
      continue;
    }
    if (in.matches < 2)
      continue;
    fprintf(f, "vlmload: --monitor-pid-match '%s': %d processes match: ", re, in.matches);
    int listed = VL_MIN(in.n_found, LISTED);
    for (int k = 0; k < listed; k++) {
      char p[96];
      proc_text(in.found[k], p, sizeof(p));
      fprintf(f, "%s%s", k ? ", " : "", p);
    }
    if (in.matches > listed)
      fprintf(f, " and %d more", in.matches - listed);
    fprintf(f,
            "; following %ld, the oldest, alone (--monitor-tree PID follows a server's whole "
            "process tree)\n",
            (long)in.pid);
  }
}

static void say_proms(const vl_monitor_t *mon, FILE *f) {
  vl_monitor_part_info_t in;
  for (int i = 0; vl_monitor_prom_info(mon, i, &in) == 0; i++) {
    if (!in.ok && in.failed && in.last_failed) {
      fprintf(f,
              "vlmload: --monitor-prom %s: %s%s%s%s; the run goes on and scrapes it at every "
              "sample\n",
              in.label, in.last_error, in.advice[0] ? " (" : "", in.advice,
              in.advice[0] ? ")" : "");
      continue;
    }
    if (!in.fixed)
      continue;
    if (in.missing[0])
      fprintf(f,
              "vlmload: --monitor-prom %s: no sample of %s on its page (%zu metrics there: %s%s); "
              "not recorded\n",
              in.label, in.missing, in.page_metrics, in.page_some,
              in.page_metrics > 4 ? ", ..." : "");
    else if (in.defaults && in.n_series == 0)
      fprintf(f,
              "vlmload: --monitor-prom %s: none of the default metrics is on its page (%zu metrics "
              "there: %s%s); name the ones to record after '#': URL#NAME,NAME\n",
              in.label, in.page_metrics, in.page_some, in.page_metrics > 4 ? ", ..." : "");
  }
}

static void say_cmds(const vl_monitor_t *mon, FILE *f) {
  vl_monitor_part_info_t in;
  for (int i = 0; vl_monitor_cmd_info(mon, i, &in) == 0; i++) {
    if (!in.ok && in.failed && in.last_failed)
      fprintf(f,
              "vlmload: --monitor-cmd %s: %s at the first sample; the run goes on and runs it at "
              "every sample\n",
              in.label, in.last_error);
    else if (in.unit_from == VL_MONITOR_UNIT_ASSUMED)
      fprintf(f,
              "vlmload: --monitor-cmd %s: \"%s\" names no unit; taken as MB (print one after the "
              "number, as kB or MiB, or end the name with one: %s_kb=CMD)\n",
              in.label, in.first_text, in.label);
  }
}

void vl_monitor_say_start(const vl_monitor_t *mon, FILE *f) {
  say_matches(mon, f);
  say_proms(mon, f);
  say_cmds(mon, f);
  fflush(f);
}

static void add_error(cJSON *o, const vl_monitor_part_info_t *in) {
  if (in->last_error[0])
    cJSON_AddStringToObject(o, "last_error", in->last_error);
  else
    cJSON_AddNullToObject(o, "last_error");
  cJSON_AddBoolToObject(o, "last_failed", in->last_failed);
}

static const char *unit_from_name(vl_monitor_unit_from_t u) {
  switch (u) {
  case VL_MONITOR_UNIT_OUTPUT:
    return "output";
  case VL_MONITOR_UNIT_NAME:
    return "name";
  case VL_MONITOR_UNIT_ASSUMED:
    return "assumed";
  case VL_MONITOR_UNIT_NOT_MEMORY:
    return "not-memory";
  default:
    return NULL;
  }
}

void vl_monitor_parts_json(const vl_monitor_t *mon, cJSON *o) {
  const vl_monitor_spec_t *spec = mon->spec;
  vl_monitor_part_info_t in;
  if (spec->n_proms > 0) {
    cJSON *arr = cJSON_AddArrayToObject(o, "scrapes");
    for (int i = 0; vl_monitor_prom_info(mon, i, &in) == 0; i++) {
      cJSON *s = cJSON_CreateObject();
      cJSON_AddStringToObject(s, "url", in.label);
      if (spec->proms[i].label)
        cJSON_AddStringToObject(s, "label", spec->proms[i].label);
      cJSON_AddNumberToObject(s, "ok", (double)in.ok);
      cJSON_AddNumberToObject(s, "failed", (double)in.failed);
      cJSON_AddNumberToObject(s, "skipped", (double)in.skipped);
      cJSON_AddNumberToObject(s, "series", (double)in.n_series);
      cJSON *miss = cJSON_AddArrayToObject(s, "missing");
      for (const char *p = in.missing; *p;) {
        size_t n = strcspn(p, ",");
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)VL_MIN(n, sizeof(name) - 1), p);
        cJSON_AddItemToArray(miss, cJSON_CreateString(name));
        p += n;
        while (*p == ',' || *p == ' ')
          p++;
      }
      if (in.fixed)
        cJSON_AddNumberToObject(s, "page_metrics", (double)in.page_metrics);
      else
        cJSON_AddNullToObject(s, "page_metrics");
      add_error(s, &in);
      cJSON_AddItemToArray(arr, s);
    }
  }
  if (spec->n_cmds > 0) {
    cJSON *arr = cJSON_AddArrayToObject(o, "commands");
    for (int i = 0; vl_monitor_cmd_info(mon, i, &in) == 0; i++) {
      cJSON *c = cJSON_CreateObject();
      cJSON_AddStringToObject(c, "label", in.label);
      cJSON_AddNumberToObject(c, "ok", (double)in.ok);
      cJSON_AddNumberToObject(c, "failed", (double)in.failed);
      cJSON_AddNumberToObject(c, "skipped", (double)in.skipped);
      cJSON_AddNumberToObject(c, "timeouts", (double)in.timeouts);
      cJSON_AddStringToObject(c, "unit", in.unit);
      if (in.unit_from == VL_MONITOR_UNIT_OUTPUT)
        cJSON_AddStringToObject(c, "printed_unit", in.read_unit);
      const char *from = unit_from_name(in.unit_from);
      if (from)
        cJSON_AddStringToObject(c, "unit_from", from);
      else
        cJSON_AddNullToObject(c, "unit_from");
      add_error(c, &in);
      cJSON_AddItemToArray(arr, c);
    }
  }
}

/* The counts of a part, as fields of w. */
static void counts(vl_text_wrap_t *w, const vl_monitor_part_info_t *in, const char *what) {
  vl_text_wrap_add(w, "", "%llu %s ok,", (unsigned long long)in->ok, what);
  vl_text_wrap_add(w, " ", "%llu failed", (unsigned long long)in->failed);
  if (in->skipped)
    vl_text_wrap_add(w, ", ", "%llu skipped (the last still running)",
                     (unsigned long long)in->skipped);
}

/* Its latest failure, last on the line. */
static void last_error(vl_text_wrap_t *w, const vl_monitor_part_info_t *in) {
  if (!in->last_error[0])
    return;
  vl_text_wrap_add(w, "; ", "%s", in->last_failed ? "the last failed:" : "the last failure:");
  vl_text_wrap_words(w, in->last_error);
}

void vl_monitor_print_parts(const vl_monitor_t *mon, FILE *f, int blank_first) {
  vl_monitor_part_info_t in;
  int first = 1;
  for (int i = 0; vl_monitor_prom_info(mon, i, &in) == 0; i++) {
    if (first && blank_first)
      fputc('\n', f);
    first = 0;
    vl_text_wrap_t w;
    char head[200];
    const char *label = mon->spec->proms[i].label;
    snprintf(head, sizeof(head), "  %-10s %s%s%s: ", "scrapes", label ? label : "",
             label ? "=" : "", in.label);
    vl_text_wrap_start(&w, f, VL_TEXT_COLUMNS, 13, head);
    counts(&w, &in, "scrapes");
    vl_text_wrap_add(&w, ", ", "%zu series", in.n_series);
    if (in.missing[0]) {
      vl_text_wrap_add(&w, "; ", "not on its page:");
      vl_text_wrap_words(&w, in.missing);
    }
    last_error(&w, &in);
    vl_text_wrap_end(&w);
  }
  for (int i = 0; vl_monitor_cmd_info(mon, i, &in) == 0; i++) {
    if (first && blank_first)
      fputc('\n', f);
    first = 0;
    vl_text_wrap_t w;
    char head[160];
    snprintf(head, sizeof(head), "  %-10s %s: ", "command", in.label);
    vl_text_wrap_start(&w, f, VL_TEXT_COLUMNS, 13, head);
    counts(&w, &in, "runs");
    if (in.timeouts)
      vl_text_wrap_add(&w, ", ", "%llu killed for time", (unsigned long long)in.timeouts);
    switch (in.unit_from) {
    case VL_MONITOR_UNIT_OUTPUT:
      vl_text_wrap_add(&w, "; ", "printed in %s, kept in %s", in.read_unit, in.unit);
      break;
    case VL_MONITOR_UNIT_NAME:
      vl_text_wrap_add(&w, "; ", "in %s, from its name", in.unit);
      break;
    case VL_MONITOR_UNIT_ASSUMED:
      vl_text_wrap_add(&w, "; ", "taken as MB: no unit printed or in its name");
      break;
    case VL_MONITOR_UNIT_NOT_MEMORY:
      vl_text_wrap_add(&w, "; ", "not memory, by its name");
      break;
    default:
      break;
    }
    last_error(&w, &in);
    vl_text_wrap_end(&w);
  }
}
