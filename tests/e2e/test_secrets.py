"""The API key (--api-key, $OPENAI_API_KEY, a --config file) never shows in anything vlmload writes:
stdout, stderr, the summary, the request log, the timeline, the histograms, whatever goes wrong
(a bad URL, nobody listening, the server refusing the key, failed flushes, bad options) and
--help. A server of our own checks that the key is sent, as a bearer token, and only there."""
import http.server
import json
import os
import secrets
import subprocess
import threading

import harness

FILES = ("summary.json", "requests.jsonl", "timeline.csv", "hist.json")


class KeyServer(http.server.ThreadingHTTPServer):
    """Answers every chat request 401 and remembers the Authorization headers it saw."""
    daemon_threads = True

    def __init__(self):
        self.auth = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), KeyHandler)


class KeyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, extra=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with self.server.lock:
            self.server.auth.append(self.headers.get("Authorization"))
        self.answer(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        with self.server.lock:
            self.server.auth.append(self.headers.get("Authorization"))
        self.answer(401, {"error": {"message": "Incorrect API key provided", "code": 401}},
                    [("WWW-Authenticate", "Bearer")])


class SecretTest(harness.MockTestCase):
    def setUp(self):
        super().setUp()
        self.key = "sk-test-" + secrets.token_hex(12)
        self.env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}

    def run_key(self, *args, env_key=False, expect=None):
        """Runs vlmload with every output, the key given on the command line or in the
        environment, and checks that it shows nowhere."""
        env = dict(self.env)
        key_args = []
        if env_key:
            env["OPENAI_API_KEY"] = self.key
        else:
            key_args = ["--api-key", self.key]
        hist = os.path.join(self.tmp, "hist.json")
        if os.path.exists(hist):
            os.unlink(hist)
        r = harness.vlmload(self.tmp, *key_args, "--histograms", hist, *args, env=env,
                            timeout=60)
        if expect is not None:
            self.assertEqual(r.rc, expect, r.stderr)
        self.assert_hidden(r.stdout, r.stderr)
        for name in FILES:
            path = os.path.join(self.tmp, name)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    self.assertNotIn(self.key.encode(), f.read(), name)
        if r.summary:
            self.assertEqual(r.summary["config"]["api_key"], "***")
        return r

    def assert_hidden(self, *texts):
        for t in texts:
            if isinstance(t, bytes):
                t = t.decode(errors="replace")
            self.assertNotIn(self.key, t)
            self.assertNotIn(self.key[8:], t)  # nor the random part alone

    def test_help_and_version(self):
        env = dict(self.env, OPENAI_API_KEY=self.key)
        for flag in ("--help", "--version"):
            p = subprocess.run([harness.VLMLOAD, flag], capture_output=True, env=env, timeout=30)
            self.assertEqual(p.returncode, 0)
            self.assert_hidden(p.stdout, p.stderr)
        p = subprocess.run([harness.VLMLOAD, "--api-key", self.key, "--help"],
                           capture_output=True, env=self.env, timeout=30)
        self.assert_hidden(p.stdout, p.stderr)

    def test_sent_as_bearer_and_refused(self):
        srv = KeyServer()
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        try:
            url = "http://127.0.0.1:%d" % srv.server_address[1]
            for stream in ((), ("--stream",)):
                for env_key in (False, True):
                    with srv.lock:
                        srv.auth.clear()
                    r = self.run_key("--url", url, "--rate", "100", "--requests", "5", *stream,
                                     env_key=env_key, expect=1)
                    self.assertEqual(r.summary["errors"]["http_4xx"], 5)
                    with srv.lock:
                        # /v1/models, the server's /metrics page (its counters), the 5 requests
                        self.assertEqual(srv.auth, ["Bearer " + self.key] * 7)
        finally:
            srv.shutdown()
            srv.server_close()

    def test_mock_401(self):
        m = self.mock("--fault", "http401:1")
        for stream in ((), ("--stream",)):
            r = self.run_key("--url", m.url, "--rate", "100", "--requests", "5", *stream,
                             expect=1)
            self.assertEqual(r.summary["errors"]["http_4xx"], 5)

    def test_connect_failure(self):
        url = "http://127.0.0.1:%d" % harness.closed_port()
        r = self.run_key("--url", url, "--rate", "100", "--requests", "3", "--keep-going",
                         env_key=True, expect=1)
        self.assertEqual(r.summary["errors"]["connect"], 3)
        self.run_key("--url", url, "--health-check", "--health-timeout", "500ms",
                     "--requests", "1", expect=1)

    def test_flush_failures(self):
        # Flush calls 2 and 4 answer 500, call 3 never answers.
        m = self.mock("--fault", "flush500:0.5", "--fault", "flush_stall:0.5")
        r = self.run_key("--url", m.url, "--rate", "200", "--requests", "20", "--flush-every",
                         "5", "--flush-timeout", "300ms", expect=0)
        self.assertEqual(r.summary["flushes"]["failed"], 3)

    def test_bad_command_lines(self):
        cases = [
            ["--url", "http://[::1"],
            ["--url", "ftp://host"],
            ["--rate", "x"],
            ["--apikey=" + self.key],
            ["--api-key=" + self.key + "\n"],
            ["--api-key", self.key, "--header", "Authorization: Bearer " + self.key + "\r\n"],
            ["--api-key", self.key, "--no-such-option"],
            ["--api-key", self.key, "--output", "/nonexistent/dir/s.json"],
        ]
        for args in cases:
            with self.subTest(args=args[0]):
                p = subprocess.run([harness.VLMLOAD, *args], capture_output=True, env=self.env,
                                   timeout=30)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assert_hidden(p.stdout, p.stderr)
        # From a configuration file, next to a bad option.
        path = os.path.join(self.tmp, "c.json")
        with open(path, "w") as f:
            json.dump({"api-key": self.key, "rate": "fast"}, f)
        p = subprocess.run([harness.VLMLOAD, "--config", path], capture_output=True,
                           env=self.env, timeout=30)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assert_hidden(p.stdout, p.stderr)
        with open(path, "w") as f:
            json.dump({"api-key": self.key + "\n"}, f)
        p = subprocess.run([harness.VLMLOAD, "--config", path], capture_output=True,
                           env=self.env, timeout=30)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assert_hidden(p.stdout, p.stderr)

    def test_config_file_key_and_headers(self):
        m = self.mock()
        path = os.path.join(self.tmp, "c.json")
        with open(path, "w") as f:
            json.dump({"api-key": self.key, "header": ["X-Other: " + self.key]}, f)
        r = self.run_key("--url", m.url, "--config", path, "--rate", "100", "--requests", "3",
                         expect=0)
        self.assertEqual(r.summary["config"]["headers"], ["X-Other: ***"])

    def test_interrupted_run(self):
        m = self.mock("--fault", "stall:1")
        r = harness.vlmload(self.tmp, "--api-key", self.key, "--url", m.url, "--rate", "20",
                            "--duration", "30s", "--grace", "300ms", "--progress",
                            interrupt_after=1.0, env=self.env, timeout=30)
        self.assertEqual(r.rc, 130)
        self.assert_hidden(r.stdout, r.stderr)
        for name in FILES[:3]:
            with open(os.path.join(self.tmp, name), "rb") as f:
                self.assertNotIn(self.key.encode(), f.read())


if __name__ == "__main__":
    harness.main()
