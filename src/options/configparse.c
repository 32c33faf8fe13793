/* Parsing: the command line by getopt_long over the option table, under the --config file (a
 * JSON object keyed by option name), and the phases the file or --sweep makes, each a whole
 * configuration of its own. */
#include "config_internal.h"
#include "vlmload/common.h"
#include "vlmload/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whether two --input-tokens (or --output-tokens) values are the same. */
static int same_lengths(const vl_lengths_dist_t *a, const vl_lengths_dist_t *b) {
  return a->set == b->set && a->mean == b->mean && a->stddev == b->stddev && a->min == b->min &&
         a->max == b->max;
}

/* Reads a JSON configuration file; it must hold an object. Returns 0 or the exit status. */
static int load_json(const char *path, cJSON **root, FILE *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    vl__config_say(err, "--config '%s': %s", path, strerror(errno));
    return 2;
  }
  char *text = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[65536];
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    if (len + n > (16u << 20)) {
      fclose(f);
      free(text);
      vl__config_say(err, "--config '%s': larger than 16 MiB", path);
      return 2;
    }
    if (len + n > cap) {
      cap = (len + n) * 2;
      text = vl_xrealloc(text, cap);
    }
    memcpy(text + len, chunk, n);
    len += n;
  }
  fclose(f);
  char why[128];
  *root = vl_json_parse_text(text ? text : "", len, why, sizeof(why));
  free(text);
  if (!*root) {
    vl__config_say(err, "--config '%s': %s", path, why);
    return 2;
  }
  if (!cJSON_IsObject(*root)) {
    vl__config_say(err, "--config '%s': not a JSON object", path);
    cJSON_Delete(*root);
    *root = NULL;
    return 2;
  }
  return 0;
}

/* The command line's part in reading a --config file under it. */
typedef struct {
  const char *path;   /* the --config file (the last one given), or NULL */
  char *dir;          /* its folder, which relative paths in it are taken from; NULL: . */
  vl__optset_t given; /* the options the command line gives */
} cmdline_t;

/* A path the file gives, as the process must open it: relative ones from the file's folder.
 * Returns v itself, or a string in *owned that the caller frees. */
static const char *from_file(const cmdline_t *cl, unsigned flags, const char *v, char **owned) {
  *owned = NULL;
  if (!cl->dir || !*v || v[0] == '/' || !(flags & (VL__OPTF_PATH | VL__OPTF_PROGRAM)) ||
      ((flags & VL__OPTF_PROGRAM) && !strchr(v, '/')))
    return v;
  size_t n = strlen(cl->dir) + strlen(v) + 2;
  *owned = vl_xmalloc(n);
  snprintf(*owned, n, "%s%s%s", cl->dir, cl->dir[strlen(cl->dir) - 1] == '/' ? "" : "/", v);
  return *owned;
}

void vl_config_rebase_paths(cJSON *obj, const char *dir) {
  cmdline_t cl = {.dir = (char *)dir};
  for (cJSON *item = obj ? obj->child : NULL; item; item = item->next) {
    if (strcmp(item->string, "phases") == 0 && cJSON_IsArray(item)) {
      cJSON *phase;
      cJSON_ArrayForEach(phase, item) vl_config_rebase_paths(phase, dir);
      continue;
    }
    const vl__option_t *o = vl__config_option(item->string);
    if (!o)
      continue;
    cJSON *one = cJSON_IsArray(item) ? item->child : item;
    for (; one; one = cJSON_IsArray(item) ? one->next : NULL) {
      char *owned;
      if (!cJSON_IsString(one))
        continue;
      from_file(&cl, o->flags, one->valuestring, &owned);
      if (owned)
        cJSON_SetValuestring(one, owned);
      free(owned);
    }
  }
}

