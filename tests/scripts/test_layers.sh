#!/usr/bin/env bash
# test_layers.sh - scripts/layers.sh passes on this tree and fails, naming the
# file and the reason, on a copy with a wrong include.
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {   # NAME WANT_STATUS WANT_TEXT DIR
    local out rc
    out=$(scripts/layers.sh "$4" 2>&1); rc=$?
    if { [ "$2" = 0 ] && [ $rc -eq 0 ]; } || { [ "$2" != 0 ] && [ $rc -ne 0 ]; }; then
        if grep -qF -- "$3" <<<"$out"; then
            echo "  ok   $1"; pass=$((pass + 1)); return
        fi
    fi
    echo "  FAIL $1 (exit $rc, wanted '$3'):"; sed 's/^/       /' <<<"$out"
    fail=$((fail + 1))
}
fresh() { rm -rf "$tmp/l"; cp -r libtbon "$tmp/l"; }

fresh
check tree_passes 0 "layers: ok" "$tmp/l"

fresh
sed -i '0,/#include "util\/log.h"/s//#include "node\/node.h"/' "$tmp/l/util/log.c"
check higher_layer_refused 1 'util/log.c:' "$tmp/l"
check higher_layer_reason 1 'util may not include node, a higher layer' "$tmp/l"

fresh
sed -i '0,/#include "util\/log.h"/s//#include "log.h"/' "$tmp/l/util/log.c"
check bare_include_refused 1 '"log.h" names no layer' "$tmp/l"

fresh
printf '#include "util/ring.h"\n' >> "$tmp/l/util/log.h"
printf '#include "util/log.h"\n' >> "$tmp/l/util/ring.h"
check circle_refused 1 'include circle among modules: util/log -> util/ring, util/ring -> util/log' "$tmp/l"

fresh
printf '#include "util/nothere.h"\n' >> "$tmp/l/util/ring.h"
check missing_header_refused 1 '"util/nothere.h" does not exist' "$tmp/l"

fresh
mkdir "$tmp/l/misc" && touch "$tmp/l/misc/x.c"
check unknown_folder_refused 1 'misc/: a folder that is no layer' "$tmp/l"

echo "test_layers: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
