"""Image traffic against the mock, which decodes every image it receives and records its size,
format and a hash of its decoded pixels."""
import json
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request

import harness

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "corpus")


def images(recs):
    return [i for r in recs for i in r["images"]]


class ImageTest(harness.MockTestCase):
    def test_corpus(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--images", CORPUS, "--requests",
                             "300", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertEqual(len(recs), 300)
        self.assertTrue(all(rec["status"] == 200 for rec in recs))
        self.assertEqual(sum(r.summary["errors"].values()), 0)
        pool = r.summary["images"]["pool_size"]
        self.assertGreaterEqual(pool, 15)
        # Every corpus image was sent and decoded at the mock.
        self.assertEqual(len({i["hash"] for i in images(recs)}), pool)
        self.assertEqual(r.summary["images"]["sent"], 300)
        # Every file of the bundled corpus is an image: nothing is skipped, nothing said.
        self.assertNotIn("skipping", r.stderr)
        self.assertEqual(r.summary["images"]["pool_size"], len(
            [n for _, _, names in os.walk(CORPUS) for n in names]))

    def test_pool_line_counts_in_words(self):
        # "1 image", "1 file skipped": never "1 files".
        png = sorted(os.path.join(top, n) for top, _, names in os.walk(CORPUS)
                     for n in names if n.endswith(".png"))[0]
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(png, d)
            with open(os.path.join(d, "notes.txt"), "w") as f:
                f.write("not an image\n")
            p = subprocess.run([harness.VLMLOAD, "--images", d, "--dry-run", "--model", "m"],
                               capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            line = [l for l in p.stderr.decode().splitlines() if " from " in l]
            self.assertEqual(len(line), 1, p.stderr)
            self.assertRegex(line[0], r"^vlmload: 1 image \([0-9.]+ MB\) from .*, 1 file skipped$")

    def test_synthetic_mix(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "400", "--image-ratio", "0.3",
                             "--images-per-request", "1-3", "--resolution", "224x224-1920x1080",
                             "--image-format", "mixed", "--requests", "2000", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertEqual(len(recs), 2000)
        text_only = sum(1 for rec in recs if not rec["images"]) / len(recs)
        self.assertLess(abs(text_only - 0.7), 0.03)
        self.assertEqual(r.summary["requests"]["text_only"], round(text_only * 2000))
        counts = {len(rec["images"]) for rec in recs if rec["images"]}
        self.assertEqual(counts, {1, 2, 3})
        imgs = images(recs)
        widths = [i["w"] for i in imgs]
        heights = [i["h"] for i in imgs]
        self.assertTrue(all(224 <= w <= 1920 for w in widths))
        self.assertTrue(all(224 <= h <= 1080 for h in heights))
        self.assertLess(min(widths), 600)
        self.assertGreater(max(widths), 1500)
        fmts = {i["fmt"] for i in imgs}
        self.assertEqual(fmts, {"png", "jpeg"})
        channels = {i["channels"] for i in imgs if i["fmt"] == "png"}
        self.assertEqual(channels, {1, 3, 4})
        # Without unique images the server sees exactly the pool.
        self.assertEqual(len({i["hash"] for i in imgs}), r.summary["images"]["pool_size"])

    def test_unique_images(self):
        m = self.mock()
        # Slow enough that the producer never falls behind, even in the sanitizer build.
        rate = str(40 / harness.SLACK)
        r = self.run_vlmload("--url", m.url, "--rate", rate, "--unique-images", "--resolution",
                             "320x240,512x512", "--image-format", "mixed", "--images-per-request",
                             "1-2", "--requests", "200", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        imgs = images(m.records())
        self.assertEqual(r.summary["images"]["late"], 0)
        self.assertEqual(len(imgs), r.summary["images"]["sent"])
        self.assertEqual(len({i["hash"] for i in imgs}), len(imgs))

    def test_unique_images_in_one_phase_only(self):
        # A phase of pool images, then one of unique images: the first sends the pool as it is
        # (repeats), the second only images never seen, and "unique" counts what the server saw.
        scen = os.path.join(self.tmp, "phases.json")
        with open(scen, "w") as f:
            json.dump({"image-ratio": 1, "pool-size": 4, "resolution": "64x64", "phases": [
                {"name": "pool", "rate": 40, "requests": 40},
                {"name": "unique", "rate": str(40 / harness.SLACK), "requests": 40,
                 "unique-images": True},
            ]}, f)
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--config", scen, "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        # Every request of the first phase left before the second's first, 25 ms apart.
        recs = sorted(m.records(), key=lambda rec: rec["seq"])
        first, second = images(recs[:40]), images(recs[40:])
        self.assertEqual(len(first), 40)
        self.assertEqual(len(second), 40)
        self.assertEqual(len({i["hash"] for i in first}), 4)
        self.assertEqual(r.summary["images"]["late"], 0)
        self.assertEqual(len({i["hash"] for i in second}), 40)
        self.assertFalse({i["hash"] for i in first} & {i["hash"] for i in second})
        self.assertEqual(r.summary["images"]["unique"], 44)

    def test_same_seed_same_stream(self):
        def stream(seed):
            m = self.mock()
            r = self.run_vlmload("--url", m.url, "--rate", "200", "--arrival", "constant",
                                 "--concurrency", "1", "--image-ratio", "0.5",
                                 "--images-per-request", "1-3", "--pool-size", "8", "--seed",
                                 str(seed), "--requests", "150", "--quiet")
            self.assertEqual(r.rc, 0, r.stderr)
            recs = sorted(m.records(), key=lambda rec: rec["seq"])
            return [(rec["prompt_chars"], tuple(i["hash"] for i in rec["images"])) for rec in recs]

        a, b, c = stream(7), stream(7), stream(8)
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def reuse_run(self, p, seed=1, requests=300):
        # One request at a time, evenly spaced: the mock's arrival order is the request order, and
        # the producer never falls behind (no late images to blur the count).
        m = self.mock()
        rate = str(40 / harness.SLACK)
        r = self.run_vlmload("--url", m.url, "--rate", rate, "--arrival", "constant",
                             "--concurrency", "1", "--image-reuse", p, "--resolution", "64x64",
                             "--images-per-request", "1-2", "--seed", str(seed), "--requests",
                             str(requests))
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["images"]["late"], 0)
        recs = sorted(m.records(), key=lambda rec: rec["seq"])
        hashes = [i["hash"] for i in images(recs)]
        self.assertEqual(len(hashes), r.summary["images"]["sent"])
        # The mock's count: images whose hash it had seen before in the run.
        seen, repeats = set(), 0
        for h in hashes:
            repeats += h in seen
            seen.add(h)
        return r, hashes, repeats

    def test_image_reuse(self):
        r, hashes, repeats = self.reuse_run("0.5")
        im = r.summary["images"]
        share = repeats / len(hashes)
        self.assertGreaterEqual(share, 0.4)
        self.assertLessEqual(share, 0.6)
        self.assertEqual(im["repeated"], repeats)
        self.assertAlmostEqual(im["repeat_share"], share, places=9)
        # "unique" is what the server saw: a repeat is not a new distinct image.
        self.assertEqual(im["unique"], len(set(hashes)))
        self.assertIn("repeated %d (" % repeats, r.stdout + r.stderr)
        self.assertEqual(int(r.timeline[-1]["images_repeated"]), repeats)
        # A repeat is one of the last 32 distinct images sent, never an older one.
        first = {}
        for i, h in enumerate(hashes):
            first.setdefault(h, len(first))
            self.assertGreater(first[h], len(first) - 1 - 32)

    def test_image_reuse_zero_sends_no_repeats(self):
        r, hashes, repeats = self.reuse_run("0", requests=100)
        self.assertEqual(repeats, 0)
        self.assertEqual(r.summary["images"]["repeated"], 0)
        self.assertEqual(r.summary["images"]["repeat_share"], 0)
        self.assertEqual(r.summary["images"]["unique"], len(hashes))

    def test_image_reuse_same_seed_same_pattern(self):
        # Stamps differ from run to run (the wall clock), so compare which earlier image each one
        # repeats: each hash as the order of its first appearance.
        def pattern(seed):
            _, hashes, _ = self.reuse_run("0.5", seed=seed, requests=60)
            first = {}
            return [first.setdefault(h, len(first)) for h in hashes]

        a, b, c = pattern(7), pattern(7), pattern(8)
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def test_image_reuse_dry_run(self):
        p = subprocess.run([harness.VLMLOAD, "--image-reuse", "0.5", "--resolution", "64x64",
                            "--requests", "1000", "--dry-run", "--model", "m"],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = (p.stdout + p.stderr).decode()
        self.assertRegex(out, r"reuse +(4[5-9]|5[0-5])\.[0-9]% of images repeat one of the last 32")
        self.assertIn("unique ", out)

    def test_mock_rejects_bad_images(self):
        m = self.mock()
        bad_uris = ["data:image/png;base64,not-base64!!", "data:image/png;base64,AAAA",
                    "http://example.invalid/x.png", "data:image/jpeg;base64,iVBORw0KGgo="]
        for uri in bad_uris:
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": uri}}]}]})
            req = urllib.request.Request(m.url + "/v1/chat/completions", data=body.encode(),
                                         headers={"Content-Type": "application/json"})
            with self.assertRaises(urllib.error.HTTPError) as cm:
                urllib.request.urlopen(req, timeout=10)
            self.assertEqual(cm.exception.code, 400, uri)

    def test_empty_corpus_is_an_error(self):
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty)
        with open(os.path.join(empty, "notes.txt"), "w") as f:
            f.write("no images here\n")
        r = self.run_vlmload("--url", "http://127.0.0.1:9", "--model", "m", "--images", empty,
                             "--requests", "1")
        self.assertEqual(r.rc, 2)
        self.assertIn("--images", r.stderr)


if __name__ == "__main__":
    harness.main()
