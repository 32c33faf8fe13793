"""--report FILE.html: one self-contained page of a run, checked for what it holds (the summary's
figures, escaped server and user text, the charts as inline SVG), for what it must not hold (any
reference to the network), and rendered in headless Chromium: the screenshot must show the charts
in their colours. The page, parsed: it leads with the memory verdicts and their plot, names the
target and the model, lists only the error classes that occurred, counts requests per second
however finely the timeline samples (judged by the mock's record), and folds a phase that comes
back at each flush into one row. The matrix page's table is an HTML table whose cells link to
their own reports."""
import html.parser
import json
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import time
import zlib

import harness

# The colours of the first two lines of every chart (htmlreport.c COLOURS, plot.c PALETTE).
BLUE = (0x1f, 0x77, 0xb4)
ORANGE = (0xff, 0x7f, 0x0e)
# A model id and so a page title that is not HTML.
ODD_MODEL = "m<b>&\"x'</b>"


def shown(v):
    """A number as the page shows it (htmlreport.c put_num)."""
    if v == int(v) and abs(v) < 1e15:
        return "%.0f" % v
    return "%.2f" % v if abs(v) >= 100 else "%.3f" % v


def png_pixels(path):
    """Width, height and the rows of an 8-bit RGB or RGBA PNG, as lists of (r, g, b)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ft == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif ft == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif ft == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif ft == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pr) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


class Page(html.parser.HTMLParser):
    """A page parsed into nested elements: each a dict of tag, attrs, children (elements) and
    content (its text and elements, in order)."""
    VOID = {"meta", "br", "hr", "img", "input", "link"}

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.root = self.element(None, [])
        self.stack = [self.root]
        self.feed(text)
        self.close()

    @staticmethod
    def element(tag, attrs):
        return {"tag": tag, "attrs": dict(attrs), "children": [], "content": []}

    def handle_starttag(self, tag, attrs):
        el = self.element(tag, attrs)
        self.stack[-1]["children"].append(el)
        self.stack[-1]["content"].append(el)
        if tag not in self.VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        el = self.element(tag, attrs)
        self.stack[-1]["children"].append(el)
        self.stack[-1]["content"].append(el)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i]["tag"] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1]["content"].append(data)

    def all(self, tag=None, el=None, **attrs):
        """Every element under el (the page) of this tag and attributes, in document order."""
        out = []
        for c in (el or self.root)["children"]:
            if (tag is None or c["tag"] == tag) and all(c["attrs"].get(k) == v
                                                         for k, v in attrs.items()):
                out.append(c)
            out.extend(self.all(tag, c, **attrs))
        return out

    def one(self, tag, el=None, **attrs):
        found = self.all(tag, el, **attrs)
        assert len(found) == 1, (tag, attrs, len(found))
        return found[0]

    @staticmethod
    def text(el):
        return "".join(c if isinstance(c, str) else Page.text(c) for c in el["content"])

    def rows(self, table):
        """A table's rows as lists of (cell text, the cell element)."""
        return [[(self.text(c).strip(), c) for c in tr["children"] if c["tag"] in ("td", "th")]
                for tr in self.all("tr", table)]


def chromium():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return None


