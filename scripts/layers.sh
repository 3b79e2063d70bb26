#!/usr/bin/env bash
# layers.sh - check libtbon's layering (docs/architecture.md).
# Usage: scripts/layers.sh [LIBTBON_DIR]   (default: libtbon/ of this checkout)
#
# libtbon/ is one folder per layer, lowest first:
#     util topo codec filter net proc node ft api
# A file may include (with #include "layer/file.h") only headers of its own
# layer or of a lower one; an include that names no layer, or one that climbs
# out with "..", is refused too. Within a layer, a module is the files sharing
# a stem up to the first '_' (packet.c, packet_fmt.c and packet_priv.h are the
# module "codec/packet"); two modules that include each other, directly or
# through others, are a circle and refused.
# Prints each fault as FILE:LINE: reason, and "layers: ok" or
# "layers: N faults"; exit status 0 only if there is none.
set -u
dir=${1:-$(dirname "$0")/../libtbon}
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

if [ "$faults" -eq 0 ]; then
    echo "layers: ok ($(ls */*.[ch] | wc -l) files, layers $layers)"
else
    echo "layers: $faults faults"
    exit 1
fi
