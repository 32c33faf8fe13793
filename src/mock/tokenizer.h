/* vlmmock's own tokenizer, deliberately not one token per word, so that a client which counts
 * words instead of asking the server is caught out. Its rule, applied left to right:
 *   - a run of ASCII letters is cut into pieces of at most 4 letters, one token each
 *     ("benchmark" is "benc" "hmar" "k": 3 tokens);
 *   - a run of ASCII digits is one token;
 *   - every other printable ASCII character (punctuation) is one token;
 *   - whitespace and control characters are no token;
 *   - every other code point (a UTF-8 sequence) is one token.
 * Pure and thread-safe; shared by the chat and /generate replies' usage and by POST /tokenize. */
#ifndef VLMMOCK_TOKENIZER_H
#define VLMMOCK_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

/* The tokens of the n bytes at s. When ids is not NULL, writes the first max token ids to it (a
 * hash of each piece: the same piece, the same id). */
uint64_t vl__tok_count(const char *s, size_t n, uint32_t *ids, size_t max);

#endif
