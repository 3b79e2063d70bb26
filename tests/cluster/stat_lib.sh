# stat_lib.sh - what the tbon_stat cluster cases (cases/stat_*.sh) share.
# Sourced by a case after the environment of tests/cluster/run.sh is set
# (TBON B C CL_PREFIX CL_NET CL_DIR CASE_TMP); uses tests/cluster/lib.sh
# when it is there, else defines the few helpers the cases need.
#
#   stat_submit ARGS...     sbatch --parsable ARGS on head; the job id in
#                           JOB; stat_cleanup (trap EXIT) cancels the job
#   node_tasks HOST NAME    "PID RANK" of HOST's processes named NAME, the
#                           rank from PMIX_RANK or SLURM_PROCID in /proc
#   node_stacks HOST PIDS   "PID: PATH" from eu-stack -p PID on HOST, the
#                           main thread's frames outermost first, " > "
#   job_tasks_running J N NAME   N processes NAME of job J on its nodes
#   mpi_tasks_checked OUT N MPIOUT   the tasks file of OUT's mpi_hang run:
#                           N tasks, ranks 0..N-1 once each, and each rank
#                           with the pid the job's output (MPIOUT: lines
#                           "rank R pid P ...") gives it; sets TASKS, body
#   stat_hang_job N         a hung sbatch job of N stat_hang tasks over 4
#                           nodes, waited for until all run; its id in J
set -u

. "$TBON/tests/cluster/lib.sh"

STAT_JOBS=""

stat_submit() {
    local j
    j=$(on head sbatch --parsable "$@") || fail "sbatch $*: failed"
    j=${j%%;*}
    STAT_JOBS="$STAT_JOBS $j"
    JOB=$j
}

_jobs_gone() {
    [ -z "$(on head squeue -h -o %A -j "${STAT_JOBS// /,}" 2>/dev/null | tr -d '[:space:]')" ]
}

stat_cleanup() {
    local j
    for j in $STAT_JOBS; do on head scancel "$j" 2>/dev/null; done
    [ -z "${STAT_JOBS// /}" ] || wait_until 20 _jobs_gone ||
        echo "stat_cleanup: jobs $STAT_JOBS still in squeue after 20 s" >&2
}

node_tasks() {
    on "$1" bash -c '
        for p in $(pgrep -x "$1"); do
            r=$(tr "\0" "\n" <"/proc/$p/environ" 2>/dev/null |
                sed -n "s/^PMIX_RANK=//p; s/^SLURM_PROCID=//p" | head -1)
            echo "$p ${r:--}"
        done' _ "$2"
}

node_stacks() {
    local h=$1
    shift
    on "$h" bash -c 'for p in "$@"; do echo "== $p"; eu-stack -p "$p" 2>&1; done' _ "$@" |
        awk '
            function flush() { if (pid != "") { s = ""; for (k = n - 1; k >= 0; k--)
                                   s = s (s == "" ? "" : " > ") f[k]; print pid ": " s } }
            /^== / { flush(); pid = $2; n = 0; t = 0; next }
            /^TID / { t++; next }
            t == 1 && /^#[0-9]/ { i = ($3 == "-") ? 5 : 3; f[n++] = ($i == "" ? "??" : $i) }
            END { flush() }'
}

_count_running() {
    local j=$1 want=$2 name=$3 h total=0 c
    for h in $(on head scontrol show hostnames "$(on head squeue -h -j "$j" -o %N)"); do
        c=$(on "$h" pgrep -cx "$name" || true)
        total=$((total + ${c:-0}))
    done
    [ "$total" -eq "$want" ]
}

job_tasks_running() {
    [ "$(on head squeue -h -j "$1" -o %T 2>/dev/null)" = RUNNING ] && _count_running "$@"
}

stat_hang_job() {
    step "submitting a job of $1 tasks"
    stat_submit -N4 -n"$1" -O -o "$CASE_TMP/job-%j.out" \
        --wrap "srun sh -c 'exec $B/stat/examples/stat_hang --worker \$SLURM_PROCID'"
    J=$JOB
    step "job $J submitted; waiting for its $1 tasks"
    wait_until 40 job_tasks_running "$J" "$1" stat_hang ||
        fail "job $J: not all $1 stat_hang tasks running after 40 s ($(on head squeue -h -j "$J"))"
}

mpi_tasks_checked() {
    local out=$1 n=$2 mpiout=$3 r p
    TASKS=$(ls "$out"/mpi_hang.*/mpi_hang.tasks.txt) || fail "no tasks file in $out"
    body=$(grep -v '^#' "$TASKS")
    [ "$(echo "$body" | wc -l)" -eq "$n" ] || fail "$(echo "$body" | wc -l) tasks, not $n: $body"
    [ "$(echo "$body" | awk '{print $2}' | sort -n | tr '\n' ' ')" = "$(seq -s ' ' 0 $((n - 1))) " ] ||
        fail "the ranks are not 0..$((n - 1)) once each: $body"
    while read -r _ r _ p _; do
        echo "$body" | awk -v r="$r" -v p="$p" '$2 == r && $4 == p { f = 1 } END { exit !f }' ||
            fail "rank $r (pid $p in the job's output) is not rank $r in $TASKS"
    done < <(grep -E '^rank [0-9]+ pid' "$mpiout")
}