/* Applies every key of a JSON object from the --config file as the option of that name; where
 * names the object in errors. In a phase, "name" and "ramp_to" are the phase's own keys; "phases"
 * is skipped at the top. A list the command line gives is not taken from the file (the command
 * line's replaces it); relative paths are the file's folder's. Returns 0 or the exit status. */
static int apply_object(vl_config_t *c, const cJSON *obj, const char *where, int in_phase,
                        vl__optset_t *seen, const cmdline_t *cl, FILE *out, FILE *err) {
  int rc = 0;
  char ctxname[320];
  for (const cJSON *item = obj->child; item && !rc; item = item->next) {
    if (!in_phase && strcmp(item->string, "phases") == 0)
      continue;
    snprintf(ctxname, sizeof(ctxname), "%s (in %s)", item->string, where);
    vl__optctx_t x = {err, out, ctxname};
    if (in_phase && strcmp(item->string, "name") == 0) {
      if (!cJSON_IsString(item))
        return vl__config_bad(&x, NULL, "want a string");
      vl__config_set_str(&c->phase_name, item->valuestring);
      continue;
    }
    if (in_phase && strcmp(item->string, "ramp_to") == 0) {
      if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble > 10e6)
        return vl__config_bad(&x, NULL, "want the rate at the end of the phase (a number >= 0)");
      c->ramp_to = item->valuedouble;
      continue;
    }
    const vl__option_t *o = vl__config_option(item->string);
    if (!o || (o->flags & VL__OPTF_CMDLINE)) {
      const vl__option_t *near = o ? NULL : vl__config_nearest(item->string);
      if (near)
        vl__config_say(err, "%s: unknown option \"%s\"; did you mean \"%s\"?", where, item->string,
                       near->name);
      else
        vl__config_say(err, "%s: unknown option \"%s\"", where, item->string);
      return 2;
    }
    snprintf(ctxname, sizeof(ctxname), "%s (in %s)", o->name, where);
    unsigned flags = o->flags;
    if ((flags & VL__OPTF_LIST) && cl->given.set[VL__OPTION_INDEX(o)])
      continue;
    seen->set[VL__OPTION_INDEX(o)] = 1;
    if (!o->metavar) {
      if (!cJSON_IsBool(item))
        return vl__config_bad(&x, NULL, "want true or false");
      if (cJSON_IsTrue(item))
        rc = vl__config_apply(c, o, &x, NULL);
      continue;
    }
    const cJSON *one = cJSON_IsArray(item) ? item->child : item;
    for (; one && !rc; one = cJSON_IsArray(item) ? one->next : NULL) {
      char num[64];
      const char *v;
      char *owned = NULL;
      if (cJSON_IsString(one)) {
        v = from_file(cl, flags, one->valuestring, &owned);
      } else if (cJSON_IsNumber(one)) {
        snprintf(num, sizeof(num), "%.17g", one->valuedouble);
        v = num;
      } else if (cJSON_IsObject(one) && o->metavar && strcmp(o->metavar, "JSON") == 0) {
        v = owned = cJSON_PrintUnformatted(one); /* --extra-body as an object, not its text */
        if (!v)
          return vl__config_bad(&x, NULL, "out of memory");
      } else {
        return vl__config_bad(&x, NULL, "want a string or a number (or a list of them)");
      }
      rc = vl__config_apply(c, o, &x, v);
      free(owned);
    }
  }
  return rc;
}

int vl_config_check_keys(const cJSON *obj, const char *where, FILE *err) {
  vl_config_t c;
  cmdline_t cl;
  vl__optset_t seen;
  memset(&cl, 0, sizeof(cl));
  memset(&seen, 0, sizeof(seen));
  vl_config_defaults(&c);
  int rc = apply_object(&c, obj, where, 0, &seen, &cl, err, err);
  vl_config_free(&c);
  return rc ? 2 : 0;
}

/* getopt_long's value for row i: past every short option's character. */
#define OPTVAL(i) (256 + (int)(i))

