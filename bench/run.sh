#!/usr/bin/env bash
# run.sh - run every benchmark of a build and write bench/RESULTS.md.
# Usage: bench/run.sh [BUILD_DIR]   (what `make bench` runs)
# Each benchmark program (bench/bench_*.c, bench/ft/) repeats its measurements
# and prints Markdown rows "| area | metric | median | unit | notes |"; this
# script adds the machine, the date and the command, so that every figure says
# where it came from.
# To compare two revisions (is the working tree slower than REV?), run
# bench/compare.sh REV instead: it builds REV beside this tree and runs the
# tree and fault-tolerance benchmarks of both alternately (bench/compare.sh
# --help; --tiny checks that it works in a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh      # quiet, machine
b=${1:-build}
out=bench/RESULTS.md
tmp=$(mktemp)
flat_rows=$(mktemp)
tree_rows=$(mktemp)
ft_rows=$(mktemp)
trap 'rm -f "$tmp" "$flat_rows" "$tree_rows" "$ft_rows"' EXIT

{
    echo "# tbon benchmark results"
    echo
    echo "Written by \`make bench\` (bench/run.sh) on $(date -u '+%Y-%m-%d %H:%M UTC')."
    echo "Every figure is the median of repeated runs in this one run of the command;"
    echo "baselines named in the notes were measured in the same run. Each benchmark"
    echo "program starts once the machine has been idle for a second."
    echo
    echo "- machine: $(machine)"
    echo "- compiler: $(${CC:-cc} --version | head -n1)"
    echo "- build: \`make\` defaults (-O2 -g), build dir \`$b\`"
    echo
    echo "| area | metric | median | unit | notes |"
    echo "|---|---|---|---|---|"
} >"$tmp"

for x in "$b"/bench/bench_*; do
    [ -x "$x" ] || continue
    case "$x" in *.d|*.o) continue ;; esac
    # The running-tree and fault-tolerance benchmarks get their own sections below.
    case "$x" in */bench_flat|*/bench_tree|*/bench_ft|*/bench_stat|*/bench_suspect|*/bench_waves) continue ;; esac
    echo "== $x" >&2
    "$x" | grep -E '^\|' >>"$tmp"
done
# The Python package's front-end beside C's (python/, Debian's python3).
if [ -x "$b/bench/bench_fd" ] && /usr/bin/python3 -c 'import cffi' 2>/dev/null; then
    quiet
    echo "== bench/bench_python.py" >&2
    /usr/bin/python3 bench/bench_python.py "$b" | grep -E '^\|' >>"$tmp"
fi

# Issue 3: the running tree beside the flat TCP baseline of the same run.
# bench_flat runs first; bench_tree reads its rows, names the flat figure in
# each tree row's notes and prints the flat row of each N next to the tree rows.
status=0
if [ -x "$b/bench/bench_flat" ]; then
    quiet
    echo "== $b/bench/bench_flat" >&2
    if ! "$b/bench/bench_flat" >"$flat_rows"; then
        echo "bench_flat failed" >&2
        status=1
    fi
fi
tree_ok=0
if [ -x "$b/bench/bench_tree" ]; then
    quiet
    echo "== $b/bench/bench_tree" >&2
    if "$b/bench/bench_tree" --flat "$flat_rows" >"$tree_rows"; then
        tree_ok=1
    else
        echo "bench_tree failed" >&2
        status=1
    fi
