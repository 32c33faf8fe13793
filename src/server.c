#include "vlmload/server.h"
#include "vlmload/common.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static int get(const vl_config_t *cfg, const char *path, long timeout_ms, buf_t *b, long *status,
               char *err, size_t errlen) {
  CURL *e = curl_easy_init();
  struct curl_slist *h = NULL;
  char url[2048], auth[4096];
  int rc = 0;
  if (!e)
    return VL_ENOMEM;
  snprintf(url, sizeof(url), "%s%s", cfg->url, path);
  if (cfg->api_key) {
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", cfg->api_key);
    h = curl_slist_append(h, auth);
    memset(auth, 0, sizeof(auth));
  }
  for (int i = 0; i < cfg->n_headers; i++)
    h = curl_slist_append(h, cfg->headers[i]);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, b);
  CURLcode cc = curl_easy_perform(e);
  if (cc != CURLE_OK) {
    snprintf(err, errlen, "GET %s: %s", url, curl_easy_strerror(cc));
    rc = VL_ECURL;
  } else {
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
  }
  curl_slist_free_all(h);
  curl_easy_cleanup(e);
  return rc;
}

int vl_server_first_model(const vl_config_t *cfg, char *model, size_t modellen, char *err,
                          size_t errlen) {
  buf_t b = {NULL, 0, 1u << 20};
  long status = 0;
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
    if (cJSON_IsString(id) && *id->valuestring) {
      snprintf(model, modellen, "%s", id->valuestring);
    } else {
      snprintf(err, errlen, "GET %s/v1/models: no model id in the reply", cfg->url);
      rc = VL_EJSON;
    }
    cJSON_Delete(root);
  }
  free(b.p);
  return rc;
}
