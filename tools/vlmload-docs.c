/* Writes vlmload's documentation from its option table and the subcommands' --help texts, so the
 * man pages, the shell completion and the option reference (docs/options.md) can never disagree
 * with --help.
 *
 *   vlmload-docs man             vlmload(1) in roff, with its subcommands
 *   vlmload-docs mock-man FILE   vlmmock(1) in roff, from the text `vlmmock --help` wrote to FILE
 *   vlmload-docs completion      a bash completion script
 *   vlmload-docs markdown        the option table of docs/options.md
 */
#include "vlmload/analyzecli.h"
#include "vlmload/config.h"
#include "../src/commands/comparecli.h"
#include "../src/commands/matrix/matrix.h"
#include "../src/commands/merge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints s for roff: backslashes doubled, a leading '.' or '\'' protected, '-' as \-. */
static void roffn(const char *s, size_t n) {
  int bol = 1;
  for (const char *end = s + n; s < end && *s; s++) {
    if (bol && (*s == '.' || *s == '\''))
      fputs("\\&", stdout);
    bol = *s == '\n';
    if (*s == '\\')
      fputs("\\e", stdout);
    else if (*s == '-')
      fputs("\\-", stdout);
    else
      putchar(*s);
  }
}

static void roff(const char *s) {
  roffn(s, strlen(s));
}

static void upper(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    putchar(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
}

/* What the text a --help prints is made of, line by line (see help_parse). */
typedef enum {
  H_BLANK,   /* an empty line */
  H_USAGE,   /* "Usage: ..."; text is what follows "Usage: " */
  H_HEADING, /* "Name:" or "Name: text" after a blank line; text is the name, rest the text */
  H_ITEM,    /* "  TAG  meaning": text is the tag (an option and its argument), rest the meaning */
  H_MORE,    /* a deeply indented line that continues an item's meaning; text without indent */
  H_TEXT,    /* any other line; text without indent, line the whole line */
} hkind_t;

typedef struct {
  hkind_t kind;
  const char *line, *text, *rest;
  size_t line_len, text_len, rest_len;
} hline_t;

/* An item's tag is indented by less than this; its continuation lines by this much or more. */
#define DEEP_INDENT 12

/* Calls fn for every line of a --help text. An item is an indented line whose tag is followed by
 * two or more spaces and its meaning; a heading is an unindented line after a blank one that
 * starts with a name of letters and spaces (at most 20 characters) and a colon. */
static void help_parse(const char *s, void (*fn)(void *, const hline_t *), void *ctx) {
  int prev_blank = 1, in_item = 0;
  while (*s) {
    const char *nl = strchr(s, '\n');
    size_t len = nl ? (size_t)(nl - s) : strlen(s);
    hline_t l = {.line = s, .line_len = len};
    size_t ind = 0;
    while (ind < len && s[ind] == ' ')
      ind++;
    l.text = s + ind;
    l.text_len = len - ind;
    const char *colon = memchr(s, ':', len);
    size_t name_len = colon ? (size_t)(colon - s) : 0;
    int named = colon && name_len > 0 && name_len <= 20 && s[0] >= 'A' && s[0] <= 'Z' &&
                (name_len + 1 == len || colon[1] == ' ');
    for (size_t i = 0; named && i < name_len; i++)
      named = (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || s[i] == ' ';
    const char *gap = ind > 0 && ind < DEEP_INDENT ? strstr(l.text, "  ") : NULL;
    if (l.text_len == 0) {
      l.kind = H_BLANK;
    } else if (ind == 0 && len > 7 && strncmp(s, "Usage: ", 7) == 0) {
      l.kind = H_USAGE;
      l.text = s + 7;
      l.text_len = len - 7;
    } else if (ind == 0 && prev_blank && named) {
      l.kind = H_HEADING;
      l.text_len = name_len;
      l.rest = colon + 1 + (name_len + 1 < len);
      l.rest_len = len - (size_t)(l.rest - s);
    } else if (ind >= DEEP_INDENT && in_item) {
      l.kind = H_MORE;
    } else if (gap && gap < s + len) {
      l.kind = H_ITEM;
      l.text_len = (size_t)(gap - l.text);
      l.rest = gap;
      while (l.rest < s + len && *l.rest == ' ')
        l.rest++;
      l.rest_len = len - (size_t)(l.rest - s);
    } else {
      l.kind = H_TEXT;
    }
    if (l.kind == H_ITEM && l.rest_len == 0)
      l.kind = H_TEXT;
    prev_blank = l.kind == H_BLANK;
    in_item = l.kind == H_ITEM || l.kind == H_MORE;
    fn(ctx, &l);
    s += len + (nl != NULL);
  }
}

/* State of help_man: a page of its own (vlmmock(1)) or a section of vlmload(1). */
typedef struct {
  int page;          /* 1: Usage is the SYNOPSIS, bare headings subsections of OPTIONS */
  int in_item;       /* the last output was an item's paragraph */
  int need_pp;       /* a blank line was seen: the next text starts a paragraph */
  int nofill;        /* inside an Examples block, written line for line */
  int options_shown; /* page: the OPTIONS heading has been written */
} manctx_t;

static void man_line(void *vctx, const hline_t *l) {
  manctx_t *m = vctx;
  if (m->nofill && l->kind != H_HEADING) {
    if (l->kind != H_BLANK) {
      roffn(l->line, l->line_len);
      putchar('\n');
    }
    return;
  }
  switch (l->kind) {
  case H_BLANK:
    m->need_pp = 1;
    m->in_item = 0;
    break;
  case H_USAGE:
    fputs(m->page ? ".SH SYNOPSIS\n" : ".PP\n", stdout);
    fputs("\\fB", stdout);
    roffn(l->text, l->text_len);
    fputs("\\fR\n", stdout);
    if (m->page)
      fputs(".SH DESCRIPTION\n", stdout);
    m->need_pp = m->in_item = 0;
    break;
  case H_HEADING: {
    if (m->nofill)
      fputs(".fi\n", stdout);
    int examples = l->text_len == 8 && strncmp(l->text, "Examples", 8) == 0;
    if (m->page && (l->rest_len > 0 || examples)) {
      fputs(".SH ", stdout);
      upper(l->text, l->text_len);
      putchar('\n');
    } else {
      if (m->page && !m->options_shown)
        fputs(".SH OPTIONS\n", stdout);
      m->options_shown = 1;
      fputs(".SS ", stdout);
      roffn(l->text, l->text_len);
      putchar('\n');
    }
    if (examples) {
      fputs(".nf\n", stdout);
      m->nofill = 1;
    }
    if (l->rest_len > 0) {
      roffn(l->rest, l->rest_len);
      putchar('\n');
    }
    m->need_pp = m->in_item = 0;
    break;
  }
  case H_ITEM:
    fputs(".TP\n\\fB", stdout);
    roffn(l->text, l->text_len);
    fputs("\\fR\n", stdout);
    roffn(l->rest, l->rest_len);
    putchar('\n');
    m->in_item = 1;
    m->need_pp = 0;
    break;
  case H_MORE:
    roffn(l->text, l->text_len);
    putchar('\n');
    break;
  case H_TEXT:
    if (m->in_item || m->need_pp)
      fputs(".PP\n", stdout);
    m->in_item = m->need_pp = 0;
    roffn(l->text, l->text_len);
    putchar('\n');
    break;
  }
}

/* Writes a --help text as roff: as a page of its own, or as the body of a section. */
static void help_man(const char *text, int page) {
  manctx_t m = {.page = page};
  help_parse(text, man_line, &m);
  if (m.nofill)
    fputs(".fi\n", stdout);
}

/* Returns what write() writes, as a string the caller frees. */
static char *capture(void (*write)(FILE *)) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) {
    perror("vlmload-docs");
    exit(1);
  }
  write(f);
  fclose(f);
  return buf;
}

