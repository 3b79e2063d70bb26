#!/usr/bin/env bash
# layers.sh - check libtbon's layering (docs/architecture.md).
# Usage: scripts/layers.sh [LIBTBON_DIR] [--objects OBJ_DIR] [--doc FILE]
#   LIBTBON_DIR  the sources (default: libtbon/ of this checkout)
#   OBJ_DIR      their objects, OBJ_DIR/LAYER/FILE.o (make: build/obj/libtbon)
#   FILE         the architecture document (docs/architecture.md)
#
# libtbon/ is one folder per layer, lowest first:
#     util topo codec filter net proc node ft api
# Includes: a file may include (with #include "layer/file.h") only headers
# of its own layer or of a lower one; an include that names no layer, or one
# that climbs out with "..", is refused too. Within a layer, a module is the
# files sharing a stem up to the first '_' (packet.c, packet_fmt.c and
# packet_priv.h are the module "codec/packet"); two modules that include
# each other, directly or through others, are a circle and refused.
# Calls (with --objects): the edges are read from the objects' symbols (nm:
# what a file leaves undefined and another defines), so a private header
# that declares everything hides nothing. No file may call into a higher
# layer; no two files may call each other, directly or through others (a
# lower file reaches a higher one only through a function pointer the
# higher one, or the composer above both, gave it).
# Docs (with --doc): every .c file of libtbon/ is named in FILE.
# Prints each fault as FILE:LINE: reason, and "layers: ok" or
# "layers: N faults"; exit status 0 only if there is none.
set -u
dir=$(dirname "$0")/../libtbon
objs=
doc=
while [ $# -gt 0 ]; do
    case $1 in
    --objects) objs=${2:?--objects needs a directory}; shift 2 ;;
    --doc) doc=${2:?--doc needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "layers: unknown option $1 (--objects DIR, --doc FILE)"; exit 2 ;;
    *) dir=$1; shift ;;
    esac
done
[ -z "$objs" ] || objs=$(cd "$objs" 2>/dev/null && pwd) || { echo "layers: no object directory ${objs}"; exit 2; }
[ -z "$doc" ] || [ -r "$doc" ] || { echo "layers: cannot read $doc"; exit 2; }
[ -z "$doc" ] || doc=$(cd "$(dirname "$doc")" && pwd)/$(basename "$doc")
layers="util topo codec filter net proc node ft api"

rank_of() {
    local i=0 l
    for l in $layers; do
        i=$((i + 1))
        [ "$l" = "$1" ] && { echo "$i"; return; }
    done
    echo 0
}
module_of() {   # codec/packet_fmt.c -> codec/packet
    local f=$1 d b
    d=${f%%/*}; b=${f#*/}; b=${b%.*}; b=${b%%_*}
    echo "$d/$b"
}

faults=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
fault() { echo "$1"; faults=$((faults + 1)); }

cd "$dir" || { echo "layers: no directory $dir"; exit 2; }
for d in */; do
    d=${d%/}
    [ "$(rank_of "$d")" -gt 0 ] || fault "$d/: a folder that is no layer (known: $layers)"
