"""Hostile input through the real binary: bad command lines (each refused with exit status 2 and one
line naming the flag), image corpora full of broken files, and outputs that cannot be written."""
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import unittest

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOOD_PNG = os.path.join(ROOT, "corpus", "screens", "tiny-16x16.png")
GOOD_JPEG = os.path.join(ROOT, "corpus", "photos", "tiny-16x16.jpg")
BOMB_PNG = os.path.join(ROOT, "tests", "fuzz", "corpus", "image", "huge_declared.png")

# (arguments, text the one error line must contain). The flag itself unless said otherwise.
BAD_LINES = [
    (["--rate", "-5"], "--rate"),
    (["--rate", "fast"], "--rate"),
    (["--rate", "1e400"], "--rate"),
    (["--rate", "0.0001"], "--rate"),
    (["--rate="], "--rate"),
    (["--rate"], "--rate"),
    (["--concurrency", "0"], "--concurrency"),
    (["--concurrency", "1.5"], "--concurrency"),
    (["--requests", "0"], "--requests"),
    (["--requests", "10x"], "--requests"),
    (["--duration", "5x"], "--duration"),
    (["--duration", "-1s"], "--duration"),
    (["--timeout", "0"], "--timeout"),
    (["--connect-timeout", "20s", "--timeout", "1s"], "--connect-timeout"),
    (["--health-timeout", "0"], "--health-timeout"),
    (["--url", "ftp://x"], "--url"),
    (["--url", "http://a/?b=1"], "--url"),
    (["--url", ""], "--url"),
    (["--endpoint", "v1/chat"], "--endpoint"),
    (["--model", ""], "--model"),
    (["--api-key", ""], "--api-key"),
    (["--header", "NoColonHere"], "--header"),
    (["--server", "nginx"], "--server"),
    (["--flush-every", "0"], "--flush-every"),
    (["--flush-mode", "sometimes"], "--flush-mode"),
    (["--flush-endpoint", "flush_cache"], "--flush-endpoint"),
    (["--flush-method", "PUT"], "--flush-method"),
    (["--flush-retries", "100000"], "--flush-retries"),
    (["--resolution", "0x0"], "--resolution"),
    (["--resolution", "640x480:0"], "--resolution"),
    (["--image-format", "gif"], "--image-format"),
    (["--jpeg-quality", "101"], "--jpeg-quality"),
    (["--image-content", "cats"], "--image-content"),
    (["--max-pixels", "0"], "--max-pixels"),
    (["--pool-size", "0"], "--pool-size"),
    (["--image-ratio", "1.5"], "--image-ratio"),
    (["--image-ratio", "x"], "--image-ratio"),
    (["--images-per-request", "0"], "--images-per-request"),
    (["--images-per-request", "5-2"], "--images-per-request"),
    (["--images-per-request", "17"], "--images-per-request"),
    (["--image-placement", "middle"], "--image-placement"),
    (["--arrival", "weibull"], "--arrival"),
    (["--arrival", "gamma:0"], "--arrival"),
    (["--arrival", "poisson", "--rate", "0"], "--arrival"),
    (["--on-full", "spill"], "--on-full"),
    (["--warmup", "10", "--requests", "5"], "--warmup"),
    (["--seed", "-1"], "--seed"),
    (["--max-tokens", "0"], "--max-tokens"),
    (["--temperature", "11"], "--temperature"),
    (["--max-response", "10"], "--max-response"),
    (["--max-error-rate", "2"], "--max-error-rate"),
    (["--max-p99-ms", "x"], "--max-p99-ms"),
    (["--shard", "4/4"], "--shard"),
    (["--shard", "one/4"], "--shard"),
    (["--no-such-flag"], "--no-such-flag"),
    (["--rate", "1\n2"], "--rate"),  # a newline in a value does not split the error line
    (["stray"], "stray"),
    (["--config", "/nonexistent/vlmload.json"], "--config"),
    (["--conf", "/nonexistent/vlmload.json"], "--config"),  # getopt's abbreviation reads it too
    (["--prompts", "/nonexistent/prompts.txt"], "--prompts"),
    (["--images", "/nonexistent/corpus"], "--images"),
    (["--output", "/nonexistent/dir/s.json"], "--output"),
    (["--timeline", "/proc/version"], "--timeline"),
    (["--log-requests", "/tmp"], "--log-requests"),
    (["--histograms", "/nonexistent/dir/h.json"], "--histograms"),
]


