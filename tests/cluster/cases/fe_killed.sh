# fe_killed: a 4x4 over head,n1..n4 in a long wave loop; kill -9 of the
# front-end. Every host must be clean of tbon_* processes within 1 s of the
# kill (docs/fault-tolerance.md: "if it dies, the session ends and every
# process exits within a second"). A watcher on each host, started before the
# kill, reads its own /proc every 10 ms and notes when the last tbon_*
# process went; the case prints each host's time.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/head.top
pidf=$CASE_TMP/fe.pid
W=$CASE_TMP/watch
mkdir -p "$W"
cleanup() {
    bg_signal head "$pidf" KILL
    : >"$W/stop"
}
trap cleanup EXIT

on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"
bg_start head "$pidf" "$CASE_TMP/out" "$CASE_TMP/err" \
    "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -w 100000 -- --delay 5
wait_until 30 grep -q '^wave 2:' "$CASE_TMP/out" || { cat "$CASE_TMP/err"; fail "the tree did not run 3 waves within 30 s"; }
grep '^wave [012]:' "$CASE_TMP/out" >"$CASE_TMP/first3"
expect_waves "$top" "$CASE_TMP/first3" 3
for h in $(cl_hosts); do
    [ -n "$(tbon_procs "$h")" ] || fail "no tbon process on $h before the kill"
done

# One watcher per host, in that host's PID namespace: after the kill, poll
# /proc (no process started per look) until no tbon_* process is left; write
# the time (bash's EPOCHREALTIME; the hosts share the clock) or "timeout".
watch='
h=$1 W=$2
: >"$W/ready-$h"
while [ ! -e "$W/killed" ] && [ ! -e "$W/stop" ]; do sleep 0.01; done
end=$((${EPOCHREALTIME%.*} + 10))
while [ ! -e "$W/stop" ]; do
    left=""
    for d in /proc/[0-9]*; do
        read -r c <"$d/comm" 2>/dev/null || continue
        case $c in tbon_*) left="$left ${d#/proc/}:$c" ;; esac
    done
    if [ -z "$left" ]; then echo "$EPOCHREALTIME" >"$W/clean-$h"; exit 0; fi
    if [ "${EPOCHREALTIME%.*}" -ge "$end" ]; then echo "timeout:$left" >"$W/clean-$h"; exit 0; fi
    sleep 0.01
done'
for h in $(cl_hosts); do
    on "$h" bash -c "$watch" - "$h" "$W" &
done
for h in $(cl_hosts); do
    wait_until 10 test -e "$W/ready-$h" || fail "the watcher on $h did not start"
done

fe=$(cat "$pidf")
on head bash -c 't=$EPOCHREALTIME; kill -KILL "$1" && echo "$t" >"$2/killed.tmp" && mv "$2/killed.tmp" "$2/killed"' \
    - "$fe" "$W" || fail "kill -9 of the front-end failed"
echo "killed the front-end (pid $fe on head) at $(cat "$W/killed")"
for h in $(cl_hosts); do
    wait_until 15 test -s "$W/clean-$h" || fail "the watcher on $h gave no answer"
done
wait

worst=0 report=""
k=$(cat "$W/killed")
for h in $(cl_hosts); do
    c=$(cat "$W/clean-$h")
    case $c in
    timeout:*) fail "$h still has tbon processes 10 s after the front-end was killed:${c#timeout:}" ;;
    esac
    ms=$(awk -v a="$k" -v b="$c" 'BEGIN { printf "%d", (b - a) * 1000 }')
    report="$report $h $ms,"
    [ "$ms" -le "$worst" ] || worst=$ms
done
echo "result: every host clean of tbon processes $worst ms after kill -9 of the FE (ms:${report%,})"
[ "$worst" -le 1000 ] || fail "a host kept tbon processes for $worst ms after kill -9 of the front-end (at most 1000 ms)"
no_tbon_left 0