done
for f in */*.c */*.h; do
    [ -e "$f" ] || continue
    layer=${f%%/*}
    r=$(rank_of "$layer")
    [ "$r" -gt 0 ] || continue
    m=$(module_of "$f")
    while IFS=: read -r ln inc; do
        case $inc in
        */*/*|../*|*/../*)
            fault "$f:$ln: \"$inc\" is no layer/file.h path"; continue ;;
        */*) ;;
        *)  fault "$f:$ln: \"$inc\" names no layer (write \"$layer/$inc\" or the layer it is in)"
            continue ;;
        esac
        il=${inc%%/*}
        ir=$(rank_of "$il")
        if [ "$ir" -eq 0 ]; then
            fault "$f:$ln: \"$inc\": $il is no layer"
        elif [ "$ir" -gt "$r" ]; then
            fault "$f:$ln: \"$inc\": $layer may not include $il, a higher layer"
        elif [ ! -e "$inc" ]; then
            fault "$f:$ln: \"$inc\" does not exist"
        fi
        im=$(module_of "$inc")
        [ "$im" != "$m" ] && echo "$m $im" >> "$edges"
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
             sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1:\2/')
done

# Circles: repeatedly drop modules that include nobody left (a topological
# sort); what cannot be dropped sits on a circle.
sort -u "$edges" -o "$edges"
left=$(cat "$edges")
while :; do
    # an edge into a module that includes nobody, or out of one nobody
    # includes, is on no circle
    next=$(printf '%s\n' "$left" | awk 'NF == 2 { e[NR] = $0; from[$1] = 1; to[$2] = 1 }
        END { for (i in e) { split(e[i], a, " "); if ((a[2] in from) && (a[1] in to)) print e[i] } }' |
           sort)
    [ "$next" = "$left" ] && break
    left=$next
    [ -n "$left" ] || break
done
if [ -n "$left" ]; then
    fault "include circle among modules: $(printf '%s\n' "$left" | awk '{ printf "%s%s -> %s", sep, $1, $2; sep = ", " }')"
fi

# ---- calls, from the objects' symbols ----
if [ -n "$objs" ]; then
    syms=$(mktemp)
    trap 'rm -f "$edges" "$syms"' EXIT
    n=0
    for o in "$objs"/*/*.o; do
        [ -e "$o" ] || continue
        f=${o#"$objs"/}; f=${f%.o}
        n=$((n + 1))
        # nm -P: NAME TYPE ...; upper case is global, U undefined
        nm -P "$o" | awk -v f="$f" '$2 ~ /^[TDBRCVWG]$/ { print "D", f, $1 }
                                    $2 == "U" { print "U", f, $1 }' >> "$syms"
    done
    [ "$n" -gt 0 ] || fault "$objs: no objects (LAYER/FILE.o) to read the calls from"
    while IFS= read -r line; do
        [ -n "$line" ] && fault "$line"
    done < <(awk -v layers="$layers" '
        BEGIN {
            nl = split(layers, L, " "); for (i = 1; i <= nl; i++) rank[L[i]] = i
        }
        $1 == "D" && !($3 in def) { def[$3] = $2 }
        $1 == "U" { use[++nu] = $2 " " $3 }
        END {
            for (i = 1; i <= nu; i++) {
                split(use[i], u, " ")
                if (!(u[2] in def) || def[u[2]] == u[1]) continue
                e = u[1] " " def[u[2]]
                if (!(e in why)) { why[e] = u[2]; ne++ } else if (length(why[e]) < 60) why[e] = why[e] ", " u[2]
                split(u[1], a, "/"); split(def[u[2]], b, "/")
                if (rank[b[1]] > rank[a[1]] && !(e in up)) {
                    up[e] = 1
                    print u[1] ".c: calls " u[2] " of " def[u[2]] ".c, a higher layer"
                }
            }
            for (e in why) {
                split(e, a, " "); r = a[2] " " a[1]
                if ((r in why) && a[1] < a[2])
                    print a[1] ".c and " a[2] ".c call each other (" a[1] ": " why[e] "; " a[2] ": " why[r] ")"
            }
            # longer circles: an edge a -> b is on one when b reaches a
            for (e in why) { live[e] = 1; split(e, a, " "); out[a[1]] = out[a[1]] " " a[2] }
            sep = ""; msg = ""
            for (e in live) {
                split(e, a, " "); r = a[2] " " a[1]
                if (r in live) continue             # a pair: said above
                delete seen; nq = 0; q[++nq] = a[2]; seen[a[2]] = 1; hit = 0
                for (qi = 1; qi <= nq && !hit; qi++) {
                    m = split(out[q[qi]], nx, " ")
                    for (j = 1; j <= m; j++) {
                        if (nx[j] == a[1]) { hit = 1; break }
                        if (!(nx[j] in seen)) { seen[nx[j]] = 1; q[++nq] = nx[j] }
                    }
                }
                if (hit) { msg = msg sep a[1] " -> " a[2]; sep = ", " }
            }
            if (msg != "") print "call circle among files: " msg
        }' "$syms" | sort)
fi

# ---- the architecture document names every file ----
if [ -n "$doc" ]; then
    for f in */*.c; do
        [ -e "$f" ] || continue
        grep -qF "\`$f\`" "$doc" || grep -qF "\`${f#*/}\`" "$doc" ||
            fault "$f: not named in $doc (as \`$f\` or \`${f#*/}\`)"
    done
fi

if [ "$faults" -eq 0 ]; then
    echo "layers: ok ($(ls */*.[ch] | wc -l) files, layers $layers)"
else
    echo "layers: $faults faults"
    exit 1
fi