def run_cli(args, timeout=30, **kw):
    return subprocess.run([harness.VLMLOAD, "--model", "m", "--url", "http://127.0.0.1:9",
                           "--requests", "1", *args], capture_output=True, timeout=timeout, **kw)


class BadCommandLineTest(unittest.TestCase):
    def assert_refused(self, p, name, what):
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 2, (what, err))
        self.assertEqual(err.count("\n"), 1, (what, err))
        self.assertTrue(err.startswith("vlmload: ") and err.endswith("\n"), (what, err))
        self.assertIn(name, err, what)
        self.assertEqual(p.stdout, b"", what)

    def test_table(self):
        self.assertGreaterEqual(len(BAD_LINES), 30)
        for args, name in BAD_LINES:
            with self.subTest(args=args):
                self.assert_refused(run_cli(args), name, args)

    def test_unwritable_place_named_with_its_reason(self):
        """A file in /proc: refused at once with the flag, the path and why (its file system makes
        no files, or permission), not a "No such file or directory" about a file that exists."""
        for flag in ("--output", "--histograms", "--plot"):
            for path in ("/proc/version", "/proc/vlmload-test.json"):
                with self.subTest(flag=flag, path=path):
                    # A plot needs something to sample before its path is looked at.
                    monitor = ["--monitor-pid", str(os.getpid())] if flag == "--plot" else []
                    p = run_cli([flag, path, *monitor])
                    self.assert_refused(p, flag, (flag, path))
                    err = p.stderr.decode()
                    self.assertIn("%s '%s': " % (flag, path), err)
                    self.assertNotIn("No such file", err)
                    self.assertRegex(err, "takes no new files|Permission denied")

    def test_config_file(self):
        with tempfile.TemporaryDirectory(prefix="vlmload-test-") as tmp:
            cases = [
                ("[1, 2]", "--config"),
                ("{\"rate\": 50", "--config"),
                ("{\"no-such-option\": 1}", "no-such-option"),
                ("{\"rate\": \"fast\"}", "rate"),
                ("{\"stream\": 1}", "stream"),
                ("{\"rate\": {\"a\": 1}}", "rate"),
                ("{\"rate\": \"1\\n2\"}", "rate"),
                ("{\"help\": true}", "help"),
            ]
            path = os.path.join(tmp, "c.json")
            for text, name in cases:
                with self.subTest(config=text):
                    with open(path, "w") as f:
                        f.write(text)
                    self.assert_refused(run_cli(["--config", path]), name, text)


def world_dir(prefix):
    """A temporary directory another user can enter (for runs that drop root)."""
    d = tempfile.mkdtemp(prefix=prefix)
    os.chmod(d, 0o777)
    return d


