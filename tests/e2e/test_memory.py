"""Memory sampling during a run and the leak analysis, against the mock's memory model: a known
number of KB per image kept for ever (a leak) or until a flush (a cache), held for real so that
the mock's resident set shows it; and the plot, drawn by gnuplot."""
import base64
import csv
import json
import os
import signal
import subprocess
import time
import urllib.request

import harness

MiB = 1048576.0


def decode_with_mock(m, path):
    """Sends the image at path to the mock as a chat request's image and returns what the mock's
    decoder (libpng, libjpeg-turbo) recorded of it: fmt, w, h, ..."""
    with open(path, "rb") as f:
        uri = "data:image/png;base64," + base64.b64encode(f.read()).decode()
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": uri}}, {"type": "text", "text": "?"}]}]})
    req = urllib.request.Request(m.url + "/v1/chat/completions", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200, r.status
    rec = m.records()[-1]
    assert rec["status"] == 200, rec
    return rec["images"][0]


def analyze_alone(test):
    """`vlmload analyze` on the timeline the test's run wrote, alone; returns its JSON."""
    out = os.path.join(test.tmp, "analysis.json")
    p = subprocess.run([harness.VLMLOAD, "analyze", os.path.join(test.tmp, "timeline.csv"),
                        "--output", out, "--quiet"], capture_output=True, timeout=60)
    test.assertEqual(p.returncode, 0, p.stderr)
    with open(out) as f:
        return json.load(f)


class MemoryTest(harness.MockTestCase):
    def run_model(self, *mock_args, sample_every="100ms"):
        m = self.mock("--latency", "5ms", *mock_args)
        plot = os.path.join(self.tmp, "memory.png")
        # 1600 requests, a flush every 200, ten samples between flushes. Evenly spaced, so that
        # the requests between a flush and the first sample after it are as many after every
        # flush (Poisson gaps make that number a draw of its own, and over 8 windows it can fit a
        # floor slope wide enough to read inconclusive).
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--arrival", "constant",
                             "--duration", "8s",
                             "--image-ratio", "1", "--resolution", "64x64", "--flush-every", "200",
                             "--monitor-pid", "mock=%d" % m.proc.pid,
                             "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
                             "--monitor-cmd", "answer=echo 42.5", "--sample-every", sample_every,
                             "--analyze", "--plot", plot)
        self.assertEqual(r.rc, 0, r.stderr)
        return m, r, plot

    def verdicts(self, r):
        return {s["series"]: s["verdict"] for s in r.summary["memory_analysis"]["series"]}

    def test_leak_is_found_with_its_slope(self):
        m, r, plot = self.run_model("--leak-kb-per-image", "200")
        cols = r.timeline[0].keys()
        for name in ("rss_mb.mock", "hwm_mb.mock", "cmd.answer", "prom.vlmmock_memory_bytes"):
            self.assertIn(name, cols)
        series = {s["series"]: s for s in r.summary["memory_analysis"]["series"]}
        leak = series["prom.vlmmock_memory_bytes"]
        self.assertEqual(leak["verdict"], "grows")
        # 200 KiB per image is 195.3 MiB per 1000 image requests, and the floor's interval holds
        # it. A 95% interval misses the truth in one run of twenty by design, so what is asserted
        # is the 99.9% one: 2.44 times as wide at the 6 degrees of freedom of 8 windows, and more
        # than that with more.
        lo, hi = leak["floor"]["fit"]["ci"]
        self.assertLessEqual(abs((lo + hi) / 2 - 195.3125), 2.44 * (hi - lo) / 2, (lo, hi))
        # An interval wide enough holds any slope: the estimate itself is within 10% of the truth,
        # on the floor and over every sample alike (a leak raises both).
        for fit in (leak["floor"]["fit"], leak["ols"], leak["theil_sen"]):
            self.assertAlmostEqual(fit["slope_per_1000"], 195.3125, delta=19.53, msg=fit)
        self.assertEqual(self.verdicts(r)["cmd.answer"], "flat")
        # Every request carries one 64x64 image: nothing separates text from images or pixels
        # from images, and the attribution says so rather than splitting the slope.
        attr = leak["attribution"]
        self.assertEqual(attr["per_1000_text_requests_mb"]["dropped"], "constant")
        self.assertEqual(attr["per_megapixel_mb"]["dropped"], "constant")
        self.assertAlmostEqual(attr["per_1000_images_mb"]["value"], 195.3125, delta=19.53)
        # gnuplot drew a PNG of the default size that decodes in full.
        self.assertTrue(os.path.getsize(plot) > 10000)
        self.assertFalse(os.path.exists(plot + ".tmp"))
        img = decode_with_mock(m, plot)
        self.assertEqual((img["fmt"], img["w"], img["h"]), ("png", 1200, 700))
        self.assertIn("grows", r.stdout)

    def test_attribution_in_a_mixed_run(self):
        # Half the requests carry an image of a random size, and the mock keeps 64 KiB per image:
        # 62.5 MiB per 1000 images, nothing per text-only request, nothing per pixel, told apart
        # in one run. Small images at a rate the mock keeps up with, so that memory follows the
        # images and not a queue of them.
        m = self.mock("--latency", "1ms", "--leak-kb-per-image", "64")
        r = self.run_vlmload("--url", m.url, "--rate", "500", "--requests", "3000",
                             "--warmup", "300", "--image-ratio", "0.5",
                             "--resolution", "64x64-320x320",
                             "--monitor-pid", "mock=%d" % m.proc.pid,
                             "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
                             "--sample-every", "50ms", "--analyze")
        self.assertEqual(r.rc, 0, r.stderr)
        cols = r.timeline[0].keys()
        self.assertIn("text_only_total", cols)
        self.assertIn("image_megapixels_total", cols)
        last = r.timeline[-1]
        self.assertEqual(int(last["text_only_total"]), r.summary["requests"]["text_only"])
        series = {s["series"]: s for s in r.summary["memory_analysis"]["series"]}
        # The resident set is attributed too, but its allocator may hold memory in steps that
        # leave few effective samples: the figures are judged on the mock's own account.
        rss = series["rss_mb.mock"]["attribution"]
        self.assertEqual(rss["n"], series["rss_mb.mock"]["n"])
        for name in ("prom.vlmmock_memory_bytes",):
            attr = series[name]["attribution"]
            img, txt, mp = (attr[k] for k in ("per_1000_images_mb", "per_1000_text_requests_mb",
                                              "per_megapixel_mb"))
            for t in (img, txt, mp):
                self.assertIsNone(t["dropped"], (name, attr))
            self.assertAlmostEqual(img["value"], 62.5, delta=62.5 * 0.1, msg=(name, attr))
            self.assertLess(img["ci"][0], img["ci"][1])
            self.assertLess(abs(txt["value"]), 5, (name, attr))
            self.assertLess(txt["ci"][0] - 2, 0, (name, attr))
            self.assertGreater(txt["ci"][1] + 2, 0, (name, attr))
        self.assertIn("per 1000 images", r.stdout)

    def test_cache_returned_by_flush(self):
        # The mock holds 128 MiB from the start, as a server holds its weights: without it, 1% of
        # the mean is a few hundred KiB. The first sample after a flush comes up to one sampling
        # interval late, with the cache of the requests sent meanwhile in it; sampled every 10 ms
        # that is at most 2 requests' cache, 0.2 MiB at 100 KiB each, so the floor is known well
        # enough to rule out growth of 1% of the mean (a sawtooth of 20 MiB a window) over 8
        # windows, in the sanitizer build too.
        m, r, plot = self.run_model("--cache-kb-per-image", "100", "--memory-base-mb", "128",
                                    sample_every="10ms")
        a = {s["series"]: s for s in r.summary["memory_analysis"]["series"]}[
            "prom.vlmmock_memory_bytes"]
        # Should it fail, the message holds what tells a late sample from a flush that did not
        # act: the floor's points and the flushes' own counts.
        self.assertEqual(a["verdict"], "sawtooth-returns",
                         "%s; floor %s; flushes %s" % (a["reason"], json.dumps(a.get("floor")),
                                                       json.dumps(r.summary.get("flushes"))))

    def test_flat(self):
        m, r, plot = self.run_model()
        self.assertEqual(self.verdicts(r)["prom.vlmmock_memory_bytes"], "flat")

    def test_samples_and_standalone_analyze(self):
        m = self.mock("--latency", "5ms", "--leak-kb-per-image", "100")
        samples = os.path.join(self.tmp, "samples.csv")
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--duration", "6s",
                             "--image-ratio", "1", "--resolution", "64x64", "--flush-every", "100",
                             "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
                             "--sample-every", "250ms", "--samples", samples, "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        with open(samples) as f:
            rows = f.read().splitlines()
        self.assertEqual(rows[0], "wall_ms,elapsed_s,series,value,unit")
        self.assertGreater(len(rows), 15)
        a = analyze_alone(self)
        self.assertEqual({s["series"]: s["verdict"] for s in a["series"]}
                         ["prom.vlmmock_memory_bytes"], "grows")

    def test_run_and_analyze_alone_read_the_same_samples(self):
        # The run's analysis cuts its warm-up by --warmup, `vlmload analyze` on its timeline by the
        # phase column. A row's memory was read at the row before, so both start at the first
        # sample read past the warm-up, and every figure of the two agrees.
        m = self.mock("--latency", "5ms", "--leak-kb-per-image", "64")
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--arrival", "constant",
                             "--duration", "3s", "--warmup", "150", "--image-ratio", "1",
                             "--resolution", "64x64",
                             "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
                             "--sample-every", "100ms", "--analyze", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        run = {s["series"]: s for s in r.summary["memory_analysis"]["series"]}
        alone = {s["series"]: s for s in analyze_alone(self)["series"]}
        name = "prom.vlmmock_memory_bytes"
        with open(os.path.join(self.tmp, "timeline.csv")) as f:
            rows = list(csv.DictReader(f))
        first = next(i for i, row in enumerate(rows) if int(row["completed_total"]) >= 150)
        self.assertEqual(run[name]["x_first"], float(rows[first + 1]["completed_total"]))
        for key in ("n", "x_first", "x_last", "verdict", "ols"):
            self.assertEqual(run[name][key], alone[name][key], key)

    def test_timeline_jsonl(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--duration", "2s",
                             "--timeline-format", "jsonl", "--monitor-pid", str(m.proc.pid),
                             "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        with open(os.path.join(self.tmp, "timeline.csv")) as f:
            rows = [json.loads(l) for l in f]
        self.assertGreaterEqual(len(rows), 2)
        self.assertTrue(any(k.startswith("rss_mb.") for k in rows[0]))

    def test_missing_gnuplot_is_a_clear_error_before_the_run(self):
        empty = os.path.join(self.tmp, "empty-path")
        os.makedirs(empty)
        env = dict(os.environ, PATH=empty)
        # Nothing listens on port 9: the check comes before any request.
        me = "--monitor-pid=%d" % os.getpid()
        r = self.run_vlmload("--url", "http://127.0.0.1:9", "--model", "m", "--requests", "5",
                             "--plot", os.path.join(self.tmp, "never.png"), me, env=env,
                             timeout=20)
        self.assertEqual(r.rc, 2)
        self.assertEqual(r.stderr, "vlmload: --plot needs gnuplot (apt-get install gnuplot-nox): "
                                   "not found on PATH\n")
        self.assertIsNone(r.summary)
        # The same from the analyze subcommand, and a --gnuplot that is not there.
        tl = os.path.join(self.tmp, "t.csv")
        with open(tl, "w") as f:
            f.write("wall_ms,completed_total,rss_mb.x\n1000,1,5\n2000,2,6\n")
        p = subprocess.run([harness.VLMLOAD, "analyze", tl, "--plot", tl + ".png"], env=env,
                           capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.decode(), "vlmload analyze: --plot needs gnuplot (apt-get "
                                            "install gnuplot-nox): not found on PATH\n")
        r = self.run_vlmload("--url", "http://127.0.0.1:9", "--model", "m", "--requests", "5",
                             "--plot", os.path.join(self.tmp, "never.png"), "--gnuplot",
                             os.path.join(empty, "gnuplot"), me, timeout=20)
        self.assertEqual(r.rc, 2)
        self.assertIn("--gnuplot", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "never.png")))

    def test_memory_limit_caps_what_the_mock_holds(self):
        # 256 KiB per image against a 2 MiB limit: the first 8 images are held, the rest counted.
        m = self.mock("--leak-kb-per-image", "256", "--memory-limit-mb", "2")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "20",
                             "--image-ratio", "1", "--resolution", "64x64", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        st = m.stats()
        self.assertEqual(st["images_total"], 20)
        self.assertEqual(st["memory_leaked_bytes"], 8 * 256 * 1024)
        self.assertEqual(st["memory_unheld_bytes"], 12 * 256 * 1024)
        m.proc.send_signal(signal.SIGTERM)
        m.proc.wait(timeout=10)
        err = m.proc.stderr.read().decode()
        self.assertEqual(err.count("reached --memory-limit-mb 2"), 1, err)
        # A base over the limit is refused at start.
        p = subprocess.run([harness.VLMMOCK, "--memory-base-mb", "8", "--memory-limit-mb", "4"],
                           capture_output=True, timeout=10)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr.decode(),
                         "vlmmock: --memory-base-mb: 8 is more than --memory-limit-mb 4\n")

    def test_missing_nvml_is_a_clear_error(self):
        if os.path.exists("/dev/nvidiactl"):
            self.skipTest("this machine has an NVIDIA driver")
        r = self.run_vlmload("--url", "http://127.0.0.1:9", "--model", "m", "--monitor-gpu",
                             "--requests", "1")
        self.assertNotEqual(r.rc, 0)
        self.assertIn("NVML", r.stderr + r.stdout)


