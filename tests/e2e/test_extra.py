"""Extra request fields (--extra-body, --ignore-eos, --max-completion-tokens) against the mock,
judged by its record: every request of a run carries the fields, chat completions at the top
level and SGLang's /generate with the sampling fields in sampling_params; a run without them
sends nothing extra; bad JSON and fields vlmload sets itself are one-line errors."""
import glob
import json
import os
import subprocess

import harness

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "corpus")


def cli(*args):
    return subprocess.run([harness.VLMLOAD, *args], capture_output=True, text=True, timeout=60)


class ExtraTest(harness.MockTestCase):
    def test_chat_every_request_carries_the_fields(self):
        m = self.mock("--latency", "5ms", "--tokens", "4", "--itl", "1ms")
        r = self.run_vlmload(
            "--url", m.url, "--rate", "100", "--requests", "40", "--quiet", "--stream", "--images",
            CORPUS, "--image-ratio", "0.5", "--extra-body",
            '{"top_k": 20, "min_tokens": 4, "chat_template_kwargs": {"enable_thinking": false}}',
            "--extra-body", '{"top_k": 5}', "--ignore-eos")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertEqual(len(recs), 40)
        want = {"top_k": 5, "min_tokens": 4, "chat_template_kwargs": {"enable_thinking": False},
                "ignore_eos": True}
        for rec in recs:
            self.assertEqual(rec["status"], 200, rec)
            self.assertEqual(rec["extra"], want)
            self.assertEqual(rec["max_tokens"], 128)
            self.assertTrue(rec["stream"])
        # Text-only and image requests both came from templates that carry the fields.
        self.assertTrue(any(rec["images"] for rec in recs))
        self.assertTrue(any(not rec["images"] for rec in recs))
        # The effective configuration: the merged object (a later repeat's key winning), and the
        # shortcut on its own.
        cfg = r.summary["config"]
        self.assertEqual(cfg["extra_body"], {"top_k": 5, "min_tokens": 4,
                                             "chat_template_kwargs": {"enable_thinking": False}})
        self.assertIs(cfg["ignore_eos"], True)
        self.assertIs(cfg["max_completion_tokens"], False)

    def test_native_sampling_fields_go_into_sampling_params(self):
        m = self.mock("--profile", "sglang", "--latency", "5ms", "--tokens", "4")
        r = self.run_vlmload(
            "--url", m.url, "--server", "sglang", "--api", "native", "--rate", "100",
            "--requests", "30", "--quiet", "--images", CORPUS, "--image-ratio", "0.5",
            "--extra-body", '{"top_k": 20, "min_tokens": 4, "return_logprob": false}',
            "--extra-body", '{"sampling_params": {"top_p": 0.9}}', "--ignore-eos")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records("/generate")
        self.assertEqual(len(recs), 30)
        for rec in recs:
            self.assertEqual(rec["status"], 200, rec)
            self.assertEqual(rec["extra"], {"return_logprob": False})
            self.assertEqual(rec["sampling_extra"],
                             {"top_k": 20, "min_new_tokens": 4, "top_p": 0.9, "ignore_eos": True})
            self.assertEqual(rec["max_tokens"], 128)

    def test_without_options_nothing_extra(self):
        for native in (False, True):
            with self.subTest(native=native):
                m = self.mock(*(["--profile", "sglang"] if native else []), "--latency", "5ms",
                              "--tokens", "4")
                args = ["--url", m.url, "--rate", "100", "--requests", "10"]
                if native:
                    args += ["--server", "sglang", "--api", "native"]
                r = self.run_vlmload(*args)
                self.assertEqual(r.rc, 0, r.stderr)
                recs = m.records("/generate" if native else "/v1/chat/completions")
                self.assertEqual(len(recs), 10)
                for rec in recs:
                    self.assertEqual(rec["extra"], {})
                    if native:
                        self.assertEqual(rec["sampling_extra"], {})
                self.assertNotIn("extra_body", r.summary["config"])
                self.assertNotIn("  fields ", r.stdout + r.stderr)
                self.assertIs(r.summary["config"]["ignore_eos"], False)

    def test_max_completion_tokens(self):
        m = self.mock("--latency", "5ms", "--tokens", "100")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--requests", "10", "--max-tokens",
                             "6", "--max-completion-tokens", "--extra-body", '{"top_k":3}')
        self.assertEqual(r.rc, 0, r.stderr)
        # The text summary says what the bodies carried.
        self.assertRegex(r.stdout + r.stderr,
                         r'\n  fields     extra-body \{"top_k":3\}  max_completion_tokens 6\n')
        recs = m.records()
        self.assertEqual(len(recs), 10)
        for rec in recs:
            self.assertEqual(rec["extra"], {"max_completion_tokens": 6, "top_k": 3})
            self.assertEqual(rec["max_tokens"], 6)  # the mock honours it: 6 tokens, not 100
            self.assertEqual(rec["tokens"], 6)
        self.assertIs(r.summary["config"]["max_completion_tokens"], True)
        # The bodies on disk: max_completion_tokens in place of max_tokens.
        out = os.path.join(self.tmp, "dump")
        p = cli("--url", m.url, "--model", "m", "--requests", "3", "--max-tokens", "6",
                "--max-completion-tokens", "--ignore-eos", "--extra-body", '{"top_k":3}',
                "--dump-requests", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        bodies = sorted(glob.glob(os.path.join(out, "request-*.json")))
        self.assertEqual(len(bodies), 3)
        for path in bodies:
            with open(path) as f:
                body = json.load(f)
            self.assertNotIn("max_tokens", body)
            self.assertEqual(body["max_completion_tokens"], 6)
            self.assertEqual((body["top_k"], body["ignore_eos"]), (3, True))

    def test_dry_run_shows_the_fields(self):
        p = cli("--dry-run", "--requests", "5", "--model", "m", "--extra-body", '{"top_k":2}',
                "--ignore-eos", "--max-completion-tokens")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('extra fields  {"top_k":2,"ignore_eos":true}', p.stdout)
        self.assertIn("max_completion_tokens 128", p.stdout)
        p = cli("--dry-run", "--requests", "5", "--model", "m")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("extra fields", p.stdout)

    def test_errors_are_one_line(self):
        cases = [
            (["--extra-body", '{"top_k": 20,'],
             "--extra-body '{\"top_k\": 20,': not valid JSON: error at byte offset 13 (of 13 "
             "bytes)"),
            (["--extra-body", '{"a":tru}'],
             "--extra-body '{\"a\":tru}': not valid JSON: error at byte offset 5 (of 9 bytes)"),
            (["--extra-body", '{"a":1} x'], "not valid JSON: error at byte offset 8"),
            (["--extra-body", '[1, 2]'], "--extra-body '[1, 2]': want a JSON object"),
            (["--extra-body", '"ignore_eos"'], "want a JSON object"),
            (["--extra-body", '{"max_tokens": 5}'],
             '--extra-body: "max_tokens" is a field vlmload sets itself; set it with --max-tokens'),
            (["--extra-body", '{"top_k": 1}', "--extra-body", '{"stream": false}'],
             '"stream" is a field vlmload sets itself; set it with --stream'),
            (["--extra-body", '{"model": "x"}'], '"model" is a field vlmload sets itself'),
            (["--extra-body", '{"messages": []}'], '"messages" is a field vlmload sets itself'),
            (["--api", "native", "--extra-body", '{"temperature": 1}'],
             '"sampling_params.temperature" is a field vlmload sets itself; set it with '
             '--temperature'),
            (["--api", "native", "--extra-body", '{"sampling_params": {"max_new_tokens": 3}}'],
             '"sampling_params.max_new_tokens" is a field vlmload sets itself; set it with '
             '--max-tokens'),
            (["--api", "native", "--max-completion-tokens"],
             "--max-completion-tokens: chat completions only"),
        ]
        for args, want in cases:
            with self.subTest(args=args):
                p = cli("--dry-run", "--requests", "5", "--model", "m", *args)
                self.assertEqual(p.returncode, 2, p.stderr)
                lines = p.stderr.strip().split("\n")
                self.assertEqual(len(lines), 1, p.stderr)
                self.assertIn(want, lines[0])
                self.assertTrue(lines[0].startswith("vlmload: "), lines[0])

    def test_config_file(self):
        path = os.path.join(self.tmp, "run.json")
        with open(path, "w") as f:
            json.dump({"extra-body": '{"top_k": 7}', "ignore-eos": True, "requests": 2,
                       "model": "m"}, f)
        p = cli("--config", path, "--dry-run")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('extra fields  {"top_k":7,"ignore_eos":true}', p.stdout)
        # In a file the value may be the object itself, or a list of them (repeats).
        with open(path, "w") as f:
            json.dump({"extra-body": [{"top_k": 7, "min_p": 0.1}, {"top_k": 8}], "requests": 2,
                       "model": "m"}, f)
        p = cli("--config", path, "--dry-run")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('extra fields  {"top_k":8,"min_p":0.1}', p.stdout)
        with open(path, "w") as f:
            json.dump({"extra-body": {"max_tokens": 3}, "requests": 2, "model": "m"}, f)
        p = cli("--config", path, "--dry-run")
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn('"max_tokens" is a field vlmload sets itself', p.stderr)
        # The bodies are built once: a phase cannot change their fields, but inherits them.
        with open(path, "w") as f:
            json.dump({"extra-body": {"top_k": 1}, "model": "m",
                       "phases": [{"requests": 2}, {"requests": 2, "ignore-eos": True}]}, f)
        p = cli("--config", path, "--dry-run")
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn("(in phase 2): the request fields are the run's, not a phase's", p.stderr)
        p = cli("--config", path, "--dry-run", "--ignore-eos")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('extra fields  {"top_k":1,"ignore_eos":true}', p.stdout)


if __name__ == "__main__":
    harness.main()
