/* vlmload: wires configuration, prompts, outputs and the runner together. */
#include "vlmload/common.h"
#include "vlmload/config.h"
#include "vlmload/prompts.h"
#include "vlmload/report.h"
#include "vlmload/runner.h"
#include "vlmload/server.h"

#include <curl/curl.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
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

int main(int argc, char **argv) {
  vl_config_t cfg;
  int status = vl_config_parse(&cfg, argc, argv, stdout, stderr);
  if (status != VL_CONFIG_RUN) {
    vl_config_free(&cfg);
    return status;
  }
  if (raise_fd_limit(cfg.concurrency) != 0) {
    vl_config_free(&cfg);
    return 2;
  }
  /* A server closing a connection must not kill the process. */
  signal(SIGPIPE, SIG_IGN);
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "vlmload: cannot initialise libcurl\n");
    vl_config_free(&cfg);
    return 1;
  }

  char err[512] = "";
  vl_prompts_t prompts = {0};
  vl_report_t *rep = NULL;
  char model[512];
  status = 2;
  if (vl_prompts_load(&prompts, cfg.prompts_file, err, sizeof(err)) != 0) {
    fprintf(stderr, "vlmload: %s\n", err);
    goto done;
  }
  if (vl_report_open(&rep, &cfg, err, sizeof(err)) != 0) {
    fprintf(stderr, "vlmload: %s\n", err);
    goto done;
  }
  if (cfg.model) {
    snprintf(model, sizeof(model), "%s", cfg.model);
  } else if (vl_server_first_model(&cfg, model, sizeof(model), err, sizeof(err)) != 0) {
    fprintf(stderr, "vlmload: warning: %s; using model 'default' (set --model)\n", err);
    snprintf(model, sizeof(model), "default");
  }
  if (!cfg.quiet) {
    fprintf(stderr, "vlmload: %s%s model %s, ", cfg.url, cfg.endpoint, model);
    if (cfg.rate > 0)
      fprintf(stderr, "%.6g req/s %s", cfg.rate, cfg.arrival_name);
    else
      fprintf(stderr, "closed loop");
    fprintf(stderr, ", concurrency %d", cfg.concurrency);
    if (cfg.requests)
      fprintf(stderr, ", %llu requests", (unsigned long long)cfg.requests);
    if (cfg.duration_us)
      fprintf(stderr, ", for %.6gs", (double)cfg.duration_us / 1e6);
    fputc('\n', stderr);
  }
  status = vl_runner_run(&cfg, model, &prompts, rep);

done:
  if (vl_report_close(rep) != 0 && status == 0)
    status = 1;
  vl_prompts_free(&prompts);
  vl_config_free(&cfg);
  curl_global_cleanup();
  return status;
}
