#!/usr/bin/env bash
# exact_cost.sh - what exact streams cost on fault-free waves: bench_tree's
# wave round trip and pipelined waves on a sum stream, exact (the default)
# beside the same with tbon_fe_options_t.exact_off (bench_tree --exact-off),
# one build, rounds alternating (on off off on on off ...), each side's
# median over the rounds and its range. docs/fault-tolerance.md, "Exact
# results when commnodes die".
#
# Usage: bench/exact_cost.sh [--rounds N] [--shapes "8x8 32x32"] [BUILD_DIR]
#   Prints Markdown rows "| area | metric | median | unit | notes |".
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh      # quiet
rounds=5 shapes="8x8 32x32" b=build
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "exact_cost.sh: unknown option $1" >&2; exit 2 ;;
    *) b=$1; shift ;;
    esac
done
bt=$b/bench/bench_tree
[ -x "$bt" ] || { echo "exact_cost.sh: $bt not built (make benches)" >&2; exit 2; }
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

for r in $(seq 1 "$rounds"); do
    # shellcheck disable=SC2086
    if [ $((r % 2)) = 1 ]; then
        tree_side on "$bt" $shapes >>"$raw"; tree_side off "$bt" --exact-off $shapes >>"$raw"
    else
        tree_side off "$bt" --exact-off $shapes >>"$raw"; tree_side on "$bt" $shapes >>"$raw"
    fi
    echo "   round $r of $rounds done" >&2
done

# Medians and ranges per side, shape and metric.
side_medians "$raw" | awk -v rounds="$rounds" '
    {
        ratio = $3 / $6
        if ($2 == "rtt") {
            metric = "wave round trip, exact"; unit = "ms"; better = "lower is better"
        } else {
            metric = "pipelined waves, exact"; unit = "waves/s"; better = "higher is better"
        }
        printf "| exact streams %s | %s | %s | %s | %s-%s over %d rounds; exactness off (exact_off): %s (%s-%s); ratio %.3f (%s); target: within 5%% |\n",
            $1, metric, $3, unit, $4, $5, rounds, $6, $7, $8, ratio, better
    }' | sort
