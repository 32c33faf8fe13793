"""Verdicts on ordinary runs against the mock's memory model: a pure cache flushed every 50
requests is a sawtooth after 30 s, a rise that stops is levels-off with no warm-up set, a server
that holds its memory is flat after 3 s, and --fail-on turns a verdict into exit status 3. The
mock's /mock/stats says what its memory did; vlmload's verdict is held to it."""
import json
import os
import subprocess

import harness

MiB = 1048576
PROM = "prom.vlmmock_memory_bytes"
# Under AddressSanitizer the mock's resident set is its allocator's (freed memory is held in
# quarantine): there only the mock's own account of its memory model is judged.
SANITIZED = harness.SANITIZED
JUDGED = (PROM,) + (() if SANITIZED else ("rss_mb.mock",))
CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "corpus")


def monitors(m):
    """The mock's resident set, and its own account of its memory from /metrics."""
    return ("--monitor-pid", "mock=%d" % m.proc.pid, "--monitor-prom",
            m.url + "/metrics#vlmmock_memory_bytes")


def analyze(test, *args):
    """`vlmload analyze` on the timeline the test's run wrote; returns its JSON by series name."""
    out = os.path.join(test.tmp, "analysis.json")
    p = subprocess.run([harness.VLMLOAD, "analyze", os.path.join(test.tmp, "timeline.csv"),
                        "--series", ",".join(JUDGED), "--output", out, "--quiet", *args],
                       capture_output=True, timeout=60)
    test.assertEqual(p.returncode, 0, p.stderr)
    with open(out) as f:
        return {s["series"]: s for s in json.load(f)["series"]}


class VerdictsTestCase(harness.MockTestCase):
    def series(self, r, name):
        return {s["series"]: s for s in r.summary["memory_analysis"]["series"]}[name]


class SawtoothTest(VerdictsTestCase):
    def test_pure_cache_is_a_sawtooth(self):
        # The README's main job, less its leak: 512 KiB per image that each flush gives back,
        # 30 s at 50 requests/s with a drained flush every 50, sampled every 200 ms. Each window's
        # floor is read some requests after its flush, so the floors scatter by megabytes and the
        # floor slope's interval admits a few MB of growth over the run: more than 1% of the mean
        # (0.3 MB), less than the 8 MB that counts.
        m = self.mock("--latency", "20ms", "--cache-kb-per-image", "512")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--duration", "30s",
                             "--images", CORPUS, "--flush-every", "50", *monitors(m),
                             "--sample-every", "200ms", "--analyze", timeout=180)
        self.assertEqual(r.rc, 0, r.stderr)
        st = m.stats()
        # The peer flushed its cache some 30 times and never leaked: what it holds is at most
        # one window's cache.
        self.assertGreaterEqual(st["flushes_total"], 25)
        self.assertEqual(st["memory_leaked_bytes"], 0)
        self.assertLessEqual(st["memory_cached_bytes"], 50 * 512 * 1024)
        for name in JUDGED:
            with self.subTest(series=name):
                a = self.series(r, name)
                self.assertEqual(a["verdict"], "sawtooth-returns", a["reason"])
                self.assertGreaterEqual(len(a["floor"]["windows"]), 25)
                self.assertEqual(a["thresholds"]["min_growth_mb"], 8)
                self.assertLess(a["thresholds"]["min_growth_frac"] * a["mean"], 1)
                self.assertIn("\n%s: sawtooth-returns -- memory climbs" % name, r.stdout)
        self.assertIn("material if growth over the run >= 8 MB and either >= 1% of the mean",
                      r.stdout)
        # The same timeline judged by 1% of the mean alone, as it was: the floor's interval is held
        # to 0.3 MB, and the verdict is no sawtooth unless the interval rules that out.
        for name, old in analyze(self, "--min-growth-mb", "0").items():
            f = old["floor"]["fit"]
            span = old["x_last"] - old["x_first"]
            if f["ci"][1] * span / 1000 >= old["thresholds"]["min_growth"]:
                self.assertEqual(old["verdict"], "inconclusive", (name, old["reason"]))
                self.assertIsNotNone(old["run_longer"])


