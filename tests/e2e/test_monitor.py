"""The monitor's checks at start and its units, against real peers: Prometheus pages served over
loopback by tests/prom_server.py (which records what it answered), processes started by the test
and by a real shell, and commands that read /proc."""
import csv
import json
import os
import shlex
import subprocess
import sys
import threading
import time

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
PROM_SERVER = os.path.join(os.path.dirname(HERE), "prom_server.py")
MiB = 1048576.0

# A process that holds 48 MiB, every page written, until its standard input closes; its
# arguments carry a token the test matches on.
HOLDER = ("import sys; b = b'\\x01' * (48 << 20); sys.stdout.write('ready\\n'); "
          "sys.stdout.flush(); sys.stdin.read()")


def vmrss_kb(pid):
    """VmRSS of pid as the kernel writes it, in kB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


def analyze_alone(test):
    """`vlmload analyze` on the run's timeline, alone; returns its series by name."""
    out = os.path.join(test.tmp, "analysis.json")
    p = subprocess.run([harness.VLMLOAD, "analyze", os.path.join(test.tmp, "timeline.csv"),
                        "--output", out, "--quiet"], capture_output=True, timeout=60)
    test.assertEqual(p.returncode, 0, p.stderr)
    with open(out) as f:
        return {s["series"]: s for s in json.load(f)["series"]}


