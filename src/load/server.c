#include "vlmload/server.h"
#include "vlmload/common.h"
#include "vlmload/profile.h"
#include "vlmload/text.h"
#include "vlmload/transport.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define TLS_FIRST_MS 1000 /* a handshake without an answer this long: is the port plain HTTP? */
#define TLS_CHECK_MS 5000 /* the handshakes of the TLS check of one URL, at most */

typedef struct {
  char *p;
  size_t n, max;
} buf_t;

static size_t collect(char *p, size_t size, size_t n, void *ud) {
  buf_t *b = ud;
  size_t len = size * n;
  if (b->n + len > b->max)
    return 0;
  char *q = realloc(b->p, b->n + len + 1);
  if (!q)
    return 0;
  memcpy(q + b->n, p, len);
  b->n += len;
  q[b->n] = '\0';
  b->p = q;
  return len;
}

/* GET {url}{path} with the run's headers; the body (at most 1 MiB) goes to b. */
/* Whether cc means no server answered at all: nothing listens, or the host is not there. */
static int no_answer(CURLcode cc) {
  return cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST;
}

/* Why TLS could not be set up with url, and what would help: a plain-HTTP server answers the
 * handshake with HTTP (OpenSSL's "wrong version number"), which no certificate option mends;
 * --cacert or --insecure is offered only for a certificate that was refused, and --insecure only
 * when it is not given already. */
static void tls_reason(const vl_config_t *cfg, const char *url, CURLcode cc, const char *why,
                       char *err, size_t errlen) {
  const char *text = *why ? why : curl_easy_strerror(cc);
  const char *plain = strstr(url, "://") ? strstr(url, "://") + 3 : url;
  if (strstr(text, "wrong version number") || strstr(text, "packet length too long") ||
      strstr(text, "http request")) {
    snprintf(err, errlen, "%s: the server does not speak TLS (%s); use http://%s", url, text,
             plain);
  } else if (strstr(text, "SSL_ERROR_SYSCALL") || strstr(text, "unexpected eof")) {
    /* A plain-HTTP server often just closes on a ClientHello. */
    snprintf(err, errlen,
             "%s: the server closed the connection during the TLS handshake (%s): if it serves "
             "plain HTTP, use http://%s",
             url, text, plain);
  } else if (cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_ISSUER_ERROR) {
    if (cfg->insecure)
      snprintf(err, errlen, "%s: TLS: %s", url, text);
    else
      snprintf(err, errlen,
               "%s: TLS: %s (trust its CA with --cacert FILE, or skip verification with "
               "--insecure)",
               url, text);
  } else if (cc == CURLE_SSL_CACERT_BADFILE) {
    snprintf(err, errlen, "%s: TLS: %s (is --cacert a PEM file of CA certificates?)", url, text);
  } else {
    snprintf(err, errlen, "%s: TLS: %s", url, text);
  }
}

static int get(const vl_config_t *cfg, const char *path, long timeout_ms, buf_t *b, long *status,
               char *err, size_t errlen) {
  CURL *e = curl_easy_init();
  struct curl_slist *h = NULL;
  char url[2048];
  int rc = 0;
  if (!e)
    return VL_ENOMEM;
  snprintf(url, sizeof(url), "%s%s", cfg->url, path);
  h = vl_transport_headers(NULL, cfg->api_key, cfg->headers, cfg->n_headers);
  if ((!h && (cfg->api_key || cfg->n_headers)) ||
      vl_transport_policy(e, cfg->insecure, cfg->cacert) != 0) {
    curl_easy_cleanup(e);
    return VL_ENOMEM;
  }
  char why[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, why);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, b);
  CURLcode cc = curl_easy_perform(e);
  if (cc != CURLE_OK && vl_transport_tls_failed(cc)) {
    tls_reason(cfg, cfg->url, cc, why, err, errlen);
    rc = VL_ETLS;
  } else if (no_answer(cc)) {
    snprintf(err, errlen, "GET %s: %s", url, *why ? why : curl_easy_strerror(cc));
    rc = VL_ENOCONN;
  } else if (cc != CURLE_OK) {
    snprintf(err, errlen, "GET %s: %s", url, *why ? why : curl_easy_strerror(cc));
    rc = VL_ECURL;
  } else {
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
  }
  curl_slist_free_all(h);
  curl_easy_cleanup(e);
  return rc;
}

