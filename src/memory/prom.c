#include "vlmload/prom.h"
#include "vlmload/common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const vl_prom_default_metrics[] = {
    "sglang:token_usage",
    "sglang:num_running_reqs",
    "sglang:num_used_tokens",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:num_requests_running",
    "vllm:mm_cache_queries",
    "vllm:mm_cache_hits",
    "vlmmock_memory_bytes",
    "process_resident_memory_bytes",
    NULL,
};

/* Parser state for one vl_prom_parse call. The scratch buffer holds the current line's strings:
 * the metric name, label names and unescaped values, the canonical label set. */
typedef struct {
  char *buf;
  size_t cap, len;
  vl_prom_label_t labels[VL_PROM_MAX_LABELS];
  size_t order[VL_PROM_MAX_LABELS];
  char *fam; /* family named by the last TYPE line */
  size_t fam_cap;
  vl_prom_type_t fam_type;
  size_t line;
  char *err;
  size_t errlen;
} parser_t;

static int is_blank(char c) {
  return c == ' ' || c == '\t';
}

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

static int is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int label_start(char c) {
  return is_alpha(c) || c == '_';
}

static int label_char(char c) {
  return label_start(c) || is_digit(c);
}

static int metric_start(char c) {
  return label_start(c) || c == ':';
}

static int metric_char(char c) {
  return label_char(c) || c == ':';
}

static const char *skip_blanks(const char *q, const char *e) {
  while (q < e && is_blank(*q))
    q++;
  return q;
}

