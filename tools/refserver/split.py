"""The two processes: a front that serves HTTP and runs the image processor, and a model process
that runs batches, as SGLang splits its tokenizer manager from its scheduler.

WIRE. Two pipes, one each way, carry length-prefixed pickles (a 4-byte little-endian length,
then the pickle). Front to model: ("job", ...), ("cancel", jid), ("flush", id), ("stats", id),
("stop",). Model to front: ("ready", info), ("ev", jid, kind, value) for each token, end or error
of a job, ("flushed", id, result), ("stats", id, figures). Either side that reads the end of its
pipe stops: the front when the model is gone (it cannot serve without it), the model when the
front is.

FEATURES. The processor's output for a request's images (pixel rows: a tensor; with the stub,
the decoded RGB bytes) reaches the model process one of two ways (--feature-transport): `cpu`
copies it to the host and pickles it into the pipe; `shm` copies it into a file of its own in
/dev/shm (refserver-FRONTPID-N) and sends its name; the model maps it, copies it out and
removes it. Either way it leaves the front's GPU inside the processor call, so a per-call pool
can be given back.

TITLES. Each process names itself refserver::front or refserver::model: the kernel's comm (15
characters, prctl PR_SET_NAME) and the first word of its command line, which the front gets by
executing itself again once at start with that word as argv[0] (the path of the interpreter's
folder before it, so that a virtual environment is still found).
"""

import ctypes
import os
import pickle
import struct
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
TITLED_ENV = "REFSERVER_TITLED"
PYTHON_ENV = "REFSERVER_PYTHON"
SHM_DIR = "/dev/shm"


