"""The serving engine: preprocessing, the multimodal cache, and one GPU worker that runs batches.

PIPELINE. A chat request is parsed and its images decoded and run through the image processor
on a pool of preprocessing threads (--preprocess-threads), as SGLang does in its tokenizer
manager, so CPU-side image work overlaps the GPU. The prepared job then waits in one FIFO queue.
One worker thread owns the model: it takes the first job and, without waiting for more, every
job queued behind it up to --batch requests and --batch-tokens prompt tokens; runs the vision
tower once over the batch's images that the mm cache does not hold; and decodes the batch
greedily in lock step (left-padded prefill, then one token per step, a KV cache per batch),
handing each step's tokens to the HTTP side. A request leaves the batch when it has its
max_tokens; the batch ends when every request has. Static batching, no continuous batching: a
request that arrives during a batch waits for the next.

MM CACHE. Like SGLang's multimodal cache: the vision tower's output per image, keyed by a hash of
the decoded pixels, kept on the device in LRU order up to --mm-cache-mb and emptied by a flush.
The image processor runs for every image either way; a hit skips the vision tower only.

FLUSH. A flush is a job in the same queue, so it runs between batches on the worker thread:
empty the mm cache, gc.collect(), torch.cuda.empty_cache(). The HTTP side refuses it (400) while
any chat request is in flight, as SGLang's /flush_cache does.

Two backends: 'torch' (a Qwen2.5-VL built from a small config with random weights and
transformers' image processor) and 'stub' (no torch: grids from Qwen's resize rule and made-up
tokens, for testing the HTTP side on a machine without a GPU).
"""

import collections
import gc
import os
import threading
import time

from chat import (BadRequest, IMAGE_TOKEN, PAD, VOCAB, parse, smart_resize)

PATCH, MERGE, TEMPORAL = 14, 2, 2


class Job:
    """One chat request on its way through the engine. The worker calls emit(kind, value) from
    its thread; the HTTP side installs it. payload is the image processor's output for all the
    request's images (a tensor or, with the stub, bytes), or its transported form between the
    processes; the model's backend gives each image its rows of it (assign)."""

    __slots__ = ("prompt", "ids", "segs", "max_tokens", "produced", "cancelled", "emit",
                 "t_queued", "internal", "payload", "jid")

    def __init__(self, prompt, ids, segs, max_tokens, internal=False):
        self.prompt = prompt
        self.ids = ids
        self.segs = segs
        self.max_tokens = max_tokens
        self.produced = 0
        self.cancelled = False
        self.emit = None
        self.t_queued = 0.0
        self.internal = internal  # /health_generate: not a client request
        self.payload = None
        self.jid = 0


class _Flush:
    __slots__ = ("done", "result")

    def __init__(self, done):
        self.done = done
        self.result = None


class Stats:
    """Counters the worker and the preprocessors update (plain ints: the GIL keeps += whole)."""

    def __init__(self):
        self.batches = 0
        self.batched_requests = 0
        self.running = 0          # requests in the batch now on the GPU
        self.queued = 0           # prepared jobs waiting for a batch
        self.mm_hits = 0
        self.mm_misses = 0
        self.mm_evictions = 0
        self.vision_images = 0    # images run through the vision tower
        self.vision_patches = 0
        self.vision_s = 0.0
        self.decode_s = 0.0
        self.generated_tokens = 0


class MMCache:
    """LRU of vision-tower outputs by image hash, bounded in bytes."""

    def __init__(self, limit_bytes):
        self.limit = limit_bytes
        self.entries = collections.OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            v = self.entries.get(key)
            if v is not None:
                self.entries.move_to_end(key)
            return v

    def put(self, key, value, nbytes, stats):
        if nbytes > self.limit:
            return
        with self.lock:
            if key in self.entries:
                return
            while self.entries and self.bytes + nbytes > self.limit:
                _, (_, n) = self.entries.popitem(last=False)
                self.bytes -= n
                stats.mm_evictions += 1
            self.entries[key] = (value, nbytes)
            self.bytes += nbytes

    def clear(self):
        with self.lock:
            n, b = len(self.entries), self.bytes
            self.entries.clear()
            self.bytes = 0
            return n, b

    def __len__(self):
        return len(self.entries)


