"""Multi-turn conversations (--turns, --think-time) against the mock, judged by its record: turn k
carries 2k - 1 messages, each earlier assistant message exactly the reply the mock sent to the
earlier turn of that conversation (its replies differ per request and hold characters JSON must
escape), each earlier image again byte for byte; the next turn leaves only after the reply plus the
think time; conversations start on the arrival schedule and interleave; a failed turn ends its
conversation; Ctrl-C cuts the conversations with every request logged; the summary has the
figures per turn."""
import os
import subprocess

import harness

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "corpus")


def cli(*args):
    return subprocess.run([harness.VLMLOAD, *args], capture_output=True, text=True, timeout=60)


def conversations(test, recs):
    """The mock's records grouped into conversations by what they carried: a record with history
    belongs after the record whose reply is its last assistant message. Returns lists of records,
    first turn first."""
    by_reply = {}
    for rec in recs:
        if rec["reply"] is not None:
            test.assertNotIn(rec["reply"], by_reply, "two replies alike")
            by_reply[rec["reply"]] = rec
    parent = {}
    for rec in recs:
        test.assertEqual(rec["messages"], len(rec["roles"]), rec)
        if rec["messages"] > 1:
            test.assertIn(rec["assistant"][-1], by_reply, rec)
            parent[rec["seq"]] = by_reply[rec["assistant"][-1]]
    chains = []
    for rec in recs:
        if rec["messages"] == 1:
            chain, cur = [rec], rec
            while True:
                nxt = [r for r in recs if r["seq"] in parent and parent[r["seq"]] is cur]
                test.assertLessEqual(len(nxt), 1, "two turns after one reply")
                if not nxt:
                    break
                cur = nxt[0]
                chain.append(cur)
            chains.append(chain)
    test.assertEqual(sum(len(c) for c in chains), len(recs), "a record in no conversation")
    return chains


