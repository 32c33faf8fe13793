"""The load real users make, judged by the mock's own record: requests a user closes before their
reply finishes (--cancel), counted as the mock saw its clients go and leaking what the mock leaks
for each; a stream of short text-only probes beside the load (--probe-rate), measured apart; and
the server's profiling routes called at given request counts (--server-profile-at).
"""
import time

import harness

LEAK_KB = 256  # the mock's leak per cancelled request


def request_lines(run):
    return [l for l in run.log if "id" in l]


def cancelled_records(mock):
    out = []
    with open(mock.record) as f:
        for line in f:
            rec = harness.json.loads(line)
            if rec.get("event") == "cancelled":
                out.append(rec)
    return out


def settle(mock, want, key="requests_in_flight", timeout=10):
    """The mock's stats once no model request is in flight (the last cancelled ones end when
    their reply comes due), or after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        st = mock.stats()
        if st[key] == want or time.monotonic() > deadline:
            return st
        time.sleep(0.05)


class CancelTest(harness.MockTestCase):
    def test_cancel_by_delay_matches_the_mock(self):
        """A fifth of 50 requests closed 100 ms after their send, against a mock that answers
        after 1 s: exactly 10 are cancelled, the mock saw exactly those 10 clients go (and leaked
        256 KiB for each), and no latency figure holds a cancelled request's 100 ms."""
        m = self.mock("--latency", "1s", "--leak-kb-per-cancel", str(LEAK_KB))
        run = self.run_vlmload("--url", m.url, "--requests", "50", "--rate", "50",
                               "--cancel", "0.2:100ms")
        self.assertEqual(run.rc, 0, run.stderr)
        st = settle(m, 0)
        req = run.summary["requests"]
        self.assertEqual(req["cancelled"], 10)
        self.assertEqual(req["ok"], 40)
        self.assertEqual(req["failed"], 0)
        self.assertEqual(run.summary["cancel"]["planned"], 10)
        # The mock's truth: the clients it saw go, and the memory that leaked for them.
        self.assertEqual(st["cancelled"], 10)
        self.assertEqual(len(cancelled_records(m)), 10)
        self.assertEqual(st["memory_leaked_bytes"], 10 * LEAK_KB * 1024)
        # Exactly floor(n * 0.2) of the first n, spread evenly: ids 4, 9, 14, ...
        lines = request_lines(run)
        closed = sorted(l["id"] for l in lines if l["outcome"] == "cancelled")
        self.assertEqual(closed, list(range(4, 50, 5)))
        for l in lines:
            if l["outcome"] == "cancelled":
                self.assertIsNone(l["error"])
                self.assertLess(l["latency_sent_ms"], 900)
        # Each closed request is one the mock recorded as gone: its seq among the cancelled.
        self.assertEqual(len({r["seq"] for r in cancelled_records(m)}), 10)
        # Left out of latency: every figure is of the 40 that waited their second.
        lat = run.summary["latency_ms"]
        self.assertEqual(lat["count"], 40)
        self.assertGreaterEqual(lat["min"], 990)
        self.assertGreaterEqual(run.summary["latency_sent_ms"]["min"], 990)
        self.assertIn("cancelled 10", run.stdout)

    def test_cancel_by_tokens_mid_stream(self):
        """Streams closed after their 5th token: the mock saw each go between tokens, after
        sending at least 5 of its 40, and counted as many as vlmload closed."""
        m = self.mock("--itl", "20ms", "--tokens", "40", "--leak-kb-per-cancel", str(LEAK_KB))
        run = self.run_vlmload("--url", m.url, "--requests", "40", "--rate", "40", "--stream",
                               "--max-tokens", "40", "--cancel", "0.25:5tok")
        self.assertEqual(run.rc, 0, run.stderr)
        st = settle(m, 0)
        self.assertEqual(run.summary["requests"]["cancelled"], 10)
        self.assertEqual(st["cancelled"], 10)
        self.assertEqual(st["memory_leaked_bytes"], 10 * LEAK_KB * 1024)
        for rec in cancelled_records(m):
            self.assertGreaterEqual(rec["tokens_sent"], 5)
            self.assertLess(rec["tokens_sent"], 40)
        # A stream closed early gives no TTFT, TPOT nor ITL to the figures.
        self.assertEqual(run.summary["ttft_ms"]["count"], 30)
        self.assertEqual(st["requests_completed_total"], 30)

    def test_reply_before_the_close_is_ok(self):
        """Chosen requests whose reply came before their close time are ok, not cancelled, and
        the mock saw no client go."""
        m = self.mock("--leak-kb-per-cancel", str(LEAK_KB))
        run = self.run_vlmload("--url", m.url, "--requests", "20", "--rate", "40",
                               "--cancel", "0.5:3s")
        self.assertEqual(run.rc, 0, run.stderr)
        st = settle(m, 0)
        self.assertEqual(run.summary["requests"]["cancelled"], 0)
        self.assertEqual(run.summary["requests"]["ok"], 20)
        self.assertEqual(run.summary["cancel"]["planned"], 10)
        self.assertEqual(st["cancelled"], 0)
        self.assertEqual(st["memory_leaked_bytes"], 0)
        planned = [l for l in request_lines(run) if l.get("cancel_planned")]
        self.assertEqual(len(planned), 10)
        self.assertTrue(all(l["outcome"] == "ok" for l in planned))

    def test_bad_cancel_is_refused(self):
        for arg, words in (("1.5", "share"), ("0.2:soon", "AFTER"), ("0.2:4tok", "--stream")):
            run = self.run_vlmload("--url", "http://127.0.0.1:9", "--requests", "1",
                                   "--cancel", arg)
            self.assertEqual(run.rc, 2, arg)
            self.assertIn(words, run.stderr)



