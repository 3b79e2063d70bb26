"""pip install from the checkout works: into a fresh virtual environment
(Debian's cffi seen through --system-site-packages, nothing fetched), the
installed package - with its own copy of libtbon.so - runs a tree from
outside the checkout."""
import os
import shutil
import subprocess
import sys

from conftest import BUILD, C_BE, REPO, topology


def test_pip_install_from_the_checkout(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=300)
    py = str(venv / "bin" / "python")
    env = dict(os.environ, TBON_BUILD_DIR=BUILD, PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    # (from a copy: pip builds in the source directory, and the checkout
    # stays as it is)
    src = tmp_path / "src"
    shutil.copytree(os.path.join(REPO, "python"), str(src),
                    ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        str(src)], env=env, capture_output=True,
                       text=True, timeout=600, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    topo, ranks = topology(tmp_path, "1x3")
    script = tmp_path / "tool.py"
    script.write_text(
        "import sys, tbon\n"
        "print(tbon.library_path)\n"
        "with tbon.FrontEnd(sys.argv[1], sys.argv[2]) as net:\n"
        "    s = net.stream(up=tbon.FILTER_SUM)\n"
        "    s.send(100, '%ud', 4)\n"
        "    print(net.recv(30).values[0])\n")
    env.pop("TBON_BUILD_DIR")
    r = subprocess.run([py, str(script), topo, C_BE], env=env, capture_output=True, text=True,
                       timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    lib, total = r.stdout.split()
    assert lib.startswith(str(venv)), lib          # the installed copy, not the checkout's
    assert int(total) == sum(x * 1000 + 4 for x in ranks)
