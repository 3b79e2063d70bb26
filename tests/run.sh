#!/usr/bin/env bash
# run.sh - run every test binary of the given build directories and add up.
# Usage: tests/run.sh [-j N] BUILD_DIR [BUILD_DIR ...] [--short BUILD_DIR ...]
# The builds before --short run the full tier (every case); those after it
# the short tier (TBON_TEST_TIER=short: cases marked TEST_LONG/ITEST_LONG
# are left out, tests/harness.h; of the integration programs, only the
# cases tests/integration/sanitizers.list names run). `make check` runs the
# plain build full and the two sanitizer builds short, so every case runs
# in it once at least.
# -j N (or TBON_TEST_JOBS): each build runs up to N test programs at once
# (default 1), the integration programs first; each program's output is
# printed whole when it ends. Their cases wait on timers, pauses and peers
# much of the time, and each case cleans up only its own descendants
# (tests/integration/itest.h), so two programs do not see each other. The
# sanitizer builds too: one program at a time kept two cores 65% busy
# (AddressSanitizer's short tier: 239 s), two at a time 90% (183 s).
# Each binary runs under `timeout` (TBON_SUITE_TIMEOUT seconds, default 600) and
# prints "NAME: N passed, N failed"; then come the time of each build and
# tier and the slowest cases, and the last line is the total, in the same
# form. Exit status: 0 only if nothing failed.
set -u
cd "$(dirname "$0")/.." || exit 2

suite_timeout=${TBON_SUITE_TIMEOUT:-600}
# The short tier's integration cases (the others run in the full tier only).
sanitizers_list=tests/integration/sanitizers.list
total_pass=0
total_fail=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# ThreadSanitizer (make tsan): the first report ends the process that made it
# (abort, so a harness case or a tree process dies of SIGABRT). Tree
# processes' stderr may go to a log or nowhere, so every process writes its
# reports to a file under tsan_dir; collect prints them and counts each
# program that left one as failed.
tsan_opts=${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:second_deadlock_stack=1}
tsan_dir=$(mktemp -d "${TMPDIR:-/tmp}/tbon-tsan-XXXXXX")
times=$(mktemp "${TMPDIR:-/tmp}/tbon-times-XXXXXX")
trap 'rm -rf "$tsan_dir" "$times"' EXIT
suite_start=$SECONDS

# Run one test program or script [its cases] into directory $1 (its output,
# exit status and ThreadSanitizer reports there); what collect reads.
run_into() {
    local d=$1 t=$2
    shift 2
    mkdir -p "$d/tsan"
    TSAN_OPTIONS="$tsan_opts:log_path=$d/tsan/report" \
        timeout -k 5 "$suite_timeout" "$t" "$@" >"$d/out" 2>&1
    echo $? >"$d/rc"
}

# Print what run_into left in $1 for program $2 and add its summary up.
collect() {
    local d=$1 t=$2 rc line p f reported=0
    shift 2
    echo "== $t${1:+ ($# chosen cases)}"
    rc=$(cat "$d/rc" 2>/dev/null || echo 1)
    cat "$d/out"
    # "ok   prog/case (N ms)" lines, kept for the list of the slowest
    sed -nE "s#^(ok  |FAIL) ([^ ]+) \(([0-9]+) ms\)\$#\3 ${b:-.} \2 ${tier:-full}#p" "$d/out" >>"$times"
    if compgen -G "$d/tsan/report.*" >/dev/null; then
        cat "$d"/tsan/report.*
        echo "   $t: ThreadSanitizer reports (above)"
        reported=1
    fi
    line=$(grep -E ': [0-9]+ passed, [0-9]+ failed$' "$d/out" | tail -n 1)
    if [ -n "$line" ]; then
        p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\1/' <<<"$line")
        f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\2/' <<<"$line")
    else
        p=0; f=1
        echo "   $t ended without a summary (exit $rc)"
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "   $t exited $rc"
    fi
    [ "$reported" -eq 1 ] && [ "$f" -eq 0 ] && f=1
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    rm -rf "$d"
}

run_one() {     # one test program or script [its cases], now
    local d=$tsan_dir/one
    run_into "$d" "$@"
    collect "$d" "$@"
}

