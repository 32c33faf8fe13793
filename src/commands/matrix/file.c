/* `vlmload matrix`: the file's format and its checks (the shared defaults and server, the cells),
 * and each cell's configuration: its options merged, substituted and written to config.json, and
 * the argv of the vlmload that runs its load. */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/config.h"
#include "vlmload/json.h"
#include "vlmload/outfile.h"
#include "vlmload/units.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_READY_US (60ull * 1000000) /* a server's time to become ready */
#define DEFAULT_STOP_US  (10ull * 1000000) /* SIGTERM to SIGKILL */

char *vl__matrixfile_subst(const vl__matrix_cell_t *c, const char *s) {
  char port[16];
  snprintf(port, sizeof(port), "%d", c->port);
  const struct {
    const char *key, *val;
  } keys[] = {{"{port}", port},
              {"{url}", c->url},
              {"{cell}", c->dir},
              {"{vlmmock}", c->m->vlmmock},
              {"{vlmload}", c->m->exe}};
  size_t cap = strlen(s) + 1, len = 0;
  char *out = vl_xmalloc(cap);
  while (*s) {
    size_t k = 0, skip = 1, n = 1;
    for (; k < VL_ARRAY_SIZE(keys); k++)
      if (strncmp(s, keys[k].key, strlen(keys[k].key)) == 0)
        break;
    const char *piece = s;
    char name[256];
    const char *end = strncmp(s, "{env:", 5) == 0 ? strchr(s, '}') : NULL;
    if (k < VL_ARRAY_SIZE(keys)) {
      piece = keys[k].val;
      n = strlen(piece);
      skip = strlen(keys[k].key);
    } else if (end && (size_t)(end - s - 5) < sizeof(name)) {
      /* {env:NAME} or {env:NAME:-DEFAULT}: the environment's NAME, else DEFAULT (or nothing). */
      size_t m = (size_t)(end - s - 5);
      memcpy(name, s + 5, m);
      name[m] = '\0';
      char *dflt = strstr(name, ":-");
      if (dflt) {
        *dflt = '\0';
        dflt += 2;
      }
      const char *v = getenv(name);
      piece = v && *v ? v : dflt ? dflt : "";
      n = strlen(piece);
      skip = (size_t)(end - s) + 1;
    }
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      out = vl_xrealloc(out, cap);
    }
    memcpy(out + len, piece, n);
    len += n;
    s += skip;
  }
  out[len] = '\0';
  return out;
}

static void subst_tree(const vl__matrix_cell_t *c, cJSON *item) {
  for (; item; item = item->next) {
    if (cJSON_IsString(item)) {
      char *v = vl__matrixfile_subst(c, item->valuestring);
      cJSON_SetValuestring(item, v);
      free(v);
    } else if (cJSON_IsArray(item) || cJSON_IsObject(item)) {
      subst_tree(c, item->child);
    }
  }
}

/* Options the matrix sets for every cell itself: the file may not give them. */
static const char *const reserved[] = {"output", "timeline", "plot", "report", "analyze"};

/* A duration of the file, a string with its unit ("60s"), more than 0. Returns 0, or VL_EINVAL
 * with why: a number's unit would be a guess. */
static int parse_duration(const cJSON *v, uint64_t *us, char *why, size_t whylen) {
  char num[64];
  const char *text = cJSON_IsString(v) ? v->valuestring : NULL;
  if (cJSON_IsNumber(v)) {
    snprintf(num, sizeof(num), "%.17g", v->valuedouble);
    text = num;
  }
  if (!text) {
    snprintf(why, whylen, "want a duration with its unit, as \"60s\"");
    return VL_EINVAL;
  }
  if (vl_units_duration(text, us) != 0) {
    vl_units_duration_why(text, why, whylen);
    return VL_EINVAL;
  }
  if (*us == 0) {
    snprintf(why, whylen, "must be more than 0");
    return VL_EINVAL;
  }
  return 0;
}

/* Says that key is not one of keys (NULL-terminated) in the object where and what name, with the
 * nearest key when one is near. */
static void unknown_key(const char *where, const char *what, const char *key,
                        const char *const *keys) {
  char want[160];
  size_t used = 0;
  for (const char *const *k = keys; *k && used < sizeof(want); k++)
    used += (size_t)snprintf(want + used, sizeof(want) - used, "%s%s", k == keys ? "" : ", ", *k);
  const char *near = vl_config_nearest_word(key, keys);
  if (near)
    vl__matrix_say("%s: %sunknown key \"%s\"; did you mean \"%s\"? (want %s)", where, what, key,
                   near, want);
  else
    vl__matrix_say("%s: %sunknown key \"%s\" (want %s)", where, what, key, want);
}

