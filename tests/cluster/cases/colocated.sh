# colocated: commnodes on their parent's host with children on other hosts,
# run from head:
#   head:0 => head:1 n1:0 ;  head:1 => n2:0 n3:0 ;  n1:0 => n4:0 n1:1 ;
#   n2:0 => n2:1 n3:1 ;      n4:0 => n4:1 head:2 ;
# head:1 is launched beside the FE, n1:1 beside n1:0; their children on n2,
# n3, n4 must get an address of theirs they can reach (not 127.0.0.1).
# Exact sums for 3 waves; nothing left.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

top=$CASE_TMP/colocated.top
cat >"$top" <<'TOP'
head:0 => head:1 n1:0 ;
head:1 => n2:0 n3:0 ;
n1:0 => n4:0 n1:1 ;
n2:0 => n2:1 n3:1 ;
n4:0 => n4:1 head:2 ;
TOP
"$B/bin/tbon_topgen" --check "$top" || fail "bad topology"
topo_nodes "$top" | sed 's/^/  rank /'

on head timeout -k 10 60 "$B/bin/tbon_frontend" -t "$top" -b "$B/bin/tbon_example_be" -w 3 \
    >"$CASE_TMP/out" 2>"$CASE_TMP/err"
rc=$?
cat "$CASE_TMP/out" "$CASE_TMP/err"
no_tbon_left
[ "$rc" -ne 124 ] || fail "tbon_frontend still running after 60 s"
[ "$rc" -eq 0 ] || fail "tbon_frontend exited $rc"
expect_waves "$top" "$CASE_TMP/out" 3
