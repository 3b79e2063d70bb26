#!/usr/bin/env bash
# test_run.sh - tests/run.sh itself, on a build directory of stand-in test
# programs (shell scripts that print what a test program prints): -j 2
# runs two at once (each of a pair waits for the other's mark, so run one at
# a time they would time out), and every outcome is added up as it is: a
# program's passes and failures, one that ends without a summary, one that
# exits non-zero after "0 failed", one that leaves a ThreadSanitizer report.
# A bad -j is refused.
set -u
cd "$(dirname "$0")/../.." || exit 2
pass=0; fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

prog() {    # NAME BODY: an executable stand-in under $tmp/b/tests/integration
    mkdir -p "$tmp/b/tests/integration" "$tmp/b/tests/unit"
    printf '#!/usr/bin/env bash\n%s\n' "$2" >"$tmp/b/tests/$1"
    chmod +x "$tmp/b/tests/$1"
}
# The pair: each marks its start, then waits (at most 10 s) for the other's.
for me in a b; do
    other=$([ $me = a ] && echo b || echo a)
    prog integration/test_pair_$me "touch $tmp/started_$me
for i in \$(seq 100); do [ -e $tmp/started_$other ] && break; sleep 0.1; done
if [ -e $tmp/started_$other ]; then echo 'ok   test_pair_$me/together (1 ms)'; echo 'test_pair_$me: 1 passed, 0 failed'
else echo 'FAIL test_pair_$me/together (10000 ms)'; echo 'test_pair_$me: 0 passed, 1 failed'; exit 1; fi"
done
prog unit/test_mixed "echo 'test_mixed: 3 passed, 2 failed'; exit 1"
prog unit/test_silent "exit 0"
prog unit/test_exit "echo 'test_exit: 1 passed, 0 failed'; exit 3"
# shellcheck disable=SC2016  # expanded by the stand-in
prog unit/test_tsan 'f=${TSAN_OPTIONS##*log_path=}; echo "WARNING: ThreadSanitizer: data race" >"${f%%:*}.42"
echo "test_tsan: 2 passed, 0 failed"'

expect() {  # NAME WANT_TEXT ARGS...: run.sh ARGS prints WANT_TEXT (a line, exactly)
    local name=$1 want=$2 out
    shift 2
    out=$(TBON_RUN_SELFTEST=1 timeout 60 tests/run.sh "$@" 2>&1)
    if grep -qxF -- "$want" <<<"$out"; then
        echo "  ok   $name"; pass=$((pass + 1))
    else
        echo "  FAIL $name (wanted the line '$want'):"; tail -n 40 <<<"$out" | sed 's/^/       /'
        fail=$((fail + 1))
    fi
    printf '%s\n' "$out" >"$tmp/last"
}

# passed: 2 (the pair, together) + 3 (mixed) + 1 (exit) + 2 (tsan);
# failed: 2 (mixed) + 1 (silent) + 1 (exit, its status) + 1 (tsan, its report)
expect two_at_once_and_every_outcome_added_up "8 passed, 5 failed" -j 2 "$tmp/b"
if grep -qF "test_silent ended without a summary" "$tmp/last" &&
    grep -qF "test_exit exited 3" "$tmp/last" &&
    grep -qF "test_tsan: ThreadSanitizer reports (above)" "$tmp/last" &&
    grep -qF "WARNING: ThreadSanitizer: data race" "$tmp/last"; then
    echo "  ok   each_fault_said"; pass=$((pass + 1))
else
    echo "  FAIL each_fault_said:"; sed 's/^/       /' "$tmp/last"; fail=$((fail + 1))
fi
rm -f "$tmp"/started_*
# One at a time, the first of the pair waits in vain (the second finds its mark).
expect one_at_a_time_the_pair_fails "7 passed, 6 failed" -j 1 "$tmp/b"
expect bad_jobs_refused 'run.sh: -j needs a number of programs at once (1-99), not "x"' -j x "$tmp/b"

echo "test_run: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