class PeersTestCase(harness.MockTestCase):
    def prom_server(self, text):
        """prom_server.py serving text at /metrics; returns (base URL, page path, record path)."""
        page = os.path.join(self.tmp, "page.txt")
        record = os.path.join(self.tmp, "prom-record.txt")
        with open(page, "w") as f:
            f.write(text)
        p = subprocess.Popen([sys.executable, PROM_SERVER, page, record], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        self.addCleanup(lambda: (p.stdin.close(), p.wait(10), p.stdout.close()))
        port = int(p.stdout.readline())
        return "http://127.0.0.1:%d" % port, page, record

    def answered(self, record):
        """The server's own record: how many times it answered each (path, status)."""
        out = {}
        with open(record) as f:
            for line in f:
                path, status = line.split()
                out[(path, int(status))] = out.get((path, int(status)), 0) + 1
        return out

    def holder(self, token):
        """A process of HOLDER with token in its command line; returns its pid once it holds its
        memory."""
        p = subprocess.Popen([sys.executable, "-c", HOLDER, token], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        self.addCleanup(lambda: (p.stdin.close(), p.wait(10), p.stdout.close()))
        self.assertEqual(p.stdout.readline(), b"ready\n")
        return p.pid

    def token(self):
        return "vlmtok%d%d" % (os.getpid(), int(time.monotonic() * 1e6) % 10 ** 9)

    def start_lines(self, stderr, flag):
        return [l for l in stderr.splitlines() if l.startswith("vlmload: " + flag + " ")]


class PromAtStartTest(PeersTestCase):
    def test_failures_are_said_at_start_in_the_servers_words(self):
        m = self.mock("--latency", "5ms")
        base, page, record = self.prom_server(
            "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 0\n")
        dead = harness.closed_port()
        r = self.run_vlmload(
            "--url", m.url, "--rate", "20", "--duration", "2s", "--sample-every", "200ms",
            "--no-progress",
            "--monitor-prom", base + "/llamacpp",
            "--monitor-prom", "http://127.0.0.1:%d/metrics" % dead,
            "--monitor-prom", "page=" + base + "/metrics#llamacpp:requests_processing,nosuch_metric")
        self.assertEqual(r.rc, 0, r.stderr)
        said = self.start_lines(r.stderr, "--monitor-prom")
        self.assertEqual(len(said), 3, r.stderr)
        # llama.cpp's own answer, its status and message, and what to do about it.
        self.assertIn("--monitor-prom %s/llamacpp: HTTP 501: This server does not support metrics "
                      "endpoint. Start it with `--metrics` (llama.cpp's llama-server serves "
                      "/metrics only when started with --metrics)" % base, said[0])
        # curl's words for a port with nothing on it.
        self.assertIn("127.0.0.1 port %d" % dead, said[1])
        self.assertIn("Couldn't connect to server", said[1])
        self.assertIn("no sample of nosuch_metric on its page (1 metrics there: "
                      "llamacpp:requests_processing)", said[2])
        # The summary's counts are what the server answered.
        seen = self.answered(record)
        scrapes = {s["url"]: s for s in r.summary["scrapes"]}
        llama = scrapes[base + "/llamacpp"]
        self.assertGreaterEqual(seen[("/llamacpp", 501)], 10)
        self.assertEqual(llama["failed"], seen[("/llamacpp", 501)])
        self.assertEqual(llama["ok"], 0)
        self.assertTrue(llama["last_error"].startswith("HTTP 501: This server does not support"))
        page_t = scrapes[base + "/metrics"]
        self.assertEqual(page_t["label"], "page")
        self.assertEqual(page_t["ok"], seen[("/metrics", 200)])
        self.assertEqual((page_t["failed"], page_t["series"], page_t["missing"]),
                         (0, 1, ["nosuch_metric"]))
        closed = scrapes["http://127.0.0.1:%d/metrics" % dead]
        self.assertEqual(closed["ok"], 0)
        self.assertEqual(closed["failed"], llama["failed"])
        self.assertIn("Couldn't connect to server", closed["last_error"])
        self.assertIn("  scrapes    %s/llamacpp: 0 scrapes ok, %d failed, 0 series; the last "
                      "failed:" % (base, llama["failed"]), r.stdout)

    def test_defaults_absent_from_the_page_are_said(self):
        m = self.mock("--latency", "5ms")
        base, page, record = self.prom_server("llamacpp:prompt_tokens_total 5\n"
                                              "llamacpp:requests_processing 0\n")
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--requests", "10", "--no-progress",
                             "--monitor-prom", base)
        self.assertEqual(r.rc, 0, r.stderr)
        said = self.start_lines(r.stderr, "--monitor-prom")
        self.assertEqual(len(said), 1, r.stderr)
        self.assertIn("none of the default metrics is on its page (2 metrics there: "
                      "llamacpp:prompt_tokens_total, llamacpp:requests_processing); name the "
                      "ones to record after '#'", said[0])
        self.assertGreaterEqual(self.answered(record)[("/metrics", 200)], 1)


class PromUnitsTest(PeersTestCase):
    def test_gauges_that_are_not_memory_get_no_verdict(self):
        m = self.mock("--latency", "5ms")
        base, page, record = self.prom_server("")
        stop = threading.Event()

        def serve():
            # Requests in flight climb, the resident set stays at 250 MiB.
            k = 0
            while not stop.is_set():
                tmp = page + ".tmp"
                with open(tmp, "w") as f:
                    f.write("# TYPE llamacpp:requests_processing gauge\n"
                            "llamacpp:requests_processing %d\n"
                            "llamacpp:kv_cache_usage_ratio %.3f\n"
                            "# TYPE process_resident_memory_bytes gauge\n"
                            "process_resident_memory_bytes 262144000\n" % (k, k / 1000))
                os.rename(tmp, page)
                k += 1
                time.sleep(0.05)

        t = threading.Thread(target=serve)
        t.start()
        try:
            r = self.run_vlmload(
                "--url", m.url, "--rate", "50", "--duration", "3s", "--sample-every", "100ms",
                "--no-progress", "--analyze", "--monitor-prom",
                base + "/metrics#llamacpp:requests_processing,llamacpp:kv_cache_usage_ratio,"
                "process_resident_memory_bytes")
        finally:
            stop.set()
            t.join()
        self.assertEqual(r.rc, 0, r.stderr)
        busy, ratio, rss = ("prom.llamacpp:requests_processing", "prom.llamacpp:kv_cache_usage_ratio",
                            "prom.process_resident_memory_bytes")
        mem = {s["name"]: s for s in r.summary["memory"]}
        self.assertEqual((mem[busy]["unit"], mem[ratio]["unit"], mem[rss]["unit"]),
                         ("", "", "bytes"))
        # The timeline keeps what the server said; the summary shows bytes as MB.
        self.assertEqual(float(r.timeline[-1][rss]), 262144000)
        rows = [l.split() for l in r.stdout.splitlines() if l.strip().startswith("prom.")]
        shown = {row[0]: row[1:] for row in rows}
        self.assertEqual(shown[rss[:32]], ["250.0", "250.0", "250.0", "+0.0", "MB"])
        self.assertEqual(shown[busy[:32]][-2:], ["(not", "memory)"], shown)
        # Requests in flight grew through the run: no leak verdict on them, in the run's analysis
        # and in `vlmload analyze` on its timeline alike.
        run = {s["series"]: s for s in r.summary["memory_analysis"]["series"]}
        alone = analyze_alone(self)
        for a in (run, alone):
            self.assertEqual(a[busy]["verdict"], "not-memory", a[busy]["reason"])
            self.assertEqual(a[ratio]["verdict"], "not-memory")
            self.assertGreater(a[busy]["last"], a[busy]["first"] + 20)
            self.assertEqual(a[rss]["verdict"], "flat", a[rss]["reason"])
            self.assertEqual(a[rss]["unit"], "MB")
            self.assertAlmostEqual(a[rss]["last"], 250.0)


class PidMatchTest(PeersTestCase):
    def vlmload_under_a_shell(self, m, match, before="", after="true"):
        """vlmload run by a real shell (bash -c "[BEFORE;] timeout 60 vlmload ...; AFTER"), which
        stays its parent and whose command line holds vlmload's; returns (shell's pid, stderr,
        summary)."""
        out = os.path.join(self.tmp, "summary.json")
        cmd = " ".join(shlex.quote(a) for a in [
            "timeout", "60", harness.VLMLOAD, "--url", m.url, "--rate", "20", "--duration", "1s",
            "--no-progress", "--output", out, "--timeline", os.path.join(self.tmp, "tl.csv"),
            "--sample-every", "200ms", "--monitor-pid-match", match])
        script = (before + "; " if before else "") + cmd + "; " + after
        sh = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        return sh

    def finish(self, sh):
        stdout, stderr = sh.communicate(timeout=60)
        self.assertEqual(sh.returncode, 0, stderr)
        with open(os.path.join(self.tmp, "summary.json")) as f:
            return stderr.decode(), json.load(f)

    def test_the_shell_that_started_vlmload_is_not_followed(self):
        m = self.mock("--latency", "5ms")
        tok = self.token()
        sh = self.vlmload_under_a_shell(m, "sched=sglang::scheduler %s" % tok)
        err, summary = self.finish(sh)
        procs = {p["label"]: p for p in summary["processes"]}
        # bash and timeout hold the pattern in their command lines; neither is the server.
        self.assertFalse(procs["sched"]["matched"], (sh.pid, procs))
        self.assertIsNone(procs["sched"]["pid"])
        self.assertIn("--monitor-pid-match 'sglang::scheduler %s': no process matches yet" % tok,
                      err)

    def test_the_server_is_followed_and_not_the_older_shell(self):
        m = self.mock("--latency", "5ms")
        tok = self.token()
        # The shell starts first and waits; the server starts meanwhile, younger than the shell.
        sh = self.vlmload_under_a_shell(m, "sched=%s" % tok, before="sleep 1")
        server = self.holder(tok)
        err, summary = self.finish(sh)
        procs = {p["label"]: p for p in summary["processes"]}
        self.assertEqual(procs["sched"]["pid"], server, (sh.pid, procs))
        self.assertEqual(self.start_lines(err, "--monitor-pid-match"), [], err)
        # What was sampled is the server's memory as the kernel tells it.
        with open(os.path.join(self.tmp, "tl.csv")) as f:
            rss = [float(row["rss_mb.sched"]) for row in csv.DictReader(f) if row["rss_mb.sched"]]
        self.assertGreater(len(rss), 3)
        self.assertAlmostEqual(rss[-1], vmrss_kb(server) / 1024, delta=2)

    def test_several_matches_are_listed_with_the_one_followed(self):
        m = self.mock("--latency", "5ms")
        tok = self.token()
        first = self.holder(tok + " TP0")
        time.sleep(0.05)  # a start time of its own, in clock ticks
        second = self.holder(tok + " TP1")
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--requests", "10", "--no-progress",
                             "--monitor-pid-match", "sched=%s TP" % tok)
        self.assertEqual(r.rc, 0, r.stderr)
        said = self.start_lines(r.stderr, "--monitor-pid-match")
        self.assertEqual(len(said), 1, r.stderr)
        self.assertIn("--monitor-pid-match '%s TP': 2 processes match: %d (" % (tok, first), said[0])
        self.assertIn(", %d (" % second, said[0])
        self.assertIn("; following %d, the oldest, alone (--monitor-tree PID follows a server's "
                      "whole process tree)" % first, said[0])
        procs = {p["label"]: p for p in r.summary["processes"]}
        self.assertEqual(procs["sched"]["pid"], first)

    def test_workers_are_left_out(self):
        m = self.mock("--latency", "5ms")
        tok = self.token()
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--requests", "20", "--no-progress",
                             "--workers", "2", "--monitor-pid-match", "sched=%s" % tok,
                             "--monitor-cmd", "n_kb=echo 5")
        self.assertEqual(r.rc, 0, r.stderr)
        procs = {p["label"]: p for p in r.summary["processes"]}
        self.assertFalse(procs["sched"]["matched"], procs)
        # The merged summary keeps worker 0's record of its commands.
        self.assertEqual([(c["label"], c["unit"]) for c in r.summary["commands"]], [("n_kb", "kB")])


