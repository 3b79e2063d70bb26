# shellcheck shell=bash
# lib.sh - what bench/run.sh, compare.sh, cluster.sh, instr.sh and hot.sh
# share; sourced, not run.

# A benchmark starts on a quiet machine, not in the aftermath of the one
# before (a 1,057-process tree's teardown keeps the kernel busy for a while):
# wait until at most two tasks have been runnable (the look itself and a
# kernel thread) for one second (ten looks 100 ms apart), at most 20 s; say
# how long that took.
# quiet LOOKS MAX: the same with LOOKS looks and at most MAX tenths of a
# second (bench/cluster.sh waits shorter).
quiet() {
    local calm=0 waited=0 looks=${1:-10} max=${2:-200}
    while [ "$calm" -lt "$looks" ] && [ "$waited" -lt "$max" ]; do
        sleep 0.1
        waited=$((waited + 1))
        if [ "$(awk '/^procs_running/{print $2}' /proc/stat)" -le 2 ]; then
            calm=$((calm + 1))
        else
            calm=0
        fi
    done
    echo "   (machine quiet after $((waited / 10)).$((waited % 10)) s)" >&2
}

# The machine, one line: CPU model, cores, memory, kernel.
machine() {
    local cpu
    cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
    echo "$cpu, $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB, $(uname -sr)"
}

# What bench/instr.sh and bench/hot.sh begin with, the tools that run
# bench_waves' tree under valgrind: --help (the script's head comment, up to
# its "set -u"), the build directory (default build) made absolute in $b,
# its programs checked, valgrind found (else exit 77), a temporary
# directory in $tmp removed at exit. Called from the repository's top.
# valgrind_start PROG SCRIPT [ARG]
valgrind_start() {
    local prog=$1 script=$2 x
    case ${3:-} in
    -h|--help) sed -n '2,/^set -u/p' "$script" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "$prog: unknown option $3 (see --help)" >&2; exit 2 ;;
    esac
    b=${3:-build}
    case $b in /*) ;; *) b=$PWD/$b ;; esac
    for x in bench/bench_waves bin/tbon_commnode bin/tbon_example_be bin/tbon_topgen; do
        [ -x "$b/$x" ] || { echo "$prog: $b/$x missing (make first)" >&2; exit 1; }
    done
    if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
        echo "$prog: valgrind not found" >&2
        exit 77
    fi
    tmp=$(mktemp -d) || exit 1
    # shellcheck disable=SC2064  # $tmp is meant to be expanded now
    trap "rm -rf '$tmp'" EXIT
}
