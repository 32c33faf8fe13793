#include "vlmload/lengths.h"
#include "vlmload/common.h"
#include "vlmload/units.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ distributions */

int vl_lengths_dist_parse(const char *s, vl_lengths_dist_t *d, char *err, size_t errlen) {
  static const char want[] = "want MEAN[:STDDEV[:MIN:MAX]] in tokens, e.g. 300 or 300:50:200:400";
  double v[4];
  int n = 0;
  const char *p = s;
  char part[64];
  memset(d, 0, sizeof(*d));
  while (n < 4) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (len == 0 || len >= sizeof(part)) {
      snprintf(err, errlen, "%s", want);
      return VL_EINVAL;
    }
    memcpy(part, p, len);
    part[len] = '\0';
    if (vl_units_double(part, &v[n]) != 0) {
      snprintf(err, errlen, "%s", want);
      return VL_EINVAL;
    }
    n++;
    if (!colon)
      break;
    p = colon + 1;
    if (n == 4) {
      snprintf(err, errlen, "%s", want);
      return VL_EINVAL;
    }
  }
  if (n == 3) {
    snprintf(err, errlen, "give both MIN and MAX, or neither (%s)", want);
    return VL_EINVAL;
  }
  d->mean = v[0];
  d->stddev = n > 1 ? v[1] : 0;
  d->min = 1;
  d->max = VL_LENGTHS_MAX;
  if (n == 4) {
    if (v[2] != floor(v[2]) || v[3] != floor(v[3]) || v[2] < 1 || v[3] > VL_LENGTHS_MAX ||
        v[2] > v[3]) {
      snprintf(err, errlen, "MIN and MAX must be whole numbers with 1 <= MIN <= MAX <= %d",
               VL_LENGTHS_MAX);
      return VL_EINVAL;
    }
    d->min = (int)v[2];
    d->max = (int)v[3];
  }
  if (d->mean < 1 || d->mean > VL_LENGTHS_MAX) {
    snprintf(err, errlen, "MEAN must be between 1 and %d tokens", VL_LENGTHS_MAX);
    return VL_EINVAL;
  }
  if (d->mean < d->min || d->mean > d->max) {
    snprintf(err, errlen, "MEAN must lie between MIN and MAX");
    return VL_EINVAL;
  }
  d->set = 1;
  return 0;
}

int vl_lengths_dist_draw(const vl_lengths_dist_t *d, vl_rng_t *r) {
  double x = d->mean;
  if (d->stddev > 0) {
    /* Box-Muller: exactly two uniforms per draw, so the stream's use is fixed. */
    double u1 = vl_rng_double(r), u2 = vl_rng_double(r);
    x += d->stddev * sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
  }
  x = floor(x + 0.5);
  if (x < d->min)
    x = d->min;
  if (x > d->max)
    x = d->max;
  return (int)x;
}

int vl_lengths_dist_max(const vl_lengths_dist_t *d) {
  return d->stddev > 0 ? d->max : (int)VL_MIN(floor(d->mean + 0.5), (double)d->max);
}

void vl_lengths_dist_format(const vl_lengths_dist_t *d, char *buf, size_t n) {
  if (d->min != 1 || d->max != VL_LENGTHS_MAX)
    snprintf(buf, n, "%.6g:%.6g:%d:%d", d->mean, d->stddev, d->min, d->max);
  else if (d->stddev > 0)
    snprintf(buf, n, "%.6g:%.6g", d->mean, d->stddev);
  else
    snprintf(buf, n, "%.6g", d->mean);
}

/* ------------------------------------------------------------------ synthetic text */

