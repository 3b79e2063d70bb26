#!/usr/bin/env bash
# test_sanitizers_list.sh - every case tests/integration/sanitizers.list
# names (the integration cases the sanitizer builds run, tests/run.sh) is a
# case of its program, so that a renamed or removed case cannot drop out of
# the sanitizer runs unseen; and the check fails, naming the line, on a
# copy of the list with a case that is not there, and on a line that is
# not "PROGRAM CASE". Programs: $TBON_BUILD_DIR/tests/integration.
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=${TBON_BUILD_DIR:-build}/tests/integration

check_list() {  # LIST: a line per fault; status 1 if any
    local bad=0 ln=0 prog case extra
    while read -r prog case extra; do
        ln=$((ln + 1))
        case $prog in ''|'#'*) continue ;; esac
        if [ -z "$case" ] || [ -n "$extra" ]; then
            echo "$1:$ln: expected PROGRAM CASE"; bad=1; continue
        fi
        if [ ! -x "$bin/$prog" ]; then
            echo "$1:$ln: no program $bin/$prog"; bad=1; continue
        fi
        "$bin/$prog" --list | awk '{ print $1 }' | grep -qxF -- "$case" ||
            { echo "$1:$ln: $prog has no case $case"; bad=1; }
    done < "$1"
    return $bad
}

expect() {  # NAME WANT_STATUS WANT_TEXT LIST
    local out rc
    out=$(check_list "$4" 2>&1); rc=$?
    if { [ "$2" = 0 ] && [ $rc -eq 0 ]; } || { [ "$2" != 0 ] && [ $rc -ne 0 ]; }; then
        if [ -z "$3" ] || grep -qF -- "$3" <<<"$out"; then
            echo "  ok   $1"; pass=$((pass + 1)); return
        fi
    fi
    echo "  FAIL $1 (exit $rc, wanted '$3'):"; sed 's/^/       /' <<<"$out"
    fail=$((fail + 1))
}

list=tests/integration/sanitizers.list
expect every_case_named_exists 0 "" "$list"
cp "$list" "$tmp/l"; echo "test_tree shape_5x5" >> "$tmp/l"
expect missing_case_refused 1 "$tmp/l:$(wc -l < "$tmp/l"): test_tree has no case shape_5x5" "$tmp/l"
cp "$list" "$tmp/l"; echo "test_tree" >> "$tmp/l"
expect malformed_line_refused 1 "$tmp/l:$(wc -l < "$tmp/l"): expected PROGRAM CASE" "$tmp/l"
cp "$list" "$tmp/l"; echo "test_nothere some_case" >> "$tmp/l"
expect missing_program_refused 1 "no program $bin/test_nothere" "$tmp/l"

echo "test_sanitizers_list: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