/* getopt_long's table, from the option table: longopts has room for every option and the end
 * mark. */
static void make_longopts(struct option *longopts) {
  for (size_t i = 0; i < vl__config_n_options; i++) {
    longopts[i].name = vl__config_options[i].name;
    longopts[i].has_arg = vl__config_options[i].metavar ? required_argument : no_argument;
    longopts[i].flag = NULL;
    longopts[i].val = OPTVAL(i);
  }
  memset(&longopts[vl__config_n_options], 0, sizeof(struct option));
}

/* The row of getopt_long's value id (a long option's, or -h's or -V's), or NULL. */
static const vl__option_t *row_of(int id) {
  if (id == 'h')
    return vl__config_option("help");
  if (id == 'V')
    return vl__config_option("version");
  if (id >= OPTVAL(0) && id < OPTVAL(vl__config_n_options))
    return &vl__config_options[id - OPTVAL(0)];
  return NULL;
}

/* Builds one configuration: defaults, then the file's keys, then the command line, then (for a
 * phase) the phase's keys. Returns VL_CONFIG_RUN or the exit status. */
static int parse_one(vl_config_t *c, int argc, char **argv, const cJSON *file, const cmdline_t *cl,
                     const cJSON *phase, const char *phase_where, FILE *out, FILE *err) {
  struct option longopts[VL__MAX_OPTIONS + 1];
  make_longopts(longopts);
  vl__optset_t seen;
  int rc;

  memset(&seen, 0, sizeof(seen));

  vl_config_defaults(c);
  if (file && (rc = apply_object(c, file, cl->path, 0, &seen, cl, out, err)) != 0)
    return rc;
  opterr = 0;
  /* 0, not 1: glibc then forgets everything of an earlier scan, including its place inside a
   * cluster of short options ("-hV") in an argv that may be gone. */
  optind = 0;
  for (;;) {
    int id = getopt_long(argc, argv, ":hV", longopts, NULL);
    if (id == -1)
      break;
    const vl__option_t *o = row_of(id);
    if (!o) {
      const char *opt = argv[optind - 1];
      if (id == ':')
        vl__config_say(err, "%s: needs a value (see --help)", opt);
      else {
        /* The name only: what follows '=' in a mistyped --api-key=... is a secret. */
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)VL_MIN(strcspn(opt, "="), 100), opt);
        vl__config_say_bad_option(err, name, opt);
      }
      return 2;
    }
    if (o == vl__config_option("config"))
      continue;
    vl__optctx_t x = {err, out, id < OPTVAL(0) ? "" : o->name};
    seen.set[VL__OPTION_INDEX(o)] = 1;
    rc = vl__config_apply(c, o, &x, optarg);
    if (o->flags & VL__OPTF_EXIT)
      return 0;
    if (rc)
      return rc;
  }
  if (optind < argc) {
    vl__config_say(err, "'%s': unexpected argument (options start with --; see --help)",
                   argv[optind]);
    return 2;
  }
  if (phase && (rc = apply_object(c, phase, phase_where, 1, &seen, cl, out, err)) != 0)
    return rc;
  if (!vl__config_given(&seen, "arrival"))
    c->arrival_name = c->rate > 0 || c->rate_auto ? "poisson" : "closed";
  return vl__config_cross_check(c, &seen, err);
}

/* Turns --sweep KEY=FROM:TO:STEP into phases, one per value. Returns NULL after printing an
 * error. */