/* Copies n bytes of untrusted text for an error message: printable ASCII only, "..." when cut. */
static void excerpt(char *out, size_t outlen, const char *s, size_t n) {
  size_t i = 0, j = 0;
  for (; i < n && j + 4 < outlen; i++) {
    unsigned char c = (unsigned char)s[i];
    out[j++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
  }
  if (i < n) {
    memcpy(out + j, "...", 3);
    j += 3;
  }
  out[j] = '\0';
}

static int fail(parser_t *p, const char *fmt, ...) {
  if (p->err && p->errlen) {
    int n = snprintf(p->err, p->errlen, "line %zu: ", p->line);
    if (n >= 0 && (size_t)n < p->errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return VL_EINVAL;
}

/* Appends a byte to the scratch buffer. The buffer is sized for the line in advance, so this
 * cannot fail on a line it was sized for; the check keeps a mistake from writing out of bounds. */
static int put_char(parser_t *p, char c) {
  if (p->len >= p->cap)
    return -1;
  p->buf[p->len++] = c;
  return 0;
}

/* Copies n bytes and a NUL into scratch; returns where, or NULL when out of room. */
static char *put_str(parser_t *p, const char *s, size_t n) {
  if (p->cap - p->len < n + 1)
    return NULL;
  char *d = p->buf + p->len;
  memcpy(d, s, n);
  d[n] = '\0';
  p->len += n + 1;
  return d;
}

static int utf8_valid(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t k;
    unsigned min;
    unsigned cp;
    if (c >= 0xc2 && c <= 0xdf) {
      k = 1, min = 0x80, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      k = 2, min = 0x800, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      k = 3, min = 0x10000, cp = c & 0x07;
    } else {
      return 0;
    }
    if (n - i <= k)
      return 0;
    for (size_t j = 1; j <= k; j++) {
      if ((s[i + j] & 0xc0) != 0x80)
        return 0;
      cp = (cp << 6) | (s[i + j] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
    i += k + 1;
  }
  return 1;
}

/* A sample value: decimal with optional fraction and exponent, or NaN / [+-]Inf[inity]. */
static int parse_value(const char *s, size_t n, double *out) {
  char tmp[128];
  if (n == 0 || n >= sizeof(tmp))
    return -1;
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  const char *t = tmp;
  int neg = 0, sign = 0;
  if (*t == '+' || *t == '-') {
    neg = *t == '-';
    sign = 1;
    t++;
  }
  if (strcasecmp(t, "inf") == 0 || strcasecmp(t, "infinity") == 0) {
    *out = neg ? -INFINITY : INFINITY;
    return 0;
  }
  if (strcasecmp(t, "nan") == 0) {
    if (sign)
      return -1;
    *out = NAN;
    return 0;
  }
  const char *d = t;
  size_t digits = 0;
  while (is_digit(*d))
    d++, digits++;
  if (*d == '.') {
    d++;
    while (is_digit(*d))
      d++, digits++;
  }
  if (digits == 0)
    return -1;
  if (*d == 'e' || *d == 'E') {
    d++;
    if (*d == '+' || *d == '-')
      d++;
    if (!is_digit(*d))
      return -1;
    while (is_digit(*d))
      d++;
  }
  if (*d != '\0')
    return -1;
  char *end;
  *out = strtod(tmp, &end);
  return end == tmp + n ? 0 : -1;
}

/* An integer timestamp in milliseconds, optionally signed, within int64_t. */
static int parse_ts(const char *s, size_t n, int64_t *out) {
  size_t i = 0;
  int neg = 0;
  if (n > 0 && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    i = 1;
  }
  if (i == n)
    return -1;
  uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (; i < n; i++) {
    if (!is_digit(s[i]))
      return -1;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (lim - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
  return 0;
}

static vl_prom_type_t family_type(const parser_t *p, const char *name) {
  if (!p->fam)
    return VL_PROM_UNTYPED;
  size_t fl = strlen(p->fam);
  if (strncmp(name, p->fam, fl) != 0)
    return VL_PROM_UNTYPED;
  const char *suf = name + fl;
  if (*suf == '\0')
    return p->fam_type;
  switch (p->fam_type) {
  case VL_PROM_COUNTER:
    return strcmp(suf, "_total") == 0 ? p->fam_type : VL_PROM_UNTYPED;
  case VL_PROM_HISTOGRAM:
    if (strcmp(suf, "_bucket") == 0)
      return p->fam_type;
    /* fall through */
  case VL_PROM_SUMMARY:
    return strcmp(suf, "_sum") == 0 || strcmp(suf, "_count") == 0 ? p->fam_type : VL_PROM_UNTYPED;
  default:
    return VL_PROM_UNTYPED;
  }
}

/* "# HELP name text", "# TYPE name type" or any other comment. s points past the '#'. */
static int parse_comment(parser_t *p, const char *s, const char *e) {
  const char *q = skip_blanks(s, e), *kw = q;
  while (q < e && !is_blank(*q))
    q++;
  size_t kwl = (size_t)(q - kw);
  int help = kwl == 4 && memcmp(kw, "HELP", 4) == 0;
  int type = kwl == 4 && memcmp(kw, "TYPE", 4) == 0;
  if (!help && !type)
    return 0;
  const char *what = help ? "HELP" : "TYPE";
  q = skip_blanks(q, e);
  const char *name = q;
  while (q < e && !is_blank(*q))
    q++;
  size_t nl = (size_t)(q - name);
  if (nl == 0)
    return fail(p, "%s line without a metric name", what);
  int ok = metric_start(name[0]);
  for (size_t i = 1; i < nl && ok; i++)
    ok = metric_char(name[i]);
  if (!ok) {
    char x[48];
    excerpt(x, sizeof(x), name, nl);
    return fail(p, "invalid metric name \"%s\" in %s line", x, what);
  }
  if (help)
    return 0; /* the docstring is free text */
  q = skip_blanks(q, e);
  const char *ty = q;
  while (q < e && !is_blank(*q))
    q++;
  size_t tl = (size_t)(q - ty);
  static const struct {
    const char *s;
    vl_prom_type_t t;
  } types[] = {{"counter", VL_PROM_COUNTER},
               {"gauge", VL_PROM_GAUGE},
               {"histogram", VL_PROM_HISTOGRAM},
               {"summary", VL_PROM_SUMMARY},
               {"untyped", VL_PROM_UNTYPED}};
  size_t i = 0;
  while (i < VL_ARRAY_SIZE(types) && !(strlen(types[i].s) == tl && memcmp(ty, types[i].s, tl) == 0))
    i++;
  if (i == VL_ARRAY_SIZE(types)) {
    char x[48];
    excerpt(x, sizeof(x), ty, tl);
    return tl ? fail(p, "unknown metric type \"%s\"", x) : fail(p, "TYPE line without a type");
  }
  if (skip_blanks(q, e) != e)
    return fail(p, "unexpected text after the metric type");
  if (p->fam_cap < nl + 1) {
    char *f = realloc(p->fam, nl + 1);
    if (!f)
      return VL_ENOMEM;
    p->fam = f;
    p->fam_cap = nl + 1;
  }
  memcpy(p->fam, name, nl);
  p->fam[nl] = '\0';
  p->fam_type = types[i].t;
  return 0;
}

static int put_escaped(parser_t *p, const char *v) {
  for (; *v; v++) {
    int rc = 0;
    if (*v == '\\' || *v == '"')
      rc = put_char(p, '\\') | put_char(p, *v);
    else if (*v == '\n')
      rc = put_char(p, '\\') | put_char(p, 'n');
    else
      rc = put_char(p, *v);
    if (rc)
      return -1;
  }
  return 0;
}

/* Builds the canonical label set (sorted by name) in scratch; fails on a repeated name. */
static int canonical(parser_t *p, size_t n, const char **out) {
  for (size_t i = 0; i < n; i++) {
    size_t j = i;
    while (j > 0 && strcmp(p->labels[p->order[j - 1]].name, p->labels[i].name) > 0) {
      p->order[j] = p->order[j - 1];
      j--;
    }
    p->order[j] = i;
  }
  for (size_t i = 1; i < n; i++) {
    if (strcmp(p->labels[p->order[i - 1]].name, p->labels[p->order[i]].name) == 0)
      return fail(p, "label \"%s\" repeated", p->labels[p->order[i]].name);
  }
  char *c = p->buf + p->len;
  int rc = 0;
  if (n) {
    rc |= put_char(p, '{');
    for (size_t i = 0; i < n && rc == 0; i++) {
      const vl_prom_label_t *l = &p->labels[p->order[i]];
      if (i)
        rc |= put_char(p, ',');
      for (const char *s = l->name; *s; s++)
        rc |= put_char(p, *s);
      rc |= put_char(p, '=');
      rc |= put_char(p, '"');
      rc |= put_escaped(p, l->value);
      rc |= put_char(p, '"');
    }
    rc |= put_char(p, '}');
  }
  rc |= put_char(p, '\0');
  if (rc)
    return fail(p, "line too long");
  *out = c;
  return 0;
}

static int parse_sample(parser_t *p, const char *s, const char *e, vl_prom_sample_cb cb, void *ud) {
  char x[48];
  const char *q = s;
  p->len = 0;
  if (!metric_start(*q)) {
    excerpt(x, sizeof(x), s, (size_t)(e - s) < 16 ? (size_t)(e - s) : 16);
    return fail(p, "invalid metric name at \"%s\"", x);
  }
  while (q < e && metric_char(*q))
    q++;
  const char *name = put_str(p, s, (size_t)(q - s));
  if (!name)
    return fail(p, "line too long");
  size_t n = 0;
  q = skip_blanks(q, e);
  if (q < e && *q == '{') {
    q++;
    for (;;) {
      q = skip_blanks(q, e);
      if (q >= e)
        return fail(p, "unterminated label set");
      if (*q == '}') {
        q++;
        break;
      }
      if (!label_start(*q)) {
        excerpt(x, sizeof(x), q, (size_t)(e - q) < 16 ? (size_t)(e - q) : 16);
        return fail(p, "invalid label name at \"%s\"", x);
      }
      if (n == VL_PROM_MAX_LABELS)
        return fail(p, "more than %d labels", VL_PROM_MAX_LABELS);
      const char *ln = q;
      while (q < e && label_char(*q))
        q++;
      const char *lname = put_str(p, ln, (size_t)(q - ln));
      if (!lname)
        return fail(p, "line too long");
      q = skip_blanks(q, e);
      if (q >= e || *q != '=')
        return fail(p, "expected '=' after label \"%s\"", lname);
      q = skip_blanks(q + 1, e);
      if (q >= e || *q != '"')
        return fail(p, "expected '\"' to open the value of label \"%s\"", lname);
      q++;
      size_t v0 = p->len;
      for (;;) {
        if (q >= e)
          return fail(p, "unterminated value of label \"%s\"", lname);
        char c = *q++;
        if (c == '"')
          break;
        if (c == '\\') {
          if (q >= e)
            return fail(p, "unterminated value of label \"%s\"", lname);
          c = *q++;
          if (c == 'n') {
            c = '\n';
          } else if (c != '\\' && c != '"') {
            excerpt(x, sizeof(x), &c, 1);
            return fail(p, "invalid escape \"\\%s\" in the value of label \"%s\"", x, lname);
          }
        } else if (c == '\0') {
          return fail(p, "NUL byte in the value of label \"%s\"", lname);
        }
        if (put_char(p, c))
          return fail(p, "line too long");
      }
      if (put_char(p, '\0'))
        return fail(p, "line too long");
      if (!utf8_valid((const unsigned char *)p->buf + v0, p->len - 1 - v0))
        return fail(p, "invalid UTF-8 in the value of label \"%s\"", lname);
      p->labels[n].name = lname;
      p->labels[n].value = p->buf + v0;
      n++;
      q = skip_blanks(q, e);
      if (q >= e)
        return fail(p, "unterminated label set");
      if (*q == ',') {
        q++;
        continue;
      }
      if (*q == '}') {
        q++;
        break;
      }
      return fail(p, "expected ',' or '}' after the value of label \"%s\"", lname);
    }
    q = skip_blanks(q, e);
  }
  if (q >= e)
    return fail(p, "missing value for \"%s\"", name);
  const char *vs = q;
  while (q < e && !is_blank(*q))
    q++;
  vl_prom_sample_t smp = {.name = name, .labels = p->labels, .n_labels = n, .line = p->line};
  if (parse_value(vs, (size_t)(q - vs), &smp.value) != 0) {
    excerpt(x, sizeof(x), vs, (size_t)(q - vs) < 24 ? (size_t)(q - vs) : 24);
    return fail(p, "invalid value \"%s\"", x);
  }
  q = skip_blanks(q, e);
  if (q < e) {
    const char *ts = q;
    while (q < e && !is_blank(*q))
      q++;
    if (parse_ts(ts, (size_t)(q - ts), &smp.ts_ms) != 0) {
      excerpt(x, sizeof(x), ts, (size_t)(q - ts) < 24 ? (size_t)(q - ts) : 24);
      return fail(p, "invalid timestamp \"%s\"", x);
    }
    smp.has_ts = 1;
    if (skip_blanks(q, e) != e)
      return fail(p, "unexpected text after the timestamp");
  }
  int rc = canonical(p, n, &smp.labels_canon);
  if (rc)
    return rc;
  smp.type = family_type(p, name);
  return cb(&smp, ud);
}

int vl_prom_parse(const char *data, size_t len, vl_prom_sample_cb cb, void *ud, char *err,
                  size_t errlen) {
  parser_t p = {.err = err, .errlen = errlen};
  int rc = 0;
  size_t pos = 0;
  if (err && errlen)
    err[0] = '\0';
  while (pos < len && rc == 0) {
    const char *s = data + pos;
    const char *nl = memchr(s, '\n', len - pos);
    const char *e = nl ? nl : data + len;
    pos = (size_t)(e - data) + (nl != NULL);
    p.line++;
    if (e > s && e[-1] == '\r')
      e--;
    const char *q = skip_blanks(s, e);
    if (q == e)
      continue;
    if (*q == '#') {
      rc = parse_comment(&p, q + 1, e);
      continue;
    }
    /* Everything a sample line holds, expanded at most fourfold, plus the labels' separators. */
    size_t L = (size_t)(e - q);
    if (L > (SIZE_MAX - 1024) / 4) {
      rc = fail(&p, "line too long");
      break;
    }
    size_t need = 4 * L + 1024;
    if (p.cap < need) {
      char *b = realloc(p.buf, need);
      if (!b) {
        rc = VL_ENOMEM;
        break;
      }
      p.buf = b;
      p.cap = need;
    }
    rc = parse_sample(&p, q, e, cb, ud);
  }
  free(p.buf);
  free(p.fam);
  return rc;
}

/* Selectors. */

static void selector_free(vl_prom_selector_t *s) {
  for (size_t i = 0; i < s->n_matchers; i++) {
    vl_prom_matcher_t *m = &s->matchers[i];
    free(m->label);
    free(m->value);
    if (m->has_re)
      regfree(&m->re);
  }
  free(s->matchers);
  free(s->name);
  memset(s, 0, sizeof(*s));
}

void vl_prom_target_free(vl_prom_target_t *t) {
  for (size_t i = 0; i < t->n_sels; i++)
    selector_free(&t->sels[i]);
  free(t->sels);
  free(t->url);
  memset(t, 0, sizeof(*t));
}

static const char *skip_space(const char *q) {
  while (*q == ' ' || *q == '\t')
    q++;
  return q;
}

/* Parses one selector at *pq, which is left after it. */
static int parse_selector(const char **pq, vl_prom_selector_t *sel, char *err, size_t errlen) {
  const char *q = skip_space(*pq), *start = q;
  char x[48];
  if (!metric_start(*q)) {
    if (*q == ',' || *q == '\0')
      vl_set_err(err, errlen, "empty metric selector");
    else
      vl_set_err(err, errlen, "invalid metric name at \"%.16s\"", q);
    return VL_EINVAL;
  }
  while (metric_char(*q))
    q++;
  sel->name = vl_xstrndup(start, (size_t)(q - start));
  q = skip_space(q);
  if (*q != '{') {
    *pq = q;
    return 0;
  }
  q++;
  size_t cap = 0;
  for (;;) {
    q = skip_space(q);
    if (*q == '}') {
      q++;
      break;
    }
    if (!label_start(*q)) {
      if (*q == '\0')
        vl_set_err(err, errlen, "selector %s: unterminated label matchers", sel->name);
      else
        vl_set_err(err, errlen, "selector %s: invalid label name at \"%.16s\"", sel->name, q);
      return VL_EINVAL;
    }
    if (sel->n_matchers == cap) {
      cap = cap ? cap * 2 : 4;
      sel->matchers = vl_xrealloc(sel->matchers, cap * sizeof(*sel->matchers));
    }
    vl_prom_matcher_t *m = &sel->matchers[sel->n_matchers++];
    memset(m, 0, sizeof(*m));
    const char *ln = q;
    while (label_char(*q))
      q++;
    m->label = vl_xstrndup(ln, (size_t)(q - ln));
    q = skip_space(q);
    if (q[0] == '=' && q[1] == '~')
      m->op = VL_PROM_RE, q += 2;
    else if (q[0] == '!' && q[1] == '~')
      m->op = VL_PROM_NRE, q += 2;
    else if (q[0] == '!' && q[1] == '=')
      m->op = VL_PROM_NE, q += 2;
    else if (q[0] == '=')
      m->op = VL_PROM_EQ, q += 1;
    else {
      vl_set_err(err, errlen, "selector %s: expected =, !=, =~ or !~ after label %s", sel->name,
                 m->label);
      return VL_EINVAL;
    }
    q = skip_space(q);
    if (*q != '"') {
      vl_set_err(err, errlen, "selector %s: the value of label %s must be in double quotes",
                 sel->name, m->label);
      return VL_EINVAL;
    }
    q++;
    size_t vcap = strlen(q) + 1, vl = 0;
    m->value = vl_xmalloc(vcap);
    for (;;) {
      char c = *q++;
      if (c == '\0') {
        vl_set_err(err, errlen, "selector %s: unterminated value of label %s", sel->name, m->label);
        return VL_EINVAL;
      }
      if (c == '"')
        break;
      if (c == '\\') {
        c = *q++;
        if (c == 'n') {
          c = '\n';
        } else if (c != '\\' && c != '"') {
          excerpt(x, sizeof(x), &c, c ? 1 : 0);
          vl_set_err(err, errlen, "selector %s: invalid escape \"\\%s\" in label %s", sel->name, x,
                     m->label);
          return VL_EINVAL;
        }
      }
      m->value[vl++] = c;
    }
    m->value[vl] = '\0';
    if (m->op == VL_PROM_RE || m->op == VL_PROM_NRE) {
      size_t n = vl + 5;
      char *anchored = vl_xmalloc(n);
      snprintf(anchored, n, "^(%s)$", m->value);
      int rc = regcomp(&m->re, anchored, REG_EXTENDED | REG_NOSUB);
      free(anchored);
      if (rc != 0) {
        char why[128];
        regerror(rc, &m->re, why, sizeof(why));
        vl_set_err(err, errlen, "selector %s: bad regular expression for label %s: %s", sel->name,
                   m->label, why);
        return VL_EINVAL;
      }
      m->has_re = 1;
    }
    q = skip_space(q);
    if (*q == ',') {
      q++;
      continue;
    }
    if (*q == '}') {
      q++;
      break;
    }
    vl_set_err(err, errlen, "selector %s: expected ',' or '}' after label %s", sel->name, m->label);
    return VL_EINVAL;
  }
  *pq = skip_space(q);
  return 0;
}

static int add_selector(vl_prom_target_t *t, size_t *cap) {
  if (t->n_sels == *cap) {
    *cap = *cap ? *cap * 2 : 8;
    t->sels = vl_xrealloc(t->sels, *cap * sizeof(*t->sels));
  }
  memset(&t->sels[t->n_sels], 0, sizeof(t->sels[0]));
  return (int)t->n_sels++;
}

int vl_prom_select_parse(const char *arg, vl_prom_target_t *t, char *err, size_t errlen) {
  memset(t, 0, sizeof(*t));
  const char *hash = strchr(arg, '#');
  size_t ul = hash ? (size_t)(hash - arg) : strlen(arg);
  size_t cap = 0;
  const char *rest = NULL;
  if (ul >= 7 && strncasecmp(arg, "http://", 7) == 0)
    rest = arg + 7;
  else if (ul >= 8 && strncasecmp(arg, "https://", 8) == 0)
    rest = arg + 8;
  if (!rest) {
    vl_set_err(err, errlen, "\"%.*s\" is not an http:// or https:// URL", (int)VL_MIN(ul, 80), arg);
    return VL_EINVAL;
  }
  size_t rl = ul - (size_t)(rest - arg);
  size_t host = 0;
  while (host < rl && rest[host] != '/' && rest[host] != '?')
    host++;
  if (host == 0) {
    vl_set_err(err, errlen, "\"%.*s\" has no host", (int)VL_MIN(ul, 80), arg);
    return VL_EINVAL;
  }
  for (size_t i = 0; i < ul; i++) {
    unsigned char c = (unsigned char)arg[i];
    if (c <= 0x20 || c == 0x7f) {
      vl_set_err(err, errlen, "the URL holds a space or control character");
      return VL_EINVAL;
    }
  }
  if (host == rl || rest[host] == '?') {
    /* No path: Prometheus' conventional one. */
    size_t n = ul + sizeof("/metrics");
    t->url = vl_xmalloc(n);
    snprintf(t->url, n, "%.*s/metrics%.*s", (int)(rest - arg + (ptrdiff_t)host), arg,
             (int)(rl - host), rest + host);
  } else {
    t->url = vl_xstrndup(arg, ul);
  }
  if (!hash) {
    t->defaults = 1;
    for (size_t i = 0; vl_prom_default_metrics[i]; i++) {
      int k = add_selector(t, &cap);
      t->sels[k].name = vl_xstrdup(vl_prom_default_metrics[i]);
    }
    return 0;
  }
  const char *q = hash + 1;
  if (*skip_space(q) == '\0') {
    vl_set_err(err, errlen, "empty metric list after '#'");
    goto fail;
  }
  for (;;) {
    int k = add_selector(t, &cap);
    if (parse_selector(&q, &t->sels[k], err, errlen) != 0)
      goto fail;
    if (*q == '\0')
      break;
    if (*q != ',') {
      vl_set_err(err, errlen, "selector %s: unexpected \"%.16s\" (selectors are separated by ',')",
                 t->sels[k].name, q);
      goto fail;
    }
    q++;
  }
  return 0;

fail:
  vl_prom_target_free(t);
  return VL_EINVAL;
}

static const char *label_value(const vl_prom_sample_t *s, const char *name) {
  for (size_t i = 0; i < s->n_labels; i++) {
    if (strcmp(s->labels[i].name, name) == 0)
      return s->labels[i].value;
  }
  return "";
}

int vl_prom_select_match(const vl_prom_selector_t *sel, const vl_prom_sample_t *s) {
  if (strcmp(s->name, sel->name) != 0) {
    size_t n = strlen(sel->name);
    if (strncmp(s->name, sel->name, n) != 0 || strcmp(s->name + n, "_total") != 0)
      return 0;
  }
  for (size_t i = 0; i < sel->n_matchers; i++) {
    const vl_prom_matcher_t *m = &sel->matchers[i];
    const char *v = label_value(s, m->label);
    int hit;
    switch (m->op) {
    case VL_PROM_EQ:
    case VL_PROM_NE:
      hit = strcmp(v, m->value) == 0;
      break;
    default:
      hit = regexec(&m->re, v, 0, NULL, 0) == 0;
      break;
    }
    if (hit != (m->op == VL_PROM_EQ || m->op == VL_PROM_RE))
      return 0;
  }
  return 1;
}

int vl_prom_target_match(const vl_prom_target_t *t, const vl_prom_sample_t *s) {
  for (size_t i = 0; i < t->n_sels; i++) {
    if (vl_prom_select_match(&t->sels[i], s))
      return 1;
  }
  return 0;
}
