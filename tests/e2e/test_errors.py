"""Every error class provoked against a real peer and counted exactly; the server's own words
quoted; Ctrl-C keeps every record."""
import json

import os
import re
import socket
import subprocess

import harness
import rawserver

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ErrorClassTest(harness.MockTestCase):
    def run_fault(self, fault, n=40, extra=()):
        m = self.mock("--fault", fault)
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--requests", str(n), "--quiet",
                             "--timeout", "5s", *extra)
        self.assertIsNotNone(r.summary, r.stderr)
        self.assertEqual(r.summary["requests"]["sent"], n)
        self.assertEqual(r.summary["requests"]["completed"], n)
        self.assertEqual(len(r.log), n)
        return m, r

    def assert_only(self, r, cls, count, ok):
        errors = r.summary["errors"]
        self.assertEqual(errors[cls], count, errors)
        self.assertEqual(sum(errors.values()), count, errors)
        self.assertEqual(r.summary["requests"]["ok"], ok)
        self.assertEqual(sum(1 for l in r.log if l["error"] == cls), count)

    def test_connect(self):
        url = "http://127.0.0.1:%d" % harness.closed_port()
        r = harness.vlmload(self.tmp, "--url", url, "--model", "m", "--rate", "100", "--requests",
                            "10", "--quiet", "--keep-going")
        self.assertEqual(r.rc, 1)  # nothing succeeded
        self.assert_only(r, "connect", 10, 0)

    def test_timeout(self):
        m = self.mock("--latency", "3s")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "10", "--timeout",
                             "300ms", "--quiet")
        self.assert_only(r, "timeout", 10, 0)
        for line in r.log:
            self.assertGreaterEqual(line["latency_sent_ms"], 299)
            self.assertLess(line["latency_sent_ms"], 1500)

    def test_http_4xx(self):
        m, r = self.run_fault("http400:0.25")
        self.assert_only(r, "http_4xx", 10, 30)

    def test_http_429(self):
        m, r = self.run_fault("http429:0.5")
        self.assert_only(r, "http_429", 20, 20)

    def test_http_5xx(self):
        m, r = self.run_fault("http500:0.5")
        self.assert_only(r, "http_5xx", 20, 20)
        self.assertEqual(sum(1 for l in r.log if l["status"] == 500), 20)

    def test_http_503(self):
        m, r = self.run_fault("http503:1")
        self.assert_only(r, "http_5xx", 40, 0)

    def test_malformed(self):
        m, r = self.run_fault("malformed:0.5")
        self.assert_only(r, "malformed", 20, 20)

    def test_malformed_stream(self):
        m, r = self.run_fault("malformed:0.5", extra=("--stream",))
        self.assert_only(r, "malformed", 20, 20)

    def test_truncated_stream(self):
        m, r = self.run_fault("truncate:0.5", extra=("--stream",))
        self.assert_only(r, "truncated", 20, 20)

    def test_truncated_body(self):
        m, r = self.run_fault("truncate:0.5")
        self.assert_only(r, "truncated", 20, 20)

    def test_reset(self):
        m, r = self.run_fault("reset:0.5")
        self.assert_only(r, "transport", 20, 20)
        # The run goes on over fresh connections.
        self.assertEqual(len(m.records()), 40)

    def test_oversize(self):
        m = self.mock("--tokens", "2000")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "10", "--max-response",
                             "2KiB", "--max-tokens", "4000", "--quiet")
        self.assert_only(r, "oversize", 10, 0)

    def test_mixed_faults_counted_apart(self):
        m, r = self.run_fault("http500:0.1", n=100,
                              extra=())
        self.assert_only(r, "http_5xx", 10, 90)
        self.assertEqual(m.stats()["requests_total"], 100)


