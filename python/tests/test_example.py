"""The README's Python tool (python/examples/histogram_fe.py): its total is
the number of files under the directory, each counted once by one
back-end."""
import os
import subprocess
import sys

from conftest import HERE, REPO, topology


def test_histogram_example(tmp_path):
    data = tmp_path / "data"
    for d in range(5):
        (data / str(d)).mkdir(parents=True)
        for k in range(d * 7 + 3):
            (data / str(d) / ("f%d" % k)).write_bytes(b"x" * (k * 97))
    nfiles = sum(len(f) for _, _, f in os.walk(data))
    topo, _ = topology(tmp_path, "2x3")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    r = subprocess.run([sys.executable, os.path.join(REPO, "python", "examples",
                                                     "histogram_fe.py"), topo, str(data), "16"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("%d files under %s, by size (from 6 back-ends):" %
                               (nfiles, data)), r.stdout
