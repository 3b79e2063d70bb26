#!/bin/sh
# deps.sh - install the Debian packages tbon builds with, if any are missing.
# As root it runs apt-get; otherwise it prints the command to run.
set -u

# libdw-dev: tbon_stat's stack walker; elfutils (eu-stack) and gdb: what its
# tests and benchmark compare it with; Open MPI (mpicc, mpirun): the hung MPI
# job tbon_stat's test samples. libsodium-dev: the handshake's HMAC-SHA256,
# compare and random nonces; libjansson-dev: the JSON that tbon_frontend and
# tbon_stat write; graphviz (dot): tbon_stat's SVG drawings of its trees.
# valgrind: bench/instr.sh counts instructions per wave with its callgrind.
# iptables: the cluster test of a link that drops every packet (host_firewall).
# python3-cffi, python3-pytest, python3-venv, python3-setuptools: the Python
# package (python/), its tests and its pip install into a virtual environment.
# chromium: tbon_stat's viewer page (<exe>.html) is checked and timed in it,
# headless (tests/scripts/stat_view_check.py).
PKGS="make gcc pkg-config procps iptables valgrind libxml2-dev zlib1g-dev libsodium-dev libjansson-dev clang libclang-rt-14-dev libdw-dev elfutils gdb openmpi-bin libopenmpi-dev graphviz python3-cffi python3-pytest python3-venv python3-setuptools chromium"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done

if [ -z "$missing" ]; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps.sh: missing packages:$missing (no apt-get here: install them by hand)" >&2
    exit 1
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "deps.sh: missing packages:$missing" >&2
    echo "deps.sh: run: sudo apt-get update && sudo apt-get install -y$missing" >&2
    exit 1
fi

echo "deps.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null &&
    apt-get install -y -q --no-install-recommends $missing >/dev/null || {
    echo "deps.sh: apt-get install$missing failed" >&2
    exit 1
}
