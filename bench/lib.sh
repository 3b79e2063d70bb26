# shellcheck shell=bash
# lib.sh - what bench/run.sh, compare.sh, cluster.sh, instr.sh, hot.sh,
# exact_cost.sh and perf_cost.sh share; sourced, not run.

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

# What exact_cost.sh and perf_cost.sh share: two sides of one question
# (on, off), bench_tree run for each in alternating rounds.
# tree_side SIDE BENCH_TREE SHAPES...: one run of one side, its round trip
# and pipelined rows as "side shape rtt|pipe value" lines on stdout.
tree_side() {
    local side=$1 bin=$2
    shift 2
    quiet 5 100
    "$bin" "$@" 2>/dev/null |
        awk -F'|' -v side="$side" '
            $3 ~ /wave round trip|pipelined waves/ {
                split($2, a, " "); sh = a[2]; sub(",", "", sh)
                m = $3; gsub(/^ +| +$/, "", m); v = $4; gsub(/ /, "", v)
                print side, sh, (m == "wave round trip" ? "rtt" : "pipe"), v
            }'
}
# side_medians RAW: tree_side's lines gathered in RAW, as one line per shape
# and metric: "shape rtt|pipe on onlo onhi off offlo offhi" (each side's
# median over the rounds and its range).
side_medians() {
    awk '
        function median(list,   n, v, i, j, t) {
            n = split(list, v, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
            lo = v[1]; hi = v[n]
            return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }
        { key = $2 " " $3; vals[$1 " " key] = vals[$1 " " key] " " $4; keys[key] = 1 }
        END {
            for (k in keys) {
                on = median(vals["on " k]); onlo = lo; onhi = hi
                off = median(vals["off " k]); offlo = lo; offhi = hi
                print k, on, onlo, onhi, off, offlo, offhi
            }
        }' "$1"
}
