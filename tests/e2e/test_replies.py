"""How a reply is read and classified, judged against servers whose bytes the test chooses
(tests/e2e/rawserver.py) and against the mock: SSE as WHATWG parses it, the status deciding the
class, reasoning deltas, error objects inside a 200, which requests feed ITL and tokens, and the
memory a large reply costs.
"""
import gzip
import json
import os
import subprocess
import tempfile
import time

import harness
from rawserver import RawServer, chunked, chat_reply, response

N = 20  # requests per byte-level run


def chunk(delta=None, usage=None, finish=None, choices=True):
    o = {"id": "x", "object": "chat.completion.chunk", "model": "m"}
    if choices:
        o["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    else:
        o["choices"] = []
    if usage is not None:
        o["usage"] = usage
    return "data: " + json.dumps(o) + "\n\n"


def usage(prompt, completion):
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def stream_of(*events):
    return chunked(200, events)


def chat_only(fn):
    """A handler that gives fn's reply to chat requests and 404 to anything else."""
    def handler(req):
        if not req.path.endswith("/chat/completions"):
            return response(404, "{}")
        return fn(req)
    return handler


class RepliesTest(harness.MockTestCase):
    def raw_run(self, fn, *args, n=N, stream=True, quiet=True):
        with RawServer(chat_only(fn)) as srv:
            a = ["--url", srv.url, "--model", "m", "--rate", "0", "--concurrency", "4",
                 "--requests", str(n), "--quiet" if quiet else "--no-progress", *args]
            if stream:
                a.append("--stream")
            r = self.run_vlmload(*a, timeout=120)
            self.seen = srv.chat_requests()
            self.assertEqual(len(self.seen), n, "the server saw every request once")
        self.assertIsNotNone(r.summary, r.stderr)
        self.assertEqual(r.summary["requests"]["sent"], n)
        return r

    def errors(self, r):
        return self.errors_of(r.summary)

    def errors_of(self, summary):
        return {k: v for k, v in summary["errors"].items() if v}

    # -- item 6: SSE as WHATWG parses it

    def test_empty_data_events_not_dispatched(self):
        body = stream_of(chunk({"role": "assistant", "content": ""}), "data:\n\n",
                         chunk({"content": "a"}), "data: \n\n", "data\n\n",
                         chunk({"content": "b"}), chunk(usage=usage(5, 2), choices=False),
                         "data: [DONE]\n\n")
        r = self.raw_run(lambda req: body)
        self.assertEqual(self.errors(r), {})
        self.assertEqual(r.summary["requests"]["ok"], N)
        self.assertEqual(r.summary["tokens"]["completion"], 2 * N)

    def test_done_with_white_space_ends_the_stream(self):
        body = stream_of(chunk({"content": "a"}), chunk(usage=usage(5, 1), choices=False),
                         "data: [DONE] \t\n\n")
        r = self.raw_run(lambda req: body)
        self.assertEqual(self.errors(r), {})
        self.assertEqual(r.summary["requests"]["ok"], N)

    def test_bytes_after_done_ignored(self):
        # A usage event after [DONE], then a line cut off: neither counts.
        body = stream_of(chunk({"content": "a"}), chunk(usage=usage(5, 16), choices=False),
                         "data: [DONE]\n\n", chunk(usage=usage(5, 26), choices=False),
                         "data: {\"cho")
        r = self.raw_run(lambda req: body)
        self.assertEqual(self.errors(r), {})
        self.assertEqual(r.summary["tokens"]["completion"], 16 * N)

    def test_json_reply_to_a_stream_is_malformed(self):
        r = self.raw_run(lambda req: response(200, chat_reply()))
        self.assertEqual(self.errors(r), {"malformed": N})

    def test_trailing_garbage_is_malformed(self):
        r = self.raw_run(lambda req: response(200, chat_reply() + " xyz"), stream=False)
        self.assertEqual(self.errors(r), {"malformed": N})
        body = stream_of(chunk({"content": "a"}), "data: {\"choices\":[]} xyz\n\n",
                         "data: [DONE]\n\n")
        r = self.raw_run(lambda req: body)
        self.assertEqual(self.errors(r), {"malformed": N})

    def test_tool_calls_with_null_content(self):
        call = [{"id": "c", "type": "function",
                 "function": {"name": "f", "arguments": "{\"x\":1}"}}]
        reply = json.dumps({"id": "x", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": call},
             "finish_reason": "tool_calls"}], "usage": usage(5, 7)})
        r = self.raw_run(lambda req: response(200, reply), stream=False)
        self.assertEqual(self.errors(r), {})
        self.assertEqual(r.summary["tokens"]["completion"], 7 * N)
        delta = {"tool_calls": [{"index": 0, "function": {"arguments": "{\"x\""}}]}
        body = stream_of(chunk({"role": "assistant", "content": None}), chunk(delta),
                         chunk(usage=usage(5, 3), choices=False), "data: [DONE]\n\n")
        r = self.raw_run(lambda req: body)
        self.assertEqual(self.errors(r), {})
        self.assertIsNotNone(r.log[0]["ttft_ms"])

    # -- item 4: the status decides the class

    def test_error_status_with_a_large_body(self):
        big = json.dumps({"error": {"message": "overloaded", "pad": "p" * (100 << 10)}})
        r = self.raw_run(lambda req: response(503, big))
        self.assertEqual(self.errors(r), {"http_5xx": N})
        self.assertTrue(all(l["error_message"] == "overloaded" for l in r.log), r.log[0])
        huge = "{\"error\":{\"message\":\"out of memory\"},\"pad\":\"" + "p" * (20 << 20) + "\"}"
        reply = response(500, huge)
        r = self.raw_run(lambda req: reply, n=4, stream=False)
        self.assertEqual(self.errors(r), {"http_5xx": 4})
        self.assertTrue(all(l["error_message"] == "out of memory" for l in r.log), r.log[0])

    def test_unknown_status_is_http_other(self):
        r = self.raw_run(lambda req: response(999, "{}"), stream=False)
        self.assertEqual(self.errors(r), {"http_other": N})
        self.assertTrue(all(l["status"] == 999 for l in r.log))

    # -- item 9: reasoning, and errors inside a 200

    def test_reasoning_counts_as_tokens(self):
        # vLLM's "reasoning" then SGLang's "reasoning_content", 300 ms before the first content.
        def fn(req):
            head = chunked(200, [chunk({"role": "assistant", "content": ""}),
                                 chunk({"reasoning": "think"}),
                                 chunk({"reasoning_content": "more"})], end=False)
            rest = chunked(200, [chunk({"content": "answer"}),
                                 chunk(usage=usage(5, 3), choices=False),
                                 "data: [DONE]\n\n"])
            return [head, 0.3, rest[rest.index(b"\r\n\r\n") + 4:]]
        r = self.raw_run(fn, n=8)
        self.assertEqual(self.errors(r), {})
        s = r.summary
        self.assertLess(s["ttft_ms"]["max"], 200, s["ttft_ms"])
        self.assertGreaterEqual(s["first_content_ms"]["min"], 300, s["first_content_ms"])
        self.assertGreaterEqual(s["mean_first_content_ms"], 300)
        self.assertEqual(s["tokens"]["completion"], 3 * 8)

    def test_error_inside_a_200(self):
        err = {"error": {"object": "error", "message": "engine died", "type": "InternalError",
                         "code": 500}}
        body = stream_of(chunk({"content": "a"}), "data: " + json.dumps(err) + "\n\n",
                         "data: [DONE]\n\n")
        r = self.raw_run(lambda req: body)
        self.assertEqual(self.errors(r), {"stream_error": N})
        self.assertTrue(all(l["error_message"] == "engine died" for l in r.log), r.log[0])
        self.assertEqual(r.summary["tokens"]["completion"], 0)
        r = self.raw_run(lambda req: response(200, json.dumps(err)), stream=False)
        self.assertEqual(self.errors(r), {"stream_error": N})
        self.assertTrue(all(l["error_message"] == "engine died" for l in r.log), r.log[0])
        # "error": null is no error.
        ok = json.loads(chat_reply())
        ok["error"] = None
        r = self.raw_run(lambda req: response(200, json.dumps(ok)), stream=False)
        self.assertEqual(self.errors(r), {})
        self.assertTrue(all(l["error_message"] is None for l in r.log))

    # -- item 3: only successful requests feed ITL and tokens

    def test_failed_streams_feed_no_itl(self):
        # Half the requests go to a server 5 ms between tokens, half to one 100 ms between
        # tokens whose every stream ends half way, without [DONE].
        good = self.mock("--itl", "5ms", "--tokens", "16")
        bad = self.mock("--itl", "100ms", "--tokens", "16", "--fault", "truncate:1")
        r = self.run_vlmload("--url", good.url, "--url", bad.url, "--stream", "--rate", "0",
                             "--concurrency", "8", "--requests", "40", "--quiet", timeout=120)
        self.assertIsNotNone(r.summary, r.stderr)
        self.assertEqual(r.summary["errors"]["truncated"], 20)
        self.assertEqual(r.summary["requests"]["ok"], 20)
        itl = r.summary["itl_ms"]
        self.assertEqual(itl["count"], 20 * 15)  # only the good streams' gaps
        self.assertGreaterEqual(itl["mean"], 4.5)
        self.assertLess(itl["mean"], 5 + 3 * harness.SLACK, itl)
        self.assertLess(itl["max"], 60, itl)

    def test_failed_requests_feed_no_tokens(self):
        # Usage sent, then the stream ends without [DONE]: truncated, and its tokens not counted.
        body = stream_of(chunk({"content": "a"}), chunk(usage=usage(10, 1), choices=False))
        r = self.raw_run(lambda req: body)
        self.assertEqual(self.errors(r), {"truncated": N})
        self.assertEqual(r.summary["tokens"]["prompt"], 0)
        self.assertEqual(r.summary["tokens"]["completion"], 0)

    # -- item 2: reply memory and --max-response

    def run_rss(self, *args, rc=0):
        """Runs vlmload and returns (summary, peak RSS in MiB) from the kernel's own account: the
        process's VmHWM, read every few milliseconds until it exits. (wait4's ru_maxrss would not
        do: a child started by vfork or fork carries this test process's own peak past exec.)"""
        out = os.path.join(self.tmp, "rss.json")
        hwm = 0
        with open(os.path.join(self.tmp, "rss.err"), "w+") as err:
            p = subprocess.Popen([harness.VLMLOAD, "--output", out, "--quiet", *args],
                                 stdout=subprocess.DEVNULL, stderr=err)
            while p.poll() is None:
                try:
                    with open("/proc/%d/status" % p.pid) as f:
                        for line in f:
                            if line.startswith("VmHWM:"):
                                hwm = max(hwm, int(line.split()[1]))
                except OSError:
                    pass
                time.sleep(0.005)
            err.seek(0)
            self.assertEqual(p.returncode, rc, err.read())
        self.assertGreater(hwm, 0)
        with open(out) as f:
            return json.load(f), hwm / 1024

    def test_large_replies_are_not_held(self):
        # 64 replies of 50 MB in flight at once, accepted: holding them would take 3.2 GB.
        m = self.mock("--fault", "huge:1", "--huge-bytes", "50MB")
        s, rss = self.run_rss("--url", m.url, "--rate", "0", "--concurrency", "64",
                              "--requests", "64", "--max-response", "64MiB", "--timeout", "300s")
        self.assertEqual(s["requests"]["ok"], 64, s["errors"])
        self.assertEqual(m.stats()["requests_completed_total"], 64)
        self.assertLess(rss, 160, "peak RSS %.0f MiB" % rss)
        print("64 x 50 MB accepted: peak RSS %.0f MiB" % rss)
        # Over the limit: refused as oversize, still without holding them.
        s, rss = self.run_rss("--url", m.url, "--rate", "0", "--concurrency", "64",
                              "--requests", "64", "--timeout", "300s", rc=1)
        self.assertEqual(s["errors"]["oversize"], 64, s["errors"])
        self.assertLess(rss, 160, "peak RSS %.0f MiB" % rss)

    def test_max_response_bounds_a_stream(self):
        # 2000 tokens of about 150 bytes each: 300 KB a stream, over a 100 KiB limit.
        m = self.mock("--tokens", "2000")
        r = self.run_vlmload("--url", m.url, "--stream", "--rate", "0", "--concurrency", "4",
                             "--requests", "8", "--quiet", "--max-response", "100KiB",
                             "--max-tokens", "2000",
                             timeout=120)
        self.assertIsNotNone(r.summary, r.stderr)
        self.assertEqual(self.errors(r), {"oversize": 8})
        r = self.run_vlmload("--url", m.url, "--stream", "--rate", "0", "--concurrency", "4",
                             "--requests", "8", "--quiet", "--max-response", "1MiB",
                             "--max-tokens", "2000",
                             timeout=120)
        self.assertEqual(self.errors(r), {})

    # -- events of any size, scanned as they come

    def test_large_events_read_up_to_max_response(self):
        # One event of 3 MB per stream, past the 1 MiB that once bounded an event: read whole
        # under a 100 MB --max-response, each stream holding no more than a small one.
        m = self.mock("--fault", "huge:1", "--huge-bytes", "3MB")
        s, rss = self.run_rss("--url", m.url, "--stream", "--rate", "0", "--concurrency", "64",
                              "--requests", "64", "--max-response", "100MB", "--timeout", "300s")
        self.assertEqual(self.errors_of(s), {})
        self.assertEqual(s["requests"]["ok"], 64)
        self.assertEqual(m.stats()["requests_completed_total"], 64)
        self.assertEqual(m.stats()["faults"]["huge"], 64)
        self.assertLess(rss, 64, "peak RSS %.0f MiB (64 events of 3 MB in flight)" % rss)
        print("64 streams of one 3 MB event: peak RSS %.0f MiB" % rss)
        # --max-response bounds a stream, its events included.
        s, rss = self.run_rss("--url", m.url, "--stream", "--rate", "0", "--concurrency", "64",
                              "--requests", "64", "--max-response", "2MiB", "--timeout", "300s",
                              rc=1)
        self.assertEqual(self.errors_of(s), {"oversize": 64})
        self.assertLess(rss, 64, "peak RSS %.0f MiB" % rss)

    # -- one rule for a name given twice: the first member counts

    def test_duplicate_members_first_counts(self):
        dup = (',"usage":{"prompt_tokens":5,"completion_tokens":8},'
               '"usage":{"prompt_tokens":6,"completion_tokens":100}}')
        reply = json.dumps({"id": "x", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"},
             "finish_reason": "stop"}]})[:-1] + dup
        r = self.raw_run(lambda req: response(200, reply), stream=False)
        self.assertEqual(self.errors(r), {})
        self.assertEqual(r.summary["tokens"]["completion"], 8 * N)
        self.assertEqual(r.summary["tokens"]["prompt"], 5 * N)
        event = "data: " + json.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]})[:-1] + dup
        body = stream_of(event + "\n\n", "data: [DONE]\n\n")
        r = self.raw_run(lambda req: body)
        self.assertEqual(self.errors(r), {})
        self.assertEqual(r.summary["tokens"]["completion"], 8 * N)
        self.assertEqual(r.summary["tokens"]["prompt"], 5 * N)

    # -- classes that say what happened

    def test_stream_with_no_chunk_is_malformed(self):
        # [DONE] alone is an empty reply, as a whole reply with no choice is.
        r = self.raw_run(lambda req: stream_of(": keep-alive\n\n", "data: [DONE]\n\n"))
        self.assertEqual(self.errors(r), {"malformed": N})
        empty = json.dumps({"id": "x", "object": "chat.completion", "choices": []})
        r = self.raw_run(lambda req: response(200, empty), stream=False)
        self.assertEqual(self.errors(r), {"malformed": N})

    def test_gzip_not_asked_for_is_malformed(self):
        sse = (chunk({"role": "assistant", "content": "a"}) + chunk({"content": "b"}) +
               chunk(usage=usage(5, 2), choices=False) + "data: [DONE]\n\n").encode()
        packed = gzip.compress(sse)
        body = chunked(200, [packed[:40], packed[40:]], headers={"Content-Encoding": "gzip"})
        r = self.raw_run(lambda req: body)
        self.assertEqual(self.errors(r), {"malformed": N})
        self.assertTrue(all("accept-encoding" not in q.headers for q in self.seen))
        # Asked for, the same bytes are decoded and read.
        r = self.raw_run(lambda req: body, "--compressed")
        self.assertEqual(self.errors(r), {})
        self.assertEqual(r.summary["tokens"]["completion"], 2 * N)
        self.assertTrue(all("gzip" in q.headers.get("accept-encoding", "") for q in self.seen))

    def test_two_content_lengths_are_malformed(self):
        reply = chat_reply().encode()
        head = ("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                "Content-Length: %d\r\n\r\n" % (len(reply), len(reply) + 10)).encode()
        r = self.raw_run(lambda req: [head + reply, "close"], stream=False)
        self.assertEqual(self.errors(r), {"malformed": N})
        # One length, the same body cut short the same way: truncated.
        head = ("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                "\r\n" % (len(reply) + 10)).encode()
        r = self.raw_run(lambda req: [head + reply, "close"], stream=False)
        self.assertEqual(self.errors(r), {"truncated": N})

    def test_deep_nesting_is_malformed(self):
        # cJSON's limit, 1000 levels, is the scanner's: 10,000 are not read.
        deep = "[" * 9999 + "]" * 9999
        reply = chat_reply()[:-1] + ',"deep":' + deep + "}"
        r = self.raw_run(lambda req: response(200, reply), stream=False)
        self.assertEqual(self.errors(r), {"malformed": N})
        reply = chat_reply()[:-1] + ',"deep":' + "[" * 990 + "]" * 990 + "}"
        r = self.raw_run(lambda req: response(200, reply), stream=False)
        self.assertEqual(self.errors(r), {})

    def test_token_count_above_max_tokens_is_flagged(self):
        huge = 2 ** 53
        def fn(req):
            limit = req.json()["max_tokens"]
            return response(200, chat_reply(completion_tokens=huge if req.index_on_conn % 2 else
                                            limit))
        r = self.raw_run(fn, "--max-tokens", "128", stream=False, quiet=False)
        self.assertTrue(all(q.json()["max_tokens"] == 128 for q in self.seen))
        over = sum(1 for q in self.seen if q.index_on_conn % 2)
        self.assertGreater(over, 0)
        self.assertEqual(self.errors(r), {})
        tok = r.summary["tokens"]
        self.assertEqual(tok["completion"], over * huge + (N - over) * 128)  # kept
        self.assertEqual(tok["over_max_tokens"], over)
        self.assertIn("(%d replies declared more than their max_tokens; counted as sent)" % over,
                      " ".join(r.stdout.split()))
        r = self.raw_run(lambda req: response(200, chat_reply(completion_tokens=128)),
                         "--max-tokens", "128", stream=False, quiet=False)
        self.assertEqual(r.summary["tokens"]["over_max_tokens"], 0)
        self.assertNotIn("max_tokens;", r.stdout)


if __name__ == "__main__":
    harness.main()
