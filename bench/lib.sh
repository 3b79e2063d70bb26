# shellcheck shell=bash
# lib.sh - what bench/run.sh, compare.sh and cluster.sh share; sourced, not run.

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
