#!/usr/bin/env bash
# funclen.sh - no function of the given C files is longer than a limit.
# Usage: scripts/funclen.sh [--max N] FILE_OR_DIR...   (default: libtbon/, N 100)
# A function is a definition starting at column 0 (its name line not ending
# in ';') and ending at the next '}' in column 0; its length counts the lines
# from the first to the closing brace. Prints each one over the limit as
# FILE:LINE: NAME is N lines (limit M), and "funclen: ok (K files)" or
# "funclen: N functions over M lines"; exit status 0 only if there is none.
set -u
max=100
args=()
while [ $# -gt 0 ]; do
    case $1 in
    --max) max=${2:?--max needs a number}; shift 2 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
    esac
done
[ ${#args[@]} -gt 0 ] || args=("$(dirname "$0")/../libtbon")
files=$(find "${args[@]}" -name '*.c' | sort)
[ -n "$files" ] || { echo "funclen: no .c files in ${args[*]}"; exit 2; }
out=$(for f in $files; do
    awk -v f="$f" -v max="$max" '
        /^[A-Za-z_].*\(/ && !/;[[:space:]]*$/ && !/^(typedef|struct [a-z_]* \{)/ {
            if (!start) { start = FNR; name = $0; sub(/\(.*/, "", name); n = split(name, w, /[ *]+/); name = w[n] }
        }
        /^}/ { if (start && FNR - start + 1 > max)
                   printf "%s:%d: %s is %d lines (limit %d)\n", f, start, name, FNR - start + 1, max
               start = 0 }' "$f"
done)
if [ -n "$out" ]; then
    printf '%s\n' "$out"
    echo "funclen: $(printf '%s\n' "$out" | wc -l) functions over $max lines"
    exit 1
fi
echo "funclen: ok ($(printf '%s\n' "$files" | wc -l) files, no function over $max lines)"
