# stat_jobid.sh - tbon_stat --jobid from head on a hung sbatch job of 64
# tasks over 4 nodes: every task is in the merged tree exactly once, with its
# host, pid and rank as the node itself says, and every task's path is what
# eu-stack -p PID prints on that task's node.
# timeout: 300
. "$TBON/tests/cluster/stat_lib.sh"
trap stat_cleanup EXIT

N=64
stat_hang_job $N

OUT=$CASE_TMP/out
step "tbon_stat --jobid $J"
on head timeout -k 10 60 "$B/bin/tbon_stat" --jobid "$J" -n 2 -i 20 -o "$OUT" >"$CASE_TMP/stat.out" \
    2>"$CASE_TMP/stat.err" || fail "tbon_stat --jobid $J: exit $? ($(cat "$CASE_TMP/stat.err"))"
TASKS=$(ls "$OUT"/stat_hang.*/stat_hang.tasks.txt) || fail "no tasks file in $OUT"
TREE=${TASKS%tasks.txt}2D.txt
grep -q "^/  $N:\[0-$((N - 1))\]$" "$TREE" || fail "the tree's root is not $N:[0-$((N - 1))]: $(head -1 "$TREE")"
grep -q "ranks from their environment" "$CASE_TMP/stat.out" || fail "ranks not from the tasks' environments"
[ ! -s "$CASE_TMP/stat.err" ] || fail "tbon_stat said: $(cat "$CASE_TMP/stat.err")"
ls -a "$OUT" | grep -q attach && fail "the attach file is left in $OUT"

# Each task once: N lines, N distinct ranks 0..N-1, distinct host:pid.
body=$(grep -v '^#' "$TASKS")
[ "$(echo "$body" | wc -l)" -eq $N ] || fail "$TASKS has $(echo "$body" | wc -l) tasks, not $N"
[ "$(echo "$body" | awk '{print $2}' | sort -n | uniq | tr '\n' ' ')" = "$(seq -s ' ' 0 $((N - 1))) " ] ||
    fail "the ranks in $TASKS are not 0..$((N - 1)) once each"
[ "$(echo "$body" | awk '{print $3 ":" $4}' | sort -u | wc -l)" -eq $N ] || fail "a host:pid twice in $TASKS"
awk '$1 != $2 { exit 1 }' <<<"$body" || fail "a task number is not its rank in $TASKS"

step "comparing with eu-stack on the nodes"
checked=0
NODES=$(on head scontrol show hostnames "$(on head squeue -h -j "$J" -o %N)")
for h in $NODES; do
    # The node's own view: its stat_hang pids and their ranks.
    mine=$(node_tasks "$h" stat_hang | sort -n)
    theirs=$(echo "$body" | awk -v h="$h" '$3 == h { print $4, $2 }' | sort -n)
    [ -n "$mine" ] || fail "$h has no stat_hang task"
    [ "$mine" = "$theirs" ] || fail "$h: the node has pid/rank
$mine
and tbon_stat says
$theirs"
    # eu-stack of each of its tasks, the nodes at once (16 each, about a
    # second apiece on a loaded machine).
    node_stacks "$h" $(echo "$mine" | awk '{print $1}') >"$CASE_TMP/eu-stack.$h" &
done
wait
for h in $NODES; do
    # Every path against eu-stack on that node.
    while IFS= read -r line; do
        pid=${line%%:*}
        want=${line#*: }
        got=$(echo "$body" | awk -v h="$h" -v p="$pid" '$3 == h && $4 == p' | sed 's/^[^:]*: //')
        case $got in
        *compute_loop*)
            # The busy rank moves inside its loop: the frames down to do_work
            # must agree, and eu-stack must see it in compute_loop too.
            [ "${got%%do_work*}" = "${want%%do_work*}" ] && [[ $want == *compute_loop* ]] ||
                fail "$h:$pid: tbon_stat has [$got]; eu-stack has [$want]" ;;
        *)
            [ "$got" = "$want" ] || fail "$h:$pid: tbon_stat has [$got]; eu-stack has [$want]" ;;
        esac
        checked=$((checked + 1))
    done <"$CASE_TMP/eu-stack.$h"
done
[ "$checked" -eq $N ] || fail "compared $checked paths with eu-stack, not $N"

# -P of the job's srun, on the host it runs on (the batch host, also a node
# of the job): its step's tasks, on all the nodes.
BH=$(on head squeue -h -j "$J" -o %B)
step "tbon_stat -P of the srun on $BH"
S=$(on "$BH" pgrep -xo srun) || fail "no srun on $BH"
on "$BH" timeout -k 10 60 "$B/bin/tbon_stat" -P "$S" -q -n 1 -o "$CASE_TMP/outP" >"$CASE_TMP/statP.out" \
    2>"$CASE_TMP/statP.err" || fail "tbon_stat -P $S on $BH: exit $? ($(cat "$CASE_TMP/statP.err"))"
grep -q "srun $S runs job $J step 0, whose tasks are on the job.s nodes" "$CASE_TMP/statP.err" ||
    fail "tbon_stat -P $S did not say it follows job $J step 0: $(cat "$CASE_TMP/statP.err")"
