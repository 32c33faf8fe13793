"""--rate auto against a mock of known capacity: the knee the probe finds, the run at 70% of it,
the probe's requests kept out of the run's figures (judged by the mock's own count), and the
combinations refused."""
import os

import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The mock serves 6 requests at once, 20 ms each, the rest queued in arrival order: 300 a second.
PLACES, SERVICE_MS = 6, 20
CAPACITY = PLACES * 1000 / SERVICE_MS


class RateAutoTest(harness.MockTestCase):
    def test_knee_and_run(self):
        m = self.mock("--max-running", str(PLACES), "--latency", "%dms" % SERVICE_MS)
        r = self.run_vlmload("--url", m.url, "--rate", "auto", "--duration", "2s",
                             "--warmup", "20", "--no-progress", "--server", "sglang",
                             "--flush-every", "100k")
        self.assertEqual(r.rc, 0, r.stderr)
        s, ra = r.summary, r.summary["rate_auto"]
        stages = ra["stages"]
        self.assertIsNone(ra["error"])
        self.assertEqual(ra["fraction"], 0.7)
        # The floor: a closed loop of one request at a time, at the service time.
        self.assertTrue(stages[0]["closed_loop"])
        self.assertEqual(stages[0]["max_concurrency"], 1)
        self.assertEqual(stages[0]["sent"], 20)
        self.assertGreaterEqual(ra["floor_ms"], SERVICE_MS)
        self.assertLess(ra["floor_ms"], SERVICE_MS * 1.5 * harness.SLACK)
        # Open-loop stages: the rate doubles until one falls behind, then two bisections. A stage
        # well under the capacity keeps up, one well over it falls behind.
        rates = [st["offered"] for st in stages[1:]]
        first_bad = next(i for i, st in enumerate(stages[1:]) if st["behind"])
        for a, b in zip(rates[:first_bad], rates[1:first_bad + 1]):
            self.assertAlmostEqual(b, 2 * a, delta=1e-6 * a)
        self.assertEqual(len(rates), first_bad + 1 + 2, rates)
        for st in stages[1:]:
            if st["offered"] < 0.8 * CAPACITY:
                self.assertFalse(st["behind"], st)
            if st["offered"] > 1.4 * CAPACITY:
                self.assertTrue(st["behind"], st)
            self.assertEqual(st["errors"], 0)
        # The knee: the lowest rate that fell behind, near the capacity; the run at 70% of it.
        behind = [st["offered"] for st in stages[1:] if st["behind"]]
        kept = [st["offered"] for st in stages[1:] if not st["behind"]]
        self.assertEqual(ra["knee"], min(behind))
        self.assertEqual(ra["sustained"], max(kept))
        self.assertGreaterEqual(ra["knee"], 0.9 * CAPACITY, stages)
        self.assertLessEqual(ra["knee"], 1.4 * CAPACITY, stages)
        self.assertAlmostEqual(ra["chosen"], 0.7 * ra["knee"], delta=1e-6 * ra["knee"])
        self.assertAlmostEqual(s["rate"]["target"], ra["chosen"], delta=1e-6 * ra["chosen"])
        self.assertLess(abs(s["rate"]["achieved"] - ra["chosen"]) / ra["chosen"], 0.08,
                        s["rate"])
        # The probe is kept out of the run's figures: the mock counted the probe's requests and
        # the run's, the summary only the run's (2 s at the rate chosen), whose warm-up begins
        # after the probe.
        probe_sent = sum(st["sent"] for st in stages)
        self.assertEqual(m.stats()["requests_total"], probe_sent + s["requests"]["sent"])
        self.assertLess(abs(s["requests"]["sent"] - 2 * ra["chosen"]) / (2 * ra["chosen"]), 0.15)
        self.assertEqual(s["requests"]["warmup"], 20)
        self.assertEqual(s["latency_ms"]["count"], s["requests"]["ok"] - 20)
        self.assertLess(s["latency_ms"]["p50"], SERVICE_MS * 1.5 * harness.SLACK)
        # A run that flushes flushes once before its first request, after the probe's last: the
        # mock saw that flush with every probe request finished and none of the run's.
        flushes = m.records("/flush_cache")
        self.assertEqual(len(flushes), 1)
        self.assertEqual(flushes[0]["completed_before"], probe_sent)
        self.assertEqual(flushes[0]["in_flight"], 0)
        self.assertEqual(s["flushes"]["count"], 1)
        self.assertEqual(s["flushes"]["events"][0]["requests_sent"], 0)
        # The request log marks the probe's requests; the run's ids start at 0.
        probe = [l for l in r.log if l.get("phase") == "rate-auto"]
        run = [l for l in r.log if "id" in l and l.get("phase") != "rate-auto"]
        self.assertEqual(len(probe), probe_sent)
        self.assertEqual(len(run), s["requests"]["sent"])
        self.assertEqual(min(l["id"] for l in run), 0)
        self.assertEqual(sum(1 for l in run if l["phase"] == "warmup"), 20)
        # The timeline: the probe's rows first, marked, then the run's counting from 0.
        phases = [row["phase"] for row in r.timeline]
        k = phases.index(next(p for p in phases if p != "rate-auto"))
        self.assertGreater(k, 0)
        self.assertNotIn("rate-auto", phases[k:])
        self.assertEqual(int(r.timeline[k - 1]["sent_total"]), probe_sent)
        self.assertLessEqual(int(r.timeline[k]["sent_total"]), s["requests"]["sent"])
        self.assertEqual(int(r.timeline[-1]["sent_total"]), s["requests"]["sent"])
        # One line of the text summary says the rate chosen.
        line = next(l for l in r.stdout.splitlines() if l.strip().startswith("rate auto"))
        self.assertIn("knee %.4g req/s" % ra["knee"], line)
        self.assertIn("run at 70%%: %.4g req/s" % ra["chosen"], line)

    def test_no_rate(self):
        # A server that fails everything: no rate, said in one line with the server's words, and
        # none of the probe's requests in the run's figures.
        m = self.mock("--fault", "http500:1")
        r = self.run_vlmload("--url", m.url, "--rate", "auto", "--duration", "1s", "--no-progress")
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertIn("vlmload: --rate auto: no rate found: no request of the closed-loop stage "
                      "succeeded (the first failure: http_5xx HTTP 500: \"injected fault: "
                      "http500\"); give --rate R\n", r.stderr)
        ra = r.summary["rate_auto"]
        self.assertIsNone(ra["chosen"])
        self.assertEqual(ra["error"], "no request of the closed-loop stage succeeded")
        self.assertEqual(ra["first_failure"],
                         {"class": "http_5xx", "status": 500, "message": "injected fault: http500"})
        self.assertEqual([st["errors"] for st in ra["stages"]], [20])
        self.assertEqual(m.stats()["requests_total"], 20)
        self.assertEqual(r.summary["requests"]["sent"], 0)
        self.assertEqual(r.summary["requests"]["failed"], 0)

    def test_refused(self):
        trace = os.path.join(ROOT, "tools", "traces", "sample.jsonl")
        cfg = os.path.join(self.tmp, "auto.json")
        with open(cfg, "w") as f:
            f.write('{"rate": "auto", "turns": 2}')
        phases = os.path.join(self.tmp, "phases.json")
        with open(phases, "w") as f:
            f.write('{"rate": "auto", "phases": [{"rate": 5}, {"rate": 10}]}')
        for args, what in [(["--sweep", "rate=10:30:10"], "--sweep"),
                           (["--trace", trace], "--trace"),
                           (["--turns", "2"], "--turns"),
                           (["--shard", "0/2"], "--shard"),
                           (["--workers", "2"], "--workers")]:
            r = self.run_vlmload("--url", "http://127.0.0.1:%d" % harness.closed_port(),
                                 "--rate", "auto", *args)
            self.assertEqual(r.rc, 2, (args, r.stderr))
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            self.assertTrue(r.stderr.startswith("vlmload: --rate auto with %s: " % what),
                            r.stderr)
            self.assertIsNone(r.summary)
        # "rate": "auto" in --config is read as --rate auto.
        r = self.run_vlmload("--config", cfg)
        self.assertEqual(r.rc, 2)
        self.assertTrue(r.stderr.startswith("vlmload: --rate auto with --turns: "), r.stderr)
        # A dry run says the rate is found at start.
        r = self.run_vlmload("--rate", "auto", "--duration", "1m", "--dry-run", "--model", "m")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn("--rate auto: 70% of the knee a probe finds at start", r.stdout)
        r = self.run_vlmload("--config", phases)
        self.assertEqual(r.rc, 2)
        self.assertTrue(r.stderr.startswith("vlmload: --rate auto with phases: "), r.stderr)
        r = self.run_vlmload("--rate", "fast")
        self.assertEqual(r.rc, 2)
        self.assertEqual(r.stderr.splitlines(), [
            "vlmload: --rate 'fast': want arrivals per second (0 to 10M; 0: closed loop) or auto "
            "(a rate the server sustains, found first)"])


if __name__ == "__main__":
    harness.main()
