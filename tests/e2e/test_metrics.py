#!/usr/bin/env python3
"""--metrics-listen: the run's figures in Prometheus's text format, judged by the mock's record,
by a real Prometheus (Debian's package) scraping a run, and the Grafana dashboard that reads them.
"""
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "tools", "grafana", "vlmload.json")
# No proxy from the environment for loopback questions.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def get(url, timeout=5):
    with OPENER.open(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def parse(text):
    """Parses Prometheus's text format strictly: returns {family: {"type", "help", "samples":
    [(name, labels, value)]}}, failing on any line out of the format, a sample whose family has
    no HELP and TYPE before it, or a family given twice."""
    fams, cur = {}, None
    assert text.endswith("\n"), "the exposition must end with a newline"
    for line in text.split("\n")[:-1]:
        if line.startswith("# HELP "):
            name, help_ = line[7:].split(" ", 1)
            assert name not in fams, "family %s given twice" % name
            fams[name] = {"help": help_, "type": None, "samples": []}
            cur = name
            continue
        if line.startswith("# TYPE "):
            name, typ = line[7:].split(" ")
            assert name == cur and fams[name]["type"] is None, "TYPE %s without its HELP" % name
            assert typ in ("counter", "gauge", "histogram"), typ
            fams[name]["type"] = typ
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        name, labels_text, value = m.group(1), m.group(3), m.group(4)
        labels = {}
        if labels_text:
            pos = 0
            while pos < len(labels_text):
                lm = LABEL.match(labels_text, pos)
                assert lm, "bad labels: %r" % line
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
        assert cur is not None and fams[cur]["type"], "sample before HELP/TYPE: %r" % line
        fam = fams[cur]
        base = name
        if fam["type"] == "histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix):
                    base = name[: -len(suffix)]
        assert base == cur, "sample %s under the HELP/TYPE of %s" % (name, cur)
        fam["samples"].append((name, labels, float(value)))
    return fams


def check_format(test, text):
    """Prometheus's conventions on every family; histograms cumulative with +Inf = _count."""
    fams = parse(text)
    for name, fam in fams.items():
        test.assertRegex(name, r"^vlmload_[a-z0-9_]+$")
        test.assertTrue(fam["help"].strip(), name)
        if fam["type"] == "counter":
            test.assertTrue(name.endswith("_total"), name)
        if fam["type"] == "histogram":
            test.assertTrue(name.endswith("_seconds"), name)
            buckets = [(s[1]["le"], s[2]) for s in fam["samples"] if s[0] == name + "_bucket"]
            count = [s[2] for s in fam["samples"] if s[0] == name + "_count"]
            sums = [s[2] for s in fam["samples"] if s[0] == name + "_sum"]
            test.assertEqual(len(count), 1, name)
            test.assertEqual(len(sums), 1, name)
            test.assertGreater(len(buckets), 10, name)
            test.assertEqual(buckets[-1][0], "+Inf", name)
            les = [float(b[0]) for b in buckets]
            test.assertEqual(les, sorted(les), name)
            test.assertEqual(len(set(les)), len(les), name)
            counts = [b[1] for b in buckets]
            test.assertEqual(counts, sorted(counts), "%s: buckets not cumulative" % name)
            test.assertEqual(counts[-1], count[0], "%s: +Inf is not _count" % name)
        for s in fam["samples"]:
            test.assertFalse(math.isnan(s[2]), s)
    return fams


def value(fams, family, name=None, **labels):
    for s in fams[family]["samples"]:
        if s[0] == (name or family) and all(s[1].get(k) == v for k, v in labels.items()):
            return s[2]
    raise KeyError("%s %s" % (family, labels))


def served_names(fams):
    out = set()
    for name, fam in fams.items():
        out.add(name)
        if fam["type"] == "histogram":
            out |= {name + "_bucket", name + "_sum", name + "_count"}
    return out


class Scraper:
    """Scrapes a running vlmload's endpoint until its phase is "done" (the run's outputs written,
    the endpoint lingering); keeps a scrape from the middle of the run too."""

    def __init__(self, port):
        self.url = "http://127.0.0.1:%d/metrics" % port
        self.middle = None
        self.final = None
        self.content_type = None
        self.scrapes = 0

    def run(self, proc, limit=60):
        deadline = time.monotonic() + limit * harness.SLACK
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status, ctype, text = get(self.url)
            except OSError:
                time.sleep(0.05)
                continue
            self.scrapes += 1
            self.content_type = ctype
            if status == 200 and 'vlmload_phase{phase="done"} 1' in text:
                self.final = text
                return
            if status == 200 and 'vlmload_requests_in_flight 0' not in text and \
                    "vlmload_requests_sent_total 0\n" not in text:
                self.middle = text
            time.sleep(0.1)


class TestExposition(harness.MockTestCase):
    def test_counters_match_the_mock_and_format_holds(self):
        """A plain GET while the run goes and during --metrics-linger: every family has HELP and
        TYPE, histograms are cumulative with +Inf equal to _count, and the final counters equal
        what the mock recorded (requests, their statuses, images and their bytes, tokens)."""
        mock = self.mock("--fault", "http500:0.1", "--fault", "http400:0.05", "--ttft", "5ms",
                         "--itl", "1ms", "--tokens", "8")
        port = harness.closed_port()
        run = harness.Started(self.tmp, "--url", mock.url, "--rate", "40", "--requests", "120",
                              "--stream", "--resolution", "64x64,96x96", "--image-ratio", "0.5",
                              "--keep-going", "--quiet", "--metrics-listen",
                              "127.0.0.1:%d" % port, "--metrics-linger", "3s")
        scraper = Scraper(port)
        scraper.run(run.proc)
        res = run.finish(60)
        self.assertEqual(res.rc, 0, res.stderr)
        self.assertIsNotNone(scraper.middle, "no scrape saw the run in the middle")
        self.assertIsNotNone(scraper.final, "no scrape saw the end: " + res.stderr)
        self.assertTrue(scraper.content_type.startswith("text/plain; version=0.0.4"))
        check_format(self, scraper.middle)
        fams = check_format(self, scraper.final)

        recs = mock.records()
        statuses = [r["status"] for r in recs]
        self.assertEqual(len(recs), 120)
        self.assertEqual(value(fams, "vlmload_requests_sent_total"), len(recs))
        self.assertEqual(value(fams, "vlmload_requests_total", outcome="ok"),
                         statuses.count(200))
        self.assertEqual(value(fams, "vlmload_requests_total", outcome="failed"),
                         len(recs) - statuses.count(200))
        self.assertEqual(value(fams, "vlmload_request_errors_total", **{"class": "http_5xx"}),
                         statuses.count(500))
        self.assertEqual(value(fams, "vlmload_request_errors_total", **{"class": "http_4xx"}),
                         statuses.count(400))
        self.assertGreater(statuses.count(500), 0)
        images = [i for r in recs for i in r.get("images", [])]
        self.assertGreater(len(images), 0)
        self.assertEqual(value(fams, "vlmload_images_sent_total"), len(images))
        self.assertEqual(value(fams, "vlmload_image_sent_bytes_total"),
                         sum(i["bytes"] for i in images))
        self.assertEqual(value(fams, "vlmload_completion_tokens_total"),
                         sum(r["tokens"] for r in recs if r["status"] == 200))
        self.assertEqual(value(fams, "vlmload_requests_in_flight"), 0)
        # The histograms are the summary's own: counts equal, and the summary's p99 lies in the
        # le bucket the exposition puts the 99th percentile in.
        lat = res.summary["latency_sent_ms"]
        name = "vlmload_request_latency_from_send_seconds"
        self.assertEqual(value(fams, name, name + "_count"), lat["count"])
        self.assertAlmostEqual(value(fams, name, name + "_sum"),
                               lat["mean"] * lat["count"] / 1e3, places=6)
        buckets = [(float(s[1]["le"]), s[2]) for s in fams[name]["samples"]
                   if s[0] == name + "_bucket"]
        rank = math.ceil(0.99 * lat["count"])
        lo = 0.0
        for le, cum in buckets:
            if cum >= rank:
                break
            lo = le
        self.assertTrue(lo < lat["p99"] / 1e3 <= le, (lo, lat["p99"], le))
        self.assertEqual(value(fams, "vlmload_time_to_first_token_seconds",
                               "vlmload_time_to_first_token_seconds_count"),
                         res.summary["ttft_ms"]["count"])
        self.assertEqual(value(fams, "vlmload_inter_token_latency_seconds",
                               "vlmload_inter_token_latency_seconds_count"),
                         res.summary["itl_ms"]["count"])

    def test_memory_series_and_flushes(self):
        """Every memory series vlmload samples is a gauge in bytes labelled by series and
        process, equal to the timeline's last reading; flushes and their pauses are counted."""
        mock = self.mock("--leak-kb-per-image", "256")
        port = harness.closed_port()
        run = harness.Started(self.tmp, "--url", mock.url, "--rate", "50", "--requests", "60",
                              "--resolution", "64x64", "--quiet", "--flush-every", "20",
                              "--monitor-pid", "mock=%d" % mock.proc.pid, "--sample-every",
                              "100ms", "--metrics-listen", "127.0.0.1:%d" % port,
                              "--metrics-linger", "3s")
        scraper = Scraper(port)
        scraper.run(run.proc)
        res = run.finish(60)
        self.assertEqual(res.rc, 0, res.stderr)
        self.assertIsNotNone(scraper.final, res.stderr)
        fams = check_format(self, scraper.final)
        mem = {s[1]["series"]: (s[1]["process"], s[2])
               for s in fams["vlmload_memory_bytes"]["samples"]}
        self.assertIn("rss_mb.mock", mem)
        self.assertEqual(mem["rss_mb.mock"][0], "mock")
        last = float(res.timeline[-1]["rss_mb.mock"])
        self.assertAlmostEqual(mem["rss_mb.mock"][1] / 1048576, last, delta=0.01)
        flushes = mock.records("/flush_cache")
        self.assertEqual(value(fams, "vlmload_flushes_total"), len(flushes))
        self.assertGreater(len(flushes), 0)
        self.assertAlmostEqual(value(fams, "vlmload_flush_pause_seconds_total"),
                               res.summary["paused_s"], places=3)

    def test_workers_serve_the_merged_figures(self):
        """--workers 2: the parent serves one endpoint whose counters and histograms are the
        workers' merged, equal to the merged JSON and to the mock's record; the workers serve
        none."""
        mock = self.mock("--fault", "http500:0.1", "--ttft", "5ms", "--tokens", "4")
        port = harness.closed_port()
        run = harness.Started(self.tmp, "--url", mock.url, "--rate", "60", "--requests", "120",
                              "--stream", "--workers", "2", "--keep-going", "--quiet",
                              "--metrics-listen", "127.0.0.1:%d" % port, "--metrics-linger", "3s")
        scraper = Scraper(port)
        scraper.run(run.proc)
        res = run.finish(90)
        self.assertEqual(res.rc, 0, res.stderr)
        self.assertIsNotNone(scraper.middle, "no scrape saw the run in the middle")
        self.assertIsNotNone(scraper.final, res.stderr)
        self.assertEqual(res.stderr.count("metrics for Prometheus"), 1, res.stderr)
        fams = check_format(self, scraper.final)
        recs = mock.records()
        statuses = [r["status"] for r in recs]
        self.assertEqual(len(recs), 120)
        self.assertEqual(value(fams, "vlmload_requests_sent_total"), len(recs))
        self.assertEqual(value(fams, "vlmload_requests_total", outcome="ok"),
                         statuses.count(200))
        self.assertEqual(value(fams, "vlmload_request_errors_total", **{"class": "http_5xx"}),
                         statuses.count(500))
        self.assertEqual(res.summary["requests"]["ok"], statuses.count(200))
        for name, key in (("vlmload_request_latency_from_send_seconds", "latency_sent_ms"),
                          ("vlmload_time_to_first_token_seconds", "ttft_ms")):
            self.assertEqual(value(fams, name, name + "_count"), res.summary[key]["count"])
            self.assertAlmostEqual(value(fams, name, name + "_sum"),
                                   res.summary[key]["mean"] * res.summary[key]["count"] / 1e3,
                                   places=5)
        self.assertEqual(value(fams, "vlmload_target_rate_requests_per_second"), 60)

    def test_bad_address_and_port_in_use(self):
        """A malformed ADDR:PORT and a port another program holds: one line naming the option,
        exit status 2, and nothing sent."""
        mock = self.mock()
        for bad in ("9464", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:x", "nosuchhost.invalid:1"):
            res = self.run_vlmload("--url", mock.url, "--requests", "3", "--metrics-listen", bad)
            self.assertEqual(res.rc, 2, (bad, res.stderr))
            lines = res.stderr.strip().split("\n")
            self.assertEqual(len(lines), 1, res.stderr)
            self.assertIn("--metrics-listen '%s'" % bad, lines[0])
        held = socket.socket()
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        try:
            res = self.run_vlmload("--url", mock.url, "--requests", "3", "--metrics-listen",
                                   "127.0.0.1:%d" % held.getsockname()[1])
        finally:
            held.close()
        self.assertEqual(res.rc, 2, res.stderr)
        lines = res.stderr.strip().split("\n")
        self.assertEqual(len(lines), 1, res.stderr)
        self.assertIn("in use", lines[0])
        self.assertEqual(len(mock.records()), 0)


class TestPrometheus(harness.MockTestCase):
    """A real Prometheus scrapes a run every second; its HTTP API's answers equal the run's JSON."""

    def setUp(self):
        super().setUp()
        self.prom_bin = shutil.which("prometheus")
        if not self.prom_bin:
            self.skipTest("the prometheus binary is not installed (Debian: apt-get install "
                          "prometheus, or tools/deps.sh --test): the scrape test cannot run")

    def query(self, expr, at=None):
        q = {"query": expr}
        if at is not None:
            q["time"] = "%.3f" % at
        _, _, body = get(self.prom + "/api/v1/query?" + urllib.parse.urlencode(q), timeout=10)
        out = json.loads(body)
        self.assertEqual(out["status"], "success", (expr, out))
        return out["data"]

    def start_prometheus(self, target_port):
        pport = harness.closed_port()
        conf = os.path.join(self.tmp, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
                    "scrape_configs:\n  - job_name: vlmload\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % target_port)
        log = open(os.path.join(self.tmp, "prometheus.log"), "w")
        proc = subprocess.Popen(
            [self.prom_bin, "--config.file", conf, "--storage.tsdb.path",
             os.path.join(self.tmp, "tsdb"), "--web.listen-address", "127.0.0.1:%d" % pport],
            stdout=log, stderr=log)
        self.addCleanup(lambda: (proc.terminate(), proc.wait(20), log.close()))
        self.prom = "http://127.0.0.1:%d" % pport
        # Ready, and scraping: Prometheus starts its scrape loops a few seconds after it is
        # ready; the target's first failed scrape (up 0) says the loop runs.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.assertIsNone(proc.poll(), "prometheus exited")
            try:
                if get(self.prom + "/-/ready")[0] == 200 and \
                        self.query('up{job="vlmload"}')["result"]:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.fail("prometheus did not start scraping")

    def test_prometheus_agrees_with_the_json(self):
        mock = self.mock("--ttft", "20ms", "--itl", "2ms", "--tokens", "16",
                         "--latency-per-inflight", "1ms", "--fault", "http503:0.1")
        port = harness.closed_port()
        self.start_prometheus(port)
        run = harness.Started(self.tmp, "--url", mock.url, "--rate", "30", "--duration", "6s",
                              "--stream", "--keep-going", "--quiet", "--resolution", "64x64",
                              "--image-ratio", "0.5", "--flush-every", "40", "--monitor-pid",
                              "mock=%d" % mock.proc.pid, "--metrics-listen",
                              "127.0.0.1:%d" % port, "--metrics-linger", "5s")
        # Prometheus has scraped the end once its phase series says done; the queries are
        # evaluated at that moment, while the endpoint still lingers.
        at = None
        deadline = time.monotonic() + 40 * harness.SLACK
        while time.monotonic() < deadline and at is None:
            data = self.query('vlmload_phase{phase="done"}')
            if data["result"]:
                at = float(data["result"][0]["value"][0])
            else:
                time.sleep(0.3)
        res = run.finish(60)
        self.assertEqual(res.rc, 0, res.stderr)
        self.assertIsNotNone(at, "Prometheus never scraped the run's end")
        s = res.summary
        answers = {}

        def scalar(expr):
            data = self.query(expr, at)
            self.assertEqual(len(data["result"]), 1, (expr, data))
            v = float(data["result"][0]["value"][1])
            answers[expr] = v
            return v

        ok = scalar('vlmload_requests_total{outcome="ok"}')
        failed = scalar('vlmload_requests_total{outcome="failed"}')
        e503 = scalar('vlmload_request_errors_total{class="http_5xx"}')
        self.assertEqual(ok, s["requests"]["ok"])
        self.assertEqual(failed, s["requests"]["failed"])
        self.assertEqual(e503, s["errors"].get("http_5xx", 0))
        self.assertGreater(e503, 0)
        self.assertEqual(ok + failed, len(mock.records()))
        # The quantile Prometheus interpolates lies inside the le bucket that holds the JSON's
        # p99: the bucket's bounds are its neighbours in the exposition.
        for hist, key in (("vlmload_request_latency_from_send_seconds", "latency_sent_ms"),
                          ("vlmload_time_to_first_token_seconds", "ttft_ms"),
                          ("vlmload_request_latency_seconds", "latency_ms")):
            q = scalar("histogram_quantile(0.99, %s_bucket)" % hist)
            p99 = s[key]["p99"] / 1e3
            les = sorted(float(r["metric"]["le"]) for r in
                         self.query("%s_bucket" % hist, at)["result"]
                         if r["metric"]["le"] != "+Inf")
            hi = min(le for le in les if le >= p99)
            lo = max([0.0] + [le for le in les if le < p99])
            self.assertTrue(lo <= q <= hi, (hist, lo, q, hi, p99))
            answers["JSON %s.p99 (s)" % key] = p99
            answers["%s bucket" % hist] = (lo, hi)
            cnt = scalar("%s_count" % hist)
            self.assertEqual(cnt, s[key]["count"])
        # Every PromQL expression of the dashboard parses, and has data over the run, as Grafana
        # asks for it (a range query; its variables as Grafana fills them).
        for expr in dashboard_exprs():
            e = expr.replace("$__rate_interval", "4s").replace("$__interval", "2s")
            e = e.replace("$job", ".+")
            q = {"query": e, "start": "%.3f" % (at - 30), "end": "%.3f" % at, "step": "1"}
            _, _, body = get(self.prom + "/api/v1/query_range?" + urllib.parse.urlencode(q))
            out = json.loads(body)
            self.assertEqual(out["status"], "success", (e, out))
            self.assertTrue(out["data"]["result"], "the dashboard's %s has no data" % expr)
        for k, v in answers.items():
            print("  %s = %s" % (k, v), file=sys.stderr)


def dashboard_exprs():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    out = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    out += [a["expr"] for a in dash.get("annotations", {}).get("list", []) if a.get("expr")]
    return out


class TestDashboard(harness.MockTestCase):
    def test_dashboard_structure_and_metrics(self):
        """tools/grafana/vlmload.json holds Grafana's dashboard JSON model: schemaVersion, a
        Prometheus datasource variable, panels with id, type, title, gridPos (inside the 24-wide
        grid, not overlapping), datasource and targets; every metric its PromQL names is one a
        run serves."""
        with open(DASHBOARD) as f:
            dash = json.load(f)
        self.assertIsInstance(dash["schemaVersion"], int)
        self.assertGreaterEqual(dash["schemaVersion"], 36)
        self.assertIsInstance(dash["title"], str)
        self.assertIsInstance(dash["uid"], str)
        self.assertIn("time", dash)
        self.assertIn(dash.get("refresh"), ("1s", "5s", "10s"))
        tvars = dash["templating"]["list"]
        ds = [v for v in tvars if v["type"] == "datasource"]
        self.assertEqual(len(ds), 1)
        self.assertEqual(ds[0]["query"], "prometheus")
        ds_ref = "${%s}" % ds[0]["name"]
        ids, cells = set(), set()
        kinds = set()
        for p in dash["panels"]:
            self.assertNotIn(p["id"], ids)
            ids.add(p["id"])
            self.assertIn(p["type"], ("timeseries", "stat", "row", "bargauge", "gauge", "table"))
            kinds.add(p["type"])
            g = p["gridPos"]
            self.assertTrue(all(isinstance(g[k], int) for k in ("h", "w", "x", "y")), p["title"])
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), cells, "panel %s overlaps" % p["title"])
                    cells.add((x, y))
            if p["type"] == "row":
                continue
            self.assertEqual(p["datasource"], {"type": "prometheus", "uid": ds_ref})
            self.assertTrue(p["targets"], p["title"])
            for t in p["targets"]:
                self.assertTrue(t["expr"].strip())
                self.assertIn("refId", t)
                self.assertEqual(t["datasource"], {"type": "prometheus", "uid": ds_ref})
        anns = [a for a in dash["annotations"]["list"] if "vlmload_flushes_total" in
                a.get("expr", "")]
        self.assertEqual(len(anns), 1, "flushes are annotations")
        self.assertEqual(anns[0]["datasource"], {"type": "prometheus", "uid": ds_ref})

        # The names a run serves, from a run's own scrape.
        mock = self.mock()
        port = harness.closed_port()
        run = harness.Started(self.tmp, "--url", mock.url, "--rate", "50", "--requests", "20",
                              "--quiet", "--metrics-listen", "127.0.0.1:%d" % port,
                              "--metrics-linger", "2s")
        scraper = Scraper(port)
        scraper.run(run.proc)
        self.assertEqual(run.finish(60).rc, 0)
        served = served_names(parse(scraper.final))
        titles = " ".join(p["title"].lower() for p in dash["panels"])
        for word in ("rate", "latency", "error", "in flight", "memory"):
            self.assertIn(word, titles)
        for expr in dashboard_exprs():
            names = set(re.findall(r"\bvlmload_[a-z0-9_]+", expr))
            self.assertTrue(names, expr)
            self.assertLessEqual(names, served, expr)


if __name__ == "__main__":
    harness.main()
