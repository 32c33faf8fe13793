/* Private to the config files: the option table and what its readers share.
 *
 * configtable.c holds the table: one row per option, carrying everything about it (name, help,
 * type, field, default, JSON key). config.c serves every row through its type: applying a value,
 * setting the default, freeing, writing the effective-configuration JSON, --help and the docs.
 * configparse.c parses: the command line, the --config file, its phases and --sweep.
 * configcheck.c holds the checks between options and the suggestions for mistyped names.
 */
#ifndef VLMLOAD_CONFIG_INTERNAL_H
#define VLMLOAD_CONFIG_INTERNAL_H

#include "vlmload/config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cJSON;

/* What an option's value is, beyond its type (flags of a row). */
enum {
  VL__OPTF_LIST = 1, /* repeatable: each value adds to a list, which the command line replaces whole
                      * when it gives the option (a --config file's list is then not used) */
  VL__OPTF_PATH =
      2, /* a file or directory: relative in a --config file, it is the file's folder's */
  VL__OPTF_PROGRAM =
      4, /* a program: a path as VL__OPTF_PATH when it holds a '/', else looked up in PATH */
  VL__OPTF_IMAGES = 8,     /* giving it (successfully) makes requests carry images */
  VL__OPTF_CMDLINE = 16,   /* the command line's only: not a key of a --config file */
  VL__OPTF_EXIT = 32,      /* parsing ends after it, with status 0 (--help, --version) */
  VL__OPTF_JSON_OMIT = 64, /* left out of the JSON while unset (a NULL string, a negative number) */
  VL__OPTF_JSON_NULL = 128, /* written as null while unset (a NULL string) */
};

/* How a row's field is stored, parsed, defaulted, freed and written as JSON. A row with a parse
 * function parses with it instead; one with a json function writes with it instead. */
typedef enum {
  VL__OPTT_NONE = 0, /* no field of its own: the row's functions do everything */
  VL__OPTT_FLAG,     /* int, set to 1; JSON true/false */
  VL__OPTT_INT,      /* int, a count between min and max */
  VL__OPTT_COUNT,    /* uint64_t, a count between min and max */
  VL__OPTT_DURATION, /* uint64_t microseconds; 0 is refused unless min is 0, and less than min */
  VL__OPTT_DOUBLE,   /* double, 0 to dmax */
  VL__OPTT_FRACTION, /* double, 0 to 1 */
  VL__OPTT_SIZE,     /* uint64_t bytes, at least min; why says what is wanted */
  VL__OPTT_STRING,   /* char *, owned; the value as given */
  VL__OPTT_ENUM,     /* int, the index of the value in the space-separated names of values; why says
                    what is wanted */
} vl__opttype_t;

typedef struct vl__option_s vl__option_t;

/* Where an option's value comes from, for its error messages. */
typedef struct {
  FILE *err;        /* errors, one line each */
  FILE *out;        /* --help and --version */
  const char *name; /* the option as errors name it ("rate", "rate (in phase 2)") */
} vl__optctx_t;

/* Applies arg (NULL for a flag) to c. Returns 0, or the exit status after an error on x->err. */
typedef int (*vl__optparse_t)(vl_config_t *c, vl__optctx_t *x, const char *arg);

/* Adds the row's keys to obj (the top object, or the group its json key names). */
typedef void (*vl__optjson_t)(const vl_config_t *c, struct cJSON *obj);

struct vl__option_s {
  const char *name;    /* without the leading dashes */
  const char *metavar; /* NULL for a flag (it takes no value) */
  const char *help;    /* default stated in the text */
  const char *section; /* starts a new section of --help when set */
  unsigned flags;      /* VL__OPTF_* */
  vl__opttype_t type;
  size_t off; /* offsetof the field in vl_config_t */
  /* VL__OPTT_INT and VL__OPTT_COUNT: the bounds; VL__OPTT_DURATION, VL__OPTT_SIZE: min, the
   * least. */
  uint64_t min, max;
  double dmax; /* VL__OPTT_DOUBLE: the largest value */
  /* The default: i for the integer types (VL__OPTT_ENUM's index), d for VL__OPTT_DOUBLE and
   * VL__OPTT_FRACTION, s for VL__OPTT_STRING (copied; NULL: unset). */
  union {
    long long i;
    double d;
    const char *s;
  } def;
  /* VL__OPTT_ENUM: its names, space-separated; any other row: the fixed set of values it takes,
   * for the docs (a value ending in ':' is a prefix), or NULL. */
  const char *values;
  const char *why;       /* VL__OPTT_ENUM, VL__OPTT_SIZE: the error for a value that is not one */
  const char *json;      /* key in the effective JSON ("images.x": x in "images"); NULL: none */
  vl__optparse_t parse;  /* NULL: by type */
  vl__optjson_t to_json; /* NULL: by type */
};