def vmrss(pid):
    """The process's resident size in bytes, from /proc."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for %d" % pid)


class MonitorAtStartTest(harness.MockTestCase):
    """Mistakes in what to sample are found before any load, each in one line."""

    def refused(self, m, *args):
        p = subprocess.run([harness.VLMLOAD, "--url", m.url, "--requests", "5", *args],
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 2, p.stderr)
        err = p.stderr.decode()
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertEqual(m.records(), [])  # no request went out
        return err

    def test_analysis_with_nothing_to_sample(self):
        m = self.mock()
        for flag in (["--analyze"], ["--plot", os.path.join(self.tmp, "p.png")]):
            err = self.refused(m, *flag)
            self.assertIn("%s: nothing to sample" % flag[0], err)
            self.assertIn("--monitor-pid", err)

    def test_monitor_pid_that_is_not_running(self):
        m = self.mock()
        gone = subprocess.Popen(["true"])
        gone.wait()
        err = self.refused(m, "--monitor-pid", "server=%d" % gone.pid)
        self.assertIn("--monitor-pid server=%d: no process %d is running" % (gone.pid, gone.pid),
                      err)

    def test_match_that_never_matches_is_said_at_start_and_in_the_summary(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "20", "--no-progress",
                             "--monitor-pid-match", "ghost=no-such-process-[0-9]{9}",
                             "--monitor-pid", "mock=%d" % m.proc.pid)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn("--monitor-pid-match 'no-such-process-[0-9]{9}': no process matches yet",
                      r.stderr)
        self.assertIn("process    ghost: never matched", r.stdout)
        self.assertIn("process    mock: pid %d" % m.proc.pid, r.stdout)
        procs = {p["label"]: p for p in r.summary["processes"]}
        self.assertFalse(procs["ghost"]["matched"])
        self.assertIsNone(procs["ghost"]["pid"])
        self.assertEqual(procs["mock"]["pid"], m.proc.pid)
        self.assertEqual(len(m.records()), 20)


class KnownTruthTest(harness.MockTestCase):
    """The analysis against the mock's memory held for real, measured both from the mock's own
    accounting (/metrics) and from its resident set (/proc, --monitor-pid)."""

    SEEDS = (1, 2, 3, 4, 5)
    # A sanitizer build's resident set also holds the sanitizer's shadow of every mapping (an
    # eighth of it) and its quarantine of freed memory: there only the mock's own figure is
    # judged against the truth.
    SANITIZED = harness.SANITIZED
    SERIES = ("prom.vlmmock_memory_bytes",) + (() if SANITIZED else ("rss_mb.mock",))

    def seeded_runs(self, *mock_args):
        """One short run per seed, all at once, each against its own mock with noise drawn from
        that seed: 100 image requests a second, evenly spaced, for 10 s, a drained flush every 50
        requests, the first 100 requests a warm-up. Poisson gaps would put a pattern of the seed's
        own between each flush and the first sample after it: seed 1's put more of the cache into
        the later floors, which read a 70 MB slope per 1000 images where 62.5 is leaked. Memory is sampled every 10 ms, so the first sample after a
        flush comes a request or two late and the post-flush floor is sharp. How late varies with
        the machine's load, and each image late holds 512 KiB more in the floor: over 1000
        requests that jitter is a fraction of the 1 MB per 1000 that counts as growth, where
        over 4 s at 300/s it came close to it. The mock holds
        128 MiB from the start, as a server holds its weights: against that, the few hundred KiB
        its own working memory moves by are not material growth. Returns (seed, {series:
        analysis}) per seed."""
        runs = []
        for seed in self.SEEDS:
            m = self.mock("--latency", "5ms", "--memory-base-mb", "128", "--memory-noise-kb", "256",
                          "--seed", str(seed), *mock_args)
            sub = os.path.join(self.tmp, "seed%d" % seed)
            os.makedirs(sub)
            runs.append((seed, harness.Started(
                sub, "--url", m.url, "--rate", "100", "--arrival", "constant", "--duration", "10s",
                "--image-ratio", "1",
                "--resolution", "64x64", "--flush-every", "50", "--warmup", "100",
                "--monitor-pid", "mock=%d" % m.proc.pid,
                "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
                "--sample-every", "10ms", "--seed", str(seed), "--analyze", "--quiet")))
        out = []
        for seed, run in runs:
            r = run.finish(timeout=180)
            self.assertEqual(r.rc, 0, r.stderr)
            out.append((seed, {a["series"]: a for a in r.summary["memory_analysis"]["series"]}))
        return out

    def test_leak_slope_within_10_percent_over_5_seeds(self):
        # 64 KiB leaked per image is 62.5 MiB per 1000 images, under a 512 KiB per image cache
        # that every flush returns to the system.
        for seed, series in self.seeded_runs("--leak-kb-per-image", "64",
                                             "--cache-kb-per-image", "512"):
            for name in self.SERIES:
                a = series[name]
                with self.subTest(seed=seed, series=name):
                    self.assertEqual(a["verdict"], "grows", a["reason"])
                    self.assertEqual(a["basis"], "floor", a["reason"])
                    self.assertEqual(a["second_axis"]["x"], "images")
                    slope = a["second_axis"]["floor"]["fit"]["slope_per_1000"]
                    self.assertLess(abs(slope - 62.5), 6.25, "%s: %.2f MB per 1000 images (%s)"
                                    % (name, slope, a["reason"]))

    def test_cache_alone_never_grows_over_5_seeds(self):
        for seed, series in self.seeded_runs("--cache-kb-per-image", "512"):
            for name in self.SERIES:
                a = series[name]
                with self.subTest(seed=seed, series=name):
                    self.assertIn(a["verdict"], ("sawtooth-returns", "flat"), a["reason"])

    def test_monitored_rss_follows_the_mock_accounting(self):
        leak_kb, cache_kb = 256, 64
        m = self.mock("--latency", "5ms", "--memory-base-mb", "64",
                      "--leak-kb-per-image", str(leak_kb), "--cache-kb-per-image", str(cache_kb),
                      "--memory-noise-kb", "256", "--seed", "7")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--duration", "3s",
                             "--image-ratio", "1", "--resolution", "64x64",
                             "--monitor-pid", "mock=%d" % m.proc.pid,
                             "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
                             "--sample-every", "50ms", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        # The accounting is exact per image.
        st = m.stats()
        images = st["images_total"]
        self.assertGreater(images, 200)
        self.assertEqual(st["memory_leaked_bytes"], images * leak_kb * 1024)
        self.assertEqual(st["memory_cached_bytes"], images * cache_kb * 1024)
        self.assertLessEqual(st["memory_noise_bytes"], 512 * 1024)
        self.assertEqual(st["memory_unheld_bytes"], 0)
        self.assertEqual(st["memory_bytes"], st["memory_base_bytes"] + st["memory_leaked_bytes"]
                         + st["memory_cached_bytes"] + st["memory_noise_bytes"])
        before = vmrss(m.proc.pid)
        m.get("/flush_cache")
        st2 = m.stats()
        self.assertEqual(st2["memory_cached_bytes"], 0)
        self.assertEqual(st2["memory_leaked_bytes"], st["memory_leaked_bytes"])
        after = vmrss(m.proc.pid)
        if self.SANITIZED:
            return  # the resident set holds the sanitizer's memory too
        # Row by row, the RSS vlmload read from /proc and the figure the mock reported at the same
        # sample agree within 5%, over a run that grows by tens of MiB.
        rows = [(float(row["rss_mb.mock"]), float(row["prom.vlmmock_memory_bytes"]) / MiB)
                for row in r.timeline
                if row["rss_mb.mock"] and row["prom.vlmmock_memory_bytes"]]
        self.assertGreater(len(rows), 40)
        self.assertGreater(rows[-1][1] - rows[0][1], 50)
        for rss, model in rows:
            self.assertLess(abs(rss - model) / model, 0.05, "RSS %.1f MiB, model %.1f MiB"
                            % (rss, model))
        # At rest, the same from /proc directly; and the flush gave the cache back to the system:
        # the resident set fell by as much.
        self.assertLess(abs(before - st["memory_bytes"]) / st["memory_bytes"], 0.05)
        cached = st["memory_cached_bytes"]
        self.assertLess(abs((before - after) - cached), 0.05 * cached + MiB,
                        "RSS fell %d bytes, the cache held %d" % (before - after, cached))
        self.assertLess(abs(after - st2["memory_bytes"]) / st2["memory_bytes"], 0.05)

class ScratchTimelineTest(harness.MockTestCase):
    """--analyze without --timeline keeps the timeline in a scratch file in $TMPDIR (/tmp when
    unset or empty), unlinked from the start: the analysis reads it back, and no exit, Ctrl-C or
    kill -9, leaves it behind."""

    def start(self, tmpdir):
        m = self.mock("--latency", "5ms")
        env = dict(os.environ)
        env.pop("TMPDIR", None)
        if tmpdir is not None:
            env["TMPDIR"] = tmpdir
        self.out = os.path.join(self.tmp, "summary-%d.json" % len(self._mocks))
        return subprocess.Popen([harness.VLMLOAD, "--url", m.url, "--rate", "50", "--duration",
                                 "60s", "--monitor-pid", "mock=%d" % m.proc.pid, "--sample-every",
                                 "100ms", "--analyze", "--quiet", "--output", self.out],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def scratch(self, p):
        """The scratch timeline as the running process holds it."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for fd in os.listdir("/proc/%d/fd" % p.pid):
                try:
                    target = os.readlink("/proc/%d/fd/%s" % (p.pid, fd))
                except OSError:
                    continue
                if "vlmload-timeline-" in target:
                    return target
            time.sleep(0.05)
        p.kill()
        p.communicate()
        self.fail("no scratch timeline open")

    def test_in_tmpdir_read_back_and_gone_after_ctrl_c(self):
        d = os.path.join(self.tmp, "scratch")
        os.makedirs(d)
        p = self.start(d)
        held = self.scratch(p)
        self.assertTrue(held.startswith(d + "/vlmload-timeline-"), held)
        self.assertTrue(held.endswith(" (deleted)"), held)
        self.assertEqual(os.listdir(d), [])
        time.sleep(1.5)  # timeline rows for the analysis
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, stderr)
        self.assertEqual(os.listdir(d), [])
        with open(self.out) as f:
            analysis = json.load(f)["memory_analysis"]
        self.assertIn("rss_mb.mock", [s["series"] for s in analysis["series"]])

    def test_gone_after_kill_9(self):
        d = os.path.join(self.tmp, "scratch")
        os.makedirs(d)
        p = self.start(d)
        held = self.scratch(p)
        p.kill()
        p.communicate(timeout=60)
        self.assertTrue(held.startswith(d + "/"), held)
        self.assertFalse(os.path.exists(held.replace(" (deleted)", "")), held)
        self.assertEqual(os.listdir(d), [])

    def test_tmp_when_tmpdir_unset_or_empty(self):
        for value in (None, ""):
            with self.subTest(TMPDIR=value):
                p = self.start(value)
                held = self.scratch(p)
                p.kill()
                p.communicate(timeout=60)
                self.assertTrue(held.startswith("/tmp/vlmload-timeline-"), held)
                self.assertTrue(held.endswith(" (deleted)"), held)


