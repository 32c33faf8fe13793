"""The first hour: a run that cannot work stops within seconds, in one line that quotes the
server's own words and says what to do; a flushed experiment whose flushes all failed fails; the
lines about the image pool and unique images say what they count."""
import json
import re
import subprocess
import time

import harness
import rawserver


def error_reply(status, message):
    body = json.dumps({"object": "error", "message": message, "type": "NotFoundError",
                       "code": status})
    return lambda req: rawserver.response(status, body)


class FailFastTest(harness.MockTestCase):
    def one_line(self, stderr, *needles):
        lines = [l for l in stderr.splitlines() if l.startswith("vlmload: the first")]
        self.assertEqual(len(lines), 1, stderr)
        for n in needles:
            self.assertIn(n, lines[0])
        return lines[0]

    def test_nothing_listens(self):
        # The issue's own command: nothing listens, 30 s asked for; one line, within seconds.
        t0 = time.monotonic()
        p = subprocess.run([harness.VLMLOAD, "--url", "http://127.0.0.1:%d" % harness.closed_port(),
                            "--duration", "30s"], capture_output=True, timeout=60)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(p.returncode, 1)
        err = p.stderr.decode().strip().splitlines()
        self.assertEqual(len(err), 1, err)
        self.assertIn("nothing answers at http://127.0.0.1:", err[0])
        self.assertIn("start the server or fix --url", err[0])
        self.assertIn("--keep-going", err[0])

    def test_first_requests_refused_stop_the_run(self):
        # With --model given there is no probe: the first requests find nobody and end the run.
        t0 = time.monotonic()
        r = self.run_vlmload("--url", "http://127.0.0.1:%d" % harness.closed_port(), "--model", "m",
                             "--duration", "30s", "--rate", "10", "--no-progress")
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(r.rc, 1)
        self.one_line(r.stderr, "Couldn't connect" if "Couldn" in r.stderr else "connect",
                      "start the server or fix --url")
        self.assertEqual(r.summary["stop_reason"], "fail_fast")
        self.assertEqual(r.summary["errors"]["connect"], 5)
        self.assertEqual(len(r.log), r.summary["requests"]["sent"])  # every record kept

    def test_unknown_model_quotes_the_server(self):
        msg = "The model `default` does not exist."
        with rawserver.RawServer(error_reply(404, msg)) as s:
            t0 = time.monotonic()
            r = self.run_vlmload("--url", s.url, "--model", "default", "--server", "openai",
                                 "--duration", "30s", "--rate", "20", "--no-progress")
            received = len(s.chat_requests())
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(r.rc, 1)
        self.one_line(r.stderr, "answered HTTP 404", '"%s"' % msg, "--model")
        self.assertEqual(received, r.summary["requests"]["sent"])
        self.assertLess(received, 20)
        # The summary lists the server's message with its count.
        self.assertEqual(r.summary["error_messages"],
                         [{"class": "http_4xx", "status": 404, "message": msg, "count": 5,
                           "numbers_vary": False}])
        self.assertIn("messages   5 x http_4xx 404: %s" % msg, r.stdout)

    def test_missing_route_and_refused_key(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--endpoint", "/v1/nope", "--duration", "30s",
                             "--no-progress")
        self.assertEqual(r.rc, 1)
        self.one_line(r.stderr, "HTTP 404", "--endpoint")
        with rawserver.RawServer(error_reply(401, "Invalid API key")) as s:
            r = self.run_vlmload("--url", s.url, "--model", "m", "--server", "openai",
                                 "--duration", "30s", "--rate", "20", "--no-progress")
        self.one_line(r.stderr, "HTTP 401", '"Invalid API key"', "--api-key")

    def test_keep_going_runs_on(self):
        r = self.run_vlmload("--url", "http://127.0.0.1:%d" % harness.closed_port(), "--model", "m",
                             "--requests", "12", "--rate", "50", "--keep-going", "--quiet")
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.summary["errors"]["connect"], 12)
        self.assertEqual(r.summary["stop_reason"], "requests")

    def test_mixed_failures_do_not_stop(self):
        # A server that fails some requests is measured, not stopped: only failures alike from
        # the first request on stop a run.
        m = self.mock("--fault", "http503:0.5")
        r = self.run_vlmload("--url", m.url, "--requests", "40", "--rate", "100", "--quiet")
        self.assertEqual(r.summary["requests"]["completed"], 40)
        self.assertEqual(r.summary["stop_reason"], "requests")


