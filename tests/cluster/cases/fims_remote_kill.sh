# fims_remote_kill: tbon_fims on a 4x4 over head,n1..n4 (every commnode on a
# node, none on head), run from head with a kill schedule. Each victim must
# be killed on its own topology host by the tool's agent there (the line of
# the injection names the host, checked against the topology), every kill
# must have its failure event, the union at the front-end must be exactly
# what the back-ends sent, and nothing of the run may be left on any host
# (the tool checks every host itself, then no_tbon_left does).
# timeout: 150
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/head.top
pidf=$CASE_TMP/fims.pid
cleanup() {
    bg_signal head "$pidf" KILL 2>/dev/null
    wait 2>/dev/null
}
trap cleanup EXIT

on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"
nodes=$(topo_nodes "$top") || fail "cannot read $top"

# Three of the four commnodes, one at a time, then the tool checks.
bg_start head "$pidf" "$CASE_TMP/out" "$CASE_TMP/err" \
    "$B/bin/tbon_fims" -t "$top" --duration 8 --schedule 1.5:one,3:one,4.5:depth1 \
    --dir "$CASE_TMP/values" --timeout 100 --seed 16
# shellcheck disable=SC2154 # bg_pid: set by bg_start (lib.sh)
job=$bg_pid
wait_until 130 sh -c '! kill -0 "$1" 2>/dev/null' - "$job" || fail "tbon_fims still running after 130 s"
wait "$job"
rc=$?
out=$CASE_TMP/out
cat "$out"
[ "$rc" = 0 ] || { cat "$CASE_TMP/err"; fail "tbon_fims exited with $rc"; }
grep -q '^tbon_fims: PASS: .*output == union of inputs, none reported twice, 3 kills (3 on other hosts), each reported failed, no process left on 5 hosts$' "$out" ||
    fail "no PASS line with 3 kills on other hosts and 5 hosts clean"
grep -q 'LOST\|missing at the front-end\|failed (not killed' "$out" &&
    fail "a loss, a missing value or a failure nobody caused was reported"

# Every victim was killed where the topology puts it, not on head.
n=0
while read -r rank host pid; do
    want=$(awk -v r="$rank" '$1 == r { print $2 }' <<<"$nodes")
    role=$(awk -v r="$rank" '$1 == r { print $3 }' <<<"$nodes")
    [ "$role" = cn ] || fail "victim $rank is not a commnode (role $role)"
    [ "$host" = "$want" ] || fail "commnode $rank was killed on $host, its topology host is $want"
    [ "$host" != head ] || fail "commnode $rank was on head: no remote kill"
    echo "commnode $rank killed on $host (pid $pid there)"
    n=$((n + 1))
done < <(grep -o 'killed commnode [0-9]* on [a-z0-9]* (pid [0-9]*, through its agent)' "$out" |
         awk '{ gsub(/[(,]/, " "); print $3, $5, $7 }')
[ "$n" = 3 ] || fail "$n remote kills named in the injection lines, expected 3"
no_tbon_left 5
rec=$(awk '/^inj +at_s/ { t = 1; next } t && /^[0-9]/ { printf "%s%s ms", n++ ? ", " : "", $7 } /^\(overall/ { t = 0 }' "$out")
echo "result: 3 commnodes killed on their own hosts through the agents, recovered in $rec; union exact; every host clean"
