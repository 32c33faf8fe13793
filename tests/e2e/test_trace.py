"""Trace replay (--trace) against the mock, judged by what the mock recorded: each request's
arrival (its t_us, CLOCK_MONOTONIC microseconds when its body was in) against its row's timestamp
offset, the speed, the images per row; and the one-line refusal of a bad row."""
import json
import os
import random
import urllib.request

import harness

# The bound: every arrival within 10 ms of its row's offset from the first arrival, judged
# where the arrivals land, on the mock's clock. The release build is held to it. Under the
# sanitizers it is widened like every other timing tolerance (harness.SLACK): there both processes
# run several times slower: one arrival of sixty was seen 13 ms off there, 7 ms of it between
# vlmload's send and the sanitized mock's read of the body.
BOUND_MS = 10.0 * harness.SLACK
WARM_UP = "warm-up"


def irregular_rows(n, seed):
    """n rows over about 3 s with irregular gaps (some rows at the same millisecond, some bursts,
    some pauses), each with distinct output lengths, and input lengths and hash ids. The prompts
    are short: the timing is the schedule's, not the time to build and read long bodies on a
    busy machine."""
    rnd = random.Random(seed)
    gaps = [0, 0, 1, 3, 7, 12, 20, 33, 47, 65, 90, 130, 170]
    outs = rnd.sample(range(4, 400), n)
    rows, t = [], 1717000000000 + rnd.randrange(1000)  # epoch ms: any origin will do
    for i in range(n):
        rows.append({"timestamp": t, "input_length": rnd.randrange(20, 600),
                     "output_length": outs[i], "hash_ids": [i % 4, 1000 + i]})
        t += rnd.choice(gaps)
    return rows