int vl_server_tokenize(void *ud, const char *text, int *count) {
  vl_server_tok_t *t = ud;
  const vl_config_t *cfg = t->cfg;
  char url[2048];
  t->status = 0;
  t->calls++;
  if (!t->easy) {
    t->hdr = vl_transport_headers(NULL, cfg->api_key, cfg->headers, cfg->n_headers);
    t->hdr = curl_slist_append(t->hdr, "Content-Type: application/json");
    if (!t->hdr || !(t->easy = curl_easy_init()) ||
        vl_transport_policy(t->easy, cfg->insecure, cfg->cacert) != 0) {
      snprintf(t->err, sizeof(t->err), "POST /tokenize: out of memory");
      return VL_ENOMEM;
    }
  }
  CURL *e = t->easy;
  cJSON *o = cJSON_CreateObject();
  if (t->content) {
    cJSON_AddStringToObject(o, "content", text);
  } else {
    cJSON_AddStringToObject(o, "model", t->model);
    cJSON_AddStringToObject(o, "prompt", text);
  }
  char *body = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!body) {
    snprintf(t->err, sizeof(t->err), "POST /tokenize: out of memory");
    return VL_ENOMEM;
  }
  buf_t b = {NULL, 0, 1u << 24};
  char why[CURL_ERROR_SIZE] = "";
  snprintf(url, sizeof(url), "%s/tokenize", cfg->url);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, why);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->hdr);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
  CURLcode cc = curl_easy_perform(e);
  int rc = 0;
  if (cc != CURLE_OK) {
    snprintf(t->err, sizeof(t->err), "POST %s: %s", url, *why ? why : curl_easy_strerror(cc));
    rc = no_answer(cc) ? VL_ENOCONN : VL_ECURL;
  } else {
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &t->status);
    cJSON *r = t->status == 200 && b.p ? cJSON_Parse(b.p) : NULL;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "count");
    /* llama-server answers {"tokens": [...]} alone, and an empty list to a body without its
     * "content": the same text is asked again in its shape, and every call after. */
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(r, "tokens");
    int tokens_only = !n && cJSON_IsArray(list);
    if (t->status == 200 && tokens_only && !t->content && !cJSON_GetArraySize(list) && *text) {
      t->content = 1;
      t->calls--;
      cJSON_Delete(r);
      free(b.p);
      cJSON_free(body);
      return vl_server_tokenize(ud, text, count);
    }
    if (t->status == 404 || t->status == 405 || t->status == 501) {
      snprintf(t->err, sizeof(t->err), "POST %s answered HTTP %ld", url, t->status);
      rc = VL_ENOENT;
    } else if (t->status != 200) {
      snprintf(t->err, sizeof(t->err), "POST %s answered HTTP %ld", url, t->status);
      rc = VL_EIO;
    } else if (tokens_only) {
      *count = cJSON_GetArraySize(list);
    } else if (!cJSON_IsNumber(n) || n->valuedouble < 0 || n->valuedouble > 1e9) {
      snprintf(t->err, sizeof(t->err), "POST %s: the reply has no \"count\" nor \"tokens\"", url);
      rc = VL_EJSON;
    } else {
      *count = (int)n->valuedouble;
    }
    cJSON_Delete(r);
  }
  free(b.p);
  cJSON_free(body);
  return rc;
}

void vl_server_tok_free(vl_server_tok_t *t) {
  if (t->easy)
    curl_easy_cleanup(t->easy);
  curl_slist_free_all(t->hdr);
  t->easy = NULL;
  t->hdr = NULL;
}

static vl_server_kind_t owned_by(const buf_t *b, char *seen, size_t seenlen);

