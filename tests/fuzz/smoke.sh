#!/usr/bin/env bash
# smoke.sh - run every libFuzzer harness in DIR for FUZZ_SECONDS (default 20) each.
# The committed corpus in tests/fuzz/corpus/NAME/ is read (so every past crash
# input is replayed); new inputs go to a scratch directory, not into the repo.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/fuzz}
secs=${FUZZ_SECONDS:-20}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for f in "$dir"/fuzz_*; do
    [ -x "$f" ] || continue
    name=${f##*/fuzz_}
    mkdir -p "$scratch/$name" tests/fuzz/corpus/"$name"
    echo "== fuzz $name for ${secs}s"
    if ! "$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
            -artifact_prefix="$scratch/$name-" -print_final_stats=0 \
            "$scratch/$name" tests/fuzz/corpus/"$name" >"$scratch/$name.log" 2>&1; then
        echo "fuzz $name FAILED; the end of its log:"
        tail -n 40 "$scratch/$name.log"
        ls "$scratch/$name"-* 2>/dev/null | while read -r a; do
            cp "$a" tests/fuzz/ && echo "crash input saved as tests/fuzz/${a##*/}"
        done
        status=1
    else
        grep -E '^(#[0-9]+.*DONE|Done)' "$scratch/$name.log" | tail -n 1 || true
    fi
done
exit $status
