"""Shared by the Python package's tests: the build tree, topologies, and a
check that no process of a test outlives it. The trees are real: tbon's
commnodes, C and Python back-ends, over TCP on this host."""
import os
import signal
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.path.abspath(os.environ.get("TBON_BUILD_DIR") or os.path.join(REPO, "build"))
C_BE = os.path.join(BUILD, "tests", "bin", "tbon_test_be")
PY_BE = os.path.join(HERE, "py_be.py")
SLOW = bool(os.environ.get("TBON_TEST_SLOW"))
RECV_S = 60 if SLOW else 30

sys.path.insert(0, os.path.join(REPO, "python"))


def topology(tmp_path, shape):
    """A balanced tree "AxB" (the FE has A children, each B) on localhost;
    its path and the back-ends' ranks."""
    fan = [int(x) for x in shape.split("x")]
    lines, first, width, nxt = [], 0, 1, 1
    for f in fan:
        for i in range(width):
            kids = " ".join("localhost:%d" % (nxt + k) for k in range(f))
            lines.append("localhost:%d => %s ;" % (first + i, kids))
            nxt += f
        first += width
        width *= f
    path = tmp_path / ("topo-%s.top" % shape)
    path.write_text("\n".join(lines) + "\n")
    return str(path), list(range(first, first + width))


def wave_sum(ranks, w):
    """What tbon_test_be and py_be.py answer to request 100 "%ud" w: rank *
    1000 + w each, summed."""
    return sum(r * 1000 + w for r in ranks)


def descendants():
    """Our processes' descendants that are still alive (not zombies)."""
    kids, me = {}, os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rindex(")") + 2:].split()
        if rest[0] != "Z":
            kids.setdefault(int(rest[1]), []).append(int(d))
    out, todo = [], [me]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def pid_of(prefix, rank):
    """The pid of our descendant named prefix... launched as rank."""
    for pid in descendants():
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm.startswith(prefix) and b"--tbon-rank" in argv:
            i = argv.index(b"--tbon-rank")
            if i + 1 < len(argv) and argv[i + 1] == str(rank).encode():
                return pid
    return 0


@pytest.fixture(autouse=True)
def no_process_left():
    """Nothing a test started may outlive it (waits for exits already on
    their way, at most 10 s)."""
    yield
    end = time.monotonic() + 10
    left = descendants()
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = descendants()
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, "processes left: %s" % left