class TraceTest(harness.MockTestCase):
    def mock(self, *args):
        """A mock that has answered one request already: its first request costs it a few ms
        of its own (measured: 6 ms against under 1 ms after), which would otherwise shift every
        offset measured from the first arrival. That request is left out of records()."""
        m = super().mock(*args)
        body = json.dumps({"model": WARM_UP, "messages": [{"role": "user", "content": "hi"}],
                           "max_tokens": 1}).encode()
        req = urllib.request.Request(m.url + "/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
        records = m.records
        m.records = lambda *a: [x for x in records(*a) if x.get("model") != WARM_UP]
        return m

    def write_jsonl(self, rows, name="trace.jsonl", shuffle=None):
        lines = [json.dumps(r) for r in rows]
        if shuffle is not None:
            random.Random(shuffle).shuffle(lines)
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def arrivals_ms(self, m):
        """The mock's arrival times, ms from the first."""
        t = sorted(rec["t_us"] for rec in m.records())
        return [(x - t[0]) / 1000.0 for x in t]

    def check_offsets(self, got, rows, speed):
        t0 = min(r["timestamp"] for r in rows)
        want = sorted((r["timestamp"] - t0) / speed for r in rows)
        self.assertEqual(len(got), len(want))
        worst = max(abs(a - b) for a, b in zip(got, want))
        self.assertLessEqual(worst, BOUND_MS, "worst arrival %.2f ms off its row's offset" % worst)
        return worst

    def by_row(self, m, rows):
        """Each row with the mock's record of its request, told apart by max_tokens (the rows'
        output lengths are distinct): every max_tokens must be a row's, each row's once."""
        recs = m.records()
        by_out = {r["output_length"]: r for r in rows}
        self.assertEqual(len(by_out), len(rows))
        self.assertEqual(sorted(x["max_tokens"] for x in recs), sorted(by_out))
        return [(by_out[x["max_tokens"]], x) for x in recs]

    def check_row_arrivals(self, m, rows, speed):
        """Every request's arrival, from the first arrival, within the bound of its own row's
        offset at that speed."""
        pairs = self.by_row(m, rows)
        t0 = min(r["timestamp"] for r in rows)
        first = min(x["t_us"] for _, x in pairs)
        worst = max(abs((x["t_us"] - first) / 1000.0 - (r["timestamp"] - t0) / speed)
                    for r, x in pairs)
        self.assertLessEqual(worst, BOUND_MS, "worst arrival %.2f ms off its row's offset" % worst)

    def replay(self, rows, speed):
        m = self.mock()
        # The file is written out of time order: the replay sorts it.
        path = self.write_jsonl(rows, shuffle=7)
        args = ["--url", m.url, "--trace", path, "--quiet"]
        if speed != 1:
            args += ["--trace-speed", str(speed)]
        r = self.run_vlmload(*args)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(len(m.records()), len(rows))
        s = r.summary
        self.assertEqual(s["requests"]["sent"], len(rows))
        self.assertEqual(s["requests"]["ok"], len(rows))
        self.assertEqual(s["stop_reason"], "requests")
        # The send lag (send minus due time) of every row is in the summary.
        self.assertEqual(s["send_lag_ms"]["count"], len(rows))
        tr = s["trace"]
        self.assertEqual(tr["rows"], len(rows))
        self.assertEqual(tr["format"], "mooncake jsonl")
        self.assertEqual(tr["speed"], speed)
        self.assertGreater(tr["rows_out_of_order"], 0)
        span = (max(x["timestamp"] for x in rows) - min(x["timestamp"] for x in rows)) / 1e3
        self.assertAlmostEqual(tr["span_s"], span, places=6)
        self.assertAlmostEqual(tr["replay_s"], span / speed, places=6)
        # vlmload's own log agrees: each request's intended start is its row's due time.
        t0 = min(x["timestamp"] for x in rows)
        due = sorted((x["timestamp"] - t0) / speed for x in rows)
        intended = sorted(l["intended_ms"] for l in r.log)
        for a, b in zip(intended, due):
            self.assertAlmostEqual(a - intended[0], b, delta=0.01)
        return m, r

    def test_sixty_rows_on_their_timestamps(self):
        rows = irregular_rows(60, 1)
        span = max(x["timestamp"] for x in rows) - min(x["timestamp"] for x in rows)
        self.assertTrue(2500 <= span <= 4000, span)
        m, r = self.replay(rows, 1)
        self.check_offsets(self.arrivals_ms(m), rows, 1)
        # Each request carried its own row's output length as max_tokens, and arrived on time.
        self.check_row_arrivals(m, rows, 1)
        # Its prompt is the row's input length in the mock's own tokenizer (asked through
        # /tokenize at start).
        for row, rec in self.by_row(m, rows):
            self.assertEqual(rec["text_tokens"], row["input_length"], row)
        self.assertEqual(r.summary["lengths"]["tokenizer"], "server")
        self.assertEqual(r.summary["lengths"]["total_input_text_tokens"],
                         sum(x["input_length"] for x in rows))

    def test_speed_two_halves_the_offsets(self):
        rows = irregular_rows(60, 2)
        m, r = self.replay(rows, 2)
        got = self.arrivals_ms(m)
        self.check_offsets(got, rows, 2)
        self.check_row_arrivals(m, rows, 2)
        # Not merely within the bound of the original times: the last arrival lands near half.
        span = max(x["timestamp"] for x in rows) - min(x["timestamp"] for x in rows)
        self.assertLess(abs(got[-1] - span / 2), BOUND_MS)
        self.assertGreater(span / 2 - BOUND_MS, BOUND_MS)

    def test_csv_images_per_row(self):
        rnd = random.Random(3)
        lines = ["timestamp_ms,input_tokens,output_tokens,images"]
        want = []
        for i in range(20):
            k = rnd.choice([0, 1, 2, 3])
            want.append(k)
            # 40 ms apart: the mock records them in row order.
            lines.append("%d,%d,%d,%d" % (5000 + 40 * i, 100 + i, 8 + i, k))
        path = os.path.join(self.tmp, "images.csv")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--trace", path, "--quiet", "--resolution", "64x64")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = sorted(m.records(), key=lambda x: x["t_us"])
        self.assertEqual([len(x.get("images", [])) for x in recs], want)
        self.assertEqual(r.summary["trace"]["format"], "csv")
        self.assertTrue(r.summary["trace"]["images_per_row"])
        self.assertEqual(r.summary["images"]["sent"], sum(want))

    def test_rows_sharing_hash_ids_share_a_prefix(self):
        # Rows named by their output length; ids as Mooncake's: a block id is 512 tokens of text
        # wherever it appears.
        spec = [(101, [1, 2, 3], 1500), (102, [1, 2, 4], 1500), (103, [1, 2, 3], 1500),
                (104, [9, 10], 1000), (105, [11], 300), (106, [1], 400), (107, [12, 2, 3], 1500)]
        rows = [{"timestamp": 30 * i, "input_length": n, "output_length": out, "hash_ids": ids}
                for i, (out, ids, n) in enumerate(spec)]
        # Two rows without hash ids: their prompts are their own.
        rows += [{"timestamp": 300, "input_length": 700, "output_length": 108},
                 {"timestamp": 330, "input_length": 700, "output_length": 109}]
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--trace", self.write_jsonl(rows), "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        rec = {row["output_length"]: x for row, x in self.by_row(m, rows)}
        head = {k: v["prompt_head"] for k, v in rec.items()}
        whole = {k: v["prompt_hash"] for k, v in rec.items()}
        # The same first block, the same start; the same blocks and length, the same prompt.
        self.assertEqual(head[101], head[102])
        self.assertEqual(head[101], head[103])
        self.assertEqual(head[101], head[106])
        self.assertEqual(whole[101], whole[103])
        self.assertNotEqual(whole[101], whole[102])
        self.assertNotEqual(whole[101], whole[106])
        # Another first block, another start, whatever follows.
        for k in (104, 105, 107, 108, 109):
            self.assertNotEqual(head[k], head[101], k)
        self.assertNotEqual(head[104], head[105])
        self.assertNotEqual(head[108], head[109])
        self.assertEqual(r.summary["trace"]["rows_sharing_prefix"], 3)

    def test_requests_takes_the_first_rows(self):
        rows = irregular_rows(60, 4)
        m = self.mock()
        path = self.write_jsonl(rows)
        r = self.run_vlmload("--url", m.url, "--trace", path, "--requests", "10", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(len(m.records()), 10)
        self.check_offsets(self.arrivals_ms(m), sorted(rows, key=lambda x: x["timestamp"])[:10], 1)

    def test_bad_row_is_one_line_naming_it(self):
        rows = irregular_rows(5, 5)
        path = self.write_jsonl(rows)
        with open(path, "a") as f:
            f.write('{"timestamp": 1, "input_length": 3}\n')
        m = self.mock()
        r = self.run_vlmload("--url", m.url, "--trace", path, "--quiet")
        self.assertEqual(r.rc, 2)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("%s:6:" % path, lines[0])
        self.assertIn('"output_length" is missing', lines[0])
        self.assertEqual(m.records(), [])

    def test_refused_with_what_the_trace_decides(self):
        path = self.write_jsonl(irregular_rows(3, 6))
        for extra, name in ((["--rate", "5"], "--rate"), (["--arrival", "constant"], "--arrival"),
                            (["--sweep", "rate=1:2:1"], "--sweep"),
                            (["--max-tokens", "9"], "--max-tokens")):
            r = self.run_vlmload("--trace", path, "--dry-run", *extra)
            self.assertEqual(r.rc, 2, extra)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(name, r.stderr)
        r = self.run_vlmload("--trace-speed", "2", "--dry-run")
        self.assertEqual(r.rc, 2)
        self.assertIn("--trace", r.stderr)

    def test_dry_run_says_format_and_rows(self):
        rows = irregular_rows(60, 8)
        path = os.path.join(self.tmp, "trace.data")  # no extension: told by content
        with open(path, "w") as f:
            f.write("\n".join(json.dumps(x) for x in rows) + "\n")
        r = self.run_vlmload("--trace", path, "--trace-speed", "2", "--dry-run")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn(": mooncake jsonl (by content), 60 rows", r.stdout)
        self.assertIn("replayed at 2x", r.stdout)
        self.assertIn("after 60 requests", r.stdout)


if __name__ == "__main__":
    harness.main()