/* Reads a server object (where names it in errors) over base (the shared server's, or NULL for
 * the defaults). Returns 0 or 2 after saying why. */
static int read_server(const cJSON *o, const char *where, const vl__matrix_server_t *base,
                       vl__matrix_server_t *s) {
  if (base && base->command) {
    *s = *base;
  } else {
    memset(s, 0, sizeof(*s));
    s->health = "/health";
    s->ready_us = DEFAULT_READY_US;
    s->stop_us = DEFAULT_STOP_US;
    s->monitor = 1;
  }
  if (!cJSON_IsObject(o)) {
    vl__matrix_say("%s: \"server\" must be an object (or null for none)", where);
    return 2;
  }
  for (const cJSON *k = o->child; k; k = k->next) {
    if (strcmp(k->string, "command") == 0) {
      const cJSON *a;
      int ok = cJSON_IsArray(k) && cJSON_GetArraySize(k) > 0;
      cJSON_ArrayForEach(a, k) ok = ok && cJSON_IsString(a) && a->valuestring[0];
      if (!ok) {
        vl__matrix_say("%s: server \"command\" must be a list of strings, the program first",
                       where);
        return 2;
      }
      s->command = k;
    } else if (strcmp(k->string, "args") == 0) {
      const cJSON *a;
      int ok = cJSON_IsArray(k);
      cJSON_ArrayForEach(a, k) ok = ok && cJSON_IsString(a);
      if (!ok) {
        vl__matrix_say("%s: server \"args\" must be a list of strings, added after the command",
                       where);
        return 2;
      }
      s->args = k;
    } else if (strcmp(k->string, "health") == 0) {
      if (!cJSON_IsString(k) || k->valuestring[0] != '/') {
        vl__matrix_say("%s: server \"health\" must be a route starting with / (as \"/health\")",
                       where);
        return 2;
      }
      s->health = k->valuestring;
    } else if (strcmp(k->string, "ready_timeout") == 0 || strcmp(k->string, "stop_timeout") == 0) {
      uint64_t *dst = k->string[1] == 'e' ? &s->ready_us : &s->stop_us;
      char why[160];
      if (parse_duration(k, dst, why, sizeof(why)) != 0) {
        vl__matrix_say("%s: server \"%s\": %s", where, k->string, why);
        return 2;
      }
    } else if (strcmp(k->string, "port") == 0) {
      if (!cJSON_IsNumber(k) || k->valuedouble < 1 || k->valuedouble > 65535 ||
          k->valuedouble != floor(k->valuedouble)) {
        vl__matrix_say("%s: server \"port\" must be a port number (1 to 65535)", where);
        return 2;
      }
      s->port = k->valueint;
    } else if (strcmp(k->string, "monitor") == 0) {
      if (!cJSON_IsBool(k)) {
        vl__matrix_say("%s: server \"monitor\" must be true or false", where);
        return 2;
      }
      s->monitor = cJSON_IsTrue(k);
    } else {
      static const char *const keys[] = {"command",      "args", "health",  "ready_timeout",
                                         "stop_timeout", "port", "monitor", NULL};
      unknown_key(where, "server: ", k->string, keys);
      return 2;
    }
  }
  if (!s->command) {
    vl__matrix_say("%s: server: no \"command\" (the server's argv, as [\"{vlmmock}\", \"--port\", "
                   "\"{port}\"])",
                   where);
    return 2;
  }
  int has_port = 0;
  const cJSON *a;
  cJSON_ArrayForEach(a, s->command) has_port |= strstr(a->valuestring, "{port}") != NULL;
  cJSON_ArrayForEach(a, s->args) has_port |= strstr(a->valuestring, "{port}") != NULL;
  if (!has_port && !s->port) {
    vl__matrix_say(
        "%s: server \"command\" has no {port}: give the server the port the matrix picks, or "
        "name a fixed one with \"port\"",
        where);
    return 2;
  }
  return 0;
}

static int valid_name(const char *s) {
  if (!*s || strlen(s) > 64 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
    return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '.' || *s == '_' || *s == '-'))
      return 0;
  return 1;
}

static int read_cell(vl__matrix_t *m, vl__matrix_cell_t *c, const cJSON *cj, int first,
                     const cJSON *defaults, int has_server, const vl__matrix_server_t *sharedp,
                     char *where);

