# fe_host_elsewhere: a 4x4 made with --hosts n1,n2,n3,n4 (the FE is n1:0 in
# the topology, n1:1 a commnode beside it with children on other hosts).
# 1. Run from head: tbon_frontend must refuse, exit non-zero within 30 s,
#    with a line on the terminal containing "front-end" and naming both n1
#    and head; nothing left on any host.
# 2. Run on n1: exact sums for 3 waves (a commnode on its parent's host must
#    hand its children on other hosts an address they can reach).
# 3. Run from head with --fe-host head (head standing for the topology's
#    front-end host; n1's other nodes still run on n1): exact sums.
# 4. Run from head with --fe-host n1 (not a name of head): refused, exit
#    non-zero, the message names n1.
# timeout: 150
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/n.top
on head "$B/bin/tbon_topgen" --shape 4x4 --hosts n1,n2,n3,n4 -o "$top" || fail "tbon_topgen"
cat "$top"

run() {   # run NAME HOST [OPTIONS...]: tbon_frontend -w 3 on HOST; sets rc, took
    local name=$1 h=$2 t0
    shift 2
    t0=$(now_ms)
    on "$h" timeout -k 10 60 "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -w 3 "$@" \
        >"$CASE_TMP/$name.out" 2>"$CASE_TMP/$name.err"
    rc=$?
    took=$(($(now_ms) - t0))
    echo "== $name: tbon_frontend${*:+ $*} on $h: exit $rc after $took ms"
    cat "$CASE_TMP/$name.out" "$CASE_TMP/$name.err"
    [ "$rc" -ne 124 ] || fail "$name: tbon_frontend still running after 60 s"
}

errors=""
# 1. the wrong host
run from_head head
no_tbon_left
if [ "$rc" -eq 0 ]; then
    errors="${errors}from head: tbon_frontend exited 0 with a topology whose front-end is n1
"
elif [ "$took" -gt 30000 ]; then
    errors="${errors}from head: tbon_frontend took $took ms to refuse
"
elif ! grep 'front-end' "$CASE_TMP/from_head.err" | grep '\bn1\b' | grep -q '\bhead\b'; then
    errors="${errors}from head: exit $rc, but no line on the terminal contains \"front-end\", \"n1\" and \"head\"
"
fi

# 2. the right host
run on_n1 n1
no_tbon_left
if [ "$rc" -ne 0 ]; then
    errors="${errors}on n1: tbon_frontend exited $rc
"
else
    (expect_waves "$top" "$CASE_TMP/on_n1.out" 3) || errors="${errors}on n1: wrong waves
"
fi

# 3. head, told it stands for the topology's front-end host
run fe_host head --fe-host head
no_tbon_left
if [ "$rc" -ne 0 ]; then
    errors="${errors}--fe-host head on head: tbon_frontend exited $rc
"
else
    (expect_waves "$top" "$CASE_TMP/fe_host.out" 3) || errors="${errors}--fe-host head on head: wrong waves
"
fi

# 4. a --fe-host that is not this host
run fe_host_wrong head --fe-host n1
no_tbon_left
if [ "$rc" -eq 0 ]; then
    errors="${errors}--fe-host n1 on head: tbon_frontend exited 0
"
elif ! grep -q '^tbon_frontend: .*\bn1\b' "$CASE_TMP/fe_host_wrong.err"; then
    errors="${errors}--fe-host n1 on head: exit $rc, but no error line of tbon_frontend names n1
"
fi

[ -z "$errors" ] || { printf '%s' "$errors"; fail "$(printf '%s' "$errors" | wc -l) of 4 parts failed"; }