class VerdictsTest(VerdictsTestCase):
    def test_rise_that_stops_levels_off(self):
        # 512 KiB per image held for good, up to 100 MiB in all: memory rises 100 MB over the first
        # 200 requests and then holds for the last 100, as a server's allocator fills and stays.
        m = self.mock("--latency", "20ms", "--leak-kb-per-image", "512", "--memory-limit-mb",
                      "100")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "300",
                             "--images", CORPUS, *monitors(m), "--sample-every", "100ms",
                             "--analyze")
        self.assertEqual(r.rc, 0, r.stderr)
        st = m.stats()
        self.assertEqual(st["memory_leaked_bytes"], 100 * MiB)
        self.assertEqual(st["memory_unheld_bytes"], 100 * 512 * 1024)
        for name in JUDGED:
            with self.subTest(series=name):
                a = self.series(r, name)
                self.assertEqual(a["verdict"], "levels-off", a["reason"])
                lv = a["levels_off"]
                self.assertAlmostEqual(lv["x"], 200, delta=20)
                self.assertGreater(lv["rise"], 90)
                self.assertLess(lv["rise"], 140)
                self.assertAlmostEqual(lv["tail_x"], lv["x"], delta=1e-9)
                self.assertIn("\n%s: levels-off -- the memory rises" % name, r.stdout)
        # Whatever the warm-up: half the rise cut away, still levels-off; all of it, flat.
        for name, a in analyze(self, "--warmup", "100").items():
            self.assertEqual(a["verdict"], "levels-off", (name, a["reason"]))
        for name, a in analyze(self, "--warmup", "230").items():
            self.assertEqual(a["verdict"], "flat", (name, a["reason"]))

    def test_flat_server_stopped_after_3s(self):
        # A server with no memory model, text-only requests, the run stopped by Ctrl-C after 3 s:
        # its resident set moves by a fraction of a megabyte as its heap warms.
        m = self.mock("--latency", "20ms")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "2000", *monitors(m),
                             "--sample-every", "100ms", "--analyze", interrupt_after=3)
        self.assertEqual(r.rc, 130, r.stderr)
        self.assertEqual(m.stats()["memory_leaked_bytes"], 0)
        for name in JUDGED:
            with self.subTest(series=name):
                a = self.series(r, name)
                self.assertLess(a["max"] - a["min"], 8)
                self.assertEqual(a["verdict"], "flat", a["reason"])

    def test_flat_server_with_images_and_flushes_stopped_after_3s(self):
        # The README's main job against a server with no memory model, stopped after 3 s: its
        # floors move by a megabyte or two as its decoder's buffers settle.
        m = self.mock("--latency", "20ms")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "2000",
                             "--images", CORPUS, "--flush-every", "50", *monitors(m),
                             "--sample-every", "100ms", "--analyze", interrupt_after=3)
        self.assertEqual(r.rc, 130, r.stderr)
        st = m.stats()
        self.assertEqual(st["memory_leaked_bytes"], 0)
        self.assertGreaterEqual(st["flushes_total"], 3)
        for name in JUDGED:
            with self.subTest(series=name):
                a = self.series(r, name)
                self.assertEqual(a["verdict"], "flat", a["reason"])

    def test_fail_on(self):
        # A leak of 200 KiB per image, 195 MB per 1000 requests: --fail-on grows fails the run
        # with exit status 3 and says which series; the JSON says it too.
        m = self.mock("--latency", "5ms", "--leak-kb-per-image", "200")
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--duration", "3s",
                             "--image-ratio", "1", "--resolution", "64x64",
                             "--monitor-pid", "mock=%d" % m.proc.pid, "--sample-every", "100ms",
                             "--fail-on", "grows,inconclusive")
        self.assertGreater(m.stats()["memory_leaked_bytes"], 100 * MiB)
        self.assertEqual(r.rc, 3, r.stderr)
        self.assertIn("fail-on: rss_mb.mock is grows", r.stdout)
        # No text report without --analyze: only the line that fails it.
        self.assertNotIn("rss_mb.mock: grows --", r.stdout)
        fo = r.summary["memory_analysis"]["fail_on"]
        self.assertEqual(fo["verdicts"], ["grows", "inconclusive"])
        self.assertIn("rss_mb.mock", fo["failed"])
        self.assertEqual(r.summary["config"]["fail_on"], ["grows", "inconclusive"])
        # `vlmload analyze` on its timeline says the same with its exit status alone.
        p = subprocess.run([harness.VLMLOAD, "analyze", os.path.join(self.tmp, "timeline.csv"),
                            "--quiet", "--fail-on", "grows"], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(p.stdout, b"")
        # The run's --min-growth-mb is the analysis's: growth below it is not material, and the
        # run passes.
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--duration", "3s",
                             "--image-ratio", "1", "--resolution", "64x64",
                             "--monitor-pid", "mock=%d" % m.proc.pid, "--sample-every", "100ms",
                             "--fail-on", "grows", "--min-growth-mb", "100000", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["config"]["analysis"]["min_growth_mb"], 100000)
        self.assertEqual(self.series(r, "rss_mb.mock")["thresholds"]["min_growth_mb"], 100000)
        self.assertNotEqual(self.series(r, "rss_mb.mock")["verdict"], "grows")

    def test_fail_on_passes_a_flat_server(self):
        m = self.mock("--latency", "5ms")
        watch = (("--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes") if SANITIZED else
                 ("--monitor-pid", "mock=%d" % m.proc.pid))
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--duration", "3s", *watch,
                             "--sample-every", "100ms", "--fail-on", "grows", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.summary["memory_analysis"]["fail_on"]["failed"], [])

    def test_fail_on_refused(self):
        m = self.mock()
        for args, want in (
                (("--fail-on", "leak", "--monitor-pid", str(m.proc.pid)),
                 "vlmload: --fail-on 'leak': 'leak' is not a verdict; want some of grows, "
                 "levels-off, sawtooth-returns, flat, inconclusive, peak, not-memory, "
                 "ended-early, insufficient-data, separated by commas\n"),
                (("--fail-on", "grows"),
                 "vlmload: --fail-on: nothing to sample: add --monitor-pid PID"),
                (("--min-growth-mb", "lots", "--monitor-pid", str(m.proc.pid)),
                 "vlmload: --min-growth-mb 'lots': want MB over the run")):
            r = self.run_vlmload("--url", m.url, "--rate", "10", "--duration", "1s", *args)
            self.assertEqual(r.rc, 2, args)
            self.assertTrue(r.stderr.startswith(want), (args, r.stderr))
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertEqual(m.records(), [])


if __name__ == "__main__":
    harness.main()