class Preprocessor:
    """The front's half: parse a body, decode its images and run the image processor, on any
    of the preprocessing threads. move_out(pixel_values) is given the processor's output for a
    request's images while it is still the processor's (inside a per-call memory pool, if one is
    used) and returns what the job carries on: the same tensor in one process, a copy on the
    host or in shared memory for the model process."""

    def __init__(self, opts, backend, move_out=None):
        from PIL import Image as PILImage
        PILImage.MAX_IMAGE_PIXELS = None  # --max-image-pixels is the guard
        self.opts = opts
        self.backend = backend
        self.move_out = move_out or (lambda pv: pv)
        self.processor_s = 0.0   # summed over threads
        self.processor_calls = 0

    def prepare(self, body):
        """Parse, decode and process one request body; returns a Job or raises BadRequest."""
        prompt = parse(body, self.opts.max_image_pixels, self.opts.mm_cache)
        return self.prepare_prompt(prompt)

    def prepare_prompt(self, prompt, internal=False):
        payload = None
        if prompt.images:
            t0 = time.perf_counter()
            payload = self.backend.process(prompt.images, self.move_out)
            self.processor_s += time.perf_counter() - t0
            self.processor_calls += 1
            for im in prompt.images:
                im.pil = None  # the processor has what it needs
        ids, segs = prompt.build_ids()
        mt = prompt.max_tokens
        if mt is None:
            mt = self.opts.default_max_tokens
        mt = min(mt, self.opts.max_new_tokens_cap)
        if len(ids) + mt > self.opts.context_length:
            raise BadRequest("the prompt (%d tokens) and max_tokens (%d) exceed the context length "
                             "of %d" % (len(ids), mt, self.opts.context_length))
        job = Job(prompt, ids, segs, mt, internal)
        job.payload = payload
        return job

    def memory(self):
        return self.backend.memory()