class InterruptTest(harness.MockTestCase):
    def test_ctrl_c_keeps_every_record(self):
        m = self.mock("--latency", "200ms")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--duration", "60s", "--quiet",
                             interrupt_after=2.0, timeout=30)
        self.assertEqual(r.rc, 130, r.stderr)
        s = r.summary
        self.assertIsNotNone(s)
        self.assertTrue(s["interrupted"])
        self.assertEqual(s["stop_reason"], "signal")
        self.assertGreater(s["requests"]["sent"], 50)
        self.assertEqual(len(r.log), s["requests"]["sent"])
        self.assertEqual(s["requests"]["completed"], s["requests"]["sent"])
        # Requests in flight at the signal finished within the grace period.
        self.assertEqual(s["requests"]["failed"], 0)
        self.assertEqual(len(set(l["id"] for l in r.log)), len(r.log))
        self.assertGreaterEqual(len(r.timeline), 2)

    def test_grace_then_cancel(self):
        m = self.mock("--fault", "stall:1")
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--duration", "60s", "--grace",
                             "500ms", "--quiet", interrupt_after=1.0, timeout=30)
        self.assertEqual(r.rc, 130)
        s = r.summary
        self.assertGreater(s["requests"]["sent"], 5)
        self.assertEqual(s["errors"]["cancelled"], s["requests"]["sent"])
        self.assertEqual(len(r.log), s["requests"]["sent"])

    def test_second_signal_stops_at_once(self):
        m = self.mock("--fault", "stall:1")
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--duration", "60s", "--grace",
                             "60s", "--quiet", interrupt_after=1.0, signals=2, timeout=10)
        self.assertEqual(r.rc, 130)
        self.assertEqual(len(r.log), r.summary["requests"]["sent"])
        self.assertLess(r.summary["duration_s"], 5)



class ThresholdTest(harness.MockTestCase):
    def test_error_rate(self):
        m = self.mock("--fault", "http500:0.2")
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--requests", "50", "--quiet",
                             "--max-error-rate", "0.1")
        self.assertEqual(r.rc, 3, r.stderr)
        t = r.summary["thresholds"][0]
        self.assertEqual((t["name"], t["passed"]), ("max_error_rate", False))
        self.assertAlmostEqual(t["value"], 0.2)
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--requests", "50", "--quiet",
                             "--max-error-rate", "0.25")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertTrue(r.summary["thresholds"][0]["passed"])

    def test_p99(self):
        m = self.mock("--latency", "30ms")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "30",
                             "--max-p99-ms", "10")
        self.assertEqual(r.rc, 3, r.stderr)
        self.assertIn("THRESHOLD", r.stdout)
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "30", "--quiet",
                             "--max-p99-ms", "500")
        self.assertEqual(r.rc, 0, r.stderr)


NGINX_502 = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
             "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n"
             "</body>\r\n</html>\r\n")


