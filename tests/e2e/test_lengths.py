"""Input and output lengths (--input-tokens, --output-tokens) against the mock, judged by what the
mock measured with its own sub-word tokenizer (not one token per word) and recorded per request:
prompts of the asked length in the server's tokens, spread within the bounds, each request's
max_tokens from its distribution (and, with --ignore-eos, that many completion tokens), the
summary's vision tokens per image, and the fallback to an estimate when /tokenize is missing."""
import json
import os
import statistics
import subprocess

import harness


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli(*args):
    return subprocess.run([harness.VLMLOAD, *args], capture_output=True, text=True, timeout=60)


class LengthsTest(harness.MockTestCase):
    def test_input_tokens_exact_in_the_servers_tokenizer(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "8", "--requests",
                             "60", "--input-tokens", "300")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertNotIn("warning", r.stderr)
        recs = m.records()
        self.assertEqual(len(recs), 60)
        counts = [rec["text_tokens"] for rec in recs]
        self.assertLess(abs(statistics.mean(counts) - 300), 0.02 * 300, counts)
        for n in counts:
            self.assertLess(abs(n - 300), 0.05 * 300, counts)
        # Prompts differ: a prefix cache would not make them hits.
        self.assertGreaterEqual(len({rec["prompt_chars"] for rec in recs}), 30)
        self.assertGreater(m.stats()["tokenize_total"], 0)
        lengths = r.summary["lengths"]
        self.assertEqual(lengths["tokenizer"], "server")
        self.assertEqual({l["input_tokens"] for l in r.log}, {300})
        self.assertEqual(lengths["total_input_text_tokens"], 60 * 300)
        self.assertEqual(lengths["mean_input_text_tokens"], 300)
        # The mock's usage: text tokens and no chat template.
        self.assertEqual(lengths["total_prompt_tokens_reported"], sum(counts))
        self.assertAlmostEqual(lengths["template_tokens"], statistics.mean(counts) - 300)

    def test_input_tokens_spread_within_bounds(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "8", "--requests",
                             "200", "--input-tokens", "300:50:200:400", "--seed", "3")
        self.assertEqual(r.rc, 0, r.stderr)
        counts = [rec["text_tokens"] for rec in m.records()]
        self.assertEqual(len(counts), 200)
        self.assertTrue(all(195 <= n <= 405 for n in counts), counts)
        self.assertLess(abs(statistics.mean(counts) - 300), 10)
        sd = statistics.pstdev(counts)
        self.assertGreater(sd, 35, counts)
        self.assertLess(sd, 55, counts)
        # The clamps are reached: a normal of sd 50 passes 200 and 400 in 2.3% of draws each.
        self.assertLess(min(counts), 215)
        self.assertGreater(max(counts), 385)

    def test_output_tokens_per_request(self):
        m = self.mock("--tokens", "1000")
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "8", "--requests",
                             "100", "--output-tokens", "40:10:20:60", "--ignore-eos")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        limits = [rec["max_tokens"] for rec in recs]
        self.assertTrue(all(20 <= n <= 60 for n in limits), limits)
        self.assertGreater(len(set(limits)), 10)
        self.assertLess(abs(statistics.mean(limits) - 40), 4)
        # ignore_eos: each reply is exactly as long as its limit (the mock would send 1000).
        for rec in recs:
            self.assertEqual(rec["extra"].get("ignore_eos"), True)
            self.assertEqual(rec["tokens"], rec["max_tokens"])
        self.assertEqual(r.summary["tokens"]["completion"], sum(limits))
        # The request log has each request's own limit.
        self.assertEqual(sorted(l["max_tokens"] for l in r.log), sorted(limits))
        self.assertAlmostEqual(r.summary["lengths"]["mean_max_tokens"], statistics.mean(limits))

    def test_max_tokens_kept_without_output_tokens(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--requests", "10", "--max-tokens",
                             "7", "--input-tokens", "50")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual({rec["max_tokens"] for rec in m.records()}, {7})

    def test_vision_tokens_per_image(self):
        m = self.mock("--vision-tokens", "123")
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "8", "--requests",
                             "80", "--input-tokens", "100", "--image-ratio", "0.5",
                             "--images-per-request", "1-3", "--resolution", "64x64")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertTrue(any(rec["images"] for rec in recs))
        self.assertTrue(any(not rec["images"] for rec in recs))
        lengths = r.summary["lengths"]
        self.assertAlmostEqual(lengths["vision_tokens_per_image"], 123)
        images = sum(len(rec["images"]) for rec in recs)
        self.assertAlmostEqual(lengths["total_input_vision_tokens"], 123 * images)
        self.assertIn("vision 123.0 per image", r.stdout + r.stderr)

    def test_fallback_without_tokenize(self):
        m = self.mock("--no-tokenize")
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "8", "--requests",
                             "60", "--input-tokens", "300")
        self.assertEqual(r.rc, 0, r.stderr)
        warnings = [l for l in r.stderr.splitlines() if "warning" in l]
        self.assertEqual(len(warnings), 1, r.stderr)
        self.assertIn("/tokenize", warnings[0])
        self.assertIn("404", warnings[0])
        self.assertIn("the summary gives their error", warnings[0])
        self.assertEqual(m.stats()["tokenize_total"], 0)
        counts = [rec["text_tokens"] for rec in m.records()]
        self.assertEqual(len(counts), 60)
        # Not exact: the estimate is not the mock's tokenizer.
        self.assertGreater(abs(statistics.mean(counts) - 300), 0.02 * 300, counts)
        self.assertEqual(r.summary["lengths"]["tokenizer"], "estimate")
        # The estimate's error is said as the server measured it: the mock counts the prompt's
        # text tokens and adds no template.
        truth = 100.0 * (statistics.mean(counts) - 300) / 300
        got = r.summary["lengths"]["text_prompt_tokens_excess_pct"]
        self.assertAlmostEqual(got, truth, places=6)
        self.assertIn("the server counted %+.1f%% on text-only prompts" % truth,
                      " ".join(r.stdout.split()))

    def test_llama_server_tokenize(self):
        # llama-server's POST /tokenize takes {"content"} and answers {"tokens": [...]} alone
        # (an empty list for a body without "content"): its count is the list's length.
        m = self.mock("--profile", "llamacpp")
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "8", "--requests",
                             "60", "--input-tokens", "300")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertNotIn("warning", r.stderr)
        self.assertEqual(r.summary["lengths"]["tokenizer"], "server")
        counts = [rec["text_tokens"] for rec in m.records()]
        self.assertEqual(len(counts), 60)
        self.assertLess(abs(statistics.mean(counts) - 300), 0.02 * 300, counts)
        self.assertGreater(m.stats()["tokenize_total"], 0)

    def test_shards_merge_the_lengths(self):
        m = self.mock("--vision-tokens", "77")
        out = os.path.join(self.tmp, "shards")
        p = subprocess.run([os.path.join(ROOT, "tools", "shards.sh"), "2", out, "--url", m.url,
                            "--rate", "0", "--concurrency", "4", "--requests", "40",
                            "--input-tokens", "120", "--image-ratio", "0.5", "--resolution",
                            "32x32"], capture_output=True, timeout=120,
                           env=dict(os.environ, VLMLOAD=harness.VLMLOAD))
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        recs = m.records()
        with open(os.path.join(out, "merged.json")) as f:
            lengths = json.load(f)["lengths"]
        self.assertEqual(lengths["completed"], len(recs))
        self.assertEqual(lengths["total_input_text_tokens"], 120 * len(recs))
        self.assertEqual(lengths["tokenizer"], "server")
        self.assertAlmostEqual(lengths["vision_tokens_per_image"], 77)

    def test_native_generate(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--api", "native", "--rate", "0", "--requests",
                             "20", "--input-tokens", "200", "--output-tokens", "30:5",
                             "--ignore-eos")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records("/generate")
        self.assertEqual(len(recs), 20)
        self.assertEqual({rec["text_tokens"] for rec in recs}, {200})
        for rec in recs:
            self.assertEqual(rec["tokens"], rec["max_tokens"])

    def test_dry_run_shows_the_distributions(self):
        p = cli("--dry-run", "--requests", "500", "--model", "m", "--input-tokens",
                "300:50:200:400", "--output-tokens", "64", "--ignore-eos")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("input tokens  300:50:200:400: normal, sd 50, in [200, 400]", p.stdout)
        self.assertRegex(p.stdout, r"drawn: mean 29\d\.\d, 200 to 400 over 500 requests")
        self.assertIn("POST /tokenize", p.stdout)
        self.assertIn("output tokens 64: exactly 64, as max_tokens (ignore_eos: exact)", p.stdout)

    def test_bad_values(self):
        for value, words in [("abc", "want MEAN"), ("300:50:200", "both MIN and MAX"),
                             ("0", "MEAN must be"), ("300:50:400:500", "between MIN and MAX")]:
            p = cli("--dry-run", "--input-tokens", value)
            self.assertEqual(p.returncode, 2, value)
            self.assertIn("--input-tokens", p.stderr)
            self.assertIn(words, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        p = cli("--dry-run", "--input-tokens", "300", "--prompts", __file__)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("drop --prompts", p.stderr)

    def test_a_phase_cannot_change_them(self):
        path = os.path.join(self.tmp, "phases.json")
        with open(path, "w") as f:
            json.dump({"input-tokens": "100", "phases": [
                {"rate": 5, "requests": 5}, {"rate": 5, "requests": 5, "input-tokens": "200"}]}, f)
        p = cli("--config", path, "--dry-run")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--input-tokens", p.stderr)
        self.assertIn("phase 2", p.stderr)

    def test_dumped_bodies(self):
        out = self.tmp + "/dump"
        p = cli("--model", "m", "--requests", "4", "--input-tokens", "40", "--output-tokens",
                "9", "--dump-requests", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        texts = set()
        for i in range(4):
            with open("%s/request-%06d.json" % (out, i)) as f:
                body = json.load(f)
            self.assertEqual(body["max_tokens"], 9)
            texts.add(body["messages"][0]["content"])
        self.assertEqual(len(texts), 4)


if __name__ == "__main__":
    harness.main()
