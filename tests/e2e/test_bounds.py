"""Counts that add up and runs that end: every arrival that came due is sent, dropped or counted
unsent; the rates share one time base; --duration and signals bound a run against a server that
hangs. Each figure is held to what the mock received."""
import json
import os
import signal
import subprocess
import time

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "corpus")


def block(text, label):
    """The summary's line that starts with label, with the lines it wraps onto, as one line."""
    lines = text.splitlines()
    for i, l in enumerate(lines):
        if l.startswith("  " + label + " "):
            out = [l]
            for more in lines[i + 1:]:
                if not more.startswith(" " * 13) or not more.strip():
                    break
                out.append(more.strip())
            return " ".join(out)
    raise AssertionError("no %r line in:\n%s" % (label, text))


class ArrivalsTest(harness.MockTestCase):
    def test_arrivals_waiting_for_a_slot_are_counted_unsent(self):
        # 50/s for 2 s against a server that never answers, 16 slots: 16 requests go out, the
        # rest come due and wait for a slot until the duration ends.
        m = self.mock("--latency", "100s")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--arrival", "constant",
                             "--concurrency", "16", "--duration", "2s", "--grace", "200ms",
                             "--quiet")
        req = r.summary["requests"]
        received = m.stats()["requests_total"]
        self.assertEqual(req["sent"], received)
        self.assertEqual(received, 16)
        # Constant arrivals at 50/s from t0: 100 come due in 2 s (the one at 2 s is past it).
        self.assertEqual(req["arrivals"], 100, req)
        self.assertEqual(req["arrivals"], req["sent"] + req["dropped"] + req["unsent"], req)
        self.assertEqual(req["unsent"], req["arrivals"] - received, req)
        self.assertEqual(req["delayed"], 0, req)  # the one waiting at the end was never sent
        # The achieved rate is over the load's time: 16 sent in 2 s.
        self.assertAlmostEqual(r.summary["rate"]["achieved"], received / 2.0, delta=0.5)
        self.assertEqual(r.summary["errors"]["cancelled"], 16)

    def test_text_summary_names_unsent_arrivals(self):
        m = self.mock("--latency", "100s")
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--arrival", "constant",
                             "--concurrency", "4", "--duration", "1s", "--grace", "100ms")
        received = m.stats()["requests_total"]
        self.assertEqual(received, 4)
        req = r.summary["requests"]
        line = block(r.stdout, "requests")
        self.assertIn("arrivals %d " % req["arrivals"], line)
        self.assertIn("sent %d " % received, line)
        self.assertIn("unsent %d" % (req["arrivals"] - received), line)

    def test_drop_mode_rate_is_over_the_load(self):
        # 100/s against 1 s replies with 10 slots, dropping: 10 sent a second at most.
        m = self.mock("--latency", "1s")
        r = self.run_vlmload("--url", m.url, "--rate", "100", "--arrival", "constant",
                             "--concurrency", "10", "--duration", "2s", "--on-full", "drop",
                             "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        req = r.summary["requests"]
        received = len(m.records())
        self.assertEqual(req["sent"], received)
        self.assertEqual(req["arrivals"], req["sent"] + req["dropped"] + req["unsent"], req)
        # 20 sent (10, then 10 more when the first finish at 1 s) over 2 s of load.
        self.assertAlmostEqual(r.summary["rate"]["achieved"], received / 2.0, delta=1.0)


class RateBaseTest(harness.MockTestCase):
    def test_rates_share_the_load_time_outside_flush_pauses(self):
        # Drained flushes after every 50 of 300 requests against 250 ms replies: each pause
        # waits for the requests in flight, so the pauses are a large part of the run.
        m = self.mock("--profile", "sglang", "--latency", "250ms")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "300",
                             "--flush-every", "50", "--stream", "--max-tokens", "8")
        self.assertEqual(r.rc, 0, r.stderr)
        st = m.stats()
        recs = m.records()
        self.assertEqual(len(recs), 300)
        rate = r.summary["rate"]
        # Every request succeeded: ok/s is the achieved rate, on the same base.
        self.assertEqual(r.summary["requests"]["ok"], 300)
        self.assertAlmostEqual(rate["ok_per_s"], rate["achieved"], places=9)
        self.assertLess(abs(rate["achieved"] - 50) / 50, 0.03, rate)
        # Tokens a second on the same base: the mock's own count of tokens sent.
        self.assertAlmostEqual(r.summary["tokens"]["completion_per_s"] / rate["achieved"],
                               st["completion_tokens_total"] / 300.0, places=6)
        # The pauses are material: the mock saw the requests arrive well below 50/s overall, so
        # rates that put the pauses in would read far below the achieved rate.
        span = (recs[-1]["t_us"] - recs[0]["t_us"]) / 1e6
        self.assertLess(299 / span, 0.92 * 50, span)
        self.assertGreater(r.summary["paused_s"], 0.08 * span)
        line = block(r.stdout, "rate")
        self.assertIn("achieved %.2f/s" % rate["achieved"], line)
        self.assertIn("ok %.2f/s" % rate["ok_per_s"], line)
        self.assertIn("per second of load", line)

    def test_observed_maximum_in_flight_and_the_cap(self):
        # 8 slots against 100 ms replies at 20/s: about 2 in flight, never the cap.
        m = self.mock("--latency", "100ms")
        r = self.run_vlmload("--url", m.url, "--rate", "20", "--requests", "60",
                             "--concurrency", "8")
        self.assertEqual(r.rc, 0, r.stderr)
        most = r.summary["requests"]["max_in_flight"]
        # vlmload counts a request in flight from before its first byte to after its last, so
        # it sees at least as many at once as the mock did.
        self.assertGreaterEqual(most, m.stats()["requests_in_flight_max"])
        self.assertLess(most, 8)
        self.assertEqual(r.summary["max_concurrency"], 8)
        line = block(r.stdout, "in flight")
        self.assertIn("max %d" % most, line)
        self.assertIn("cap 8", line)
        self.assertNotIn("max_concurrency", line)

        # A closed loop fills its cap: the mock's own gauge agrees with the maximum.
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--requests", "40",
                             "--concurrency", "8", "--quiet")
        self.assertEqual(r.summary["requests"]["max_in_flight"], 8)


