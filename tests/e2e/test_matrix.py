"""`vlmload matrix`: cells run one after another, each against a vlmmock it starts itself, judged
by the mock's memory model (a known number of KiB per image) and by the mock's own record of what
it was sent; a server that never becomes ready fails its cell and the next cell runs; Ctrl-C
stops the cell, its server and the matrix, and writes what was measured."""
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEAK_MATRIX = os.path.join(ROOT, "tools", "scenarios", "leak-matrix.json")
# 64 KiB per image, one image per request: 62.5 MiB per 1000 requests.
LEAK_SLOPE = 64 * 1000 / 1024.0
# A sanitizer's allocator holds what is freed for a while, so the sanitized mock's resident set
# grows in every cell: there the mock's own figure of what it holds is judged alone.
SANITIZED = harness.SANITIZED
PROM = "prom.vlmmock_memory_bytes"


def matrix(test, *args, timeout=120):
    out = os.path.join(test.tmp, "out")
    p = subprocess.run([harness.VLMLOAD, "matrix", "--output-dir", out, *args],
                       capture_output=True, timeout=timeout)
    doc = None
    if os.path.exists(os.path.join(out, "matrix.json")):
        with open(os.path.join(out, "matrix.json")) as f:
            doc = json.load(f)
    return p.returncode, p.stdout.decode(), p.stderr.decode(), doc, out


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie not yet reaped by init counts as gone.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def table_rows(stdout):
    """The table's rows as (cell, series, verdict), the cell carried down blank cells."""
    rows, cell = [], None
    lines = stdout.splitlines()
    assert lines[0].startswith("cell "), stdout
    for line in lines[1:]:
        if not line.strip() or ": " in line.split("  ")[0]:
            continue
        if not line.startswith(" "):
            cell = line.split()[0]
            rest = line.split()[1:]
        else:
            rest = line.split()
        rows.append((cell, rest[0], rest[1] if len(rest) > 1 else ""))
    return rows


