"""vlmload compare: two runs against mocks that leak 32 and 64 KiB per image differ by 31.25 MB per
1000 images, worse; two runs against mocks that leak alike are the same on every memory figure;
--fail-if-worse turns a worse figure into exit status 3; bad input is one line and exit status 2;
a matrix folder is compared cell by cell. What each mock held is read from its /mock/stats."""
import json
import os
import subprocess

import harness

MiB = 1048576
SERIES = ("rss_mb.mock", "prom.vlmmock_memory_bytes")
# Under AddressSanitizer the mock's resident set is its allocator's: there only the mock's own
# account of its memory is judged.
SANITIZED = harness.SANITIZED
JUDGED = SERIES[1:] if SANITIZED else SERIES


# Under a sanitizer the mock serves more slowly: a load it keeps up with (memory that runs ahead
# of the requests completed, a backlog growing, would steepen the slope per request).
RATE = int(200 / harness.SLACK)


def load_args(m, out):
    """8 s at 200 requests/s, evenly spaced, one 64x64 image each, a flush every 200 (eight
    windows for the post-flush floor), the mock's resident set and its own account sampled every
    100 ms."""
    return ("--url", m.url, "--rate", str(RATE), "--arrival", "constant", "--duration", "8s",
            "--image-ratio", "1", "--resolution", "64x64", "--flush-every", str(RATE),
            "--monitor-pid", "mock=%d" % m.proc.pid,
            "--monitor-prom", m.url + "/metrics#vlmmock_memory_bytes",
            "--sample-every", "100ms", "--analyze", "--quiet")


