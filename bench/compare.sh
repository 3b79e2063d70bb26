#!/usr/bin/env bash
# compare.sh - the running-tree and fault-tolerance benchmarks of a git
# revision beside those of the working tree, alternately, in one run.
#
# Usage: bench/compare.sh [OPTIONS] REV
#   -n, --rounds N      rounds (default 5); in each round every part runs once
#                       for REV and once for the working tree (A B B A A B ...)
#   --parts LIST        comma-separated, of: tree recovery throughput membership
#                       perturbation (default: all five, as `make bench` runs them),
#                       and instructions (bench/instr.sh: callgrind's counts per
#                       wave; REV must have bench/bench_waves.c)
#   --shapes "S ..."    bench_tree shapes (default: all; 4x4 4x4x4 8x8 16x16 32x32)
#   --reps N            bench_ft --recovery repetitions per run (default 5)
#   --tiny              a check of this script, not a measurement: --rounds 2
#                       --parts tree,recovery --shapes 4x4 --reps 1
#   --no-quiet          do not wait for an idle machine before each run
#   --md                print a Markdown section for bench/RESULTS.md
#   --into FILE         write that section into FILE (in place of an earlier one
#                       of the same title, else at the end); implies --md
#   --title TEXT        its title (default "REV against the working tree")
#   --work-build DIR    the working tree's build dir (default build; make brings
#                       it up to date)
#   --keep DIR          build REV in DIR and keep it (reused if it holds REV)
#   --raw FILE          every figure of every run: side, round, part, figure, unit, value
#   --aa                an A/A control in the same run: the working tree's build
#                       runs a second time in every round, as a third side
#                       ("again"; the order of the three turns from round to
#                       round), and each figure gets the ratio again/work beside
#                       work/REV and a verdict against it (docs/fault-tolerance.md)
#
# REV is checked out with `git archive` into a directory of its own (in the
# working tree's build dir) and built there with its own Makefile (`make -j2
# benches programs plugins`, the same default flags as the working tree's
# build) and its own build dir; that directory is removed at the end, also on
# failure, unless --keep. Every run
# gets TBON_COMMNODE set to its own build's tbon_commnode (a front-end takes
# $TBON_COMMNODE before its build's bin/, so one set in the caller's
# environment would otherwise serve both sides); before the rounds, a check run
# of bench_tree 4x4 per side looks in /proc at the commnodes and back-ends of
# its tree, and the comparison stops if any of them is not that side's binary.
#
# For each figure (a row "| area | metric | value | unit | notes |" of
# bench_tree or bench_ft, itself the median of that program's repetitions):
# the median over the rounds for each side, its range (lowest-highest round),
# work/REV, which direction is better, and a verdict: "within noise" when the
# two ranges overlap, else "better" or "worse" (with N >= 4 rounds a side, two
# ranges apart happen by chance with probability 2/C(2N,N) <= 3% when nothing
# changed; with fewer rounds the verdict says it is not conclusive), and in
# how many rounds work did better than REV in the same round (about half of
# them when nothing changed), and the median of the ratios work/REV of each
# round (the two runs of a round are minutes apart; the two sides' medians
# may come from rounds an hour apart, and this machine's speed drifts by
# 10-20% within an hour). For a figure in % (the cost of fault tolerance)
# the difference in points is shown instead of a ratio.
#
# With --aa, a figure is called worse (or better) "beyond A/A" only when
# work/REV is past 1.05 (0.95) both as the ratio of the medians and as the
# median of the per-round ratios, and each of the two is further from 1 than
# the same figure of the working tree against itself in the same run
# (again/work): on a machine whose speed drifts, identical code reads up to
# 1.2-1.3 in one run (bench/RESULTS.md, "the same code against itself").
#
# The default takes long (five rounds of every part for both sides: tens of
# minutes); run it on a quiet machine. Exit status 0 when every run passed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
. bench/lib.sh      # quiet, machine

