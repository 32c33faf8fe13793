/* The Prometheus text exposition format, version 0.0.4: a parser that calls back once per sample,
 * and metric selectors ("URL#metric,metric{label="x"}") to pick the samples a run records.
 *
 * The parser reads (data, len) as given: no NUL terminator is needed and no byte past len is
 * read, whatever the input holds. It allocates one scratch buffer per call, sized by the longest
 * line, and nothing per sample.
 *
 * Accepted: LF or CRLF line ends, blank lines, leading and trailing blanks (space, tab), comments,
 * "# HELP name text" and "# TYPE name type" lines, metric names with colons, label sets with
 * escaped values (\\, \", \n) and an optional trailing comma, values as decimal numbers with
 * optional exponent or as NaN, +Inf, -Inf (also Inf, Infinity, case-insensitive), and an optional
 * integer timestamp in milliseconds. Rejected, with the 1-based line number: anything else,
 * including invalid escapes, invalid UTF-8 or NUL bytes in label values, a label repeated in one
 * sample, more than VL_PROM_MAX_LABELS labels, and text after the timestamp. Parsing stops at the
 * first error; samples before it have been delivered.
 */
#ifndef VLMLOAD_PROM_H
#define VLMLOAD_PROM_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#define VL_PROM_MAX_LABELS 64

typedef enum {
  VL_PROM_UNTYPED = 0,
  VL_PROM_COUNTER,
  VL_PROM_GAUGE,
  VL_PROM_HISTOGRAM,
  VL_PROM_SUMMARY
} vl_prom_type_t;

typedef struct vl_prom_label_s {
  const char *name;
  const char *value; /* unescaped, NUL-terminated */
} vl_prom_label_t;

/* One sample. Every pointer is valid during the callback only. */
typedef struct vl_prom_sample_s {
  const char *name;              /* metric name, NUL-terminated */
  const vl_prom_label_t *labels; /* in input order */
  size_t n_labels;
  /* The label set in one canonical form: "" when there is none, else {a="x",b="y"} with labels
   * sorted by name and values escaped again (\\, \", \n). Equal sets give equal strings. */
  const char *labels_canon;
  double value;
  int has_ts;
  int64_t ts_ms;
  /* From the last "# TYPE" line, when this sample belongs to that family (its name, or the name
   * with _total for a counter, _bucket/_sum/_count for a histogram, _sum/_count for a summary). */
  vl_prom_type_t type;
  size_t line; /* 1-based */
} vl_prom_sample_t;

/* Called for each sample. A nonzero return stops the parse, which returns that value (use a
 * negative VL_E* code). */
typedef int (*vl_prom_sample_cb)(const vl_prom_sample_t *s, void *ud);

/* Parses len bytes at data. Returns 0, the callback's nonzero value, VL_EINVAL for malformed input
 * (err gets "line N: reason") or VL_ENOMEM. err may be NULL. */
int vl_prom_parse(const char *data, size_t len, vl_prom_sample_cb cb, void *ud, char *err,
                  size_t errlen);

/* Selectors. */

typedef enum { VL_PROM_EQ, VL_PROM_NE, VL_PROM_RE, VL_PROM_NRE } vl_prom_op_t;

/* label="v", label!="v", label=~"re", label!~"re". As in PromQL, an absent label reads as the
 * empty string and regular expressions (POSIX extended here) match the whole value. */
typedef struct vl_prom_matcher_s {
  char *label;
  char *value;
  vl_prom_op_t op;
  int has_re;
  regex_t re;
} vl_prom_matcher_t;

typedef struct vl_prom_selector_s {
  char *name;
  vl_prom_matcher_t *matchers;
  size_t n_matchers;
} vl_prom_selector_t;

/* What one --monitor-prom argument asks for. Owns everything it points to. */
typedef struct vl_prom_target_s {
  char *url;
  vl_prom_selector_t *sels;
  size_t n_sels;
  int defaults; /* no list was given: sels holds vl_prom_default_metrics */
} vl_prom_target_t;

/* The metrics recorded when an argument names none, each where present: SGLang's, vLLM's, the mock
 * server's and the Prometheus client's own process memory. NULL-terminated. */
extern const char *const vl_prom_default_metrics[];

/* Splits "URL[#sel,sel,...]" at the first '#' into the URL and a list of selectors, each
 * `name` or `name{label="v",...}`. The URL must be http:// or https://; one without a path gets
 * "/metrics". Without '#' the default metrics are selected. Returns 0 or VL_EINVAL with a
 * one-line reason in err; t is then empty. */
int vl_prom_select_parse(const char *arg, vl_prom_target_t *t, char *err, size_t errlen);

/* True when s is selected by sel: its name is sel's name (or that name with "_total", the way a
 * Prometheus client exposes a counter) and every matcher holds. */
int vl_prom_select_match(const vl_prom_selector_t *sel, const vl_prom_sample_t *s);

/* True when any selector of t selects s. */
int vl_prom_target_match(const vl_prom_target_t *t, const vl_prom_sample_t *s);

void vl_prom_target_free(vl_prom_target_t *t);

#endif
