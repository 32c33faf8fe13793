"""Open-loop schedule against the mock: the mock's own count and inter-arrival statistics."""
import harness


class ScheduleTest(harness.MockTestCase):
    def check_rate(self, arrival, n, rate, cv_lo, cv_hi, steady_share=None):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", str(rate), "--requests", str(n),
                             "--arrival", arrival, "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertEqual(len(recs), n)
        self.assertEqual(m.stats()["requests_total"], n)
        s = r.summary
        self.assertEqual(s["requests"]["sent"], n)
        self.assertEqual(s["requests"]["ok"], n)
        self.assertLess(abs(s["rate"]["achieved"] - rate) / rate, 0.02, s["rate"])
        t = sorted(rec["t_us"] for rec in recs)
        # The mock's arrival rate, measured on its own clock.
        self.assertLess(abs((n - 1) / ((t[-1] - t[0]) / 1e6) - rate) / rate, 0.02)
        if harness.SLACK > 1:
            # Under the sanitizers both processes run several times slower and the mock's own
            # timestamps carry its slowdown: the gaps are judged where they are made, on
            # vlmload's send times.
            t = sorted(l["sent_ms"] * 1000 for l in r.log)
        gaps = [b - a for a, b in zip(t, t[1:])]
        if steady_share is not None:
            # A constant schedule: nearly every gap is the period. Judged by the share of gaps
            # within 20% of it rather than by their CV, which a few gaps stretched by the
            # scheduler of a busy machine (in either process) dominate; Poisson gaps at this rate
            # fall there about 15% of the time, gaps sent in pairs never.
            period = 1e6 / rate
            near = sum(1 for g in gaps if abs(g - period) <= 0.2 * period) / len(gaps)
            self.assertGreaterEqual(near, steady_share, "share of gaps near the period")
        else:
            cv = harness.cv(gaps)
            self.assertGreaterEqual(cv, cv_lo, "inter-arrival CV %.3f" % cv)
            self.assertLessEqual(cv, cv_hi, "inter-arrival CV %.3f" % cv)
        # One log line per request, and the summary's send lag is recorded for all of them.
        self.assertEqual(len(r.log), n)
        self.assertEqual(s["send_lag_ms"]["count"], n)

    def test_poisson_200(self):
        self.check_rate("poisson", 2000, 200, 1 - 0.1 * harness.SLACK, 1 + 0.1 * harness.SLACK)

    def test_constant_200(self):
        self.check_rate("constant", 1000, 200, None, None, steady_share=0.8)

    def test_gamma_cv2(self):
        self.check_rate("gamma:2", 1500, 300, 2 - 0.4 * harness.SLACK, 2 + 0.4 * harness.SLACK)


if __name__ == "__main__":
    harness.main()
