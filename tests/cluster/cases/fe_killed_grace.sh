# fe_killed_grace: a session that outlives its front-end across hosts
# (docs/user-guide.md, "Sessions"). A 4x4 over head,n1..n4 whose front-end,
# on head, has a grace (tbon_frontend --detach FILE --grace MS) runs a long
# wave loop; kill -9 of it. Every host keeps its processes; a new front-end
# on n1 reattaches from FILE, runs 3 waves (exact sums) and ends the session:
# no tbon process is left on any host. Then a second tree, killed the same
# way with nobody coming back: when its grace ends every process exits, on
# every host, and not before.
# timeout: 180
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/head.top
pidf=$CASE_TMP/fe.pid
file=$CASE_TMP/session
cleanup() {
    bg_signal head "$pidf" KILL
}
trap cleanup EXIT

on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"

# A front-end with a grace in a long loop, on head; 3 waves, then kill -9.
start_and_kill() {
    local grace=$1
    rm -f "$file"
    bg_start head "$pidf" "$CASE_TMP/out" "$CASE_TMP/err" \
        "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -w 100000 \
        --detach "$file" --grace "$grace" -- --delay 5
    wait_until 30 grep -q '^wave 2:' "$CASE_TMP/out" ||
        { cat "$CASE_TMP/err"; fail "the tree did not run 3 waves within 30 s"; }
    [ -s "$file" ] || fail "no session file $file while the tree runs"
    bg_signal head "$pidf" KILL || fail "kill -9 of the front-end failed"
    killed=$(now_ms)
    step "killed the front-end on head (grace $grace ms)"
}

start_and_kill 30000
# Within the grace every host keeps its part of the tree.
for h in $(cl_hosts); do
    [ -n "$(tbon_procs "$h")" ] || fail "$h has no tbon process within the grace"
done
t0=$(now_ms)
on n1 "$B/bin/tbon_frontend" --reattach "$file" -w 3 >"$CASE_TMP/re.out" 2>"$CASE_TMP/re.err" ||
    { cat "$CASE_TMP/re.err"; fail "the reattach from n1 failed"; }
step "reattached from n1 and ran 3 waves in $(($(now_ms) - t0)) ms"
expect_waves "$top" "$CASE_TMP/re.out" 3
no_tbon_left 10
[ ! -e "$file" ] || fail "the session file is still there after the session's end"
echo "result: kill -9 of the FE on head, reattach from n1: 3 exact waves, every host clean"

grace=4000
start_and_kill $grace
# Nobody comes: every host clean after the grace, none before. A look at
# a host takes its time on a loaded machine: a host found empty is a
# failure only when the look ended within the grace; at least one host
# must have been seen inside it, or the check proved nothing.
seen=0
for h in $(cl_hosts); do
    p=$(tbon_procs "$h")
    at=$(($(now_ms) - killed))
    [ "$at" -lt "$grace" ] || break
    [ -n "$p" ] || fail "$h lost its processes $at ms after the kill, before the grace ($grace ms) ended"
    seen=$((seen + 1))
done
[ "$seen" -gt 0 ] || fail "no host could be looked at within the grace ($grace ms)"
step "$seen hosts still had their processes within the grace"
wait_until 20 _all_left || { printf '%s' "$_left"; fail "tbon processes left 20 s after the kill"; }
gone=$(($(now_ms) - killed))
[ "$gone" -ge $((grace - 200)) ] || fail "the tree ended $gone ms after the kill, before its grace ($grace ms)"
echo "result: grace $grace ms: every host clean $gone ms after kill -9 of the FE"
no_tbon_left 0