static void man(void) {
  vl_option_doc_t d;
  printf(".TH VLMLOAD 1 \"\" \"vlmload %s\" \"User Commands\"\n", VL_VERSION);
  puts(".SH NAME\nvlmload \\- load generator for vision\\-language model servers");
  puts(".SH SYNOPSIS\n.B vlmload\n[\\fIOPTION\\fR]...\n.br\n.B vlmload analyze\n"
       "\\fITIMELINE.csv\\fR [\\fIOPTION\\fR]...\n.br\n.B vlmload compare\n"
       "\\fIBASELINE\\fR \\fIRUN\\fR... [\\fIOPTION\\fR]...\n.br\n.B vlmload merge\n"
       "\\fIOUT.json\\fR \\fIIN.json\\fR... [\\fB\\-\\-timeline\\fR \\fIOUT.csv\\fR]\n.br\n"
       ".B vlmload matrix\n\\fIFILE.json\\fR [\\fIOPTION\\fR]... [\\fB\\-\\-\\fR "
       "\\fIOPTION\\fR...]");
  puts(".SH DESCRIPTION\n"
       "vlmload drives an OpenAI\\-compatible chat completions server (SGLang, vLLM and others) "
       "with controlled load: open\\-loop arrivals on an absolute schedule, a cap on requests in "
       "flight, text and image requests, and cache flushes at a chosen cadence. It measures "
       "end\\-to\\-end latency from each request's intended start, time to first token, "
       "inter\\-token latency, send lag, throughput and errors by class, and writes a per\\-second "
       "timeline that can be joined with any memory monitor. The subcommands \\fBanalyze\\fR and "
       "\\fBmerge\\fR (sections ANALYZE and MERGE) read what a run wrote; \\fBcompare\\fR (section "
       "COMPARE) puts runs' figures side by side; \\fBmatrix\\fR "
       "(section MATRIX) runs a list of loads, each against its own server, and compares their "
       "memory.");
  for (size_t i = 0; vl_config_option_doc(i, &d) == 0; i++) {
    if (d.section) {
      printf(".SH ");
      upper(d.section, strlen(d.section));
      puts(" OPTIONS");
    }
    printf(".TP\n.B \\-\\-");
    roff(d.name);
    if (d.metavar) {
      printf(" \\fI");
      roff(d.metavar);
      printf("\\fR");
    }
    putchar('\n');
    roff(d.help);
    putchar('\n');
  }
  char *analyze = capture(vl_analyzecli_usage), *merge = capture(vl_merge_usage);
  puts(".SH ANALYZE");
  help_man(analyze, 0);
  char *cmp = capture(vl_comparecli_usage);
  puts(".SH COMPARE");
  help_man(cmp, 0);
  free(cmp);
  puts(".SH MERGE");
  help_man(merge, 0);
  char *mx = capture(vl_matrix_usage);
  puts(".SH MATRIX");
  help_man(mx, 0);
  free(mx);
  free(analyze);
  free(merge);
  puts(".SH EXAMPLES\n.nf");
  roff(vl_config_examples());
  puts(".fi\n.SH SEE ALSO\n.BR vlmmock (1)");
}

