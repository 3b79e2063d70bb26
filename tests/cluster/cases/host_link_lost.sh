# host_link_lost: a 4x4 over head,n1..n4 from head in a long wave loop
# (--events); n3's link goes down (ip link set eth0 down). n3 holds a
# commnode (rank 3), one of its back-ends and back-ends under other
# commnodes. Within the heartbeat timeout (3000 ms, the default) plus 2 s,
# the FE must report failed every node on n3 that a node elsewhere watches
# (rank 3, the back-ends under other commnodes) and adopt rank 3's children on
# other hosts. A back-end on n3 under n3's own commnode has nobody watching
# it: it is cut off and taken for failed when no adoption came for one
# timeout (at least 1 s) after its parent's failure; the FE names it with the
# results ("cut off: 13", or, as the concat stream is exact and waits for a
# cut-off orphan's part until it is taken for failed, "missing 13"). Silence is first a suspicion: a watched node is
# failed once the FE confirms it, within 3000 ms of silence plus at most three
# 1500 ms windows (one observer), so within 8500 ms with slack; the cut-off
# one a timeout later (11500 ms). Every wave begun 5 s after
# the link went down holds exactly the answers of the back-ends that are not
# on n3 (concat of {rank, wave}) and the FE counts exactly those (nothing on
# n3 silently missing). The link comes back
# in a trap; nothing may be left on any host.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/head.top
pidf=$CASE_TMP/fe.pid
out=$CASE_TMP/out
down=0
cleanup() {
    [ "$down" = 0 ] || on n3 ip link set eth0 up
    bg_signal head "$pidf" KILL
}
trap cleanup EXIT

on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"
nodes=$(topo_nodes "$top")
lost=$(awk '$2 == "n3" { print $1 }' <<<"$nodes")
lost_cn=$(awk '$2 == "n3" && $3 == "cn" { print $1 }' <<<"$nodes")
orphans=$(awk -v p="$lost_cn" '$2 != "n3" && $4 == p { print $1 }' <<<"$nodes")
cutoff=$(awk -v p="$lost_cn" '$2 == "n3" && $4 == p { print $1 }' <<<"$nodes")
echo "on n3: ranks $(echo $lost); rank $lost_cn's children elsewhere: $(echo $orphans)"

bg_start head "$pidf" "$out" "$CASE_TMP/err" "$B/bin/tbon_frontend" -t "$top" \
    -b "$B/bin/tbon_example_be" -f concat -k array -w 100000 --events -- --delay 5
wait_until 30 grep -q '^wave 2:' "$out" || { cat "$CASE_TMP/err"; fail "the tree did not run 3 waves within 30 s"; }

down=1
on n3 ip link set eth0 down || fail "cannot take n3's link down"
t0=$(now_ms)
errors=""

# every node on n3 reported failed, each time noted
declare -A seen
all_failed() {
    local r ok=0
    for r in $lost; do
        if [ -z "${seen[$r]:-}" ]; then
            if grep -q "^event: node $r failed" "$out"; then
                seen[$r]=$(($(now_ms) - t0))
            else
                ok=1
            fi
        fi
    done
    return $ok
}
# the watched ones' deadline first: then note how many waves were printed
wait_until 5 all_failed
w5=$(grep -c '^wave ' "$out")
wait_until 15 all_failed   # how late the others are, for the report
report=""
for r in $lost; do report="$report rank $r ${seen[$r]:-not within 20 s} ms,"; done
echo "result: nodes on n3 reported failed after the link went down:${report%,}"
for r in $lost; do
    limit=8500
    grep -qw "$r" <<<"$cutoff" && limit=11500
    [ -n "${seen[$r]:-}" ] && [ "${seen[$r]}" -le "$limit" ] ||
        errors="${errors}rank $r on n3 not reported failed within $limit ms: ${seen[$r]:-not within 20 s} ms
"
done
# the FE named them with the results: cut off, or missing once failed
for r in $cutoff; do
    grep -Eq "^wave .*(cut off:|missing)[^)]* $r( |;|\))" "$out" ||
        errors="${errors}rank $r was never named as cut off or missing
"
done

adopted() {
    local k
    for k in $orphans; do grep -q "^event: node $k adopted by " "$out" || return 1; done
}
wait_until 20 adopted || errors="${errors}rank $lost_cn's children on other hosts ($(echo $orphans)) not all adopted within 20 s
"
grep '^event' "$out"

# The waves that began 5 s or more after the link went down (the heartbeat
# timeout and 2 s): each must hold exactly the back-ends that are not on n3
# (concat of {rank, wave}: who answered, for which wave), and the FE's count
# ("from N back-ends") must be theirs: nothing on n3 silently missing.
alive=$(awk '$3 == "be" && $2 != "n3" { print $1 }' <<<"$nodes" | sort -n | tr '\n' ' ')
enough() { [ "$(grep -c '^wave ' "$out")" -ge $((w5 + 4)) ]; }
if wait_until 30 enough; then
    grep '^wave ' "$out" | tail -n +$((w5 + 2)) >"$CASE_TMP/after"
    bad=$(concat_waves_wrong "$CASE_TMP/after" "$alive")
    echo "$(wc -l <"$CASE_TMP/after") waves from 5 s after the link went down, checked against the $(wc -w <<<"$alive") back-ends off n3 ($alive)"
    if [ -n "$bad" ]; then
        printf '%s\n' "$bad" | head -n 5
        errors="${errors}$(wc -l <<<"$bad") of those waves were wrong (first: $(head -n 1 <<<"$bad"))
"
    fi
else
    errors="${errors}no 4 waves from 5 s after the link went down within 30 s
"
fi

on n3 ip link set eth0 up || errors="${errors}cannot bring n3's link back
"
down=0
bg_signal head "$pidf" TERM || fail "cannot signal the front-end"
fe_ended() { ! kill -0 "$bg_pid" 2>/dev/null; }
wait_until 30 fe_ended || fail "the front-end did not end within 30 s of SIGTERM"
wait "$bg_pid"
no_tbon_left 15
[ -z "$errors" ] || { printf '%s' "$errors"; fail "$(printf '%s' "$errors" | wc -l) checks failed"; }