orig_args=("$@")
rounds=5 parts="tree,recovery,throughput,membership,perturbation" shapes="" reps=5
md=0 into="" title="" work_b=build keep="" raw_out="" wait_quiet=1 aa=0
usage() { sed -n '/^# Usage:/,/^# REV is checked/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "compare.sh: $*" >&2; exit 2; }
need() { if [ $# -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value (see --help)"; fi; }
while [ $# -gt 0 ]; do
    case "$1" in
    -n|--rounds) need "$@"; rounds=$2; shift 2 ;;
    --parts) need "$@"; parts=$2; shift 2 ;;
    --shapes) need "$@"; shapes=$2; shift 2 ;;
    --reps) need "$@"; reps=$2; shift 2 ;;
    --tiny) rounds=2 parts=tree,recovery shapes=4x4 reps=1; shift ;;
    --no-quiet) wait_quiet=0; shift ;;
    --md) md=1; shift ;;
    --into) need "$@"; into=$2 md=1; shift 2 ;;
    --title) need "$@"; title=$2; shift 2 ;;
    --work-build) need "$@"; work_b=$2; shift 2 ;;
    --keep) need "$@"; keep=$2; shift 2 ;;
    --raw) need "$@"; raw_out=$2; shift 2 ;;
    --aa) aa=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
    esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds: not a positive number: $rounds"
[ $# -eq 1 ] || { usage >&2; exit 2; }
rev_arg=$1
if ! [[ "$reps" =~ ^[0-9]+$ ]] || [ "$reps" -lt 1 ] || [ "$reps" -gt 15 ]; then
    die "--reps: 1 to 15 (bench_ft's limit): $reps"
fi
IFS=, read -r -a part_list <<<"$parts"
[ ${#part_list[@]} -gt 0 ] || die "--parts: empty"
for p in "${part_list[@]}"; do
    case "$p" in tree|recovery|throughput|membership|perturbation|instructions) ;;
    *) die "--parts: unknown part '$p' (tree recovery throughput membership perturbation)" ;;
    esac
done
for s in $shapes; do
    case "$s" in 4x4|4x4x4|8x8|16x16|32x32) ;;
    *) die "--shapes: unknown shape '$s' (4x4 4x4x4 8x8 16x16 32x32)" ;;
    esac
done
rev=$(git rev-parse --verify --quiet "$rev_arg^{commit}") ||
    die "$rev_arg: not a commit of this repository"
rev_short=$(git rev-parse --short "$rev")
[ -n "$title" ] || title="$rev_short against the working tree"
if [ -n "$into" ] && [ ! -f "$into" ]; then
    die "--into $into: no such file"
fi

# ------------------------------------------------------------ the two builds

