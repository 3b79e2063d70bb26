#!/bin/sh
# check-headers.sh - are the headers of the Debian -dev packages tbon builds
# with installed? Each missing one is named with its package, and how to get
# it. The Makefile runs this once per build directory, before the first
# compile (so `make check` has run scripts/deps.sh by then).
# Usage: scripts/check-headers.sh CC [CPPFLAGS...]   exit 0: all there
set -u
cc=${1:-cc}
[ $# -gt 0 ] && shift
# header:package (tbon_stat's stack walker, the handshake's crypto, the JSON
# writers, the XML topology parser, frame compression)
pairs="elfutils/libdwfl.h:libdw-dev sodium.h:libsodium-dev jansson.h:libjansson-dev
libxml/parser.h:libxml2-dev zlib.h:zlib1g-dev"

# $cc may carry flags of its own ("ccache cc", "cc -m32"): its first word.
if ! command -v "${cc%% *}" >/dev/null 2>&1; then
    echo "tbon: no C compiler '${cc%% *}' (Debian package gcc): 'make check' or" \
         "scripts/deps.sh installs it" >&2
    exit 1
fi
missing=""
for pair in $pairs; do
    h=${pair%%:*}
    pkg=${pair#*:}
    # $cc unquoted on purpose: it may be several words.
    if ! printf '#include <%s>\n' "$h" | $cc "$@" -E -x c - >/dev/null 2>&1; then
        echo "tbon: header <$h> not found: the Debian package $pkg is not installed" >&2
        missing="$missing $pkg"
    fi
done
[ -z "$missing" ] && exit 0
echo "tbon: 'make check' installs what is missing (it runs scripts/deps.sh first)," \
     "as does scripts/deps.sh as root; or: apt-get install$missing" >&2
exit 1
