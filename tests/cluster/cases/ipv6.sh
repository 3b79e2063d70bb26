# ipv6: a tree whose hosts are known by IPv6 names only. Every host gets an
# address fd77::X on eth0 (X from its IPv4 10.77.0.X) and every host's
# /etc/hosts the names head6, n16, ... for them (both undone in the trap).
# ssh still logs in over IPv4 (the emulated sshd listens on 0.0.0.0 only): a
# TBON_RSH wrapper maps n16 to n1. tbon's own connections follow the
# topology's names, so they are IPv6: the parents advertise their IPv6
# address, exact sums come back, the established tree connections on the
# nodes are between fd77:: addresses, and a commnode killed on n2 is
# replaced by adoptions over IPv6 with later waves exact.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

hosts=$(cl_hosts)
pidf=$CASE_TMP/fe.pid
v6() {   # the IPv6 address of a host
    local v4
    v4=$(on "$1" ip -4 -o addr show dev eth0 | awk '{ split($4, a, "/"); print a[1] }')
    echo "fd77::${v4##*.}"
}
cleanup() {
    bg_signal head "$pidf" KILL
    for h in $hosts; do
        f=/etc/netns/$CL_PREFIX-$h/hosts
        [ -f "$CASE_TMP/hosts.$h" ] && cat "$CASE_TMP/hosts.$h" >"$f"    # same inode: the bind stays
        [ -n "${addr[$h]:-}" ] && on "$h" ip -6 addr del "${addr[$h]}/64" dev eth0 2>/dev/null
    done
}
declare -A addr
trap cleanup EXIT

lines=""
for h in $hosts; do
    addr[$h]=$(v6 "$h")
    on "$h" sh -c 'sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.eth0.disable_ipv6=0' ||
        skip "no IPv6 in the host namespaces"
    on "$h" ip -6 addr add "${addr[$h]}/64" dev eth0 nodad || fail "ip -6 addr add on $h"
    lines="$lines${addr[$h]} ${h}6
"
done
for h in $hosts; do
    f=/etc/netns/$CL_PREFIX-$h/hosts
    cp "$f" "$CASE_TMP/hosts.$h"
    printf '%s' "$lines" >>"$f"
done
on n1 getent ahosts n26 | grep -q 'fd77::' || fail "n26 does not resolve to IPv6 on n1"
on n1 getent ahostsv4 n26 >/dev/null && fail "n26 resolves to IPv4 too: the case would prove nothing"

cat >"$CASE_TMP/rsh6" <<'RSH'
#!/bin/sh
# ssh to the IPv4 name of an IPv6 host name (n16 -> n1)
h=$1
shift
exec ssh -o BatchMode=yes "${h%6}" "$@"
RSH
chmod +x "$CASE_TMP/rsh6"

top=$CASE_TMP/v6.top
on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head6,n16,n26,n36,n46 -o "$top" || fail "tbon_topgen"
on head env TBON_RSH="$CASE_TMP/rsh6" timeout -k 10 60 "$B/bin/tbon_frontend" -t "$top" \
    -b "$B/bin/tbon_example_be" -w 3 >"$CASE_TMP/out" 2>"$CASE_TMP/err"
rc=$?
cat "$CASE_TMP/out" "$CASE_TMP/err"
[ "$rc" -eq 0 ] || fail "tbon_frontend over IPv6 names exited $rc"
expect_waves "$top" "$CASE_TMP/out" 3
no_tbon_left

# a long run: the connections, then a commnode killed
bg_start head "$pidf" "$CASE_TMP/out2" "$CASE_TMP/err2" env TBON_RSH="$CASE_TMP/rsh6" \
    "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -w 100000 --events -- --delay 20
wait_until 30 grep -qs '^wave 1:' "$CASE_TMP/out2" || { cat "$CASE_TMP/err2"; fail "no wave 1"; }
conns=$(on n2 ss -Htn state established)
echo "$conns" | head -5
v6n=$(grep -c 'fd77::' <<<"$conns")
v4n=$(grep -E -c '10\.77\.0\.[0-9]+:[0-9]+ +10\.77' <<<"$conns" || true)
echo "n2: $v6n IPv6 connections"
[ "$v6n" -ge 2 ] || fail "n2's tree connections are not over IPv6"
cn=$(tbon_procs n2 | awk '$2 == "tbon_commnode" { print $1; exit }')
[ -n "$cn" ] || fail "no commnode on n2"
on n2 kill -9 "$cn"
wait_until 30 grep -qs 'adopted' "$CASE_TMP/out2" "$CASE_TMP/err2" || { cat "$CASE_TMP/err2"; fail "no adoption after the kill"; }
last=$(grep -c '^wave ' "$CASE_TMP/out2")
wait_until 30 sh -c "[ \$(grep -c '^wave ' $CASE_TMP/out2) -ge $((last + 3)) ]" || fail "no waves after the adoption"
bg_signal head "$pidf" TERM
fe_ended() { ! kill -0 "$bg_pid" 2>/dev/null; }
wait_until 30 fe_ended || fail "the front-end did not end"
wait "$bg_pid"
# the waves after the failure sum over the back-ends still alive: all of
# them (the killed commnode's back-ends were adopted)
n=$(grep -c '^wave ' "$CASE_TMP/out2")
want=$(wave_line "$top" $((n - 1)))
grep -qxF "$want" "$CASE_TMP/out2" || { tail -3 "$CASE_TMP/out2"; fail "the last wave is not exact: $want"; }
echo "result: $v6n IPv6 connections on n2; $n waves, the last exact after a commnode kill"
no_tbon_left
