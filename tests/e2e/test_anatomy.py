"""Memory by kind. The mock grows memory each way a server does (per image in the heap, in shared
memory, a one-time step at the first image, a cache that stops at a cap, glibc arenas that fill
with threads) and says so in /mock/stats; the kernel's /proc/PID/status and smaps are the judge
of the mock. vlmload's anatomy series (anon_mb, file_mb, shmem_mb, heap_mb, device_mb, arenas) are
then judged against the mock's account."""
import base64
import json
import os
import re
import struct
import subprocess
import unittest
import urllib.request
import zlib

import harness

KiB = 1024
MiB = 1048576
HEAP_MAX = 64 * MiB
# Under AddressSanitizer malloc is the sanitizer's: no glibc arenas, and its quarantine keeps freed
# blocks (up to 256 MiB), so the server's own anonymous memory grows with its requests.
SANITIZED = harness.SANITIZED
NO_ARENAS = unittest.skipIf(SANITIZED, "the sanitizer's malloc makes no glibc arenas")
ANON_NOISE_MB = 64 if SANITIZED else 8


def png(w=16, h=16):
    """A w x h grey PNG, made here so the test needs no encoder of its own."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    raw = b"".join(b"\x00" + bytes([128] * w) for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


URI = "data:image/png;base64," + base64.b64encode(png()).decode()


def chat(m, images):
    """One chat request to the mock with `images` images; asserts it was answered 200."""
    content = [{"type": "image_url", "image_url": {"url": URI}} for _ in range(images)]
    content.append({"type": "text", "text": "what is this?"})
    body = json.dumps({"model": "m", "max_tokens": 1,
                       "messages": [{"role": "user", "content": content}]}).encode()
    req = urllib.request.Request(m.url + "/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200, r.status
        r.read()


def status_kb(pid):
    """RssAnon, RssFile, RssShmem of pid in KiB, from /proc/PID/status."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Rss"):
                key, val = line.split(":")
                out[key] = int(val.split()[0])
    return out


def mappings(pid):
    """[(start, end, perms, path, rss_kb)] from /proc/PID/smaps."""
    out = []
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$", line)
            if m:
                out.append([int(m.group(1), 16), int(m.group(2), 16), m.group(3),
                            m.group(4).strip(), 0])
            elif line.startswith("Rss:"):
                out[-1][4] = int(line.split()[1])
    return out


def arena_heaps(pid):
    """glibc arena heaps of pid, counted the way docs/memory.md says: an anonymous rw mapping on
    a 64 MiB boundary followed at once by an anonymous ---p one that ends on such a boundary."""
    maps = mappings(pid)
    n = 0
    for a, b in zip(maps, maps[1:]):
        if (a[3] == "" and a[2].startswith("rw") and a[0] % HEAP_MAX == 0 and b[3] == ""
                and b[2].startswith("---") and b[0] == a[1] and b[1] % HEAP_MAX == 0):
            n += (b[1] - a[0]) // HEAP_MAX
    return n


