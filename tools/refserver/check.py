#!/usr/bin/env python3
"""Checks a running refserver (or any server speaking its routes) and measures its throughput.

  check.py --url http://127.0.0.1:30000                 functional checks, PASS/FAIL per line
  check.py --url URL --throughput 20 --concurrency 16   then 20 s of closed-loop image traffic

The functional checks send real requests (JSON and SSE, images of several sizes and formats, bad
input) and check the status codes, token counts, prompt token counts against Qwen's resize rule,
the metrics moving and SGLang's flush semantics (400 while a request runs, 200 idle). The
throughput run keeps --concurrency requests in flight for --throughput seconds and reports
requests/s, latency and the server's memory figures before and after. Needs aiohttp and pillow.
Exit status: 0 when every check passed, 1 otherwise.
"""

import argparse
import asyncio
import base64
import io
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def make_image(w, h, n=0, fmt="jpeg"):
    """A smooth picture with a stamp that depends on n, encoded; a data URI."""
    from PIL import Image, ImageDraw
    im = Image.linear_gradient("L").resize((w, h))
    im = Image.merge("RGB", (im, im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
                             if hasattr(Image, "Transpose") else im.transpose(Image.FLIP_LEFT_RIGHT),
                             Image.new("L", (w, h), 96)))
    d = ImageDraw.Draw(im)
    s = max(8, min(w, h) // 6)
    x = (n * 37) % max(1, w - s)
    y = (n * 53) % max(1, h - s)
    d.rectangle([x, y, x + s, y + s], fill=((n * 71) % 256, (n * 13) % 256, (n * 191) % 256))
    buf = io.BytesIO()
    im.save(buf, format="JPEG" if fmt == "jpeg" else "PNG", quality=90)
    mime = "image/jpeg" if fmt == "jpeg" else "image/png"
    return "data:%s;base64,%s" % (mime, base64.b64encode(buf.getvalue()).decode())


def body(images=(), text="What is in this picture?", max_tokens=8, stream=False, usage=True):
    content = [{"type": "image_url", "image_url": {"url": u}} for u in images]
    content.append({"type": "text", "text": text})
    b = {"model": "any", "messages": [{"role": "user", "content": content}],
         "max_tokens": max_tokens, "temperature": 0}
    if stream:
        b["stream"] = True
        b["stream_options"] = {"include_usage": usage}
    return b


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if m and not m.group(2):
            out[m.group(1)] = float(m.group(3))
        elif m and m.group(2).startswith('{process="'):
            # Two processes: each role's own sample, and their sum under the bare name.
            out[m.group(1) + m.group(2)] = float(m.group(3))
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


class Checker:
    def __init__(self, url, session):
        self.url = url.rstrip("/")
        self.s = session
        self.failed = 0
        self.passed = 0

    def ok(self, cond, what, detail=""):
        if cond:
            self.passed += 1
            print("PASS", what, flush=True)
        else:
            self.failed += 1
            print("FAIL", what, detail, flush=True)
        return cond

    async def get(self, path):
        async with self.s.get(self.url + path) as r:
            return r.status, await r.text()

    async def post(self, path, obj=None, data=None):
        kw = {"json": obj} if obj is not None else {"data": data or b""}
        async with self.s.post(self.url + path, **kw) as r:
            return r.status, await r.text()

    async def metrics(self):
        st, txt = await self.get("/metrics")
        return parse_metrics(txt) if st == 200 else {}

    async def stream(self, obj, on_first=None):
        """Sends a streamed request; returns (status, content chunks, usage, saw_done, error)."""
        chunks, usage, done, err = 0, None, False, None
        async with self.s.post(self.url + "/v1/chat/completions", json=obj) as r:
            if r.status != 200:
                return r.status, 0, None, False, await r.text()
            buf = b""
            async for piece in r.content.iter_any():
                buf += piece
                while b"\n\n" in buf:
                    ev, buf = buf.split(b"\n\n", 1)
                    if not ev.startswith(b"data: "):
                        continue
                    data = ev[6:]
                    if data == b"[DONE]":
                        done = True
                        continue
                    o = json.loads(data)
                    if "error" in o:
                        err = o["error"]
                        continue
                    if o.get("usage"):
                        usage = o["usage"]
                    for c in o.get("choices", []):
                        if c.get("delta", {}).get("content"):
                            chunks += 1
                            if chunks == 1 and on_first:
                                await on_first()
            return 200, chunks, usage, done, err


async def functional(c, args):
    from chat import smart_resize

    def img_tokens(w, h):
        hh, ww = smart_resize(h, w)
        return (hh // 28) * (ww // 28)

    st, _ = await c.get("/health")
    c.ok(st == 200, "GET /health is 200", st)
    st, txt = await c.get("/v1/models")
    c.ok(st == 200 and json.loads(txt)["data"][0]["id"], "GET /v1/models names a model", txt[:200])
    st, txt = await c.get("/get_server_info")
    info = json.loads(txt) if st == 200 else {}
    c.ok(st == 200 and "memory_usage" in info, "GET /get_server_info is SGLang-shaped", st)
    print("server:", json.dumps(info.get("refserver", {}))[:600], flush=True)
    m0 = await c.metrics()
    c.ok("torch_cuda_memory_reserved_bytes" in m0 and "process_resident_memory_bytes" in m0 and
         "sglang:num_running_reqs" in m0, "GET /metrics has the memory and sglang series")

    # Text only, for the prompt-token baseline.
    st, txt = await c.post("/v1/chat/completions", body(max_tokens=8))
    o = json.loads(txt) if st == 200 else {}
    base = o.get("usage", {}).get("prompt_tokens", 0)
    c.ok(st == 200 and o["usage"]["completion_tokens"] == 8 and
         o["choices"][0]["finish_reason"] == "length" and o["choices"][0]["message"]["content"],
         "text-only JSON request: 200, 8 completion tokens", txt[:300])

    # JSON with images of several sizes and formats; prompt tokens follow Qwen's resize rule.
    sizes = [(640, 480, "jpeg"), (224, 224, "png"), (1280, 720, "png"), (1920, 1080, "jpeg"),
             (100, 3000, "png"), (30, 30, "jpeg")]
    for w, h, fmt in sizes:
        t0 = time.perf_counter()
        st, txt = await c.post("/v1/chat/completions", body([make_image(w, h, w + h, fmt)], max_tokens=8))
        dt = time.perf_counter() - t0
        o = json.loads(txt) if st == 200 else {}
        want = base + img_tokens(w, h) + 2
        got = o.get("usage", {}).get("prompt_tokens")
        c.ok(st == 200 and o["usage"]["completion_tokens"] == 8 and got == want,
             "JSON %dx%d %s: 200, 8 tokens, prompt %s tokens (want %d) in %.0f ms" %
             (w, h, fmt, got, want, dt * 1000), txt[:300])

    two = [make_image(320, 240, 1), make_image(800, 600, 2, "png")]
    st, txt = await c.post("/v1/chat/completions", body(two, max_tokens=5))
    o = json.loads(txt) if st == 200 else {}
    want = base + img_tokens(320, 240) + img_tokens(800, 600) + 4
    c.ok(st == 200 and o["usage"]["prompt_tokens"] == want and o["usage"]["completion_tokens"] == 5,
         "two images in one request: prompt %s tokens (want %d)" % (o.get("usage", {}).get("prompt_tokens"), want),
         txt[:300])

    # Batching: a request's greedy output is the same alone and in a batch with longer ones
    # (left padding and the attention mask at work). bf16 near-ties can flip a token on random
    # weights, so a difference is reported, not failed.
    probe = body([make_image(640, 480, 77)], text="Batch probe.", max_tokens=8)
    st, txt = await c.post("/v1/chat/completions", probe)
    alone = json.loads(txt)["choices"][0]["message"]["content"] if st == 200 else None
    others = [body([make_image(1280, 720, 80 + k)], max_tokens=8) for k in range(5)]
    res = await asyncio.gather(*(c.post("/v1/chat/completions", b) for b in others + [probe] + others[:2]))
    batched = json.loads(res[5][1])["choices"][0]["message"]["content"] if res[5][0] == 200 else None
    c.ok(all(r[0] == 200 for r in res), "8 concurrent image requests: all 200")
    print("%s batched greedy output %s the unbatched one (%r vs %r)" %
          ("INFO" if alone == batched else "WARN", "equals" if alone == batched else "differs from",
           alone, batched), flush=True)

    # SSE with usage.
    st, n, usage, done, err = await c.stream(body([make_image(1280, 720, 7)], max_tokens=12, stream=True))
    c.ok(st == 200 and n == 12 and usage and usage["completion_tokens"] == 12 and done and not err,
         "SSE 1280x720: 12 content chunks, usage, [DONE]", (st, n, usage, done, err))
    st, n, usage, done, err = await c.stream(body([], max_tokens=3, stream=True, usage=False))
    c.ok(st == 200 and n == 3 and usage is None and done, "SSE without include_usage: no usage chunk",
         (st, n, usage, done))

    # Bad input: 400 with an OpenAI error object.
    bad = [
        ("invalid base64", body(["data:image/png;base64,@@@@"])),
        ("not an image", body(["data:image/png;base64," + base64.b64encode(b"hello").decode()])),
        ("truncated JPEG", body([make_image(640, 480, 3)[:2000]])),
        ("http URL", body(["http://example.invalid/a.png"])),
        ("no messages", {"model": "x"}),
        ("negative max_tokens", dict(body(), max_tokens=-1)),
    ]
    for what, b in bad:
        st, txt = await c.post("/v1/chat/completions", b)
        c.ok(st == 400 and "error" in json.loads(txt), "bad request (%s): 400" % what, (st, txt[:200]))
    st, txt = await c.post("/v1/chat/completions", data=b"{not json")
    c.ok(st == 400, "bad request (not JSON): 400", st)

    # mm cache: the same image twice is one hit.
    m1 = await c.metrics()
    same = make_image(640, 480, 4242)
    for _ in range(2):
        await c.post("/v1/chat/completions", body([same], max_tokens=2))
    m2 = await c.metrics()
    if m1.get("refserver_mm_cache_entries") is not None and info.get("refserver", {}).get("options", {}).get("mm_cache", True):
        c.ok(m2["refserver_mm_cache_hits_total"] - m1["refserver_mm_cache_hits_total"] >= 1 and
             m2["refserver_mm_cache_entries"] > 0,
             "mm cache: a repeated image is a hit (entries %d)" % m2["refserver_mm_cache_entries"])

    # Flush: 400 while a request runs, 200 when idle.
    codes = []

    async def flush_now():
        st, _ = await c.get("/flush_cache")
        codes.append(st)

    long = body([make_image(1920, 1080, 9)], max_tokens=args.long_tokens, stream=True)
    st, n, usage, done, err = await c.stream(long, on_first=flush_now)
    c.ok(codes == [400], "flush while a request streams: 400", codes)
    c.ok(st == 200 and n == args.long_tokens and done, "the long request completes (%d tokens)" % n)
    m3 = await c.metrics()
    st1, _ = await c.post("/flush_cache")
    st2, _ = await c.get("/flush_cache")
    c.ok(st1 == 200 and st2 == 200, "flush when idle: POST and GET are 200", (st1, st2))
    m4 = await c.metrics()
    c.ok(m4.get("refserver_mm_cache_entries", 0) == 0, "flush empties the mm cache (%d entries before)"
         % m3.get("refserver_mm_cache_entries", -1))
    c.ok(m4.get("refserver_flushes_total", 0) - m3.get("refserver_flushes_total", 0) == 2 and
         m4.get("refserver_flush_refused_total", 0) >= 1, "flush counters move")
    c.ok(m4["refserver_requests_total"] > m0["refserver_requests_total"] and
         m4["refserver_images_total"] > m0["refserver_images_total"] and
         m4["refserver_bad_requests_total"] - m0["refserver_bad_requests_total"] == len(bad) + 1,
         "request, image and bad-request counters move")
    for k in ("torch_cuda_memory_allocated_bytes", "torch_cuda_memory_reserved_bytes",
              "torch_cuda_max_memory_allocated_bytes", "process_resident_memory_bytes"):
        print("  %s: start %.1f MB, before flush %.1f MB, after flush %.1f MB" %
              (k, m0.get(k, 0) / 1e6, m3.get(k, 0) / 1e6, m4.get(k, 0) / 1e6), flush=True)
    st, _ = await c.get("/health_generate")
    c.ok(st == 200, "GET /health_generate is 200", st)


async def throughput(c, args):
    """Closed loop: --concurrency workers, each sending its next request when the last ends."""
    w, h = (int(x) for x in args.resolution.split("x"))
    loop = asyncio.get_running_loop()
    pool = [make_image(w, h, i) for i in range(args.pool)] if not args.unique and args.images else None
    m0 = await c.metrics()
    lat, errors, count = [], 0, [0]
    deadline = time.perf_counter() + args.throughput
    t_start = time.perf_counter()

    async def worker(k):
        nonlocal errors
        i = k
        while time.perf_counter() < deadline:
            if args.images == 0:
                urls = []
            elif args.unique:
                urls = [await loop.run_in_executor(None, make_image, w, h, 100000 + i * 16 + n)
                        for n in range(args.images)]
            else:
                urls = [pool[(i + n) % len(pool)] for n in range(args.images)]
            i += args.concurrency
            t0 = time.perf_counter()
            try:
                if args.stream:
                    st, n, _, done, _ = await c.stream(body(urls, max_tokens=args.max_tokens, stream=True))
                    good = st == 200 and n == args.max_tokens and done
                else:
                    st, txt = await c.post("/v1/chat/completions", body(urls, max_tokens=args.max_tokens))
                    good = st == 200
            except Exception:
                good = False
            if good:
                lat.append(time.perf_counter() - t0)
            else:
                errors += 1
            count[0] += 1

    await asyncio.gather(*(worker(k) for k in range(args.concurrency)))
    el = time.perf_counter() - t_start
    m1 = await c.metrics()
    m2 = None
    if args.flush_after:
        st, _ = await c.post("/flush_cache")
        m2 = await c.metrics() if st == 200 else None
    lat.sort()
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else float("nan")
    res = {
        "resolution": args.resolution, "images_per_request": args.images, "unique_images": args.unique, "concurrency": args.concurrency,
        "max_tokens": args.max_tokens, "stream": args.stream, "seconds": round(el, 2),
        "requests_ok": len(lat), "errors": errors, "requests_per_s": round(len(lat) / el, 2),
        "latency_ms_p50": round(pct(0.5), 1), "latency_ms_p99": round(pct(0.99), 1),
        "batches": m1.get("refserver_batches_total", 0) - m0.get("refserver_batches_total", 0),
        "mean_batch": round((m1.get("refserver_batched_requests_total", 0) - m0.get("refserver_batched_requests_total", 0)) /
                            max(1, m1.get("refserver_batches_total", 0) - m0.get("refserver_batches_total", 0)), 2),
        "processor_s": round(m1.get("refserver_processor_seconds_total", 0) - m0.get("refserver_processor_seconds_total", 0), 2),
        "vision_s": round(m1.get("refserver_vision_seconds_total", 0) - m0.get("refserver_vision_seconds_total", 0), 2),
        "decode_s": round(m1.get("refserver_decode_seconds_total", 0) - m0.get("refserver_decode_seconds_total", 0), 2),
        "mm_hits": m1.get("refserver_mm_cache_hits_total", 0) - m0.get("refserver_mm_cache_hits_total", 0),
        "mm_misses": m1.get("refserver_mm_cache_misses_total", 0) - m0.get("refserver_mm_cache_misses_total", 0),
        "memory_before": {k: m0.get(k) for k in MEM_KEYS},
        "memory_after": {k: m1.get(k) for k in MEM_KEYS},
    }
    if m2 is not None:
        res["memory_after_flush"] = {k: m2.get(k) for k in MEM_KEYS}
    print("THROUGHPUT", json.dumps(res), flush=True)
    return res


MEM_KEYS = ("torch_cuda_memory_allocated_bytes", "torch_cuda_memory_reserved_bytes",
            "torch_cuda_max_memory_allocated_bytes", "process_resident_memory_bytes",
            "refserver_mm_cache_bytes")


async def amain(args):
    import aiohttp
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    conn = aiohttp.TCPConnector(limit=max(100, args.concurrency * 2))
    async with aiohttp.ClientSession(timeout=timeout, connector=conn) as s:
        c = Checker(args.url, s)
        # Wait for the server to answer.
        print("waiting up to %g s for %s/health" % (args.wait, c.url), flush=True)
        deadline = time.monotonic() + args.wait
        while True:
            try:
                st, _ = await c.get("/health")
                if st == 200:
                    break
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                print("FAIL the server did not answer /health within %g s" % args.wait)
                return 1
            await asyncio.sleep(0.5)
        results = {}
        if not args.no_functional:
            await functional(c, args)
            print("%d passed, %d failed" % (c.passed, c.failed), flush=True)
        if args.throughput > 0:
            results["throughput"] = await throughput(c, args)
        if args.json:
            results["passed"], results["failed"] = c.passed, c.failed
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
        return 1 if c.failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:30000", help="the server's base URL")
    ap.add_argument("--wait", type=float, default=60, help="seconds to wait for /health first")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per request")
    ap.add_argument("--no-functional", action="store_true", help="skip the functional checks")
    ap.add_argument("--long-tokens", type=int, default=200,
                    help="max_tokens of the request the busy flush is sent during")
    ap.add_argument("--throughput", type=float, default=0, help="seconds of closed-loop traffic (0: none)")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight in that run")
    ap.add_argument("--resolution", default="640x480", help="image size in that run")
    ap.add_argument("--max-tokens", type=int, default=8, help="max_tokens in that run")
    ap.add_argument("--images", type=int, default=1, help="images per request in that run (0: text only)")
    ap.add_argument("--unique", action="store_true",
                    help="a different image for every request (else a pool of --pool)")
    ap.add_argument("--pool", type=int, default=16, help="images cycled through without --unique")
    ap.add_argument("--stream", action="store_true", help="stream the replies in that run")
    ap.add_argument("--flush-after", action="store_true",
                    help="flush after that run and report the memory figures again")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    sys.exit(asyncio.run(amain(args)))


if __name__ == "__main__":
    main()
