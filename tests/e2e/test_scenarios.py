"""Phased scenarios and sweeps: each phase's rate and mix as the mock received them, and a sweep
table whose knee is where the mock's load-dependent latency takes off."""
import json
import os

import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ScenarioTest(harness.MockTestCase):
    def test_phases_match_the_mock_record(self):
        scen = os.path.join(self.tmp, "scen.json")
        with open(scen, "w") as f:
            json.dump({"phases": [
                {"name": "images", "rate": 60, "duration": "4s", "image-ratio": 1,
                 "resolution": "64x64", "flush-every": 40},
                {"name": "text", "rate": 30, "duration": "4s", "image-ratio": 0},
                {"name": "ramp", "rate": 20, "ramp_to": 100, "duration": "4s"},
            ]}, f)
        m = self.mock("--latency", "5ms")
        r = self.run_vlmload("--url", m.url, "--config", scen, "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        phases = r.summary["phases"]
        self.assertEqual([p["name"] for p in phases], ["images", "text", "ramp"])
        # Split the mock's record at the phase boundaries the log marks.
        marks = [l["wall_ms"] for l in r.log if l.get("event") == "phase"]
        self.assertEqual(len(marks), 3)
        recs = m.records()
        bounds = marks[1:] + [float("inf")]
        got = []
        for lo, hi in zip(marks, bounds):
            got.append([rec for rec in recs if lo <= rec["wall_ms"] < hi])
        want = [(60 * 4, 1.0), (30 * 4, 0.0), ((20 + 100) / 2 * 4, 0.0)]
        for (n, ratio), rs, lo, hi in zip(want, got, marks, bounds):
            self.assertLess(abs(len(rs) - n) / n, 0.05, (n, len(rs)))
            # A request sent just before a boundary reaches the mock just after it: the mix is
            # judged on the records clear of the boundaries by 100 ms.
            clear = [rec for rec in rs if lo + 100 <= rec["wall_ms"] < hi - 100]
            share = sum(1 for rec in clear if rec["images"]) / len(clear)
            self.assertAlmostEqual(share, ratio, delta=0.01)
        # The ramp's second half carries more than its first.
        ramp = sorted(rec["t_us"] for rec in got[2])
        mid = (ramp[0] + ramp[-1]) / 2
        self.assertGreater(sum(1 for t in ramp if t > mid), 1.5 * sum(1 for t in ramp if t <= mid))
        self.assertEqual(len(m.records("/flush_cache")), 6)
        self.assertEqual({row["phase"] for row in r.timeline} - {"stopping", "flush"},
                         {"images", "text", "ramp"})

    def test_sweep_marks_the_knee(self):
        m = self.mock("--latency", "5ms", "--latency-per-inflight", "5ms")
        r = self.run_vlmload("--url", m.url, "--sweep", "rate=20:180:40", "--duration", "2s")
        self.assertEqual(r.rc, 0, r.stderr)
        phases = r.summary["phases"]
        self.assertEqual([p["target_rate"] for p in phases], [20, 60, 100, 140, 180])
        p50 = [p["latency_p50_ms"] for p in phases]
        self.assertEqual(p50, sorted(p50))  # latency grows with load
        knees = [p["name"] for p in phases if p["knee"]]
        self.assertEqual(len(knees), 1)
        self.assertIn(knees[0], ("rate=100", "rate=140", "rate=180"))
        self.assertIn("<- knee", r.stdout)

    def test_example_scenarios_parse(self):
        for name in ("seed-experiment.json", "ramp-to-knee.json"):
            r = self.run_vlmload("--config", os.path.join(ROOT, "tools", "scenarios", name),
                                 "--dry-run", "--images", os.path.join(ROOT, "corpus"))
            self.assertEqual(r.rc, 0, r.stderr)


if __name__ == "__main__":
    harness.main()
