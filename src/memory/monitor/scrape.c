/* The monitor's Prometheus scrapes: one GET per --monitor-prom target through the run's transport,
 * which reports each one's end to on_scrape_done. */
#include "internal.h"
#include "vlmload/common.h"
#include "vlmload/memunit.h"
#include "vlmload/prom.h"
#include "vlmload/text.h"
#include "vlmload/transport.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A scrape answer larger than this fails: a /metrics page is tens of kilobytes. */
#define PROM_MAX_BYTES (8u << 20)

typedef struct vl_monitor_scrape_s {
  vl_monitor_t *mon;
  const vl_prom_target_t *tgt;
  char *prefix;       /* "prom." or "prom.LABEL." */
  vl_transfer_t xfer; /* the scrape's easy handle; done is on_scrape_done */
  struct curl_slist *headers;
  char *buf;
  size_t len, cap;
  int too_big;
  int busy;
  int fixed;
  size_t *ser; /* series indices */
  size_t n_ser;
  uint64_t ok, failed, skipped;
  int last_failed;
  char last_error[320];
  const char *advice;           /* static */
  char errbuf[CURL_ERROR_SIZE]; /* curl's words for a failed transfer */
  /* From the first good page: which selectors matched a sample, the metric names there. */
  unsigned char *sel_hit;
  char *missing;
  size_t page_metrics;
  char page_some[200];
} scrape_t;

static int name_taken(const vl_monitor_t *mon, const char *name) {
  return vl_monitor_find(mon, name) != NULL;
}

static size_t on_scrape_write(char *p, size_t size, size_t n, void *ud) {
  scrape_t *s = ud;
  size_t len = size * n;
  if (len > PROM_MAX_BYTES - s->len) {
    s->too_big = 1;
    return 0;
  }
  if (s->len + len + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 65536;
    while (cap < s->len + len + 1)
      cap *= 2;
    char *b = realloc(s->buf, cap);
    if (!b)
      return 0;
    s->buf = b;
    s->cap = cap;
  }
  memcpy(s->buf + s->len, p, len);
  s->len += len;
  return len;
}

static int part_eq(CURLU *a, CURLU *b, CURLUPart what) {
  char *x = NULL, *y = NULL;
  unsigned fl = what == CURLUPART_PORT ? CURLU_DEFAULT_PORT : 0;
  curl_url_get(a, what, &x, fl);
  curl_url_get(b, what, &y, fl);
  int eq = x && y && strcasecmp(x, y) == 0;
  curl_free(x);
  curl_free(y);
  return eq;
}

/* True when both URLs have the same scheme, host and port. */
static int same_origin(const char *a, const char *b) {
  CURLU *ua = curl_url(), *ub = curl_url();
  int same = 0;
  if (ua && ub && curl_url_set(ua, CURLUPART_URL, a, 0) == CURLUE_OK &&
      curl_url_set(ub, CURLUPART_URL, b, 0) == CURLUE_OK)
    same = part_eq(ua, ub, CURLUPART_SCHEME) && part_eq(ua, ub, CURLUPART_HOST) &&
           part_eq(ua, ub, CURLUPART_PORT);
  curl_url_cleanup(ua);
  curl_url_cleanup(ub);
  return same;
}

static void on_scrape_done(vl_transfer_t *xfer, CURLcode result);

