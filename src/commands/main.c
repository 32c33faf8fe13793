/* vlmload: wires configuration, prompts, outputs and the runner together. */
#include "vlmload/analyzecli.h"
#include "comparecli.h"
#include "vlmload/common.h"
#include "vlmload/config.h"
#include "vlmload/counters.h"
#include "vlmload/flush.h"
#include "vlmload/htmlreport.h"
#include "vlmload/imagepool.h"
#include "vlmload/lengths.h"
#include "matrix/matrix.h"
#include "merge.h"
#include "vlmload/plan.h"
#include "vlmload/plot.h"
#include "vlmload/prompts.h"
#include "vlmload/rateauto.h"
#include "vlmload/metrics.h"
#include "vlmload/report.h"
#include "vlmload/runner.h"
#include "vlmload/server.h"
#include "vlmload/srvprof.h"
#include "vlmload/text.h"
#include "vlmload/workerpipe.h"
#include "workers.h"
#include "vlmload/trace.h"

#include <curl/curl.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each request in flight holds a socket: lift the soft descriptor limit to the hard one, and say so
 * at once when even that is too low for --concurrency. */
static int raise_fd_limit(int concurrency) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  rlim_t need = (rlim_t)concurrency + 64;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
    fprintf(stderr,
            "vlmload: --concurrency %d: needs about %llu file descriptors, the limit is %llu "
            "(raise it with ulimit -n)\n",
            concurrency, (unsigned long long)need, (unsigned long long)rl.rlim_cur);
    return -1;
  }
  return 0;
}

static void pool_progress(void *arg, size_t done, size_t total) {
  fprintf(stderr, "\r\033[Kvlmload: preparing images %zu/%zu", done, total);
  if (done == total)
    fputc('\n', stderr);
}

/* Builds the run's one image pool on the threadpool, from the options of c (run->run.images):
 * synthetic images, or the corpus checked file by file. Returns 0, or -1 after saying why (no
 * usable image is bad input). */
static int build_pool(const vl_config_t *run, const vl_config_t *c, vl_imagepool_t *pool) {
  char err[512];
  vl_imagepool_opts_t o = {0};
  o.corpus = c->images_dir;
  o.res = c->images_dir && !c->res_given ? NULL : &c->res;
  o.fmt = c->image_fmt;
  o.quality = c->jpeg_quality;
  o.content = c->image_content;
  o.seed = c->seed;
  o.count = (size_t)c->pool_size;
  o.max_pixels = c->max_pixels;
  o.keep_raw = run->run.unique_images; /* any phase's unique images are made from its pixels */
  if (c->progress > 0 || (c->progress < 0 && isatty(STDERR_FILENO)))
    o.progress = pool_progress;
  if (vl_imagepool_build(pool, NULL, &o, err, sizeof(err)) != 0) {
    fprintf(stderr, "vlmload: --images%s%s: %s\n", c->images_dir ? " " : "",
            c->images_dir ? c->images_dir : "", err);
    return -1;
  }
  /* The build's scratch (pixels, encode buffers) was freed on worker threads; give it back now
   * rather than carry it through the run. */
  malloc_trim(0);
  if (!c->quiet) {
    char line[512];
    vl_imagepool_describe(pool, c->images_dir ? c->images_dir : "synthetic content", line,
                          sizeof(line));
    fprintf(stderr, "vlmload: %s\n", line);
  }
  return 0;
}

/* The longest run of tokens a prompt cut from the synthetic text can need (lengths.h): the
 * largest --input-tokens; 0 when no prompt is synthetic. */
static int synthetic_max_run(const vl_config_t *c) {
  int most = 0;
  if (c->input_tokens.set)
    most = VL_MAX(most, vl_lengths_dist_max(&c->input_tokens));
  if (c->trace) /* trace replay: its longest row (a block's run is at most 512 tokens) */
    most = VL_MAX(most, VL_MAX(c->trace->input_hi, 1));
  return most;
}