# The scratch directory (REV's source and build unless --keep, the rows)
# inside the working tree's build dir: both builds on the same file system.
wdir=$(mkdir -p "$work_b" && cd "$work_b" && pwd)
tmp=$(mktemp -d "$wdir/compare.XXXXXX")
cur=""          # the benchmark running now, killed if we are
cleanup() {
    if [ -n "$cur" ]; then
        kill -TERM "$cur" 2>/dev/null || true
        wait "$cur" 2>/dev/null || true
        # Its tree: the processes that carry its session in their environment
        # (bench_tree and bench_ft put BENCH_*_SESSION=<their pid> there).
        local e
        for e in /proc/[0-9]*/environ; do
            if grep -qzxE "BENCH_(TREE|FT)_SESSION=$cur" "$e" 2>/dev/null; then
                kill -KILL "${e//[!0-9]/}" 2>/dev/null || true
            fi
        done
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$keep" ]; then
    mkdir -p "$keep"
    rdir=$(cd "$keep" && pwd)
else
    rdir=$tmp/rev
fi

if [ ! -f "$rdir/src/.compare-rev" ] || [ "$(cat "$rdir/src/.compare-rev")" != "$rev" ]; then
    rm -rf "$rdir/src" "$rdir/build"
    mkdir -p "$rdir/src"
    git archive --format=tar "$rev" | tar -x -C "$rdir/src"
    echo "$rev" >"$rdir/src/.compare-rev"
fi
targets=(benches programs plugins)
echo "== building $rev_short in $rdir/build" >&2
if ! make -C "$rdir/src" -j2 B="$rdir/build" "${targets[@]}" >"$tmp/make-rev.log" 2>&1; then
    tail -n 30 "$tmp/make-rev.log" >&2
    echo "compare.sh: building $rev_short failed (make -C $rdir/src B=$rdir/build ${targets[*]})" >&2
    exit 1
fi
echo "== building the working tree in $wdir" >&2
if ! make -j2 B="$wdir" "${targets[@]}" >"$tmp/make-work.log" 2>&1; then
    tail -n 30 "$tmp/make-work.log" >&2
    echo "compare.sh: building the working tree failed (make B=$wdir ${targets[*]})" >&2
    exit 1
fi

# The two sides: index 0 is REV, 1 the working tree.
side_name=("$rev_short" "work")
side_dir=("$rdir/build" "$wdir")
# "of DATE, "SUBJECT"" of a commit, the subject cut at 70 characters.
commit_desc() {
    local subj
    subj=$(git log -1 --format=%s "$1")
    [ ${#subj} -le 70 ] || subj="${subj:0:67}..."
    echo "of $(git log -1 --format=%ad --date=short "$1"), \"$subj\""
}
side_desc=("the commit $(commit_desc "$rev")"
           "the working tree at $(git describe --always --dirty) (commit $(git rev-parse --short HEAD) $(commit_desc HEAD))")
for i in 0 1; do
    d=${side_dir[$i]}
    for x in bench/bench_tree bench/bench_ft bin/tbon_commnode bin/tbon_example_be; do
        [ -x "$d/$x" ] || { echo "compare.sh: $d/$x missing after the build" >&2; exit 1; }
    done
    # A sanitizer build would measure the sanitizer.
    if nm "$d/bench/bench_ft" 2>/dev/null | grep -qE '__(asan|tsan|ubsan)_'; then
        echo "compare.sh: $d was built with a sanitizer; use a plain build (--work-build DIR)" >&2
        exit 1
    fi
done
if cmp -s "${side_dir[0]}/bin/tbon_commnode" "${side_dir[1]}/bin/tbon_commnode"; then
    echo "compare.sh: note: the two tbon_commnode binaries are identical" >&2
fi

# Run one program of side $1 with its own commnode; stdout to $2, stderr to $3.
run_side() {
    local i=$1 out=$2 err=$3
    shift 3
    TBON_COMMNODE=${side_dir[$i]}/bin/tbon_commnode "$@" >"$out" 2>"$err" &
    cur=$!
    local rc=0
    wait "$cur" || rc=$?
    cur=""
    return $rc
}

# The check run: bench_tree 4x4 of side $1, watching /proc for the processes of
# its tree (they carry BENCH_TREE_SESSION=<its pid>); prints the distinct
# programs seen as "count path".
seen_programs() {
    local i=$1 d=${side_dir[$1]} seen=$tmp/seen.$1 pid
    : >"$seen"
    TBON_COMMNODE=$d/bin/tbon_commnode "$d/bench/bench_tree" 4x4 >/dev/null 2>"$tmp/check.$i.log" &
    pid=$!
    cur=$pid
    while kill -0 "$pid" 2>/dev/null; do
        find /proc/[0-9]*/exe -maxdepth 0 -lname '*/tbon_*' -printf '%h %l\n' 2>/dev/null |
            while read -r pdir exe; do
                if grep -qzx "BENCH_TREE_SESSION=$pid" "$pdir/environ" 2>/dev/null; then
                    echo "${pdir#/proc/} $exe"
                fi
            done >>"$seen" || true
        sleep 0.02
    done
    local rc=0
    wait "$pid" || rc=$?
    cur=""
    if [ "$rc" != 0 ]; then
        cat "$tmp/check.$i.log" >&2
        echo "compare.sh: the check run of ${side_name[$i]} (bench_tree 4x4) failed" >&2
        exit 1
    fi
    sort -u "$seen" | awk '{print $2}' | sort | uniq -c | awk '{print $1, $2}'
}

for i in 0 1; do
    d=${side_dir[$i]}
    want_cn=$(realpath "$d/bin/tbon_commnode")
    want_be=$(realpath "$d/bin/tbon_example_be")
    ok=0
    # The tree of bench_tree 4x4 lives for a fraction of a second; on a busy
    # machine a look may miss it: try again.
    for _ in $(seq 10); do
        progs=$(seen_programs "$i")
        cn=$(awk '$2 ~ /\/tbon_commnode( \(deleted\))?$/' <<<"$progs")
        be=$(awk '$2 ~ /\/tbon_example_be( \(deleted\))?$/' <<<"$progs")
        other=$(awk -v c="$want_cn" -v b="$want_be" '$2 != c && $2 != b' <<<"$progs")
        if [ -n "$other" ]; then
            echo "compare.sh: the tree of ${side_name[$i]} ran programs of another build:" >&2
            awk '{ print "    " $0 }' <<<"$progs" >&2
            exit 1
        fi
        if [ -n "$cn" ] && [ -n "$be" ]; then
            ok=1
            break
        fi
    done
    if [ "$ok" = 0 ]; then
        echo "compare.sh: the check run of ${side_name[$i]} showed no commnode or back-end in /proc (10 tries)" >&2
        exit 1
    fi
    side_seen[i]="commnodes $(awk '{print $2 " (" $1 " seen)"}' <<<"$cn"), back-ends $(awk '{print $2 " (" $1 " seen)"}' <<<"$be")"
    side_sum[i]=$(sha256sum "$want_cn" | cut -c1-12)
    echo "== ${side_name[$i]}: ${side_seen[$i]}" >&2
done

# The A/A side: the working tree's build once more.
nsides=2
if [ "$aa" = 1 ]; then
    nsides=3
    side_name[2]="again"
    side_dir[2]=${side_dir[1]}
    side_seen[2]=${side_seen[1]}
    side_sum[2]=${side_sum[1]}
fi

# ------------------------------------------------------------ the rounds

# Part $1's program and arguments, for side directory $2.
part_cmd() {
    case "$1" in
    tree) echo "$2/bench/bench_tree $shapes" ;;
    recovery) echo "$2/bench/bench_ft --recovery --reps $reps" ;;
    throughput) echo "$2/bench/bench_ft --throughput" ;;
    membership) echo "$2/bench/bench_ft --membership" ;;
    perturbation) echo "$2/bench/bench_ft --perturbation" ;;
    instructions) echo "$here/bench/instr.sh $2" ;;
    esac
}

