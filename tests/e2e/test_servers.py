"""Servers as they are now, judged by what the server recorded: SGLang's flush that waits for idle
(?timeout=S) and refuses a second flush meanwhile, a server that ignores the parameter, the caches
SGLang's flush leaves, the server's own settings read from a real process's command line and
environment, and the server's counters on the timeline against the mock's own counts."""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import harness
import rawserver

HOLD = {"model": "m", "messages": [{"role": "user", "content": "hold"}], "max_tokens": 150,
        "ignore_eos": True}


def post(url, body=None, timeout=30):
    """POSTs body (JSON) to url; returns (status, text) whatever the status."""
    data = json.dumps(body).encode() if body is not None else b""
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def hold_server(m):
    """Sends one long request (150 tokens at the mock's --itl) on a thread and returns it once the
    mock counts it in flight."""
    t = threading.Thread(target=post, args=(m.url + "/v1/chat/completions", HOLD))
    t.start()
    deadline = time.monotonic() + 10
    while m.stats()["requests_in_flight"] < 1:
        if time.monotonic() > deadline:
            raise AssertionError("the long request never reached the mock")
        time.sleep(0.01)
    return t


class FlushWaitTest(harness.MockTestCase):
    def test_sglang_flush_waits_for_idle(self):
        # A request of someone else keeps the server busy for about 1.5 s when vlmload's first
        # drained flush is due: the server, asked with ?timeout, waits until it is over.
        m = self.mock("--profile", "sglang", "--itl", "10ms", "--tokens", "4")
        t = hold_server(m)
        r = self.run_vlmload("--url", m.url, "--server", "sglang", "--rate", "0", "--concurrency",
                             "1", "--requests", "10", "--flush-every", "5", "--flush-timeout",
                             "10s", "--quiet")
        t.join()
        self.assertEqual(r.rc, 0, r.stderr)
        flushes = m.records("/flush_cache")
        self.assertEqual(len(flushes), 2, flushes)
        first = flushes[0]
        self.assertEqual(first["status"], 200)
        self.assertEqual(first["timeout_s"], 10)
        self.assertEqual(first["in_flight"], 0)
        # It waited for the long request: 5 of vlmload's and the long one had ended.
        self.assertEqual(first["completed_before"], 6)
        self.assertGreater(first["waited_ms"], 500)
        f = r.summary["flushes"]
        self.assertEqual((f["ok"], f["refused"], f["retries"]), (2, 0, 0))
        ev = f["events"][0]
        self.assertEqual(ev["timeout_s"], 10)
        # The call lasted the server's wait, and little more.
        self.assertGreaterEqual(ev["server_wait_ms"], first["waited_ms"])
        self.assertLess(ev["server_wait_ms"], first["waited_ms"] + 500 * harness.SLACK)
        self.assertEqual(f["server_wait_ms"]["count"], 2)
        self.assertAlmostEqual(f["server_wait_ms"]["max"], ev["server_wait_ms"], delta=1e-6)

    def test_server_ignoring_timeout_is_retried(self):
        # An SGLang older than the parameter answers 400 while busy: refusals are retried.
        calls = []

        def handler(req):
            path = req.path.split("?")[0]
            if path == "/v1/models":
                return rawserver.response(200, json.dumps(
                    {"object": "list", "data": [{"id": "m", "owned_by": "sglang"}]}))
            if path == "/flush_cache":
                calls.append(req.path)
                if len(calls) <= 2:
                    return rawserver.response(400, b"Cache not flushed. Please check the server "
                                              b"status: there are running or waiting requests.\n",
                                              headers={"Content-Type": "text/plain"})
                return rawserver.response(200, b"Cache flushed.\n")
            if path.endswith("/chat/completions"):
                return rawserver.response(200, rawserver.chat_reply())
            return rawserver.response(404, b'{"detail": "Not Found"}')

        with rawserver.RawServer(handler) as srv:
            r = self.run_vlmload("--url", srv.url, "--model", "m", "--rate", "0", "--concurrency",
                                 "1", "--requests", "5", "--flush-every", "5", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(calls, ["/flush_cache?timeout=60"] * 3)
        f = r.summary["flushes"]
        self.assertEqual((f["count"], f["ok"], f["retries"]), (1, 1, 2))
        self.assertEqual(f["events"][0]["attempts"], 3)
        self.assertIsNotNone(f["events"][0]["server_wait_ms"])

    def test_mock_refuses_a_second_flush_while_one_waits(self):
        m = self.mock("--profile", "sglang", "--itl", "10ms")
        t = hold_server(m)
        # Without the parameter: refused at once while busy, as before.
        status, text = post(m.url + "/flush_cache")
        self.assertEqual(status, 400)
        out = {}
        waiter = threading.Thread(
            target=lambda: out.update(first=post(m.url + "/flush_cache?timeout=5")))
        waiter.start()
        time.sleep(0.2)
        status, text = post(m.url + "/flush_cache?timeout=5")
        self.assertEqual(status, 400)
        self.assertIn("another flush", text)
        waiter.join()
        t.join()
        self.assertEqual(out["first"][0], 200)
        recs = m.records("/flush_cache")
        self.assertEqual(len(recs), 3, recs)
        self.assertNotIn("timeout_s", recs[0])
        self.assertEqual(recs[0]["status"], 400)
        self.assertGreater(recs[0]["in_flight"], 0)
        second, first = recs[1], recs[2]  # the refusal is recorded when it is answered
        self.assertTrue(second["concurrent"])
        self.assertEqual(second["status"], 400)
        self.assertEqual((first["status"], first["in_flight"], first["timeout_s"]), (200, 0, 5))
        self.assertGreater(first["waited_ms"], 500)

    def test_flush_timeout_expires(self):
        # Still busy when S has passed: 400, after S.
        m = self.mock("--profile", "sglang", "--itl", "10ms")
        t = hold_server(m)
        t0 = time.monotonic()
        status, _ = post(m.url + "/flush_cache?timeout=0.3")
        took = time.monotonic() - t0
        t.join()
        self.assertEqual(status, 400)
        self.assertGreaterEqual(took, 0.3)
        rec = m.records("/flush_cache")[0]
        self.assertEqual((rec["status"], rec["timeout_s"]), (400, 0.3))
        self.assertGreater(rec["in_flight"], 0)
        self.assertGreaterEqual(rec["waited_ms"], 300)

    def test_caches_the_flush_leaves_are_named(self):
        m = self.mock("--profile", "sglang")
        report = os.path.join(self.tmp, "report.html")
        r = self.run_vlmload("--url", m.url, "--server", "sglang", "--rate", "100", "--requests",
                             "40", "--flush-every", "10", "--monitor-pid",
                             "mock=%d" % m.proc.pid, "--analyze", "--report", report)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(len([x for x in m.records("/flush_cache") if x["status"] == 200]), 4)
        left = r.summary["flushes"]["not_cleared"]
        self.assertIn("VLM embedding cache", left)
        self.assertIn("multimodal feature pool", left)
        self.assertEqual(r.summary["memory_analysis"]["not_cleared_by_flush"], left)
        self.assertIn("not cleared by", r.stdout)
        self.assertIn("the post-flush floor holds", r.stdout)
        with open(report) as f:
            page = f.read()
        self.assertIn("id=not-cleared", page)
        # vLLM's resets leave nothing known: no such note.
        v = self.mock("--profile", "vllm")
        r = self.run_vlmload("--url", v.url, "--rate", "100", "--requests", "20", "--flush-every",
                             "10", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIsNone(r.summary["flushes"]["not_cleared"])


def start_process(tmp, argv0, args, env=None):
    """A real process that sleeps, with argv0 and args on its command line and env added to its
    environment (exec -a names the program as a server's launcher would)."""
    script = os.path.join(tmp, "sleeper.py")
    with open(script, "w") as f:
        f.write("import time\ntime.sleep(60)\n")
    cmd = ["bash", "-c", 'exec -a "$0" "$@"', argv0, sys.executable, script] + args
    full = dict(os.environ)
    full.update(env or {})
    p = subprocess.Popen(cmd, env=full)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with open("/proc/%d/cmdline" % p.pid, "rb") as f:
            if f.read().split(b"\0")[0] == argv0.encode():
                return p
        time.sleep(0.01)
    p.kill()
    raise AssertionError("the process did not start")


class SettingsTest(harness.MockTestCase):
    def settings_of(self, proc, *extra):
        m = self.mock()
        try:
            r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "5",
                                 "--monitor-pid", "srv=%d" % proc.pid, *extra)
        finally:
            proc.kill()
            proc.wait()
        self.assertEqual(r.rc, 0, r.stderr)
        got = r.summary["server"]["settings"]
        for s in got:
            self.assertEqual((s["process"], s["pid"]), ("srv", proc.pid))
            self.assertTrue(s["means"])
        return r, {s["name"]: s for s in got}

    def test_llama_server(self):
        p = start_process(self.tmp, "llama-server", ["-m", "model.gguf", "-cram", "1024",
                                                     "--cache-ram", "2048", "-c", "4096",
                                                     "--parallel=2"])
        r, got = self.settings_of(p)
        self.assertEqual(set(got), {"--cache-ram", "--ctx-size", "--parallel"})
        # The last of the two spellings wins, as llama-server takes it.
        self.assertEqual((got["--cache-ram"]["value"], got["--cache-ram"]["source"]),
                         ("2048", "flag"))
        self.assertEqual(got["--cache-ram"]["bytes"], 2048 * 1048576)
        self.assertEqual(got["--ctx-size"]["value"], "4096")
        self.assertNotIn("bytes", got["--ctx-size"])
        self.assertEqual(got["--parallel"]["value"], "2")
        self.assertIn("settings", r.stdout)
        self.assertIn("--cache-ram 2048", r.stdout)

    def test_llama_server_defaults(self):
        p = start_process(self.tmp, "/opt/bin/llama-server", ["-m", "model.gguf"],
                          {"LLAMA_ARG_CTX_SIZE": "8192"})
        _, got = self.settings_of(p)
        self.assertEqual((got["--cache-ram"]["value"], got["--cache-ram"]["source"]),
                         ("8192", "default"))
        self.assertEqual(got["--cache-ram"]["bytes"], 8192 * 1048576)
        self.assertEqual((got["--ctx-size"]["value"], got["--ctx-size"]["source"]), ("8192", "env"))
        self.assertNotIn("--parallel", got)  # no default known: only when given

    def test_sglang(self):
        p = start_process(self.tmp, "python3", ["-m", "sglang.launch_server",
                                                "--mem-fraction-static", "0.7",
                                                "--disable-radix-cache"],
                          {"SGLANG_VLM_CACHE_SIZE_MB": "512"})
        _, got = self.settings_of(p, "--server", "sglang")
        self.assertEqual(got["--mem-fraction-static"]["value"], "0.7")
        self.assertEqual(got["--disable-radix-cache"]["value"], "true")
        self.assertEqual((got["SGLANG_VLM_CACHE_SIZE_MB"]["value"],
                          got["SGLANG_VLM_CACHE_SIZE_MB"]["source"],
                          got["SGLANG_VLM_CACHE_SIZE_MB"]["bytes"]), ("512", "env", 512 * 1048576))
        self.assertEqual((got["SGLANG_MM_FEATURE_CACHE_MB"]["value"],
                          got["SGLANG_MM_FEATURE_CACHE_MB"]["source"],
                          got["SGLANG_MM_FEATURE_CACHE_MB"]["bytes"]),
                         ("1024", "default", 1024 * 1048576))

    def test_vllm(self):
        p = start_process(self.tmp, "python3", ["-m", "vllm.entrypoints.openai.api_server",
                                                "--mm_processor_cache_gb=2",
                                                "--gpu-memory-utilization", "0.5"])
        report = os.path.join(self.tmp, "report.html")
        _, got = self.settings_of(p, "--report", report)
        self.assertEqual(set(got), {"--mm-processor-cache-gb", "--gpu-memory-utilization"})
        self.assertEqual((got["--mm-processor-cache-gb"]["value"],
                          got["--mm-processor-cache-gb"]["bytes"]), ("2", 2 * 1073741824))
        self.assertEqual(got["--gpu-memory-utilization"]["value"], "0.5")
        with open(report) as f:
            page = f.read()
        self.assertIn("<table id=settings>", page)
        self.assertIn("--mm-processor-cache-gb", page)


def last(rows, col):
    vals = [row[col] for row in rows if row.get(col)]
    return float(vals[-1]) if vals else None


class CountersTest(harness.MockTestCase):
    def test_vllm_counters_and_cache_hit_share(self):
        m = self.mock("--profile", "vllm", "--latency", "5ms")
        r = self.run_vlmload("--url", m.url, "--rate", "40", "--requests", "60", "--image-reuse",
                             "0.5", "--resolution", "64x64", "--sample-every", "200ms", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        st = m.stats()
        for col, key in (("vllm:mm_cache_queries_total", "mm_cache_queries_total"),
                         ("vllm:mm_cache_hits_total", "mm_cache_hits_total"),
                         ("vllm:prefix_cache_queries_total", "prefix_cache_queries_total"),
                         ("vllm:prefix_cache_hits_total", "prefix_cache_hits_total")):
            self.assertEqual(last(r.timeline, "prom.server." + col), st[key], col)
            c = {x["name"]: x for x in r.summary["server"]["counters"]}[col]
            self.assertEqual(c["change"], st[key], col)
        self.assertEqual(st["mm_cache_queries_total"], 60)
        im = r.summary["images"]
        # The mock counts a hit for pixels it saw before: exactly the images sent again.
        self.assertEqual(st["mm_cache_hits_total"], im["repeated"])
        self.assertEqual(im["server_cache_hits"], st["mm_cache_hits_total"])
        self.assertAlmostEqual(im["server_hit_share"],
                               st["mm_cache_hits_total"] / st["mm_cache_queries_total"])
        self.assertAlmostEqual(im["server_hit_share"], im["repeat_share"])
        self.assertGreater(im["repeated"], 10)

    def test_sglang_counters_match_metrics(self):
        m = self.mock("--profile", "sglang", "--latency", "5ms")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "40",
                             "--sample-every", "200ms")
        self.assertEqual(r.rc, 0, r.stderr)
        page = m.get("/metrics")
        final = {}
        for line in page.splitlines():
            if line.startswith("sglang:"):
                name, value = line.split(" ")
                final[name.split("{")[0]] = float(value)
        for name in ("sglang:cached_tokens_total", "sglang:cache_hit_rate",
                     "sglang:num_running_reqs", "sglang:token_usage", "sglang:num_queue_reqs"):
            self.assertAlmostEqual(last(r.timeline, "prom.server." + name), final[name], places=5,
                                   msg=name)
        st = m.stats()
        self.assertEqual(final["sglang:cached_tokens_total"], st["prefix_cache_hits_total"])
        self.assertIn("server counters", r.stdout)
        self.assertIn("sglang:cached_tokens_total", r.stdout)

    def test_change_per_phase(self):
        scen = os.path.join(self.tmp, "scen.json")
        with open(scen, "w") as f:
            json.dump({"phases": [
                {"name": "text", "requests": 20, "image-ratio": 0},
                {"name": "images", "requests": 20, "image-ratio": 1, "resolution": "64x64",
                 "unique-images": True},
            ]}, f)
        m = self.mock("--profile", "vllm", "--latency", "5ms")
        r = self.run_vlmload("--url", m.url, "--config", scen, "--rate", "0", "--concurrency",
                             "1", "--sample-every", "100ms", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        ph = r.summary["phases"]
        self.assertEqual(ph[0]["server_counters"]["vllm:mm_cache_queries_total"], 0)
        self.assertEqual(ph[1]["server_counters"]["vllm:mm_cache_queries_total"],
                         m.stats()["mm_cache_queries_total"])
        self.assertEqual(m.stats()["mm_cache_queries_total"], 20)

    def test_off_and_absent(self):
        m = self.mock("--profile", "sglang")
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "10",
                             "--no-server-metrics", "--quiet")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertFalse([c for c in r.timeline[0] if c.startswith("prom.")])
        # A server without /metrics: asked once, nothing scraped, the run as before.
        def handler(req):
            if req.path.endswith("/chat/completions"):
                return rawserver.response(200, rawserver.chat_reply())
            return rawserver.response(404, b'{"detail": "Not Found"}')

        with rawserver.RawServer(handler) as srv:
            r = self.run_vlmload("--url", srv.url, "--model", "m", "--rate", "50", "--requests",
                                 "10", "--sample-every", "100ms", "--quiet")
            asked = [q.path for q in srv.requests if q.path == "/metrics"]
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(asked, ["/metrics"])
        self.assertFalse([c for c in r.timeline[0] if c.startswith("prom.")])
        # An OpenAI-style server has no such page: not asked.
        with rawserver.RawServer(handler) as srv:
            r = self.run_vlmload("--url", srv.url, "--model", "m", "--server", "openai", "--rate",
                                 "50", "--requests", "10", "--quiet")
            asked = [q.path for q in srv.requests if q.path == "/metrics"]
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(asked, [])


if __name__ == "__main__":
    harness.main()
