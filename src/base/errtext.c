#include "vlmload/errtext.h"
#include "vlmload/common.h"

#include <stdint.h>
#include <string.h>

/* Where the reader is: in text; in a tag's name, just past '<'; in the rest of a tag, up to '>';
 * in a comment, up to "-->"; in an entity, past '&'; or past the words, looking at nothing. */
enum { ST_TEXT, ST_TAG, ST_TAG_REST, ST_COMMENT, ST_ENTITY, ST_DONE };

/* Elements whose start or end ends a line of a page's text. */
static const char *const line_tags[] = {
    "title",   "h1",   "h2",  "h3",         "h4",     "h5",   "h6",     "p",      "div",
    "br",      "hr",   "li",  "tr",         "td",     "th",   "pre",    "table",  "body",
    "head",    "html", "ul",  "ol",         "dl",     "dt",   "dd",     "header", "footer",
    "section", "main", "nav", "blockquote", "center", "form", "address"};

void vl_errtext_reset(vl_errtext_t *t) {
  t->len = 0;
  t->state = ST_TEXT;
  t->html = -1;
  t->space = 0;
  t->tag_len = 0;
  t->raw = 0;
  t->dashes = 0;
  t->ent_len = 0;
}

static int is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* One byte of the words, after the space a white space run before it left. */
static void put(vl_errtext_t *t, char c) {
  if (t->space && t->len > 0) {
    t->space = 0;
    put(t, ' ');
    if (t->state == ST_DONE)
      return;
  }
  t->space = 0;
  if (t->len >= VL_ERRTEXT_MAX - 1) {
    t->state = ST_DONE;
    return;
  }
  t->text[t->len++] = c;
}

/* A line ended: the words are found once it held some. */
static void line_end(vl_errtext_t *t) {
  if (t->len > 0)
    t->state = ST_DONE;
  t->space = 0;
}