/* Reads the file's cells into m. Returns 0 or 2 after saying why. */
int vl__matrixfile_read(vl__matrix_t *m) {
  const char *path = m->file_path;
  char why[160];
  m->file = vl_json_read_file(path, why, sizeof(why));
  if (!m->file) {
    vl__matrix_say("'%s': %s", path, why);
    return 2;
  }
  if (!cJSON_IsObject(m->file)) {
    vl__matrix_say("'%s': not a JSON object (want defaults, server and cells; see --help)", path);
    return 2;
  }
  const cJSON *defaults = NULL, *server = NULL, *cells = NULL;
  int has_server = 0;
  for (const cJSON *k = m->file->child; k; k = k->next) {
    if (strcmp(k->string, "defaults") == 0) {
      defaults = k;
    } else if (strcmp(k->string, "server") == 0) {
      server = k;
      has_server = 1;
    } else if (strcmp(k->string, "cells") == 0) {
      cells = k;
    } else {
      static const char *const keys[] = {"defaults", "server", "cells", NULL};
      char where[PATH_MAX + 8];
      snprintf(where, sizeof(where), "'%s'", path);
      unknown_key(where, "", k->string, keys);
      return 2;
    }
  }
  if (defaults && !cJSON_IsObject(defaults)) {
    vl__matrix_say("'%s': \"defaults\" must be an object of vlmload options", path);
    return 2;
  }
  if (!cJSON_IsArray(cells) || cJSON_GetArraySize(cells) == 0) {
    vl__matrix_say("'%s': \"cells\" must be a list of at least one cell (see --help)", path);
    return 2;
  }
  vl__matrix_server_t shared = {0};
  char where[512];
  snprintf(where, sizeof(where), "'%s'", path);
  if (has_server && !cJSON_IsNull(server) && read_server(server, where, NULL, &shared) != 0)
    return 2;
  has_server = has_server && !cJSON_IsNull(server);
  /* A cell with "repeat": N is N cells, BASE/run1 to BASE/runN, each run on its own. */
  const cJSON *cj;
  int total = 0, ordinal = 0;
  cJSON_ArrayForEach(cj, cells) {
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(cj, "repeat");
    ordinal++;
    if (rep &&
        (!cJSON_IsNumber(rep) || rep->valuedouble < 1 || rep->valuedouble > VL__MATRIX_REPEAT_MAX ||
         rep->valuedouble != floor(rep->valuedouble))) {
      vl__matrix_say("'%s': cell %d: \"repeat\" must be a whole number of runs, 1 to %d", path,
                     ordinal, VL__MATRIX_REPEAT_MAX);
      return 2;
    }
    total += rep ? rep->valueint : 1;
  }
  m->n = total;
  m->cells = vl_xcalloc((size_t)m->n, sizeof(vl__matrix_cell_t));
  int i = 0;
  ordinal = 0;
  cJSON_ArrayForEach(cj, cells) {
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(cj, "repeat");
    int reps = rep ? rep->valueint : 0, first = i;
    for (int r = 0; r < (reps ? reps : 1); r++, i++) {
      vl__matrix_cell_t *c = &m->cells[i];
      if (r > 0) { /* the first's reading, with a name and a folder of its own */
        *c = m->cells[first];
        c->index = i;
      } else {
        c->m = m;
        c->index = i;
        c->status = "not run";
        snprintf(where, sizeof(where), "'%s': cell %d", path, ++ordinal);
        if (read_cell(m, c, cj, first, defaults, has_server, &shared, where) != 0)
          return 2;
      }
      c->reps = reps;
      c->rep = reps ? r + 1 : 0;
      if (reps) {
        snprintf(c->own_name, sizeof(c->own_name), "%s/run%d", c->base, r + 1);
        c->name = c->own_name;
      }
    }
  }
  return 0;
}

/* Reads the cell object cj (where names it in errors) into c; first is its index among the cells
 * read so far. Returns 0 or 2 after saying why. */
