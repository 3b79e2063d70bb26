#!/usr/bin/env bash
# test_layers.sh - scripts/layers.sh passes on this tree and fails, naming the
# file and the reason, on a copy with a wrong include, and on the objects
# with planted calls (two files calling each other, a circle of three, a
# call into a higher layer), and a file the architecture document does
# not name. Objects: $TBON_BUILD_DIR/obj/libtbon.
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

# ---- calls, read from objects ----
objs=${TBON_BUILD_DIR:-build}/obj/libtbon
checkc() {  # NAME WANT_STATUS WANT_TEXT OBJ_DIR [DOC]
    local out rc
    out=$(scripts/layers.sh "$tmp/l" --objects "$4" ${5:+--doc "$5"} 2>&1); rc=$?
    if { [ "$2" = 0 ] && [ $rc -eq 0 ]; } || { [ "$2" != 0 ] && [ $rc -ne 0 ]; }; then
        if grep -qF -- "$3" <<<"$out"; then
            echo "  ok   $1"; pass=$((pass + 1)); return
        fi
    fi
    echo "  FAIL $1 (exit $rc, wanted '$3'):"; sed 's/^/       /' <<<"$out"
    fail=$((fail + 1))
}
if ! compgen -G "$objs/util/*.o" >/dev/null; then
    echo "  FAIL calls: no objects under $objs (build first: make)"
    fail=$((fail + 1))
else
    fresh
    checkc calls_of_the_tree_pass 0 "layers: ok" "$objs" docs/architecture.md

    # two planted files of util/ that call each other
    rm -rf "$tmp/o"; cp -r "$objs" "$tmp/o"
    printf 'int tb_plant_b(int);\nint tb_plant_a(int x) { return x ? tb_plant_b(x - 1) : 0; }\n' > "$tmp/a.c"
    printf 'int tb_plant_a(int);\nint tb_plant_b(int x) { return x ? tb_plant_a(x - 1) : 1; }\n' > "$tmp/b.c"
    cc -c -o "$tmp/o/util/plant_a.o" "$tmp/a.c" && cc -c -o "$tmp/o/util/plant_b.o" "$tmp/b.c"
    checkc planted_circle_refused 1 \
        "util/plant_a.c and util/plant_b.c call each other (util/plant_a: tb_plant_b; util/plant_b: tb_plant_a)" "$tmp/o"

    # a circle of three: a -> b -> c -> a
    rm -f "$tmp/o/util/plant_"*.o
    printf 'int tb_plant_c(int);\nint tb_plant_b(int x) { return tb_plant_c(x); }\n' > "$tmp/b.c"
    printf 'int tb_plant_a(int);\nint tb_plant_c(int x) { return x ? tb_plant_a(x - 1) : 2; }\n' > "$tmp/c.c"
    cc -c -o "$tmp/o/util/plant_a.o" "$tmp/a.c" && cc -c -o "$tmp/o/util/plant_b.o" "$tmp/b.c" &&
        cc -c -o "$tmp/o/util/plant_c.o" "$tmp/c.c"
    checkc planted_long_circle_refused 1 "call circle among files: " "$tmp/o"

    # util calling a function of node/
    rm -f "$tmp/o/util/plant_"*.o
    printf 'void tb_node_kick(void *);\nvoid tb_plant_up(void *n) { tb_node_kick(n); }\n' > "$tmp/a.c"
    cc -c -o "$tmp/o/util/plant_a.o" "$tmp/a.c"
    checkc call_to_a_higher_layer_refused 1 "util/plant_a.c: calls tb_node_kick of node/node.c, a higher layer" "$tmp/o"

    # a file the architecture document does not name
    grep -v 'node_life.c' docs/architecture.md > "$tmp/arch.md"
    checkc unnamed_file_refused 1 "node/node_life.c: not named in" "$objs" "$tmp/arch.md"
fi

echo "test_layers: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