static cJSON *sweep_phases(const char *spec, FILE *err) {
  char key[32];
  double from, to, step;
  const char *eq = strchr(spec, '=');
  cJSON *phases = NULL;
  if (!eq || (size_t)(eq - spec) >= sizeof(key))
    goto bad;
  memcpy(key, spec, (size_t)(eq - spec));
  key[eq - spec] = '\0';
  char tail;
  /* Finite values only: an infinite step makes from + step * 0 NaN, which no bound stops. */
  if (sscanf(eq + 1, "%lf:%lf:%lf%c", &from, &to, &step, &tail) != 3 || !isfinite(step) ||
      !isfinite(to) || !(step > 0) || !(from >= 0) || !(to >= from) || (to - from) / step > 1000 ||
      (strcmp(key, "rate") != 0 && strcmp(key, "concurrency") != 0))
    goto bad;
  phases = cJSON_CreateArray();
  for (int i = 0; i <= 1000; i++) {
    double v = from + step * i;
    if (v > to + step * 1e-9)
      break;
    char name[64];
    snprintf(name, sizeof(name), "%s=%.6g", key, v);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "name", name);
    cJSON_AddNumberToObject(p, key, strcmp(key, "concurrency") == 0 ? VL_MAX(1.0, floor(v)) : v);
    cJSON_AddItemToArray(phases, p);
  }
  return phases;
bad:
  vl__config_say(
      err, "--sweep '%s': want rate=FROM:TO:STEP or concurrency=FROM:TO:STEP (at most 1000 stages)",
      spec);
  return NULL;
}

/* What the command line gives: its --config file (the last one given), read before the other
 * options because they override it, and which options it gives. Found by the same getopt_long scan
 * as parse_one's, so it is the file parse_one would see: an unambiguous abbreviation (--conf) names
 * it, the value of another option (--model --config) does not, nor anything after "--". Errors are
 * left for parse_one to say. */
static void scan_cmdline(int argc, char **argv, cmdline_t *cl) {
  struct option longopts[VL__MAX_OPTIONS + 1];
  make_longopts(longopts);
  memset(cl, 0, sizeof(*cl));
  opterr = 0;
  optind = 0;
  for (;;) {
    int id = getopt_long(argc, argv, ":hV", longopts, NULL);
    if (id == -1)
      break;
    const vl__option_t *o = row_of(id);
    if (o == vl__config_option("config"))
      cl->path = optarg;
    if (o)
      cl->given.set[VL__OPTION_INDEX(o)] = 1;
  }
  const char *slash = cl->path ? strrchr(cl->path, '/') : NULL;
  if (slash) {
    size_t n = slash == cl->path ? 1 : (size_t)(slash - cl->path);
    cl->dir = vl_xmalloc(n + 1);
    memcpy(cl->dir, cl->path, n);
    cl->dir[n] = '\0';
  }
}

/* The run-wide facts, from every phase. */
static void find_facts(vl_config_t *c) {
  int n = c->n_phases ? c->n_phases : 1;
  memset(&c->run, 0, sizeof(c->run));
  for (int i = 0; i < n; i++) {
    const vl_config_t *p = c->n_phases ? &c->phases[i] : c;
    c->run.flushes |= p->flush_every_n || p->flush_every_us;
    c->run.unique_images |= p->images_on && p->unique_images;
    if (p->images_on && !c->run.images)
      c->run.images = p;
  }
}