class MockKindsTest(harness.MockTestCase):
    """The mock's ways to grow, judged by the kernel: each shows in the kind of memory it says."""

    def test_shm_per_image_is_resident_shared_memory(self):
        m = self.mock("--shm-kb-per-image", "512")
        before = status_kb(m.proc.pid)["RssShmem"]
        for _ in range(20):
            chat(m, 2)
        st = m.stats()
        self.assertEqual(st["memory"]["shm"], 40 * 512 * KiB)
        grown = status_kb(m.proc.pid)["RssShmem"] - before
        self.assertAlmostEqual(grown, 40 * 512, delta=64)
        shm = [x for x in mappings(m.proc.pid) if x[3].startswith("/dev/shm/vlmmock-")]
        self.assertEqual(len(shm), 1, shm)
        self.assertAlmostEqual(shm[0][4], 40 * 512, delta=8)

    def test_step_at_the_first_image_then_held(self):
        m = self.mock("--step-mb-at-first-image", "64")
        chat(m, 0)
        chat(m, 0)
        st = m.stats()
        self.assertIsNone(st["step_at_request"])
        self.assertEqual(st["memory"]["step"], 0)
        anon0 = status_kb(m.proc.pid)["RssAnon"]
        chat(m, 1)
        st = m.stats()
        self.assertEqual(st["step_at_request"], 3)
        self.assertEqual(st["memory"]["step"], 64 * MiB)
        anon1 = status_kb(m.proc.pid)["RssAnon"]
        self.assertAlmostEqual(anon1 - anon0, 64 * 1024, delta=2048)
        for _ in range(10):
            chat(m, 1)
        st = m.stats()
        self.assertEqual((st["step_at_request"], st["memory"]["step"]), (3, 64 * MiB))
        self.assertAlmostEqual(status_kb(m.proc.pid)["RssAnon"], anon1, delta=2048)

    def test_cache_stops_at_its_cap(self):
        m = self.mock("--cache-kb-per-image", "1024", "--cache-cap-mb", "16")
        anon0 = status_kb(m.proc.pid)["RssAnon"]
        for _ in range(40):
            chat(m, 1)
        st = m.stats()
        self.assertEqual(st["memory"]["cached"], 16 * MiB)
        self.assertEqual(st["memory"]["evicted"], 24 * MiB)
        self.assertAlmostEqual(status_kb(m.proc.pid)["RssAnon"] - anon0, 16 * 1024,
                               delta=ANON_NOISE_MB * 256)

    @NO_ARENAS
    def test_arenas_fill_with_threads_then_hold(self):
        m = self.mock("--arena-threads", "6", "--arena-kb", "4096", "--threads", "1",
                      "--decode-threads", "0")
        heaps0 = arena_heaps(m.proc.pid)
        anon0 = status_kb(m.proc.pid)["RssAnon"]
        for _ in range(60):
            chat(m, 1)
        st = m.stats()
        self.assertEqual(st["memory"]["arena_threads"], 6)
        held = st["memory"]["arena"]
        # Ten draws each from 0..4 MiB: each thread's largest is near the top.
        self.assertGreater(held, 6 * 4096 * KiB * 0.6)
        self.assertLessEqual(held, 6 * 4096 * KiB)
        self.assertGreaterEqual(arena_heaps(m.proc.pid) - heaps0, 6)
        anon1 = status_kb(m.proc.pid)["RssAnon"]
        self.assertAlmostEqual((anon1 - anon0) * KiB, held, delta=0.1 * held + 4 * MiB)
        # More images draw no larger scratch than the largest so far, or little: it holds.
        for _ in range(60):
            chat(m, 1)
        held2 = m.stats()["memory"]["arena"]
        self.assertLess(held2 - held, 0.25 * held)
        self.assertAlmostEqual((status_kb(m.proc.pid)["RssAnon"] - anon0) * KiB, held2,
                               delta=0.1 * held2 + 4 * MiB)

    def test_bad_combinations_are_refused(self):
        for args, words in ((["--cache-cap-mb", "10"], "--cache-kb-per-image"),
                            (["--step-mb-at-first-image", "5000"], "--memory-limit-mb"),
                            (["--arena-threads", "65"], "out of range")):
            p = subprocess.run([harness.VLMMOCK, "--port", "0", *args], capture_output=True,
                               timeout=10)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(words, p.stderr.decode())


def column(r, name):
    """The values of a timeline column, as floats, rows where it is empty left out."""
    return [float(row[name]) for row in r.timeline if row.get(name, "") != ""]


def analyze_alone(test):
    """`vlmload analyze` on the timeline the test's run wrote; returns its series by name."""
    out = os.path.join(test.tmp, "analysis.json")
    p = subprocess.run([harness.VLMLOAD, "analyze", os.path.join(test.tmp, "timeline.csv"),
                        "--output", out, "--quiet"], capture_output=True, timeout=60)
    test.assertEqual(p.returncode, 0, p.stderr)
    with open(out) as f:
        return {s["series"]: s for s in json.load(f)["series"]}


