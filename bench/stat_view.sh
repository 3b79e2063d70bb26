#!/usr/bin/env bash
# stat_view.sh - tbon_stat's viewer page (<exe>.html) in headless Chromium:
# its load time at 1,024 tasks (a real run: stat/examples/stat_hang 1024,
# tbon_stat -n 3) beside Chromium loading the same run's SVG (dot's drawing,
# the static view before the page), and at 10,000 tasks and 1,000 distinct
# frames (synthetic data: tests/scripts/stat_view_make.py --synthetic), each
# the median of REPEAT loads (tests/scripts/stat_view_check.py --time).
# Usage: bench/stat_view.sh BUILD [REPEAT]   Markdown rows on stdout.
set -u
cd "$(dirname "$0")/.."
b=${1:-build}
rep=${2:-5}
py=/usr/bin/python3
chrome=$(command -v chromium || true)
[ -n "$chrome" ] || { echo "stat_view.sh: no chromium (scripts/deps.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/bench_stat_view.XXXXXX)
hang=
cleanup() {
    [ -z "$hang" ] || kill "$hang" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

"$b/stat/examples/stat_hang" 1024 >"$tmp/hang.txt" &
hang=$!
for _ in $(seq 300); do
    [ "$(wc -l <"$tmp/hang.txt")" -ge 1024 ] && break
    sleep 0.1
done
[ "$(wc -l <"$tmp/hang.txt")" -ge 1024 ] || { echo "stat_view.sh: stat_hang 1024 did not start" >&2; exit 1; }
awk '{ print $2 }' "$tmp/hang.txt" >"$tmp/pids"
"$b/bin/tbon_stat" -n 3 -i 50 -q -o "$tmp/out" --pids-file "$tmp/pids" >/dev/null ||
    { echo "stat_view.sh: tbon_stat failed" >&2; exit 1; }
kill "$hang"
wait "$hang" 2>/dev/null
hang=
run=$tmp/out/stat_hang.0000

# The median wall time of REPEAT headless loads of a file (the SVG).
wall_of() {
    local f=$1 i t0 t1 prof
    for i in $(seq "$rep"); do
        prof=$(mktemp -d "$tmp/prof.XXXXXX")
        t0=$(date +%s.%N)
        timeout -k 5 60 "$chrome" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
            --user-data-dir="$prof" --dump-dom "file://$f" >/dev/null 2>&1
        t1=$(date +%s.%N)
        rm -rf "$prof"
        awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
    done | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# "render ms, load ms, wall s, bytes, rows" of the page from the checker's --time line.
page_times() {
    $py tests/scripts/stat_view_check.py --time --repeat "$rep" "$1" "$2" 2>&1 |
        sed -nE 's/^.*: ([0-9]+) bytes, ([0-9]+) rows shown; .* median render ([0-9.]+) ms .*, load ([0-9.]+) ms .*, chromium ([0-9.]+) s wall.*$/\3 \4 \5 \1 \2/p' |
        tail -1
}

read -r r1 l1 w1 b1 n1 <<<"$(page_times "$run/stat_hang.html" "$run")"
[ -n "${w1:-}" ] || { echo "stat_view.sh: the 1,024-task page did not time" >&2; exit 1; }
svg=$(wall_of "$run/stat_hang.2D.svg")
svgb=$(stat -c %s "$run/stat_hang.2D.svg")
nodes=$(grep -c '' "$run/stat_hang.2D.txt")
echo "| stat | viewer page load, 1,024 tasks | $l1 | ms | tbon_stat -n 3 of stat_hang 1024 ($nodes nodes in the 2D tree): <exe>.html ($b1 bytes, $n1 rows shown) in headless Chromium, navigation start to the page ready (script start to ready: $r1 ms); Chromium's whole run $w1 s, beside $svg s for the same run's 2D SVG ($svgb bytes, dot's drawing); median of $rep |"

$py tests/scripts/stat_view_make.py --synthetic 10000 1000 --write-rundir "$tmp/syn" -o "$tmp/syn.html" >/dev/null ||
    { echo "stat_view.sh: stat_view_make.py failed" >&2; exit 1; }
read -r r2 l2 w2 b2 n2 <<<"$(page_times "$tmp/syn.html" "$tmp/syn")"
[ -n "${w2:-}" ] || { echo "stat_view.sh: the 10,000-task page did not time" >&2; exit 1; }
echo "| stat | viewer page load, 10,000 tasks, 1,000 frames | $l2 | ms | synthetic data (tests/scripts/stat_view_make.py --synthetic 10000 1000: scattered ranks, varied depths), $b2 bytes, $n2 rows shown at first (deeper rows collapsed); navigation start to ready (script start to ready: $r2 ms); Chromium's whole run $w2 s, beside $w1 s for the 1,024-task page; median of $rep |"
