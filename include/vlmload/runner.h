/* One run: the libuv loop, the request slots, admission on the arrival schedule, the stop rules
 * and signal handling. Everything else is called from here. */
#ifndef VLMLOAD_RUNNER_H
#define VLMLOAD_RUNNER_H

#include "vlmload/config.h"
#include "vlmload/imagepool.h"
#include "vlmload/prompts.h"
#include "vlmload/report.h"

/* Runs the load described by cfg against its URL with the given model name, prompts and image
 * pool (NULL, or unused when cfg asks for no images), writing
 * through rep. Returns the process exit status: 0 completed, 1 no request succeeded or a fatal
 * error, 130 interrupted by a signal. */
int vl_runner_run(vl_config_t *cfg, const char *model, const vl_prompts_t *prompts,
                  const vl_imagepool_t *pool, vl_report_t *rep);

#endif
