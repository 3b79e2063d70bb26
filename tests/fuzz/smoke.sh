#!/usr/bin/env bash
# smoke.sh - run every libFuzzer harness in DIR for FUZZ_SECONDS (default 20) each,
# FUZZ_JOBS of them at once (default 2: each is one single-threaded process).
# The committed corpus in tests/fuzz/corpus/NAME/ is read (so every past crash
# input is replayed); new inputs go to a scratch directory, not into the repo.
# Each harness's result is printed when it ends, its log's end if it failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/fuzz}
secs=${FUZZ_SECONDS:-20}
jobs=${FUZZ_JOBS:-2}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0

fuzz_one() {    # NAME PROGRAM: its exit status in $scratch/NAME.rc
    local name=$1 f=$2 rc=0
    "$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$scratch/$name-" -print_final_stats=0 \
        "$scratch/$name" tests/fuzz/corpus/"$name" >"$scratch/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$scratch/$name.rc"
}

report() {      # NAME: what fuzz_one left; status 1 if it failed
    local name=$1
    echo "== fuzz $name for ${secs}s"
    if [ "$(cat "$scratch/$name.rc")" != 0 ]; then
        echo "fuzz $name FAILED; the end of its log:"
        tail -n 40 "$scratch/$name.log"
        for a in "$scratch/$name"-*; do
            [ -e "$a" ] || continue
            cp "$a" tests/fuzz/ && echo "crash input saved as tests/fuzz/${a##*/}"
        done
        return 1
    fi
    grep -E '^(#[0-9]+.*DONE|Done)' "$scratch/$name.log" | tail -n 1 || true
}

declare -A running=()     # pid -> name
for f in "$dir"/fuzz_*; do
    [ -x "$f" ] || continue
    name=${f##*/fuzz_}
    mkdir -p "$scratch/$name" tests/fuzz/corpus/"$name"
    if [ "${#running[@]}" -ge "$jobs" ]; then
        wait -n -p pid || true
        report "${running[$pid]}" || status=1
        unset "running[$pid]"
    fi
    fuzz_one "$name" "$f" &
    running[$!]=$name
done
while [ "${#running[@]}" -gt 0 ]; do
    wait -n -p pid || true
    report "${running[$pid]}" || status=1
    unset "running[$pid]"
done
exit $status
