"""The fault matrix: every fault vlmmock injects, against vlmload. Each lands in its own error class,
counted exactly as the mock recorded injecting it; the run completes, nothing is left in flight,
the request log has one line per request sent and the summary is valid JSON. Then the mock is
killed with SIGKILL mid-run and restarted on the same port: the run recovers and the counts add up.
"""
import os
import time

import harness

N = 40  # requests per run
RATE = 0.25  # of them faulted: exactly N * RATE, spread evenly

# Chat faults: the error class each must land in, and what the run needs to see it (a timeout
# shorter than a stall, a reply limit for the huge reply).
CHAT_FAULTS = {
    "http500": ("http_5xx", ()),
    "http503": ("http_5xx", ()),
    "http429": ("http_429", ()),
    "http400": ("http_4xx", ()),
    "http401": ("http_4xx", ()),
    "malformed": ("malformed", ()),
    "truncate": ("truncated", ()),
    "reset": ("transport", ()),
    "reset_after_headers": ("truncated", ()),
    "stall": ("timeout", ("--timeout", "1s")),
    "huge": ("oversize", ("--max-response", "1MiB")),
    "slowloris": ("timeout", ("--timeout", "1500ms")),
}


def request_lines(run):
    return [l for l in run.log if "id" in l]


def flush_lines(run):
    return [l for l in run.log if l.get("event") == "flush"]


