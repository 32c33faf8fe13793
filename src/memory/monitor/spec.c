/* The monitor's options: parsing and freeing the spec (monitorspec.h). */
#include "vlmload/monitorspec.h"
#include "vlmload/common.h"
#include "vlmload/procmem.h"
#include "vlmload/prom.h"

#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void vl_monitor_spec_init(vl_monitor_spec_t *spec) {
  memset(spec, 0, sizeof(*spec));
  spec->prom_timeout_ms = 2000;
  spec->cmd_timeout_ms = 10000;
  spec->rescan_ms = 1000;
  spec->anatomy_us = 5000000;
}

static int label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

/* Length of a leading "LABEL=" (without the '='), or 0. */
static size_t label_len(const char *arg) {
  size_t i = 0;
  while (label_char(arg[i]))
    i++;
  return i > 0 && arg[i] == '=' ? i : 0;
}

static int proc_label_used(const vl_monitor_spec_t *spec, const char *l) {
  for (int i = 0; i < spec->n_pids; i++) {
    if (strcmp(spec->pids[i].label, l) == 0)
      return 1;
  }
  for (int i = 0; i < spec->n_matches; i++) {
    if (strcmp(spec->matches[i].label, l) == 0)
      return 1;
  }
  for (int i = 0; i < spec->n_trees; i++) {
    if (strcmp(spec->trees[i].label, l) == 0)
      return 1;
  }
  return 0;
}

static int cmd_label_used(const vl_monitor_spec_t *spec, const char *l) {
  for (int i = 0; i < spec->n_cmds; i++) {
    if (strcmp(spec->cmds[i].label, l) == 0)
      return 1;
  }
  return 0;
}

static int prom_label_used(const vl_monitor_spec_t *spec, const char *l) {
  for (int i = 0; i < spec->n_proms; i++) {
    if (spec->proms[i].label && strcmp(spec->proms[i].label, l) == 0)
      return 1;
  }
  return 0;
}

/* A label made up by the monitor: base, or base_2, base_3... when taken. */
static char *fresh_label(const vl_monitor_spec_t *spec, const char *base,
                         int (*used)(const vl_monitor_spec_t *, const char *)) {
  char *l = vl_xstrdup(base);
  for (int k = 2; used(spec, l); k++) {
    free(l);
    l = vl_xfmt("%s_%d", base, k);
  }
  return l;
}

/* Reads the PID of "[LABEL=]PID" for the option flag; *ll gets the label's length. Returns the
 * PID, or 0 with a reason in err. */
static long parse_pid(const char *flag, const char *arg, size_t *ll, char *err, size_t errlen) {
  *ll = label_len(arg);
  const char *p = arg + (*ll ? *ll + 1 : 0);
  long v = 0;
  const char *q = p;
  while (*q >= '0' && *q <= '9' && v <= INT_MAX)
    v = v * 10 + (*q++ - '0');
  if (q == p || *q != '\0' || v <= 0 || v > INT_MAX) {
    vl_set_err(err, errlen, "%s %s: \"%s\" is not a process ID (want [LABEL=]PID)", flag, arg, p);
    return 0;
  }
  return v;
}

int vl_monitor_spec_add_pid(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen) {
  size_t ll;
  long v = parse_pid("--monitor-pid", arg, &ll, err, errlen);
  if (!v)
    return VL_EINVAL;
  char *label = ll ? vl_xstrndup(arg, ll) : vl_xfmt("%ld", v);
  if (proc_label_used(spec, label)) {
    vl_set_err(err, errlen, "--monitor-pid %s: label \"%s\" is already used by another process",
               arg, label);
    free(label);
    return VL_EINVAL;
  }
  spec->pids = vl_xrealloc(spec->pids, (size_t)(spec->n_pids + 1) * sizeof(*spec->pids));
  spec->pids[spec->n_pids++] = (vl_monitor_pid_t){label, (pid_t)v};
  return 0;
}

int vl_monitor_spec_add_match(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen) {
  size_t ll = label_len(arg);
  const char *re = arg + (ll ? ll + 1 : 0);
  if (*re == '\0') {
    vl_set_err(err, errlen, "--monitor-pid-match %s: empty regular expression", arg);
    return VL_EINVAL;
  }
  regex_t rx;
  int rc = regcomp(&rx, re, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char why[128];
    regerror(rc, &rx, why, sizeof(why));
    vl_set_err(err, errlen, "--monitor-pid-match %s: bad regular expression: %s", arg, why);
    return VL_EINVAL;
  }
  regfree(&rx);
  char *label;
  if (ll) {
    label = vl_xstrndup(arg, ll);
    if (proc_label_used(spec, label)) {
      vl_set_err(err, errlen,
                 "--monitor-pid-match %s: label \"%s\" is already used by another process", arg,
                 label);
      free(label);
      return VL_EINVAL;
    }
  } else {
    /* The expression's letters and digits: "sglang::scheduler" gives "sglang_scheduler". */
    char base[33];
    size_t n = 0;
    for (const char *s = re; *s && n < sizeof(base) - 1; s++) {
      char c = *s;
      int keep =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
      if (keep)
        base[n++] = c;
      else if (n > 0 && base[n - 1] != '_')
        base[n++] = '_';
    }
    while (n > 0 && base[n - 1] == '_')
      n--;
    base[n] = '\0';
    if (n == 0)
      snprintf(base, sizeof(base), "match%d", spec->n_matches + 1);
    label = fresh_label(spec, base, proc_label_used);
  }
  spec->matches =
      vl_xrealloc(spec->matches, (size_t)(spec->n_matches + 1) * sizeof(*spec->matches));
  spec->matches[spec->n_matches++] = (vl_monitor_match_t){label, vl_xstrdup(re)};
  return 0;
}

