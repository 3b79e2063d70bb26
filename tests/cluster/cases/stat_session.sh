# stat_session.sh - tbon_stat --session on a hung sbatch job of 64 tasks
# over 4 nodes: start (the back-ends an srun step of the job, the tree left
# running), three samples from head each taking the tree over (every task
# in each merged tree, once), a sample while another holds the session
# refused, and stop: no tbon process left on any host, the session's
# directory gone. Then the same tasks named HOST:PID (back-ends over ssh).
# timeout: 300
. "$TBON/tests/cluster/stat_lib.sh"
trap stat_cleanup EXIT

N=64
stat_hang_job $N

D=$CASE_TMP/session OUT=$CASE_TMP/out
step "tbon_stat --session start --jobid $J"
on head timeout -k 10 60 "$B/bin/tbon_stat" --session "$D" start --jobid "$J" -o "$OUT" \
    >"$CASE_TMP/start.out" 2>"$CASE_TMP/start.err" ||
    fail "start: exit $? ($(cat "$CASE_TMP/start.err"))"
grep -q "session $D: $N tasks" "$CASE_TMP/start.out" || fail "start said: $(cat "$CASE_TMP/start.out")"
for h in n1 n2 n3 n4; do
    [ -n "$(tbon_procs "$h")" ] || fail "no tbon back-end on $h while the session waits"
done
for k in 0 1 2; do
    t0=$(now_ms)
    on head timeout -k 10 60 "$B/bin/tbon_stat" --session "$D" sample -n 2 -i 20 -q -o "$OUT" \
        >"$CASE_TMP/sample$k.out" 2>"$CASE_TMP/sample$k.err" ||
        fail "sample $k: exit $? ($(cat "$CASE_TMP/sample$k.err"))"
    step "sample $k in $(($(now_ms) - t0)) ms"
    TREE=$OUT/stat_hang.000$k/stat_hang.2D.txt
    grep -q "^/  $N:\[0-$((N - 1))\]$" "$TREE" ||
        fail "sample $k: the tree's root is not $N:[0-$((N - 1))]: $(head -1 "$TREE")"
    TASKS=$OUT/stat_hang.000$k/stat_hang.tasks.txt
    [ "$(grep -vc '^#' "$TASKS")" -eq $N ] || fail "sample $k: $TASKS has not $N tasks"
done
# While one tbon_stat holds the session, another is told so.
on head "$B/bin/tbon_stat" --session "$D" sample -n 50 -i 100 -q -o "$OUT" \
    >/dev/null 2>"$CASE_TMP/long.err" &
# It holds the tree once it has connections of its own (its children adopted it).
wait_until 20 on head sh -c 'ss -tnp 2>/dev/null | grep -q "\"tbon_stat\""' ||
    fail "the long sample never took the tree over"
if on head "$B/bin/tbon_stat" --session "$D" sample -q -o "$OUT" >/dev/null 2>"$CASE_TMP/busy.err"; then
    fail "a second sample got the session while another held it"
fi
grep -q "another tbon_stat" "$CASE_TMP/busy.err" || fail "the second sample said: $(cat "$CASE_TMP/busy.err")"
wait
step "tbon_stat --session stop"
on head timeout -k 10 60 "$B/bin/tbon_stat" --session "$D" stop >"$CASE_TMP/stop.out" \
    2>"$CASE_TMP/stop.err" || fail "stop: exit $? ($(cat "$CASE_TMP/stop.err"))"
[ ! -e "$D" ] || fail "$D is still there after stop"
no_tbon_left 10

# The same tasks named HOST:PID: a back-end per host over ssh, under a
# commnode on head; two samples, stop.
LIST=""
for h in $(on head scontrol show hostnames "$(on head squeue -h -j "$J" -o %N)"); do
    for p in $(node_tasks "$h" stat_hang | awk '{print $1}'); do LIST="$LIST${LIST:+,}$h:$p"; done
done
[ "$(echo "$LIST" | tr ',' '\n' | wc -l)" -eq $N ] || fail "not $N HOST:PID tasks: $LIST"
D2=$CASE_TMP/session2 OUT2=$CASE_TMP/out2
step "tbon_stat --session start -p HOST:PID,... ($N tasks)"
on head timeout -k 10 60 "$B/bin/tbon_stat" --session "$D2" start -p "$LIST" -o "$OUT2" \
    >"$CASE_TMP/start2.out" 2>"$CASE_TMP/start2.err" ||
    fail "start -p: exit $? ($(cat "$CASE_TMP/start2.err"))"
for k in 0 1; do
    on head timeout -k 10 60 "$B/bin/tbon_stat" --session "$D2" sample -n 1 -q -o "$OUT2" \
        >/dev/null 2>"$CASE_TMP/sample2$k.err" ||
        fail "sample -p $k: exit $? ($(cat "$CASE_TMP/sample2$k.err"))"
    grep -q "^/  $N:\[0-$((N - 1))\]$" "$OUT2/stat_hang.000$k/stat_hang.2D.txt" ||
        fail "sample -p $k: the tree's root is not $N:[0-$((N - 1))]"
done
on head timeout -k 10 60 "$B/bin/tbon_stat" --session "$D2" stop >/dev/null 2>"$CASE_TMP/stop2.err" ||
    fail "stop -p: exit $? ($(cat "$CASE_TMP/stop2.err"))"
no_tbon_left 10
echo "result: --jobid $J session: start, 3 exact samples, a busy session refused, stop; the same as HOST:PID over ssh: 2 exact samples; every host clean"
