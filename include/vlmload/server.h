/* Small synchronous exchanges with the server before the run starts: model discovery, the probe
 * that tells which kind of server answers (from the signals profile.h lists), health, TLS. */
#ifndef VLMLOAD_SERVER_H
#define VLMLOAD_SERVER_H

#include "vlmload/config.h"

#include <stddef.h>

/* Asks GET {url}/v1/models for the first model id, whole, into *model (the caller frees it), and
 * the kind its owned_by names into *owner (VL_SERVER_AUTO: none; owner may be NULL).
 * Returns 0, or a VL_E* code with a one-line reason in err and *model NULL: VL_EINVAL when the
 * server named a model whose id is not valid UTF-8 (no request could name it), another code when
 * it named none. The id is the server's text: show it with vl_text_fput_shown. */
int vl_server_first_model(const vl_config_t *cfg, char **model, vl_server_kind_t *owner, char *err,
                          size_t errlen);

/* GET {url}/props, llama-server's account of itself, into *props. Returns 0, or VL_ENOENT when
 * the route did not answer 200 with llama-server's JSON (props->known 0). */
int vl_server_props(const vl_config_t *cfg, vl_profile_props_t *props);

/* Finds what kind of server answers, from every signal it gives: the owned_by of its models in
 * GET /v1/models ("sglang", "vllm" or "llamacpp"), then GET /get_server_info or GET /server_info
 * answering 200 (SGLang), then GET /version answering 200 (vLLM), then GET /props answering
 * llama-server's JSON (build_info or total_slots). Returns VL_SERVER_AUTO when none of them
 * tells, with what each probe answered (a status, or why it failed) in report, one line. */
vl_server_kind_t vl_server_probe(const vl_config_t *cfg, char *report, size_t reportlen);

/* GET {url}{path} once, bounded by timeout_ms, with the run's headers and TLS policy (only cfg's
 * url, api_key, headers, insecure and cacert are read). Returns the HTTP status, or 0 with *rc a
 * VL_E* code (VL_ENOCONN: nothing answers; VL_ETLS; VL_ECURL) and a one-line reason in err. */
long vl_server_status(const vl_config_t *cfg, const char *path, long timeout_ms, int *rc, char *err,
                      size_t errlen);

/* The same, keeping the answer's body (at most 8 MiB) in *body (the caller frees it; NULL when
 * empty) and its length in *len. */
long vl_server_get(const vl_config_t *cfg, const char *path, long timeout_ms, char **body,
                   size_t *len, int *rc, char *err, size_t errlen);

/* Waits until GET /health (or, for servers without one, GET /v1/models) answers 200, asking every
 * half second, for at most timeout_us. Returns 0, or VL_ECANCEL on timeout with the last reason
 * in err. progress: print a waiting line on stderr. */
int vl_server_wait_healthy(const vl_config_t *cfg, uint64_t timeout_us, int progress, char *err,
                           size_t errlen);

/* For each https URL, sets up a TLS session (connect and handshake only) with the run's policy.
 * Returns 0 when each one succeeded or failed for another reason than TLS (a server not up yet is
 * the health check's business), or VL_ETLS with the URL and the reason in err. */
int vl_server_check_tls(const vl_config_t *cfg, char *err, size_t errlen);

/* POST {url}/tokenize (SGLang and vLLM: {"model", "prompt"} -> {"count", "tokens",
 * "max_model_len"}; llama-server: {"content"} -> {"tokens"}, found from its first answer), for
 * the lengths' calibration (lengths.h), one connection kept for every call. The text's count
 * includes whatever special tokens the server adds (vl_lentext_calibrate takes them off). */
typedef struct vl_server_tok_s {
  const vl_config_t *cfg;
  const char *model;
  void *easy;             /* curl's easy handle, made at the first call */
  struct curl_slist *hdr; /* the run's headers and Content-Type */
  char err[2400];         /* why the last call failed, one line */
  long status;            /* the last call's HTTP status; 0: no reply */
  int calls;
  int content; /* the server takes llama-server's {"content"} and answers {"tokens"} only */
} vl_server_tok_t;

/* A vl_lentext_count_fn with ud a vl_server_tok_t (cfg and model set, the rest zero). Returns 0,
 * VL_ENOENT (the route is not there: 404, 405, 501), VL_EJSON (no count in the reply), VL_EIO
 * (another status), VL_ENOCONN or VL_ECURL, with the reason in err. */
int vl_server_tokenize(void *ud, const char *text, int *count);
void vl_server_tok_free(vl_server_tok_t *t);

#endif
