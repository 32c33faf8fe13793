"""A process tree with known names and allocations, for --monitor-tree: the root forks two
workers of one name (64 and 8 MiB; the second forks a grandchild of 16 MiB), one that exits
after EXIT_S seconds, one started after LATE_S seconds (32 MiB), and starts a program whose
command line names it longer than comm holds (as setproctitle does). It writes READY once the
first ones hold their memory, and each child ends when the root is gone."""
import ctypes
import os
import subprocess
import sys
import time

MiB = 1 << 20
libc = ctypes.CDLL(None, use_errno=True)


def name(n):
    libc.prctl(15, ctypes.c_char_p(n.encode()), 0, 0, 0)  # PR_SET_NAME


def hold(n_mib, until=None):
    """Holds n_mib MiB, every page written, until the root exits (or until, a monotonic time)."""
    buf = b"\x01" * (n_mib * MiB)
    root = os.getppid()
    while os.getppid() == root and (until is None or time.monotonic() < until):
        time.sleep(0.05)
    del buf


def child(label, n_mib, until=None, grand=None):
    pid = os.fork()
    if pid == 0:
        name(label)
        if grand:
            child(*grand)
        hold(n_mib, until)
        os._exit(0)
    time.sleep(0.05)  # a start time of its own (clock ticks): the order of first sight is sure
    return pid


if __name__ == "__main__":
    ready, exit_s, late_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    name("treeroot")
    child("tree-worker", 64)
    child("tree-worker", 8, grand=("tree-grand", 16))
    code = ("import ctypes, os, time; ctypes.CDLL(None).prctl(15, b'sglang::scheduler_TP0', 0, 0,"
            " 0); r = os.getppid()\nwhile os.getppid() == r: time.sleep(0.05)")
    sched = subprocess.Popen(["sglang::scheduler_TP0", "-c", code], executable=sys.executable)
    # Ready once it has renamed itself: until then it reads as the interpreter's name, and a busy
    # machine may take longer than any fixed wait to start the interpreter.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open("/proc/%d/comm" % sched.pid) as f:
            if f.read().startswith("sglang"):
                break
        time.sleep(0.01)
    child("tree-short", 4, until=time.monotonic() + exit_s)
    time.sleep(0.2)
    with open(ready + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(ready + ".tmp", ready)
    time.sleep(late_s)
    child("tree-late", 32)
    while True:
        time.sleep(1)
