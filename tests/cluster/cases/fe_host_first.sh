# fe_host_first: the topology's first host is the FE's (head); every node on
# the host the topology names. A 4x4 over head,n1..n4 from head: exact sums
# for 3 waves; then, during a longer run, each host runs exactly the
# commnodes and back-ends the topology puts there (so a tree that ran
# everything on head fails); nothing left anywhere.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/head.top
pidf=$CASE_TMP/fe.pid
cleanup() {
    bg_signal head "$pidf" KILL
    rm -f "$pidf"
}
trap cleanup EXIT

on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"

# 1. exact sums
on head timeout -k 10 60 "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -w 3 \
    >"$CASE_TMP/out" 2>"$CASE_TMP/err"
rc=$?
cat "$CASE_TMP/out" "$CASE_TMP/err"
[ "$rc" -eq 0 ] || fail "tbon_frontend -w 3 exited $rc"
expect_waves "$top" "$CASE_TMP/out" 3
no_tbon_left

# 2. where the processes run: counts per host from the topology
want=$(topo_nodes "$top" | awk '
    { if ($3 == "cn") cn[$2]++; else if ($3 == "be") be[$2]++; h[$2] = 1 }
    END { for (x in h) printf "%s %d %d\n", x, cn[x], be[x] }' | sort)
echo "expected (host commnodes back-ends):"
echo "$want"
seen() {
    local h got=""
    for h in $(cl_hosts); do
        got="$got$h $(tbon_procs "$h" | awk '$2 == "tbon_commnode" { c++ } $2 == "tbon_example_b" || $2 == "tbon_example_be" { e++ }
                                        END { printf "%d %d", c, e }')
"
    done
    got=$(printf '%s' "$got" | awk '$2 + $3 > 0' | sort)
    [ "$got" = "$want" ]
}
# --delay 20: each wave takes 60 ms or more, so the tree lives for minutes
bg_start head "$pidf" "$CASE_TMP/out2" "$CASE_TMP/err2" \
    "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -w 5000 -- --delay 20
if ! wait_until 30 seen; then
    echo "seen (host commnodes back-ends):"
    for h in $(cl_hosts); do tbon_procs "$h" | sed "s/^/$h: /"; done
    fail "the processes did not run where the topology puts them"
fi
echo "every host runs what the topology puts there"
wait_until 30 grep -q '^wave 2:' "$CASE_TMP/out2" || { cat "$CASE_TMP/err2"; fail "no wave 2 in the long run"; }
bg_signal head "$pidf" TERM || fail "cannot signal the front-end"
fe_ended() { ! kill -0 "$bg_pid" 2>/dev/null; }
wait_until 30 fe_ended || fail "the front-end did not end within 30 s of SIGTERM"
wait "$bg_pid"
n=$(grep -c '^wave ' "$CASE_TMP/out2")
expect_waves "$top" "$CASE_TMP/out2" "$n"
echo "long run: $n exact waves"
no_tbon_left
