"""vlmload's own text stays within 100 columns: the start banner (stderr) and the summary (stdout)
wrap at field boundaries whatever the run, with images of many sizes, flushes, streaming, several
servers, a long model name and a streamed sweep."""
import os

import harness

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "corpus")
MODEL = "vision-" + "m" * 65 + "-80chars"  # 80 characters


class WidthTest(harness.MockTestCase):
    def assert_within_100(self, r):
        for name, text in (("stdout", r.stdout), ("stderr", r.stderr)):
            for line in text.splitlines():
                self.assertLessEqual(len(line), 100, "%s line of %d columns:\n%s\n\nall of it:\n%s"
                                     % (name, len(line), line, text))

    def test_banner_and_summary_fit_100_columns(self):
        self.assertEqual(len(MODEL), 80)
        a, b = self.mock(), self.mock()
        r = self.run_vlmload("--url", a.url, "--url", b.url, "--model", MODEL, "--rate", "100",
                             "--requests", "300", "--images", CORPUS, "--flush-every", "50",
                             "--stream", "--no-progress")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assert_within_100(r)
        # Each server got its share with the whole model name, and the text names it whole.
        for m in (a, b):
            got = m.records()
            self.assertGreater(len(got), 100)
            self.assertTrue(all(rec["model"] == MODEL for rec in got), got[0])
        self.assertIn(MODEL, r.stderr)
        self.assertIn(MODEL, r.stdout)
        # The wrapped lines are all there: banner, flushes, formats and sizes, both servers.
        self.assertIn("vlmload: " + a.url, r.stderr)
        self.assertIn("drained flush every 50 requests", r.stderr)
        self.assertIn("  formats    png ", r.stdout)
        self.assertIn("  flushes    6 (ok 6,", r.stdout)
        for m in (a, b):
            self.assertIn("  server     " + m.url + "  sent ", r.stdout)

    def test_streamed_sweep_table_fits_100_columns(self):
        m = self.mock("--ttft", "2ms", "--itl", "1ms")
        r = self.run_vlmload("--url", m.url, "--model", MODEL, "--sweep", "rate=20:60:20",
                             "--duration", "1s", "--stream", "--no-progress")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assert_within_100(r)
        header = [l for l in r.stdout.splitlines() if l.startswith("  phase ")]
        self.assertEqual(len(header), 1, r.stdout)
        self.assertIn("tpot p50", header[0])


if __name__ == "__main__":
    harness.main()
