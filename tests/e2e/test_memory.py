"""Memory sampling during a run and the leak analysis, against the mock's memory model: a known
number of KB per image kept for ever (a leak) or until a flush (a cache), held for real so that
the mock's resident set shows it; and the plot, drawn by gnuplot."""
import base64
import json
import os
import subprocess
import urllib.request

import harness

MiB = 1048576.0


def decode_with_mock(m, path):
    """Sends the image at path to the mock as a chat request's image and returns what the mock's
    decoder (libpng, libjpeg-turbo) recorded of it: fmt, w, h, ..."""
    with open(path, "rb") as f:
        uri = "data:image/png;base64," + base64.b64encode(f.read()).decode()
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": uri}}, {"type": "text", "text": "?"}]}]})
    req = urllib.request.Request(m.url + "/v1/chat/completions", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200, r.status
    rec = m.records()[-1]
    assert rec["status"] == 200, rec
    return rec["images"][0]


class MemoryTest(harness.MockTestCase):
    def run_model(self, *mock_args):
        m = self.mock("--latency", "5ms", *mock_args)
        plot = os.path.join(self.tmp, "memory.png")
        # 1600 requests, a flush every 200, ten samples between flushes.
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--duration", "8s",
                             "--image-ratio", "1", "--resolution", "64x64", "--flush-every", "200",
                             "--monitor-pid", "mock=%d" % m.proc.pid,
                             "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
                             "--monitor-cmd", "answer=echo 42.5", "--sample-every", "100ms",
                             "--analyze", "--plot", plot)
        self.assertEqual(r.rc, 0, r.stderr)
        return m, r, plot

    def verdicts(self, r):
        return {s["series"]: s["verdict"] for s in r.summary["memory_analysis"]["series"]}

    def test_leak_is_found_with_its_slope(self):
        m, r, plot = self.run_model("--leak-kb-per-image", "200")
        cols = r.timeline[0].keys()
        for name in ("rss_mb.mock", "hwm_mb.mock", "cmd.answer", "prom.vlmmock_memory_bytes"):
            self.assertIn(name, cols)
        series = {s["series"]: s for s in r.summary["memory_analysis"]["series"]}
        leak = series["prom.vlmmock_memory_bytes"]
        self.assertEqual(leak["verdict"], "grows")
        # 200 KiB per image is 195.3 MiB per 1000 image requests; the floor's interval holds it.
        lo, hi = leak["floor"]["fit"]["ci"]
        self.assertLessEqual(lo, 195.3125)
        self.assertGreaterEqual(hi, 195.3125)
        self.assertEqual(self.verdicts(r)["cmd.answer"], "flat")
        # gnuplot drew a PNG of the default size that decodes in full.
        self.assertTrue(os.path.getsize(plot) > 10000)
        self.assertFalse(os.path.exists(plot + ".tmp"))
        img = decode_with_mock(m, plot)
        self.assertEqual((img["fmt"], img["w"], img["h"]), ("png", 1200, 700))
        self.assertIn("grows", r.stdout)

    def test_cache_returned_by_flush(self):
        m, r, plot = self.run_model("--cache-kb-per-image", "400")
        self.assertEqual(self.verdicts(r)["prom.vlmmock_memory_bytes"], "sawtooth-returns")

    def test_flat(self):
        m, r, plot = self.run_model()
        self.assertEqual(self.verdicts(r)["prom.vlmmock_memory_bytes"], "flat")

    def test_samples_and_standalone_analyze(self):
        m = self.mock("--latency", "5ms", "--leak-kb-per-image", "100")
        samples = os.path.join(self.tmp, "samples.csv")
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--duration", "6s",
                             "--image-ratio", "1", "--resolution", "64x64", "--flush-every", "100",
                             "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
                             "--sample-every", "250ms", "--samples", samples, "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        with open(samples) as f:
            rows = f.read().splitlines()
        self.assertEqual(rows[0], "wall_ms,elapsed_s,series,value,unit")
        self.assertGreater(len(rows), 15)
        timeline = os.path.join(self.tmp, "timeline.csv")
        out = os.path.join(self.tmp, "analysis.json")
        p = subprocess.run([harness.VLMLOAD, "analyze", timeline, "--output", out, "--quiet"],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        import json
        with open(out) as f:
            a = json.load(f)
        self.assertEqual({s["series"]: s["verdict"] for s in a["series"]}
                         ["prom.vlmmock_memory_bytes"], "grows")

    def test_timeline_jsonl(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--duration", "2s",
                             "--timeline-format", "jsonl", "--monitor-pid", str(m.proc.pid),
                             "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        import json
        with open(os.path.join(self.tmp, "timeline.csv")) as f:
            rows = [json.loads(l) for l in f]
        self.assertGreaterEqual(len(rows), 2)
        self.assertTrue(any(k.startswith("rss_mb.") for k in rows[0]))

    def test_missing_gnuplot_is_a_clear_error_before_the_run(self):
        empty = os.path.join(self.tmp, "empty-path")
        os.makedirs(empty)
        env = dict(os.environ, PATH=empty)
        # Nothing listens on port 9: the check comes before any request.
        r = self.run_vlmload("--url", "http://127.0.0.1:9", "--model", "m", "--requests", "5",
                             "--plot", os.path.join(self.tmp, "never.png"), env=env, timeout=20)
        self.assertEqual(r.rc, 2)
        self.assertEqual(r.stderr, "vlmload: --plot needs gnuplot (apt-get install gnuplot-nox): "
                                   "not found on PATH\n")
        self.assertIsNone(r.summary)
        # The same from the analyze subcommand, and a --gnuplot that is not there.
        tl = os.path.join(self.tmp, "t.csv")
        with open(tl, "w") as f:
            f.write("wall_ms,completed_total,rss_mb.x\n1000,1,5\n2000,2,6\n")
        p = subprocess.run([harness.VLMLOAD, "analyze", tl, "--plot", tl + ".png"], env=env,
                           capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.decode(), "vlmload analyze: --plot needs gnuplot (apt-get "
                                            "install gnuplot-nox): not found on PATH\n")
        r = self.run_vlmload("--url", "http://127.0.0.1:9", "--model", "m", "--requests", "5",
                             "--plot", os.path.join(self.tmp, "never.png"), "--gnuplot",
                             os.path.join(empty, "gnuplot"), timeout=20)
        self.assertEqual(r.rc, 2)
        self.assertIn("--gnuplot", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "never.png")))

    def test_missing_nvml_is_a_clear_error(self):
        if os.path.exists("/dev/nvidiactl"):
            self.skipTest("this machine has an NVIDIA driver")
        r = self.run_vlmload("--url", "http://127.0.0.1:9", "--model", "m", "--monitor-gpu",
                             "--requests", "1")
        self.assertNotEqual(r.rc, 0)
        self.assertIn("NVML", r.stderr + r.stdout)


if __name__ == "__main__":
    harness.main()
