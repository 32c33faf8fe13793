/* The server's own counters on the timeline (counters.h). */
#include "vlmload/counters.h"
#include "vlmload/common.h"
#include "vlmload/monitor.h"
#include "vlmload/profile.h"
#include "vlmload/prom.h"
#include "vlmload/server.h"

#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The metrics of the profile a page holds: a bit each, in vl_profile_metrics' order. */
typedef struct {
  const char *const *names;
  unsigned long long seen;
} page_t;

static int on_sample(const vl_prom_sample_t *s, void *ud) {
  page_t *p = ud;
  for (int i = 0; p->names[i] && i < 64; i++) {
    size_t n = strlen(p->names[i]);
    if (strncmp(s->name, p->names[i], n) == 0 &&
        (s->name[n] == '\0' || strcmp(s->name + n, "_total") == 0))
      p->seen |= 1ull << i;
  }
  return 0;
}

/* Whether URL u has the scheme, host and port of URL v. */
static int same_origin(const char *u, const char *v) {
  CURLU *a = curl_url(), *b = curl_url();
  int same = 0;
  if (a && b && curl_url_set(a, CURLUPART_URL, u, 0) == CURLUE_OK &&
      curl_url_set(b, CURLUPART_URL, v, 0) == CURLUE_OK) {
    same = 1;
    static const CURLUPart parts[] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT};
    for (size_t i = 0; i < VL_ARRAY_SIZE(parts) && same; i++) {
      char *x = NULL, *y = NULL;
      unsigned fl = parts[i] == CURLUPART_PORT ? CURLU_DEFAULT_PORT : 0;
      curl_url_get(a, parts[i], &x, fl);
      curl_url_get(b, parts[i], &y, fl);
      same = x && y && strcasecmp(x, y) == 0;
      curl_free(x);
      curl_free(y);
    }
  }
  curl_url_cleanup(a);
  curl_url_cleanup(b);
  return same;
}

int vl_counters_setup(vl_config_t *cfg) {
  /* An OpenAI-style server (--server openai) has no metrics page to read. */
  if (cfg->no_server_metrics || !cfg->url || cfg->server == VL_SERVER_OPENAI)
    return 0;
  for (int i = 0; i < cfg->monitor.n_proms; i++)
    if (same_origin(cfg->monitor.proms[i].target->url, cfg->url))
      return 0;
  char *body = NULL, err[512];
  size_t len = 0;
  int rc;
  long status = vl_server_get(cfg, "/metrics", 2000, &body, &len, &rc, err, sizeof(err));
  page_t page = {vl_profile_metrics(cfg->server), 0};
  if (status == 200 && body && vl_prom_parse(body, len, on_sample, &page, NULL, 0) != 0)
    page.seen = 0; /* not a Prometheus page: a server answering every route alike */
  free(body);
  if (status != 200 || !page.seen)
    return 0;
  /* "server=URL/metrics#NAME,NAME...": the metrics the page holds, and only those. */
  size_t cap = strlen(cfg->url) + 32, n = 0;
  for (int i = 0; page.names[i]; i++)
    cap += strlen(page.names[i]) + 1;
  char *arg = vl_xmalloc(cap);
  n = (size_t)snprintf(arg, cap, "server=%s/metrics#", cfg->url);
  int found = 0;
  for (int i = 0; page.names[i] && i < 64; i++)
    if (page.seen & (1ull << i))
      n += (size_t)snprintf(arg + n, cap - n, "%s%s", found++ ? "," : "", page.names[i]);
  if (vl_monitor_spec_add_prom(&cfg->monitor, arg, err, sizeof(err)) != 0)
    found = 0; /* the label is taken: the user's own targets stay as they are */
  else
    cfg->monitor.proms[cfg->monitor.n_proms - 1].server = 1;
  free(arg);
  return found;
}

int vl_counters_is(const char *series) {
  return strncmp(series, VL_COUNTERS_PREFIX, sizeof(VL_COUNTERS_PREFIX) - 1) == 0;
}

int vl_counters_read(const vl_monitor_t *mon, double *v, int max) {
  int k = 0;
  for (size_t i = 0; mon && i < vl_monitor_count(mon) && k < max; i++) {
    const vl_monitor_series_t *s = vl_monitor_series(mon, i);
    if (vl_counters_is(s->name))
      v[k++] = s->valid ? s->value : NAN;
  }
  return k;
}