TP=$(ls "$CASE_TMP"/outP/stat_hang.*/stat_hang.tasks.txt) || fail "-P $S: no tasks file"
[ "$(grep -v '^#' "$TP" | awk '{print $2, $3, $4}' | sort)" = "$(echo "$body" | awk '{print $2, $3, $4}' | sort)" ] ||
    fail "-P $S found other tasks than --jobid $J"

# When Slurm names no step for the srun (an scontrol whose "show steps" does
# not list it), -P falls back to the srun's SLURM_JOB_ID: every step.
step "tbon_stat -P with no step named"
mkdir -p "$CASE_TMP/fake"
printf '#!/bin/sh\n[ "$*" = "-o show steps" ] && exit 0\nPATH=${PATH#*:} exec scontrol "$@"\n' \
    >"$CASE_TMP/fake/scontrol"
chmod +x "$CASE_TMP/fake/scontrol"
on "$BH" env PATH="$CASE_TMP/fake:$PATH" timeout -k 10 60 "$B/bin/tbon_stat" -P "$S" -q -n 1 -o "$CASE_TMP/outE" \
    >"$CASE_TMP/statE.out" 2>"$CASE_TMP/statE.err" || fail "tbon_stat -P $S (no step named): exit $?"
grep -q "srun $S runs its tasks in job $J (its SLURM_JOB_ID)" "$CASE_TMP/statE.err" ||
    fail "tbon_stat -P $S (no step named): [$(cat "$CASE_TMP/statE.err")]"
TE=$(ls "$CASE_TMP"/outE/stat_hang.*/stat_hang.tasks.txt) || fail "-P $S (no step named): no tasks file"
[ "$(grep -vc '^#' "$TE")" -eq $N ] || fail "-P $S (no step named): not $N tasks"

# The same with commnodes on head between it and the nodes (fan-out 2: two
# commnodes, two nodes each).
step "tbon_stat --jobid $J with commnodes"
on head env TBON_STAT_FANOUT=2 timeout -k 10 60 "$B/bin/tbon_stat" --jobid "$J" -q -n 1 -o "$CASE_TMP/outC" \
    >"$CASE_TMP/statC.out" 2>"$CASE_TMP/statC.err" ||
    fail "tbon_stat --jobid $J with commnodes: exit $? ($(cat "$CASE_TMP/statC.err"))"
TC=$(ls "$CASE_TMP"/outC/stat_hang.*/stat_hang.tasks.txt) || fail "with commnodes: no tasks file"
[ "$(grep -v '^#' "$TC" | sort -n)" = "$(echo "$body" | sort -n)" ] ||
    fail "with commnodes: other tasks or paths than without"

# From inside a job: its batch script (on n1, a node of the job, inside the
# allocation) starts the tasks, then tbon_stat --jobid $SLURM_JOB_ID.
step "tbon_stat from inside a job"
cat >"$CASE_TMP/inside.sh" <<EOS
#!/bin/bash
# Each task leaves a mark (on the shared file system) just before it becomes
# stat_hang; tbon_stat runs once all 32 are there and this node's 8 are
# stat_hang (job $J's tasks share the nodes).
srun sh -c 'touch $CASE_TMP/up.\$SLURM_PROCID; exec $B/stat/examples/stat_hang --worker \$SLURM_PROCID' &
mine() {
    for p in \$(pgrep -x stat_hang); do
        tr '\\0' '\\n' </proc/\$p/environ | grep -qx "SLURM_JOB_ID=\$SLURM_JOB_ID" && echo \$p
    done | wc -l
}
until [ "\$(ls $CASE_TMP | grep -c '^up\.')" -eq 32 ] && [ "\$(mine)" -eq 8 ]; do
    sleep 0.1
done
timeout -k 10 60 $B/bin/tbon_stat --jobid \$SLURM_JOB_ID -q -n 1 -o $CASE_TMP/outI
echo "tbon_stat exit \$?"
kill %1
EOS
chmod +x "$CASE_TMP/inside.sh"
stat_submit -N4 -n32 -O -t 2 -o "$CASE_TMP/inside-%j.out" "$CASE_TMP/inside.sh"
JI=$JOB
step "job $JI submitted; waiting for it to end"
_inside_done() { [ -z "$(on head squeue -h -j "$JI" 2>/dev/null)" ]; }
wait_until 60 _inside_done || fail "job $JI (tbon_stat inside) still running after 60 s"
grep -q "^tbon_stat exit 0$" "$CASE_TMP/inside-$JI.out" ||
    fail "tbon_stat inside job $JI: $(head -5 "$CASE_TMP/inside-$JI.out")"
TI=$(ls "$CASE_TMP"/outI/stat_hang.*/stat_hang.tasks.txt) || fail "inside job $JI: no tasks file"
[ "$(grep -v '^#' "$TI" | awk '{print $2}' | sort -n | tr '\n' ' ')" = "$(seq -s ' ' 0 31) " ] ||
    fail "inside job $JI: ranks are not 0..31: $(cat "$TI")"
step "looking for leftovers"
no_tbon_left
echo "result: job $J, $N tasks on 4 nodes: hosts, pids, ranks and every path as on the nodes; -P of its srun on $BH, and a tree with commnodes: the same tasks; from inside a 32-task job's batch script: its 32 tasks"
