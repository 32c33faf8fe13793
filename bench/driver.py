#!/usr/bin/env python3
"""The benchmark driver behind bench/run.sh: runs every workload against the same target and prints
absolute figures and ratios to vlmload, then writes them to bench/results/bench.{json,csv}.

Each workload that goes through libcurl also runs its floor, build/vlmload-bench-floor
(bench/floor.c): a bare client on the same libcurl doing nothing per request beyond what curl
needs. Every row of such a workload carries the floor's figure of the same metric and vlmload's
ratio to it ("vs floor", read as "vlmload adv."), and issue 17's targets are judged against it.

Standard library only. bench/run.sh installs the peers and builds vlmload first; run this directly
only when both are done. `bench/run.sh --help` describes the options, and the Benchmarks section of
docs/development.md the workloads.
"""
import argparse
import base64
import csv
import datetime
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The static target's reply: a whole chat completion, as wrk-compare.sh has always used.
REPLY = ('{"id":"b","object":"chat.completion","model":"m","choices":[{"index":0,"message":'
         '{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,'
         '"completion_tokens":1,"total_tokens":9}}')
# The fixed request body of the text-only peers (vlmload sends its built-in prompts, as long).
TEXT_BODY = ('{"model":"m","messages":[{"role":"user","content":"Describe this image in detail."}],'
             '"max_tokens":128,"temperature":0}')

# The floor client's two event loops, as the table names them: libuv + multi_socket is how vlmload
# is wired (the fair floor for its design), curl_multi_poll the plainest libcurl client.
FLOOR_LOOPS = {"uv": "floor (libuv multi_socket)", "poll": "floor (curl_multi_poll)"}
# Issue 17's targets against the floor: text-only req/s and SSE tokens/s at least this share of
# the floor's; per in-flight request (workload 4) at most this many KiB above the floor's.
FLOOR_RATE_SHARE = 0.9
FLOOR_KIB_ABOVE = 3.0

WORKLOADS = {
    1: "text-only POST, closed loop, 64 connections, static JSON target",
    2: "~1.3 MB image bodies, closed loop, 64 connections: distinct images vs one fixed body",
    3: "open loop, Poisson arrivals at 1k, 5k, 20k req/s against the static target",
    4: "10,000 in flight against a slow target (mock --latency), ~1 MB image each",
    5: "--unique-images 1024x1024 JPEG throughput on all cores",
    6: "5,000 concurrent SSE streams of 256 tokens against the mock",
}


def log(msg):
    sys.stderr.write("[bench] %s\n" % msg)
    sys.stderr.flush()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


class Procs:
    """Every process the driver starts, each in its own session, so that a timeout or an exit
    ends exactly those (by process-group id) and nothing else."""

    def __init__(self):
        self.live = []

    def start(self, cmd, **kw):
        p = subprocess.Popen(cmd, start_new_session=True, **kw)
        self.live.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM, wait=10.0):
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        if p in self.live:
            self.live.remove(p)

    def stop_all(self):
        for p in list(self.live):
            self.stop(p, wait=3.0)


PROCS = Procs()


