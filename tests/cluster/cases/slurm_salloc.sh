# slurm_salloc: tbon_frontend --slurm inside `salloc -N4` on head: the tree
# over the allocation (head the FE, one commnode per node with its
# back-ends), every depth started as ONE srun step (2 steps in all, counted
# with squeue while the tree runs), each node running exactly its commnode
# and its back-ends, exact sums; nothing left on any host, the job gone.
# timeout: 120
set -u
. "$TBON/tests/cluster/lib.sh"

pidf=$CASE_TMP/salloc.pid
cleanup() {
    bg_signal head "$pidf" TERM
    on head scancel --name=tbon-salloc-case 2>/dev/null
    rm -f "$pidf"
}
trap cleanup EXIT

# 1. exact sums: 4 nodes x 4 back-ends under 4 node commnodes (ranks 1-4):
# back-ends are ranks 5..20, wave w sums rank + w
on head timeout -k 10 60 salloc -N4 -J tbon-salloc-case "$B/bin/tbon_frontend" --slurm \
    --be-per-node 4 -b "$B/bin/tbon_example_be" -w 3 >"$CASE_TMP/out" 2>"$CASE_TMP/err"
rc=$?
cat "$CASE_TMP/out" "$CASE_TMP/err"
[ "$rc" -eq 0 ] || fail "salloc tbon_frontend --slurm exited $rc"
for w in 0 1 2; do
    want="wave $w: sum = $((200 + 16 * w)) (from 16 back-ends)"
    grep -qxF "$want" "$CASE_TMP/out" || fail "expected \"$want\""
done
no_tbon_left

# 2. a long run: the steps and where their tasks run
bg_start head "$pidf" "$CASE_TMP/out2" "$CASE_TMP/err2" \
    salloc -N4 -J tbon-salloc-case "$B/bin/tbon_frontend" --slurm --be-per-node 3 \
    -b "$B/bin/tbon_example_be" -w 100000 -- --delay 20
wait_until 60 grep -qs '^wave 1:' "$CASE_TMP/out2" || { cat "$CASE_TMP/err2"; fail "no wave 1"; }
steps=$(on head squeue -h -s -n tbon-salloc-case -o '%i %N')
echo "steps:"
echo "$steps"
# job steps J.0 (commnodes) and J.1 (back-ends), each over all four nodes
n=$(grep -cE '^[0-9]+\.[0-9]+ n\[1-4\]$' <<<"$steps")
[ "$n" -eq 2 ] || fail "expected 2 srun steps over n[1-4], found $n"
for h in n1 n2 n3 n4; do
    got=$(tbon_procs "$h" | awk '$2 == "tbon_commnode" { c++ } $2 ~ /^tbon_example_b/ { e++ }
                                 END { printf "%d %d", c, e }')
    [ "$got" = "1 3" ] || { tbon_procs "$h"; fail "$h runs $got (commnodes back-ends), expected 1 3"; }
done
[ -z "$(tbon_procs head | grep -v tbon_frontend)" ] || fail "head runs more than the FE"
wait_until 30 grep -q '^wave 3:' "$CASE_TMP/out2" || fail "no wave 3"
# end the FE itself (salloc, signalled, would cancel the job's steps under
# the running tree): the tree shuts down, the steps end, salloc returns
fe=$(tbon_procs head | awk '$2 == "tbon_frontend" { print $1; exit }')
[ -n "$fe" ] || fail "no tbon_frontend on head"
on head kill -TERM "$fe"
fe_ended() { ! kill -0 "$bg_pid" 2>/dev/null; }
wait_until 30 fe_ended || fail "salloc did not end within 30 s of the FE's SIGTERM"
wait "$bg_pid"
n=$(grep -c '^wave ' "$CASE_TMP/out2")
# back-ends 5..16: sum of ranks 126, plus 12 per wave
for ((w = 0; w < n; w++)); do
    grep -qxF "wave $w: sum = $((126 + 12 * w)) (from 12 back-ends)" "$CASE_TMP/out2" ||
        { cat "$CASE_TMP/out2"; fail "wave $w not exact"; }
done
echo "result: $n exact waves over 2 srun steps"
no_tbon_left
wait_until 10 sh -c "[ -z \"\$(cd $TBON && $C exec head squeue -h -n tbon-salloc-case)\" ]" ||
    fail "the allocation is still there"
