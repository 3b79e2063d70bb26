# slurm_attach_step: back-ends that are a step of an existing job. A running
# sbatch job (4 nodes); tbon_frontend on head with a 2x2 tree (4 back-ends
# on head) and --attach FILE; then ONE step beside the job, `srun --overlap
# --overcommit --jobid J -N4 --ntasks-per-node=2 tbon_example_be --attach
# FILE`: its 8 tasks join the running tree through the attach file (ranks 7
# to 14, in the order they come), the FE reports 8 joins, and the waves from
# then on sum over all 12 back-ends exactly. The FE's end ends the step's
# back-ends; nothing left on any host; the job cancelled.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/2x2.top
att=$CASE_TMP/tree.attach
pidf=$CASE_TMP/fe.pid
j=""
cleanup() {
    bg_signal head "$pidf" KILL
    [ -z "$j" ] || on head scancel "$j" 2>/dev/null
}
trap cleanup EXIT

on head "$B/bin/tbon_topgen" --shape 2x2 --hosts head -o "$top" || fail "tbon_topgen"
j=$(on head sbatch --parsable -N4 -J tbon-attach-case -o /dev/null --wrap "sleep 300") || fail "sbatch: $j"
running() { [ "$(on head squeue -h -j "$j" -o %t)" = R ]; }
wait_until 60 running || fail "job $j not running after 60 s"

bg_start head "$pidf" "$CASE_TMP/out" "$CASE_TMP/err" "$B/bin/tbon_frontend" -t "$top" \
    -b "$B/bin/tbon_example_be" --attach "$att" -w 100000 --events -- --delay 20
wait_until 30 test -s "$att" || { cat "$CASE_TMP/err"; fail "no attach file"; }
wait_until 30 grep -qs '^wave 1:' "$CASE_TMP/out" || { cat "$CASE_TMP/err"; fail "no wave 1"; }

on head srun --overlap --overcommit --jobid="$j" -N4 --ntasks-per-node=2 --quiet \
    "$B/bin/tbon_example_be" --attach "$att" >"$CASE_TMP/step.out" 2>&1 &
step=$!
joined() { [ "$(grep -c '^event: node .* joined under' "$CASE_TMP/out")" -ge 8 ]; }
wait_until 60 joined || { grep event "$CASE_TMP/out"; cat "$CASE_TMP/step.out"; fail "8 joins not seen within 60 s"; }
grep '^event: node .* joined under' "$CASE_TMP/out"
# every back-end of the step is on a node of the job, two per node
for h in n1 n2 n3 n4; do
    n=$(tbon_procs "$h" | grep -c 'tbon_example_b')
    [ "$n" -eq 2 ] || { tbon_procs "$h"; fail "$h runs $n back-ends, expected 2"; }
done
# from the first wave that began after the last join: back-ends 3-6 and 7-14
first=$(($(grep -c '^wave ' "$CASE_TMP/out") + 1))
more() { [ "$(grep -c '^wave ' "$CASE_TMP/out")" -ge $((first + 5)) ]; }
wait_until 30 more || fail "no 5 waves after the joins"
fe=$(tbon_procs head | awk '$2 == "tbon_frontend" { print $1; exit }')
on head kill -TERM "$fe"
fe_ended() { ! kill -0 "$bg_pid" 2>/dev/null; }
wait_until 30 fe_ended || fail "the front-end did not end"
wait "$bg_pid"
n=$(grep -c '^wave ' "$CASE_TMP/out")
for ((w = first; w < n; w++)); do
    want="wave $w: sum = $((102 + 12 * w)) (from 12 back-ends)"
    grep -qxF "$want" "$CASE_TMP/out" || { grep "^wave $w:" "$CASE_TMP/out"; fail "expected \"$want\""; }
done
step_ended() { ! kill -0 "$step" 2>/dev/null; }
wait_until 30 step_ended || fail "the step's back-ends did not end with the session"
wait "$step"
echo "result: 8 back-ends of job $j's step joined; waves $first-$((n - 1)) exact over 12"
no_tbon_left