def run(cmd, timeout, **kw):
    """Runs cmd to completion (at most `timeout` seconds); returns (rc, stdout, stderr)."""
    p = PROCS.start(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        PROCS.stop(p, signal.SIGINT, wait=5.0)
        out, err = p.communicate()
        return 124, out, err + "\n(timed out after %ss)" % timeout
    PROCS.live.remove(p)
    return p.returncode, out, err


def run_measured(cmd, timeout, sample=0.05):
    """Runs cmd (which must exec into the measured program, as taskset does) while sampling the CPU
    time of its main thread, the event loop's, every `sample` seconds. Returns (rc, rusage,
    samples [(t, loop_cpu_s, process_cpu_s)], stderr text)."""
    tick = os.sysconf("SC_CLK_TCK")
    errf = tempfile.TemporaryFile(mode="w+")
    p = PROCS.start(cmd, stdout=subprocess.DEVNULL, stderr=errf)
    samples = []
    t0 = time.monotonic()
    status, ru = None, None
    while True:
        pid, st, r = os.wait4(p.pid, os.WNOHANG)
        if pid:
            status, ru = st, r
            break
        try:
            with open("/proc/%d/task/%d/stat" % (p.pid, p.pid)) as f:
                ft = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%d/stat" % p.pid) as f:
                fp = f.read().rsplit(")", 1)[1].split()
            # fields 14 and 15 (utime, stime) are at 11 and 12 after the command name
            samples.append((time.monotonic() - t0, (int(ft[11]) + int(ft[12])) / tick,
                            (int(fp[11]) + int(fp[12])) / tick))
        except (OSError, IndexError, ValueError):
            pass
        if time.monotonic() - t0 > timeout:
            os.killpg(p.pid, signal.SIGINT)
            timeout += 15  # its grace, then SIGKILL below
            if time.monotonic() - t0 > timeout:
                os.killpg(p.pid, signal.SIGKILL)
        time.sleep(sample)
    p.returncode = os.waitstatus_to_exitcode(status)
    PROCS.live.remove(p)
    errf.seek(0)
    return p.returncode, ru, samples, errf.read()


def load_json(path):
    with open(path) as f:
        return json.load(f)


class Bench:
    def __init__(self, args):
        self.a = args
        self.work = tempfile.mkdtemp(prefix="vlmload-bench.")
        self.build = os.path.join(ROOT, args.build_dir)
        self.vlmload = os.path.join(self.build, "vlmload")
        self.vlmmock = os.path.join(self.build, "vlmmock")
        self.bench_image = os.path.join(self.build, "vlmload-bench-image")
        self.bench_floor = os.path.join(self.build, "vlmload-bench-floor")
        self.floor_loop = args.floor_loop
        cores = os.cpu_count() or 1
        self.client_core = "0"
        self.server_core = str(cores - 1 if cores > 1 else 0)
        self.rows = []
        self.raw = {}
        self.notes = []
        self.nginx = None
        self.nginx_port = None
        self.python = find_python()
        if not self.python:
            self.note("no Python with aiohttp (python3-aiohttp): the Python client is left out")

    def note(self, msg):
        self.notes.append(msg)
        log("note: " + msg)

    def pin(self, cmd, server=False):
        return ["taskset", "-c", self.server_core if server else self.client_core] + cmd

    def row(self, w, metric, vl, peer="", peer_value=None, better="higher", target=None,
            met=None, note="", floor=None):
        """One table row. floor: the floor client's figure of the same metric (None: no floor for
        this metric); vs_floor is vlmload's advantage over it, as ratio is over the peer."""
        self.rows.append({"workload": w, "metric": metric, "vlmload": vl,
                          "floor": floor, "vs_floor": advantage(vl, floor, better),
                          "peer": peer, "peer_value": peer_value,
                          "ratio": advantage(vl, peer_value, better) if peer else None,
                          "better": better, "target": target, "met": met, "note": note})

    # ---- targets ---------------------------------------------------------------------------

    def nginx_start(self):
        if self.nginx:
            return self.nginx_port
        port = free_port()
        conf = os.path.join(self.work, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""worker_processes 1;
worker_rlimit_nofile 65536;
pid %(w)s/nginx.pid;
error_log %(w)s/nginx-error.log;
events { worker_connections 16384; multi_accept on; }
http {
  access_log off;
  client_max_body_size 64m;
  client_body_buffer_size 64k;
  keepalive_requests 100000000;
  keepalive_timeout 120s;
  server {
    listen 127.0.0.1:%(p)d backlog=4096;
    location / { default_type application/json; return 200 '%(r)s'; }
  }
}
""" % {"w": self.work, "p": port, "r": REPLY})
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.nginx = PROCS.start(self.pin([nginx, "-c", conf, "-p", self.work, "-g", "daemon off;"],
                                          server=True),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_port(port):
            raise RuntimeError("nginx did not start (see %s/nginx-error.log)" % self.work)
        self.nginx_port = port
        return port

    def nginx_stop(self):
        if self.nginx:
            PROCS.stop(self.nginx, signal.SIGQUIT)
            self.nginx = None

    def mock_start(self, *opts):
        pf = os.path.join(self.work, "mock.port")
        if os.path.exists(pf):
            os.unlink(pf)
        p = PROCS.start(self.pin([self.vlmmock, "--port", "0", "--port-file", pf] + list(opts),
                                 server=True),
                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.work, "mock.log"), "w"))
        for _ in range(200):
            if os.path.exists(pf) and os.path.getsize(pf):
                with open(pf) as f:
                    return p, int(f.read().strip())
            if p.poll() is not None:
                break
            time.sleep(0.05)
        PROCS.stop(p)
        raise RuntimeError("vlmmock did not start (see %s/mock.log)" % self.work)

    # ---- clients ----------------------------------------------------------------------------

    def vl(self, name, url, opts, timeout):
        """Runs vlmload pinned to the client core; returns its JSON summary or None."""
        out = os.path.join(self.work, name + ".json")
        cmd = self.pin([self.vlmload, "--url", url, "--model", "m", "--quiet", "--output", out] + opts)
        rc, _, err = run(cmd, timeout)
        if rc not in (0, 3) or not os.path.exists(out):
            self.note("vlmload %s failed (exit %d): %s" % (name, rc, err.strip()[-300:]))
            return None
        d = load_json(out)
        self.raw.setdefault("vlmload", {})[name] = slim(d)
        return d

    def py(self, name, url, opts, timeout):
        if not self.python:
            return None
        out = os.path.join(self.work, name + ".json")
        cmd = self.pin([self.python, os.path.join(ROOT, "bench", "pyclient.py"), "--url", url,
                        "--output", out] + opts)
        rc, _, err = run(cmd, timeout)
        if not os.path.exists(out):
            self.note("pyclient %s failed (exit %d): %s" % (name, rc, err.strip()[-300:]))
            return None
        d = load_json(out)
        self.raw.setdefault("pyclient", {})[name] = d
        return d

    def floor(self, name, opts, timeout, loop=None):
        """Runs the floor client pinned to the client core (opts after --loop); returns its JSON
        line as a dict, or None. Its peak_rss_kib is its own maximum RSS (getrusage), the figure
        /usr/bin/time -v gives of vlmload."""
        if not os.path.exists(self.bench_floor):
            if not any("vlmload-bench-floor" in n for n in self.notes):
                self.note("%s is missing (bench/run.sh builds it): workloads have no floor"
                          % self.bench_floor)
            return None
        loop = loop or self.floor_loop
        rc, out, err = run(self.pin([self.bench_floor, "--loop", loop] + opts), timeout)
        line = next((l for l in reversed(out.splitlines()) if l.startswith("{")), None)
        try:
            d = json.loads(line) if line else None
        except ValueError:
            d = None
        if not d:
            self.note("floor %s (%s loop) failed (exit %d): %s" % (name, loop, rc,
                                                                     err.strip()[-300:]))
            return None
        if d["failed"]:
            self.note("floor %s (%s loop): %d of %d transfers failed" % (name, loop, d["failed"],
                                                                          d["requests"]))
        self.raw.setdefault("floor", {})["%s-%s" % (name, loop)] = d
        return d

    def median(self, fn):
        vals = [v for v in (fn() for _ in range(self.a.repeat)) if v is not None]
        if not vals:
            return None
        vals.sort()
        return vals[len(vals) // 2]

    # ---- workloads --------------------------------------------------------------------------

    def w1(self):
        d = self.a.duration
        port = self.nginx_start()
        base = "http://127.0.0.1:%d" % port
        url = base + "/v1/chat/completions"
        body = os.path.join(self.work, "text.json")
        with open(body, "w") as f:
            f.write(TEXT_BODY)
        lua = os.path.join(self.work, "text.lua")
        with open(lua, "w") as f:
            f.write('wrk.method = "POST"\nwrk.body = \'%s\'\n'
                    'wrk.headers["Content-Type"] = "application/json"\n' % TEXT_BODY)
        tmo = d + 60

        def vl():
            r = self.vl("w1", base, ["--rate", "0", "--concurrency", "64", "--duration", "%gs" % d],
                        tmo)
            return r and r["rate"]["ok_per_s"]

        def wrk():
            rc, out, err = run(self.pin(["wrk", "-t1", "-c64", "-d%ds" % max(1, round(d)), "-s", lua,
                                         url]), tmo)
            self.raw.setdefault("wrk", {})["w1"] = out
            return grab(out, "Requests/sec:", 1)

        def h2load():
            rc, out, err = run(self.pin(["h2load", "--h1", "-c64", "-t1", "-D", "%g" % d, "-d", body,
                                         "-H", "Content-Type: application/json", url]), tmo)
            self.raw.setdefault("h2load", {})["w1"] = out
            line = next((l for l in out.splitlines() if l.startswith("finished in")), "")
            try:
                return float(line.split(",")[1].split()[0])
            except (IndexError, ValueError):
                self.note("h2load gave no rate: %s" % (err or out).strip()[-300:])
                return None

        def hey():
            rc, out, err = run(self.pin(["hey", "-z", "%gs" % d, "-c", "64", "-cpus", "1", "-m", "POST",
                                         "-T", "application/json", "-D", body, url]), tmo + 30)
            self.raw.setdefault("hey", {})["w1"] = out
            return grab(out, "Requests/sec:", 1)

        def py():
            r = self.py("w1", base, ["--rate", "0", "--concurrency", "64", "--duration", "%g" % d], tmo)
            return r and r["rate"]["ok_per_s"]

        def py_bs():
            r = self.py("w1-session-per-request", base, ["--rate", "0", "--concurrency", "64",
                                                         "--duration", "%g" % d,
                                                         "--session-per-request"], tmo)
            return r and r["rate"]["ok_per_s"]

        v = self.median(vl)
        log("W1 vlmload %s req/s" % fmt(v))
        floors = {}
        for loop in FLOOR_LOOPS:
            def floor(loop=loop):
                r = self.floor("w1", ["--url", url, "--mode", "text", "-c", "64", "-d", "%g" % d],
                               tmo, loop)
                return r and r["req_per_s"]
            floors[loop] = self.median(floor)
            log("W1 %s %s req/s" % (FLOOR_LOOPS[loop], fmt(floors[loop])))
        fl = floors[self.floor_loop]
        ratio = v / fl if v and fl else None
        self.row(1, "req/s", v, floor=fl, target=">= %gx floor" % FLOOR_RATE_SHARE,
                 met=ratio is not None and ratio >= FLOOR_RATE_SHARE if fl else None,
                 note="floor column: %s" % FLOOR_LOOPS[self.floor_loop])
        for loop in FLOOR_LOOPS:
            if loop != self.floor_loop:
                self.row(1, "req/s", v, FLOOR_LOOPS[loop], floors[loop], floor=fl)
        peers = [("wrk", "wrk", wrk, 0.8), ("h2load --h1", "h2load", h2load, None),
                 ("hey", "hey", hey, None)]
        if self.python:
            peers += [("python", None, py, 12.0), ("python, session per request", None, py_bs, None)]
        for name, binary, fn, target in peers:
            if binary and not shutil.which(binary):
                self.note("%s is not installed: left out of workload 1" % binary)
                continue
            pv = self.median(fn)
            log("W1 %s %s req/s" % (name, fmt(pv)))
            ratio = v / pv if v and pv else None
            self.row(1, "req/s", v, name, pv, target=(">= %gx" % target) if target else None,
                     met=(ratio is not None and ratio >= target) if target else None, floor=fl)

    def w2(self):
        d = self.a.duration
        port = self.nginx_start()
        base = "http://127.0.0.1:%d" % port
        tmo = d + 120
        opts = ["--rate", "0", "--concurrency", "64", "--duration", "%gs" % d, "--resolution",
                "1200x1200", "--image-format", "jpeg", "--image-content", "noise", "--pool-size", "16"]
        runs = []

        def vl():
            r = self.vl("w2", base, opts, tmo)
            if not r:
                return None
            runs.append(r)
            return r["bytes_sent"] / r["duration_s"]

        v = self.median(vl)
        if not runs:
            return
        r = runs[-1]
        body = int(round(r["bytes_sent"] / max(1, r["requests"]["sent"])))
        log("W2 vlmload %s MB/s, %.2f MB bodies, %d distinct images" %
            (fmt(v / 1e6 if v else None), body / 1e6, r["images"].get("pool_size", 0)))
        def floor():
            f = self.floor("w2", ["--url", base + "/v1/chat/completions", "--mode", "upload",
                                  "-c", "64", "-d", "%g" % d, "--body-size", str(body)], tmo)
            return f and f["sent_bytes_per_s"]

        fl = self.median(floor)
        log("W2 %s %s MB/s" % (FLOOR_LOOPS[self.floor_loop], fmt(fl / 1e6 if fl else None)))
        fl = fl / 1e6 if fl else None
        # wrk's one body: a chat request carrying a base64 data URI, as long as vlmload's mean body.
        head = ('{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":'
                '{"url":"data:image/jpeg;base64,')
        tail = ('"}},{"type":"text","text":"Describe this image in detail."}]}],"max_tokens":128,'
                '"temperature":0}')
        n64 = max(4, (body - len(head) - len(tail)) // 4 * 4)
        payload = head + base64.b64encode(os.urandom(n64 // 4 * 3)).decode() + tail
        bf = os.path.join(self.work, "image-body.json")
        with open(bf, "w") as f:
            f.write(payload)
        lua = os.path.join(self.work, "image.lua")
        with open(lua, "w") as f:
            f.write('wrk.method = "POST"\nlocal f = io.open("%s", "rb")\nwrk.body = f:read("*a")\n'
                    'f:close()\nwrk.headers["Content-Type"] = "application/json"\n' % bf)

        def wrk():
            rc, out, err = run(self.pin(["wrk", "-t1", "-c64", "-d%ds" % max(1, round(d)), "-s", lua,
                                         base + "/v1/chat/completions"]), tmo)
            self.raw.setdefault("wrk", {})["w2"] = out
            rps = grab(out, "Requests/sec:", 1)
            return rps * len(payload) if rps else None

        if shutil.which("wrk"):
            pv = self.median(wrk)
            log("W2 wrk %s MB/s" % fmt(pv / 1e6 if pv else None))
            ratio = v / pv if v and pv else None
            self.row(2, "body MB/s", v / 1e6 if v else None, "wrk", pv / 1e6 if pv else None,
                     target=">= 1.0x", met=ratio is not None and ratio >= 1.0, floor=fl,
                     note="%.2f MB bodies (%.2f MB JPEGs, base64); vlmload %d distinct images, "
                          "wrk one body" % (body / 1e6, r["images"]["bytes"] /
                                            max(1, r["images"]["sent"]) / 1e6,
                                            r["images"].get("pool_size", 0)))
        else:
            self.note("wrk is not installed: workload 2 has no peer")
            self.row(2, "body MB/s", v / 1e6 if v else None, floor=fl)

    def w3(self):
        d = self.a.duration
        port = self.nginx_start()
        base = "http://127.0.0.1:%d" % port
        for rate in self.a.rates:
            tmo = d + 90
            v = self.vl("w3-%d" % rate, base, ["--rate", "%g" % rate, "--arrival", "poisson",
                                               "--duration", "%gs" % d, "--concurrency", "256"], tmo)
            # The Python client and the floor measure the sends' own rate, (n - 1) over the span
            # of sends; vlmload's is achieved_over_sends (its `achieved` is per second of load).
            if v and "achieved_over_sends" in v["rate"]:
                v["rate"]["achieved"] = v["rate"]["achieved_over_sends"]
            p = self.py("w3-%d" % rate, base, ["--rate", "%g" % rate, "--arrival", "poisson",
                                               "--duration", "%g" % d], tmo)
            # The floor: vlmload's own schedule and ticker driving bare transfers, the same cap.
            f = self.floor("w3-%d" % rate, ["--url", base + "/v1/chat/completions", "--rate",
                                            "%g" % rate, "--arrival", "poisson", "-d", "%g" % d,
                                            "-c", "256"], tmo, "uv")
            fr = f and {"rate": {"achieved": f.get("achieved_rate", 0)},
                        "send_lag_ms": {"p50": f.get("send_lag_p50_ms"),
                                        "p99": f.get("send_lag_p99_ms")}}
            ve = rate_err(v, rate)
            pe = rate_err(p, rate)
            at5k = rate == 5000
            log("W3 %d/s: vlmload achieved %s (err %s%%, lag p99 %s ms); python %s (err %s%%, "
                "lag p99 %s ms)" % (rate, fmt(v and v["rate"]["achieved"]), fmt(ve),
                                    fmt(v and v["send_lag_ms"]["p99"]),
                                    fmt(p and p["rate"]["achieved"]), fmt(pe),
                                    fmt(p and p["send_lag_ms"]["p99"])))
            reach = ""
            if p and p["rate"]["achieved"] < 0.9 * rate:
                reach = "python reached %s req/s of %d" % (fmt(p["rate"]["achieved"]), rate)
            peer = "python" if p else ""
            self.row(3, "@%s achieved req/s" % krate(rate), v and v["rate"]["achieved"], peer,
                     p and p["rate"]["achieved"], note=reach, floor=fr and fr["rate"]["achieved"])
            self.row(3, "@%s rate error %%" % krate(rate), ve, peer, pe, better="lower",
                     target="<= 0.5%" if at5k else None,
                     met=(ve is not None and ve <= 0.5) if at5k else None, floor=rate_err(fr, rate))
            lag = lambda r, q: r and r["send_lag_ms"][q]
            self.row(3, "@%s send lag p50 ms" % krate(rate), lag(v, "p50"), peer, lag(p, "p50"),
                     better="lower", floor=lag(fr, "p50"))
            self.row(3, "@%s send lag p99 ms" % krate(rate), lag(v, "p99"), peer, lag(p, "p99"),
                     better="lower", target="<= 1 ms" if at5k else None,
                     met=(v is not None and v["send_lag_ms"]["p99"] <= 1.0) if at5k else None,
                     floor=lag(fr, "p99"))

    def w4(self):
        n = self.a.inflight
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard != resource.RLIM_INFINITY and hard < n + 256:
            self.note("the hard limit on open files is %d: workload 4 keeps %d in flight instead of %d"
                      % (hard, hard - 256, n))
            n = hard - 256
        mock, port = self.mock_start("--latency", self.a.slow_latency, "--max-connections",
                                     str(n + 256))
        out = os.path.join(self.work, "w4.json")
        tl = os.path.join(self.work, "w4-timeline.csv")
        tv = os.path.join(self.work, "w4-time.txt")
        cmd = ["/usr/bin/time", "-v", "-o", tv] + self.pin(
            [self.vlmload, "--url", "http://127.0.0.1:%d" % port, "--model", "m", "--rate", "0",
             "--concurrency", str(n), "--requests", str(n), "--resolution", "1024x1024",
             "--image-format", "jpeg", "--image-content", "noise", "--pool-size", "16", "--quiet",
             "--output", out, "--timeline", tl])
        rc, _, err = run(cmd, 120 + n * 0.06)
        PROCS.stop(mock)
        if not os.path.exists(out) or not os.path.exists(tv) or rc not in (0, 3, 124, 130):
            self.note("workload 4: vlmload failed (exit %d): %s" % (rc, err.strip()[-300:]))
            return
        if rc in (124, 130):  # stopped at the time limit: the peak was reached, the rest cancelled
            self.note("workload 4 stopped after %.0f s; its peak RSS still counts" % (120 + n * 0.06))
        d = load_json(out)
        self.raw.setdefault("vlmload", {})["w4"] = slim(d)
        with open(tv) as f:
            rss_kb = grab(f.read(), "Maximum resident set size (kbytes):", -1)
        peak = 0
        with open(tl) as f:
            for rec in csv.DictReader(f):
                try:
                    peak = max(peak, int(rec["in_flight"]))
                except (KeyError, ValueError):
                    pass
        pool = d["images"]["pool_bytes"]
        rss = rss_kb * 1024 if rss_kb else None
        img = d["images"]["bytes"] / max(1, d["images"]["sent"])
        log("W4 %d in flight (peak %d), %.2f MB images: RSS %s MiB, pool %s MiB, ok %d" %
            (n, peak, img / 1e6, fmt(rss and rss / 2**20), fmt(pool / 2**20), d["requests"]["ok"]))
        note = "%d requests, peak %d in flight, %.2f MB per image, ok %d, mock latency %s" % (
            n, peak, img / 1e6, d["requests"]["ok"], self.a.slow_latency)
        # The floor: as many 1 MB-class uploads in flight from one shared body (one image of the
        # same kind), against a fresh mock of the same options.
        mock, port = self.mock_start("--latency", self.a.slow_latency, "--max-connections",
                                     str(n + 256))
        f = self.floor("w4", ["--url", "http://127.0.0.1:%d/v1/chat/completions" % port,
                              "--mode", "upload", "-c", str(n), "-n", str(n), "--image",
                              "1024x1024"], 120 + n * 0.06)
        PROCS.stop(mock)
        f_rss = f and f["peak_rss_kib"] * 1024
        # Per in-flight request: (peak RSS - the image bytes held) / peak in flight, for both.
        vl_kib = rss and (rss - pool) / max(1, peak or n) / 1024
        f_kib = f and (f_rss - f["body_bytes"]) / max(1, f["peak_in_flight"]) / 1024
        if f:
            log("W4 %s: %d in flight, %.2f MB body: RSS %s MiB, %s KiB per in-flight request "
                "(vlmload %s), ok %d" % (FLOOR_LOOPS[self.floor_loop], f["peak_in_flight"],
                                         f["body_bytes"] / 1e6, fmt(f_rss / 2**20), fmt(f_kib),
                                         fmt(vl_kib), f["ok"]))
        self.row(4, "peak RSS MiB", rss and rss / 2**20, better="lower",
                 target="<= pool + 64 MiB (%.1f)" % (pool / 2**20 + 64),
                 met=rss is not None and rss <= pool + 64 * 2**20, note=note,
                 floor=f_rss and f_rss / 2**20)
        self.row(4, "image pool MiB", pool / 2**20, better="lower",
                 floor=f and f["body_bytes"] / 2**20)
        self.row(4, "RSS over pool MiB", rss and (rss - pool) / 2**20, better="lower",
                 target="<= 64", met=rss is not None and rss - pool <= 64 * 2**20,
                 floor=f and (f_rss - f["body_bytes"]) / 2**20)
        self.row(4, "KiB per in flight", vl_kib, better="lower",
                 target="<= floor + %g KiB" % FLOOR_KIB_ABOVE,
                 met=vl_kib is not None and vl_kib <= f_kib + FLOOR_KIB_ABOVE if f else None,
                 floor=f_kib,
                 note=f and "(peak RSS - images held) / peak in flight; floor: %d in flight, one "
                            "%.2f MB body, curl upload buffer %d B, download %d B" % (
                                f["peak_in_flight"], f["body_bytes"] / 1e6, f["upload_buffer"],
                                f["recv_buffer"]))

    def w5(self):
        d = self.a.duration
        rc, out, err = run([self.bench_image, "%g" % d, "1024x1024", "jpeg", "photo", "8"], d + 120)
        line = (out.strip().splitlines() or [""])[-1]
        self.raw["bench-image"] = line
        try:
            rate = float(line.split(": ", 1)[1].split("/s")[0])
        except (IndexError, ValueError):
            self.note("vlmload-bench-image failed (exit %d): %s" % (rc, (err or out).strip()[-300:]))
            return
        log("W5 " + line)
        self.row(5, "unique 1024x1024 JPEG/s", rate, target=">= 500", met=rate >= 500,
                 note="%d cores" % (os.cpu_count() or 1))

    def w6(self):
        n = self.a.streams
        waves = self.a.waves
        mock, port = self.mock_start("--itl", self.a.itl, "--tokens", "256", "--max-connections",
                                     str(n + 256))
        out = os.path.join(self.work, "w6.json")
        cmd = self.pin([self.vlmload, "--url", "http://127.0.0.1:%d" % port, "--model", "m",
                        "--stream", "--max-tokens", "256", "--rate", "0", "--concurrency", str(n),
                        "--requests", str(n * waves), "--quiet", "--output", out])
        rc, ru, samples, err = run_measured(cmd, 120 + waves * 30)
        PROCS.stop(mock)
        if rc not in (0, 3) or not os.path.exists(out):
            self.note("workload 6: vlmload failed (exit %d): %s" % (rc, err.strip()[-300:]))
            return
        d = load_json(out)
        self.raw.setdefault("vlmload", {})["w6"] = slim(d)
        tokens = d["tokens"]["completion"]
        cpu = ru.ru_utime + ru.ru_stime
        wall = samples[-1][0] if samples else d["duration_s"]
        loop_cpu = samples[-1][1] if samples else cpu
        mean_share = loop_cpu / wall if wall > 0 else None
        peak = 0.0
        j = 0
        for i in range(len(samples)):  # CPU over each 1 s window of samples
            while samples[i][0] - samples[j][0] > 1.0:
                j += 1
            if samples[i][0] - samples[j][0] >= 0.9:
                peak = max(peak, (samples[i][1] - samples[j][1]) / (samples[i][0] - samples[j][0]))
        per_tok = cpu / tokens * 1e6 if tokens else None
        itl = d["itl_ms"]
        log("W6 %d streams x %d: %d tokens, %.0f tokens/s, CPU %.2f s (user %.2f, sys %.2f): "
            "%s us/token; loop %.2f core mean, %.2f peak; ITL p50 %s p99 %s ms" %
            (n, waves, tokens, d["tokens"]["completion_per_s"], cpu, ru.ru_utime, ru.ru_stime,
             fmt(per_tok), mean_share or 0, peak, fmt(itl["p50"]), fmt(itl["p99"])))
        note = ("%d streams, %d tokens in %.1f s (%.0f/s; mock --itl %s: ideal %.0f/s), ITL p50 %s "
                "p99 %s ms, errors %d" % (n, tokens, d["duration_s"], d["tokens"]["completion_per_s"],
                                          self.a.itl, n * 1000.0 / parse_ms(self.a.itl),
                                          fmt(itl["p50"]), fmt(itl["p99"]), d["requests"]["failed"]))
        # The floor: as many streams, as many requests, against a fresh mock of the same options.
        mock, port = self.mock_start("--itl", self.a.itl, "--tokens", "256", "--max-connections",
                                     str(n + 256))
        f = self.floor("w6", ["--url", "http://127.0.0.1:%d/v1/chat/completions" % port,
                              "--mode", "sse", "--max-tokens", "256", "-c", str(n), "-n",
                              str(n * waves)], 120 + waves * 30)
        PROCS.stop(mock)
        vl_tps = d["tokens"]["completion_per_s"]
        f_tps = f and f["tokens_per_s"]
        if f:
            log("W6 %s: %d tokens (%d data lines), %.0f tokens/s, CPU %.2f s: %s us/token" %
                (FLOOR_LOOPS[self.floor_loop], f["tokens"], f["events"], f_tps, f["cpu_s"],
                 fmt(f["cpu_s"] / f["tokens"] * 1e6 if f["tokens"] else None)))
        self.row(6, "tokens/s", vl_tps, target=">= %gx floor" % FLOOR_RATE_SHARE,
                 met=vl_tps is not None and vl_tps >= FLOOR_RATE_SHARE * f_tps if f_tps else None,
                 floor=f_tps, note=f and "floor: %d tokens of %d streams over %.1f s, counted as "
                                         "data: lines less 3 a stream" % (
                                             f["tokens"], f["ok"], f["duration_s"]))
        self.row(6, "CPU us per token", per_tok, better="lower", target="report",
                 note=note, floor=f["cpu_s"] / f["tokens"] * 1e6 if f and f["tokens"] else None)
        self.row(6, "loop CPU, cores (mean)", mean_share, better="lower", target="< 1 core",
                 met=mean_share is not None and mean_share < 0.95)
        self.row(6, "loop CPU, cores (peak 1 s)", peak, better="lower", target="< 1 core",
                 met=peak < 0.95, note="pinned to one core: 0.95 and above means saturated")

    # ---- output -----------------------------------------------------------------------------

    def report(self, started, load_start):
        hdr = ["W", "metric", "vlmload", "floor", "vs floor", "peer", "peer value", "vlmload adv.",
               "target", "met"]
        lines = []
        for r in self.rows:
            lines.append([str(r["workload"]), r["metric"], fmt(r["vlmload"]), fmt(r["floor"]),
                          ("%.2fx" % r["vs_floor"]) if r["vs_floor"] is not None else "-",
                          r["peer"] or "-", fmt(r["peer_value"]) if r["peer"] else "-",
                          ("%.2fx" % r["ratio"]) if r["ratio"] is not None else "-",
                          r["target"] or "-",
                          {True: "yes", False: "NO", None: "-"}[r["met"]]])
        widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h)
                  for i, h in enumerate(hdr)]
        print()
        print("  ".join(h.ljust(w) for h, w in zip(hdr, widths)))
        print("  ".join("-" * w for w in widths))
        for l in lines:
            print("  ".join(c.ljust(w) for c, w in zip(l, widths)).rstrip())
        print()
        print("vlmload adv.: vlmload / peer for rates, peer / vlmload for lags, errors and CPU "
              "(above 1: vlmload better); vs floor: the same against the floor, %s (bench/floor.c: "
              "the same libcurl with no work per request)" % FLOOR_LOOPS[self.floor_loop])
        for r in self.rows:
            if r["note"]:
                print("W%d %s: %s" % (r["workload"], r["metric"], r["note"]))
        for n in self.notes:
            print("note: " + n)
        load_end = os.getloadavg()
        if load_start[0] > 0.5:
            print("note: load average was %.2f when the run began: figures are noisy" % load_start[0])
        os.makedirs(self.a.out, exist_ok=True)
        meta = {"started": started, "finished": datetime.datetime.now().astimezone().isoformat(),
                "host": socket.gethostname(), "cores": os.cpu_count(),
                "client_core": self.client_core, "server_core": self.server_core,
                "loadavg_start": load_start, "loadavg_end": load_end,
                "quick": self.a.quick, "duration_s": self.a.duration, "repeat": self.a.repeat,
                "workloads": {k: v for k, v in WORKLOADS.items() if k in self.a.only},
                "vlmload": vlmload_version(self.vlmload), "peers": peer_versions(),
                "floor_loop": self.floor_loop,
                "floor": next(({"curl": f["curl"], "libuv": f["libuv"]}
                               for f in self.raw.get("floor", {}).values()), None),
                "python_client": self.python}
        with open(os.path.join(self.a.out, "bench.json"), "w") as f:
            json.dump({"meta": meta, "rows": self.rows, "notes": self.notes, "raw": self.raw}, f,
                      indent=2)
        with open(os.path.join(self.a.out, "bench.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(self.rows[0].keys()) if self.rows else ["workload"])
            w.writeheader()
            for r in self.rows:
                w.writerow({k: ("" if v is None else v) for k, v in r.items()})
        print("written: %s/bench.json, %s/bench.csv" % (self.a.out, self.a.out))
        return all(r["met"] is not False for r in self.rows)


# ---- helpers ---------------------------------------------------------------------------------

def find_python():
    for py in ("/usr/bin/python3", sys.executable, shutil.which("python3")):
        if py and os.path.exists(py):
            if subprocess.run([py, "-c", "import aiohttp"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                return py
    return None


def advantage(vl, other, better):
    """vlmload's advantage over another figure of the same metric: vl / other when higher is
    better, other / vl when lower is; None when either is missing or the division is undefined."""
    if vl is None or other is None:
        return None
    if better == "higher" and other > 0:
        return vl / other
    if better == "lower" and vl > 0:
        return other / vl
    return None


def grab(text, key, field):
    for line in text.splitlines():
        if key in line:
            try:
                return float(line.split(key, 1)[1].split()[0 if field >= 0 else -1])
            except (IndexError, ValueError):
                return None
    return None


def rate_err(d, rate):
    if not d or not d["rate"]["achieved"]:
        return None
    return abs(d["rate"]["achieved"] - rate) / rate * 100.0


def krate(rate):
    return "%gk/s" % (rate / 1000) if rate >= 1000 else "%g/s" % rate


def parse_ms(s):
    s = s.strip()
    for unit, mult in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if s.endswith(unit):
            return float(s[: -len(unit)]) * mult
    return float(s) * 1e3


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 0.01:
        return "%.2f" % v
    return "%.3g" % v


def slim(d):
    """A vlmload summary without its config block, for the raw section."""
    return {k: v for k, v in d.items() if k != "config"}


def vlmload_version(binary):
    try:
        return subprocess.run([binary, "--version"], capture_output=True, text=True,
                              timeout=10).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


def peer_versions():
    out = {}
    for pkg in ("wrk", "nghttp2-client", "hey", "python3-aiohttp", "nginx-light", "nginx-core",
                "nginx"):
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                           text=True)
        if r.returncode == 0 and r.stdout.strip():
            out[pkg] = r.stdout.strip()
    return out


def parse_only(s):
    try:
        only = sorted({int(x) for x in s.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError("--only takes workload numbers, e.g. 1,3")
    if not only or any(w not in WORKLOADS for w in only):
        raise argparse.ArgumentTypeError("workloads are 1 to 6")
    return only


def main():
    p = argparse.ArgumentParser(
        prog="bench/run.sh",
        description="Runs the six workloads of issue 6 with vlmload, its floor (bench/floor.c: "
                    "the same libcurl with no work per request) and its peers against the same "
                    "target (clients on core 0, target on the last core), prints a table of "
                    "figures and ratios to vlmload, and writes it to bench/results/bench.json and "
                    "bench.csv. Exit status 3 when a target was missed.")
    p.add_argument("--quick", action="store_true",
                   help="short smoke run: 3 s per workload, 1000 in flight in workload 4")
    p.add_argument("--only", type=parse_only, default=sorted(WORKLOADS),
                   help="comma-separated workloads to run (default all: 1-6)")
    p.add_argument("--duration", type=float, help="seconds per client and workload (default 10; "
                                                  "--quick 3)")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of each client in workloads 1 and 2, the median kept (default 1)")
    p.add_argument("--rates", default="1000,5000,20000", help="workload 3's rates (req/s)")
    p.add_argument("--inflight", type=int, help="workload 4's requests in flight (default 10000; "
                                                "--quick 1000)")
    p.add_argument("--slow-latency", default="5s", help="workload 4's mock --latency (default 5s)")
    p.add_argument("--streams", type=int, default=5000, help="workload 6's streams (default 5000)")
    p.add_argument("--waves", type=int, help="workload 6: requests = streams x waves (default 2; "
                                             "--quick 1)")
    p.add_argument("--itl", default="20ms", help="workload 6's mock --itl (default 20ms)")
    p.add_argument("--floor-loop", choices=sorted(FLOOR_LOOPS), default="uv",
                   help="the floor client's loop the floor column and targets use: uv (libuv + "
                        "multi_socket, as vlmload; default) or poll (curl_multi_poll); workload 1 "
                        "prints both")
    p.add_argument("--build-dir", default="build", help="where vlmload was built (default build)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"),
                   help="directory of bench.json and bench.csv (default bench/results)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    a = p.parse_args()
    if a.duration is None:
        a.duration = 3.0 if a.quick else 10.0
    if a.inflight is None:
        a.inflight = 1000 if a.quick else 10000
    if a.waves is None:
        a.waves = 1 if a.quick else 2
    a.rates = [float(x) for x in a.rates.split(",") if x.strip()]
    a.repeat = max(1, a.repeat)

    # Children inherit the driver's soft limit on open files: raise it to the hard one.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    started = datetime.datetime.now().astimezone().isoformat()
    load_start = os.getloadavg()
    b = Bench(a)
    log("work directory %s; clients on core %s, targets on core %s; load average %.2f" %
        (b.work, b.client_core, b.server_core, load_start[0]))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ok = True
    try:
        for w in a.only:
            log("workload %d: %s" % (w, WORKLOADS[w]))
            try:
                getattr(b, "w%d" % w)()
            except Exception as e:  # noqa: BLE001 - one workload's failure must not stop the rest
                b.note("workload %d stopped: %s: %s" % (w, type(e).__name__, e))
            if w == 3:
                b.nginx_stop()  # workloads 1 to 3 share it; the rest use the mock or no target
        b.nginx_stop()
        ok = b.report(started, load_start)
    except KeyboardInterrupt:
        log("interrupted")
        ok = False
    finally:
        PROCS.stop_all()
        if a.keep:
            log("kept %s" % b.work)
        else:
            shutil.rmtree(b.work, ignore_errors=True)
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
