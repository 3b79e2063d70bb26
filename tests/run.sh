#!/usr/bin/env bash
# run.sh - run every test binary of the given build directories and add up.
# Usage: tests/run.sh BUILD_DIR [BUILD_DIR ...] [--short BUILD_DIR ...]
# The builds before --short run the full tier (every case); those after it
# the short tier (TBON_TEST_TIER=short: cases marked TEST_LONG/ITEST_LONG
# are left out, tests/harness.h; of the integration programs, only the
# cases tests/integration/sanitizers.list names run). `make check` runs the
# plain build full and the two sanitizer builds short, so every case runs
# in it once at least.
# Each binary runs under `timeout` (TBON_SUITE_TIMEOUT seconds, default 600) and
# prints "NAME: N passed, N failed"; then come the time of each build and
# tier and the slowest cases, and the last line is the total, in the same
# form. Exit status: 0 only if nothing failed.
set -u
cd "$(dirname "$0")/.."

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
# reports to a file under tsan_dir; run_one prints them and counts each
# program that left one as failed.
tsan_opts=${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:second_deadlock_stack=1}
tsan_dir=$(mktemp -d "${TMPDIR:-/tmp}/tbon-tsan-XXXXXX")
times=$(mktemp "${TMPDIR:-/tmp}/tbon-times-XXXXXX")
trap 'rm -rf "$tsan_dir" "$times"' EXIT
suite_start=$SECONDS

run_one() {     # one test program or script [its cases]: its summary line is added up
    local t=$1 out rc line p f reported=0
    shift
    echo "== $t${1:+ ($# chosen cases)}"
    out=$(TSAN_OPTIONS="$tsan_opts:log_path=$tsan_dir/report" \
          timeout -k 5 "$suite_timeout" "$t" "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    # "ok   prog/case (N ms)" lines, kept for the list of the slowest
    printf '%s\n' "$out" | sed -nE "s#^(ok  |FAIL) ([^ ]+) \(([0-9]+) ms\)\$#\3 ${b:-.} \2 ${tier:-full}#p" >>"$times"
    if compgen -G "$tsan_dir/report.*" >/dev/null; then
        cat "$tsan_dir"/report.*
        rm -f "$tsan_dir"/report.*
        echo "   $t: ThreadSanitizer reports (above)"
        reported=1
    fi
    line=$(printf '%s\n' "$out" | grep -E ': [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
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
}

# Tests of the source tree itself (tests/scripts/test_*.sh: layering, ...),
# once, whatever the build.
# They read the objects of the first build named (scripts/layers.sh --objects).
first_build=
for b in "$@"; do
    [ "$b" != --short ] && { first_build=$b; break; }
done
for t in tests/scripts/test_*.sh; do
    [ -x "$t" ] && TBON_BUILD_DIR=${first_build:-build} run_one "$t"
done

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
    for t in "$b"/tests/unit/test_* "$b"/tests/inproc/test_* "$b"/tests/integration/test_*; do
        [ -x "$t" ] || continue
        case "$t" in *.d|*.o) continue ;; esac
        if [ "$tier" = short ] && [ "${t#"$b"/tests/integration/}" != "$t" ]; then
            # the short tier's integration cases: those the list names
            mapfile -t chosen < <(awk -v p="${t##*/}" '$1 == p { print $2 }' "$sanitizers_list")
            n=$("$t" --list | wc -l)
            plain_only=$((plain_only + n - ${#chosen[@]}))
            [ ${#chosen[@]} -gt 0 ] && run_one "$t" "${chosen[@]}"
            continue
        fi
        run_one "$t"
    done
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
left=$(pgrep -l '^tbon_' || true)
if [ -n "$left" ]; then
    echo "tbon processes left running after the tests:"
    echo "$left"
    total_fail=$((total_fail + 1))
fi

echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