int vl_monitor_spec_add_tree(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen) {
  size_t ll;
  long v = parse_pid("--monitor-tree", arg, &ll, err, errlen);
  if (!v)
    return VL_EINVAL;
  char *label;
  if (ll) {
    label = vl_xstrndup(arg, ll);
    if (proc_label_used(spec, label)) {
      vl_set_err(err, errlen, "--monitor-tree %s: label \"%s\" is already used by another process",
                 arg, label);
      free(label);
      return VL_EINVAL;
    }
  } else {
    char name[64];
    if (vl_procmem_name("/proc", (pid_t)v, name, sizeof(name)) != 0)
      snprintf(name, sizeof(name), "%ld", v);
    /* Runs of other bytes become one '_': "sglang::scheduler" gives "sglang_scheduler". */
    size_t o = 0;
    for (size_t i = 0; name[i]; i++) {
      if (label_char(name[i]))
        name[o++] = name[i];
      else if (o > 0 && name[o - 1] != '_')
        name[o++] = '_';
    }
    name[o] = '\0';
    if (o == 0)
      snprintf(name, sizeof(name), "%ld", v);
    label = fresh_label(spec, name, proc_label_used);
  }
  spec->trees = vl_xrealloc(spec->trees, (size_t)(spec->n_trees + 1) * sizeof(*spec->trees));
  spec->trees[spec->n_trees++] = (vl_monitor_tree_t){label, (pid_t)v};
  return 0;
}

int vl_monitor_spec_add_prom(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen) {
  size_t ll = label_len(arg);
  if (ll && strncasecmp(arg + ll + 1, "http://", 7) != 0 &&
      strncasecmp(arg + ll + 1, "https://", 8) != 0)
    ll = 0;
  char why[200];
  vl_prom_target_t *t = vl_xcalloc(1, sizeof(*t));
  if (vl_prom_select_parse(arg + (ll ? ll + 1 : 0), t, why, sizeof(why)) != 0) {
    vl_set_err(err, errlen, "--monitor-prom %s: %s", arg, why);
    free(t);
    return VL_EINVAL;
  }
  char *label = ll ? vl_xstrndup(arg, ll) : NULL;
  if (label && prom_label_used(spec, label)) {
    vl_set_err(err, errlen, "--monitor-prom %s: label \"%s\" is already used by another target",
               arg, label);
    free(label);
    vl_prom_target_free(t);
    free(t);
    return VL_EINVAL;
  }
  spec->proms = vl_xrealloc(spec->proms, (size_t)(spec->n_proms + 1) * sizeof(*spec->proms));
  spec->proms[spec->n_proms++] = (vl_monitor_prom_t){label, t, 0};
  return 0;
}

int vl_monitor_spec_add_cmd(vl_monitor_spec_t *spec, const char *arg, char *err, size_t errlen) {
  size_t ll = label_len(arg);
  const char *cmd = arg + (ll ? ll + 1 : 0);
  const char *s = cmd;
  while (*s == ' ' || *s == '\t')
    s++;
  if (*s == '\0') {
    vl_set_err(err, errlen, "--monitor-cmd %s: empty command", arg);
    return VL_EINVAL;
  }
  char *label;
  if (ll) {
    label = vl_xstrndup(arg, ll);
    if (cmd_label_used(spec, label)) {
      vl_set_err(err, errlen, "--monitor-cmd %s: label \"%s\" is already used by another command",
                 arg, label);
      free(label);
      return VL_EINVAL;
    }
  } else {
    char base[16];
    snprintf(base, sizeof(base), "%d", spec->n_cmds + 1);
    label = fresh_label(spec, base, cmd_label_used);
  }
  spec->cmds = vl_xrealloc(spec->cmds, (size_t)(spec->n_cmds + 1) * sizeof(*spec->cmds));
  spec->cmds[spec->n_cmds++] = (vl_monitor_cmd_t){label, vl_xstrdup(cmd)};
  return 0;
}

int vl_monitor_spec_empty(const vl_monitor_spec_t *spec) {
  return spec->n_pids == 0 && spec->n_matches == 0 && spec->n_trees == 0 && spec->n_proms == 0 &&
         spec->n_cmds == 0 && !spec->gpu;
}

void vl_monitor_spec_free(vl_monitor_spec_t *spec) {
  for (int i = 0; i < spec->n_pids; i++)
    free(spec->pids[i].label);
  for (int i = 0; i < spec->n_matches; i++) {
    free(spec->matches[i].label);
    free(spec->matches[i].regex);
  }
  for (int i = 0; i < spec->n_trees; i++)
    free(spec->trees[i].label);
  for (int i = 0; i < spec->n_proms; i++) {
    free(spec->proms[i].label);
    vl_prom_target_free(spec->proms[i].target);
    free(spec->proms[i].target);
  }
  for (int i = 0; i < spec->n_cmds; i++) {
    free(spec->cmds[i].label);
    free(spec->cmds[i].cmd);
  }
  free(spec->pids);
  free(spec->matches);
  free(spec->trees);
  free(spec->proms);
  free(spec->cmds);
  uint64_t pt = spec->prom_timeout_ms, ct = spec->cmd_timeout_ms, rs = spec->rescan_ms;
  uint64_t an = spec->anatomy_us;
  memset(spec, 0, sizeof(*spec));
  spec->prom_timeout_ms = pt;
  spec->cmd_timeout_ms = ct;
  spec->rescan_ms = rs;
  spec->anatomy_us = an;
}
