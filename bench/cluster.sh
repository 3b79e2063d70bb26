#!/usr/bin/env bash
# cluster.sh - tree start-up across hosts, on an emulated cluster of 8 nodes
# (shared/cluster/cluster.sh up 8, brought up and taken down here), beside
# what the launchers themselves cost in the same run. Prints a Markdown
# section on stdout (progress on stderr).
#
# Usage: bench/cluster.sh [BUILD_DIR]     (root; default build, already built)
# Environment: CL_PREFIX CL_NET CL_DIR (default tbcb, 10.78.0,
# ${TMPDIR:-/tmp}/tbon-bench-cluster), CLUSTER_SH, ROUNDS (default 5).
#
# Measured, ROUNDS times each, the kinds interleaved so that they share the
# machine's conditions, medians reported (every run's figure in the notes):
#   - tbon_frontend -w 0 (start the tree, shut it down) on head, wall time:
#     a 4x4 over head,n1..n4 (tbon_topgen), and 1,024 back-ends over 8 hosts
#     (one commnode per node under the FE, its 128 back-ends beside it), each
#     remote process started over ssh;
#   - srun -N8 true (from head), and one ssh HOST true per node, 8 at once.
set -u
cd "$(dirname "$0")/.." || exit 1
TBON=$PWD
b=${1:-build}
case $b in /*) B=$b ;; *) B=$TBON/$b ;; esac
export TBON B
export CL_PREFIX=${CL_PREFIX:-tbcb} CL_NET=${CL_NET:-10.78.0}
export CL_DIR=${CL_DIR:-${TMPDIR:-/tmp}/tbon-bench-cluster}
ROUNDS=${ROUNDS:-5}
NODES=8

section() {
    echo
    echo "## Across hosts: tree start-up on an emulated cluster"
    echo
}
skip() {
    section
    echo "**Not measured in this run: $*.**"
    exit 0
}

[ "$(id -u)" -eq 0 ] || skip "not root (the emulated cluster needs root)"
C=${CLUSTER_SH:-}
if [ -z "$C" ]; then
    d=$TBON
    while [ "$d" != / ]; do
        d=$(dirname "$d")
        [ -x "$d/shared/cluster/cluster.sh" ] && { C=$d/shared/cluster/cluster.sh; break; }
    done
fi
[ -n "$C" ] && [ -x "$C" ] || skip "no shared/cluster/cluster.sh above $TBON (set CLUSTER_SH)"
export C
unshare --net true 2>/dev/null || skip "cannot make network namespaces here"
for t in /usr/sbin/sshd /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged srun; do
    command -v "$t" >/dev/null || skip "$t is missing ($C deps)"
done
[ -x "$B/bin/tbon_frontend" ] || skip "$B/bin/tbon_frontend is missing (build first)"

work=$(mktemp -d)
exec 9>"$CL_DIR.lock"
flock -n 9 || skip "another run uses the cluster $CL_PREFIX ($CL_DIR.lock)"
CASE_TMP=$work . "$TBON/tests/cluster/lib.sh"

up=0
finish() {
    [ "$up" = 0 ] || "$C" down >"$work/down.log" 2>&1 || tail -n 5 "$work/down.log" >&2
    rm -rf "$work"
}
trap finish EXIT
trap 'exit 130' INT TERM

if [ -e "$CL_DIR/state/hosts" ] || ip netns list 2>/dev/null | grep -q "^$CL_PREFIX-"; then
    echo "bench/cluster.sh: taking down the cluster $CL_PREFIX an earlier run left" >&2
    "$C" down >"$work/down.log" 2>&1
fi
up=1
echo "== cluster.sh up $NODES" >&2
"$C" up "$NODES" >"$work/up.log" 2>&1 || { tail -n 20 "$work/up.log" >&2; echo "bench/cluster.sh: cluster.sh up $NODES failed" >&2; exit 1; }

# Topologies: the 4x4 as a user makes it; 1,024 back-ends as 8 per-node
# subtrees (one remote launch per node, the rest local to each node).
small=$work/4x4.top
big=$work/8x128.top
on head "$B/bin/tbon_topgen" --shape 4x4 --hosts head,n1,n2,n3,n4 -o "$small" || exit 1
{
    printf 'head:0 =>'
    for k in $(seq 1 "$NODES"); do printf ' n%d:0' "$k"; done
    printf ' ;\n'
    for k in $(seq 1 "$NODES"); do
        printf 'n%d:0 =>' "$k"
        for i in $(seq 1 128); do printf ' n%d:%d' "$k" "$i"; done
        printf ' ;\n'
    done
} >"$big"
small_n=$(topo_nodes "$small" | wc -l)
big_n=$(topo_nodes "$big" | wc -l)
nodes=$(seq -s ' ' -f 'n%g' 1 "$NODES")

# Between runs: at most 5 s until at most two tasks have been runnable for
# half a second (bench/lib.sh; a 1,033-process tree's teardown keeps the
# kernel busy a while).
. "$TBON/bench/lib.sh"
quiet_short() { quiet 5 50 2>/dev/null; }

# timed NAME CMD...: run CMD on head, its wall time (ms, measured on head)
# appended to $work/NAME; output in $work/NAME.last. Returns CMD's status.
timed() {
    local name=$1
    shift
    on head bash -c 't0=$EPOCHREALTIME; "$@"; rc=$?; t1=$EPOCHREALTIME
        awk -v a="$t0" -v b="$t1" "BEGIN { printf \"%.0f\\n\", (b - a) * 1000 }" >>"$0"; exit $rc' \
        "$work/$name" "$@" >"$work/$name.last" 2>&1
}

# the FE's own figure ("started tree: N processes in X s"), checked against N
fe_started() {   # fe_started NAME N
    local line
    line=$(grep -o 'started tree: [0-9]* processes in [0-9.]* s' "$work/$1.last" | tail -n 1)
    [ "$(awk '{print $3}' <<<"$line")" = "$2" ] || {
        cat "$work/$1.last" >&2
        echo "bench/cluster.sh: $1: the tree did not start all $2 processes" >&2
        exit 1
    }
    awk '{print $6 * 1000}' <<<"$line" >>"$work/$1.fe"
}

par_ssh() {   # one ssh HOST true per node, all at once
    local h p pids=""
    for h in $nodes; do ssh "$h" true & pids="$pids $!"; done
    for p in $pids; do wait "$p" || return 1; done
}

status=0
for r in $(seq 1 "$ROUNDS"); do
    echo "== round $r of $ROUNDS" >&2
    quiet_short
    timed srun srun -N"$NODES" true || { cat "$work/srun.last" >&2; status=1; }
    quiet_short
    timed ssh bash -c "$(declare -f par_ssh); nodes='$nodes'; par_ssh" ||
        { cat "$work/ssh.last" >&2; status=1; }
    quiet_short
    timed small "$B/bin/tbon_frontend" -t "$small" -b "$B/bin/tbon_example_be" -w 0 ||
        { cat "$work/small.last" >&2; status=1; }
    fe_started small "$small_n"
    no_tbon_left 10
    quiet_short
    timed big "$B/bin/tbon_frontend" -t "$big" -b "$B/bin/tbon_example_be" -w 0 ||
        { cat "$work/big.last" >&2; status=1; }
    fe_started big "$big_n"
    no_tbon_left 10
    # the same two shapes started by Slurm: one srun step per depth
    quiet_short
    timed sl_small salloc -N4 "$B/bin/tbon_frontend" --slurm --be-per-node 4 \
        -b "$B/bin/tbon_example_be" -w 0 || { cat "$work/sl_small.last" >&2; status=1; }
    no_tbon_left 10
    quiet_short
    timed sl_big salloc -N"$NODES" "$B/bin/tbon_frontend" --slurm --be-per-node 128 \
        -b "$B/bin/tbon_example_be" -w 0 || { cat "$work/sl_big.last" >&2; status=1; }
    fe_started sl_big "$big_n"
    no_tbon_left 10
done


med() {   # median of a file of numbers (ms) -> seconds, 2 decimals
    sort -n "$1" | awk '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f", m / 1000 }'
}
all() {   # every figure, in seconds, in run order
    awk '{ printf "%s%.2f", (NR > 1 ? ", " : ""), $1 / 1000 }' "$1"
}

section
echo "bench/cluster.sh: \`cluster.sh up $NODES\` on this machine (head + n1..n$NODES: network,"
echo "UTS, PID and mount namespaces per host, a real sshd on each, Slurm with a slurmd per"
echo "node; the file system shared). Wall times measured on head, median of $ROUNDS runs, the"
echo "kinds interleaved in each round; every run's figure is in the notes. Tree rows:"
echo "\`tbon_frontend -w 0\` starts the tree and shuts it down; the FE's own \"started"
echo "tree\" figure (start-up alone) is in the notes. Remote processes start over ssh"
echo "(\`TBON_RSH\` unset: the library's default ssh command, the cluster's client configuration,"
echo "sessions without rc files)."
echo "The 1,024-back-end tree is one commnode per node under the FE, each with its 128"
echo "back-ends on its own node: 8 ssh launches, 1,024 local ones."
echo
echo "- machine: $(nproc) CPUs, $(uname -sr), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| what | command (on head) | median | unit | notes |"
echo "|---|---|---|---|---|"
echo "| tree start-up, 4x4 ($small_n processes, 5 hosts), ssh | \`tbon_frontend -t 4x4.top -b tbon_example_be -w 0\` (\`tbon_topgen --shape 4x4 --hosts head,n1,n2,n3,n4\`) | $(med "$work/small") | s | runs: $(all "$work/small"); FE's start-up (to 0.1 s): median $(med "$work/small.fe") s |"
echo "| tree start-up, 1,024 back-ends ($big_n processes, 9 hosts: 8 x 128), ssh | \`tbon_frontend -t 8x128.top -b tbon_example_be -w 0\` | $(med "$work/big") | s | runs: $(all "$work/big"); FE's start-up (to 0.1 s): median $(med "$work/big.fe") s |"
echo "| baseline: Slurm | \`srun -N$NODES true\` | $(med "$work/srun") | s | runs: $(all "$work/srun") |"
echo "| baseline: ssh | \`ssh HOST true\` for n1..n$NODES at once | $(med "$work/ssh") | s | runs: $(all "$work/ssh") |"
# the same shapes started by --slurm
echo "| tree start-up, 4 nodes x 4 back-ends (21 processes), \`--slurm\` | \`salloc -N4 tbon_frontend --slurm --be-per-node 4 -b tbon_example_be -w 0\` (2 srun steps) | $(med "$work/sl_small") | s | runs: $(all "$work/sl_small"); the allocation included |
| tree start-up, 1,024 back-ends ($big_n processes, 8 x 128), \`--slurm\` | \`salloc -N$NODES tbon_frontend --slurm --be-per-node 128 -b tbon_example_be -w 0\` (2 srun steps) | $(med "$work/sl_big") | s | runs: $(all "$work/sl_big"); the allocation included; FE's start-up (to 0.1 s): median $(med "$work/sl_big.fe") s |"

[ "$status" -eq 0 ] || echo "**Some runs failed in this run (see stderr); medians are of the runs that were timed.**"

# tbon_stat --jobid on the same cluster (its 256-task job takes 4 of the nodes)
echo
echo "== bench/cluster_stat.sh" >&2
quiet_short
mkdir -p "$work/stat"
CASE_TMP=$work/stat "$TBON/bench/cluster_stat.sh" || {
    echo "**bench/cluster_stat.sh failed in this run (see stderr).**"
    status=1
}
exit "$status"