class MatrixTest(harness.MockTestCase):
    def test_leak_matrix_finds_the_leak_and_only_the_leak(self):
        # The scenario as shipped, its four cells side by side, shortened from the command line
        # (options after -- reach every cell and win over the file): 800 requests a cell, the
        # first 100 a warm-up.
        report = os.path.join(self.tmp, "matrix.html")
        rc, out, err, doc, d = matrix(self, LEAK_MATRIX, "--quiet", "--parallel", "4",
                                      "--report", report, "--", "--duration", "4s", "--warmup",
                                      "100", "--monitor-prom",
                                      "{url}/metrics#vlmmock_memory_bytes")
        self.assertEqual(rc, 0, err)
        cells = {c["name"]: c for c in doc["cells"]}
        self.assertEqual(list(cells), ["text-only", "images", "leak-64k",
                                       "cache-512k"])
        for name, c in cells.items():
            self.assertEqual(c["status"], "ok", c["error"])
            self.assertEqual(c["server"]["stopped"], "SIGTERM")
            self.assertFalse(alive(c["server"]["pid"]), name)
            # series[] is the cell's own run's memory analysis, whole.
            with open(os.path.join(d, c["summary"]["file"])) as f:
                summary = json.load(f)
            self.assertEqual(c["series"], summary["memory_analysis"]["series"])
            # --duration from the command line reached the cell: it stopped the run at 4 s (the
            # requests in flight then finish, longer on a machine busy with other tests).
            self.assertEqual(summary["stop_reason"], "duration")
            self.assertGreaterEqual(summary["duration_s"], 4)
            self.assertLess(summary["duration_s"], 4 + 1.0 * harness.SLACK)
            self.assertEqual(summary["requests"]["warmup"], 100)
            self.assertTrue(os.path.getsize(os.path.join(d, name, "memory.png")) > 10000)
        # Side by side: every cell started before any ended, each on a port of its own.
        self.assertLess(max(c["start_ms"] for c in cells.values()),
                        min(c["end_ms"] for c in cells.values()))
        self.assertEqual(len({c["server"]["port"] for c in cells.values()}), 4)
        judged = (PROM,) if SANITIZED else (PROM, "rss_mb.server", "rss_mb.server/vlmmock")
        verdicts = {(name, s["series"]): s["verdict"] for name, c in cells.items()
                    for s in c["series"] if s["series"] in judged}
        self.assertEqual(len(verdicts), 4 * len(judged))
        grows = sorted(k for k, v in verdicts.items() if v == "grows")
        self.assertEqual(grows, sorted(("leak-64k", j) for j in judged))
        # The cache fills by 512 KiB a request between flushes of 50 (25 MiB, less the requests
        # between a flush or the last one and the samples next to it, 10 ms apart at 200/s) and
        # is given back at each flush: the floor does not grow, whatever the short run's verdict.
        cache = {s["series"]: s for s in cells["cache-512k"]["series"]}[PROM]
        self.assertGreaterEqual(len(cache["floor"]["windows"]), 10)
        self.assertTrue(20 <= cache["within_windows"]["mean_rise"] <= 25, cache["within_windows"])
        self.assertIn(cache["verdict"], ("sawtooth-returns", "inconclusive"))
        series = {s["series"]: s for s in cells["leak-64k"]["series"]}
        for j in judged:
            self.assertAlmostEqual(series[j]["ols"]["slope_per_1000"], LEAK_SLOPE,
                                   delta=0.15 * LEAK_SLOPE)
        leak = series[judged[-1]]
        # The table says the same.
        rows = table_rows(out)
        self.assertEqual(sorted((c, s) for c, s, v in rows if v == "grows" and s in judged), grows)
        leak_row = [l for l in out.splitlines() if " %s " % leak["series"] in l
                    and (l.startswith("leak-64k ") or l.startswith(" "))]
        leak_row = [l for l in leak_row if "%+.2f +/- " % leak["ols"]["slope_per_1000"] in l][0]
        self.assertTrue(os.path.getsize(os.path.join(d, "rss.png")) > 10000)
        # The page: the table as printed, as an HTML table, and the chart of every cell's
        # resident set.
        with open(report) as f:
            page = f.read()
        slope = "%+.2f +/- " % leak["ols"]["slope_per_1000"]
        self.assertIn("<td>%s</td><td>grows</td><td>%s</td><td>%s"
                      % (leak["series"], leak["mechanism"], slope), page)
        self.assertEqual(page.count("<svg"), 1)
        for name in cells:
            self.assertIn(name, page)
            with open(os.path.join(d, name, "report.html")) as f:
                self.assertIn("<svg", f.read())

    def test_cells_side_by_side_start_their_loads_together(self):
        # Two cells at once: one server answers at once, the other two seconds later. The first
        # cell's load waits for the second server, so that neither load meets the other's
        # start-up: both loads begin together.
        mock = ["{vlmmock}", "--host", "127.0.0.1", "--port", "{port}", "--latency", "2ms"]
        spec = {
            "defaults": {"rate": 100, "duration": "1s", "image-ratio": 0,
                         "sample-every": "100ms"},
            "server": {"command": mock, "ready_timeout": "20s"},
            "cells": [
                {"name": "quick"},
                {"name": "slow", "server": {"command": [
                    "/bin/sh", "-c", "sleep 2; exec \"$0\" \"$@\"", *mock]}},
            ]}
        path = os.path.join(self.tmp, "m.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        rc, out, err, doc, d = matrix(self, path, "--parallel", "2")
        self.assertEqual(rc, 0, err)
        ready = {}
        for line in err.splitlines():
            for name in ("quick", "slow"):
                if "%s: server ready in " % name in line:
                    ready[name] = float(line.split("server ready in ")[1].rstrip("s"))
        self.assertGreater(ready["slow"], ready["quick"] + 1.5, err)
        first = {}
        for name in ("quick", "slow"):
            with open(os.path.join(d, name, "timeline.csv")) as f:
                first[name] = int(f.read().splitlines()[1].split(",")[0])
        # Loads begin within a fraction of a second of each other, not two seconds apart.
        self.assertLess(abs(first["quick"] - first["slow"]), 700, (first, err))

    def test_chart_leaves_out_the_rate_auto_probe(self):
        # A cell at --rate auto against a mock of known capacity: its timeline has the probe's rows
        # (phase rate-auto) before the run's. The chart of every cell's resident set draws the
        # run's rows only, as the cell's own analysis does; a stand-in for gnuplot keeps the
        # script of each plot, whose data blocks hold the points drawn.
        fake, kept = os.path.join(self.tmp, "gnuplot"), os.path.join(self.tmp, "scripts")
        os.mkdir(kept)
        with open(fake, "w") as f:
            f.write("#!/bin/sh\ncp \"$2\" \"$(mktemp -p '%s')\"\n"
                    "out=$(sed -n \"s/^set output '\\(.*\\)'$/\\1/p\" \"$2\" | head -1)\n"
                    "printf PNG > \"$out\"\n" % kept)
        os.chmod(fake, 0o755)
        mock = ["{vlmmock}", "--host", "127.0.0.1", "--port", "{port}", "--max-running", "6",
                "--latency", "20ms"]
        spec = {"defaults": {"rate": "auto", "duration": "1s", "warmup": 20, "image-ratio": 0,
                             "sample-every": "50ms"},
                "server": {"command": mock, "ready_timeout": "20s"},
                "cells": [{"name": "auto"}]}
        path = os.path.join(self.tmp, "m.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        rc, out, err, doc, d = matrix(self, path, "--gnuplot", fake)
        self.assertEqual(rc, 0, err)
        with open(os.path.join(d, doc["cells"][0]["summary"]["file"])) as f:
            self.assertIsNone(json.load(f)["rate_auto"]["error"])
        with open(os.path.join(d, "auto", "timeline.csv")) as f:
            rows = [r for r in csv.DictReader(f) if r["rss_mb.server"]]
        probe = [r for r in rows if r["phase"] == "rate-auto"]
        run = [r for r in rows if r["phase"] != "rate-auto"]
        self.assertGreaterEqual(len(probe), 5)
        self.assertGreaterEqual(len(run), 5)
        texts = []
        for name in os.listdir(kept):
            with open(os.path.join(kept, name)) as f:
                texts.append(f.read())
        charts = [t for t in texts if "'Resident set of every cell'" in t]
        self.assertEqual(len(charts), 1, [t[:300] for t in texts])
        text = charts[0]
        drawn = text.split("$S0 << EOD\n")[1].split("EOD\n")[0].split()
        self.assertNotIn("$S1 << EOD", text)
        self.assertEqual([float(y) for y in drawn[1::2]],
                         [float(r["rss_mb.server"]) for r in run], text)

    def test_failed_cell_then_next_then_interrupt(self):
        mock_cmd = ["{vlmmock}", "--host", "127.0.0.1", "--port", "{port}", "--latency", "2ms",
                    "--record", "{cell}/mock.jsonl"]
        spec = {
            "defaults": {"rate": 200, "resolution": "64x64", "image-ratio": 1,
                         "sample-every": "100ms"},
            "server": {"command": mock_cmd, "ready_timeout": "500ms"},
            "cells": [
                # Never answers its health route: failed after ready_timeout, killed.
                {"name": "never-ready", "server": {
                    "command": [sys.executable, "-c", "import time; time.sleep(60)", "{port}"],
                    "ready_timeout": "500ms", "stop_timeout": "300ms"}},
                # {url} is the cell's own server; a relative path is the file's folder's.
                {"name": "long", "options": {
                    "duration": "30s", "samples": "long-samples.csv",
                    "monitor-prom": "{url}/metrics#vlmmock_memory_bytes"}},
                {"name": "after", "options": {"duration": "1s"}},
            ]}
        path = os.path.join(self.tmp, "m.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        out_dir = os.path.join(self.tmp, "out")
        # A GPU, as NVML shows it (the fake library of the unit tests): the cells sample it too.
        env = dict(os.environ)
        fake = os.environ.get("VLMLOAD_FAKE_NVML")
        if fake:
            env["VLMLOAD_NVML_LIB"] = fake
        os.makedirs(os.path.join(self.tmp, "elsewhere"))
        p = subprocess.Popen([harness.VLMLOAD, "matrix", path, "--output-dir", out_dir],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             cwd=os.path.join(self.tmp, "elsewhere"))
        # Ctrl-C once the second cell's load has run a while.
        deadline = time.monotonic() + 20
        seen = ""
        while time.monotonic() < deadline:
            line = p.stderr.readline().decode()
            seen += line
            if "long: load started" in line or not line:
                break
        self.assertIn("long: load started", seen)
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=30)
        stdout, stderr = stdout.decode(), seen + stderr.decode()
        # A failed cell outranks the interrupt (as with --workers: 0 < 3 < 130 < 1).
        self.assertEqual(p.returncode, 1, stderr)
        with open(os.path.join(out_dir, "matrix.json")) as f:
            doc = json.load(f)
        never, long_, after = doc["cells"]
        self.assertTrue(doc["interrupted"])
        self.assertEqual(never["status"], "failed")
        self.assertIn("not ready within 0.5s", never["error"])
        self.assertEqual(never["summary"], None)
        self.assertFalse(alive(never["server"]["pid"]))
        # The next cell ran, until the interrupt, and what it measured was written.
        self.assertEqual(long_["status"], "interrupted", long_["error"])
        self.assertEqual(long_["summary"]["stop_reason"], "signal")
        self.assertLess(long_["summary"]["duration_s"], 10)
        self.assertFalse(alive(long_["server"]["pid"]))
        self.assertEqual(long_["server"]["stopped"], "SIGTERM")
        # Its load reached its own server: the mock's record holds every request it answered.
        with open(os.path.join(out_dir, "long", "mock.jsonl")) as f:
            recs = [json.loads(l) for l in f]
        chat = [r for r in recs if r.get("route", "/v1/chat/completions") ==
                "/v1/chat/completions" and r["status"] == 200]
        self.assertEqual(len(chat), long_["summary"]["requests"]["ok"])
        self.assertGreater(len(chat), 50)
        self.assertTrue(all(len(r["images"]) == 1 for r in chat))
        names = {s["series"] for s in long_["series"]}
        self.assertTrue(names >= {"rss_mb.server", "prom.vlmmock_memory_bytes"}, names)
        self.assertIn("--monitor-tree", long_["load_command"])
        if fake:
            self.assertIn("--monitor-gpu", long_["load_command"])
            self.assertIn("gpu_mb.server", names)
        self.assertTrue(os.path.getsize(os.path.join(self.tmp, "long-samples.csv")) > 0)
        self.assertEqual(os.listdir(os.path.join(self.tmp, "elsewhere")), [])
        self.assertEqual(after["status"], "not run")
        self.assertFalse(os.path.exists(os.path.join(out_dir, "after", "summary.json")))
        # The table names the failure and the interrupted cell.
        self.assertIn("never-ready: the server was not ready within 0.5s", stdout)
        rows = table_rows(stdout)
        self.assertIn(("never-ready", "failed", "-"), rows)
        self.assertIn(("after", "not", "run"), rows)

    def test_cells_runs_only_the_named_cells(self):
        # --cells picks cells out of the file, in the file's order; the others leave no trace.
        mock = ["{vlmmock}", "--host", "127.0.0.1", "--port", "{port}", "--latency", "1ms"]
        spec = {
            "defaults": {"rate": 100, "duration": "1s", "image-ratio": 0},
            "server": {"command": mock, "ready_timeout": "20s"},
            "cells": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
        path = os.path.join(self.tmp, "m.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        rc, out, err, doc, d = matrix(self, path, "--cells", "c,a")
        self.assertEqual(rc, 0, err)
        self.assertEqual([c["name"] for c in doc["cells"]], ["a", "c"])
        for c in doc["cells"]:
            self.assertGreater(c["summary"]["requests"]["ok"], 0, c["name"])
        self.assertEqual(sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n))),
                         ["a", "c"])
        self.assertEqual(sorted({cell for cell, _, _ in table_rows(out)}), ["a", "c"])
        self.assertIn("[1/2] a: ", err)
        # A name the file does not have is refused, with the names it has, before anything runs.
        shutil.rmtree(d)
        rc, out, err, doc, d = matrix(self, path, "--cells", "a,x")
        self.assertEqual(rc, 2, err)
        self.assertEqual(err.strip(), "vlmload matrix: --cells: 'x' is not a cell of '%s'; its "
                         "cells are: a, b, c" % path)
        self.assertIsNone(doc)

    def test_dry_run_checks_and_runs_nothing(self):
        out_dir = os.path.join(self.tmp, "out")
        p = subprocess.run([harness.VLMLOAD, "matrix", LEAK_MATRIX, "--dry-run"],
                           capture_output=True, timeout=60, cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stderr)
        text = p.stdout.decode()
        self.assertEqual(text.count("\ncell ") + text.startswith("cell "), 4)
        self.assertIn("--leak-kb-per-image 64", text)
        self.assertEqual(os.listdir(self.tmp), [])  # no output folder left behind
        self.assertFalse(os.path.exists(out_dir))

    def test_bad_files_are_refused_before_any_cell_runs(self):
        cases = [
            ({"cells": []}, "\"cells\" must be a list of at least one cell"),
            ({"cells": [{"name": "a/b"}]}, "\"name\" must be"),
            ({"cells": [{"name": "a"}, {"name": "a"}]}, "is cell 1's already"),
            ({"cells": [{"name": "a", "options": {"rate": "fast"}}]}, "cell 'a'"),
            ({"cells": [{"name": "a", "options": {"output": "x.json"}}]}, "is the matrix's"),
            ({"server": {"command": ["{vlmmock}"]}, "cells": [{"name": "a"}]}, "has no {port}"),
            ({"cells": [{"name": "a"}], "extra": 1}, "unknown key \"extra\""),
        ]
        for spec, want in cases:
            path = os.path.join(self.tmp, "bad.json")
            with open(path, "w") as f:
                json.dump(spec, f)
            rc, out, err, doc, d = matrix(self, path)
            self.assertEqual(rc, 2, (spec, err))
            self.assertIn(want, err, spec)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIsNone(doc)


class PapercutTest(harness.MockTestCase):
    def write(self, spec, name="m.json"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(spec if isinstance(spec, str) else json.dumps(spec))
        return path

    def test_cell_adds_arguments_to_the_shared_server_command(self):
        mock = ["{vlmmock}", "--host", "127.0.0.1", "--port", "{port}", "--latency", "1ms"]
        path = self.write({
            "defaults": {"rate": 50, "duration": "1s", "image-ratio": 0},
            "server": {"command": mock, "ready_timeout": "20s"},
            "cells": [{"name": "plain"},
                      {"name": "extra", "server": {"args": ["--model", "extra-model", "--record",
                                                            "{cell}/record.jsonl"]}}]})
        rc, out, err, doc, d = matrix(self, path, "--quiet")
        self.assertEqual(rc, 0, err)
        cells = {c["name"]: c for c in doc["cells"]}
        plain, extra = cells["plain"]["server"]["command"], cells["extra"]["server"]["command"]
        ports = [str(cells[n]["server"]["port"]) for n in ("plain", "extra")]
        self.assertEqual(extra[:len(plain)], [ports[1] if a == ports[0] else a for a in plain])
        self.assertEqual(extra[len(plain):], ["--model", "extra-model", "--record",
                                              os.path.join(d, "extra", "record.jsonl")])
        # The server the cell started was given them: it served its own model and recorded every
        # request the cell's load sent; the other cell's server was not.
        with open(os.path.join(d, "extra", "record.jsonl")) as f:
            recs = [r for r in map(json.loads, f)
                    if r.get("route", "/v1/chat/completions") == "/v1/chat/completions"]
        with open(os.path.join(d, "extra", "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["model"], "extra-model")
        self.assertEqual(len(recs), summary["requests"]["sent"])
        self.assertTrue(all(r["model"] == "extra-model" for r in recs))
        self.assertFalse(os.path.exists(os.path.join(d, "plain", "record.jsonl")))
        with open(os.path.join(d, "plain", "summary.json")) as f:
            self.assertEqual(json.load(f)["model"], "mock-vlm")
        # --dry-run shows them after the command.
        p = subprocess.run([harness.VLMLOAD, "matrix", path, "--dry-run"], capture_output=True,
                           timeout=60)
        self.assertIn("--latency 1ms --model extra-model --record {cell}/record.jsonl\n",
                      p.stdout.decode())

    def test_a_typo_names_the_cell_and_the_key(self):
        mock = ["{vlmmock}", "--port", "{port}"]
        cases = [
            ({"defaults": {"rate": 5}, "server": {"command": mock},
              "cells": [{"name": "a"}, {"name": "b", "options": {"rat": 5}}]},
             "'%s' cell 'b': unknown option \"rat\"; did you mean \"rate\"?"),
            ({"defaults": {"sample-evry": "1s"}, "server": {"command": mock},
              "cells": [{"name": "a"}]},
             "'%s' defaults: unknown option \"sample-evry\"; did you mean \"sample-every\"?"),
            ({"server": {"command": mock}, "cells": [{"name": "a", "options": {"duration": 5}}]},
             "--duration (in '%s' cell 'a') '5': a duration needs its unit: 5ms? 5s?"),
            ({"server": {"command": mock}, "cells": [{"name": "a", "server": {"arg": ["-v"]}}]},
             "'%s': cell 'a': server: unknown key \"arg\"; did you mean \"args\"?"),
            ({"server": {"command": mock, "ready_timeout": 60}, "cells": [{"name": "a"}]},
             "'%s': server \"ready_timeout\": a duration needs its unit: 60ms? 60s?"),
        ]
        for spec, want in cases:
            path = self.write(spec)
            rc, out, err, doc, d = matrix(self, path, "--dry-run")
            self.assertEqual(rc, 2, err)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertTrue(err.startswith("vlmload matrix: " + want % path), err)
            self.assertNotIn("config.json", err)
            self.assertNotIn("vlmload-matrix-", err)  # no temporary folder named
            self.assertIsNone(doc)

    def test_a_file_that_is_not_json_says_the_line_and_column(self):
        text = ('{\n  "defaults": {"rate": 5},\n  "cells": [\n    {"name": "a",}\n  ]\n}\n',
                '{"cells": [{"name": "a"}]} trailing\n',
                '{\n  "cells": [{name: "a"}]\n}\n')
        where = ("line 4, column 18", "line 1, column 28", "line 2, column 14")
        for t, w in zip(text, where):
            path = self.write(t)
            rc, out, err, doc, d = matrix(self, path)
            self.assertEqual(rc, 2, err)
            self.assertEqual(err, "vlmload matrix: '%s': not JSON: %s\n" % (path, w))
        # A --config file says the same.
        p = subprocess.run([harness.VLMLOAD, "--config", path], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr.decode(), "vlmload: --config '%s': not JSON: %s\n"
                         % (path, where[-1]))

    def test_no_empty_chart(self):
        # One cell's server cannot start, the other's load ends after one request: neither
        # leaves a line to draw, so no chart is written, shown or claimed.
        mock = ["{vlmmock}", "--host", "127.0.0.1", "--port", "{port}"]
        path = self.write({
            "defaults": {"requests": 1, "rate": 0, "image-ratio": 0},
            "server": {"command": mock, "ready_timeout": "20s"},
            "cells": [{"name": "nostart", "server": {"command": ["/nonexistent/server", "{port}"]}},
                      {"name": "brief"}]})
        report = os.path.join(self.tmp, "m.html")
        rc, out, err, doc, d = matrix(self, path, "--report", report)
        self.assertEqual(rc, 1, err)
        cells = {c["name"]: c for c in doc["cells"]}
        self.assertEqual(cells["nostart"]["status"], "failed")
        self.assertIn("cannot start the server '/nonexistent/server'", cells["nostart"]["error"])
        self.assertEqual(cells["brief"]["summary"]["requests"]["ok"], 1)
        self.assertFalse(os.path.exists(os.path.join(d, "rss.png")))
        self.assertFalse(os.path.exists(os.path.join(d, "rss.gp")))
        self.assertFalse(os.path.exists(os.path.join(d, "nostart", "memory.png")))
        with open(report) as f:
            self.assertNotIn("<svg", f.read())
        self.assertIn("vlmload matrix: wrote %s/matrix.json and the report\n" % d, err)

if __name__ == "__main__":
    harness.main()
