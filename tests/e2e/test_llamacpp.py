"""llama.cpp's llama-server, as the mock's llamacpp profile serves it: vlmload tells the server from
its model list and /props, refuses --flush-every (no route empties its caches) in one line that
says what does, sends "cache_prompt": false with --no-prompt-cache (and refuses it for servers
without the switch), keeps the server's own "timings" per request and splits TTFT and e2e into
the server's share and the rest. Each is judged by the mock's record, its /mock/stats and its own
configured delays, not by vlmload's word."""
import json
import os
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request

import harness
import rawserver

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MATRIX = os.path.join(ROOT, "tools", "scenarios", "llamacpp-matrix.json")


def status(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def timing_tuple(t):
    return (t["prompt_ms"], t["predicted_ms"], t["prompt_n"], t["predicted_n"], t["cache_n"])


class LlamaCppTest(harness.MockTestCase):
    def test_detected_and_props_recorded(self):
        m = self.mock("--profile", "llamacpp", "--max-running", "3")
        props = json.loads(m.get("/props"))
        r = self.run_vlmload("--url", m.url, "--requests", "4", "--rate", "0")
        self.assertEqual(r.rc, 0, r.stderr)
        conf = r.summary["config"]
        self.assertEqual(conf["server"], "llamacpp")
        self.assertEqual(conf["server_props"],
                         {"build_info": props["build_info"], "total_slots": 3,
                          "n_ctx": props["default_generation_settings"]["n_ctx"],
                          "vision": True})

    def test_detected_from_props_alone(self):
        # A llama-server behind a proxy that rewrites owned_by: its /props still tells. A /props
        # that is not llama-server's JSON tells nothing.
        def handler(props):
            def h(req):
                if req.path == "/v1/models":
                    return rawserver.response(200, json.dumps(
                        {"data": [{"id": "m.gguf", "owned_by": "proxy"}]}).encode())
                if req.path == "/props":
                    return rawserver.response(200, props.encode())
                return rawserver.response(404, b"{}")
            return h

        props = json.dumps({"build_info": "b10309-abc", "total_slots": 4,
                            "default_generation_settings": {"n_ctx": 8192},
                            "modalities": {"vision": False}})
        with rawserver.RawServer(handler(props)) as srv:
            r = self.run_vlmload("--url", srv.url, "--requests", "5", "--flush-every", "2")
            self.assertEqual(r.rc, 2, r.stderr)
            self.assertIn("llama.cpp has no route that empties its caches", r.stderr)
            paths = [q.path for q in srv.requests]
            self.assertIn("/props", paths)
            self.assertNotIn("/v1/chat/completions", paths)
        with rawserver.RawServer(handler('{"version": "1"}')) as srv:
            r = self.run_vlmload("--url", srv.url, "--requests", "5", "--flush-every", "2")
            self.assertEqual(r.rc, 2, r.stderr)
            self.assertIn("cannot tell which server", r.stderr)
            self.assertIn("GET /props: HTTP 200, not llama-server's", r.stderr)

    def test_flush_every_refused_in_one_line(self):
        m = self.mock("--profile", "llamacpp")
        for server in ([], ["--server", "llamacpp"]):
            r = self.run_vlmload("--url", m.url, "--requests", "20", "--rate", "0",
                                 "--flush-every", "5", *server)
            self.assertEqual(r.rc, 2, r.stderr)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn("llama.cpp has no route that empties its caches", r.stderr)
            self.assertIn("--cache-ram", r.stderr)
            self.assertIn("--no-prompt-cache", r.stderr)
            self.assertIn("vlmload matrix", r.stderr)
        self.assertEqual(m.records(), [])

    def test_no_prompt_cache_skips_the_servers_cache(self):
        args = ("--profile", "llamacpp", "--prompt-cache-kb-per-prompt", "256")
        load = ("--requests", "30", "--rate", "0", "--concurrency", "4", "--image-ratio", "1",
                "--resolution", "32x32", "--unique-images")
        # Without the switch the cache grows by one entry per unique prompt: the control.
        m = self.mock(*args)
        r = self.run_vlmload("--url", m.url, *load)
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertEqual({rec["cache_prompt"] for rec in recs}, {None})
        self.assertEqual(m.stats()["prompt_cache"]["entries"], 30)
        self.assertEqual(m.stats()["memory_prompt_cache_bytes"], 30 * 256 * 1024)
        m = self.mock(*args)
        r = self.run_vlmload("--url", m.url, *load, "--no-prompt-cache")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertEqual(len(recs), 30)
        self.assertEqual({rec["cache_prompt"] for rec in recs}, {False})
        self.assertEqual({rec["prompt_cache"] for rec in recs}, {"skipped"})
        stats = m.stats()
        self.assertEqual(stats["prompt_cache"]["entries"], 0)
        self.assertEqual(stats["prompt_cache"]["skipped"], 30)
        self.assertEqual(stats["memory_prompt_cache_bytes"], 0)
        self.assertIn("cache_prompt false", " ".join(r.stdout.split()))

    def test_no_prompt_cache_refused_where_there_is_no_switch(self):
        m = self.mock("--profile", "sglang")
        for server in (["--server", "sglang"], ["--server", "vllm"], ["--api", "native"], []):
            r = self.run_vlmload("--url", m.url, "--requests", "5", "--no-prompt-cache", *server)
            self.assertEqual(r.rc, 2, (server, r.stderr))
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn("--no-prompt-cache", r.stderr)
            self.assertIn("a switch", r.stderr)
        self.assertEqual(m.records(), [])
        self.assertEqual(m.records("/generate"), [])

    def test_timings_per_request_and_the_servers_share(self):
        # The mock's timings are its configured delays: prompt_ms = latency + ttft = 150 ms,
        # predicted_ms = (tokens - 1) * itl = 35 ms. TTFT and e2e measured by vlmload are those
        # plus the rest (the network and vlmload), which on loopback is small.
        m = self.mock("--profile", "llamacpp", "--latency", "50ms", "--ttft", "100ms", "--itl",
                      "5ms", "--tokens", "8")
        r = self.run_vlmload("--url", m.url, "--requests", "20", "--rate", "0", "--concurrency",
                             "4", "--stream")
        self.assertEqual(r.rc, 0, r.stderr)
        recs = m.records()
        self.assertEqual(len(recs), 20)
        got = sorted(timing_tuple(l["server"]) for l in r.log)
        want = sorted(timing_tuple(rec["timings"]) for rec in recs)
        self.assertEqual(got, want)
        self.assertEqual({(rec["timings"]["prompt_ms"], rec["timings"]["predicted_ms"])
                          for rec in recs}, {(150, 35)})
        for l in r.log:
            self.assertAlmostEqual(l["server"]["e2e_ms"], 185, places=3)
        st = r.summary["server_time"]
        self.assertEqual(st["requests"], 20)
        self.assertEqual(st["ttft_requests"], 20)
        self.assertAlmostEqual(st["ttft_server_ms"]["mean"], 150, delta=0.2)
        self.assertAlmostEqual(st["e2e_server_ms"]["mean"], 185, delta=0.2)
        self.assertLess(st["ttft_rest_ms"]["mean"], 30 * harness.SLACK)
        self.assertLess(st["e2e_rest_ms"]["mean"], 30 * harness.SLACK)
        # The parts add up to what vlmload measured (histogram precision: 0.1%).
        self.assertAlmostEqual(st["ttft_server_ms"]["mean"] + st["ttft_rest_ms"]["mean"],
                               r.summary["mean_ttft_ms"], delta=0.5)
        self.assertAlmostEqual(st["e2e_server_ms"]["mean"] + st["e2e_rest_ms"]["mean"],
                               r.summary["mean_e2e_latency_ms"], delta=0.5)
        self.assertIn("TTFT: the server 150.0 ms", " ".join(r.stdout.split()))
        # Streams ask for usage: the prompt tokens vlmload counted came from the usage chunk,
        # which the mock sends only to a request that set stream_options.include_usage.
        self.assertEqual(r.summary["tokens"]["prompt"], m.stats()["prompt_tokens_total"])
        self.assertGreater(r.summary["tokens"]["prompt"], 0)

    def test_timings_of_whole_replies_and_the_queue_left_to_the_rest(self):
        # One place (--max-running 1) for 4 at once: the wait for it is not in the server's
        # timings (nor in llama-server's), so it goes to the rest.
        m = self.mock("--profile", "llamacpp", "--latency", "20ms", "--ttft", "30ms", "--itl",
                      "1ms", "--tokens", "11", "--max-running", "1")
        r = self.run_vlmload("--url", m.url, "--requests", "12", "--rate", "0", "--concurrency",
                             "4")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual({timing_tuple(l["server"])[:2] for l in r.log}, {(50, 10)})
        st = r.summary["server_time"]
        self.assertAlmostEqual(st["e2e_server_ms"]["mean"], 60, delta=0.1)
        self.assertEqual(st["ttft_requests"], 0)
        # Past the first few, each waits for the 3 ahead of it: about 180 ms.
        self.assertGreater(st["e2e_rest_ms"]["p50"], 100)

    def test_mock_routes_as_llama_server(self):
        m = self.mock("--profile", "llamacpp", "--loading", "1s", "--metrics")
        code, _ = status(m.url + "/health")
        self.assertEqual(code, 503)
        time.sleep(1.2 * harness.SLACK)
        self.assertEqual(status(m.url + "/health")[0], 200)
        for route in ("/flush_cache", "/reset_prefix_cache", "/reset_mm_cache"):
            req = urllib.request.Request(m.url + route, data=b"", method="POST")
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=10)
            self.assertEqual(e.exception.code, 404)
        slots = json.loads(m.get("/slots"))
        self.assertEqual(len(slots), 1)
        r = self.run_vlmload("--url", m.url, "--requests", "6", "--rate", "0")
        self.assertEqual(r.rc, 0, r.stderr)
        page = m.get("/metrics")
        values = dict(l.split(" ") for l in page.splitlines() if l and not l.startswith("#"))
        stats = m.stats()
        self.assertEqual(float(values["llamacpp:prompt_tokens_total"]),
                         stats["prompt_tokens_total"])
        self.assertEqual(float(values["llamacpp:tokens_predicted_total"]),
                         stats["completion_tokens_total"])
        for name in ("prompt_seconds_total", "n_decode_total", "requests_processing",
                     "requests_deferred", "n_busy_slots_per_decode", "kv_cache_usage_ratio",
                     "kv_cache_tokens"):
            self.assertIn("llamacpp:" + name, values)
        # Without --metrics, llama-server's 501.
        m2 = self.mock("--profile", "llamacpp")
        self.assertEqual(status(m2.url + "/metrics")[0], 501)

    def test_prompt_cache_capped_by_cache_ram(self):
        # 1 MiB cap, 256 KiB per prompt: 4 prompts held, the others evict the oldest.
        m = self.mock("--profile", "llamacpp", "--prompt-cache-kb-per-prompt", "256",
                      "--cache-ram", "1")
        r = self.run_vlmload("--url", m.url, "--requests", "10", "--rate", "0", "--image-ratio",
                             "1", "--resolution", "32x32", "--unique-images")
        self.assertEqual(r.rc, 0, r.stderr)
        pc = m.stats()["prompt_cache"]
        self.assertEqual((pc["entries"], pc["misses"], pc["evicted"]), (4, 10, 6))
        self.assertEqual(m.stats()["memory_prompt_cache_bytes"], 1 << 20)

    def test_matrix_file_runs_fresh_servers(self):
        # The llama.cpp matrix with its variables pointed at the mock: a stand-in for
        # llama-server that takes its arguments (-m, --mmproj, --port, --cache-ram) and starts
        # the mock's llamacpp profile with a prompt cache, one fresh process per cell.
        stub = os.path.join(self.tmp, "llama-server")
        with open(stub, "w") as f:
            f.write("#!%s\nimport os, sys\nargs = sys.argv[1:]\n"
                    "out = ['--profile', 'llamacpp', '--host', '127.0.0.1',\n"
                    "       '--prompt-cache-kb-per-prompt', '64',\n"
                    "       '--record', os.environ['STUB_RECORD'] + '.' + str(os.getpid())]\n"
                    "i = 0\nwhile i < len(args):\n"
                    "    if args[i] in ('--port', '--cache-ram'):\n"
                    "        out += [args[i], args[i + 1]]\n"
                    "    i += 2 if args[i] in ('-m', '--mmproj', '--port', '--cache-ram', '--host')"
                    " else 1\n"
                    "os.execv(os.environ['VLMMOCK'], ['vlmmock'] + out)\n" % sys.executable)
        os.chmod(stub, os.stat(stub).st_mode | stat.S_IEXEC)
        env = dict(os.environ, LLAMA_SERVER=stub, LLAMA_MODEL="m.gguf", LLAMA_MMPROJ="p.gguf",
                   VLMMOCK=harness.VLMMOCK, STUB_RECORD=os.path.join(self.tmp, "rec"))
        out = os.path.join(self.tmp, "out")
        p = subprocess.run([harness.VLMLOAD, "matrix", MATRIX, "--output-dir", out, "--", "--requests",
                            "12", "--warmup", "0", "--resolution", "32x32", "--sample-every",
                            "100ms"], capture_output=True, timeout=300, env=env)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        recs = {}
        for name in os.listdir(self.tmp):
            if name.startswith("rec."):
                with open(os.path.join(self.tmp, name)) as f:
                    recs[name] = [json.loads(l) for l in f if '"seq"' in l]
        self.assertEqual(len(recs), 5)  # a fresh server per cell
        by = {}
        for lines in recs.values():
            images = sum(len(l["images"]) for l in lines)
            cp = {l["cache_prompt"] for l in lines}
            cache = {l["prompt_cache"] for l in lines}
            by.setdefault((images > 0, tuple(sorted(map(str, cp))), tuple(sorted(cache))), 0)
            by[(images > 0, tuple(sorted(map(str, cp))), tuple(sorted(cache)))] += 1
            self.assertEqual(len(lines), 12)
        # text-only (its prompts repeat: hits and misses); images from a pool of 16 and unique
        # images (misses); --cache-ram 0 (no cache); --no-prompt-cache (skipped).
        self.assertIn((False, ("None",), ("hit", "miss")), by)
        self.assertEqual(by[(True, ("None",), ("miss",))], 2)
        self.assertIn((True, ("None",), ("off",)), by)
        self.assertIn((True, ("False",), ("skipped",)), by)
        with open(os.path.join(out, "matrix.json")) as f:
            doc = json.load(f)
        self.assertEqual(len(doc["cells"]), 5)


if __name__ == "__main__":
    harness.main()
