# host_link_down: tbon_fims's integer union on a 4x4 over head,n1..n4 with
# heartbeats of 1000 ms; once values flow, n3 goes off the network
# (ip link set eth0 down on n3). Then:
# - every node of n3 (its commnode and its back-ends, whoever their parent)
#   has a failure event: those with a parent elsewhere within the heartbeat
#   timeout (+1.5 s of slack for a loaded box), the one under n3's own
#   commnode when the front-end gives up on its adoption (one and a half
#   heartbeat timeouts, at least 1.5 s, later: it never said it was looking
#   for an adopter); no node of another host fails;
# - the orphans on other hosts are adopted (their events) and the union
#   is exact for every value a live back-end sent; what n3's back-ends sent
#   after their last delivered value is reported as LOST, naming each of
#   them, and nothing is "missing";
# - the link comes back (and in the trap): n3's processes, fenced, leave, and
#   nothing of the run is left on any host.
# The address of eth0 is set once by cluster.sh (ip addr add), so it
# survives the link going down and up.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

HB=1000
top=$CASE_TMP/head.top
pidf=$CASE_TMP/fims.pid
vals=$CASE_TMP/values
link_down=0
cleanup() {
    [ "$link_down" = 0 ] || on n3 ip link set eth0 up
    link_down=0
    bg_signal head "$pidf" KILL 2>/dev/null
    wait 2>/dev/null
}
trap cleanup EXIT