class TurnsTest(harness.MockTestCase):
    def check_history(self, chains, images):
        for chain in chains:
            for k, rec in enumerate(chain):
                self.assertEqual(rec["status"], 200, rec)
                self.assertEqual(rec["messages"], 2 * k + 1, rec)
                self.assertEqual(rec["roles"], ["user", "assistant"] * k + ["user"])
                # Every earlier reply, exactly as the mock sent it, in order.
                self.assertEqual(rec["assistant"], [c["reply"] for c in chain[:k]], rec)
                if k:
                    # The earlier turns' images again, the same decoded pixels, then new ones.
                    before = chain[k - 1]["images"]
                    self.assertEqual([i["hash"] for i in rec["images"][:len(before)]],
                                     [i["hash"] for i in before])
                    self.assertEqual([i["bytes"] for i in rec["images"][:len(before)]],
                                     [i["bytes"] for i in before])
                if images:
                    self.assertEqual(len(rec["images"]), k + 1, rec)

    def run_three(self, stream):
        m = self.mock("--latency", "10ms", "--tokens", "4")
        args = ["--url", m.url, "--turns", "3", "--think-time", "50ms", "--rate", "20",
                "--arrival", "constant", "--requests", "30", "--quiet", "--images", CORPUS,
                "--unique-images", "--images-per-request", "1"]
        if stream:
            args.append("--stream")
        r = self.run_vlmload(*args)
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertEqual(len(recs), 30)
        self.assertEqual(sorted(rec["messages"] for rec in recs), [1] * 10 + [3] * 10 + [5] * 10)
        for rec in recs:
            self.assertEqual(rec["stream"], stream)
        chains = conversations(self, recs)
        self.assertEqual(len(chains), 10)
        self.assertEqual(sorted(len(c) for c in chains), [3] * 10)
        self.check_history(chains, images=True)
        # Unique images: a conversation's later turns resend its own, no other's.
        firsts = [c[0]["images"][0]["hash"] for c in chains]
        self.assertEqual(len(set(firsts)), 10)
        # The request log names each request's conversation and turn.
        self.assertEqual(len(r.log), 30)
        self.assertEqual(sorted(l["turn"] for l in r.log), [1] * 10 + [2] * 10 + [3] * 10)
        self.assertEqual(len({l["conversation"] for l in r.log}), 10)
        # Turns of one conversation leave in order, one at a time.
        per = {}
        for l in sorted(r.log, key=lambda l: l["sent_ms"]):
            per.setdefault(l["conversation"], []).append(l)
        for ls in per.values():
            self.assertEqual([l["turn"] for l in ls], [1, 2, 3])
            for a, b in zip(ls, ls[1:]):
                self.assertGreaterEqual(b["sent_ms"], a["done_ms"])
        # The summary: per-turn figures and the conversations' ends.
        conv = r.summary["conversations"]
        self.assertEqual((conv["started"], conv["completed"], conv["failed"], conv["cut"]),
                         (10, 10, 0, 0))
        self.assertEqual([t["turn"] for t in conv["turns"]], [1, 2, 3])
        for t in conv["turns"]:
            self.assertEqual((t["requests"], t["ok"], t["failed"]), (10, 10, 0))
            self.assertEqual(t["e2el_ms"]["count"], 10)
            self.assertGreaterEqual(t["e2el_ms"]["p50"], 9)
            self.assertEqual(t["ttft_ms"]["count"], 10 if stream else 0)
        self.assertEqual(r.summary["requests"]["sent"], 30)
        self.assertEqual(r.summary["requests"]["arrivals"], 10)
        return r

    def test_three_turns_streamed(self):
        self.run_three(True)

    def test_three_turns_not_streamed(self):
        self.run_three(False)

    def test_think_time_after_each_reply(self):
        m = self.mock("--latency", "40ms", "--tokens", "3")
        r = self.run_vlmload("--url", m.url, "--turns", "3", "--think-time", "250ms", "--rate",
                             "10", "--requests", "15", "--quiet", "--stream")
        self.assertEqual(r.rc, 0, r.stderr)
        chains = conversations(self, m.records())
        self.assertEqual(len(chains), 5)
        self.check_history(chains, images=False)
        for chain in chains:
            for a, b in zip(chain, chain[1:]):
                # The mock took the earlier body at a, answered 40 ms later; the next turn came
                # at least the think time after that.
                gap_ms = (b["t_us"] - a["t_us"]) / 1000
                self.assertGreaterEqual(gap_ms, 40 + 250 - 1, (a, b))
                self.assertLess(gap_ms, 40 + 250 + 250 * harness.SLACK, (a, b))

    def test_conversations_interleave_under_a_rate(self):
        m = self.mock("--latency", "20ms", "--tokens", "2")
        r = self.run_vlmload("--url", m.url, "--turns", "3", "--think-time", "200ms", "--rate",
                             "25", "--arrival", "constant", "--requests", "30", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        chains = conversations(self, recs)
        self.assertEqual(len(chains), 10)
        # First turns come on the schedule (every 40 ms), not after earlier conversations end.
        starts = sorted(c[0]["t_us"] for c in chains)
        gaps = [(b - a) / 1000 for a, b in zip(starts, starts[1:])]
        self.assertLess(abs(sum(gaps) / len(gaps) - 40), 8, gaps)
        # Some conversation starts between another's first and second turns.
        first = chains[0]
        inside = [c for c in chains[1:] if first[0]["t_us"] < c[0]["t_us"] < first[1]["t_us"]]
        self.assertGreater(len(inside), 2)
        # The mock saw several conversations' turns in flight at once: fewer arrivals than turns.
        self.assertEqual(r.summary["requests"]["arrivals"], 10)

    def test_turn_ranges_are_drawn_from_the_seed(self):
        def counts(seed):
            m = self.mock("--tokens", "2")
            r = self.run_vlmload("--url", m.url, "--turns", "1-4", "--think-time", "1ms:poisson",
                                 "--rate", "50", "--requests", "60", "--seed", seed, "--quiet")
            self.assertEqual(r.rc, 0, r.stderr)
            chains = conversations(self, m.records())
            self.check_history(chains, images=False)
            per = {}
            for l in r.log:
                per[l["conversation"]] = max(per.get(l["conversation"], 0), l["turn"])
            self.assertEqual(sum(per.values()), 60)
            self.assertEqual(sorted(per.values()), sorted(len(c) for c in chains))
            return [per[k] for k in sorted(per)]
        a, b = counts("7"), counts("7")
        # --requests 60 shortens the last conversation; every other is 1 to 4 turns, not all alike.
        self.assertEqual(a, b)
        self.assertTrue(all(1 <= n <= 4 for n in a))
        self.assertGreater(len(set(a[:-1])), 1)

    def test_think_time_holds_no_slot(self):
        # Closed loop, two turns in flight at most, six conversations in progress: while the
        # first ones think, others take the two slots.
        m = self.mock("--latency", "30ms", "--tokens", "2")
        r = self.run_vlmload("--url", m.url, "--rate", "0", "--concurrency", "2",
                             "--max-conversations", "6", "--turns", "3", "--think-time", "300ms",
                             "--requests", "36", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertLessEqual(max(rec["in_flight"] for rec in recs), 2)
        chains = sorted(conversations(self, recs), key=lambda c: c[0]["t_us"])
        self.assertEqual(len(chains), 12)
        self.check_history(chains, images=False)
        # Six conversations began before the first one's second turn.
        second = chains[0][1]["t_us"]
        self.assertEqual(sum(1 for c in chains if c[0]["t_us"] < second), 6)
        self.assertEqual(r.summary["conversations"]["completed"], 12)

    def test_shards_split_the_conversations(self):
        m = self.mock("--tokens", "2")

        def turns(*args):
            r = self.run_vlmload("--url", m.url, "--rate", "20", "--turns", "2-4", "--requests",
                                 "40", "--quiet", *args)
            self.assertEqual(r.rc, 0, r.stderr)
            per = {}
            for l in r.log:
                per[l["conversation"]] = max(per.get(l["conversation"], 0), l["turn"])
            return per
        one = turns()
        a, b = turns("--shard", "0/2"), turns("--shard", "1/2")
        self.assertFalse(set(a) & set(b))
        self.assertEqual({**a, **b}, one)
        self.assertEqual(sum(one.values()), 40)

    def test_a_failed_turn_ends_its_conversation(self):
        m = self.mock("--tokens", "2", "--fault", "http500:0.2")
        r = self.run_vlmload("--url", m.url, "--turns", "3", "--rate", "50", "--duration", "1s",
                             "--quiet", "--keep-going")
        recs = m.records()
        failed = [rec for rec in recs if rec["status"] != 200]
        self.assertTrue(failed)
        chains = conversations(self, [rec for rec in recs if rec["status"] == 200] +
                               [dict(rec, reply=None) for rec in failed])
        for chain in chains:
            for k, rec in enumerate(chain):
                if rec["status"] != 200:
                    self.assertEqual(k, len(chain) - 1, "a turn after a failed one")
        conv = r.summary["conversations"]
        self.assertEqual(conv["failed"], len(failed))
        self.assertEqual(conv["started"],
                         conv["completed"] + conv["failed"] + conv["cut"] + conv["too_long"])
        self.assertEqual(sum(t["failed"] for t in conv["turns"]), len(failed))

    def test_interrupt_cuts_conversations_with_every_request_logged(self):
        m = self.mock("--latency", "20ms", "--tokens", "2")
        r = self.run_vlmload("--url", m.url, "--turns", "5", "--think-time", "10s", "--rate", "20",
                             "--duration", "60s", "--no-progress", interrupt_after=1.0)
        self.assertEqual(r.rc, 130, r.stderr)
        conv = r.summary["conversations"]
        self.assertGreater(conv["started"], 5)
        self.assertEqual(conv["completed"], 0)
        self.assertEqual(conv["cut"], conv["started"])
        self.assertEqual(len(r.log), r.summary["requests"]["sent"])
        self.assertEqual(len(m.records()), r.summary["requests"]["sent"])

    def test_duration_cuts_the_rest(self):
        m = self.mock("--tokens", "2")
        r = self.run_vlmload("--url", m.url, "--turns", "4", "--think-time", "300ms", "--rate",
                             "20", "--duration", "1s", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        conv = r.summary["conversations"]
        self.assertGreater(conv["cut"], 0)
        self.assertEqual(conv["started"], conv["completed"] + conv["cut"])
        # Turns due after --duration are not sent.
        self.assertLess(r.summary["requests"]["sent"], 4 * conv["started"])

    def test_a_reply_too_long_to_keep_ends_its_conversation(self):
        m = self.mock("--tokens", "2", "--fault", "huge:1", "--huge-bytes", "64KiB")
        r = self.run_vlmload("--url", m.url, "--turns", "2", "--rate", "20", "--requests", "6",
                             "--quiet", "--max-tokens", "8")
        conv = r.summary["conversations"]
        self.assertEqual(conv["too_long"], conv["started"])
        self.assertEqual(r.summary["requests"]["sent"], conv["started"])
        self.assertIn("longer than the history keeps", r.stderr)
        self.assertEqual(r.stderr.count("longer than the history keeps"), 1)

    def test_dry_run_describes_the_turns(self):
        p = cli("--turns", "2-5", "--think-time", "2s:gamma:0.5", "--rate", "4", "--duration",
                "10s", "--dry-run", "--model", "m")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("conversations of 2-5 turns", p.stdout)
        self.assertIn("think time gamma, mean 2s, CV 0.5", p.stdout)
        self.assertIn("4 conversations/s", p.stdout)

    def test_refusals(self):
        for args, words in [
            (["--turns", "3", "--api", "native"], "--turns"),
            (["--think-time", "1s"], "needs --turns"),
            (["--max-conversations", "4"], "needs --turns"),
            (["--turns", "0"], "--turns"),
            (["--turns", "65"], "--turns"),
            (["--turns", "2", "--think-time", "1s:sometimes"], "--think-time"),
            (["--turns", "2", "--sweep", "rate=1:3:1"], "not with phases"),
            (["--turns", "2", "--dump-requests", "d", "--requests", "3"], "--dump-requests"),
        ]:
            p = cli("--dry-run", "--model", "m", *args)
            self.assertEqual(p.returncode, 2, (args, p.stdout, p.stderr))
            self.assertIn(words, p.stderr, args)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, (args, p.stderr))


if __name__ == "__main__":
    harness.main()
