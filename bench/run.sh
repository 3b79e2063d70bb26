#!/usr/bin/env bash
# run.sh - run every benchmark of a build and write bench/RESULTS.md.
# Usage: bench/run.sh [BUILD_DIR]   (what `make bench` runs)
# Each bench/bench_*.c program repeats its measurements and prints Markdown rows
# "| area | metric | median | unit | notes |"; this script adds the machine,
# the date and the command, so that every figure says where it came from.
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build}
out=bench/RESULTS.md
tmp=$(mktemp)
flat_rows=$(mktemp)
tree_rows=$(mktemp)
trap 'rm -f "$tmp" "$flat_rows" "$tree_rows"' EXIT

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
{
    echo "# tbon benchmark results"
    echo
    echo "Written by \`make bench\` (bench/run.sh) on $(date -u '+%Y-%m-%d %H:%M UTC')."
    echo "Every figure is the median of repeated runs in this one run of the command;"
    echo "baselines named in the notes were measured in the same run."
    echo
    echo "- machine: $cpu, $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB, $(uname -sr)"
    echo "- compiler: $(${CC:-cc} --version | head -n1)"
    echo "- build: \`make\` defaults (-O2 -g), build dir \`$b\`"
    echo
    echo "| area | metric | median | unit | notes |"
    echo "|---|---|---|---|---|"
} >"$tmp"

for x in "$b"/bench/bench_*; do
    [ -x "$x" ] || continue
    case "$x" in *.d|*.o) continue ;; esac
    # The running-tree benchmarks get their own section below.
    case "$x" in */bench_flat|*/bench_tree) continue ;; esac
    echo "== $x" >&2
    "$x" | grep -E '^\|' >>"$tmp"
done

# Issue 3: the running tree beside the flat TCP baseline of the same run.
# bench_flat runs first; bench_tree reads its rows, names the flat figure in
# each tree row's notes and prints the flat row of each N next to the tree rows.
status=0
if [ -x "$b/bench/bench_flat" ]; then
    echo "== $b/bench/bench_flat" >&2
    if ! "$b/bench/bench_flat" >"$flat_rows"; then
        echo "bench_flat failed" >&2
        status=1
    fi
fi
tree_ok=0
if [ -x "$b/bench/bench_tree" ]; then
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

mv "$tmp" "$out"
trap - EXIT
rm -f "$flat_rows" "$tree_rows"
cat "$out"
exit "$status"
