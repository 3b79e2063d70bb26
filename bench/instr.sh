#!/usr/bin/env bash
# instr.sh - the instructions one process of a tree spends per wave, counted
# by valgrind's callgrind: a back-end of a tree 1x2, and the commnode of 1x2,
# 1x8 and 1x32, each the difference between a run of bench_waves with many
# waves and one with fewer, divided by the difference (start-up and teardown
# cancel out). One process runs under valgrind, the others natively. A
# count moves between runs by up to about 5% (a turn of the loop takes one
# message or two, as the scheduler has it), where a time on this machine
# moves by half: a change in the data path's work larger than that shows
# (bench/RESULTS.md). In bench/compare.sh --parts instructions, read a
# difference under 5% as noise whatever its verdict column says.
#
# Usage: bench/instr.sh [BUILD_DIR]       (default build; already built)
# Rows "| instructions | PROCESS (TREE), per wave | N | instructions | how |"
# on stdout; what it runs on stderr. Exit 1 if a run failed, 77 without
# valgrind.
set -u
case ${1:-} in
-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
-*) echo "instr.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.." || exit 1
b=${1:-build}
case $b in /*) ;; *) b=$PWD/$b ;; esac
for x in bench/bench_waves bin/tbon_commnode bin/tbon_example_be bin/tbon_topgen; do
    [ -x "$b/$x" ] || { echo "instr.sh: $b/$x missing (make first)" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "instr.sh: valgrind not found" >&2; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The total of callgrind's counts (its "summary:" line) of file $1.
total() { sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$1"; }

# count WHO SHAPE LOW HIGH: instructions per wave of WHO (be or cn).
count() {
    local who=$1 shape=$2 lo=$3 hi=$4 n t w
    "$b/bin/tbon_topgen" --shape "$shape" >"$tmp/t.top" || return 1
    # The wrapper: the commnode, or the first back-end to start, runs under
    # callgrind (mkdir is the lock), the rest as they are.
    if [ "$who" = cn ]; then
        printf '#!/bin/sh\nexec valgrind -q --tool=callgrind --callgrind-out-file=%s/cg.%%p %s "$@"\n' \
            "$tmp" "$b/bin/tbon_commnode" >"$tmp/wrap"
    else
        printf '#!/bin/sh\nmkdir %s/lock 2>/dev/null && exec valgrind -q --tool=callgrind --callgrind-out-file=%s/cg.%%p %s "$@"\nexec %s "$@"\n' \
            "$tmp" "$tmp" "$b/bin/tbon_example_be" "$b/bin/tbon_example_be" >"$tmp/wrap"
    fi
    chmod +x "$tmp/wrap"
    for n in "$lo" "$hi"; do
        rm -rf "$tmp/lock" "$tmp"/cg.*
        echo "== $who $shape: $n waves" >&2
        if [ "$who" = cn ]; then
            TBON_COMMNODE=$tmp/wrap "$b/bench/bench_waves" --waves "$n" "$tmp/t.top" >&2 || return 1
        else
            TBON_COMMNODE=$b/bin/tbon_commnode "$b/bench/bench_waves" --waves "$n" \
                --backend "$tmp/wrap" "$tmp/t.top" >&2 || return 1
        fi
        # valgrind writes its file as the process ends, after the tree's end
        for _ in $(seq 100); do
            t=$(total "$tmp"/cg.* 2>/dev/null | head -n 1)
            [ -n "$t" ] && break
            sleep 0.1
        done
        [ -n "$t" ] || { echo "instr.sh: no callgrind output for $who $shape" >&2; return 1; }
        eval "c_$n=$t"
    done
    eval "w=\$(( (c_$hi - c_$lo) / ($hi - $lo) ))"
    local name=back-end
    [ "$who" = cn ] && name=commnode
    printf '| instructions | %s (%s), per wave | %d | instructions | callgrind, %d waves less %d, of bench_waves (SUM, wait-for-all) |\n' \
        "$name" "$shape" "$w" "$hi" "$lo"
}

status=0
count be 1x2 1000 6000 || status=1
count cn 1x2 1000 6000 || status=1
count cn 1x8 1000 6000 || status=1
count cn 1x32 300 1300 || status=1
exit $status
