/* Input and output lengths: the distributions of --input-tokens and --output-tokens, and the
 * synthetic prompt text whose token counts are known at every word.
 *
 * The text is one long sequence of words from a fixed vocabulary, each word stored with its
 * leading space (" word"), so any run of whole words tokenizes, in a tokenizer that splits on
 * spaces before it merges (byte-level BPE, SentencePiece, the mock's), into the sum of its words'
 * tokens. The words' token counts are measured once at start against the server's own tokenizer
 * (vl_lentext_calibrate, through POST /tokenize) or estimated; a prompt of n tokens is then a run
 * of words starting at a chosen word, plus up to a few one-token filler words to make n exact.
 * Prompts are segments pointing into the text: nothing is built or allocated per request.
 *
 * The text is lowercase ASCII letters and spaces: it goes into JSON strings as it is.
 */
#ifndef VLMLOAD_LENGTHS_H
#define VLMLOAD_LENGTHS_H

#include "vlmload/body.h"
#include "vlmload/rng.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ distributions */

/* MEAN[:STDDEV[:MIN:MAX]]: a normal distribution of token counts, rounded and clamped to
 * [MIN, MAX]; STDDEV 0 (or absent) gives MEAN exactly. Without MIN:MAX the bounds are 1 and
 * VL_LENGTHS_MAX. */
#define VL_LENGTHS_MAX 1000000
typedef struct vl_lengths_dist_s {
  int set; /* the option was given */
  double mean, stddev;
  int min, max;
} vl_lengths_dist_t;

/* Parses s. Returns 0, or VL_EINVAL with a one-line reason (what is wanted) in err. */
int vl_lengths_dist_parse(const char *s, vl_lengths_dist_t *d, char *err, size_t errlen);

/* One draw: consumes two uniforms of r when stddev > 0, none otherwise. */
int vl_lengths_dist_draw(const vl_lengths_dist_t *d, vl_rng_t *r);

/* The largest value a draw can give. */
int vl_lengths_dist_max(const vl_lengths_dist_t *d);

/* The distribution as the option takes it back ("300", "300:50:200:400"). */
void vl_lengths_dist_format(const vl_lengths_dist_t *d, char *buf, size_t n);

/* ------------------------------------------------------------------ synthetic text */

/* Tokens of one Mooncake trace block (hash_ids name blocks of this many tokens). */
#define VL_LENGTHS_BLOCK 512

/* Requests start their text at a word in [0, VL_LENTEXT_SPREAD): prompts differ from their first
 * token, so a server's prefix cache does not make every request a hit. */
#define VL_LENTEXT_SPREAD 65536

/* Segments a prompt of n_blocks prefix blocks (0: a plain prompt) can take. */
#define VL_LENTEXT_SEGS(n_blocks) (2 * ((n_blocks) > 0 ? (n_blocks) : 1))

/* The vocabulary's size. */
#define VL_LENTEXT_WORDS 64

typedef struct vl_lentext_s {
  char *text;      /* the words, each " word"; owned */
  uint32_t *start; /* byte offset of word i in text, n_words + 1 entries; owned */
  uint32_t *cum;   /* tokens of words [0, i), n_words + 1 entries; owned */
  uint32_t n_words;
  int word_tokens[VL_LENTEXT_WORDS]; /* each vocabulary word's tokens (with its space); 0: the
                                        word is left out of the text */
  int fill;                          /* the vocabulary word used as one-token filler; -1: none */
  char *filler; /* that word repeated fill_max times; owned; NULL without a filler */
  int fill_max; /* the most filler words a prompt can need */
  int max_run;  /* the longest run of tokens the text was built for */
  int exact;    /* word_tokens were measured by the server's tokenizer, not estimated */
} vl_lentext_t;

/* The vocabulary word i (no space), i < VL_LENTEXT_WORDS. */
const char *vl_lentext_word(int i);

/* The estimate used without a tokenizer: one token for a word of up to 6 letters, two up to 10,
 * three beyond (with its space). Real tokenizers and this estimate may differ by VL_LENTEXT_
 * ESTIMATE_ERROR_PCT per cent on the vocabulary's mix. */
int vl_lentext_estimate(const char *word);
#define VL_LENTEXT_ESTIMATE_ERROR_PCT 30

/* Counts the tokens of text (NUL-terminated) in the server's tokenizer: 0, or a VL_E* code. */
typedef int (*vl_lentext_count_fn)(void *ud, const char *text, int *count);

/* Measures the vocabulary's words' tokens (each with its leading space) into word_tokens, in a
 * few calls: one for the empty text (the special tokens every call adds, taken off the others),
 * one for the whole vocabulary (done when that is one token a word, as in the usual large
 * vocabularies), then one per group of VL_LENTEXT_GROUP words: the groups of one token a word
 * are kept and the others left out (0). Only when no group is, one call per word. *calls gets
 * the number of calls made. Returns 0, or the first failing call's code (word_tokens unset). */
#define VL_LENTEXT_GROUP 8
int vl_lentext_calibrate(vl_lentext_count_fn count, void *ud, int *word_tokens, int *calls);

/* Builds the text for runs of up to max_run tokens at any start below VL_LENTEXT_SPREAD. The
 * words are drawn from a fixed stream: the same for every run against the same tokenizer, so a
 * block's text (below) is the same in every run. word_tokens: the measured counts, 0 for a word
 * to leave out (exact = 1), or NULL for the estimate over the whole vocabulary.
 * Returns 0, VL_EINVAL (max_run out of [1, VL_LENGTHS_MAX], a count below 1) or VL_ENOMEM. */
int vl_lentext_build(vl_lentext_t *t, const int *word_tokens, int max_run);
void vl_lentext_free(vl_lentext_t *t);

/* Tokens in the text's words [from, to). */
static inline uint64_t vl_lentext_tokens(const vl_lentext_t *t, uint32_t from, uint32_t to) {
  return (uint64_t)t->cum[to] - t->cum[from];
}

/* A prompt of n tokens (1 <= n <= max_run) starting at word `at` % VL_LENTEXT_SPREAD: writes its
 * segments (one run of words, and filler words when the run falls short) into seg, which has
 * room for at least 2. Returns the number of segments. The prompt has n tokens exactly when the
 * counts are right and the vocabulary has a one-token word; else it falls short by less than the
 * largest word. */
int vl_lentext_prompt(const vl_lentext_t *t, uint64_t at, int n, vl_seg_t *seg);

/* A prompt of n tokens made of prefix blocks: block ids[i]'s text is VL_LENGTHS_BLOCK tokens
 * from a word that depends on the id alone, so requests sharing leading ids share that prefix.
 * The blocks follow in order, the last cut (or, when n passes n_ids blocks, lengthened) to make n
 * tokens; blocks past n are left out. n_ids >= 1 and n <= max_run, where the last block's run
 * is at most max_run. Writes at most VL_LENTEXT_SEGS(n_ids) segments (room must be at least that)
 * and returns the number written. */
int vl_lentext_blocks(const vl_lentext_t *t, const uint64_t *ids, int n_ids, int n, vl_seg_t *seg,
                      int room);

/* The word block id starts at. */
uint64_t vl_lentext_block_start(uint64_t id);

#endif
