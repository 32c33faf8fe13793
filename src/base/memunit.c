/* Units of memory in series names and programs' output (memunit.h). */
#include "vlmload/memunit.h"
#include "vlmload/common.h"

#include <string.h>
#include <strings.h>

static int alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Whether the n bytes at w are word, in any case. */
static int is(const char *w, size_t n, const char *word) {
  return strlen(word) == n && strncasecmp(w, word, n) == 0;
}

/* The power of 1024 a prefix letter stands for (k 1, m 2, g 3, t 4), or 0. */
static int power(char c) {
  switch (c | 0x20) {
  case 'k':
    return 1;
  case 'm':
    return 2;
  case 'g':
    return 3;
  case 't':
    return 4;
  default:
    return 0;
  }
}

static double bytes_of(int p) {
  double b = 1;
  while (p-- > 0)
    b *= 1024;
  return b;
}

/* A unit as a name spells it: "bytes", "kb", "kib", "kbytes", "kilobytes", "kibibytes" and the
 * same with m, g, t; a longer word ending in "bytes" reads as bytes. Returns bytes or 0. */
static double name_word(const char *w, size_t n) {
  static const char *const prefixes[][2] = {
      {"kilo", "kibi"}, {"mega", "mebi"}, {"giga", "gibi"}, {"tera", "tebi"}};
  if (n >= 5 && strncasecmp(w + n - 5, "bytes", 5) == 0) {
    size_t pl = n - 5;
    if (pl == 1 && power(w[0]))
      return bytes_of(power(w[0]));
    for (int p = 0; p < 4; p++)
      if (is(w, pl, prefixes[p][0]) || is(w, pl, prefixes[p][1]))
        return bytes_of(p + 1);
    return 1;
  }
  if ((n == 2 || (n == 3 && (w[1] | 0x20) == 'i')) && power(w[0]) && (w[n - 1] | 0x20) == 'b')
    return bytes_of(power(w[0]));
  return 0;
}

double vl_memunit_word(const char *w, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((w[i] >= 'a' && w[i] <= 'z') || (w[i] >= 'A' && w[i] <= 'Z')))
      return 0;
  if (is(w, n, "b") || is(w, n, "byte") || is(w, n, "bytes"))
    return 1;
  /* K, Ki as free and du print them. */
  if ((n == 1 || (n == 2 && (w[1] | 0x20) == 'i')) && power(w[0]))
    return bytes_of(power(w[0]));
  return name_word(w, n);
}

/* Calls the walk over the words of name[0..n), text in {...} left out, until fn returns nonzero;
 * returns that value or 0. */
static double first_word(const char *name, size_t n, double (*fn)(const char *, size_t)) {
  int depth = 0;
  for (size_t i = 0; i < n;) {
    if (name[i] == '{')
      depth++;
    else if (name[i] == '}' && depth > 0)
      depth--;
    if (depth > 0 || !alnum(name[i])) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < n && alnum(name[j]))
      j++;
    double v = fn(name + i, j - i);
    if (v != 0)
      return v;
    i = j;
  }
  return 0;
}

/* A word of a share: one that begins with "perc" or "pct", ends with "pct", or begins or ends
 * with "ratio" ("duration" does not). */
static double share_word(const char *w, size_t n) {
  int head = (n >= 4 && strncasecmp(w, "perc", 4) == 0) ||
             (n >= 3 && strncasecmp(w, "pct", 3) == 0) ||
             (n >= 5 && strncasecmp(w, "ratio", 5) == 0);
  int tail = (n >= 3 && strncasecmp(w + n - 3, "pct", 3) == 0) ||
             (n >= 5 && strncasecmp(w + n - 5, "ratio", 5) == 0) ||
             (n >= 6 && strncasecmp(w + n - 6, "ratios", 6) == 0);
  return head || tail;
}

/* The last word of the n bytes at s (a metric name: words split at '_' and ':'). */
static int last_word_is_count(const char *s, size_t n) {
  size_t e = n;
  while (e > 0 && !alnum(s[e - 1]))
    e--;
  size_t b = e;
  while (b > 0 && alnum(s[b - 1]))
    b--;
  static const char *const parts[] = {"total", "count", "sum", "bucket", "created"};
  for (size_t i = 0; i < VL_ARRAY_SIZE(parts); i++)
    if (is(s + b, e - b, parts[i]))
      return 1;
  return 0;
}

double vl_memunit_series(const char *name) {
  if (strncmp(name, "prom.", 5) == 0) {
    /* The metric: after the last '.' before the labels (a label value may hold dots), up to the
     * labels or a ~N that tells two series of one name apart. */
    size_t end = strcspn(name, "{");
    size_t start = 5;
    for (size_t i = 5; i < end; i++)
      if (name[i] == '.')
        start = i + 1;
    const char *m = name + start;
    size_t ml = strcspn(m, "{~");
    if (last_word_is_count(m, ml))
      return 0;
    double b = first_word(m, ml, name_word);
    return b > 0 ? b : 0;
  }
  /* The monitor's count of glibc arena heaps. */
  if (strncmp(name, "arenas.", 7) == 0)
    return 0;
  double b = first_word(name, strlen(name), name_word);
  if (b > 0)
    return b;
  if (first_word(name, strlen(name), share_word) != 0)
    return 0;
  return VL_MEMUNIT_UNSTATED;
}

const char *vl_memunit_label(double bytes) {
  static const char *const labels[] = {"bytes", "kB", "MB", "GB", "TB"};
  for (int p = 0; p < 5; p++)
    if (bytes == bytes_of(p))
      return labels[p];
  return "";
}
