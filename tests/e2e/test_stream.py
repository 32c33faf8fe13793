"""Streaming replies: TTFT and inter-token latency match the mock's configured timing."""
import harness


class StreamTest(harness.MockTestCase):
    def test_ttft_itl(self):
        m = self.mock("--ttft", "50ms", "--itl", "10ms", "--tokens", "20")
        r = self.run_vlmload("--url", m.url, "--stream", "--rate", "20", "--requests", "60",
                             "--max-tokens", "64", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        s = r.summary
        self.assertEqual(s["requests"]["ok"], 60)
        self.assertLess(abs(s["ttft_ms"]["p50"] - 50), 1.0 * harness.SLACK, s["ttft_ms"])
        self.assertLess(abs(s["itl_ms"]["p50"] - 10), 1.0 * harness.SLACK, s["itl_ms"])
        self.assertEqual(s["itl_ms"]["count"], 60 * 19)
        self.assertEqual(s["tokens"]["completion"], 60 * 20)
        self.assertEqual(s["median_ttft_ms"], s["ttft_ms"]["p50"])
        for line in r.log:
            self.assertIsNone(line["error"])
            self.assertEqual(line["completion_tokens"], 20)
            self.assertGreater(line["ttft_ms"], 49)

    def test_max_tokens_caps_reply(self):
        m = self.mock("--tokens", "50")
        r = self.run_vlmload("--url", m.url, "--stream", "--rate", "50", "--requests", "20",
                             "--max-tokens", "5", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["tokens"]["completion"], 100)
        self.assertTrue(all(rec["max_tokens"] == 5 and rec["stream"] for rec in m.records()))


if __name__ == "__main__":
    harness.main()
