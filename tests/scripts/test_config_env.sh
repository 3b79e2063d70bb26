#!/usr/bin/env bash
# test_config_env.sh - the environment is read in one place (util/config.h):
# no file of libtbon/ but util/config.c calls getenv (or secure_getenv), and
# the variables of config.c's table (and TB_SECRET_ENV) are exactly the ones
# docs/user-guide.md's "Environment variables" section names. Fails, naming
# the file or variable, on copies with a getenv planted, a variable missing
# from the document, and one the document names that nothing reads.
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The faults of the tree DIR against the document DOC, one a line.
faults() {
    local dir=$1 doc=$2 names section v
    grep -rlE '\b(secure_)?getenv[[:space:]]*\(' "$dir" --include='*.c' --include='*.h' |
        sed "s|^$dir/||" | grep -vx 'util/config.c' | sed 's/$/: calls getenv (read util\/config.h)/'
    names=$( { grep -oE 'VAR\("[A-Z_0-9]+"' "$dir/util/config.c" | sed 's/VAR("//; s/"//'
               grep -oE 'define TB_SECRET_ENV "[A-Z_]+"' "$dir/util/config.h" |
                   sed 's/.*"\(.*\)"/\1/'; } | sort -u)
    [ -n "$names" ] || echo "util/config.c: no variables found"
    # the section: from its heading to the next one
    section=$(awk '/^## Environment variables/ { on = 1; next } /^## / { on = 0 } on' "$doc")
    for v in $names; do
        grep -qF "\`$v\`" <<<"$section" || echo "$v: read (util/config.c) but not in $doc"
    done
    for v in $(grep -oE '^\| `[A-Z_0-9]+`' <<<"$section" | sed 's/^| `//; s/`$//'); do
        grep -qx "$v" <<<"$names" || echo "$v: in $doc's table but read nowhere"
    done
}

check() {   # NAME WANT_STATUS(0: no fault) WANT_TEXT DIR DOC
    local out
    out=$(faults "$4" "$5")
    if { [ "$2" = 0 ] && [ -z "$out" ]; } || { [ "$2" != 0 ] && grep -qF -- "$3" <<<"$out"; }; then
        echo "  ok   $1"; pass=$((pass + 1)); return
    fi
    echo "  FAIL $1 (wanted ${3:-no fault}):"; sed 's/^/       /' <<<"$out"
    fail=$((fail + 1))
}
fresh() { rm -rf "$tmp/l" "$tmp/doc.md"; cp -r libtbon "$tmp/l"; cp docs/user-guide.md "$tmp/doc.md"; }

check tree_passes 0 "" libtbon docs/user-guide.md

fresh
printf 'static const char *x(void) { return getenv("TBON_X"); }\n' >> "$tmp/l/net/sock.c"
check getenv_refused 1 "net/sock.c: calls getenv" "$tmp/l" "$tmp/doc.md"

fresh
sed -i '/^| `TBON_RELINK_MS`/d' "$tmp/doc.md"
check undocumented_refused 1 "TBON_RELINK_MS: read (util/config.c) but not in" "$tmp/l" "$tmp/doc.md"

fresh
sed -i '/^| `TBON_CRC32C`/a | `TBON_NOTHING` | read by nobody | - |' "$tmp/doc.md"
check unread_refused 1 "TBON_NOTHING: in $tmp/doc.md's table but read nowhere" "$tmp/l" "$tmp/doc.md"

echo "test_config_env: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
