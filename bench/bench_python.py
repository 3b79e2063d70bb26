#!/usr/bin/env python3
"""bench_python.py - what a front-end written in Python (the tbon package,
python/) costs beside one in C, in the same run: the wave round trip and
pipelined waves/s on an 8x8 tree of the build's tbon_example_be, rounds
alternating between the C baseline (bench_fd --recv-only: tbon_stream_recv)
and the Python front-end (FrontEnd, stream.send, stream.recv), each on a
tree of its own where it runs 7 rounds (so that neither is measured cold);
every sum checked. Medians; Markdown rows on
stdout (bench/run.sh runs it with Debian's python3).

usage: bench_python.py [BUILD_DIR]"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROUNDS = 3
INNER = 7
RTT_WAVES = 200
PIPE = 1000
WARM = 50


def topology(path, a, b):
    lines = ["localhost:0 => %s ;" % " ".join("localhost:%d" % c for c in range(1, a + 1))]
    for c in range(1, a + 1):
        kids = " ".join("localhost:%d" % (a + 1 + b * (c - 1) + k) for k in range(b))
        lines.append("localhost:%d => %s ;" % (c, kids))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return list(range(a + 1, a + 1 + a * b))


def python_round(tbon, topo, be, ranks):
    with tbon.FrontEnd(topo, be) as net:
        s = net.stream(up=tbon.FILTER_SUM)
        rank_sum, n = sum(ranks), len(ranks)
        w = 0

        def take(w):
            (v,) = s.recv(60).values
            if v != rank_sum + n * w:
                raise SystemExit("bench_python: wave %d: %d, expected %d" %
                                 (w, v, rank_sum + n * w))

        for _ in range(WARM):
            s.send(100, "%ud %s", w, "int")
            take(w)
            w += 1
        rtt, rate = [], []
        for _ in range(INNER):          # as bench_fd does: 7 rounds on one tree
            rtts = []
            for _ in range(RTT_WAVES):
                t0 = time.perf_counter()
                s.send(100, "%ud %s", w, "int")
                take(w)
                rtts.append(time.perf_counter() - t0)
                w += 1
            rtt.append(statistics.median(rtts))
            t0 = time.perf_counter()
            for i in range(PIPE):
                s.send(100, "%ud %s", w + i, "int")
            for i in range(PIPE):
                take(w + i)
            rate.append(PIPE / (time.perf_counter() - t0))
            w += PIPE
    return statistics.median(rtt) * 1e3, statistics.median(rate)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..",
                                                                               "build"))
    os.environ.setdefault("TBON_BUILD_DIR", build)
    sys.path.insert(0, os.path.join(here, "..", "python"))
    import tbon
    be = os.path.join(build, "bin", "tbon_example_be")
    with tempfile.TemporaryDirectory() as tmp:
        topo = os.path.join(tmp, "8x8.top")
        ranks = topology(topo, 8, 8)
        c_rtt, c_rate, py_rtt, py_rate = [], [], [], []
        for r in range(ROUNDS):
            out = subprocess.run([os.path.join(build, "bench", "bench_fd"), "--recv-only",
                                  "8x8"], capture_output=True, text=True, check=True)
            f = out.stdout.split()
            c_rtt.append(float(f[1]))
            c_rate.append(float(f[3]))
            a, b = python_round(tbon, topo, be, ranks)
            py_rtt.append(a)
            py_rate.append(b)
    cr, pr = statistics.median(c_rtt), statistics.median(py_rtt)
    cw, pw = statistics.median(c_rate), statistics.median(py_rate)
    print("| python | wave round trip, Python front-end | %.3f | ms | 8x8, tbon_example_be; "
          "C front-end (tbon_stream_recv) %.3f ms in the same run: ratio %.2f; medians of %d "
          "runs, each the median of %d rounds of %d waves on its own tree, alternating |" %
          (pr, cr, pr / cr, ROUNDS, INNER, RTT_WAVES))
    print("| python | pipelined waves, Python front-end | %.0f | waves/s | 8x8; C front-end "
          "%.0f waves/s in the same run: ratio %.2f; %d waves a round, %d rounds in each of %d "
          "runs |" % (pw, cw, pw / cw, PIPE, INNER, ROUNDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
