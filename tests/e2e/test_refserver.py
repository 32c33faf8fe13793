"""The reference server (tools/refserver/) in its two processes, with its stub engine (no torch,
no GPU): vlmload's --monitor-tree follows the front and the model process under their titles,
the requests are served through both (the server's own figures, the pixels checked by hash in
the model process), a drained flush reaches the model, and /metrics gives each process's series.
Skipped when no Python here has aiohttp and PIL (the server's needs)."""
import json
import os
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
REFSERVER = os.path.join(HERE, "..", "..", "tools", "refserver", "refserver.py")


def server_python():
    """The first interpreter with the server's needs: $REFSERVER_PYTHON, this one, Debian's."""
    for py in (os.environ.get("REFSERVER_PYTHON"), sys.executable, "/usr/bin/python3"):
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", "import aiohttp, PIL"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return py
    return None


PYTHON = server_python()


@unittest.skipIf(PYTHON is None, "no python3 here imports aiohttp and PIL (the reference "
                 "server's needs: apt-get install python3-aiohttp python3-pil)")
class RefserverTest(harness.MockTestCase):
    def start(self, *args):
        port_file = os.path.join(self.tmp, "rs-port")
        log = open(os.path.join(self.tmp, "rs.log"), "wb")
        p = subprocess.Popen([PYTHON, REFSERVER, "--engine", "stub", "--port", "0", "--port-file",
                              port_file, "--stub-token-delay", "0.001", *args],
                             stdout=log, stderr=log, start_new_session=True)
        log.close()

        def stop():
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.addCleanup(stop)
        deadline = time.monotonic() + 60 * harness.SLACK
        port = ""
        while not port:
            if p.poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(self.tmp, "rs.log")) as f:
                    self.fail("the reference server did not start: " + f.read()[-2000:])
            time.sleep(0.05)
            if os.path.exists(port_file):  # written whole (renamed into place)
                with open(port_file) as f:
                    port = f.read().strip()
        self.url = "http://127.0.0.1:%d" % int(port)
        return p

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return r.read().decode()

    def shm_files(self, pid):
        return [n for n in os.listdir("/dev/shm") if n.startswith("refserver-%d-" % pid)]

    def check_run(self, transport):
        p = self.start("--feature-transport", transport)
        stats0 = json.loads(self.get("/refserver/stats"))
        procs = stats0["processes"]
        self.assertEqual(sorted(procs), ["front", "model"])
        self.assertEqual(procs["front"]["pid"], p.pid)
        model_pid = procs["model"]["pid"]
        self.assertNotEqual(model_pid, p.pid)
        # The titles the monitor reads: the kernel's comm (15 bytes) and the command line.
        for pid, role in ((p.pid, "front"), (model_pid, "model")):
            with open("/proc/%d/comm" % pid) as f:
                self.assertEqual(f.read().strip(), ("refserver::" + role)[:15])
        with open("/proc/%d/status" % model_pid) as f:
            ppid = [l for l in f if l.startswith("PPid:")][0].split()[1]
        self.assertEqual(int(ppid), p.pid)

        prom = self.url + "/metrics#torch_cuda_memory_reserved_bytes,process_resident_memory_bytes"
        r = self.run_vlmload("--url", self.url, "--rate", "20", "--requests", "80",
                             "--resolution", "96x64", "--unique-images", "--max-tokens", "4",
                             "--flush-every", "25", "--monitor-tree", "server=%d" % p.pid,
                             "--monitor-prom", prom, "--sample-every", "200ms")
        self.assertEqual(r.rc, 0, r.stderr)
        ok = r.summary["requests"]["ok"]
        self.assertEqual(ok, 80)

        # Both processes followed, each under its own title, through the whole run.
        cols = r.timeline[0].keys()
        for role in ("front", "model"):
            col = "rss_mb.server/refserver::" + role
            self.assertIn(col, cols)
            vals = [float(row[col]) for row in r.timeline if row[col]]
            self.assertGreaterEqual(len(vals), len(r.timeline) - 1, col)
            self.assertGreater(min(vals), 5, col)  # a Python interpreter's resident set
        tree = [t for t in r.summary["processes"] if t.get("tree") == "server"][0]
        seen = {q["name"]: q for q in tree["processes"]}
        self.assertEqual(sorted(seen), ["refserver::front", "refserver::model"])
        self.assertTrue(all(q["present"] for q in seen.values()))
        # The allocator's and the resident set's series, one per process.
        for metric in ("torch_cuda_memory_reserved_bytes", "process_resident_memory_bytes"):
            for role in ("front", "model"):
                self.assertTrue(any(c.startswith("prom.%s{" % metric) and role in c
                                    for c in cols), (metric, role, sorted(cols)))

        # What the server served: every request vlmload counted ok, its image through the
        # processor in the front and its pixels intact in the model process.
        st = json.loads(self.get("/refserver/stats"))
        self.assertEqual(st["requests_ok"], ok)
        self.assertEqual(st["images"], ok)
        self.assertEqual(st["processes"]["front"]["processor_calls"], ok)
        self.assertGreaterEqual(st["batched_requests"], ok)  # and the warm-up
        self.assertEqual(st["generated_tokens"], 4 * ok + 4)
        self.assertEqual(st["payload_mismatches"], 0)
        self.assertEqual(st["transport"]["segments"], ok if transport == "shm" else 0)
        self.assertEqual(st["transport"]["bytes"], 96 * 64 * 3 * ok)
        self.assertEqual(self.shm_files(p.pid), [])
        # The drained flushes reached the model process: its cache was emptied each time.
        self.assertGreaterEqual(r.summary["flushes"]["ok"], 2)
        self.assertEqual(st["flushes"], r.summary["flushes"]["ok"])
        self.assertGreater(st["last_flush"]["model"]["mm_cache_entries"], 0)
        self.assertIn("front", st["last_flush"])
        self.assertLessEqual(st["mm_cache"]["entries"], 25)

        # Stopping the front stops the model process too.
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(20)
        deadline = time.monotonic() + 10
        while os.path.exists("/proc/%d" % model_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(os.path.exists("/proc/%d" % model_pid), "the model process outlived "
                         "the front")

    def test_two_processes_shm(self):
        self.check_run("shm")

    def test_two_processes_cpu(self):
        self.check_run("cpu")

    def test_model_process_gone_stops_the_front(self):
        p = self.start()
        model_pid = json.loads(self.get("/refserver/stats"))["processes"]["model"]["pid"]
        os.kill(model_pid, signal.SIGKILL)
        self.assertEqual(p.wait(20), 1)


if __name__ == "__main__":
    harness.main()