fi
{
    echo
    echo "## Running tree vs flat TCP"
    echo
    echo "Trees of tbon_commnode processes on this machine (bench/bench_tree.c, public API:"
    echo "tbon_fe_create, a TBON_FILTER_SUM / TBON_SYNC_WAITFORALL stream, tbon_net_destroy),"
    echo "each beside the flat baseline of the same run (bench/bench_flat.c: one FE process"
    echo "with N back-end processes connected straight to it over TCP, epoll at the FE)."
    echo "A wave: the FE sends a wave number to every back-end, each answers rank + wave"
    echo "as an int64, the FE gets the sum and checks it exactly. For each N, every metric"
    echo "has its tree row(s), then the flat row. Tree back-ends: bin/tbon_example_be"
    echo "(links libz and libc only); flat back-ends: bench_flat itself (libc only)."
    echo "The bare tree rows (bench_flat AxM) are the floor of any tree on this machine:"
    echo "A relay processes under the FE, M bench_flat back-ends under each, 8-byte"
    echo "records, blocking reads and epoll, no framing, no tbon. A tbon tree can only"
    echo "approach them; where they are above half the flat figure, that target is out"
    echo "of reach of any tree here."
    if [ "$tree_ok" = 0 ]; then
        echo
        echo "**bench_tree did not run or failed in this run: flat rows only.**"
    fi
    echo
    echo "| area | metric | median | unit | notes |"
    echo "|---|---|---|---|---|"
    if [ "$tree_ok" = 1 ]; then
        grep -E '^\|' "$tree_rows" || true
    else
        grep -E '^\|' "$flat_rows" || true
    fi
} >>"$tmp"

# Exact streams (issue 31): the cost of coverage and of keeping what was
# sent, on fault-free sum waves, exactness on beside off in one build.
ex_rows=$(mktemp)
ex_ok=0
if [ -x "$b/bench/bench_tree" ]; then
    echo "== bench/exact_cost.sh" >&2
    if bench/exact_cost.sh --rounds 5 --shapes "8x8 32x32" "$b" >"$ex_rows"; then
        ex_ok=1
    else
        echo "exact_cost.sh failed" >&2
        status=1
    fi
fi
{
    echo
    echo "## Exact streams: the cost without failures"
    echo
    echo "bench/exact_cost.sh: bench_tree's sum stream on 8x8 (64 back-ends) and 32x32"
    echo "(1,024), exact (the default: every unit kept by its sender until the FE has the"
    echo "wave, coverage checked for overlaps at every node, a DONE message per 32 waves)"
    echo "beside tbon_fe_options_t.exact_off (coverage still travels), one build, five"
    echo "rounds alternating; each figure is the median of the rounds' medians."
    if [ "$ex_ok" = 0 ]; then
        echo
        echo "**exact_cost.sh did not run or failed in this run.**"
    fi
    echo
    echo "| area | metric | median | unit | notes |"
    echo "|---|---|---|---|---|"
    grep -E '^\|' "$ex_rows" || true
} >>"$tmp"
rm -f "$ex_rows"

# Run-time performance data (issue 35): the counters every node keeps,
# against the same sources built with them compiled out.
pc_rows=$(mktemp)
pc_ok=0
if [ -x "$b/bench/bench_tree" ]; then
    echo "== bench/perf_cost.sh" >&2
    if bench/perf_cost.sh --rounds 5 --shapes "8x8 16x16" "$b" >"$pc_rows"; then
        pc_ok=1
    else
        echo "perf_cost.sh failed" >&2
        status=1
    fi
fi
{
    echo
    echo "## Performance counters: their cost when nobody asks"
    echo
    echo "bench/perf_cost.sh: bench_tree's sum stream on 8x8 and 16x16, the library as it"
    echo "is (every stream counts packets and bytes each way, waves, filter calls and"
    echo "their time, sampling the CPU clock on one call in 16) beside the same sources"
    echo "built with -DTB_PERF_OFF, five rounds alternating; each figure is the median of"
    echo "the rounds' medians."
    if [ "$pc_ok" = 0 ]; then
        echo
        echo "**perf_cost.sh did not run or failed in this run.**"
    fi
    echo
    echo "| area | metric | median | unit | notes |"
    echo "|---|---|---|---|---|"
    grep -E '^\|' "$pc_rows" || true
} >>"$tmp"
rm -f "$pc_rows"

# Fault tolerance (seed 003 VI-C and VI-D): recovery latency against the
# victim's fan-out, the cost of fault tolerance on a streaming union, and the
# perturbation trace of a 32x32 tree (bench/perturbation.csv and .svg).
ft_ok=0
quiet
ft_load=$(cut -d' ' -f1-3 /proc/loadavg)
if [ -x "$b/bench/bench_ft" ]; then
    echo "== $b/bench/bench_ft" >&2
    if "$b/bench/bench_ft" --recovery --throughput >"$ft_rows" &&
       "$b/bench/bench_ft" --perturbation --csv bench/perturbation.csv \
           --svg bench/perturbation.svg >>"$ft_rows" &&
       "$b/bench/bench_ft" --recovery --fanout 128 --with-sum >>"$ft_rows" &&
       "$b/bench/bench_ft" --figure7 --csv bench/figure7.csv >>"$ft_rows" &&
       "$b/bench/bench_ft" --hops >>"$ft_rows"; then
        ft_ok=1
    else
        echo "bench_ft failed" >&2
        status=1
    fi
