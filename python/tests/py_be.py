#!/usr/bin/env python3
"""A back-end in Python for the tests: request 100 "%ud" w -> "%ld"
rank * 1000 + w (as tbon_test_be answers); tbon_frontend's request 100
"%ud %s" (w, kind) -> "%ld" rank + w; 101 "%ud" -> the echo of its argv; 102 -> "%ud %ud" the sender
and value of the next message it takes; 103 -> a message "%ud" rank to the
front-end.
Leaves when the front-end shuts the tree down. With --aio DIR it waits in
an asyncio loop on the network's descriptor (tbon.aio), and at the close
writes DIR/closed.RANK."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tbon  # noqa: E402


def answer(be, p):
    if p.tag == 100 and p.format == "%ud":
        (w,) = p.values
        p.stream.send(100, "%ld", be.rank * 1000 + w)
    elif p.tag == 100 and p.format == "%ud %s":
        w, kind = p.values
        p.stream.send(100, "%ld", be.rank + w)
    elif p.tag == 101:
        p.stream.send(101, "%as", be.argv[1:])
    elif p.tag == 102:                  # take one message, say who sent what
        frm, m = be.recv_direct(30)
        p.stream.send(102, "%ud %ud", frm, m.values[0])
    elif p.tag == 103:                  # a message to the front-end
        be.send_to(0, 151, "%ud", be.rank)


async def aio_loop(be, marks):
    import tbon.aio
    anet = tbon.aio.AsyncNetwork(be)
    try:
        while True:
            answer(be, await anet.recv())
    except tbon.Closed:
        with open(os.path.join(marks, "closed.%d" % be.rank), "w") as f:
            f.write("closed\n")


def main():
    with tbon.BackEnd() as be:
        if "--aio" in be.argv:
            import asyncio
            asyncio.run(aio_loop(be, be.argv[be.argv.index("--aio") + 1]))
            return 0
        for p in be:
            answer(be, p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