class AnatomyTest(harness.MockTestCase):
    """vlmload's memory by kind against the mock's account of what it holds, and of which kind.

    The mock holds its memory on a thread of its own, which on a loaded machine may lag the
    requests by a second or more; so each test waits for the mock's account (/mock/stats waits
    for its thread), then samples the settled mock with a short text-only run, which adds
    nothing, and compares that run's readings with the account."""

    def run_load(self, m, *args, rate="200", requests="600", every="100ms", anatomy="300ms"):
        r = self.run_vlmload("--url", m.url, "--rate", rate, "--requests", requests,
                             "--arrival", "constant", "--image-ratio", "1",
                             "--resolution", "32x32", "--monitor-pid", "mock=%d" % m.proc.pid,
                             "--sample-every", every, "--anatomy-every", anatomy, "--analyze",
                             *args)
        self.assertEqual(r.rc, 0, r.stderr)
        return r

    def settled(self, m):
        """The mock's account once its thread has caught up, and a text-only run's readings of
        the mock then: {series: last value}."""
        st = m.stats()
        r = self.run_vlmload("--url", m.url, "--rate", "50", "--requests", "20",
                             "--image-ratio", "0", "--monitor-pid", "mock=%d" % m.proc.pid,
                             "--sample-every", "100ms", "--anatomy-every", "100ms")
        self.assertEqual(r.rc, 0, r.stderr)
        last = {k: float(v) for k, v in r.timeline[-1].items()
                if k.endswith(".mock") and v != ""}
        return st, last

    def first(self, r, name):
        v = column(r, name)
        self.assertGreater(len(v), 5, name)
        return v[0]

    def verdicts(self, r):
        return {s["series"]: s for s in r.summary["memory_analysis"]["series"]}

    def test_shmem_follows_the_mocks_shared_memory(self):
        m = self.mock("--latency", "2ms", "--shm-kb-per-image", "256")
        r = self.run_load(m)
        series = self.verdicts(r)
        self.assertEqual(series["shmem_mb.mock"]["verdict"], "grows")
        self.assertIn(series["file_mb.mock"]["verdict"], ("flat", "inconclusive"))
        st, last = self.settled(m)
        shm_mb = st["memory"]["shm"] / MiB
        self.assertAlmostEqual(shm_mb, 600 * 256 / 1024.0)
        grown = last["shmem_mb.mock"] - self.first(r, "shmem_mb.mock")
        self.assertAlmostEqual(grown, shm_mb, delta=0.02 * shm_mb + 1)
        # Nothing else moved: no file was mapped, and anonymous memory is the server's own work.
        self.assertLess(abs(last["file_mb.mock"] - self.first(r, "file_mb.mock")), 2)
        self.assertLess(abs(last["anon_mb.mock"] - self.first(r, "anon_mb.mock")), ANON_NOISE_MB)

    def test_anon_grows_with_a_leak_per_image(self):
        m = self.mock("--latency", "2ms", "--leak-kb-per-image", "256")
        r = self.run_load(m)
        series = self.verdicts(r)
        self.assertEqual(series["anon_mb.mock"]["verdict"], "grows")
        st, last = self.settled(m)
        leaked = st["memory"]["leaked"] / MiB
        self.assertAlmostEqual(leaked, 150)
        grown = last["anon_mb.mock"] - self.first(r, "anon_mb.mock")
        noise = ANON_NOISE_MB if SANITIZED else 4
        self.assertAlmostEqual(grown, leaked, delta=0.05 * leaked + noise)
        self.assertLess(abs(last["shmem_mb.mock"] - self.first(r, "shmem_mb.mock")), 1)
        self.assertLess(abs(last["file_mb.mock"] - self.first(r, "file_mb.mock")), 2)

    def test_step_at_the_first_image(self):
        # Five requests a second and a row every 50 ms: each request has rows of its own, so the
        # row where anonymous memory starts to rise names the request that made the step.
        m = self.mock("--latency", "2ms", "--step-mb-at-first-image", "200")
        r = self.run_load(m, "--image-ratio", "0.3", "--seed", "7", rate="5", requests="30",
                          every="50ms")
        st = m.stats()
        self.assertEqual(st["memory"]["step"], 200 * MiB)
        at = st["step_at_request"]
        self.assertIsNotNone(at)
        anon = column(r, "anon_mb.mock")
        done = [float(row["completed_total"]) for row in r.timeline if row["anon_mb.mock"]]
        rise = next(i for i in range(1, len(anon)) if anon[i] - anon[0] > 4)
        # Completed by the row before the rise: the request that made it is the next one, or
        # one in flight then.
        self.assertLessEqual(abs(done[rise - 1] + 1 - at), 5, (done[rise - 1], at))
        _, last = self.settled(m)
        self.assertAlmostEqual(last["anon_mb.mock"] - anon[rise - 1], 200, delta=20)
        rss = column(r, "rss_mb.mock")
        self.assertAlmostEqual(last["rss_mb.mock"] - rss[rise - 1], 200, delta=20)
        # Flat after it: nothing grows per image.
        self.assertLess(abs(anon[-1] - last["anon_mb.mock"]), ANON_NOISE_MB)

    @NO_ARENAS
    def test_arenas_rise_with_threads_then_hold(self):
        m = self.mock("--latency", "2ms", "--arena-threads", "6", "--arena-kb", "4096",
                      "--threads", "1", "--decode-threads", "0")
        r = self.run_load(m)
        self.assertEqual(self.verdicts(r)["arenas.mock"]["verdict"], "not-memory")
        st, last = self.settled(m)
        held = st["memory"]["arena"] / MiB
        self.assertGreater(held, 6 * 4 * 0.8)
        self.assertGreaterEqual(last["arenas.mock"] - self.first(r, "arenas.mock"), 6)
        # The arenas' scratch, and on top of it the server's own work in its threads' arenas.
        grown = last["heap_mb.mock"] - self.first(r, "heap_mb.mock")
        self.assertGreater(grown, 0.9 * held)
        self.assertLess(grown, held + 16)
        self.assertLess(abs(last["shmem_mb.mock"] - self.first(r, "shmem_mb.mock")), 1)
        self.assertEqual(max(column(r, "device_mb.mock")), 0)

    def test_analyze_reads_the_anatomy_back(self):
        m = self.mock("--latency", "2ms", "--shm-kb-per-image", "128", "--arena-threads", "2")
        self.run_load(m, requests="400")
        series = analyze_alone(self)
        for name in ("anon_mb.mock", "file_mb.mock", "shmem_mb.mock", "heap_mb.mock",
                     "device_mb.mock", "arenas.mock"):
            self.assertIn(name, series)
        if not SANITIZED:  # slowed down, it may have too few samples after the warm-up
            self.assertEqual(series["shmem_mb.mock"]["verdict"], "grows")
        self.assertEqual(series["shmem_mb.mock"]["unit"], "MB")
        self.assertEqual(series["arenas.mock"]["verdict"], "not-memory")

    def test_anatomy_off(self):
        m = self.mock("--latency", "2ms")
        r = self.run_load(m, requests="100", anatomy="0")
        cols = r.timeline[0].keys()
        self.assertIn("anon_mb.mock", cols)
        for name in ("heap_mb.mock", "device_mb.mock", "arenas.mock"):
            self.assertNotIn(name, cols)