class ServerProfileTest(harness.MockTestCase):
    def profile_records(self, mock):
        return mock.records("/start_profile") + mock.records("/stop_profile")

    def test_sglang_memory_snapshot_at_counts(self):
        """One request at a time against a mock that answers after 200 ms: at 5 and 20
        completed requests the mock received /start_profile with activities MEM, then
        /stop_profile, with exactly 5 and 20 replies sent before each; and each call is in the
        summary and the request log."""
        m = self.mock("--latency", "200ms")
        run = self.run_vlmload("--url", m.url, "--requests", "30", "--concurrency", "1",
                               "--rate", "0", "--server-profile-at", "5,20")
        self.assertEqual(run.rc, 0, run.stderr)
        recs = sorted(self.profile_records(m), key=lambda r: r["t_us"])
        self.assertEqual([r["route"] for r in recs],
                         ["/start_profile", "/stop_profile"] * 2)
        self.assertEqual([r["completed_before"] for r in recs], [5, 5, 20, 20])
        self.assertEqual(recs[0]["activities"], ["MEM"])
        self.assertEqual(recs[2]["activities"], ["MEM"])
        self.assertEqual(m.stats()["start_profile_total"], 2)
        calls = run.summary["server_profile"]
        self.assertEqual([(c["route"], c["at_requests"], c["status"]) for c in calls],
                         [("/start_profile", 5, 200), ("/stop_profile", 5, 200),
                          ("/start_profile", 20, 200), ("/stop_profile", 20, 200)])
        events = [l for l in run.log if l.get("event") == "server_profile"]
        self.assertEqual(len(events), 4)
        self.assertEqual(len(request_lines(run)), 30)

    def test_vllm_pair_without_body(self):
        m = self.mock("--profile", "vllm", "--latency", "100ms")
        run = self.run_vlmload("--url", m.url, "--requests", "10", "--concurrency", "1",
                               "--rate", "0", "--server", "vllm", "--server-profile-at", "4")
        self.assertEqual(run.rc, 0, run.stderr)
        recs = sorted(self.profile_records(m), key=lambda r: r["t_us"])
        self.assertEqual([(r["route"], r["completed_before"]) for r in recs],
                         [("/start_profile", 4), ("/stop_profile", 4)])
        self.assertIsNone(recs[0]["activities"])

    def test_refused_for_a_server_without_routes(self):
        m = self.mock("--profile", "openai")
        run = self.run_vlmload("--url", m.url, "--requests", "5", "--server-profile-at", "2")
        self.assertEqual(run.rc, 2)
        self.assertIn("no profiling routes", run.stderr)
        self.assertEqual(m.stats()["requests_total"], 0)


