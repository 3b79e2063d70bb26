#!/usr/bin/env bash
# hot.sh - which library functions run on a wave's path, against those the
# source marks TB_HOT (libtbon/util/hot.h). GCC places the marked functions
# together, so that a wave touches few pages of code in each process; a
# function that joins the path unmarked sits somewhere in 400 KiB of text
# and costs a page per wave in every process of the tree (bench/RESULTS.md,
# "Code layout"). Run it after changing the data path; mark what it names.
#
# It runs bench_waves (SUM waves on a tree 1x8) twice, 300 and 1300 waves,
# the front-end, the commnode and one back-end each under valgrind's
# callgrind, and takes as the path every function of libtbon/ whose own
# count grew by at least one instruction per wave.
#
# Usage: bench/hot.sh [BUILD_DIR]      (default build; already built)
# Prints "unmarked NAME" for a function on the path without TB_HOT and
# "off-path NAME" for a TB_HOT one not seen on it: inlined
# everywhere, no longer on the path, or on it only in larger trees (where
# timers such as the heartbeats' go off between two waves; keep those);
# exit 0 if there is no unmarked one, 1 if there is, 2 on a usage error,
# 77 without valgrind.
set -u
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh
valgrind_start hot.sh bench/hot.sh "$@"

"$b/bin/tbon_topgen" --shape 1x8 >"$tmp/t.top" || exit 1
vg="valgrind -q --tool=callgrind"
mkdir "$tmp/raw" "$tmp/c" || exit 1
printf '#!/bin/sh\nexec %s --callgrind-out-file=%s/raw/cn.%%p %s "$@"\n' \
    "$vg" "$tmp" "$b/bin/tbon_commnode" >"$tmp/cn"
printf '#!/bin/sh\nmkdir %s/lock 2>/dev/null && exec %s --callgrind-out-file=%s/raw/be.%%p %s "$@"\nexec %s "$@"\n' \
    "$tmp" "$vg" "$tmp" "$b/bin/tbon_example_be" "$b/bin/tbon_example_be" >"$tmp/be"
chmod +x "$tmp/cn" "$tmp/be"

# self counts of libtbon/ functions: "NAME FILE COUNT" (LTO's clone
# suffixes taken off; a name's clones summed)
counts() {
    callgrind_annotate --auto=no --threshold=100 --show-percs=no "$1" 2>/dev/null |
        sed -n 's|^ *\([0-9,]*\)  *\(.*/\)\{0,1\}\(libtbon/[^:]*\):\([A-Za-z_0-9.]*\)\( .*\)\{0,1\}$|\4 \3 \1|p' |
        sed 's/,//g; s/\.\(lto_priv\|isra\|part\|constprop\|cold\)\.[0-9]*//g' |
        awk '{ n[$1 " " $2] += $3 } END { for (k in n) print k, n[k] }' | sort
}

for w in 300 1300; do
    rm -rf "$tmp/lock" "$tmp"/raw/*
    echo "== $w waves" >&2
    # (valgrind 3.19 warns of each pidfd_open it does not know: left out)
    if ! TBON_COMMNODE=$tmp/cn $vg --callgrind-out-file="$tmp/raw/fe.out" "$b/bench/bench_waves" \
        --waves "$w" --backend "$tmp/be" "$tmp/t.top" >"$tmp/log" 2>&1; then
        grep -v '^--[0-9]*-- ' "$tmp/log" >&2
        exit 1
    fi
    grep -v '^--[0-9]*-- ' "$tmp/log" >&2
    for p in cn be; do      # valgrind writes its file as the process ends
        for _ in $(seq 100); do
            [ -n "$(find "$tmp/raw" -name "$p.*" -size +0)" ] && break
            sleep 0.1
        done
    done
    for p in fe cn be; do
        counts "$tmp"/raw/$p.* >"$tmp/c/$p.$w"
        [ -s "$tmp/c/$p.$w" ] || { echo "hot.sh: no counts for the $p" >&2; exit 1; }
    done
done
for p in fe cn be; do
    join -a 2 -e 0 -o 0,2.2,1.3,2.3 <(awk '{ print $1 "@" $2, $2, $3 }' "$tmp/c/$p.300" | sort) \
        <(awk '{ print $1 "@" $2, $2, $3 }' "$tmp/c/$p.1300" | sort) |
        awk '($4 - $3) / 1000 >= 1 { sub(/@.*/, "", $1); print $1, $2 }'
done | cut -d' ' -f1 | sort -u >"$tmp/path"
# (by name: with link-time optimisation callgrind gives a function's lines
# under the files they were inlined from, so its file cannot be told; a
# static name defined in two files is to be checked by hand)

# the marked: "TB_HOT ... NAME(" at a line's start (or a macro's:
# sum_##NAME stands for every sum_ one), as patterns
grep -rhoE '^ *TB_HOT [^(]*[ *]([A-Za-z_0-9#]+)\(' libtbon |
    sed -E 's/.*[ *]([A-Za-z_0-9#]+)\($/\1/; s/##[A-Za-z_0-9]+/[A-Za-z_0-9]+/g' |
    sort -u >"$tmp/marked"

status=0
grep -vxEf "$tmp/marked" "$tmp/path" | sed 's/^/unmarked /'
grep -qvxEf "$tmp/marked" "$tmp/path" && status=1
while read -r pat; do
    grep -qxE "$pat" "$tmp/path" || echo "off-path $pat"
done <"$tmp/marked"
echo "hot.sh: $(wc -l <"$tmp/path") functions on the path, $(wc -l <"$tmp/marked") marked" >&2
exit $status
