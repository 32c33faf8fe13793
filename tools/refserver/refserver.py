#!/usr/bin/env python3
"""refserver: a reference vision-language-model server for checking a GPU set-up with vlmload.

It serves OpenAI's chat completions (JSON and SSE) with a real transformers Qwen2.5-VL serving
path (the image processor, the vision tower and greedy decoding on the GPU) built from a small
hand-written config with random weights, so nothing is downloaded. It speaks SGLang's routes
(/flush_cache with its busy semantics, /get_server_info, sglang:* metrics), so vlmload's
`--server auto` treats it as SGLang, and exports the process's CUDA allocator and RSS figures in
Prometheus text at /metrics. engine.py describes the pipeline, README.md the rest.
"""

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

VERSION = "refserver-0.1"

FLUSH_OK = ("Cache flushed.\nPlease check backend logs for more details. (When there are running "
            "or waiting requests, the operation will not be performed.)\n")
FLUSH_BUSY = ("Cache not flushed. Please check the server status: there are running or waiting "
              "requests.\n")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="refserver.py",
        description="Reference VLM server: OpenAI chat completions with images through a real "
                    "transformers Qwen2.5-VL path (random weights, nothing downloaded), SGLang's "
                    "flush and info routes, and Prometheus memory metrics.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    a = ap.add_argument
    a("--host", default="127.0.0.1", help="address to listen on")
    a("--port", type=int, default=30000, help="port to listen on (0: any free port)")
    a("--port-file", help="write the port here (atomically) once the server is ready")
    a("--model-name", default="refserver-qwen2.5-vl-tiny", help="the model name served")
    a("--processor", choices=["torchvision-cuda", "torchvision-cpu", "pil"],
      default="torchvision-cuda",
      help="image processor: transformers' torchvision one on the GPU or on the CPU, or its PIL one")
    a("--attn", choices=["sdpa", "eager"], default="sdpa", help="attention implementation")
    a("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16", help="model weights' type")
    a("--device", choices=["cuda", "cpu"], default="cuda", help="where the model runs")
    a("--seed", type=int, default=0, help="seed of the random weights")
    a("--text-layers", type=int, default=4, help="decoder layers of the language model")
    a("--vision-depth", type=int, default=4, help="blocks of the vision tower")
    a("--batch", type=int, default=8,
      help="most requests decoded together (one GPU worker, static batches)")
    a("--batch-tokens", type=int, default=65536, help="most prompt tokens in one batch")
    a("--preprocess-threads", type=int, default=4,
      help="threads that parse bodies, decode images and run the image processor")
    a("--default-max-tokens", type=int, default=16,
      help="tokens generated when a request names no max_tokens")
    a("--max-new-tokens-cap", type=int, default=256, help="most tokens generated for any request")
    a("--context-length", type=int, default=131072, help="longest prompt plus output, in tokens")
    a("--mm-cache", action=argparse.BooleanOptionalAction, default=True,
      help="keep vision-tower outputs by image hash (as SGLang does); --no-mm-cache runs the "
           "tower for every image")
    a("--mm-cache-mb", type=float, default=100.0, help="size of the mm cache, LRU beyond it")
    a("--min-pixels", type=int, default=3136, help="image processor: smallest image area")
    a("--max-pixels", type=int, default=12845056, help="image processor: largest image area")
    a("--max-image-pixels", type=int, default=100_000_000,
      help="refuse (400) images with more pixels than this before decoding them")
    a("--max-body", type=int, default=64 << 20, help="largest request body in bytes (413 past it)")
    a("--warmup", action=argparse.BooleanOptionalAction, default=True,
      help="run one image request and a flush before listening")
    a("--engine", choices=["torch", "stub"], default="torch",
      help="stub: no model and no torch, made-up tokens; for testing the HTTP side only")
    a("--stub-token-delay", type=float, default=0.002, help="stub engine: seconds per decode step")
    a("--verbose", action="store_true", help="access log and flush details on stderr")
    o = ap.parse_args(argv)
    for name in ("batch", "batch_tokens", "preprocess_threads", "text_layers", "vision_depth"):
        if getattr(o, name) < 1:
            ap.error("--%s must be at least 1" % name.replace("_", "-"))
    if o.max_new_tokens_cap < 0 or o.default_max_tokens < 0:
        ap.error("token limits must not be negative")
    if o.engine == "stub":
        o.device = "none"
    return o


