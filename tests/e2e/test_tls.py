"""https and redirects: the certificate is verified unless --insecure says otherwise, --cacert names
the CA to trust, a bad certificate stops the run at start with one line naming the way out, and a
redirect is never followed, so neither a body nor the Authorization header reaches a host the user
did not name. The mock serves https with a certificate made here by openssl."""
import http.server
import os
import subprocess
import threading

import harness


def make_cert(tmp, name, san):
    cert = os.path.join(tmp, name + ".pem")
    key = os.path.join(tmp, name + "-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=vlmload-test",
                    "-addext", "subjectAltName=" + san],
                   check=True, capture_output=True, timeout=60)
    return cert, key


class Recorder(http.server.ThreadingHTTPServer):
    """Answers every request with `status` (a redirect to `location` when given) and remembers
    what it was sent: method, path and Authorization header."""
    daemon_threads = True

    def __init__(self, status, location=None):
        self.status, self.location = status, location
        self.seen = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), RecorderHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]

    def close(self):
        self.shutdown()
        self.server_close()


class RecorderHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        n = int(self.headers.get("Content-Length", "0"))
        if n:
            self.rfile.read(n)
        with self.server.lock:
            self.server.seen.append((self.command, self.path, self.headers.get("Authorization")))
        body = b'{"object":"list","data":[{"id":"m"}]}' if self.server.status == 200 else b""
        self.send_response(self.server.status)
        if self.server.location:
            self.send_header("Location", self.server.location + self.path)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = handle_any


class TlsTest(harness.MockTestCase):
    def setUp(self):
        super().setUp()
        self.cert, self.key = make_cert(self.tmp, "ip", "IP:127.0.0.1")

    def test_verified_by_default(self):
        m = self.mock("--tls-cert", self.cert, "--tls-key", self.key)
        self.assertTrue(m.url.startswith("https://"))
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "10", "--quiet")
        self.assertEqual(r.rc, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(m.url, lines[0])
        self.assertIn("certificate", lines[0])
        self.assertIn("--cacert", lines[0])
        self.assertIn("--insecure", lines[0])
        self.assertEqual(m.records(), [])
        # The same refusal when waiting for health: at once, not after the health timeout.
        r = self.run_vlmload("--url", m.url, "--requests", "1", "--health-check",
                             "--health-timeout", "60s", "--quiet", timeout=30)
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertIn("--cacert", r.stderr)

    def test_cacert_and_insecure(self):
        m = self.mock("--tls-cert", self.cert, "--tls-key", self.key)
        for extra in (("--cacert", self.cert), ("--insecure",)):
            before = len(m.records())
            r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "20", "--stream",
                                 "--flush-every", "10", "--server", "sglang", *extra)
            self.assertEqual(r.rc, 0, r.stderr)
            self.assertEqual(r.summary["requests"]["ok"], 20)
            self.assertEqual(r.summary["flushes"]["ok"], 2)
            self.assertEqual(len(m.records()) - before, 20)
        self.assertEqual(r.summary["config"]["insecure"], True)

    def test_name_mismatch_and_bad_cacert(self):
        cert, key = make_cert(self.tmp, "dns", "DNS:elsewhere.invalid")
        m = self.mock("--tls-cert", cert, "--tls-key", key)
        r = self.run_vlmload("--url", m.url, "--cacert", cert, "--requests", "5", "--quiet")
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertIn("127.0.0.1", r.stderr)
        self.assertIn("--insecure", r.stderr)
        self.assertEqual(m.records(), [])
        # A --cacert that is not there is a bad command line, named.
        r = self.run_vlmload("--url", m.url, "--cacert", os.path.join(self.tmp, "nope.pem"),
                             "--requests", "5")
        self.assertEqual(r.rc, 2)
        self.assertIn("--cacert", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        # A file that is not a CA bundle: refused at start, like a bad certificate.
        junk = os.path.join(self.tmp, "junk.pem")
        with open(junk, "w") as f:
            f.write("not a certificate\n")
        r = self.run_vlmload("--url", m.url, "--cacert", junk, "--requests", "5", "--quiet")
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertIn("TLS", r.stderr)

    def test_redirect_not_followed(self):
        other = Recorder(200)
        first = Recorder(307, location=other.url)
        try:
            r = self.run_vlmload("--url", first.url, "--api-key", "sk-redirect-test", "--rate",
                                 "100", "--requests", "10", "--server", "sglang",
                                 "--flush-every", "5", "--health-check", "--health-timeout",
                                 "2s", timeout=60)
            # The health check sees a 307, not a 200: it gives up, and nothing went elsewhere.
            self.assertEqual(r.rc, 1, r.stderr)
            self.assertIn("307", r.stderr)
            r = self.run_vlmload("--url", first.url, "--api-key", "sk-redirect-test", "--rate",
                                 "100", "--requests", "10", "--server", "sglang",
                                 "--flush-every", "5", "--model", "m", timeout=60)
            self.assertEqual(r.summary["requests"]["sent"], 10)
            self.assertEqual(r.summary["errors"]["http_other"], 10)
            self.assertEqual(r.summary["flushes"]["ok"], 0)
            with first.lock:
                posts = [s for s in first.seen if s[1] == "/v1/chat/completions"]
                self.assertEqual(len(posts), 10)
                self.assertTrue(all(s[2] == "Bearer sk-redirect-test" for s in posts))
            with other.lock:
                self.assertEqual(other.seen, [])
        finally:
            first.close()
            other.close()


if __name__ == "__main__":
    harness.main()