class Engine:
    """The model's half: the queue, the mm cache and the worker that runs batches."""

    def __init__(self, opts, backend):
        self.opts = opts
        self.stats = Stats()
        self.mm = MMCache(int(opts.mm_cache_mb * 1048576)) if opts.mm_cache else None
        self.backend = backend
        self.queue = collections.deque()
        self.cv = threading.Condition()
        self.stopping = False
        self.thread = None
        self.started = time.time()

    # ------------------------------------------------------------ the queue

    def start(self):
        self.thread = threading.Thread(target=self._worker, name="refserver-gpu", daemon=True)
        self.thread.start()

    def submit(self, job):
        if job.payload is not None:
            self.backend.assign(job.prompt.images, job.payload)
            job.payload = None
        job.t_queued = time.perf_counter()
        with self.cv:
            self.queue.append(job)
            self.stats.queued += 1
            self.cv.notify()

    def submit_flush(self, done):
        """Queues a flush; done(result) is called from the worker thread."""
        with self.cv:
            self.queue.append(_Flush(done))
            self.cv.notify()

    def stop(self):
        with self.cv:
            self.stopping = True
            self.cv.notify()
        if self.thread:
            self.thread.join(timeout=30)

    def _next(self):
        with self.cv:
            while not self.queue and not self.stopping:
                self.cv.wait()
            if self.stopping:
                return None
            first = self.queue.popleft()
            if isinstance(first, _Flush):
                return first
            batch, tokens = [first], len(first.ids)
            while (self.queue and len(batch) < self.opts.batch and isinstance(self.queue[0], Job)
                   and tokens + len(self.queue[0].ids) <= self.opts.batch_tokens):
                j = self.queue.popleft()
                batch.append(j)
                tokens += len(j.ids)
            self.stats.queued -= len(batch)
            return batch

    def _worker(self):
        self.backend.thread_init()
        while True:
            item = self._next()
            if item is None:
                return
            if isinstance(item, _Flush):
                try:
                    item.result = self.flush_now()
                except Exception as e:  # report, keep serving
                    item.result = {"error": repr(e)}
                item.done(item.result)
                continue
            batch = [j for j in item if not j.cancelled]
            for j in item:
                if j.cancelled:
                    j.emit("error", "cancelled")
            if not batch:
                continue
            self.stats.batches += 1
            self.stats.batched_requests += len(batch)
            self.stats.running = len(batch)
            try:
                self._run(batch)
            except Exception as e:
                import traceback
                traceback.print_exc()
                for j in batch:
                    if j.produced < j.max_tokens or j.max_tokens == 0:
                        j.emit("error", "generation failed: %s" % (str(e)[:200] or type(e).__name__))
            finally:
                self.stats.running = 0

    def _run(self, batch):
        # Vision: cached outputs where the mm cache has them, one tower run for the rest.
        t0 = time.perf_counter()
        feats = {}       # id(image) -> embedding
        misses = []      # images to encode, one per distinct key when the cache is on
        by_key = {}
        for j in batch:
            for im in j.prompt.images:
                if self.mm is not None:
                    hit = self.mm.get(im.key)
                    if hit is not None:
                        feats[id(im)] = hit[0]
                        self.stats.mm_hits += 1
                        continue
                    self.stats.mm_misses += 1
                    if im.key in by_key:
                        by_key[im.key].append(im)
                        continue
                    by_key[im.key] = [im]
                misses.append(im)
        if misses:
            outs = self.backend.encode(misses)
            self.stats.vision_images += len(misses)
            for im, (emb, nbytes) in zip(misses, outs):
                self.stats.vision_patches += im.grid[0] * im.grid[1] * im.grid[2]
                same = by_key.get(im.key, [im]) if self.mm is not None else [im]
                for other in same:
                    feats[id(other)] = emb
                if self.mm is not None:
                    self.mm.put(im.key, emb, nbytes, self.stats)
        for j in batch:
            for im in j.prompt.images:
                im.pixel_values = None
        t1 = time.perf_counter()
        self.stats.vision_s += t1 - t0
        self.backend.generate(batch, feats, self._deliver)
        self.stats.decode_s += time.perf_counter() - t1
        for j in batch:
            if j.max_tokens == 0 and not j.cancelled:
                j.emit("end", None)  # prefill only

    def _deliver(self, batch, toks):
        """One step's tokens (one per job of the batch); returns True while any job wants more."""
        more = False
        for j, t in zip(batch, toks):
            if j.cancelled or j.produced >= j.max_tokens:
                continue
            j.produced += 1
            self.stats.generated_tokens += 1
            last = j.produced >= j.max_tokens
            j.emit("token", t)
            if last:
                j.emit("end", None)
            else:
                more = True
        return more

    # ------------------------------------------------------------ flush and memory

    def flush_now(self):
        before = self.backend.memory()
        n, b = self.mm.clear() if self.mm is not None else (0, 0)
        gc.collect()
        self.backend.empty_cache()
        after = self.backend.memory()
        return {"mm_cache_entries": n, "mm_cache_bytes": b, "before": before, "after": after}

    def memory(self):
        return self.backend.memory()

    def info(self):
        return self.backend.info()


def rss_bytes():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# ==================================================================== backends


def no_memory():
    return {"allocated": 0, "reserved": 0, "max_allocated": 0, "max_reserved": 0}