class CompareTest(harness.MockTestCase):
    def two_runs(self, leak_a, leak_b):
        """Runs the same load against two mocks at once, leaking leak_a and leak_b KiB per image;
        returns the two summaries' paths and the mocks' leaked bytes per image."""
        mocks = [self.mock("--latency", "5ms", "--leak-kb-per-image", str(k))
                 for k in (leak_a, leak_b)]
        runs, paths = [], []
        for i, m in enumerate(mocks):
            d = os.path.join(self.tmp, "run%d" % i)
            os.makedirs(d)
            runs.append(harness.Started(d, *load_args(m, d)))
            paths.append(os.path.join(d, "summary.json"))
        for r in runs:
            got = r.finish(timeout=120)
            self.assertEqual(got.rc, 0, got.stderr)
        per_image = []
        for m in mocks:
            st = m.stats()
            self.assertGreater(st["images_total"], 6 * RATE)
            per_image.append(st["memory_leaked_bytes"] / st["images_total"])
        return paths, per_image

    def compare(self, *args, rc=0):
        out = os.path.join(self.tmp, "compare.json")
        p = subprocess.run([harness.VLMLOAD, "compare", *args, "--output", out],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, rc, p.stdout + p.stderr)
        with open(out) as f:
            return p, json.load(f)

    def figures(self, doc, k=0):
        return {g["name"]: g for g in doc["comparisons"][k]["figures"]}

    def test_double_leak_is_worse_by_its_slope(self):
        (a, b), per_image = self.two_runs(32, 64)
        # The mocks held 32 and 64 KiB per image they decoded.
        self.assertEqual(per_image, [32 * 1024, 64 * 1024])
        truth = (per_image[1] - per_image[0]) * 1000 / MiB  # 31.25 MB per 1000 images
        report = os.path.join(self.tmp, "compare.html")
        p, doc = self.compare(a, b, "--report", report)
        figs = self.figures(doc)
        for name in JUDGED:
            for group in ("slope", "floor"):
                with self.subTest(figure=group + ":" + name):
                    g = figs[group + ":" + name]
                    self.assertAlmostEqual(g["change"], truth, delta=0.15 * truth)
                    self.assertEqual(g["word"], "worse")
                    lo, hi = g["ci"]
                    self.assertGreater(lo, 0)
                    # The mock's own counter moves exactly: its interval may be a point.
                    self.assertLessEqual(lo, g["change"])
                    self.assertGreaterEqual(hi, g["change"])
                    self.assertEqual(g["better"], "lower")
        # The table says it in 100 columns (the runs' paths above it as long as they are), and
        # the materialities under it.
        lines = p.stdout.splitlines()
        self.assertEqual(lines[:2], ["baseline: " + a, "run:      " + b])
        self.assertTrue(all(len(l) <= 100 for l in lines[2:]), p.stdout)
        row = [l for l in lines if l.startswith("slope:prom.vlmmock_memory_bytes ")]
        self.assertEqual(len(row), 1, p.stdout)
        self.assertTrue(row[0].rstrip().endswith("worse"), row[0])
        self.assertIn("1 MB/1000 requests (slopes)", p.stdout)
        # The page draws both runs' memory on one chart.
        with open(report) as f:
            page = f.read()
        self.assertIn("<svg", page)
        self.assertIn("rss_mb.mock (baseline)", page)
        self.assertIn("rss_mb.mock (run)", page)
        # For CI: the slope got worse, exit status 3, and the figure named.
        p, doc = self.compare(a, b, "--fail-if-worse", "slope:prom.vlmmock_memory_bytes", rc=3)
        self.assertEqual(doc["worse"], ["slope:prom.vlmmock_memory_bytes"])
        self.assertIn("slope:prom.vlmmock_memory_bytes got worse", p.stderr)
        # A group names every slope; the other way round the run got better and nothing fails.
        self.compare(a, b, "--fail-if-worse", "slope", rc=3)
        p, doc = self.compare(b, a, "--fail-if-worse", "slope,floor")
        self.assertEqual(self.figures(doc)["slope:prom.vlmmock_memory_bytes"]["word"], "better")

    def test_same_leak_is_the_same(self):
        (a, b), per_image = self.two_runs(32, 32)
        self.assertEqual(per_image, [32 * 1024, 32 * 1024])
        named = ",".join("%s:%s" % (g, n) for g in ("slope", "floor") for n in JUDGED)
        figs = self.figures(self.compare(a, b, "--fail-if-worse", named)[1])
        memory = [g for g in figs.values() if g["group"] in ("slope", "floor", "mechanism")
                  and g["name"].split(":", 1)[1] in JUDGED]
        self.assertGreaterEqual(len(memory), 2 * len(JUDGED))
        for g in memory:
            with self.subTest(figure=g["name"]):
                self.assertEqual(g["word"], "same", g)
        # The load was the same: the rate is too, and every figure of it has its word.
        self.assertEqual(figs["achieved_rate"]["word"], "same")
        self.assertIn("e2e_p99", figs)
        self.assertEqual(len(figs["e2e_p99"]["ci"]), 2)

    def matrix(self, name, leaks):
        """Runs a matrix of cells against mocks it starts (cell name to its leak in KiB per
        image and its repeats), 600 requests each, four at once; returns its folder, matrix.json
        and the table."""
        spec = {
            "defaults": {"rate": RATE, "arrival": "constant",
                         "duration": "%gs" % (3 * harness.SLACK),
                         "image-ratio": 1, "resolution": "64x64", "sample-every": "100ms",
                         "monitor-prom": "{url}/metrics#vlmmock_memory_bytes"},
            "server": {"command": ["{vlmmock}", "--host", "127.0.0.1", "--port", "{port}",
                                   "--latency", "5ms"]},
            "cells": [],
        }
        for cell, (leak, repeat) in leaks.items():
            c = {"name": cell, "server": {"args": ["--leak-kb-per-image", str(leak)]}}
            if repeat:
                c["repeat"] = repeat
            spec["cells"].append(c)
        path = os.path.join(self.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(spec, f)
        out = os.path.join(self.tmp, name)
        p = subprocess.run([harness.VLMLOAD, "matrix", path, "--output-dir", out, "--quiet",
                            "--parallel", "4"], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(os.path.join(out, "matrix.json")) as f:
            return out, json.load(f), p.stdout

    def test_matrix_folders_and_repeats(self):
        a, doc, table = self.matrix("before", {"x": (32, 0), "y": (32, 3)})
        b, _, _ = self.matrix("after", {"x": (64, 0), "y": (32, 3)})
        # A repeated cell: each run in a folder of its own, and a row of its mean and range.
        names = [c["name"] for c in doc["cells"]]
        self.assertEqual(names, ["x", "y/run1", "y/run2", "y/run3"])
        for k in (1, 2, 3):
            self.assertTrue(os.path.exists(os.path.join(a, "y", "run%d" % k, "summary.json")))
        rep = doc["repeats"]
        self.assertEqual([r["name"] for r in rep], ["y"])
        self.assertEqual(rep[0]["runs"], ["y/run1", "y/run2", "y/run3"])
        prom = {s["series"]: s for s in rep[0]["series"]}[SERIES[1]]
        runs = [{s["series"]: s for s in c["series"]}[SERIES[1]]["ols"]["slope_per_1000"]
                for c in doc["cells"][1:]]
        spread = prom["slope_per_1000"]
        self.assertEqual(spread["n"], 3)
        self.assertAlmostEqual(spread["mean"], sum(runs) / 3, places=6)
        self.assertEqual((spread["min"], spread["max"]), (min(runs), max(runs)))
        self.assertAlmostEqual(spread["mean"], 31.25, delta=0.1 * 31.25)
        self.assertEqual((prom["verdict"], prom["verdict_runs"]), ("grows", 3))
        row = [l for l in table.splitlines() if l.startswith("y (3 runs)")]
        self.assertEqual(len(row), 1, table)
        self.assertIn("%+.2f (%+.2f..%+.2f)" % (spread["mean"], spread["min"], spread["max"]),
                      table)
        # The two folders compared cell by cell: x doubled its leak, each run of y held its own.
        p, cmp = self.compare(a, b)
        by_cell = {c["cell"]: {g["name"]: g for g in c["figures"]} for c in cmp["comparisons"]}
        self.assertEqual(sorted(by_cell), ["x", "y/run1", "y/run2", "y/run3"])
        x = by_cell["x"]["slope:" + SERIES[1]]
        self.assertEqual(x["word"], "worse")
        self.assertAlmostEqual(x["change"], 31.25, delta=0.15 * 31.25)
        for k in (1, 2, 3):
            self.assertEqual(by_cell["y/run%d" % k]["slope:" + SERIES[1]]["word"], "same")
        self.assertIn("cell x\n", p.stdout)
        self.compare(a, b, "--fail-if-worse", "slope", rc=3)

    def test_bad_input(self):
        m = self.mock("--latency", "5ms")
        r = self.run_vlmload("--url", m.url, "--requests", "20", "--rate", "100", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        run = os.path.join(self.tmp, "summary.json")
        notrun = os.path.join(self.tmp, "other.json")
        with open(notrun, "w") as f:
            json.dump({"hello": 1}, f)
        folder = os.path.join(self.tmp, "mx")
        os.makedirs(folder)
        with open(os.path.join(folder, "matrix.json"), "w") as f:
            json.dump({"vlmload_version": "x", "cells": []}, f)
        cases = [
            ((run, notrun), "not a vlmload run"),
            ((run, os.path.join(self.tmp, "missing.json")), "No such file"),
            ((run, folder), "runs of different kinds"),
            ((run, self.tmp), "a folder without matrix.json"),
            ((run,), "give two runs or more"),
            ((run, run, "--fail-if-worse", "e2e_p77"), "'e2e_p77' is not a figure"),
        ]
        for args, says in cases:
            with self.subTest(args=args):
                p = subprocess.run([harness.VLMLOAD, "compare", *args], capture_output=True,
                                   text=True, timeout=60)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
                self.assertIn(says, p.stderr)
                self.assertEqual(p.stdout, "")
        p = subprocess.run([harness.VLMLOAD, "comapre"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("did you mean 'vlmload compare'", p.stderr)


if __name__ == "__main__":
    harness.main()
