"""Closed loop and the concurrency cap, seen from the mock's in-flight gauge."""
import harness


class ConcurrencyTest(harness.MockTestCase):
    def test_closed_loop_keeps_cap_full(self):
        # 64 slots against 50 ms replies: Little's law gives 1280 req/s when the loop refills
        # every slot at once.
        m = self.mock("--latency", "50ms")
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "64",
                             "--duration", "3s", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        st = m.stats()
        self.assertEqual(st["requests_in_flight_max"], 64)
        self.assertEqual(r.summary["requests"]["failed"], 0)
        tput = r.summary["requests"]["ok"] / r.summary["duration_s"]
        self.assertGreater(tput, 0.85 / harness.SLACK * 64 / 0.050, r.summary["requests"])

    def test_closed_loop_saturates_mock(self):
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "64",
                             "--duration", "2s", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["requests"]["failed"], 0)
        self.assertEqual(m.stats()["requests_total"], r.summary["requests"]["sent"])
        self.assertGreater(r.summary["requests"]["ok"], 1000)
        # The mock sends nothing unasked: no reused connection may be taken for a stale one.
        self.assertEqual(r.summary["requests"]["retried"], 0)
        print("closed loop, 64 connections, zero-latency mock: %.0f req/s"
              % r.summary["rate"]["ok_per_s"])

    def test_2000_in_flight(self):
        m = self.mock("--latency", "2s")
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "2000",
                             "--requests", "4000", "--quiet", timeout=60)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(m.stats()["requests_in_flight_max"], 2000)
        self.assertEqual(r.summary["requests"]["ok"], 4000)
        self.assertEqual(len(m.records()), 4000)

    def test_open_loop_cap_queue_and_drop(self):
        # 100/s against 1 s replies with 10 slots: at most 10/s can start.
        m = self.mock("--latency", "1s")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--arrival", "constant",
                             "--concurrency", "10", "--duration", "2s", "--on-full", "drop",
                             "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        req = r.summary["requests"]
        self.assertGreater(req["dropped"], 150)
        self.assertEqual(req["sent"] + req["dropped"], req["arrivals"])
        self.assertEqual(m.stats()["requests_in_flight_max"], 10)
        self.assertEqual(len(m.records()), req["sent"])

        r = self.run_vlmload("--url", m.url, "--rate", "100", "--arrival", "constant",
                             "--concurrency", "10", "--requests", "40", "--quiet")
        req = r.summary["requests"]
        self.assertEqual(req["dropped"], 0)
        self.assertEqual(req["sent"], 40)
        self.assertGreater(req["delayed"], 20)
        # Queued arrivals keep their intended time: their send lag shows the wait.
        self.assertGreater(r.summary["send_lag_ms"]["max"], 1000)


if __name__ == "__main__":
    harness.main()
