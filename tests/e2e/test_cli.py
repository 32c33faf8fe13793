"""The command line as a user meets it: model discovery, secrets kept out of every output, prompts
from a file, clear errors for bad input and unwritable outputs."""
import os
import subprocess

import harness


class CliTest(harness.MockTestCase):
    def test_model_discovered_from_server(self):
        m = self.mock("--model", "qwen-test-vl")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "5", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["model"], "qwen-test-vl")
        self.assertTrue(all(rec["model"] == "qwen-test-vl" for rec in m.records()))

    def test_explicit_model(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--model", "other", "--rate", "100", "--requests", "3",
                             "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertTrue(all(rec["model"] == "other" for rec in m.records()))

    def test_api_key_never_written(self):
        m = self.mock()
        key = "sk-very-secret-4242"
        r = self.run_vlmload("--url", m.url, "--api-key", key, "--header", "X-Auth: hush-9191",
                             "--rate", "100", "--requests", "5")
        self.assertEqual(r.rc, 0, r.stderr)
        texts = [r.stdout, r.stderr]
        for name in ("summary.json", "requests.jsonl", "timeline.csv"):
            with open(os.path.join(self.tmp, name)) as f:
                texts.append(f.read())
        for t in texts:
            self.assertNotIn(key, t)
            self.assertNotIn("hush-9191", t)
        self.assertEqual(r.summary["config"]["api_key"], "***")

    def test_api_key_from_environment(self):
        m = self.mock()
        env = dict(os.environ, OPENAI_API_KEY="sk-from-env-777")
        out = os.path.join(self.tmp, "s.json")
        p = subprocess.run([harness.VLMLOAD, "--url", m.url, "--rate", "100", "--requests", "3",
                            "--quiet", "--output", out], env=env, capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            text = f.read()
        self.assertNotIn("sk-from-env-777", text)
        self.assertIn('"api_key":\t"***"', text)

    def test_prompts_file(self):
        m = self.mock()
        path = os.path.join(self.tmp, "prompts.txt")
        prompts = ["alpha " * 3, "a much longer prompt " * 20]
        with open(path, "w") as f:
            f.write("\n".join(prompts) + "\n\n")
        r = self.run_vlmload("--url", m.url, "--prompts", path, "--rate", "200", "--requests", "40",
                             "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        lengths = {rec["prompt_chars"] for rec in m.records()}
        self.assertEqual(lengths, {len(p) for p in prompts})

    def test_bad_inputs_exit_2(self):
        cases = [
            (["--rate", "-5"], "--rate"),
            (["--concurrency", "0"], "--concurrency"),
            (["--duration", "5x"], "--duration"),
            (["--url", "ftp://x"], "--url"),
            (["--no-such-flag"], "--no-such-flag"),
            (["--prompts", "/nonexistent/prompts.txt"], "--prompts"),
            (["--output", "/nonexistent/dir/s.json"], "--output"),
            (["--timeline", "/proc/version"], "--timeline"),
            (["--log-requests", "/tmp"], "--log-requests"),
        ]
        for args, name in cases:
            p = subprocess.run([harness.VLMLOAD, "--model", "m", "--url", "http://127.0.0.1:9",
                                "--requests", "1", *args], capture_output=True, timeout=30)
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 2, (args, err))
            self.assertIn(name, err, args)
            self.assertEqual(err.count("\n"), 1, err)

    def test_dump_requests_replay(self):
        opts = ["--model", "mock-vlm", "--seed", "11", "--image-ratio", "0.6",
                "--images-per-request", "1-2", "--resolution", "96x64,64x96", "--pool-size", "6"]
        dump = os.path.join(self.tmp, "dump")
        p = subprocess.run([harness.VLMLOAD, "--dump-requests", dump, "--requests", "12", *opts],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len([f for f in os.listdir(dump) if f.endswith(".json")]), 12)
        replayed = self.mock()
        p = subprocess.run(["sh", os.path.join(dump, "replay.sh"), replayed.url],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        sent = self.mock()
        r = self.run_vlmload("--url", sent.url, "--rate", "100", "--concurrency", "1",
                             "--requests", "12", "--quiet", *opts)
        self.assertEqual(r.rc, 0, r.stderr)

        def key(m):
            recs = sorted(m.records(), key=lambda rec: rec["seq"])
            return [(rec["prompt_chars"], [i["hash"] for i in rec["images"]]) for rec in recs]

        self.assertEqual(key(replayed), key(sent))
        self.assertTrue(all(rec["status"] == 200 for rec in replayed.records()))

    def test_dry_run(self):
        p = subprocess.run([harness.VLMLOAD, "--dry-run", "--rate", "50", "--duration", "10m",
                            "--flush-every", "50", "--image-ratio", "0.5", "--pool-size", "4"],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout.decode()
        self.assertIn("30000 requests", out)
        self.assertIn("600 flushes", out)
        self.assertIn("pool          4 images", out)
        self.assertRegex(out, r"mix +(4\d|5\d)\.\d% of requests with 1 image \(")

    def test_dry_run_lists_every_stage(self):
        p = subprocess.run([harness.VLMLOAD, "--dry-run", "--model", "m", "--sweep",
                            "rate=50:250:50", "--duration", "10s", "--flush-every", "100"],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout.decode()
        self.assertIn("phases        5, in turn", out)
        for i, rate in enumerate(range(50, 300, 50)):
            self.assertRegex(out, r"\n +%d rate=%d +%d req/s poisson, until 10s: about %d "
                             r"requests, flush every 100\n" % (i + 1, rate, rate, rate * 10))
        self.assertIn("expected      about 7500 requests in 50s, plus the pauses of drained "
                      "flushes", out)
        self.assertNotIn("10 req/s", out)  # the default --rate is no stage's
        # A scenario's phases, a ramp among them, and their total time.
        scen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                            "scenarios", "ramp-to-knee.json")
        p = subprocess.run([harness.VLMLOAD, "--dry-run", "--model", "m", "--config", scen],
                           capture_output=True, timeout=60)
        out = p.stdout.decode()
        self.assertIn("2 ramp           5 to 200 req/s poisson, until 300s: about 30750 requests",
                      out)
        self.assertIn("expected      about 90900 requests in 630s", out)

    def test_help_and_version(self):
        p = subprocess.run([harness.VLMLOAD, "--help"], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 0)
        text = p.stdout.decode()
        for flag in ("--rate", "--arrival", "--concurrency", "--stream", "--log-requests",
                     "Examples:", "Exit status"):
            self.assertIn(flag, text)
        self.assertTrue(all(len(line) <= 100 for line in text.splitlines()))
        # The examples hold the main job (the memory experiment, analysed and drawn) and a sweep.
        examples = text[text.index("Examples:"):text.index("Subcommands:")]
        main_job = examples[:examples.index("the memory experiment")]
        for flag in ("--flush-every", "--monitor-pid-match", "--analyze", "--plot", "--images"):
            self.assertIn(flag, main_job)
        self.assertIn("vlmload --sweep rate=", examples)
        p = subprocess.run([harness.VLMLOAD, "--version"], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 0)
        self.assertIn("libcurl", p.stdout.decode())


if __name__ == "__main__":
    harness.main()
