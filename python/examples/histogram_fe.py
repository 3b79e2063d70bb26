#!/usr/bin/env python3
"""histogram_fe.py - a whole tbon tool in Python: a tree of back-ends
(histogram_be.py) each histograms its share of the files under a directory,
the SUM filter adds their histograms on the way up, and the front-end prints
the total. Its loop is asyncio's, woken by the network's descriptor.

usage: histogram_fe.py TOPOLOGY DIR [BINS]"""
import asyncio
import os
import sys

import tbon
import tbon.aio

TAG = tbon.FIRST_APP_TAG


async def run(topology, root, bins):
    be = os.path.join(os.path.dirname(os.path.abspath(__file__)), "histogram_be.py")
    # the back-end is a script: the tree runs it with this Python
    with tbon.FrontEnd(topology, sys.executable, [be, root]) as net:
        anet = tbon.aio.AsyncNetwork(net)
        ranks = net.backends()
        n = len(ranks)
        s = net.stream(up=tbon.FILTER_SUM)
        s.send(TAG, "%ud %aud", bins, ranks)
        p = await anet.recv()
        (counts,) = p.unpack("%aud")
        anet.detach()
    total = sum(counts)
    print("%d files under %s, by size (from %d back-ends):" % (total, root, n))
    for b, c in enumerate(counts):
        if c:
            lo = 0 if b == 0 else 2 ** b
            print("  %10d B and up  %7d  %s" % (lo, c, "#" * max(1, 50 * c // max(counts))))
    return total


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2
    bins = int(sys.argv[3]) if len(sys.argv) == 4 else 32
    asyncio.run(run(sys.argv[1], sys.argv[2], bins))
    return 0


if __name__ == "__main__":
    sys.exit(main())
