/* The process trees of --monitor-tree: a root and its descendants, found in /proc, each read
 * under a series named by its command name (internal.h). Runs on the monitor's worker thread. */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/nvml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB       1048576.0
#define SCAN_MAX (4 * VL__TREE_MAX) /* descendants listed per search; more are counted */

int vl__tree_slot(vl__tree_t *t, const char *base) {
  int same = 0;
  for (int i = 0; i < t->n_slots; i++) {
    if (strcmp(t->slots[i].base, base) != 0)
      continue;
    if (t->slots[i].holder < 0)
      return i;
    same++;
  }
  if (t->n_slots == VL__TREE_MAX)
    return -1;
  vl__tree_slot_t *s = &t->slots[t->n_slots];
  memset(s, 0, sizeof(*s));
  snprintf(s->base, sizeof(s->base), "%s", base);
  if (same == 0)
    snprintf(s->name, sizeof(s->name), "%s", base);
  else
    snprintf(s->name, sizeof(s->name), "%.50s#%d", base, same + 1);
  s->holder = -1;
  return t->n_slots++;
}

/* Adds a process just found; returns its index in procs, or -1 when it is gone or past the cap. */
static int add_proc(vl__tree_t *t, pid_t pid, uint64_t start) {
  char name[64];
  if (vl_procmem_name("/proc", pid, name, sizeof(name)) != 0)
    return -1; /* gone already */
  int p = t->n_procs < VL__TREE_MAX ? t->n_procs : -1;
  if (p < 0) {
    /* Full: the record of the process gone longest ago makes room. */
    for (int i = 1; i < t->n_procs; i++) {
      if (!t->procs[i].live && (p < 0 || t->procs[i].last_ms < t->procs[p].last_ms))
        p = i;
    }
    if (p < 0)
      return -1;
  }
  int s = vl__tree_slot(t, name);
  if (s < 0)
    return -1;
  if (p == t->n_procs)
    t->n_procs++;
  else
    t->forgotten++;
  t->procs[p] = (vl__tree_proc_t){.pid = pid, .start_time = start, .slot = s, .live = 1};
  t->slots[s].holder = p;
  return p;
}

static void drop(vl__tree_t *t, int p) {
  vl__tree_proc_t *pr = &t->procs[p];
  if (!pr->live)
    return;
  pr->live = 0;
  if (pr->slot >= 0 && t->slots[pr->slot].holder == p)
    t->slots[pr->slot].holder = -1;
}

int vl__tree_init(vl__tree_t *t, const char *label, pid_t root, unsigned flags,
                  uint64_t rescan_ns) {
  memset(t, 0, sizeof(*t));
  t->label = label;
  t->root = root;
  t->flags = flags;
  t->rescan_ns = rescan_ns;
  if (vl_procmem_start_time(root, &t->root_start) != 0)
    return VL_ENOENT;
  if (add_proc(t, root, t->root_start) != 0)
    return VL_ENOENT;
  t->root_live = 1;
  return 0;
}

void vl__tree_free(vl__tree_t *t) {
  free(t->kin);
  t->kin = NULL;
  t->kin_cap = 0;
}

static int by_start(const void *a, const void *b) {
  const vl_procmem_kin_t *x = a, *y = b;
  if (x->start_time != y->start_time)
    return x->start_time < y->start_time ? -1 : 1;
  return (x->pid > y->pid) - (x->pid < y->pid);
}

static int by_pid(const void *a, const void *b) {
  pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
  return (x > y) - (x < y);
}

/* The entry of pid in kin, sorted by PID, or NULL. */
static const vl_procmem_kin_t *kin_of(const vl__tree_t *t, int n, pid_t pid) {
  vl_procmem_kin_t key = {.pid = pid};
  return bsearch(&key, t->kin, (size_t)n, sizeof(*t->kin), by_pid);
}

/* Lists the descendants again: the ones no longer under the root are dropped, the new ones added
 * in the order they started. */