int vl_server_first_model(const vl_config_t *cfg, char **model, vl_server_kind_t *owner, char *err,
                          size_t errlen) {
  buf_t b = {NULL, 0, 1u << 20};
  long status = 0;
  *model = NULL;
  if (owner)
    *owner = VL_SERVER_AUTO;
  int rc = get(cfg, "/v1/models", 5000, &b, &status, err, errlen);
  if (rc == 0 && status != 200) {
    snprintf(err, errlen, "GET %s/v1/models answered HTTP %ld", cfg->url, status);
    rc = VL_EIO;
  }
  if (rc == 0) {
    cJSON *root = cJSON_ParseWithLength(b.p ? b.p : "", b.n);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    const cJSON *first = cJSON_IsArray(data) ? cJSON_GetArrayItem(data, 0) : NULL;
    const cJSON *id = first ? cJSON_GetObjectItemCaseSensitive(first, "id") : NULL;
    if (!cJSON_IsString(id) || !*id->valuestring) {
      snprintf(err, errlen, "GET %s/v1/models: no model id in the reply", cfg->url);
      rc = VL_EJSON;
    } else if (!vl_text_utf8_valid(id->valuestring, strlen(id->valuestring))) {
      /* No JSON body or summary can carry it, and no other name would be the model's. */
      char shown[160];
      vl_text_shown(shown, sizeof(shown), id->valuestring);
      snprintf(err, errlen,
               "GET %s/v1/models: the model id '%s' is not valid UTF-8; name the model with "
               "--model",
               cfg->url, shown);
      rc = VL_EINVAL;
    } else {
      *model = vl_xstrdup(id->valuestring);
      char seen[48] = "";
      if (owner)
        *owner = owned_by(&b, seen, sizeof(seen));
    }
    cJSON_Delete(root);
  }
  free(b.p);
  return rc;
}

/* The status GET {url}{path} answered, or 0 when it did not answer (*rc says why). */
long vl_server_status(const vl_config_t *cfg, const char *path, long timeout_ms, int *rc, char *err,
                      size_t errlen) {
  buf_t b = {NULL, 0, 1u << 20};
  long status = 0;
  *rc = get(cfg, path, timeout_ms, &b, &status, err, errlen);
  free(b.p);
  return *rc ? 0 : status;
}

long vl_server_get(const vl_config_t *cfg, const char *path, long timeout_ms, char **body,
                   size_t *len, int *rc, char *err, size_t errlen) {
  buf_t b = {NULL, 0, 8u << 20};
  long status = 0;
  *rc = get(cfg, path, timeout_ms, &b, &status, err, errlen);
  *body = b.p;
  *len = b.n;
  return *rc ? 0 : status;
}

/* Appends one probe's answer to the report, after "; " when it is not the first. The base URL,
 * named once by the caller, is left out of "GET {url}{path}: ..." (get()'s reasons). */
static void note(char *report, size_t reportlen, const char *url, const char *answer) {
  size_t n = strlen(report), u = strlen(url);
  const char *path =
      strncmp(answer, "GET ", 4) == 0 && strncmp(answer + 4, url, u) == 0 ? answer + 4 + u : NULL;
  snprintf(report + n, reportlen - n, "%s%s%s", n ? "; " : "", path ? "GET " : "",
           path ? path : answer);
}

/* What a GET /props body says, into *p; whether it is llama-server's (a JSON object with
 * "build_info" or "total_slots"). */
static int props_parse(const buf_t *b, vl_profile_props_t *p) {
  cJSON *root = cJSON_ParseWithLength(b->p ? b->p : "", b->n);
  memset(p, 0, sizeof(*p));
  p->total_slots = p->n_ctx = -1;
  p->vision = -1;
  const cJSON *bi = cJSON_GetObjectItemCaseSensitive(root, "build_info");
  const cJSON *ts = cJSON_GetObjectItemCaseSensitive(root, "total_slots");
  const cJSON *dg = cJSON_GetObjectItemCaseSensitive(root, "default_generation_settings");
  const cJSON *nc = cJSON_GetObjectItemCaseSensitive(dg, "n_ctx");
  const cJSON *mo = cJSON_GetObjectItemCaseSensitive(root, "modalities");
  const cJSON *vi = cJSON_GetObjectItemCaseSensitive(mo, "vision");
  if (cJSON_IsString(bi))
    vl_text_shown(p->build_info, sizeof(p->build_info), bi->valuestring);
  if (cJSON_IsNumber(ts) && ts->valuedouble >= 0 && ts->valuedouble < 1e9)
    p->total_slots = (long)ts->valuedouble;
  if (cJSON_IsNumber(nc) && nc->valuedouble >= 0 && nc->valuedouble < 1e12)
    p->n_ctx = (long)nc->valuedouble;
  if (cJSON_IsBool(vi))
    p->vision = cJSON_IsTrue(vi);
  p->known = cJSON_IsObject(root) && (cJSON_IsString(bi) || cJSON_IsNumber(ts));
  cJSON_Delete(root);
  return p->known;
}