# Run the queued programs (jobs_t[i], with the cases jobs_a[i], words
# separated by spaces) up to $1 at a time; print each when it ends.
declare -a jobs_t=() jobs_a=()
run_queued() {
    local n=$1 i=0 running=0 pid
    declare -A slot=()
    while [ "$i" -lt "${#jobs_t[@]}" ] || [ "$running" -gt 0 ]; do
        if [ "$i" -lt "${#jobs_t[@]}" ] && [ "$running" -lt "$n" ]; then
            # shellcheck disable=SC2086  # the cases: words without spaces
            run_into "$tsan_dir/job$i" "${jobs_t[i]}" ${jobs_a[i]} &
            slot[$!]=$i
            running=$((running + 1))
            i=$((i + 1))
            continue
        fi
        wait -n -p pid
        local k=${slot[$pid]}
        unset "slot[$pid]"
        running=$((running - 1))
        # shellcheck disable=SC2086
        collect "$tsan_dir/job$k" "${jobs_t[k]}" ${jobs_a[k]}
    done
    jobs_t=() jobs_a=()
}

# Tests of the source tree itself (tests/scripts/test_*.sh: layering, ...),
# once, whatever the build.
# They read the objects of the first build named (scripts/layers.sh --objects).
jobs=${TBON_TEST_JOBS:-1}
if [ "${1:-}" = -j ]; then
    jobs=${2:-}
    shift 2
fi
case $jobs in
    [1-9] | [1-9][0-9]) ;;
    *) echo "run.sh: -j needs a number of programs at once (1-99), not \"$jobs\""; exit 2 ;;
esac
first_build=
for b in "$@"; do
    [ "$b" != --short ] && { first_build=$b; break; }
done
# (TBON_RUN_SELFTEST=1 leaves them out, and the check for processes left at
# the end: tests/scripts/test_run.sh runs this script on a build of its own
# making, while other tests may run.)
if [ "${TBON_RUN_SELFTEST:-0}" != 1 ]; then
    for t in tests/scripts/test_*.sh; do
        [ -x "$t" ] && TBON_BUILD_DIR=${first_build:-build} run_one "$t"
    done
fi

tier=full
summary=()
for b in "$@"; do
    if [ "$b" = --short ]; then
        tier=short
        continue
    fi
    [ -d "$b" ] || { echo "run.sh: $b: no such build directory"; total_fail=$((total_fail + 1)); continue; }
    export TBON_BUILD_DIR=$b      # tests find programs under $TBON_BUILD_DIR/bin
    export TBON_TEST_TIER=$tier
    build_start=$SECONDS
    plain_only=0
    n=$jobs
    # the integration programs first: the longest, and those that wait most
    for t in "$b"/tests/integration/test_* "$b"/tests/inproc/test_* "$b"/tests/unit/test_*; do
        [ -x "$t" ] || continue
        case "$t" in *.d|*.o) continue ;; esac
        chosen=()
        if [ "$tier" = short ] && [ "${t#"$b"/tests/integration/}" != "$t" ]; then
            # the short tier's integration cases: those the list names
            mapfile -t chosen < <(awk -v p="${t##*/}" '$1 == p { print $2 }' "$sanitizers_list")
            k=$("$t" --list | wc -l)
            plain_only=$((plain_only + k - ${#chosen[@]}))
            [ ${#chosen[@]} -gt 0 ] || continue
        fi
        jobs_t+=("$t")
        jobs_a+=("${chosen[*]}")
    done
    run_queued "$n"
    [ "$plain_only" -gt 0 ] &&
        echo "$b: $plain_only integration cases left to the full tier ($sanitizers_list)"
    summary+=("$(printf '  %-14s %-5s tier %5d s' "$b" "$tier" $((SECONDS - build_start)))")
done
unset TBON_TEST_TIER

echo "== time"
printf '%s\n' "${summary[@]}"
echo "  the slowest cases (ms, build, case, tier; over about 4 s under a sanitizer,"
echo "  mark one TEST_LONG/ITEST_LONG unless it is there for memory or thread safety):"
sort -rn "$times" | head -n 12 | sed 's/^/    /'
echo "  all: $((SECONDS - suite_start)) s"

# Nothing of ours may outlive the suite.
# (Process names, not command lines: a checkout path may contain "tbon_".)
# Only this PID namespace's: those of another (a container, or the emulated
# cluster of `make check-cluster`, which CI runs beside this) are not ours.
ours() {        # PID NAME lines on stdin: those in our PID namespace
    local me pid name
    me=$(readlink /proc/self/ns/pid)
    while read -r pid name; do
        [ "$(readlink "/proc/$pid/ns/pid" 2>/dev/null)" = "$me" ] && echo "$pid $name"
    done
    return 0
}
left=
[ "${TBON_RUN_SELFTEST:-0}" = 1 ] || left=$(pgrep -l '^tbon_' | ours)
if [ -n "$left" ]; then
    echo "tbon processes left running after the tests:"
    echo "$left"
    total_fail=$((total_fail + 1))
fi

echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
