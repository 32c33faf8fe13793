/* Small synchronous exchanges with the server before the run starts: model discovery, the probe
 * that tells which kind of server answers (from the signals profile.h lists), health, TLS. */
#ifndef VLMLOAD_SERVER_H
#define VLMLOAD_SERVER_H

#include "vlmload/config.h"

#include <stddef.h>

/* Asks GET {url}/v1/models for the first model id, whole, into *model (the caller frees it).
 * Returns 0, or a VL_E* code with a one-line reason in err and *model NULL: VL_EINVAL when the
 * server named a model whose id is not valid UTF-8 (no request could name it), another code when
 * it named none. The id is the server's text: show it with vl_text_fput_shown. */
int vl_server_first_model(const vl_config_t *cfg, char **model, char *err, size_t errlen);

/* Finds what kind of server answers, from every signal it gives: the owned_by of its models in
 * GET /v1/models ("sglang" or "vllm"), then GET /get_server_info or GET /server_info answering 200
 * (SGLang), then GET /version answering 200 (vLLM). Returns VL_SERVER_AUTO when none of them
 * tells, with what each probe answered (a status, or why it failed) in report, one line. */
vl_server_kind_t vl_server_probe(const vl_config_t *cfg, char *report, size_t reportlen);

/* Waits until GET /health (or, for servers without one, GET /v1/models) answers 200, asking every
 * half second, for at most timeout_us. Returns 0, or VL_ECANCEL on timeout with the last reason
 * in err. progress: print a waiting line on stderr. */
int vl_server_wait_healthy(const vl_config_t *cfg, uint64_t timeout_us, int progress, char *err,
                           size_t errlen);

/* For each https URL, sets up a TLS session (connect and handshake only) with the run's policy.
 * Returns 0 when each one succeeded or failed for another reason than TLS (a server not up yet is
 * the health check's business), or VL_ETLS with the URL and the reason in err. */
int vl_server_check_tls(const vl_config_t *cfg, char *err, size_t errlen);

#endif
