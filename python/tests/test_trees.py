"""Python front-ends and back-ends on real trees: Python over C back-ends,
C's tbon_frontend over Python back-ends, Python over Python, with a
commnode killed; filters loaded by path into a process that loaded
libtbon.so with RTLD_LOCAL; a destroy waking a waiting thread."""
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import tbon
from conftest import BUILD, C_BE, PY_BE, RECV_S, pid_of, topology, wave_sum


def sum_waves(net, s, ranks, first, n, window=8):
    """n waves pipelined `window` deep; each result checked exactly against
    what the back-ends it holds answer (a failed one may be missing)."""
    sent = got = 0
    while got < n:
        while sent < n and sent - got < window:
            s.send(100, "%ud", first + sent)
            sent += 1
        p = net.recv(RECV_S)
        assert p.stream is s
        (v,) = p.values
        assert v == wave_sum(p.covered, first + got), (first + got, v, p.covered)
        assert sorted(p.covered + p.missing) == ranks
        got += 1


def test_python_front_end_over_c_back_ends(tmp_path):
    topo, ranks = topology(tmp_path, "2x4")
    with tbon.FrontEnd(topo, C_BE) as net:
        assert net.backends() == ranks
        assert net.rank == 0
        s = net.stream(up=tbon.FILTER_SUM)
        sum_waves(net, s, ranks, 0, 200)
        with pytest.raises(tbon.Timeout):
            net.recv(0.05)
        with pytest.raises(tbon.Error) as e:
            s.send(5, "%ud", 1)
        assert e.value.code == tbon.EINVAL and "tag 5 is reserved" in str(e.value)


