# host_firewall: a link that drops every packet without a word (seed 004,
# section 4: a link found broken by its missing acknowledgements). A 4x4
# over head,n1..n4 at the default heartbeat timeout (3000 ms) runs a long
# concat wave loop (--events); then a firewall rule in n3's namespace drops
# everything in and out of its eth0 (iptables DROP: no reset, no ICMP, the
# processes on n3 running on). Twice, a fresh tree each time:
#  1. TBON_ACK_TIMEOUT_MS=0, heartbeats alone: n3's commnode cannot be
#     suspected sooner than 3/4 of the timeout after the rule (2250 ms: the
#     last beat it sent may have come a quarter of the timeout before);
#  2. the default acknowledgement timeout (a third of the heartbeat timeout:
#     1000 ms): the FE, the commnode's parent, finds that n3's kernel has
#     acknowledged none of its beats and says so on its terminal, with how
#     long the kernel had heard nothing: under 3000 ms, so before silence
#     could have reached the heartbeat timeout (what the FE's application
#     heard last came no sooner than what its kernel did), whatever the
#     machine's load. The times from the rule to the suspicion are
#     reported for both runs.
# Both: every node on n3 reported failed, the children of n3's commnode on
# other hosts adopted, and four waves afterwards exactly those of the
# back-ends off n3. The rule goes in the trap too; nothing may be left on
# any host.
# timeout: 150
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/head.top
pidf=$CASE_TMP/fe.pid
out=$CASE_TMP/out
err=$CASE_TMP/err
walled=0
# (-w: the hosts share the file system, so xtables' lock file too; without
# it an iptables that meets another holding the lock fails at once. A run
# of CI once left the rules in place, and the next tree could not reach n3.)
unwall() {
    if [ "$walled" != 0 ]; then
        on n3 iptables -w 10 -F || echo "host_firewall: iptables -F on n3 failed" >&2
        [ -z "$(on n3 iptables -w 10 -S | grep -- '-j DROP')" ] ||
            echo "host_firewall: n3 still drops packets after iptables -F" >&2
    fi
    walled=0
}
cleanup() {
    unwall
    bg_signal head "$pidf" KILL 2>/dev/null
}
trap cleanup EXIT

on n3 iptables -L -n >/dev/null 2>&1 || fail "no iptables on the hosts (scripts/deps.sh installs it)"
on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"
nodes=$(topo_nodes "$top")
lost=$(awk '$2 == "n3" { print $1 }' <<<"$nodes")
cn=$(awk '$2 == "n3" && $3 == "cn" { print $1 }' <<<"$nodes")
[ "$(awk -v c="$cn" '$1 == c { print $4 }' <<<"$nodes")" = 0 ] ||
    fail "n3's commnode $cn is not a child of the front-end in $top"
orphans=$(awk -v p="$cn" '$2 != "n3" && $4 == p { print $1 }' <<<"$nodes")
alive=$(awk '$3 == "be" && $2 != "n3" { print $1 }' <<<"$nodes" | sort -n | tr '\n' ' ')
echo "on n3: ranks $(echo $lost); commnode $cn, its children elsewhere: $(echo $orphans)"

all_failed() {
    local r
    for r in $lost; do grep -q "^event: node $r failed" "$out" || return 1; done
}
adopted() {
    local k
    for k in $orphans; do grep -q "^event: node $k adopted by " "$out" || return 1; done
}
suspected() { grep -Eq "^event: node $cn (suspected|failed)" "$out"; }

# When the FE suspected rank $cn, by its own log line (ms since the epoch;
# every host shares this machine's clock): the application prints its
# events between waves, later than that when a wave waits.
fe_suspected_ms() {
    local line ts
    line=$(grep -E "warn rank=0 fe \[ft\] rank $cn(:| sent nothing)" "$err" | head -n 1)
    ts=${line%%Z *}
    [ -n "$line" ] && date -d "${ts}Z" +%s%3N
}

# One run: the tree, the rule, the commnode's suspicion (its time in
# $found, ms after the rule's command began, by the FE's log), the outcome
# checked.
run() {
    local ack=$1 w0 bad
    bg_start head "$pidf" "$out" "$err" env TBON_ACK_TIMEOUT_MS="$ack" \
        "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -f concat -k array \
        -w 100000 --events -- --delay 5
    wait_until 30 grep -q '^wave 2:' "$out" || { cat "$err"; fail "the tree did not run 3 waves within 30 s"; }
    local t0
    t0=$(now_ms)
    walled=1
    on n3 sh -c 'iptables -w 10 -A INPUT -i eth0 -j DROP && iptables -w 10 -A OUTPUT -o eth0 -j DROP' ||
        fail "cannot add the firewall rules on n3"
    wait_until 20 suspected || { cat "$out" "$err"; fail "rank $cn not suspected within 20 s of the rule"; }
    local at
    at=$(fe_suspected_ms) || { cat "$err"; fail "no line of the FE's log says it suspected rank $cn"; }
    found=$((at - t0))
    wait_until 30 all_failed || { cat "$out"; fail "not every node on n3 ($(echo $lost)) failed within 30 s"; }
    wait_until 20 adopted || { cat "$out"; fail "rank $cn's children elsewhere ($(echo $orphans)) not adopted"; }
    step "TBON_ACK_TIMEOUT_MS=${ack:-default}: rank $cn suspected after $found ms, every node on n3 failed"
    w0=$(grep -c '^wave ' "$out")
    enough() { [ "$(grep -c '^wave ' "$out")" -ge $((w0 + 5)) ]; }
    wait_until 30 enough || fail "no 5 waves within 30 s after the failures"
    grep '^wave ' "$out" | tail -n +$((w0 + 2)) | head -n 4 >"$CASE_TMP/after"
    bad=$(concat_waves_wrong "$CASE_TMP/after" "$alive")
    [ -z "$bad" ] || { printf '%s\n' "$bad" | head -n 5; fail "waves after the failures are wrong"; }
    unwall
    [ -z "$(on n3 iptables -w 10 -S | grep -- '-j DROP')" ] || fail "n3 still drops packets after the rule's removal"
    bg_signal head "$pidf" TERM || fail "cannot signal the front-end"
    fe_ended() { ! kill -0 "$bg_pid" 2>/dev/null; }
    wait_until 30 fe_ended || fail "the front-end did not end within 30 s of SIGTERM"
    wait "$bg_pid"
    no_tbon_left 15
}

run 0
hb_ms=$found
grep -q 'acknowledged nothing' "$err" &&
    fail "the acknowledgement timeout is off, yet the front-end says a kernel acknowledged nothing"
[ "$hb_ms" -ge 2250 ] ||
    fail "heartbeats alone suspected rank $cn after $hb_ms ms, sooner than they can (2250 ms)"
run ""
said=$(grep -o "rank $cn: its kernel has acknowledged nothing for [0-9]* ms" "$err" | head -n 1)
[ -n "$said" ] ||
    { cat "$err"; fail "the front-end did not say that rank $cn's kernel acknowledged nothing"; }
quiet_ms=$(sed 's/.* for \([0-9]*\) ms/\1/' <<<"$said")
[ "$quiet_ms" -lt 3000 ] ||
    fail "rank $cn was found by its link only after $quiet_ms ms of silence, no sooner than heartbeats"
echo "result: a firewall dropping n3's packets: rank $cn suspected after $found ms by the acknowledgement timeout (1000 ms; its kernel silent $quiet_ms ms), $hb_ms ms by heartbeats alone (3000 ms); n3's nodes failed, orphans adopted, waves exact"
