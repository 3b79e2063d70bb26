# slow_logins: every remote launch through shared/cluster/tools/slow-ssh
# (ssh after 1.5 s: a login shell that loads modules), heartbeat timeout at
# its default (3000 ms). A 4x4 (one slow level under each commnode) and a
# 2x2x4 (two: a level-1 commnode waits ~4 s between its connection and its
# subtree's readiness) over head,n1..n4: each must start, answer 3 exact
# waves, and fence no node (tbon_frontend --events prints no failure, and
# nothing is "taken for failed" or "fenced").
# timeout: 150
set -u
. "$TBON/tests/cluster/lib.sh"

slow=$(dirname "$C")/tools/slow-ssh
[ -x "$slow" ] || fail "no $slow"
# The remote shell travels to the commnodes; SLOW_SSH_S may not: a wrapper
# on the shared file system carries it.
rsh=$CASE_TMP/slow-rsh
printf '#!/bin/sh\nSLOW_SSH_S=1.5 exec %s "$@"\n' "$slow" >"$rsh"
chmod +x "$rsh"

try() {   # try SHAPE
    local top=$CASE_TMP/$1.top t0 rc
    on head "$B/bin/tbon_topgen" --shape "$1" --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"
    t0=$(now_ms)
    on head env TBON_RSH="$rsh" timeout -k 10 40 "$B/bin/tbon_frontend" -t "$top" \
        -b "$B/bin/tbon_example_be" -w 3 --events >"$CASE_TMP/$1.out" 2>"$CASE_TMP/$1.err"
    rc=$?
    echo "== $1: exit $rc after $(($(now_ms) - t0)) ms"
    cat "$CASE_TMP/$1.out" "$CASE_TMP/$1.err"
    no_tbon_left 5
    [ "$rc" -ne 124 ] || fail "$1: tbon_frontend did not finish 3 waves within 40 s"
    [ "$rc" -eq 0 ] || fail "$1: tbon_frontend exited $rc"
    ! grep '^event: ' "$CASE_TMP/$1.out" | grep -v '^event: view [0-9]* is stable$' ||
        fail "$1: membership events other than a stable view (a node failed, was adopted, ...)"
    ! grep -E 'taken for failed|fenced' "$CASE_TMP/$1.err" || fail "$1: a node was fenced"
    expect_waves "$top" "$CASE_TMP/$1.out" 3
    echo "result: $1: $(grep -o 'started tree: .*' "$CASE_TMP/$1.err" | sed 's/ *$//'), 3 exact waves, nothing fenced"
}

try 4x4
try 2x2x4