fi
{
    echo
    echo "## Fault tolerance"
    echo
    echo "bench_ft (bench/ft/), public API; every back-end is bench_ft itself. Recovery: the"
    echo "topology of seed 003 Figure 5 (the FE over 17 commnodes; commnode 1, the victim,"
    echo "over F back-ends, the 16 others over 2 each, the possible adopters), a"
    echo "TBON_FILTER_UNION / TBON_SYNC_DONTWAIT stream with 10 Hz traffic from every"
    echo "back-end, one complete wave, then kill -9 of the victim; the times come from the"
    echo "FE's TBON_EV_NODE_ADOPTED events and its \"recovery\" log lines, and a second"
    echo "wave must reach every back-end. Streaming: a union on 8x8 with and without"
    echo "fault tolerance, both trees up, rounds alternating. Perturbation (seed 003"
    echo "Figure 7): waves/s of a sum on 32x32 while commnodes are killed;"
    echo "[trace](perturbation.csv), [plot](perturbation.svg). Figure 7 as seed 003 ran it"
    echo "(VI-B, VI-D): a wait-for-all union on 32x32, every back-end a new integer at 10 Hz,"
    echo "four commnodes killed at 30, 60, 90 and 120 s, the FE's throughput over its ten"
    echo "most recent output packets, every integer sent checked at the FE"
    echo "([trace](figure7.csv)). The fan-out 128 recovery again with an exact sum stream"
    echo "beside the union, waves back to back through the kill. Seed 001 Figure 3 (hops):"
    echo "on 8x8x16, the routes of real pings from 4 back-ends to every rank, with 0, 1 and"
    echo "2 commnodes killed (each after the FE's stable view), beside the FE's relay. The figures move with the"
    echo "machine's load; load average (1, 5, 15 min) when bench_ft started, after a quiet second (the averages decay slowly): $ft_load."
    if [ "$ft_ok" = 0 ]; then
        echo
        echo "**bench_ft did not run or failed in this run: rows of the parts that passed only.**"
    fi
    echo
    echo "| area | metric | median | unit | notes |"
    echo "|---|---|---|---|---|"
    grep -E '^\|' "$ft_rows" || true
} >>"$tmp"

# Instructions per wave (issue 32): what a time on this machine cannot
# show, the work of one process of the tree per wave, counted by callgrind.
in_rows=$(mktemp)
in_ok=0
if [ -x "$b/bench/bench_waves" ]; then
    echo "== bench/instr.sh" >&2
    bench/instr.sh "$b" >"$in_rows"
    case $? in
    0) in_ok=1 ;;
    77) ;;
    *) echo "instr.sh failed" >&2; status=1 ;;
    esac
fi
{
    echo
    echo "## Instructions per wave"
    echo
    echo "bench/instr.sh: a back-end of a tree 1x2 and the commnode of 1x2, 1x8 and 1x32"
    echo "under valgrind's callgrind (the rest of the tree native), bench_waves' SUM waves one"
    echo "after the other; each figure is the difference between a long and a short run over"
    echo "the difference in waves, so start-up and teardown cancel out. The counts move by"
    echo "up to about 5% between runs (a turn of the loop takes one message or two, as the"
    echo "scheduler has it): a change of the data path's work larger than that shows here"
    echo "when the timings above are lost in the machine's noise. They do not see the"
    echo "kernel's share of a wave, nor caches, nor the scheduler."
    if [ "$in_ok" = 0 ]; then
        echo
        echo "**instr.sh did not run (no valgrind?) or failed in this run.**"
    fi
    echo
    echo "| area | metric | value | unit | notes |"
    echo "|---|---|---|---|---|"
    grep -E '^\|' "$in_rows" || true
} >>"$tmp"
rm -f "$in_rows"