static void search(vl__tree_t *t) {
  int n = vl_procmem_list("/proc", &t->kin, &t->kin_cap);
  qsort(t->kin, (size_t)n, sizeof(*t->kin), by_pid); /* pid is the struct's first member */
  pid_t desc[SCAN_MAX];
  int nd = vl_procmem_descendants(t->kin, n, t->root, desc, SCAN_MAX);
  int listed = VL_MIN(nd, SCAN_MAX);
  qsort(desc, (size_t)listed, sizeof(*desc), by_pid);
  for (int p = 1; p < t->n_procs; p++) {
    vl__tree_proc_t *pr = &t->procs[p];
    if (!pr->live)
      continue;
    const vl_procmem_kin_t *k = kin_of(t, n, pr->pid);
    int under = bsearch(&pr->pid, desc, (size_t)listed, sizeof(*desc), by_pid) != NULL;
    if (!k || k->start_time != pr->start_time || !under)
      drop(t, p); /* exited, or left the tree (its parent exited and it was re-parented) */
  }
  vl_procmem_kin_t fresh[SCAN_MAX];
  int nf = 0;
  for (int i = 0; i < listed; i++) {
    const vl_procmem_kin_t *k = kin_of(t, n, desc[i]);
    if (!k)
      continue;
    int known = 0;
    for (int p = 1; p < t->n_procs && !known; p++)
      known =
          t->procs[p].live && t->procs[p].pid == k->pid && t->procs[p].start_time == k->start_time;
    if (!known)
      fresh[nf++] = *k;
  }
  qsort(fresh, (size_t)nf, sizeof(*fresh), by_start);
  int left = nd - listed;
  for (int i = 0; i < nf; i++) {
    uint64_t st;
    if (add_proc(t, fresh[i].pid, fresh[i].start_time) < 0 &&
        vl_procmem_start_time(fresh[i].pid, &st) == 0)
      left++;
  }
  t->untracked = left;
  if (left > 0)
    t->capped = 1;
}

void vl__tree_round(vl__tree_t *t, int with_gpu, const vl__tree_gpu_t *gpu, size_t n, int gpu_ok) {
  for (int s = 0; s < t->n_slots; s++) {
    vl__tree_slot_t *sl = &t->slots[s];
    sl->valid = sl->pss_valid = sl->gpu_valid = sl->kinds_valid = 0;
    sl->rss = sl->hwm = sl->pss = sl->gpu = sl->anon = sl->file = sl->shmem = 0;
  }
  t->rss = t->hwm = t->pss = t->gpu = t->anon = t->file = t->shmem = 0;
  t->valid = t->pss_valid = t->gpu_valid = t->kinds_valid = 0;
  if (t->root_live) {
    uint64_t now = vl_now_ns();
    if (!t->last_scan_ns || now - t->last_scan_ns >= t->rescan_ns) {
      t->last_scan_ns = now;
      search(t);
    }
  }
  int all_pss = 1, all_kinds = 1;
  for (int p = 0; p < t->n_procs; p++) {
    vl__tree_proc_t *pr = &t->procs[p];
    if (!pr->live)
      continue;
    vl_procmem_t m;
    int rc = vl_procmem_read(pr->pid, pr->start_time, t->flags, &m);
    if (rc == VL_ENOENT) {
      drop(t, p);
      if (p == 0) {
        /* The root is gone: its descendants are no longer a tree to follow. */
        t->root_live = 0;
        for (int q = 1; q < t->n_procs; q++)
          drop(t, q);
        break;
      }
      continue;
    }
    if (rc != 0)
      continue; /* a passing failure: missing this round only */
    int64_t now = vl_wall_ms();
    if (!pr->first_ms)
      pr->first_ms = now;
    pr->last_ms = now;
    vl__tree_slot_t *s = &t->slots[pr->slot];
    s->rss = (double)m.rss_bytes / MB;
    s->hwm = (double)m.hwm_bytes / MB;
    s->pss = (double)m.pss_bytes / MB;
    s->anon = (double)m.anon_bytes / MB;
    s->file = (double)m.file_bytes / MB;
    s->shmem = (double)m.shmem_bytes / MB;
    s->valid = 1;
    s->pss_valid = m.has_pss;
    s->kinds_valid = m.has_kinds;
    if (!m.has_pss)
      all_pss = 0;
    if (!m.has_kinds)
      all_kinds = 0;
  }
  if (!t->root_live) {
    t->t = vl_wall_ms();
    return;
  }
  for (int s = 0; s < t->n_slots; s++) {
    vl__tree_slot_t *sl = &t->slots[s];
    if (!sl->valid)
      continue;
    t->rss += sl->rss;
    t->hwm += sl->hwm;
    t->pss += sl->pss;
    t->anon += sl->anon;
    t->file += sl->file;
    t->shmem += sl->shmem;
  }
  t->valid = 1;
  t->pss_valid = all_pss && (t->flags & VL_PROCMEM_PSS);
  t->kinds_valid = all_kinds;
  if (with_gpu) {
    int known = gpu_ok;
    for (int s = 0; s < t->n_slots; s++) {
      vl__tree_slot_t *sl = &t->slots[s];
      if (!sl->valid)
        continue;
      int ok = gpu_ok;
      for (size_t j = 0; j < n && ok; j++) {
        if ((pid_t)gpu[j].pid != t->procs[sl->holder].pid)
          continue;
        if (gpu[j].used_bytes == VL_NVML_UNKNOWN)
          ok = 0;
        else
          sl->gpu += (double)gpu[j].used_bytes / MB;
      }
      sl->gpu_valid = ok;
      if (!ok)
        known = 0;
      t->gpu += ok ? sl->gpu : 0;
    }
    t->gpu_valid = known;
  }
  t->t = vl_wall_ms();
}