class BoundsTest(harness.MockTestCase):
    def test_duration_bounds_a_run_against_a_hanging_server(self):
        m = self.mock("--latency", "100s")
        t0 = time.monotonic()
        r = self.run_vlmload("--url", m.url, "--rate", "10", "--duration", "1s",
                             "--concurrency", "64", "--grace", "1s", timeout=60)
        took = time.monotonic() - t0
        self.assertLess(took, 2.0 + 1.5 * harness.SLACK, r.stderr)
        received = m.stats()["requests_total"]
        self.assertGreater(received, 3)
        self.assertEqual(r.summary["requests"]["sent"], received)
        self.assertEqual(r.summary["errors"]["cancelled"], received)
        self.assertEqual(len(r.log), received)
        self.assertIn("--duration reached: %d in flight get --grace 1s, then are cancelled"
                      % received, r.stderr)

    def test_default_grace_is_said_and_a_second_signal_quits(self):
        m = self.mock("--latency", "100s")
        run = harness.Started(self.tmp, "--url", m.url, "--rate", "10", "--duration", "1s",
                              "--concurrency", "64")
        # Wait for the announcement of the grace period, then two signals.
        deadline = time.monotonic() + 10 * harness.SLACK
        time.sleep(1.5)
        run.proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        t0 = time.monotonic()
        run.proc.send_signal(signal.SIGINT)
        r = run.finish(timeout=max(1, deadline - time.monotonic()) + 5)
        self.assertLess(time.monotonic() - t0, 2.0 * harness.SLACK)
        self.assertIn("in flight get --grace 30s, then are cancelled", r.stderr)
        received = m.stats()["requests_total"]
        self.assertEqual(r.summary["errors"]["cancelled"], received)
        self.assertEqual(len(r.log), received)

    def test_signal_after_the_schedule_ended_honours_the_grace(self):
        # All 5 requests are sent and hang: admission is over, the run waits for their replies.
        # A SIGTERM then gives them the grace period, and the run ends when it is over.
        m = self.mock("--latency", "100s")
        run = harness.Started(self.tmp, "--url", m.url, "--rate", "50", "--requests", "5",
                              "--grace", "1s")
        time.sleep(1.0)
        self.assertEqual(m.stats()["requests_total"], 5)
        t0 = time.monotonic()
        run.proc.send_signal(signal.SIGTERM)
        r = run.finish(timeout=30)
        took = time.monotonic() - t0
        self.assertGreater(took, 0.9)
        self.assertLess(took, 1.0 + 1.5 * harness.SLACK)
        self.assertEqual(r.summary["errors"]["cancelled"], 5)
        self.assertEqual(len(r.log), 5)


