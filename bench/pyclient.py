#!/usr/bin/env python3
"""A Python load client in the style of SGLang's bench_serving, the peer vlmload is measured against.

It does what bench_serving does: one asyncio event loop, aiohttp, a payload dict built per request
and serialised by aiohttp (`json=payload`), open-loop arrivals produced by `asyncio.sleep` of
exponential gaps inside an async generator with one task created per request, and closed-loop
load as N workers. Replies are read whole (`await response.json()`) or, with --stream, line by line
from `response.content` as bench_serving parses SSE.

It measures what vlmload measures, the same way, so the two can be compared figure by figure:

- intended send time of arrival k: t0 + g1 + ... + gk on the planned schedule (the first at t0);
- actual send time: the moment the request is handed to aiohttp (`session.post` is called);
- send lag: actual minus intended;
- achieved rate: (sent - 1) / (last send - first send), vlmload's `rate.achieved`;
- latency: completion minus intended start (and minus the send, `latency_sent_ms`).

Poisson arrivals are planned like vlmload's: the run's N = rate x duration arrivals are the order
statistics of N uniform points over the duration (a Poisson process conditioned on N arrivals), so
the schedule's own sampling error does not count against the client; the gaps between them are
slept with asyncio.sleep one after the other, as bench_serving sleeps its exponential gaps.
Admission stops at the end of the duration whether or not the schedule was kept up with.

Differences from bench_serving, both in Python's favour: one shared ClientSession with a
keep-alive pool (bench_serving opens a ClientSession, hence a connection, per request; pass
--session-per-request for that), and no progress bar.

Usage:
  pyclient.py --url http://127.0.0.1:8080 --rate 1000 --duration 10 [--output out.json]
  pyclient.py --url http://127.0.0.1:8080 --rate 0 --concurrency 64 --duration 10
Standard library plus aiohttp (Debian: python3-aiohttp).
"""
import argparse
import asyncio
import base64
import json
import math
import os
import random
import sys
import time

import aiohttp

PROMPTS = [
    "Describe this image in detail.",
    "What objects are visible, and where are they?",
    "Summarise the scene in one sentence.",
    "Read any text you can see in the picture.",
    "What is the dominant colour, and what does it suggest?",
    "Count the people in the image.",
    "Is there anything unusual about this picture?",
    "Write a short caption for this photograph.",
]


def summarise(values):
    """count, mean, min, p50, p90, p95, p99, max of a list of milliseconds (nearest rank)."""
    if not values:
        return {"count": 0, "mean": 0, "min": 0, "p50": 0, "p90": 0, "p95": 0, "p99": 0, "max": 0}
    v = sorted(values)
    n = len(v)

    def pct(p):
        return v[min(n - 1, max(0, math.ceil(p / 100.0 * n) - 1))]

    return {"count": n, "mean": sum(v) / n, "min": v[0], "p50": pct(50), "p90": pct(90),
            "p95": pct(95), "p99": pct(99), "max": v[-1]}


class Result:
    __slots__ = ("intended", "sent", "done", "ok", "error", "ttft", "itl", "tokens")

    def __init__(self, intended):
        self.intended = intended
        self.sent = 0.0
        self.done = 0.0
        self.ok = False
        self.error = ""
        self.ttft = None
        self.itl = []
        self.tokens = 0


