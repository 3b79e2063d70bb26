# host_unresolvable: a topology naming a host that does not resolve (n9),
# once as a child of the FE and once under a commnode on another host: the
# front-end fails within 30 s, its own error line names n9, it exits
# non-zero, and nothing is left on any host.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

on head getent hosts n9 >/dev/null && fail "n9 resolves on head: the case needs a name that does not"

try() {   # try NAME TOPOLOGY-TEXT
    local top=$CASE_TMP/$1.top t0 took rc
    printf '%s\n' "$2" >"$top"
    "$B/bin/tbon_topgen" --check "$top" >/dev/null || fail "bad topology $1"
    t0=$(now_ms)
    on head timeout 60 "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -w 1 \
        >"$CASE_TMP/$1.out" 2>"$CASE_TMP/$1.err"
    rc=$?
    took=$(($(now_ms) - t0))
    echo "== $1: exit $rc after $took ms"
    cat "$CASE_TMP/$1.out" "$CASE_TMP/$1.err"
    [ "$rc" -ne 124 ] || fail "$1: tbon_frontend still running after 60 s"
    [ "$rc" -ne 0 ] || fail "$1: tbon_frontend exited 0"
    [ "$took" -le 30000 ] || fail "$1: tbon_frontend took $took ms to fail (more than 30 s)"
    grep -q '^tbon_frontend: .*\bn9\b' "$CASE_TMP/$1.err" ||
        fail "$1: no error line of tbon_frontend names the host n9"
    no_tbon_left
    echo "result: $1: the front-end named n9 and exited $rc after $took ms"
}

try fe_child 'head:0 => n1:0 n9:0 ;
n1:0 => n1:1 n2:0 ;
n9:0 => n9:1 n3:0 ;'

try deeper 'head:0 => n1:0 n2:0 ;
n1:0 => n1:1 n9:0 ;
n2:0 => n3:0 n4:0 ;'
