#!/usr/bin/env bash
# check-under-load.sh - `make check` while the machine is busy: K busy loops
# per core (default 2) run beside it, N times in a row (default 3); stops at
# the first failing run. The suite must hold under load (docs/user-guide.md,
# "Testing"): a test that fails here is a bug, in the test or in tbon.
# Usage: scripts/check-under-load.sh [--loops K] [--runs N] [-- MAKE_ARGS...]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
loops=2 runs=3
while [ $# -gt 0 ]; do
    case "$1" in
        --loops) loops=${2:?--loops needs a number}; shift 2 ;;
        --runs) runs=${2:?--runs needs a number}; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "check-under-load.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$loops$runs" in *[!0-9]*) echo "check-under-load.sh: --loops and --runs take numbers" >&2; exit 2 ;; esac
pids=()
stop_load() { [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; pids=(); }
trap stop_load EXIT INT TERM
n=$(( loops * $(nproc) ))
for _ in $(seq "$n"); do
    ( while :; do :; done ) &
    pids+=($!)
done
echo "check-under-load: $n busy loops ($loops per core) beside make check, $runs runs"
for r in $(seq "$runs"); do
    start=$(date +%s)
    if make check "$@" >"/tmp/check-under-load.$r.log" 2>&1; then
        echo "run $r: $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "/tmp/check-under-load.$r.log" | tail -n1) in $(( $(date +%s) - start )) s"
    else
        echo "run $r FAILED ($(grep -E '^[0-9]+ passed, [0-9]+ failed$' "/tmp/check-under-load.$r.log" | tail -n1)); log: /tmp/check-under-load.$r.log"
        grep -E '^FAIL' "/tmp/check-under-load.$r.log" | head -n 20
        exit 1
    fi
done
echo "check-under-load: $runs of $runs passed"