static int read_cell(vl__matrix_t *m, vl__matrix_cell_t *c, const cJSON *cj, int first,
                     const cJSON *defaults, int has_server, const vl__matrix_server_t *sharedp,
                     char *where) {
  const char *path = m->file_path;
  vl__matrix_server_t shared = *sharedp;
  {
    if (!cJSON_IsObject(cj)) {
      vl__matrix_say("%s: must be an object with a name and options", where);
      return 2;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cj, "name");
    if (!cJSON_IsString(name) || !valid_name(name->valuestring)) {
      vl__matrix_say(
          "%s: \"name\" must be 1 to 64 letters, digits, '.', '_' or '-' (it names the cell's "
          "folder)",
          where);
      return 2;
    }
    c->name = c->base = name->valuestring;
    for (int k = 0, ordinal = 0; k < first; k++) {
      ordinal += m->cells[k].rep <= 1; /* the file's cells, a repeated one counted once */
      if (strcmp(m->cells[k].base, c->base) == 0) {
        vl__matrix_say("%s: the name \"%s\" is cell %d's already", where, c->base, ordinal);
        return 2;
      }
    }
    snprintf(where, 512, "'%s': cell '%s'", path, c->name);
    c->has_server = has_server;
    c->srv = shared;
    for (const cJSON *k = cj->child; k; k = k->next) {
      if (strcmp(k->string, "name") == 0 || strcmp(k->string, "repeat") == 0)
        continue;
      if (strcmp(k->string, "options") == 0) {
        if (!cJSON_IsObject(k)) {
          vl__matrix_say("%s: \"options\" must be an object of vlmload options", where);
          return 2;
        }
        c->given = k;
      } else if (strcmp(k->string, "server") == 0) {
        c->has_server = !cJSON_IsNull(k);
        if (c->has_server && read_server(k, where, &shared, &c->srv) != 0)
          return 2;
      } else {
        static const char *const keys[] = {"name", "options", "server", "repeat", NULL};
        unknown_key(where, "", k->string, keys);
        return 2;
      }
    }
    const cJSON *objs[2] = {defaults, c->given};
    for (int o = 0; o < 2; o++)
      for (size_t r = 0; r < VL_ARRAY_SIZE(reserved); r++)
        if (cJSON_GetObjectItemCaseSensitive(objs[o], reserved[r])) {
          vl__matrix_say(
              "%s: \"%s\" is the matrix's to set (each cell writes into DIR/CELL/); drop it",
              o ? where : path, reserved[r]);
          return 2;
        }
    if (c->has_server && !m->url)
      for (int o = 0; o < 2; o++)
        if (cJSON_GetObjectItemCaseSensitive(objs[o], "url")) {
          vl__matrix_say("%s: \"url\" beside a server: the cell loads the server it starts "
                         "(http://127.0.0.1:{port}); drop one",
                         o ? where : path);
          return 2;
        }
    if (m->url)
      c->has_server = 0;
  }
  return 0;
}

int vl__matrixfile_prepare(vl__matrix_cell_t *c, long pid, char *why, size_t whylen) {
  vl__matrix_t *m = c->m;
  const cJSON *defaults = cJSON_GetObjectItemCaseSensitive(m->file, "defaults");
  cJSON_Delete(c->options);
  c->options = defaults ? cJSON_Duplicate(defaults, 1) : cJSON_CreateObject();
  for (const cJSON *k = c->given ? c->given->child : NULL; k; k = k->next) {
    cJSON_DeleteItemFromObjectCaseSensitive(c->options, k->string);
    cJSON_AddItemToObject(c->options, k->string, cJSON_Duplicate(k, 1));
  }
  subst_tree(c, c->options->child);
  vl_config_rebase_paths(c->options, m->file_dir);
  char path[PATH_MAX + 64];
  vl__matrix_cell_path(c, path, sizeof(path), "config.json");
  char *text = cJSON_Print(c->options);
  int rc = vl_outfile_write_text(path, text, why, whylen);
  free(text);
  if (rc != 0)
    return VL_EIO;

  vl__matrix_argv_free(c->load_argv);
  c->load_argv = NULL;
  int n = 0;
  vl__matrix_argv_push(&c->load_argv, &n, m->exe);
  vl__matrix_argv_push(&c->load_argv, &n, "--config");
  vl__matrix_argv_push(&c->load_argv, &n, path);
  const char *outs[][2] = {{"--output", "summary.json"}, {"--timeline", "timeline.csv"}};
  for (size_t i = 0; i < VL_ARRAY_SIZE(outs); i++) {
    vl__matrix_cell_path(c, path, sizeof(path), outs[i][1]);
    vl__matrix_argv_push(&c->load_argv, &n, outs[i][0]);
    vl__matrix_argv_push(&c->load_argv, &n, path);
  }
  vl__matrix_argv_push(&c->load_argv, &n, "--analyze");
  if (m->gnuplot) {
    vl__matrix_cell_path(c, path, sizeof(path), "memory.png");
    vl__matrix_argv_push(&c->load_argv, &n, "--plot");
    vl__matrix_argv_push(&c->load_argv, &n, path);
    vl__matrix_argv_push(&c->load_argv, &n, "--gnuplot");
    vl__matrix_argv_push(&c->load_argv, &n, m->gnuplot);
    if (m->report) {
      vl__matrix_cell_path(c, path, sizeof(path), "report.html");
      vl__matrix_argv_push(&c->load_argv, &n, "--report");
      vl__matrix_argv_push(&c->load_argv, &n, path);
    }
  }
  if (c->has_server || m->url) {
    vl__matrix_argv_push(&c->load_argv, &n, "--url");
    vl__matrix_argv_push(&c->load_argv, &n, c->url);
  }
  if (c->has_server && c->srv.monitor && pid > 0 &&
      !cJSON_GetObjectItemCaseSensitive(c->options, "monitor-tree")) {
    char tree[64];
    snprintf(tree, sizeof(tree), VL__MATRIX_TREE_LABEL "=%ld", pid);
    vl__matrix_argv_push(&c->load_argv, &n, "--monitor-tree");
    vl__matrix_argv_push(&c->load_argv, &n, tree);
    if (m->gpu)
      vl__matrix_argv_push(&c->load_argv, &n, "--monitor-gpu");
  }
  for (int i = 0; i < m->n_extra; i++) {
    char *v = vl__matrixfile_subst(c, m->extra[i]);
    vl__matrix_argv_push(&c->load_argv, &n, v);
    free(v);
  }
  return 0;
}

