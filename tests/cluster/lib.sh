# lib.sh - helpers for the cluster test cases (tests/cluster/cases/*.sh).
# A case sources it: . "$TBON/tests/cluster/lib.sh". It expects what
# tests/cluster/run.sh sets: TBON (the source tree), B (the build dir),
# C (cluster.sh), CL_PREFIX CL_NET CL_DIR (the cluster), CASE_TMP (scratch
# directory of this case, on the shared file system). See README.md here.
#
#   on HOST CMD...            run CMD on HOST, in $TBON (cluster.sh exec)
#   fail MSG...               print "FAIL: MSG" and exit 1
#   skip MSG...               print "skip: MSG" and exit 77
#   wait_until SECONDS CMD... poll CMD every 0.1 s; 1 on time-out
#   no_tbon_left [SECONDS]    fail if a tbon_* process is still on a host
#                             after SECONDS (default 2) of looking
#   cl_hosts                  the cluster's hosts: head n1 n2 ...
#   tbon_procs HOST           "PID NAME ARGS" of HOST's tbon_* processes
#   bg_start HOST PIDFILE OUT ERR CMD...
#                             CMD on HOST in the background, its pid (on
#                             HOST) in PIDFILE; the local job's pid in
#                             $bg_pid (call it as is, not in $(...))
#   bg_signal HOST PIDFILE SIG
#   topo_nodes FILE           "RANK HOST ROLE PARENT" per node (role fe, cn
#                             or be; parent "-" for the FE), ranks
#                             breadth-first as docs/topology.md says
#   wave_line FILE W          the exact line tbon_frontend prints for wave W
#                             of a sum over FILE's back-ends (rank + W each)
#   expect_waves FILE OUT N   fail unless OUT holds exactly waves 0..N-1
#   now_ms                    wall clock in ms (bash's EPOCHREALTIME)
#   step MSG...               print "step +S.s: MSG", the seconds since the
#                             case began, so the last lines of a case that
#                             timed out (run.sh shows them) say where it was
#   expect_start_failure NAME TOPOLOGY HOST LIMIT_MS
#                             tbon_frontend --require-all on head must fail to start the
#                             tree within LIMIT_MS, an error line naming
#                             HOST, nothing left on any host
set -u

for _v in TBON B C CL_PREFIX CL_NET CL_DIR CASE_TMP; do
    if [ -z "${!_v:-}" ]; then
        echo "lib.sh: $_v is not set (run the case through tests/cluster/run.sh)" >&2
        exit 2
    fi
done
unset _v
export TBON B C CL_PREFIX CL_NET CL_DIR CASE_TMP

on() {
    local h=$1
    shift
    (cd "$TBON" && "$C" exec "$h" "$@")
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

skip() {
    echo "skip: $*"
    exit 77
}

wait_until() {
    local secs=$1 end
    shift
    end=$(($(now_ms) + secs * 1000))
    while :; do
        "$@" && return 0
        [ "$(now_ms)" -lt "$end" ] || return 1
        sleep 0.1
    done
}

now_ms() {
    local t=${EPOCHREALTIME/[.,]/}
    echo $((t / 1000))
}

_case_t0=$(now_ms)
step() {
    local d=$(($(now_ms) - _case_t0))
    printf 'step +%d.%d s: %s\n' $((d / 1000)) $((d % 1000 / 100)) "$*"
}

# The hosts of the running cluster, from cluster.sh's state.
cl_hosts() {
    cat "$CL_DIR/state/hosts" 2>/dev/null || echo head
}

# A host's tbon_* processes (by process name: a path may contain "tbon_").
# Walks the host's own /proc (its PID namespace) in one process.
tbon_procs() {
    on "$1" bash -c '
        for d in /proc/[0-9]*; do
            read -r c <"$d/comm" 2>/dev/null || continue
            case $c in
            tbon_*) printf "%s %s %s\n" "${d#/proc/}" "$c" \
                        "$(tr "\0" " " <"$d/cmdline" 2>/dev/null | cut -c1-160)" ;;
            esac
        done'
}

_all_left() {   # every host's leftovers into $_left; 0 when there are none
    local h p
    _left=""
    for h in $(cl_hosts); do
        p=$(tbon_procs "$h")
        [ -z "$p" ] || _left="$_left$(printf '%s\n' "$p" | sed "s/^/  $h: /")
"
    done
    [ -z "$_left" ]
}

no_tbon_left() {
    if ! wait_until "${1:-2}" _all_left; then
        printf 'tbon processes left:\n%s' "$_left"
        fail "tbon processes left on the cluster after ${1:-2} s"
    fi
}

bg_start() {
    local h=$1 pidfile=$2 out=$3 err=$4
    shift 4
    rm -f "$pidfile"
    # Emptied here, before the job starts: its own redirections happen in
    # the background, and a caller waiting for a line in a file an earlier
    # job wrote could otherwise find the old line (fe_killed_grace did, once).
    : >"$out"
    : >"$err"
    on "$h" sh -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$pidfile" "$@" \
        </dev/null >"$out" 2>"$err" &
    # shellcheck disable=SC2034 # for the caller
    bg_pid=$!
}

bg_signal() {
    [ -s "$2" ] || return 1
    on "$1" kill "-$3" "$(cat "$2")" 2>/dev/null
}

