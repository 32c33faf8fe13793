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
import urllib.request
import zlib

import harness

KiB = 1024
MiB = 1048576
HEAP_MAX = 64 * MiB


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
        self.assertAlmostEqual(status_kb(m.proc.pid)["RssAnon"] - anon0, 16 * 1024, delta=2048)

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


if __name__ == "__main__":
    harness.main()