class TreeAnatomyTest(harness.MockTestCase):
    """Memory by kind for each process of a --monitor-tree: the mock runs as the child of a shell,
    so its series are found under the tree (srv/vlmmock) and judged against its account."""

    def tree_mock(self, *args):
        """The mock started by a shell that waits for it (and passes SIGTERM on): the shell is
        the tree's root, the mock its child."""
        wrap = os.path.join(self.tmp, "parent.sh")
        with open(wrap, "w") as f:
            f.write('#!/bin/sh\ntrap \'kill $c; wait $c\' TERM\n"%s" "$@" &\nc=$!\nwait $c\n'
                    % os.path.abspath(harness.VLMMOCK))
        os.chmod(wrap, 0o755)
        real = harness.VLMMOCK
        harness.VLMMOCK = wrap
        try:
            m = self.mock(*args)
        finally:
            harness.VLMMOCK = real
        return m

    def run_tree(self, m, *args):
        r = self.run_vlmload("--url", m.url, "--monitor-tree", "srv=%d" % m.proc.pid,
                             "--sample-every", "100ms", *args)
        self.assertEqual(r.rc, 0, r.stderr)
        return r

    def test_tree_processes_get_their_kinds(self):
        m = self.tree_mock("--latency", "2ms", "--shm-kb-per-image", "256", "--arena-threads",
                           "6", "--arena-kb", "4096", "--threads", "1", "--decode-threads", "0")

        def text_only():  # the tree's last sample of a short run that sends no image
            return {k: float(v) for k, v in self.run_tree(
                m, "--rate", "50", "--requests", "20", "--image-ratio", "0",
                "--anatomy-every", "100ms").timeline[-1].items() if ".srv" in k and v != ""}

        first = text_only()
        r = self.run_tree(m, "--rate", "200", "--requests", "600", "--arrival", "constant",
                          "--image-ratio", "1", "--resolution", "32x32", "--anatomy-every",
                          "300ms")
        st = m.stats()
        last = text_only()
        P = "srv/vlmmock"
        for kind in ("anon_mb", "file_mb", "shmem_mb", "heap_mb", "device_mb", "arenas"):
            self.assertGreater(len(column(r, "%s.%s" % (kind, P))), 5, kind)
            self.assertIn("%s.srv/parent.sh" % kind, r.timeline[0].keys())
        # The child's shared memory grew by what the mock holds there.
        shm_mb = st["memory"]["shm"] / MiB
        self.assertAlmostEqual(shm_mb, 600 * 256 / 1024.0)
        self.assertAlmostEqual(last["shmem_mb." + P] - first["shmem_mb." + P], shm_mb,
                               delta=0.02 * shm_mb + 1)
        self.assertLess(abs(last["file_mb." + P] - first["file_mb." + P]), 2)
        self.assertEqual(max(column(r, "device_mb." + P)), 0)
        # The tree's kinds are the sums of its processes' at every sample.
        for row in r.timeline:
            for kind in ("anon_mb", "file_mb", "shmem_mb"):
                parts = [float(row[k]) for k in ("%s.srv/parent.sh" % kind, "%s.%s" % (kind, P))]
                self.assertAlmostEqual(float(row[kind + ".srv"]), sum(parts), delta=1e-3)
        if not SANITIZED:  # the sanitizer's malloc makes no glibc arenas
            held = st["memory"]["arena"] / MiB
            self.assertGreater(held, 6 * 4 * 0.8)
            self.assertGreaterEqual(last["arenas." + P] - first["arenas." + P], 6)
            self.assertGreater(last["heap_mb." + P] - first["heap_mb." + P], 0.9 * held)
            self.assertAlmostEqual(last["anon_mb." + P] - first["anon_mb." + P], held,
                                   delta=0.1 * held + ANON_NOISE_MB)


if __name__ == "__main__":
    harness.main()