int vl_config_parse(vl_config_t *c, int argc, char **argv, FILE *out, FILE *err) {
  cmdline_t cl;
  scan_cmdline(argc, argv, &cl);
  const char *path = cl.path;
  cJSON *file = NULL;
  if (path) {
    int rc = load_json(path, &file, err);
    if (rc) {
      vl_config_defaults(c);
      free(cl.dir);
      return rc;
    }
  }
  int rc = parse_one(c, argc, argv, file, &cl, NULL, NULL, out, err);
  if (rc == VL_CONFIG_RUN)
    rc = vl__config_check_outputs(c, path, err) ? 2 : rc;
  const cJSON *phases = file ? cJSON_GetObjectItemCaseSensitive(file, "phases") : NULL;
  cJSON *swept = NULL;
  if (rc == VL_CONFIG_RUN && c->sweep) {
    if (phases) {
      fprintf(err, "vlmload: --sweep: the configuration file already has phases\n");
      rc = 2;
    } else if (!(swept = sweep_phases(c->sweep, err))) {
      rc = 2;
    }
    phases = swept;
  }
  /* A trace is the run's one schedule (issue 16, item 7). */
  if (rc == VL_CONFIG_RUN && phases && c->trace) {
    vl__config_say(err, "--trace: a trace is one schedule, not phases; drop \"phases\" from "
                        "--config or run the trace on its own");
    rc = 2;
  }
  if (rc == VL_CONFIG_RUN && phases) {
    int n = cJSON_GetArraySize(phases);
    if (!cJSON_IsArray(phases) || n == 0 || n > 1000) {
      vl__config_say(err, "--config '%s': \"phases\" must be a list of 1 to 1000 objects",
                     path ? path : "");
      rc = 2;
    }
    c->phases = vl_xcalloc((size_t)VL_MAX(n, 1), sizeof(vl_config_t));
    for (int i = 0; i < n && rc == VL_CONFIG_RUN; i++) {
      const cJSON *ph = cJSON_GetArrayItem(phases, i);
      char where[256];
      snprintf(where, sizeof(where), "phase %d", i + 1);
      if (!cJSON_IsObject(ph)) {
        fprintf(err, "vlmload: %s: not a JSON object\n", where);
        rc = 2;
        break;
      }
      rc = parse_one(&c->phases[i], argc, argv, file, &cl, ph, where, out, err);
      c->n_phases = i + 1;
      if (rc == VL_CONFIG_RUN && c->phases[i].api != c->api) {
        vl__config_say(
            err, "--api (in %s): the API is the run's, not a phase's; set it at the top level",
            where);
        rc = 2;
      }
      /* The bodies are built once, before the first phase: their extra fields are the run's. */
      const vl_config_t *pc = &c->phases[i];
      if (rc == VL_CONFIG_RUN && (pc->ignore_eos != c->ignore_eos ||
                                  pc->max_completion_tokens != c->max_completion_tokens ||
                                  (pc->extra_body == NULL) != (c->extra_body == NULL) ||
                                  (pc->extra_body && strcmp(pc->extra_body, c->extra_body) != 0) ||
                                  !same_lengths(&pc->input_tokens, &c->input_tokens) ||
                                  !same_lengths(&pc->output_tokens, &c->output_tokens))) {
        vl__config_say(err,
                       "--extra-body, --ignore-eos, --max-completion-tokens, --input-tokens, "
                       "--output-tokens (in %s): the request "
                       "fields are the run's, not a phase's; set them at the top level",
                       where);
        rc = 2;
      }
      if (rc == VL_CONFIG_RUN && !c->phases[i].phase_name) {
        c->phases[i].phase_name = vl_xstrdup(where);
        for (char *p = c->phases[i].phase_name; *p; p++)
          if (*p == ' ')
            *p = '-';
      }
    }
  }
  /* --rate auto probes before a run of one load; phases set their own. */
  for (int i = 0; rc == VL_CONFIG_RUN && i < c->n_phases; i++)
    if (c->rate_auto || c->phases[i].rate_auto) {
      vl__config_say(err, "--rate auto with phases: each phase sets its own load; find the rate "
                          "with --rate auto in a run without \"phases\" and give the phases "
                          "their rates");
      rc = 2;
    }
  /* A conversation would span phases, each with its own load and plan: refused, not half done. */
  for (int i = 0; rc == VL_CONFIG_RUN && i < c->n_phases; i++)
    if (c->turns_hi || c->phases[i].turns_hi) {
      vl__config_say(err, "--turns: not with phases or --sweep (a conversation would span phases "
                          "of different loads); run the conversations as a run of their own");
      rc = 2;
    }
  cJSON_Delete(file);
  cJSON_Delete(swept);
  free(cl.dir);
  if (rc == VL_CONFIG_RUN)
    find_facts(c);
  return rc;
}