class ServerWordsTest(harness.MockTestCase):
    """The server's own words, from what a byte-level server sent: plain text and HTML error
    bodies quoted as JSON messages are, and messages that differ only in numbers grouped."""

    def raw(self, fn, *args, n=12, concurrency=2):
        with rawserver.RawServer(lambda req: fn(req) if req.path.endswith("/chat/completions")
                                 else rawserver.response(404, "{}")) as s:
            r = self.run_vlmload("--url", s.url, "--model", "m", "--server", "openai", "--rate",
                                 "0", "--concurrency", str(concurrency), "--requests", str(n),
                                 "--no-progress", *args)
            self.sent = s.chat_requests()
        self.assertIsNotNone(r.summary, r.stderr)
        self.assertEqual(len(self.sent), r.summary["requests"]["sent"])
        return r

    def test_plain_text_and_html_bodies_quoted(self):
        # aiohttp's own 404, in text/plain.
        reply = rawserver.response(404, "404: Not Found",
                                   {"Content-Type": "text/plain; charset=utf-8"})
        r = self.raw(lambda req: reply, "--keep-going")
        self.assertEqual(r.summary["errors"]["http_4xx"], 12)
        self.assertTrue(all(l["error_message"] == "404: Not Found" for l in r.log), r.log[0])
        self.assertEqual(r.summary["error_messages"],
                         [{"class": "http_4xx", "status": 404, "message": "404: Not Found",
                           "count": 12, "numbers_vary": False}])
        self.assertIn("messages   12 x http_4xx 404: 404: Not Found\n", r.stdout)
        # Without --keep-going the first five stop the run, in the server's words.
        r = self.raw(lambda req: reply, concurrency=1)
        lines = [l for l in r.stderr.splitlines() if l.startswith("vlmload: the first")]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn('answered HTTP 404: "404: Not Found"', lines[0])
        # nginx's page: its title.
        reply = rawserver.response(502, NGINX_502, {"Content-Type": "text/html"})
        r = self.raw(lambda req: reply)
        self.assertEqual(r.summary["errors"]["http_5xx"], 12)
        self.assertTrue(all(l["error_message"] == "502 Bad Gateway" for l in r.log), r.log[0])
        # A line longer than a message keeps: its first 255 bytes, cut between characters.
        long = "Service unavailable: " + "\u00e9" * 400 + "\nsecond line"
        reply = rawserver.response(503, long, {"Content-Type": "text/plain"})
        r = self.raw(lambda req: reply)
        for l in r.log:
            m = l["error_message"]
            self.assertTrue(m.startswith("Service unavailable: \u00e9\u00e9"), m)
            self.assertLessEqual(len(m.encode()), 255)
            self.assertGreaterEqual(len(m.encode()), 253)
            self.assertEqual(set(m[len("Service unavailable: "):]), {"\u00e9"})

    def test_messages_differing_in_numbers_grouped(self):
        # llama.cpp's refusal names each request's own length: one kind, counted once each.
        def fn(req):
            k = len(self.sent_so_far)
            self.sent_so_far.append(k)
            msg = ("request (%d tokens) exceeds the available context size (1024 tokens), try "
                   "increasing it" % (2754 + 13 * k))
            return rawserver.response(400, json.dumps({"error": {
                "code": 400, "message": msg, "type": "exceed_context_size_error"}}))
        self.sent_so_far = []
        r = self.raw(fn, "--keep-going", n=30, concurrency=1)
        self.assertEqual(r.summary["errors"]["http_4xx"], 30)
        first = ("request (2754 tokens) exceeds the available context size (1024 tokens), try "
                 "increasing it")
        self.assertEqual(len(set(l["error_message"] for l in r.log)), 30)  # each its own words
        self.assertEqual(r.summary["error_messages"],
                         [{"class": "http_4xx", "status": 400, "message": first, "count": 30,
                           "numbers_vary": True}])
        self.assertEqual(r.summary["error_messages_other"], 0)
        # The text shows the whole example, wrapped, never cut.
        lines = r.stdout.splitlines()
        at = next(i for i, l in enumerate(lines) if l.startswith("  messages "))
        shown = " ".join(" ".join(lines[at:at + 3]).split())
        self.assertIn("messages 30 x http_4xx 400: " + first + " (numbers vary; the first shown)",
                      shown)
        self.assertNotIn("...", shown)
        self.assertTrue(all(len(l) <= 100 for l in lines[at:at + 3]))