raw=$tmp/raw.tsv       # side, round, part, key, unit, value
: >"$raw"
failed=0 runs=0
started=$(date -u '+%Y-%m-%d %H:%M UTC')
t0=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
    # A B in odd rounds, B A in even ones: a bias of going first or second
    # (the other side's teardown, caches) falls on both sides alike.
    order="0 1"
    [ $((r % 2)) -eq 0 ] && order="1 0"
    # With the A/A side, each of the three goes first, second and third in
    # turn (rounds 1, 2, 3: 0 1 2, 1 2 0, 2 0 1).
    if [ "$nsides" = 3 ]; then
        case $((r % 3)) in 1) order="0 1 2" ;; 2) order="1 2 0" ;; 0) order="2 0 1" ;; esac
    fi
    for p in "${part_list[@]}"; do
        for i in $order; do
            [ "$wait_quiet" = 0 ] || quiet
            cmd=$(part_cmd "$p" "${side_dir[$i]}")
            echo "== round $r/$rounds, ${side_name[$i]}: $p (load $(cut -d' ' -f1 /proc/loadavg)):" \
                 "TBON_COMMNODE=${side_dir[$i]}/bin/tbon_commnode $cmd" >&2
            out=$tmp/out err=$tmp/err
            runs=$((runs + 1))
            # shellcheck disable=SC2086   # cmd is words: program and options
            if ! run_side "$i" "$out" "$err" $cmd; then
                failed=$((failed + 1))
                tail -n 5 "$err" | sed 's/^/    /' >&2
                echo "   ${side_name[$i]} $p failed in round $r: its figures are missing" >&2
                continue
            fi
            # The rows: "| area | metric | value | unit | notes |". A figure is
            # area + metric; where a run prints the same pair more than once
            # (membership: one per tree size), the first field of the notes
            # (the tree) tells them apart.
            awk -F'|' -v side="$i" -v round="$r" -v part="$p" '
                function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
                /^\|/ && NF >= 6 {
                    n++
                    area[n] = trim($2); metric[n] = trim($3); val[n] = trim($4)
                    unit[n] = trim($5); note = trim($6); sub(/;.*/, "", note); first[n] = note
                    count[area[n] "|" metric[n]]++
                }
                END {
                    for (k = 1; k <= n; k++) {
                        key = area[k] ": " metric[k]
                        if (count[area[k] "|" metric[k]] > 1)
                            key = key ", " first[k]
                        v = val[k]; sub(/^\+/, "", v)
                        if (v !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/)
                            continue
                        printf "%s\t%s\t%s\t%s\t%s\t%s\n", side, round, part, key, unit[k], v
                    }
                }' "$out" >>"$raw"
        done
    done