def test_c_front_end_over_python_back_ends(tmp_path):
    topo, ranks = topology(tmp_path, "2x2")
    out = subprocess.run([os.path.join(BUILD, "bin", "tbon_frontend"), "-t", topo,
                          "-b", sys.executable, "-w", "4", "--json", "--", PY_BE],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert [x["wave"] for x in lines] == [0, 1, 2, 3]
    for x in lines:
        assert x["values"] == [sum(ranks) + len(ranks) * x["wave"]]


def test_python_over_python_with_a_commnode_killed(tmp_path):
    topo, ranks = topology(tmp_path, "3x3")
    with tbon.FrontEnd(topo, sys.executable, [PY_BE, "one", "two"]) as net:
        s = net.stream(up=tbon.FILTER_SUM)
        sum_waves(net, s, ranks, 0, 30)
        echo = net.stream(up=tbon.FILTER_NULL)
        echo.send(101, "%ud", 0)
        for _ in ranks:
            assert net.recv(RECV_S).values == (["one", "two"],)
        assert {n.state for n in net.status()} == {"ok"}
        assert net.log_dir and "tbon-" in net.log_dir
        victim = pid_of("tbon_commnode", 2)
        assert victim
        os.kill(victim, signal.SIGKILL)
        sum_waves(net, s, ranks, 100, 60)
        seen = []
        deadline = time.monotonic() + RECV_S
        while (seen.count("adopted") < 3 or "failed" not in seen) and \
                time.monotonic() < deadline:
            seen.append(net.next_event(RECV_S).name)
        assert seen.count("adopted") >= 3 and "failed" in seen
        st = net.status()
        assert [n.rank for n in st] == list(range(1 + 3 + 9))
        assert st[2].state == "failed" and st[2].rtt_ms is None and st[2].role == "commnode"
        adopted = [n for n in st if n.state == "adopted"]
        assert len(adopted) == 3 and all(n.parent != 2 and n.rtt_ms >= 0 for n in adopted)
        # each back-end got every request of the sum stream once, and answered it once
        perf = net.perf(RECV_S)
        assert perf.error is None and perf.silent == 0
        assert perf.answered == len(st) - 1 and not perf.nodes[2]["answered"]
        for r in ranks:
            b = perf.stream(r, s)
            assert (b["down_in_packets"], b["up_out_packets"]) == (90, 90), (r, b)
        fe = perf.stream(0, s)
        assert fe["up_out_packets"] == 90 and fe["waves"] == 90
        assert all(n["rss_bytes"] > 0 for n in perf.nodes if n["answered"])


def test_a_plugin_loads_where_libtbon_is_rtld_local(tmp_path):
    # cffi opened libtbon.so without RTLD_GLOBAL: its symbols are not in
    # the process's global scope, which a plug-in needs
    assert not hasattr(ctypes.CDLL(None), "tbon_packet_new")
    topo, ranks = topology(tmp_path, "2x2")
    with tbon.FrontEnd(topo, C_BE) as net:
        fid = net.load_filter(os.path.join(BUILD, "tests", "plugins", "filter_histo.so"),
                              "histo")
        assert fid >= 7
        s = net.stream(up=fid)
        s.send(101, "%ud", 9)            # -> {rank, rank % 3, 1000000 + wave} each
        p = net.recv(RECV_S)
        assert p.values == ([sum(ranks), sum(r % 3 for r in ranks), len(ranks) * 1000009],)
        with pytest.raises(tbon.Error) as e:
            net.load_filter(os.path.join(str(tmp_path), "none.so"), "f")
        assert e.value.code == tbon.EFILTER and "none.so" in str(e.value)


def test_close_wakes_a_thread_waiting_in_recv(tmp_path):
    topo, _ = topology(tmp_path, "1x2")
    net = tbon.FrontEnd(topo, C_BE)
    got, tid = [], []

    def wait():
        tid.append(threading.get_native_id())
        try:
            net.recv()
        except tbon.Closed as e:
            got.append(e)

    def asleep():
        try:
            with open("/proc/self/task/%d/stat" % tid[0]) as f:
                st = f.read()
            return st[st.rindex(")") + 2] == "S"
        except (OSError, IndexError):
            return False

    t = threading.Thread(target=wait)
    t.start()
    seen, deadline = 0, time.monotonic() + RECV_S
    while seen < 5 and time.monotonic() < deadline:     # asleep in its wait
        seen = seen + 1 if tid and asleep() else 0
        time.sleep(0.01)
    assert seen == 5
    t0 = time.monotonic()
    net.close()
    t.join(RECV_S)
    assert not t.is_alive() and got
    assert time.monotonic() - t0 < RECV_S


def test_bad_topology_and_options_say_what(tmp_path):
    with pytest.raises(tbon.Error) as e:
        tbon.FrontEnd(str(tmp_path / "none.top"), C_BE)
    assert "none.top" in str(e.value)
    with pytest.raises(TypeError):
        tbon.FrontEnd(str(tmp_path / "none.top"), C_BE, startup_timout_ms=5)


def test_messages_between_python_processes(tmp_path):
    topo, ranks = topology(tmp_path, "2x2")
    with tbon.FrontEnd(topo, sys.executable, [PY_BE]) as net:
        s = net.stream(up=tbon.FILTER_NULL)
        net.send_to(None, 150, "%ud", 7)            # every back-end (broadcast)
        net.send_to(ranks, 150, "%ud", 8)           # these (multicast)
        net.send_to(ranks[1], 150, "%ud", 9)        # one
        for k, v in enumerate((7, 8)):              # in the order sent, at each
            s.send(102, "%ud", k)
            assert sorted(net.recv(RECV_S).values for _ in ranks) == [(0, v)] * len(ranks)
        one = net.stream(up=tbon.FILTER_NULL, backends=[ranks[1]])
        one.send(102, "%ud", 2)
        assert net.recv(RECV_S).values == (0, 9)
        s.send(103, "%ud", 0)                       # each sends one to the FE
        got = sorted((frm, p.values) for frm, p in (net.recv_direct(RECV_S) for _ in ranks))
        assert got == [(r, (r,)) for r in ranks]
        with pytest.raises(tbon.Error) as e:
            net.send_to(1, 150, "%ud", 1)           # a commnode: refused
        assert e.value.code == tbon.EINVAL and "rank 1" in str(e.value)
