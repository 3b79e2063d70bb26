#!/usr/bin/env bash
# demo.sh - what `make demo` runs: a readable tour of what tbon does today.
# The running tree (tbon_frontend over a local topology) arrives with issue 3;
# until then the demo shows the topology tools on the default local topology.
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build}
topgen=$b/bin/tbon_topgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

step "A balanced 4x4 tree on this host: the FE, 4 commnodes, 16 back-ends"
echo "\$ $topgen --shape 4x4 -o $tmp/local-4x4.top"
"$topgen" --shape 4x4 -o "$tmp/local-4x4.top"
cat "$tmp/local-4x4.top"

step "What the parser makes of it (ranks are breadth-first, the FE is rank 0)"
echo "\$ $topgen --check $tmp/local-4x4.top"
"$topgen" --check "$tmp/local-4x4.top"

step "The same tree as XML"
"$topgen" --shape 4x4 --xml | head -n 8
echo "  ..."

step "A broken file gets an error naming file, line and column"
printf 'fe:0 => a:0 b:0 ;\na:0 => c:0 ;\nb:0 => c:0 ;\n' >"$tmp/bad.top"
cat -n "$tmp/bad.top"
echo "\$ $topgen --check $tmp/bad.top"
"$topgen" --check "$tmp/bad.top" || echo "(exit status $?)"

step "A million back-ends: 32x32x32x32"
start=$(date +%s%N)
"$topgen" --shape 32x32x32x32 -o "$tmp/huge.top"
"$topgen" --check "$tmp/huge.top" | head -n 3
end=$(date +%s%N)
echo "generated, written, parsed and checked in $(( (end - start) / 1000000 )) ms"