done
elapsed=$(( $(date +%s) - t0 ))
[ -z "$raw_out" ] || awk -F'\t' -v a="${side_name[0]}" 'BEGIN { OFS = "\t" }
    { $1 = $1 == 0 ? a : $1 == 1 ? "work" : "again"; print }' "$raw" >"$raw_out"

# ------------------------------------------------------------ the summary

# One line per figure, in the order first seen:
# key, unit, better (lower/higher), REV median, min, max, n, work median, min, max, n,
# work/REV (or the difference in points for %), verdict.
summary=$tmp/summary.tsv
awk -F'\t' '
    function median(s,   a, n, i, j, t) {
        n = split(s, a, " ")
        for (i = 2; i <= n; i++)        # insertion sort: a handful of rounds
            for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
                t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
            }
        lo = a[1]; hi = a[n]; cnt = n
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        if (!($4 in unit)) { order[++nk] = $4; unit[$4] = $5 }
        vals[$4, $1] = vals[$4, $1] " " $6
        at[$4, $1, $2] = $6; has[$4, $1, $2] = 1
        if ($2 > nr) nr = $2
    }
    END {
        for (k = 1; k <= nk; k++) {
            key = order[k]; u = unit[key]
            higher = u ~ /\/s$/ && u !~ /^bytes/       # waves/s, values/s
            if ((key, 0) in vals) { m0 = median(vals[key, 0]); l0 = lo; h0 = hi; n0 = cnt }
            else { m0 = l0 = h0 = ""; n0 = 0 }
            if ((key, 1) in vals) { m1 = median(vals[key, 1]); l1 = lo; h1 = hi; n1 = cnt }
            else { m1 = l1 = h1 = ""; n1 = 0 }
            if (n0 == 0 || n1 == 0) {
                printf "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t-\tmissing\t-\t-\t-\t-\t-\n", key, u,
                       higher ? "higher" : "lower", m0, l0, h0, n0, m1, l1, h1, n1
                continue
            }
            if (u == "%")
                cmp = sprintf("%+.1f points", m1 - m0)
            else if (m0 != 0)
                cmp = sprintf("%.3f", m1 / m0)
            else
                cmp = m1 == 0 ? "equal" : "-"
            if (l1 <= h0 && l0 <= h1)
                verdict = "within noise"
            else {
                better = higher ? l1 > h0 : h1 < l0
                verdict = better ? "better" : "worse"
                if (n0 < 4 || n1 < 4) {
                    nmin = n0 < n1 ? n0 : n1
                    verdict = verdict " (" nmin (nmin == 1 ? " round" : " rounds") ": not conclusive)"
                }
            }
            # The rounds in which work did better than REV did in the same round,
            # and the median of the per-round ratios (or differences, for %):
            # the two sides of a round ran minutes apart, where the medians
            # above may come from rounds an hour apart on a machine that drifts.
            won = pairs = 0; rl = ""
            for (r = 1; r <= nr; r++)
                if (((key, 0, r) in has) && ((key, 1, r) in has)) {
                    pairs++
                    a = at[key, 0, r] + 0; b = at[key, 1, r] + 0
                    won += higher ? b > a : b < a
                    if (u == "%")
                        rl = rl " " (b - a)
                    else if (a != 0)
                        rl = rl " " (b / a)
                }
            if (rl == "")
                paired = "-"
            else if (u == "%")
                paired = sprintf("%+.1f points", median(rl))
            else
                paired = sprintf("%.3f", median(rl))
            # The A/A side (--aa): again/work, as ratio of the medians and per
            # round, and whether work/REV is past both and past 1.05.
            aa = aap = "-"; aav = "-"
            if ((key, 2) in vals) {
                m2 = median(vals[key, 2])
                rl = ""
                for (r = 1; r <= nr; r++)
                    if (((key, 1, r) in has) && ((key, 2, r) in has)) {
                        a = at[key, 1, r] + 0; b = at[key, 2, r] + 0
                        if (u == "%")
                            rl = rl " " (b - a)
                        else if (a != 0)
                            rl = rl " " (b / a)
                    }
                if (u == "%") {
                    d = m1 - m0; da = m2 - m1; bound = 0
                } else if (m0 != 0 && m1 != 0) {
                    d = m1 / m0 - 1; da = m2 / m1 - 1; bound = 0.05
                } else
                    d = "-"
                if (d != "-" && rl != "" && paired != "-") {
                    dp = median(rl) - (u == "%" ? 0 : 1)
                    d0 = (u == "%" ? m1 - m0 : m1 / m0 - 1)
                    dpab = paired + 0 - (u == "%" ? 0 : 1)
                    fmtv = u == "%" ? "%+.1f points" : "%.3f"
                    aa = sprintf(fmtv, da + (u == "%" ? 0 : 1))
                    aap = sprintf(fmtv, dp + (u == "%" ? 0 : 1))
                    ada = da < 0 ? -da : da; adp = dp < 0 ? -dp : dp
                    # signed so that > 0 is worse
                    s1 = higher ? -d0 : d0; s2 = higher ? -dpab : dpab
                    if (s1 > bound && s2 > bound && s1 > ada && s2 > adp)
                        aav = "worse beyond A/A"
                    else if (-s1 > bound && -s2 > bound && -s1 > ada && -s2 > adp)
                        aav = "better beyond A/A"
                    else
                        aav = "within A/A"
                }
            }
            printf "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", key, u,
                   higher ? "higher" : "lower", m0, l0, h0, n0, m1, l1, h1, n1, cmp, verdict,
                   won, pairs, paired, aa, aap, aav
        }
    }' "$raw" >"$summary"