def set_comm(title):
    """Sets this process's comm (what ps and /proc/PID/comm show; the kernel keeps 15 bytes)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(15, ctypes.c_char_p(title.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def retitle_front(argv):
    """Executes this program again with refserver::front as the first word of its command line
    (once: the environment says it was done). Returns only when it was done already."""
    if os.environ.get(TITLED_ENV) == "1":
        os.environ.pop(TITLED_ENV, None)
        return
    exe = sys.executable
    if not exe or not os.path.exists(exe):
        return
    env = dict(os.environ)
    env[TITLED_ENV] = "1"
    env.setdefault(PYTHON_ENV, exe)
    argv0 = os.path.join(os.path.dirname(exe), "refserver::front")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(exe, [argv0, os.path.join(HERE, "refserver.py")] + list(argv), env)


def python():
    """The interpreter that started this program (the front's own path to it is a made-up
    name after retitle_front)."""
    return os.environ.get(PYTHON_ENV) or sys.executable


class Wire:
    """One end of the two pipes. send() may be called from any thread; recv() from one."""

    def __init__(self, rfd, wfd):
        self.r = os.fdopen(rfd, "rb", buffering=1 << 16)
        self.w = os.fdopen(wfd, "wb", buffering=1 << 16)
        self.lock = threading.Lock()

    def send(self, msg):
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        with self.lock:
            self.w.write(struct.pack("<I", len(data)))
            self.w.write(data)
            self.w.flush()

    def recv(self):
        """The next message, or None at the end of the pipe."""
        head = self.r.read(4)
        if len(head) < 4:
            return None
        (n,) = struct.unpack("<I", head)
        data = self.r.read(n)
        if len(data) < n:
            return None
        return pickle.loads(data)

    def close(self):
        for f in (self.w, self.r):
            try:
                f.close()
            except (OSError, ValueError):
                pass


# ------------------------------------------------------------------------ features


class Transport:
    """How pixel values reach the model process (--feature-transport)."""

    def __init__(self, kind, torch=None):
        self.kind = kind
        self.torch = torch
        self.prefix = "refserver-%d-" % os.getpid()
        self.seq = 0
        self.lock = threading.Lock()
        self.sent_bytes = 0
        self.segments = 0

    def pack(self, data):
        """Front, inside the processor call: the payload as the wire carries it."""
        torch = self.torch
        is_tensor = torch is not None and isinstance(data, torch.Tensor)
        nbytes = data.numel() * data.element_size() if is_tensor else len(data)
        self.sent_bytes += nbytes
        if self.kind == "cpu":
            return ("inline", data.detach().to("cpu") if is_tensor else bytes(data))
        with self.lock:
            self.seq += 1
            name = "%s%d" % (self.prefix, self.seq)
        path = os.path.join(SHM_DIR, name)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            if nbytes > 0:
                os.ftruncate(fd, nbytes)
                import mmap
                mm = mmap.mmap(fd, nbytes)
                try:
                    if is_tensor:
                        dst = torch.frombuffer(mm, dtype=data.dtype, count=data.numel())
                        dst.view(data.shape).copy_(data)
                        del dst
                    else:
                        mm[:] = data
                finally:
                    mm.close()
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        os.close(fd)
        self.segments += 1
        meta = (str(data.dtype).split(".")[-1], tuple(data.shape)) if is_tensor else None
        return ("shm", name, nbytes, meta)

    def unpack(self, packed):
        """Model: the payload back (a CPU tensor or bytes); a shared-memory file is removed."""
        if packed[0] == "inline":
            data = packed[1]
            self.sent_bytes += (len(data) if isinstance(data, (bytes, bytearray)) else
                                data.numel() * data.element_size())
            return data
        _, name, nbytes, meta = packed
        path = os.path.join(SHM_DIR, name)
        fd = os.open(path, os.O_RDONLY)
        try:
            if nbytes == 0:
                out = b""
            else:
                import mmap
                mm = mmap.mmap(fd, nbytes, flags=mmap.MAP_PRIVATE,
                               prot=mmap.PROT_READ | mmap.PROT_WRITE)
                try:
                    if meta is None:
                        out = bytes(mm)
                    else:
                        torch = self.torch
                        dtype, shape = getattr(torch, meta[0]), meta[1]
                        n = 1
                        for d in shape:
                            n *= d
                        src = torch.frombuffer(mm, dtype=dtype, count=n)
                        out = src.view(shape).clone()
                        del src
                finally:
                    mm.close()
        finally:
            os.close(fd)
            os.unlink(path)
        self.segments += 1
        self.sent_bytes += nbytes
        return out

    def cleanup(self):
        """Front, at exit: the files the model did not take."""
        try:
            for n in os.listdir(SHM_DIR):
                if n.startswith(self.prefix):
                    os.unlink(os.path.join(SHM_DIR, n))
        except OSError:
            pass


class WireImage:
    """An image as the model process sees it: no pixels of its own until assign()."""

    __slots__ = ("width", "height", "key", "grid", "pixel_values")

    def __init__(self, width, height, key, grid):
        self.width, self.height, self.key, self.grid = width, height, key, grid
        self.pixel_values = None

    @property
    def tokens(self):
        t, h, w = self.grid
        return t * h * w // 4


class WirePrompt:
    __slots__ = ("images",)

    def __init__(self, images):
        self.images = images


# ------------------------------------------------------------------------ the front's side


class LocalModel:
    """The model in this process (--processes 1): the engine itself."""

    def __init__(self, engine):
        self.engine = engine

    def submit(self, job):
        self.engine.submit(job)

    def cancel(self, job):
        job.cancelled = True

    def flush(self, done):
        self.engine.submit_flush(done)

    def stats(self, done):
        done(model_figures(self.engine))

    def info(self):
        return self.engine.backend.info()


class ModelClient:
    """The model process, seen from the front: starts it, sends it jobs, hands its events to
    the jobs' emit functions (from the reader thread) and calls back on flushes and figures."""

    def __init__(self, opts, argv, on_lost):
        self.opts = opts
        self.on_lost = on_lost  # called once, from the reader thread, when the model is gone
        self.jobs = {}
        self.calls = {}
        self.lock = threading.Lock()
        self.seq = 0
        self.model_info = None
        self.lost = False
        self.stopping = False
        to_model_r, to_model_w = os.pipe()
        to_front_r, to_front_w = os.pipe()
        py = python()
        args = [os.path.join(os.path.dirname(py), "refserver::model"),
                os.path.join(HERE, "refserver.py"), "--role", "model",
                "--wire-fds", "%d,%d" % (to_model_r, to_front_w)] + list(argv)
        env = dict(os.environ)
        env.pop(TITLED_ENV, None)
        self.proc = subprocess.Popen(args, executable=py, env=env,
                                     pass_fds=(to_model_r, to_front_w))
        os.close(to_model_r)
        os.close(to_front_w)
        self.wire = Wire(to_front_r, to_model_w)

    def wait_ready(self):
        """Blocks until the model process is built and warm; SystemExit when it fails first."""
        msg = self.wire.recv()
        if msg is None or msg[0] != "ready":
            rc = self.proc.wait()
            raise SystemExit("refserver: the model process exited (status %s) before it was ready"
                             % rc)
        self.model_info = msg[1]
        threading.Thread(target=self._reader, name="refserver-wire", daemon=True).start()

    def _next_id(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def submit(self, job):
        """Any thread. The job's payload is already packed (Transport.pack)."""
        job.jid = self._next_id()
        with self.lock:
            self.jobs[job.jid] = job
        p = job.prompt
        imgs = [(im.width, im.height, im.key, im.grid) for im in p.images]
        try:
            self.wire.send(("job", job.jid, job.ids, job.segs, job.max_tokens, job.internal,
                            imgs, job.payload))
        except (OSError, ValueError):
            with self.lock:
                self.jobs.pop(job.jid, None)
            job.emit("error", "the model process is gone")
        job.payload = None

    def cancel(self, job):
        job.cancelled = True
        self._send(("cancel", job.jid))

    def flush(self, done):
        self._call("flush", done)

    def stats(self, done):
        self._call("stats", done)

    def info(self):
        return self.model_info or {}

    def _call(self, what, done):
        cid = self._next_id()
        with self.lock:
            self.calls[cid] = done
        if not self._send((what, cid)):
            with self.lock:
                self.calls.pop(cid, None)
            done({"error": "the model process is gone"})

    def _send(self, msg):
        try:
            self.wire.send(msg)
            return True
        except (OSError, ValueError):
            return False

    def _reader(self):
        while True:
            try:
                msg = self.wire.recv()
            except (OSError, ValueError, pickle.UnpicklingError, EOFError):
                msg = None
            if msg is None:
                break
            kind = msg[0]
            if kind == "ev":
                _, jid, ev, val = msg
                with self.lock:
                    job = self.jobs.get(jid)
                    if job is not None and ev in ("end", "error"):
                        del self.jobs[jid]
                if job is not None and job.emit is not None:
                    job.emit(ev, val)
            elif kind in ("flushed", "stats"):
                with self.lock:
                    done = self.calls.pop(msg[1], None)
                if done is not None:
                    done(msg[2])
        self.lost = True
        with self.lock:
            jobs, self.jobs = list(self.jobs.values()), {}
            calls, self.calls = list(self.calls.values()), {}
        for j in jobs:
            if j.emit is not None:
                j.emit("error", "the model process is gone")
        for c in calls:
            c({"error": "the model process is gone"})
        if not self.stopping:
            self.on_lost()

    def stop(self, timeout=10.0):
        self.stopping = True
        self._send(("stop",))
        self.wire.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ------------------------------------------------------------------------ the model's side


def model_figures(engine):
    """The model's half of /metrics and /refserver/stats."""
    from engine import rss_bytes
    s, mm, b = engine.stats, engine.mm, engine.backend
    return {
        "pid": os.getpid(), "running": s.running, "queued": s.queued, "batches": s.batches,
        "batched_requests": s.batched_requests, "vision_images": s.vision_images,
        "vision_patches": s.vision_patches, "generated_tokens": s.generated_tokens,
        "vision_seconds": round(s.vision_s, 6), "decode_seconds": round(s.decode_s, 6),
        "mm_cache": {"enabled": mm is not None, "entries": len(mm) if mm is not None else 0,
                     "bytes": mm.bytes if mm is not None else 0,
                     "limit_bytes": mm.limit if mm is not None else 0,
                     "hits": s.mm_hits, "misses": s.mm_misses, "evictions": s.mm_evictions},
        "cuda": b.memory(), "cuda_initialized": b.cuda_initialized(), "rss_bytes": rss_bytes(),
        "payload_mismatches": getattr(b, "payload_mismatches", 0),
        "cpu_seconds": sum(os.times()[:2]),
    }


def model_main(opts, warm_up):
    """The model process: builds the engine, warms it up, says ready, then serves the wire
    until the front stops it or is gone."""
    set_comm("refserver::model")
    rfd, wfd = (int(x) for x in opts.wire_fds.split(","))
    wire = Wire(rfd, wfd)
    from engine import Engine
    if opts.engine == "stub":
        from engine import StubModel
        backend, torch = StubModel(opts), None
    else:
        from engine import TorchModel
        backend = TorchModel(opts)
        torch = backend.torch
    transport = Transport(opts.feature_transport, torch)
    engine = Engine(opts, backend)
    engine.start()
    if opts.warmup:
        warm_up(engine)
    wire.send(("ready", backend.info()))
    jobs = {}
    lock = threading.Lock()

    def emitter(jid):
        def emit(kind, value):
            if kind in ("end", "error"):
                with lock:
                    jobs.pop(jid, None)
            try:
                wire.send(("ev", jid, kind, value))
            except (OSError, ValueError):
                pass
        return emit

    from engine import Job
    try:
        while True:
            msg = wire.recv()
            if msg is None or msg[0] == "stop":
                break
            kind = msg[0]
            if kind == "job":
                _, jid, ids, segs, max_tokens, internal, imgs, packed = msg
                job = Job(WirePrompt([WireImage(*i) for i in imgs]), ids, segs, max_tokens,
                          internal)
                job.jid = jid
                if packed is not None:
                    job.payload = transport.unpack(packed)
                job.emit = emitter(jid)
                with lock:
                    jobs[jid] = job
                engine.submit(job)
            elif kind == "cancel":
                with lock:
                    job = jobs.get(msg[1])
                if job is not None:
                    job.cancelled = True
            elif kind == "flush":
                cid = msg[1]
                engine.submit_flush(lambda res, cid=cid: wire.send(("flushed", cid, res)))
            elif kind == "stats":
                f = model_figures(engine)
                f["transport"] = {"segments": transport.segments, "bytes": transport.sent_bytes}
                wire.send(("stats", msg[1], f))
    except KeyboardInterrupt:
        pass
    except (OSError, ValueError, EOFError, pickle.UnpicklingError):
        pass
    engine.stop()
    wire.close()
    return 0
