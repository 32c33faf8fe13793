"""What the reported figures mean, checked against a known truth: the mock's configured timing and
its own record of what arrived, and statistics computed here from the per-request log. The names
are SGLang bench_serving's (and vLLM bench serve's), with their meaning: `concurrency` the mean in
flight, `max_concurrency` the cap, TPOT (e2e - TTFT) / (output tokens - 1), std the population
standard deviation; a figure not measured is null."""
import json
import os
import re
import subprocess

import harness

# A single gap between tokens carries the machine's scheduling jitter, which adds in squares to
# their spread: a 2 ms gap late by a millisecond or two now and then moves the std of gaps half 2 ms
# and half 8 ms (3 ms) by up to 0.6 ms. A request's TPOT averages ten gaps and holds to 0.3 ms; a
# wrong formula (a variance, or sums of squares merged wrong) misses by far more than either.
ITL_STD_TOL = 0.6


def pstdev(values):
    n = len(values)
    mean = sum(values) / n
    return (sum((v - mean) ** 2 for v in values) / n) ** 0.5


def request_lines(run):
    return [l for l in run.log if "id" in l]


class FiguresTest(harness.MockTestCase):
    def test_concurrency_is_mean_in_flight(self):
        # Little's law on the mock's own record: n requests of L seconds each over the span from
        # the first arrival to the last completion hold n * L / span in flight on average.
        latency = 0.1
        m = self.mock("--latency", "100ms")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "300",
                             "--concurrency", "64", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        s = r.summary
        t = sorted(rec["t_us"] for rec in m.records())
        self.assertEqual(len(t), 300)
        truth = len(t) * latency / ((t[-1] - t[0]) / 1e6 + latency)
        self.assertLess(abs(s["concurrency"] - truth) / truth, 0.05 * harness.SLACK,
                        (s["concurrency"], truth))
        self.assertEqual(s["max_concurrency"], 64)

    def test_bench_serving_counts_leave_the_warmup_out(self):
        # 100 warm-up requests, then 200 measured ones at 100/s: bench_serving's completed,
        # tokens and throughput are of the 200, over the span from their first send to their
        # last completion.
        m = self.mock("--latency", "10ms", "--tokens", "7")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "300", "--warmup",
                             "100", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        s = r.summary
        self.assertEqual(len(m.records()), 300)
        self.assertEqual(s["requests"]["ok"], 300)
        self.assertEqual(s["completed"], 200)
        self.assertEqual(s["total_output_tokens"], 200 * 7)
        lines = [l for l in request_lines(r) if l["phase"] == "measure"]
        self.assertEqual(len(lines), 200)
        span = (max(l["done_ms"] for l in lines) - min(l["sent_ms"] for l in lines)) / 1e3
        self.assertLess(abs(s["duration"] - span), 0.01, (s["duration"], span))
        self.assertLess(abs(s["request_throughput"] - 200 / span), 0.5)
        self.assertLess(abs(s["output_throughput"] - 1400 / span), 5)
        self.assertLess(abs(s["request_throughput"] - 100) / 100, 0.1 * harness.SLACK)

    def test_tpot_and_std(self):
        # Two servers taking requests in turn, one 2 ms between tokens, the other 8 ms: the gaps
        # and the per-request TPOT are half 2 ms and half 8 ms, so both have mean 5 and std 3.
        a = self.mock("--ttft", "20ms", "--itl", "2ms", "--tokens", "11")
        b = self.mock("--ttft", "20ms", "--itl", "8ms", "--tokens", "11")
        r = self.run_vlmload("--url", a.url, "--url", b.url, "--stream", "--rate", "40",
                             "--requests", "120", "--max-tokens", "64", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        s = r.summary
        self.assertEqual(len(a.records()) + len(b.records()), 120)
        tol = 0.3 * harness.SLACK
        self.assertEqual(s["tpot_ms"]["count"], 120)
        self.assertLess(abs(s["mean_tpot_ms"] - 5), tol, s["tpot_ms"])
        self.assertLess(abs(s["std_tpot_ms"] - 3), tol, s["tpot_ms"])
        self.assertLess(abs(s["std_itl_ms"] - 3), ITL_STD_TOL * harness.SLACK, s["itl_ms"])
        self.assertLess(abs(s["mean_itl_ms"] - 5), tol, s["itl_ms"])
        self.assertLessEqual(s["median_tpot_ms"], s["p99_tpot_ms"])
        self.assertLess(abs(s["p99_tpot_ms"] - 8), tol + 0.1, s["tpot_ms"])
        # std of TTFT, e2e and TPOT as numpy's std would give from the per-request log.
        lines = request_lines(r)
        self.assertEqual(len(lines), 120)
        ttft = [l["ttft_ms"] for l in lines]
        e2e = [l["latency_sent_ms"] for l in lines]
        tpot = [(l["latency_sent_ms"] - l["ttft_ms"]) / (l["completion_tokens"] - 1)
                for l in lines]
        for name, values in (("ttft", ttft), ("e2e_latency", e2e), ("tpot", tpot)):
            want = pstdev(values)
            got = s["std_%s_ms" % name]
            self.assertLess(abs(got - want), 0.01 + 0.02 * want, (name, got, want))
        for l in lines:
            self.assertAlmostEqual(l["tpot_ms"], (l["latency_sent_ms"] - l["ttft_ms"]) / 10,
                                   delta=0.002)
        text = self.run_vlmload("--url", a.url, "--stream", "--rate", "50", "--requests", "20")
        header = [l for l in text.stdout.splitlines() if l.strip().startswith("latency (ms)")]
        self.assertEqual(header[0].split()[2:], ["mean", "std", "p50", "p90", "p95", "p99", "max"])
        self.assertIn("per output token", text.stdout)

    def test_std_merges_across_shards(self):
        # Shard 0 against a server 2 ms between tokens, shard 1 against one 8 ms between tokens:
        # the merged gaps and TPOT are half each, mean 5 and std 3, which only exact sums of
        # squares added across shards give.
        a = self.mock("--ttft", "10ms", "--itl", "2ms", "--tokens", "11")
        b = self.mock("--ttft", "10ms", "--itl", "8ms", "--tokens", "11")
        procs, hists = [], []
        for i, m in enumerate((a, b)):
            h = os.path.join(self.tmp, "h%d.json" % i)
            hists.append(h)
            procs.append(subprocess.Popen(
                [harness.VLMLOAD, "--url", m.url, "--shard", "%d/2" % i, "--stream", "--rate",
                 "80", "--requests", "120", "--max-tokens", "64", "--histograms", h, "--quiet"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for p in procs:
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
        out = os.path.join(self.tmp, "merged.json")
        subprocess.run([harness.VLMLOAD, "merge", out] + hists, check=True, timeout=30)
        with open(out) as f:
            s = json.load(f)
        tol = 0.3 * harness.SLACK
        self.assertEqual(s["tpot_ms"]["count"], 120)
        self.assertLess(abs(s["std_itl_ms"] - 3), ITL_STD_TOL * harness.SLACK, s["itl_ms"])
        self.assertLess(abs(s["std_tpot_ms"] - 3), tol, s["tpot_ms"])
        self.assertLess(abs(s["mean_tpot_ms"] - 5), tol, s["tpot_ms"])

    def test_plain_replies_have_no_ttft_itl_tpot(self):
        # A plain (non-streamed) reply has no first token and no gaps between tokens.
        m = self.mock("--latency", "20ms")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "30", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        s = r.summary
        for k in ("mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_itl_ms",
                  "median_itl_ms", "std_itl_ms", "p95_itl_ms", "p99_itl_ms", "max_itl_ms",
                  "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms"):
            self.assertIn(k, s)
            self.assertIsNone(s[k], k)
        for k in ("ttft_ms", "itl_ms", "tpot_ms"):
            self.assertEqual(s[k]["count"], 0)
            self.assertIsNone(s[k]["p50"], k)
            self.assertIsNone(s[k]["mean"], k)
        self.assertEqual(s["request_rate"], 50)
        self.assertFalse(s["closed_loop"])

    def test_closed_loop_has_no_rate(self):
        m = self.mock("--latency", "20ms")
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "4", "--requests",
                             "40", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        s = r.summary
        self.assertIsNone(s["request_rate"])
        self.assertTrue(s["closed_loop"])
        self.assertIsNone(s["rate"]["target"])
        self.assertTrue(s["rate"]["closed_loop"])
        self.assertEqual(s["max_concurrency"], 4)
        # Four always in flight, each 20 ms: about four on average.
        self.assertLess(abs(s["concurrency"] - 4), 0.5, s["concurrency"])

    def test_idle_timeline_row_has_no_latency(self):
        # Timeline rows in which nothing completed have no latency: empty cells, not 0 ms, which
        # the plot draws as a gap (csvin reads an empty cell as NaN, plot.c breaks the line there).
        slow = self.mock("--latency", "2500ms")
        r = self.run_vlmload("--url", slow.url, "--rate", "4", "--requests", "2", "--quiet",
                             "--monitor-pid", "mock=%d" % slow.proc.pid)
        self.assertEqual(r.rc, 0, r.stderr)
        idle = [row for row in r.timeline if row["completed"] == "0"]
        busy = [row for row in r.timeline if row["completed"] != "0"]
        self.assertGreaterEqual(len(idle), 1, r.timeline)
        self.assertGreaterEqual(len(busy), 1, r.timeline)
        for row in idle:
            self.assertEqual((row["e2e_p50_ms"], row["e2e_p99_ms"]), ("", ""), row)
        for row in busy:
            self.assertGreater(float(row["e2e_p50_ms"]), 2400, row)
        # The plot's latency lines get no point for those rows: a stand-in for gnuplot keeps the
        # script it is given, whose data blocks hold only the rows that measured something.
        fake = os.path.join(self.tmp, "gnuplot")
        script = os.path.join(self.tmp, "plot.gp")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\ncp \"$2\" '%s'\n"
                    "out=$(sed -n \"s/^set output '\\(.*\\)'$/\\1/p\" \"$2\" | head -1)\n"
                    "printf PNG > \"$out\"\n" % script)
        os.chmod(fake, 0o755)
        tl = os.path.join(self.tmp, "timeline.csv")
        p = subprocess.run([harness.VLMLOAD, "analyze", tl, "--plot",
                            os.path.join(self.tmp, "m.png"), "--gnuplot", fake],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(script) as f:
            text = f.read()
        for block in ("P50", "P99"):
            rows = text.split("$%s << EOD\n" % block)[1].split("EOD\n")[0].split()
            ys = [float(v) for v in rows[1::2]]
            self.assertEqual(len(ys), len(busy), text)
            self.assertTrue(all(y > 2400 for y in ys), (block, ys))

    def test_sweep_stages(self):
        m = self.mock("--ttft", "20ms", "--itl", "3ms", "--tokens", "6")
        r = self.run_vlmload("--url", m.url, "--stream", "--max-tokens", "64", "--sweep",
                             "rate=20:60:20", "--duration", "2s", "--no-progress")
        self.assertEqual(r.rc, 0, r.stderr)
        s = r.summary
        # No stage ran at the default --rate: the top level names no target.
        self.assertIsNone(s["rate"]["target"])
        self.assertIsNone(s["request_rate"])
        self.assertNotIn("target 10.00/s", r.stdout)
        self.assertNotIn("10 req/s", r.stderr)
        # Each stage's achieved rate against the mock's record of arrivals within the stage.
        bounds = [l["wall_ms"] for l in r.log if l.get("event") == "phase"]
        self.assertEqual(len(bounds), 3)
        arrivals = [rec["wall_ms"] for rec in m.records()]
        ends = bounds[1:] + [float("inf")]
        phases = s["phases"]
        self.assertEqual([p["target_rate"] for p in phases], [20, 40, 60])
        for p, lo, hi in zip(phases, bounds, ends):
            got = sum(1 for t in arrivals if lo <= t < hi)
            self.assertLessEqual(abs(got - p["sent"]), 2, (p, got))
            self.assertLess(abs(p["achieved_rate"] - got / 2.0) / (got / 2.0), 0.08, (p, got))
            self.assertLess(abs(p["achieved_rate"] - p["target_rate"]) / p["target_rate"], 0.15,
                            p)
            self.assertLess(abs(p["mean_ttft_ms"] - 20), 2 * harness.SLACK, p)
            self.assertLess(abs(p["median_ttft_ms"] - 20), 2 * harness.SLACK, p)
            self.assertLess(abs(p["mean_itl_ms"] - 3), 0.5 * harness.SLACK, p)
            self.assertLess(abs(p["mean_tpot_ms"] - 3), 0.5 * harness.SLACK, p)
            self.assertIsNotNone(p["p99_tpot_ms"])
        table = r.stdout[r.stdout.index("target/s"):]
        self.assertIn("ttft p50", table)
        self.assertIn("tpot p50", table)

    def test_duration_with_flushes(self):
        # Drained flushes pause admission; --duration counts load only, so the run takes longer,
        # and the summary says where the time went.
        m = self.mock("--latency", "60ms")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--duration", "3s", "--flush-every",
                             "25", "--no-progress")
        self.assertEqual(r.rc, 0, r.stderr)
        s = r.summary
        flushes = m.records("/flush_cache")
        want = re.compile(r"stopped by duration after (\d+\.\d\d)s: (\d+\.\d\d)s of load \+ "
                          r"(\d+\.\d\d)s paused for (\d+) flushes")
        got = want.search(r.stdout)
        self.assertIsNotNone(got, r.stdout)
        self.assertGreaterEqual(len(flushes), 5)
        self.assertEqual(s["paused_flushes"], len(flushes))
        self.assertLess(abs(s["load_s"] - 3.0), 0.05 * harness.SLACK, s)
        # Each pause drains requests of 60 ms: at least that long.
        self.assertGreater(s["paused_s"], 0.06 * len(flushes))
        self.assertAlmostEqual(s["load_s"] + s["paused_s"] + s["finishing_s"], s["duration_s"],
                               places=6)
        self.assertLess(s["finishing_s"], 0.2 * harness.SLACK)
        self.assertAlmostEqual(float(got.group(2)), s["load_s"], delta=0.006)
        self.assertAlmostEqual(float(got.group(3)), s["paused_s"], delta=0.006)
        self.assertEqual(int(got.group(4)), len(flushes))


if __name__ == "__main__":
    harness.main()
