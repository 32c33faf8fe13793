/* The memory and process tables of the summaries, JSON and text (summary.h). */
#include "internal.h"
#include "vlmload/counters.h"

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
  size_t shown = 0;
  for (size_t i = 0; i < n; i++)
    shown += !vl_counters_is(vl_monitor_series(mon, i)->name);
  if (shown)
    fprintf(f, "\n  %-32s %10s %10s %10s %10s\n", "memory", "first", "last", "max", "change");
  for (size_t i = 0; i < n; i++) {
    const vl_monitor_series_t *sr = vl_monitor_series(mon, i);
    if (vl_counters_is(sr->name))
      continue; /* the server's counters have a table of their own */
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

/* The change of the server's counter i (prom.server.NAME) over the run, and its first and last
 * samples; NaN when it has none. */
static double change_of(const vl_summary_mem_t *m) {
  return m->n ? m->last - m->first : NAN;
}

cJSON *vl_summary_counters_json(const vl_summary_mem_t *mem, size_t n, const vl_monitor_t *mon) {
  cJSON *arr = cJSON_CreateArray();
  for (size_t i = 0; mon && i < n; i++) {
    const vl_monitor_series_t *sr = vl_monitor_series(mon, i);
    if (!vl_counters_is(sr->name))
      continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sr->name + strlen(VL_COUNTERS_PREFIX));
    cJSON_AddStringToObject(o, "series", sr->name);
    cJSON_AddNumberToObject(o, "samples", (double)mem[i].n);
    vl__summary_num(o, "first", mem[i].n ? mem[i].first : NAN);
    vl__summary_num(o, "last", mem[i].n ? mem[i].last : NAN);
    vl__summary_num(o, "change", change_of(&mem[i]));
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

void vl_summary_hit_share(const vl_summary_mem_t *mem, size_t n, const vl_monitor_t *mon,
                          double *hits, double *queries) {
  *hits = *queries = NAN;
  for (size_t i = 0; mon && i < n; i++) {
    const char *name = vl_monitor_series(mon, i)->name;
    if (!vl_counters_is(name))
      continue;
    name += strlen(VL_COUNTERS_PREFIX);
    if (strncmp(name, "vllm:mm_cache_hits", 18) == 0)
      *hits = change_of(&mem[i]);
    else if (strncmp(name, "vllm:mm_cache_queries", 21) == 0)
      *queries = change_of(&mem[i]);
  }
}

void vl_summary_print_counters(FILE *f, const vl_stats_t *s, const vl_summary_mem_t *mem, size_t n,
                               const vl_monitor_t *mon) {
  size_t shown = 0;
  for (size_t i = 0; i < n; i++) {
    const vl_monitor_series_t *sr = vl_monitor_series(mon, i);
    if (!vl_counters_is(sr->name))
      continue;
    if (!shown++)
      fprintf(f, "\n  %-32s %10s %10s %10s\n", "server counters", "first", "last", "change");
    if (!mem[i].n)
      fprintf(f, "  %-32.32s %10s\n", sr->name + strlen(VL_COUNTERS_PREFIX), "no sample");
    else
      fprintf(f, "  %-32.32s %10.6g %10.6g %+10.6g\n", sr->name + strlen(VL_COUNTERS_PREFIX),
              mem[i].first, mem[i].last, mem[i].last - mem[i].first);
  }
  double hits, queries;
  vl_summary_hit_share(mem, n, mon, &hits, &queries);
  if (s->images_repeated && queries > 0)
    fprintf(f,
            "  image reuse: vlmload sent %.1f%% of its images again;\n"
            "               the server counted %.1f%% as cache hits (%.0f of %.0f)\n",
            s->images_sent ? 100.0 * (double)s->images_repeated / (double)s->images_sent : 0,
            100.0 * hits / queries, hits, queries);
}
