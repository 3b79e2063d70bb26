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
# Then the 4 KiB pages the same processes touch per wave, code and data
# (valgrind's lackey traces every access; a wave runs from one call of a
# function the process makes once per wave to the next: tbon_net_recv in
# the back-end, tb_stream_down in the commnode; the median over the waves
# after the first 50). In a tree of hundreds of processes per core each
# process runs with cold caches and TLBs, and a wave's cost there follows
# the pages touched more than the instructions run (bench/RESULTS.md,
# "Code layout").
#
# Usage: bench/instr.sh [BUILD_DIR]       (default build; already built)
# Rows "| instructions | PROCESS (TREE), per wave | N | instructions | how |"
# and "| pages | PROCESS (TREE), per wave | N | 4 KiB pages | code C, data D |"
# on stdout; what it runs on stderr. Exit 1 if a run failed, 77 without
# valgrind.
set -u
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh
valgrind_start instr.sh bench/instr.sh "$@"

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

# pages WHO SHAPE MARKER: the pages WHO (be or cn) touches per wave.
pages() {
    local who=$1 shape=$2 sym=$3 bin=$b/bin/tbon_example_be off m
    [ "$who" = cn ] && bin=$b/bin/tbon_commnode
    off=$(nm "$bin" | awk -v s="$sym" '$3 == s && ($2 == "T" || $2 == "t") { print $1; exit }')
    [ -n "$off" ] || { echo "instr.sh: no symbol $sym in $bin" >&2; return 1; }
    # valgrind loads a position-independent program at 0x108000
    m=$(printf '%08x' $((0x108000 + 0x$off)))
    "$b/bin/tbon_topgen" --shape "$shape" >"$tmp/t.top" || return 1
    rm -rf "$tmp/lock" "$tmp"/lk.*
    printf '#!/bin/sh\nmkdir %s/lock 2>/dev/null && exec valgrind -q --tool=lackey --trace-mem=yes --log-file=%s/lk.%%p %s "$@"\nexec %s "$@"\n' \
        "$tmp" "$tmp" "$bin" "$bin" >"$tmp/wrap"
    chmod +x "$tmp/wrap"
    echo "== pages $who $shape: 250 waves" >&2
    if [ "$who" = cn ]; then
        TBON_COMMNODE=$tmp/wrap "$b/bench/bench_waves" --waves 250 "$tmp/t.top" >&2 || return 1
    else
        TBON_COMMNODE=$b/bin/tbon_commnode "$b/bench/bench_waves" --waves 250 \
            --backend "$tmp/wrap" "$tmp/t.top" >&2 || return 1
    fi
    # the trace is whole once its process (lk.PID) has ended
    local f
    for f in "$tmp"/lk.*; do
        for _ in $(seq 200); do
            [ -e "/proc/${f##*.}" ] || break
            sleep 0.1
        done
    done
    # lackey: "I  ADDR,SIZE" for an instruction, " L|S|M ADDR,SIZE" for data;
    # a page is the address less its last three hex digits.
    awk -v m="$m" '
        $1 == "I" || $1 == "L" || $1 == "S" || $1 == "M" {
            a = substr($2, 1, index($2, ",") - 1)
            if ($1 == "I" && a == m) {
                if (++w > 50) print nc, nd
                delete cp; delete dp; nc = 0; nd = 0
            }
            p = substr(a, 1, length(a) - 3)
            if ($1 == "I") { if (!(p in cp)) { cp[p] = 1; nc++ } }
            else if (!(p in dp)) { dp[p] = 1; nd++ }
        }' "$tmp"/lk.* >"$tmp/pw" || return 1
    local n c d
    n=$(wc -l <"$tmp/pw")
    [ "$n" -ge 150 ] || { echo "instr.sh: $who $shape: $n waves seen in the trace, expected about 250 (marker $sym at $m)" >&2; return 1; }
    c=$(cut -d' ' -f1 "$tmp/pw" | sort -n | sed -n "$(( (n + 1) / 2 ))p")
    d=$(cut -d' ' -f2 "$tmp/pw" | sort -n | sed -n "$(( (n + 1) / 2 ))p")
    local name=back-end
    [ "$who" = cn ] && name=commnode
    printf '| pages | %s (%s), per wave | %d | 4 KiB pages | code %d, data %d: median of %d waves, valgrind lackey, of bench_waves |\n' \
        "$name" "$shape" $((c + d)) "$c" "$d" "$n"
}

status=0
pages be 1x2 tbon_net_recv || status=1
pages cn 1x8 tb_stream_down || status=1
count be 1x2 1000 6000 || status=1
count cn 1x2 1000 6000 || status=1
count cn 1x8 1000 6000 || status=1
count cn 1x32 300 1300 || status=1
exit $status
