"""The README's option table, the man page and --help all come from one option table; check
that the copies committed or generated agree with it."""
import os
import re
import subprocess
import unittest

import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.environ.get("VLMLOAD_DOCS", "vlmload-docs")
BUILD = os.environ.get("VLMLOAD_BUILD", "")


def help_flags():
    out = subprocess.run([harness.VLMLOAD, "--help"], capture_output=True, timeout=30).stdout
    return set(re.findall(r"^\s+(--[a-z0-9-]+)", out.decode(), re.M))


class DocsTest(unittest.TestCase):
    def test_readme_table_matches_help(self):
        with open(os.path.join(ROOT, "README.md")) as f:
            readme = f.read()
        m = re.search(r"<!-- options:begin -->\n(.*?)<!-- options:end -->", readme, re.S)
        self.assertIsNotNone(m, "README has no option table")
        generated = subprocess.run([DOCS, "markdown"], capture_output=True, timeout=30)
        self.assertEqual(generated.returncode, 0)
        self.assertEqual(m.group(1), generated.stdout.decode(),
                         "README option table is stale: regenerate with vlmload-docs markdown")
        table_flags = set(re.findall(r"^\| `(--[a-z0-9-]+)", m.group(1), re.M))
        self.assertEqual(table_flags, help_flags())

    def test_man_page_lists_every_option(self):
        page = subprocess.run([DOCS, "man"], capture_output=True, timeout=30).stdout.decode()
        self.assertTrue(page.startswith(".TH VLMLOAD 1"))
        for flag in help_flags():
            self.assertIn(flag.replace("-", "\\-"), page)
        if BUILD:
            with open(os.path.join(BUILD, "vlmload.1")) as f:
                self.assertEqual(f.read(), page)

    def test_completion_script(self):
        script = subprocess.run([DOCS, "completion"], capture_output=True, timeout=30).stdout
        p = subprocess.run(["bash", "-n"], input=script, capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        for flag in help_flags():
            self.assertIn(flag.encode(), script)


if __name__ == "__main__":
    unittest.main(verbosity=2)