static int scrape_init(vl_monitor_t *mon, scrape_t *s, int i, char *err, size_t errlen) {
  const vl_monitor_spec_t *spec = mon->spec;
  const vl_monitor_prom_t *p = &spec->proms[i];
  s->mon = mon;
  s->tgt = p->target;
  /* The targets the options named are numbered when there are several; the run's own scrape of
   * the server's counters (labelled "server") does not change their names. */
  int named = 0;
  for (int k = 0; k < spec->n_proms; k++)
    named += !spec->proms[k].server;
  if (p->label)
    s->prefix = vl_xfmt("prom.%s.", p->label);
  else if (named > 1)
    s->prefix = vl_xfmt("prom.%d.", i + 1);
  else
    s->prefix = vl_xstrdup("prom.");
  s->headers = curl_slist_append(NULL, "Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1");
  if (s->headers && spec->server_url && same_origin(spec->server_url, s->tgt->url))
    s->headers = vl_transport_headers(s->headers, spec->api_key, spec->headers, spec->n_headers);
  s->xfer.easy = curl_easy_init();
  s->xfer.done = on_scrape_done;
  if (!s->xfer.easy || !s->headers ||
      vl_transport_policy(s->xfer.easy, spec->insecure, spec->cacert) != 0) {
    vl_set_err(err, errlen, "--monitor-prom %s: cannot set up an HTTP handle", s->tgt->url);
    return VL_ENOMEM;
  }
  CURL *e = s->xfer.easy;
  curl_easy_setopt(e, CURLOPT_URL, s->tgt->url);
  curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->headers);
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)spec->prom_timeout_ms);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_scrape_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
  s->sel_hit = vl_xcalloc(s->tgt->n_sels + 1, 1);
  if (vl_transport_prepare(mon->tr, &s->xfer) != 0) {
    vl_set_err(err, errlen, "--monitor-prom %s: cannot set up an HTTP handle", s->tgt->url);
    return VL_ECURL;
  }
  return 0;
}

static void scrape_invalidate(scrape_t *s, int64_t t) {
  for (size_t i = 0; i < s->n_ser; i++)
    vl__monitor_set_value(s->mon->series[s->ser[i]], 0, 0, t);
}

/* Records a failure: its reason (printf-formatted) and what to do about it (static, or ""). */
static void scrape_failed(scrape_t *s, int64_t t, const char *advice, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void scrape_failed(scrape_t *s, int64_t t, const char *advice, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->last_error, sizeof(s->last_error), fmt, ap);
  va_end(ap);
  s->advice = advice;
  s->failed++;
  s->last_failed = 1;
  scrape_invalidate(s, t);
}

/* The server's words in an error answer: the message of a JSON error body ({"error": {"message":
 * ...}}, {"error": "..."}, {"message": ...} or {"detail": ...}, as llama.cpp, vLLM, SGLang and
 * FastAPI write them), else its first line that is not blank; in its shown form, cut to fit out.
 * Empty for an empty body. */
static void body_words(const char *body, size_t len, char *out, size_t outlen) {
  out[0] = '\0';
  if (!body || !len)
    return;
  cJSON *j = cJSON_ParseWithLength(body, len);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
  const cJSON *m = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : e;
  if (!cJSON_IsString(m))
    m = cJSON_GetObjectItemCaseSensitive(j, "message");
  if (!cJSON_IsString(m))
    m = cJSON_GetObjectItemCaseSensitive(j, "detail");
  if (cJSON_IsString(m) && m->valuestring[0]) {
    vl_text_shown(out, outlen, m->valuestring);
    cJSON_Delete(j);
    return;
  }
  cJSON_Delete(j);
  size_t i = 0;
  while (i < len) {
    size_t e2 = i;
    while (e2 < len && body[e2] != '\n')
      e2++;
    size_t a = i, b = e2;
    while (a < b && (body[a] == ' ' || body[a] == '\t' || body[a] == '\r'))
      a++;
    while (b > a && (body[b - 1] == ' ' || body[b - 1] == '\t' || body[b - 1] == '\r'))
      b--;
    if (b > a) {
      char line[256];
      size_t n = VL_MIN(b - a, sizeof(line) - 1);
      memcpy(line, body + a, n);
      line[n] = '\0';
      vl_text_shown(out, outlen, line);
      return;
    }
    i = e2 + 1;
  }
}

/* What to do about a transfer that failed so (static, or ""). */
static const char *transfer_advice(CURLcode result) {
  switch (result) {
  case CURLE_COULDNT_CONNECT:
    return "is the server up, and is this its port?";
  case CURLE_COULDNT_RESOLVE_HOST:
    return "check the URL's host";
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CACERT_BADFILE:
    return "a scrape checks the server's certificate as the load does: --cacert FILE, or "
           "--insecure";
  default:
    return "";
  }
}

