#!/usr/bin/env bash
# test_python.sh - the Python package's tests (python/tests, pytest) on the
# build named by $TBON_BUILD_DIR: packets, Python front-ends and back-ends
# on real trees beside C ones, asyncio, a plug-in loaded where libtbon.so
# is RTLD_LOCAL, pip install into a fresh virtual environment, the README's
# example tool. Debian's python3 (/usr/bin/python3, with python3-cffi and
# python3-pytest from scripts/deps.sh), or $TBON_PYTHON.
set -u
cd "$(dirname "$0")/../.."
py=${TBON_PYTHON:-/usr/bin/python3}
build=$(cd "${TBON_BUILD_DIR:-build}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$py" -c 'import cffi, pytest' 2>"$tmp/err"; then
    echo "  FAIL python_package (no cffi or pytest for $py: scripts/deps.sh installs them)"
    sed 's/^/       /' "$tmp/err"
    echo "test_python: 0 passed, 1 failed"
    exit 1
fi
export TBON_BUILD_DIR=$build PYTHONDONTWRITEBYTECODE=1
# (TMPDIR for the virtual environment and the trees' files: removed here)
TMPDIR=$tmp timeout -k 5 500 "$py" -m pytest -p no:cacheprovider -v --basetemp "$tmp/pt" \
    python/tests >"$tmp/out" 2>&1
rc=$?
pass=$(grep -c ' PASSED' "$tmp/out")
fail=$(grep -cE ' (FAILED|ERROR)' "$tmp/out")
sed -n 's/^python\/tests\/\([^ ]*\) PASSED.*/  ok   \1/p' "$tmp/out"
if [ "$rc" -ne 0 ]; then
    [ "$fail" -eq 0 ] && fail=1
    echo "  FAIL pytest (exit $rc):"
    sed 's/^/       /' "$tmp/out" | tail -60
fi
echo "test_python: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
