#!/usr/bin/env python3
"""histogram_be.py - the back-end of the histogram example: for each request
"%ud %aud" (bins, every back-end's rank) it makes a histogram of its own
share of the data - here the sizes of the files under a directory given on
its command line, as log2 buckets - and sends it up as "%aud" (bins counts). The SUM filter adds the histograms
of all back-ends element-wise on the way up.

Started by histogram_fe.py through the tree, never by hand."""
import math
import os
import sys

import tbon

TAG = tbon.FIRST_APP_TAG


def histogram(root, bins, me, nbe):
    """log2 buckets of the sizes of share `me` of nbe of the files."""
    counts = [0] * bins
    k = 0
    for d, _, files in os.walk(root):
        for f in sorted(files):
            k += 1
            if k % nbe != me:       # every back-end its own share
                continue
            try:
                size = os.lstat(os.path.join(d, f)).st_size
            except OSError:
                continue
            b = min(bins - 1, int(math.log2(size)) if size > 0 else 0)
            counts[b] += 1
    return counts


def main():
    with tbon.BackEnd() as be:
        root = be.argv[1] if len(be.argv) > 1 else "."
        for p in be:
            if p.tag != TAG:
                continue
            bins, ranks = p.unpack("%ud %aud")
            me = ranks.index(be.rank)
            p.stream.send(TAG, "%aud", histogram(root, bins, me, len(ranks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
