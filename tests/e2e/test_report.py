"""--report FILE.html: one self-contained page of a run, checked for what it holds (the summary's
figures, escaped server and user text, the charts as inline SVG), for what it must not hold (any
reference to the network), and rendered in headless Chromium: the screenshot must show the charts
in their colours."""
import json
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
                          "installs it): the page is not rendered")
        shot = os.path.join(self.tmp, "shot.png")
        profile = os.path.join(self.tmp, "chromium-profile")
        p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                            "--user-data-dir=" + profile, "--screenshot=" + shot,
                            "--window-size=1200,2000", "file://" + page],
                           capture_output=True, timeout=120)
        self.assertTrue(os.path.exists(shot), p.stderr.decode()[-2000:])
        w, h, rows = png_pixels(shot)
        self.assertEqual((w, h), (1200, 2000))
        # The per-second charts lie in the lower part of the first screen: their lines show in
        # the charts' colours, among many others (grid, labels, anti-aliasing).
        lower = [px for r in rows[h // 2:] for px in r]
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


if __name__ == "__main__":
    harness.main()
