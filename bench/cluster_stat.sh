#!/usr/bin/env bash
# cluster_stat.sh - tbon_stat --jobid on a hung Slurm job of 256 tasks over 4
# nodes of the emulated cluster, beside what one would do without it: one
# srun step on the job's nodes running eu-stack for each task of its node
# (the nodes in parallel). Median of 5 runs each, interleaved; prints a
# markdown table. Takes the environment of a cluster case (TBON, B, C,
# CL_PREFIX, CL_NET, CL_DIR; the cluster up with Slurm): see
# tests/cluster/README.md. NTASKS and RUNS change the sizes.
set -u
: "${TBON:?}" "${B:?}" "${C:?}" "${CL_DIR:?}"
export TBON B C CL_PREFIX CL_NET CL_DIR
NTASKS=${NTASKS:-256}
RUNS=${RUNS:-5}
OWN_TMP=
if [ -z "${CASE_TMP:-}" ]; then
    CASE_TMP=$(mktemp -d "$CL_DIR/bench-stat.XXXXXX")
    OWN_TMP=$CASE_TMP
fi
export CASE_TMP
. "$TBON/tests/cluster/stat_lib.sh"
trap 'stat_cleanup; [ -z "$OWN_TMP" ] || rm -rf "$OWN_TMP"' EXIT

stat_submit -N4 -n"$NTASKS" -O -o "$CASE_TMP/job-%j.out" \
    --wrap "srun sh -c 'exec $B/stat/examples/stat_hang --worker \$SLURM_PROCID'"
J=$JOB
wait_until 120 job_tasks_running "$J" "$NTASKS" stat_hang ||
    fail "job $J: not all $NTASKS tasks running after 120 s"

STAT_CMD="tbon_stat --jobid $J -n 1 -q -o DIR"
EU_CMD="srun --overlap --jobid $J -N4 --ntasks-per-node=1 sh -c 'for p in \$(scontrol listpids $J.0 | awk \"NR > 1 && \\\$4 != \\\"-\\\" {print \\\$1}\"); do eu-stack -p \$p; done'"

# Each run is timed on head itself (not through cluster.sh exec): seconds.
time_stat() {
    on head bash -c '
        t0=$EPOCHREALTIME
        "$1" --jobid "$2" -n 1 -q -o "$3" >/dev/null 2>"$3.err" || { cat "$3.err" >&2; exit 1; }
        t1=$EPOCHREALTIME
        n=$(grep -vc "^#" "$(ls -d "$3"/stat_hang.* | tail -1)/stat_hang.tasks.txt")
        [ "$n" -eq "$4" ] || { echo "tbon_stat found $n tasks, not $4" >&2; exit 1; }
        echo "$t0 $t1" | awk "{ printf \"%.4f\n\", \$2 - \$1 }"' _ "$B/bin/tbon_stat" "$J" "$CASE_TMP/out" "$NTASKS"
}

time_eu() {
    on head bash -c '
        t0=$EPOCHREALTIME
        srun --overlap --jobid "$1" -N4 --ntasks-per-node=1 sh -c "for p in \$(scontrol listpids $1.0 | awk '"'"'NR > 1 && \$4 != \"-\" {print \$1}'"'"'); do eu-stack -p \$p; done" >"$2" 2>&1
        t1=$EPOCHREALTIME
        n=$(grep -c "^PID " "$2")
        [ "$n" -eq "$3" ] || { echo "eu-stack printed $n stacks, not $3" >&2; exit 1; }
        echo "$t0 $t1" | awk "{ printf \"%.4f\n\", \$2 - \$1 }"' _ "$J" "$CASE_TMP/eu.out" "$NTASKS"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

S=()
E=()
for ((i = 0; i < RUNS; i++)); do
    s=$(time_stat) || fail "tbon_stat run $i failed"
    e=$(time_eu) || fail "eu-stack run $i failed"
    S+=("$s")
    E+=("$e")
done
ms=$(printf '%s\n' "${S[@]}" | median)
me=$(printf '%s\n' "${E[@]}" | median)
no_tbon_left

echo "### tbon_stat --jobid on the emulated cluster"
echo
echo "$NTASKS hung tasks (stat/examples/stat_hang) of one sbatch job over 4 nodes; from head;"
echo "one stack per task; median of $RUNS runs each, interleaved, timed on head."
echo
echo "| command | median s | runs s |"
echo "|---|---|---|"
echo "| \`$STAT_CMD\` | $ms | ${S[*]} |"
echo "| \`$EU_CMD\` | $me | ${E[*]} |"
echo
awk -v s="$ms" -v e="$me" 'BEGIN { printf "The eu-stack step takes %.1fx as long as tbon_stat --jobid.\n", e / s }'
echo
echo "Machine: $(nproc) CPUs, Linux $(uname -r); cluster: head + 4 nodes (cluster.sh, Slurm $(on head sinfo -V 2>/dev/null | awk '{print $2}'))."