/* Common English words of every length, so that a tokenizer's sub-word pieces show. */
static const char *const vocab[VL_LENTEXT_WORDS] = {
    "the",         "of",          "and",        "to",          "in",          "is",
    "it",          "that",        "for",        "was",         "on",          "are",
    "with",        "as",          "at",         "be",          "this",        "have",
    "from",        "or",          "one",        "had",         "by",          "word",
    "but",         "not",         "what",       "all",         "were",        "we",
    "when",        "your",        "there",      "which",       "their",       "about",
    "would",       "these",       "other",      "people",      "number",      "little",
    "between",     "important",   "children",   "something",   "different",   "another",
    "picture",     "together",    "mountain",   "question",    "following",   "government",
    "information", "understand",  "everything", "experience",  "development", "particular",
    "community",   "environment", "university", "relationship"};

const char *vl_lentext_word(int i) {
  return vocab[i];
}

int vl_lentext_estimate(const char *word) {
  size_t n = strlen(word);
  return n <= 6 ? 1 : n <= 10 ? 2 : 3;
}

int vl_lentext_calibrate(vl_lentext_count_fn count, void *ud, int *word_tokens, int *calls) {
  char all[VL_LENTEXT_WORDS * 16], one[32];
  size_t off = 0;
  int base, total, rc;
  *calls = 0;
  for (int i = 0; i < VL_LENTEXT_WORDS; i++)
    off += (size_t)snprintf(all + off, sizeof(all) - off, " %s", vocab[i]);
  ++*calls;
  if ((rc = count(ud, "", &base)) != 0)
    return rc;
  ++*calls;
  if ((rc = count(ud, all, &total)) != 0)
    return rc;
  if (total - base == VL_LENTEXT_WORDS) {
    for (int i = 0; i < VL_LENTEXT_WORDS; i++)
      word_tokens[i] = 1;
    return 0;
  }
  /* Each word has a token at least: a group whose words make as many tokens has one each. */
  int kept = 0;
  for (int g = 0; g < VL_LENTEXT_WORDS; g += VL_LENTEXT_GROUP) {
    off = 0;
    for (int i = g; i < g + VL_LENTEXT_GROUP; i++)
      off += (size_t)snprintf(all + off, sizeof(all) - off, " %s", vocab[i]);
    ++*calls;
    if ((rc = count(ud, all, &total)) != 0)
      return rc;
    int ones = total - base == VL_LENTEXT_GROUP;
    for (int i = g; i < g + VL_LENTEXT_GROUP; i++)
      word_tokens[i] = ones;
    kept += ones;
  }
  if (kept)
    return 0;
  for (int i = 0; i < VL_LENTEXT_WORDS; i++) {
    int n;
    snprintf(one, sizeof(one), " %s", vocab[i]);
    ++*calls;
    if ((rc = count(ud, one, &n)) != 0)
      return rc;
    word_tokens[i] = VL_MAX(n - base, 1);
  }
  return 0;
}

/* splitmix64's finaliser: block ids to words. */
static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t vl_lentext_block_start(uint64_t id) {
  return mix(id) % VL_LENTEXT_SPREAD;
}

