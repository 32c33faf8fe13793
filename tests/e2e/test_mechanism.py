"""The mechanism of every memory verdict, judged against a mock that was told how to grow: the
anatomy matrix (tools/scenarios/anatomy-matrix.json) runs the mock once per mechanism, and each
cell's mechanism and where it is must be the one its mode makes; a one-time step is found where
the mock's /mock/stats says it made it, at the size it was told."""
import json
import os
import subprocess
import unittest

import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANATOMY_MATRIX = os.path.join(ROOT, "tools", "scenarios", "anatomy-matrix.json")
SANITIZED = harness.SANITIZED
MiB = 1 << 20

# Each cell's mechanism, and the part of the mock's process that carries it (the process's own
# series, server/vlmmock, which has every kind; the tree's total has those of status alone). The
# mock holds its leaked and cached pools in anonymous mappings of their own, outside the heap; its
# arena threads' scratch is in glibc's arena heaps.
TRUTH = {
    "flat": ("none", None),
    "leak": ("leak", {"anon"}),
    "cache": ("cache", {"anon"}),
    "capped-cache": ("capped-cache", {"anon"}),
    "step": ("step", {"anon"}),
    "warm-up": ("warm-up", {"heap"}),
    "shm": ("leak", {"shmem"}),
}


@unittest.skipIf(SANITIZED, "a sanitizer's allocator holds what is freed: every cell grows")
class MechanismTest(harness.MockTestCase):
    def test_anatomy_matrix_names_every_mechanism(self):
        out = os.path.join(self.tmp, "out")
        p = subprocess.run([harness.VLMLOAD, "matrix", "--quiet", "--parallel", "7",
                            "--output-dir", out, ANATOMY_MATRIX],
                           capture_output=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        table = p.stdout.decode()
        self.assertIn("mechanism", table.splitlines()[0])
        with open(os.path.join(out, "matrix.json")) as f:
            doc = json.load(f)
        cells = {c["name"]: c for c in doc["cells"]}
        self.assertEqual(sorted(cells), sorted(TRUTH))
        for name, (mech, kinds) in TRUTH.items():
            with open(os.path.join(out, name, "summary.json")) as f:
                summary = json.load(f)
            series = {s["series"]: s for s in summary["memory_analysis"]["series"]}
            with self.subTest(cell=name):
                s = series["rss_mb.server"]
                got = s["mechanism"]
                if name == "warm-up":
                    # Arenas that fill within the first images rise as fast as a step does.
                    self.assertIn(got, ("warm-up", "step"), s["evidence"])
                else:
                    self.assertEqual(got, mech, s["evidence"])
                self.assertEqual(s["where"]["process"], "server")
                proc = series["rss_mb.server/vlmmock"]
                self.assertEqual(proc["mechanism"], got, proc["evidence"])
                self.assertEqual(proc["where"]["process"], "server/vlmmock")
                if kinds is not None:
                    self.assertIn(proc["where"]["kind"], kinds, (proc["where"], proc["evidence"]))
                # The table says it in the cell's row.
                row = [l for l in table.splitlines() if l.startswith(name + " ")]
                self.assertTrue(row and (" %s" % got) in row[0], (name, table))

    def test_step_at_first_image(self):
        # 32 MiB once, at the first request that carries an image: one in twenty does, so the
        # first comes a few requests in. The jump is found at that request and of that size.
        m = self.mock("--latency", "5ms", "--step-mb-at-first-image", "32")
        r = self.run_vlmload("--url", m.url, "--rate", "200", "--duration", "3s",
                             "--image-ratio", "0.05", "--resolution", "64x64", "--seed", "3",
                             "--monitor-pid", "mock=%d" % m.proc.pid, "--sample-every", "10ms",
                             "--analyze")
        self.assertEqual(r.rc, 0, r.stderr)
        at = m.stats()["step_at_request"]
        self.assertIsNotNone(at)
        self.assertGreater(at, 1)
        s = {x["series"]: x for x in r.summary["memory_analysis"]["series"]}["rss_mb.mock"]
        self.assertEqual(len(s["jumps"]), 1, s["jumps"])
        j = s["jumps"][0]
        print("step: mock %d MiB at request %d; found %+.2f MB at %d requests (%s)"
              % (32, at, j["mb"], j["requests"], j["after"]))
        self.assertLess(abs(j["mb"] - 32) / 32, 0.10, j)
        self.assertLessEqual(abs(j["requests"] - at), 5, (j, at))
        self.assertEqual(j["after"], "the first image request")
        self.assertEqual(s["mechanism"], "step", s["evidence"])
        self.assertIn("mechanism: step", r.stdout)

    def test_cap_from_the_servers_own_settings(self):
        # llama.cpp's host prompt cache held to --cache-ram 48 (MiB) on the server's command line:
        # the run reads the setting from the process and says the cache levels off at that cap.
        m = self.mock("--profile", "llamacpp", "--latency", "5ms", "--prompt-cache-kb-per-prompt",
                      "256", "--cache-ram", "48")
        r = self.run_vlmload("--url", m.url, "--server", "llamacpp", "--rate", "100",
                             "--requests", "1200", "--unique-images", "--resolution", "64x64",
                             "--monitor-pid", "srv=%d" % m.proc.pid, "--sample-every", "100ms",
                             "--analyze", timeout=120)
        self.assertEqual(r.rc, 0, r.stderr)
        st = m.stats()
        self.assertGreater(st["prompt_cache"]["evicted"], 0, st)  # the mock's cache was full
        self.assertEqual(st["memory_prompt_cache_bytes"], 48 << 20, st)
        settings = {x["name"]: x for x in r.summary["server"]["settings"]}
        self.assertEqual(settings["--cache-ram"]["bytes"], 48 << 20, settings)
        s = {x["series"]: x for x in r.summary["memory_analysis"]["series"]}["rss_mb.srv"]
        self.assertEqual(s["cap"]["name"], "--cache-ram", s)
        self.assertEqual(s["cap"]["mb"], 48, s["cap"])
        self.assertTrue(s["cap"]["levels_off_near"], s["cap"])
        self.assertEqual(s["mechanism"], "capped-cache", s["evidence"])
        self.assertEqual(s["where"]["kind"], "anon", s["where"])
        self.assertIn("near the cap --cache-ram (48 MB)", " ".join(r.stdout.split()))


if __name__ == "__main__":
    unittest.main()