/* What to do about an answer of this status (static, or ""). */
static const char *status_advice(long status) {
  switch (status) {
  case 501:
    return "llama.cpp's llama-server serves /metrics only when started with --metrics";
  case 404:
    return "check the URL's path; SGLang serves /metrics only when started with "
           "--enable-metrics";
  case 401:
  case 403:
    return "--api-key and --header go to a scrape only at the --url's own scheme, host and port";
  default:
    return "";
  }
}

/* A sample selected at the first scrape. */
typedef struct {
  char *metric, *canon, *pairs;
  double value;
} found_t;

typedef struct {
  scrape_t *s;
  found_t *v;
  size_t n, cap;
  int64_t t;
  char *last; /* the name of the latest sample, at the first scrape */
} collect_t;

/* "k=v;k=v" sorted by label name, with characters that a CSV header or a shell would trip on
 * replaced by '_'. */
static char *pairs_text(const vl_prom_sample_t *smp) {
  size_t order[VL_PROM_MAX_LABELS], n = smp->n_labels, len = 1;
  for (size_t i = 0; i < n; i++) {
    size_t j = i;
    while (j > 0 && strcmp(smp->labels[order[j - 1]].name, smp->labels[i].name) > 0) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
    len += strlen(smp->labels[i].name) + strlen(smp->labels[i].value) + 2;
  }
  char *out = vl_xmalloc(len), *o = out;
  for (size_t i = 0; i < n; i++) {
    const vl_prom_label_t *l = &smp->labels[order[i]];
    if (i)
      *o++ = ';';
    for (const char *c = l->name; *c; c++)
      *o++ = *c;
    *o++ = '=';
    for (const unsigned char *c = (const unsigned char *)l->value; *c; c++) {
      int keep = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 *c == '_' || *c == '.' || *c == ':' || *c == '/' || *c == '-' || *c == '+';
      *o++ = keep ? (char)*c : '_';
    }
  }
  *o = '\0';
  return out;
}

static int on_collect(const vl_prom_sample_t *smp, void *ud) {
  collect_t *c = ud;
  scrape_t *s = c->s;
  /* A metric's samples come as one group (the format requires it): a new name is a new metric. */
  if (!c->last || strcmp(c->last, smp->name) != 0) {
    free(c->last);
    c->last = vl_xstrdup(smp->name);
    s->page_metrics++;
    size_t used = strlen(s->page_some);
    if (s->page_metrics <= 4 && used + strlen(smp->name) + 3 < sizeof(s->page_some))
      snprintf(s->page_some + used, sizeof(s->page_some) - used, "%s%s", used ? ", " : "",
               smp->name);
  }
  int any = 0;
  for (size_t i = 0; i < s->tgt->n_sels; i++)
    if (vl_prom_select_match(&s->tgt->sels[i], smp))
      any = s->sel_hit[i] = 1;
  if (!any)
    return 0;
  for (size_t i = 0; i < c->n; i++) {
    if (strcmp(c->v[i].metric, smp->name) == 0 && strcmp(c->v[i].canon, smp->labels_canon) == 0)
      return 0; /* a repeated sample: the first counts */
  }
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 16;
    c->v = vl_xrealloc(c->v, c->cap * sizeof(*c->v));
  }
  c->v[c->n++] =
      (found_t){vl_xstrdup(smp->name), vl_xstrdup(smp->labels_canon), pairs_text(smp), smp->value};
  return 0;
}

static int on_update(const vl_prom_sample_t *smp, void *ud) {
  collect_t *c = ud;
  scrape_t *s = c->s;
  if (!vl_prom_target_match(s->tgt, smp))
    return 0;
  for (size_t i = 0; i < s->n_ser; i++) {
    vl__monitor_ser_t *x = s->mon->series[s->ser[i]];
    if (x->seen || strcmp(x->metric, smp->name) != 0 || strcmp(x->canon, smp->labels_canon) != 0)
      continue;
    x->seen = 1;
    vl__monitor_set_value(x, smp->value, !isnan(smp->value), c->t);
    break;
  }
  return 0;
}

