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
import gc
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
    a("--processes", type=int, choices=[1, 2], default=2,
      help="2: a front process (HTTP and the image processor) and a model process joined by "
           "pipes, as SGLang splits its tokenizer manager from its scheduler; 1: both in one")
    a("--processor-pool", choices=["shared", "per-call"], default="shared",
      help="the image processor on CUDA: shared, the process's caching allocator; per-call, a "
           "torch.cuda.MemPool per call, given back to the driver after it")
    a("--feature-transport", choices=["cpu", "shm"], default="cpu",
      help="how pixel values reach the model process: cpu, copied to the host and through the "
           "pipe; shm, through a file in /dev/shm")
    a("--role", choices=["front", "model"], default="front", help=argparse.SUPPRESS)
    a("--wire-fds", help=argparse.SUPPRESS)
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
    if o.role == "model" and not o.wire_fds:
        ap.error("--role model is started by the front process only")
    if o.processes == 1 and o.feature_transport != "cpu":
        ap.error("--feature-transport applies to --processes 2 only")
    if o.engine == "torch" and o.processor == "torchvision-cuda" and o.device != "cuda":
        ap.error("--processor torchvision-cuda needs --device cuda")
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
    """The HTTP side (the front): pre is the Preprocessor (parse, decode, image processor) run
    on the preprocessing threads; model is the model, in this process (split.LocalModel) or in
    its own (split.ModelClient)."""

    def __init__(self, opts, pre, model, web):
        self.o = opts
        self.pre = pre
        self.model = model
        self.split = opts.processes == 2
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

    async def _submit(self, job):
        if self.split:  # the payload may be large: the pipe's write must not hold the loop
            await self.loop.run_in_executor(self.pool, self.model.submit, job)
        else:
            self.model.submit(job)

    async def _ask(self, fn):
        """Calls fn(done) and waits for done(result), from whichever thread calls it."""
        fut = self.loop.create_future()

        def done(res):
            self.loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(res))

        fn(done)
        return await fut

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
                job = await self.loop.run_in_executor(self.pool, self.pre.prepare, body)
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
            await self._submit(job)
            if p.stream:
                return await self._stream(request, job, sink, rid)
            return await self._json(job, sink, rid)
        except (asyncio.CancelledError, ConnectionResetError):
            if job is not None:
                self.model.cancel(job)
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
                self.model.cancel(job)
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
        res = await self._ask(self.model.flush)
        if self.split:  # the front's own cache too, where it opened CUDA
            before = self.pre.memory()
            gc.collect()
            self.pre.backend.empty_cache()
            res = {"model": res, "front": {"before": before, "after": self.pre.memory()}}
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
        job = self.pre.prepare_prompt(pr, internal=True)
        sink = Sink(self.loop)
        job.emit = sink.emit
        await self._submit(job)
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
        info = self.model.info()
        weights = info.get("params", 0) * {"bf16": 2, "fp16": 2, "fp32": 4}[self.o.dtype]
        return {"weight": weights / gib, "kvcache": max(0, mem["allocated"] - weights) / gib,
                "token_capacity": self.o.context_length, "graph": 0,
                "total_bytes": mem["reserved"]}

    def info(self):
        info = dict(self.model.info(), processes=self.o.processes)
        cls = getattr(self.pre.backend, "proc_cls", None)
        if cls is not None:
            info["processor_class"] = cls.__name__
        return info

    async def server_info(self, request):
        st = await self.stats()
        mu = self._memory_usage(st["cuda"])
        opts = {k: v for k, v in vars(self.o).items() if k not in ("port_file", "wire_fds")}
        return self.web.json_response({
            "version": VERSION, "model_path": self.o.model_name,
            "served_model_name": self.o.model_name, "tp_size": 1, "memory_usage": mu,
            "internal_states": [{"memory_usage": mu}], "pid": os.getpid(),
            "refserver": dict(self.info(), options=opts,
                              pids={k: v["pid"] for k, v in st["processes"].items()})})

    def front_figures(self):
        from engine import rss_bytes
        b = self.pre.backend
        return {"pid": os.getpid(), "cuda": b.memory(), "cuda_initialized": b.cuda_initialized(),
                "rss_bytes": rss_bytes(), "cpu_seconds": sum(os.times()[:2]),
                "processor_calls": self.pre.processor_calls,
                "processor_pools": getattr(b, "pools", 0)}

    async def stats(self):
        """The server's figures: the model's (batches, mm cache, its CUDA allocator), the
        front's (requests, the image processor), and each process's memory under processes
        (front and model; one entry, server, with --processes 1)."""
        mf = await self._ask(self.model.stats)
        if "error" in mf:
            raise self.web.HTTPServiceUnavailable(text=mf["error"])
        if self.split:
            procs = {"front": self.front_figures(), "model": dict(mf)}
        else:
            procs = {"server": dict(mf, processor_calls=self.pre.processor_calls,
                                    processor_pools=getattr(self.pre.backend, "pools", 0))}
        for p in procs.values():
            p.pop("mm_cache", None)
        keys = ("running", "queued", "batches", "batched_requests", "vision_images",
                "vision_patches", "generated_tokens", "vision_seconds", "decode_seconds",
                "payload_mismatches")
        return dict(
            self.c, uptime_s=round(time.time() - self.started, 3), in_flight=self.in_flight,
            in_flight_max=self.in_flight_max, processor_seconds=round(self.pre.processor_s, 6),
            mm_cache=mf["mm_cache"], cuda=mf["cuda"],
            rss_bytes=sum(p["rss_bytes"] for p in procs.values()), processes=procs,
            transport=mf.get("transport"), last_flush=self.last_flush,
            **{k: mf[k] for k in keys})

    async def stats_route(self, request):
        return self.web.json_response(await self.stats())

    async def metrics(self, request):
        st = await self.stats()
        mm = st["mm_cache"]
        info = self.info()
        lines = []

        def m(name, kind, help_, value, labels=""):
            lines.append("# HELP %s %s" % (name, help_))
            lines.append("# TYPE %s %s" % (name, kind))
            lines.append("%s%s %s" % (name, labels, _num(value)))

        def per_process(name, kind, help_, get):
            """One sample per process, labelled by its role; unlabelled with one process."""
            lines.append("# HELP %s %s" % (name, help_))
            lines.append("# TYPE %s %s" % (name, kind))
            for role, p in st["processes"].items():
                lab = '{process="%s"}' % role if self.split else ""
                lines.append("%s%s %s" % (name, lab, _num(get(p))))

        lab = '{processor="%s",attn="%s",dtype="%s",engine="%s",model="%s",processes="%d",' \
              'processor_pool="%s",feature_transport="%s"}' % (
                  info["processor"], info["attn"], info["dtype"], info["engine"],
                  self.o.model_name, self.o.processes, self.o.processor_pool,
                  self.o.feature_transport if self.split else "none")
        m("refserver_info", "gauge", "Constant 1, with the server's settings as labels.", 1, lab)
        per_process("torch_cuda_memory_allocated_bytes", "gauge",
                    "Bytes in tensors now (torch.cuda.memory_allocated), per process.",
                    lambda p: p["cuda"]["allocated"])
        per_process("torch_cuda_memory_reserved_bytes", "gauge",
                    "Bytes the caching allocator holds from the driver "
                    "(torch.cuda.memory_reserved), per process.", lambda p: p["cuda"]["reserved"])
        per_process("torch_cuda_max_memory_allocated_bytes", "gauge",
                    "Peak of torch_cuda_memory_allocated_bytes since start.",
                    lambda p: p["cuda"]["max_allocated"])
        per_process("torch_cuda_max_memory_reserved_bytes", "gauge",
                    "Peak of torch_cuda_memory_reserved_bytes since start.",
                    lambda p: p["cuda"]["max_reserved"])
        per_process("refserver_cuda_initialized", "gauge",
                    "1 once the process has opened CUDA (torch.cuda.is_initialized()).",
                    lambda p: p["cuda_initialized"])
        per_process("process_resident_memory_bytes", "gauge", "Resident memory of the process.",
                    lambda p: p["rss_bytes"])
        per_process("process_cpu_seconds_total", "counter",
                    "User and system CPU time of the process.", lambda p: p["cpu_seconds"])
        m("refserver_processor_pools_total", "counter",
          "Per-call memory pools made for the image processor (--processor-pool per-call).",
          sum(p.get("processor_pools", 0) for p in st["processes"].values()))
        if self.split:
            tr = st.get("transport") or {}
            m("refserver_feature_bytes_total", "counter",
              "Pixel-value bytes sent to the model process.", tr.get("bytes", 0))
            m("refserver_feature_payload_mismatches_total", "counter",
              "Payloads that did not arrive whole (stub engine: checked by hash).",
              st["payload_mismatches"])
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