/* The option whose prompts are synthetic, for messages: --input-tokens, or a trace's rows. */
static const char *lengths_option(const vl_config_t *c) {
  return c->trace && !c->input_tokens.set ? "--trace" : "--input-tokens";
}

/* Asks the server's tokenizer for the vocabulary's counts (a few calls), then checks them on one
 * long stretch of the text. Returns 1 when they came (words filled), 0 after the one warning
 * that the lengths are estimates. */
static int calibrate(const vl_config_t *c, const char *model, int *words) {
  vl_server_tok_t tok = {.cfg = c, .model = model};
  int calls, rc = vl_lentext_calibrate(vl_server_tokenize, &tok, words, &calls);
  if (rc != 0) {
    fprintf(stderr,
            "vlmload: warning: %s: the server's tokenizer cannot be asked (%s); prompt "
            "lengths are estimated, and the summary gives their error as the server's usage "
            "measures it\n",
            lengths_option(c), tok.err);
    vl_server_tok_free(&tok);
    return 0;
  }
  /* The words' counts add up in tokenizers that split at spaces first; check on a stretch. */
  vl_lentext_t check;
  int n = 2000, base = 0, got = 0;
  if (vl_lentext_build(&check, words, n) == 0) {
    vl_seg_t seg[2];
    int k = vl_lentext_prompt(&check, 0, n, seg);
    char *text = malloc(seg[0].n + (k > 1 ? seg[1].n : 0) + 1);
    if (text) {
      memcpy(text, seg[0].p, seg[0].n);
      if (k > 1)
        memcpy(text + seg[0].n, seg[1].p, seg[1].n);
      text[seg[0].n + (k > 1 ? seg[1].n : 0)] = '\0';
      if (vl_server_tokenize(&tok, "", &base) == 0 && vl_server_tokenize(&tok, text, &got) == 0 &&
          abs(got - base - n) * 100 > n)
        fprintf(stderr,
                "vlmload: warning: %s: text the server's tokenizer counts as %d "
                "tokens word by word makes %d together; prompt lengths may be off by %.1f%%\n",
                lengths_option(c), n, got - base, 100.0 * fabs((double)(got - base - n)) / n);
      free(text);
    }
    vl_lentext_free(&check);
  }
  if (!c->quiet)
    fprintf(stderr,
            "vlmload: prompt text counted in the server's tokenizer (%d calls of POST "
            "/tokenize)\n",
            tok.calls);
  vl_server_tok_free(&tok);
  return 1;
}

/* The synthetic text the prompts are cut from, its words' tokens counted by the server's
 * tokenizer when model is set and it answers, else estimated. Returns 0 or -1 after a message. */
static int synthetic_text(const vl_config_t *c, const char *model, vl_lentext_t *lt,
                          vl_prompts_t *prompts) {
  int max_run = synthetic_max_run(c);
  if (!max_run)
    return 0;
  int words[VL_LENTEXT_WORDS];
  int exact = model && calibrate(c, model, words);
  int rc = vl_lentext_build(lt, exact ? words : NULL, max_run);
  if (rc != 0) {
    fprintf(stderr, "vlmload: %s: cannot build the prompt text: %s\n", lengths_option(c),
            vl_strerror(rc));
    return -1;
  }
  prompts->synthetic = lt;
  return 0;
}

