"""Shards: four processes share one stream and their merged results equal one process's; the
Kubernetes manifest and the local script run the same steps."""
import json
import math
import os
import re
import subprocess

import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def exact_percentile(values, p):
    values = sorted(values)
    return values[max(0, math.ceil(p / 100 * len(values)) - 1)]


class ShardTest(harness.MockTestCase):
    def test_four_shards_merge_exactly(self):
        m = self.mock("--latency", "20ms")
        out = os.path.join(self.tmp, "shards")
        common = ["--url", m.url, "--rate", "400", "--duration", "10s", "--image-ratio", "0.5",
                  "--resolution", "64x64,128x96", "--pool-size", "8", "--seed", "5"]
        p = subprocess.run([os.path.join(ROOT, "tools", "shards.sh"), "4", out, *common],
                           capture_output=True, timeout=120,
                           env=dict(os.environ, VLMLOAD=harness.VLMLOAD))
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        recs = m.records()
        self.assertLess(abs(len(recs) - 4000), 40, len(recs))
        with open(os.path.join(out, "merged.json")) as f:
            merged = json.load(f)
        self.assertEqual(merged["requests"]["sent"], len(recs))
        self.assertEqual(merged["requests"]["ok"], len(recs))

        # The union of the shards' logs is one stream: distinct ids, the same mix as one process.
        lines = []
        for i in range(4):
            with open(os.path.join(out, "shard-%d.requests.jsonl" % i)) as f:
                mine = [json.loads(l) for l in f if '"id"' in l]
            self.assertTrue(all(l["id"] % 4 == i for l in mine))
            lines += mine
        ids = [l["id"] for l in lines]
        self.assertEqual(len(ids), len(set(ids)))
        single = self.mock("--latency", "20ms")
        r = self.run_vlmload(*[a if a != m.url else single.url for a in common], "--quiet")
        one = {l["id"]: l["images"] for l in r.log if "id" in l}
        many = {l["id"]: l["images"] for l in lines}
        shared = set(one) & set(many)
        self.assertGreater(len(shared), 3900)
        self.assertTrue(all(one[k] == many[k] for k in shared))

        # Merged percentiles come from merged counts: equal to the raw logs' within one bucket
        # (three significant digits).
        lat = [l["latency_ms"] for l in lines]
        for p_, key in ((50, "p50"), (99, "p99")):
            exact = exact_percentile(lat, p_)
            self.assertLessEqual(abs(merged["latency_ms"][key] - exact), exact * 1e-3 + 1e-3,
                                 (key, merged["latency_ms"][key], exact))
        with open(os.path.join(out, "merged-timeline.csv")) as f:
            rows = list(f)[1:]
        self.assertEqual(sum(int(r.split(",")[1]) for r in rows), len(recs))

    def test_shard_option_errors(self):
        for arg, env in (("4/4", {}), ("x/4", {}), ("auto/4", {}), ("auto/4", {"JOB_COMPLETION_INDEX": "9"})):
            p = subprocess.run([harness.VLMLOAD, "--shard", arg, "--model", "m"], capture_output=True,
                               timeout=30, env=dict(os.environ, **env))
            self.assertEqual(p.returncode, 2, arg)
            self.assertIn("--shard", p.stderr.decode())

    def test_drained_flush_refused_with_shards(self):
        # Each shard would drain only its own requests and flush while the others' run: refused,
        # with a line that says what to do instead, before anything is sent.
        m = self.mock("--profile", "sglang", "--latency", "20ms")
        for every in ("20", "2s"):
            for i in range(2):
                p = subprocess.run([harness.VLMLOAD, "--url", m.url, "--model", "m", "--rate", "50",
                                    "--requests", "400", "--flush-every", every, "--shard",
                                    "%d/2" % i], capture_output=True, timeout=30)
                self.assertEqual(p.returncode, 2, p.stderr)
                err = p.stderr.decode()
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                for piece in ("--flush-every with --shard %d/2" % i, "drained flush needs an idle "
                              "server", "run one process without --shard",
                              "--flush-mode inline"):
                    self.assertIn(piece, err)
        conf = os.path.join(self.tmp, "phased.json")
        with open(conf, "w") as f:
            json.dump({"phases": [{"requests": 10}, {"requests": 40, "flush-every": 20}]}, f)
        p = subprocess.run([harness.VLMLOAD, "--url", m.url, "--model", "m", "--config", conf,
                            "--shard", "1/2"], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--flush-every with --shard 1/2", p.stderr.decode())
        self.assertEqual(m.records(), [])
        self.assertEqual(m.records("/flush_cache"), [])
        # What the line offers works: inline flushes from shards, drained ones from one process.
        r = self.run_vlmload("--url", m.url, "--model", "m", "--rate", "0", "--requests", "40",
                             "--flush-every", "10", "--flush-mode", "inline", "--shard", "0/2",
                             "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertGreater(r.summary["flushes"]["count"], 0)
        self.assertEqual(len(m.records("/flush_cache")), r.summary["flushes"]["count"])
        r = self.run_vlmload("--url", m.url, "--model", "m", "--rate", "0", "--requests", "40",
                             "--flush-every", "10", "--shard", "0/1", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["flushes"]["ok"], 4)

    def test_merge_rejects_bad_input(self):
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('{"format": "something else"}')
        p = subprocess.run([harness.VLMLOAD, "merge", os.path.join(self.tmp, "o.json"), bad],
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 1)
        self.assertIn("not a vlmload --histograms file", p.stderr.decode())
        p = subprocess.run([harness.VLMLOAD, "merge"], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 2)


class ManifestTest(harness.MockTestCase):
    def test_indexed_job_manifest(self):
        import yaml
        with open(os.path.join(ROOT, "tools", "k8s", "vlmload-job.yaml")) as f:
            docs = list(yaml.safe_load_all(f))
        job, merge = docs
        for d in docs:
            self.assertEqual(d["apiVersion"], "batch/v1")
            self.assertEqual(d["kind"], "Job")
            self.assertIn("name", d["metadata"])
            pod = d["spec"]["template"]["spec"]
            self.assertIn(pod["restartPolicy"], ("Never", "OnFailure"))
            for c in pod["containers"]:
                self.assertTrue(c["name"] and c["image"])
                mounts = {v["name"] for v in c.get("volumeMounts", [])}
                self.assertTrue(mounts <= {v["name"] for v in pod["volumes"]})
        spec = job["spec"]
        self.assertEqual(spec["completionMode"], "Indexed")
        n = spec["completions"]
        self.assertEqual(spec["parallelism"], n)
        args = job["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--shard=auto/%d" % n, args)
        # The options the manifest gives are ones vlmload accepts, and each shard writes its own
        # histograms file, which the merge job reads.
        flags = {a.split("=")[0] for a in args}
        help_text = subprocess.run([harness.VLMLOAD, "--help"], capture_output=True).stdout.decode()
        for flag in flags:
            self.assertIn(flag, help_text)
        # vlmload accepts the shard's whole command line (as pod 1 would run it).
        local = [a.replace("$(JOB_COMPLETION_INDEX)", "1").replace("/results", self.tmp)
                 .replace("/data/corpus", os.path.join(ROOT, "corpus")) for a in args]
        p = subprocess.run([harness.VLMLOAD, *local, "--model", "m", "--dry-run"],
                           capture_output=True, timeout=60,
                           env=dict(os.environ, JOB_COMPLETION_INDEX="1"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(any(re.match(r"--histograms=.*\$\(JOB_COMPLETION_INDEX\)", a) for a in args))
        merge_cmd = " ".join(merge["spec"]["template"]["spec"]["containers"][0]["args"])
        self.assertIn("vlmload merge", merge_cmd)
        self.assertIn("histograms.json", merge_cmd)
        # The local script takes the same steps.
        with open(os.path.join(ROOT, "tools", "shards.sh")) as f:
            script = f.read()
        for piece in ('--shard "$i/$n"', "--histograms", "merge"):
            self.assertIn(piece, script)


if __name__ == "__main__":
    harness.main()
