"""The documents a newcomer reads: README.md is a front door of at most 200 lines whose commands
really run, every relative link in README.md and docs/ points at something that exists, and the
option reference (docs/options.md), the man pages and the bash completion come from the option
table and the subcommands' --help, installed where `man` and bash look for them."""
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.environ.get("VLMLOAD_DOCS", "vlmload-docs")
BUILD = os.environ.get("VLMLOAD_BUILD", "")
VERDICTS = ["grows", "sawtooth-returns", "levels-off", "flat", "inconclusive", "peak"]


def help_flags(*sub):
    out = subprocess.run([harness.VLMLOAD, *sub, "--help"], capture_output=True,
                         timeout=30).stdout
    return set(re.findall(r"^\s+(?:-[a-zA-Z], )?(--[a-z0-9-]+)", out.decode(), re.M))


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def markdown_files():
    return ["README.md"] + sorted(os.path.join("docs", n) for n in os.listdir(
        os.path.join(ROOT, "docs")) if n.endswith(".md"))


def slug(heading):
    """The anchor GitHub gives a heading."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(text):
    return {slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


def man_page():
    return subprocess.run([DOCS, "man"], capture_output=True, timeout=30).stdout.decode()


def sections(page):
    """{.SH name: its text} of a roff page."""
    parts = re.split(r"^\.SH (.*)$", page, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def shell_commands(block):
    """The commands of a fenced shell block: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [l.split(" #")[0].strip() for l in joined.splitlines()
            if l.strip() and not l.lstrip().startswith("#")]


class ReadmeTest(unittest.TestCase):
    def test_readme_is_at_most_200_lines(self):
        n = read("README.md").count("\n")
        self.assertLessEqual(n, 200, "README.md has %d lines: move the detail to docs/" % n)

    def test_first_screen_says_what_to_do(self):
        # The first screen: what it is for, the two commands, the mock by hand, the memory
        # experiment against SGLang and how to read the verdict.
        head = "\n".join(read("README.md").splitlines()[:60])
        for s in ["memory grows", "tools/demo.sh", "tools/test.sh", "build/vlmmock --port",
                  "sglang.launch_server", "sglang::scheduler", "--analyze"] + \
                ["`%s`" % v for v in VERDICTS]:
            self.assertIn(s, head)

    def test_readme_commands_parse(self):
        # Every vlmload command in the README's shell blocks parses as written (--dry-run with a
        # model, so that nothing is sent), and every vlmmock flag it uses exists.
        readme = read("README.md")
        blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
        mock_help = subprocess.run([harness.VLMMOCK, "--help"], capture_output=True,
                                   timeout=30).stdout.decode()
        checked = 0
        for block in blocks:
            for cmd in shell_commands(block):
                cmd = cmd.rstrip("&").strip().replace("$!", str(os.getpid()))
                words = shlex.split(cmd)
                if words[0] in ("vlmload", "build/vlmload"):
                    if len(words) > 1 and words[1] == "analyze":
                        continue
                    args = [a for a in words[1:] if a not in ("--analyze",)]
                    if "--plot" in args:  # needs gnuplot, which this test does not
                        i = args.index("--plot")
                        del args[i:i + 2]
                    if args[:1] == ["matrix"]:  # checks every cell's options, runs nothing
                        args = args[:2] + ["--dry-run"] + args[2:]
                    else:
                        args += ["--dry-run", "--model", "m"]
                    p = subprocess.run([harness.VLMLOAD, *args],
                                       capture_output=True, timeout=60, cwd=ROOT)
                    self.assertEqual(p.returncode, 0, "%s: %s" % (cmd, p.stderr.decode()))
                    checked += 1
                elif words[0] in ("vlmmock", "build/vlmmock"):
                    for flag in (w for w in words if w.startswith("--")):
                        self.assertIn("  " + flag + " ", mock_help, cmd)
                    checked += 1
        self.assertGreater(checked, 5)

    def test_one_spelling_of_the_binary(self):
        # `vlmload` once installed, `build/vlmload` where the build is meant; never ./vlmload or
        # a build directory of another name.
        for path in markdown_files():
            text = read(path)
            self.assertNotRegex(text, r"(?<![\w/])\./(vlmload|vlmmock)\b", path)
            self.assertNotRegex(text, r"\bbuild-[a-z]+/vlm(load|mock)\b", path)

    def test_relative_links_point_at_files(self):
        for path in markdown_files():
            text = read(path)
            text = re.sub(r"```.*?```", "", text, flags=re.S)
            links = re.findall(r"\]\(([^)\s]+)\)", text)
            self.assertTrue(links or path != "README.md")
            for link in links:
                if re.match(r"[a-z]+:", link):
                    continue
                target, _, anchor = link.partition("#")
                full = os.path.normpath(os.path.join(ROOT, os.path.dirname(path), target)
                                        if target else os.path.join(ROOT, path))
                self.assertTrue(os.path.exists(full), "%s: %s points nowhere" % (path, link))
                if anchor:
                    self.assertTrue(full.endswith(".md"), "%s: %s" % (path, link))
                    with open(full) as f:
                        self.assertIn(anchor, anchors(f.read()),
                                      "%s: %s has no such heading" % (path, link))