class StubProcessor:
    """No torch: grids from Qwen's resize rule; the payload is the images' decoded RGB bytes, so
    that what crosses to the model process is checked there (StubModel.assign)."""

    def __init__(self, opts):
        self.opts = opts

    def process(self, images, move_out):
        for im in images:
            h, w = smart_resize(im.height, im.width, PATCH * MERGE, self.opts.min_pixels,
                                self.opts.max_pixels)
            im.grid = (1, h // PATCH, w // PATCH)
        return move_out(b"".join(im.pil.tobytes() for im in images))

    def empty_cache(self):
        pass

    def cuda_initialized(self):
        return False

    def memory(self):
        return no_memory()


class StubModel:
    """No model: made-up tokens. For testing the HTTP side and the two processes' wiring."""

    def __init__(self, opts):
        self.opts = opts
        self.payload_bytes = 0
        self.payload_mismatches = 0

    def thread_init(self):
        pass

    def assign(self, images, payload):
        """Checks that each image's pixels arrived whole: the hash of its slice of the payload
        is its key (when the request was keyed)."""
        import hashlib
        at = 0
        self.payload_bytes += len(payload)
        for im in images:
            n = im.width * im.height * 3
            px = bytes(payload[at:at + n])
            at += n
            if im.key is not None:
                h = hashlib.blake2b(digest_size=16)
                h.update(b"%dx%d:" % (im.width, im.height))
                h.update(px)
                if h.hexdigest() != im.key:
                    self.payload_mismatches += 1
        if at != len(payload):
            self.payload_mismatches += 1

    def encode(self, images):
        return [(("stub", im.key), im.tokens * 512 * 2) for im in images]

    def generate(self, batch, feats, deliver):
        step = 0
        seeds = [sum(j.ids[-8:]) % VOCAB for j in batch]
        while True:
            toks = [(s * 2654435761 + step * 40503) % 151000 for s in seeds]
            step += 1
            if not deliver(batch, toks) or all(j.cancelled for j in batch):
                return
            if self.opts.stub_token_delay > 0:
                time.sleep(self.opts.stub_token_delay)

    def warmup_payload(self, im):
        return b"\0" * (im.width * im.height * 3)

    def empty_cache(self):
        pass

    def cuda_initialized(self):
        return False

    def memory(self):
        return no_memory()

    def info(self):
        return {"engine": "stub", "processor": self.opts.processor, "attn": self.opts.attn,
                "dtype": self.opts.dtype, "device": "none", "params": 0}


def _config(opts):
    """The hand-written Qwen2.5-VL config: Qwen's token ids and vocabulary, a narrow model."""
    from transformers import Qwen2_5_VLConfig

    heads, hidden = 8, 512
    head_dim = hidden // heads
    sec = head_dim // 2  # mrope_section must sum to head_dim / 2: t, h, w as 1/4, 3/8, 3/8
    mrope = [sec // 4, (sec - sec // 4) // 2, sec - sec // 4 - (sec - sec // 4) // 2]
    text = dict(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=1536,
                num_hidden_layers=opts.text_layers, num_attention_heads=heads,
                num_key_value_heads=2, hidden_act="silu", max_position_embeddings=opts.context_length,
                rms_norm_eps=1e-6, tie_word_embeddings=True, use_cache=True,
                rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                 "mrope_section": mrope})
    depth = opts.vision_depth
    vision = dict(depth=depth, hidden_size=256, intermediate_size=768, num_heads=4,
                  in_channels=3, patch_size=PATCH, spatial_merge_size=MERGE,
                  temporal_patch_size=TEMPORAL, window_size=112, out_hidden_size=hidden,
                  fullatt_block_indexes=[i for i in range(depth) if i % 4 == 3] or [depth - 1])
    cfg = Qwen2_5_VLConfig(text_config=text, vision_config=vision, image_token_id=IMAGE_TOKEN,
                           vision_start_token_id=151652, vision_end_token_id=151653,
                           tie_word_embeddings=True)
    return cfg


class TorchProcessor:
    """transformers' Qwen2-VL image processor: its torchvision one (on CUDA or the CPU) or its
    PIL one. Touches CUDA at its first image only (never before), so a process that runs it and
    no model opens its CUDA context then. With --processor-pool per-call each call on CUDA
    allocates from a torch.cuda.MemPool of its own, given back to the driver when the call's
    outputs are moved out; by default the call allocates from the process's caching allocator,
    which keeps its largest scratch blocks."""

    def __init__(self, opts):
        import torch
        import transformers

        self.torch = torch
        self.opts = opts
        kw = dict(min_pixels=opts.min_pixels, max_pixels=opts.max_pixels, patch_size=PATCH,
                  temporal_patch_size=TEMPORAL, merge_size=MERGE)
        major = int(transformers.__version__.split(".")[0])
        if opts.processor == "pil":
            names = ["Qwen2VLImageProcessorPil"] + (["Qwen2VLImageProcessor"] if major < 5 else [])
        else:
            names = (["Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast"] if major >= 5 else
                     ["Qwen2VLImageProcessorFast"])
        cls = None
        for n in names:
            cls = getattr(transformers, n, None)
            if cls is not None:
                break
        if cls is None:
            raise SystemExit("refserver: transformers %s has none of %s" %
                             (transformers.__version__, ", ".join(names)))
        self.proc_cls = cls
        self.proc_kw = kw
        self.proc_device = {"torchvision-cuda": "cuda", "torchvision-cpu": "cpu"}.get(opts.processor)
        self.per_call = opts.processor_pool == "per-call" and self.proc_device == "cuda"
        if self.per_call and not hasattr(torch.cuda, "MemPool"):
            raise SystemExit("refserver: --processor-pool per-call needs torch.cuda.MemPool "
                             "(torch 2.5 or later); this is torch %s" % torch.__version__)
        self.local = threading.local()
        self.pools = 0  # per-call pools made
        self.transformers_version = transformers.__version__

    def _processor(self):
        """One processor per thread: the preprocessing threads share nothing."""
        p = getattr(self.local, "proc", None)
        if p is None:
            p = self.local.proc = self.proc_cls(**self.proc_kw)
        return p

    def process(self, images, move_out):
        """Runs the image processor over a request's images; sets each image's grid and returns
        move_out(pixel rows of all the images, in order)."""
        import contextlib
        torch = self.torch
        proc = self._processor()
        kw = {"return_tensors": "pt"}
        if self.proc_device:
            kw["device"] = self.proc_device
        pool = None
        scope = contextlib.nullcontext()
        if self.per_call:
            pool = torch.cuda.MemPool()
            scope = torch.cuda.use_mem_pool(pool)  # this thread's allocations only
            self.pools += 1
        try:
            with torch.inference_mode():
                with scope:
                    out = proc(images=[im.pil for im in images], **kw)
                pv, grid = out["pixel_values"], out["image_grid_thw"]
                del out
                for im, g in zip(images, grid.tolist()):
                    im.grid = tuple(g)
                # Outside the pool: what move_out allocates outlives the call.
                kept = move_out(pv)
                if pool is not None and kept is pv:
                    kept = pv.clone()
                del pv, grid
        except ValueError as e:
            raise BadRequest("the image processor refused an image: %s" % str(e)[:160])
        finally:
            # Every tensor of the pool is gone: dropping it gives its memory back to the driver.
            del pool, scope
        return kept

    def cuda_initialized(self):
        return self.torch.cuda.is_initialized()

    def empty_cache(self):
        if self.torch.cuda.is_initialized():
            self.torch.cuda.empty_cache()

    def memory(self):
        return cuda_memory(self.torch)


def cuda_memory(torch):
    """The caching allocator's figures, without opening a CUDA context where none is open."""
    if not torch.cuda.is_initialized():
        return no_memory()
    c = torch.cuda
    return {"allocated": c.memory_allocated(), "reserved": c.memory_reserved(),
            "max_allocated": c.max_memory_allocated(), "max_reserved": c.max_memory_reserved()}


class TorchModel:
    """The Qwen2.5-VL with random weights: the vision tower and greedy decoding."""

    def __init__(self, opts):
        import torch
        import transformers

        self.torch = torch
        self.opts = opts
        if opts.device == "cuda" and not torch.cuda.is_available():
            raise SystemExit("refserver: --device cuda but torch sees no CUDA device")
        self.device = torch.device(opts.device)
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[opts.dtype]
        torch.manual_seed(opts.seed)

        cfg = _config(opts)
        from transformers import Qwen2_5_VLForConditionalGeneration as VL
        t0 = time.time()
        with torch.device(self.device):
            try:
                model = VL._from_config(cfg, attn_implementation=opts.attn, dtype=self.dtype)
            except TypeError:
                model = VL._from_config(cfg, attn_implementation=opts.attn, torch_dtype=self.dtype)
        # Only the parameters take the dtype: rope's inverse frequencies stay in float32.
        for prm in model.parameters():
            if prm.dtype != self.dtype:
                prm.data = prm.data.to(self.dtype)
        self.model = model.to(self.device).eval()
        self.build_s = time.time() - t0
        inner = getattr(model, "model", model)
        self.visual = getattr(inner, "visual", None) or model.visual
        self.lm = getattr(inner, "language_model", None) or model.language_model
        self.embed = self.lm.get_input_embeddings()
        self.lm_head = model.lm_head
        self.params = sum(p.numel() for p in model.parameters())
        self.attn_impl = {
            "text": getattr(self.lm.config, "_attn_implementation", "?"),
            "vision": getattr(self.visual.config, "_attn_implementation", "?"),
        }
        self.proc_class = "?"
        self.transformers_version = transformers.__version__

    def thread_init(self):
        self.torch.set_grad_enabled(False)

    def assign(self, images, pv):
        """Gives each image its rows of the processor's output."""
        rows = 0
        for im in images:
            n = im.grid[0] * im.grid[1] * im.grid[2]
            im.pixel_values = pv[rows:rows + n]
            rows += n

    def warmup_payload(self, im):
        """Pixel rows of the right shape for a warm-up image, made here: the model process
        warms up without the image processor."""
        n = im.grid[0] * im.grid[1] * im.grid[2]
        return self.torch.rand((n, 3 * TEMPORAL * PATCH * PATCH), dtype=self.torch.float32)

    def encode(self, images):
        """The vision tower over images (pixel rows already made); an embedding per image."""
        torch = self.torch
        with torch.inference_mode():
            pv = torch.cat([im.pixel_values.to(self.device, non_blocking=True) for im in images])
            grid = torch.tensor([im.grid for im in images], dtype=torch.long, device=self.device)
            out = self.visual(pv.to(self.dtype), grid_thw=grid)
            want = sum(im.tokens for im in images)
            emb = _pick_tensor(out, want)
            res, at = [], 0
            for im in images:
                e = emb[at:at + im.tokens]
                at += im.tokens
                if len(images) > 1:
                    e = e.clone()  # let the batch's output go; a view would keep all of it
                res.append((e, e.numel() * e.element_size()))
            return res

    def generate(self, batch, feats, deliver):
        """Greedy decoding of a batch: left-padded prefill, then a token a step."""
        torch = self.torch
        dev = self.device
        with torch.inference_mode():
            lens = [len(j.ids) for j in batch]
            B, L = len(batch), max(lens)
            ids = torch.full((B, L), PAD, dtype=torch.long)
            mask = torch.zeros((B, L), dtype=torch.long)
            pos = torch.ones((3, B, L), dtype=torch.long)
            nxt = []
            for i, j in enumerate(batch):
                p, n = _mrope_positions(torch, j.segs)
                off = L - lens[i]
                ids[i, off:] = torch.tensor(j.ids, dtype=torch.long)
                mask[i, off:] = 1
                pos[:, i, off:] = p
                nxt.append(n)
            ids, mask, pos = ids.to(dev), mask.to(dev), pos.to(dev)
            emb = self.embed(ids)
            imgs = [feats[id(im)] for j in batch for im in j.prompt.images]
            if imgs:
                sel = ids == IMAGE_TOKEN
                emb[sel] = torch.cat(imgs).to(emb.dtype)
            out = self.lm(inputs_embeds=emb, attention_mask=mask, position_ids=pos, use_cache=True)
            cache = out.past_key_values
            logits = self.lm_head(out.last_hidden_state[:, -1, :])
            del out, emb
            nxt = torch.tensor(nxt, dtype=torch.long, device=dev)
            ones = torch.ones((B, 1), dtype=torch.long, device=dev)
            while True:
                tok = logits.argmax(-1)
                if not deliver(batch, tok.tolist()):
                    break
                if all(j.cancelled for j in batch):
                    break
                mask = torch.cat([mask, ones], dim=1)
                p = nxt.view(1, B, 1).expand(3, B, 1)
                nxt = nxt + 1
                out = self.lm(inputs_embeds=self.embed(tok.view(B, 1)), attention_mask=mask,
                              position_ids=p, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                logits = self.lm_head(out.last_hidden_state[:, -1, :])
                del out
            del cache, logits

    def check_rope(self, job):
        """Compares _mrope_positions with the model's own get_rope_index on one prompt."""
        torch = self.torch
        try:
            inner = getattr(self.model, "model", self.model)
            ids = torch.tensor([job.ids], dtype=torch.long)
            grid = torch.tensor([im.grid for im in job.prompt.images], dtype=torch.long)
            kw = dict(input_ids=ids, image_grid_thw=grid, attention_mask=torch.ones_like(ids))
            import inspect
            if "mm_token_type_ids" in inspect.signature(inner.get_rope_index).parameters:
                kw["mm_token_type_ids"] = (ids == IMAGE_TOKEN).long()  # newer transformers
            ref = inner.get_rope_index(**kw)[0]
            mine, nxt = _mrope_positions(torch, job.segs)
            same = torch.equal(ref[:, 0].cpu().long(), mine)
            return "equal" if same and int(ref.max()) + 1 == nxt else "DIFFERENT"
        except Exception as e:
            return "not compared (%s: %s)" % (type(e).__name__, str(e)[:200])

    def empty_cache(self):
        if self.torch.cuda.is_initialized():
            self.torch.cuda.empty_cache()

    def cuda_initialized(self):
        return self.torch.cuda.is_initialized()

    def memory(self):
        return cuda_memory(self.torch)

    def info(self):
        torch = self.torch
        return {"engine": "torch", "processor": self.opts.processor,
                "processor_class": self.proc_class, "attn": self.opts.attn,
                "attn_implementation": self.attn_impl, "dtype": self.opts.dtype,
                "device": (torch.cuda.get_device_name() if self.device.type == "cuda" else "cpu"),
                "params": self.params, "build_s": round(self.build_s, 2),
                "torch": torch.__version__, "transformers": self.transformers_version}


def _pick_tensor(out, rows):
    """The vision tower's merged output: a tensor in some transformers versions, a model output
    holding it in others; the one with a row per merged patch."""
    import torch
    if isinstance(out, torch.Tensor):
        cands = [out]
    else:
        cands = [getattr(out, k, None) for k in ("pooler_output", "last_hidden_state")]
        if isinstance(out, (tuple, list)):
            cands += list(out)
        cands = [c for c in cands if isinstance(c, torch.Tensor)]
    for c in cands:
        if c.dim() == 2 and c.shape[0] == rows:
            return c
    raise RuntimeError("the vision tower returned no tensor of %d rows (%s)" %
                       (rows, [tuple(c.shape) for c in cands]))


def _mrope_positions(torch, segs):
    """Qwen2.5-VL's 3-D rope positions for one unpadded sequence (what get_rope_index computes):
    text runs count on in all three rows; an image's tokens take (0, row, column) of its merged
    grid after the text before it; text after an image starts past the image's largest position.
    Returns the (3, L) positions and the position of the first generated token."""
    parts, st = [], 0
    for kind, val in segs:
        if kind == "text":
            if val:
                parts.append(torch.arange(val).view(1, -1).expand(3, -1) + st)
                st += val
        else:
            t, h, w = val
            gh, gw = h // MERGE, w // MERGE
            ti = torch.zeros(t * gh * gw, dtype=torch.long)
            hi = torch.arange(gh).view(1, -1, 1).expand(t, -1, gw).flatten()
            wi = torch.arange(gw).view(1, 1, -1).expand(t, gh, -1).flatten()
            block = torch.stack([ti, hi, wi]) + st
            parts.append(block)
            st = int(block.max()) + 1
    return torch.cat(parts, dim=1), st
