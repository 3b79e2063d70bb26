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

# Issue 33: ten samples through one --session beside ten runs, the tasks
# given as --jobid (the back-ends a job step) and as HOST:PID (back-ends
# over ssh), all timed on head in one shell (the checks of each result not counted):
# seconds for the ten runs, the session in all (start, ten samples, stop),
# its start and stop, and each sample.
HOSTPIDS=""
for h in $(on head scontrol show hostnames "$(on head squeue -h -j "$J" -o %N)"); do
    for p in $(node_tasks "$h" stat_hang | awk '{print $1}'); do
        HOSTPIDS="$HOSTPIDS${HOSTPIDS:+,}$h:$p"
    done
done
[ "$(echo "$HOSTPIDS" | tr ',' '\n' | wc -l)" -eq "$NTASKS" ] ||
    fail "not $NTASKS HOST:PID tasks of job $J"
SESS_N=${SESS_N:-10}
time_session() {      # which: "--jobid J" or "-p LIST"
    on head bash -c '
        set -e
        bin=$1 n=$2 k=$3 out=$4; shift 4
        count() { n1=$(grep -vc "^#" "$(ls -d "$1"/stat_hang.* | tail -1)/stat_hang.tasks.txt");
                  [ "$n1" -eq "$n" ] || { echo "tbon_stat found $n1 tasks, not $n" >&2; exit 1; }; }
        el() { echo "$t $t1" | awk "{ printf \"%.4f\", \$2 - \$1 }"; }
        runs=0
        for ((i = 0; i < k; i++)); do
            rm -rf "$out.run"
            t=$EPOCHREALTIME
            "$bin" "$@" -n 1 -q -o "$out.run" >/dev/null 2>"$out.err" || { cat "$out.err" >&2; exit 1; }
            t1=$EPOCHREALTIME
            runs=$(echo "$runs $(el)" | awk "{ print \$1 + \$2 }")
            count "$out.run"
        done
        rm -rf "$out.sess" "$out.s"
        t=$EPOCHREALTIME
        "$bin" --session "$out.s" start "$@" -q -o "$out.sess" >/dev/null 2>"$out.err" ||
            { cat "$out.err" >&2; exit 1; }
        t1=$EPOCHREALTIME
        started=$(el)
        per=""
        for ((i = 0; i < k; i++)); do
            t=$EPOCHREALTIME
            "$bin" --session "$out.s" sample -n 1 -q -o "$out.sess" >/dev/null 2>"$out.err" ||
                { cat "$out.err" >&2; exit 1; }
            t1=$EPOCHREALTIME
            per="$per $(el)"
            count "$out.sess"
        done
        t=$EPOCHREALTIME
        "$bin" --session "$out.s" stop -q >/dev/null 2>"$out.err" || { cat "$out.err" >&2; exit 1; }
        t1=$EPOCHREALTIME
        stopped=$(el)
        sess=$(echo "$started $stopped$per" | awk "{ for (i = 1; i <= NF; i++) s += \$i; print s }")
        echo "$runs $sess $started $stopped$per"' _ "$B/bin/tbon_stat" "$NTASKS" "$SESS_N" "$CASE_TMP/sess" "$@"
}
SJ=$(time_session --jobid "$J") || fail "the --jobid session comparison failed"
no_tbon_left
SP=$(time_session -p "$HOSTPIDS") || fail "the HOST:PID session comparison failed"
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
echo "#### $SESS_N samples through one tbon_stat --session beside $SESS_N runs"
echo
echo "The same job; timed on head; each run and each sample checked to hold every task."
echo "The session: \`tbon_stat --session DIR start TASKS\`, $SESS_N x \`sample -n 1\`, \`stop\`."
echo
echo "| tasks given as | $SESS_N runs s | the session in all s | runs / session | start s | a sample's median s | stop s | the samples s |"
echo "|---|---|---|---|---|---|---|---|"
for row in "--jobid $J (back-ends a job step)|$SJ" "HOST:PID (back-ends over ssh)|$SP"; do
    name=${row%%|*} v=${row#*|}
    set -- $v
    runs=$1 sess=$2 started=$3 stopped=$4; shift 4
    med=$(printf '%s\n' "$@" | median)
    awk -v n="$name" -v r="$runs" -v s="$sess" -v m="$med" -v all="$*" -v a="$started" -v z="$stopped" \
        'BEGIN { v = (r / s >= 5) ? "met" : "missed"
                 printf "| %s | %.3f | %.3f | %.2fx (target 5x: %s) | %.3f | %.4f | %.3f | %s |\n", n, r, s, r / s, v, a, m, z, all }'
done
echo
echo "Machine: $(nproc) CPUs, Linux $(uname -r); cluster: head + 4 nodes (cluster.sh, Slurm $(on head sinfo -V 2>/dev/null | awk '{print $2}'))."
