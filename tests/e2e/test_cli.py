"""The command line as a user meets it: model discovery, secrets kept out of every output, prompts
from a file, clear errors for bad input and unwritable outputs."""
import json
import os
import re
import subprocess
import time

import harness
import rawserver


def models_server(ids_json):
    """A byte-level server whose /v1/models lists one model, its JSON text given as bytes."""
    models = b'{"object": "list", "data": [{"id": ' + ids_json + b', "object": "model"}]}'

    def handler(req):
        if req.path == "/v1/models":
            return rawserver.response(200, models)
        if req.path.endswith("/chat/completions"):
            return rawserver.response(200, rawserver.chat_reply())
        return rawserver.response(404, b'{"error": "no such route"}')

    return rawserver.RawServer(handler)


def raw_controls(data):
    """The control bytes in data other than a line break (as a terminal would get them)."""
    return sorted({b for b in data if (b < 0x20 and b != 0x0a) or b == 0x7f})


class CliTest(harness.MockTestCase):
    def test_model_discovered_from_server(self):
        m = self.mock("--model", "qwen-test-vl")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "5", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["model"], "qwen-test-vl")
        self.assertTrue(all(rec["model"] == "qwen-test-vl" for rec in m.records()))

    def test_server_model_id_is_data(self):
        # A 700-byte id whose byte 511 falls inside a two-byte character, with an escape sequence
        # that would retitle a terminal and ring its bell, and a C1 control (U+009B, CSI).
        mid = "vlm-\x1b]0;pwned\x07-\u009b2J-" + "\u00e9" * 340
        self.assertGreater(len(mid.encode()), 600)
        self.assertEqual(len(mid.encode()[:511].decode("utf-8", errors="ignore").encode()), 510)
        with models_server(json.dumps(mid).encode()) as srv:
            out = os.path.join(self.tmp, "s.json")
            p = subprocess.run([harness.VLMLOAD, "--url", srv.url, "--rate", "0", "--concurrency",
                                "1", "--requests", "4", "--output", out, "--no-progress"],
                               capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            # The server got the whole name, every time.
            bodies = [json.loads(r.body.decode("utf-8", errors="replace"))
                      for r in srv.chat_requests()]
            self.assertEqual(len(bodies), 4)
            self.assertTrue(all(b["model"] == mid for b in bodies),
                            [len(b["model"]) for b in bodies])
        with open(out, "rb") as f:
            text = f.read()
        self.assertEqual(json.loads(text.decode("utf-8", errors="strict"))["model"], mid)
        # What reaches a terminal is UTF-8 with no raw control byte; the id is shown escaped.
        for stream in (p.stdout, p.stderr):
            stream.decode("utf-8", errors="strict")
            self.assertEqual(raw_controls(stream), [])
        self.assertIn("vlm-\\x1b]0;pwned\\x07-\\xc2\\x9b2J-", p.stdout.decode())
        self.assertIn("vlm-\\x1b]0;pwned\\x07-", p.stderr.decode())

        # --dry-run and --dump-requests print the id too.
        with models_server(json.dumps(mid).encode()) as srv:
            d = os.path.join(self.tmp, "dump")
            p = subprocess.run([harness.VLMLOAD, "--url", srv.url, "--requests", "2",
                                "--dump-requests", d], capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(raw_controls(p.stderr), [])
            with open(os.path.join(d, "request-000000.json")) as f:
                self.assertEqual(json.load(f)["model"], mid)

    def test_server_model_id_not_utf8(self):
        # An id that is not UTF-8 cannot be named in a JSON body or summary: refused in one line,
        # before any request is sent.
        with models_server(b'"vl-\xff\xfe-model"') as srv:
            p = subprocess.run([harness.VLMLOAD, "--url", srv.url, "--rate", "0", "--requests",
                                "3", "--no-progress"], capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertEqual(srv.chat_requests(), [])
        err = p.stderr.decode("utf-8", errors="strict")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("not valid UTF-8", err)
        self.assertIn("--model", err)
        self.assertIn("vl-\\xff\\xfe-model", err)

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

    def test_small_text(self):
        p = subprocess.run([harness.VLMLOAD, "--server", "openai", "--flush-every", "5", "--model",
                            "m", "--requests", "1", "--url", "http://127.0.0.1:9"],
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--flush-every: --server openai has no flush route", p.stderr.decode())
        p = subprocess.run([harness.VLMLOAD, "--server", "vllm", "--api", "native"],
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--server vllm has no such route", p.stderr.decode())

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


class SubcommandTest(harness.MockTestCase):
    def test_help_lists_every_subcommand(self):
        # --help names every subcommand that runs, each with its own --help, and no other.
        text = subprocess.run([harness.VLMLOAD, "--help"], capture_output=True,
                              timeout=30).stdout.decode()
        listed = re.findall(r"^  vlmload ([a-z]+) ", text[text.index("Subcommands:"):], re.M)
        self.assertEqual(sorted(listed), ["analyze", "compare", "matrix", "merge"], text)
        self.assertIn("or: vlmload analyze|compare|matrix|merge", text)
        for name in listed:
            p = subprocess.run([harness.VLMLOAD, name, "--help"], capture_output=True, timeout=30)
            self.assertEqual(p.returncode, 0, (name, p.stderr))
            self.assertIn("vlmload " + name, p.stdout.decode())

    def test_mistyped_subcommand_says_which_was_meant(self):
        m = self.mock()
        for typed, meant in (("analyse", "analyze"), ("matrx", "matrix"), ("marge", "merge"),
                             ("comapre", "compare")):
            p = subprocess.run([harness.VLMLOAD, typed, "--url", m.url, "--requests", "3"],
                               capture_output=True, timeout=30)
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 2, err)
            self.assertEqual(err, "vlmload: '%s': not a subcommand; did you mean 'vlmload %s'? "
                                  "(see --help)\n" % (typed, meant))
        p = subprocess.run([harness.VLMLOAD, "frobnicate", "--url", m.url],
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("'frobnicate': not a subcommand (analyze, compare, matrix, merge)",
                      p.stderr.decode())
        self.assertEqual(m.records(), [])  # nothing was sent

class DurationTest(harness.MockTestCase):
    FORMS = "(as 100ms, 2s, 1m30s, 1h)"

    def refused(self, m, *args):
        """Runs vlmload against mock m expecting exit 2 and one line; returns the line."""
        p = subprocess.run([harness.VLMLOAD, "--url", m.url, "--model", "m", "--requests", "3",
                            *args], capture_output=True, timeout=30)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 2, (args, err))
        self.assertEqual(err.count("\n"), 1, err)
        return err

    def test_bare_duration_is_refused_with_the_forms_that_work(self):
        m = self.mock()
        for opt in ("--duration", "--timeout", "--connect-timeout", "--grace", "--sample-every",
                    "--health-timeout", "--flush-timeout"):
            err = self.refused(m, opt, "500")
            self.assertEqual(err, "vlmload: %s '500': a duration needs its unit: 500ms? 500s? %s\n"
                             % (opt, self.FORMS))
        err = self.refused(m, "--turns", "2", "--think-time", "2")
        self.assertIn("--think-time '2': a duration needs its unit: 2ms? 2s?", err)
        err = self.refused(m, "--slo", "ttft=500")
        self.assertIn("ttft=500", err)
        self.assertIn("500ms", err)
        # A --config file's number has no unit either.
        conf = os.path.join(self.tmp, "c.json")
        with open(conf, "w") as f:
            json.dump({"timeout": 500}, f)
        err = self.refused(m, "--config", conf)
        self.assertIn("--timeout (in %s) '500': a duration needs its unit" % conf, err)
        # Junk and repeated units are refused as not durations.
        for bad in ("5x", "1h1h", "30m1h", "1m30"):
            err = self.refused(m, "--duration", bad)
            self.assertIn("want a duration", err)
        self.assertEqual(m.records(), [])  # nothing was sent
        # A bare zero means the same in every unit.
        r = self.run_vlmload("--url", m.url, "--requests", "3", "--rate", "100", "--grace", "0",
                             "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(len(m.records()), 3)

    def test_compound_durations(self):
        # 1s500ms at a constant 20/s: the server receives 30 requests, sent over 1.5 s.
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--arrival", "constant", "--duration",
                             "1s500ms", "--timeout", "1m30s", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertEqual(len(recs), 30)
        self.assertEqual(r.summary["config"]["duration_s"], 1.5)
        self.assertEqual(r.summary["config"]["timeout_s"], 90)
        p = subprocess.run([harness.VLMLOAD, "--dry-run", "--model", "m", "--rate", "2",
                            "--arrival", "constant", "--duration", "1h30m"],
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("10800 requests", p.stdout.decode())

    def test_too_few_samples_in_the_run_warned_at_start(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--duration", "2s", "--sample-every",
                             "250ms", "--monitor-pid", "mock=%d" % m.proc.pid, "--no-progress")
        self.assertEqual(r.rc, 0, r.stderr)
        said = re.search(r"--sample-every 250ms takes (\d+) memory samples in this run of about "
                         r"2s: a memory\s+trend needs 20 or more; use --sample-every 100ms or less",
                         r.stderr)
        self.assertIsNotNone(said, r.stderr)
        # The count said is the count the run took: the timeline's rows with the mock's RSS.
        taken = [row for row in r.timeline if row.get("rss_mb.mock")]
        self.assertLessEqual(abs(len(taken) - int(said.group(1))), 1, (said.group(0), len(taken)))
        self.assertLess(len(taken), 20)
        self.assertGreater(len(m.records()), 20)
        # At the --sample-every it offers, no warning.
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--duration", "2s", "--sample-every",
                             "100ms", "--monitor-pid", "mock=%d" % m.proc.pid, "--no-progress")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertNotIn("memory samples in this run", r.stderr)
        self.assertGreaterEqual(len([row for row in r.timeline if row.get("rss_mb.mock")]), 19)

class UrlTest(harness.MockTestCase):
    def test_url_with_v1_or_the_route_gets_the_base_to_give(self):
        m = self.mock()
        for tail, extra in (("/v1", []), ("/v1/", []), ("/v1/chat/completions", []),
                            ("/generate", ["--api", "native"]), ("/generate", [])):
            p = subprocess.run([harness.VLMLOAD, "--url", m.url + tail, "--model", "m",
                                "--requests", "3", *extra], capture_output=True, timeout=30)
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 2, (tail, err))
            self.assertEqual(err.count("\n"), 1, err)
            self.assertIn("drop '%s' and give --url %s\n" % (tail.rstrip("/"), m.url), err)
        self.assertEqual(m.records(), [])
        self.assertEqual(m.records("/generate"), [])
        # A base that ends in /v1 under a route that does not repeat it is a base.
        r = self.run_vlmload("--url", m.url + "/v1", "--endpoint", "/chat/completions",
                             "--requests", "3", "--rate", "100", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(len(m.records()), 3)

    def test_url_without_scheme_is_http(self):
        m = self.mock()
        bare = "127.0.0.1:%d" % m.port
        r = self.run_vlmload("--url", bare, "--requests", "4", "--rate", "100", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(len(m.records()), 4)
        self.assertEqual(r.summary["config"]["url"], "http://" + bare)

    def test_https_to_a_plain_http_port_that_never_answers_the_handshake(self):
        # A plain-HTTP server that waits for a request line gets a ClientHello and says nothing;
        # it answers plain HTTP. Said within about a second, not after the model probe and the
        # requests time out.
        def handler(req):
            return rawserver.response(200, b'{"object": "list", "data": []}')

        with rawserver.RawServer(handler) as srv:
            url = "https://127.0.0.1:%d" % srv.port
            t0 = time.monotonic()
            p = subprocess.run([harness.VLMLOAD, "--url", url, "--requests", "2", "--rate", "10",
                                "--api-key", "sk-never-in-the-clear"],
                               capture_output=True, timeout=60)
            took = time.monotonic() - t0
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 1, err)
            self.assertEqual(err.count("\n"), 1, err)
            self.assertIn("does not speak TLS", err)
            self.assertIn("use http://127.0.0.1:%d" % srv.port, err)
            self.assertLess(took, 3 * harness.SLACK, err)
            # What the port received in plain HTTP: one question, without the key; no request.
            self.assertEqual([(r.method, r.path) for r in srv.requests], [("HEAD", "/")])
            self.assertNotIn("authorization", srv.requests[0].headers)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# vlmload as a process started in another directory finds it.
VLMLOAD = os.path.abspath(harness.VLMLOAD) if os.sep in harness.VLMLOAD else harness.VLMLOAD


class ConfigFileTest(harness.MockTestCase):
    def write_conf(self, rel, obj):
        path = os.path.join(self.tmp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def test_command_line_url_replaces_the_files(self):
        old, new = self.mock(), self.mock()
        conf = self.write_conf("c/run.json", {"url": old.url, "model": "m", "rate": 0,
                                              "concurrency": 2, "requests": 20})
        r = self.run_vlmload("--config", conf, "--url", new.url, "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(len(old.records()), 0)
        self.assertEqual(len(new.records()), 20)
        self.assertEqual(r.summary["config"]["urls"], [new.url])
        # Without --url on the command line the file's list stands, every server in it.
        conf = self.write_conf("c/two.json", {"url": [old.url, new.url], "model": "m", "rate": 0,
                                              "concurrency": 2, "requests": 20})
        r = self.run_vlmload("--config", conf, "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual((len(old.records()), len(new.records())), (10, 30))

    def test_relative_paths_are_the_files_folder(self):
        m = self.mock()
        exp = os.path.join(self.tmp, "exp")
        os.makedirs(exp)
        prompt = "a prompt read from beside the file " * 3
        with open(os.path.join(exp, "prompts.txt"), "w") as f:
            f.write(prompt + "\n")
        conf = self.write_conf("exp/run.json", {
            "url": m.url, "model": "m", "rate": 0, "requests": 6, "prompts": "prompts.txt",
            "images": "pics", "pool-size": 2, "image-ratio": 0.5, "output": "summary.json",
            "log-requests": "out/requests.jsonl", "quiet": True})
        os.makedirs(os.path.join(exp, "out"))
        os.makedirs(os.path.join(exp, "pics"))
        with open(os.path.join(ROOT, "corpus", "photos", sorted(
                os.listdir(os.path.join(ROOT, "corpus", "photos")))[0]), "rb") as src:
            with open(os.path.join(exp, "pics", "one.jpg"), "wb") as dst:
                dst.write(src.read())
        elsewhere = os.path.join(self.tmp, "elsewhere")
        os.makedirs(elsewhere)
        p = subprocess.run([VLMLOAD, "--config", os.path.join("..", "exp", "run.json")],
                           cwd=elsewhere, capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual({rec["prompt_chars"] for rec in m.records()}, {len(prompt)})
        self.assertGreater(sum(len(rec["images"]) for rec in m.records()), 0)
        with open(os.path.join(exp, "summary.json")) as f:
            self.assertEqual(json.load(f)["requests"]["ok"], 6)
        with open(os.path.join(exp, "out", "requests.jsonl")) as f:
            self.assertEqual(len([l for l in f if '"id"' in l]), 6)
        self.assertEqual(os.listdir(elsewhere), [])

    def test_output_that_is_the_config_is_refused(self):
        m = self.mock()
        text = {"url": m.url, "model": "m", "rate": 0, "requests": 3, "output": "exp.json"}
        conf = self.write_conf("s/exp.json", text)
        with open(conf) as f:
            before = f.read()
        p = subprocess.run([VLMLOAD, "--config", "exp.json"], cwd=os.path.dirname(conf),
                           capture_output=True, timeout=60)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 2, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("--output", err)
        self.assertIn("is the --config file", err)
        with open(conf) as f:
            self.assertEqual(f.read(), before)
        self.assertEqual(m.records(), [])

    def test_example_scenarios_keep_to_their_folder(self):
        # The examples run from anywhere: their corpus is found from their own folder, and none of
        # their outputs is the example itself (run from its folder, it once overwrote itself).
        folder = os.path.join(ROOT, "tools", "scenarios")
        for name in sorted(n for n in os.listdir(folder) if n.endswith(".json")):
            with open(os.path.join(folder, name)) as f:
                conf = json.load(f)
            # A matrix (vlmload matrix) checks every cell's configuration under --dry-run.
            cmd = ["matrix", os.path.join(folder, name)] if "cells" in conf else \
                ["--config", os.path.join(folder, name)]
            for cwd in (folder, self.tmp):
                p = subprocess.run([VLMLOAD, *cmd, "--dry-run"], cwd=cwd,
                                   capture_output=True, timeout=120)
                self.assertEqual(p.returncode, 0, (name, cwd, p.stderr))
            for key in ("output", "timeline", "log-requests", "histograms", "samples", "plot"):
                if key in conf:
                    self.assertNotEqual(os.path.normpath(os.path.join(folder, conf[key])),
                                        os.path.join(folder, name))


if __name__ == "__main__":
    harness.main()
