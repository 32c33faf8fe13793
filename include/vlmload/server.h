/* Small synchronous exchanges with the server before the run starts (model discovery). */
#ifndef VLMLOAD_SERVER_H
#define VLMLOAD_SERVER_H

#include "vlmload/config.h"

#include <stddef.h>

/* Asks GET {url}/v1/models and copies the first model id into model. Returns 0, or a VL_E* code
 * with a one-line reason in err. */
int vl_server_first_model(const vl_config_t *cfg, char *model, size_t modellen, char *err,
                          size_t errlen);

#endif
