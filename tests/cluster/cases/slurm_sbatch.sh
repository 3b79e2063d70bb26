# slurm_sbatch: the sbatch recipe of docs/cluster.md - a batch script that
# runs tbon_frontend --slurm on the allocation's first node (n1, which then
# holds the FE and a node commnode), two back-ends per node from
# --ntasks-per-node; exact sums in the job's output; and the errors: --slurm
# outside an allocation, a back-end that cannot start (srun's words in the
# FE's error), -t with --slurm; nothing left on any host, no job left.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

cleanup() { on head scancel --name=tbon-sbatch-case 2>/dev/null; }
trap cleanup EXIT

script=$CASE_TMP/job.sh
cat >"$script" <<JOB
#!/bin/bash
#SBATCH -N 4
#SBATCH --ntasks-per-node=2
#SBATCH -J tbon-sbatch-case
cd "$TBON"
exec "$B/bin/tbon_frontend" --slurm -b "$B/bin/tbon_example_be" -w 3
JOB
j=$(on head sbatch --parsable -o "$CASE_TMP/job-%j.out" "$script") || fail "sbatch: $j"
echo "job $j"
job_done() { [ -z "$(on head squeue -h -j "$j" 2>/dev/null)" ]; }
wait_until 90 job_done || fail "job $j still in the queue after 90 s"
out=$CASE_TMP/job-$j.out
cat "$out"
# FE on n1 (rank 0); node commnodes 1-4; back-ends 5..12
for w in 0 1 2; do
    want="wave $w: sum = $((68 + 8 * w)) (from 8 back-ends)"
    grep -qxF "$want" "$out" || fail "expected \"$want\" in the job's output"
done
state=$(on head scontrol show job "$j" 2>/dev/null | grep -o 'JobState=[A-Z]*')
echo "$state"
no_tbon_left

# errors, each with a clear message and a non-zero exit
on head "$B/bin/tbon_frontend" --slurm -b "$B/bin/tbon_example_be" >"$CASE_TMP/o1" 2>&1 &&
    fail "--slurm outside an allocation succeeded"
grep -q "not inside a Slurm allocation" "$CASE_TMP/o1" || { cat "$CASE_TMP/o1"; fail "no clear message outside an allocation"; }
on head timeout -k 10 60 salloc -N2 -J tbon-sbatch-case "$B/bin/tbon_frontend" --slurm -b /bin/false \
    >"$CASE_TMP/o2" 2>&1 && fail "a back-end that exits at once was not an error"
cat "$CASE_TMP/o2"
grep -q "tbon_frontend: the srun step of depth 2 exited with status 1 before the tree was ready: srun: error: n[12]: task [0-9]*: Exited with exit code 1" "$CASE_TMP/o2" ||
    fail "the failed step is not explained in srun's words"
on head "$B/bin/tbon_frontend" --slurm -t /dev/null -b "$B/bin/tbon_example_be" >"$CASE_TMP/o3" 2>&1
[ $? -eq 2 ] || fail "-t with --slurm is not a usage error"
grep -q "do not go together" "$CASE_TMP/o3" || fail "no message for -t with --slurm"
no_tbon_left