int vl_server_props(const vl_config_t *cfg, vl_profile_props_t *props) {
  buf_t b = {NULL, 0, 1u << 20};
  long status = 0;
  char err[512];
  memset(props, 0, sizeof(*props));
  int rc = get(cfg, "/props", 3000, &b, &status, err, sizeof(err));
  int known = rc == 0 && status == 200 && props_parse(&b, props);
  free(b.p);
  return known ? 0 : VL_ENOENT;
}

/* The kind /v1/models names in any model's owned_by ("sglang", "vllm" or "llamacpp"), or
 * VL_SERVER_AUTO; the
 * first owned_by seen goes to seen (shown, at most seenlen bytes) when none of them names one. */
static vl_server_kind_t owned_by(const buf_t *b, char *seen, size_t seenlen) {
  cJSON *root = cJSON_ParseWithLength(b->p ? b->p : "", b->n);
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data"), *m;
  const cJSON *list = cJSON_IsArray(data) ? data : NULL;
  vl_server_kind_t kind = VL_SERVER_AUTO;
  cJSON_ArrayForEach(m, list) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(m, "owned_by");
    if (!cJSON_IsString(o))
      continue;
    kind = vl_profile_owned_by(o->valuestring);
    if (kind == VL_SERVER_AUTO && !*seen)
      vl_text_shown(seen, seenlen, o->valuestring);
    if (kind != VL_SERVER_AUTO)
      break;
  }
  cJSON_Delete(root);
  return kind;
}

vl_server_kind_t vl_server_probe(const vl_config_t *cfg, char *report, size_t reportlen) {
  size_t n_routes;
  const vl_profile_probe_t *routes = vl_profile_probes(&n_routes);
  char err[512], line[600];
  long status = 0;
  buf_t b = {NULL, 0, 1u << 20};
  *report = '\0';

  /* The model list names its owner: the most direct signal. */
  vl_server_kind_t kind = VL_SERVER_AUTO;
  if (get(cfg, "/v1/models", 3000, &b, &status, err, sizeof(err)) != 0) {
    note(report, reportlen, cfg->url, err);
  } else {
    char seen[48] = "", detail[80] = "";
    if (status == 200) {
      kind = owned_by(&b, seen, sizeof(seen));
      if (*seen)
        snprintf(detail, sizeof(detail), ", owned_by \"%s\"", seen);
      else if (kind == VL_SERVER_AUTO)
        snprintf(detail, sizeof(detail), ", no owned_by sglang, vllm or llamacpp");
    }
    snprintf(line, sizeof(line), "GET /v1/models: HTTP %ld%s", status, detail);
    note(report, reportlen, cfg->url, line);
  }
  free(b.p);
  /* Then the routes only one kind has: SGLang's server info, vLLM's /version, llama-server's
   * /props (a JSON object that says what llama-server says there). */
  for (size_t i = 0; i < n_routes && kind == VL_SERVER_AUTO; i++) {
    buf_t r = {NULL, 0, 1u << 20};
    vl_profile_props_t props;
    if (get(cfg, routes[i].path, 3000, &r, &status, err, sizeof(err)) != 0) {
      note(report, reportlen, cfg->url, err);
    } else if (status == 200 && routes[i].kind == VL_SERVER_LLAMACPP && !props_parse(&r, &props)) {
      snprintf(line, sizeof(line), "GET %s: HTTP 200, not llama-server's", routes[i].path);
      note(report, reportlen, cfg->url, line);
    } else if (status == 200) {
      kind = routes[i].kind;
    } else {
      snprintf(line, sizeof(line), "GET %s: HTTP %ld", routes[i].path, status);
      note(report, reportlen, cfg->url, line);
    }
    free(r.p);
  }
  return kind;
}

