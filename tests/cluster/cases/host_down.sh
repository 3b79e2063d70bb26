# host_down: a 4x4 over head,n1..n4 (n3 holds a commnode under the FE and
# back-ends under other commnodes) while n3 is off the network (eth0 down),
# then while n2's sshd is stopped: each time the front-end fails within the
# start-up timeout (30 s, tbon_frontend's default) plus 5 s, with an error
# line of its own naming the host, exits non-zero, and leaves nothing on any
# host. The link and sshd come back in a trap.
# timeout: 150
set -u
. "$TBON/tests/cluster/lib.sh"

sshd_pidfile=$CL_DIR/state/pid/sshd-n2.pid   # cluster.sh's own (see its start_sshd)
link_down=0 sshd_down=0
restore() {
    [ "$link_down" = 0 ] || on n3 ip link set eth0 up
    if [ "$sshd_down" = 1 ]; then
        on n2 /usr/sbin/sshd -o PidFile="$sshd_pidfile" -E "$CL_DIR/state/log/sshd-n2.log"
        wait_until 10 on head ssh n2 true || echo "sshd on n2 did not come back"
    fi
    link_down=0 sshd_down=0
}
trap restore EXIT

top=$CASE_TMP/head.top
on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"

try() {   # try NAME HOST
    local t0 took rc
    t0=$(now_ms)
    on head timeout 60 "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -w 1 \
        >"$CASE_TMP/$1.out" 2>"$CASE_TMP/$1.err"
    rc=$?
    took=$(($(now_ms) - t0))
    echo "== $1: exit $rc after $took ms"
    cat "$CASE_TMP/$1.out" "$CASE_TMP/$1.err"
    [ "$rc" -ne 124 ] || fail "$1: tbon_frontend still running after 60 s"
    [ "$rc" -ne 0 ] || fail "$1: tbon_frontend exited 0 with $2 unreachable"
    [ "$took" -le 35000 ] || fail "$1: tbon_frontend took $took ms to fail (start-up timeout 30 s)"
    grep -q "^tbon_frontend: .*\\b$2\\b" "$CASE_TMP/$1.err" ||
        fail "$1: no error line of tbon_frontend names the host $2"
    no_tbon_left
    echo "result: $1: the front-end named $2 and exited $rc after $took ms"
}

link_down=1
on n3 ip link set eth0 down || fail "cannot take n3's link down"
try link_down n3
restore
wait_until 10 on head ssh n3 true || fail "n3 not reachable again after its link came back"

[ -s "$sshd_pidfile" ] || fail "no pid file $sshd_pidfile: cannot stop n2's sshd"
sshd_down=1
on n2 kill "$(cat "$sshd_pidfile")" || fail "cannot stop n2's sshd"
wait_until 10 eval '! on head ssh n2 true 2>/dev/null' || fail "n2's sshd still answers"
try sshd_stopped n2
restore
