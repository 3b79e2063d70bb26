#!/usr/bin/env bash
# demo.sh - what `make demo` runs: a readable tour of a running tbon tree.
# Usage: scripts/demo.sh [BUILD_DIR]   (default build; `make demo` builds it first)
#
# Every step starts a real tree on this machine (topologies/local-4x4.top: the
# front-end, 4 commnodes, 16 back-ends), sends request waves and prints what
# comes back. A step fails if its program fails, if a result is not the one
# expected, or if any process of the tree is still running after it; the
# script then stops with a non-zero status. No process is left behind: every
# process started here carries a marker in its environment, and whatever
# still carries it at exit is killed (by pid) and reported.
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build}
fe=$b/bin/tbon_frontend
be=$b/bin/tbon_example_be
ex=$b/examples/integer_addition
top=topologies/local-4x4.top
step_timeout=${TBON_DEMO_TIMEOUT:-60}     # seconds per step, a safety net

for f in "$fe" "$be" "$b/bin/tbon_commnode" "$b/bin/tbon_topgen" "$ex/fe" "$ex/be" "$ex/filter.so"; do
    if [ ! -e "$f" ]; then
        echo "demo: $f is missing; run 'make B=$b' first (or 'make demo')" >&2
        exit 1
    fi
done

tmp=$(mktemp -d)
mark=tbon-demo-$$-$RANDOM
export TBON_DEMO_MARK=$mark   # inherited by the front-end and everything it starts

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
note() { printf '   %s\n' "$@"; }

# The pids of tree processes (tbon_*, or the example's fe and be) that carry
# this run's marker.
ours() {
    local d pid comm
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        comm=$(cat "$d/comm" 2>/dev/null) || continue
        case "$comm" in tbon_*|fe|be) ;; *) continue ;; esac
        if tr '\0' '\n' 2>/dev/null <"$d/environ" | grep -qxF "TBON_DEMO_MARK=$mark"; then
            echo "$pid"
        fi
    done
}

# Wait up to 3 s for this run's processes to be gone; if some are not, name
# them, kill them and return 1.
no_leftovers() {
    local left pid
    for _ in $(seq 30); do
        left=$(ours)
        [ -z "$left" ] && return 0
        sleep 0.1
    done
    echo "demo: processes left behind:" >&2
    for pid in $left; do
        echo "  $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" >&2
        kill -9 "$pid" 2>/dev/null || true
    done
    return 1
}

cleanup() {
    local rc=$?
    no_leftovers || rc=1
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run CMD...: show the command, run it (bounded in time), show and keep its
# output in $tmp/out (its stderr only if it fails); fail the demo if it fails
# or leaves processes behind.
run() {
    printf '$ %s\n' "$*"
    local rc=0
    timeout -k 5 "$step_timeout" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    sed 's/^/  /' "$tmp/out"
    if [ "$rc" -ne 0 ]; then
        sed 's/^/  (stderr) /' "$tmp/err" >&2
        echo "demo: the command above failed (exit status $rc)" >&2
        exit 1
    fi
    no_leftovers || exit 1
}

# expect TEXT: the last command's stdout must be exactly TEXT.
expect() {
    if [ "$(cat "$tmp/out")" != "$1" ]; then
        echo "demo: unexpected output; wanted:" >&2
        printf '%s\n' "$1" | sed 's/^/  /' >&2
        exit 1
    fi
}

step "The tree: a front-end, 4 commnodes and 16 back-ends, all on this machine"
cat "$top"
run "$b/bin/tbon_topgen" --check "$top"
note "Ranks are breadth-first: the front-end is 0, the commnodes 1-4, the back-ends 5-20." \
     "Each back-end (tbon_example_be) answers a request for wave w with rank + w."

step "Sum: each commnode adds up its 4 back-ends' answers, the front-end adds the 4 partial sums"
run "$fe" -t "$top" -b "$be" -w 3
expect "wave 0: sum = 200 (from 16 back-ends)
wave 1: sum = 216 (from 16 back-ends)
wave 2: sum = 232 (from 16 back-ends)"
note "5 + 6 + ... + 20 = 200; every wave adds 16. One packet per wave reaches the front-end."

step "Minimum, maximum and average of the same answers"
run "$fe" -t "$top" -b "$be" -f min -w 2
expect "wave 0: min = 5 (from 16 back-ends)
wave 1: min = 6 (from 16 back-ends)"
run "$fe" -t "$top" -b "$be" -f max -w 2
expect "wave 0: max = 20 (from 16 back-ends)
wave 1: max = 21 (from 16 back-ends)"
run "$fe" -t "$top" -b "$be" -f avg -w 2
expect "wave 0: avg = 12.5 (from 16 back-ends)
wave 1: avg = 13.5 (from 16 back-ends)"
note "avg sends (sum, count) pairs up the tree and divides only at the front-end," \
     "so the mean is exact whatever the shape of the tree."

step "Union of sets: each back-end sends {rank, rank % 4, 100 + wave}; duplicates vanish"
run "$fe" -t "$top" -b "$be" -f union -w 3
expect "wave 0: union = [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 100] (from 16 back-ends)
wave 1: union = [101] (from 16 back-ends)
wave 2: union = [102] (from 16 back-ends)"
note "union remembers every value seen on the stream and sends up only new ones, so" \
     "what the front-end receives over all waves is the union of everything sent."

step "Concatenation: each back-end sends the array {rank, wave}; the front-end gets all of them"
run "$fe" -t "$top" -b "$be" -f concat
expect "wave 0: concat = [5, 0, 6, 0, 7, 0, 8, 0, 9, 0, 10, 0, 11, 0, 12, 0, 13, 0, 14, 0, 15, 0, 16, 0, 17, 0, 18, 0, 19, 0, 20, 0] (from 16 back-ends)"

step "The null filter forwards every answer unchanged: one line per back-end"
run "$fe" -t "$top" -b "$be" -f null
[ "$(grep -c '^wave 0: back-end ' "$tmp/out")" -eq 16 ] || { echo "demo: expected 16 answers" >&2; exit 1; }

step "Machine-readable output: one JSON object per result"
run "$fe" -t "$top" -b "$be" -f sum -w 2 --json
expect '{"wave":0,"stream":1,"source":0,"format":"%ld","values":[200]}
{"wave":1,"stream":1,"source":0,"format":"%ld","values":[216]}'

step "Don't wait: back-ends answer after 0-300 ms, partial sums come up as answers arrive"
run "$fe" -t "$top" -b "$be" -s dontwait --idle 1000 -- --delay 100
note "(How the answers group into partial sums depends on timing; the sum of them is 200.)"
total=$(sed -n 's/^wave 0: sum = \([0-9]*\) .*/\1/p' "$tmp/out" | awk '{ s += $1 } END { print s + 0 }')
[ "$total" = 200 ] || { echo "demo: the partial sums add up to $total, not 200" >&2; exit 1; }

step "The integer_addition example (examples/integer_addition): your own filter plug-in"
run "$ex/fe" "$top" 3
note "fe.c, be.c and filter.c are the model to copy for a new tool; see its README.md."

step "The same plug-in from tbon_frontend: -f PATH.so:FUNCTION"
run "$fe" -t "$top" -b "$be" -f "$ex/filter.so:integer_add" -k int32 -w 2
expect "wave 0: integer_add = 200 (from 16 back-ends)
wave 1: integer_add = 216 (from 16 back-ends)"

step "Done: every tree was shut down, no process is left"