/* Makes the series of the first successful scrape. */
static void scrape_fix(scrape_t *s, collect_t *c) {
  vl_monitor_t *mon = s->mon;
  s->ser = vl_xcalloc(c->n ? c->n : 1, sizeof(*s->ser));
  for (size_t i = 0; i < c->n; i++) {
    found_t *f = &c->v[i];
    size_t same = 0;
    for (size_t j = 0; j < c->n; j++)
      same += strcmp(c->v[j].metric, f->metric) == 0;
    char *base = same > 1 ? vl_xfmt("%s%s{%s}", s->prefix, f->metric, f->pairs)
                          : vl_xfmt("%s%s", s->prefix, f->metric);
    char *name = vl_xstrdup(base);
    for (int k = 2; name_taken(mon, name); k++) {
      free(name);
      name = vl_xfmt("%s~%d", base, k);
    }
    free(base);
    double b = vl_memunit_series(name);
    vl__monitor_ser_t *x =
        vl__monitor_add_series(mon, name, b > 0 ? vl_memunit_label(b) : "", VL_MONITOR_PROM);
    x->metric = vl_xstrdup(f->metric);
    x->canon = vl_xstrdup(f->canon);
    vl__monitor_set_value(x, f->value, !isnan(f->value), c->t);
    s->ser[s->n_ser++] = mon->n_series - 1;
  }
  s->fixed = 1;
  /* The metrics named that the page lacks: they are never recorded. */
  size_t len = 1;
  for (size_t i = 0; !s->tgt->defaults && i < s->tgt->n_sels; i++)
    if (!s->sel_hit[i])
      len += strlen(s->tgt->sels[i].name) + 2;
  s->missing = vl_xmalloc(len);
  s->missing[0] = '\0';
  for (size_t i = 0; !s->tgt->defaults && i < s->tgt->n_sels; i++)
    if (!s->sel_hit[i])
      snprintf(s->missing + strlen(s->missing), len - strlen(s->missing), "%s%s",
               s->missing[0] ? ", " : "", s->tgt->sels[i].name);
}

/* The transport ended the scrape. */
static void on_scrape_done(vl_transfer_t *xfer, CURLcode result) {
  scrape_t *s = vl_container_of(xfer, scrape_t, xfer);
  if (!s->busy || s->mon->closing)
    return;
  int64_t t = vl_wall_ms();
  long status = 0;
  s->busy = 0;
  if (result == CURLE_OK)
    curl_easy_getinfo(s->xfer.easy, CURLINFO_RESPONSE_CODE, &status);
  if (result != CURLE_OK) {
    if (s->too_big)
      scrape_failed(s, t, "is this a metrics page?", "answer larger than %u MiB",
                    PROM_MAX_BYTES >> 20);
    else if (result == CURLE_OPERATION_TIMEDOUT)
      scrape_failed(s, t, "a server that is busy may answer late; its page is read every sample",
                    "%s", s->errbuf[0] ? s->errbuf : curl_easy_strerror(result));
    else
      scrape_failed(s, t, transfer_advice(result), "%s",
                    s->errbuf[0] ? s->errbuf : curl_easy_strerror(result));
  } else if (status != 200) {
    char words[200];
    body_words(s->buf, s->len, words, sizeof(words));
    scrape_failed(s, t, status_advice(status), "HTTP %ld%s%s", status, words[0] ? ": " : "", words);
  } else {
    collect_t c = {.s = s, .t = t};
    char why[160];
    int rc;
    if (!s->fixed) {
      rc = vl_prom_parse(s->buf, s->len, on_collect, &c, why, sizeof(why));
      if (rc == 0)
        scrape_fix(s, &c);
      for (size_t i = 0; i < c.n; i++) {
        free(c.v[i].metric);
        free(c.v[i].canon);
        free(c.v[i].pairs);
      }
      free(c.v);
      free(c.last);
      if (rc != 0) {
        /* A page that did not parse tells nothing of its metrics: the next good one will. */
        s->page_metrics = 0;
        s->page_some[0] = '\0';
        memset(s->sel_hit, 0, s->tgt->n_sels + 1);
      }
    } else {
      for (size_t i = 0; i < s->n_ser; i++)
        s->mon->series[s->ser[i]]->seen = 0;
      rc = vl_prom_parse(s->buf, s->len, on_update, &c, why, sizeof(why));
      for (size_t i = 0; i < s->n_ser && rc == 0; i++) {
        vl__monitor_ser_t *x = s->mon->series[s->ser[i]];
        if (!x->seen)
          vl__monitor_set_value(x, 0, 0, t);
      }
    }
    if (rc == 0) {
      s->ok++;
      s->last_failed = 0;
    } else {
      scrape_failed(s, t, "is this a Prometheus metrics page?", "malformed metrics: %s",
                    rc == VL_EINVAL ? why : vl_strerror(rc));
    }
  }
  vl__monitor_part_done(s->mon);
}

