"""Memory sampling during a run and the leak analysis, against the mock's memory model: a known
number of KB per image kept for ever (a leak) or until a flush (a cache)."""
import json
import os
import signal
import subprocess
import time

import harness


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
        self.assertTrue(os.path.getsize(plot) > 10000)
        with open(plot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
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

    def test_missing_nvml_is_a_clear_error(self):
        if os.path.exists("/dev/nvidiactl"):
            self.skipTest("this machine has an NVIDIA driver")
        r = self.run_vlmload("--url", "http://127.0.0.1:9", "--model", "m", "--monitor-gpu",
                             "--requests", "1")
        self.assertNotEqual(r.rc, 0)
        self.assertIn("NVML", r.stderr + r.stdout)


class ScratchTimelineTest(harness.MockTestCase):
    """--analyze without --timeline keeps the timeline in a scratch file in $TMPDIR (/tmp when
    unset or empty), unlinked from the start: the analysis reads it back, and no exit, Ctrl-C or
    kill -9, leaves it behind."""

    def start(self, tmpdir):
        m = self.mock("--latency", "5ms")
        env = dict(os.environ)
        env.pop("TMPDIR", None)
        if tmpdir is not None:
            env["TMPDIR"] = tmpdir
        self.out = os.path.join(self.tmp, "summary-%d.json" % len(self._mocks))
        return subprocess.Popen([harness.VLMLOAD, "--url", m.url, "--rate", "50", "--duration",
                                 "60s", "--monitor-pid", "mock=%d" % m.proc.pid, "--sample-every",
                                 "100ms", "--analyze", "--quiet", "--output", self.out],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def scratch(self, p):
        """The scratch timeline as the running process holds it."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for fd in os.listdir("/proc/%d/fd" % p.pid):
                try:
                    target = os.readlink("/proc/%d/fd/%s" % (p.pid, fd))
                except OSError:
                    continue
                if "vlmload-timeline-" in target:
                    return target
            time.sleep(0.05)
        p.kill()
        p.communicate()
        self.fail("no scratch timeline open")

    def test_in_tmpdir_read_back_and_gone_after_ctrl_c(self):
        d = os.path.join(self.tmp, "scratch")
        os.makedirs(d)
        p = self.start(d)
        held = self.scratch(p)
        self.assertTrue(held.startswith(d + "/vlmload-timeline-"), held)
        self.assertTrue(held.endswith(" (deleted)"), held)
        self.assertEqual(os.listdir(d), [])
        time.sleep(1.5)  # timeline rows for the analysis
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, stderr)
        self.assertEqual(os.listdir(d), [])
        with open(self.out) as f:
            analysis = json.load(f)["memory_analysis"]
        self.assertIn("rss_mb.mock", [s["series"] for s in analysis["series"]])

    def test_gone_after_kill_9(self):
        d = os.path.join(self.tmp, "scratch")
        os.makedirs(d)
        p = self.start(d)
        held = self.scratch(p)
        p.kill()
        p.communicate(timeout=60)
        self.assertTrue(held.startswith(d + "/"), held)
        self.assertFalse(os.path.exists(held.replace(" (deleted)", "")), held)
        self.assertEqual(os.listdir(d), [])

    def test_tmp_when_tmpdir_unset_or_empty(self):
        for value in (None, ""):
            with self.subTest(TMPDIR=value):
                p = self.start(value)
                held = self.scratch(p)
                p.kill()
                p.communicate(timeout=60)
                self.assertTrue(held.startswith("/tmp/vlmload-timeline-"), held)
                self.assertTrue(held.endswith(" (deleted)"), held)


if __name__ == "__main__":
    harness.main()
