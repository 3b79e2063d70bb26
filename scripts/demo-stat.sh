#!/usr/bin/env bash
# demo-stat.sh - what `make demo-stat` runs: tbon_stat on 64 stuck processes.
# Usage: scripts/demo-stat.sh [BUILD_DIR]   (`make demo-stat` builds it first)
#
# stat/examples/stat_hang starts 64 workers stuck in a few call paths (most in
# a barrier-like wait, one in a busy loop, one in I/O). tbon_stat launches it
# (-C), samples every worker 3 times through a tree of back-ends, merges the
# traces into one call-prefix tree and prints it with its equivalence
# classes; the results stay in a temporary directory, named at the end.
# The demo fails if tbon_stat fails, if the tree lacks a task, or if any
# process is left running afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build}
stat=$b/bin/tbon_stat
hang=$b/stat/examples/stat_hang
for f in "$stat" "$hang" "$b/stat/stat_merge.so" "$b/bin/tbon_commnode"; do
    if [ ! -e "$f" ]; then
        echo "demo-stat: $f is missing; run 'make B=$b' first (or 'make demo-stat')" >&2
        exit 1
    fi
done
out=$(mktemp -d /tmp/tbon-stat-demo.XXXXXX)
mark=tbon-stat-demo-$$-$RANDOM
export TBON_DEMO_MARK=$mark   # inherited by everything tbon_stat starts
# The pids of live processes that carry this run's marker.
ours() {
    local d
    for d in /proc/[0-9]*; do
        [ "${d#/proc/}" = "$$" ] && continue
        grep -qsz "^TBON_DEMO_MARK=$mark\$" "$d/environ" 2>/dev/null &&
            ! grep -qs '^State:.*Z' "$d/status" && echo "${d#/proc/}"
    done
    return 0
}
# (stat_hang's own list of its workers goes to /dev/null: the tree says it all.)
echo "\$ $stat -n 3 -i 100 -o $out -C sh -c 'exec $hang 64 >/dev/null'"
timeout 120 "$stat" -n 3 -i 100 -o "$out" -C sh -c "exec $hang 64 >/dev/null"
txt=$(ls "$out"/*/*.2D.txt)
if ! head -n 1 "$txt" | grep -q '64:\[0-63\]'; then
    echo "demo-stat: the merged tree does not hold all 64 tasks:" >&2
    head -n 1 "$txt" >&2
    exit 1
fi
# Graphviz (scripts/deps.sh installs it) draws the trees as SVG.
if command -v dot >/dev/null 2>&1; then
    for which in 2D 3D; do
        svg=$(ls "$out"/*/*."$which".svg 2>/dev/null)
        if [ -z "$svg" ] || ! grep -q '<svg' "$svg"; then
            echo "demo-stat: dot is installed but the $which tree was not drawn" >&2
            exit 1
        fi
    done
    drawn=", svg"
else
    drawn=" (no svg: Graphviz's dot is not installed; scripts/deps.sh installs it)"
fi
left=$(ours)
for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ -z "$left" ] && break
    sleep 0.2
    left=$(ours)
done
if [ -n "$left" ]; then
    echo "demo-stat: processes left behind: $left" >&2
    exit 1
fi
echo
echo "demo-stat: done; the dot, json, text$drawn forms are in $(dirname "$txt")"
