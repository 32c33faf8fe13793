"""--workers: one stream run by several processes, judged by what the mock received and by the
merged outputs, against the same run in one process."""
import fcntl
import glob
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time

import harness

PROGRESS = re.compile(r"(\d+)s  .*req/s  ok (\d+)  err (\d+).*sent (\d+)")
# Everything a request's body is made of, as the mock saw it: one process and two workers must
# send the same multiset of these.
FINGERPRINT = ("body_bytes", "prompt_chars", "text_parts", "messages", "max_tokens", "images")
# Counts of the summary that must equal one process's exactly.
COUNTS = (("requests", "sent"), ("requests", "ok"), ("requests", "completed"),
          ("requests", "failed"), ("requests", "with_images"), ("requests", "text_only"),
          ("requests", "measured"), ("images", "sent"), ("images", "bytes"), ("tokens", "prompt"),
          ("tokens", "completion"), ("bytes_sent",), ("latency_ms", "count"))


def fingerprints(records):
    return sorted(json.dumps([r.get(k) for k in FINGERPRINT], sort_keys=True) for r in records)


def figure(summary, path):
    for k in path:
        summary = summary[k]
    return summary


def cores():
    return sorted(os.sched_getaffinity(0))


class WorkersTest(harness.MockTestCase):
    def leftovers(self):
        return glob.glob(os.path.join(self.tmp, "vlmload-workers-*"))

    def check_same_as_one_process(self, *load):
        common = ["--model", "m", "--requests", "2000", "--seed", "11", "--image-ratio", "0.3",
                  "--resolution", "32x32,48x40", "--pool-size", "4", "--quiet", *load]
        m2 = self.mock("--latency", "2ms")
        hist = os.path.join(self.tmp, "merged.histograms.json")
        r2 = self.run_vlmload("--url", m2.url, "--workers", "2", "--histograms", hist, *common)
        self.assertEqual(r2.rc, 0, r2.stderr)
        m1 = self.mock("--latency", "2ms")
        r1 = self.run_vlmload("--url", m1.url, "--workers", "1", *common)
        self.assertEqual(r1.rc, 0, r1.stderr)

        # The mock got exactly 2000 requests from the workers, the same bodies one process sends.
        recs1, recs2 = m1.records(), m2.records()
        self.assertEqual(len(recs2), 2000)
        self.assertEqual(len(recs1), 2000)
        self.assertTrue(all(r["status"] == 200 for r in recs2))
        self.assertEqual(fingerprints(recs2), fingerprints(recs1))
        self.assertGreater(sum(1 for r in recs2 if r["images"]), 300)
        # Each request id once, in the one log: the workers' logs joined.
        self.assertEqual(sorted(l["id"] for l in r2.log if "id" in l), list(range(2000)))

        # One summary whose counts are the single process's, exactly.
        s1, s2 = r1.summary, r2.summary
        self.assertEqual(s2["requests"]["sent"], 2000)
        self.assertEqual(s2["requests"]["ok"], 2000)
        for path in COUNTS:
            self.assertEqual(figure(s2, path), figure(s1, path), path)
        self.assertEqual(s2["workers"]["count"], 2)
        self.assertEqual(s2["workers"]["cores"], cores()[:2])
        self.assertEqual(s2["config"]["workers"], 2)

        # One timeline (the merged one's columns) and one histograms file, which merges again to
        # the same counts; the workers' private records are gone.
        self.assertEqual(sum(int(r["sent"]) for r in r2.timeline), 2000)
        self.assertEqual(sum(int(r["ok"]) for r in r2.timeline), 2000)
        again = os.path.join(self.tmp, "again.json")
        p = subprocess.run([harness.VLMLOAD, "merge", again, hist], capture_output=True,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(again) as f:
            merged = json.load(f)
        for path in COUNTS:
            self.assertEqual(figure(merged, path), figure(s1, path), path)
        self.assertEqual(self.leftovers(), [])
        return s2

    def test_closed_loop_sends_what_one_process_sends(self):
        s = self.check_same_as_one_process("--rate", "0", "--concurrency", "8")
        self.assertEqual(s["stop_reason"], "requests")

    def test_open_loop_sends_what_one_process_sends(self):
        self.check_same_as_one_process("--rate", "1000", "--concurrency", "64")

    def test_ctrl_c_stops_every_worker_and_merges(self):
        m = self.mock("--latency", "300ms")
        hist = os.path.join(self.tmp, "h.json")
        r = self.run_vlmload("--url", m.url, "--model", "m", "--rate", "100", "--duration", "60s",
                             "--workers", "2", "--histograms", hist, "--quiet",
                             interrupt_after=2.5, timeout=30)
        self.assertEqual(r.rc, 130, r.stderr)
        s = r.summary
        self.assertEqual(s["stop_reason"], "signal")
        self.assertTrue(s["interrupted"])
        sent = s["requests"]["sent"]
        self.assertGreater(sent, 50)
        self.assertLess(sent, 2000)
        self.assertEqual(sent, s["requests"]["ok"] + s["requests"]["failed"])
        self.assertEqual(sum(int(row["sent"]) for row in r.timeline), sent)
        self.assertTrue(os.path.exists(hist))
        # Every worker stopped: nothing more reaches the mock, and what did is what was counted.
        n = len(m.records())
        time.sleep(1)
        self.assertEqual(len(m.records()), n)
        self.assertEqual(n, sent)
        self.assertEqual(sorted(l["id"] for l in r.log if "id" in l)[:2], [0, 1])
        self.assertEqual(self.leftovers(), [])

    def test_one_progress_line_per_refresh(self):
        m = self.mock("--latency", "5ms")
        out = os.path.join(self.tmp, "s.json")
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
        p = subprocess.Popen([harness.VLMLOAD, "--url", m.url, "--model", "m", "--rate", "100",
                              "--duration", "4s", "--workers", "2", "--output", out],
                             stdin=slave, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        seen = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
            elif p.poll() is not None:
                break
        p.wait(timeout=30)
        os.close(master)
        self.assertEqual(p.returncode, 0, seen)
        with open(out) as f:
            sent = json.load(f)["requests"]["sent"]
        draws = [PROGRESS.search(d) for d in re.split(r"[\r\n]", seen.decode(errors="replace"))]
        draws = [d for d in draws if d]
        # One line for all the workers: one draw per second (and one at the end), never one per
        # worker, and its counts are the workers' together.
        seconds = [int(d.group(1)) for d in draws]
        self.assertGreaterEqual(len(draws), 3, seen)
        self.assertLessEqual(len(draws), 4 * harness.SLACK + 4, seen)
        self.assertEqual(len(seconds[:-1]), len(set(seconds[:-1])), seen)
        self.assertEqual(int(draws[-1].group(4)), sent)
        self.assertEqual(int(draws[-1].group(2)), sent)

    def test_monitor_runs_in_worker_zero(self):
        m = self.mock("--latency", "5ms")
        samples = os.path.join(self.tmp, "samples.csv")
        r = self.run_vlmload("--url", m.url, "--model", "m", "--rate", "0", "--concurrency", "4",
                             "--duration", "3s", "--workers", "2", "--monitor-pid",
                             "mock=%d" % m.proc.pid, "--samples", samples, "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        names = [s["name"] for s in r.summary["memory"]]
        self.assertIn("rss_mb.mock", names)
        self.assertEqual([p["label"] for p in r.summary["processes"]], ["mock"])
        with open(samples) as f:
            rows = [l for l in f if ",rss_mb.mock," in l]
        # One sampler: a row a tick (and one at the end), not one per worker.
        self.assertGreaterEqual(len(rows), 2)
        self.assertLessEqual(len(rows), 3 * harness.SLACK + 2)

    def test_dry_run_says_workers_and_cores(self):
        p = subprocess.run([harness.VLMLOAD, "--model", "m", "--workers", "2", "--dry-run"],
                           capture_output=True, timeout=30)
        if len(cores()) < 2:
            self.assertEqual(p.returncode, 2)
            return
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout.decode()
        self.assertIn("workers       2 processes", out)
        self.assertIn("--shard i/2", out)
        self.assertIn("cores %d,%d" % tuple(cores()[:2]), out)
        p = subprocess.run([harness.VLMLOAD, "--model", "m", "--workers", "auto", "--dry-run"],
                           capture_output=True, timeout=30)
        self.assertIn("workers       %d processes" % len(cores()), p.stdout.decode())

    def test_refusals_say_one_line(self):
        m = self.mock("--profile", "sglang")
        base = [harness.VLMLOAD, "--url", m.url, "--model", "m", "--requests", "100"]
        cases = [
            (["--workers", "2", "--shard", "0/2"], "--workers"),
            (["--workers", "2", "--flush-every", "20"], "--flush-every with --workers 2"),
            (["--workers", "2", "--flush-every", "20", "--flush-mode", "inline"],
             "--flush-every with --workers 2"),
            (["--workers", "2", "--analyze", "--monitor-pid", "1"], "--analyze with --workers 2"),
            (["--workers", "%d" % (len(cores()) + 1)], "one worker per core"),
            (["--workers", "0"], "--workers"),
            (["--workers", "x"], "--workers"),
            (["--workers", "2", "--requests", "1"], "more workers than --requests"),
            (["--workers", "2", "--sweep", "rate=10:20:10"], "--workers with phases or --sweep"),
            (["--workers", "2", "--output", os.path.join(self.tmp, "no", "such.json")],
             "--output"),
        ]
        for args, piece in cases:
            p = subprocess.run(base + args, capture_output=True, timeout=30)
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 2, (args, err))
            self.assertEqual(len(err.strip().splitlines()), 1, (args, err))
            self.assertIn(piece, err, args)
        p = subprocess.run(base + ["--workers", "2", "--flush-every", "20"], capture_output=True,
                           timeout=30)
        self.assertIn("run it with --workers 1", p.stderr.decode())
        self.assertEqual(m.records(), [])
        self.assertEqual(m.records("/flush_cache"), [])


if __name__ == "__main__":
    harness.main()