static int mock_man(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "vlmload-docs: %s: cannot open\n", path);
    return 1;
  }
  size_t cap = 1 << 16, len = 0, n;
  char *text = malloc(cap);
  while (text && (n = fread(text + len, 1, cap - 1 - len, f)) > 0) {
    len += n;
    if (len + 1 == cap) {
      char *grown = realloc(text, cap *= 2);
      if (!grown)
        free(text);
      text = grown;
    }
  }
  fclose(f);
  if (!text || len == 0) {
    fprintf(stderr, "vlmload-docs: %s: empty or unreadable\n", path);
    free(text);
    return 1;
  }
  text[len] = '\0';
  printf(".TH VLMMOCK 1 \"\" \"vlmload %s\" \"User Commands\"\n", VL_VERSION);
  puts(".SH NAME\nvlmmock \\- mock vision\\-language model server for testing load generators");
  help_man(text, 1);
  puts(".SH SEE ALSO\n.BR vlmload (1)");
  free(text);
  return 0;
}

/* Whether an option's argument names a file: FILE, DIR or PATH, or a name with an extension. */
static int file_metavar(const char *m, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (m[i] == '.' ||
        (i + 3 < n && (memcmp(m + i, "FILE", 4) == 0 || memcmp(m + i, "PATH", 4) == 0)) ||
        (i + 2 < n && memcmp(m + i, "DIR", 3) == 0))
      return 1;
  return 0;
}

/* Collects a subcommand's options from its --help items for the completion script. */
typedef struct {
  char names[2048];  /* every --name, space-separated */
  char files[1024];  /* the options whose argument is a file, '|'-separated (a case pattern) */
  char other[1024];  /* the options that take another argument, '|'-separated */
  char values[1024]; /* bash case arms: "--opt) values" lines */
} subopts_t;

static void cat(char *buf, size_t cap, const char *sep, const char *s, size_t n) {
  size_t len = strlen(buf);
  snprintf(buf + len, cap - len, "%s%.*s", len ? sep : "", (int)n, s);
}

static void sub_line(void *vctx, const hline_t *l) {
  subopts_t *o = vctx;
  if (l->kind != H_ITEM)
    return;
  const char *tag = l->text, *end = l->text + l->text_len, *opt = NULL;
  for (const char *p = tag; p + 1 < end; p++)
    if (p[0] == '-' && p[1] == '-')
      opt = p;
  if (!opt)
    return;
  const char *name_end = opt;
  while (name_end < end && *name_end != ' ')
    name_end++;
  size_t name_len = (size_t)(name_end - opt);
  cat(o->names, sizeof o->names, " ", opt, name_len);
  if (name_end == end)
    return;
  const char *mv = name_end + 1;
  size_t mv_len = (size_t)(end - mv);
  if (file_metavar(mv, mv_len)) {
    cat(o->files, sizeof o->files, "|", opt, name_len);
  } else if (memchr(mv, '|', mv_len)) {
    char arm[256];
    snprintf(arm, sizeof arm, "      %.*s) COMPREPLY=($(compgen -W '", (int)name_len, opt);
    size_t a = strlen(arm);
    for (size_t i = 0; i < mv_len && a + 1 < sizeof arm; i++)
      arm[a++] = mv[i] == '|' ? ' ' : mv[i];
    arm[a] = '\0';
    cat(o->values, sizeof o->values, "", arm, strlen(arm));
    const char *close = "' -- \"$cur\")); return ;;\n";
    cat(o->values, sizeof o->values, "", close, strlen(close));
  } else {
    cat(o->other, sizeof o->other, "|", opt, name_len);
  }
}