static void put_code_point(vl_errtext_t *t, uint32_t cp) {
  if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    cp = 0xfffd;
  if (cp < 0x80) {
    put(t, (char)cp);
  } else if (cp < 0x800) {
    put(t, (char)(0xc0 | (cp >> 6)));
    put(t, (char)(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    put(t, (char)(0xe0 | (cp >> 12)));
    put(t, (char)(0x80 | ((cp >> 6) & 0x3f)));
    put(t, (char)(0x80 | (cp & 0x3f)));
  } else {
    put(t, (char)(0xf0 | (cp >> 18)));
    put(t, (char)(0x80 | ((cp >> 12) & 0x3f)));
    put(t, (char)(0x80 | ((cp >> 6) & 0x3f)));
    put(t, (char)(0x80 | (cp & 0x3f)));
  }
}

/* The entity ended by ';': its character, or its bytes as they came when it is not one known. */
static void entity_end(vl_errtext_t *t) {
  static const struct {
    const char *name;
    uint32_t cp;
  } named[] = {{"amp", '&'},  {"lt", '<'},    {"gt", '>'},
               {"quot", '"'}, {"apos", '\''}, {"nbsp", ' '}};
  const char *e = t->ent;
  int n = t->ent_len;
  uint32_t cp = 0;
  int ok = 0;
  if (n >= 2 && e[0] == '#') {
    int hex = e[1] == 'x' || e[1] == 'X';
    ok = n > 1 + hex;
    for (int i = 1 + hex; i < n && ok; i++) {
      char c = e[i];
      int v = c >= '0' && c <= '9'          ? c - '0'
              : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
              : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                            : -1;
      ok = v >= 0;
      cp = cp > 0x10ffff ? cp : cp * (hex ? 16 : 10) + (uint32_t)(ok ? v : 0);
    }
  } else {
    for (size_t i = 0; i < VL_ARRAY_SIZE(named) && !ok; i++)
      if ((size_t)n == strlen(named[i].name) && memcmp(e, named[i].name, (size_t)n) == 0) {
        cp = named[i].cp;
        ok = 1;
      }
  }
  if (ok && cp == ' ') {
    t->space = 1; /* &nbsp; is white space among the words */
    return;
  }
  if (ok) {
    put_code_point(t, cp);
    return;
  }
  put(t, '&');
  for (int i = 0; i < n && t->state != ST_DONE; i++)
    put(t, e[i]);
  if (t->state != ST_DONE)
    put(t, ';');
}

static int tag_is(const vl_errtext_t *t, const char *name, int closing) {
  size_t n = strlen(name);
  return (size_t)t->tag_len == n + (size_t)closing && (!closing || t->tag[0] == '/') &&
         memcmp(t->tag + closing, name, n) == 0;
}

/* A tag's name has been read (the tag may go on to its '>'). */
static void tag_named(vl_errtext_t *t) {
  if (t->raw) {
    if (tag_is(t, "script", 1) || tag_is(t, "style", 1))
      t->raw = 0;
    return;
  }
  if (tag_is(t, "script", 0) || tag_is(t, "style", 0)) {
    t->raw = 1;
    return;
  }
  int closing = t->tag_len > 0 && t->tag[0] == '/';
  for (size_t i = 0; i < VL_ARRAY_SIZE(line_tags); i++)
    if (tag_is(t, line_tags[i], closing)) {
      line_end(t);
      return;
    }
}

/* One byte of a page, in its text. */
static void html_text(vl_errtext_t *t, unsigned char c) {
  if (c == '<') {
    t->state = ST_TAG;
    t->tag_len = 0;
  } else if (t->raw) {
    return;
  } else if (c == '&') {
    t->state = ST_ENTITY;
    t->ent_len = 0;
  } else if (is_space(c)) {
    t->space = 1;
  } else {
    put(t, (char)c);
  }
}

static void html_byte(vl_errtext_t *t, unsigned char c) {
  switch (t->state) {
  case ST_TEXT:
    html_text(t, c);
    return;
  case ST_TAG:
    if (is_alnum(c) || (t->tag_len == 0 && (c == '/' || c == '!')) ||
        (c == '-' && t->tag_len > 0 && t->tag[0] == '!')) {
      if (t->tag_len < (int)sizeof(t->tag))
        t->tag[t->tag_len++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
      if (t->tag_len == 3 && memcmp(t->tag, "!--", 3) == 0) {
        t->state = ST_COMMENT;
        t->dashes = 0;
      }
      return;
    }
    if (t->raw && !(t->tag_len > 1 && t->tag[0] == '/')) {
      t->state = ST_TEXT; /* a '<' inside a script: still its text */
      html_text(t, c);
      return;
    }
    tag_named(t);
    if (t->state != ST_DONE)
      t->state = c == '>' ? ST_TEXT : ST_TAG_REST;
    return;
  case ST_TAG_REST:
    if (c == '>')
      t->state = ST_TEXT;
    return;
  case ST_COMMENT:
    if (c == '>' && t->dashes >= 2)
      t->state = ST_TEXT;
    t->dashes = c == '-' ? t->dashes + 1 : 0;
    return;
  case ST_ENTITY:
    if (c == ';') {
      t->state = ST_TEXT;
      entity_end(t);
      return;
    }
    if ((is_alnum(c) || (c == '#' && t->ent_len == 0)) && t->ent_len < (int)sizeof(t->ent)) {
      t->ent[t->ent_len++] = (char)c;
      return;
    }
    /* Not an entity: its bytes are text, and so is c. */
    t->state = ST_TEXT;
    put(t, '&');
    for (int i = 0; i < t->ent_len && t->state != ST_DONE; i++)
      put(t, t->ent[i]);
    if (t->state != ST_DONE)
      html_text(t, c);
    return;
  default:
    return;
  }
}

void vl_errtext_feed(vl_errtext_t *t, const char *p, size_t n) {
  for (size_t i = 0; i < n && t->state != ST_DONE; i++) {
    unsigned char c = (unsigned char)p[i];
    if (t->html < 0) {
      if (is_space(c))
        continue;
      t->html = c == '<';
    }
    if (t->html) {
      html_byte(t, c);
    } else if (c == '\n' || c == '\r') {
      line_end(t);
    } else if (is_space(c)) {
      t->space = 1;
    } else {
      put(t, (char)c);
    }
  }
}

const char *vl_errtext_get(vl_errtext_t *t) {
  /* A character cut by the bound, or by the body's end, is left out whole. */
  size_t n = t->len, k = 0;
  while (k < n && k < 4 && ((unsigned char)t->text[n - 1 - k] & 0xc0) == 0x80)
    k++;
  if (k < n) {
    unsigned char lead = (unsigned char)t->text[n - 1 - k];
    size_t want = lead < 0x80 ? 1 : (lead & 0xe0) == 0xc0 ? 2 : (lead & 0xf0) == 0xe0 ? 3 : 4;
    if (lead >= 0xc0 && want > k + 1)
      n -= k + 1;
  }
  t->text[n] = '\0';
  return t->text;
}
