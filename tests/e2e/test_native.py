"""SGLang's native /generate (--api native) against the mock, judged by the mock's own record: every
request reaches /generate with the images vlmload says it sent (per request: count, encoded bytes
and body size; across requests: the decoded pixels' hashes), one placeholder per image, the token
counts vlmload reports are the mock's, drained flushes land with nothing in flight, and faults
land in the classes chat replies use."""
import collections
import os

import harness

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "corpus")


def request_lines(run):
    return [l for l in run.log if "id" in l]


def per_request(recs):
    """What each mock record says a request carried, as vlmload's request log says it."""
    return collections.Counter(
        (len(rec["images"]), sum(i["bytes"] for i in rec["images"]), rec["body_bytes"])
        for rec in recs)


class NativeTest(harness.MockTestCase):
    def native_run(self, stream):
        m = self.mock("--profile", "sglang", "--latency", "20ms", "--tokens", "8", "--itl", "2ms")
        args = ["--url", m.url, "--server", "sglang", "--api", "native", "--images", CORPUS,
                "--rate", "50", "--flush-every", "50", "--requests", "200", "--quiet"]
        if stream:
            args.append("--stream")
        r = self.run_vlmload(*args)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["config"]["api"], "native")
        self.assertEqual(r.summary["config"]["endpoint"], "/generate")

        # Every request went to /generate, none to the chat route, and each was answered in full.
        recs = m.records("/generate")
        self.assertEqual(len(recs), 200)
        self.assertEqual(m.records(), [])
        for rec in recs:
            self.assertEqual(rec["status"], 200, rec)
            self.assertEqual(rec["stream"], stream)
            self.assertEqual(rec["max_tokens"], 128)
            self.assertGreaterEqual(len(rec["images"]), 1)
            self.assertEqual(rec["placeholders"], len(rec["images"]))
        stats = m.stats()
        self.assertEqual(stats["requests_total"], 200)
        self.assertEqual(stats["requests_completed_total"], 200)

        # The summary's counts add up.
        req = r.summary["requests"]
        self.assertEqual((req["sent"], req["completed"], req["ok"], req["failed"]),
                         (200, 200, 200, 0), req)
        self.assertEqual(sum(r.summary["errors"].values()), 0)
        self.assertEqual(req["with_images"] + req["text_only"], 200)

        # The images vlmload says it sent are the ones the mock decoded, request by request.
        lines = request_lines(r)
        self.assertEqual(len(lines), 200)
        self.assertTrue(all(l["error"] is None and l["status"] == 200 for l in lines))
        sent = collections.Counter((l["images"], l["image_bytes"], l["bytes_sent"]) for l in lines)
        self.assertEqual(sent, per_request(recs))
        imgs = [i for rec in recs for i in rec["images"]]
        self.assertEqual(r.summary["images"]["sent"], len(imgs))
        self.assertEqual(r.summary["images"]["bytes"], sum(i["bytes"] for i in imgs))
        self.assertEqual(r.summary["images"]["unique"], len({i["hash"] for i in imgs}))
        self.assertEqual(stats["images_total"], len(imgs))

        # Token counts: vlmload's, per request and in all, are the mock's.
        self.assertEqual(collections.Counter(l["completion_tokens"] for l in lines),
                         collections.Counter(rec["tokens"] for rec in recs))
        self.assertEqual(r.summary["tokens"]["completion"], sum(rec["tokens"] for rec in recs))
        self.assertEqual(r.summary["tokens"]["completion"], stats["completion_tokens_total"])
        self.assertEqual(r.summary["tokens"]["prompt"], stats["prompt_tokens_total"])

        # Four drained flushes, each after 50 more requests, with none in flight.
        flushes = m.records("/flush_cache")
        self.assertEqual(len(flushes), 4)
        for k, rec in enumerate(flushes, 1):
            self.assertEqual(rec["status"], 200)
            self.assertEqual(rec["in_flight"], 0)
            self.assertEqual(rec["completed_before"], 50 * k)
        self.assertEqual((r.summary["flushes"]["count"], r.summary["flushes"]["ok"]), (4, 4))
        self.assertEqual(int(r.timeline[-1]["flushes"]), 4)
        self.assertEqual(r.timeline[-1]["in_flight"], "0")
        return m, r

    def test_stream(self):
        m, r = self.native_run(stream=True)
        lines = request_lines(r)
        # Streams time their tokens: 8 events, each due 2 ms after the one before. A mock short of
        # CPU writes some of them together, late; the mean gap holds all the same.
        self.assertTrue(all(l["ttft_ms"] is not None and l["itl_ms"] is not None for l in lines))
        self.assertEqual(r.summary["ttft_ms"]["count"], 200)
        self.assertEqual(r.summary["itl_ms"]["count"], 200 * 7)
        self.assertGreater(r.summary["itl_ms"]["mean"], 1.0)

    def test_plain(self):
        m, r = self.native_run(stream=False)
        self.assertTrue(all(l["ttft_ms"] is None for l in request_lines(r)))

    def test_same_images_as_chat(self):
        """The same seed sends the same images, in the same requests, through either API."""
        def images(api):
            m = self.mock("--profile", "sglang")
            r = self.run_vlmload("--url", m.url, "--api", api, "--images", CORPUS,
                                 "--images-per-request", "1-3", "--image-ratio", "0.7", "--rate",
                                 "400", "--requests", "150", "--seed", "11", "--quiet")
            self.assertEqual(r.rc, 0, r.stderr)
            recs = m.records("/generate" if api == "native" else "/v1/chat/completions")
            self.assertEqual(len(recs), 150)
            return recs

        chat, native = images("openai"), images("native")
        key = lambda rec: (tuple(i["hash"] for i in rec["images"]), rec["prompt_chars"])
        self.assertEqual(collections.Counter(map(key, chat)), collections.Counter(map(key, native)))
        self.assertEqual(collections.Counter(rec["tokens"] for rec in chat),
                         collections.Counter(rec["tokens"] for rec in native))
        self.assertTrue(any(len(rec["images"]) == 3 for rec in native))
        self.assertTrue(any(not rec["images"] for rec in native))
        self.assertTrue(all(rec["placeholders"] == len(rec["images"]) for rec in native))

    def test_other_servers_refused(self):
        for server in ("vllm", "openai"):
            r = self.run_vlmload("--url", "http://127.0.0.1:9", "--model", "m", "--api", "native",
                                 "--server", server, "--requests", "1")
            self.assertEqual(r.rc, 2, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("--api", r.stderr)
            self.assertIn(server, r.stderr)
        r = self.run_vlmload("--api", "grpc", "--requests", "1")
        self.assertEqual(r.rc, 2)
        self.assertIn("--api 'grpc'", r.stderr)

    def test_placeholder_must_match(self):
        """A placeholder the server's model does not use is refused by the mock as SGLang would
        fail the request: each one is a 4xx; naming the mock's own placeholder fixes it."""
        m = self.mock("--profile", "sglang")
        args = ["--url", m.url, "--api", "native", "--images", CORPUS, "--rate", "200",
                "--requests", "20", "--quiet"]
        r = self.run_vlmload(*args, "--image-token", "<image>")
        self.assertEqual(r.rc, 1, r.stderr)
        # Every request refused alike from the first: the run stops at once, in the server's
        # words, every request it sent a 4xx.
        self.assertEqual(r.summary["stop_reason"], "fail_fast")
        self.assertIn("answered HTTP 400", r.stderr)
        # Those still in flight when it stopped are cancelled (a slow build sends more before the
        # refusals come back); none is ok, and every one the server answered was a 400.
        errors = r.summary["errors"]
        self.assertEqual(r.summary["requests"]["ok"], 0)
        self.assertGreater(errors["http_4xx"], 0)
        self.assertEqual(errors["http_4xx"] + errors["cancelled"], r.summary["requests"]["sent"])
        # The server saw every request it refused, and none that the stop cancelled before it
        # reached it (still connecting, on a slow build).
        recs = m.records("/generate")
        self.assertGreaterEqual(len(recs), errors["http_4xx"])
        self.assertLessEqual(len(recs), r.summary["requests"]["sent"])
        self.assertTrue(all(rec["status"] == 400 and rec["placeholders"] == 0 for rec in recs))
        m2 = self.mock("--profile", "sglang", "--image-token", "<image>")
        r = self.run_vlmload(*(["--url", m2.url] + args[2:]), "--image-token", "<image>")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.summary["requests"]["ok"], 20)

    def test_vllm_has_no_generate(self):
        m = self.mock("--profile", "vllm")
        r = self.run_vlmload("--url", m.url, "--api", "native", "--server", "sglang", "--rate",
                             "200", "--requests", "10", "--quiet", "--keep-going")
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertEqual(r.summary["errors"]["http_4xx"], 10)

    def test_faults(self):
        """Faults of /generate replies land in the classes chat replies use, counted exactly as
        the mock injected them."""
        n = 40
        for kind, cls, extra in (("truncate", "truncated", ()), ("malformed", "malformed", ()),
                                 ("http503", "http_5xx", ()),
                                 ("huge", "oversize", ("--max-response", "1MiB"))):
            for stream in (True, False):
                m = self.mock("--profile", "sglang", "--fault", kind + ":0.2", "--tokens", "6")
                args = ["--url", m.url, "--api", "native", "--images", CORPUS, "--rate", "200",
                        "--requests", str(n), "--quiet", *extra]
                if stream:
                    args.append("--stream")
                r = self.run_vlmload(*args, timeout=60)
                self.assertEqual(r.rc, 0, r.stderr)
                injected = [rec for rec in m.records("/generate") if rec.get("fault") == kind]
                self.assertEqual(len(injected), int(n * 0.2))
                self.assertEqual(m.stats()["faults"][kind], len(injected))
                errors = r.summary["errors"]
                self.assertEqual(errors[cls], len(injected), (kind, stream, errors))
                self.assertEqual(sum(errors.values()), len(injected), (kind, stream, errors))
                req = r.summary["requests"]
                self.assertEqual((req["sent"], req["ok"]), (n, n - len(injected)))
                self.assertEqual(r.timeline[-1]["in_flight"], "0")


if __name__ == "__main__":
    harness.main()