class TlsAdviceTest(harness.MockTestCase):
    def test_https_to_plain_http_says_so(self):
        m = self.mock()
        url = m.url.replace("http://", "https://")
        for extra in ([], ["--insecure"]):
            p = subprocess.run([harness.VLMLOAD, "--url", url, "--model", "m", "--requests",
                                "3", *extra], capture_output=True, timeout=30)
            self.assertEqual(p.returncode, 1)
            err = p.stderr.decode()
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertTrue("does not speak TLS" in err or "during the TLS handshake" in err, err)
            self.assertIn("use http://127.0.0.1:%d" % m.port, err)
            self.assertNotIn("--insecure", err)  # it would not help
        self.assertEqual(m.records(), [])


class FlushesFailedTest(harness.MockTestCase):
    def test_experiment_whose_flushes_all_failed_fails(self):
        # The mock's openai profile has no reset routes: vLLM's answer 404.
        m = self.mock("--profile", "openai")
        r = self.run_vlmload("--url", m.url, "--server", "vllm", "--flush-every", "10",
                             "--requests", "30", "--rate", "100", "--no-progress")
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertEqual(r.summary["requests"]["ok"], 30)
        line = [l for l in r.stderr.splitlines() if "flushes succeeded" in l]
        self.assertEqual(len(line), 1, r.stderr)
        for part in ("none of the 3 flushes succeeded", "/reset_prefix_cache", "/reset_mm_cache",
                     "HTTP 404", "VLLM_SERVER_DEV_MODE=1"):
            self.assertIn(part, line[0])

    def test_flushes_that_work_pass(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--server", "sglang", "--flush-every", "10",
                             "--requests", "30", "--rate", "100", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)


class PoolLinesTest(harness.MockTestCase):
    POOL = ("--image-ratio", "1", "--resolution", "640x480", "--image-format", "jpeg",
            "--pool-size", "8", "--rate", "100", "--no-progress")

    def pool_line(self, stderr):
        lines = [l for l in stderr.splitlines() if re.match(r"vlmload: 8 images \(", l)]
        self.assertEqual(len(lines), 1, stderr)
        return lines[0]

    def test_pool_line_says_what_unique_images_add(self):
        # --unique-images keeps each pool image's decoded pixels to stamp them: the pool line says
        # how many MB of it are those pixels, and they are what the pool grew by.
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--requests", "30", "--unique-images", *self.POOL)
        self.assertEqual(r.rc, 0, r.stderr)
        line = self.pool_line(r.stderr)
        got = re.fullmatch(r"vlmload: 8 images \(([0-9.]+) MB, with ([0-9.]+) MB of decoded pixels "
                           r"kept for --unique-images to stamp\) from synthetic content", line)
        self.assertIsNotNone(got, line)
        total, pixels = float(got.group(1)), float(got.group(2))
        # The pixels of 8 images of the size and channels the mock decoded.
        shapes = {(i["w"], i["h"], i["channels"]) for rec in m.records() for i in rec["images"]}
        self.assertEqual(len(shapes), 1, shapes)
        w, h, ch = shapes.pop()
        self.assertAlmostEqual(pixels, 8 * w * h * ch / 1e6, delta=0.05)
        # Every image sent was made unique, and the summary says so in words.
        hashes = {i["hash"] for rec in m.records() for i in rec["images"]}
        self.assertEqual(len(hashes), 30)
        self.assertIn(", made unique 30\n", r.stdout)
        self.assertNotIn("(late", r.stdout)
        self.assertNotIn("not ready", r.stdout)
        self.assertEqual(r.summary["images"]["late"], 0)
        # Without --unique-images: the same pool less its pixels, and no word of them.
        r = self.run_vlmload("--url", m.url, "--requests", "10", *self.POOL)
        line = self.pool_line(r.stderr)
        got = re.fullmatch(r"vlmload: 8 images \(([0-9.]+) MB\) from synthetic content", line)
        self.assertIsNotNone(got, line)
        self.assertAlmostEqual(float(got.group(1)), total - pixels, delta=0.15)
        self.assertNotIn("unique", r.stdout)


if __name__ == "__main__":
    harness.main()
