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

faults=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
fault() { echo "$1"; faults=$((faults + 1)); }

cd "$dir" || { echo "layers: no directory $dir"; exit 2; }
for d in */; do
    d=${d%/}
    case " $layers " in *" $d "*) ;; *) fault "$d/: a folder that is no layer (known: $layers)" ;; esac
done
# One awk over every include line (FILE:LINE:TEXT), after the list of the
# files there are: faults on stdout ("F" first), module edges into $edges.
# (A shell loop with a subshell per include took minutes where forks are dear.)
while IFS= read -r line; do
    fault "$line"
done < <({ ls -1 */*.[ch] 2>/dev/null | sed 's/^/FILE:/'
           grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' */*.[ch] 2>/dev/null; } |
    awk -v layers="$layers" -v edges="$edges" '
    function module_of(f,   d, b) {     # codec/packet_fmt.c -> codec/packet
        d = f; sub(/\/.*/, "", d); b = f; sub(/^[^\/]*\//, "", b)
        sub(/\.[^.]*$/, "", b); sub(/_.*/, "", b)
        return d "/" b
    }
    BEGIN { nl = split(layers, L, " "); for (i = 1; i <= nl; i++) rank[L[i]] = i }
    /^FILE:/ { there[substr($0, 6)] = 1; next }
    {
        f = $0; sub(/:.*/, "", f); rest = substr($0, length(f) + 2)
        ln = rest; sub(/:.*/, "", ln)
        inc = rest; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
        layer = f; sub(/\/.*/, "", layer)
        if (!(layer in rank)) next
        if (inc ~ /^\.\.\// || inc ~ /\/\.\.\// || inc ~ /\/.*\//) {
            print f ":" ln ": \"" inc "\" is no layer/file.h path"; next
        }
        if (inc !~ /\//) {
            print f ":" ln ": \"" inc "\" names no layer (write \"" layer "/" inc "\" or the layer it is in)"
            next
        }
        il = inc; sub(/\/.*/, "", il)
        if (!(il in rank))
            print f ":" ln ": \"" inc "\": " il " is no layer"
        else if (rank[il] > rank[layer])
            print f ":" ln ": \"" inc "\": " layer " may not include " il ", a higher layer"
        else if (!(inc in there))
            print f ":" ln ": \"" inc "\" does not exist"
        m = module_of(f); im = module_of(inc)
        if (im != m) print m, im > edges
    }')

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
    # nm -P -A: FILE: NAME TYPE ...; upper case is global, U undefined.
    # One nm for every object (a process per object was most of the time).
    n=$(compgen -G "$objs/*/*.o" | wc -l)
    if [ "$n" -gt 0 ]; then
        nm -P -A "$objs"/*/*.o | awk -v pre="$objs/" '
            { f = $1; sub(/:$/, "", f); f = substr(f, length(pre) + 1); sub(/\.o$/, "", f) }
            $3 ~ /^[TDBRCVWG]$/ { print "D", f, $2 }
            $3 == "U" { print "U", f, $2 }' > "$syms"
    fi
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
    while IFS= read -r line; do
        fault "$line"
    done < <(ls -1 */*.c 2>/dev/null | awk -v doc="$doc" '
        BEGIN { while ((getline l < doc) > 0) text = text "\n" l }
        { b = $0; sub(/^[^\/]*\//, "", b)
          if (!index(text, "`" $0 "`") && !index(text, "`" b "`"))
              print $0 ": not named in " doc " (as `" $0 "` or `" b "`)" }')
fi

if [ "$faults" -eq 0 ]; then
    echo "layers: ok ($(ls */*.[ch] | wc -l) files, layers $layers)"
else
    echo "layers: $faults faults"
    exit 1
fi