def probe_records(mock):
    """The probes the mock received: vlmload's probes ask for 16 tokens, the load for 128."""
    return [r for r in mock.records() if r["max_tokens"] == 16]


class ProbeTest(harness.MockTestCase):
    def test_probes_apart_from_the_load(self):
        """Probes at 10/s beside 40 requests: the mock received exactly 40 of the load's and as
        many text-only probes as vlmload counted; --requests counts the load's alone, and every
        figure of the load holds its 40 requests only."""
        m = self.mock("--latency", "20ms")
        run = self.run_vlmload("--url", m.url, "--requests", "40", "--rate", "20",
                               "--resolution", "64x64", "--probe-rate", "10", "--stream")
        self.assertEqual(run.rc, 0, run.stderr)
        probes = probe_records(m)
        load = [r for r in m.records() if r["max_tokens"] == 128]
        self.assertEqual(len(load), 40)
        self.assertTrue(all(len(r["images"]) == 1 for r in load))
        self.assertTrue(all(r["images"] == [] for r in probes))
        p = run.summary["probe"]
        self.assertGreater(p["sent"], 5)
        self.assertEqual(p["sent"], len(probes))
        self.assertEqual(p["ok"], p["sent"])
        self.assertEqual(p["ttft_ms"]["count"], p["ok"])
        self.assertEqual(run.summary["requests"]["sent"], 40)
        self.assertEqual(run.summary["latency_ms"]["count"], 40)
        self.assertEqual(run.summary["ttft_ms"]["count"], 40)
        self.assertEqual(run.summary["images"]["sent"], 40)
        logged = [l for l in request_lines(run) if l["phase"] == "probe"]
        self.assertEqual(len(logged), p["sent"])
        self.assertTrue(all(l["images"] == 0 for l in logged))
        self.assertIn("probe TTFT", run.stdout)

    def probe_ttft(self, *load):
        """The probes' median TTFT beside load, against a mock whose latency grows by 10 ms
        with each request in flight (as a server busy preprocessing images answers later)."""
        m = self.mock("--latency", "20ms", "--latency-per-inflight", "10ms", "--itl", "5ms",
                      "--tokens", "16")
        run = self.run_vlmload("--url", m.url, "--duration", "3s", "--stream",
                               "--probe-rate", "5", *load)
        self.assertEqual(run.rc, 0, run.stderr)
        probes = probe_records(m)
        self.assertEqual(run.summary["probe"]["sent"], len(probes))
        return run.summary["probe"]["ttft_ms"]["p50"], max(r["in_flight"] for r in probes)

    def test_probe_ttft_rises_with_image_load(self):
        """Light load (2 text requests a second) against heavy (40 requests a second of
        1024x1024 images): the probes' TTFT rises with the load, as the mock's own count of
        requests in flight at each probe's arrival does."""
        light, light_inflight = self.probe_ttft("--rate", "2")
        heavy, heavy_inflight = self.probe_ttft("--rate", "40", "--resolution", "1024x1024")
        self.assertGreater(heavy_inflight, light_inflight + 5)
        self.assertGreater(heavy, light + 50)
        self.assertGreater(heavy, 2 * light)


if __name__ == "__main__":
    harness.main()