/* --dry-run and --dump-requests: the plan, without a run. Returns the exit status. */
static int plan_only(const vl_config_t *c, const vl_prompts_t *prompts,
                     const vl_imagepool_t *pool) {
  char *model = NULL, err[512];
  int rc;
  if (c->model) {
    model = vl_xstrdup(c->model);
  } else if (c->dry_run) {
    model = vl_xstrdup("(asked from the server at start)");
  } else if ((rc = vl_server_check_tls(c, err, sizeof(err))) != 0 ||
             (rc = vl_server_first_model(c, &model, NULL, err, sizeof(err))) == VL_EINVAL ||
             rc == VL_ETLS) {
    fprintf(stderr, "vlmload: %s\n", err);
    return 1;
  } else if (rc != 0) {
    fprintf(stderr, "vlmload: warning: %s; using model 'default' (set --model)\n", err);
    model = vl_xstrdup("default");
  }
  vl_plan_t plan;
  rc = vl_plan_init(&plan, c, model, prompts, pool);
  if (rc) {
    fprintf(stderr, "vlmload: cannot build the requests: %s\n", vl_strerror(rc));
    vl_plan_free(&plan);
    free(model);
    return 1;
  }
  int status = 0;
  if (c->dry_run) {
    fputs("model         ", stdout);
    vl_text_fput_shown(stdout, model);
    fputc('\n', stdout);
    /* A run of phases shows each stage's load, stop and expected requests (plan.c). */
    vl_plan_describe(&plan, stdout);
    vl_workers_describe(c, stdout); /* --workers: how many, on which cores */
  }
  if (c->dump_requests) {
    if (vl_plan_dump(&plan, c->requests, c->dump_requests, err, sizeof(err)) != 0) {
      fprintf(stderr, "vlmload: %s\n", err);
      status = 1;
    } else {
      fprintf(stderr, "vlmload: wrote %llu request bodies and replay.sh to %s (model ",
              (unsigned long long)c->requests, c->dump_requests);
      vl_text_fput_shown(stderr, model);
      fputs(")\n", stderr);
    }
  }
  vl_plan_free(&plan);
  free(model);
  return status;
}

/* The subcommands, as --help lists them: `vlmload NAME ARG...` runs NAME's main on argv from NAME
 * on. */
static const struct {
  const char *name;
  int (*main)(int argc, char **argv);
} subcommands[] = {
    {"analyze", vl_analyzecli_main},
    {"compare", vl_comparecli_main},
    {"matrix", vl_matrix_main},
    {"merge", vl_merge_main},
};

/* A first argument that is not an option names a subcommand (a load takes no other word): runs
 * it, or says which one was meant. Returns its exit status, or -1 when argv[1] is an option or
 * absent. */
static int subcommand(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-')
    return -1;
  const char *names[VL_ARRAY_SIZE(subcommands) + 1];
  for (size_t i = 0; i < VL_ARRAY_SIZE(subcommands); i++) {
    if (strcmp(argv[1], subcommands[i].name) == 0)
      return subcommands[i].main(argc - 1, argv + 1);
    names[i] = subcommands[i].name;
  }
  names[VL_ARRAY_SIZE(subcommands)] = NULL;
  const char *near = vl_config_nearest_word(argv[1], names);
  fputs("vlmload: '", stderr);
  vl_text_fput_shown(stderr, argv[1]);
  if (near)
    fprintf(stderr, "': not a subcommand; did you mean 'vlmload %s'? (see --help)\n", near);
  else
    fputs("': not a subcommand (analyze, compare, matrix, merge) nor an option (options start with "
          "--; "
          "see --help)\n",
          stderr);
  return 2;
}