def warm_up(engine, pre=None):
    """One image request, then a flush: the CUDA context, the kernels' first launches and the
    allocator's first blocks are then not laid to the first requests. With pre (one process)
    the image goes through the image processor too; without (the model process), its pixel
    rows are made in the model process, so the front's first CUDA use stays its first image."""
    from PIL import Image as PILImage
    from chat import Image, Prompt
    from engine import PATCH, MERGE, Job
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

    if pre is not None:
        job = pre.prepare_prompt(pr, internal=True)
    else:
        from chat import smart_resize
        from split import WireImage, WirePrompt
        h, w = smart_resize(480, 640, PATCH * MERGE, engine.opts.min_pixels,
                            engine.opts.max_pixels)
        im = pr.images[0]
        im.grid = (1, h // PATCH, w // PATCH)
        wim = WireImage(640, 480, None, im.grid)
        job = Job(WirePrompt([wim]), *pr.build_ids(), 4, internal=True)
        job.payload = engine.backend.warmup_payload(wim)
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


async def serve(opts, pre, model, web, lost):
    srv = Server(opts, pre, model, web)
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

    def stop_asked():
        lost["asked"] = True
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        srv.loop.add_signal_handler(sig, stop_asked)
    lost["stop"] = lambda: srv.loop.call_soon_threadsafe(stop.set)
    if lost.get("gone"):
        stop.set()
    await stop.wait()
    log("stopping")
    await runner.cleanup()
    srv.pool.shutdown(wait=False)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    opts = parse_args(argv)
    import split
    if opts.role == "model":
        return split.model_main(opts, warm_up)
    try:
        from aiohttp import web
    except ImportError:
        raise SystemExit("refserver: needs aiohttp (pip install aiohttp)")
    if opts.processes == 2:
        split.retitle_front(argv)  # returns once it has been done
        split.set_comm("refserver::front")
    from engine import Engine, Preprocessor
    lost = {}
    t0 = time.time()
    model = transport = None
    try:
        if opts.processes == 2:
            def on_lost():
                # A signal to the process group reaches the model process as well as this one:
                # its end is then no failure. Give this process's handler a moment to say so.
                time.sleep(0.5)
                if lost.get("asked"):
                    return
                lost["gone"] = True
                log("the model process is gone: stopping")
                if "stop" in lost:
                    lost["stop"]()

            model = split.ModelClient(opts, argv, on_lost)  # builds while the front imports
        if opts.engine == "stub":
            from engine import StubProcessor
            proc, torch = StubProcessor(opts), None
        else:
            from engine import TorchProcessor
            proc = TorchProcessor(opts)
            torch = proc.torch
        if model is not None:
            transport = split.Transport(opts.feature_transport, torch)
            pre = Preprocessor(opts, proc, transport.pack)
            model.wait_ready()
            log("model process %d ready in %.1f s: %s" %
                (model.proc.pid, time.time() - t0, json.dumps(model.info())))
        else:
            pre = Preprocessor(opts, proc)
            if opts.engine == "stub":
                from engine import StubModel
                backend = StubModel(opts)
            else:
                from engine import TorchModel
                backend = TorchModel(opts)
            engine = Engine(opts, backend)
            engine.start()
            model = split.LocalModel(engine)
            log("model ready in %.1f s: %s" % (time.time() - t0, json.dumps(backend.info())))
            if opts.warmup:
                t1 = time.time()
                warm_up(engine, pre)
                log("warm-up done in %.1f s; memory %s" %
                    (time.time() - t1, json.dumps(backend.memory())))
        asyncio.run(serve(opts, pre, model, web, lost))
    finally:
        if isinstance(model, split.LocalModel):
            model.engine.stop()
        elif model is not None:
            model.stop()
            if transport is not None:
                transport.cleanup()
    return 1 if lost.get("gone") else 0


if __name__ == "__main__":
    sys.exit(main())