class OptionsTest(unittest.TestCase):
    def test_options_table_matches_help(self):
        m = re.search(r"<!-- options:begin -->\n(.*?)<!-- options:end -->",
                      read("docs/options.md"), re.S)
        self.assertIsNotNone(m, "docs/options.md has no option table")
        generated = subprocess.run([DOCS, "markdown"], capture_output=True, timeout=30)
        self.assertEqual(generated.returncode, 0)
        self.assertEqual(m.group(1), generated.stdout.decode(),
                         "docs/options.md is stale: regenerate with tools/update-readme.sh")
        table_flags = set(re.findall(r"^\| `(--[a-z0-9-]+)", m.group(1), re.M))
        self.assertEqual(table_flags, help_flags())

    def test_update_script_rewrites_the_table(self):
        if not BUILD:
            self.skipTest("VLMLOAD_BUILD not set")
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(ROOT, "tools"), os.path.join(tmp, "tools"))
            os.mkdir(os.path.join(tmp, "docs"))
            stale = read("docs/options.md").replace("| `--rate R` |", "| `--rate STALE` |")
            with open(os.path.join(tmp, "docs", "options.md"), "w") as f:
                f.write(stale)
            # The script builds the docs tool in the build directory given, then rewrites.
            p = subprocess.run([os.path.join(tmp, "tools", "update-readme.sh"), BUILD],
                               capture_output=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(tmp, "docs", "options.md")) as f:
                self.assertEqual(f.read(), read("docs/options.md"))