def log(*args):
    print("refserver:", *args, file=sys.stderr, flush=True)


def write_port_file(path, port):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Sink:
    """Carries a job's tokens from the GPU worker's thread to its request's coroutine."""

    def __init__(self, loop):
        self.loop = loop
        self.q = asyncio.Queue()

    def emit(self, kind, value):  # worker thread
        try:
            self.loop.call_soon_threadsafe(self.q.put_nowait, (kind, value))
        except RuntimeError:  # the loop is closed: the server is stopping
            pass

    async def events(self):
        """Waits for at least one event; returns all that are queued."""
        ev = [await self.q.get()]
        while not self.q.empty():
            ev.append(self.q.get_nowait())
        return ev


class Server:
    def __init__(self, opts, engine, web):
        self.o = opts
        self.engine = engine
        self.web = web
        self.loop = None
        self.pool = None
        self.started = time.time()
        self.seq = 0
        self.in_flight = 0
        self.in_flight_max = 0
        self.c = dict.fromkeys([
            "requests", "requests_ok", "bad_requests", "errors", "cancelled", "images",
            "image_bytes", "image_pixels", "prompt_tokens", "completion_tokens", "flushes",
            "flush_refused"], 0)
        self.last_flush = None

    # ---------------------------------------------------------------- chat

    async def chat(self, request):
        from chat import BadRequest, error_body
        web = self.web
        body = await request.read()
        self.seq += 1
        rid = "chatcmpl-refserver-%d" % self.seq
        self.c["requests"] += 1
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)
        job = None
        try:
            try:
                job = await self.loop.run_in_executor(self.pool, self.engine.prepare, body)
            except BadRequest as e:
                self.c["bad_requests"] += 1
                return web.Response(status=e.status, text=error_body(e.status, str(e)),
                                    content_type="application/json")
            p = job.prompt
            self.c["images"] += len(p.images)
            self.c["image_bytes"] += sum(im.nbytes for im in p.images)
            self.c["image_pixels"] += sum(im.width * im.height for im in p.images)
            self.c["prompt_tokens"] += len(job.ids)
            sink = Sink(self.loop)
            job.emit = sink.emit
            self.engine.submit(job)
            if p.stream:
                return await self._stream(request, job, sink, rid)
            return await self._json(job, sink, rid)
        except (asyncio.CancelledError, ConnectionResetError):
            if job is not None:
                job.cancelled = True
            self.c["cancelled"] += 1
            raise
        finally:
            self.in_flight -= 1

    async def _json(self, job, sink, rid):
        from chat import completion, error_body, token_text
        toks = []
        while True:
            for kind, val in await sink.events():
                if kind == "token":
                    toks.append(val)
                elif kind == "end":
                    self.c["requests_ok"] += 1
                    self.c["completion_tokens"] += len(toks)
                    return self.web.Response(
                        text=completion(rid, self.o.model_name, "".join(map(token_text, toks)),
                                        len(job.ids), len(toks)),
                        content_type="application/json")
                else:
                    self.c["errors"] += 1
                    return self.web.Response(status=500, text=error_body(500, val),
                                             content_type="application/json")

    async def _stream(self, request, job, sink, rid):
        from chat import SSE_DONE, error_body, sse_chunk, token_text, usage
        web, model = self.web, self.o.model_name
        resp = None
        n = 0
        while True:
            out = []
            end = err = None
            for kind, val in await sink.events():
                if kind == "token":
                    out.append(sse_chunk(rid, model, token_text(val), role=(n == 0)))
                    n += 1
                elif kind == "end":
                    end = True
                else:
                    err = val
            if err is not None and resp is None:
                self.c["errors"] += 1
                return web.Response(status=500, text=error_body(500, err),
                                    content_type="application/json")
            if resp is None:
                resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                                   "Cache-Control": "no-cache"})
                await resp.prepare(request)
            if end:
                if n == 0:
                    out.append(sse_chunk(rid, model, "", role=True))
                out.append(sse_chunk(rid, model, finish="length"))
                if job.prompt.include_usage:
                    out.append(sse_chunk(rid, model, usage_obj=usage(len(job.ids), n)))
                out.append(SSE_DONE)
            elif err is not None:
                self.c["errors"] += 1
                out.append(b"data: " + error_body(500, err).encode() + b"\n\n")
            try:
                if out:
                    await resp.write(b"".join(out))
                if end or err is not None:
                    await resp.write_eof()
            except ConnectionResetError:  # the client went away: stop generating for it
                job.cancelled = True
                self.c["cancelled"] += 1
                self.c["completion_tokens"] += n
                return resp
            if end or err is not None:
                if end:
                    self.c["requests_ok"] += 1
                self.c["completion_tokens"] += n
                return resp

    # ---------------------------------------------------------------- the other routes

    async def flush(self, request):
        """SGLang's /flush_cache: refused while any chat request is in flight; with ?timeout=S,
        waits up to S seconds for the server to go idle first."""
        web = self.web
        try:
            wait = float(request.query.get("timeout", "0"))
        except ValueError:
            wait = 0.0
        deadline = time.monotonic() + max(0.0, wait)
        while self.in_flight > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if self.in_flight > 0:
            self.c["flush_refused"] += 1
            return web.Response(status=400, text=FLUSH_BUSY)
        fut = self.loop.create_future()

        def done(res):
            self.loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(res))

        self.engine.submit_flush(done)
        res = await fut
        self.c["flushes"] += 1
        self.last_flush = dict(res, wall_ms=int(time.time() * 1000))
        if self.o.verbose:
            log("flush:", json.dumps(res))
        return web.Response(status=200, text=FLUSH_OK)

    async def health(self, request):
        return self.web.Response(status=200)

    async def health_generate(self, request):
        """One token of text through the same queue as every request."""
        from chat import Prompt
        pr = Prompt()
        pr.messages = [("user", [("text", "ping")])]
        pr.max_tokens = 1
        job = self.engine.prepare_prompt(pr, internal=True)
        sink = Sink(self.loop)
        job.emit = sink.emit
        self.engine.submit(job)
        while True:
            for kind, _ in await sink.events():
                if kind == "end":
                    return self.web.Response(status=200)
                if kind == "error":
                    return self.web.Response(status=503)

    async def models(self, request):
        return self.web.json_response({"object": "list", "data": [{
            "id": self.o.model_name, "object": "model", "created": int(self.started),
            "owned_by": "refserver", "root": self.o.model_name,
            "max_model_len": self.o.context_length}]})

    def _memory_usage(self, mem):
        gib = float(1 << 30)
        info = self.engine.info()
        weights = info.get("params", 0) * {"bf16": 2, "fp16": 2, "fp32": 4}[self.o.dtype]
        return {"weight": weights / gib, "kvcache": max(0, mem["allocated"] - weights) / gib,
                "token_capacity": self.o.context_length, "graph": 0,
                "total_bytes": mem["reserved"]}

    async def server_info(self, request):
        mem = self.engine.memory()
        mu = self._memory_usage(mem)
        opts = {k: v for k, v in vars(self.o).items() if k not in ("port_file",)}
        return self.web.json_response({
            "version": VERSION, "model_path": self.o.model_name,
            "served_model_name": self.o.model_name, "tp_size": 1, "memory_usage": mu,
            "internal_states": [{"memory_usage": mu}], "pid": os.getpid(),
            "refserver": dict(self.engine.info(), options=opts)})

    def stats(self):
        from engine import rss_bytes
        s = self.engine.stats
        mem = self.engine.memory()
        mm = self.engine.mm
        return dict(
            self.c, uptime_s=round(time.time() - self.started, 3), in_flight=self.in_flight,
            in_flight_max=self.in_flight_max, running=s.running, queued=s.queued,
            batches=s.batches, batched_requests=s.batched_requests,
            vision_images=s.vision_images, vision_patches=s.vision_patches,
            generated_tokens=s.generated_tokens, processor_seconds=round(s.processor_s, 6),
            vision_seconds=round(s.vision_s, 6), decode_seconds=round(s.decode_s, 6),
            mm_cache={"enabled": mm is not None, "entries": len(mm) if mm is not None else 0,
                      "bytes": mm.bytes if mm is not None else 0,
                      "limit_bytes": mm.limit if mm is not None else 0,
                      "hits": s.mm_hits, "misses": s.mm_misses, "evictions": s.mm_evictions},
            cuda=mem, rss_bytes=rss_bytes(), last_flush=self.last_flush)

    async def stats_route(self, request):
        return self.web.json_response(self.stats())

    async def metrics(self, request):
        st = self.stats()
        mm, cu = st["mm_cache"], st["cuda"]
        info = self.engine.info()
        lines = []

        def m(name, kind, help_, value, labels=""):
            lines.append("# HELP %s %s" % (name, help_))
            lines.append("# TYPE %s %s" % (name, kind))
            lines.append("%s%s %s" % (name, labels, _num(value)))

        lab = '{processor="%s",attn="%s",dtype="%s",engine="%s",model="%s"}' % (
            info["processor"], info["attn"], info["dtype"], info["engine"], self.o.model_name)
        m("refserver_info", "gauge", "Constant 1, with the server's settings as labels.", 1, lab)
        m("torch_cuda_memory_allocated_bytes", "gauge",
          "Bytes in tensors now (torch.cuda.memory_allocated).", cu["allocated"])
        m("torch_cuda_memory_reserved_bytes", "gauge",
          "Bytes the caching allocator holds from the driver (torch.cuda.memory_reserved).",
          cu["reserved"])
        m("torch_cuda_max_memory_allocated_bytes", "gauge",
          "Peak of torch_cuda_memory_allocated_bytes since start.", cu["max_allocated"])
        m("torch_cuda_max_memory_reserved_bytes", "gauge",
          "Peak of torch_cuda_memory_reserved_bytes since start.", cu["max_reserved"])
        m("process_resident_memory_bytes", "gauge", "Resident memory of this process.",
          st["rss_bytes"])
        t = os.times()
        m("process_cpu_seconds_total", "counter", "User and system CPU time of this process.",
          t.user + t.system)
        m("process_start_time_seconds", "gauge", "Start time, Unix seconds.", self.started)
        m("refserver_threads", "gauge", "Python threads alive.", threading.active_count())
        counters = [
            ("requests_total", "requests", "Chat requests whose body was received."),
            ("requests_ok_total", "requests_ok", "Chat requests answered in full with 200."),
            ("bad_requests_total", "bad_requests", "Chat requests refused as invalid (4xx)."),
            ("errors_total", "errors", "Chat requests that failed in the server (5xx)."),
            ("cancelled_total", "cancelled", "Chat requests whose client went away."),
            ("images_total", "images", "Images received in valid requests."),
            ("image_bytes_total", "image_bytes", "Encoded bytes of those images."),
            ("image_pixels_total", "image_pixels", "Decoded pixels of those images."),
            ("prompt_tokens_total", "prompt_tokens", "Prompt tokens of valid requests."),
            ("completion_tokens_total", "completion_tokens", "Tokens sent in replies."),
            ("flushes_total", "flushes", "Flushes done."),
            ("flush_refused_total", "flush_refused", "Flushes refused as busy (400)."),
            ("batches_total", "batches", "Batches run on the GPU."),
            ("batched_requests_total", "batched_requests", "Requests in those batches."),
            ("vision_images_total", "vision_images", "Images run through the vision tower."),
            ("vision_patches_total", "vision_patches", "Patches run through the vision tower."),
            ("generated_tokens_total", "generated_tokens", "Tokens decoded."),
            ("processor_seconds_total", "processor_seconds", "Time in the image processor."),
            ("vision_seconds_total", "vision_seconds", "Time in the vision step of batches."),
            ("decode_seconds_total", "decode_seconds", "Time in prefill and decoding."),
        ]
        for name, key, h in counters:
            m("refserver_" + name, "counter", h, st[key])
        m("refserver_requests_in_flight", "gauge",
          "Chat requests received and not yet answered in full.", st["in_flight"])
        m("refserver_requests_in_flight_max", "gauge", "Most chat requests in flight at once.",
          st["in_flight_max"])
        m("refserver_mm_cache_entries", "gauge", "Images in the mm cache.", mm["entries"])
        m("refserver_mm_cache_bytes", "gauge", "Bytes of vision output in the mm cache.",
          mm["bytes"])
        m("refserver_mm_cache_hits_total", "counter", "mm cache hits.", mm["hits"])
        m("refserver_mm_cache_misses_total", "counter", "mm cache misses.", mm["misses"])
        m("refserver_mm_cache_evictions_total", "counter", "mm cache LRU evictions.",
          mm["evictions"])
        m("sglang:num_running_reqs", "gauge", "Requests in the batch on the GPU now.",
          st["running"])
        m("sglang:num_queue_reqs", "gauge", "Requests waiting for a batch.", st["queued"])
        return self.web.Response(
            body=("\n".join(lines) + "\n").encode(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


def _num(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


def warm_up(engine):
    """One image request through the whole path, then a flush: the CUDA context, the kernels'
    first launches and the allocator's first blocks are then not laid to the first requests."""
    from PIL import Image as PILImage
    from chat import Image, Prompt
    pil = PILImage.linear_gradient("L").resize((640, 480)).convert("RGB")
    pr = Prompt()
    pr.messages = [("user", [("image", Image(pil, "png", 0, "warmup")),
                             ("text", "Describe this image.")])]
    pr.images = [pr.messages[0][1][0][1]]
    pr.max_tokens = 4
    done = threading.Event()
    result = []

    def emit(kind, value):
        if kind in ("end", "error"):
            result.append((kind, value))
            done.set()

    job = engine.prepare_prompt(pr, internal=True)
    check = getattr(engine.backend, "check_rope", None)
    if check:
        log("rope positions against the model's get_rope_index: %s" % check(job))
    job.emit = emit
    engine.submit(job)
    if not done.wait(600) or result[0][0] != "end":
        raise SystemExit("refserver: the warm-up request failed: %r" % (result,))
    fl = threading.Event()
    engine.submit_flush(lambda res: fl.set())
    fl.wait(600)


async def serve(opts, engine, web):
    srv = Server(opts, engine, web)
    srv.loop = asyncio.get_running_loop()
    from concurrent.futures import ThreadPoolExecutor
    srv.pool = ThreadPoolExecutor(max_workers=opts.preprocess_threads,
                                  thread_name_prefix="refserver-pre")
    app = web.Application(client_max_size=opts.max_body)
    r = app.router
    r.add_post("/v1/chat/completions", srv.chat)
    r.add_route("GET", "/flush_cache", srv.flush)
    r.add_route("POST", "/flush_cache", srv.flush)
    r.add_get("/health", srv.health)
    r.add_get("/health_generate", srv.health_generate)
    r.add_get("/v1/models", srv.models)
    r.add_get("/get_server_info", srv.server_info)
    r.add_get("/metrics", srv.metrics)
    r.add_get("/refserver/stats", srv.stats_route)
    kw = {} if opts.verbose else {"access_log": None}
    import aiohttp
    site_kw = {}
    if tuple(int(x) for x in re.findall(r"\d+", aiohttp.__version__)[:2]) >= (3, 9):
        kw["shutdown_timeout"] = 2.0
    else:  # before 3.9 the site takes it (the runner would pass it on to each connection)
        site_kw["shutdown_timeout"] = 2.0
    runner = web.AppRunner(app, **kw)
    await runner.setup()
    site = web.TCPSite(runner, opts.host, opts.port, backlog=1024, **site_kw)
    await site.start()
    port = opts.port
    try:
        port = site._server.sockets[0].getsockname()[1]
    except (AttributeError, IndexError, TypeError):
        pass
    if opts.port_file:
        write_port_file(opts.port_file, port)
    host = "[%s]" % opts.host if ":" in opts.host else opts.host
    print("refserver listening on http://%s:%d (pid %d)" % (host, port, os.getpid()), flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        srv.loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log("stopping")
    await runner.cleanup()
    srv.pool.shutdown(wait=False)


def main(argv=None):
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        from aiohttp import web
    except ImportError:
        raise SystemExit("refserver: needs aiohttp (pip install aiohttp)")
    from engine import Engine
    t0 = time.time()
    engine = Engine(opts)
    engine.start()
    info = engine.info()
    log("model ready in %.1f s: %s" % (time.time() - t0, json.dumps(info)))
    if opts.warmup:
        t1 = time.time()
        warm_up(engine)
        log("warm-up done in %.1f s; memory %s" % (time.time() - t1, json.dumps(engine.memory())))
    try:
        asyncio.run(serve(opts, engine, web))
    finally:
        engine.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