topo_nodes() {
    [ -r "$1" ] || fail "topo_nodes: cannot read $1"
    awk '
    { sub(/#.*/, ""); buf = buf " " $0 }
    END {
        gsub(/[ \t\r]*:[ \t\r]*/, ":", buf)
        gsub(/=>/, " => ", buf)
        gsub(/;/, " ; ", buf)
        n = split(buf, t, /[ \t\r\n]+/)
        st = 0; root = ""
        for (i = 1; i <= n; i++) {
            x = t[i]
            if (x == "") continue
            if (st == 0) { p = x; if (root == "") root = x; st = 1 }
            else if (st == 1) { if (x != "=>") { print "bad topology near " x > "/dev/stderr"; exit 1 } st = 2 }
            else if (x == ";") st = 0
            else { nk[p]++; kid[p, nk[p]] = x }
        }
        q[0] = root; qn = 1; par[0] = "-"
        for (h = 0; h < qn; h++)
            for (j = 1; j <= nk[q[h]]; j++) { par[qn] = h; q[qn++] = kid[q[h], j] }
        for (r = 0; r < qn; r++) {
            split(q[r], hp, ":")
            print r, hp[1], (r == 0 ? "fe" : (nk[q[r]] > 0 ? "cn" : "be")), par[r]
        }
    }' "$1"
}

# The expected line, checked against tbon_topgen --check's counts so that a
# misread topology cannot make a wrong expectation.
wave_line() {
    local nodes nbe sum chk
    nodes=$(topo_nodes "$1") || fail "cannot read topology $1"
    nbe=$(awk '$3 == "be"' <<<"$nodes" | wc -l)
    sum=$(awk -v w="$2" '$3 == "be" { s += $1 + w } END { printf "%d", s }' <<<"$nodes")
    chk=$("$B/bin/tbon_topgen" --check "$1") || fail "tbon_topgen --check $1: $chk"
    grep -q "nodes: *$(wc -l <<<"$nodes") (.* $nbe back-ends)" <<<"$chk" ||
        fail "lib.sh misread $1: $(wc -l <<<"$nodes") nodes, $nbe back-ends; tbon_topgen --check says: $chk"
    echo "wave $2: sum = $sum (from $nbe back-ends)"
}

expect_waves() {
    local top=$1 out=$2 n=$3 w want got
    got=$(grep -c '^wave ' "$out")
    [ "$got" -eq "$n" ] || { cat "$out"; fail "$got wave lines in $out, expected $n"; }
    for ((w = 0; w < n; w++)); do
        want=$(wave_line "$top" "$w") || exit 1
        grep -qxF "$want" "$out" || { cat "$out"; fail "expected \"$want\" in $out"; }
    done
}


# The concat waves of tbon_example_be (-f concat -k array: {rank, wave} per
# back-end) in FILE, one "wave N: ..." line each, checked to hold exactly
# the back-ends ALIVE (ranks, blank-separated), each once and for that
# wave, and the FE's count ("from N back-ends") to be theirs. Prints one
# line per wrong wave; nothing when all are right.
concat_waves_wrong() {
    awk -v alive="$2" '
        {
            w = $2; sub(":", "", w)
            l = $0; sub(/.*\[/, "", l); sub(/\].*/, "", l)
            n = $0; sub(/.*\(from /, "", n); sub(/ back-end.*/, "", n); sub(/ of .*/, "", n)
            k = split(l, v, /, */)
            delete got; cnt = 0; msg = ""
            for (i = 1; i + 1 <= k; i += 2) {
                if (v[i + 1] != w) msg = msg " rank " v[i] " answered for wave " v[i + 1] ";"
                if (got[v[i]]++) msg = msg " rank " v[i] " twice;"
                cnt++
            }
            m = split(alive, a, " ")
            for (i = 1; i <= m; i++) if (!(a[i] in got)) msg = msg " rank " a[i] " missing;"
            for (r in got) { f = 0; for (i = 1; i <= m; i++) if (a[i] == r) f = 1; if (!f) msg = msg " rank " r " (not expected) present;" }
            if (cnt != n) msg = msg " " cnt " answers but the FE counts " n ";"
            if (cnt != m) msg = msg " " cnt " answers, " m " back-ends expected;"
            if (msg != "") print "wave " w ":" msg
        }' "$1"
}

expect_start_failure() {
    local name=$1 top=$2 host=$3 limit=$4 t0 took rc
    t0=$(now_ms)
    on head timeout -k 10 60 "$B/bin/tbon_frontend" --require-all -t "$top" \
        -b "$B/bin/tbon_example_be" -w 1 >"$CASE_TMP/$name.out" 2>"$CASE_TMP/$name.err"
    rc=$?
    took=$(($(now_ms) - t0))
    echo "== $name: exit $rc after $took ms"
    cat "$CASE_TMP/$name.out" "$CASE_TMP/$name.err"
    [ "$rc" -ne 124 ] || fail "$name: tbon_frontend still running after 60 s"
    [ "$rc" -ne 0 ] || fail "$name: tbon_frontend exited 0 with $host unreachable"
    [ "$took" -le "$limit" ] || fail "$name: tbon_frontend took $took ms to fail (more than $limit)"
    grep -q "^tbon_frontend: .*\\b$host\\b" "$CASE_TMP/$name.err" ||
        fail "$name: no error line of tbon_frontend names the host $host"
    no_tbon_left
    echo "result: $name: the front-end named $host and exited $rc after $took ms"
}