class ManTest(unittest.TestCase):
    def test_man_page_lists_every_option(self):
        page = man_page()
        self.assertTrue(page.startswith(".TH VLMLOAD 1"))
        for flag in help_flags():
            self.assertIn(flag.replace("-", "\\-"), page)
        if BUILD:
            with open(os.path.join(BUILD, "vlmload.1")) as f:
                self.assertEqual(f.read(), page)

    def test_man_page_documents_the_subcommands(self):
        secs = sections(man_page())
        for sub in ("analyze", "merge"):
            body = secs.get(sub.upper())
            self.assertIsNotNone(body, "no %s section" % sub.upper())
            self.assertIn("vlmload %s" % sub, body)
            flags = help_flags(sub)
            self.assertGreater(len(flags), 1)
            for flag in flags:
                self.assertIn("\\fB" + flag.replace("-", "\\-"), body.replace("\\-h, ", ""),
                              "%s: %s" % (sub, flag))
        # The text is --help's own: a sentence of each help appears in the page.
        self.assertIn("post\\-flush floor", secs["ANALYZE"])
        self.assertIn("wall\\-clock second", secs["MERGE"])

    def test_no_heading_repeats(self):
        pages = [man_page()]
        if BUILD:
            with open(os.path.join(BUILD, "vlmmock.1")) as f:
                pages.append(f.read())
        for page in pages:
            heads = re.findall(r"^\.SH (.*)$", page, re.M)
            self.assertEqual(len(heads), len(set(heads)), heads)
            for name, body in sections(page).items():
                subs = re.findall(r"^\.SS (.*)$", body, re.M)
                self.assertEqual(len(subs), len(set(subs)), (name, subs))

    def test_mock_page_is_its_help(self):
        if not BUILD:
            self.skipTest("VLMLOAD_BUILD not set")
        with open(os.path.join(BUILD, "vlmmock.1")) as f:
            page = f.read()
        self.assertTrue(page.startswith(".TH VLMMOCK 1"))
        secs = sections(page)
        for s in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES", "SEE ALSO"):
            self.assertIn(s, secs)
        mock_help = subprocess.run([harness.VLMMOCK, "--help"], capture_output=True,
                                   timeout=30).stdout.decode()
        for flag in set(re.findall(r"^\s+(?:-[a-zA-Z], )?(--[a-z0-9-]+)", mock_help, re.M)):
            self.assertIn("\\fB" + flag.replace("-", "\\-"),
                          re.sub(r"\\-[a-zA-Z], ", "", secs["OPTIONS"]), flag)

    def test_installed_pages_and_see_also(self):
        if not BUILD or not shutil.which("cmake"):
            self.skipTest("needs VLMLOAD_BUILD and cmake")
        with tempfile.TemporaryDirectory() as prefix:
            p = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix],
                               capture_output=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            man1 = os.path.join(prefix, "share", "man", "man1")
            installed = set(os.listdir(man1))
            self.assertIn("vlmload.1", installed)
            self.assertTrue(os.path.exists(os.path.join(
                prefix, "share", "bash-completion", "completions", "vlmload")))
            for name in installed:
                with open(os.path.join(man1, name)) as f:
                    see = sections(f.read()).get("SEE ALSO", "")
                for ref, sec in re.findall(r"^\.BR (\S+) \((\d)\)", see, re.M):
                    self.assertEqual(sec, "1")
                    self.assertIn(ref + ".1", installed, "%s names %s(1)" % (name, ref))
                if shutil.which("man"):
                    r = subprocess.run(["man", "--warnings", "-l", os.path.join(man1, name)],
                                       capture_output=True, timeout=60,
                                       env=dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8"))
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(r.stderr.decode(), "", name)
                    self.assertIn(b"SEE ALSO", r.stdout)


class CompletionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.script = subprocess.run([DOCS, "completion"], capture_output=True,
                                    timeout=30).stdout.decode()

    def complete(self, *words):
        """What the completion offers for the command line words, the last being completed."""
        prog = self.script + '\nCOMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _vlmload\n' \
            'printf "%s\\n" "${COMPREPLY[@]}"\n'
        p = subprocess.run(["bash", "-c", prog, "bash", *words], capture_output=True,
                           timeout=30, cwd=ROOT)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [w for w in p.stdout.decode().splitlines() if w]

    def test_completion_script(self):
        p = subprocess.run(["bash", "-n"], input=self.script.encode(), capture_output=True,
                           timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        for flag in help_flags():
            self.assertIn(flag, self.script)
        if BUILD:
            with open(os.path.join(BUILD, "vlmload.bash")) as f:
                self.assertEqual(f.read(), self.script)

    def test_values_after_options_with_a_fixed_set(self):
        self.assertEqual(self.complete("vlmload", "--image-format", ""), ["png", "jpeg", "mixed"])
        self.assertEqual(self.complete("vlmload", "--timeline-format", ""), ["csv", "jsonl"])
        self.assertEqual(self.complete("vlmload", "--image-format", "j"), ["jpeg"])
        # Every option the script gives values for takes each of them.
        arms = re.findall(r"^    (--[a-z-]+)\) COMPREPLY=\(\$\(compgen -W '([^']*)'",
                          self.script, re.M)
        self.assertGreaterEqual(len(arms), 10)
        for opt, values in arms:
            self.assertEqual(self.complete("vlmload", opt, ""), values.split())
            for v in values.split():
                p = subprocess.run([harness.VLMLOAD, opt, v + ("1" if v.endswith(":") else ""),
                                    "--dry-run", "--model", "m", "--requests", "5"],
                                   capture_output=True, timeout=60, cwd=ROOT)
                self.assertEqual(p.returncode, 0, "%s %s: %s" % (opt, v, p.stderr.decode()))

    def test_no_option_names_where_a_value_goes(self):
        table = read("docs/options.md")
        takes_value = re.findall(r"^\| `(--[a-z0-9-]+) ", table, re.M)
        self.assertIn("--rate", takes_value)
        for opt in takes_value:
            offered = self.complete("vlmload", opt, "")
            self.assertFalse([w for w in offered if w.startswith("--")], opt)

    def test_subcommands(self):
        first = self.complete("vlmload", "")
        self.assertIn("analyze", first)
        self.assertIn("merge", first)
        self.assertEqual(self.complete("vlmload", "an"), ["analyze"])
        self.assertEqual(set(self.complete("vlmload", "analyze", "x.csv", "--")),
                         help_flags("analyze"))
        self.assertEqual(set(self.complete("vlmload", "merge", "o.json", "--")),
                         help_flags("merge"))
        self.assertEqual(self.complete("vlmload", "analyze", "x.csv", "--x", ""),
                         ["requests", "images"])
        self.assertIn("README.md", self.complete("vlmload", "analyze", "--external", "READ"))
        self.assertNotIn("analyze", self.complete("vlmload", "--rate", "10", ""))



class ExperimentsTest(unittest.TestCase):
    """docs/experiments/: each analysis is what `vlmload analyze` says of its timeline today."""

    def analyze(self, timeline, out):
        p = subprocess.run([harness.VLMLOAD, "analyze", timeline, "--output", out],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            return {s["series"]: s for s in json.load(f)["series"]}

    def test_analyses_match_their_timelines(self):
        d = os.path.join(ROOT, "docs", "experiments")
        cells = sorted(n[:-len("-timeline.csv")] for n in os.listdir(d)
                       if n.endswith("-timeline.csv"))
        self.assertGreaterEqual(len(cells), 8)
        with tempfile.TemporaryDirectory() as tmp:
            for cell in cells:
                now = self.analyze(os.path.join("docs", "experiments", cell + "-timeline.csv"),
                                   os.path.join(tmp, cell + ".json"))
                with open(os.path.join(d, cell + "-analysis.json")) as f:
                    kept = {s["series"]: s for s in json.load(f)["series"]}
                self.assertEqual(set(now), set(kept), cell)
                for name, s in now.items():
                    self.assertEqual(s["verdict"], kept[name]["verdict"], (cell, name, s["reason"]))
                    self.assertEqual(s["reason"], kept[name]["reason"], (cell, name))

    def test_text_only_resident_set_levels_off(self):
        """The GPU text-only cell's RSS rises in steps for about 900 requests, then holds: the
        verdict says it levelled off, not that it is flat or that nothing can be said."""
        with tempfile.TemporaryDirectory() as tmp:
            now = self.analyze(os.path.join("docs", "experiments", "text-only-timeline.csv"),
                               os.path.join(tmp, "t.json"))
        rss = now["rss_mb.server"]
        self.assertEqual(rss["verdict"], "levels-off", rss["reason"])
        self.assertEqual(rss["levels_off"]["blocks"], 16)
        self.assertIn("levels off at about", rss["reason"])

    def test_flush_cell_floor_grows_at_every_step(self):
        """The GPU flush-every-50 cell completed its 3000 requests, and its RSS floor, which slows
        as it rises and so fits no one line, is judged on its steps: it rose at every one."""
        path = os.path.join("docs", "experiments", "flush-every-50-timeline.csv")
        with open(os.path.join(ROOT, path)) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(int(rows[-1]["completed_total"]), 3000)
        self.assertEqual(int(rows[-1]["ok_total"]), 3000)
        with tempfile.TemporaryDirectory() as tmp:
            now = self.analyze(path, os.path.join(tmp, "f.json"))
        rss = now["rss_mb.server"]
        self.assertEqual(rss["basis"], "floor")
        self.assertEqual(rss["verdict"], "grows", rss["reason"])
        self.assertLess(rss["floor"]["fit"]["n_eff"], 5)
        self.assertEqual(rss["steps"]["rose"], rss["steps"]["moved"])
        self.assertGreaterEqual(rss["steps"]["moved"], 50)
        self.assertIn("it slows", rss["reason"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