# The link layer (issue 18): the streaming union under link faults (bit
# flips, connection resets) beside the same without; nothing evicted.
lk_rows=$(mktemp)
lk_ok=0
if [ -x "$b/bench/bench_ft" ] && [ -e "$b/tests/lib/libtbon_faultshim.so" ]; then
    quiet
    echo "== $b/bench/bench_ft --link" >&2
    if "$b/bench/bench_ft" --link >"$lk_rows"; then
        lk_ok=1
    else
        echo "bench_ft --link failed" >&2
        status=1
    fi
fi
{
    echo
    echo "## Link layer"
    echo
    echo "bench_ft --link (bench/ft/link.c), public API (docs/protocol.md 2.4): the streaming union on"
    echo "8x8 of \"Fault tolerance\" with longer rounds, on a tree whose processes (all but"
    echo "the FE) run tests/faultshim (LD_PRELOAD): one bit flipped per 10,000 frames"
    echo "written and about one data connection reset per second over the tree, beside the"
    echo "same tree without it, both with fault tolerance, rounds alternating. No node may"
    echo "be evicted and the FE must get exactly the union. The link layer's cost without"
    echo "faults: bench/compare.sh against the revision before it (the streaming union's"
    echo "figures, and their A/A control)."
    if [ "$lk_ok" = 0 ]; then
        echo
        echo "**bench_ft --link did not run or failed in this run.**"
    fi
    echo
    echo "| area | metric | median | unit | notes |"
    echo "|---|---|---|---|---|"
    grep -E '^\|' "$lk_rows" || true
} >>"$tmp"
rm -f "$lk_rows"

# Membership (issue 6): failure notice and stable view against a kill -9,
# beside a wave's round trip on the same tree; joins; idle traffic.
mb_rows=$(mktemp)
mb_ok=0
if [ -x "$b/bench/bench_ft" ]; then
    quiet
    echo "== $b/bench/bench_ft --membership" >&2
    if "$b/bench/bench_ft" --membership >"$mb_rows"; then
        mb_ok=1
    else
        echo "bench_ft --membership failed" >&2
        status=1
    fi
fi
{
    echo
    echo "## Membership"
    echo
    echo "bench_ft --membership (bench/ft/membership.c), public API; every back-end is bench_ft itself."
    echo "Trees of 64, 256 and 1,024 nodes with three levels (FE, two commnode levels,"
    echo "back-ends) and a TBON_FILTER_SUM / TBON_SYNC_WAITFORALL stream. One at a time,"
    echo "7 back-ends, then 7 commnodes at depth 2 are killed (kill -9); from the kill to the"
    echo "FE's TBON_EV_NODE_FAILED for the victim, and to the TBON_EV_VIEW_STABLE after it"
    echo "(and after every adoption it caused); after each, a sum wave must count exactly"
    echo "the survivors, and its round trip is the baseline: a view goes down to every"
    echo "process and its acknowledgements come back up, as a wave's request and answers"
    echo "do. Idle traffic: the machine's loopback bytes over 5 s of an idle tree, with the"
    echo "default heartbeats and without. Joins: 100 new back-ends at once; then, on the"
    echo "same tree, a commnode that joins and a killed back-end restarted with its rank."
    if [ "$mb_ok" = 0 ]; then
        echo
        echo "**bench_ft --membership did not run or failed in this run.**"
    fi
    echo
    echo "| area | metric | median | unit | notes |"
    echo "|---|---|---|---|---|"
    grep -E '^\|' "$mb_rows" || true
} >>"$tmp"
rm -f "$mb_rows"

# Failure detection (issue 18): false suspicions under load, beside the same
# tree unloaded; a stopped commnode to its children adopted, beside kill -9.
sus_rows=$(mktemp)
sus_ok=0
if [ -x "$b/bench/bench_suspect" ]; then
    quiet
    echo "== $b/bench/bench_suspect" >&2
    if "$b/bench/bench_suspect" ${BENCH_SUSPECT_ARGS:-} >"$sus_rows"; then
        sus_ok=1
    else
        echo "bench_suspect failed" >&2
        status=1
    fi