static void sub_completion(const char *name, void (*usage)(FILE *)) {
  subopts_t o;
  memset(&o, 0, sizeof o);
  char *text = capture(usage);
  help_parse(text, sub_line, &o);
  free(text);
  printf("  %s)\n    case \"$prev\" in\n", name);
  if (o.files[0])
    printf("      %s) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", o.files);
  fputs(o.values, stdout);
  if (o.other[0])
    printf("      %s) return ;;\n", o.other);
  printf("    esac\n"
         "    if [[ $cur == -* ]]; then\n"
         "      COMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n"
         "    else\n"
         "      COMPREPLY=($(compgen -f -- \"$cur\"))\n"
         "    fi\n"
         "    return ;;\n",
         o.names);
}

static void completion(void) {
  vl_option_doc_t d;
  printf("# bash completion for vlmload, generated from its option table and the --help of its\n"
         "# subcommands\n"
         "_vlmload() {\n"
         "  local cur prev sub=\n"
         "  cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
         "  prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
         "  if [ \"$COMP_CWORD\" -gt 1 ]; then\n"
         "    case \"${COMP_WORDS[1]}\" in analyze|compare|merge|matrix) sub=\"${COMP_WORDS[1]}\" ;; esac\n"
         "  fi\n"
         "  case \"$sub\" in\n");
  sub_completion("analyze", vl_analyzecli_usage);
  sub_completion("compare", vl_comparecli_usage);
  sub_completion("merge", vl_merge_usage);
  sub_completion("matrix", vl_matrix_usage);
  printf("  esac\n  case \"$prev\" in\n");
  /* Options whose value is a path complete file names, those with a fixed set of values offer
   * them, and the other options that take a value offer nothing (not option names). */
  printf("    ");
  int first = 1;
  for (size_t i = 0; vl_config_option_doc(i, &d) == 0; i++) {
    if (d.metavar && !d.values && (strstr(d.metavar, "FILE") || strstr(d.metavar, "DIR"))) {
      printf("%s--%s", first ? "" : "|", d.name);
      first = 0;
    }
  }
  printf(")\n      COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n");
  for (size_t i = 0; vl_config_option_doc(i, &d) == 0; i++)
    if (d.values)
      printf("    --%s) COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return ;;\n", d.name, d.values);
  printf("    ");
  first = 1;
  for (size_t i = 0; vl_config_option_doc(i, &d) == 0; i++) {
    if (d.metavar && !d.values && !strstr(d.metavar, "FILE") && !strstr(d.metavar, "DIR")) {
      printf("%s--%s", first ? "" : "|", d.name);
      first = 0;
    }
  }
  printf(") return ;;\n  esac\n  local words='");
  for (size_t i = 0; vl_config_option_doc(i, &d) == 0; i++)
    printf("%s--%s", i ? " " : "", d.name);
  printf("'\n"
         "  [ \"$COMP_CWORD\" -eq 1 ] && words=\"analyze compare matrix merge $words\"\n"
         "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
         "}\n"
         "complete -F _vlmload vlmload\n");
}

/* Escapes '|' for a Markdown table cell. */
static void cell(const char *s) {
  for (; *s; s++) {
    if (*s == '|')
      fputs("\\|", stdout);
    else
      putchar(*s);
  }
}

static void markdown(void) {
  vl_option_doc_t d;
  puts("| option | meaning |\n| --- | --- |");
  for (size_t i = 0; vl_config_option_doc(i, &d) == 0; i++) {
    printf("| `--%s%s", d.name, d.metavar ? " " : "");
    if (d.metavar)
      cell(d.metavar);
    printf("` | ");
    cell(d.help);
    puts(" |");
  }
}

int main(int argc, char **argv) {
  int rc = 0;
  if (argc == 2 && strcmp(argv[1], "man") == 0)
    man();
  else if (argc == 3 && strcmp(argv[1], "mock-man") == 0)
    rc = mock_man(argv[2]);
  else if (argc == 2 && strcmp(argv[1], "completion") == 0)
    completion();
  else if (argc == 2 && strcmp(argv[1], "markdown") == 0)
    markdown();
  else {
    fprintf(stderr, "usage: vlmload-docs man|completion|markdown|mock-man HELP.txt\n");
    return 2;
  }
  return rc ? rc : ferror(stdout) ? 1 : 0;
}