static void scrape_start(scrape_t *s) {
  vl_monitor_t *mon = s->mon;
  if (s->busy) {
    s->skipped++;
    return;
  }
  s->len = 0;
  s->too_big = 0;
  s->errbuf[0] = '\0';
  if (vl_transport_add(mon->tr, &s->xfer) != 0) {
    scrape_failed(s, vl_wall_ms(), "", "cannot start the request");
    return;
  }
  s->busy = 1;
  mon->pending++;
}

int vl__monitor_scrape_init(vl_monitor_t *mon, char *err, size_t errlen) {
  const vl_monitor_spec_t *spec = mon->spec;
  mon->scrapes = vl_xcalloc((size_t)spec->n_proms, sizeof(*mon->scrapes));
  for (int i = 0; i < spec->n_proms; i++) {
    mon->n_scrapes++;
    int rc = scrape_init(mon, &mon->scrapes[i], i, err, errlen);
    if (rc != 0)
      return rc;
  }
  return 0;
}

void vl__monitor_scrape_sample(vl_monitor_t *mon) {
  for (int i = 0; i < mon->n_scrapes; i++)
    scrape_start(&mon->scrapes[i]);
}

void vl__monitor_scrape_close(vl_monitor_t *mon) {
  for (int i = 0; i < mon->n_scrapes; i++) {
    scrape_t *s = &mon->scrapes[i];
    if (s->busy)
      vl_transport_remove(mon->tr, &s->xfer);
    s->busy = 0;
  }
}

void vl__monitor_scrape_free(vl_monitor_t *mon) {
  for (int i = 0; i < mon->n_scrapes; i++) {
    scrape_t *s = &mon->scrapes[i];
    if (s->xfer.easy)
      curl_easy_cleanup(s->xfer.easy);
    curl_slist_free_all(s->headers);
    free(s->buf);
    free(s->ser);
    free(s->prefix);
    free(s->sel_hit);
    free(s->missing);
  }
  free(mon->scrapes);
  mon->scrapes = NULL;
  mon->n_scrapes = 0;
}

int vl_monitor_prom_info(const vl_monitor_t *mon, int i, vl_monitor_part_info_t *out) {
  if (i < 0 || i >= mon->n_scrapes)
    return VL_ERANGE;
  const scrape_t *s = &mon->scrapes[i];
  memset(out, 0, sizeof(*out));
  out->label = s->tgt->url;
  out->ok = s->ok;
  out->failed = s->failed;
  out->skipped = s->skipped;
  out->fixed = s->fixed;
  out->n_series = s->n_ser;
  out->last_failed = s->last_failed;
  snprintf(out->last_error, sizeof(out->last_error), "%s", s->last_error);
  out->advice = s->advice ? s->advice : "";
  out->defaults = s->tgt->defaults;
  out->missing = s->missing ? s->missing : "";
  out->page_metrics = s->page_metrics;
  out->page_some = s->page_some;
  out->unit = "";
  out->read_unit = "";
  return 0;
}