class ReportTest(harness.MockTestCase):
    def run_report(self, *extra, timeline=False):
        """A run against a mock whose memory grows, with --report and no --timeline (the scratch
        timeline feeds the page); returns the page's text, its path and the JSON summary."""
        m = self.mock("--latency", "5ms", "--model", ODD_MODEL, "--leak-kb-per-image", "100",
                      "--fault", "http500:0.1")
        page = os.path.join(self.tmp, "run.html")
        out = os.path.join(self.tmp, "summary.json")
        cmd = [harness.VLMLOAD, "--url", m.url, "--model", ODD_MODEL, "--rate", "100",
               "--duration", "3s", "--image-ratio", "1", "--resolution", "64x64",
               "--monitor-pid", "mock=%d" % m.proc.pid, "--sample-every", "200ms", "--quiet",
               "--output", out, "--report", page, *extra]
        p = subprocess.run(cmd, capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        with open(out) as f:
            summary = json.load(f)
        with open(page, encoding="utf-8") as f:
            text = f.read()
        self.assertFalse(os.path.exists(page + ".tmp"))
        return text, page, summary

    def assert_offline(self, text):
        # Nothing that would reach the network: no remote src or href, no scripts, no links.
        for m in re.finditer(r"""(?:src|href)\s*=\s*["']?([^"'\s>]*)""", text, re.I):
            self.assertNotRegex(m.group(1), r"^(?i:https?:)?//", m.group(0))
            self.assertTrue(m.group(1).startswith("#"), m.group(0))
        self.assertNotRegex(text, r"(?i)<script")
        self.assertNotRegex(text, r"(?i)<link")
        self.assertNotRegex(text, r"(?i)<img")
        self.assertNotRegex(text, r"(?i)<iframe|<object|<embed|@import|url\(")

    def test_page_holds_the_summary_and_no_network(self):
        text, page, s = self.run_report()
        self.assert_offline(text)
        self.assertTrue(text.startswith("<!DOCTYPE html>"))
        # The summary's figures.
        req = s["requests"]
        self.assertGreater(req["failed"], 0)
        for label, v in (("requests sent", req["sent"]), ("requests ok", req["ok"]),
                         ("requests failed", req["failed"])):
            self.assertIn("<th>%s</th><td class=num>%s</td>" % (label, shown(v)), text)
        self.assertIn("<th>request throughput</th><td class=num>%s req/s</td>"
                      % shown(s["request_throughput"]), text)
        self.assertIn("<th>output throughput</th><td class=num>%s tok/s</td>"
                      % shown(s["output_throughput"]), text)
        self.assertIn("<th>http_5xx</th><td class=num>%d</td>" % s["errors"]["http_5xx"], text)
        self.assertEqual(s["errors"]["http_5xx"], req["failed"])
        # The latency table: every figure of the end-to-end row, in the summary's order.
        lat = s["latency_ms"]
        row = "<tr><th>end-to-end</th>" + "".join(
            "<td class=num>%s</td>" % shown(lat[k]) for k in lat) + "</tr>"
        self.assertIn(row, text)
        # Goodput, when the summary has it (another option adds it): each key shown.
        for k, v in s.items():
            if "goodput" in k and isinstance(v, (int, float)):
                self.assertIn("<th>%s</th><td class=num>%s</td>" % (k, shown(v)), text)
        # The charts drawn from the scratch timeline, the memory plot and its verdicts.
        for chart in ("chart-throughput", "chart-tokens", "chart-latency"):
            self.assertIn('<svg id="%s"' % chart, text)
        self.assertGreaterEqual(text.count("<polyline"), 5)
        self.assertGreaterEqual(text.count("<svg"), 4)
        self.assertNotIn("<?xml", text)
        self.assertNotIn("<!DOCTYPE svg", text)
        verdicts = {a["series"]: a["verdict"] for a in s["memory_analysis"]["series"]}
        self.assertEqual(verdicts["rss_mb.mock"], "grows")
        self.assertIn("<tr><td>rss_mb.mock</td><td class=verdict>grows</td>", text)
        # Text from the server and the user is escaped, in the summary and the configuration.
        self.assertNotIn(ODD_MODEL, text)
        esc = "m&lt;b&gt;&amp;&quot;x&#39;&lt;/b&gt;"
        self.assertIn("<th>model</th><td class=num>%s</td>" % esc, text)
        self.assertIn("<section id=config>", text)
        self.assertIn("&quot;model&quot;:\t&quot;m&lt;b&gt;&amp;\\&quot;x&#39;&lt;/b&gt;&quot;",
                      text)
        self.render(page)

    def render(self, page):
        browser = chromium()
        if not browser:
            self.skipTest("chromium not found on PATH (apt-get install chromium; tools/deps.sh "
                          "--test installs it): the page is not rendered")
        shot = os.path.join(self.tmp, "shot.png")
        profile = os.path.join(self.tmp, "chromium-profile")
        p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                            "--user-data-dir=" + profile, "--screenshot=" + shot,
                            "--window-size=1200,4000", "file://" + page],
                           capture_output=True, timeout=120)
        self.assertTrue(os.path.exists(shot), p.stderr.decode()[-2000:])
        w, h, rows = png_pixels(shot)
        self.assertEqual((w, h), (1200, 4000))
        # The memory plot leads, in the first screen: its first series' blue.
        top = [px for r in rows[:1000] for px in r]
        self.assertGreater(sum(1 for px in top if px == BLUE), 300)
        # The per-second charts lie further down: their lines show in the charts' colours,
        # among many others (grid, labels, anti-aliasing).
        lower = [px for r in rows[1000:] for px in r]
        colours = set(lower)
        self.assertGreater(len(colours), 800)
        self.assertGreater(sum(1 for px in lower if px == BLUE), 300)
        self.assertGreater(sum(1 for px in lower if px == ORANGE), 300)

    def test_analyze_subcommand_writes_a_page(self):
        text, page, s = self.run_report("--timeline", os.path.join(self.tmp, "t.csv"))
        again = os.path.join(self.tmp, "again.html")
        p = subprocess.run([harness.VLMLOAD, "analyze", os.path.join(self.tmp, "t.csv"),
                            "--quiet", "--report", again], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        with open(again, encoding="utf-8") as f:
            a = f.read()
        self.assert_offline(a)
        self.assertIn('<svg id="chart-throughput"', a)
        self.assertIn("<section id=memory>", a)
        self.assertIn("<tr><td>rss_mb.mock</td><td class=verdict>grows</td>", a)
        self.assertIn("t.csv", a)

    def test_written_on_ctrl_c(self):
        m = self.mock("--latency", "5ms")
        page = os.path.join(self.tmp, "run.html")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--duration", "60s", "--quiet",
                             "--report", page, interrupt_after=1.5)
        self.assertEqual(r.rc, 130, r.stderr)
        with open(page, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("<th>stopped by</th><td class=num>%s</td>" % r.summary["stop_reason"], text)
        self.assertIn("<th>requests sent</th><td class=num>%d</td>" % r.summary["requests"]["sent"],
                      text)
        self.assertTrue(text.rstrip().endswith("</html>"))

    def test_dry_run_names_the_page(self):
        page = os.path.join(self.tmp, "never.html")
        p = subprocess.run([harness.VLMLOAD, "--url", "http://127.0.0.1:9", "--model", "m",
                            "--requests", "5", "--report", page, "--dry-run"],
                           capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertIn("report        %s: an HTML page at the end\n" % page, p.stdout.decode())
        self.assertFalse(os.path.exists(page))

    def test_missing_gnuplot_is_a_clear_error_before_the_run(self):
        empty = os.path.join(self.tmp, "empty-path")
        os.makedirs(empty)
        env = dict(os.environ, PATH=empty)
        page = os.path.join(self.tmp, "never.html")
        r = self.run_vlmload("--url", "http://127.0.0.1:9", "--model", "m", "--requests", "5",
                             "--monitor-pid=%d" % os.getpid(), "--report", page, env=env,
                             timeout=20)
        self.assertEqual(r.rc, 2)
        self.assertEqual(r.stderr, "vlmload: --report needs gnuplot for its memory plot (apt-get "
                                   "install gnuplot-nox): not found on PATH\n")
        self.assertFalse(os.path.exists(page))
        tl = os.path.join(self.tmp, "t.csv")
        with open(tl, "w") as f:
            f.write("wall_ms,completed_total,rss_mb.x\n1000,1,5\n2000,2,6\n")
        p = subprocess.run([harness.VLMLOAD, "analyze", tl, "--report", page], env=env,
                           capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 1)
        self.assertIn("--report needs gnuplot", p.stderr.decode())
        self.assertFalse(os.path.exists(page))

    def test_page_leads_with_the_verdict_and_counts_each_second(self):
        # Rows of 200 ms, arrivals at a constant 50 a second for 5 s of load, a fifth of them
        # refused by the mock, each answered 150 ms after it arrived, a drained flush every 25
        # requests (a flush phase that comes back).
        latency = 0.15
        m = self.mock("--latency", "150ms", "--leak-kb-per-image", "64", "--fault", "http500:0.2")
        page = os.path.join(self.tmp, "run.html")
        tl = os.path.join(self.tmp, "t.csv")
        out = os.path.join(self.tmp, "summary.json")
        p = subprocess.run([harness.VLMLOAD, "--url", m.url, "--rate", "50", "--arrival",
                            "constant", "--duration", "5s", "--image-ratio", "1", "--resolution",
                            "64x64", "--flush-every", "25", "--monitor-pid",
                            "mock=%d" % m.proc.pid, "--sample-every", "200ms", "--quiet",
                            "--timeline", tl, "--output", out, "--report", page,
                            "--log-requests", os.path.join(self.tmp, "requests.jsonl")],
                           capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        with open(out) as f:
            s = json.load(f)
        with open(tl) as f:
            rows = list(csv_rows(f))
        with open(page, encoding="utf-8") as f:
            doc = Page(f.read())
        # The rows are finer than a second: five to a second.
        ends = [float(r["elapsed_s"]) for r in rows]
        self.assertLess(max(b - a for a, b in zip(ends, ends[1:])), 0.3)
        # Verdict first: the memory section, its verdicts then its plot, before the summary.
        sections = [el["attrs"].get("id") for el in doc.all("section")]
        self.assertEqual(sections[:3], ["memory", "summary", "latency"])
        memory = doc.one("section", id="memory")
        kinds = [c["tag"] for c in memory["children"]]
        self.assertLess(kinds.index("table"), kinds.index("div"))
        verdicts = {r[0][0]: r[1][0] for r in doc.rows(doc.one("table", id="verdicts"))[1:]}
        self.assertEqual(verdicts["rss_mb.mock"], "grows")
        # The target and the model, as the mock knows them, under the title.
        target = doc.text(doc.one("p", **{"class": "target"}))
        self.assertEqual(target, "target %s/v1/chat/completions \u00b7 model %s (detected)"
                         % (m.url, m.records()[0]["model"]))
        # The error classes that occurred, and only those: the mock's refusals.
        refused = sum(1 for r in m.records() if r["status"] == 500)
        self.assertGreater(refused, 0)
        errors = {r[0][0]: int(r[1][0]) for r in doc.rows(doc.one("table", id="errors"))}
        self.assertEqual(errors, {"http_5xx": refused})
        # Per second. The seconds as the page says it makes them: second k holds the rows whose
        # middle falls in [k-1, k); its figure is their count, over the time they cover where that
        # is not about a second (0.9 s to 1.1 s), and a second covered less than half is left
        # out. Each is judged by the mock's record: the requests it received in that time (sent)
        # and answered 200 in it (ok: received its latency before). A request reaches the mock
        # some time after vlmload sends it (lag: under a loaded machine, tens of ms), so a
        # second's count lies between the mock's counts over the second less and plus that lag
        # at its start or end, and one either side at an edge.
        t0 = float(rows[0]["wall_ms"]) - 1000 * float(rows[0]["elapsed_s"])
        seconds, prev = {}, 0.0
        for r in rows:
            end = float(r["elapsed_s"])
            seconds.setdefault(math.floor((prev + end) / 2) + 1, [prev, end])[1] = end
            prev = end
        kept = sorted(k for k, (a, b) in seconds.items() if b - a >= 0.5)
        # A point for each second: 5 s of load, and the flushes' pauses.
        self.assertEqual(kept, list(range(1, len(kept) + 1)))
        self.assertIn(len(kept), (5, 6, 7))
        recs = [(r["wall_ms"] - t0, r["status"]) for r in m.records()]
        self.assertEqual(len(recs), s["requests"]["sent"])
        with open(os.path.join(self.tmp, "requests.jsonl")) as f:
            sent_ms = sorted(e["sent_ms"] - t0 for e in map(json.loads, f) if "sent_ms" in e)
        self.assertEqual(len(sent_ms), len(recs))
        lag = max(0, max(t - u for t, u in zip(sorted(t for t, _ in recs), sent_ms)))
        chart = doc.one("svg", id="chart-throughput")
        lines = {l["attrs"]["data-name"]: l for l in doc.all("polyline", chart)}
        counted = 0
        for name, want, shift in (("sent requests/s", lambda st: True, 0),
                                  ("ok requests/s", lambda st: st == 200, 1000 * latency)):
            xs = [float(v) for v in lines[name]["attrs"]["data-x"].split()]
            ys = [float(v) for v in lines[name]["attrs"]["data-y"].split()]
            self.assertEqual(xs, kept, name)
            self.assertEqual(len(lines[name]["attrs"]["points"].split()), len(kept))
            for k, y in zip(kept, ys):
                a, b = 1000 * seconds[k][0], 1000 * seconds[k][1]
                per = 1 if 0.9 <= (b - a) / 1000 < 1.1 else (b - a) / 1000
                counted += per == 1
                fewest = sum(1 for t, st in recs if a + lag < t + shift <= b and want(st))
                most = sum(1 for t, st in recs if a < t + shift <= b + lag and want(st))
                self.assertTrue(fewest - 1 <= y * per <= most + 1,
                                (name, k, y, fewest, most, a, b, lag))
        self.assertGreaterEqual(counted, 6)  # most seconds are whole: their figure is a count
        # The phases: one row each, however often it came back (the flush, at the flushes the
        # mock recorded whose drain a row ended in), with the times it did.
        flushes = len(m.records("/flush_cache"))
        self.assertEqual(s["flushes"]["count"], flushes)
        runs = {}
        for a, b in zip([None] + rows, rows):
            if a is None or a["phase"] != b["phase"]:
                runs[b["phase"]] = runs.get(b["phase"], 0) + 1
        self.assertGreaterEqual(runs.get("flush", 0), 2)
        self.assertLessEqual(runs["flush"], flushes)
        table = doc.rows(doc.one("table", id="phases"))
        self.assertEqual([t for t, _ in table[0]], ["phase", "times", "from (s)",
                                                     "seconds in all"])
        self.assertEqual({r[0][0]: int(r[1][0]) for r in table[1:]}, runs)

    def test_matrix_page_links_each_cell_to_its_report(self):
        mock = ["{vlmmock}", "--host", "127.0.0.1", "--port", "{port}", "--latency", "2ms"]
        spec = {"defaults": {"rate": 50, "duration": "2s", "image-ratio": 1,
                             "resolution": "64x64", "sample-every": "200ms"},
                "server": {"command": mock, "ready_timeout": "20s"},
                "cells": [{"name": "plain"},
                          {"name": "leak", "server": {"command": mock + [
                              "--leak-kb-per-image", "64"]}}]}
        path = os.path.join(self.tmp, "m.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        out = os.path.join(self.tmp, "out")
        pages = os.path.join(self.tmp, "pages")
        os.makedirs(pages)
        report = os.path.join(pages, "matrix.html")
        p = subprocess.run([harness.VLMLOAD, "matrix", path, "--output-dir", out, "--quiet",
                            "--report", report], capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        with open(os.path.join(out, "matrix.json")) as f:
            cells = {c["name"]: c for c in json.load(f)["cells"]}
        with open(report, encoding="utf-8") as f:
            doc = Page(f.read())
        self.assertEqual(doc.all("pre"), [])
        table = doc.rows(doc.one("table", id="cells"))
        self.assertEqual([t for t, _ in table[0]],
                         ["cell", "series", "verdict", "mechanism", "MB/1000 req", "floor", "req/s",
                          "p50 ms"])
        # Every series of every cell a row, with the verdict of the cell's own analysis.
        shown, linked, cell = [], {}, None
        for row in table[1:]:
            if row[0][0]:
                cell = row[0][0]
                anchors = doc.all("a", row[0][1])
                self.assertEqual(len(anchors), 1, row)
                linked[cell] = anchors[0]["attrs"]["href"]
            shown.append((cell, row[1][0], row[2][0]))
        self.assertEqual(sorted(shown), sorted((n, s["series"], s["verdict"])
                                               for n, c in cells.items() for s in c["series"]))
        self.assertEqual(set(linked), {"plain", "leak"})
        for name, href in linked.items():
            # The link, from the page's folder, reaches the cell's own report: the one whose
            # target is the cell's server.
            self.assertFalse(href.startswith("/"), href)
            target = os.path.normpath(os.path.join(pages, href))
            self.assertEqual(target, os.path.join(out, name, "report.html"))
            with open(target, encoding="utf-8") as f:
                own = Page(f.read())
            self.assertIn("http://127.0.0.1:%d/v1/chat/completions" % cells[name]["server"]["port"],
                          own.text(own.one("p", **{"class": "target"})))


def csv_rows(f):
    import csv
    return csv.DictReader(f)


if __name__ == "__main__":
    harness.main()