cmdline="bench/compare.sh"
for a in "${orig_args[@]}"; do
    case "$a" in *[!A-Za-z0-9_./,=:+-]*|"") cmdline+=" '${a//\'/\'\\\'\'}'" ;; *) cmdline+=" $a" ;; esac
done

# A value as printed: at most 4 significant digits, no exponent.
fmt_awk='function f(v) { if (v == "") return "-"; v += 0
                          return (v >= 1000 || v <= -1000) ? sprintf("%.0f", v) : sprintf("%.4g", v) }'

table() {   # the summary as a Markdown table
    if [ "$nsides" = 3 ]; then
        echo "| figure | unit | better | $rev_short: median (range) | work: median (range) | work/$rev_short | per round: median of work/$rev_short | work better in rounds | verdict | A/A: again/work | A/A per round | against the A/A run |"
        echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    else
        echo "| figure | unit | better | $rev_short: median (range) | work: median (range) | work/$rev_short | per round: median of work/$rev_short | work better in rounds | verdict |"
        echo "|---|---|---|---|---|---|---|---|---|"
    fi
    awk -F'\t' -v aa="$aa" "$fmt_awk"'
        function mr(m, l, h) { return m == "" ? "-" : f(m) " (" f(l) "-" f(h) ")" }
        { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |", $1, $2, $3,
                 mr($4, $5, $6), mr($8, $9, $10), $12, $15, $14, $13
          if (aa == 1)
              printf " %s | %s | %s |", $16, $17, $18
          printf "\n" }' "$summary"
}