fi
{
    echo
    echo "## Failure detection"
    echo
    echo "bench/bench_suspect.c, public API, default settings (heartbeat 3000 ms, suspicion"
    echo "window 1500 ms), tbon_example_be at the 256 leaves of a 16x16 tree. False"
    echo "suspicions: sum waves back to back for 5 minutes beside 4 busy loops per core,"
    echo "every TBON_EV_NODE_SUSPECT and TBON_EV_NODE_FAILED counted (target 0), with the"
    echo "same 5 minutes unloaded as the baseline. A stopped commnode: SIGSTOP of commnode 1"
    echo "until the FE has TBON_EV_NODE_ADOPTED for its 16 back-ends (target at most twice"
    echo "the heartbeat timeout), beside kill -9 of it. docs/fault-tolerance.md."
    if [ "$sus_ok" = 0 ]; then
        echo
        echo "**bench_suspect did not run or failed in this run.**"
    fi
    echo
    echo "| area | metric | median | unit | notes |"
    echo "|---|---|---|---|---|"
    grep -E '^\|' "$sus_rows" || true
} >>"$tmp"
rm -f "$sus_rows"

# tbon_stat (issue 5): attach, sample once and merge, beside eu-stack.
stat_rows=$(mktemp)
stat_ok=0
if [ -x "$b/bench/bench_stat" ] && [ -x "$b/bin/tbon_stat" ]; then
    quiet
    echo "== $b/bench/bench_stat" >&2
    if "$b/bench/bench_stat" >"$stat_rows"; then
        stat_ok=1
    else
        echo "bench_stat failed" >&2
        status=1
    fi
fi
# Issue 36: the viewer page in headless Chromium (bench/stat_view.sh).
if [ -x "$b/bin/tbon_stat" ] && command -v chromium >/dev/null; then
    quiet
    echo "== bench/stat_view.sh" >&2
    if ! bench/stat_view.sh "$b" 5 >>"$stat_rows"; then
        echo "bench/stat_view.sh failed" >&2
        status=1
    fi
fi
{
    echo
    echo "## tbon_stat"
    echo
    echo "bench/bench_stat.c: stat/examples/stat_hang N starts N workers stuck in a few"
    echo "call paths; \`tbon_stat -n 1 --pids-file\` samples each once through its default"
    echo "tree (one back-end per 16 tasks, at most 2 per CPU, fan-out 8) and merges the"
    echo "traces; the time is the whole command, tree start-up included. The baseline is"
    echo "\`eu-stack -p PID\` (elfutils) run for each of the same workers in turn, in the"
    echo "same run (the median of 3 such loops). At 1,024 tasks, \`--counts-only\` runs"
    echo "alternate with full ones on the same workers: the bytes of the merged trees"
    echo "that reach the front-end and the times, on stat_hang as it is (each path's"
    echo "ranks contiguous) and with STAT_HANG_SCATTER=1 (ranks scattered over two"
    echo "paths). bench/stat_view.sh: the viewer page (<exe>.html) in headless"
    echo "Chromium, beside the SVG of the same run."
    if [ "$stat_ok" = 0 ]; then
        echo
        echo "**bench_stat did not run or failed in this run: rows of the sizes that passed only.**"
    fi
    echo
    echo "| area | metric | median | unit | notes |"
    echo "|---|---|---|---|---|"
    grep -E '^\|' "$stat_rows" || true
} >>"$tmp"
rm -f "$stat_rows"

# Across hosts (issue 16): on an emulated cluster of its own (root; it says
# so in its section when it cannot run here), tbon_stat --jobid included.
if [ -x bench/cluster.sh ]; then
    quiet
    echo "== bench/cluster.sh" >&2
    if ! bench/cluster.sh "$b" >>"$tmp"; then
        echo "bench/cluster.sh failed" >&2
        status=1
    fi
fi

# The sections bench/compare.sh --into wrote into the old file (two builds
# measured against each other, apart from this run) are kept, at the end.
if [ -f "$out" ]; then
    awk '/^<!-- compare\.sh: / { on = 1; print "" } on { print } /^<!-- \/compare\.sh: / { on = 0 }' \
        "$out" >>"$tmp"
fi

mv "$tmp" "$out"
trap - EXIT
rm -f "$flat_rows" "$tree_rows" "$ft_rows"
cat "$out"
exit "$status"