int vl_lentext_build(vl_lentext_t *t, const int *word_tokens, int max_run) {
  memset(t, 0, sizeof(*t));
  t->fill = -1;
  if (max_run < 1 || max_run > VL_LENGTHS_MAX)
    return VL_EINVAL;
  int most = 1, used[VL_LENTEXT_WORDS], n_used = 0;
  for (int i = 0; i < VL_LENTEXT_WORDS; i++) {
    t->word_tokens[i] = word_tokens ? word_tokens[i] : vl_lentext_estimate(vocab[i]);
    if (t->word_tokens[i] < 0)
      return VL_EINVAL;
    if (t->word_tokens[i] == 0)
      continue;
    used[n_used++] = i;
    most = VL_MAX(most, t->word_tokens[i]);
    if (t->word_tokens[i] == 1 && (t->fill < 0 || strlen(vocab[i]) < strlen(vocab[t->fill])))
      t->fill = i;
  }
  if (!n_used)
    return VL_EINVAL;
  t->exact = word_tokens != NULL;
  t->max_run = max_run;
  /* Every word has a token at least: max_run words past the last start hold any run. */
  t->n_words = VL_LENTEXT_SPREAD + (uint32_t)max_run + 1;
  size_t longest = 0;
  for (int i = 0; i < VL_LENTEXT_WORDS; i++)
    longest = VL_MAX(longest, strlen(vocab[i]) + 1);
  size_t cap = (size_t)t->n_words * longest + 1;
  t->text = malloc(cap);
  t->start = malloc(((size_t)t->n_words + 1) * sizeof(uint32_t));
  t->cum = malloc(((size_t)t->n_words + 1) * sizeof(uint32_t));
  if (!t->text || !t->start || !t->cum)
    goto fail;
  /* A fixed stream: the text (and so every block's) is the same in every run. */
  vl_rng_t rng;
  vl_rng_init(&rng, 0x6c656e67746873ull, 1);
  size_t off = 0;
  uint32_t tokens = 0;
  for (uint32_t w = 0; w < t->n_words; w++) {
    int k = used[vl_rng_range(&rng, 0, (uint64_t)n_used - 1)];
    t->start[w] = (uint32_t)off;
    t->cum[w] = tokens;
    t->text[off++] = ' ';
    size_t len = strlen(vocab[k]);
    memcpy(t->text + off, vocab[k], len);
    off += len;
    tokens += (uint32_t)t->word_tokens[k];
  }
  t->start[t->n_words] = (uint32_t)off;
  t->cum[t->n_words] = tokens;
  t->text[off] = '\0';
  if (t->fill >= 0) {
    size_t len = strlen(vocab[t->fill]) + 1;
    t->fill_max = most - 1;
    t->filler = malloc(len * (size_t)VL_MAX(t->fill_max, 1) + 1);
    if (!t->filler)
      goto fail;
    for (int i = 0; i < t->fill_max; i++) {
      t->filler[i * len] = ' ';
      memcpy(t->filler + i * len + 1, vocab[t->fill], len - 1);
    }
    t->filler[len * (size_t)t->fill_max] = '\0';
  }
  return 0;

fail:
  vl_lentext_free(t);
  return VL_ENOMEM;
}

void vl_lentext_free(vl_lentext_t *t) {
  free(t->text);
  free(t->start);
  free(t->cum);
  free(t->filler);
  memset(t, 0, sizeof(*t));
  t->fill = -1;
}

/* A run of n tokens from word w: the words [w, e) with the most tokens not past n, then filler
 * for what is left. Returns the segments written (1 or 2). */
static int run(const vl_lentext_t *t, uint32_t w, int n, vl_seg_t *seg) {
  uint32_t lo = w, hi = t->n_words; /* the answer e is in [lo, hi] */
  uint32_t want = t->cum[w] + (uint32_t)n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo + 1) / 2;
    if (t->cum[mid] <= want)
      lo = mid;
    else
      hi = mid - 1;
  }
  seg[0].p = t->text + t->start[w];
  seg[0].n = t->start[lo] - t->start[w];
  int left = (int)(want - t->cum[lo]);
  if (left <= 0 || !t->filler)
    return 1;
  size_t len = strlen(vocab[t->fill]) + 1;
  seg[1].p = t->filler;
  seg[1].n = len * (size_t)VL_MIN(left, t->fill_max);
  return 2;
}

int vl_lentext_prompt(const vl_lentext_t *t, uint64_t at, int n, vl_seg_t *seg) {
  return run(t, (uint32_t)(at % VL_LENTEXT_SPREAD), VL_MIN(n, t->max_run), seg);
}

int vl_lentext_blocks(const vl_lentext_t *t, const uint64_t *ids, int n_ids, int n, vl_seg_t *seg,
                      int room) {
  int k = 0;
  for (int i = 0; i < n_ids && n > 0 && k + 2 <= room; i++) {
    int take = i + 1 == n_ids ? n : VL_MIN(n, VL_LENGTHS_BLOCK);
    take = VL_MIN(take, t->max_run);
    k += run(t, (uint32_t)vl_lentext_block_start(ids[i]), take, seg + k);
    n -= take;
  }
  return k;
}
