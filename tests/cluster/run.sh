#!/usr/bin/env bash
# run.sh - the cluster tests: bring up an emulated cluster (head + n1..n4,
# sshd and Slurm on every host, ../shared/cluster/cluster.sh), run each
# tests/cluster/cases/*.sh on it, take it down. What `make check-cluster` runs.
#
# Usage: tests/cluster/run.sh [BUILD_DIR]      (default build; already built)
# Environment:
#   CASES="a b"        only these cases (names, with or without .sh)
#   CL_PREFIX CL_NET CL_DIR
#                      the cluster (defaults tbcc, 10.79.0,
#                      ${TMPDIR:-/tmp}/tbon-check-cluster): its own, so that it
#                      never meets another cluster on the machine
#   CLUSTER_SH         cluster.sh (default: shared/cluster/cluster.sh in the
#                      first directory above the source tree that has one)
#   CASE_TIMEOUT       seconds per case (default 120; a case may say
#                      "# timeout: N" in its first 5 lines)
#
# One line per case: "ok", "FAIL" (with the last lines of its output) or
# "skip" (with its reason), and its time; under an "ok", the case's lines
# that start with "result: " (what it measured). After each case no tbon_* process
# may be left on any host, no Slurm job left, and head must still reach every
# host by ssh: anything else fails that case (and is cleaned up). The last
# line is "cluster: N passed, N failed, N skipped"; the exit status is 0
# unless a case failed. Without root, or where network namespaces cannot be
# made, it prints "check-cluster: skipped: REASON" and counts one skip.
set -u
cd "$(dirname "$0")/../.." || exit 1
TBON=$PWD
b=${1:-build}
case $b in /*) B=$b ;; *) B=$TBON/$b ;; esac
export TBON B
export CL_PREFIX=${CL_PREFIX:-tbcc} CL_NET=${CL_NET:-10.79.0}
export CL_DIR=${CL_DIR:-${TMPDIR:-/tmp}/tbon-check-cluster}
RUN=$B/check-cluster          # logs and the cases' scratch directories
NODES=4
pass=0 failed=0 skipped=0

said=0
summary() {
    said=1
    echo "cluster: $pass passed, $failed failed, $skipped skipped"
}

skip_all() {
    echo "check-cluster: skipped: $*"
    skipped=$((skipped + 1))
    summary
    exit 0
}

fail_all() {
    echo "check-cluster: FAIL: $*"
    failed=$((failed + 1))
    summary
    exit 1
}

now_s() { echo "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

# ---- can it run here? -------------------------------------------------------

[ "$(id -u)" -eq 0 ] || skip_all "not root (the emulated cluster needs root: network, PID and mount namespaces)"

C=${CLUSTER_SH:-}
if [ -z "$C" ]; then
    d=$TBON
    while [ "$d" != / ]; do
        d=$(dirname "$d")
        if [ -x "$d/shared/cluster/cluster.sh" ]; then
            C=$d/shared/cluster/cluster.sh
            break
        fi
    done
fi
[ -n "$C" ] || skip_all "no shared/cluster/cluster.sh above $TBON (set CLUSTER_SH)"
[ -x "$C" ] || skip_all "CLUSTER_SH=$C is not an executable file"
export C

for t in unshare ip; do
    command -v "$t" >/dev/null || skip_all "no $t here (util-linux, iproute2)"
done
err=$(unshare --net --pid --uts --mount --fork true 2>&1) ||
    skip_all "cannot make namespaces here: unshare: $err"
probe=$CL_PREFIX-probe$$
err=$(ip netns add "$probe" 2>&1) || skip_all "cannot make network namespaces here: ip netns add: $err"
ip netns del "$probe"

missing=""
for t in nsenter setsid perl ssh ssh-keygen /usr/sbin/sshd /usr/sbin/munged \
         /usr/sbin/slurmctld /usr/sbin/slurmd sinfo srun; do
    command -v "$t" >/dev/null || missing="$missing $t"
done
if [ -n "$missing" ]; then
    command -v apt-get >/dev/null || skip_all "missing$missing, and no apt-get to install them ($C deps)"
    echo "cluster: missing$missing: $C deps"
    mkdir -p "$RUN"
    "$C" deps >"$RUN/deps.log" 2>&1 || { tail -n 20 "$RUN/deps.log"; fail_all "$C deps failed ($RUN/deps.log)"; }
fi

[ -x "$B/bin/tbon_frontend" ] || fail_all "$B/bin/tbon_frontend is missing: build first (make check-cluster does)"

# ---- one runner per cluster -------------------------------------------------

mkdir -p "$RUN" "$(dirname "$CL_DIR")"
exec 9>"$CL_DIR.lock"
flock -n 9 || fail_all "another run uses the cluster $CL_PREFIX ($CL_DIR.lock): set CL_PREFIX, CL_NET, CL_DIR"

# shellcheck source=lib.sh
CASE_TMP=$RUN . "$TBON/tests/cluster/lib.sh"

case_pid=""
cluster_up=0
down() {
    [ "$cluster_up" = 1 ] || return 0
    local t0
    t0=$(now_s)
    "$C" down >"$RUN/down.log" 2>&1 || { echo "cluster: down failed:"; tail -n 5 "$RUN/down.log"; }
    cluster_up=0
    echo "cluster: down in $(since "$t0") s"
}
on_exit() {
    local rc=$?
    if [ -n "$case_pid" ]; then
        kill -TERM "$case_pid" 2>/dev/null   # timeout passes it on to the case
        wait "$case_pid" 2>/dev/null
    fi
    down
    [ "$said" = 1 ] || summary
    exit "$rc"
}
trap on_exit EXIT
trap 'echo; echo "cluster: interrupted"; failed=$((failed + 1)); exit 130' INT TERM

up() {
    local t0
    t0=$(now_s)
    cluster_up=1
    if ! "$C" up "$NODES" >"$RUN/up.log" 2>&1; then
        tail -n 20 "$RUN/up.log"
        return 1
    fi
    echo "cluster: up in $(since "$t0") s: $(cl_hosts) (CL_PREFIX=$CL_PREFIX CL_NET=$CL_NET CL_DIR=$CL_DIR)"
}

# A cluster with our prefix still up is a leftover of an earlier run (the lock
# says no other run uses it): take it down first.
if [ -e "$CL_DIR/state/hosts" ] || ip netns list 2>/dev/null | grep -q "^$CL_PREFIX-"; then
    echo "cluster: taking down the cluster $CL_PREFIX an earlier run left"
    "$C" down >"$RUN/down.log" 2>&1 || { tail -n 5 "$RUN/down.log"; fail_all "cannot take down the old cluster"; }
fi
up || fail_all "cluster.sh up $NODES failed ($RUN/up.log)"

# ---- after each case --------------------------------------------------------

problems=""   # what the checks below found, for the case's FAIL line

# tbon_* processes left on a host: a failure; killed by pid.
# shellcheck disable=SC2154 # _left: set by lib.sh's _all_left
check_left() {
    if wait_until 2 _all_left; then
        return 0
    fi
    problems="${problems}tbon processes left after the case (killed):
$_left"
    local h pids
    for h in $(cl_hosts); do
        pids=$(tbon_procs "$h" | awk '{print $1}')
        [ -z "$pids" ] || on "$h" kill -KILL $pids 2>/dev/null
    done
    wait_until 5 _all_left || problems="${problems}and still there after kill -9:
$_left"
}

_jobs() {
    _jobs_left=$(on head squeue -h -t PD,R,CF,S,RQ,RS,RF,SI,SO,ST -o '%i %j %T' 2>/dev/null)
    [ -z "$_jobs_left" ]
}
check_jobs() {
    wait_until 5 _jobs && return 0
    problems="${problems}Slurm jobs left after the case (cancelled): $_jobs_left
"
    # shellcheck disable=SC2046 # one word per job id
    on head scancel $(awk '{print $1}' <<<"$_jobs_left") 2>/dev/null
}

# Every host reachable from head over ssh (a case may take links or sshd
# down; it must bring them back). If not, the cluster is made again.
_reach() {
    local h bad=""
    for h in $(cl_hosts); do
        [ "$h" = head ] && continue
        on head timeout 10 ssh -o ConnectTimeout=5 "$h" true >/dev/null 2>&1 &
        eval "_r_$h=\$!"
    done
    for h in $(cl_hosts); do
        [ "$h" = head ] && continue
        eval "wait \$_r_$h" || bad="$bad $h"
    done
    _unreach=$bad
    [ -z "$bad" ]
}
check_cluster() {
    # One look can take past its 10 s on a machine loaded by make check
    # beside this run (it once did, for every host at once): looks go on for
    # 30 s before the cluster counts as broken and is made again.
    wait_until 30 _reach && return 0
    problems="${problems}the case left the cluster broken: head cannot ssh to$_unreach; making it again
"
    down
    up || fail_all "cluster.sh up $NODES failed ($RUN/up.log)"
}

# ---- the cases --------------------------------------------------------------

if [ -n "${CASES:-}" ]; then
    list=""
    for n in $CASES; do
        f=tests/cluster/cases/${n%.sh}.sh
        [ -f "$f" ] || fail_all "no case $f (CASES=$CASES)"
        list="$list $f"
    done
else
    list=$(ls tests/cluster/cases/*.sh 2>/dev/null)
fi
[ -n "$list" ] || fail_all "no cases in tests/cluster/cases"

for f in $list; do
    name=$(basename "$f" .sh)
    tmo=$(sed -n '1,5s/^# *timeout: *\([0-9][0-9]*\).*/\1/p' "$f" | head -n 1)
    tmo=${tmo:-${CASE_TIMEOUT:-120}}
    CASE_TMP=$RUN/cases/$name
    log=$RUN/$name.log
    rm -rf "$CASE_TMP"
    mkdir -p "$CASE_TMP"
    problems=""
    t0=$(now_s)
    CASE_TMP=$CASE_TMP timeout -k 10 "$tmo" bash "$TBON/$f" </dev/null >"$log" 2>&1 &
    case_pid=$!
    wait "$case_pid"
    rc=$?
    case_pid=""
    took=$(since "$t0")
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || problems="${problems}timed out after $tmo s
"
    check_left
    check_jobs
    check_cluster
    if [ "$rc" -eq 0 ] && [ -z "$problems" ]; then
        printf 'ok    %-20s (%s s)\n' "$name" "$took"
        grep '^result: ' "$log" | sed 's/^result: /      /'
        pass=$((pass + 1))
    elif [ "$rc" -eq 77 ] && [ -z "$problems" ]; then
        why=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1)
        printf 'skip  %-20s (%s s): %s\n' "$name" "$took" "${why:-no reason given}"
        skipped=$((skipped + 1))
    else
        printf 'FAIL  %-20s (%s s), exit %d; last lines of %s:\n' "$name" "$took" "$rc" "$log"
        tail -n 15 "$log" | sed 's/^/    | /'
        [ -z "$problems" ] || printf '%s' "$problems" | sed 's/^/    ! /'
        failed=$((failed + 1))
    fi
done

down
summary
[ "$failed" -eq 0 ]
