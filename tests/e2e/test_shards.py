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