on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"
nodes=$(topo_nodes "$top") || fail "cannot read $top"
n3_all=$(awk '$2 == "n3" { print $1 }' <<<"$nodes" | sort -n | tr '\n' ' ')
n3_be=$(awk '$2 == "n3" && $3 == "be" { print $1 }' <<<"$nodes" | sort -n | tr '\n' ' ')
n3_cn=$(awk '$2 == "n3" && $3 == "cn" { print $1 }' <<<"$nodes")
# The back-end of n3 whose parent is n3's own commnode: no one else sees it.
inner=$(awk -v p="n3:0" '
    { sub(/#.*/, "") } /=>/ { split($0, a, "=>"); gsub(/ /, "", a[1]); if (a[1] == p) print a[2] }' "$top" |
    tr ' ;' '\n\n' | grep -c '^n3:')
[ -n "$n3_be" ] && [ -n "$n3_cn" ] || fail "the topology has no commnode or back-end on n3: $n3_all"
echo "n3 holds ranks $n3_all(commnode $n3_cn; back-ends $n3_be); $inner back-end(s) under n3's own commnode"

bg_start head "$pidf" "$CASE_TMP/out" "$CASE_TMP/err" \
    "$B/bin/tbon_fims" -t "$top" --duration 12 --heartbeat $HB --dir "$vals" --timeout 100
# shellcheck disable=SC2154 # bg_pid: set by bg_start (lib.sh)
job=$bg_pid
out=$CASE_TMP/out
# Values flow from n3's back-ends (1 s of them) before the link goes.
first_be=${n3_be%% *}
wait_until 40 sh -c '[ -s "$1" ] && [ "$(wc -l <"$1")" -ge 40 ]' - "$vals/be-$first_be.txt" ||
    { cat "$out" "$CASE_TMP/err"; fail "no values from back-end $first_be within 40 s"; }
# Times are taken from just before the command (an upper bound each).
t_down=$(now_ms)
link_down=1
on n3 ip link set eth0 down || fail "ip link set eth0 down on n3"
echo "n3's eth0 down"

# Every rank of n3 reported failed; when each line appeared.
declare -A seen=()
nseen=0
while :; do
    for r in $n3_all; do
        [ -n "${seen[$r]:-}" ] && continue
        if grep -q "^t=[0-9.]* s: [a-z-]* $r on n3 failed (not killed by this run)$" "$out"; then
            seen[$r]=$(($(now_ms) - t_down))
            nseen=$((nseen + 1))
        fi
    done
    [ "$nseen" = "$(wc -w <<<"$n3_all")" ] && break
    [ $(($(now_ms) - t_down)) -lt $((3 * HB + 8000)) ] ||
        { cat "$out"; fail "not every rank of n3 reported failed within $((3 * HB + 8)) s: $nseen of $n3_all"; }
    sleep 0.1
done
on n3 ip link set eth0 up || fail "ip link set eth0 up on n3"
link_down=0
report="" late=0
for r in $n3_all; do
    report="$report $r:${seen[$r]}ms"
    [ "${seen[$r]}" -le $((HB + 1500)) ] || late=$((late + 1))
done
echo "result: n3's nodes reported failed after the link went down (heartbeat $HB ms):$report"
# Only the back-end(s) under n3's own commnode may take the adoption time too.
[ "$late" -le "$inner" ] ||
    fail "$late ranks of n3 were reported failed later than the heartbeat timeout + 1.5 s ($report)"
# libtbon/ft/view.c: orphan_ms, and TB_VIEW_ORPHAN_QUIET for an orphan
# never heard from
orphan_ms=$((HB > 1000 ? HB : 1000))
orphan_ms=$((orphan_ms + orphan_ms / 2))
for r in $n3_all; do
    [ "${seen[$r]}" -le $((HB + orphan_ms + 1500)) ] ||
        fail "rank $r of n3 reported failed only after ${seen[$r]} ms (at most $((HB + orphan_ms)) + 1500)"
done

wait_until 100 sh -c '! kill -0 "$1" 2>/dev/null' - "$job" || fail "tbon_fims still running"
wait "$job"
rc=$?
cat "$out"
[ "$rc" = 0 ] || { cat "$CASE_TMP/err"; fail "tbon_fims exited with $rc"; }
others=$(grep 'failed (not killed by this run)' "$out" | grep -v ' on n3 failed' || true)
[ -z "$others" ] || fail "nodes of other hosts reported failed: $others"
grep -q 'missing at the front-end' "$out" && fail "values of live back-ends are missing"
lost=$(grep '^tbon_fims: LOST with failed back-ends: ' "$out") || fail "no LOST line"
lost_ranks=$(sed 's/.*(\(.*\))$/\1/' <<<"$lost" | tr ',' '\n' | sort -n | tr '\n' ' ')
[ "$lost_ranks" = "$n3_be" ] || fail "LOST names back-ends $lost_ranks, n3's are $n3_be"
for r in $n3_be; do
    grep -q "^  back-end $r on n3 failed: sent [0-9]* values, [1-9][0-9]* lost (every one after its value #[0-9]*, the last that arrived)$" "$out" ||
        fail "back-end $r: no line saying its lost values all came after the last one that arrived"
done
n_lost=$(sed 's/.*: \([0-9]*\) distinct value.*/\1/' <<<"$lost")
grep -q "^tbon_fims: PASS: .*output == union of the live back-ends' inputs, $n_lost lost with failed back-ends .*no process left on 5 hosts$" "$out" ||
    fail "no PASS line with the live back-ends' union exact and $n_lost lost"
# The orphans of n3's commnode on other hosts were adopted.
orph=$(awk '
    { sub(/#.*/, "") }
    /=>/ { gsub(/;/, ""); p = $1; if (!(p in rank)) rank[p] = n++
           for (i = 3; i <= NF; i++) { rank[$i] = n++; if (p == "n3:0" && $i !~ /^n3:/) print rank[$i] } }' "$top")
[ -n "$orph" ] || fail "n3's commnode has no children on other hosts in $top"
for r in $orph; do
    grep -q "^t=[0-9.]* s: [a-z-]* $r on [a-z0-9]* adopted by [0-9]* (after a failure this run did not cause)$" "$out" ||
        fail "rank $r (a child of n3's commnode on another host) was not adopted"
done
echo "the children of n3's commnode on other hosts, ranks $(tr '\n' ' ' <<<"$orph")were adopted"
no_tbon_left 5
echo "result: the union exact for the live back-ends; $n_lost values reported LOST with n3's back-ends $n3_be"