class CmdUnitsTest(PeersTestCase):
    def test_kb_that_proc_prints_is_read_as_kb(self):
        m = self.mock("--latency", "5ms")
        tok = self.token()
        pid = self.holder(tok)
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--duration", "1s",
                             "--sample-every", "200ms", "--no-progress",
                             "--monitor-cmd", "rss=grep VmRSS /proc/%d/status" % pid,
                             "--monitor-cmd", "rss_kb=awk '/VmRSS/ {print $2}' /proc/%d/status"
                             % pid,
                             "--monitor-cmd", "n=echo 42", "--analyze")
        self.assertEqual(r.rc, 0, r.stderr)
        kb = vmrss_kb(pid)
        last = r.timeline[-1]
        # "VmRSS:   51234 kB" is kB: MB in the timeline, as the kernel says.
        self.assertAlmostEqual(float(last["cmd.rss"]), kb / 1024, delta=1)
        self.assertGreater(float(last["cmd.rss"]), 48)
        # A name ending in _kb keeps the number as printed; the analysis reads it as kB.
        self.assertAlmostEqual(float(last["cmd.rss_kb"]), kb, delta=1024)
        run = {s["series"]: s for s in r.summary["memory_analysis"]["series"]}
        self.assertAlmostEqual(run["cmd.rss_kb"]["last"], kb / 1024, delta=1)
        self.assertAlmostEqual(analyze_alone(self)["cmd.rss_kb"]["last"], kb / 1024, delta=1)
        cmds = {c["label"]: c for c in r.summary["commands"]}
        self.assertEqual((cmds["rss"]["unit"], cmds["rss"]["unit_from"], cmds["rss"]["printed_unit"]),
                         ("MB", "output", "kB"))
        self.assertEqual((cmds["rss_kb"]["unit"], cmds["rss_kb"]["unit_from"]), ("kB", "name"))
        self.assertEqual((cmds["n"]["unit"], cmds["n"]["unit_from"]), ("MB", "assumed"))
        # The one assumption is said at start, once.
        said = self.start_lines(r.stderr, "--monitor-cmd")
        self.assertEqual(said, ['vlmload: --monitor-cmd n: "42" names no unit; taken as MB (print '
                                'one after the number, as kB or MiB, or end the name with one: '
                                'n_kb=CMD)'], r.stderr)
        self.assertIn("  command    rss: %d runs ok, 0 failed; printed in kB, kept in MB"
                      % cmds["rss"]["ok"], r.stdout)


if __name__ == "__main__":
    harness.main()