class VerdictTest(harness.MockTestCase):
    """Verdicts that a slope alone would get wrong, against the mock's memory held for real:
    a high-water mark, a warm-up that a flush interrupts, memory that levels off, and sampling too
    slow for the flush cadence."""

    SANITIZED = harness.SANITIZED

    def test_hwm_gets_its_peak_and_the_warmup_outlasts_a_flush(self):
        # 4 s at 100/s, a drained flush every 50 requests, the first 100 a warm-up: the flush at 50
        # comes inside it. A 32 KiB per image cache, returned by every flush, over 512 MiB held
        # from the start: a floor sample comes up to 3 requests late, and with 7 floors the
        # jitter of a larger cache (0.4 MiB at 128 KiB) fits a slope over the 1 MB per 1000
        # requests that counts as growth about one run in six.
        m = self.mock("--latency", "5ms", "--memory-base-mb", "512", "--cache-kb-per-image", "32")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--duration", "4s",
                             "--image-ratio", "1", "--resolution", "64x64", "--flush-every", "50",
                             "--warmup", "100", "--monitor-pid", "mock=%d" % m.proc.pid,
                             "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
                             "--sample-every", "10ms", "--analyze", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        # The mock flushed inside the warm-up: its first flush came after 50 requests.
        flushes = m.records("/flush_cache")
        self.assertGreaterEqual(len(flushes), 6)
        ma = r.summary["memory_analysis"]
        self.assertEqual(ma["warmup"]["from"], "--warmup")
        self.assertEqual(ma["warmup"]["x"], 100)
        series = {s["series"]: s for s in ma["series"]}
        for name, s in series.items():
            with self.subTest(series=name):
                self.assertGreaterEqual(s["x_first"], 100, s["reason"])
        hwm = series["hwm_mb.mock"]
        self.assertEqual(hwm["verdict"], "peak", hwm["reason"])
        self.assertEqual(hwm["peak"]["value"], hwm["max"])
        self.assertIsNone(hwm["ols"]["slope_per_1000"])
        self.assertEqual(series["prom.vlmmock_memory_bytes"]["verdict"], "sawtooth-returns",
                         series["prom.vlmmock_memory_bytes"]["reason"])
        if not self.SANITIZED:
            self.assertEqual(series["rss_mb.mock"]["verdict"], "sawtooth-returns",
                             series["rss_mb.mock"]["reason"])
        # The same timeline read back alone: the warm-up comes from the phase column, and a flush
        # row inside the warm-up (there is one when a 10 ms tick falls in the few ms the drained
        # flush pauses; test_analyze_cli's cli_flush_inside_warmup_does_not_end_it puts one there
        # every time) does not end it.
        a = analyze_alone(self)
        self.assertEqual(a["warmup"]["from"], "phase column")
        first = min(s["x_first"] for s in a["series"])
        self.assertGreater(first, 90, a["warmup"])

    def test_memory_that_stops_growing_levels_off(self):
        # 64 KiB leaked per image under a limit 16 MiB above the base: the mock holds the first 256
        # images' and no more, so its memory rises (by twice the 8 MB that counts) and then holds,
        # some 60% into the run.
        m = self.mock("--latency", "5ms", "--memory-base-mb", "64", "--leak-kb-per-image", "64",
                      "--memory-limit-mb", "80")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--duration", "4s",
                             "--image-ratio", "1", "--resolution", "64x64",
                             "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
                             "--sample-every", "20ms", "--analyze", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        st = m.stats()
        held = st["memory_leaked_bytes"] // (64 * 1024)
        self.assertEqual(held, 256)
        self.assertGreater(st["memory_unheld_bytes"], 0)
        a = {s["series"]: s for s in r.summary["memory_analysis"]["series"]}[
            "prom.vlmmock_memory_bytes"]
        self.assertEqual(a["verdict"], "levels-off", a["reason"])
        self.assertLess(abs(a["levels_off"]["x"] - held), 15, a["reason"])
        self.assertLess(abs(a["levels_off"]["rise"] - 16), 1, a["reason"])
        self.assertIn("levels off at about", a["reason"])

    def test_warns_when_sampling_misses_the_sawtooth(self):
        # The README's own experiment: a flush every 50 requests at 50/s is a flush a second, and
        # the default sampling takes one sample between flushes.
        m = self.mock()
        tl = os.path.join(self.tmp, "t.csv")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "20",
                             "--flush-every", "50", "--timeline", tl, "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        # One warning, wrapped between words within 100 columns.
        lines = r.stderr.splitlines()
        self.assertTrue(all(len(l) <= 100 for l in lines), r.stderr)
        warnings = []
        for l in lines:
            if l.startswith("  ") and warnings:
                warnings[-1] += " " + l.strip()
            elif "warning" in l:
                warnings.append(l)
        self.assertEqual(warnings, [
            "vlmload: warning: --flush-every 50 at --rate 50 flushes every 1 s, and "
            "--sample-every 1s takes 1 memory sample between flushes: a sawtooth needs 3; use "
            "--sample-every 333ms or less"])
        # As the README now runs it: no warning.
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "20",
                             "--flush-every", "50", "--sample-every", "200ms", "--timeline", tl,
                             "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertNotIn("warning", r.stderr)


if __name__ == "__main__":
    harness.main()