section() {
    echo "<!-- compare.sh: $title -->"
    echo "## $title"
    echo
    echo "Written by \`$cmdline\` on $started (took $((elapsed / 60)) min $((elapsed % 60)) s)."
    echo "$rev_short is ${side_desc[0]}; work is ${side_desc[1]}."
    echo "Each was built with its own Makefile and \`make\` defaults (-O2 -g) in its own build"
    echo "dir, and each ran its own tbon_commnode (\$TBON_COMMNODE set per run; a check run"
    echo "of bench_tree 4x4 found only that build's programs in its tree). In each of $rounds"
    if [ "$nsides" = 3 ]; then
        echo "rounds, every part (${part_list[*]}) ran for each of the three sides, in turn first."
    else
        echo "rounds, every part (${part_list[*]}) ran for both, $rev_short first in odd rounds and work first in even ones."
    fi
    [ "$wait_quiet" = 0 ] ||
        echo "Each program started once the machine had been idle for a second (at most 20 s)."
    echo "A figure is the median over the rounds of the benchmark's own figure (a median"
    echo "of its repetitions, as in the sections above), with the lowest and highest"
    echo "round; \"within noise\": the two ranges overlap; \"better\" or \"worse\": they do"
    echo "not (by chance with probability 2/C(2N,N) when nothing changed: 0.8% at N = 5);"
    echo "\"work better in rounds\": in how many rounds work did better than $rev_short in the"
    echo "same round (about half when nothing changed); \"per round\": the median of the"
    echo "ratios work/$rev_short of each round, whose two runs were minutes apart (the"
    echo "medians of the two sides may come from rounds an hour apart, on a machine whose"
    echo "speed drifts). For the cost of fault tolerance (in %) the ratio columns give the"
    echo "difference in points."
    if [ "$nsides" = 3 ]; then
        echo "A/A control: the working tree's build ran a second time in every round, as"
        echo "a third side (\"again\"; the three in turn first, second and third); \"A/A\":"
        echo "again/work, the ratio of the medians and the median of the per-round"
        echo "ratios; \"against the A/A run\": worse (or better) beyond A/A where work/$rev_short"
        echo "is past 1.05 (0.95) in both its ratios and further from 1 than the A/A"
        echo "ratio of the same kind, else within A/A."
    fi
    echo
    echo "- machine: $(machine)"
    echo "- compiler: $(${CC:-cc} --version | head -n1)"
    echo "- $rev_short: \`${side_dir[0]}/bench/\`; ${side_seen[0]}; commnode sha256 ${side_sum[0]}"
    echo "- work: \`${side_dir[1]}/bench/\`; ${side_seen[1]}; commnode sha256 ${side_sum[1]}"
    if [ "$failed" -gt 0 ]; then
        echo
        echo "**$failed of $runs runs failed: their figures are missing.**"
    fi
    echo
    table
    echo "<!-- /compare.sh: $title -->"
}

if [ "$md" = 1 ]; then
    section >"$tmp/section.md"
    if [ -n "$into" ]; then
        # In place of the block of the same title, else at the end.
        awk -v t="$title" -v f="$tmp/section.md" '
            function put(   l) { while ((getline l < f) > 0) print l; close(f); done = 1 }
            $0 == "<!-- compare.sh: " t " -->" { skip = 1; put(); next }
            skip { if ($0 == "<!-- /compare.sh: " t " -->") skip = 0; next }
            { print }
            END { if (!done) { print ""; put() } }' "$into" >"$tmp/into" &&
            cat "$tmp/into" >"$into"
        echo "== wrote the section \"$title\" into $into" >&2
    fi
    cat "$tmp/section.md"
else
    echo "$rev_short: ${side_desc[0]}"
    echo "   ran ${side_dir[0]}/bench/*; ${side_seen[0]}; commnode sha256 ${side_sum[0]}"
    echo "work: ${side_desc[1]}"
    echo "   ran ${side_dir[1]}/bench/*; ${side_seen[1]}; commnode sha256 ${side_sum[1]}"
    [ "$nsides" = 2 ] || echo "again: the working tree's build once more (A/A control)"
    echo "$rounds round(s) of ${part_list[*]} ($rev_short, work alternately), $((elapsed / 60)) min $((elapsed % 60)) s;" \
         "$runs runs, $failed failed"
    echo
    table | sed '2d; s/^| //; s/ |$//' | column -t -s '|' -o '|'
fi
[ "$failed" = 0 ]
