"""Goodput under --slo and --percentiles, against mocks whose timings are exact: the share meeting
each bound is the share of requests the fast mock answered, TTFT and TPOT bounds on a stream are
met or missed as the mock's schedule says, --min-goodput exits 3, and vLLM's percentile keys."""
import json
import os
import subprocess

import harness


class GoodputTest(harness.MockTestCase):
    def fast_and_slow(self, *fast_args):
        """Three URLs, two of one fast mock (10 ms) and one of a slow one (400 ms): requests take
        them in turn by id, so two in three go to the fast one."""
        fast = self.mock("--latency", "10ms", *fast_args)
        slow = self.mock("--latency", "400ms")
        return fast, slow, ["--url", fast.url, "--url", fast.url, "--url", slow.url]

    def test_e2e_bound_below_the_slow_requests(self):
        fast, slow, urls = self.fast_and_slow("--fault", "http500:0.25")
        r = self.run_vlmload(*urls, "--rate", "30", "--requests", "60", "--slo", "e2e=200ms")
        self.assertEqual(r.rc, 0, r.stderr)
        s = r.summary
        n_fast, n_slow = len(fast.records()), len(slow.records())
        self.assertEqual((n_fast, n_slow), (40, 20))
        failed = sum(1 for rec in r.log if rec["error"])
        self.assertEqual(failed, 10)  # a quarter of the fast mock's
        good = n_fast - failed  # succeeded, and under the bound
        slo = s["slo"]
        self.assertEqual(slo["e2el_ms"], 200)
        self.assertEqual(s["config"]["slo"], "e2e=200ms")
        self.assertNotIn("ttft_ms", slo)
        self.assertEqual(slo["judged"], 60)
        self.assertAlmostEqual(slo["met"]["e2el"], good / 60)
        self.assertAlmostEqual(slo["met_all"], good / 60)
        self.assertAlmostEqual(s["request_goodput"], good / s["duration"], places=6)
        self.assertEqual(sum(int(row["good"]) for row in r.timeline), good)
        self.assertIn("goodput", r.stdout)
        self.assertIn("all %.1f%% of 60" % (100.0 * good / 60), r.stdout)
        # A bound above every latency: every successful request meets it.
        r = self.run_vlmload(*urls, "--rate", "30", "--requests", "30", "--slo", "e2el=2s",
                             "--quiet")
        self.assertAlmostEqual(r.summary["slo"]["met_all"],
                               r.summary["requests"]["ok"] / 30)

    def test_ttft_and_tpot_on_a_stream(self):
        m = self.mock("--ttft", "100ms", "--itl", "20ms", "--tokens", "6")
        args = ("--url", m.url, "--stream", "--rate", "20", "--requests", "20", "--quiet")
        r = self.run_vlmload(*args, "--slo", "ttft=50ms,tpot=40ms")
        self.assertEqual(r.rc, 0, r.stderr)
        slo = r.summary["slo"]
        self.assertEqual((slo["ttft_ms"], slo["tpot_ms"]), (50, 40))
        self.assertEqual(slo["met"], {"ttft": 0, "tpot": 1})
        self.assertEqual(slo["met_all"], 0)
        self.assertEqual(r.summary["request_goodput"], 0)
        r = self.run_vlmload(*args, "--slo", "ttft=200ms,tpot=10ms")
        self.assertEqual(r.summary["slo"]["met"], {"ttft": 1, "tpot": 0})
        r = self.run_vlmload(*args, "--slo", "ttft=200ms,tpot=40ms")
        self.assertEqual(r.summary["slo"]["met_all"], 1)
        self.assertEqual(sum(int(row["good"]) for row in r.timeline), 20)
        # Not streamed: no TTFT nor TPOT, which vLLM counts as 0, meeting any bound.
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--requests", "10", "--quiet",
                             "--slo", "ttft=50ms,tpot=10ms")
        self.assertEqual(r.summary["slo"]["met_all"], 1)

    def test_min_goodput_threshold(self):
        m = self.mock("--latency", "10ms")
        args = ("--url", m.url, "--rate", "20", "--requests", "20", "--slo", "e2e=1s")
        r = self.run_vlmload(*args, "--min-goodput", "1000")
        self.assertEqual(r.rc, 3, r.stderr)
        t = r.summary["thresholds"][0]
        self.assertEqual((t["name"], t["passed"], t["limit"]), ("min_goodput", False, 1000))
        self.assertAlmostEqual(t["value"], r.summary["request_goodput"])
        self.assertIn("THRESHOLD  min_goodput", r.stdout)
        r = self.run_vlmload(*args, "--min-goodput", "1")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertTrue(r.summary["thresholds"][0]["passed"])
        r = self.run_vlmload("--url", m.url, "--requests", "5", "--min-goodput", "1")
        self.assertEqual(r.rc, 2)
        self.assertIn("--slo", r.stderr)

    def test_bad_spec_is_one_line_naming_the_part(self):
        r = self.run_vlmload("--slo", "ttft=500ms,ttfb=2s")
        self.assertEqual(r.rc, 2)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("'ttfb'", r.stderr)
        r = self.run_vlmload("--percentiles", "50,101")
        self.assertEqual(r.rc, 2)
        self.assertIn("'101'", r.stderr)

    def test_percentile_keys(self):
        m = self.mock("--ttft", "20ms", "--itl", "5ms", "--tokens", "8")
        args = ("--url", m.url, "--stream", "--rate", "50", "--requests", "40")
        r = self.run_vlmload(*args, "--percentiles", "50,90,99,99.9")
        self.assertEqual(r.rc, 0, r.stderr)
        s = r.summary
        for metric in ("ttft", "tpot", "itl", "e2el"):
            for p in ("50", "90", "99", "99.9"):
                self.assertIsNotNone(s["p%s_%s_ms" % (p, metric)], (p, metric))
        self.assertEqual(s["p99_ttft_ms"], s["ttft_ms"]["p99"])
        self.assertEqual(s["p99.9_ttft_ms"], s["ttft_ms"]["p99.9"])
        self.assertEqual(s["p50_e2el_ms"], s["latency_sent_ms"]["p50"])
        self.assertGreaterEqual(s["p99.9_ttft_ms"], 20)
        head = next(l for l in r.stdout.splitlines() if "latency (ms)" in l).split()
        self.assertEqual(head[2:], ["mean", "std", "p50", "p90", "p99", "p99.9", "max"])
        self.assertEqual(r.summary["config"]["percentiles"], "50,90,99,99.9")
        self.assertNotIn("slo", r.summary["config"])
        # The default list: the keys vlmload always wrote, and no others.
        r = self.run_vlmload(*args)
        s = r.summary
        self.assertNotIn("p50_e2el_ms", s)
        self.assertNotIn("p99.9", s["ttft_ms"])
        self.assertEqual(sorted(k for k in s["ttft_ms"] if k.startswith("p")),
                         ["p50", "p90", "p95", "p99"])
        for k in ("p99_ttft_ms", "p90_e2e_latency_ms", "p95_itl_ms", "median_tpot_ms"):
            self.assertIn(k, s)
        self.assertNotIn("slo", s)
        self.assertNotIn("request_goodput", s)
        head = next(l for l in r.stdout.splitlines() if "latency (ms)" in l).split()
        self.assertEqual(head[2:], ["mean", "std", "p50", "p90", "p95", "p99", "max"])

    def test_per_stage(self):
        fast, slow, urls = self.fast_and_slow()
        r = self.run_vlmload(*urls, "--sweep", "rate=15:30:15", "--duration", "2s",
                             "--slo", "e2e=200ms", "--percentiles", "50,99.9")
        self.assertEqual(r.rc, 0, r.stderr)
        phases = r.summary["phases"]
        self.assertEqual(len(phases), 2)
        met = 0
        for p in phases:
            slo = p["slo"]
            self.assertEqual(slo["judged"], p["ok"] + p["failed"])
            self.assertGreater(slo["met_all"], 0.5)
            self.assertLess(slo["met_all"], 0.8)
            good = round(slo["met_all"] * slo["judged"])
            met += good
            self.assertAlmostEqual(p["request_goodput"], good / (p["seconds"] - p["paused_s"]))
            self.assertIn("p99.9_ttft_ms", p)
            self.assertIn("latency_p99.9_ms", p)
        self.assertEqual(met, len(fast.records()))
        self.assertEqual(r.summary["slo"]["met_all"] * r.summary["slo"]["judged"], met)
        lines = r.stdout.splitlines()
        self.assertEqual(sum(1 for l in lines if "meeting e2e=200ms" in l), 1)
        for p in phases:
            words = [l.split() for l in lines]
            want = "%.2f/s" % p["request_goodput"]
            self.assertEqual(sum(1 for w in words if p["name"] in w[:2] and want in w), 1, lines)

    def test_shards_merge_goodput(self):
        fast, slow, urls = self.fast_and_slow()
        parts, met = [], 0
        for i in range(2):
            h = os.path.join(self.tmp, "h%d.json" % i)
            r = self.run_vlmload(*urls, "--rate", "40", "--requests", "60", "--shard", "%d/2" % i,
                                 "--slo", "e2e=200ms", "--histograms", h, "--quiet")
            self.assertEqual(r.rc, 0, r.stderr)
            met += round(r.summary["slo"]["met_all"] * r.summary["slo"]["judged"])
            parts.append(h)
        out = os.path.join(self.tmp, "merged.json")
        p = subprocess.run([harness.VLMLOAD, "merge", out, *parts], capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        with open(out) as f:
            merged = json.load(f)
        self.assertEqual(met, len(fast.records()))
        self.assertEqual(merged["slo"]["judged"], 60)
        self.assertAlmostEqual(merged["slo"]["met_all"], met / 60)
        self.assertIsNotNone(merged["request_goodput"])


if __name__ == "__main__":
    harness.main()
