/* The memory and process tables of the summaries, JSON and text (summary.h). */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void vl_summary_mem_add(vl_summary_mem_t *m, double v) {
  if (m->n++ == 0)
    m->first = m->min = m->max = v;
  m->last = v;
  m->min = VL_MIN(m->min, v);
  m->max = VL_MAX(m->max, v);
}

cJSON *vl_summary_memory_json(const vl_summary_mem_t *mem, size_t n, const vl_monitor_t *mon) {
  cJSON *arr = cJSON_CreateArray();
  for (size_t i = 0; i < n; i++) {
    const vl_monitor_series_t *sr = vl_monitor_series(mon, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sr->name);
    cJSON_AddStringToObject(o, "unit", sr->unit);
    cJSON_AddNumberToObject(o, "samples", (double)mem[i].n);
    if (mem[i].n) {
      cJSON_AddNumberToObject(o, "first", mem[i].first);
      cJSON_AddNumberToObject(o, "last", mem[i].last);
      cJSON_AddNumberToObject(o, "min", mem[i].min);
      cJSON_AddNumberToObject(o, "max", mem[i].max);
      cJSON_AddNumberToObject(o, "change", mem[i].last - mem[i].first);
    }
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

/* The regular expression of process target i when it is a --monitor-pid-match, else NULL. */
static const char *match_regex(const vl_config_t *c, int i) {
  const vl_monitor_spec_t *spec = &c->monitor;
  return i >= spec->n_pids && i < spec->n_pids + spec->n_matches
             ? spec->matches[i - spec->n_pids].regex
             : NULL;
}

/* The processes followed: which process each target found, or that a match never found one. */
cJSON *vl_summary_processes_json(const vl_config_t *c, const vl_monitor_t *mon) {
  cJSON *arr = cJSON_CreateArray();
  vl_monitor_proc_info_t info;
  for (int i = 0; vl_monitor_proc_info(mon, i, &info) == 0; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "label", info.label);
    if (match_regex(c, i))
      cJSON_AddStringToObject(o, "match", match_regex(c, i));
    if (info.pid)
      cJSON_AddNumberToObject(o, "pid", (double)info.pid);
    else
      cJSON_AddNullToObject(o, "pid");
    cJSON_AddBoolToObject(o, "matched", info.pid != 0);
    cJSON_AddBoolToObject(o, "present", info.present);
    cJSON_AddNumberToObject(o, "restarts", (double)info.restarts);
    cJSON_AddItemToArray(arr, o);
  }
  /* Each --monitor-tree: its root and every process seen under it. */
  vl_monitor_tree_info_t ti;
  for (int i = 0; vl_monitor_tree_info(mon, i, &ti) == 0; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "label", ti.label);
    cJSON_AddStringToObject(o, "tree", ti.label);
    cJSON_AddNumberToObject(o, "pid", (double)ti.pid);
    cJSON_AddBoolToObject(o, "present", ti.present);
    cJSON_AddBoolToObject(o, "capped", ti.capped);
    cJSON_AddNumberToObject(o, "untracked", ti.untracked);
    cJSON_AddNumberToObject(o, "forgotten", (double)ti.forgotten);
    cJSON *ps = cJSON_AddArrayToObject(o, "processes");
    vl_monitor_tree_proc_t tp;
    for (int j = 0; vl_monitor_tree_proc(mon, i, j, &tp) == 0; j++) {
      cJSON *q = cJSON_CreateObject();
      cJSON_AddNumberToObject(q, "pid", (double)tp.pid);
      cJSON_AddStringToObject(q, "name", tp.name);
      cJSON_AddBoolToObject(q, "present", tp.present);
      if (tp.first_ms) {
        cJSON_AddNumberToObject(q, "first_seen_ms", (double)tp.first_ms);
        cJSON_AddNumberToObject(q, "last_seen_ms", (double)tp.last_ms);
      } else {
        cJSON_AddNullToObject(q, "first_seen_ms");
        cJSON_AddNullToObject(q, "last_seen_ms");
      }
      cJSON_AddItemToArray(ps, q);
    }
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static void print_processes(FILE *f, const vl_config_t *c, const vl_monitor_t *mon) {
  vl_monitor_proc_info_t info;
  for (int i = 0; vl_monitor_proc_info(mon, i, &info) == 0; i++) {
    if (i == 0)
      fputc('\n', f);
    if (!info.pid && strcmp(info.label, match_regex(c, i)) == 0)
      fprintf(f, "  process    never matched: --monitor-pid-match '%.60s'\n", info.label);
    else if (!info.pid)
      fprintf(f, "  process    %.30s: never matched (--monitor-pid-match '%.40s')\n", info.label,
              match_regex(c, i));
    else
      fprintf(f, "  process    %.40s: pid %ld%s%s\n", info.label, (long)info.pid,
              info.present ? "" : " (gone at the end)", info.restarts ? ", restarted" : "");
  }
  vl_monitor_tree_info_t ti;
  for (int i = 0; vl_monitor_tree_info(mon, i, &ti) == 0; i++) {
    int live = 0;
    vl_monitor_tree_proc_t tp;
    for (int j = 0; vl_monitor_tree_proc(mon, i, j, &tp) == 0; j++)
      live += tp.present;
    fprintf(f, "%s  tree       %.40s: pid %ld%s, %d processes seen, %d alive at the end%s\n",
            i == 0 && vl_monitor_proc_info(mon, 0, &info) != 0 ? "\n" : "", ti.label, (long)ti.pid,
            ti.present ? "" : " (gone at the end)", ti.n_procs, live,
            ti.capped ? " (capped: some left out)" : "");
  }
}

void vl_summary_print_memory(FILE *f, const vl_config_t *c, const vl_summary_mem_t *mem, size_t n,
                             const vl_monitor_t *mon) {
  print_processes(f, c, mon);
  vl_monitor_proc_info_t pi;
  vl_monitor_tree_info_t ti;
  vl_monitor_print_parts(
      mon, f, vl_monitor_proc_info(mon, 0, &pi) != 0 && vl_monitor_tree_info(mon, 0, &ti) != 0);
  if (!n)
    return;
  fprintf(f, "\n  %-32s %10s %10s %10s %10s\n", "memory", "first", "last", "max", "change");
  for (size_t i = 0; i < n; i++) {
    const vl_monitor_series_t *sr = vl_monitor_series(mon, i);
    if (!mem[i].n) {
      fprintf(f, "  %-32.32s %10s\n", sr->name, "no sample");
      continue;
    }
    /* Memory in MB whatever its unit; a series that is not memory as it reads. */
    double k = sr->mb;
    if (k > 0)
      fprintf(f, "  %-32.32s %10.1f %10.1f %10.1f %+10.1f MB\n", sr->name, mem[i].first * k,
              mem[i].last * k, mem[i].max * k, (mem[i].last - mem[i].first) * k);
    else
      fprintf(f, "  %-32.32s %10.4g %10.4g %10.4g %+10.4g (not memory)\n", sr->name, mem[i].first,
              mem[i].last, mem[i].max, mem[i].last - mem[i].first);
  }
}