int main(int argc, char **argv) {
  int sub = subcommand(argc, argv);
  if (sub >= 0)
    return sub;
  vl_config_t cfg;
  int status = vl_config_parse(&cfg, argc, argv, stdout, stderr);
  if (status != VL_CONFIG_RUN) {
    vl_config_free(&cfg);
    return status;
  }
  /* --workers: a worker makes the configuration its share of the run (workers.h). */
  if ((status = vl_workers_child_setup(&cfg)) != 0) {
    vl_config_free(&cfg);
    return status;
  }
  /* The parent of --workers sends no load: its workers build their images and write the files. */
  int workers_parent = cfg.workers > 1 && !cfg.dry_run && !cfg.dump_requests;
  /* A scrape of the load's own server may send its credentials; no other. */
  cfg.monitor.server_url = cfg.url;
  cfg.monitor.api_key = cfg.api_key;
  cfg.monitor.headers = cfg.headers;
  cfg.monitor.n_headers = cfg.n_headers;
  cfg.monitor.insecure = cfg.insecure;
  cfg.monitor.cacert = cfg.cacert;
  if (raise_fd_limit(cfg.concurrency) != 0) {
    vl_config_free(&cfg);
    return 2;
  }
  /* --plot runs gnuplot at the end: find it now, not after a long run. */
  if (cfg.plot && !cfg.dry_run && !cfg.dump_requests) {
    char *gnuplot, why[512];
    if (vl_plot_find_gnuplot(cfg.gnuplot, &gnuplot, why, sizeof(why)) != 0) {
      fprintf(stderr, "vlmload: %s\n", why);
      vl_config_free(&cfg);
      return 2;
    }
    free(cfg.gnuplot);
    cfg.gnuplot = gnuplot;
  }
  /* --report draws the memory plot with gnuplot when memory is sampled: the same check. */
  if (cfg.report && !cfg.plot && !vl_monitor_spec_empty(&cfg.monitor) && !cfg.dry_run &&
      !cfg.dump_requests) {
    char *gnuplot, why[512];
    if (vl_plot_find_gnuplot(cfg.gnuplot, &gnuplot, why, sizeof(why)) != 0) {
      if (strcmp(why, VL_PLOT_NO_GNUPLOT) == 0)
        snprintf(why, sizeof(why), "%s", VL_HTMLREPORT_NO_GNUPLOT);
      fprintf(stderr, "vlmload: %s\n", why);
      vl_config_free(&cfg);
      return 2;
    }
    free(cfg.gnuplot);
    cfg.gnuplot = gnuplot;
  }
  /* A server closing a connection must not kill the process. */
  signal(SIGPIPE, SIG_IGN);
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "vlmload: cannot initialise libcurl\n");
    vl_config_free(&cfg);
    return 1;
  }

  char err[512] = "";
  /* --metrics-listen: bound now, so that a taken port is said before anything runs. A worker of
   * --workers serves nothing: its parent serves the merged figures. */
  vl_metrics_t *metrics = NULL;
  if (cfg.metrics_listen && !cfg.dry_run && !cfg.dump_requests && vl_workerpipe_fd() < 0) {
    if (vl_metrics_start(&metrics, cfg.metrics_listen, err, sizeof(err)) != 0) {
      fprintf(stderr, "vlmload: %s\n", err);
      vl_config_free(&cfg);
      curl_global_cleanup();
      return 2;
    }
    fprintf(stderr, "vlmload: metrics for Prometheus at http://%s/metrics (port %u)\n",
            cfg.metrics_listen, vl_metrics_port(metrics));
  }
  vl_prompts_t prompts = {0};
  vl_lentext_t lentext = {0};
  vl_imagepool_t pool = {0};
  vl_report_t *rep = NULL;
  char *model = NULL;
  int rc;
  status = 2;
  if (vl_prompts_load(&prompts, cfg.prompts_file, err, sizeof(err)) != 0) {
    fprintf(stderr, "vlmload: %s\n", err);
    goto done;
  }
  /* One pool serves the run; with phases, the first phase that sends images describes it. */
  if (cfg.run.images && !workers_parent && build_pool(&cfg, cfg.run.images, &pool) != 0)
    goto done;
  if ((cfg.dry_run || cfg.dump_requests) && synthetic_text(&cfg, NULL, &lentext, &prompts) != 0)
    goto done;
  /* Warnings come once the run (or its plan) goes ahead, after every check that stops it; the
   * parent of --workers said them. */
  int warn = vl_workerpipe_fd() < 0;
  if (cfg.dry_run || cfg.dump_requests) {
    if (warn)
      vl_config_warn(&cfg, stderr);
    status = plan_only(&cfg, &prompts, &pool);
    goto done;
  }
  if ((workers_parent ? vl_workers_check_outputs(&cfg, err, sizeof(err))
                      : vl_report_open(&rep, &cfg, err, sizeof(err))) != 0) {
    fprintf(stderr, "vlmload: %s\n", err);
    goto done;
  }
  vl_report_metrics(rep, metrics);
  if (warn)
    vl_config_warn(&cfg, stderr);
  if (vl_server_check_tls(&cfg, err, sizeof(err)) != 0) {
    fprintf(stderr, "vlmload: %s\n", err);
    status = 1;
    goto done;
  }
  if (cfg.health_check) {
    int hrc = vl_server_wait_healthy(&cfg, cfg.health_timeout_us, !cfg.quiet, err, sizeof(err));
    if (hrc == VL_ETLS) {
      fprintf(stderr, "vlmload: --health-check: %s\n", err);
      status = 1;
      goto done;
    }
    if (hrc != 0) {
      fprintf(stderr, "vlmload: --health-check: %s did not become healthy within %.0fs (%s)\n",
              cfg.url, (double)cfg.health_timeout_us / 1e6, err);
      status = 1;
      goto done;
    }
  }
  if (cfg.server == VL_SERVER_AUTO && (cfg.run.flushes || cfg.no_prompt_cache)) {
    char probed[1024];
    cfg.server = vl_server_probe(&cfg, probed, sizeof(probed));
    if (cfg.no_prompt_cache && vl_config_no_prompt_cache_refused(&cfg, err, sizeof(err))) {
      fprintf(stderr, "vlmload: %s\n", err);
      status = 2;
      goto done;
    }
    /* --no-prompt-cache alone goes to a server that does not say what it is as asked. */
    if (cfg.server == VL_SERVER_AUTO && cfg.run.flushes && !cfg.flush_endpoints[0]) {
      fprintf(stderr,
              "vlmload: --flush-every: cannot tell which server %s is, so not which route "
              "flushes it (%s); pass --server sglang|vllm|llamacpp, or name the route with "
              "--flush-endpoint\n",
              cfg.url, probed);
      status = 2;
      goto done;
    }
    if (cfg.server == VL_SERVER_AUTO && cfg.run.flushes)
      cfg.server = VL_SERVER_OPENAI;
  }
  if (cfg.n_profile_at) { /* --server-profile-at: the kind of server decides the routes */
    const char *body;
    char probed[1024] = "";
    if (cfg.server == VL_SERVER_AUTO)
      cfg.server = vl_server_probe(&cfg, probed, sizeof(probed));
    if (!vl_srvprof_routes(cfg.server, &body)) {
      fprintf(stderr,
              "vlmload: --server-profile-at: no profiling routes known for %s%s (SGLang and "
              "vLLM serve /start_profile and /stop_profile)%s%s%s; pass --server sglang|vllm if "
              "it is one of them\n",
              cfg.server == VL_SERVER_AUTO ? "the server at " : "--server ",
              cfg.server == VL_SERVER_AUTO ? cfg.url : vl_profile_name(cfg.server),
              probed[0] ? " (" : "", probed, probed[0] ? ")" : "");
      status = 2;
      goto done;
    }
  }
  if (vl_flush_choose_routes(&cfg, err, sizeof(err)) != 0) {
    fprintf(stderr, "vlmload: %s\n", err);
    status = 2;
    goto done;
  }
  vl_server_kind_t owner = VL_SERVER_AUTO;
  if (cfg.model) {
    model = vl_xstrdup(cfg.model);
  } else if ((rc = vl_server_first_model(&cfg, &model, &owner, err, sizeof(err))) == VL_EINVAL ||
             rc == VL_ETLS) {
    fprintf(stderr, "vlmload: %s\n", err);
    status = 1;
    goto done;
  } else if (rc == VL_ENOCONN && !cfg.keep_going) {
    fprintf(stderr,
            "vlmload: nothing answers at %s (%s): start the server or fix --url (--keep-going "
            "sends anyway)\n",
            cfg.url, err);
    status = 1;
    goto done;
  } else if (rc != 0) {
    fprintf(stderr, "vlmload: warning: %s; using model 'default' (set --model)\n", err);
    model = vl_xstrdup("default");
  }
  /* llama-server names itself in its model list; its /props then says what it is. */
  if (cfg.server == VL_SERVER_AUTO && owner == VL_SERVER_LLAMACPP)
    cfg.server = VL_SERVER_LLAMACPP;
  if (cfg.server == VL_SERVER_LLAMACPP)
    vl_server_props(&cfg, &cfg.props);
  if (synthetic_text(&cfg, model, &lentext, &prompts) != 0)
    goto done;
  /* The server's own counters on the timeline, when it answers /metrics (one process: not with
   * --workers). */
  if (!workers_parent && warn)
    vl_counters_setup(&cfg);
  if (!cfg.quiet) {
    /* The banner: fields wrapped to stay within VL_TEXT_COLUMNS. */
    vl_text_wrap_t w;
    vl_text_wrap_start(&w, stderr, VL_TEXT_COLUMNS, 2, "vlmload: ");
    vl_text_wrap_add(&w, "", "%s%s%s", cfg.url, cfg.endpoint,
                     cfg.api == VL_API_NATIVE ? " (SGLang native)" : "");
    vl_text_wrap_shown(&w, " ", "model ", model);
    if (cfg.n_phases)
      vl_text_wrap_add(&w, ", ", "%d phases, each its own rate and concurrency", cfg.n_phases);
    else if (cfg.trace_file) /* trace replay (issue 16, item 7) */
      vl_text_wrap_add(&w, ", ", "trace %s at %.6gx, concurrency %d", cfg.trace_file,
                       cfg.trace_speed, cfg.concurrency);
    else if (cfg.rate_auto)
      vl_text_wrap_add(
          &w, ", ",
          "--rate auto (a probe finds the knee, the run goes at %.0f%% of it) %s, concurrency %d",
          VL_RATEAUTO_FRACTION * 100, cfg.arrival_name, cfg.concurrency);
    else if (cfg.rate > 0)
      vl_text_wrap_add(&w, ", ", "%.6g req/s %s, concurrency %d", cfg.rate, cfg.arrival_name,
                       cfg.concurrency);
    else
      vl_text_wrap_add(&w, ", ", "closed loop, concurrency %d", cfg.concurrency);
    if (cfg.run.flushes) {
      char every[80];
      vl_flush_describe(&cfg, every, sizeof(every));
      vl_text_wrap_add(&w, ", ", "%s", every);
      for (int i = 0; i < VL_MAX_FLUSH_ENDPOINTS && cfg.flush_endpoints[i]; i++)
        vl_text_wrap_add(&w, i ? ", " : " ", "%s%s%s", i ? "" : "(", cfg.flush_endpoints[i],
                         i + 1 < VL_MAX_FLUSH_ENDPOINTS && cfg.flush_endpoints[i + 1] ? "" : ")");
    }
    if (cfg.requests)
      vl_text_wrap_add(&w, ", ", "%llu requests", (unsigned long long)cfg.requests);
    if (cfg.duration_us)
      vl_text_wrap_add(&w, ", ", "for %.6gs", (double)cfg.duration_us / 1e6);
    if (workers_parent)
      vl_text_wrap_add(&w, ", ", "%d workers", cfg.workers);
    vl_text_wrap_end(&w);
  }
  if (workers_parent)
    status = vl_workers_run(&cfg, model, argv, metrics);
  else
    status = vl_runner_run(&cfg, model, &prompts, &pool, rep);

done:
  free(model);
  if (vl_report_close(rep) != 0 && status == 0)
    status = 1;
  /* Every output is written: the endpoint stays --metrics-linger more, for the last scrape. */
  vl_metrics_stop(metrics, status == 2 ? 0 : cfg.metrics_linger_us);
  vl_prompts_free(&prompts);
  vl_lentext_free(&lentext);
  vl_imagepool_free(&pool);
  vl_config_free(&cfg);
  curl_global_cleanup();
  return status;
}