class Client:
    def __init__(self, args):
        self.args = args
        self.url = args.url.rstrip("/") + args.endpoint
        self.headers = {}
        if os.environ.get("OPENAI_API_KEY"):
            self.headers["Authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
        self.image = None
        if args.image:
            with open(args.image, "rb") as f:
                raw = f.read()
            kind = "png" if raw[:8] == b"\x89PNG\r\n\x1a\n" else "jpeg"
            self.image = "data:image/%s;base64,%s" % (kind, base64.b64encode(raw).decode("ascii"))
        self.session = None
        self.results = []
        self.rng = random.Random(args.seed)

    def new_session(self):
        # bench_serving's session: 6 h timeout, 10 MB read buffer; keep-alive pool as wide as the load.
        return aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=6 * 60 * 60),
            read_bufsize=10 * 1024 ** 2,
            connector=aiohttp.TCPConnector(limit=0, force_close=False))

    def payload(self, i):
        prompt = PROMPTS[i % len(PROMPTS)]
        if self.image:
            messages = [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": self.image}},
                {"type": "text", "text": prompt}]}]
        else:
            messages = [{"role": "user", "content": prompt}]
        return {"model": self.args.model, "messages": messages, "temperature": 0.0,
                "max_tokens": self.args.max_tokens, "stream": self.args.stream}

    async def request(self, i, res):
        payload = self.payload(i)
        if self.args.session_per_request:
            session = self.new_session()
        else:
            session = self.session
        try:
            res.sent = time.perf_counter()
            async with session.post(url=self.url, json=payload, headers=self.headers) as response:
                if response.status != 200:
                    await response.read()
                    res.error = "http_%d" % response.status
                elif not self.args.stream:
                    data = await response.json(content_type=None)
                    res.ok = bool(data.get("choices"))
                    res.tokens = (data.get("usage") or {}).get("completion_tokens", 0) or 0
                    if not res.ok:
                        res.error = "malformed"
                else:
                    last = res.sent
                    async for chunk_bytes in response.content:
                        chunk_bytes = chunk_bytes.strip()
                        if not chunk_bytes:
                            continue
                        chunk = chunk_bytes.decode("utf-8")
                        if chunk.startswith("data: "):
                            chunk = chunk[6:]
                        if chunk == "[DONE]":
                            res.ok = True
                            continue
                        data = json.loads(chunk)
                        choices = data.get("choices") or [{}]
                        content = (choices[0].get("delta") or {}).get("content")
                        if content:
                            now = time.perf_counter()
                            if res.ttft is None:
                                res.ttft = now - res.sent
                            else:
                                res.itl.append(now - last)
                            last = now
                        usage = data.get("usage")
                        if usage:
                            res.tokens = usage.get("completion_tokens", res.tokens) or res.tokens
                    if not res.ok:
                        res.error = "truncated"
        except asyncio.CancelledError:
            res.error = "cancelled"
            raise
        except aiohttp.ClientConnectorError:
            res.error = "connect"
        except Exception as e:  # noqa: BLE001 - counted by class, as bench_serving keeps going
            res.error = "transport:" + type(e).__name__
        finally:
            res.done = time.perf_counter()
            if self.args.session_per_request:
                await session.close()

    async def open_loop(self):
        a = self.args
        n = max(1, int(round(a.rate * a.duration)))
        if a.requests:
            n = min(n, a.requests)
        span = n / a.rate
        if a.arrival == "poisson":
            # Poisson process conditioned on n arrivals in `span`: sorted uniform points.
            points = sorted(self.rng.random() * span for _ in range(n))
            gaps = [points[0]] + [points[k] - points[k - 1] for k in range(1, n)]
        else:
            gaps = [1.0 / a.rate] * n
        gaps[0] = 0.0  # bench_serving sends the first request at once
        sem = asyncio.Semaphore(a.concurrency) if a.concurrency else None

        async def limited(i, res):
            if sem is None:
                return await self.request(i, res)
            async with sem:
                return await self.request(i, res)

        async def get_request():
            for i in range(n):
                if gaps[i] > 0:
                    await asyncio.sleep(gaps[i])
                yield i

        tasks = []
        t0 = time.perf_counter()
        intended = t0
        deadline = t0 + a.duration
        async for i in get_request():
            intended += gaps[i]
            if time.perf_counter() >= deadline:
                break  # stop admitting at the end of the duration, as vlmload does
            res = Result(intended)
            self.results.append(res)
            tasks.append(asyncio.create_task(limited(i, res)))
        await self.drain(tasks)
        return t0

    async def closed_loop(self):
        a = self.args
        t0 = time.perf_counter()
        deadline = t0 + a.duration
        counter = [0]

        async def worker():
            while time.perf_counter() < deadline:
                i = counter[0]
                if a.requests and i >= a.requests:
                    return
                counter[0] = i + 1
                res = Result(time.perf_counter())
                self.results.append(res)
                await self.request(i, res)

        await self.drain([asyncio.create_task(worker()) for _ in range(a.concurrency)])
        return t0

    async def drain(self, tasks):
        done, pending = await asyncio.wait(tasks, timeout=self.args.grace + self.args.duration)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending)

    async def run(self):
        if not self.args.session_per_request:
            self.session = self.new_session()
        try:
            if self.args.rate > 0:
                t0 = await self.open_loop()
            else:
                t0 = await self.closed_loop()
        finally:
            if self.session:
                await self.session.close()
        return t0, time.perf_counter()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:30000")
    p.add_argument("--endpoint", default="/v1/chat/completions")
    p.add_argument("--model", default="m")
    p.add_argument("--rate", type=float, default=0, help="arrivals/s (0: closed loop)")
    p.add_argument("--arrival", choices=["poisson", "constant"], default="poisson")
    p.add_argument("--concurrency", type=int, default=0,
                   help="closed loop: workers (default 64); open loop: cap as bench_serving's "
                        "--max-concurrency (default none)")
    p.add_argument("--duration", type=float, default=10, help="seconds of admission")
    p.add_argument("--requests", type=int, default=0, help="stop after N requests")
    p.add_argument("--grace", type=float, default=30, help="seconds to wait for in-flight")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--stream", action="store_true")
    p.add_argument("--image", help="PNG or JPEG file sent as a base64 data URI in every request")
    p.add_argument("--session-per-request", action="store_true",
                   help="a ClientSession per request, as bench_serving does")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--output", help="JSON summary file (default stdout)")
    a = p.parse_args()
    if a.rate <= 0 and not a.concurrency:
        a.concurrency = 64

    client = Client(a)
    t0, t_end = asyncio.run(client.run())
    rs = client.results
    sent = [r for r in rs if r.sent]
    ok = [r for r in rs if r.ok]
    errors = {}
    for r in rs:
        if not r.ok:
            key = r.error or "unknown"
            errors[key] = errors.get(key, 0) + 1
    sends = sorted(r.sent for r in sent)
    achieved = (len(sends) - 1) / (sends[-1] - sends[0]) if len(sends) > 1 and sends[-1] > sends[0] else 0
    last_done = max((r.done for r in rs if r.done), default=t_end)
    elapsed = (last_done - t0) if a.rate > 0 else min(a.duration, last_done - t0)
    # Closed loop counts what completed within the duration, as wrk and vlmload do.
    completed_in = [r for r in ok if a.rate > 0 or r.done - t0 <= a.duration]
    out = {
        "client": "pyclient (asyncio + aiohttp %s, Python %s)" % (aiohttp.__version__,
                                                                   sys.version.split()[0]),
        "mode": "open" if a.rate > 0 else "closed",
        "session": "per-request" if a.session_per_request else "shared",
        "duration_s": elapsed,
        "requests": {"planned": int(round(a.rate * a.duration)) if a.rate > 0 else None,
                     "sent": len(sent), "completed": sum(1 for r in rs if r.done), "ok": len(ok),
                     "failed": len(rs) - len(ok)},
        "rate": {"target": a.rate, "achieved": achieved,
                 "ok_per_s": len(completed_in) / elapsed if elapsed > 0 else 0},
        "send_lag_ms": summarise([(r.sent - r.intended) * 1e3 for r in sent]),
        "latency_ms": summarise([(r.done - r.intended) * 1e3 for r in ok]),
        "latency_sent_ms": summarise([(r.done - r.sent) * 1e3 for r in ok]),
        "ttft_ms": summarise([r.ttft * 1e3 for r in ok if r.ttft is not None]),
        "itl_ms": summarise([g * 1e3 for r in ok for g in r.itl]),
        "tokens": {"completion": sum(r.tokens for r in ok)},
        "errors": errors,
    }
    text = json.dumps(out, indent=2)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
