# stat_wrong_input.sh - tbon_stat on what is not there: a job that does not
# exist, a job that has ended, a pid that is not on the host named, and a
# running job whose step holds no task. Each: non-zero exit, a message that
# names it, no results, and nothing left on any host (no tbon process, no
# attach file, no extra job step).
. "$TBON/tests/cluster/stat_lib.sh"
trap 'stat_cleanup; wait' EXIT

OUT=$CASE_TMP/out
# expect_error WHAT PATTERN CMD...: CMD on head fails with PATTERN on stderr.
expect_error() {
    local what=$1 pat=$2 rc=0
    shift 2
    on head "$@" >"$CASE_TMP/o" 2>"$CASE_TMP/e" || rc=$?
    [ "$rc" -ne 0 ] || fail "$what: exit 0 ($(cat "$CASE_TMP/o"))"
    grep -qE -e "$pat" "$CASE_TMP/e" || fail "$what: exit $rc, stderr [$(cat "$CASE_TMP/e")], not /$pat/"
    echo "result: $what: exit $rc: $(head -1 "$CASE_TMP/e")"
    ! ls "$OUT" 2>/dev/null | grep -q . || fail "$what: it left $(ls -a "$OUT")"
}

expect_error "--jobid of no job" "--jobid 987654: no such job" \
    timeout -k 10 60 "$B/bin/tbon_stat" --jobid 987654 -o "$OUT"

stat_submit -N1 -o /dev/null --wrap true
J=$JOB
_ended() { ! on head squeue -h -j "$J" -o %T 2>/dev/null | grep -q .; }
wait_until 30 _ended || fail "job $J (true) still in squeue after 30 s"
expect_error "--jobid of an ended job" "--jobid $J: (the job is [A-Z]+, not running|no such job)" \
    timeout -k 10 60 "$B/bin/tbon_stat" --jobid "$J" -o "$OUT"

# A pid that was n2's and is no more: the shell that printed it.
P=$(on n2 sh -c 'echo $$')
_gone() { ! on n2 kill -0 "$P" 2>/dev/null; }
wait_until 5 _gone || fail "n2:$P still there"
expect_error "-p n2:$P (not there)" "no such process: n2:$P" \
    timeout -k 10 60 "$B/bin/tbon_stat" -p "n2:$P" -o "$OUT"
# Still not there with a good one beside it: nothing is sampled.
Q=$(on n2 pgrep -xo sshd)
expect_error "-p n2:$Q,n2:$P" "no such process: n2:$P \\(nothing was sampled\\)\$" \
    timeout -k 10 60 "$B/bin/tbon_stat" -p "n2:$Q,n2:$P" -o "$OUT"

# A running job of 4 tasks, and a step it does not have.
stat_submit -N2 -n4 -o /dev/null --wrap "srun sleep 300"
J=$JOB
wait_until 30 job_tasks_running "$J" 4 sleep || fail "job $J: not 4 tasks after 30 s"
expect_error "--jobid $J --step 5 (no such step)" "job $J: no task found on its 2 nodes in the steps asked for" \
    timeout -k 10 60 "$B/bin/tbon_stat" --jobid "$J" --step 5 -o "$OUT"
steps=$(on head squeue -h -s -j "$J" -o %i | sort | tr '\n' ' ')
[ "$steps" = "$J.0 $J.batch " ] || fail "job $J has steps [$steps] after tbon_stat (its own step left?)"

# The back-ends' step fails to start (an srun that refuses): srun's message,
# then tbon_stat's, at once; no attach file left.
mkdir -p "$CASE_TMP/fake"
printf '#!/bin/sh\necho "srun: error: this srun refuses" >&2\nexit 1\n' >"$CASE_TMP/fake/srun"
chmod +x "$CASE_TMP/fake/srun"
expect_error "--jobid $J with a failing srun" "the back-ends' srun step ended \\(status 1\\) before every back-end attached" \
    env PATH="$CASE_TMP/fake:$PATH" timeout -k 10 60 "$B/bin/tbon_stat" --jobid "$J" -o "$OUT"
grep -q "this srun refuses" "$CASE_TMP/e" || fail "srun's own message did not reach the terminal"
rm -rf "$OUT"

