"""--monitor-tree against a real process tree (proctree.py): per-process series named by command
name, a child started late, one that exits, the total against its parts, a known allocation."""
import os
import signal
import subprocess
import sys
import time

import harness

HERE = os.path.dirname(os.path.abspath(__file__))


class TreeTest(harness.MockTestCase):
    def start_tree(self, exit_s, late_s):
        ready = os.path.join(self.tmp, "tree-ready")
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "proctree.py"), ready,
                              str(exit_s), str(late_s)], start_new_session=True)
        self.addCleanup(lambda: (os.killpg(p.pid, signal.SIGKILL), p.wait()))
        deadline = time.monotonic() + 10
        while not os.path.exists(ready):
            self.assertLess(time.monotonic(), deadline, "the tree did not start")
            time.sleep(0.02)
        return p.pid

    def test_tree_series_follow_the_processes(self):
        m = self.mock("--latency", "5ms")
        root = self.start_tree(1.0, 1.5)
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--duration", "4s",
                             "--monitor-tree", str(root), "--sample-every", "200ms",
                             "--anatomy-every", "200ms")
        self.assertEqual(r.rc, 0, r.stderr)
        L = "treeroot"  # the root's command name is the label
        names = ["treeroot", "tree-worker", "tree-worker#2", "tree-grand", "tree-short",
                 "sglang::scheduler_TP0", "tree-late"]
        cols = r.timeline[0].keys()
        kinds = ("rss_mb", "hwm_mb", "anon_mb", "file_mb", "shmem_mb", "heap_mb", "device_mb",
                 "arenas")
        for n in names:
            for kind in kinds:
                self.assertIn("%s.%s/%s" % (kind, L, n), cols)
        self.assertIn("rss_mb." + L, cols)

        def first_last(n, kind="rss_mb"):
            rows = [i for i, row in enumerate(r.timeline) if row["%s.%s/%s" % (kind, L, n)]]
            return rows[0], rows[-1]

        n_rows = len(r.timeline)
        self.assertGreaterEqual(n_rows, 15)
        # The late child's series begins later; the exited one's ends; the others run through.
        late0, late1 = first_last("tree-late")
        short0, short1 = first_last("tree-short")
        self.assertGreater(late0, 3)
        self.assertEqual(late1, n_rows - 1)
        self.assertEqual(short0, 0)
        self.assertLess(short1, n_rows - 4)
        for n in ("treeroot", "tree-worker", "tree-worker#2", "tree-grand"):
            self.assertEqual(first_last(n), (0, n_rows - 1), n)
        # The kinds follow the same processes: read while each lives, the smaps ones (heap_mb)
        # from a read started as soon as it is found.
        for kind in ("anon_mb", "heap_mb"):
            k_late0, k_late1 = first_last("tree-late", kind)
            self.assertLessEqual(late0, k_late0, kind)
            self.assertLessEqual(k_late0, late0 + 3, kind)
            self.assertEqual(k_late1, n_rows - 1, kind)
            self.assertLessEqual(first_last("tree-short", kind)[1], short1 + 1, kind)
            # A smaps read takes a while (and waits for the loop's next turn): one row or two.
            k0, k1 = first_last("tree-worker", kind)
            self.assertLessEqual(k0, 0 if kind == "anon_mb" else 2, kind)
            self.assertEqual(k1, n_rows - 1, kind)
        # The total is the sum of its parts at every sample.
        for row in r.timeline:
            parts = [float(row["rss_mb.%s/%s" % (L, n)]) for n in names
                     if row["rss_mb.%s/%s" % (L, n)]]
            self.assertAlmostEqual(float(row["rss_mb." + L]), sum(parts), delta=1e-4, msg=row)
            for kind in ("anon_mb", "file_mb", "shmem_mb"):
                parts = [float(row["%s.%s/%s" % (kind, L, n)]) for n in names
                         if row["%s.%s/%s" % (kind, L, n)]]
                self.assertAlmostEqual(float(row[kind + "." + L]), sum(parts), delta=1e-4)
        # The known allocations show in their own series: 64 MiB in the first worker (the
        # interpreter itself is some 10 MB more), 8 in the second, 16 in the grandchild, 32 late.
        last = r.timeline[-1]
        for n, mib in (("tree-worker", 64), ("tree-worker#2", 8), ("tree-grand", 16),
                       ("tree-late", 32)):
            v = float(last["rss_mb.%s/%s" % (L, n)])
            self.assertGreaterEqual(v, mib, n)
            self.assertLess(v, mib + 30, n)
            anon = float(last["anon_mb.%s/%s" % (L, n)])  # private pages, written: anonymous
            self.assertGreaterEqual(anon, mib, n)
            self.assertLess(anon, mib + 30, n)
        # The summary lists the tree and every process seen under it.
        tree = [p for p in r.summary["processes"] if p.get("tree") == L][0]
        self.assertEqual(tree["pid"], root)
        seen = {p["name"]: p for p in tree["processes"]}
        self.assertEqual(sorted(seen), sorted(names))
        self.assertFalse(seen["tree-short"]["present"])
        self.assertTrue(seen["tree-late"]["present"])
        self.assertGreater(seen["tree-late"]["first_seen_ms"],
                           seen["tree-worker"]["first_seen_ms"] + 1000)
        self.assertLess(seen["tree-short"]["last_seen_ms"], seen["tree-late"]["first_seen_ms"])
        # The padded timeline reads back whole.
        p = subprocess.run([harness.VLMLOAD, "analyze", os.path.join(self.tmp, "timeline.csv"),
                            "--quiet", "--output", os.path.join(self.tmp, "a.json")],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_missing_root_is_refused(self):
        gone = subprocess.Popen(["true"])
        gone.wait()
        p = subprocess.run([harness.VLMLOAD, "--url", "http://127.0.0.1:9", "--requests", "1",
                            "--monitor-tree", "srv=%d" % gone.pid], capture_output=True,
                           timeout=30)
        self.assertEqual(p.returncode, 2)
        err = p.stderr.decode()
        self.assertIn("--monitor-tree srv=%d" % gone.pid, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        p = subprocess.run([harness.VLMLOAD, "--url", "http://127.0.0.1:9", "--requests", "1",
                            "--monitor-tree", "x=abc"], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("is not a process ID", p.stderr.decode())


if __name__ == "__main__":
    harness.main()
