# commnode_killed: a 4x4 over head,n1..n4 from head in a long wave loop
# (--events); kill -9 of the commnode on n2 (rank 2, whose back-ends are on
# n4, head, n1 and n2). The FE reports node 2 failed and its 4 back-ends
# adopted; the waves after that are exact over all 16 back-ends again; n2
# keeps its back-end; at the end nothing is left anywhere.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/head.top
pidf=$CASE_TMP/fe.pid
out=$CASE_TMP/out
cleanup() {
    bg_signal head "$pidf" KILL
}
trap cleanup EXIT

on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"
victim=2
[ "$(topo_nodes "$top" | awk -v r=$victim '$1 == r { print $2, $3 }')" = "n2 cn" ] ||
    fail "rank $victim is not the commnode on n2 in $top"
kids=$(topo_nodes "$top" | awk -v r=$victim '$4 == r { print $1 }')
[ "$(wc -w <<<"$kids")" -eq 4 ] || fail "rank $victim has not 4 children in $top: $kids"

bg_start head "$pidf" "$out" "$CASE_TMP/err" "$B/bin/tbon_frontend" -t "$top" \
    -b "$B/bin/tbon_example_be" -w 100000 --events -- --delay 5
wait_until 30 grep -q '^wave 2:' "$out" || { cat "$CASE_TMP/err"; fail "the tree did not run 3 waves within 30 s"; }

pid=$(tbon_procs n2 | awk '$2 == "tbon_commnode" && / --tbon-rank '$victim' / { print $1 }')
[ -n "$pid" ] || { tbon_procs n2; fail "no tbon_commnode of rank $victim on n2"; }
t0=$(now_ms)   # before: the figure below is an upper bound
on n2 kill -KILL "$pid" || fail "kill -9 of rank $victim (pid $pid on n2) failed"
echo "killed rank $victim (pid $pid on n2)"

adopted() {
    local k
    grep -q "^event: node $victim failed" "$out" || return 1
    for k in $kids; do
        grep -q "^event: node $k adopted by " "$out" || return 1
    done
}
wait_until 20 adopted || { grep '^event' "$out"; cat "$CASE_TMP/err"; fail "node $victim's failure and its children's adoption not reported within 20 s"; }
echo "result: node $victim failed and its back-ends ($(echo $kids)) adopted, seen by the FE within $(($(now_ms) - t0)) ms of the kill"
grep '^event' "$out"

# Three more waves after the adoptions, each exact over all 16 back-ends.
n0=$(grep -c '^wave ' "$out")
more_waves() { [ "$(grep -c '^wave ' "$out")" -ge $((n0 + 4)) ]; }
wait_until 30 more_waves || fail "no 4 more waves within 30 s"
grep '^wave ' "$out" | tail -n 3 >"$CASE_TMP/last3"
while read -r line; do
    w=$(awk '{ sub(":", "", $2); print $2 }' <<<"$line")
    want=$(wave_line "$top" "$w") || exit 1
    [ "$line" = "$want" ] || fail "after the adoption: \"$line\", expected \"$want\""
done <"$CASE_TMP/last3"
echo "the last 3 waves exact over 16 back-ends:"
cat "$CASE_TMP/last3"

[ -z "$(tbon_procs n2 | awk '$2 == "tbon_commnode"')" ] || fail "a commnode still runs on n2"
[ -n "$(tbon_procs n2 | awk '$2 == "tbon_example_be"')" ] || fail "n2's back-ends are gone"

bg_signal head "$pidf" TERM || fail "cannot signal the front-end"
fe_ended() { ! kill -0 "$bg_pid" 2>/dev/null; }
wait_until 30 fe_ended || fail "the front-end did not end within 30 s of SIGTERM"
wait "$bg_pid"
no_tbon_left
