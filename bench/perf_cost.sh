#!/usr/bin/env bash
# perf_cost.sh - what the run-time performance counters cost when nobody
# asks for them (tbon_fe_perf, docs/user-guide.md "Performance data"):
# bench_tree's wave round trip and pipelined waves on a sum stream, the
# library as it is beside the same sources built with -DTB_PERF_OFF (the
# counters compiled out: BUILD_DIR/perf-off, made here if missing), rounds
# alternating (on off off on on off ...), each side's median over the rounds
# and its range.
#
# Usage: bench/perf_cost.sh [--rounds N] [--shapes "8x8 16x16"] [BUILD_DIR]
#   Prints Markdown rows "| area | metric | median | unit | notes |".
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh      # quiet
rounds=5 shapes="8x8 16x16" b=build
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "perf_cost.sh: unknown option $1" >&2; exit 2 ;;
    *) b=$1; shift ;;
    esac
done
on=$b/bench/bench_tree off=$b/perf-off/bench/bench_tree
[ -x "$on" ] || { echo "perf_cost.sh: $on not built (make benches)" >&2; exit 2; }
# The baseline: the same sources, the counters compiled out (CFLAGS from
# the environment: the Makefile adds its own after them).
echo "   building the baseline without counters in $b/perf-off" >&2
CFLAGS="-O2 -g -DTB_PERF_OFF" make -s -j"$(nproc 2>/dev/null || echo 2)" B="$b/perf-off" \
    programs "$off" >&2
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

for r in $(seq 1 "$rounds"); do
    # shellcheck disable=SC2086
    if [ $((r % 2)) = 1 ]; then
        tree_side on "$on" $shapes >>"$raw"; tree_side off "$off" $shapes >>"$raw"
    else
        tree_side off "$off" $shapes >>"$raw"; tree_side on "$on" $shapes >>"$raw"
    fi
    echo "   round $r of $rounds done" >&2
done

side_medians "$raw" | awk -v rounds="$rounds" '
    {
        if ($2 == "rtt") {
            metric = "wave round trip, counters kept"; unit = "ms"; cost = $3 / $6 - 1
        } else {
            metric = "pipelined waves, counters kept"; unit = "waves/s"; cost = $6 / $3 - 1
        }
        printf "| performance counters %s | %s | %s | %s | %s-%s over %d rounds; compiled out (-DTB_PERF_OFF): %s (%s-%s); cost %+.1f%% (positive: slower with them); target: at most 1%% |\n",
            $1, metric, $3, unit, $4, $5, rounds, $6, $7, $8, 100 * cost
    }' | sort
