"""Helpers for end-to-end tests: start the mock server on a free loopback port, run vlmload
against it, and read back what both recorded.

Every process is bounded by a timeout and killed at the end of its test.
"""
import json
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.request

VLMLOAD = os.environ.get("VLMLOAD", "vlmload")
# Timing tolerances are held to the release build; a sanitizer build runs several times slower,
# so its test run widens them by this factor (the assertions about counts stay exact).
SLACK = float(os.environ.get("VLMLOAD_TIMING_SLACK", "1"))
# A sanitized build: slower, and its allocator is not glibc's.
SANITIZED = os.environ.get("VLMLOAD_SANITIZED") == "1"
VLMMOCK = os.environ.get("VLMMOCK", "vlmmock")


class Mock:
    """A vlmmock process on 127.0.0.1 with an ephemeral port and a request record."""

    def __init__(self, tmpdir, *args):
        self.record = os.path.join(tmpdir, "mock-record.jsonl")
        port_file = os.path.join(tmpdir, "mock-port")
        self.proc = subprocess.Popen(
            [VLMMOCK, "--host", "127.0.0.1", "--port", "0", "--port-file", port_file,
             "--record", self.record, *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    break
            if self.proc.poll() is not None:
                raise RuntimeError("vlmmock exited: " + self.proc.stderr.read().decode())
            time.sleep(0.02)
        else:
            self.stop()
            raise RuntimeError("vlmmock did not start")
        self.tls = "--tls-cert" in args
        self.url = "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self.port)

    def get(self, path):
        ctx = None
        if self.tls:  # the test's own questions to its own mock: no verification needed
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        with urllib.request.urlopen(self.url + path, timeout=10, context=ctx) as r:
            return r.read().decode()

    def stats(self):
        return json.loads(self.get("/mock/stats"))

    def records(self, route="/v1/chat/completions"):
        out = []
        with open(self.record) as f:
            for line in f:
                rec = json.loads(line)
                if rec.get("route", "/v1/chat/completions") == route:
                    out.append(rec)
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()


class Run:
    """The outcome of one vlmload run."""

    def __init__(self, proc, stdout, stderr, summary, log, timeline):
        self.rc = proc.returncode
        self.stdout = stdout
        self.stderr = stderr
        self.summary = summary
        self.log = log
        self.timeline = timeline


class Started:
    """A vlmload process writing --output/--log-requests/--timeline in tmpdir; finish() waits for
    it and reads them back."""

    def __init__(self, tmpdir, *args, env=None):
        self.out = os.path.join(tmpdir, "summary.json")
        self.log = os.path.join(tmpdir, "requests.jsonl")
        self.tl = os.path.join(tmpdir, "timeline.csv")
        for p in (self.out, self.log, self.tl):
            if os.path.exists(p):
                os.unlink(p)
        self.cmd = [VLMLOAD, "--output", self.out, "--log-requests", self.log, "--timeline",
                    self.tl, *args]
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env)

    def finish(self, timeout=120):
        try:
            stdout, stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError("vlmload did not finish in %ss: %s" % (timeout, " ".join(self.cmd)))
        summary = None
        if os.path.exists(self.out):
            with open(self.out) as f:
                summary = json.load(f)
        lines = []
        if os.path.exists(self.log):
            with open(self.log) as f:
                lines = [json.loads(l) for l in f]
        rows = []
        if os.path.exists(self.tl):
            with open(self.tl) as f:
                header = f.readline().strip().split(",")
                rows = [dict(zip(header, l.strip().split(","))) for l in f if l.strip()]
        return Run(self.proc, stdout.decode(), stderr.decode(), summary, lines, rows)


def vlmload(tmpdir, *args, timeout=120, interrupt_after=None, signals=1, env=None):
    """Runs vlmload with --output/--log-requests/--timeline in tmpdir and returns a Run.

    With interrupt_after, sends SIGINT that many seconds after start (`signals` times, 0.3 s
    apart)."""
    run = Started(tmpdir, *args, env=env)
    if interrupt_after is not None:
        time.sleep(interrupt_after)
        for i in range(signals):
            run.proc.send_signal(signal.SIGINT)
            time.sleep(0.3)
    return run.finish(timeout)


class MockTestCase(unittest.TestCase):
    """A test case with a temporary directory and mocks stopped on teardown."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="vlmload-test-")
        self.tmp = self._tmp.name
        self._mocks = []

    def tearDown(self):
        for m in self._mocks:
            m.stop()
        self._tmp.cleanup()

    def mock(self, *args):
        sub = os.path.join(self.tmp, "mock%d" % len(self._mocks))
        os.makedirs(sub)
        m = Mock(sub, *args)
        self._mocks.append(m)
        return m

    def run_vlmload(self, *args, **kw):
        return vlmload(self.tmp, *args, **kw)


def closed_port():
    """A loopback port nothing listens on (bound and closed again at once)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cv(values):
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return var ** 0.5 / mean


def main():
    unittest.main(verbosity=2)
