"""What a person sees: vlmload in a real 80-column pseudo-terminal (tmux), read off the screen."""
import os
import re
import shutil
import subprocess
import time
import unittest

import harness

PROGRESS = re.compile(r"^\d+s  .*req/s  ok \d+  err \d+")


class Terminal:
    """A tmux session of its own (its own server socket) running one command at a given size."""

    def __init__(self, cmd, width=80, height=30):
        self.sock = "vlmload-test-%d" % os.getpid()
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)
        subprocess.run(["tmux", "-L", self.sock, "new-session", "-d", "-x", str(width), "-y",
                        str(height), "-s", "t", " ".join(cmd) + "; sleep 60"], check=True,
                       env=dict(os.environ, TERM="xterm"))

    def screen(self):
        out = subprocess.run(["tmux", "-L", self.sock, "capture-pane", "-p", "-t", "t"],
                             capture_output=True, check=True)
        return out.stdout.decode().split("\n")

    def close(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)


@unittest.skipUnless(shutil.which("tmux"),
                     "tmux is not installed (tools/deps.sh --test installs it)")
class TerminalTest(harness.MockTestCase):
    def test_progress_line_fits_80_columns_with_flushes(self):
        m = self.mock("--ttft", "5ms", "--itl", "1ms")
        term = Terminal([harness.VLMLOAD, "--url", m.url, "--rate", "50", "--duration", "8s",
                         "--flush-every", "20", "--stream", "--images",
                         os.path.join(os.path.dirname(harness.__file__), "..", "..", "corpus")])
        try:
            screens = []
            deadline = time.monotonic() + 6 * harness.SLACK
            while time.monotonic() < deadline:
                time.sleep(1)
                screens.append(term.screen())
        finally:
            term.close()
        # Screens while the load runs (a flush has happened, no summary yet): the banner, then one
        # progress line and nothing under it: a line wider than the screen would leave a wrapped
        # piece behind at every redraw.
        running = [s for s in screens if any(PROGRESS.match(l) and "flush" in l for l in s)
                   and not any("stopped by" in l for l in s)]
        self.assertGreaterEqual(len(running), 2, "\n".join(screens[-1]))
        for s in running:
            text = [l for l in s if l.strip()]
            banner = [i for i, l in enumerate(text) if l.startswith("vlmload: http://")]
            self.assertEqual(len(banner), 1, "\n".join(s))
            progress = [l for l in text if PROGRESS.match(l)]
            self.assertEqual(len(progress), 1, "\n".join(s))
            self.assertEqual(text[-1], progress[0], "\n".join(s))  # nothing under it
            line = progress[0].rstrip()
            self.assertLess(len(line), 80)
            for label in ("req/s", "ok ", "err ", "p50 ", "TTFT p50 ", "flush"):
                self.assertIn(label, line)


if __name__ == "__main__":
    harness.main()
