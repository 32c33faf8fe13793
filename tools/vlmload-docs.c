/* Writes vlmload's documentation from its option table, so the man page, the shell completion and
 * the README's reference table can never disagree with --help.
 *
 *   vlmload-docs man         vlmload(1) in roff
 *   vlmload-docs completion  a bash completion script
 *   vlmload-docs markdown    the README's option table
 */
#include "vlmload/config.h"

#include <stdio.h>
#include <string.h>

/* Prints s for roff: backslashes doubled, a leading '.' or '\'' protected, '-' as \-. */
static void roff(const char *s) {
  int bol = 1;
  for (; *s; s++) {
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

static void man(void) {
  vl_option_doc_t d;
  printf(".TH VLMLOAD 1 \"\" \"vlmload %s\" \"User Commands\"\n", VL_VERSION);
  puts(".SH NAME\nvlmload \\- load generator for vision\\-language model servers");
  puts(".SH SYNOPSIS\n.B vlmload\n[\\fIOPTION\\fR]...\n.br\n.B vlmload analyze\n"
       "\\fITIMELINE.csv\\fR [\\fIOPTION\\fR]...\n.br\n.B vlmload merge\n"
       "\\fIOUT.json\\fR \\fIIN.json\\fR... [\\fB\\-\\-timeline\\fR \\fIOUT.csv\\fR]");
  puts(".SH DESCRIPTION\n"
       "vlmload drives an OpenAI\\-compatible chat completions server (SGLang, vLLM and others) "
       "with controlled load: open\\-loop arrivals on an absolute schedule, a cap on requests in "
       "flight, text and image requests, and cache flushes at a chosen cadence. It measures "
       "end\\-to\\-end latency from each request's intended start, time to first token, "
       "inter\\-token latency, send lag, throughput and errors by class, and writes a per\\-second "
       "timeline that can be joined with any memory monitor.");
  for (size_t i = 0; vl_config_option_doc(i, &d) == 0; i++) {
    if (d.section) {
      printf(".SH ");
      for (const char *p = d.section; *p; p++)
        putchar(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
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
  puts(".SH EXAMPLES\n.nf");
  roff(vl_config_examples());
  puts(".fi\n.SH SEE ALSO\n.BR vlmmock (1)");
}

static void completion(void) {
  vl_option_doc_t d;
  printf("# bash completion for vlmload, generated from its option table\n"
         "_vlmload() {\n"
         "  local cur prev\n"
         "  cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
         "  prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
         "  case \"$prev\" in\n");
  /* Options whose value is a path complete file names; the rest take no completion. */
  printf("    ");
  int first = 1;
  for (size_t i = 0; vl_config_option_doc(i, &d) == 0; i++) {
    if (d.metavar && (strstr(d.metavar, "FILE") || strstr(d.metavar, "DIR"))) {
      printf("%s--%s", first ? "" : "|", d.name);
      first = 0;
    }
  }
  printf(")\n      COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n");
  printf("    --arrival) COMPREPLY=($(compgen -W 'constant poisson gamma:' -- \"$cur\")); return "
         ";;\n");
  printf(
      "    --server) COMPREPLY=($(compgen -W 'auto sglang vllm openai' -- \"$cur\")); return ;;\n");
  printf("    --api) COMPREPLY=($(compgen -W 'openai native' -- \"$cur\")); return ;;\n");
  printf("    --flush-mode) COMPREPLY=($(compgen -W 'drain inline' -- \"$cur\")); return ;;\n");
  printf("    --on-full) COMPREPLY=($(compgen -W 'queue drop' -- \"$cur\")); return ;;\n");
  printf("  esac\n  COMPREPLY=($(compgen -W '");
  for (size_t i = 0; vl_config_option_doc(i, &d) == 0; i++)
    printf("%s--%s", i ? " " : "", d.name);
  printf("' -- \"$cur\"))\n}\ncomplete -F _vlmload vlmload\n");
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
  if (argc == 2 && strcmp(argv[1], "man") == 0)
    man();
  else if (argc == 2 && strcmp(argv[1], "completion") == 0)
    completion();
  else if (argc == 2 && strcmp(argv[1], "markdown") == 0)
    markdown();
  else {
    fprintf(stderr, "usage: vlmload-docs man|completion|markdown\n");
    return 2;
  }
  return ferror(stdout) ? 1 : 0;
}
