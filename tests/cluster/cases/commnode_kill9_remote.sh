# commnode_kill9_remote: tbon_frontend --events on a 4x4 over head,n1..n4,
# a sum/wait-for-all stream of 40 waves whose back-ends answer slowly
# (tbon_example_be --delay 40: up to 120 ms a wave); after wave 5, kill -9 of
# n2's commnode on n2 itself (`on n2 pkill -9 -f ...`). Then:
# - the events show its failure and the adoption of each of its children;
# - every wave before the kill and every wave after the last adoption is
#   exact (the sum of rank + w over all 16 back-ends: none of them died);
#   the waves in flight in between may miss the dead node's subtree (sum
#   keeps no recoverable state) but never count anything twice;
# - the front-end ends normally and nothing is left on any host.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/head.top
pidf=$CASE_TMP/fe.pid
out=$CASE_TMP/out
WAVES=40
cleanup() {
    bg_signal head "$pidf" KILL 2>/dev/null
    wait 2>/dev/null
}
trap cleanup EXIT

on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"
nodes=$(topo_nodes "$top") || fail "cannot read $top"
victim=$(awk '$2 == "n2" && $3 == "cn" { print $1; exit }' <<<"$nodes")
[ -n "$victim" ] || fail "no commnode on n2 in $top"
# The victim's children by rank: its parent column (breadth-first ranks, as
# topo_nodes numbers them; tbon_topgen writes one "P => KIDS ;" per line).
kids=$(awk '
    { sub(/#.*/, "") }
    /=>/ { gsub(/;/, ""); p = $1; if (!(p in rank)) rank[p] = n++
           for (i = 3; i <= NF; i++) { rank[$i] = n++; parent[$i] = p; name[rank[$i]] = $i } }
    END { for (r = 0; r < n; r++) if (r in name && rank[parent[name[r]]] == v) print r }' \
    v="$victim" "$top" | tr '\n' ' ')
nkids=$(wc -w <<<"$kids")
[ "$nkids" -gt 0 ] || fail "commnode $victim has no children in $top"
echo "victim: commnode $victim on n2, with $nkids children (ranks $kids)"

bg_start head "$pidf" "$out" "$CASE_TMP/err" \
    "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -w $WAVES --events \
    -- --delay 40
# shellcheck disable=SC2154 # bg_pid: set by bg_start (lib.sh)
job=$bg_pid
wait_until 40 grep -q '^wave 5:' "$out" || { cat "$out" "$CASE_TMP/err"; fail "no wave 5 within 40 s"; }
# The victim's own process on n2 (a ssh client on another host holds the same
# words quoted, and the [k] keeps pkill's own shell from matching).
on n2 pkill -9 -f -- "--tbon-ran[k] $victim --tbon-session " || fail "pkill on n2 found no commnode $victim"
echo "killed commnode $victim on n2 after wave $(grep -c '^wave ' "$out")"
wait_until 90 sh -c '! kill -0 "$1" 2>/dev/null' - "$job" || fail "tbon_frontend still running after 90 s"
wait "$job"
rc=$?
cat "$out"
[ "$rc" = 0 ] || { cat "$CASE_TMP/err"; fail "tbon_frontend exited with $rc"; }
grep -q "^event: node $victim failed" "$out" || fail "no failure event for commnode $victim"
nadopt=0
for r in $kids; do
    grep -q "^event: node $r adopted by " "$out" || fail "no adoption event for rank $r"
    nadopt=$((nadopt + 1))
done
[ "$nadopt" = "$nkids" ] || fail "$nadopt adoptions for $nkids children"
others=$(grep '^event: node [0-9]* failed' "$out" | grep -v "^event: node $victim failed" || true)
[ -z "$others" ] || fail "other nodes failed: $others"

# The waves: one at a time, and tbon_frontend prints the events between two
# waves, so the wave in flight at the kill is the last one printed before
# the failure event (or the one before it, if the kill came between two
# waves). Those, and any between the failure and the last adoption event,
# may miss the dead node's subtree: less than the full sum, never more (the
# line's "from N back-ends" is the number of live back-ends, not of
# answers). Every other wave is exact.
[ "$(grep -c '^wave ' "$out")" = "$WAVES" ] || fail "not $WAVES wave lines"
adopt_line=$(grep -n "^event: node [0-9]* adopted by " "$out" | tail -1 | cut -d: -f1)
fail_line=$(grep -n "^event: node $victim failed" "$out" | cut -d: -f1)
inflight=$(head -n "$fail_line" "$out" | grep -n '^wave ' | tail -2 | cut -d: -f1 | tr '\n' ' ')
short=0 late=0
while IFS=: read -r ln line; do
    w=$(sed 's/^wave \([0-9]*\):.*/\1/' <<<"$line")
    want=$(wave_line "$top" "$w") || exit 1
    [ "$ln" -lt "$adopt_line" ] || late=$((late + 1))
    [ "$line" = "$want" ] && continue
    may=0
    case " $inflight " in *" $ln "*) may=1 ;; esac
    [ "$ln" -gt "$fail_line" ] && [ "$ln" -lt "$adopt_line" ] && may=1
    [ "$may" = 1 ] || fail "wave $w not exact: \"$line\", expected \"$want\""
    got=$(sed 's/.*sum = \([0-9-]*\) .*/\1/' <<<"$line")
    full=$(sed 's/.*sum = \([0-9-]*\) .*/\1/' <<<"$want")
    [ "$got" -lt "$full" ] ||
        fail "wave $w in flight at the failure counts too much: \"$line\" (full: \"$want\")"
    short=$((short + 1))
done < <(grep -n '^wave ' "$out")
[ "$late" -ge 10 ] || fail "only $late waves after the adoptions (the kill came too late to check)"
echo "result: every wave exact but $short in flight at the kill; $late exact waves after the $nadopt adoptions"
no_tbon_left 5