class FaultTest(harness.MockTestCase):
    def assert_complete(self, r, n):
        """The run ended normally with every request accounted for once."""
        self.assertIsNotNone(r.summary, r.stderr)
        req = r.summary["requests"]
        self.assertEqual(req["sent"], n, r.summary)
        self.assertEqual(req["completed"], n)
        self.assertEqual(req["ok"] + req["failed"], n)
        self.assertEqual(req["failed"], sum(r.summary["errors"].values()))
        lines = request_lines(r)
        self.assertEqual(len(lines), n)
        self.assertEqual(sorted(l["id"] for l in lines), list(range(n)))
        self.assertTrue(r.timeline, "no timeline")
        self.assertEqual(r.timeline[-1]["in_flight"], "0")
        self.assertEqual(int(r.timeline[-1]["sent_total"]), n)

    def chat_fault(self, kind, stream):
        cls, extra = CHAT_FAULTS[kind]
        m = self.mock("--fault", "%s:%g" % (kind, RATE), "--tokens", "8")
        args = ["--url", m.url, "--rate", "200", "--requests", str(N), "--quiet", *extra]
        if stream:
            args.append("--stream")
        r = self.run_vlmload(*args, timeout=60)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assert_complete(r, N)
        injected = [rec for rec in m.records() if rec.get("fault") == kind]
        self.assertEqual(len(injected), int(N * RATE))
        self.assertEqual(m.stats()["faults"][kind], len(injected))
        self.assertEqual(len(m.records()), N)
        errors = r.summary["errors"]
        self.assertEqual(errors[cls], len(injected), (kind, stream, errors))
        self.assertEqual(sum(errors.values()), len(injected), (kind, stream, errors))
        self.assertEqual(r.summary["requests"]["ok"], N - len(injected))
        self.assertEqual(sum(1 for l in request_lines(r) if l["error"] == cls), len(injected))
        return m, r

    # -- flushes: faults of the flush route, drawn from their own sequence

    def flush_run(self, fault, *extra):
        m = self.mock("--profile", "sglang", "--fault", fault)
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--requests", str(N), "--quiet",
                             "--flush-every", "10", *extra, timeout=60)
        self.assert_complete(r, N)
        self.assertEqual(r.summary["requests"]["ok"], N)
        f = r.summary["flushes"]
        # An experiment none of whose flushes succeeded has failed, and says so.
        self.assertEqual(r.rc, 1 if f["ok"] == 0 else 0, r.stderr)
        self.assertEqual("flushes succeeded" in r.stderr, f["ok"] == 0, r.stderr)
        self.assertEqual(f["count"], N // 10)
        self.assertEqual(len(flush_lines(r)), f["count"])
        return m, r, f

    def test_flush400_retried(self):
        # Every other call refused: each refusal is retried once and the retry goes through.
        m, r, f = self.flush_run("flush400:0.5")
        injected = [x for x in m.records("/flush_cache") if x.get("fault") == "flush400"]
        self.assertEqual(len(injected), m.stats()["faults"]["flush400"])
        self.assertEqual(len(injected), f["retries"])
        self.assertEqual((f["ok"], f["refused"], f["failed"]), (f["count"], 0, 0))
        self.assertEqual(sum(l["attempts"] for l in flush_lines(r)), len(m.records("/flush_cache")))

    def test_flush400_refused(self):
        # Every call refused: each flush gives up after its retries and counts as refused.
        m, r, f = self.flush_run("flush400:1", "--flush-retries", "2")
        injected = [x for x in m.records("/flush_cache") if x.get("fault") == "flush400"]
        self.assertEqual(len(injected), 3 * f["count"])
        self.assertEqual(m.stats()["faults"]["flush400"], len(injected))
        self.assertEqual((f["ok"], f["refused"], f["failed"]), (0, f["count"], 0))
        self.assertEqual(f["retries"], 2 * f["count"])
        self.assertTrue(all(l["status"] == 400 and l["refused"] for l in flush_lines(r)))

    def test_flush500(self):
        m, r, f = self.flush_run("flush500:0.5")
        injected = [x for x in m.records("/flush_cache") if x.get("fault") == "flush500"]
        self.assertEqual(len(injected), f["count"] // 2)
        self.assertEqual(m.stats()["faults"]["flush500"], len(injected))
        self.assertEqual(f["failed"], len(injected))
        self.assertEqual(f["ok"], f["count"] - len(injected))
        self.assertEqual(sum(1 for l in flush_lines(r) if l["status"] == 500), len(injected))

    def test_flush_stall(self):
        m, r, f = self.flush_run("flush_stall:1", "--flush-timeout", "400ms")
        injected = [x for x in m.records("/flush_cache") if x.get("fault") == "flush_stall"]
        self.assertEqual(len(injected), f["count"])
        self.assertEqual(m.stats()["faults"]["flush_stall"], len(injected))
        self.assertEqual(f["failed"], len(injected))
        for l in flush_lines(r):
            self.assertEqual(l["status"], 0)
            self.assertGreaterEqual(l["call_ms"], 390)
            self.assertIn("imeout", l["answer"])

    def test_flush_and_chat_faults_counted_apart(self):
        m = self.mock("--profile", "sglang", "--fault", "http500:0.25", "--fault", "flush500:1")
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--requests", str(N), "--quiet",
                             "--flush-every", "10", timeout=60)
        self.assertEqual(r.rc, 1, r.stderr)  # every flush failed: the experiment failed
        self.assertIn("none of the %d flushes succeeded" % (N // 10), r.stderr)
        self.assert_complete(r, N)
        faults = m.stats()["faults"]
        self.assertEqual(faults["http500"], N // 4)
        self.assertEqual(faults["flush500"], N // 10)
        self.assertEqual(r.summary["errors"]["http_5xx"], faults["http500"])
        self.assertEqual(r.summary["flushes"]["failed"], faults["flush500"])

    # -- the server killed and restarted

    def test_kill9_and_restart(self):
        first = self.mock("--latency", "50ms")
        port = first.port
        n = 250  # 5 s at 50/s
        run = harness.Started(self.tmp, "--url", first.url, "--rate", "50", "--requests", str(n),
                              "--timeout", "3s", "--connect-timeout", "1s", "--quiet")
        time.sleep(1.5)
        first.proc.kill()  # SIGKILL: no clean shutdown, sockets reset
        first.proc.wait()
        killed_at = time.time() * 1000
        time.sleep(1.0)
        second = self.mock("--latency", "50ms", "--port", str(port))
        self.assertEqual(second.port, port)
        restarted_at = time.time() * 1000
        r = run.finish(timeout=60)

        self.assertEqual(r.rc, 0, r.stderr)
        self.assert_complete(r, n)
        errors = r.summary["errors"]
        req = r.summary["requests"]
        lines = request_lines(r)
        # Every request is counted once: as ok or in one error class, in the summary and in the
        # log alike.
        self.assertEqual(req["ok"] + sum(errors.values()), req["sent"])
        self.assertEqual(len(lines), req["sent"])
        self.assertEqual(sum(1 for l in lines if l["error"] is None), req["ok"])
        for cls, count in errors.items():
            self.assertEqual(sum(1 for l in lines if l["error"] == cls), count, cls)
        # Every failure is one of what a dead server causes.
        lost = errors["connect"] + errors["transport"] + errors["truncated"]
        self.assertEqual(req["failed"], lost, errors)
        self.assertGreater(errors["connect"], 10, errors)  # about a second with nobody listening
        # What the restarted server received, it answered, and nothing else reached it.
        got = second.records()
        self.assertGreater(len(got), 100)
        self.assertEqual(second.stats()["requests_in_flight"], 0)
        self.assertEqual(second.stats()["requests_completed_total"], len(got))
        # So each request that succeeded after the kill was answered by the restarted server, and
        # each it answered succeeded.
        late_ok = [l for l in lines if l["error"] is None and l["done_ms"] > killed_at]
        self.assertEqual(len(late_ok), len(got))
        # Everything that succeeded was received by one server or the other.
        with open(first.record) as f:
            before = sum(1 for _ in f)
        self.assertLessEqual(req["ok"], before + len(got))
        self.assertGreaterEqual(req["ok"], len(got))
        # Requests sent while nobody listened were refused, and counted as connect errors. A
        # refusal ends while nobody listens: those sent then, and those in flight at the kill,
        # which curl tries again on a fresh connection (50 ms either side for the two clocks and
        # the moment of the kill before the wait saw it).
        dead = [l for l in lines if killed_at + 50 < l["sent_ms"] < restarted_at - 50]
        self.assertTrue(dead)
        self.assertTrue(all(l["error"] == "connect" for l in dead), dead[:3])
        refused = [l for l in lines if l["error"] == "connect"]
        self.assertEqual(len(refused), errors["connect"])
        outside = [l for l in refused if not killed_at - 50 < l["done_ms"] < restarted_at + 50]
        self.assertEqual(outside, [], (killed_at, restarted_at))


def make_test(kind, stream):
    def test(self):
        self.chat_fault(kind, stream)
    test.__doc__ = "%s%s: counted as %s" % (kind, " (streamed)" if stream else "",
                                            CHAT_FAULTS[kind][0])
    return test


for _kind in CHAT_FAULTS:
    setattr(FaultTest, "test_%s" % _kind, make_test(_kind, False))
    setattr(FaultTest, "test_%s_stream" % _kind, make_test(_kind, True))


if __name__ == "__main__":
    harness.main()
