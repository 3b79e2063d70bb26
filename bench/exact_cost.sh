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

# One run of one side: its round trip and pipelined rows, as "side shape metric value".
run_side() {
    local side=$1 flag=""
    [ "$side" = off ] && flag=--exact-off
    quiet 5 100
    # shellcheck disable=SC2086
    "$bt" $flag $shapes 2>/dev/null |
        awk -F'|' -v side="$side" '
            $3 ~ /wave round trip|pipelined waves/ {
                split($2, a, " "); sh = a[2]; sub(",", "", sh)
                m = $3; gsub(/^ +| +$/, "", m); v = $4; gsub(/ /, "", v)
                print side, sh, (m == "wave round trip" ? "rtt" : "pipe"), v
            }' >>"$raw"
}

for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then run_side on; run_side off; else run_side off; run_side on; fi
    echo "   round $r of $rounds done" >&2
done

# Medians and ranges per side, shape and metric.
awk -v rounds="$rounds" '
    function median(list,   n, v, i, j, t) {
        n = split(list, v, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
            if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
        lo = v[1]; hi = v[n]
        return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    { key = $2 " " $3; vals[$1 " " key] = vals[$1 " " key] " " $4; keys[key] = 1 }
    END {
        for (k in keys) {
            split(k, kk, " ")
            on = median(vals["on " k]); onlo = lo; onhi = hi
            off = median(vals["off " k]); offlo = lo; offhi = hi
            if (kk[2] == "rtt") {
                metric = "wave round trip, exact"; unit = "ms"; ratio = on / off
                better = "lower is better"
            } else {
                metric = "pipelined waves, exact"; unit = "waves/s"; ratio = on / off
                better = "higher is better"
            }
            printf "| exact streams %s | %s | %s | %s | %s-%s over %d rounds; exactness off (exact_off): %s (%s-%s); ratio %.3f (%s); target: within 5%% |\n",
                kk[1], metric, on, unit, onlo, onhi, rounds, off, offlo, offhi, ratio, better
        }
    }' "$raw" | sort