class FailFastDocsTest(harness.MockTestCase):
    """The classes of failure the docs say stop a run (and those they say do not), each provoked
    against a real peer: the run does what the table says."""
    N = 20

    def doc_table(self):
        with open(os.path.join(ROOT, "docs", "outputs.md")) as f:
            text = f.read()
        section = text[text.index("### When the run cannot work"):text.index("## Outputs")]
        rows = {}
        for first, verdict in re.findall(r"^\| (.+?) \| (stops|goes on) \|$", section, re.M):
            for cls in re.findall(r"`(\w+)`", first.split(":")[0]):
                rows[cls] = verdict
        return rows

    def provoke(self, cls, n, rate):
        """Runs n requests at rate meeting failures of class cls. Returns (run, a function giving
        the requests the peer got, or None where no peer counts them)."""
        args = ["--model", "m", "--rate", str(rate), "--requests", str(n), "--no-progress"]
        faults = {"http_4xx": "http400:1", "http_429": "http429:1", "http_5xx": "http500:1",
                  "malformed": "malformed:1", "truncated": "truncate:1", "transport": "reset:1"}
        if cls in faults:
            m = self.mock("--fault", faults[cls])
            return self.run_vlmload("--url", m.url, *args), lambda: len(m.records())
        if cls == "timeout":
            m = self.mock("--latency", "3s")
            return (self.run_vlmload("--url", m.url, "--timeout", "200ms", *args),
                    lambda: m.stats()["requests_total"])
        if cls == "oversize":
            m = self.mock("--tokens", "2000")
            return (self.run_vlmload("--url", m.url, "--max-response", "2KiB", "--max-tokens",
                                     "4000", *args), lambda: len(m.records()))
        if cls in ("stream_error", "http_other"):
            reply = rawserver.response(302, b"", headers={"Location": "http://127.0.0.1:9/"}) \
                if cls == "http_other" else \
                rawserver.response(200, b'{"error": {"message": "boom", "code": 500}}')
            with rawserver.RawServer(lambda req: reply) as s:
                r = self.run_vlmload("--url", s.url, "--server", "openai", *args)
                got = len(s.chat_requests())
            return r, lambda: got
        if cls == "connect":
            url = "http://127.0.0.1:%d" % harness.closed_port()
            return self.run_vlmload("--url", url, *args), None
        if cls == "connect_timeout":
            # A listener that never accepts, its queue filled: new connections get no answer.
            lsock = socket.socket()
            lsock.bind(("127.0.0.1", 0))
            lsock.listen(0)
            port = lsock.getsockname()[1]
            fillers = []
            for _ in range(4):
                c = socket.socket()
                c.setblocking(False)
                c.connect_ex(("127.0.0.1", port))
                fillers.append(c)
            try:
                return self.run_vlmload("--url", "http://127.0.0.1:%d" % port, "--server",
                                        "openai", "--connect-timeout", "300ms", *args), None
            finally:
                for c in fillers:
                    c.close()
                lsock.close()
        self.fail("no way to provoke %s" % cls)

    def test_the_classes_that_stop_a_run_are_those_the_docs_list(self):
        rows = self.doc_table()
        self.assertEqual(sorted(c for c, v in rows.items() if v == "stops"),
                         ["connect", "connect_timeout", "http_4xx"])
        self.assertLessEqual({"http_429", "http_5xx", "timeout"},
                             {c for c, v in rows.items() if v == "goes on"})
        for cls, verdict in sorted(rows.items()):
            # A run that should stop is given more requests than it can send before it does.
            n, rate = (10 * self.N, 50) if verdict == "stops" else (self.N, 200)
            r, received = self.provoke(cls, n, rate)
            s = r.summary
            self.assertIsNotNone(s, (cls, r.stderr))
            if verdict == "stops":
                # The fifth failure stops it; what was still in flight is cancelled.
                self.assertGreaterEqual(s["errors"][cls], 5, (cls, s["errors"]))
                self.assertEqual(s["errors"][cls] + s["errors"]["cancelled"],
                                 s["requests"]["sent"], (cls, s["errors"]))
                self.assertEqual(s["stop_reason"], "fail_fast", (cls, r.stderr))
                self.assertLess(s["requests"]["sent"], n / 2, cls)
                self.assertIn("--keep-going sends anyway", r.stderr, cls)
            else:
                self.assertEqual(s["errors"][cls], self.N, (cls, s["errors"]))
                self.assertEqual(s["stop_reason"], "requests", (cls, r.stderr))
                self.assertEqual(s["requests"]["sent"], self.N, cls)
                self.assertNotIn("the first 5 requests all failed", r.stderr, cls)
            if received:  # the peer's count of what it was sent
                self.assertEqual(received(), s["requests"]["sent"], cls)

    def test_help_lists_the_classes(self):
        text = subprocess.run([harness.VLMLOAD, "--help"], capture_output=True,
                              timeout=30).stdout.decode()
        row = " ".join(text[text.index("  --keep-going"):text.index("  --flush-every")].split())
        for words in ("connection refused", "connect time-out", "the same 4xx status but 429",
                      "A 429, a 5xx, a time-out after connecting or a broken reply never stops "
                      "a run"):
            self.assertIn(words, row)

if __name__ == "__main__":
    harness.main()
