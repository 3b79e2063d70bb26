# stat_mpi_pmix.sh - tbon_stat --jobid on an Open MPI job started with
# srun --mpi=pmix -N4 -n16 (stat/examples/mpi/mpi_hang: rank 1 lost in its
# own loop, the others in MPI_Barrier): every rank once, on the host and
# with the pid the node says, rank 1 alone in wait_for_lost_message.
# timeout: 360
. "$TBON/tests/cluster/stat_lib.sh"
trap stat_cleanup EXIT

EXE=$B/stat/examples/mpi_hang
[ -x "$EXE" ] || { echo "skip: no $EXE (no mpicc when tbon was built)"; exit 77; }
on head srun --mpi=list 2>&1 | grep -q pmix ||
    { echo "skip: this Slurm has no pmix plugin (srun --mpi=list)"; exit 77; }

N=16
# The emulated hosts share /tmp and their pids repeat: each node's ranks get
# a directory of their own for Open MPI's session files and shared-memory
# segments, and PMIx keeps its data in a hash, not in shared files. Under
# load, Open MPI's start-up on this emulation still fails now and then (a
# rank dies in MPI_Init: a refused TCP connect, a shared-memory file not
# found) before tbon_stat is involved: the job is then started again, up to
# 3 times, and each failed start is shown.
# The ranks in MPI_Barrier poll without end: 16 of them on the two cores
# of this emulation made every other command of the case wait its turn
# (90-120 s for the case); yielding while idle (mpi_yield_when_idle) gives
# the CPU back whenever something else wants it, nice 19 keeps their share
# small beside make check's trees, and the job ends as soon as its tree is
# checked.
WRAP="PMIX_MCA_gds=hash OMPI_MCA_mpi_yield_when_idle=1 srun --mpi=pmix sh -c 'd=$CASE_TMP/mpi-\$SLURM_JOB_ID-\$SLURMD_NODENAME; \
mkdir -p \$d && export TMPDIR=\$d OMPI_MCA_btl_vader_backing_directory=\$d && exec nice -n 19 $EXE'"
# Each rank prints "rank R pid P barrier|stuck" on its way there.
_all_printed() {
    [ "$(cat "$CASE_TMP/job-$J.out" 2>/dev/null | grep -cE '^rank [0-9]+ pid [0-9]+ (barrier|stuck)$')" -eq $N ]
}
_start_failed() {
    grep -qE '^srun: error|Segmentation fault|MPI_Init' "$CASE_TMP/job-$J.out" 2>/dev/null ||
        [ -z "$(on head squeue -h -j "$J" -o %T 2>/dev/null)" ]
}
_settled() { _all_printed || _start_failed; }
for attempt in 1 2 3; do
    stat_submit -N4 -n$N -O -o "$CASE_TMP/job-%j.out" --wrap "$WRAP"
    J=$JOB
    step "job $J submitted (attempt $attempt)"
    wait_until 30 _settled || fail "job $J: not all $N ranks reached their place after 30 s"
    _all_printed && break
    echo "result: note: MPI start-up of job $J failed (attempt $attempt): $(grep -m1 -E 'error|fault' "$CASE_TMP/job-$J.out")"
    on head scancel "$J"
    [ "$attempt" -lt 3 ] || fail "Open MPI's start-up failed 3 times: $(tail -5 "$CASE_TMP/job-$J.out")"
done
step "job $J: every rank printed its place"
wait_until 10 job_tasks_running "$J" $N mpi_hang || fail "job $J: not $N mpi_hang processes"
step "job $J: $N mpi_hang processes run; tbon_stat --jobid $J"

OUT=$CASE_TMP/out
# Slurm has held tbon_stat's srun step back for over a minute here (srun
# retrying quietly until the job was cancelled: once in a CI run after the
# other cases); tbon_stat notes it after 30 s. The job's steps are shown if
# it fails.
on head timeout -k 10 150 "$B/bin/tbon_stat" --jobid "$J" -n 3 -i 50 -o "$OUT" >"$CASE_TMP/stat.out" \
    2>"$CASE_TMP/stat.err" || fail "tbon_stat --jobid $J: exit $? ($(cat "$CASE_TMP/stat.err"); \
the job's steps: $(on head squeue -h -s -j "$J" 2>&1 | tr '\n' ';'))"
step "tbon_stat --jobid $J ended"
# The ranks as MPI gave them (the job's output) and as each node's /proc has them.
mpi_tasks_checked "$OUT" $N "$CASE_TMP/job-$J.out"
for h in $(on head scontrol show hostnames "$(on head squeue -h -j "$J" -o %N)"); do
    mine=$(node_tasks "$h" mpi_hang | sort -n)
    theirs=$(echo "$body" | awk -v h="$h" '$3 == h { print $4, $2 }' | sort -n)
    [ "$mine" = "$theirs" ] || fail "$h: the node has pid/rank [$mine], tbon_stat says [$theirs]"
done
echo "$body" | awk '$2 == 1 && !/wait_for_lost_message/ { exit 1 }' ||
    fail "rank 1 is not in wait_for_lost_message: $(grep -v '^#' "$TASKS" | awk '$2 == 1')"
echo "$body" | awk '$2 != 1 && !/main > synchronise > PMPI_Barrier/ { exit 1 }' ||
    fail "a rank other than 1 is not in MPI_Barrier: $body"
grep -q "^1:\[1\]  rep 1 (" "${TASKS%tasks.txt}2D.classes.txt" ||
    fail "rank 1 is not a class of its own: $(cat "${TASKS%tasks.txt}2D.classes.txt")"

step "job $J: the merged tree checked"
on head scancel "$J"
no_tbon_left
echo "result: job $J (srun --mpi=pmix), $N ranks on 4 nodes, rank 1 alone"