# One task of the job killed: the others are sampled, the lost rank is named
# (on stderr and as a frame of its own), and the exit is 1.
victim=
for h in $(on head scontrol show hostnames "$(on head squeue -h -j "$J" -o %N)"); do
    victim=$(node_tasks "$h" sleep | awk '$2 == 1 { print $1 }')
    [ -z "$victim" ] || { vhost=$h; break; }
done
[ -n "$victim" ] || fail "job $J: no task of rank 1 found on its nodes"
on "$vhost" kill -9 "$victim"
_victim_gone() { ! on "$vhost" kill -0 "$victim" 2>/dev/null; }
wait_until 5 _victim_gone || fail "$vhost:$victim survived kill -9"
rc=0
on head timeout -k 10 60 "$B/bin/tbon_stat" --jobid "$J" -n 1 -o "$OUT" >"$CASE_TMP/o" 2>"$CASE_TMP/e" || rc=$?
[ "$rc" -eq 1 ] || fail "--jobid $J with rank 1 killed: exit $rc, not 1 ($(cat "$CASE_TMP/e"))"
grep -q "job $J step 0 has 4 tasks; 1 not found on any of its nodes: rank 1$" "$CASE_TMP/e" ||
    fail "--jobid $J with rank 1 killed: stderr [$(cat "$CASE_TMP/e")] does not name rank 1"
grep -q '^  \[task not found\]  1:\[1\]$' "$OUT"/sleep.*/sleep.2D.txt ||
    fail "no [task not found] frame for rank 1 in $(cat "$OUT"/sleep.*/sleep.2D.txt)"
grep -q '^/  4:\[0-3\]$' "$OUT"/sleep.*/sleep.2D.txt || fail "the tree is not of 4 tasks"
echo "result: --jobid $J with rank 1 killed: exit 1: $(grep 'not found' "$CASE_TMP/e" | head -1)"

# A second step in the job (one task, rank 0 again): --jobid numbers the
# tasks of both in (step, rank) order and says so; -p with both rank-0
# tasks names the two.
rm -rf "$OUT"
on head srun --overlap --jobid "$J" -N1 -n1 sleep 300 >/dev/null 2>&1 &
_two_steps() {
    [ "$(on head squeue -h -s -j "$J" -o %i | grep -cE "^$J\.[0-9]+$")" -eq 2 ] &&
        job_tasks_running "$J" 4 sleep
}
wait_until 30 _two_steps || fail "job $J: no second step with its task after 30 s"
S2=$(on head squeue -h -s -j "$J" -o %i | grep -E "^$J\.[0-9]+$" | grep -vx "$J.0")
S2=${S2#*.}
rc=0
on head timeout -k 10 60 "$B/bin/tbon_stat" --jobid "$J" -n 1 -o "$OUT" >"$CASE_TMP/o" 2>"$CASE_TMP/e" || rc=$?
[ "$rc" -eq 1 ] || fail "--jobid $J (two steps, rank 1 of step 0 gone): exit $rc"
grep -q "tasks of 2 steps: numbered in (step, rank) order" "$CASE_TMP/e" ||
    fail "--jobid $J with two steps: stderr [$(cat "$CASE_TMP/e")]"
T=$(ls "$OUT"/sleep.*/sleep.tasks.txt)
[ "$(grep -v '^#' "$T" | awk '{print $1, $2, $5}' | tr '\n' ' ')" = "0 0 0: 1 2 0: 2 3 0: 3 0 $S2: " ] ||
    fail "--jobid $J with two steps: tasks [$(cat "$T")]"
t0=$(grep -v '^#' "$T" | awk '$2 == 0 && $5 == "0:" { print $3 ":" $4 }')
t1=$(grep -v '^#' "$T" | awk -v s="$S2:" '$2 == 0 && $5 == s { print $3 ":" $4 }')
rc=0
on head timeout -k 10 60 "$B/bin/tbon_stat" -p "$t0,$t1" -n 1 -o "$OUT" >"$CASE_TMP/o" 2>"$CASE_TMP/e" || rc=$?
[ "$rc" -eq 0 ] || fail "-p $t0,$t1: exit $rc ($(cat "$CASE_TMP/e"))"
grep -qE "two tasks have rank 0: ($t0 and $t1|$t1 and $t0)" "$CASE_TMP/e" ||
    fail "-p $t0,$t1 (both rank 0): stderr [$(cat "$CASE_TMP/e")] does not name them"
echo "result: two steps: numbered in (step, rank) order; two rank-0 tasks named: $(head -1 "$CASE_TMP/e")"
no_tbon_left
