#!/usr/bin/env bash
# test_check_headers.sh - scripts/check-headers.sh (run by the Makefile before
# the first compile) passes when every -dev header is there, and with one
# missing names that header, its Debian package, and `make check` /
# scripts/deps.sh; the others are not mentioned. The headers are stand-ins
# in a temporary directory, the compiler told to look nowhere else.
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

headers="elfutils/libdwfl.h sodium.h jansson.h libxml/parser.h zlib.h"
stubs() {   # stand-ins for every header but $1
    rm -rf "$tmp/inc"
    for h in $headers; do
        [ "$h" = "$1" ] && continue
        mkdir -p "$tmp/inc/$(dirname "$h")"
        : > "$tmp/inc/$h"
    done
}
check() {   # NAME WANT_STATUS MISSING_HEADER WANT_TEXT...
    local name=$1 want=$2 miss=$3 out rc t ok=1
    shift 3
    stubs "$miss"
    out=$(scripts/check-headers.sh "cc -nostdinc" -I"$tmp/inc" 2>&1); rc=$?
    [ $rc -eq "$want" ] || ok=0
    for t in "$@"; do grep -qF -- "$t" <<<"$out" || ok=0; done
    # Only the missing header's package is named.
    for h in $headers; do
        [ "$h" = "$miss" ] && continue
        grep -qF "<$h>" <<<"$out" && ok=0
    done
    if [ $ok = 1 ]; then
        echo "  ok   $name"; pass=$((pass + 1))
    else
        echo "  FAIL $name (exit $rc, wanted $want and: $*):"; sed 's/^/       /' <<<"$out"
        fail=$((fail + 1))
    fi
}

check all_there 0 none
check libdw_missing 1 elfutils/libdwfl.h "<elfutils/libdwfl.h> not found" "package libdw-dev" \
    "'make check' installs" "scripts/deps.sh" "apt-get install libdw-dev"
check sodium_missing 1 sodium.h "package libsodium-dev" "apt-get install libsodium-dev"
check jansson_missing 1 jansson.h "package libjansson-dev" "apt-get install libjansson-dev"
check libxml2_missing 1 libxml/parser.h "package libxml2-dev"
check zlib_missing 1 zlib.h "package zlib1g-dev"

out=$(scripts/check-headers.sh /nonexistent/cc 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -qF "no C compiler '/nonexistent/cc' (Debian package gcc)" <<<"$out"; then
    echo "  ok   no_compiler"; pass=$((pass + 1))
else
    echo "  FAIL no_compiler (exit $rc): $out"; fail=$((fail + 1))
fi

echo "test_check_headers: $pass passed, $fail failed"
[ $fail -eq 0 ]