class ServerGoneTest(harness.MockTestCase):
    """A server that dies in the middle of a run: one headline, exit status 1, no growth verdict
    on the series that ended with it, never curl's words for vlmload's own abort."""

    def start_then_kill(self, m, after_s, *args):
        run = harness.Started(self.tmp, "--url", m.url, "--rate", "50", "--images", CORPUS,
                              "--no-progress", *args)
        time.sleep(after_s)
        answered = m.stats()["requests_completed_total"]
        m.proc.kill()
        m.proc.wait()
        return run.finish(timeout=60), answered

    def test_monitored_server_that_exits(self):
        # Killed 2 s into a 30 s run: said at once, and the run stops once nothing has answered
        # for 10 s (a restart would have answered by then).
        m = self.mock("--latency", "20ms", "--leak-kb-per-image", "64")
        pid = m.proc.pid
        t0 = time.monotonic()
        r, answered = self.start_then_kill(m, 2.0, "--duration", "30s", "--monitor-pid",
                                           "mock=%d" % pid, "--sample-every", "100ms",
                                           "--analyze")
        took = time.monotonic() - t0
        self.assertGreater(took, 11)
        self.assertLess(took, 20)  # stopped, not sent on to 30 s
        self.assertEqual(r.rc, 1, r.stderr)
        g = r.summary["server_gone"]
        self.assertEqual((g["how"], g["pid"], g["label"]), ("exited", pid, "mock"), g)
        self.assertIsNone(g["back_at_s"])
        self.assertGreater(g["at_s"], 1.5)
        self.assertLess(g["at_s"], 3.0 * harness.SLACK)
        self.assertEqual(r.summary["stop_reason"], "server_gone")
        # Every request the mock did not answer failed; those that found nobody listening are the
        # ones the headline counts.
        req = r.summary["requests"]
        self.assertGreaterEqual(req["ok"], answered)
        door = [l for l in r.log if l["error"] in ("connect", "connect_timeout")]
        self.assertEqual(g["requests_after"], len(door))
        self.assertGreater(len(door), 400)  # 10 s at 50/s
        headline = "the server (pid %d, mock) exited at %.1f s; the %d requests after it could " \
                   "not connect" % (pid, g["at_s"], len(door))
        self.assertIn(headline, " ".join(r.stdout.split()))
        self.assertIn("stopping: nothing answered for 10 s (--keep-going sends anyway)", r.stderr)
        # No growth verdict from the seconds the server lived.
        verdicts = {s["series"]: s["verdict"] for s in r.summary["memory_analysis"]["series"]}
        self.assertEqual(verdicts["rss_mb.mock"], "ended-early", verdicts)
        for text in (r.stdout, r.stderr, json.dumps(r.log)):
            self.assertNotIn("aborted by", text)
            self.assertNotIn("callback", text)

    def test_connections_it_never_accepted_count_as_after(self):
        # The mock stops for 0.5 s, then is killed: the connections sent to it while it stood still
        # were never accepted, are refused when it dies, and are among the requests that could not
        # connect after it, though they were sent before it went.
        m = self.mock("--latency", "10ms")
        pid = m.proc.pid
        run = harness.Started(self.tmp, "--url", m.url, "--rate", "100", "--duration", "3s",
                              "--keep-going", "--no-progress", "--monitor-pid", "mock=%d" % pid,
                              "--sample-every", "100ms")
        time.sleep(1.0)
        m.proc.send_signal(signal.SIGSTOP)
        time.sleep(0.5)
        m.proc.kill()
        m.proc.wait()
        r = run.finish(timeout=60)
        self.assertEqual(r.rc, 1, r.stderr)
        g = r.summary["server_gone"]
        self.assertEqual((g["how"], g["pid"]), ("exited", pid), g)
        door = [l for l in r.log if l["error"] in ("connect", "connect_timeout")]
        self.assertEqual(g["requests_after"], len(door))
        waited = [l for l in door if l["latency_ms"] > 250]
        self.assertGreater(len(waited), 0, door[:3])  # sent while it stood still

    def test_refusals_after_success_stop_the_run(self):
        m = self.mock("--latency", "10ms")
        t0 = time.monotonic()
        r, answered = self.start_then_kill(m, 1.5, "--duration", "30s")
        self.assertLess(time.monotonic() - t0, 20)
        self.assertEqual(r.rc, 1, r.stderr)
        g = r.summary["server_gone"]
        self.assertEqual((g["how"], g["pid"]), ("refused", None), g)
        self.assertEqual(r.summary["stop_reason"], "server_gone")
        refused = [l for l in r.log if l["error"] == "connect"]
        self.assertEqual(g["requests_after"], len(refused))
        self.assertGreaterEqual(len(refused), 400)
        self.assertIn("the server at %s stopped accepting connections at" % m.url, r.stdout)

    def test_a_restart_is_said_and_the_run_goes_on(self):
        first = self.mock("--latency", "10ms")
        port = first.port
        run = harness.Started(self.tmp, "--url", first.url, "--rate", "50", "--duration", "4s",
                              "--no-progress")
        time.sleep(1.0)
        first.proc.kill()
        first.proc.wait()
        time.sleep(1.0)
        second = self.mock("--latency", "10ms", "--port", str(port))
        r = run.finish(timeout=60)
        self.assertEqual(r.rc, 0, r.stderr)
        g = r.summary["server_gone"]
        self.assertEqual(g["how"], "refused")
        self.assertGreater(g["back_at_s"], g["at_s"])
        # It answered again once the restarted server took requests: about 2 s in.
        self.assertGreater(len(second.records()), 50)
        self.assertGreater(g["back_at_s"], 1.8)
        self.assertLess(g["back_at_s"], 2.0 + 1.0 * harness.SLACK)
        self.assertIn("it answered again at %.1f s" % g["back_at_s"], " ".join(r.stdout.split()))
        self.assertEqual(r.summary["stop_reason"], "duration")
        refused = [l for l in r.log if l["error"] == "connect"]
        self.assertEqual(g["requests_after"], len(refused))

    def test_keep_going_sends_on_and_still_fails_the_run(self):
        m = self.mock("--latency", "10ms")
        r, answered = self.start_then_kill(m, 1.0, "--duration", "3s", "--keep-going")
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertEqual(r.summary["stop_reason"], "duration")
        g = r.summary["server_gone"]
        refused = [l for l in r.log if l["error"] == "connect"]
        self.assertEqual(g["requests_after"], len(refused))
        self.assertGreater(len(refused), 50)  # 2 s more at 50/s

    def test_a_server_that_lives_gives_no_headline(self):
        m = self.mock("--latency", "10ms")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "50", "--monitor-pid",
                             "mock=%d" % m.proc.pid, "--sample-every", "100ms", "--analyze")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIsNone(r.summary["server_gone"])
        self.assertNotIn("ended-early", r.stdout)


if __name__ == "__main__":
    harness.main()
