"""An asyncio front-end: the loop watches the network's descriptor, no
thread of its own; waves pipelined while a commnode is killed, every
result exact; the close seen by every waiter."""
import asyncio
import os
import signal
import sys

import tbon
import tbon.aio
from conftest import C_BE, PY_BE, RECV_S, pid_of, topology, wave_sum


def test_asyncio_front_end_with_a_commnode_killed(tmp_path):
    topo, ranks = topology(tmp_path, "4x4")
    waves = 300

    async def main(net):
        anet = tbon.aio.AsyncNetwork(net)
        s = net.stream(up=tbon.FILTER_SUM)
        victim = pid_of("tbon_commnode", 2)
        assert victim
        sent = got = 0
        while got < waves:
            while sent < waves and sent - got < 16:
                s.send(100, "%ud", sent)
                sent += 1
                if sent == waves // 3:
                    os.kill(victim, signal.SIGKILL)
            p = await asyncio.wait_for(anet.recv(), RECV_S)
            (v,) = p.values
            assert v == wave_sum(p.covered, got)
            assert sorted(p.covered + p.missing) == ranks
            got += 1
        names = set()
        while "adopted" not in names:
            names.add((await asyncio.wait_for(anet.next_event(), RECV_S)).name)
        assert "failed" in names
        anet.detach()
        return got

    with tbon.FrontEnd(topo, C_BE) as net:
        assert asyncio.run(main(net)) == waves


def test_asyncio_back_ends_answer_and_see_the_close(tmp_path):
    topo, ranks = topology(tmp_path, "2x3")
    marks = tmp_path / "marks"
    marks.mkdir()
    with tbon.FrontEnd(topo, sys.executable, [PY_BE, "--aio", str(marks)]) as net:
        s = net.stream(up=tbon.FILTER_SUM)
        for w in range(50):
            s.send(100, "%ud", w)
        for w in range(50):
            assert net.recv(RECV_S).values == (wave_sum(ranks, w),)
    # the close reached each back-end's loop through its descriptor
    assert sorted(os.listdir(marks)) == sorted("closed.%d" % r for r in ranks)