def unprivileged(test):
    """The command prefix that runs vlmload as a user permissions apply to: none when not root,
    setpriv to nobody when root (root reads and writes anything)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if not setpriv:
        test.skipTest("running as root without setpriv")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


class HostileCorpusTest(harness.MockTestCase):
    def make_corpus(self, good=True):
        d = os.path.join(self.tmp, "corpus")
        os.makedirs(os.path.join(d, "sub"))
        with open(GOOD_PNG, "rb") as f:
            png = f.read()
        with open(GOOD_JPEG, "rb") as f:
            jpeg = f.read()
        if good:
            shutil.copy(GOOD_PNG, os.path.join(d, "good.png"))
        bad = {
            "corrupt.png": png[:8] + b"GARBAGE" * 20,
            "bitflip.jpg": jpeg[:200] + bytes(b ^ 0x5A for b in jpeg[200:400]) + jpeg[400:],
            "truncated.jpg": jpeg[: len(jpeg) // 2],
            "truncated.png": png[: len(png) - 20],
            "empty.png": b"",
            "text.png": b"not an image at all\n",
        }
        for name, data in bad.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        shutil.copy(BOMB_PNG, os.path.join(d, "bomb-100000x100000.png"))
        os.symlink("loop-b", os.path.join(d, "loop-a"))
        os.symlink("loop-a", os.path.join(d, "loop-b"))
        os.symlink("..", os.path.join(d, "sub", "up"))
        os.symlink("nowhere", os.path.join(d, "dangling"))
        os.mkfifo(os.path.join(d, "fifo"))  # opening it must not block
        skipped = sorted(list(bad) + ["bomb-100000x100000.png", "loop-a", "loop-b", "up",
                                      "dangling", "fifo"])
        return d, skipped

    def skip_lines(self, stderr):
        return [l for l in stderr.splitlines() if l.startswith("vlmload: skipping ")]

    def test_broken_files_skipped_one_warning_each(self):
        d, skipped = self.make_corpus()
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "10", "--images", d,
                             "--quiet", timeout=60)
        self.assertEqual(r.rc, 0, r.stderr)
        lines = self.skip_lines(r.stderr)
        names = sorted(os.path.basename(l.split(": ")[1]) for l in lines)
        self.assertEqual(names, skipped, r.stderr)
        self.assertEqual(r.summary["requests"]["ok"], 10)
        # Only the good image ever reached the server.
        recs = m.records()
        self.assertEqual(len(recs), 10)
        for rec in recs:
            self.assertEqual([(i["fmt"], i["w"], i["h"]) for i in rec["images"]],
                             [("png", 16, 16)])

    def test_nothing_usable(self):
        d, skipped = self.make_corpus(good=False)
        p = run_cli(["--images", d], timeout=60)
        err = p.stderr.decode().splitlines()
        self.assertEqual(p.returncode, 2, err)
        self.assertEqual(len(err), len(skipped) + 1, err)
        self.assertTrue(err[-1].startswith("vlmload: --images "), err)
        self.assertIn("no usable image", err[-1])

    def test_empty_directory(self):
        d = os.path.join(self.tmp, "empty")
        os.makedirs(d)
        p = run_cli(["--images", d])
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 2, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("--images", err)

    def test_unreadable_file(self):
        drop = unprivileged(self)
        d = world_dir("vlmload-test-unreadable-")
        try:
            shutil.copy(GOOD_PNG, os.path.join(d, "good.png"))
            os.chmod(os.path.join(d, "good.png"), 0o644)
            shutil.copy(GOOD_JPEG, os.path.join(d, "secret.jpg"))
            os.chmod(os.path.join(d, "secret.jpg"), 0)
            os.makedirs(os.path.join(d, "closed"))
            shutil.copy(GOOD_JPEG, os.path.join(d, "closed", "inside.jpg"))
            os.chmod(os.path.join(d, "closed"), 0)
            m = self.mock()
            out = os.path.join(d, "s.json")
            p = subprocess.run([*drop, harness.VLMLOAD, "--url", m.url, "--rate", "100",
                                "--requests", "5", "--images", d, "--quiet", "--output", out],
                               capture_output=True, timeout=60)
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 0, err)
            lines = self.skip_lines(err)
            self.assertEqual(len(lines), 2, err)
            self.assertTrue(any("secret.jpg: cannot open: Permission denied" in l for l in lines),
                            err)
            self.assertTrue(any("closed: cannot open directory: Permission denied" in l
                                for l in lines), err)
            with open(out) as f:
                self.assertEqual(json.load(f)["requests"]["ok"], 5)
        finally:
            os.chmod(os.path.join(d, "closed"), 0o755)
            shutil.rmtree(d)


class OutputTest(harness.MockTestCase):
    def refused_at_start(self, flag, path, prefix=(), extra=()):
        """vlmload must refuse the output before sending anything, not after the run."""
        m = self.mock()
        p = subprocess.run([*prefix, harness.VLMLOAD, "--url", m.url, "--rate", "50", "--requests", "20",
                            "--quiet", flag, path, *extra], capture_output=True, timeout=20)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 2, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn(flag, err)
        self.assertEqual(m.stats()["requests_total"], 0)

    def test_timeline_on_full_disk(self):
        self.refused_at_start("--timeline", "/dev/full")

    def test_log_on_full_disk(self):
        self.refused_at_start("--log-requests", "/dev/full")

    def test_jsonl_timeline_and_samples_on_full_disk(self):
        self.refused_at_start("--timeline", "/dev/full", extra=("--timeline-format", "jsonl"))
        self.refused_at_start("--samples", "/dev/full")

    def test_log_fills_the_disk_mid_run(self):
        """A request log that stops taking writes during the run (the file size limit stands in
        for a full disk) stops the run with one line that says so, instead of losing records."""
        m = self.mock()
        log = os.path.join(self.tmp, "requests.jsonl")
        out = os.path.join(self.tmp, "summary.json")
        limit = 64 << 10

        def limited():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

        n = 8000  # 20 s at 400/s; the log reaches the limit in its first second
        p = subprocess.run([harness.VLMLOAD, "--url", m.url, "--rate", "400", "--requests", str(n),
                            "--quiet", "--log-requests", log, "--output", out],
                           capture_output=True, timeout=60, preexec_fn=limited)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 1, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("--log-requests '%s': File too large" % log, err)
        self.assertIn("stopping the run", err)
        self.assertEqual(os.path.getsize(log), limit)
        with open(out) as f:
            summary = json.load(f)
        self.assertEqual(summary["stop_reason"], "error")
        sent = summary["requests"]["sent"]
        self.assertEqual(m.stats()["requests_total"], sent)
        self.assertLess(sent, n // 4, "the run went on after the log failed")

    def test_outputs_to_fifos(self):
        """--output and --histograms to FIFOs write through them: the FIFOs stay, their readers
        get the JSON, and nothing is made beside them (no temporary, at start or at the end)."""
        m = self.mock()
        d = os.path.join(self.tmp, "fifos")
        os.makedirs(d)
        got = {}

        def read(path):
            with open(path, "rb") as f:
                got[path] = f.read()

        fifos = [os.path.join(d, name) for name in ("summary", "histograms")]
        readers = []
        for path in fifos:
            os.mkfifo(path)
            readers.append(threading.Thread(target=read, args=(path,), daemon=True))
            readers[-1].start()
        p = subprocess.run([harness.VLMLOAD, "--url", m.url, "--rate", "100", "--requests", "10",
                            "--quiet", "--output", fifos[0], "--histograms", fifos[1]],
                           capture_output=True, timeout=60)
        for path, t in zip(fifos, readers):
            t.join(10)
            if t.is_alive():  # let a reader that never got its writer go
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        self.assertEqual(p.returncode, 0, p.stderr)
        for path in fifos:
            self.assertTrue(stat.S_ISFIFO(os.lstat(path).st_mode), path)
        self.assertEqual(sorted(os.listdir(d)), ["histograms", "summary"])
        self.assertEqual(json.loads(got[fifos[0]])["requests"]["ok"], 10)
        self.assertEqual(json.loads(got[fifos[1]])["format"], "vlmload-histograms")

    def test_analysis_needs_a_timeline_it_can_read_back(self):
        """--analyze and --plot read the timeline back at the end: one that goes to a FIFO is
        refused at start, naming both flags, before any request."""
        m = self.mock()
        fifo = os.path.join(self.tmp, "timeline-fifo")
        os.mkfifo(fifo)
        for flag in (["--analyze"], ["--plot", os.path.join(self.tmp, "p.png")]):
            p = subprocess.run([harness.VLMLOAD, "--url", m.url, "--requests", "5", "--quiet",
                                "--timeline", fifo, "--monitor-pid", str(m.proc.pid), *flag],
                               capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 2, p.stderr)
            err = p.stderr.decode()
            self.assertIn("--timeline", err)
            self.assertIn(flag[0], err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertEqual(m.records(), [])

    def test_outputs_to_a_character_device(self):
        """Every output pointed at a null device: it stays the same device node, and nothing is
        made beside it. A node of our own when we may make one; else /dev/null itself, which only
        root could have replaced."""
        d = os.path.join(self.tmp, "dev")
        os.makedirs(d)
        null = os.path.join(d, "null")
        try:
            os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            with open(null, "w") as f:
                f.write("x")
        except OSError:
            if os.geteuid() == 0:
                self.skipTest("root, and no device node of our own")
            null, d = "/dev/null", None
        before = os.lstat(null)
        m = self.mock()
        p = subprocess.run([harness.VLMLOAD, "--url", m.url, "--rate", "100", "--requests", "10",
                            "--quiet", "--output", null, "--histograms", null, "--log-requests",
                            null, "--timeline", null, "--samples", null],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        after = os.lstat(null)
        self.assertTrue(stat.S_ISCHR(after.st_mode))
        self.assertEqual((after.st_ino, after.st_rdev), (before.st_ino, before.st_rdev))
        if d:
            self.assertEqual(os.listdir(d), ["null"])

    def test_unwritable_directory(self):
        drop = unprivileged(self)
        top = world_dir("vlmload-test-readonly-")
        try:
            d = os.path.join(top, "ro")
            os.makedirs(d)
            os.chmod(d, 0o555)
            for flag in ("--output", "--timeline", "--log-requests", "--histograms"):
                with self.subTest(flag=flag):
                    self.refused_at_start(flag, os.path.join(d, "x"), drop)
        finally:
            shutil.rmtree(top)


if __name__ == "__main__":
    harness.main()
