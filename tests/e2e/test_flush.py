"""Flush cadence against the mock: drained flushes land with nothing in flight after exactly N
requests; inline flushes are refused while busy and counted; vLLM's two reset routes; retries,
time-based cadence and a missing route."""
import json
import os
import socket
import subprocess

import harness
import rawserver

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "corpus")


def flush_lines(run):
    return [l for l in run.log if l.get("event") == "flush"]


def request_lines(run):
    return [l for l in run.log if "id" in l]


FLUSH_ROUTES = ("/flush_cache", "/reset_prefix_cache", "/reset_mm_cache",
                "/reset_encoder_cache")
VLLM_ROUTES = ["/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache"]


def one_signal_server(signal):
    """A server that tells what it is by one signal only: ("owned_by", NAME) in /v1/models, or
    (PATH, STATUS) for one route; every flush route answers 200 and every other route 404."""
    def handler(req):
        path = req.path.split("?")[0]
        if path == "/v1/models":
            owner = signal[1] if signal[0] == "owned_by" else "someone"
            return rawserver.response(200, json.dumps(
                {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": owner}]}))
        if path == signal[0]:
            return rawserver.response(signal[1], b'{"version": "x"}')
        if path in FLUSH_ROUTES:
            return rawserver.response(200, b"{}")
        if path.endswith("/chat/completions"):
            return rawserver.response(200, rawserver.chat_reply())
        return rawserver.response(404, b'{"detail": "Not Found"}')

    return rawserver.RawServer(handler)


class FlushTest(harness.MockTestCase):
    def test_server_detected_by_each_signal(self):
        # Each of SGLang's and vLLM's signals alone is enough to find the flush routes.
        cases = ((("owned_by", "sglang"), ["/flush_cache"]),
                 (("owned_by", "vllm"), VLLM_ROUTES),
                 (("/server_info", 200), ["/flush_cache"]),
                 (("/get_server_info", 200), ["/flush_cache"]),
                 (("/version", 200), VLLM_ROUTES))
        for sig, routes in cases:
            with one_signal_server(sig) as srv:
                p = subprocess.run([harness.VLMLOAD, "--url", srv.url, "--model", "m", "--rate",
                                    "0", "--concurrency", "1", "--requests", "10",
                                    "--flush-every", "5", "--quiet"],
                                   capture_output=True, timeout=60)
                self.assertEqual(p.returncode, 0, (sig, p.stderr))
                flushed = [r.path.split("?")[0] for r in srv.requests
                           if r.path.split("?")[0] in FLUSH_ROUTES]
                self.assertEqual(flushed, routes * 2, sig)
                # SGLang's flush is asked to wait for idle for the flush timeout (default 60 s).
                waits = [r.path for r in srv.requests if r.path.startswith("/flush_cache")]
                self.assertTrue(all(p == "/flush_cache?timeout=60" for p in waits), waits)

    def test_undetected_server_says_what_was_probed(self):
        with one_signal_server(("/version", 500)) as srv:
            p = subprocess.run([harness.VLMLOAD, "--url", srv.url, "--model", "m", "--requests",
                                "10", "--flush-every", "5"], capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 2)
            self.assertEqual(srv.chat_requests(), [])
        err = p.stderr.decode()
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        for piece in ('GET /v1/models: HTTP 200, owned_by "someone"',
                      "GET /get_server_info: HTTP 404", "GET /server_info: HTTP 404",
                      "GET /version: HTTP 500", "--server sglang|vllm", "--flush-endpoint"):
            self.assertIn(piece, err)
        # Nothing answering: each probe's failure is named.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        p = subprocess.run([harness.VLMLOAD, "--url", "http://127.0.0.1:%d" % port, "--model",
                            "m", "--requests", "10", "--flush-every", "5"],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        err = p.stderr.decode()
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("cannot tell which server http://127.0.0.1:%d is" % port, err)
        for route in ("/v1/models", "/get_server_info", "/server_info", "/version"):
            self.assertRegex(err, "GET %s: [^;]*connect" % route)
        self.assertIn("--server sglang|vllm", err)

    def test_drained_every_50(self):
        # The issue's own command: corpus images at 50/s, a drained flush every 50.
        m = self.mock("--profile", "sglang", "--latency", "20ms")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--images", CORPUS, "--flush-every",
                             "50", "--requests", "500", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        f = r.summary["flushes"]
        self.assertEqual(f["count"], 10)
        self.assertEqual(f["ok"], 10)
        recs = m.records("/flush_cache")
        self.assertEqual(len(recs), 10)
        for k, rec in enumerate(recs, 1):
            self.assertEqual(rec["status"], 200)
            self.assertEqual(rec["in_flight"], 0)
            self.assertEqual(rec["completed_before"], 50 * k)
        # Outside the pauses the schedule holds its rate.
        self.assertLess(abs(r.summary["rate"]["achieved"] - 50) / 50, 0.02, r.summary["rate"])
        self.assertEqual(len(flush_lines(r)), 10)
        self.assertEqual(len(request_lines(r)), 500)
        self.assertTrue(all(l["drained"] and l["status"] == 200 for l in flush_lines(r)))
        self.assertEqual(int(r.timeline[-1]["flushes"]), 10)
        # Images went out and were decoded at the mock between the flushes.
        chats = m.records()
        self.assertEqual(len(chats), 500)
        self.assertGreater(sum(len(c["images"]) for c in chats), 100)

    def test_inline_refusals_counted(self):
        m = self.mock("--profile", "sglang", "--latency", "300ms")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--flush-every", "20",
                             "--flush-mode", "inline", "--requests", "200", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        f = r.summary["flushes"]
        self.assertEqual(f["count"], 10)
        self.assertGreater(f["refused"], 5)
        self.assertEqual(f["retries"], 0)
        self.assertEqual(r.summary["requests"]["ok"], 200)
        refused = [rec for rec in m.records("/flush_cache") if rec["status"] == 400]
        self.assertEqual(len(refused), f["refused"])
        self.assertTrue(all(rec["in_flight"] > 0 for rec in refused))

    def test_each_phase_flushes_in_its_own_mode(self):
        # A drained phase, then an inline one: the first's flushes wait for an idle server and
        # land, the second's go out busy and a refusal is taken at once, never retried.
        scen = os.path.join(self.tmp, "phases.json")
        with open(scen, "w") as f:
            json.dump({"phases": [
                {"name": "drained", "rate": 50, "requests": 40, "flush-every": 20},
                {"name": "inline", "rate": 50, "requests": 100, "flush-every": 20,
                 "flush-mode": "inline"},
            ]}, f)
        m = self.mock("--profile", "sglang", "--latency", "300ms")
        r = self.run_vlmload("--url", m.url, "--config", scen, "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        lines = flush_lines(r)
        self.assertEqual([l["drained"] for l in lines], [True] * 2 + [False] * 5)
        self.assertTrue(all(l["status"] == 200 and l["in_flight"] == 0 for l in lines[:2]))
        refused = [l for l in lines[2:] if l["status"] == 400]
        self.assertGreater(len(refused), 2)
        self.assertTrue(all(l["attempts"] == 1 for l in lines[2:]))
        self.assertEqual(r.summary["flushes"]["retries"], 0)
        self.assertEqual(len(m.records("/flush_cache")), 7)

    def test_vllm_profile_calls_every_reset(self):
        m = self.mock("--profile", "vllm")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--flush-every", "25", "--requests",
                             "100", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["config"]["server"], "vllm")
        self.assertEqual(r.summary["flushes"]["endpoints"], VLLM_ROUTES)
        self.assertEqual(r.summary["flushes"]["ok"], 4)
        prefix = m.records("/reset_prefix_cache")
        mm = m.records("/reset_mm_cache")
        enc = m.records("/reset_encoder_cache")
        self.assertEqual((len(prefix), len(mm), len(enc)), (4, 4, 4))
        self.assertEqual(m.stats()["reset_encoder_cache_total"], 4)
        for a, b, e in zip(prefix, mm, enc):
            self.assertLessEqual(a["t_us"], b["t_us"])
            self.assertLessEqual(b["t_us"], e["t_us"])
            self.assertEqual(a["in_flight"], 0)
            self.assertEqual(e["status"], 200)

    def test_retry_bound(self):
        # A route that always answers 400: the chat route given an empty body.
        m = self.mock("--profile", "sglang")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--flush-every", "10",
                             "--flush-endpoint", "/v1/chat/completions", "--flush-retries", "3",
                             "--requests", "20", "--quiet")
        self.assertEqual(r.rc, 1, r.stderr)  # no flush succeeded: the experiment failed
        self.assertIn("none of the 2 flushes succeeded", r.stderr)
        f = r.summary["flushes"]
        self.assertEqual(f["count"], 2)
        self.assertEqual(f["refused"], 2)
        self.assertEqual(f["retries"], 6)
        self.assertTrue(all(l["attempts"] == 4 for l in flush_lines(r)))

    def test_time_cadence(self):
        m = self.mock("--profile", "sglang")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--flush-every", "1s", "--duration",
                             "3500ms", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["flushes"]["count"], 3)
        self.assertEqual(len(m.records("/flush_cache")), 3)

    def test_missing_route(self):
        m = self.mock("--profile", "openai")
        r = self.run_vlmload("--url", m.url, "--server", "sglang", "--rate", "100",
                             "--flush-every", "10", "--requests", "30", "--quiet")
        self.assertEqual(r.rc, 1, r.stderr)  # no flush succeeded: the experiment failed
        self.assertIn("none of the 3 flushes succeeded (POST /flush_cache", r.stderr)
        f = r.summary["flushes"]
        self.assertEqual(f["count"], 3)
        self.assertEqual(f["failed"], 3)
        self.assertIn("404", r.stderr)
        self.assertEqual(r.summary["requests"]["ok"], 30)

    def test_generic_server_needs_an_endpoint(self):
        m = self.mock("--profile", "openai")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--flush-every", "10", "--requests",
                             "30", "--quiet")
        self.assertEqual(r.rc, 2)
        self.assertIn("--flush-endpoint", r.stderr)

    def test_flush_answer_is_data(self):
        # The flush route's answer is kept in the summary and the log: it must stay UTF-8 there
        # (the kept part is cut between characters) and carry no raw control character.
        answer = "\x1b[2J\x07ok " + "\u00e9" * 300

        def handler(req):
            if req.path.split("?")[0] == "/flush_cache":
                return rawserver.response(200, answer.encode(), {"Content-Type": "text/plain"})
            if req.path.endswith("/chat/completions"):
                return rawserver.response(200, rawserver.chat_reply())
            return rawserver.response(404, b"{}")

        with rawserver.RawServer(handler) as srv:
            out, log = os.path.join(self.tmp, "s.json"), os.path.join(self.tmp, "r.jsonl")
            p = subprocess.run([harness.VLMLOAD, "--url", srv.url, "--server", "sglang", "--model",
                                "m", "--rate", "0", "--concurrency", "2", "--requests", "20",
                                "--flush-every", "10", "--output", out, "--log-requests", log],
                               capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(len([r for r in srv.requests
                                  if r.path.split("?")[0] == "/flush_cache"]), 2)
        with open(out, "rb") as f:
            summary = json.loads(f.read().decode("utf-8", errors="strict"))
        with open(log, "rb") as f:
            lines = [json.loads(l) for l in f.read().decode("utf-8", errors="strict").splitlines()]
        kept = [l["answer"] for l in lines if l.get("event") == "flush"]
        self.assertEqual(len(kept), 2)
        for a in kept + [f["answer"] for f in summary["flushes"]["events"]]:
            self.assertTrue(a.startswith("\\x1b[2J\\x07ok \u00e9\u00e9"), a)
            self.assertFalse(any(ord(ch) < 0x20 or 0x7f <= ord(ch) <= 0x9f for ch in a), a)

    def test_health_check(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--health-check", "--rate", "100", "--requests", "5",
                             "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        port = m.port
        m.stop()
        r = self.run_vlmload("--url", "http://127.0.0.1:%d" % port, "--health-check",
                             "--health-timeout", "1500ms", "--model", "m", "--requests", "5",
                             "--quiet")
        self.assertEqual(r.rc, 1)
        self.assertIn("did not become healthy", r.stderr)


if __name__ == "__main__":
    harness.main()