/* The first line of what a parse said on its error stream (buf, from open_memstream, cut where
 * the line ends), less "vlmload: ". */
static const char *first_line(char *buf) {
  if (!buf)
    return "";
  char *line = buf;
  if (strncmp(line, "vlmload: ", 9) == 0)
    line += 9;
  line[strcspn(line, "\n")] = '\0';
  return line;
}

/* Checks each key of c's options as its child will read it, named by where it came from: the
 * cell's own options, or the defaults. Returns 0 or 2 after saying why. */
static int check_keys(const vl__matrix_cell_t *c) {
  const vl__matrix_t *m = c->m;
  cJSON *from[2] = {cJSON_CreateObject(), cJSON_CreateObject()}; /* defaults, the cell's */
  for (const cJSON *k = c->options->child; k; k = k->next)
    cJSON_AddItemToObject(from[cJSON_GetObjectItemCaseSensitive(c->given, k->string) != NULL],
                          k->string, cJSON_Duplicate(k, 1));
  int rc = 0;
  for (int i = 0; i < 2 && rc == 0; i++) {
    char where[PATH_MAX + 128], *buf = NULL;
    size_t len = 0;
    if (i == 0)
      snprintf(where, sizeof(where), "'%s' defaults", m->file_path);
    else
      snprintf(where, sizeof(where), "'%s' cell '%s'", m->file_path, c->name);
    FILE *err = open_memstream(&buf, &len);
    rc = vl_config_check_keys(from[i], where, err);
    fclose(err);
    if (rc)
      vl__matrix_say("%s", first_line(buf));
    free(buf);
  }
  cJSON_Delete(from[0]);
  cJSON_Delete(from[1]);
  return rc ? 2 : 0;
}

/* Parses every cell's configuration as its child will, before any runs. Returns 0 or 2. */
int vl__matrixfile_check(vl__matrix_t *m) {
  for (int i = 0; i < m->n; i++) {
    vl__matrix_cell_t *c = &m->cells[i];
    char why[512];
    c->port = c->srv.port ? c->srv.port : 1;
    if (c->has_server)
      snprintf(c->url, sizeof(c->url), "http://127.0.0.1:%d", c->port);
    else if (m->url)
      snprintf(c->url, sizeof(c->url), "%s", m->url);
    if (vl__matrixfile_prepare(c, (long)getpid(), why, sizeof(why)) != 0) {
      vl__matrix_say("%s/config.json: %s", c->dir, why);
      return 2;
    }
    if (check_keys(c) != 0)
      return 2;
    int argc = 0;
    while (c->load_argv[argc])
      argc++;
    char *buf = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&buf, &len);
    FILE *out = fopen("/dev/null", "w");
    vl_config_t cfg;
    int rc = vl_config_parse(&cfg, argc, c->load_argv, out ? out : err, err);
    vl_config_free(&cfg);
    if (out)
      fclose(out);
    fclose(err);
    if (rc != VL_CONFIG_RUN)
      vl__matrix_say("cell '%s': %s", c->name,
                     rc == 0 ? "its options ask for help, not a run" : first_line(buf));
    free(buf);
    if (rc != VL_CONFIG_RUN)
      return 2;
  }
  return 0;
}