/* Options fit in a bitmap of this many rows (checked where the table is). */
#define VL__MAX_OPTIONS 128

/* The table, in --help order. */
extern const vl__option_t vl__config_options[];
extern const size_t vl__config_n_options;

/* The row named name, or NULL. */
const vl__option_t *vl__config_option(const char *name);

/* Index of a row in the table. */
#define VL__OPTION_INDEX(o) ((size_t)((o)-vl__config_options))

/* Applies one value of row o: its parse function, else its type's parser. Returns 0, or the exit
 * status (0 after --help/--version, 2 after an error printed). */
int vl__config_apply(vl_config_t *c, const vl__option_t *o, vl__optctx_t *x, const char *arg);

/* Prints "vlmload: " and fmt, whose %s arguments are all user text, shown as vl_text_fput_shown
 * does, so that no value (a newline in a --config string, say) can split the one line an error
 * is. */
void vl__config_say(FILE *f, const char *fmt, ...);

/* "--NAME 'ARG': WHY" (or "--NAME: WHY" when arg is NULL: a value not to echo) on x->err.
 * Returns 2. */
int vl__config_bad(vl__optctx_t *x, const char *arg, const char *why);

/* Replaces the string *dst with a copy of v. */
void vl__config_set_str(char **dst, const char *v);

/* A duration as an option takes it: whole seconds as "2s", else milliseconds. */
void vl__config_fmt_us(char *out, size_t n, uint64_t us);

/* Prints the version line and the libraries' versions. */
void vl__config_version(FILE *out);

/* The rows one configuration was given (by the file, the command line or a phase). */
typedef struct {
  unsigned char set[VL__MAX_OPTIONS];
} vl__optset_t;

/* Whether the option of that name was given. */
int vl__config_given(const vl__optset_t *given, const char *name);

/* The checks that hold between options, and what they fill in (the API's route, image ratio,
 * duration, API key from the environment). Returns VL_CONFIG_RUN or the exit status. */
int vl__config_cross_check(vl_config_t *c, const vl__optset_t *given, FILE *err);

/* An output that is the --config file at path would overwrite it: refused. Returns 0 or 2. */
int vl__config_check_outputs(const vl_config_t *c, const char *path, FILE *err);

/* Says why "--name" (the text before any '=' of the argument given) is not an option. */
void vl__config_say_bad_option(FILE *err, const char *name, const char *given);

/* The option whose name is nearest to name (no leading dashes), or NULL when none is near enough
 * to be what was meant. */
const vl__option_t *vl__config_nearest(const char *name);

/* The rows' own parse and JSON functions (configvalue.c), named vl__opt_parse_NAME and
 * vl__opt_json_NAME after the option or its key. */
int vl__opt_parse_url(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_url(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_shard(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_workers(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_endpoint(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_extra_body(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_extra_body(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_model(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_api_key(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_api_key(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_header(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_headers(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_cacert(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_server(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_server(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_flush_every(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_flush_every(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_flush_endpoint(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_flush_endpoints(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_flush_method(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_images(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_resolution(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_resolution(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_image_format(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_image_format(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_image_content(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_image_content(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_image_ratio(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_image_reuse(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_images_per_request(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_images_per_request(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_image_token(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_rate(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_rate(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_arrival(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_arrival(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_turns(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_turns(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_think_time(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_think_time(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_cancel(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_cancel(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_server_profile_at(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_server_profile_at(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_monitor_pid(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_monitor_match(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_monitor_tree(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_monitor_prom(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_monitor_cmd(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_no_progress(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_min_growth(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_min_growth_mb(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_expect_cap(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_min_slope(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_fail_on(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_fail_on(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_slo(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_slo(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_percentiles(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_percentiles(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_input_tokens(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_input_tokens(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_output_tokens(vl_config_t *c, vl__optctx_t *x, const char *arg);
void vl__opt_json_output_tokens(const vl_config_t *c, struct cJSON *o);
int vl__opt_parse_help(vl_config_t *c, vl__optctx_t *x, const char *arg);
int vl__opt_parse_version(vl_config_t *c, vl__optctx_t *x, const char *arg);

#endif
