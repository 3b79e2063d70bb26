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
trap 'rm -f "$tmp"' EXIT

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
    echo "== $x" >&2
    "$x" | grep -E '^\|' >>"$tmp"
done

mv "$tmp" "$out"
trap - EXIT
cat "$out"