int vl_server_wait_healthy(const vl_config_t *cfg, uint64_t timeout_us, int progress, char *err,
                           size_t errlen) {
  uint64_t deadline = vl_now_ns() + timeout_us * 1000;
  int printed = 0;
  for (;;) {
    int rc;
    long st = vl_server_status(cfg, "/health", 2000, &rc, err, errlen);
    if (st == 200)
      break;
    if (rc == VL_ETLS) { /* waiting longer will not change the certificate */
      if (printed)
        fputc('\n', stderr);
      return VL_ETLS;
    }
    if (st != 0 && vl_server_status(cfg, "/v1/models", 2000, &rc, err, errlen) == 200)
      break;
    if (st != 0)
      snprintf(err, errlen, "GET %s/health answered HTTP %ld", cfg->url, st);
    if (vl_now_ns() >= deadline) {
      if (printed)
        fputc('\n', stderr);
      return VL_ECANCEL;
    }
    if (progress && !printed) {
      fprintf(stderr, "vlmload: waiting for %s to become healthy", cfg->url);
      printed = 1;
    } else if (progress) {
      fputc('.', stderr);
    }
    struct timespec ts = {0, 500 * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (printed)
    fputs(" ok\n", stderr);
  return 0;
}

/* A connect and TLS handshake with url under the run's policy, within timeout_ms; curl's words
 * on failure in why (CURL_ERROR_SIZE bytes). CURLE_OUT_OF_MEMORY when no handle could be set
 * up. */
static CURLcode tls_connect(const vl_config_t *cfg, const char *url, long timeout_ms, char *why) {
  CURL *e = curl_easy_init();
  if (!e || vl_transport_policy(e, cfg->insecure, cfg->cacert) != 0) {
    curl_easy_cleanup(e);
    return CURLE_OUT_OF_MEMORY;
  }
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, why);
  CURLcode cc = curl_easy_perform(e);
  curl_easy_cleanup(e);
  return cc;
}

/* Whether the server at https_url answers plain HTTP on its port: a HEAD of / with no credential
 * (none goes to a port in the clear), any status within timeout_ms. */
static int answers_plain_http(const char *https_url, long timeout_ms) {
  char url[2048];
  snprintf(url, sizeof(url), "http://%s", https_url + 8);
  CURL *e = curl_easy_init();
  long status = 0;
  if (!e || vl_transport_policy(e, 0, NULL) != 0) {
    curl_easy_cleanup(e);
    return 0;
  }
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  CURLcode cc = curl_easy_perform(e);
  if (cc == CURLE_OK)
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(e);
  return status >= 100;
}

int vl_server_check_tls(const vl_config_t *cfg, char *err, size_t errlen) {
  for (int i = 0; i < cfg->n_urls; i++) {
    const char *url = cfg->urls[i];
    if (strncasecmp(url, "https:", 6) != 0)
      continue;
    char why[CURL_ERROR_SIZE] = "";
    /* A handshake takes milliseconds. A plain-HTTP server that waits for a request line may not
     * answer a ClientHello at all: after a second without an answer, its port is asked in plain
     * HTTP, and an answer there says at once what is wrong; otherwise the handshake gets the
     * rest of its time. */
    CURLcode cc = tls_connect(cfg, url, TLS_FIRST_MS, why);
    if (cc == CURLE_OPERATION_TIMEDOUT) {
      if (answers_plain_http(url, TLS_FIRST_MS)) {
        snprintf(err, errlen,
                 "%s: the server does not speak TLS (no answer to the TLS handshake, an answer "
                 "to plain HTTP); use http://%s",
                 url, url + 8);
        return VL_ETLS;
      }
      why[0] = '\0';
      cc = tls_connect(cfg, url, TLS_CHECK_MS - TLS_FIRST_MS, why);
    }
    if (cc == CURLE_OUT_OF_MEMORY) {
      snprintf(err, errlen, "cannot set up an HTTP handle");
      return VL_ENOMEM;
    }
    if (vl_transport_tls_failed(cc)) {
      tls_reason(cfg, url, cc, why, err, errlen);
      return VL_ETLS;
    }
  }
  return 0;
}
