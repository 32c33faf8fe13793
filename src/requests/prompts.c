#include "vlmload/prompts.h"
#include "vlmload/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Varied in length and task, as a chat front end sees them; all make sense with or without an
 * attached image. */
static const char *const builtin[] = {
    "Describe this image in detail.",
    "What is in the picture? Answer in one sentence.",
    "List every object you can see, one per line.",
    "Read any text visible in the image and transcribe it exactly.",
    "Is there a person in this image? Answer yes or no, then explain.",
    "What colours dominate the scene?",
    "Write a short caption suitable for a photo gallery.",
    "Count the distinct shapes and say which one is the largest.",
    "Explain what is happening here to a five-year-old.",
    "Give three keywords that describe the content, separated by commas.",
    "Estimate the time of day and the weather, and say what clues you used.",
    "Compare the left half of the picture with the right half.",
    "Describe the layout of this document: headings, columns, figures and tables.",
    "What would be a good alt text for this image on a website?",
    "Summarize the chart: what are the axes and what trend does it show?",
    "Identify the main subject and describe its position in the frame.",
    "Does anything in the image look unusual or out of place? Explain why.",
    "Write a haiku inspired by what you see.",
    "Translate any visible text into French.",
    "Describe the textures and materials of the surfaces in view.",
    "Suggest a title for this picture and justify it in two sentences.",
    "What might have happened just before this moment was captured?",
    "Rate the image quality from 1 to 10 (sharpness, exposure, noise) and explain the score.",
    "Give a JSON object with keys 'objects', 'colors' and 'scene' for this image.",
    "Explain the difference between a list and a tuple in Python, with an example.",
    "Write a SQL query that returns the ten most recent orders per customer.",
    "What are the main causes of inflation? Keep it under a hundred words.",
    "Summarize the plot of a heist story in which nothing goes to plan.",
    "Give step-by-step directions for making a cup of green tea.",
    "Which is heavier, a kilogram of feathers or a kilogram of steel? Explain.",
    "Write a polite email declining a meeting invitation for next Tuesday.",
    "Explain how a hash table handles collisions, and compare two strategies.",
    "Propose five names for a coffee shop run by robots.",
    "Describe the water cycle as a sequence of numbered steps.",
    "You are a museum guide. Introduce the exhibit shown here to a group of visitors, mentioning "
    "its history, the techniques involved, and one surprising fact, in a friendly tone.",
    "Analyse the composition of this image in terms of the rule of thirds, leading lines, balance "
    "and colour contrast, then suggest how a photographer could improve it.",
    "A user uploaded this screenshot of an error. Explain what the error probably means, list "
    "likely causes, and give the commands they should run to fix it.",
    "Write a detailed product description for an online store based on the item shown, covering "
    "appearance, likely materials, intended use and care instructions.",
};

static int add(vl_prompts_t *p, size_t *cap, const char *s, size_t n) {
  if (p->n == *cap) {
    *cap = *cap ? *cap * 2 : 64;
    p->items = vl_xrealloc(p->items, *cap * sizeof(char *));
  }
  char *d = vl_xmalloc(n + 1);
  memcpy(d, s, n);
  d[n] = '\0';
  p->items[p->n++] = d;
  return 0;
}

/* True when s holds no NUL and no control character other than tab. */
static int is_text(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x20 && ch != '\t')
      return 0;
  }
  return 1;
}

int vl_prompts_load(vl_prompts_t *p, const char *file, char *err, size_t errlen) {
  size_t cap = 0;
  memset(p, 0, sizeof(*p));
  if (!file) {
    for (size_t i = 0; i < VL_ARRAY_SIZE(builtin); i++)
      add(p, &cap, builtin[i], strlen(builtin[i]));
    return 0;
  }
  FILE *f = fopen(file, "rb");
  if (!f) {
    snprintf(err, errlen, "--prompts '%s': %s", file, strerror(errno));
    return VL_ENOENT;
  }
  char *line = NULL;
  size_t linecap = 0;
  ssize_t n;
  size_t lineno = 0;
  int rc = 0;
  while ((n = getline(&line, &linecap, f)) >= 0) {
    lineno++;
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
      n--;
    if (n == 0)
      continue;
    if (!is_text(line, (size_t)n)) {
      snprintf(err, errlen, "--prompts '%s': line %zu is not text", file, lineno);
      rc = VL_EINVAL;
      break;
    }
    add(p, &cap, line, (size_t)n);
  }
  if (!rc && ferror(f)) {
    snprintf(err, errlen, "--prompts '%s': %s", file, strerror(errno));
    rc = VL_EIO;
  }
  free(line);
  fclose(f);
  if (!rc && p->n == 0) {
    snprintf(err, errlen, "--prompts '%s': no prompt in the file", file);
    rc = VL_EINVAL;
  }
  if (rc)
    vl_prompts_free(p);
  return rc;
}

void vl_prompts_free(vl_prompts_t *p) {
  for (size_t i = 0; i < p->n; i++)
    free(p->items[i]);
  free(p->items);
  memset(p, 0, sizeof(*p));
}
