# host_unresolvable: a topology naming a host that does not resolve (n9),
# once as a child of the FE and once under a commnode on another host: the
# front-end fails within 30 s, its own error line names n9, it exits
# non-zero, and nothing is left on any host.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

on head getent hosts n9 >/dev/null && fail "n9 resolves on head: the case needs a name that does not"

try() {   # try NAME TOPOLOGY-TEXT
    printf '%s\n' "$2" >"$CASE_TMP/$1.top"
    "$B/bin/tbon_topgen" --check "$CASE_TMP/$1.top" >/dev/null || fail "bad topology $1"
    expect_start_failure "$1" "$CASE_TMP/$1.top" n9 30000
}

try fe_child 'head:0 => n1:0 n9:0 ;
n1:0 => n1:1 n2:0 ;
n9:0 => n9:1 n3:0 ;'

try deeper 'head:0 => n1:0 n2:0 ;
n1:0 => n1:1 n9:0 ;
n2:0 => n3:0 n4:0 ;'
