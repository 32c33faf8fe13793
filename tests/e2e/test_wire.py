"""What crosses the wire, judged by what a byte-level server received: stale keep-alive replies
never charged to a request, a request the server never took sent again once and one it may have
taken never, connect time-outs in a class of their own, compressed replies decoded.
"""
import gzip
import json
import socket
import threading
import zlib

import harness
import rawserver

CHAT = "/v1/chat/completions"
R408 = rawserver.response(408, b"", close=True)
# Each request's own text, so that the server's record tells every request from the others.
UNIQUE = ("--input-tokens", "30")
# An 8.4 MB body (one 2048x1024 noise PNG): more than a client can write before a server whose
# receive buffer is held at 64 KiB reads it.
BIG = ("--image-ratio", "1", "--resolution", "2048x1024", "--image-format", "png",
       "--image-content", "noise", "--pool-size", "1", "--timeout", "30s")


def ok_reply(req):
    return rawserver.response(200, rawserver.chat_reply("hello there", 7, 3))


class WireTest(harness.MockTestCase):
    def run_raw(self, server, n, *extra, rate="20"):
        r = self.run_vlmload("--url", server.url, "--model", "m", "--server", "openai", "--rate",
                             rate, "--requests", str(n), "--no-progress", "--timeout", "5s",
                             *extra)
        self.assertIsNotNone(r.summary, r.stderr)
        self.assertEqual(len(r.log), n)
        return r

    def test_idle_close_408_is_never_a_reply(self):
        # The server closes a keep-alive connection idle for 30 ms with a 408, as nginx and
        # uvicorn do; arrivals every 50 ms find most connections closed that way.
        n = 100
        with rawserver.RawServer(ok_reply, idle_close=0.03,
                                 idle_bytes=rawserver.response(408, b"", close=True)) as s:
            r = self.run_raw(s, n, "--arrival", "constant")
            received = len(s.chat_requests())
            idle_closes = s.idle_closes
        self.assertEqual(received, n)  # every request reached the server once
        self.assertEqual(r.summary["requests"]["ok"], n, r.summary["errors"])
        self.assertEqual(sum(r.summary["errors"].values()), 0, r.summary["errors"])
        self.assertTrue(all(l["status"] == 200 for l in r.log))
        # Most arrivals found a stale 408 waiting and went on a new connection, each counted.
        retried = r.summary["requests"]["retried"]
        self.assertGreater(retried, n // 2)
        self.assertLessEqual(retried, idle_closes)
        self.assertEqual(sum(l["retries"] for l in r.log), retried)
        self.assertIn("retried    %d" % retried, r.stdout)

    def assert_each_taken_once(self, r, got, n):
        """Every request the run sent succeeded, and the server took each once."""
        self.assertEqual(r.summary["requests"]["ok"], n, r.summary["errors"])
        self.assertEqual(r.summary["requests"]["failed"], 0, r.summary["errors"])
        self.assertEqual(len(got), n)
        self.assertEqual(len({q.body for q in got}), n)  # none twice
        self.assertTrue(all(l["status"] == 200 and l["retries"] <= 1 for l in r.log))
        self.assertEqual(sum(l["retries"] for l in r.log), r.summary["requests"]["retried"])

    def test_408_on_a_reused_connection_is_sent_again(self):
        # The server answers a request, then meets the next one on that connection with a 408 and
        # closes, reading none of it: its idle time-out struck as the request came. The 408 is the
        # answer to no request, whether the server then resets the connection (the bytes it left
        # unread) or drains it: the request goes again, once, on a new connection.
        n = 30
        for linger in (False, True):
            with self.subTest(linger=linger):
                with rawserver.RawServer(ok_reply, close_after="next", close_bytes=R408,
                                         close_linger=linger) as s:
                    r = self.run_raw(s, n, "--arrival", "constant", *UNIQUE)
                    got, dropped = s.chat_requests(), s.dropped
                self.assert_each_taken_once(r, got, n)
                self.assertGreaterEqual(dropped, n // 2)
                self.assertEqual(r.summary["requests"]["retried"], dropped)

    def test_408_on_a_new_connection_is_the_answer(self):
        n = 10
        with rawserver.RawServer(lambda req: R408) as s:
            r = self.run_raw(s, n, "--keep-going", *UNIQUE)
            got = s.chat_requests()
        self.assertEqual(len(got), n)
        self.assertEqual(r.summary["errors"]["http_4xx"], n, r.summary["errors"])
        self.assertEqual(r.summary["requests"]["retried"], 0)

    def test_request_cut_by_a_close_is_sent_again(self):
        # The server closes a kept-alive connection as the next request begins to arrive, reading
        # none of it: the request's sends fail before it is all written. The server never had it:
        # it goes again, once, on a new connection.
        n = 8
        with rawserver.RawServer(ok_reply, close_after="next", rcvbuf=65536) as s:
            r = self.run_raw(s, n, "--arrival", "constant", *UNIQUE, *BIG, rate="4")
            got, dropped = s.chat_requests(), s.dropped
        self.assert_each_taken_once(r, got, n)
        # How many closes find the next request arriving depends on the machine's load; each one
        # that does is resent.
        self.assertGreater(dropped, 0)
        self.assertEqual(r.summary["requests"]["retried"], dropped)

    def test_request_read_whole_then_closed_is_not_sent_again(self):
        # The server reads the second request of each connection whole, acknowledging it, then
        # closes the connection without a reply: it took it, and dropped it. That is a failure,
        # never sent again (no reset follows the close, as one would a request the server had
        # not read).
        n = 12
        for body in (UNIQUE, UNIQUE + BIG):
            with self.subTest(big=body != UNIQUE):
                handler = lambda req: ["close"] if req.index_on_conn == 1 else ok_reply(req)
                with rawserver.RawServer(handler) as s:
                    r = self.run_raw(s, n, "--arrival", "constant", "--keep-going", *body,
                                     rate="10")
                    got = s.chat_requests()
                closed = sum(1 for q in got if q.index_on_conn == 1)
                self.assertEqual(len(got), n)
                self.assertEqual(len({q.body for q in got}), n)
                self.assertGreater(closed, 0)
                self.assertEqual(r.summary["requests"]["retried"], 0)
                self.assertEqual(r.summary["errors"]["transport"], closed, r.summary["errors"])
                self.assertEqual(r.summary["requests"]["ok"], n - closed)

    def test_request_read_whole_then_reset_goes_again_once(self):
        # The server reads the second request of each connection whole, then resets it: from the
        # client, the reset a server's kernel sends for a request that reached a socket closed
        # unread. It goes again once, on a new connection (this server sees it twice, and the
        # run says how many in `retried`).
        n = 12
        handler = lambda req: ["abort"] if req.index_on_conn == 1 else ok_reply(req)
        with rawserver.RawServer(handler) as s:
            r = self.run_raw(s, n, "--arrival", "constant", "--keep-going", *UNIQUE, rate="10")
            got = s.chat_requests()
        reset = [q for q in got if q.index_on_conn == 1]
        self.assertGreater(len(reset), 0)
        self.assertEqual(len(got), n + len(reset))
        self.assertEqual(r.summary["requests"]["retried"], len(reset))
        self.assertEqual(r.summary["requests"]["ok"], n, r.summary["errors"])
        again = [q for q in got if q.index_on_conn == 0 and q.body in {c.body for c in reset}]
        self.assertEqual(len(again), len(reset))

    def test_unanswered_on_a_new_connection_is_a_failure(self):
        # Each request is read whole on a new connection, closed without a reply: the answer, a
        # transport failure, never sent again.
        n = 6
        with rawserver.RawServer(lambda req: ["close"]) as s:
            r = self.run_raw(s, n, "--keep-going", *UNIQUE)
            got = s.chat_requests()
        self.assertEqual(len(got), n)
        self.assertEqual(r.summary["requests"]["retried"], 0)
        self.assertEqual(r.summary["errors"]["transport"], n, r.summary["errors"])

    def test_keepalive_without_idle_close_retries_nothing(self):
        with rawserver.RawServer(ok_reply) as s:
            r = self.run_raw(s, 50, rate="100")
            self.assertEqual(len(s.chat_requests()), 50)
            self.assertLess(s.connections, 50)  # connections were reused
        self.assertEqual(r.summary["requests"]["ok"], 50)
        self.assertEqual(r.summary["requests"]["retried"], 0)

    def run_unanswered(self, *extra):
        """vlmload against a listener that never accepts, its queue filled: new connections get
        no answer."""
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
            return self.run_vlmload("--url", "http://127.0.0.1:%d" % port, "--model", "m",
                                    "--server", "openai", "--rate", "20", "--requests", "6",
                                    "--quiet", "--timeout", "10s", *extra)
        finally:
            for c in fillers:
                c.close()
            lsock.close()

    def test_full_accept_queue_is_connect_timeout(self):
        r = self.run_unanswered("--connect-timeout", "1s", "--keep-going")
        self.assertEqual(r.rc, 1)  # nothing succeeded
        errors = r.summary["errors"]
        self.assertEqual(errors["connect_timeout"], 6, errors)
        self.assertEqual(errors["timeout"], 0, errors)
        self.assertEqual(sum(errors.values()), 6, errors)
        self.assertTrue(all(l["error"] == "connect_timeout" for l in r.log))
        # Each gave up after about the connect timeout, not the request timeout.
        self.assertTrue(all(0.9 <= l["latency_sent_ms"] / 1000 < 5 for l in r.log), r.log)

    def test_full_accept_queue_fails_fast_in_curls_words(self):
        r = self.run_unanswered("--connect-timeout", "700ms")
        self.assertEqual(r.rc, 1)
        lines = [l for l in r.stderr.splitlines() if "requests all failed" in l]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("Connection timed out after 700 milliseconds", lines[0])
        self.assertIn("does not accept connections in time", lines[0])

    def test_each_timeout_counts_from_its_own_start(self):
        # Every third request the server answers after 3 s, the others at once; requests leave
        # every 50 ms, so the slow ones' deadlines fall among the quick ones' starts.
        lock, seen = threading.Lock(), []

        def handler(req):
            with lock:
                seen.append(1)
                slow = len(seen) % 3 == 0
            return [3.0, ok_reply(req)] if slow else [ok_reply(req)]

        with rawserver.RawServer(handler) as s:
            r = self.run_raw(s, 12, "--timeout", "800ms", "--arrival", "constant")
        errors = r.summary["errors"]
        self.assertEqual(errors["timeout"], 4, errors)
        self.assertEqual(sum(errors.values()), 4, errors)
        self.assertEqual(r.summary["requests"]["ok"], 8)
        late = [l for l in r.log if l["error"] == "timeout"]
        self.assertEqual(len(late), 4)
        # Each gave up at its own 800 ms, to the loop's millisecond; the quick ones took far less.
        for l in late:
            self.assertGreaterEqual(l["latency_sent_ms"], 799, l)
            self.assertLess(l["latency_sent_ms"], 800 + 60 * harness.SLACK, l)
        self.assertTrue(all(l["latency_sent_ms"] < 500 for l in r.log if l["error"] is None))

    def test_slow_reply_is_timeout(self):
        with rawserver.RawServer(lambda req: [3.0, ok_reply(req)]) as s:
            r = self.run_raw(s, 3, "--timeout", "1s", "--connect-timeout", "1s")
        self.assertEqual(r.summary["errors"]["timeout"], 3, r.summary["errors"])
        self.assertEqual(r.summary["errors"]["connect_timeout"], 0)

    def compressing_server(self, stream):
        def handler(req):
            enc = req.headers.get("accept-encoding", "")
            body = req.json()
            if stream:
                events = "".join(
                    "data: %s\n\n" % json.dumps({"choices": [{"index": 0,
                                                              "delta": {"content": "tok"}}]})
                    for _ in range(5))
                events += "data: %s\n\n" % json.dumps(
                    {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 5}})
                events += "data: [DONE]\n\n"
                raw = events.encode()
                ctype = "text/event-stream"
            else:
                raw = rawserver.chat_reply("x" * 2000, 4, 5).encode()
                ctype = "application/json"
            if "gzip" in enc:
                data, ce = gzip.compress(raw), "gzip"
            elif "deflate" in enc:
                data, ce = zlib.compress(raw), "deflate"
            else:
                data, ce = raw, None
            return rawserver.response(200, data, {"Content-Type": ctype, "Content-Encoding": ce})
        return rawserver.RawServer(handler)

    def check_decoded(self, stream, *flags, want_encoding):
        n = 20
        with self.compressing_server(stream) as s:
            r = self.run_raw(s, n, "--rate", "100", *(("--stream",) if stream else ()), *flags)
            got = [q.headers.get("accept-encoding", "") for q in s.chat_requests()]
        self.assertEqual(len(got), n)
        self.assertTrue(all(want_encoding in g for g in got), got[:3])
        self.assertEqual(r.summary["requests"]["ok"], n, r.summary["errors"])
        self.assertEqual(r.summary["tokens"]["completion"], 5 * n)

    def test_user_accept_encoding_gzip_is_decoded(self):
        self.check_decoded(False, "--header", "Accept-Encoding: gzip", want_encoding="gzip")

    def test_compressed_stream_is_decoded(self):
        self.check_decoded(True, "--compressed", want_encoding="gzip")

    def test_compressed_deflate(self):
        self.check_decoded(False, "--header", "accept-encoding: deflate", want_encoding="deflate")


if __name__ == "__main__":
    harness.main()
