/* Prompt texts for requests: a built-in varied set, or one prompt per line of a file. */
#ifndef VLMLOAD_PROMPTS_H
#define VLMLOAD_PROMPTS_H

#include <stddef.h>

struct vl_lentext_s;

typedef struct vl_prompts_s {
  char **items; /* owned, NUL-terminated */
  size_t n;
  /* --input-tokens (lengths.h): the synthetic text prompts are cut from, built at start after the
   * server's tokenizer was asked; not owned; NULL without. */
  const struct vl_lentext_s *synthetic;
} vl_prompts_t;

/* Loads prompts from file, or the built-in set when file is NULL. Blank lines are skipped; a
 * trailing "\r" is removed. On failure writes a one-line reason to err and returns a VL_E* code
 * (VL_ENOENT unreadable, VL_EINVAL no prompt in the file or a line that is not UTF-8 text). */
int vl_prompts_load(vl_prompts_t *p, const char *file, char *err, size_t errlen);
void vl_prompts_free(vl_prompts_t *p);

#endif
