#!/usr/bin/env bash
# test_funclen.sh - scripts/funclen.sh passes on the library, the
# programs, the benchmarks and tbon_fims (libtbon/, commnode/, frontend-api/,
# backend-api/, stat/, examples/, filters/, topologies/, bench/, tests/fims/:
# no function over 100 lines; the rest of tests/ is not held to it yet) and
# fails, naming the file, line and function, on a planted one of 101 lines;
# one of exactly 100 passes.
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {   # NAME WANT_STATUS WANT_TEXT ARGS...
    local name=$1 want=$2 text=$3 out rc
    shift 3
    out=$(scripts/funclen.sh "$@" 2>&1); rc=$?
    if { [ "$want" = 0 ] && [ $rc -eq 0 ]; } || { [ "$want" != 0 ] && [ $rc -ne 0 ]; }; then
        if grep -qF -- "$text" <<<"$out"; then
            echo "  ok   $name"; pass=$((pass + 1)); return
        fi
    fi
    echo "  FAIL $name (exit $rc, wanted '$text'):"; sed 's/^/       /' <<<"$out"
    fail=$((fail + 1))
}
plant() {   # FILE LINES: a function of that many lines in all
    { echo "static int x;"; echo "int planted(void)"; echo "{"
      for _ in $(seq $(($2 - 3))); do echo "    x++;"; done
      echo "}"; } > "$1"
}

check library_and_programs_pass 0 "no function over 100 lines" \
    libtbon commnode frontend-api backend-api stat examples filters topologies bench tests/fims
mkdir -p "$tmp/a" "$tmp/b"
plant "$tmp/a/long.c" 101
check long_function_refused 1 "long.c:2: planted is 101 lines (limit 100)" "$tmp/a"
plant "$tmp/b/edge.c" 100
check hundred_lines_pass 0 "funclen: ok (1 files" "$tmp/b"
check limit_option 1 "planted is 100 lines (limit 99)" --max 99 "$tmp/b"
echo "test_funclen: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
