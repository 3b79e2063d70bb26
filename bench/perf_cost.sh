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

# One run of one side: its round trip and pipelined rows, as "side shape metric value".
run_side() {
    local side=$1 bin=$on
    [ "$side" = off ] && bin=$off
    quiet 5 100
    # shellcheck disable=SC2086
    "$bin" $shapes 2>/dev/null |
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
                metric = "wave round trip, counters kept"; unit = "ms"
                cost = on / off - 1
            } else {
                metric = "pipelined waves, counters kept"; unit = "waves/s"
                cost = off / on - 1
            }
            printf "| performance counters %s | %s | %s | %s | %s-%s over %d rounds; compiled out (-DTB_PERF_OFF): %s (%s-%s); cost %+.1f%% (positive: slower with them); target: at most 1%% |\n",
                kk[1], metric, on, unit, onlo, onhi, rounds, off, offlo, offhi, 100 * cost
        }
    }' "$raw" | sort
